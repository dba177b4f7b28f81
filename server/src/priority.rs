//! Per-thread CPU priority (Linux nice): background work (flushes, merges) runs below the
//! request path so that its bursts wait for idle CPU instead of setting request latency.
//!
//! Priority is per thread on Linux, and chDB changes the nice value of the threads that run
//! its queries: with `os_threads_nice_value_query` set, it raises the nice value for the query
//! and then sets it back to 0, not to what it was. A flush worker calling into chDB would thus
//! run every later flush at the request path's priority; [`keep`] puts it back.

/// The calling thread's id, as the priority calls take it.
fn own_tid() -> libc::id_t {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::id_t }
}

/// The calling thread's nice value.
pub fn own_nice() -> i32 {
    // SAFETY: a plain syscall on the calling thread's own id.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, own_tid()) }
}

/// Sets the calling thread's nice value; false when the kernel refused.
fn set_own_nice(nice: i32) -> bool {
    // SAFETY: a plain syscall on the calling thread's own id.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, own_tid(), nice) == 0 }
}

/// Lowers the calling thread's priority to `nice`; a thread already below it (the whole server
/// started with `nice`) stays where it is.
pub fn lower_thread_priority(nice: i32) {
    if own_nice() < nice && !set_own_nice(nice) {
        tracing::warn!(nice, error = %std::io::Error::last_os_error(), "cannot lower this thread's priority");
    }
}

/// Runs `f` and gives the calling thread back the nice value it had before, if `f` raised its
/// priority (a call into chDB). Only ever lowers priority back, which needs no privilege.
pub fn keep<T>(f: impl FnOnce() -> T) -> T {
    let before = own_nice();
    let out = f();
    lower_thread_priority(before);
    out
}

/// The nice value of chDB's merge threads: below the flush workers (5), as
/// `os_threads_nice_value_merge_mutate` asks for (see `engine::settings::MERGE_NICE`).
pub const MERGE_NICE: i32 = 10;

/// Names chDB gives the threads that run its merges.
const MERGE_THREADS: &[&str] = &["MergeMutate"];

/// How often new merge threads are looked for; chDB keeps its pool's threads, so each is
/// lowered once within this long of its start.
const RENICE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Lowers every thread of this process whose name starts with one of `names` to `nice`; returns
/// how many it lowered. Lowering needs no privilege.
pub fn lower_threads_named(names: &[&str], nice: i32) -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut lowered = 0;
    for task in tasks.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<libc::id_t>().ok())
        else {
            continue;
        };
        let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) else {
            continue;
        };
        if !names.iter().any(|n| comm.trim_end().starts_with(n)) {
            continue;
        }
        // SAFETY: plain syscalls on a thread id of this process (one that has ended since
        // makes them fail, which is harmless).
        let now = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
        if now < nice && unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } == 0 {
            lowered += 1;
        }
    }
    lowered
}

/// Keeps chDB's merge threads at [`MERGE_NICE`], from a thread of its own, once per process.
///
/// chDB applies `os_threads_nice_value_merge_mutate` only with CAP_SYS_NICE, and a pod runs
/// without any capability: there its merges ran at the request path's priority. A debug
/// server limited to 300m of CPU at 20,000 points/s merged about twenty parts every 10 s at
/// nice 0 (`/proc/PID/task/*/stat`, run as a user without capabilities), and the p95 of a 5 s
/// window went from 40-60 ms to 230-565 ms in the windows with a merge. Lowering a thread's
/// priority needs no privilege, and without one chDB never raises it back.
pub fn keep_merges_below_requests() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("renice-merges".into())
            .spawn(|| loop {
                lower_threads_named(MERGE_THREADS, MERGE_NICE);
                std::thread::sleep(RENICE_EVERY);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the thread that lowers merges' priority");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flush worker runs below the request path without lowering the threads that answer
    /// requests.
    #[test]
    fn lowering_priority_affects_only_the_calling_thread() {
        let before = own_nice();
        let worker = std::thread::spawn(move || {
            lower_thread_priority(before + 3);
            own_nice()
        })
        .join()
        .unwrap();
        assert_eq!(worker, (before + 3).min(19));
        assert_eq!(own_nice(), before);
    }

    /// What chDB does to a query's thread (raise priority back to 0) is undone; without a
    /// privilege to raise it, the thread simply stays where it was.
    #[test]
    fn keep_restores_a_priority_the_callee_raised() {
        let target = (own_nice() + 2).min(19);
        let (inside, after) = std::thread::spawn(move || {
            lower_thread_priority(target);
            let inside = keep(|| {
                let ok = set_own_nice(0);
                (ok, own_nice())
            });
            (inside, own_nice())
        })
        .join()
        .unwrap();
        if inside.0 {
            assert_eq!(inside.1, 0, "the callee's change took effect");
        }
        assert_eq!(after, target);
    }

    /// A thread with a merge thread's name is lowered; others are not.
    #[test]
    fn threads_are_lowered_by_name() {
        let before = own_nice();
        let target = (before + 4).min(19);
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
        let named = std::thread::Builder::new()
            .name("sluiceTestMerge".into())
            .spawn(move || {
                // The name is set by the thread itself as it starts.
                up_tx.send(()).unwrap();
                let _ = done_rx.recv();
                tx.send(own_nice()).unwrap();
            })
            .unwrap();
        up_rx.recv().unwrap();
        assert!(lower_threads_named(&["sluiceTestMerge"], target) >= 1);
        // Already there: nothing to do.
        assert_eq!(lower_threads_named(&["sluiceTestMerge"], target), 0);
        done_tx.send(()).unwrap();
        assert_eq!(rx.recv().unwrap(), target);
        named.join().unwrap();
        assert_eq!(own_nice(), before, "this thread's name does not match");
    }
}

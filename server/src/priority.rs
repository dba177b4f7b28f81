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
}

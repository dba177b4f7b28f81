//! A fixed set of threads for the write path's CPU work: inflating, parsing and encoding
//! request bodies.
//!
//! Why not tokio's blocking pool: it starts a new thread for every task that finds none idle,
//! up to 512, and under a burst of large requests it did (74 threads at 2.4 M points/s on two
//! cores). Each thread's allocator heap keeps the pages its requests' buffers came from, so the
//! resident memory of the request path was the sum of many threads' peaks: about 2.3 times
//! what was ever live at once (560 MiB resident for 240 MiB live at 1.6 M points/s). Parsing
//! is pure CPU work, so more threads than cores add no throughput; a few long-lived threads
//! reuse the same pages request after request. Requests wait in a queue instead, which the
//! admission bounds (requests in flight and their memory).

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// The pool's threads are gone, or the job panicked.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("the parse task panicked")]
    Panicked,
    #[error("the parse pool has stopped")]
    Stopped,
}

pub struct ParsePool {
    tx: Mutex<mpsc::Sender<Job>>,
    threads: usize,
}

impl ParsePool {
    /// Starts `threads` workers (at least one).
    pub fn start(threads: usize) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = threads.max(1);
        for i in 0..threads {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("parse-{i}"))
                .spawn(move || worker(&rx))?;
        }
        Ok(Self {
            tx: Mutex::new(tx),
            threads,
        })
    }

    /// As many threads as the process has CPUs (its cgroup's quota or affinity), at least two
    /// so that a slow body (a large gzip) does not hold up every other request.
    pub fn default_threads() -> usize {
        std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 16)
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `job` on one of the pool's threads and waits for its result without blocking the
    /// async runtime.
    pub async fn run<T, F>(&self, job: F) -> Result<T, PoolError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let out = std::panic::catch_unwind(AssertUnwindSafe(job));
            // The request may have gone away (client closed): nobody waits for the result.
            let _ = done.send(out.map_err(|_| PoolError::Panicked));
        });
        self.tx
            .lock()
            .map_err(|_| PoolError::Stopped)?
            .send(job)
            .map_err(|_| PoolError::Stopped)?;
        result.await.map_err(|_| PoolError::Stopped)?
    }
}

fn worker(rx: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        // The lock is held only while waiting for the next job, never while running one.
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[tokio::test]
    async fn jobs_run_on_the_pools_own_threads_only() {
        let pool = Arc::new(ParsePool::start(2).unwrap());
        let mut tasks = Vec::new();
        for _ in 0..64 {
            let pool = pool.clone();
            tasks.push(tokio::spawn(async move {
                pool.run(|| {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    std::thread::current().name().map(String::from)
                })
                .await
                .unwrap()
            }));
        }
        let mut names = HashSet::new();
        for t in tasks {
            names.insert(t.await.unwrap());
        }
        let want: HashSet<_> = [Some("parse-0".to_string()), Some("parse-1".to_string())]
            .into_iter()
            .collect();
        assert!(names.is_subset(&want), "{names:?}");
    }

    #[tokio::test]
    async fn a_panicking_job_is_an_error_and_the_thread_lives_on() {
        let pool = ParsePool::start(1).unwrap();
        let r = pool.run(|| -> u32 { panic!("bad body") }).await;
        assert!(matches!(r, Err(PoolError::Panicked)), "{r:?}");
        assert_eq!(pool.run(|| 7).await.unwrap(), 7);
    }
}

//! One open-model step: the dispatcher that walks the schedule and hands each due request to
//! an idle connection (or counts it dropped), the pool of idle connections, and the step's
//! counters and latency histogram, shared by every connection.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};

use crate::conn::Outcome;
use crate::hist::Histogram;
use crate::report::StepResult;

/// Counters and latencies of one step, updated by every connection.
pub(crate) struct StepStats {
    pub scheduled: AtomicU64,
    pub started: AtomicU64,
    pub dropped: AtomicU64,
    pub late: AtomicU64,
    pub max_lag_us: AtomicU64,
    pub ok: AtomicU64,
    pub failed: AtomicU64,
    pub inflight: AtomicU64,
    inner: Mutex<StepInner>,
    drained: Notify,
}

#[derive(Default)]
struct StepInner {
    hist: Histogram,
    errors: BTreeMap<String, u64>,
    samples: BTreeMap<String, String>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not hide the numbers gathered so far.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl StepStats {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            scheduled: AtomicU64::new(0),
            started: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            late: AtomicU64::new(0),
            max_lag_us: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            inflight: AtomicU64::new(0),
            inner: Mutex::new(StepInner::default()),
            drained: Notify::new(),
        })
    }

    /// Records the end of a request that was due at `due`.
    pub(crate) fn complete(&self, due: Instant, outcome: &Outcome) {
        {
            let mut inner = lock(&self.inner);
            if outcome.is_ok() {
                let us = Instant::now().saturating_duration_since(due).as_micros() as u64;
                inner.hist.record(us);
                self.ok.fetch_add(1, Relaxed);
            } else {
                self.failed.fetch_add(1, Relaxed);
                let (key, sample) = match outcome {
                    Outcome::Status(code, body) => (code.to_string(), body.clone()),
                    Outcome::Failed(kind, detail) => (kind.to_string(), Some(detail.clone())),
                };
                if let Some(sample) = sample {
                    inner.samples.entry(key.clone()).or_insert(sample);
                }
                *inner.errors.entry(key).or_default() += 1;
            }
        }
        if self.inflight.fetch_sub(1, Relaxed) == 1 {
            self.drained.notify_waiters();
        }
    }

    /// Waits until nothing of this step is in flight, or `deadline`; true when drained.
    pub(crate) async fn drain(&self, deadline: Instant) -> bool {
        loop {
            let notified = self.drained.notified();
            if self.inflight.load(Relaxed) == 0 {
                return true;
            }
            tokio::select! {
                _ = notified => {}
                _ = sleep_until(deadline) => return self.inflight.load(Relaxed) == 0,
            }
        }
    }

    pub(crate) fn p95_so_far(&self) -> Option<f64> {
        lock(&self.inner)
            .hist
            .percentile(0.95)
            .map(|us| us as f64 / 1000.0)
    }

    /// The step's row. `duration` is the step's length; `points` per request.
    pub(crate) fn result(
        &self,
        index: usize,
        duration: Duration,
        points: usize,
        vus: Option<usize>,
    ) -> StepResult {
        let inner = lock(&self.inner);
        let secs = duration.as_secs_f64().max(1e-9);
        let ms = |q: f64| inner.hist.percentile(q).map(|us| us as f64 / 1000.0);
        let ok = self.ok.load(Relaxed);
        let scheduled = self.scheduled.load(Relaxed);
        let achieved_rps = ok as f64 / secs;
        let (offered_rps, scheduled) = match vus {
            // A closed model offers exactly what it achieves.
            Some(_) => (
                self.started.load(Relaxed) as f64 / secs,
                self.started.load(Relaxed),
            ),
            None => (scheduled as f64 / secs, scheduled),
        };
        let dropped = self.dropped.load(Relaxed);
        let unfinished = self.inflight.load(Relaxed);
        let mut errors_by_status = inner.errors.clone();
        if unfinished > 0 {
            errors_by_status.insert("unfinished".into(), unfinished);
        }
        StepResult {
            step: index + 1,
            offered_pps: offered_rps * points as f64,
            achieved_pps: achieved_rps * points as f64,
            p50_ms: ms(0.50),
            p95_ms: ms(0.95),
            p99_ms: ms(0.99),
            max_ms: inner.hist.max().map(|us| us as f64 / 1000.0),
            dropped,
            errors: errors_by_status.values().sum(),
            offered_rps,
            achieved_rps,
            requests: scheduled,
            ok,
            dropped_points: dropped * points as u64,
            late: self.late.load(Relaxed),
            max_lag_ms: self.max_lag_us.load(Relaxed) as f64 / 1000.0,
            errors_by_status,
            error_samples: inner.samples.clone(),
            duration_s: secs,
            vus,
            pass: None,
            verdict: String::new(),
        }
    }
}

/// Idle connections. By default the most recently used is taken first: a hot connection is
/// reused and idle ones never touch their (possibly multi-megabyte) request buffer. With
/// `spread`, the one idle longest is (round robin): behind a Service or load balancer that
/// picks a backend per connection, the load then spreads over every backend the connections
/// reached instead of staying on the few a hot connection or two lead to.
pub(crate) struct IdlePool {
    queue: Mutex<VecDeque<usize>>,
    spread: bool,
    notify: Notify,
}

impl IdlePool {
    pub(crate) fn new(ids: impl IntoIterator<Item = usize>, spread: bool) -> Self {
        Self {
            queue: Mutex::new(ids.into_iter().collect()),
            spread,
            notify: Notify::new(),
        }
    }

    pub(crate) fn release(&self, id: usize) {
        let mut q = lock(&self.queue);
        if self.spread {
            q.push_back(id);
        } else {
            q.push_front(id);
        }
        drop(q);
        self.notify.notify_one();
    }

    fn pop(&self) -> Option<usize> {
        lock(&self.queue).pop_front()
    }

    /// An idle connection, waiting until `deadline` at most.
    pub(crate) async fn acquire_by(&self, deadline: Instant) -> Option<usize> {
        loop {
            if let Some(id) = self.pop() {
                return Some(id);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::select! {
                _ = self.notify.notified() => {}
                _ = sleep_until(deadline) => return self.pop(),
            }
        }
    }
}

/// A request handed to a connection.
pub(crate) struct Job {
    pub seq: u64,
    pub due: Instant,
    pub stats: Arc<StepStats>,
}

/// How many requests a step of `duration` at `rate` schedules.
pub(crate) fn requests_in(rate_rps: f64, duration: Duration) -> u64 {
    if rate_rps <= 0.0 {
        return 0;
    }
    (duration.as_secs_f64() * rate_rps - 1e-9).ceil().max(0.0) as u64
}

/// Runs one open-model step: schedules `requests_in(rate, duration)` requests, hands each to
/// an idle connection through `start`, or counts it dropped. Returns at the end of the step's
/// window (in-flight requests continue).
pub(crate) async fn dispatch(
    rate_rps: f64,
    duration: Duration,
    tolerance: Duration,
    idle: &IdlePool,
    stats: &Arc<StepStats>,
    seq: &AtomicU64,
    mut start: impl FnMut(usize, Job),
) {
    let begin = Instant::now();
    let n = requests_in(rate_rps, duration);
    for k in 0..n {
        let due = begin + Duration::from_secs_f64(k as f64 / rate_rps);
        if due > Instant::now() {
            sleep_until(due).await;
        }
        let lag = Instant::now().saturating_duration_since(due);
        stats.scheduled.fetch_add(1, Relaxed);
        stats.max_lag_us.fetch_max(lag.as_micros() as u64, Relaxed);
        if lag > tolerance {
            stats.late.fetch_add(1, Relaxed);
        }
        match idle.acquire_by(due + tolerance).await {
            Some(id) => {
                stats.started.fetch_add(1, Relaxed);
                stats.inflight.fetch_add(1, Relaxed);
                let job = Job {
                    seq: seq.fetch_add(1, Relaxed),
                    due,
                    stats: stats.clone(),
                };
                start(id, job);
            }
            None => {
                stats.dropped.fetch_add(1, Relaxed);
            }
        }
    }
    sleep_until(begin + duration).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_count_per_step() {
        assert_eq!(requests_in(4.0, Duration::from_secs(10)), 40);
        assert_eq!(requests_in(3.0, Duration::from_millis(1500)), 5);
        assert_eq!(requests_in(0.5, Duration::from_secs(3)), 2);
        assert_eq!(requests_in(0.0, Duration::from_secs(3)), 0);
    }

    /// Runs `dispatch` against `conns` fake connections whose service takes `service`.
    async fn simulate(
        conns: usize,
        service: Duration,
        rate: f64,
        duration: Duration,
        tolerance: Duration,
    ) -> (Arc<StepStats>, Vec<Duration>) {
        let idle = Arc::new(IdlePool::new(0..conns, false));
        let stats = StepStats::new();
        let seq = AtomicU64::new(0);
        let begin = Instant::now();
        let starts = Arc::new(Mutex::new(Vec::new()));
        {
            let (idle2, starts2) = (idle.clone(), starts.clone());
            dispatch(
                rate,
                duration,
                tolerance,
                &idle,
                &stats,
                &seq,
                move |id, job| {
                    lock(&starts2).push(Instant::now() - begin);
                    let idle = idle2.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(service).await;
                        job.stats.complete(job.due, &Outcome::Status(204, None));
                        idle.release(id);
                    });
                },
            )
            .await;
        }
        stats.drain(Instant::now() + Duration::from_secs(10)).await;
        let starts = lock(&starts).clone();
        (stats, starts)
    }

    #[tokio::test(start_paused = true)]
    async fn schedule_is_on_time_when_capacity_suffices() {
        let (s, starts) = simulate(
            2,
            Duration::from_millis(10),
            100.0,
            Duration::from_secs(1),
            Duration::from_millis(5),
        )
        .await;
        assert_eq!(s.scheduled.load(Relaxed), 100);
        assert_eq!(s.dropped.load(Relaxed), 0);
        assert_eq!(s.ok.load(Relaxed), 100);
        assert_eq!(s.late.load(Relaxed), 0);
        for (k, t) in starts.iter().enumerate() {
            assert_eq!(*t, Duration::from_millis(10 * k as u64), "request {k}");
        }
        let r = s.result(0, Duration::from_secs(1), 1000, None);
        assert_eq!((r.offered_pps, r.achieved_pps), (100_000.0, 100_000.0));
        // Latency is the service time, from the due time.
        assert_eq!(r.p50_ms, Some(10.0));
        assert_eq!(r.max_ms, Some(10.0));
    }

    #[tokio::test(start_paused = true)]
    async fn no_free_connection_within_tolerance_is_a_drop() {
        // One connection, 30 ms service, a request every 20 ms: every other request finds the
        // connection busy past its 5 ms tolerance and is dropped, not delayed.
        let (s, starts) = simulate(
            1,
            Duration::from_millis(30),
            50.0,
            Duration::from_secs(1),
            Duration::from_millis(5),
        )
        .await;
        assert_eq!(s.scheduled.load(Relaxed), 50);
        assert_eq!(s.dropped.load(Relaxed), 25);
        assert_eq!(s.ok.load(Relaxed), 25);
        assert!(starts
            .iter()
            .enumerate()
            .all(|(i, t)| *t == Duration::from_millis(40 * i as u64)));
        let r = s.result(0, Duration::from_secs(1), 100, None);
        assert_eq!(r.dropped, 25);
        assert_eq!(r.dropped_points, 2500);
        assert_eq!(r.offered_pps, 5000.0);
        assert_eq!(r.achieved_pps, 2500.0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_freed_within_tolerance_starts_late_and_latency_shows_it() {
        // 23 ms service, 20 ms interval, 5 ms tolerance: request 1 waits 3 ms for the
        // connection and starts late; its latency (from due time) is 26 ms, not 23.
        let (s, starts) = simulate(
            1,
            Duration::from_millis(23),
            50.0,
            Duration::from_millis(40),
            Duration::from_millis(5),
        )
        .await;
        assert_eq!(s.dropped.load(Relaxed), 0);
        assert_eq!(
            starts,
            vec![Duration::from_millis(0), Duration::from_millis(23)]
        );
        let r = s.result(0, Duration::from_millis(40), 1, None);
        assert_eq!(r.max_ms, Some(26.0));
    }

    #[test]
    fn idle_connections_are_reused_hot_or_in_turn() {
        let hot = IdlePool::new(0..3, false);
        let turn = IdlePool::new(0..3, true);
        for pool in [&hot, &turn] {
            assert_eq!(pool.pop(), Some(0));
            pool.release(0);
        }
        // The hot connection again; or the next one, the used one going last.
        assert_eq!(hot.pop(), Some(0));
        assert_eq!(
            [turn.pop(), turn.pop(), turn.pop(), turn.pop()],
            [Some(1), Some(2), Some(0), None]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn failures_are_counted_by_kind() {
        let s = StepStats::new();
        s.inflight.store(3, Relaxed);
        let due = Instant::now();
        s.complete(due, &Outcome::Status(503, Some("busy".into())));
        s.complete(due, &Outcome::Failed("timeout", "slow".into()));
        s.complete(due, &Outcome::Status(204, None));
        let r = s.result(0, Duration::from_secs(1), 10, None);
        assert_eq!(r.errors, 2);
        assert_eq!(r.errors_by_status.get("503"), Some(&1));
        assert_eq!(r.errors_by_status.get("timeout"), Some(&1));
        assert_eq!(r.error_samples.get("503").map(String::as_str), Some("busy"));
        assert_eq!(r.ok, 1);
        assert!(s.drain(Instant::now()).await);
    }
}

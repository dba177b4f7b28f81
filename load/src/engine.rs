//! The load itself.
//!
//! **Open model.** A single dispatcher walks a fixed schedule, request `k` of a step being due
//! at `start + k / rate`. At each due time it takes an idle keep-alive connection from a LIFO
//! stack and hands it the request; if none frees up within `tolerance` of the due time the
//! request is *dropped* and counted, never queued: queueing in the client would silently turn
//! the open model into a closed one and hide exactly the saturation we are looking for.
//! Latency runs from the *due* time, not the send time, so a late start (including the
//! dispatcher's own lateness, which is counted as `late`) is in the numbers rather than
//! omitted. A step's requests are attributed to the step they were scheduled in; before the
//! next step starts, the in-flight ones are awaited (bounded by the request timeout) so each
//! row of the table is complete.
//!
//! **Closed model.** N virtual users, each on its own connection, send back to back. It is
//! here for contrast: its throughput is whatever the latency allows, it cannot drop, and it
//! cannot show a knee.
//!
//! **Knee search.** An open model whose rates are chosen as it goes ([`crate::search`]):
//! doubling until a step fails, then evenly spaced steps in between.
//!
//! The step itself is [`crate::step`]; connections are [`crate::conn`].

use std::io::{IsTerminal, Write as _};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::conn::{connect, Conn, Outcome, Shared, Source};
use crate::error::{Error, Result};
use crate::http::{Target, WriteParams};
use crate::knee::{evaluate, should_stop, Criteria, StepFigures};
use crate::payload::PayloadSpec;
use crate::report::{Report, StepResult};
use crate::search::{knee_of, Next, Search};
use crate::step::{dispatch, lock, IdlePool, Job, StepStats};

/// How the load is applied.
#[derive(Clone, Debug)]
pub enum Plan {
    /// Constant arrival rate, one step per rate (requests/s), each `step` long. With `ramp`,
    /// the knee is searched and the run stops after clearly failed steps.
    Open {
        /// Requests per second of each step.
        rates_rps: Vec<f64>,
        /// Duration of each step.
        step: Duration,
        /// Search the knee and apply the stopping rule.
        ramp: bool,
    },
    /// Open-model steps whose rates the knee search picks as it goes (requests/s).
    Search {
        /// Where it starts, how far it doubles, how many steps refine the bracket.
        search: Search,
        /// Duration of each step.
        step: Duration,
        /// Pause before the refining steps, for the target to work off the backlog of the
        /// step that failed.
        settle: Duration,
    },
    /// Back-to-back virtual users, one step per count.
    Closed {
        /// Virtual users of each step.
        vus: Vec<usize>,
        /// Duration of each step.
        step: Duration,
    },
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Where to connect.
    pub target: Target,
    /// Query and headers of every request.
    pub params: WriteParams,
    /// What the bodies contain.
    pub payload: PayloadSpec,
    /// Gzip bodies: a pool of this many pre-compressed requests, cycled (see README).
    pub gzip_pool: Option<usize>,
    /// Keep-alive connections of the open model.
    pub connections: usize,
    /// Use the connections in turn rather than the most recently idle one (see
    /// [`crate::step`]'s idle pool): spreads the load behind a per-connection balancer.
    pub spread: bool,
    /// Per-request timeout (connect + send + response).
    pub timeout: Duration,
    /// How long past its due time a request may wait for a free connection.
    pub tolerance: Duration,
    /// Unrecorded load at the first rate before the first step.
    pub warmup: Duration,
    /// Print a live progress line on stderr (only when it is a terminal).
    pub progress: bool,
    /// The load shape.
    pub plan: Plan,
    /// Knee rules.
    pub criteria: Criteria,
}

/// The step the progress line shows: label, counters, start, length.
type Shown = (String, Arc<StepStats>, Instant, Duration);

/// The live progress line.
struct Progress {
    enabled: bool,
    current: Mutex<Option<Shown>>,
}

impl Progress {
    fn set(&self, label: String, stats: &Arc<StepStats>, duration: Duration) {
        *lock(&self.current) = Some((label, stats.clone(), Instant::now(), duration));
    }

    fn clear(&self) {
        *lock(&self.current) = None;
        if self.enabled {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
    }

    fn tick(&self) {
        if !self.enabled {
            return;
        }
        let guard = lock(&self.current);
        if let Some((label, s, start, dur)) = guard.as_ref() {
            let p95 = s
                .p95_so_far()
                .map_or("-".to_string(), |v| format!("{v:.1}ms"));
            eprint!(
                "\r\x1b[2K{label}  {:.1}/{:.0}s  sent {}  ok {}  dropped {}  errors {}  in flight {}  p95 {p95}",
                start.elapsed().as_secs_f64(),
                dur.as_secs_f64(),
                s.started.load(Relaxed),
                s.ok.load(Relaxed),
                s.dropped.load(Relaxed),
                s.failed.load(Relaxed),
                s.inflight.load(Relaxed),
            );
            let _ = std::io::stderr().flush();
        }
    }
}

/// Runs the plan; `on_step` sees every finished step (with its verdict) as it completes.
pub async fn run(cfg: &LoadConfig, mut on_step: impl FnMut(&StepResult)) -> Result<Report> {
    if cfg.connections == 0 {
        return Err(crate::error::invalid(
            "connections",
            "0",
            "need at least one",
        ));
    }
    let source = Source::build(cfg)?;
    let shared = Arc::new(Shared {
        source,
        authority: cfg.target.authority.clone(),
        timeout: cfg.timeout,
    });
    let progress = Arc::new(Progress {
        enabled: cfg.progress && std::io::stderr().is_terminal(),
        current: Mutex::new(None),
    });
    let ticker = {
        let progress = progress.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(500));
            loop {
                every.tick().await;
                progress.tick();
            }
        })
    };
    let steps = match &cfg.plan {
        Plan::Open {
            rates_rps,
            step,
            ramp,
        } => {
            let schedule = Schedule::Fixed {
                rates: rates_rps,
                ramp: *ramp,
            };
            run_open(cfg, &shared, &progress, schedule, *step, &mut on_step).await
        }
        Plan::Search {
            search,
            step,
            settle,
        } => {
            let schedule = Schedule::Search {
                search,
                settle: *settle,
                verdicts: Vec::new(),
            };
            run_open(cfg, &shared, &progress, schedule, *step, &mut on_step).await
        }
        Plan::Closed { vus, step } => {
            run_closed(cfg, &shared, &progress, vus, *step, &mut on_step).await
        }
    };
    ticker.abort();
    progress.clear();
    Ok(report(cfg, steps?))
}

/// The report of a run's steps: the knee (open models) and what the run was.
fn report(cfg: &LoadConfig, steps: Steps) -> Report {
    let Steps {
        results: steps,
        asked,
        stopped_early,
    } = steps;
    let figures: Vec<StepFigures> = steps.iter().map(StepResult::figures).collect();
    let open = !matches!(cfg.plan, Plan::Closed { .. });
    let eval = open.then(|| evaluate(&figures, &cfg.criteria));
    // The highest rate that passed more often than it failed (a search runs its knee again).
    let passed: Vec<bool> = steps.iter().map(|s| s.pass == Some(true)).collect();
    let knee = open
        .then(|| knee_of(&asked, &passed))
        .flatten()
        .and_then(|i| steps.get(i));
    Report {
        mode: match cfg.plan {
            Plan::Open { ramp: true, .. } => "ramp",
            Plan::Open { ramp: false, .. } => "open",
            Plan::Search { .. } => "search",
            Plan::Closed { .. } => "closed",
        }
        .into(),
        knee_pps: knee.map(|s| s.offered_pps),
        knee_p95_ms: knee.and_then(|s| s.p95_ms),
        p95_limit_ms: eval.as_ref().map(|e| e.p95_limit_ms),
        stopped_early,
        points_per_request: cfg.payload.points,
        series: cfg.payload.series,
        fields: cfg.payload.fields,
        format: match cfg.payload.format {
            crate::payload::Format::LineProtocol => "lp",
            crate::payload::Format::Msgpack => "msgpack",
        }
        .into(),
        gzip: cfg.gzip_pool.is_some(),
        connections: cfg.connections,
        target: cfg.target.authority.clone(),
        steps,
    }
}

/// Fills `pass`/`verdict` of the newest step from the rules applied to all steps so far.
fn judge(steps: &mut [StepResult], criteria: &Criteria) {
    let figures: Vec<StepFigures> = steps.iter().map(StepResult::figures).collect();
    let eval = evaluate(&figures, criteria);
    for (s, f) in steps.iter_mut().zip(eval.failures) {
        s.pass = Some(f.is_empty());
        s.verdict = if f.is_empty() {
            "ok".into()
        } else {
            f.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
    }
}

/// The steps of a run, as run.
struct Steps {
    results: Vec<StepResult>,
    /// The rate each step of an open model asked for (requests/s); empty for a closed one.
    asked: Vec<f64>,
    /// Whether a stopping rule ended the run.
    stopped_early: bool,
}

/// The rates an open-model run goes through.
enum Schedule<'a> {
    /// A fixed list; with `ramp`, cut short by the stopping rule.
    Fixed { rates: &'a [f64], ramp: bool },
    /// Chosen by the knee search from each step's verdict as it finished.
    Search {
        search: &'a Search,
        settle: Duration,
        verdicts: Vec<(f64, bool)>,
    },
}

/// The next step of a schedule.
struct NextStep {
    rate: f64,
    /// A pause without load before it.
    settle: Duration,
}

impl Schedule<'_> {
    /// The rate of the first step (the warm-up's).
    fn first(&self) -> Option<f64> {
        match self {
            Schedule::Fixed { rates, .. } => rates.first().copied(),
            Schedule::Search { search, .. } => Some(search.start),
        }
    }

    /// Steps in all, when known.
    fn len(&self) -> Option<usize> {
        match self {
            Schedule::Fixed { rates, .. } => Some(rates.len()),
            Schedule::Search { .. } => None,
        }
    }

    /// The step after `done` (judged; `asked` the rate each of them asked for), or `None`
    /// when the run is over; the flag says whether a stopping rule ended it early.
    fn next(
        &mut self,
        done: &[StepResult],
        asked: &[f64],
        criteria: &Criteria,
    ) -> (Option<NextStep>, bool) {
        match self {
            Schedule::Fixed { rates, ramp } => {
                let Some(&rate) = rates.get(done.len()) else {
                    return (None, false);
                };
                let figures: Vec<StepFigures> = done.iter().map(StepResult::figures).collect();
                if *ramp && !done.is_empty() && should_stop(&figures, criteria) {
                    return (None, true);
                }
                let settle = Duration::ZERO;
                (Some(NextStep { rate, settle }), false)
            }
            Schedule::Search {
                search,
                settle,
                verdicts,
            } => {
                // Each step's verdict as it stood when it finished: later (lighter) steps may
                // tighten the p95 limit, but the search went where the verdict then said. The
                // rate is the one asked for, so that a step run again is the same rate.
                for (s, rate) in done[verdicts.len()..].iter().zip(&asked[verdicts.len()..]) {
                    verdicts.push((*rate, s.pass == Some(true)));
                }
                match search.next(verdicts) {
                    Next::Step {
                        rate,
                        settle: pause,
                    } => {
                        let settle = if pause { *settle } else { Duration::ZERO };
                        (Some(NextStep { rate, settle }), false)
                    }
                    Next::Done => (None, false),
                }
            }
        }
    }
}

/// Opens `n` connections to the target. One that fails is left unopened: it connects on its
/// first request, whose failure then counts as a `connect` error of its step. Only when none
/// opens is the run an error: the target is wrong or down, and a run of failures would say
/// less than the address. Behind a Kubernetes Service one connection in many can land on a
/// pod that just left before every node's rules forget it ("No route to host"); that aborted
/// a whole e2e run where the other 47 connections of the step were fine.
async fn open_connections(
    shared: &Shared,
    n: usize,
    timeout: Duration,
) -> Result<Vec<Option<tokio::net::TcpStream>>> {
    let mut attempts = Vec::with_capacity(n);
    for _ in 0..n {
        attempts.push(connect(&shared.authority, timeout).await);
    }
    some_opened(attempts).map_err(|source| Error::Connect {
        addr: shared.authority.clone(),
        source,
    })
}

/// The streams of `attempts`, a failed one as `None`; the first error when all failed.
fn some_opened<T>(attempts: Vec<std::io::Result<T>>) -> std::io::Result<Vec<Option<T>>> {
    if attempts.iter().all(Result::is_err) {
        if let Some(Err(e)) = attempts.into_iter().next() {
            return Err(e);
        }
        return Ok(Vec::new());
    }
    Ok(attempts.into_iter().map(Result::ok).collect())
}

async fn run_open(
    cfg: &LoadConfig,
    shared: &Arc<Shared>,
    progress: &Progress,
    mut schedule: Schedule<'_>,
    step: Duration,
    on_step: &mut impl FnMut(&StepResult),
) -> Result<Steps> {
    let idle = Arc::new(IdlePool::new(0..cfg.connections, cfg.spread));
    let workers = Workers::start(cfg, shared, &idle).await?;
    let seq = AtomicU64::new(0);
    let hand_over = |id: usize, job: Job| workers.hand_over(id, job);
    let drain_slack = cfg.timeout + Duration::from_secs(1);
    if !cfg.warmup.is_zero() {
        if let Some(rate) = schedule.first() {
            let stats = StepStats::new();
            progress.set("warm-up".into(), &stats, cfg.warmup);
            dispatch(
                rate,
                cfg.warmup,
                cfg.tolerance,
                &idle,
                &stats,
                &seq,
                hand_over,
            )
            .await;
            stats.drain(Instant::now() + drain_slack).await;
        }
    }
    let mut results: Vec<StepResult> = Vec::new();
    let mut asked = Vec::new();
    let points = cfg.payload.points;
    let stopped_early = loop {
        let (next, stopped) = schedule.next(&results, &asked, &cfg.criteria);
        let Some(NextStep { rate, settle }) = next else {
            break stopped;
        };
        if !settle.is_zero() {
            tokio::time::sleep(settle).await;
        }
        let i = results.len();
        let of = schedule.len().map_or(String::new(), |n| format!("/{n}"));
        let stats = StepStats::new();
        progress.set(
            format!(
                "[{}{of}] offered {} pts/s",
                i + 1,
                crate::units::thousands(rate * points as f64)
            ),
            &stats,
            step,
        );
        dispatch(rate, step, cfg.tolerance, &idle, &stats, &seq, hand_over).await;
        stats.drain(Instant::now() + drain_slack).await;
        results.push(stats.result(i, step, points, None));
        asked.push(rate);
        judge(&mut results, &cfg.criteria);
        progress.clear();
        if let Some(last) = results.last() {
            on_step(last);
        }
    };
    workers.stop();
    Ok(Steps {
        results,
        asked,
        stopped_early,
    })
}

/// One task per connection of an open model, each sending the requests handed to it.
struct Workers {
    senders: Vec<mpsc::Sender<Job>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Workers {
    /// Opens the connections and starts their tasks; a task frees its connection in `idle`
    /// when its request is answered.
    async fn start(cfg: &LoadConfig, shared: &Arc<Shared>, idle: &Arc<IdlePool>) -> Result<Self> {
        let mut senders = Vec::with_capacity(cfg.connections);
        let mut tasks = Vec::with_capacity(cfg.connections);
        let streams = open_connections(shared, cfg.connections, cfg.timeout).await?;
        for (id, stream) in streams.into_iter().enumerate() {
            let (tx, mut rx) = mpsc::channel::<Job>(1);
            senders.push(tx);
            let (shared, idle) = (shared.clone(), idle.clone());
            tasks.push(tokio::spawn(async move {
                let mut conn = Conn::new(stream);
                while let Some(job) = rx.recv().await {
                    let outcome = conn.exchange(&shared, job.seq).await;
                    job.stats.complete(job.due, &outcome);
                    drop(job);
                    idle.release(id);
                }
            }));
        }
        Ok(Self { senders, tasks })
    }

    /// Gives `job` to idle connection `id`.
    fn hand_over(&self, id: usize, job: Job) {
        if let Some(Err(e)) = self.senders.get(id).map(|tx| tx.try_send(job)) {
            // Cannot happen (an idle connection's queue is empty), but never lose the count.
            let job = e.into_inner();
            job.stats.complete(
                job.due,
                &Outcome::Failed("client", "connection busy".into()),
            );
        }
    }

    fn stop(self) {
        drop(self.senders);
        for t in self.tasks {
            t.abort();
        }
    }
}

async fn run_closed(
    cfg: &LoadConfig,
    shared: &Arc<Shared>,
    progress: &Progress,
    vus: &[usize],
    step: Duration,
    on_step: &mut impl FnMut(&StepResult),
) -> Result<Steps> {
    let seq = Arc::new(AtomicU64::new(0));
    let mut results = Vec::new();
    for (i, &n) in vus.iter().enumerate() {
        let conns: Vec<Conn> = open_connections(shared, n, cfg.timeout)
            .await?
            .into_iter()
            .map(Conn::new)
            .collect();
        let stats = StepStats::new();
        progress.set(
            format!("[{}/{}] {n} virtual users", i + 1, vus.len()),
            &stats,
            step,
        );
        let begin = Instant::now();
        let end = begin + step;
        let tasks: Vec<_> = conns
            .into_iter()
            .map(|mut conn| {
                let (shared, stats, seq) = (shared.clone(), stats.clone(), seq.clone());
                tokio::spawn(async move {
                    while Instant::now() < end {
                        let due = Instant::now();
                        stats.started.fetch_add(1, Relaxed);
                        stats.inflight.fetch_add(1, Relaxed);
                        let outcome = conn.exchange(&shared, seq.fetch_add(1, Relaxed)).await;
                        stats.complete(due, &outcome);
                    }
                })
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
        // Requests finish after `end`; rates are over the time it really took.
        let elapsed = begin.elapsed().max(step);
        results.push(stats.result(i, elapsed, cfg.payload.points, Some(n)));
        progress.clear();
        if let Some(last) = results.last_mut() {
            last.verdict = "closed".into();
            on_step(last);
        }
    }
    Ok(Steps {
        results,
        asked: Vec::new(),
        stopped_early: false,
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Error, ErrorKind};

    use super::some_opened;

    #[test]
    fn a_failed_connection_is_left_for_later_unless_all_failed() {
        let unreachable = || Err(Error::new(ErrorKind::HostUnreachable, "no route to host"));
        let opened = some_opened(vec![Ok(1), unreachable(), Ok(3)]).expect("some opened");
        assert_eq!(opened, vec![Some(1), None, Some(3)]);
        let err = some_opened::<i32>(vec![unreachable(), unreachable()]).expect_err("none");
        assert_eq!(err.kind(), ErrorKind::HostUnreachable);
        assert_eq!(
            some_opened::<i32>(Vec::new()).expect("none asked"),
            Vec::new()
        );
    }
}

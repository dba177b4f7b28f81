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
//! **Connections** speak pre-encoded HTTP/1.1 (see [`crate::http`]) and reconnect after an
//! error, a timeout or `Connection: close`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write as _};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};
use tokio::time::{sleep_until, Instant};

use crate::error::{Error, Result};
use crate::hist::Histogram;
use crate::http::{chunked_end, dechunk, parse_head, Framing, Target, WriteParams};
use crate::knee::{evaluate, should_stop, Criteria, StepFigures};
use crate::payload::{PayloadSpec, Payloads};
use crate::report::{Report, StepResult};

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

/// The bytes of request `seq`.
enum Source {
    /// One head + body per template; timestamps patched per request in the connection's
    /// own copy.
    Patched {
        payloads: Payloads,
        heads: Vec<Vec<u8>>,
    },
    /// Complete pre-compressed requests, cycled.
    Pool { requests: Vec<Vec<u8>> },
}

/// A connection's private request buffer (which template it holds, and the bytes).
#[derive(Default)]
struct ConnBuf {
    template: Option<usize>,
    bytes: Vec<u8>,
}

impl Source {
    fn build(cfg: &LoadConfig) -> Result<Self> {
        let payloads = Payloads::build(&cfg.payload)?;
        let format = cfg.payload.format;
        match cfg.gzip_pool {
            None => {
                let heads = payloads
                    .templates()
                    .iter()
                    .map(|t| cfg.params.head(&cfg.target, format, false, t.body.len()))
                    .collect();
                Ok(Source::Patched { payloads, heads })
            }
            Some(n) => {
                let mut requests = Vec::with_capacity(n.max(1));
                for seq in 0..n.max(1) as u64 {
                    let body = payloads.body(seq)?;
                    let mut gz = flate2::write::GzEncoder::new(
                        Vec::with_capacity(body.len() / 4),
                        flate2::Compression::default(),
                    );
                    gz.write_all(&body)?;
                    let body = gz.finish()?;
                    let mut req = cfg.params.head(&cfg.target, format, true, body.len());
                    req.extend_from_slice(&body);
                    requests.push(req);
                }
                Ok(Source::Pool { requests })
            }
        }
    }

    fn request<'a>(&'a self, seq: u64, buf: &'a mut ConnBuf) -> Result<&'a [u8]> {
        match self {
            Source::Patched { payloads, heads } => {
                let (j, cycle) = payloads.locate(seq);
                let head = heads
                    .get(j)
                    .ok_or_else(|| Error::Payload(format!("no template {j}")))?;
                if buf.template != Some(j) {
                    let body = &payloads.templates()[j].body;
                    buf.bytes.clear();
                    buf.bytes.reserve(head.len() + body.len());
                    buf.bytes.extend_from_slice(head);
                    buf.bytes.extend_from_slice(body);
                    buf.template = Some(j);
                }
                payloads.patch(j, cycle, &mut buf.bytes, head.len())?;
                Ok(&buf.bytes)
            }
            Source::Pool { requests } => Ok(&requests[(seq % requests.len() as u64) as usize]),
        }
    }
}

/// State shared by every connection.
struct Shared {
    source: Source,
    authority: String,
    timeout: Duration,
}

/// How one request ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// A response; non-2xx carries the start of its body.
    Status(u16, Option<String>),
    /// No response: `connect`, `io`, `timeout`, `protocol` or `client`, with detail.
    Failed(&'static str, String),
}

impl Outcome {
    fn is_ok(&self) -> bool {
        matches!(self, Outcome::Status(s, _) if (200..300).contains(s))
    }
}

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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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

    fn p95_so_far(&self) -> Option<f64> {
        lock(&self.inner)
            .hist
            .percentile(0.95)
            .map(|us| us as f64 / 1000.0)
    }

    /// The step's row. `duration` is the step's length; `points` per request.
    fn result(
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

/// Idle connections, most recently used on top: a hot connection is reused and idle ones
/// never touch their (possibly multi-megabyte) request buffer.
pub(crate) struct IdlePool {
    stack: Mutex<Vec<usize>>,
    notify: Notify,
}

impl IdlePool {
    pub(crate) fn new(ids: impl IntoIterator<Item = usize>) -> Self {
        let mut stack: Vec<usize> = ids.into_iter().collect();
        stack.reverse();
        Self {
            stack: Mutex::new(stack),
            notify: Notify::new(),
        }
    }

    pub(crate) fn release(&self, id: usize) {
        lock(&self.stack).push(id);
        self.notify.notify_one();
    }

    fn pop(&self) -> Option<usize> {
        lock(&self.stack).pop()
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

/// One keep-alive connection and its buffers.
struct Conn {
    stream: Option<TcpStream>,
    buf: ConnBuf,
    rbuf: Vec<u8>,
}

/// Opens a connection with Nagle off (a request is one write; waiting to coalesce would only
/// add latency), giving up after `timeout` so a black-holed target fails fast.
async fn connect(authority: &str, timeout: Duration) -> std::io::Result<TcpStream> {
    let s = tokio::time::timeout(timeout, TcpStream::connect(authority))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    s.set_nodelay(true)?;
    Ok(s)
}

fn io_failure(e: std::io::Error) -> Outcome {
    Outcome::Failed("io", e.to_string())
}

impl Conn {
    fn new(stream: Option<TcpStream>) -> Self {
        Self {
            stream,
            buf: ConnBuf::default(),
            rbuf: Vec::with_capacity(8192),
        }
    }

    /// Sends request `seq` and reads its response; any failure closes the connection so the
    /// next request reconnects.
    async fn exchange(&mut self, shared: &Shared, seq: u64) -> Outcome {
        match tokio::time::timeout(shared.timeout, self.exchange_inner(shared, seq)).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(failure)) => {
                self.stream = None;
                failure
            }
            Err(_) => {
                self.stream = None;
                Outcome::Failed(
                    "timeout",
                    format!("no response within {:?}", shared.timeout),
                )
            }
        }
    }

    async fn exchange_inner(&mut self, shared: &Shared, seq: u64) -> Result<Outcome, Outcome> {
        let Conn { stream, buf, rbuf } = self;
        if stream.is_none() {
            let s = connect(&shared.authority, shared.timeout)
                .await
                .map_err(|e| Outcome::Failed("connect", e.to_string()))?;
            *stream = Some(s);
        }
        let Some(s) = stream.as_mut() else {
            return Err(Outcome::Failed("connect", "no connection".into()));
        };
        let req = shared
            .source
            .request(seq, buf)
            .map_err(|e| Outcome::Failed("client", e.to_string()))?;
        s.write_all(req).await.map_err(io_failure)?;
        rbuf.clear();
        let mut chunk = [0u8; 8192];
        let (head, head_len) = loop {
            let parsed =
                parse_head(rbuf).map_err(|e| Outcome::Failed("protocol", e.to_string()))?;
            if let Some(h) = parsed {
                break h;
            }
            let n = s.read(&mut chunk).await.map_err(io_failure)?;
            if n == 0 {
                return Err(Outcome::Failed(
                    "io",
                    "connection closed before the response".into(),
                ));
            }
            rbuf.extend_from_slice(&chunk[..n]);
        };
        // Keep at most a little of the body: enough to show an error message.
        let mut body_end;
        loop {
            body_end = match head.framing {
                Framing::Length(n) => (rbuf.len() >= head_len + n).then_some(head_len + n),
                Framing::Chunked => chunked_end(rbuf, head_len)
                    .map_err(|e| Outcome::Failed("protocol", e.to_string()))?,
                Framing::UntilClose => None,
            };
            if body_end.is_some() {
                break;
            }
            let n = s.read(&mut chunk).await.map_err(io_failure)?;
            if n == 0 {
                if head.framing == Framing::UntilClose {
                    body_end = Some(rbuf.len());
                    break;
                }
                return Err(Outcome::Failed("io", "connection closed mid-body".into()));
            }
            rbuf.extend_from_slice(&chunk[..n]);
        }
        if head.close {
            *stream = None;
        }
        let sample = (!(200..300).contains(&head.status)).then(|| {
            let body = &rbuf[head_len..body_end.unwrap_or(rbuf.len())];
            let body = match head.framing {
                Framing::Chunked => dechunk(body),
                _ => body.to_vec(),
            };
            let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
            text.trim().to_string()
        });
        Ok(Outcome::Status(head.status, sample))
    }
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
    let points = cfg.payload.points;
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
    let outcome = match &cfg.plan {
        Plan::Open {
            rates_rps,
            step,
            ramp,
        } => {
            run_open(
                cfg,
                &shared,
                &progress,
                rates_rps,
                *step,
                *ramp,
                &mut on_step,
            )
            .await
        }
        Plan::Closed { vus, step } => {
            run_closed(cfg, &shared, &progress, vus, *step, &mut on_step).await
        }
    };
    ticker.abort();
    progress.clear();
    let (steps, stopped_early) = outcome?;
    let figures: Vec<StepFigures> = steps.iter().map(StepResult::figures).collect();
    let open = matches!(cfg.plan, Plan::Open { .. });
    let eval = open.then(|| evaluate(&figures, &cfg.criteria));
    let knee = eval
        .as_ref()
        .and_then(|e| e.knee)
        .and_then(|i| steps.get(i));
    Ok(Report {
        mode: match cfg.plan {
            Plan::Open { ramp: true, .. } => "ramp",
            Plan::Open { ramp: false, .. } => "open",
            Plan::Closed { .. } => "closed",
        }
        .into(),
        knee_pps: knee.map(|s| s.offered_pps),
        knee_p95_ms: knee.and_then(|s| s.p95_ms),
        p95_limit_ms: eval.as_ref().map(|e| e.p95_limit_ms),
        stopped_early,
        points_per_request: points,
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
    })
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

async fn run_open(
    cfg: &LoadConfig,
    shared: &Arc<Shared>,
    progress: &Progress,
    rates: &[f64],
    step: Duration,
    ramp: bool,
    on_step: &mut impl FnMut(&StepResult),
) -> Result<(Vec<StepResult>, bool)> {
    let idle = Arc::new(IdlePool::new(0..cfg.connections));
    let mut senders = Vec::with_capacity(cfg.connections);
    let mut tasks = Vec::with_capacity(cfg.connections);
    for id in 0..cfg.connections {
        let stream = connect(&shared.authority, cfg.timeout)
            .await
            .map_err(|source| Error::Connect {
                addr: shared.authority.clone(),
                source,
            })?;
        let (tx, mut rx) = mpsc::channel::<Job>(1);
        senders.push(tx);
        let (shared, idle) = (shared.clone(), idle.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(Some(stream));
            while let Some(job) = rx.recv().await {
                let outcome = conn.exchange(&shared, job.seq).await;
                job.stats.complete(job.due, &outcome);
                drop(job);
                idle.release(id);
            }
        }));
    }
    let seq = AtomicU64::new(0);
    let hand_over = |id: usize, job: Job| {
        if let Some(Err(e)) = senders.get(id).map(|tx| tx.try_send(job)) {
            // Cannot happen (an idle connection's queue is empty), but never lose the count.
            let job = e.into_inner();
            job.stats.complete(
                job.due,
                &Outcome::Failed("client", "connection busy".into()),
            );
        }
    };
    let drain_slack = cfg.timeout + Duration::from_secs(1);
    if !cfg.warmup.is_zero() {
        if let Some(&rate) = rates.first() {
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
    let mut stopped_early = false;
    let points = cfg.payload.points;
    for (i, &rate) in rates.iter().enumerate() {
        let stats = StepStats::new();
        progress.set(
            format!(
                "[{}/{}] offered {} pts/s",
                i + 1,
                rates.len(),
                crate::units::thousands(rate * points as f64)
            ),
            &stats,
            step,
        );
        dispatch(rate, step, cfg.tolerance, &idle, &stats, &seq, hand_over).await;
        stats.drain(Instant::now() + drain_slack).await;
        results.push(stats.result(i, step, points, None));
        judge(&mut results, &cfg.criteria);
        progress.clear();
        if let Some(last) = results.last() {
            on_step(last);
        }
        let figures: Vec<StepFigures> = results.iter().map(StepResult::figures).collect();
        if ramp && i + 1 < rates.len() && should_stop(&figures, &cfg.criteria) {
            stopped_early = true;
            break;
        }
    }
    drop(senders);
    for t in tasks {
        t.abort();
    }
    Ok((results, stopped_early))
}

async fn run_closed(
    cfg: &LoadConfig,
    shared: &Arc<Shared>,
    progress: &Progress,
    vus: &[usize],
    step: Duration,
    on_step: &mut impl FnMut(&StepResult),
) -> Result<(Vec<StepResult>, bool)> {
    let seq = Arc::new(AtomicU64::new(0));
    let mut results = Vec::new();
    for (i, &n) in vus.iter().enumerate() {
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            let s = connect(&shared.authority, cfg.timeout)
                .await
                .map_err(|source| Error::Connect {
                    addr: shared.authority.clone(),
                    source,
                })?;
            conns.push(Conn::new(Some(s)));
        }
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
    Ok((results, false))
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
        let idle = Arc::new(IdlePool::new(0..conns));
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

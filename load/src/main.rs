//! `sluice-load` command line: flags to a [`LoadConfig`], then the run, the table and the
//! output files. All logic lives in the library so tests drive it without a process.

use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Parser, ValueEnum};

use sluice_load::error::invalid;
use sluice_load::http::{parse_url, Api, WriteParams};
use sluice_load::knee::Criteria;
use sluice_load::payload::{Format, PayloadSpec, Precision};
use sluice_load::ready::wait_ready;
use sluice_load::report::{table_header, table_row};
use sluice_load::search::Search;
use sluice_load::units::{parse_count, parse_duration, parse_int_ramp, parse_ramp, parse_span};
use sluice_load::{run, svg, LoadConfig, Plan, Result};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormatArg {
    /// Line protocol.
    Lp,
    /// Columnar msgpack.
    Msgpack,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum UnitArg {
    /// Rates are points per second.
    Pps,
    /// Rates are requests per second.
    Rps,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ApiArg {
    /// POST /write?db=&rp= (InfluxDB 1.x).
    V1,
    /// POST /api/v2/write?bucket=db/rp&org= (InfluxDB 2.x).
    V2,
}

/// Open-model load generator for InfluxDB-compatible /write endpoints: constant arrival rate,
/// dropped requests counted, latency percentiles per step, and the knee of a ramp.
#[derive(Parser, Debug)]
#[command(name = "sluice-load", version)]
#[command(group(ArgGroup::new("mode").required(true).args(["ramp", "search", "rate", "vus"])))]
struct Cli {
    /// Ramp the offered rate: START:STEP:MAX (e.g. 200k:200k:3M) and find the knee.
    #[arg(long, value_name = "START:STEP:MAX")]
    ramp: Option<String>,
    /// Search the knee without knowing its range: double from START (halve while the first
    /// steps fail) up to MAX until a step fails, then --refine steps in between.
    #[arg(long, value_name = "START:MAX")]
    search: Option<String>,
    /// Steps of --search between the highest passing and the first failing rate.
    #[arg(long, default_value_t = 5)]
    refine: usize,
    /// Steps of --search that run its highest passing rate again before it counts as the
    /// knee (the knee is the highest rate that passed more often than it failed).
    #[arg(long, default_value_t = 0)]
    confirm: usize,
    /// Factor between the bracketing steps of --search (2: doubling).
    #[arg(long, default_value_t = 2.0)]
    growth: f64,
    /// Pause of --search before its refining steps (the target works off the failed step).
    #[arg(long, default_value = "10s")]
    settle: String,
    /// One open-model step at this constant rate (e.g. 500k).
    #[arg(long)]
    rate: Option<String>,
    /// Closed model: this many back-to-back virtual users, or START:STEP:MAX of them.
    #[arg(long, value_name = "N|START:STEP:MAX")]
    vus: Option<String>,
    /// Unit of --ramp and --rate.
    #[arg(long, value_enum, default_value = "pps")]
    unit: UnitArg,
    /// Length of each step (--duration is the same).
    #[arg(long, alias = "duration", default_value = "10s")]
    step: String,
    /// Unrecorded load at the first rate before the first step.
    #[arg(long, default_value = "0s")]
    warmup: String,

    /// Target base URL (http only).
    #[arg(long, default_value = "http://127.0.0.1:8086")]
    url: String,
    /// Database (v1) or bucket (v2).
    #[arg(long, default_value = "load")]
    db: String,
    /// Retention policy (empty: the default one).
    #[arg(long, default_value = "")]
    rp: String,
    /// Write API.
    #[arg(long, value_enum, default_value = "v1")]
    api: ApiArg,
    /// Organisation (v2 API).
    #[arg(long, default_value = "")]
    org: String,
    /// Timestamp precision: ns, us, ms or s.
    #[arg(long, default_value = "ns")]
    precision: String,
    /// Sent as `Authorization: Token <TOKEN>`.
    #[arg(long, conflicts_with = "token_file")]
    token: Option<String>,
    /// The token is the first non-empty line of this file (a mounted Secret).
    #[arg(long)]
    token_file: Option<String>,
    /// Before the load, wait up to this long for `GET /ready` to answer 2xx.
    #[arg(long)]
    wait_ready: Option<String>,
    /// InfluxDB 1.x user (`u=`); needs --password.
    #[arg(long, requires = "password")]
    user: Option<String>,
    /// InfluxDB 1.x password (`p=`).
    #[arg(long)]
    password: Option<String>,

    /// Body encoding.
    #[arg(long, value_enum, default_value = "lp")]
    format: FormatArg,
    /// Points per request.
    #[arg(long, default_value = "5000")]
    points: String,
    /// Distinct series (tag sets host=host-<i>,region=r<i%16>).
    #[arg(long, default_value = "1000")]
    series: String,
    /// Float fields per point.
    #[arg(long, default_value_t = 5)]
    fields: usize,
    /// Measurement name.
    #[arg(long, default_value = "cpu")]
    measurement: String,
    /// Gzip bodies. Compression is done up front for a pool of --gzip-pool requests that are
    /// then cycled, so points repeat every pool's worth of requests.
    #[arg(long)]
    gzip: bool,
    /// Distinct pre-compressed requests with --gzip.
    #[arg(long, default_value_t = 32)]
    gzip_pool: usize,

    /// Keep-alive connections (open model): the most requests in flight at once.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Use the connections in turn (the one idle longest first) instead of the most recently
    /// idle one, so that behind a Service or load balancer that picks a backend per
    /// connection the load spreads over every backend.
    #[arg(long)]
    spread: bool,
    /// How long past its due time a request may wait for a free connection before it counts
    /// as dropped.
    #[arg(long, default_value = "5ms")]
    tolerance: String,
    /// Per-request timeout.
    #[arg(long, default_value = "30s")]
    timeout: String,
    /// Runtime worker threads (default: available cores).
    #[arg(long)]
    threads: Option<usize>,

    /// Knee: p95 must stay at or under this.
    #[arg(long, default_value = "250ms")]
    p95_max: String,
    /// Knee: p95 at most this multiple of the lightest step's p95 (0 disables).
    #[arg(long, default_value_t = 2.5)]
    p95_factor: f64,
    /// Knee: the relative bound is never tighter than this.
    #[arg(long, default_value = "10ms")]
    p95_floor: String,
    /// Knee: achieved / offered at least this.
    #[arg(long, default_value_t = 0.99)]
    min_achieved: f64,
    /// Stop the ramp after this many failed steps in a row.
    #[arg(long, default_value_t = 2)]
    stop_after: usize,
    /// ... or at once when a step achieves less than this share of its offered rate.
    #[arg(long, default_value_t = 0.9)]
    stop_below: f64,

    /// Write the report as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Write the report as compact JSON of at most 4 KiB (the knee and one short array per
    /// step), e.g. to /dev/termination-log.
    #[arg(long, value_name = "FILE")]
    summary: Option<String>,
    /// Write an SVG plot of latency and achieved rate against offered rate.
    #[arg(long, value_name = "FILE")]
    plot: Option<String>,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

fn whole(what: &'static str, text: &str) -> Result<usize> {
    let v = parse_count(text)?;
    if v < 1.0 || v.fract() != 0.0 || v > 1e9 {
        return Err(invalid(what, text, "must be a whole number >= 1"));
    }
    Ok(v as usize)
}

fn config(cli: &Cli) -> Result<LoadConfig> {
    let precision = Precision::parse(&cli.precision)?;
    let points = whole("points", &cli.points)?;
    let series = whole("series", &cli.series)?;
    if cli.fields == 0 {
        return Err(invalid("fields", "0", "need at least one field"));
    }
    let step = parse_duration(&cli.step)?;
    if step.is_zero() {
        return Err(invalid("step", &cli.step, "must be > 0"));
    }
    let to_rps = |v: f64| match cli.unit {
        UnitArg::Pps => v / points as f64,
        UnitArg::Rps => v,
    };
    let plan = if let Some(r) = &cli.ramp {
        Plan::Open {
            rates_rps: parse_ramp(r)?.into_iter().map(to_rps).collect(),
            step,
            ramp: true,
        }
    } else if let Some(s) = &cli.search {
        let (start, max) = parse_span(s)?;
        if !(cli.growth > 1.0 && cli.growth <= 100.0) {
            return Err(invalid(
                "growth",
                &cli.growth.to_string(),
                "must be more than 1",
            ));
        }
        Plan::Search {
            search: Search {
                start: to_rps(start),
                max: to_rps(max),
                refine: cli.refine,
                growth: cli.growth,
                confirm: cli.confirm,
            },
            step,
            settle: parse_duration(&cli.settle)?,
        }
    } else if let Some(r) = &cli.rate {
        let v = parse_count(r)?;
        if v <= 0.0 {
            return Err(invalid("rate", r, "must be > 0"));
        }
        Plan::Open {
            rates_rps: vec![to_rps(v)],
            step,
            ramp: false,
        }
    } else if let Some(v) = &cli.vus {
        Plan::Closed {
            vus: parse_int_ramp(v)?,
            step,
        }
    } else {
        return Err(invalid("mode", "", "one of --ramp, --rate, --vus"));
    };
    let mut payload = PayloadSpec::new(
        match cli.format {
            FormatArg::Lp => Format::LineProtocol,
            FormatArg::Msgpack => Format::Msgpack,
        },
        points,
        series,
        cli.fields,
    );
    payload.measurement = cli.measurement.clone();
    payload.t0 = precision.now();
    let criteria = Criteria {
        min_achieved_ratio: cli.min_achieved,
        p95_max_ms: parse_duration(&cli.p95_max)?.as_secs_f64() * 1000.0,
        p95_factor: cli.p95_factor,
        p95_floor_ms: parse_duration(&cli.p95_floor)?.as_secs_f64() * 1000.0,
        stop_after: cli.stop_after,
        clear_fail_ratio: cli.stop_below,
    };
    Ok(LoadConfig {
        target: parse_url(&cli.url)?,
        params: WriteParams {
            api: match cli.api {
                ApiArg::V1 => Api::V1,
                ApiArg::V2 => Api::V2,
            },
            db: cli.db.clone(),
            rp: cli.rp.clone(),
            org: cli.org.clone(),
            precision,
            token: match &cli.token_file {
                Some(path) => Some(token_from_file(path)?),
                None => cli.token.clone(),
            },
            user: cli.user.clone().zip(cli.password.clone()),
        },
        payload,
        gzip_pool: cli.gzip.then_some(cli.gzip_pool.max(1)),
        connections: cli.connections,
        spread: cli.spread,
        timeout: parse_duration(&cli.timeout)?.max(Duration::from_millis(1)),
        tolerance: parse_duration(&cli.tolerance)?,
        warmup: parse_duration(&cli.warmup)?,
        progress: !cli.quiet,
        plan,
        criteria,
    })
}

/// The first non-empty line of `path`.
fn token_from_file(path: &str) -> Result<String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| invalid("token-file", path, e.to_string()))?;
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(String::from)
        .ok_or_else(|| invalid("token-file", path, "holds no token"))
}

fn main_inner(cli: Cli) -> Result<()> {
    let cfg = config(&cli)?;
    let threads = cli
        .threads
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(2)
        .max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    if let Some(w) = &cli.wait_ready {
        rt.block_on(wait_ready(&cfg.target, parse_duration(w)?))?;
    }
    println!(
        "sluice-load: {} {} x {} points, {} series, {} fields{} -> {} ({} connections)",
        match cfg.plan {
            Plan::Open { ramp: true, .. } => "ramp",
            Plan::Open { ramp: false, .. } => "open",
            Plan::Search { .. } => "search",
            Plan::Closed { .. } => "closed",
        },
        match cfg.payload.format {
            Format::LineProtocol => "line protocol",
            Format::Msgpack => "msgpack",
        },
        cfg.payload.points,
        cfg.payload.series,
        cfg.payload.fields,
        if cfg.gzip_pool.is_some() {
            ", gzip"
        } else {
            ""
        },
        cli.url,
        cfg.connections,
    );
    println!("{}", table_header());
    let report = rt.block_on(run(&cfg, |step| println!("{}", table_row(step))))?;
    println!("{}", report.summary());
    if let Some(path) = &cli.json {
        report.write_json(path)?;
    }
    if let Some(path) = &cli.summary {
        report.write_summary(path)?;
    }
    if let Some(path) = &cli.plot {
        let title = format!(
            "{} — {} points/request, {} series, {} fields",
            cli.url, cfg.payload.points, cfg.payload.series, cfg.payload.fields
        );
        svg::write(&report, &title, path)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match main_inner(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-load: {e}");
            ExitCode::FAILURE
        }
    }
}

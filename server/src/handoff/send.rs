//! The leaving pod's side of a hand-off: a thread that takes the recorded state one step at a
//! time (each step recorded before the next), asking the receiver for each copy. Any failure,
//! a receiver killed or unreachable, is retried with a growing pause; a kill of this pod is
//! resumed at start-up from the recorded state.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chdb_rust::format::OutputFormat;
use serde_json::Value;

use super::receive::{self, Ask};
use super::sql;
use super::state::{Chunk, Leaving, Step, TableProgress};
use crate::app::App;
use crate::catalog::SERIES_TABLE;

/// How long the receiver may take over one request (a chunk, a mutation).
const ASK_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("the receiver {receiver}: {why}")]
    Receiver { receiver: String, why: String },
    #[error("the receiver {receiver} refuses: {why}")]
    Refused { receiver: String, why: String },
    #[error("engine: {0}")]
    Engine(#[from] crate::engine::EngineError),
    #[error("catalog: {0}")]
    Catalog(#[from] crate::catalog::CatalogError),
    #[error("recording the hand-off: {0}")]
    State(#[from] std::io::Error),
    #[error("table {table}: the copy has {got_rows} rows (hash {got_hash:x}), this pod {rows} (hash {hash:x}); copying it again")]
    Mismatch {
        table: String,
        rows: u64,
        hash: u64,
        got_rows: u64,
        got_hash: u64,
    },
    #[error("chunk {chunk} of {table}: the receiver holds {got} rows of it, this pod {rows}")]
    ChunkCount {
        table: String,
        chunk: usize,
        rows: u64,
        got: u64,
    },
}

enum Next {
    /// Take the next step at once.
    Go,
    /// Look again after a while (the WAL is still flushing).
    Wait(Duration),
    /// Nothing more to do until a new request.
    Stop,
}

/// Starts the driver unless it runs.
pub fn start(app: &Arc<App>) {
    let mut driver = app.handoff.driver.lock().unwrap_or_else(|p| p.into_inner());
    if driver.as_ref().is_some_and(|h| !h.is_finished()) {
        return;
    }
    let app2 = app.clone();
    match std::thread::Builder::new()
        .name("handoff".into())
        .spawn(move || drive(&app2))
    {
        Ok(h) => *driver = Some(h),
        Err(e) => tracing::error!(error = %e, "cannot start the hand-off thread"),
    }
}

fn drive(app: &App) {
    let mut pause = Duration::from_millis(500);
    loop {
        if app.draining.load(Ordering::Acquire) {
            return;
        }
        let Some(l) = app.handoff.leaving() else {
            return;
        };
        match step(app, &l) {
            Ok(Next::Go) => {
                pause = Duration::from_millis(500);
                set_error(app, None);
            }
            Ok(Next::Wait(d)) => std::thread::sleep(d),
            Ok(Next::Stop) => return,
            Err(e) => {
                tracing::warn!(error = %e, "hand-off step failed; trying again");
                if let SendError::Refused { why, .. } = &e {
                    let why = why.clone();
                    if let Err(e) = app.handoff.update(|l| {
                        if let Some(l) = l {
                            l.refused = Some(why);
                        }
                    }) {
                        tracing::error!(error = %e, "cannot record the refusal");
                    }
                }
                set_error(app, Some(e.to_string()));
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(15));
            }
        }
    }
}

fn set_error(app: &App, e: Option<String>) {
    *app.handoff
        .last_error
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = e;
}

fn step(app: &App, l: &Leaving) -> Result<Next, SendError> {
    match l.step {
        Step::Empty => Ok(Next::Stop),
        Step::Cancelling => cancel(app, l),
        Step::Draining => {
            if !flushed(app) {
                return Ok(Next::Wait(Duration::from_millis(200)));
            }
            let Some(receiver) = &l.receiver else {
                return Ok(Next::Stop);
            };
            if l.refused.is_some() {
                return Ok(Next::Stop);
            }
            let bytes = bytes_on_disk(app)?;
            ask(app, receiver, &Ask::Begin { id: l.id, bytes })?;
            let tables = list_tables(app);
            app.handoff.update(|s| {
                if let Some(s) = s {
                    s.tables = tables;
                    s.step = Step::Handing;
                }
            })?;
            tracing::info!(receiver, "handing this pod's tables over");
            Ok(Next::Go)
        }
        Step::Handing => hand(app, l),
        Step::Finishing => {
            let truncated = app.engine.execute(&format!(
                "TRUNCATE TABLE IF EXISTS {} SYNC",
                sluice_core::names::quote_ident(SERIES_TABLE)
            ));
            // What is remembered of the series table must not outlive its rows.
            app.engine.series_written();
            truncated?;
            if let Some(receiver) = &l.receiver {
                ask(
                    app,
                    receiver,
                    &Ask::Settle {
                        id: l.id,
                        purge: vec![],
                    },
                )?;
            }
            // Before the operator sees it empty and deletes it: the pods that stay then no
            // longer ask it, whatever their peer files say.
            leave(app);
            app.handoff.update(|s| {
                if let Some(s) = s {
                    s.step = Step::Empty;
                }
            })?;
            tracing::info!("every table handed over: this pod is empty");
            Ok(Next::Stop)
        }
    }
}

/// Longest an empty pod waits for a running pod to record that it leaves.
const LEAVE_PATIENCE: Duration = Duration::from_secs(10);

fn leave(app: &App) {
    use crate::cluster::announce::{announce, Announce};
    match announce(&app.cluster, Announce::Leave, LEAVE_PATIENCE) {
        Some(t) if !t.unanswered.is_empty() => tracing::warn!(
            recorded = ?t.recorded,
            unanswered = ?t.unanswered,
            "some pods did not record that this pod leaves: their reads fail once it is gone, \
             until their peer files drop it"
        ),
        Some(t) => tracing::info!(recorded = ?t.recorded, "left the tenant's pods"),
        None => {}
    }
}

/// One step of copying: the series rows, then the first table not yet dropped.
fn hand(app: &App, l: &Leaving) -> Result<Next, SendError> {
    let Some(receiver) = &l.receiver else {
        return Ok(Next::Stop);
    };
    let port = listen_port(app);
    if !l.series_copied {
        ask(app, receiver, &Ask::Series { id: l.id, port })?;
        app.handoff.update(|s| {
            if let Some(s) = s {
                s.series_copied = true;
            }
        })?;
        return Ok(Next::Go);
    }
    let Some((name, t)) = l.tables.iter().find(|(_, t)| !t.dropped) else {
        app.handoff.update(|s| {
            if let Some(s) = s {
                s.step = Step::Finishing;
            }
        })?;
        return Ok(Next::Go);
    };
    if t.handed {
        app.ingest.catalog.drop_table(name)?;
        record(app, name, |t| t.dropped = true)?;
        return Ok(Next::Go);
    }
    if t.chunks.is_empty() {
        let chunks = plan_chunks(app, name)?;
        record(app, name, |t| t.chunks = chunks)?;
        return Ok(Next::Go);
    }
    if let Some((i, c)) = t.chunks.iter().enumerate().find(|(_, c)| !c.done) {
        let got = ask(
            app,
            receiver,
            &Ask::Chunk {
                id: l.id,
                port,
                db: t.db.clone(),
                rp: t.rp.clone(),
                measurement: t.measurement.clone(),
                duration_ns: t.duration_ns,
                fields: t.fields.clone(),
                chunk: i as u32,
                lo: c.lo,
                hi: c.hi,
                rows: c.rows,
            },
        )?;
        let got = got["rows"].as_u64().unwrap_or(0);
        if got != c.rows {
            return Err(SendError::ChunkCount {
                table: name.clone(),
                chunk: i,
                rows: c.rows,
                got,
            });
        }
        record(app, name, |t| t.chunks[i].done = true)?;
        return Ok(Next::Go);
    }
    verify(app, receiver, l.id, name, t)?;
    record(app, name, |t| t.handed = true)?;
    tracing::info!(table = name, rows = t.rows(), "table handed over");
    Ok(Next::Go)
}

/// Compares the receiver's copy of `name` with this pod's table; on a difference the copy is
/// deleted and the table copied again.
fn verify(
    app: &App,
    receiver: &str,
    id: u64,
    name: &str,
    t: &TableProgress,
) -> Result<(), SendError> {
    let cols = sql::columns(&t.fields);
    let (rows, hash) = receive::digest(app, &sql::digest_sql(name, &cols, None))?;
    let theirs = ask(
        app,
        receiver,
        &Ask::Digest {
            id,
            table: name.to_string(),
            columns: cols,
        },
    )?;
    let got_rows = theirs["rows"].as_u64().unwrap_or(0);
    let got_hash = theirs["hash"].as_u64().unwrap_or(0);
    if (got_rows, got_hash) == (rows, hash) {
        return Ok(());
    }
    ask(
        app,
        receiver,
        &Ask::Purge {
            id,
            table: name.to_string(),
        },
    )?;
    record(app, name, |t| t.chunks.clear())?;
    Err(SendError::Mismatch {
        table: name.to_string(),
        rows,
        hash,
        got_rows,
        got_hash,
    })
}

/// Back to taking writes: tables already handed are dropped here (the receiver's copy is the
/// one that counts), the receiver deletes its partial copies of the others and settles.
fn cancel(app: &App, l: &Leaving) -> Result<Next, SendError> {
    for (name, t) in &l.tables {
        if t.handed && !t.dropped {
            app.ingest.catalog.drop_table(name)?;
            record(app, name, |t| t.dropped = true)?;
        }
    }
    // Settling twice (a pod already empty, brought back) changes nothing on the receiver.
    if let Some(receiver) = &l.receiver {
        let purge = l
            .tables
            .iter()
            .filter(|(_, t)| !t.handed)
            .map(|(n, _)| n.clone())
            .collect();
        ask(app, receiver, &Ask::Settle { id: l.id, purge })?;
    }
    app.handoff.update(|s| *s = None)?;
    crate::http::resume_writes(app);
    tracing::info!("decommission cancelled: taking writes again");
    Ok(Next::Stop)
}

fn record(app: &App, table: &str, f: impl FnOnce(&mut TableProgress)) -> Result<(), SendError> {
    app.handoff.update(|s| {
        if let Some(t) = s.as_mut().and_then(|s| s.tables.get_mut(table)) {
            f(t);
        }
    })?;
    Ok(())
}

/// Whether every acknowledged point is in the tables.
pub fn flushed(app: &App) -> bool {
    app.scheduler.backlog().rows == 0 && app.writes_in_flight.load(Ordering::Acquire) == 0
}

fn listen_port(app: &App) -> u16 {
    app.cfg
        .listen
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(8086)
}

fn bytes_on_disk(app: &App) -> Result<u64, SendError> {
    count(
        app,
        "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = currentDatabase()",
    )
}

fn list_tables(app: &App) -> std::collections::BTreeMap<String, TableProgress> {
    let catalog = &app.ingest.catalog;
    catalog
        .measurement_tables()
        .into_iter()
        .map(|(table, db, rp, measurement)| {
            let duration_ns = catalog
                .policies(&db)
                .and_then(|ps| ps.into_iter().find(|p| p.name == rp))
                .and_then(|p| p.duration.0)
                .map_or(0, |d| d.as_nanos() as u64);
            let fields = catalog
                .table_fields(&table)
                .unwrap_or_default()
                .into_iter()
                .map(|(f, t)| (f, crate::query::meta::field_type_name(t).to_string()))
                .collect();
            (
                table,
                TableProgress {
                    db,
                    rp,
                    measurement,
                    duration_ns,
                    fields,
                    chunks: vec![],
                    handed: false,
                    dropped: false,
                },
            )
        })
        .collect()
}

/// Splits `table` into chunks of about `cluster.handoff_chunk_rows` rows by series id, with each chunk's
/// row count (the table no longer changes: writes are refused and the WAL is flushed).
fn plan_chunks(app: &App, table: &str) -> Result<Vec<Chunk>, SendError> {
    let total = count(app, &format!("SELECT count() FROM {}", q(table)))?;
    let k = total
        .div_ceil(app.cfg.cluster.handoff_chunk_rows.max(1))
        .max(1);
    let bounds: Vec<u64> = if k > 1 {
        let out = app
            .engine
            .query(&sql::bounds_sql(table, k), OutputFormat::TabSeparated)?;
        String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| l.trim().parse::<f64>().ok())
            .map(|f| f as u64)
            .collect()
    } else {
        vec![]
    };
    let mut chunks = Vec::new();
    for (lo, hi) in sql::ranges(bounds) {
        let rows = count(
            app,
            &format!(
                "SELECT count() FROM {} WHERE series_id BETWEEN {lo} AND {hi}",
                q(table)
            ),
        )?;
        chunks.push(Chunk {
            lo,
            hi,
            rows,
            done: false,
        });
    }
    Ok(chunks)
}

fn q(t: &str) -> String {
    sluice_core::names::quote_ident(t)
}

fn count(app: &App, sql: &str) -> Result<u64, SendError> {
    Ok(super::numbers(&app.engine, sql)?
        .first()
        .copied()
        .unwrap_or(0))
}

/// Sends `what` to the receiver and returns its JSON answer.
fn ask(app: &App, receiver: &str, what: &Ask) -> Result<Value, SendError> {
    let token = app.cluster.token().unwrap_or_default();
    let body = serde_json::to_string(what).unwrap_or_default();
    let url = format!("http://{receiver}{}", super::HANDOFF_PATH);
    let err = |why: String| SendError::Receiver {
        receiver: receiver.to_string(),
        why,
    };
    let resp = ureq::post(&url)
        .timeout(ASK_TIMEOUT)
        .set("Authorization", &format!("Bearer {token}"))
        .set("Content-Type", "application/json")
        .send_string(&body);
    match resp {
        Ok(r) => r
            .into_string()
            .map_err(|e| err(e.to_string()))
            .and_then(|s| serde_json::from_str(&s).map_err(|e| err(e.to_string()))),
        Err(ureq::Error::Status(409, r)) => Err(SendError::Refused {
            receiver: receiver.to_string(),
            why: r.into_string().unwrap_or_default(),
        }),
        Err(ureq::Error::Status(code, r)) => Err(err(format!(
            "{code}: {}",
            r.into_string().unwrap_or_default()
        ))),
        Err(e) => Err(err(e.to_string())),
    }
}

//! The receiving pod's side of a hand-off: what a leaving pod may ask it to do
//! (`POST /internal/v1/handoff`, with the tenant's cluster token). Every request is
//! idempotent, so the leaving pod simply asks again after any failure or kill.

use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sluice_core::config::{RetentionDuration, RetentionPolicyConfig};
use sluice_core::names::table_name;

use super::sql;
use crate::app::App;
use crate::catalog::{chdb_type, CatalogError};
use crate::cluster::Partial;
use crate::engine::EngineError;

/// What a leaving pod asks of the receiver. `port` is the leaving pod's HTTP port; the
/// receiver reads from the address the request came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Ask {
    /// Hand-off `id` starts; the leaving pod holds `bytes` on disk. Refused when this pod
    /// lacks the room.
    Begin { id: u64, bytes: u64 },
    /// Copy the leaving pod's series rows.
    Series { id: u64, port: u16 },
    /// Copy chunk `chunk` (series ids `lo..=hi`, `rows` rows) of a table.
    Chunk {
        id: u64,
        port: u16,
        db: String,
        rp: String,
        measurement: String,
        duration_ns: u64,
        fields: Vec<(String, String)>,
        chunk: u32,
        lo: u64,
        hi: u64,
        rows: u64,
    },
    /// Row count and hash of the copy of `table` (over `columns`).
    Digest {
        id: u64,
        table: String,
        columns: Vec<String>,
    },
    /// Delete the copy of `table` (it did not match; it is copied again).
    Purge { id: u64, table: String },
    /// The hand-off is over: delete the copies of `purge` (a cancelled hand-off's tables not
    /// handed), then count every row of it like this pod's own.
    Settle { id: u64, purge: Vec<String> },
}

#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    #[error("hand-off {0} was not begun on this pod")]
    NotBegun(u64),
    #[error("this pod cannot take the data: {0}")]
    Refused(String),
    #[error("table {table}: {why}")]
    Table { table: String, why: String },
    #[error("catalog: {0}")]
    Catalog(#[from] CatalogError),
    #[error("engine: {0}")]
    Engine(#[from] EngineError),
    #[error("recording the hand-off: {0}")]
    State(#[from] std::io::Error),
    #[error("this pod has no cluster.token")]
    NoToken,
}

impl ReceiveError {
    /// Whether asking again cannot help (the operator must act).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            ReceiveError::Refused(_) | ReceiveError::Table { .. } | ReceiveError::NotBegun(_)
        )
    }
}

/// Does what `ask` says; `from` is the address the request came from.
pub fn answer(app: &App, from: IpAddr, ask: Ask) -> Result<Value, ReceiveError> {
    let _one_at_a_time = app
        .handoff
        .receive_lock
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    match ask {
        Ask::Begin { id, bytes } => begin(app, id, bytes),
        Ask::Series { id, port } => {
            begun(app, id)?;
            let url = url_of(
                app,
                SocketAddr::new(from, port),
                &Partial::HandoffSeries,
                sql::SERIES_ROWS_STRUCTURE,
            )?;
            let copied = run(
                app,
                &format!(
                    "{} {}",
                    sql::insert_series_sql(&url),
                    http_settings(app, "SETTINGS")
                ),
            );
            app.engine.series_written();
            copied?;
            Ok(json!({}))
        }
        Ask::Chunk {
            id,
            port,
            db,
            rp,
            measurement,
            duration_ns,
            fields,
            chunk,
            lo,
            hi,
            rows,
        } => {
            begun(app, id)?;
            let table = table_name(&db, &rp, &measurement);
            let typed = ensure_table(app, &db, &rp, &measurement, duration_ns, &fields)?;
            let origin = sql::origin(id, chunk);
            let have = count(app, &sql::count_chunk_sql(&table, origin))?;
            if have == rows {
                return Ok(json!({ "rows": have }));
            }
            if have > 0 {
                tracing::info!(
                    table,
                    chunk,
                    have,
                    rows,
                    "a chunk was cut short: copying it again"
                );
                run(app, &sql::delete_sql(&table, origin, false))?;
            }
            let cols = sql::columns(&fields);
            let structure = sql::structure(
                &typed
                    .iter()
                    .map(|(f, t)| (f.clone(), chdb_type(*t)))
                    .collect::<Vec<_>>(),
            );
            let url = url_of(
                app,
                SocketAddr::new(from, port),
                &Partial::HandoffRows {
                    table: table.clone(),
                    columns: cols.clone(),
                    lo,
                    hi,
                },
                &structure,
            )?;
            let insert = format!(
                "{}{}",
                sql::insert_chunk_sql(&table, &cols, origin, &url),
                http_settings(app, ",")
            );
            run(app, &insert)?;
            let have = count(app, &sql::count_chunk_sql(&table, origin))?;
            Ok(json!({ "rows": have }))
        }
        Ask::Digest { id, table, columns } => {
            begun(app, id)?;
            if app.ingest.catalog.table_fields(&table).is_none() {
                return Ok(json!({ "rows": 0, "hash": 0 }));
            }
            let (rows, hash) = digest(app, &sql::digest_sql(&table, &columns, Some(id)))?;
            Ok(json!({ "rows": rows, "hash": hash }))
        }
        Ask::Purge { id, table } => {
            begun(app, id)?;
            purge(app, id, &table)?;
            Ok(json!({}))
        }
        Ask::Settle { id, purge: tables } => {
            if app.handoff.receiving().contains(&id) {
                for t in &tables {
                    purge(app, id, t)?;
                }
                app.handoff.settle(id)?;
                tracing::info!(id, "hand-off settled: its rows count as this pod's own");
            }
            Ok(json!({}))
        }
    }
}

fn begin(app: &App, id: u64, bytes: u64) -> Result<Value, ReceiveError> {
    // Its own data would be copied into the tables it is about to drop; another pod's data
    // would have to be handed on again.
    if let Some(l) = app.handoff.leaving() {
        return Err(ReceiveError::Refused(if l.id == id {
            "a pod cannot hand its data to itself".into()
        } else {
            "this pod is itself leaving the tenant (decommissioned)".into()
        }));
    }
    if let Some(v) = crate::disk::volume(std::path::Path::new(&app.cfg.data_dir)) {
        let floor = app.cfg.limits.min_free_disk_bytes.0.min(v.total / 10);
        // What the copy takes, plus room for merging it, above the floor writes keep.
        let need = bytes.saturating_add(bytes / 4).saturating_add(floor);
        if v.free < need && !app.handoff.receiving().contains(&id) {
            return Err(ReceiveError::Refused(format!(
                "{} bytes free on the data volume, and taking {bytes} bytes needs {need}",
                v.free
            )));
        }
    }
    app.handoff.begin_receiving(id)?;
    Ok(json!({}))
}

fn begun(app: &App, id: u64) -> Result<(), ReceiveError> {
    if app.handoff.receiving().contains(&id) {
        Ok(())
    } else {
        Err(ReceiveError::NotBegun(id))
    }
}

/// Creates the database, policy and table as needed, with the leaving pod's fields; a field
/// this pod holds with another type refuses the table (its rows could not be stored as they
/// are). Returns the fields with their types.
fn ensure_table(
    app: &App,
    db: &str,
    rp: &str,
    measurement: &str,
    duration_ns: u64,
    fields: &[(String, String)],
) -> Result<Vec<(String, sluice_core::FieldType)>, ReceiveError> {
    let table = table_name(db, rp, measurement);
    let refuse = |why: String| ReceiveError::Table {
        table: table.clone(),
        why,
    };
    let typed: Vec<(String, sluice_core::FieldType)> = fields
        .iter()
        .map(|(f, t)| {
            crate::query::view::field_type_of(t)
                .map(|t| (f.clone(), t))
                .ok_or_else(|| refuse(format!("unknown field type {t:?} of {f}")))
        })
        .collect::<Result<_, _>>()?;
    let catalog = &app.ingest.catalog;
    let wal = &app.ingest.wal;
    if catalog.policies(db).is_none() {
        let policy = RetentionPolicyConfig {
            name: rp.to_string(),
            duration: RetentionDuration(
                (duration_ns > 0).then(|| std::time::Duration::from_nanos(duration_ns)),
            ),
            default: true,
        };
        catalog.create_database(db, Some(policy), wal)?;
    }
    let target = catalog.resolve(db, rp, wal)?;
    let check = catalog.ensure_table(&target, &table, &typed)?;
    if !check.conflicts.is_empty() {
        let names: Vec<String> = check.conflicts.iter().map(|(n, _)| n.clone()).collect();
        return Err(refuse(format!(
            "fields {} have another type on this pod",
            names.join(", ")
        )));
    }
    if !check.over_field_limit.is_empty() {
        return Err(refuse(format!(
            "fields {} would pass limits.max_fields_per_measurement here",
            check.over_field_limit.join(", ")
        )));
    }
    Ok(typed)
}

fn purge(app: &App, id: u64, table: &str) -> Result<(), ReceiveError> {
    if app.ingest.catalog.table_fields(table).is_some() {
        run(app, &sql::delete_sql(table, id, true))?;
    }
    Ok(())
}

fn url_of(
    app: &App,
    addr: SocketAddr,
    what: &Partial,
    structure: &str,
) -> Result<String, ReceiveError> {
    let token = app.cluster.token().ok_or(ReceiveError::NoToken)?;
    Ok(crate::cluster::url_sql(
        &[addr],
        what,
        "Native",
        structure,
        token,
    ))
}

/// How the receiver fetches from the leaving pod: one try, no HEAD first (it would run the
/// chunk's read twice), the cluster's timeouts; and its threads at the readers' priority,
/// below this pod's own writes and flushes, which must not wait for a hand-off.
fn http_settings(app: &App, lead: &str) -> String {
    let c = &app.cfg.cluster;
    format!(
        "{lead} http_make_head_request = 0, http_max_tries = 1, http_connection_timeout = {}, http_receive_timeout = {}, os_threads_nice_value_query = {}",
        c.connect_timeout.as_secs_f64(),
        c.receive_timeout.as_secs_f64(),
        crate::engine::READER_NICE
    )
}

fn run(app: &App, sql: &str) -> Result<(), ReceiveError> {
    crate::priority::keep(|| app.engine.execute(sql))?;
    Ok(())
}

fn count(app: &App, sql: &str) -> Result<u64, ReceiveError> {
    Ok(super::numbers(&app.engine, sql)?
        .first()
        .copied()
        .unwrap_or(0))
}

/// `(rows, hash)` of a [`sql::digest_sql`].
pub fn digest(app: &App, sql: &str) -> Result<(u64, u64), EngineError> {
    let n = super::numbers(&app.engine, sql)?;
    Ok((
        n.first().copied().unwrap_or(0),
        n.get(1).copied().unwrap_or(0),
    ))
}

//! A pod's share of a gathering read: the SQL it runs over its own data for a [`Partial`]
//! request. The gathering pod plans the same SQL to learn the columns it will receive
//! (`DESCRIBE`), so both sides read the measurement through [`table_sql`] with the tenant's
//! field types.

use std::collections::BTreeMap;

use sluice_core::names::{quote_ident, quote_str, table_name};
use sluice_influxql::{SelectStatement, Statement};

use super::plan::{self, Mode};
use super::{meta, Fields};
use crate::app::App;
use crate::catalog::ddl::chdb_type;
use crate::cluster::Partial;
use crate::engine::ReadSettings;
use crate::handoff::Handed;

/// The row filters (`additional_table_filters`) under which a `/sql` inner query reads this
/// pod's tables, given the gathering pod's view of the hand-offs (`handed`): the rows of
/// [`table_sql`]'s rule, whatever tables the query names. `None` when this pod takes part in
/// no hand-off; an error when the view is stale.
pub fn sql_filters(app: &App, handed: &Handed) -> Result<Option<String>, String> {
    if !app.handoff.involved() {
        return Ok(None);
    }
    // The tables this pod has handed over too: dropped, they are no longer in its catalog,
    // but a view that does not know they are handed is stale all the same.
    let mut tables: std::collections::BTreeSet<String> = app
        .ingest
        .catalog
        .measurement_tables()
        .into_iter()
        .map(|(table, ..)| table)
        .collect();
    tables.extend(app.handoff.handed_away().into_iter().flat_map(|(_, t)| t));
    let mut entries = Vec::new();
    for table in tables {
        if let Some(filter) = app.handoff.counted_filter(&table, handed)? {
            entries.push(format!("{}: {}", quote_str(&table), quote_str(&filter)));
        }
    }
    Ok((!entries.is_empty()).then(|| format!("{{{}}}", entries.join(", "))))
}

/// The measurement's table as the tenant sees it: this pod's table when it has every field
/// with the tenant's type; else a subquery over it that casts the fields whose type differs
/// and adds the missing ones as `NULL`; and with no table at all, no rows of the same shape.
/// Every pod's partial thus has the same columns whatever it was written.
///
/// `handed` is the gathering pod's view of the hand-offs under way: a table this pod has
/// handed over reads as no rows, and rows this pod received in a hand-off count only once
/// the view says so (see [`crate::handoff`]). An error means the view is stale.
pub fn table_sql(
    app: &App,
    table: &str,
    fields: &Fields,
    handed: &Handed,
) -> Result<String, String> {
    // The catalog first: a table handed over and dropped between the two reads then fails
    // the view's check instead of reading as no rows here (the receiver leaves its copy out).
    let local = app.ingest.catalog.table_fields(table);
    let source = match app.handoff.counted_source(table, handed)? {
        Some(s) => s,
        None => return Ok(no_rows(fields)),
    };
    let Some(local) = local else {
        return Ok(no_rows(fields));
    };
    if fields.iter().all(|(f, t)| local.get(f) == Some(t)) {
        return Ok(source);
    }
    let mut cols = vec!["series_id".to_string(), "time".to_string()];
    for (f, t) in fields {
        let q = quote_ident(f);
        cols.push(match local.get(f) {
            Some(l) if l == t => q,
            Some(_) => format!("CAST({q} AS Nullable({})) AS {q}", chdb_type(*t)),
            None => format!("CAST(NULL AS Nullable({})) AS {q}", chdb_type(*t)),
        });
    }
    Ok(format!("(SELECT {} FROM {source})", cols.join(", ")))
}

/// No rows, with the columns of the measurement's table as the tenant sees it.
fn no_rows(fields: &Fields) -> String {
    let cols: Vec<String> = fields
        .iter()
        .map(|(f, t)| {
            format!(
                "CAST(NULL AS Nullable({})) AS {}",
                chdb_type(*t),
                quote_ident(f)
            )
        })
        .collect();
    let mut all = vec![
        "toUInt64(0) AS series_id".to_string(),
        "toDateTime64(0, 9, 'UTC') AS time".to_string(),
    ];
    all.extend(cols);
    format!("(SELECT {} WHERE 0)", all.join(", "))
}

/// The statements of a request's `q` with its `params` bound, as the gathering pod parsed
/// them.
fn statements(q: &str, params: Option<&str>) -> Result<Vec<Statement>, String> {
    super::params::parse(q, params)
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// The statement `i` of `q`, which must be a `SELECT`.
pub fn select_of(q: &str, params: Option<&str>, i: usize) -> Result<SelectStatement, String> {
    match statements(q, params)?.into_iter().nth(i) {
        Some(Statement::Select(s)) => Ok(*s),
        _ => Err(format!("statement {i} of the request is not a SELECT")),
    }
}

/// One measurement of a `SELECT` as a pod's share (`Mode::Partial`), or the share's columns
/// alone (`Mode::Shape`); `None` when the statement reads none of its fields.
#[allow(clippy::too_many_arguments)]
pub fn select_sql(
    app: &App,
    sel: &SelectStatement,
    db: &str,
    rp: &str,
    measurement: &str,
    fields: &Fields,
    tag_keys: &[String],
    now: i64,
    handed: &Handed,
    mode: Mode,
    ordered_sums: bool,
) -> Result<Option<plan::Plan>, String> {
    let table = table_sql(app, &table_name(db, rp, measurement), fields, handed)?;
    let src = plan::Source {
        db,
        measurement,
        table: &table,
        fields,
        tag_keys,
        series: None,
        series_ids: None,
        series_tags: None,
        ordered_sums,
    };
    super::series_ids::plan_reading(app, sel, &src, now, mode).map_err(|e| e.to_string())
}

/// What a pod runs for a peer: the SQL, and the settings it runs with beyond the pool's (a
/// share of a `SELECT` those of its plan, anything else none).
pub struct PartialSql {
    pub sql: String,
    pub settings: ReadSettings,
}

/// The SQL a pod runs for `p`, in `Native`; `None` for requests that are not SQL.
pub fn sql(app: &App, p: &Partial) -> Result<Option<PartialSql>, String> {
    let sql = match p {
        Partial::Ping | Partial::SeriesVersion | Partial::Catalog | Partial::DescribeSql { .. } => {
            return Ok(None)
        }
        Partial::HandoffSeries => crate::handoff::sql::series_rows_sql(),
        Partial::HandoffRows {
            table,
            columns,
            lo,
            hi,
        } => {
            let Some(fields) = app.ingest.catalog.table_fields(table) else {
                return Err(format!("this pod has no table {table}"));
            };
            if let Some(c) = columns
                .iter()
                .find(|c| *c != "time" && *c != "series_id" && !fields.contains_key(c.as_str()))
            {
                return Err(format!("table {table} has no column {c}"));
            }
            crate::handoff::sql::rows_sql(table, columns, *lo, *hi)
        }
        Partial::Select {
            q,
            params,
            statement,
            db,
            rp,
            measurement,
            fields,
            tag_keys,
            now,
            handed,
            ordered_sums,
        } => {
            let sel = select_of(q, params.as_deref(), *statement)?;
            let fields = typed(fields)?;
            let handed = crate::handoff::from_pairs(handed);
            match select_sql(
                app,
                &sel,
                db,
                rp,
                measurement,
                &fields,
                tag_keys,
                *now,
                &handed,
                Mode::Partial,
                *ordered_sums,
            )? {
                Some(plan) => {
                    return Ok(Some(PartialSql {
                        settings: plan.read_settings(),
                        sql: plan.sql,
                    }))
                }
                // The gathering pod would not have asked; an empty answer of no columns
                // would not match what it expects, so say so.
                None => return Err(format!("nothing to read from {measurement}")),
            }
        }
        Partial::Series {
            db,
            measurement,
            q,
            params,
            statement,
            now,
            every,
        } => {
            let (filter, one_per) = match (measurement, q) {
                // Asked for the measurement's tag keys (`*`, `GROUP BY *`), or for its groups.
                (Some(m), _) => (
                    format!(
                        "db = {} AND measurement = {}",
                        sluice_core::names::quote_str(db),
                        sluice_core::names::quote_str(m)
                    ),
                    (!every).then_some(meta::OnePer::KeySet),
                ),
                (None, Some(q)) => show_filter(q, params.as_deref(), *statement, db, *now)?,
                (None, None) => (format!("db = {}", sluice_core::names::quote_str(db)), None),
            };
            meta::partial_series_sql(&filter, one_per)
        }
        Partial::TagValues {
            db,
            q,
            params,
            statement,
            now,
        } => {
            let statements = statements(q, params.as_deref())?;
            let Some(Statement::ShowTagValues(t)) = statements.get(*statement) else {
                return Err(format!(
                    "statement {statement} of the request is not a SHOW TAG VALUES"
                ));
            };
            let filter = meta::series_filter(db, &t.sources, t.condition.as_ref(), *now)
                .map_err(|e| e.to_string())?;
            meta::distinct_tag_values_sql(&meta::tag_value_rows_sql(
                &meta::local_series(false),
                &filter,
                &t.key,
            ))
        }
        Partial::Sql { q, .. } => q.clone(),
    };
    Ok(Some(PartialSql {
        sql,
        settings: ReadSettings::default(),
    }))
}

/// The series filter of `SHOW` statement `i` of `q` in `db`, and how far the statement lets
/// a pod cut its series.
fn show_filter(
    q: &str,
    params: Option<&str>,
    i: usize,
    db: &str,
    now: i64,
) -> Result<(String, Option<meta::OnePer>), String> {
    use meta::OnePer;
    let statements = statements(q, params)?;
    let (sources, condition, one_per) = match statements.get(i) {
        Some(Statement::ShowMeasurements(m)) => (
            m.with_measurement.iter().cloned().collect::<Vec<_>>(),
            m.condition.as_ref(),
            Some(OnePer::Measurement),
        ),
        Some(Statement::ShowTagKeys(t)) => (
            t.sources.clone(),
            t.condition.as_ref(),
            Some(OnePer::KeySet),
        ),
        Some(Statement::ShowTagValues(t)) => (t.sources.clone(), t.condition.as_ref(), None),
        Some(Statement::ShowSeries(s)) => (s.sources.clone(), s.condition.as_ref(), None),
        Some(Statement::ShowCardinality(c)) => {
            use sluice_influxql::CardinalityOf;
            // Groups need every series; without them a count of names needs one series
            // per name.
            let one_per = match c.of {
                _ if !c.group_by.is_empty() => None,
                CardinalityOf::Measurements | CardinalityOf::FieldKeys => Some(OnePer::Measurement),
                CardinalityOf::TagKeys => Some(OnePer::KeySet),
                CardinalityOf::Series | CardinalityOf::TagValues(_) => None,
            };
            (c.sources.clone(), c.condition.as_ref(), one_per)
        }
        _ => return Err(format!("statement {i} of the request does not list series")),
    };
    let filter = meta::series_filter(db, &sources, condition, now).map_err(|e| e.to_string())?;
    Ok((filter, one_per))
}

/// Field types by InfluxDB name, as a partial request carries them.
pub fn type_names(fields: &Fields) -> BTreeMap<String, String> {
    fields
        .iter()
        .map(|(f, t)| (f.clone(), meta::field_type_name(*t).to_string()))
        .collect()
}

fn typed(fields: &BTreeMap<String, String>) -> Result<Fields, String> {
    fields
        .iter()
        .map(|(f, t)| {
            super::view::field_type_of(t)
                .map(|t| (f.clone(), t))
                .ok_or_else(|| format!("unknown field type {t:?}"))
        })
        .collect()
}

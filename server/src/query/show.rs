//! The `SHOW` statements: the tenant's series (this pod's series table, or every pod's) and
//! catalog, in InfluxDB's column layouts.

use serde_json::{json, Value};
use sluice_influxql::Measurement;

use super::answer::Outcome;
use super::fetch::series_output;
use super::{database, meta, shape, sources_of, with_series, Ctx};
use crate::cluster::Partial;

/// The series rows a `SHOW` statement lists: those of its database that its sources and
/// condition select, as `sql(from, filter)` makes of them; `merged` when the statement lists
/// or counts series rather than distinct names (see [`meta::local_series`]).
pub(super) fn listed(
    ctx: &Ctx,
    database_name: &Option<String>,
    sources: &[Measurement],
    condition: Option<&sluice_influxql::Expr>,
    id: usize,
    merged: bool,
    sql: &dyn Fn(&str, &str) -> String,
) -> Result<shape::Rows, String> {
    let (db, filter) = selected(ctx, database_name, sources, condition)?;
    ctx.fetch_series(ctx.show_series(&db, id), merged, &|from| sql(from, &filter))
}

/// The database a `SHOW` statement reads, and the condition on the series table's rows that
/// its sources and condition make.
fn selected(
    ctx: &Ctx,
    database_name: &Option<String>,
    sources: &[Measurement],
    condition: Option<&sluice_influxql::Expr>,
) -> Result<(String, String), String> {
    let db = database(ctx, database_name.as_deref())?;
    let filter =
        meta::series_filter(&db, sources, condition, ctx.now_ns).map_err(|e| e.to_string())?;
    Ok((db, filter))
}

/// `SHOW MEASUREMENTS`.
pub(super) fn measurements(
    ctx: &Ctx,
    m: &sluice_influxql::ShowMeasurements,
    id: usize,
) -> Result<Value, String> {
    let sources: Vec<Measurement> = m.with_measurement.iter().cloned().collect();
    let rows = listed(
        ctx,
        &m.database,
        &sources,
        m.condition.as_ref(),
        id,
        false,
        &|from, filter| meta::measurements_sql(from, filter, m.order, m.limit, m.offset),
    )?;
    let values: Vec<Value> = rows.rows.into_iter().map(Value::Array).collect();
    Ok(with_series(
        id,
        if values.is_empty() {
            vec![]
        } else {
            vec![meta::series(Some("measurements"), &["name"], values)]
        },
    ))
}

/// `SHOW TAG KEYS`: per measurement.
pub(super) fn tag_keys(
    ctx: &Ctx,
    t: &sluice_influxql::ShowTagKeys,
    id: usize,
) -> Result<Value, String> {
    let rows = listed(
        ctx,
        &t.database,
        &t.sources,
        t.condition.as_ref(),
        id,
        false,
        &|from, filter| meta::tag_keys_sql(from, filter),
    )?;
    let mut series = Vec::new();
    for row in rows.rows {
        let (Some(m), Some(Value::Array(keys))) = (row.first(), row.get(1)) else {
            continue;
        };
        let values: Vec<Value> = keys.iter().map(|k| json!([k])).collect();
        let values = meta::page(values, t.limit, t.offset);
        if !values.is_empty() {
            series.push(meta::series(m.as_str(), &["tagKey"], values));
        }
    }
    shape::limit_series(&mut series, t.slimit, t.soffset);
    Ok(with_series(id, series))
}

/// `SHOW TAG VALUES`: written straight from the engine's rows (see
/// [`shape::key_value_series`]).
pub(super) fn tag_values(
    ctx: &Ctx,
    t: &sluice_influxql::ShowTagValues,
    id: usize,
) -> Result<Outcome, String> {
    // Checked here even when the pods list the values, with the request's time, as one pod
    // checks it: what the pods answer does not depend on the time then.
    let (db, filter) = selected(ctx, &t.database, &t.sources, t.condition.as_ref())?;
    let out = match &ctx.gather {
        None => series_output(
            ctx.app,
            &ctx.budget,
            &meta::tag_values_sql(&meta::local_series(false), &filter, &t.key, t.order),
        )?,
        // Each pod lists its distinct values; the gathering pod only merges and orders them.
        Some(g) => {
            let what = Partial::TagValues {
                db,
                q: ctx.req.q.to_string(),
                params: ctx.req.params.map(str::to_string),
                statement: id,
                now: ctx.now_ns,
            };
            g.series_output(&ctx.budget, &what, meta::TAG_VALUES_STRUCTURE, &|url| {
                meta::gathered_tag_values_sql(url, &t.key, t.order)
            })?
        }
    };
    Ok(Outcome::Series {
        id,
        series: shape::key_value_series(&out, t.limit, t.offset)?,
        messages: None,
    })
}

/// `SHOW FIELD KEYS`: from the catalog (the tenant's, when gathering).
pub(super) fn field_keys(
    ctx: &Ctx,
    f: &sluice_influxql::ShowFieldKeys,
    id: usize,
) -> Result<Value, String> {
    let db = database(ctx, f.database.as_deref())?;
    let mut series = Vec::new();
    for (measurement, fields) in sources_of(ctx, &db, ctx.req.rp, &f.sources)? {
        let values: Vec<Value> = fields
            .iter()
            .map(|(k, t)| json!([k, meta::field_type_name(*t)]))
            .collect();
        let values = meta::page(values, f.limit, f.offset);
        if !values.is_empty() {
            series.push(meta::series(
                Some(&measurement),
                &["fieldKey", "fieldType"],
                values,
            ));
        }
    }
    Ok(with_series(id, series))
}

/// `SHOW SERIES`: series keys as InfluxDB prints them, sorted.
pub(super) fn series(
    ctx: &Ctx,
    s: &sluice_influxql::ShowSeries,
    id: usize,
) -> Result<Value, String> {
    let rows = listed(
        ctx,
        &s.database,
        &s.sources,
        s.condition.as_ref(),
        id,
        true,
        &|from, filter| meta::series_sql(from, filter),
    )?;
    let mut keys: Vec<String> = rows
        .rows
        .iter()
        .filter_map(|r| {
            let m = r.first()?.as_str()?;
            let tags: serde_json::Map<String, Value> =
                serde_json::from_str(r.get(1)?.as_str()?).ok()?;
            Some(meta::series_key(m, &tags))
        })
        .collect();
    keys.sort();
    if s.order == Some(sluice_influxql::SortOrder::Descending) {
        keys.reverse();
    }
    let values = meta::page(
        keys.into_iter().map(|k| json!([k])).collect(),
        s.limit,
        s.offset,
    );
    Ok(with_series(
        id,
        if values.is_empty() {
            vec![]
        } else {
            vec![meta::series(None, &["key"], values)]
        },
    ))
}

//! Running `SELECT ... FROM (SELECT ...)` ([`super::subquery`] plans it): the inner statement
//! planned as any other, here or gathered from every pod, and the outer one over its rows on
//! this pod.

use sluice_core::FieldType;
use sluice_influxql::{SelectStatement, Source as FromSource};

use super::fetch::fetch_with;
use super::select::{final_source, gathered, needs_tag_keys, plan_here, tag_keys, One, Statement};
use super::{database, plan, policy, shape, sources_of, subquery, Ctx, Fields, PlanError};
use crate::engine::Readers;

/// The measurement an inner statement reads, resolved.
struct Inner {
    db: String,
    rp: String,
    measurement: String,
    fields: Fields,
    tag_keys: Vec<String>,
}

fn unsupported(what: &str) -> String {
    PlanError::Unsupported(format!("{what} is not supported by sluice yet")).to_string()
}

/// The outer statement's series from `FROM (inner)`, appended to `out`.
pub(super) fn select(
    ctx: &Ctx,
    outer: &SelectStatement,
    inner: &SelectStatement,
    id: usize,
    epoch: Option<i64>,
    out: &mut Vec<Vec<u8>>,
) -> Result<(), String> {
    let inner = subquery::inner_statement(outer, inner).map_err(|e| e.to_string())?;
    let Some(src) = resolve(ctx, &inner)? else {
        return Ok(());
    };
    let one = One {
        db: &src.db,
        rp: &src.rp,
        measurement: &src.measurement,
        fields: &src.fields,
        tag_keys: &src.tag_keys,
        statement: id,
    };
    let planned = match &ctx.gather {
        None => plan_here(ctx, &inner, &one)?,
        Some(_) => plan::plan(
            &inner,
            &final_source(&one),
            ctx.now_ns,
            plan::Mode::Final(""),
        )
        .map_err(|e| e.to_string())?,
    };
    let Some(inner_plan) = planned else {
        return Ok(());
    };
    let Some(types) = inner_plan.value_types.clone() else {
        return Err(unsupported(
            "a subquery answering top() or bottom() with tags beside it",
        ));
    };
    let columns: Vec<(String, FieldType)> = inner_plan
        .columns
        .iter()
        .skip(1)
        .cloned()
        .zip(types)
        .collect();
    let inner_fields: Fields = columns.iter().cloned().collect();
    let (table, series) = subquery::tables(&columns);
    let src = plan::Source {
        db: one.db,
        measurement: one.measurement,
        table: &table,
        fields: &inner_fields,
        tag_keys: &inner_plan.grouping_keys,
        series: Some(&series),
    };
    let Some(p) =
        plan::plan(outer, &src, ctx.now_ns, plan::Mode::Whole).map_err(|e| e.to_string())?
    else {
        return Ok(());
    };
    let one_thread = inner_plan.one_thread || p.one_thread;
    let rows = match &ctx.gather {
        None => {
            let settings = crate::engine::ReadSettings {
                aggregation_in_order: inner_plan.aggregation_in_order,
                planned: !one_thread,
                materialized_cte: true,
                ..Default::default()
            };
            let sql = subquery::around(&p.sql, &inner_plan.sql);
            fetch_with(ctx.app, &ctx.budget, Readers::Local, &settings, &sql, true)?
        }
        Some(g) => {
            // The pods plan the inner statement from its text, as they plan a request's.
            let q = inner.to_string();
            let text = Statement { q: &q, index: 0 };
            let finish = |inner_sql: &str| Some(subquery::around(&p.sql, inner_sql));
            let Some(rows) = gathered(ctx, g, &inner, &one, &text, one_thread, &finish)? else {
                return Ok(());
            };
            rows
        }
    };
    shape::series(one.measurement, &p.columns, p.tagged, rows, epoch, out)
}

/// The one measurement `inner` reads (none when it does not exist).
fn resolve(ctx: &Ctx, inner: &SelectStatement) -> Result<Option<Inner>, String> {
    let [FromSource::Measurement(m)] = inner.sources.as_slice() else {
        return Err(unsupported("a subquery over several measurements"));
    };
    let db = database(ctx, m.database.as_deref())?;
    let rp = policy(ctx, &db, m.retention_policy.as_deref(), ctx.req.rp)?;
    let mut found = sources_of(ctx, &db, Some(&rp), std::slice::from_ref(m))?;
    if found.len() > 1 {
        return Err(unsupported("a subquery over several measurements"));
    }
    let Some((measurement, fields)) = found.pop() else {
        return Ok(None);
    };
    if let Some(conflict) = ctx.view.conflict(&db, &rp, &measurement) {
        return Err(conflict);
    }
    let tag_keys = if needs_tag_keys(inner) {
        tag_keys(ctx, &db, &measurement)?
    } else {
        vec![]
    };
    Ok(Some(Inner {
        db,
        rp,
        measurement,
        fields,
        tag_keys,
    }))
}

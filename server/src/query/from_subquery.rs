//! Running `SELECT ... FROM (SELECT ...)` ([`super::subquery`] plans each level): the
//! innermost statement, over a measurement, is planned as any other statement (here or
//! gathered from every pod), and each statement around it over the answer of the one inside,
//! on this pod.

use sluice_core::FieldType;
use sluice_influxql::{SelectStatement, Source as FromSource};

use super::fetch::output_with;
use super::select::{final_source, gathered, plan_here, resolve, Resolved, Statement};
use super::{plan, shape, subquery, Ctx, Fields, PlanError};
use crate::engine::Readers;

/// A statement's answer, planned: over a measurement, or over the answer of the statement
/// inside it.
enum Answer {
    Measurement {
        statement: Box<SelectStatement>,
        src: Resolved,
        plan: plan::Plan,
    },
    Subquery {
        inner: Box<Answer>,
        plan: plan::Plan,
        /// How deep it sits (1 around the innermost statement): the name of the answer it reads.
        depth: usize,
    },
}

impl Answer {
    fn plan(&self) -> &plan::Plan {
        match self {
            Answer::Measurement { plan, .. } | Answer::Subquery { plan, .. } => plan,
        }
    }

    /// Its SQL over the innermost statement's SQL `base` (on this pod, or the gathering pod's
    /// part over every pod's share).
    fn sql(&self, base: &str) -> String {
        match self {
            Answer::Measurement { .. } => base.to_string(),
            Answer::Subquery { inner, plan, depth } => {
                subquery::around(&plan.sql, &inner.sql(base), *depth)
            }
        }
    }

    fn innermost(&self) -> (&SelectStatement, &Resolved, &plan::Plan) {
        match self {
            Answer::Measurement {
                statement,
                src,
                plan,
            } => (statement, src, plan),
            Answer::Subquery { inner, .. } => inner.innermost(),
        }
    }

    /// Whether some level must run on one thread.
    fn one_thread(&self) -> bool {
        match self {
            Answer::Measurement { plan, .. } => plan.one_thread,
            Answer::Subquery { inner, plan, .. } => plan.one_thread || inner.one_thread(),
        }
    }
}

fn unsupported(what: &str) -> String {
    PlanError::Unsupported(format!("{what} is not supported by sluice yet")).to_string()
}

/// The outer statement's series from `FROM (inner)`, appended to `out`.
pub(super) fn select(
    ctx: &Ctx,
    outer: &SelectStatement,
    inner: &SelectStatement,
    epoch: Option<i64>,
    out: &mut Vec<Vec<u8>>,
) -> Result<(), String> {
    if subquery::depth(inner) > subquery::MAX_DEPTH {
        return Err(unsupported(&format!(
            "subqueries nested more than {} deep",
            subquery::MAX_DEPTH
        )));
    }
    let Some(answer) = around(ctx, outer, inner)? else {
        return Ok(());
    };
    let (statement, src, base) = answer.innermost();
    let one_thread = answer.one_thread();
    let rows = match &ctx.gather {
        None => {
            let settings = crate::engine::ReadSettings {
                aggregation_in_order: base.aggregation_in_order,
                planned: !one_thread,
                materialized_cte: true,
                ..Default::default()
            };
            let sql = answer.sql(&base.sql);
            let out = output_with(ctx.app, &ctx.budget, Readers::Local, &settings, &sql, true)?;
            shape::parse_rows(&out)?
        }
        Some(g) => {
            // The pods plan the innermost statement from its text, as they plan a request's.
            let q = statement.to_string();
            let text = Statement {
                q: &q,
                params: None,
                index: 0,
                ordered_sums: false,
            };
            let finish = |sql: &str| Some(answer.sql(sql));
            let one = src.one();
            let Some(rows) = gathered(ctx, g, statement, &one, &text, one_thread, &finish)? else {
                return Ok(());
            };
            rows
        }
    };
    let p = answer.plan();
    shape::series(&src.name, &p.columns, p.tagged, rows, epoch, out)
}

/// `outer` planned over the answer of `inner` (and so on inwards).
fn around(
    ctx: &Ctx,
    outer: &SelectStatement,
    inner: &SelectStatement,
) -> Result<Option<Answer>, String> {
    let inner = subquery::inner_statement(outer, inner).map_err(|e| e.to_string())?;
    let answer = match inner.sources.as_slice() {
        [FromSource::Subquery(deeper)] => around(ctx, &inner, deeper)?,
        [FromSource::Measurement(_)] => over_measurement(ctx, inner)?,
        _ => return Err(unsupported("a subquery over several measurements")),
    };
    let Some(answer) = answer else {
        return Ok(None);
    };
    let depth = match &answer {
        Answer::Measurement { .. } => 1,
        Answer::Subquery { depth, .. } => depth + 1,
    };
    let inner_plan = answer.plan();
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
    let fields: Fields = columns.iter().cloned().collect();
    let (table, series) = subquery::tables(&columns, depth);
    let (_, m, _) = answer.innermost();
    let src = plan::Source {
        db: &m.db,
        measurement: &m.name,
        table: &table,
        fields: &fields,
        tag_keys: &inner_plan.grouping_keys,
        series: Some(&series),
        series_ids: None,
        series_tags: None,
        ordered_sums: false,
    };
    let Some(plan) =
        plan::plan(outer, &src, ctx.now_ns, plan::Mode::Whole).map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    Ok(Some(Answer::Subquery {
        inner: Box::new(answer),
        plan,
        depth,
    }))
}

/// The innermost statement, over its one measurement (none when that does not exist).
fn over_measurement(ctx: &Ctx, statement: SelectStatement) -> Result<Option<Answer>, String> {
    let [FromSource::Measurement(m)] = statement.sources.as_slice() else {
        return Err(unsupported("a subquery over several measurements"));
    };
    let mut found = resolve(ctx, &statement, m)?;
    if found.len() > 1 {
        return Err(unsupported("a subquery over several measurements"));
    }
    let Some(src) = found.pop() else {
        return Ok(None);
    };
    let planned = {
        let one = src.one();
        match &ctx.gather {
            None => plan_here(ctx, &statement, &one)?,
            Some(_) => plan::plan(
                &statement,
                &final_source(&one),
                ctx.now_ns,
                plan::Mode::Final(""),
            )
            .map_err(|e| e.to_string())?,
        }
    };
    Ok(planned.map(|plan| Answer::Measurement {
        statement: Box::new(statement),
        src,
        plan,
    }))
}

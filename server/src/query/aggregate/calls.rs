//! An aggregate's calls, each planned as columns of the grouped rows: its aggregate (or the
//! parts inside its arithmetic), what makes a bucket a point, and what the answer makes of it
//! once the gaps are filled.

use sluice_core::FieldType;
use sluice_influxql::{Expr, Fill};

use super::super::buckets::Bucketing;
use super::super::cond::{self, types};
use super::super::functions;
use super::super::math;
use super::super::plan::{value_col, Query};
use super::super::raw::Transformed;
use super::super::PlanError;
use super::fill_sql;

/// The calls of a select list, planned.
pub(super) struct Calls {
    /// The grouped rows' columns.
    pub cols: Vec<String>,
    /// SQL true where a call (or a part of one) has a value: what makes a group's bucket a
    /// point (`HAVING`).
    pub present: Vec<String>,
    /// The calls that are `count()` (a gap is 0 under `fill(null)`).
    pub counts: Vec<usize>,
    /// The transforms over the buckets (`derivative(mean(v))`), by call.
    pub transforms: Vec<Transformed>,
    /// The calls that are no transform, with SQL true where one has a value.
    pub plain: Vec<(usize, String)>,
    /// Per call, what the answer makes of its filled parts (else its column).
    pub outer: Vec<Option<String>>,
}

impl Query<'_> {
    /// Each call of `exprs` as columns of the grouped rows, its aggregates' states in
    /// `states`.
    pub(super) fn calls(
        &self,
        exprs: &[&Expr],
        bucketing: Option<&Bucketing>,
        states: &mut functions::States,
    ) -> Result<Calls, PlanError> {
        let mut c = Calls {
            cols: Vec::new(),
            present: Vec::new(),
            counts: Vec::new(),
            transforms: Vec::new(),
            plain: Vec::new(),
            outer: Vec::new(),
        };
        let fill = self.stmt.fill.unwrap_or(Fill::Null);
        let desc = self.descending();
        let asked = self.asked_rows();
        for (i, e) in exprs.iter().enumerate() {
            let (wraps, e, transform) = self.transform_around(e, bucketing)?;
            // Beside a transform that reads a bucket more, the other calls read the asked
            // range alone, as InfluxDB gives that bucket to the transform's iterator only.
            let only = if functions::reads_a_bucket_more(exprs[i]) {
                None
            } else {
                asked.as_deref()
            };
            let bare = matches!(e, Expr::Call { name, .. } if !math::is_math(name));
            // A count fills its gaps with 0, unless it counts a field the measurement does
            // not have, which InfluxDB leaves null in every bucket.
            let counted = !counts_a_missing_field(e, self.scope);
            let first_part = c.present.len();
            if bucketing.is_some() && fill != Fill::None && !bare {
                // Each call filled before the arithmetic or math over it, as in InfluxDB:
                // `mean(v) * 2` with `fill(1)` is 2 in an empty bucket, `count(v) * 2` is 0.
                let mut parts = Vec::new();
                let present = &mut c.present;
                let whole = self.agg_expr(e, only, states, &mut |name, sql| {
                    let col = format!("{}_{}", value_col(i), parts.len());
                    parts.push(format!("toNullable({}) AS {col}", no_values(name, sql)));
                    present.push(format!("{col} IS NOT NULL"));
                    // Inside arithmetic or math: a number.
                    fill_sql(
                        &col,
                        fill,
                        name == "count" && counted,
                        desc,
                        FieldType::Float,
                    )
                })?;
                c.cols.extend(parts);
                c.outer.push(Some(whole));
            } else {
                let sql = self.agg_expr(e, only, states, &mut no_values)?;
                c.cols
                    .push(format!("toNullable({sql}) AS {}", value_col(i)));
                c.present.push(format!("{} IS NOT NULL", value_col(i)));
                c.outer.push(None);
            }
            if transform.is_none() {
                c.plain.push((i, c.present[first_part..].join(" OR ")));
            }
            if counted && matches!(e, Expr::Call { name, .. } if name == "count") {
                c.counts.push(i);
            }
            if let Some(t) = transform {
                c.transforms.push((i, t, wraps));
            }
        }
        Ok(c)
    }

    /// A call as the math around its transform, the aggregate inside, and the transform:
    /// `derivative(mean(v), 1s)` aggregates per bucket here and transforms the buckets after
    /// the gaps are filled; in `abs(derivative(mean(v)))` the math applies to the transform's
    /// values.
    fn transform_around<'e>(
        &self,
        e: &'e Expr,
        bucketing: Option<&Bucketing>,
    ) -> Result<(Vec<math::Wrap>, &'e Expr, Option<functions::Transform>), PlanError> {
        let per = bucketing.map_or(1_000_000_000, |b| b.every);
        let (wraps, e) = match math::around_transform(e)? {
            Some((wraps, t)) => (wraps, t),
            None => (Vec::new(), e),
        };
        let Some((t, inner)) = functions::transform_of(e, per)? else {
            return Ok((wraps, e, None));
        };
        if matches!(inner, Expr::VarRef { .. }) {
            return Err(PlanError::Invalid(format!(
                "aggregate function required inside the call to {}",
                t.name()
            )));
        }
        if bucketing.is_none() {
            return Err(PlanError::Invalid(format!(
                "{} aggregate requires a GROUP BY interval",
                t.name()
            )));
        }
        functions::check_transform_input(&t, inner, self.src.fields)?;
        Ok((wraps, inner, Some(t)))
    }

    /// An expression of an aggregate query: calls become ClickHouse aggregates; constants,
    /// arithmetic and math stay; a bare field is InfluxDB's "mixing" error. `leaf` gets each
    /// aggregate call's name and SQL and says what stands for it in the expression.
    fn agg_expr(
        &self,
        e: &Expr,
        only: Option<&str>,
        states: &mut functions::States,
        leaf: &mut dyn FnMut(&str, String) -> String,
    ) -> Result<String, PlanError> {
        match e {
            Expr::Call { name, args } if math::is_math(name) => {
                if let Some(t) = args.iter().find_map(transform_in) {
                    return Err(PlanError::Unsupported(format!(
                        "{name}() of {t}() is not supported by sluice yet"
                    )));
                }
                let sql_args = args
                    .iter()
                    .map(|a| self.agg_expr(a, only, states, leaf))
                    .collect::<Result<Vec<_>, _>>()?;
                // InfluxDB's math of a string or a boolean (`ln(first("s"))`) is null.
                if types::any_text(args, self.scope) {
                    return Ok("NULL".into());
                }
                math::sql(name, &sql_args)
            }
            Expr::Call { name, args } => {
                let sql = functions::call_sql(self.scope, states, name, args, only)?;
                Ok(leaf(name, sql))
            }
            Expr::Distinct(_) => Err(PlanError::Unsupported(
                "DISTINCT returns a row per value, which sluice does not run yet: use count(distinct(\"f\"))".into(),
            )),
            Expr::Literal(l) => cond::literal_sql(l),
            Expr::Paren(inner) => Ok(format!("({})", self.agg_expr(inner, only, states, leaf)?)),
            Expr::Binary { lhs, op, rhs } => {
                let a = self.agg_expr(lhs, only, states, leaf)?;
                let b = self.agg_expr(rhs, only, states, leaf)?;
                if types::is_arithmetic(*op) && !types::check(lhs, *op, rhs, self.scope)? {
                    return Ok("NULL".into());
                }
                math::arithmetic_sql(&a, *op, &b)
            }
            Expr::VarRef { .. } | Expr::Wildcard(_) => Err(PlanError::Invalid(
                "mixing aggregate and non-aggregate queries is not supported".into(),
            )),
        }
    }
}

/// Whether `e` counts a field (or its distinct values) that the measurement does not have.
fn counts_a_missing_field(e: &Expr, scope: &cond::Scope) -> bool {
    let mut missing = false;
    cond::visit(e, &mut |x| {
        let Expr::Call { name, args } = x else {
            return;
        };
        let counted = match (name.as_str(), args.first()) {
            ("count", Some(Expr::Call { name, args })) if name == "distinct" => args.first(),
            ("count", arg) => arg,
            _ => None,
        };
        if let Some(Expr::VarRef { name, .. }) = counted {
            missing |= !scope.fields.contains_key(name);
        }
    });
    missing
}

/// A call's value where it has no values to work on: `count` of none is no value (InfluxDB
/// has no point there, and fills it as an empty bucket), not 0; the others are NULL already.
fn no_values(name: &str, sql: String) -> String {
    if name == "count" {
        // Int64, InfluxDB's type of a count: a fill of -1 must fit it.
        format!("nullIf(toInt64({sql}), 0)")
    } else {
        sql
    }
}
/// InfluxDB answers one selector with other fields or tags beside it (`max("v"), "host"`: the
/// host of the greatest point); sluice does not yet, and says so rather than calling it mixing.
pub(super) fn lone_selector_beside_fields(exprs: &[&Expr]) -> Result<(), PlanError> {
    let mut calls = Vec::new();
    let mut bare = false;
    for e in exprs {
        let before = calls.len();
        cond::visit(e, &mut |x| match x {
            Expr::Call { name, .. } if !math::is_math(name) => calls.push(name.clone()),
            _ => {}
        });
        bare |= calls.len() == before;
    }
    match calls.as_slice() {
        [name] if bare && functions::function_kind(name) == Some(functions::Kind::Selector) => {
            Err(PlanError::Unsupported(format!(
                "{name}() with other fields or tags beside it is not supported by sluice yet"
            )))
        }
        _ => Ok(()),
    }
}
/// The name of a transform `e` calls, if any.
fn transform_in(e: &Expr) -> Option<String> {
    let mut found = None;
    cond::visit(e, &mut |x| match x {
        Expr::Call { name, .. } if functions::is_transform(name) => found = Some(name.clone()),
        _ => {}
    });
    found
}

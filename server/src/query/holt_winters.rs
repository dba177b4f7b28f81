//! `holt_winters(agg, N, S)` and `holt_winters_with_fit(agg, N, S)`, which Grafana's query
//! builder offers as "Predictors": the statement runs with the call replaced by its aggregate
//! (here or gathered from every pod, as any statement), and each series of buckets is then
//! forecast ([`super::forecast`]), as InfluxDB 1.8 does over its aggregate's points.
//!
//! As in InfluxDB, `fill()` does not apply (only buckets with points are the model's input),
//! `LIMIT`/`OFFSET` count the forecast's rows, a series too short for the model has none and
//! is left out, and `ORDER BY time DESC` forecasts nothing.

use std::time::Instant;

use serde_json::Value;
use sluice_influxql::{BinaryOp, Expr, Field, Fill, Literal, SelectStatement, Source};

use super::answer::Outcome;
use super::forecast::{Model, Refused, MAX_SPAN};
use super::select::Statement;
use super::shape::{self, Rows};
use super::{select, time, Ctx, PlanError};

/// Most seasons a model may have: the search's simplex holds (S + 7)² numbers and each of its
/// steps reads them all.
const MAX_SEASON: i64 = 1_000;

/// A select list's `holt_winters()` call, checked.
#[derive(Debug)]
pub(super) struct Call<'e> {
    aggregate: &'e Expr,
    model: Model,
    column: String,
    /// Arithmetic with constants around the call, innermost first.
    around: Vec<Around>,
}

#[derive(Debug, Clone, Copy)]
struct Around {
    op: BinaryOp,
    constant: f64,
    value_left: bool,
}

fn is_holt_winters(e: &Expr) -> bool {
    matches!(e, Expr::Call { name, .. } if name == "holt_winters" || name == "holt_winters_with_fit")
}

/// The first `holt_winters()` call in `e`, outermost first.
fn find(e: &Expr) -> Option<&Expr> {
    if is_holt_winters(e) {
        return Some(e);
    }
    match e {
        Expr::Binary { lhs, rhs, .. } => find(lhs).or_else(|| find(rhs)),
        Expr::Paren(inner) => find(inner),
        Expr::Call { args, .. } => args.iter().find_map(find),
        _ => None,
    }
}

fn unsupported(what: &str) -> PlanError {
    PlanError::Unsupported(format!("{what} is not supported by sluice yet"))
}

/// The statement's `holt_winters()` call, checked as InfluxDB 1.8 checks it; `None` without
/// one.
pub(super) fn call(sel: &SelectStatement) -> Result<Option<Call<'_>>, PlanError> {
    let Some((index, hw)) = sel
        .fields
        .iter()
        .enumerate()
        .find_map(|(i, f)| find(&f.expr).map(|e| (i, e)))
    else {
        return Ok(None);
    };
    let Expr::Call { name, args } = hw else {
        unreachable!("is_holt_winters checked");
    };
    let (aggregate, h, m, interval) = influxdb_checks(sel, name, args)?;
    sluice_checks(sel, name, aggregate, h, m)?;
    let field = &sel.fields[index];
    let around = arithmetic_around(&field.expr, hw)
        .ok_or_else(|| unsupported(&format!("{name}() inside this expression")))?;
    Ok(Some(Call {
        aggregate,
        model: Model {
            h: h as usize,
            m: m as usize,
            with_fit: name == "holt_winters_with_fit",
            interval,
        },
        column: field.column_name(),
        around,
    }))
}

/// InfluxDB 1.8's checks of the call, in its order and words: the aggregate, N, S and the
/// `GROUP BY time` interval (nanoseconds).
fn influxdb_checks<'e>(
    sel: &SelectStatement,
    name: &str,
    args: &'e [Expr],
) -> Result<(&'e Expr, i64, i64, i64), PlanError> {
    if args.len() != 3 {
        return Err(PlanError::Invalid(format!(
            "invalid number of arguments for {name}, expected 3, got {}",
            args.len()
        )));
    }
    let h = match &args[1] {
        Expr::Literal(Literal::Integer(n)) if *n <= 0 => {
            return Err(PlanError::Invalid(format!(
                "second arg to {name} must be greater than 0, got {n}"
            )))
        }
        Expr::Literal(Literal::Integer(n)) => *n,
        _ => {
            return Err(PlanError::Invalid(format!(
                "expected integer argument as second arg in {name}"
            )))
        }
    };
    let m = match &args[2] {
        Expr::Literal(Literal::Integer(n)) if *n < 0 => {
            return Err(PlanError::Invalid(format!(
                "third arg to {name} cannot be negative, got {n}"
            )))
        }
        Expr::Literal(Literal::Integer(n)) => *n,
        _ => {
            return Err(PlanError::Invalid(format!(
                "expected integer argument as third arg in {name}"
            )))
        }
    };
    let aggregate = match &args[0] {
        Expr::Call { .. } => &args[0],
        _ => {
            return Err(PlanError::Invalid(format!(
                "must use aggregate function with {name}"
            )))
        }
    };
    let Some((interval, _)) = sel.group_by_time() else {
        return Err(PlanError::Invalid(format!(
            "{name} aggregate requires a GROUP BY interval"
        )));
    };
    if interval.as_nanos() <= 0 {
        return Err(PlanError::Invalid(format!(
            "invalid GROUP BY time interval: {interval} (it must be positive)"
        )));
    }
    Ok((aggregate, h, m, interval.as_nanos()))
}

/// What sluice does not run yet, and the bounds on what one call may hold.
fn sluice_checks(
    sel: &SelectStatement,
    name: &str,
    aggregate: &Expr,
    h: i64,
    m: i64,
) -> Result<(), PlanError> {
    let Expr::Call {
        name: agg,
        args: agg_args,
    } = aggregate
    else {
        unreachable!("influxdb_checks took a call");
    };
    if super::functions::function_kind(agg).is_none()
        || agg_args
            .iter()
            .any(|a| matches!(a, Expr::Wildcard(_) | Expr::Literal(Literal::Regex(_))))
    {
        return Err(unsupported(&format!("{name}() of {aggregate}")));
    }
    if sel.fields.len() > 1 {
        return Err(unsupported(&format!("{name}() beside other fields")));
    }
    if sel.sources.iter().any(|s| matches!(s, Source::Subquery(_))) {
        return Err(unsupported(&format!("{name}() over a subquery")));
    }
    if h > super::plan::MAX_BUCKETS {
        return Err(PlanError::Invalid(format!(
            "{name} forecasts at most {} values, not {h}",
            super::plan::MAX_BUCKETS
        )));
    }
    if m > MAX_SEASON {
        return Err(PlanError::Invalid(format!(
            "{name} takes a season of at most {MAX_SEASON} intervals, not {m}"
        )));
    }
    Ok(())
}

/// The arithmetic with number constants between `e` and the call `hw` inside it, innermost
/// first; `None` when something else stands around it.
fn arithmetic_around(e: &Expr, hw: &Expr) -> Option<Vec<Around>> {
    let mut out = Vec::new();
    let mut at = e;
    while !std::ptr::eq(at, hw) {
        match at {
            Expr::Paren(inner) => at = inner,
            Expr::Binary { lhs, op, rhs }
                if matches!(
                    op,
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
                ) =>
            {
                let (inner, constant, value_left) = match (&**lhs, &**rhs) {
                    (x, Expr::Literal(l)) => (x, number(l)?, true),
                    (Expr::Literal(l), x) => (x, number(l)?, false),
                    _ => return None,
                };
                out.push(Around {
                    op: *op,
                    constant,
                    value_left,
                });
                at = inner;
            }
            _ => return None,
        }
    }
    out.reverse();
    Some(out)
}

fn number(l: &Literal) -> Option<f64> {
    match l {
        Literal::Integer(n) => Some(*n as f64),
        Literal::Unsigned(n) => Some(*n as f64),
        Literal::Float(v) => Some(*v),
        _ => None,
    }
}

impl Around {
    /// InfluxDB's float arithmetic: a division by zero is 0.
    fn apply(&self, v: f64) -> f64 {
        let (a, b) = if self.value_left {
            (v, self.constant)
        } else {
            (self.constant, v)
        };
        match self.op {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div if b == 0.0 => 0.0,
            _ => a / b,
        }
    }
}

impl Call<'_> {
    /// The statement the engine runs: the aggregate alone, named as the call's column, over
    /// the buckets that have points, every row of them.
    fn inner(&self, sel: &SelectStatement) -> SelectStatement {
        SelectStatement {
            fields: vec![Field {
                expr: self.aggregate.clone(),
                alias: Some(self.column.clone()),
            }],
            fill: Some(Fill::None),
            limit: None,
            offset: None,
            slimit: None,
            soffset: None,
            ..sel.clone()
        }
    }

    /// Each series of `rows` (`tags, time, value`, a series' rows together) replaced by its
    /// forecast, within the statement's `LIMIT` and `OFFSET`.
    fn forecast(
        &self,
        sel: &SelectStatement,
        rows: Rows,
        deadline: Instant,
    ) -> Result<Rows, Refused> {
        let mut out = Vec::new();
        let mut rows = rows.rows.into_iter().peekable();
        while let Some(first) = rows.next() {
            let tags = first.first().cloned().unwrap_or(Value::Null);
            let mut points = Vec::new();
            let mut push = |row: Vec<Value>| {
                if let (Some(t), Some(v)) = (
                    row.get(1).and_then(Value::as_i64),
                    row.get(2).and_then(Value::as_f64),
                ) {
                    points.push((t, v));
                }
            };
            push(first);
            while let Some(row) = rows.next_if(|r| r.first() == Some(&tags)) {
                push(row);
            }
            let forecast = self.model.forecast(&points, deadline)?;
            let skip = sel.offset.unwrap_or(0) as usize;
            let take = sel.limit.map_or(usize::MAX, |l| l as usize);
            for (t, v) in forecast.into_iter().skip(skip).take(take) {
                let v = self.around.iter().fold(v, |v, a| a.apply(v));
                out.push(vec![tags.clone(), Value::from(t), Value::from(v)]);
            }
        }
        Ok(Rows { rows: out })
    }
}

/// The statement's answer (see the module's doc).
pub(super) fn select(
    ctx: &Ctx,
    sel: &SelectStatement,
    call: &Call,
    id: usize,
) -> Result<Outcome, String> {
    let inner = call.inner(sel);
    // The pods plan the aggregate from its text, as they plan a request's, adding each
    // bucket's points in time order: a sum in another order can differ in its last bit, and
    // the fit can turn that into another forecast (with points spread over three pods, one
    // series in four forecast 10 % apart).
    let q = inner.to_string();
    let text = Statement {
        q: &q,
        params: None,
        index: 0,
        ordered_sums: true,
    };
    let epoch = time::epoch_unit(ctx.req.epoch);
    // The fit shares the request's time with its reads.
    let deadline = ctx
        .budget
        .deadline()
        .unwrap_or_else(|| Instant::now() + ctx.app.cfg.query.timeout);
    let mut series = Vec::new();
    let measurements: Vec<_> = inner
        .sources
        .iter()
        .filter_map(|s| match s {
            Source::Measurement(m) => Some(m),
            Source::Subquery(_) => None,
        })
        .collect();
    select::measurement_rows(ctx, &inner, &measurements, &text, &mut |name, p, rows| {
        let rows = call.forecast(sel, rows, deadline).map_err(|e| match e {
            Refused::Expired => format!(
                "holt_winters() ran past query.timeout ({}): forecast fewer series or fewer intervals",
                sluice_core::config::format_duration(ctx.app.cfg.query.timeout)
            ),
            Refused::TooLong(span) => format!(
                "holt_winters() of a series spanning {span} intervals, more than {MAX_SPAN}: use a larger interval or a shorter range"
            ),
        })?;
        shape::series(name, &p.columns, p.tagged, rows, epoch, &mut series)
    })?;
    Ok(select::outcome(sel, id, series))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(q: &str) -> Result<Option<(Model, String, usize)>, String> {
        let sel = crate::query::plan::select_of(q);
        call(&sel)
            .map(|c| c.map(|c| (c.model, c.column.clone(), c.around.len())))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn finds_the_call_its_model_and_its_column() {
        assert!(checked("SELECT mean(v) FROM m GROUP BY time(1m)")
            .unwrap()
            .is_none());
        let (m, col, around) =
            checked("SELECT holt_winters_with_fit(mean(v), 10, 4) FROM m GROUP BY time(1m)")
                .unwrap()
                .unwrap();
        assert_eq!(
            (m.h, m.m, m.with_fit, m.interval),
            (10, 4, true, 60_000_000_000)
        );
        assert_eq!((col.as_str(), around), ("holt_winters_with_fit", 0));
        let (_, col, around) =
            checked("SELECT (holt_winters(max(v), 3, 0) / 100) * 8 AS p FROM m GROUP BY time(1m)")
                .unwrap()
                .unwrap();
        assert_eq!((col.as_str(), around), ("p", 2));
    }

    #[test]
    fn refuses_what_influxdb_refuses_in_its_words() {
        let error = |q: &str| checked(q).unwrap_err();
        let g = "FROM m GROUP BY time(1m)";
        assert_eq!(
            error(&format!("SELECT holt_winters(mean(v), 2) {g}")),
            "invalid number of arguments for holt_winters, expected 3, got 2"
        );
        assert_eq!(
            error(&format!("SELECT holt_winters(mean(v), 0, 1) {g}")),
            "second arg to holt_winters must be greater than 0, got 0"
        );
        assert_eq!(
            error(&format!("SELECT holt_winters(mean(v), 2.5, 1) {g}")),
            "expected integer argument as second arg in holt_winters"
        );
        assert_eq!(
            error(&format!("SELECT holt_winters(mean(v), 2, -1) {g}")),
            "third arg to holt_winters cannot be negative, got -1"
        );
        assert_eq!(
            error(&format!("SELECT holt_winters(v, 2, 1) {g}")),
            "must use aggregate function with holt_winters"
        );
        assert_eq!(
            error("SELECT holt_winters(mean(v), 2, 1) FROM m"),
            "holt_winters aggregate requires a GROUP BY interval"
        );
    }

    #[test]
    fn bounds_what_one_call_may_cost_and_names_what_sluice_does_not_run() {
        let error = |q: &str| checked(q).unwrap_err();
        let g = "FROM m GROUP BY time(1m)";
        assert!(error(&format!("SELECT holt_winters(mean(v), 1, 5000) {g}")).contains("season"));
        assert!(
            error(&format!("SELECT holt_winters(mean(v), 99999999, 0) {g}")).contains("at most")
        );
        for q in [
            format!("SELECT holt_winters(mean(v), 1, 0), mean(v) {g}"),
            format!("SELECT abs(holt_winters(mean(v), 1, 0)) {g}"),
            format!("SELECT holt_winters(mean(*), 1, 0) {g}"),
            format!("SELECT holt_winters(derivative(v), 1, 0) {g}"),
        ] {
            assert!(error(&q).contains("not supported by sluice yet"), "{q}");
        }
    }

    #[test]
    fn arithmetic_around_applies_as_influxdb_does() {
        let div = Around {
            op: BinaryOp::Div,
            constant: 0.0,
            value_left: true,
        };
        assert_eq!(div.apply(5.0), 0.0);
        let sub = Around {
            op: BinaryOp::Sub,
            constant: 10.0,
            value_left: false,
        };
        assert_eq!(sub.apply(4.0), 6.0);
    }

    #[test]
    fn each_series_is_forecast_on_its_own_within_limit_and_offset() {
        let sel = crate::query::plan::select_of(
            "SELECT holt_winters(mean(v), 3, 0) FROM m GROUP BY time(10ns), host LIMIT 2 OFFSET 1",
        );
        let c = call(&sel).unwrap().unwrap();
        let row =
            |tags: &str, t: i64, v: f64| vec![Value::from(tags), Value::from(t), Value::from(v)];
        let mut rows = Vec::new();
        for i in 0..10 {
            rows.push(row("a", i * 10, i as f64));
        }
        rows.push(row("b", 0, 1.0));
        for i in 0..10 {
            rows.push(row("c", i * 10, 2.0 * i as f64));
        }
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let out = c.forecast(&sel, Rows { rows }, far).unwrap().rows;
        let times: Vec<(&str, i64)> = out
            .iter()
            .map(|r| (r[0].as_str().unwrap(), r[1].as_i64().unwrap()))
            .collect();
        // `b` has one point: no forecast, no series.
        assert_eq!(times, [("a", 110), ("a", 120), ("c", 110), ("c", 120)]);
    }
}

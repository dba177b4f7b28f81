//! `SELECT ... FROM (SELECT ...)`: the inner statement's answer is the outer statement's
//! measurement, its columns the fields and its grouping tags the tags.
//!
//! The inner statement is planned as any other (on this pod, or gathered from every pod), and
//! its rows, computed once, become two tables the outer plan reads as it reads a
//! measurement's: the points (a series id from the row's tags, the time, one column per inner
//! column) and the series (that id and the tags). So the outer statement's aggregates, conditions, buckets and fill
//! are the ones every other statement gets, computed by the engine over the inner's rows.
//!
//! Before it is planned the inner statement takes from the outer what InfluxDB 1.8 gives it:
//! the outer's time range (the tighter bound of each side wins), the outer's `GROUP BY` tags,
//! its `GROUP BY time` interval when the inner aggregates without one, and its order; an
//! inner aggregate's `fill(null)` becomes `fill(none)` (an empty bucket would only be a null
//! the outer statement skips).

use std::collections::BTreeMap;

use sluice_core::names::quote_ident;
use sluice_core::FieldType;
use sluice_influxql::{BinaryOp, DataType, Dimension, Expr, Fill, SelectStatement, Source};

use super::plan::{value_col, TAGS, TIME};
use super::PlanError;

/// How deeply subqueries may nest. An outer statement that needs the tags of the answer
/// inside it reads that answer twice, and the engine analyses each reading apart, so a chain
/// of raw selects costs twice as much per level: ten levels took the 30 s timeout of one
/// query, eight took 5 s, three 68 ms.
pub(super) const MAX_DEPTH: usize = 3;

/// How many subqueries `inner` (itself one) and those inside it nest.
pub(super) fn depth(inner: &SelectStatement) -> usize {
    1 + inner
        .sources
        .iter()
        .map(|s| match s {
            Source::Subquery(deeper) => depth(deeper),
            Source::Measurement(_) => 0,
        })
        .max()
        .unwrap_or(0)
}

/// The statement a subquery runs as, given the outer statement around it.
pub(super) fn inner_statement(
    outer: &SelectStatement,
    inner: &SelectStatement,
) -> Result<SelectStatement, PlanError> {
    if outer.slimit.is_some() || outer.soffset.is_some() {
        return Err(PlanError::Unsupported(
            "SLIMIT or SOFFSET around a subquery is not supported by sluice yet".into(),
        ));
    }
    let mut s = inner.clone();
    // The outer's time conditions bound the inner's rows too.
    let mut parts = Vec::new();
    if let Some(c) = &outer.condition {
        super::cond::conjuncts(c, &mut parts);
    }
    let times: Vec<Expr> = parts
        .into_iter()
        .filter(|c| only_time(c))
        .cloned()
        .collect();
    for t in times {
        s.condition = Some(match s.condition.take() {
            None => t,
            Some(c) => Expr::Binary {
                lhs: Box::new(paren(c)),
                op: BinaryOp::And,
                rhs: Box::new(paren(t)),
            },
        });
    }
    let aggregates = s.fields.iter().any(|f| super::plan::has_call(&f.expr));
    let has_time = |g: &[Dimension]| g.iter().any(|d| matches!(d, Dimension::Time { .. }));
    for d in &outer.group_by {
        match d {
            Dimension::Time { .. } => {
                if aggregates && !has_time(&s.group_by) {
                    s.group_by.push(d.clone());
                }
            }
            other => {
                if !s.group_by.contains(other) {
                    s.group_by.push(other.clone());
                }
            }
        }
    }
    if aggregates && matches!(s.fill, None | Some(Fill::Null)) {
        s.fill = Some(Fill::None);
    }
    s.order = outer.order;
    Ok(s)
}

/// Whether `e` compares `time` and nothing else.
fn only_time(e: &Expr) -> bool {
    let mut time = false;
    let mut other = false;
    super::cond::visit(e, &mut |x| {
        if let Expr::VarRef { name, .. } = x {
            if name.eq_ignore_ascii_case("time") {
                time = true;
            } else {
                other = true;
            }
        }
    });
    time && !other
}

fn paren(e: Expr) -> Expr {
    match e {
        e @ Expr::Paren(_) => e,
        e => Expr::Paren(Box::new(e)),
    }
}

/// The type of an inner column, as the outer statement reads it: an integer where InfluxDB
/// answers one (a count, an integer field, a selector or sum of one, integer arithmetic),
/// else a float.
pub(super) fn column_type(e: &Expr, fields: &BTreeMap<String, FieldType>) -> FieldType {
    use FieldType::{Float, Integer};
    let numeric = |t: FieldType| match t {
        FieldType::Integer | FieldType::UInteger => Integer,
        other => other,
    };
    match e {
        Expr::VarRef { name, data_type } => match data_type {
            Some(DataType::Integer | DataType::Unsigned) => Integer,
            Some(DataType::Float) => Float,
            Some(DataType::String | DataType::Tag) => FieldType::String,
            Some(DataType::Boolean) => FieldType::Boolean,
            _ => fields
                .get(name)
                .copied()
                .map(numeric)
                .unwrap_or(FieldType::String),
        },
        Expr::Literal(sluice_influxql::Literal::Integer(_)) => Integer,
        Expr::Literal(_) => Float,
        Expr::Paren(inner) => column_type(inner, fields),
        Expr::Distinct(name) => fields.get(name).copied().map(numeric).unwrap_or(Float),
        Expr::Call { name, args } => {
            let of_arg = || {
                args.first()
                    .map(|a| column_type(a, fields))
                    .unwrap_or(Float)
            };
            match name.as_str() {
                "count" | "elapsed" => Integer,
                "first"
                | "last"
                | "min"
                | "max"
                | "top"
                | "bottom"
                | "distinct"
                | "mode"
                | "percentile"
                | "sum"
                | "spread"
                | "difference"
                | "non_negative_difference"
                | "cumulative_sum"
                | "abs"
                | "round"
                | "ceil"
                | "floor" => of_arg(),
                _ => Float,
            }
        }
        Expr::Binary { lhs, op, rhs } => {
            let (a, b) = (column_type(lhs, fields), column_type(rhs, fields));
            match op {
                BinaryOp::Div => Float,
                _ if a == Integer && b == Integer => Integer,
                _ => Float,
            }
        }
        Expr::Wildcard(_) => Float,
    }
}

/// The name a statement reads the answer of the statement inside it by, `depth` levels out
/// from the innermost statement (1 around it).
fn inner_name(depth: usize) -> String {
    format!("__sl_inner{depth}")
}

/// The inner statement's rows as a measurement: `(points, series)`, the tables the outer plan
/// reads in place of a measurement's table and the series table. `columns` are the inner
/// answer's value columns (after `time`), with the type the outer reads each as. Both read
/// the inner answer by name ([`around`] defines it).
pub(super) fn tables(columns: &[(String, FieldType)], depth: usize) -> (String, String) {
    let inner = inner_name(depth);
    let values: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, (name, ty))| {
            let sql_type = match ty {
                FieldType::Integer | FieldType::UInteger => "Nullable(Int64)",
                FieldType::String => "Nullable(String)",
                FieldType::Boolean => "Nullable(Bool)",
                FieldType::Float => "Nullable(Float64)",
            };
            format!(
                "CAST({}, '{sql_type}') AS {}",
                value_col(i),
                quote_ident(name)
            )
        })
        .collect();
    let points = format!(
        "(SELECT cityHash64({TAGS}) AS series_id, fromUnixTimestamp64Nano({TIME}, 'UTC') AS time, {} FROM {inner})",
        values.join(", ")
    );
    let series = format!(
        "(SELECT DISTINCT cityHash64({TAGS}) AS series_id, JSONExtract({TAGS}, 'Map(String, String)') AS tags FROM {inner})"
    );
    (points, series)
}

/// The outer statement's SQL with the inner statement's answer named for it. When the outer
/// reads it twice (its points, and its series' tags) the answer is computed once (a
/// materialized `WITH`, `enable_materialized_cte`): an hour of 10,000 hosts' means per minute
/// by region took 2.4 s computed twice and 0.74 s once; read once, keeping it cost 10 %.
pub(super) fn around(outer_sql: &str, inner_sql: &str, depth: usize) -> String {
    let inner = inner_name(depth);
    // A statement's rows may hold a fill's rows of no group (see `aggregate`), which are no
    // series of its answer, so none of the statement around it.
    let rows = format!(
        "SELECT * FROM ({inner_sql}) WHERE {}",
        super::buckets::real_groups()
    );
    let cte = if outer_sql.matches(&inner).count() > 1 {
        format!("{inner} AS MATERIALIZED ({rows})")
    } else {
        format!("{inner} AS ({rows})")
    };
    match outer_sql.get(..5) {
        Some(w) if w.eq_ignore_ascii_case("with ") => format!("WITH {cte}, {}", &outer_sql[5..]),
        _ => format!("WITH {cte} {outer_sql}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::query::plan::select_of as select;

    fn inner_of(q: &str) -> Result<String, PlanError> {
        let outer = select(q);
        let Some(Source::Subquery(inner)) = outer.sources.first() else {
            panic!("{q}: no subquery");
        };
        Ok(inner_statement(&outer, inner)?.to_string())
    }

    #[test]
    fn the_inner_statement_takes_the_outer_range_tags_and_interval() {
        assert_eq!(
            inner_of("SELECT sum(max) FROM (SELECT max(v) FROM m GROUP BY host) WHERE time > now() - 1h AND max > 2 GROUP BY time(1m), dc").unwrap(),
            "SELECT max(v) FROM m WHERE time > now() - 1h GROUP BY host, time(1m), dc fill(none)"
        );
        // Raw inner statements keep their own shape; a bucketed inner keeps its interval.
        assert_eq!(
            inner_of(
                "SELECT mean(d) FROM (SELECT v - w AS d FROM m WHERE host = 'a') GROUP BY time(1m)"
            )
            .unwrap(),
            "SELECT v - w AS d FROM m WHERE host = 'a'"
        );
        assert_eq!(
            inner_of("SELECT max(x) FROM (SELECT mean(v) AS x FROM m WHERE time > 5s GROUP BY time(10s) fill(0)) WHERE time < 50s GROUP BY time(1m)").unwrap(),
            "SELECT mean(v) AS x FROM m WHERE (time > 5s) AND (time < 50s) GROUP BY time(10s) fill(0)"
        );
    }

    #[test]
    fn depth_counts_the_subqueries_inside() {
        let outer = select("SELECT x FROM (SELECT y AS x FROM (SELECT v AS y FROM m))");
        let Some(Source::Subquery(inner)) = outer.sources.first() else {
            panic!("no subquery");
        };
        assert_eq!(depth(inner), 2);
    }

    #[test]
    fn slimit_around_a_subquery_is_named() {
        let q = "SELECT x FROM (SELECT v AS x FROM m) SLIMIT 1";
        let err = inner_of(q)
            .err()
            .unwrap_or_else(|| panic!("{q}"))
            .to_string();
        assert!(err.contains("SLIMIT"), "{q}: {err}");
    }

    #[test]
    fn the_inner_answer_is_kept_only_when_read_twice() {
        let (points, series) = tables(&[("max".into(), FieldType::Float)], 1);
        let once = format!("SELECT sum(`max`) FROM {points} AS m");
        let rows = "SELECT * FROM (SELECT 1) WHERE __sl_tags != ''";
        assert_eq!(
            around(&once, "SELECT 1", 1),
            format!("WITH __sl_inner1 AS ({rows}) {once}")
        );
        let twice = format!("WITH x AS (SELECT 2) SELECT * FROM {points} AS m INNER JOIN {series} AS s ON m.series_id = s.series_id");
        assert!(around(&twice, "SELECT 1", 1).starts_with(&format!(
            "WITH __sl_inner1 AS MATERIALIZED ({rows}), x AS (SELECT 2) SELECT"
        )));
    }

    #[test]
    fn integers_stay_integers() {
        let fields: BTreeMap<String, FieldType> = [
            ("n".into(), FieldType::Integer),
            ("v".into(), FieldType::Float),
        ]
        .into();
        let ty = |q: &str| {
            let s = select(q);
            column_type(&s.fields[0].expr, &fields)
        };
        assert_eq!(ty("SELECT count(v) FROM m"), FieldType::Integer);
        assert_eq!(ty("SELECT max(n) FROM m"), FieldType::Integer);
        assert_eq!(ty("SELECT n * 2 FROM m"), FieldType::Integer);
        assert_eq!(ty("SELECT n / 2 FROM m"), FieldType::Float);
        assert_eq!(ty("SELECT mean(n) FROM m"), FieldType::Float);
        assert_eq!(ty("SELECT last(v) FROM m"), FieldType::Float);
    }
}

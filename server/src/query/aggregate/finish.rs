//! The grouped rows finished as the answer: gaps filled, transforms over the buckets, order
//! and limits.

use sluice_core::FieldType;
use sluice_influxql::{Expr, Fill};

use super::super::buckets::{linear_sql, real_groups, Bucketing};
use super::super::plan::{value_col, Query, TAGS, TIME};
use super::super::raw::Beside;
use super::super::PlanError;
use super::calls::Calls;

impl Query<'_> {
    /// The answer from the grouped rows `inner` of `calls`.
    pub(super) fn finish(
        &self,
        exprs: &[&Expr],
        calls: Calls,
        inner: String,
        bucketing: Option<&Bucketing>,
    ) -> Result<String, PlanError> {
        let fill = self.stmt.fill.unwrap_or(Fill::Null);
        let (inner, filled) = match (bucketing, fill) {
            (Some(b), f) if f != Fill::None => (format!("{inner} {}", b.fill_sql()?), true),
            _ => (inner, false),
        };
        let cols = self.answer_columns(exprs, &calls, filled);
        // Nothing around the rows would change one: they are the answer as they come, in
        // their order (a fill's rows of no group, when nothing matched, are dropped where
        // they are read, [`super::super::shape::parse_rows`]). Each query around them cost
        // the engine about 1.5 ms of one host's 12 hours per minute (10-13 ms) and 3 of 8
        // hosts' hour (bench/README, "Queries").
        let bare = cols
            .iter()
            .enumerate()
            .all(|(i, col)| *col == format!("{0} AS {0}", value_col(i)));
        let limited = self.stmt.limit.is_some() || self.stmt.offset.is_some();
        if bare && calls.transforms.is_empty() && !self.descending() && !limited {
            return Ok(match filled {
                true => inner,
                false => format!("{inner} ORDER BY {TAGS}, {TIME}"),
            });
        }
        let real = if filled {
            format!(" WHERE {}", real_groups())
        } else {
            String::new()
        };
        if !calls.transforms.is_empty() {
            return self.transformed_calls(exprs, &calls, inner, cols, &real);
        }
        let rows = format!(
            "SELECT {TAGS}, {TIME}, {} FROM ({inner}){real}",
            cols.join(", ")
        );
        Ok(self.ordered(&rows, exprs.len(), bucketing.is_some()))
    }

    /// Each call's column of the answer: its filled parts' arithmetic, its own column filled
    /// (when `filled`), or its column as it is.
    fn answer_columns(&self, exprs: &[&Expr], calls: &Calls, filled: bool) -> Vec<String> {
        let fill = self.stmt.fill.unwrap_or(Fill::Null);
        let desc = self.descending();
        calls
            .outer
            .iter()
            .enumerate()
            .map(|(i, whole)| {
                let c = value_col(i);
                let v = match whole {
                    Some(whole) => whole.clone(),
                    None if filled => {
                        let ty = super::super::subquery::column_type(exprs[i], self.src.fields);
                        fill_sql(&c, fill, calls.counts.contains(&i), desc, ty)
                    }
                    None => c.clone(),
                };
                format!("{v} AS {c}")
            })
            .collect()
    }

    /// The answer of calls with transforms over their buckets (`cols` over `inner`, the
    /// filled rows, kept where `real`).
    fn transformed_calls(
        &self,
        exprs: &[&Expr],
        calls: &Calls,
        mut inner: String,
        mut cols: Vec<String>,
        real: &str,
    ) -> Result<String, PlanError> {
        let fill = self.stmt.fill.unwrap_or(Fill::Null);
        if !calls.plain.is_empty() && fill != Fill::None {
            // Beside transforms, a filled call makes rows for the series where it has a value,
            // as InfluxDB fills only the series a call's iterator has (under `fill(none)` its
            // values alone make rows).
            let has: Vec<String> = calls
                .plain
                .iter()
                .map(|(i, has)| {
                    let c = super::super::raw::has_col(*i);
                    cols.push(c.clone());
                    format!("max(toUInt8({has})) OVER (PARTITION BY {TAGS}) AS {c}")
                })
                .collect();
            inner = format!("SELECT *, {} FROM ({inner})", has.join(", "));
        }
        let rows = format!(
            "SELECT {TAGS}, {TIME}, {} FROM ({inner}){real}",
            cols.join(", ")
        );
        // Other calls beside the transforms make their own rows, as InfluxDB zips the calls'
        // iterators: every bucket, or under `fill(none)` those with a value.
        let beside = Beside {
            fill,
            types: exprs
                .iter()
                .map(|e| super::super::subquery::column_type(e, self.src.fields))
                .collect(),
        };
        self.transformed(rows, exprs.len(), &calls.transforms, Some(&beside))
    }

    /// `rows` of `calls` calls in the answer's order, with `LIMIT`/`OFFSET` per series (per
    /// call under `fill(none)` in buckets). `ORDER BY time DESC` reverses the series' order
    /// too, as in InfluxDB.
    fn ordered(&self, rows: &str, calls: usize, bucketed: bool) -> String {
        let dir = self.direction();
        let fill = self.stmt.fill.unwrap_or(Fill::Null);
        if fill == Fill::None && bucketed && calls > 1 {
            if let Some(rows) = self.limited_per_call(rows, calls) {
                return format!("SELECT * FROM ({rows}) ORDER BY {TAGS}{dir}, {TIME}{dir}");
            }
        }
        format!(
            "SELECT * FROM ({rows}) ORDER BY {TAGS}{dir}, {TIME}{dir}{}",
            self.limit_by()
        )
    }

    /// Under `fill(none)` every call makes its own rows (its buckets with a value), and
    /// InfluxDB applies `LIMIT`/`OFFSET` to each call's rows before it zips them by time: a
    /// value outside its call's own window is no value, and a row left with none is no row.
    /// `None` without a `LIMIT` or `OFFSET`.
    fn limited_per_call(&self, rows: &str, calls: usize) -> Option<String> {
        let (limit, offset) = match (self.stmt.limit, self.stmt.offset) {
            (None, None) => return None,
            (l, o) => (l.unwrap_or(i64::MAX as u64), o.unwrap_or(0)),
        };
        let end = offset.saturating_add(limit);
        let dir = self.direction();
        let mut ranks = Vec::new();
        let mut kept = Vec::new();
        let mut any = Vec::new();
        for i in 0..calls {
            let c = value_col(i);
            ranks.push(format!(
                "row_number() OVER (PARTITION BY {TAGS}, {c} IS NULL ORDER BY {TIME}{dir}) AS __sl_n{i}"
            ));
            kept.push(format!(
                "if({c} IS NOT NULL AND __sl_n{i} > {offset} AND __sl_n{i} <= {end}, {c}, NULL) AS {c}"
            ));
            any.push(format!("{c} IS NOT NULL"));
        }
        Some(format!(
            "SELECT * FROM (SELECT {TAGS}, {TIME}, {} FROM (SELECT *, {} FROM ({rows}))) WHERE {}",
            kept.join(", "),
            ranks.join(", "),
            any.join(" OR ")
        ))
    }
}

/// Column `c` of a bucket with `fill` applied; an empty bucket's `count` is 0 under
/// `fill(null)`. `fill(previous)` takes the bucket before in the answer's order (`desc`: the
/// later one), as InfluxDB fills while it iterates. A number is cast to the call's type, as
/// InfluxDB casts it: an integer aggregate filled with 2.5 is 2 (and an integer and a float
/// have no common type in the engine).
///
/// Of a string or boolean call (`ty`) a number fills the type's zero value (`''`, `false`) and
/// `fill(linear)` nothing, as InfluxDB's string and boolean fills do.
pub(in crate::query) fn fill_sql(
    c: &str,
    fill: Fill,
    count: bool,
    desc: bool,
    ty: FieldType,
) -> String {
    let dir = if desc { " DESC" } else { "" };
    match (fill, ty) {
        (Fill::Integer(_) | Fill::Float(_), FieldType::String) => format!("ifNull({c}, '')"),
        (Fill::Integer(_) | Fill::Float(_), FieldType::Boolean) => format!("ifNull({c}, false)"),
        (Fill::Linear, FieldType::String | FieldType::Boolean) => c.to_string(),
        _ => numeric_fill_sql(c, fill, count, dir),
    }
}
fn numeric_fill_sql(c: &str, fill: Fill, count: bool, dir: &str) -> String {
    match fill {
        Fill::Null if count => format!("ifNull({c}, 0)"),
        Fill::Integer(n) => format!("ifNull({c}, CAST({n}, toTypeName({c})))"),
        Fill::Float(x) => format!("ifNull({c}, CAST({x:?}, toTypeName({c})))"),
        Fill::Previous => format!(
            "ifNull({c}, last_value({c}) OVER (PARTITION BY {TAGS} ORDER BY {TIME}{dir} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW))"
        ),
        Fill::Linear => linear_sql(c),
        _ => c.to_string(),
    }
}

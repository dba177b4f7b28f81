//! The raw half of a `SELECT` plan: the points as they are (one row per point with a selected
//! field present), and transforms over them (`derivative("v")` without `GROUP BY time`).

use sluice_core::names::quote_str;
use sluice_core::FieldType;
use sluice_influxql::{Expr, Fill, Literal};

use super::cond::{self, Operand};
use super::functions;
use super::plan::{value_col, Mode, Query, KEY, TAGS, TIME};
use super::PlanError;

/// A transformed column: its index, the transform, and the math around it (outermost first).
pub(super) type Transformed = (usize, functions::Transform, Vec<super::math::Wrap>);

impl Query<'_> {
    /// Rows as they are: one per point with at least one selected field present.
    pub(super) fn raw(&self, exprs: &[&Expr]) -> Result<String, PlanError> {
        let transforming = exprs.iter().any(|e| functions::is_raw_transform(e));
        if self.stmt.group_by_time().is_some() && !transforming {
            return Err(PlanError::Invalid(
                "GROUP BY requires at least one aggregate function".into(),
            ));
        }
        let mut cols = Vec::new();
        let mut present = Vec::new();
        let mut transforms = Vec::new();
        for (i, e) in exprs.iter().enumerate() {
            // `derivative("v", 1s)`: the field's points here, the transform over them after.
            let (wraps, e) = match super::math::around_transform(e)? {
                Some((wraps, t)) => (wraps, t),
                None => (Vec::new(), *e),
            };
            let e = match functions::transform_of(e, 1_000_000_000)? {
                Some((t, _)) if self.stmt.group_by_time().is_some() => {
                    return Err(PlanError::Invalid(format!(
                        "aggregate function required inside the call to {}",
                        t.name()
                    )))
                }
                Some((t, field)) => {
                    functions::check_transform_input(&t, field, self.src.fields)?;
                    transforms.push((i, t, wraps));
                    field
                }
                None => e,
            };
            let (sql, tag) = self.raw_expr(e)?;
            if !tag {
                // A point with a field the expression reads is a row, even where the
                // expression is null (`sqrt` of a negative value, `"a" - "b"` where `b` is
                // missing), as in InfluxDB.
                present.extend(self.fields_present(e));
            }
            cols.push(format!("{sql} AS {}", value_col(i)));
        }
        let extra = if present.is_empty() {
            vec![]
        } else {
            vec![format!("({})", present.join(" OR "))]
        };
        // Points of several series at one time come in series-key order, as InfluxDB merges
        // them.
        let dir = self.direction();
        let tags = self.grouping.sql();
        let from = self.tables_and_filter(true, &extra);
        let points = match self.mode {
            Mode::Whole => format!(
                "SELECT {tags} AS {TAGS}, toUnixTimestamp64Nano(m.time) AS {TIME}, {}, toJSONString(mapSort(s.tags)) AS {KEY} {from}",
                cols.join(", ")
            ),
            Mode::Partial | Mode::Shape => {
                // A pod's first `OFFSET + LIMIT` points per series are all the final answer
                // can take from it.
                let limit = match (self.stmt.limit, transforms.is_empty()) {
                    (Some(l), true) => format!(
                        " ORDER BY {TAGS}{dir}, {TIME}{dir}, {KEY}{dir} LIMIT {} BY {TAGS}",
                        l.saturating_add(self.stmt.offset.unwrap_or(0))
                    ),
                    _ => String::new(),
                };
                return Ok(format!(
                    "SELECT {tags} AS {TAGS}, toUnixTimestamp64Nano(m.time) AS {TIME}, {}, toJSONString(mapSort(s.tags)) AS {KEY} {from}{limit}",
                    cols.join(", ")
                ));
            }
            Mode::Final(source) => {
                let names: Vec<String> = (0..exprs.len()).map(value_col).collect();
                format!("SELECT {TAGS}, {TIME}, {}, {KEY} FROM {source}", names.join(", "))
            }
        };
        if transforms.is_empty() {
            let names: Vec<String> = (0..exprs.len()).map(value_col).collect();
            return Ok(format!(
                "SELECT {TAGS}, {TIME}, {} FROM ({points}) ORDER BY {TAGS}{dir}, {TIME}{dir}, {KEY}{dir}{}",
                names.join(", "),
                self.limit_by()
            ));
        }
        self.transformed(points, exprs.len(), &transforms, None)
    }

    /// `<field> IS NOT NULL` for each field `e` reads.
    fn fields_present(&self, e: &Expr) -> Vec<String> {
        let mut out = Vec::new();
        cond::visit(e, &mut |x| {
            if let Expr::VarRef { name, data_type } = x {
                if let Operand::Field(sql, _) = self.scope.resolve(name, *data_type) {
                    out.push(format!("{sql} IS NOT NULL"));
                }
            }
        });
        out
    }

    /// `rows` (tags, time, values) with the transforms applied per series in time order.
    /// A row is answered where some call emits a point, as InfluxDB zips its calls'
    /// iterators: a transform where it has a value (not a series' first bucket, nor a gap);
    /// the other calls of an aggregate ([`Beside`]) at every bucket of the range, or under
    /// `fill(none)` where they have a value. `LIMIT`/`OFFSET` count each call's points apart,
    /// as InfluxDB limits each iterator.
    pub(super) fn transformed(
        &self,
        rows: String,
        width: usize,
        transforms: &[Transformed],
        beside: Option<&Beside>,
    ) -> Result<String, PlanError> {
        let beyond = self.beyond_asked();
        let dir = self.direction();
        let order = format!("ORDER BY {TAGS}{dir}, {TIME}{dir}");
        let mut cols = Vec::new();
        let mut emits = Vec::new();
        let mut ranks = Vec::new();
        for i in 0..width {
            let c = value_col(i);
            let present = format!("{c} IS NOT NULL");
            match transforms.iter().find(|(j, _, _)| *j == i) {
                Some((_, t, wraps)) => {
                    if let Some(rank) = t.value_rank(&c) {
                        ranks.push(format!(
                            "toInt64(count({c}) OVER {}) AS {rank}",
                            so_far(&order)
                        ));
                    }
                    let sql = t.sql(&c, self.descending(), beyond.as_deref());
                    cols.push(format!("{} AS {c}", super::math::apply(wraps, sql)?));
                    emits.push(Some(present));
                }
                None => {
                    // Beside a transform under a fill, a call emits its row where its series
                    // has a point at all, and has no value where it has none: InfluxDB fills
                    // only the series a call's iterator has, so a `count` there is null beside
                    // the rows a transform makes, not 0.
                    let filled = beside.is_some_and(|b| b.fill != Fill::None);
                    if filled {
                        let has = has_col(i);
                        emits.push(Some(format!("{has} = 1")));
                        cols.push(format!("if({has} = 1, {c}, NULL) AS {c}"));
                        cols.push(has);
                    } else {
                        emits.push(beside.map(|_| present));
                        cols.push(c);
                    }
                }
            }
        }
        let rows = if ranks.is_empty() {
            rows
        } else {
            format!("SELECT *, {} FROM ({rows})", ranks.join(", "))
        };
        let mut rows = format!("SELECT {TAGS}, {TIME}, {} FROM ({rows})", cols.join(", "));
        if let Some(b) = &beyond {
            rows = format!("SELECT * FROM ({rows}) WHERE NOT ({b})");
        }
        let answered = match (self.stmt.limit, self.stmt.offset) {
            (None, None) => {
                let keep: Vec<String> = emits.into_iter().flatten().collect();
                let values: Vec<String> = (0..width).map(value_col).collect();
                format!(
                    "SELECT {TAGS}, {TIME}, {} FROM ({rows}) WHERE {}",
                    values.join(", "),
                    keep.join(" OR ")
                )
            }
            (limit, offset) => per_call_limit(
                rows,
                &emits,
                &order,
                offset.unwrap_or(0),
                limit.unwrap_or(u64::MAX),
            ),
        };
        let filled = match beside {
            Some(b) if width > 1 => zip_fill(answered, b, self.descending()),
            _ => answered,
        };
        Ok(format!("SELECT * FROM ({filled}) {order}"))
    }

    /// A select expression of a raw query; true when it reads a tag.
    pub(super) fn raw_expr(&self, e: &Expr) -> Result<(String, bool), PlanError> {
        if let Expr::VarRef { name, data_type } = e {
            if let Operand::Tag(t) = self.scope.resolve(name, *data_type) {
                return Ok((format!("nullIf(s.tags[{}], '')", quote_str(&t)), true));
            }
        }
        if let Expr::Literal(Literal::Regex(_)) | Expr::Wildcard(_) = e {
            return Err(PlanError::Invalid(format!("invalid select field: {e}")));
        }
        Ok((cond::field_sql(e, self.scope, "s.tags")?, false))
    }
}

/// A window over a series' rows up to the current one, in `order` (`ORDER BY ...`).
fn so_far(order: &str) -> String {
    format!("(PARTITION BY {TAGS} {order} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)")
}

/// The column beside call `i` of an aggregate with transforms: 1 where the series has a
/// value of the call in the asked range.
pub(super) fn has_col(i: usize) -> String {
    format!("__sl_has{i}")
}

/// What an aggregate's answer with transforms needs to know of its calls: InfluxDB zips the
/// calls' iterators into rows, each call filling the rows where it has no point.
pub(super) struct Beside {
    pub fill: Fill,
    /// Each call's type, which a number fills as.
    pub types: Vec<FieldType>,
}

/// `rows` where each call keeps its points from the `offset`-th to `offset + limit`, counted
/// apart (`emits`: SQL true where a call has a point; none for a column that never makes a
/// row of its own); a row stays where some call keeps one.
fn per_call_limit(
    rows: String,
    emits: &[Option<String>],
    order: &str,
    offset: u64,
    limit: u64,
) -> String {
    let upto = offset.saturating_add(limit);
    let mut counted = Vec::new();
    let mut kept = Vec::new();
    let mut outer = Vec::new();
    for (i, e) in emits.iter().enumerate() {
        let c = value_col(i);
        let Some(e) = e else {
            outer.push(c);
            continue;
        };
        let n = format!("__sl_n{i}");
        counted.push(format!("sum(toUInt64({e})) OVER {} AS {n}", so_far(order)));
        let k = format!("(({e}) AND {n} > {offset} AND {n} <= {upto})");
        outer.push(format!("if({k}, {c}, NULL) AS {c}"));
        kept.push(k);
    }
    format!(
        "SELECT {TAGS}, {TIME}, {} FROM (SELECT *, {} FROM ({rows})) WHERE {}",
        outer.join(", "),
        counted.join(", "),
        kept.join(" OR ")
    )
}

/// `rows` with each call's missing values filled as InfluxDB's row scanner fills them: a
/// number cast to the call's type, or under `fill(previous)` the call's last value in the
/// series; other fills leave them null.
fn zip_fill(rows: String, beside: &Beside, desc: bool) -> String {
    if !matches!(
        beside.fill,
        Fill::Integer(_) | Fill::Float(_) | Fill::Previous
    ) {
        return rows;
    }
    let cols: Vec<String> = beside
        .types
        .iter()
        .enumerate()
        .map(|(i, ty)| {
            let c = value_col(i);
            let sql = super::aggregate::fill_sql(&c, beside.fill, false, desc, *ty);
            format!("{sql} AS {c}")
        })
        .collect();
    format!("SELECT {TAGS}, {TIME}, {} FROM ({rows})", cols.join(", "))
}

//! `top()` and `bottom()`: a field's N greatest (least) points per series and time bucket, or
//! per distinct value of the tags named as arguments (`top("usage", "host", 5)`: the five
//! hosts with the greatest usage, each at its greatest point). Points keep their own times,
//! as in InfluxDB 1.8, and come in time order. One `max`, `min`, `first` or `last` with other
//! fields or tags beside it is InfluxDB's selector, and ranks its point the same way
//! ([`selector_beside_fields`]).
//!
//! A tie goes to the earlier point, then to the series first in key order, so that every pod
//! ranks points the same way: a pod's share is its own N best per group, which holds every
//! point that can be among the tenant's N best, and the gathering pod ranks their union again.

use sluice_core::names::quote_str;
use sluice_core::FieldType;
use sluice_influxql::{Expr, Fill, Literal};

use super::cond::{self, Operand};
use super::math;
use super::order_key::{self, Part};
use super::plan::{has_call, value_col, Mode, Query, KEY, SID, TAGS, TIME};
use super::PlanError;

mod window;

/// The bucket of a ranked point (a constant without `GROUP BY time`).
const BUCKET: &str = "__sl_b";

/// The most points `top()` and `bottom()` keep per group: the engine's bound on
/// `groupArraySorted`, which keeps them.
const MAX_KEPT: i64 = 16_777_215;

/// The `top()` or `bottom()` call of a select list.
#[derive(Debug)]
pub(super) struct Ranked<'e> {
    /// Which of the select list's expressions it is.
    index: usize,
    /// `top` or `bottom`.
    name: &'e str,
    field: &'e Expr,
    /// Tags whose distinct values each keep only their best point.
    tags: Vec<&'e str>,
    n: u64,
    /// Ranked by time rather than value: `first` (as `bottom`) and `last` (as `top`).
    by_time: bool,
    /// `max("f")` or `min("f")` with fields or tags beside it: InfluxDB's selector, whose row
    /// is the greatest (least) point's, at its bucket's start under `GROUP BY time`, with the
    /// empty buckets filled.
    selector: bool,
    /// Math and arithmetic with constants around the call (`top("v", 3) / 100`), applied to
    /// the ranked values once they are ranked.
    wraps: Vec<math::Wrap>,
}

/// `max("f")`, `min("f")`, `first("f")` or `last("f")` with plain fields or tags beside it
/// (`max("usage"), "host"`: the host of the greatest point): ranked as `top("f", 1)`
/// (`bottom`), whose ties InfluxDB's `max` and `min` break the same way, to the earlier
/// point; `first` and `last` rank by time.
pub(super) fn selector_beside_fields<'e>(exprs: &[&'e Expr]) -> Option<Ranked<'e>> {
    let mut calls = exprs.iter().enumerate().filter(|(_, e)| has_call(e));
    let (index, call) = calls.next()?;
    if calls.next().is_some()
        || exprs.len() < 2
        || !exprs
            .iter()
            .enumerate()
            .all(|(i, e)| i == index || matches!(e, Expr::VarRef { .. }))
    {
        return None;
    }
    let Expr::Call { name, args } = call else {
        return None;
    };
    let (name, by_time) = match name.as_str() {
        "max" => ("top", false),
        "min" => ("bottom", false),
        "last" => ("top", true),
        "first" => ("bottom", true),
        _ => return None,
    };
    let [field @ Expr::VarRef { .. }] = args.as_slice() else {
        return None;
    };
    Some(Ranked {
        index,
        name,
        field,
        tags: vec![],
        n: 1,
        by_time,
        selector: true,
        wraps: vec![],
    })
}

impl Ranked<'_> {
    fn top(&self) -> bool {
        self.name == "top"
    }
}

fn is_ranking(e: &Expr) -> bool {
    matches!(e, Expr::Call { name, .. } if name == "top" || name == "bottom")
}

/// The select list's `top()`/`bottom()` call, checked as InfluxDB 1.8 checks it; `None`
/// without one.
pub(super) fn ranked<'e>(
    exprs: &[&'e Expr],
    limit: Option<u64>,
) -> Result<Option<Ranked<'e>>, PlanError> {
    let mut found = None;
    for (i, e) in exprs.iter().enumerate() {
        let mut inside = false;
        cond::visit(e, &mut |x| inside |= is_ranking(x));
        if !inside {
            continue;
        }
        let (wraps, call) = if is_ranking(e) {
            (vec![], *e)
        } else {
            math::around_call(e, &|n| n == "top" || n == "bottom")?.ok_or_else(|| {
                PlanError::Unsupported(
                    "top() and bottom() inside an expression other than math functions and arithmetic with constants are not supported by sluice yet".into(),
                )
            })?
        };
        if found.is_none() {
            found = Some((i, call, wraps));
        }
    }
    let Some((index, call, wraps)) = found else {
        return Ok(None);
    };
    let Expr::Call { name, args } = call else {
        unreachable!("is_ranking checked");
    };
    if exprs
        .iter()
        .enumerate()
        .any(|(i, e)| i != index && has_call(e))
    {
        return Err(PlanError::Invalid(format!(
            "selector function {name}() cannot be combined with other functions"
        )));
    }
    if args.len() < 2 {
        return Err(PlanError::Invalid(format!(
            "invalid number of arguments for {name}, expected at least 2, got {}",
            args.len()
        )));
    }
    let n = match &args[args.len() - 1] {
        Expr::Literal(Literal::Integer(n)) => *n,
        Expr::Literal(Literal::Float(v)) => {
            return Err(PlanError::Invalid(format!(
                "expected integer as last argument in {name}(), found {v:.3}"
            )))
        }
        other => {
            return Err(PlanError::Invalid(format!(
                "expected integer as last argument in {name}(), found {other}"
            )))
        }
    };
    if n < 1 {
        return Err(PlanError::Invalid(format!(
            "limit ({n}) in {name} function must be at least 1"
        )));
    }
    if n > MAX_KEPT {
        return Err(PlanError::Invalid(format!(
            "limit ({n}) in {name} function must be at most {MAX_KEPT}"
        )));
    }
    let n = n as u64;
    if let Some(l) = limit.filter(|l| *l < n) {
        return Err(PlanError::Invalid(format!(
            "limit ({n}) in {name} function can not be larger than the LIMIT ({l}) in the select statement"
        )));
    }
    let field = &args[0];
    if !matches!(field, Expr::VarRef { .. }) {
        return Err(PlanError::Invalid(format!(
            "expected first argument to be a field in {name}(), found {field}"
        )));
    }
    let mut tags = Vec::new();
    for a in &args[1..args.len() - 1] {
        match a {
            Expr::VarRef { name: t, .. } => tags.push(t.as_str()),
            other => {
                return Err(PlanError::Invalid(format!(
                    "only fields or tags are allowed in {name}(), found {other}"
                )))
            }
        }
    }
    Ok(Some(Ranked {
        index,
        name,
        field,
        tags,
        n,
        by_time: false,
        selector: false,
        wraps,
    }))
}

/// A value column of the answer: a field of the ranked point (carried through the ranking
/// per series), or a tag of its series (joined after it).
enum Column {
    Field(String),
    Tag(String),
}

impl Query<'_> {
    /// The plan of a select list with a `top()` or `bottom()` call (see the module's doc).
    ///
    /// Each series keeps its N best points per bucket first (`groupArraySorted`, N values in
    /// memory per series), so that only those are joined with their series' tags and ranked
    /// per group: a join of every point read cost 1 s and more than 128 MiB over 3.6 M points.
    pub(super) fn ranked(&self, exprs: &[&Expr], r: &Ranked) -> Result<String, PlanError> {
        // The value columns in the answer's order: the call's field, then its tags, where the
        // call stands; every other expression of the list is the ranked point's.
        let mut cols = Vec::new();
        for (i, e) in exprs.iter().enumerate() {
            if i != r.index {
                cols.push(self.point_column(e)?);
                continue;
            }
            cols.push(Column::Field(cond::field_sql(
                r.field, self.scope, "s.tags",
            )?));
            // Inside arithmetic the call is one value, without its tags' columns (as in
            // InfluxDB); the tags still rank.
            if r.wraps.is_empty() {
                for t in &r.tags {
                    cols.push(Column::Tag(self.tag_sql(t)?));
                }
            }
        }
        let value = value_col(r.index);
        let by: Vec<String> = (0..r.tags.len()).map(rank_col).collect();
        let names: Vec<String> = (0..cols.len()).map(value_col).collect();
        let carried = [names.clone(), vec![KEY.to_string()], by.clone()].concat();
        let bucketing = self.bucketing()?;
        let points = match self.mode {
            Mode::Whole | Mode::Partial | Mode::Shape => {
                self.series_best(r, &cols, bucketing.as_ref())?
            }
            Mode::Final(source) => self.window_of_shares(
                r,
                format!(
                    "SELECT {TAGS}, {TIME}, {} FROM {source}",
                    carried.join(", ")
                ),
            ),
        };
        let bucket = match &bucketing {
            Some(b) => b.start_sql(TIME),
            None => "0".into(),
        };
        let dir = if r.name == "top" { " DESC" } else { "" };
        let order = if r.by_time {
            // A tie at one time goes to the greater value, for `first` too, as in InfluxDB.
            format!("{TAGS}, {BUCKET}, {TIME}{dir}, {value} DESC, {KEY}")
        } else {
            // Points of one value and time: under `ORDER BY time DESC` InfluxDB keeps the
            // last series in key order first, as it answers them.
            format!(
                "{TAGS}, {BUCKET}, {value}{dir}, {TIME}, {KEY}{}",
                self.direction()
            )
        };
        let columns = carried.join(", ");
        let mut best =
            format!("SELECT {TAGS}, {TIME}, {columns}, {bucket} AS {BUCKET} FROM ({points})");
        if !by.is_empty() {
            // One point per distinct value of the tags: its best.
            best = format!(
                "SELECT * FROM ({best}) ORDER BY {order} LIMIT 1 BY {TAGS}, {BUCKET}, {}",
                by.join(", ")
            );
        }
        let ranked = format!(
            "SELECT {TAGS}, {TIME}, {columns} FROM ({best}) ORDER BY {order} LIMIT {} BY {TAGS}, {BUCKET}",
            self.kept_per_group(r)
        );
        if matches!(self.mode, Mode::Partial | Mode::Shape) {
            return Ok(ranked);
        }
        if let (true, Some(b)) = (r.selector, &bucketing) {
            return self.selector_rows(&ranked, b, &names);
        }
        // Points of one time in rank order, as InfluxDB sorts the ranked points by time. The
        // wrapped value gets a name of its own, so that the order is the ranked value's. Under
        // `ORDER BY time DESC` InfluxDB answers ties of value too in the reverse order.
        let (rank_dir, dir) = (dir, self.direction());
        let mut shown = names.clone();
        if !r.wraps.is_empty() {
            shown[r.index] = format!("{} AS __sl_w", math::apply(&r.wraps, value.clone())?);
        }
        Ok(format!(
            "SELECT {TAGS}, {TIME}, {} FROM ({ranked}) ORDER BY {TAGS}{dir}, {TIME}{dir}, {value}{rank_dir}, {KEY}{dir}{}",
            shown.join(", "),
            self.limit_by()
        ))
    }

    /// A selector's rows under `GROUP BY time`: each bucket's point at the bucket's start,
    /// and with `fill(null)` (the default) a row of nulls for each empty bucket.
    fn selector_rows(
        &self,
        ranked: &str,
        b: &super::buckets::Bucketing,
        names: &[String],
    ) -> Result<String, PlanError> {
        let filled = match self.stmt.fill.unwrap_or(Fill::Null) {
            Fill::Null => format!(" {}", b.fill_sql()?),
            Fill::None => String::new(),
            _ => {
                return Err(PlanError::Unsupported(
                    "a selector beside other fields with fill() other than null or none is not supported by sluice yet".into(),
                ))
            }
        };
        // Nullable, so that an empty bucket's row is nulls rather than zeros.
        let cols: Vec<String> = names
            .iter()
            .map(|c| format!("toNullable({c}) AS {c}"))
            .collect();
        let rows = format!(
            "SELECT {TAGS}, {} AS {TIME}, {} FROM ({ranked}){filled}",
            b.start_sql(TIME),
            cols.join(", ")
        );
        let dir = self.direction();
        Ok(format!(
            "SELECT * FROM ({rows}) WHERE {} ORDER BY {TAGS}{dir}, {TIME}{dir}{}",
            super::buckets::real_groups(),
            self.limit_by()
        ))
    }

    /// Each series' best points per bucket (its best one when the call names tags, which a
    /// series has one value of), with their tags: `(tags, time, values..., key, rank tags...)`.
    ///
    /// A point is ranked by one `UInt128`, its value's bits in an order-preserving form above
    /// its time's: the engine keeps the least N of a plain number 2.5 times as fast as of a
    /// tuple (`groupArraySorted` over 3.6 M points: 141 against 350 ms). Other fields of the
    /// point ride along in a tuple only when the select list has them.
    fn series_best(
        &self,
        r: &Ranked,
        cols: &[Column],
        bucketing: Option<&super::buckets::Bucketing>,
    ) -> Result<String, PlanError> {
        let Column::Field(x) = &cols[r.index] else {
            unreachable!("the call's own column is its field");
        };
        let ty = match r.field {
            Expr::VarRef { name, data_type } => match self.scope.resolve(name, *data_type) {
                Operand::Field(_, ty) => Some(ty),
                _ => None,
            },
            _ => None,
        };
        let ty = match ty {
            // A field this measurement does not have as the cast asks: no points.
            None => return Ok(self.no_points(cols, r)),
            Some(t @ (FieldType::Float | FieldType::Integer | FieldType::UInteger)) => t,
            Some(other) if r.by_time => {
                return Err(PlanError::Unsupported(format!(
                    "{}() of a {other} field with other fields or tags beside it is not supported by sluice yet",
                    if r.top() { "last" } else { "first" }
                )))
            }
            Some(other) => {
                return Err(PlanError::Invalid(format!(
                    "{}() takes a numeric field: {} is a {other} field",
                    r.name, r.field
                )))
            }
        };
        let top = r.name == "top";
        let packed = Packed {
            ty,
            top,
            by_time: r.by_time,
        };
        let mut carried = vec![packed.of(x)];
        let mut select = Vec::new();
        for (i, c) in cols.iter().enumerate() {
            let sql = match c {
                Column::Field(_) if i == r.index && !r.by_time => packed.value("k"),
                Column::Field(sql) => {
                    carried.push(sql.clone());
                    format!("p.pt.{}", carried.len())
                }
                Column::Tag(sql) => sql.clone(),
            };
            select.push(format!("{sql} AS {}", value_col(i)));
        }
        select.push(format!("toJSONString(mapSort(s.tags)) AS {KEY}"));
        for (i, t) in r.tags.iter().enumerate() {
            select.push(format!("s.tags[{}] AS {}", quote_str(t), rank_col(i)));
        }
        let (point, rank) = if carried.len() == 1 {
            (carried[0].clone(), "pt".to_string())
        } else {
            (format!("({})", carried.join(", ")), "pt.1".to_string())
        };
        let keep = if r.tags.is_empty() {
            self.kept_per_group(r)
        } else {
            1
        };
        let mut present = vec![format!("{x} IS NOT NULL")];
        present.extend(self.window_rows(r, x));
        let (bucket, group) = match bucketing {
            Some(b) => (
                format!(", {} AS {BUCKET}", b.bucket_sql()),
                format!(", {BUCKET}"),
            ),
            None => (String::new(), String::new()),
        };
        // One point by its key alone: the least key, a plain `min` (each series' best point
        // of an hour, 3.6 M points: 48.7 against 52.2 ms in the engine, and 55.7-56.9 against
        // 60.5-61.1 ms on a busier afternoon).
        let best = if keep == 1 && carried.len() == 1 {
            format!("[min({point})]")
        } else {
            format!("groupArraySorted({keep})({point})")
        };
        let per_series = format!(
            "SELECT m.series_id AS {SID}{bucket}, {best} AS pts {} GROUP BY {SID}{group}",
            // A condition on tags and fields at once needs each row's tags.
            self.tables_and_filter(self.filter.rows_use_tags, &present)
        );
        Ok(format!(
            "SELECT {} AS {TAGS}, {} AS {TIME}, {} FROM (SELECT {SID}, pt, {} AS k FROM ({per_series}) ARRAY JOIN pts AS pt) AS p INNER JOIN ({}) AS s ON p.{SID} = s.series_id",
            self.grouping.sql(),
            packed.time("k"),
            select.join(", "),
            packed.key(&rank),
            self.series_sql()
        ))
    }

    /// The columns of [`Self::series_best`] without a row.
    fn no_points(&self, cols: &[Column], r: &Ranked) -> String {
        let mut select: Vec<String> = (0..cols.len())
            .map(|i| format!("CAST(NULL, 'Nullable(Float64)') AS {}", value_col(i)))
            .collect();
        select.push(format!("'' AS {KEY}"));
        select.extend((0..r.tags.len()).map(|i| format!("'' AS {}", rank_col(i))));
        format!(
            "SELECT '' AS {TAGS}, toInt64(0) AS {TIME}, {} WHERE 0",
            select.join(", ")
        )
    }

    /// A plain field or tag beside the call: the ranked point's.
    fn point_column(&self, e: &Expr) -> Result<Column, PlanError> {
        if !matches!(e, Expr::VarRef { .. }) {
            return Err(PlanError::Invalid(format!("invalid select field: {e}")));
        }
        let (sql, tag) = self.raw_expr(e)?;
        Ok(if tag {
            Column::Tag(sql)
        } else {
            Column::Field(sql)
        })
    }

    /// A tag argument of the call, as its column shows it.
    fn tag_sql(&self, t: &str) -> Result<String, PlanError> {
        let arg = Expr::VarRef {
            name: t.to_string(),
            data_type: None,
        };
        match self.raw_expr(&arg)? {
            (sql, true) => Ok(sql),
            _ => Err(PlanError::Unsupported(format!(
                "a field ({t}) as a grouping argument of top() or bottom() is not supported by sluice yet"
            ))),
        }
    }
}

/// A point's rank as one `UInt128` ([`order_key::key`]): for `top` the greatest value at the
/// earliest time is the greatest key, for `bottom` the least value at the earliest time the
/// least. `groupArraySorted` keeps the least, so `top` stores the key's bits flipped.
struct Packed {
    ty: FieldType,
    top: bool,
    /// The key is the time alone (`first`, `last`): the latest is the greatest.
    by_time: bool,
}

impl Packed {
    /// The stored rank of value `x` (SQL, not null) at the row's time.
    ///
    /// By time, the time is the high half and the value the low one, where InfluxDB's `first`
    /// and `last` break a tie at one time: to the greater value, for `first` too, whose key
    /// has the low half flipped.
    fn of(&self, x: &str) -> String {
        let value = format!("assumeNotNull({x})");
        if self.by_time {
            let key = order_key::key(
                Part::Time { desc: false },
                Part::Value(&value, Some(self.ty)),
            );
            let key = if self.top {
                key
            } else {
                format!("bitXor({key}, toUInt128(18446744073709551615))")
            };
            return self.key(&key);
        }
        let key = order_key::key(
            Part::Value(&value, Some(self.ty)),
            Part::Time { desc: self.top },
        );
        self.key(&key)
    }

    /// The key from its stored form, or the stored form from the key.
    fn key(&self, k: &str) -> String {
        if self.top {
            format!("bitNot({k})")
        } else {
            k.to_string()
        }
    }

    /// The value of key `k`, as its field's type.
    fn value(&self, k: &str) -> String {
        order_key::value_of(&format!("toUInt64(bitShiftRight(p.{k}, 64))"), self.ty)
    }

    /// The time of key `k` (nanoseconds).
    fn time(&self, k: &str) -> String {
        if self.by_time {
            return order_key::time_of(&format!("toUInt64(bitShiftRight(p.{k}, 64))"), false);
        }
        let lo = format!("toUInt64(bitAnd(p.{k}, toUInt128(18446744073709551615)))");
        order_key::time_of(&lo, self.top)
    }
}

fn rank_col(i: usize) -> String {
    format!("__sl_r{i}")
}

#[cfg(test)]
mod tests;

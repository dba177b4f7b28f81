//! `integral("f"[, unit])`: the area under a field's points by the trapezium rule, per series
//! group (and per `GROUP BY time` bucket), in units of `unit` (default 1 s), as InfluxDB 1.8's
//! reducer computes it.
//!
//! The reducer walks a group's points in time order, so its answer follows from each segment
//! between two consecutive times. What it does, and what the plan reproduces:
//! - points of several series at one time: the segment into that time ends at the first of
//!   them and the one out of it starts at the last. InfluxDB takes them in the order its merge
//!   yields them; sluice in the order of a hash of each series' key ([`ORDER`]);
//! - a segment that crosses its start's bucket end is cut there, at the value interpolated
//!   linearly: the part before goes to the start's bucket, the rest (however many empty
//!   buckets it spans) to its end's bucket. For an integer field the reducer keeps the
//!   earlier point's value for the rest, so the rest's area is the mean of that value and the
//!   interpolated one, not of the interpolated one and the end's;
//! - every bucket holding a point is answered (0 for a single point), except a group's last
//!   bucket when its last point lies exactly at the bucket's start; no other bucket is, as
//!   InfluxDB ignores `fill()` for it;
//! - without `GROUP BY time` the answer of a float field is at time 0, that of an integer
//!   field at the range's start (as other aggregates' are).
//!
//! A pod's share is its points with their group's tags and their series' place in that order;
//! the gathering pod orders them all and computes the rest. Every point of the range is
//! ordered once, on one thread: 3.6 M points take a pod about 0.4 s.

use sluice_core::FieldType;
use sluice_influxql::{Expr, Literal, SortOrder};

use super::cond::Operand;
use super::plan::{value_col, Mode, Query, KEY, TAGS, TIME};
use super::PlanError;

/// A point's value, and its series' tags as text (in a share).
const VALUE: &str = "__sl_v";
/// A series' group and its place in series-key order, numbered from the series table.
const GROUP: &str = "__sl_group";
const RANK: &str = "__sl_rank";
const NUMBERS: &str = "__sl_numbers";
/// The order of points of several series at one time: by a hash of the series' key, the same
/// on every pod and a number a share sends instead of the key's text (InfluxDB's own order
/// there is its merge's, which no rule describes).
const ORDER: &str = "cityHash64(toJSONString(mapSort(s.tags)))";

/// A lone `integral()` in a select list: its field and unit in nanoseconds.
pub(super) struct Integral<'e> {
    field: &'e Expr,
    unit: i64,
}

/// `integral(...)` as the only expression of a select list; an error when it stands beside
/// others or inside an expression, which sluice does not plan yet.
pub(super) fn integral_call<'e>(exprs: &[&'e Expr]) -> Result<Option<Integral<'e>>, PlanError> {
    let lone = match exprs {
        [Expr::Call { name, args }] if name == "integral" => Some(args),
        _ => None,
    };
    let Some(args) = lone else {
        if exprs.iter().any(|e| calls_integral(e)) {
            return Err(PlanError::Unsupported(
                "integral() beside other fields or inside an expression is not supported by sluice yet"
                    .into(),
            ));
        }
        return Ok(None);
    };
    if args.is_empty() || args.len() > 2 {
        return Err(PlanError::Invalid(format!(
            "invalid number of arguments for integral, expected at least 1 but no more than 2, got {}",
            args.len()
        )));
    }
    let field = match &args[0] {
        f @ Expr::VarRef { .. } => f,
        _ => {
            return Err(PlanError::Invalid(
                "expected field argument in integral()".into(),
            ))
        }
    };
    let unit = match args.get(1) {
        None => 1_000_000_000,
        Some(Expr::Literal(Literal::Duration(d))) if d.as_nanos() > 0 => d.as_nanos(),
        Some(Expr::Literal(d @ Literal::Duration(_))) => {
            return Err(PlanError::Invalid(format!(
                "duration argument must be positive, got {d}"
            )))
        }
        Some(_) => {
            return Err(PlanError::Invalid(
                "second argument must be a duration".into(),
            ))
        }
    };
    Ok(Some(Integral { field, unit }))
}

fn calls_integral(e: &Expr) -> bool {
    let mut found = false;
    super::cond::visit(e, &mut |x| {
        found |= matches!(x, Expr::Call { name, .. } if name == "integral")
    });
    found
}

impl Query<'_> {
    /// The plan of `integral(field, unit)` (see the module's doc).
    pub(super) fn integral(&self, call: &Integral) -> Result<String, PlanError> {
        if self.stmt.order == Some(SortOrder::Descending) {
            return Err(PlanError::Unsupported(
                "integral() with ORDER BY time DESC is not supported by sluice yet".into(),
            ));
        }
        let Expr::VarRef { name, data_type } = call.field else {
            unreachable!("integral_call checked");
        };
        let (x, ty) = match self.scope.resolve(name, *data_type) {
            Operand::Field(
                sql,
                ty @ (FieldType::Float | FieldType::Integer | FieldType::UInteger),
            ) => (sql, ty),
            Operand::Field(_, ty) => {
                return Err(PlanError::Invalid(format!(
                    "integral() of a {} field is not defined: it needs numbers",
                    ty.name()
                )))
            }
            _ => {
                return Err(PlanError::Invalid(format!(
                    "expected field argument in integral(), {name} is not a field"
                )))
            }
        };
        let bucketing = self.bucketing()?;
        let present = [format!("{x} IS NOT NULL")];
        // Each point with its group and its series' place in [`ORDER`]: numbers from the
        // series table on a pod (the texts of the tags per point took more memory than a query
        // gets over 3.6 M points); in a share the group's text, as the gathering pod merges
        // pods whose numbers differ, each block's texts once (`LowCardinality`).
        let numbered = format!(
            "SELECT series_id, tags, toUInt32(dense_rank() OVER (ORDER BY {})) AS {GROUP}, toUInt32(row_number() OVER (ORDER BY {ORDER})) AS {RANK} FROM ({}) AS s",
            self.grouping.sql(),
            self.series_sql()
        );
        let points = match self.mode {
            Mode::Partial | Mode::Shape => {
                return Ok(format!(
                    "SELECT toLowCardinality({}) AS {TAGS}, toUnixTimestamp64Nano(m.time) AS {TIME}, {ORDER} AS {KEY}, toFloat64({x}) AS {VALUE} {}",
                    self.grouping.sql(),
                    self.tables_and_filter(true, &present)
                ))
            }
            Mode::Final(source) => {
                format!("SELECT {TAGS} AS g, {TIME}, {KEY} AS r, {VALUE} FROM {source}")
            }
            Mode::Whole => {
                let lookup = |i: usize| {
                    format!("transform(m.series_id, {NUMBERS}.1, {NUMBERS}.{i}, toUInt32(0))")
                };
                format!(
                    "WITH (SELECT (groupArray(series_id), groupArray({GROUP}), groupArray({RANK})) FROM ({numbered})) AS {NUMBERS} SELECT {} AS g, toUnixTimestamp64Nano(m.time) AS {TIME}, {} AS r, toFloat64({x}) AS {VALUE} {}",
                    lookup(2),
                    lookup(3),
                    self.tables_and_filter(self.filter.rows_use_tags, &present)
                )
            }
        };
        // Per point the previous one of its group (none for the first): points at one time in
        // [`ORDER`], so that a segment ends at the first of them and the next starts
        // from the last (a segment between two points at one time has no area). Only the two
        // columns over one preceding row: the window then keeps little besides the sort.
        let w =
            format!("PARTITION BY g ORDER BY {TIME}, r ROWS BETWEEN 1 PRECEDING AND CURRENT ROW");
        let points = format!(
            "SELECT g, {TIME} AS b, {VALUE} AS vf, lagInFrame(toNullable({TIME})) OVER ({w}) AS a, lagInFrame({VALUE}) OVER ({w}) AS pv FROM ({points})"
        );
        let u = call.unit;
        let c = value_col(0);
        let Some(buckets) = bucketing else {
            // InfluxDB's float reducer answers at time 0, its integer one at the range's start.
            let time = match ty {
                FieldType::Float => 0,
                _ => self.filter.range.min.unwrap_or(0),
            };
            let per_group = format!(
                "SELECT g, toInt64({time}) AS {TIME}, toNullable(sum(if(a IS NULL, 0, 0.5 * (vf + pv) * ((b - assumeNotNull(a)) / {u})))) AS {c} FROM ({points}) GROUP BY g"
            );
            return Ok(self.tagged(&per_group, &numbered));
        };
        let every = buckets.every;
        let (wa, wb) = (buckets.start_sql("a0"), buckets.start_sql("b"));
        // The start's bucket end `e`, and the value there on the line between the two points.
        let segments = format!(
            "SELECT g, b, vf, pv, a IS NULL AS first, assumeNotNull(a) AS a0, {wa} AS wa, {wb} AS wb, wa + {every} AS e, (vf - pv) / (b - a0) * (e - a0) + pv AS ve FROM ({points})"
        );
        let within = format!("0.5 * (vf + pv) * ((b - a0) / {u})");
        let before_end = format!("0.5 * (ve + pv) * ((e - a0) / {u})");
        let after_end = match ty {
            FieldType::Float => format!("0.5 * (vf + ve) * ((b - e) / {u})"),
            _ => format!("0.5 * (ve + pv) * ((b - e) / {u})"),
        };
        // Per segment its share of the start's bucket and of the end's, each with the time of
        // the bucket's point it comes from; and per point a zero in its bucket, so that every
        // bucket with a point is answered.
        let shares = format!(
            "SELECT g, share.1 AS bucket, share.2 AS area, share.3 AS pt FROM ({segments}) ARRAY JOIN [(wb, toFloat64(0), b), (if(first, wb, wa), if(first, 0, if(b < e, {within}, {before_end})), if(first, b, a0)), (wb, if(first OR b < e, 0, {after_end}), b)] AS share"
        );
        // A group's last bucket is not answered when its last point lies at the bucket's start.
        let per_bucket = format!(
            "SELECT g, bucket, sum(area) AS s, max(pt) AS last_pt, max(bucket) OVER (PARTITION BY g) AS last_bucket FROM ({shares}) GROUP BY g, bucket"
        );
        let per_group = format!(
            "SELECT g, bucket AS {TIME}, toNullable(s) AS {c} FROM ({per_bucket}) WHERE NOT (bucket = last_bucket AND last_pt = bucket)"
        );
        Ok(self.tagged(&per_group, &numbered))
    }

    /// The answer from `per_group` (`g`, time, value): on a pod its groups' numbers joined to
    /// their tags (`numbered`), on the gathering pod `g` is the tags already.
    fn tagged(&self, per_group: &str, numbered: &str) -> String {
        let c = value_col(0);
        let rows = match self.mode {
            Mode::Final(_) => format!("SELECT g AS {TAGS}, {TIME}, {c} FROM ({per_group})"),
            _ => format!(
                "SELECT {} AS {TAGS}, p.{TIME} AS {TIME}, p.{c} AS {c} FROM ({per_group}) AS p INNER JOIN (SELECT {GROUP}, any(tags) AS tags FROM ({numbered}) GROUP BY {GROUP}) AS s ON p.g = s.{GROUP}",
                self.grouping.sql()
            ),
        };
        format!(
            "SELECT * FROM ({rows}) ORDER BY {TAGS}, {TIME}{}",
            self.limit_by()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(q: &str) -> Result<Option<(String, i64)>, PlanError> {
        let stmt = crate::query::plan::select_of(q);
        let exprs: Vec<&Expr> = stmt.fields.iter().map(|f| &f.expr).collect();
        Ok(integral_call(&exprs)?.map(|c| (c.field.to_string(), c.unit)))
    }

    #[test]
    fn a_lone_call_gives_its_field_and_unit() {
        assert_eq!(
            call("SELECT integral(v) FROM m").unwrap(),
            Some(("v".into(), 1_000_000_000))
        );
        assert_eq!(
            call("SELECT integral(v, 1m) FROM m").unwrap(),
            Some(("v".into(), 60_000_000_000))
        );
        assert_eq!(call("SELECT mean(v) FROM m").unwrap(), None);
    }

    #[test]
    fn other_uses_are_named() {
        for (q, want) in [
            ("SELECT integral(v), mean(v) FROM m", "beside other fields"),
            ("SELECT integral(v) * 2 FROM m", "inside an expression"),
            (
                "SELECT integral(v, 2) FROM m",
                "second argument must be a duration",
            ),
            ("SELECT integral(v, 0s) FROM m", "must be positive, got 0s"),
            ("SELECT integral() FROM m", "got 0"),
            ("SELECT integral(mean(v)) FROM m", "expected field argument"),
            ("SELECT integral(v, 1s, 2) FROM m", "got 3"),
        ] {
            let err = call(q)
                .err()
                .unwrap_or_else(|| panic!("{q} planned"))
                .to_string();
            assert!(err.contains(want), "{q}: {err}");
        }
    }
}

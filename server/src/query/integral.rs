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

/// A point's value.
const VALUE: &str = "__sl_v";
/// The pods' shares, named once for several integrals.
const SHARES: &str = "__sl_shares";
/// A series' group and its place in series-key order, numbered from the series table.
const GROUP: &str = "__sl_group";
const RANK: &str = "__sl_rank";
const NUMBERS: &str = "__sl_numbers";
/// The order of points of several series at one time: by a hash of the series' key, the same
/// on every pod and a number a share sends instead of the key's text (InfluxDB's own order
/// there is its merge's, which no rule describes).
const ORDER: &str = "cityHash64(toJSONString(mapSort(s.tags)))";

/// Most `integral()` calls a statement plans: each is a plan of its own, and on the default
/// budget 32 bucketed integrals of 100 points needed more than a query's 128 MiB (16: 0.31 s).
const MAX_INTEGRALS: usize = 16;

/// An `integral()` of a select list: its field and unit in nanoseconds.
pub(super) struct Integral<'e> {
    field: &'e Expr,
    unit: i64,
}

/// The select list when it is only `integral(...)` calls (`integral(*)` is one per numeric
/// field); an error when one stands beside other fields or inside an expression, which sluice
/// does not plan yet.
pub(super) fn integral_calls<'e>(
    exprs: &[&'e Expr],
) -> Result<Option<Vec<Integral<'e>>>, PlanError> {
    let all = !exprs.is_empty()
        && exprs
            .iter()
            .all(|e| matches!(e, Expr::Call { name, .. } if name == "integral"));
    if !all {
        if exprs.iter().any(|e| calls_integral(e)) {
            return Err(PlanError::Unsupported(
                "integral() beside other fields or inside an expression is not supported by sluice yet"
                    .into(),
            ));
        }
        return Ok(None);
    }
    if exprs.len() > MAX_INTEGRALS {
        return Err(PlanError::Unsupported(format!(
            "{} integral() calls in one statement (more than {MAX_INTEGRALS}) are not supported by sluice yet: name at most {MAX_INTEGRALS} fields",
            exprs.len()
        )));
    }
    exprs
        .iter()
        .map(|e| match e {
            Expr::Call { args, .. } => integral_of(args),
            _ => unreachable!("checked above"),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn integral_of(args: &[Expr]) -> Result<Integral<'_>, PlanError> {
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
    Ok(Integral { field, unit })
}

fn calls_integral(e: &Expr) -> bool {
    let mut found = false;
    super::cond::visit(e, &mut |x| {
        found |= matches!(x, Expr::Call { name, .. } if name == "integral")
    });
    found
}

impl Query<'_> {
    /// The plan of a select list of `integral(field, unit)` calls (see the module's doc): each
    /// computed alone, the answers joined by group and time (InfluxDB answers a row where any
    /// of them has a value).
    pub(super) fn integral(&self, calls: &[Integral]) -> Result<String, PlanError> {
        if self.stmt.order == Some(SortOrder::Descending) {
            return Err(PlanError::Unsupported(
                "integral() with ORDER BY time DESC is not supported by sluice yet".into(),
            ));
        }
        let fields = calls
            .iter()
            .map(|c| self.integral_field(c))
            .collect::<Result<Vec<_>, _>>()?;
        let bucketing = self.bucketing()?;
        // Each point with its group and its series' place in [`ORDER`]: numbers from the
        // series table on a pod (the texts of the tags per point took more memory than a query
        // gets over 3.6 M points); in a share the group's text, as the gathering pod merges
        // pods whose numbers differ, each block's texts once (`LowCardinality`).
        let numbered = format!(
            "SELECT series_id, tags, toUInt32(dense_rank() OVER (ORDER BY {})) AS {GROUP}, toUInt32(row_number() OVER (ORDER BY {ORDER})) AS {RANK} FROM ({}) AS s",
            self.grouping.sql(),
            self.series_sql()
        );
        let (with, shares) = match self.mode {
            Mode::Partial | Mode::Shape => {
                let values: Vec<String> = fields
                    .iter()
                    .enumerate()
                    .map(|(i, (x, _))| format!("toFloat64({x}) AS {}", value_of(i)))
                    .collect();
                let present: Vec<String> = fields
                    .iter()
                    .map(|(x, _)| format!("{x} IS NOT NULL"))
                    .collect();
                return Ok(format!(
                    "SELECT toLowCardinality({}) AS {TAGS}, toUnixTimestamp64Nano(m.time) AS {TIME}, {ORDER} AS {KEY}, {} {}",
                    self.grouping.sql(),
                    values.join(", "),
                    self.tables_and_filter(true, &[format!("({})", present.join(" OR "))])
                ));
            }
            // The pods' shares, fetched once for every integral.
            Mode::Final(source) if calls.len() > 1 => (
                format!("WITH {SHARES} AS MATERIALIZED (SELECT * FROM {source}) "),
                SHARES.to_string(),
            ),
            Mode::Final(source) => (String::new(), source.to_string()),
            Mode::Whole => (String::new(), String::new()),
        };
        let mut answers = Vec::new();
        for (i, (call, (x, ty))) in calls.iter().zip(&fields).enumerate() {
            let points = match self.mode {
                Mode::Whole => {
                    let lookup = |k: usize| {
                        format!("transform(m.series_id, {NUMBERS}.1, {NUMBERS}.{k}, toUInt32(0))")
                    };
                    format!(
                        "WITH (SELECT (groupArray(series_id), groupArray({GROUP}), groupArray({RANK})) FROM ({numbered})) AS {NUMBERS} SELECT {} AS g, toUnixTimestamp64Nano(m.time) AS {TIME}, {} AS r, toFloat64({x}) AS {VALUE} {}",
                        lookup(2),
                        lookup(3),
                        self.tables_and_filter(
                            self.filter.rows_use_tags,
                            &[format!("{x} IS NOT NULL")]
                        )
                    )
                }
                _ => format!(
                    "SELECT {TAGS} AS g, {TIME}, {KEY} AS r, {v} AS {VALUE} FROM {shares} WHERE {v} IS NOT NULL",
                    v = value_of(i)
                ),
            };
            let per_group = self.per_group(&points, call.unit, *ty, bucketing.as_ref(), i)?;
            answers.push(self.tagged(&per_group, &numbered, i));
        }
        let joined = match answers.as_slice() {
            [one] => one.clone(),
            _ => {
                let cols: Vec<String> = (0..answers.len()).map(value_col).collect();
                let mut from = String::new();
                for (i, a) in answers.iter().enumerate() {
                    if i == 0 {
                        from.push_str(&format!("({a}) AS __sl_j0"));
                    } else {
                        from.push_str(&format!(
                            " FULL OUTER JOIN ({a}) AS __sl_j{i} USING ({TAGS}, {TIME})"
                        ));
                    }
                }
                format!("SELECT {TAGS}, {TIME}, {} FROM {from}", cols.join(", "))
            }
        };
        Ok(format!(
            "{with}SELECT * FROM ({joined}) ORDER BY {TAGS}, {TIME}{}",
            self.limit_by()
        ))
    }

    /// The SQL and type of an integral's field.
    fn integral_field(&self, call: &Integral) -> Result<(String, FieldType), PlanError> {
        let Expr::VarRef { name, data_type } = call.field else {
            unreachable!("integral_of checked");
        };
        match self.scope.resolve(name, *data_type) {
            Operand::Field(
                sql,
                ty @ (FieldType::Float | FieldType::Integer | FieldType::UInteger),
            ) => Ok((sql, ty)),
            Operand::Field(_, ty) => Err(PlanError::Invalid(format!(
                "integral() takes a numeric field: {name} is a {} field",
                ty.name()
            ))),
            _ => Err(PlanError::Invalid(format!(
                "expected field argument in integral(), {name} is not a field"
            ))),
        }
    }

    /// One integral per group (and bucket) from its `points` (`g`, time, `r`, value), as
    /// column `i`.
    fn per_group(
        &self,
        points: &str,
        u: i64,
        ty: FieldType,
        bucketing: Option<&super::buckets::Bucketing>,
        i: usize,
    ) -> Result<String, PlanError> {
        // Per point the previous one of its group (none for the first): points at one time in
        // [`ORDER`], so that a segment ends at the first of them and the next starts
        // from the last (a segment between two points at one time has no area). Only the two
        // columns over one preceding row: the window then keeps little besides the sort.
        let w =
            format!("PARTITION BY g ORDER BY {TIME}, r ROWS BETWEEN 1 PRECEDING AND CURRENT ROW");
        let points = format!(
            "SELECT g, {TIME} AS b, {VALUE} AS vf, lagInFrame(toNullable({TIME})) OVER ({w}) AS a, lagInFrame({VALUE}) OVER ({w}) AS pv FROM ({points})"
        );
        let c = value_col(i);
        let Some(buckets) = bucketing else {
            // InfluxDB's float reducer answers at time 0, its integer one at the range's start.
            let time = match ty {
                FieldType::Float => 0,
                _ => self.filter.range.min.unwrap_or(0),
            };
            return Ok(format!(
                "SELECT g, toInt64({time}) AS {TIME}, toNullable(sum(if(a IS NULL, 0, 0.5 * (vf + pv) * ((b - assumeNotNull(a)) / {u})))) AS {c} FROM ({points}) GROUP BY g"
            ));
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
        Ok(format!(
            "SELECT g, bucket AS {TIME}, toNullable(s) AS {c} FROM ({per_bucket}) WHERE NOT (bucket = last_bucket AND last_pt = bucket)"
        ))
    }

    /// The answer from `per_group` (`g`, time, column `i`): on a pod its groups' numbers
    /// joined to their tags (`numbered`), on the gathering pod `g` is the tags already.
    fn tagged(&self, per_group: &str, numbered: &str, i: usize) -> String {
        let c = value_col(i);
        match self.mode {
            Mode::Final(_) => format!("SELECT g AS {TAGS}, {TIME}, {c} FROM ({per_group})"),
            _ => format!(
                "SELECT {} AS {TAGS}, p.{TIME} AS {TIME}, p.{c} AS {c} FROM ({per_group}) AS p INNER JOIN (SELECT {GROUP}, any(tags) AS tags FROM ({numbered}) GROUP BY {GROUP}) AS s ON p.g = s.{GROUP}",
                self.grouping.sql()
            ),
        }
    }
}

/// A share's column of integral `i`'s values.
fn value_of(i: usize) -> String {
    format!("{VALUE}{i}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(q: &str) -> Result<Option<Vec<(String, i64)>>, PlanError> {
        let stmt = crate::query::plan::select_of(q);
        let exprs: Vec<&Expr> = stmt.fields.iter().map(|f| &f.expr).collect();
        Ok(integral_calls(&exprs)?
            .map(|cs| cs.iter().map(|c| (c.field.to_string(), c.unit)).collect()))
    }

    fn call(q: &str) -> Result<Option<(String, i64)>, PlanError> {
        Ok(calls(q)?.map(|mut cs| cs.remove(0)))
    }

    #[test]
    fn integral_calls_give_their_fields_and_units() {
        assert_eq!(
            call("SELECT integral(v) FROM m").unwrap(),
            Some(("v".into(), 1_000_000_000))
        );
        assert_eq!(
            calls("SELECT integral(v, 1m), integral(w) FROM m").unwrap(),
            Some(vec![
                ("v".into(), 60_000_000_000),
                ("w".into(), 1_000_000_000)
            ])
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
            (
                "SELECT integral(a), integral(b), integral(c), integral(d), integral(e), integral(f), integral(g), integral(h), integral(i), integral(j), integral(k), integral(l), integral(m), integral(n), integral(o), integral(p), integral(q) FROM m",
                "17 integral() calls in one statement (more than 16)",
            ),
        ] {
            let err = call(q)
                .err()
                .unwrap_or_else(|| panic!("{q} planned"))
                .to_string();
            assert!(err.contains(want), "{q}: {err}");
        }
    }
}

//! InfluxQL's transforms (`derivative`, `difference`, `moving_average`, `cumulative_sum`,
//! `elapsed` and their kin) over a series' buckets or points, as window functions.

use sluice_influxql::{Expr, Literal};

use super::function_kind;
use crate::query::PlanError;

/// A transform over a series' buckets, computed by window functions once the aggregate of
/// each bucket is known (and its gaps filled).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Transform {
    /// Per `unit` nanoseconds; negative results dropped when `non_negative`.
    Derivative {
        unit: i64,
        non_negative: bool,
    },
    Difference {
        non_negative: bool,
    },
    CumulativeSum,
    MovingAverage(u64),
    /// Time since the previous point, in units of this many nanoseconds.
    Elapsed(i64),
}

impl Transform {
    pub fn name(&self) -> &'static str {
        match self {
            Transform::Derivative {
                non_negative: false,
                ..
            } => "derivative",
            Transform::Derivative {
                non_negative: true, ..
            } => "non_negative_derivative",
            Transform::Difference {
                non_negative: false,
            } => "difference",
            Transform::Difference { non_negative: true } => "non_negative_difference",
            Transform::CumulativeSum => "cumulative_sum",
            Transform::MovingAverage(_) => "moving_average",
            Transform::Elapsed(_) => "elapsed",
        }
    }

    /// The column the transform of column `c` needs beside it: for `moving_average` the rank
    /// of each value among the series' values so far (in the answer's order), which the
    /// caller computes as `count(c)` over the rows up to it.
    pub fn value_rank(&self, c: &str) -> Option<String> {
        matches!(self, Transform::MovingAverage(_)).then(|| value_rank_col(c))
    }

    /// The transform of column `c`, partitioned by series and ordered by time (`desc`: latest
    /// first, as InfluxDB iterates under `ORDER BY time DESC`). The previous value is the last
    /// one present before the bucket in that order (InfluxDB skips empty buckets). Under
    /// `desc` InfluxDB's derivative divides by the time back to the later point, so it comes
    /// out with the sign of the difference; `elapsed` is negative. `beyond`: SQL true for the
    /// rows of a bucket read beyond the asked range for other transforms, which a
    /// `cumulative_sum` (that reads none) leaves out of its sums.
    pub fn sql(&self, c: &str, desc: bool, beyond: Option<&str>) -> String {
        use crate::query::plan::{TAGS, TIME};
        let dir = if desc { " DESC" } else { "" };
        let part = format!("PARTITION BY {TAGS} ORDER BY {TIME}{dir}");
        let before = format!("({part} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)");
        // Nullable even where a fill made the column a plain number: before a series' first
        // bucket the window is empty, and its `last_value` must be NULL, not 0.
        // `elapsed` needs a value's presence alone: it takes strings and booleans too.
        let x = match self {
            Transform::Elapsed(_) => format!("if(({c}) IS NULL, NULL, toNullable(1.))"),
            _ => format!("toNullable(toFloat64({c}))"),
        };
        let pv = format!("last_value({x}) OVER {before}");
        let pt = format!("last_value(if(({x}) IS NULL, NULL, {TIME})) OVER {before}");
        let non_negative = |v: String, yes: bool| {
            if yes {
                format!("if(({v}) < 0, NULL, {v})")
            } else {
                v
            }
        };
        match *self {
            Transform::Derivative {
                unit,
                non_negative: nn,
            } => {
                let span = if desc {
                    format!("({pt} - {TIME})")
                } else {
                    format!("({TIME} - {pt})")
                };
                non_negative(format!("({x} - {pv}) * {unit} / {span}"), nn)
            }
            Transform::Difference { non_negative: nn } => non_negative(format!("({x} - {pv})"), nn),
            Transform::CumulativeSum => {
                let x = match beyond {
                    Some(b) => format!("if({b}, NULL, {x})"),
                    None => x,
                };
                format!(
                    "if(({x}) IS NULL, NULL, sum({x}) OVER ({part} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW))"
                )
            }
            Transform::Elapsed(unit) => {
                format!("if(({x}) IS NULL, NULL, intDiv({TIME} - {pt}, {unit}))")
            }
            // Over the last `n` values, as InfluxDB skips the buckets without one: the window
            // runs over the values' ranks ([`Transform::value_rank`]).
            Transform::MovingAverage(n) => {
                let rank = value_rank_col(c);
                let w = format!(
                    "(PARTITION BY {TAGS} ORDER BY {rank} RANGE BETWEEN {} PRECEDING AND CURRENT ROW)",
                    n - 1
                );
                format!("if(({x}) IS NULL OR {rank} < {n}, NULL, avg({x}) OVER {w})")
            }
        }
    }
}

/// The widest `moving_average` window: the engine's window frame takes an offset below 2^31
/// only, and a window this wide already needs a series of a billion values in one read.
pub const MAX_MOVING_AVERAGE: i64 = 1 << 30;

fn value_rank_col(c: &str) -> String {
    format!("{c}_rank")
}

/// `derivative(mean(v), 1s)` and its kin: the transform and the aggregate inside it. A
/// derivative without a unit is per `default_unit` (InfluxDB: the `GROUP BY time` interval).
pub fn transform_of(e: &Expr, default_unit: i64) -> Result<Option<(Transform, &Expr)>, PlanError> {
    let Expr::Call { name, args } = e else {
        return Ok(None);
    };
    let t = match name.as_str() {
        "derivative" | "non_negative_derivative" => {
            let unit = match args.get(1) {
                None => default_unit,
                Some(Expr::Literal(Literal::Duration(d))) if d.as_nanos() > 0 => d.as_nanos(),
                Some(other) => {
                    return Err(PlanError::Invalid(format!(
                        "second argument to {name} must be a duration, got {other}"
                    )))
                }
            };
            Transform::Derivative {
                unit,
                non_negative: name.starts_with("non_"),
            }
        }
        "difference" | "non_negative_difference" => Transform::Difference {
            non_negative: name.starts_with("non_"),
        },
        "cumulative_sum" => Transform::CumulativeSum,
        "elapsed" => Transform::Elapsed(match args.get(1) {
            None => 1,
            Some(Expr::Literal(Literal::Duration(d))) if d.as_nanos() > 0 => d.as_nanos(),
            Some(other) => {
                return Err(PlanError::Invalid(format!(
                    "second argument to elapsed must be a duration, got {other}"
                )))
            }
        }),
        "moving_average" => match args.get(1) {
            Some(Expr::Literal(Literal::Integer(n))) if *n > MAX_MOVING_AVERAGE => {
                return Err(PlanError::Invalid(format!(
                    "moving_average window must be at most {MAX_MOVING_AVERAGE}, got {n}"
                )))
            }
            Some(Expr::Literal(Literal::Integer(n))) if *n > 1 => {
                Transform::MovingAverage(*n as u64)
            }
            _ => {
                return Err(PlanError::Invalid(
                    "second argument for moving_average must be an integer greater than 1".into(),
                ))
            }
        },
        _ => return Ok(None),
    };
    match args.first() {
        Some(inner @ Expr::Call { name: f, .. }) if function_kind(f).is_some() => {
            Ok(Some((t, inner)))
        }
        Some(inner @ Expr::VarRef { .. }) => Ok(Some((t, inner))),
        _ => Err(PlanError::Invalid(format!(
            "expected a field or an aggregate as the first argument of {name}()"
        ))),
    }
}

/// Whether `e` is a transform of a field itself (`derivative("v", 1s)`, `elapsed("v")`),
/// which runs over the points rather than over buckets.
pub fn is_raw_transform(e: &Expr) -> bool {
    let e = match crate::query::math::around_transform(e) {
        Ok(Some((_, t))) => t,
        _ => e,
    };
    matches!(e, Expr::Call { name, args }
        if TRANSFORMS.contains(&name.as_str()) && matches!(args.first(), Some(Expr::VarRef { .. })))
}

/// Whether `e` (or the transform inside its math) is a transform over buckets that InfluxDB
/// 1.8 feeds one bucket more than the range holds (before it, or after it in descending
/// order; its `buildCallIterator` moves the start by an interval): the range's first bucket
/// then has one to compare with, and with it the points of that interval. `cumulative_sum`
/// is not one of them.
pub fn reads_a_bucket_more(e: &Expr) -> bool {
    let e = match crate::query::math::around_transform(e) {
        Ok(Some((_, t))) => t,
        _ => e,
    };
    matches!(e, Expr::Call { name, args }
        if TRANSFORMS.contains(&name.as_str())
            && name != "cumulative_sum"
            && matches!(args.first(), Some(Expr::Call { .. })))
}

pub fn is_transform(name: &str) -> bool {
    TRANSFORMS.contains(&name)
}

const TRANSFORMS: [&str; 7] = [
    "derivative",
    "non_negative_derivative",
    "difference",
    "non_negative_difference",
    "cumulative_sum",
    "moving_average",
    "elapsed",
];

#[cfg(test)]
mod tests {
    use super::{transform_of, Transform, MAX_MOVING_AVERAGE};

    fn transform(f: &str) -> Result<Option<Transform>, String> {
        let e = sluice_influxql::parse_expr(f).map_err(|e| e.to_string())?;
        transform_of(&e, 1)
            .map(|t| t.map(|(t, _)| t))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_moving_average_wider_than_the_engine_frames_is_refused_in_words() {
        // The engine's own refusal ("Frame start offset ... must be a nonnegative 32-bit
        // integer") would reach the user as its exception text.
        assert_eq!(
            transform("moving_average(v, 999999999999)").unwrap_err(),
            "moving_average window must be at most 1073741824, got 999999999999"
        );
        assert!(matches!(
            transform(&format!("moving_average(v, {MAX_MOVING_AVERAGE})")),
            Ok(Some(Transform::MovingAverage(n))) if n == MAX_MOVING_AVERAGE as u64
        ));
    }
}

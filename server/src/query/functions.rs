//! InfluxQL's aggregates and selectors as ClickHouse aggregate functions, with InfluxDB's
//! semantics where the two differ (ties of `first`/`last`, the nearest rank of `percentile`,
//! `stddev` of one point, `mode`'s ties).

use std::collections::BTreeMap;

use sluice_core::FieldType;
use sluice_influxql::{Expr, Literal};

use super::cond::{self, Operand, Scope};
use super::order_key::{self, Part};
use super::PlanError;

/// How the aggregates of a statement are computed: in one `GROUP BY`, or in two phases like
/// ClickHouse's Distributed engine (`-State` per series and bucket before the series' tags are
/// joined, `-Merge` per group after): joining tags to every row of a large table cost more
/// than the aggregation itself.
pub struct States {
    two_phase: bool,
    /// Whether the aggregation runs in key order ([`States::order_key`]).
    in_key_order: bool,
    /// The aggregates of the first phase, `(function, parameters, arguments)`; the `i`th is
    /// the column `__sl_s<i>`.
    partial: Vec<(String, String, String)>,
    /// Whether `mean` and `sum` of a float field add their points in time order: the engine
    /// adds them in the order it reads them (a bucket split over parts or pods adds partial
    /// sums), which can differ in the last bit, and `holt_winters()` fits its model to them.
    ordered_sums: bool,
}

impl States {
    pub fn new(two_phase: bool, in_key_order: bool) -> Self {
        Self {
            two_phase,
            in_key_order,
            partial: Vec::new(),
            ordered_sums: false,
        }
    }

    /// With `mean` and `sum` of float fields added in time order (see the field).
    pub fn with_ordered_sums(mut self, ordered: bool) -> Self {
        self.ordered_sums = ordered;
        self
    }

    /// The sum of the float values `x` of a bucket's points, added one after the other in
    /// time order (ties by value), and how many there were: the same bits however the points
    /// are split among parts and pods, and InfluxDB's own order for one series. Each point is
    /// kept (16 bytes) until its bucket is summed.
    fn ordered_sum(&mut self, x: &str) -> (String, String) {
        let points = self.agg(
            "groupArrayIf",
            None,
            &format!("(m.time, toFloat64(assumeNotNull({x}))), {x} IS NOT NULL"),
        );
        (
            format!("arrayFold((acc, p) -> acc + p.2, arraySort({points}), toFloat64(0))"),
            format!("length({points})"),
        )
    }

    /// A selector's ordering key: packed into one number ([`order_key::key`]) for a hash
    /// aggregation, where it made the max per host over an hour of 10,000 series 2.5 times
    /// faster and the last point per minute and series 3 times. In key order the tuple stays:
    /// each series' rows arrive together, and computing the packed key of every row cost more
    /// than the tuple saved (90 against 96 ms for that max per host).
    pub fn order_key(&self, first: Part, second: Part) -> String {
        if self.in_key_order {
            order_key::tuple(&first, &second)
        } else {
            order_key::key(first, second)
        }
    }

    /// The aggregate `f(args)`, or `f(params)(args)` with parameters.
    pub fn agg(&mut self, f: &str, params: Option<&str>, args: &str) -> String {
        let p = params.map(|p| format!("({p})")).unwrap_or_default();
        if !self.two_phase {
            return format!("{f}{p}({args})");
        }
        let entry = (f.to_string(), p.clone(), args.to_string());
        let i = match self.partial.iter().position(|e| *e == entry) {
            Some(i) => i,
            None => {
                self.partial.push(entry);
                self.partial.len() - 1
            }
        };
        format!("{f}Merge{p}(__sl_s{i})")
    }

    /// The first phase's columns, `fState(args) AS __sl_s<i>`.
    pub fn state_columns(&self) -> Vec<String> {
        self.partial
            .iter()
            .enumerate()
            .map(|(i, (f, p, args))| format!("{f}State{p}({args}) AS __sl_s{i}"))
            .collect()
    }

    /// The first phase's states merged into coarser states, `fMergeState(__sl_s<i>)`: a
    /// pod's per-series states combined per group before they travel.
    pub fn merge_state_columns(&self) -> Vec<String> {
        self.partial
            .iter()
            .enumerate()
            .map(|(i, (f, p, _))| format!("{f}MergeState{p}(__sl_s{i}) AS __sl_s{i}"))
            .collect()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Aggregate,
    Selector,
}

pub fn function_kind(name: &str) -> Option<Kind> {
    Some(match name {
        "mean" | "median" | "count" | "sum" | "spread" | "stddev" | "mode" => Kind::Aggregate,
        "min" | "max" | "first" | "last" | "percentile" => Kind::Selector,
        _ => return None,
    })
}

/// Functions InfluxDB has that this planner does not run yet: named in the error.
pub fn is_known_unsupported(name: &str) -> bool {
    matches!(
        name,
        "derivative"
            | "non_negative_derivative"
            | "difference"
            | "non_negative_difference"
            | "moving_average"
            | "cumulative_sum"
            | "elapsed"
            | "sample"
            | "integral"
            | "holt_winters"
            | "holt_winters_with_fit"
            | "exponential_moving_average"
            | "double_exponential_moving_average"
            | "triple_exponential_moving_average"
            | "triple_exponential_derivative"
            | "relative_strength_index"
            | "kaufmans_efficiency_ratio"
            | "kaufmans_adaptive_moving_average"
            | "chande_momentum_oscillator"
    )
}

pub fn call_sql(
    scope: &Scope,
    states: &mut States,
    name: &str,
    args: &[Expr],
    only: Option<&str>,
) -> Result<String, PlanError> {
    // `only`: SQL true for the rows this call may read; the others are no value to it.
    let within = |x: String| match only {
        Some(c) => format!("if({c}, {x}, NULL)"),
        None => x,
    };
    if function_kind(name).is_none() {
        // A transform reaches here only from inside arithmetic: alone, or under math calls,
        // the planner runs it over the buckets or the points.
        if is_transform(name) {
            return Err(PlanError::Unsupported(format!(
                "{name}() inside arithmetic is not supported by sluice yet"
            )));
        }
        return Err(if is_known_unsupported(name) {
            PlanError::Unsupported(format!("{name}() is not supported by sluice yet"))
        } else {
            PlanError::Invalid(format!("undefined function {name}()"))
        });
    }
    let want = if name == "percentile" { 2 } else { 1 };
    if args.len() != want {
        return Err(PlanError::Invalid(format!(
            "invalid number of arguments for {name}, expected {want}, got {}",
            args.len()
        )));
    }
    // count(distinct(f)) / count(DISTINCT f)
    if name == "count" {
        let inner = match &args[0] {
            Expr::Distinct(f) => Some(f.clone()),
            Expr::Call { name, args } if name == "distinct" && args.len() == 1 => match &args[0] {
                Expr::VarRef { name, .. } => Some(name.clone()),
                _ => None,
            },
            _ => None,
        };
        if let Some(f) = inner {
            let x = within(cond::operand_sql(&scope.resolve(&f, None), "s.tags"));
            return Ok(states.agg("uniqExact", None, &x));
        }
    }
    let Expr::VarRef { name: f, data_type } = &args[0] else {
        return Err(PlanError::Invalid(format!(
            "expected field argument in {name}()"
        )));
    };
    let (x, ty) = match scope.resolve(f, *data_type) {
        op @ Operand::Field(_, ty) => (within(cond::operand_sql(&op, "s.tags")), Some(ty)),
        _ => ("CAST(NULL, 'Nullable(Float64)')".into(), None),
    };
    if let Some(t @ (FieldType::String | FieldType::Boolean)) = ty {
        if takes_numbers(name, t) {
            return Err(PlanError::Invalid(format!(
                "{name}() takes a numeric field: {f} is a {t} field"
            )));
        }
    }
    if states.ordered_sums && ty == Some(FieldType::Float) && matches!(name, "mean" | "sum") {
        let (sum, n) = states.ordered_sum(&x);
        return Ok(match name {
            "mean" => format!("if({n} = 0, NULL, {sum} / {n})"),
            _ => format!("if({n} = 0, NULL, {sum})"),
        });
    }
    let mut agg = |f: &str, args: &str| states.agg(f, None, args);
    Ok(match name {
        "mean" => agg("avg", &x),
        "median" => states.agg("quantileExactInclusive", Some("0.5"), &x),
        "count" => agg("count", &x),
        "sum" => agg("sum", &x),
        "min" => agg("min", &x),
        "max" => agg("max", &x),
        // Points at the same time: InfluxDB's first and last keep the greatest value.
        "first" => {
            let key = states.order_key(Part::Time { desc: true }, Part::Value(&x, ty));
            states.agg("argMax", None, &format!("{x}, {key}"))
        }
        "last" => {
            let key = states.order_key(Part::Time { desc: false }, Part::Value(&x, ty));
            states.agg("argMax", None, &format!("{x}, {key}"))
        }
        "spread" => format!("({} - {})", agg("max", &x), agg("min", &x)),
        // Of one point InfluxDB answers NaN, written as null: a value to `fill` (which leaves
        // it), to `fill(previous)` (which carries it) and to transforms (whose answers from
        // it are NaN too). Of no point, no value.
        "stddev" => {
            let n = agg("count", &x);
            format!(
                "multiIf({n} = 0, NULL, {n} = 1, nan, {})",
                agg("stddevSamp", &x)
            )
        }
        // The most frequent value, the smallest of those on a tie (InfluxDB sorts first).
        "mode" => {
            let counts = agg(
                "sumMapIf",
                &format!("map(assumeNotNull({x}), toUInt64(1)), {x} IS NOT NULL"),
            );
            format!(
                "arrayElement(arraySort((v, c) -> (-c, v), mapKeys({counts}), mapValues({counts})), 1)"
            )
        }
        "percentile" => {
            let p = percentile_of(&args[1])?;
            let n = agg("count", &x);
            let all = agg("groupArray", &x);
            let rank = nearest_rank(&n, p);
            format!("if({rank} BETWEEN 1 AND {n}, arraySort({all})[{rank}], NULL)")
        }
        _ => unreachable!("function_kind checked"),
    })
}

/// Whether aggregate `name` refuses a field of type `t` (a string or a boolean), as InfluxDB
/// has no iterator for it: `min` and `max` take booleans, no numeric aggregate takes strings.
fn takes_numbers(name: &str, t: FieldType) -> bool {
    match name {
        "mean" | "median" | "sum" | "spread" | "stddev" | "percentile" => true,
        "min" | "max" => t == FieldType::String,
        _ => false,
    }
}

/// Refuses transform `t` of `input` (a field, or an aggregate of one) where that answers
/// strings or booleans: InfluxDB computes every transform but `elapsed` with numbers.
pub fn check_transform_input(
    t: &Transform,
    input: &Expr,
    fields: &BTreeMap<String, FieldType>,
) -> Result<(), PlanError> {
    if matches!(t, Transform::Elapsed(_)) {
        return Ok(());
    }
    let field = match input {
        Expr::VarRef { name, .. } => name,
        Expr::Call { args, .. } => match args.first() {
            Some(Expr::VarRef { name, .. }) => name,
            _ => return Ok(()),
        },
        _ => return Ok(()),
    };
    if !fields.contains_key(field) {
        return Ok(());
    }
    let ty = super::subquery::column_type(input, fields);
    if !matches!(ty, FieldType::String | FieldType::Boolean) {
        return Ok(());
    }
    let name = t.name();
    Err(PlanError::Invalid(match input {
        Expr::VarRef { .. } => format!("{name}() takes a numeric field: {field} is a {ty} field"),
        _ => format!("{name}() takes numbers: {input} answers {ty}s"),
    }))
}

/// The percentage of `percentile(f, N)`.
pub fn percentile_of(arg: &Expr) -> Result<f64, PlanError> {
    match arg {
        Expr::Literal(Literal::Integer(n)) => Ok(*n as f64),
        Expr::Literal(Literal::Float(v)) => Ok(*v),
        other => Err(PlanError::Invalid(format!(
            "expected float argument in percentile(), got {other}"
        ))),
    }
}

/// InfluxDB's nearest rank of percentile `p` among `n` values (SQL): floor(n * p / 100 + 0.5),
/// 1-based; no value when it falls outside them.
pub fn nearest_rank(n: &str, p: f64) -> String {
    format!("toInt64(floor({n} * {p:?} / 100 + 0.5))")
}

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
        use super::plan::{TAGS, TIME};
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
    let e = match super::math::around_transform(e) {
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
    let e = match super::math::around_transform(e) {
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

//! InfluxQL's aggregates and selectors as ClickHouse aggregate functions, with InfluxDB's
//! semantics where the two differ (ties of `first`/`last`, the nearest rank of `percentile`,
//! `stddev` of one point, `mode`'s ties).

use std::collections::BTreeMap;

use sluice_core::FieldType;
use sluice_influxql::{Expr, Literal};

use super::cond::{self, Operand, Scope};

mod transforms;
use super::order_key::{self, Part};
use super::PlanError;
pub use transforms::*;

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
            // A name that is no field counts nothing, as in `count()` (the series' tags are
            // not at hand where the states are computed).
            let x = match scope.resolve(&f, None) {
                op @ Operand::Field(..) => within(cond::operand_sql(&op, "s.tags")),
                _ => "CAST(NULL, 'Nullable(Float64)')".into(),
            };
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
        // The most frequent value, with InfluxDB's ties (`mode_sql`).
        "mode" => {
            // The engine's `-Map` combinator takes no float keys: a float is counted by its
            // bits (`+ 0` makes -0 the 0 it equals); so is a name without a field, read as a
            // float NULL.
            let float = matches!(ty, Some(FieldType::Float) | None);
            let key = if float {
                format!("reinterpretAsUInt64(assumeNotNull({x}) + 0)")
            } else {
                format!("assumeNotNull({x})")
            };
            let by_key = |v: &str| format!("map({key}, {v}), {x} IS NOT NULL");
            let counts = agg("sumMapIf", &by_key("toUInt64(1)"));
            let t = "toUnixTimestamp64Nano(m.time)";
            let firsts = agg("minMapIf", &by_key(t));
            let lasts = agg("maxMapIf", &by_key(t));
            mode_sql(
                &counts,
                &firsts,
                &lasts,
                float,
                ty == Some(FieldType::Boolean),
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

/// `mode()` from each value's count and first and last times (maps by value, a float's by
/// its bits), as InfluxDB picks it: it sorts a window's points by value (stably, in a window
/// of up to 12 points) and walks them, so of the values with the most points the smallest
/// wins unless a greater one's first point is no later than the last point of the one ahead
/// of it; with one point each, the smallest. Of booleans `true` wins a tie.
fn mode_sql(counts: &str, firsts: &str, lasts: &str, float: bool, boolean: bool) -> String {
    let value = |k: &str| {
        if float {
            format!("reinterpretAsFloat64({k})")
        } else {
            k.to_string()
        }
    };
    if boolean {
        return format!(
            "arrayElement(arrayReverseSort((k, c) -> (c, k), mapKeys({counts}), mapValues({counts})), 1)"
        );
    }
    let top = format!("arrayMax(mapValues({counts}))");
    let all = format!(
        "arrayZip(mapKeys({counts}), mapValues({counts}), mapValues({firsts}), mapValues({lasts}))"
    );
    let cands = format!(
        "arraySort(x -> {}, arrayFilter(x -> x.2 = {top}, {all}))",
        value("x.1")
    );
    // A value seen once never replaces the one ahead (InfluxDB's walk counts a run from its
    // second point), so with one point each the smallest stays.
    value(&format!(
        "(arrayFold((best, x) -> if(x.2 > 1 AND x.3 <= best.4, x, best), arrayPopFront({cands}), {cands}[1])).1"
    ))
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

//! The aggregate half of a `SELECT` plan: aggregates and selectors per series and bucket (in
//! two phases when grouped by tag), gaps filled, transforms over the buckets.

use sluice_core::FieldType;
use sluice_influxql::{Expr, Fill};

use super::buckets::{linear_sql, real_groups, Bucketing};
use super::cond::{self, Operand};
use super::functions;
use super::math;
use super::order_key::Part;
use super::plan::{value_col, Mode, Query, MAX_BUCKETS, SID, TAGS, TIME};
use super::raw::Beside;
use super::PlanError;
use sluice_influxql::TimeOffset;

impl Query<'_> {
    /// Aggregates and selectors, per time bucket when there is `GROUP BY time(...)`.
    pub(super) fn aggregate(&self, exprs: &[&Expr]) -> Result<String, PlanError> {
        lone_selector_beside_fields(exprs)?;
        let bucketing = self.bucketing()?;
        let two_phase = self.per_series();
        // A gathering read always moves states: they merge exactly across pods.
        let mut states = functions::States::new(
            two_phase || !matches!(self.mode, Mode::Whole),
            self.in_key_order(),
        );
        let mut cols = Vec::new();
        // What makes a group's bucket a point: a value of some call (see `having`).
        let mut present = Vec::new();
        let mut counts = Vec::new();
        let mut transforms = Vec::new();
        // The calls that are no transform, with SQL true where one has a value.
        let mut plain = Vec::new();
        // Per expression, what the outer query makes of its filled calls (else its column).
        let mut outer: Vec<Option<String>> = Vec::new();
        let fill = self.stmt.fill.unwrap_or(Fill::Null);
        let desc = self.descending();
        let asked = self.asked_rows();
        for (i, e) in exprs.iter().enumerate() {
            // `derivative(mean(v), 1s)`: the aggregate per bucket here, the transform over the
            // buckets after the gaps are filled.
            let per = bucketing.as_ref().map_or(1_000_000_000, |b| b.every);
            // `abs(derivative(mean(v)))`: the math applies to the transform's values.
            let (wraps, e) = match math::around_transform(e)? {
                Some((wraps, t)) => (wraps, t),
                None => (Vec::new(), *e),
            };
            let (e, transform) = match functions::transform_of(e, per)? {
                Some((t, inner)) => {
                    if matches!(inner, Expr::VarRef { .. }) {
                        return Err(PlanError::Invalid(format!(
                            "aggregate function required inside the call to {}",
                            t.name()
                        )));
                    }
                    if bucketing.is_none() {
                        return Err(PlanError::Invalid(format!(
                            "{} aggregate requires a GROUP BY interval",
                            t.name()
                        )));
                    }
                    functions::check_transform_input(&t, inner, self.src.fields)?;
                    (inner, Some(t))
                }
                None => (e, None),
            };
            // Beside a transform that reads a bucket more, the other calls read the asked
            // range alone, as InfluxDB gives that bucket to the transform's iterator only.
            let only = if functions::reads_a_bucket_more(exprs[i]) {
                None
            } else {
                asked.as_deref()
            };
            let bare = matches!(e, Expr::Call { name, .. } if !math::is_math(name));
            let first_part = present.len();
            if bucketing.is_some() && fill != Fill::None && !bare {
                // Each call filled before the arithmetic or math over it, as in InfluxDB:
                // `mean(v) * 2` with `fill(1)` is 2 in an empty bucket, `count(v) * 2` is 0.
                let mut parts = Vec::new();
                let whole = self.agg_expr(e, only, &mut states, &mut |name, sql| {
                    let c = format!("{}_{}", value_col(i), parts.len());
                    parts.push(format!("toNullable({}) AS {c}", no_values(name, sql)));
                    present.push(format!("{c} IS NOT NULL"));
                    // Inside arithmetic or math: a number.
                    fill_sql(&c, fill, name == "count", desc, FieldType::Float)
                })?;
                cols.extend(parts);
                outer.push(Some(whole));
            } else {
                let sql = self.agg_expr(e, only, &mut states, &mut no_values)?;
                cols.push(format!("toNullable({sql}) AS {}", value_col(i)));
                present.push(format!("{} IS NOT NULL", value_col(i)));
                outer.push(None);
            }
            if transform.is_none() {
                plain.push((i, present[first_part..].join(" OR ")));
            }
            if matches!(e, Expr::Call { name, .. } if name == "count") {
                counts.push(i);
            }
            if let Some(t) = transform {
                transforms.push((i, t, wraps));
            }
        }
        let floor: Vec<String> = self
            .tail_floor(exprs, bucketing.is_some())
            .into_iter()
            .collect();
        let time = match &bucketing {
            Some(b) => b.bucket_sql(),
            None => self.selector_time(exprs, &mut states),
        };
        // Without buckets the time is a constant or a selector's aggregate: not a key.
        let keys = if bucketing.is_some() {
            format!("{TAGS}, {TIME}")
        } else {
            TAGS.to_string()
        };
        // A bucket (or range) where no call has a value is no point in InfluxDB, even where
        // the measurement has rows of other fields: it is no row, and a series without one
        // is not answered; a fill then treats the bucket as empty.
        let having = format!(" HAVING {}", present.join(" OR "));
        let inner = match self.mode {
            Mode::Partial | Mode::Shape => {
                return Ok(self.partial_states(&states, bucketing.as_ref(), two_phase, &floor))
            }
            Mode::Final(source) => {
                let time = if bucketing.is_some() {
                    TIME.to_string()
                } else {
                    time
                };
                format!(
                    "SELECT {TAGS}, {time} AS {TIME}, {} FROM {source} GROUP BY {keys}{having}",
                    cols.join(", ")
                )
            }
            Mode::Whole if two_phase => {
                let time = match &bucketing {
                    Some(_) => format!("p.{TIME}"),
                    None => time,
                };
                let first = self.first_phase(&states, bucketing.as_ref(), &floor);
                format!(
                    "SELECT {} AS {TAGS}, {time} AS {TIME}, {} FROM {first} GROUP BY {keys}{having}",
                    self.partial_tags_sql(),
                    cols.join(", "),
                )
            }
            Mode::Whole => {
                let join = self.grouping.tagged() || self.filter.rows_use_tags;
                format!(
                    "SELECT {} AS {TAGS}, {time} AS {TIME}, {} {} GROUP BY {keys}{having}",
                    self.grouping.sql(),
                    cols.join(", "),
                    self.tables_and_filter(join, &floor)
                )
            }
        };
        let (mut inner, filled) = match (&bucketing, fill) {
            (Some(b), f) if f != Fill::None => (format!("{inner} {}", b.fill_sql()?), true),
            _ => (inner, false),
        };
        let mut outer_cols: Vec<String> = outer
            .iter()
            .enumerate()
            .map(|(i, whole)| {
                let c = value_col(i);
                let v = match whole {
                    Some(whole) => whole.clone(),
                    None if filled => {
                        let ty = super::subquery::column_type(exprs[i], self.src.fields);
                        fill_sql(&c, fill, counts.contains(&i), desc, ty)
                    }
                    None => c.clone(),
                };
                format!("{v} AS {c}")
            })
            .collect();
        // Nothing around the rows would change one: they are the answer as they come, in
        // their order (a fill's rows of no group, when nothing matched, are dropped where
        // they are read, [`super::shape::parse_rows`]). Each query around them cost the
        // engine about 1.5 ms of one host's 12 hours per minute (10-13 ms) and 3 of 8
        // hosts' hour (bench/README, "Queries").
        let bare = outer_cols
            .iter()
            .enumerate()
            .all(|(i, col)| *col == format!("{0} AS {0}", value_col(i)));
        let limited = self.stmt.limit.is_some() || self.stmt.offset.is_some();
        if bare && transforms.is_empty() && !desc && !limited {
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
        if !transforms.is_empty() && !plain.is_empty() && fill != Fill::None {
            // Beside transforms, a filled call makes rows for the series where it has a value,
            // as InfluxDB fills only the series a call's iterator has (under `fill(none)` its
            // values alone make rows).
            let has: Vec<String> = plain
                .iter()
                .map(|(i, has)| {
                    let c = super::raw::has_col(*i);
                    outer_cols.push(c.clone());
                    format!("max(toUInt8({has})) OVER (PARTITION BY {TAGS}) AS {c}")
                })
                .collect();
            inner = format!("SELECT *, {} FROM ({inner})", has.join(", "));
        }
        let rows = format!(
            "SELECT {TAGS}, {TIME}, {} FROM ({inner}){real}",
            outer_cols.join(", ")
        );
        if !transforms.is_empty() {
            // Other calls beside the transforms make their own rows, as InfluxDB zips the
            // calls' iterators: every bucket, or under `fill(none)` those with a value.
            let beside = Beside {
                fill,
                types: exprs
                    .iter()
                    .map(|e| super::subquery::column_type(e, self.src.fields))
                    .collect(),
            };
            return self.transformed(rows, exprs.len(), &transforms, Some(&beside));
        }
        // ORDER BY time DESC reverses the series' order too, as in InfluxDB.
        let dir = self.direction();
        if fill == Fill::None && bucketing.is_some() && exprs.len() > 1 {
            if let Some(rows) = self.limited_per_call(&rows, exprs.len()) {
                return Ok(format!(
                    "SELECT * FROM ({rows}) ORDER BY {TAGS}{dir}, {TIME}{dir}"
                ));
            }
        }
        Ok(format!(
            "SELECT * FROM ({rows}) ORDER BY {TAGS}{dir}, {TIME}{dir}{}",
            self.limit_by()
        ))
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

    /// Whether an aggregate runs in two phases: grouped by tags, it aggregates each series
    /// first and joins the tags to the partials; a row-level tag condition needs the tags of
    /// every row, and one phase.
    pub(super) fn per_series(&self) -> bool {
        self.grouping.tagged() && !self.filter.rows_use_tags
    }

    /// Whether an aggregation of it runs in key order
    /// ([`crate::engine::ReadSettings::aggregation_in_order`]): per series, over the whole
    /// range, on a pod (the gathering pod merges states).
    pub(super) fn in_key_order(&self) -> bool {
        self.per_series()
            && self.stmt.group_by_time().is_none()
            && !matches!(self.mode, Mode::Final(_))
    }

    /// A pod's share of an aggregate: the states per grouping tags (and bucket), which the
    /// gathering pod merges. Grouped by tags without row-level tag conditions, per series
    /// first and the series' tags joined to the states, as in one pod.
    fn partial_states(
        &self,
        states: &functions::States,
        bucketing: Option<&Bucketing>,
        per_series: bool,
        floor: &[String],
    ) -> String {
        let (bucket, by_bucket) = bucket_columns(bucketing);
        if per_series {
            let tags = self.partial_tags_sql();
            let first = self.first_phase(states, bucketing, floor);
            let time = if bucketing.is_some() {
                format!(", p.{TIME} AS {TIME}")
            } else {
                String::new()
            };
            return format!(
                "SELECT {tags} AS {TAGS}{time}, {} FROM {first} GROUP BY {TAGS}{by_bucket}",
                states.merge_state_columns().join(", "),
            );
        }
        let join = self.grouping.tagged() || self.filter.rows_use_tags;
        format!(
            "SELECT {} AS {TAGS}{bucket}, {} {} GROUP BY {TAGS}{by_bucket}",
            self.grouping.sql(),
            states.state_columns().join(", "),
            self.tables_and_filter(join, floor)
        )
    }

    /// The first phase of a two-phase aggregate: its states per series (or group of series,
    /// [`Query::groups`]) and bucket as `p`, joined to their tags as `s` unless the plan names
    /// them ([`Query::inline_tags`]).
    fn first_phase(
        &self,
        states: &functions::States,
        bucketing: Option<&Bucketing>,
        floor: &[String],
    ) -> String {
        let (bucket, by_bucket) = bucket_columns(bucketing);
        let g = self.groups(bucketing.is_some());
        let join = match self.inline_tags() {
            Some(_) => String::new(),
            None => format!(" INNER JOIN ({}) AS s ON p.{SID} = s.series_id", g.tags),
        };
        format!(
            "({}SELECT {} AS {SID}{bucket}, {} {} GROUP BY {SID}{by_bucket}) AS p{join}",
            g.with,
            g.key,
            states.state_columns().join(", "),
            self.tables_and_filter(false, floor),
        )
    }

    /// The time of a row without `GROUP BY time`: the point's own for a lone `first`,
    /// `last`, `min`, `max` or `percentile` (InfluxDB's selectors, also in arithmetic), else
    /// the start of the time range (or 0).
    fn selector_time(&self, exprs: &[&Expr], states: &mut functions::States) -> String {
        let start = self.filter.range.min.unwrap_or(0);
        let fallback = format!("toInt64({start})");
        // A lone selector, also inside arithmetic with constants or math (`abs(last(v)) * 2`).
        let [e] = exprs else {
            return fallback;
        };
        let mut found = Vec::new();
        cond::visit(e, &mut |x| {
            if matches!(x, Expr::Call { name, .. } if !super::math::is_math(name)) {
                found.push(x.clone())
            }
        });
        let [Expr::Call { name, args }] = found.as_slice() else {
            return fallback;
        };
        let Some(Expr::VarRef { name: f, data_type }) = args.first() else {
            return fallback;
        };
        let op = self.scope.resolve(f, *data_type);
        let x = cond::operand_sql(&op, "s.tags");
        let ty = match op {
            Operand::Field(_, ty) => Some(ty),
            _ => None,
        };
        let ns = "toUnixTimestamp64Nano(m.time)";
        // The earliest point of the smallest (`min`) or greatest (`max`) value.
        let by_value = |desc| states.order_key(Part::Value(&x, ty), Part::Time { desc });
        match name.as_str() {
            "first" => states.agg("argMinIf", None, &format!("{ns}, m.time, {x} IS NOT NULL")),
            "last" => states.agg("argMaxIf", None, &format!("{ns}, m.time, {x} IS NOT NULL")),
            "min" => states.agg(
                "argMinIf",
                None,
                &format!("{ns}, {}, {x} IS NOT NULL", by_value(false)),
            ),
            "max" => states.agg(
                "argMaxIf",
                None,
                &format!("{ns}, {}, {x} IS NOT NULL", by_value(true)),
            ),
            // The chosen point's: the values sorted with their times, as InfluxDB sorts the
            // points of a series in time order by value (among equal values the earliest
            // first, where its sort keeps their order).
            "percentile" => {
                let Some(Ok(p)) = args.get(1).map(functions::percentile_of) else {
                    return fallback;
                };
                let n = states.agg("count", None, &x);
                let points = states.agg(
                    "groupArrayIf",
                    None,
                    &format!("(assumeNotNull({x}), {ns}), {x} IS NOT NULL"),
                );
                let rank = functions::nearest_rank(&n, p);
                format!(
                    "if({rank} BETWEEN 1 AND {n}, tupleElement(arraySort({points})[{rank}], 2), {fallback})"
                )
            }
            _ => fallback,
        }
    }

    /// An expression of an aggregate query: calls become ClickHouse aggregates; constants,
    /// arithmetic and math stay; a bare field is InfluxDB's "mixing" error. `leaf` gets each
    /// aggregate call's name and SQL and says what stands for it in the expression.
    fn agg_expr(
        &self,
        e: &Expr,
        only: Option<&str>,
        states: &mut functions::States,
        leaf: &mut dyn FnMut(&str, String) -> String,
    ) -> Result<String, PlanError> {
        match e {
            Expr::Call { name, args } if math::is_math(name) => {
                if let Some(t) = args.iter().find_map(transform_in) {
                    return Err(PlanError::Unsupported(format!(
                        "{name}() of {t}() is not supported by sluice yet"
                    )));
                }
                let args = args
                    .iter()
                    .map(|a| self.agg_expr(a, only, states, leaf))
                    .collect::<Result<Vec<_>, _>>()?;
                math::sql(name, &args)
            }
            Expr::Call { name, args } => {
                let sql = functions::call_sql(self.scope, states, name, args, only)?;
                Ok(leaf(name, sql))
            }
            Expr::Distinct(_) => Err(PlanError::Unsupported(
                "DISTINCT returns a row per value, which sluice does not run yet: use count(distinct(\"f\"))".into(),
            )),
            Expr::Literal(l) => cond::literal_sql(l),
            Expr::Paren(inner) => Ok(format!("({})", self.agg_expr(inner, only, states, leaf)?)),
            Expr::Binary { lhs, op, rhs } => {
                let a = self.agg_expr(lhs, only, states, leaf)?;
                let b = self.agg_expr(rhs, only, states, leaf)?;
                let Some(op) = math::arithmetic(*op) else {
                    return Err(PlanError::Invalid(format!(
                        "invalid operator {op:?} in a select field"
                    )));
                };
                Ok(format!("({a} {op} {b})"))
            }
            Expr::VarRef { .. } | Expr::Wildcard(_) => Err(PlanError::Invalid(
                "mixing aggregate and non-aggregate queries is not supported".into(),
            )),
        }
    }

    pub(super) fn bucketing(&self) -> Result<Option<Bucketing>, PlanError> {
        let Some((interval, offset)) = self.stmt.group_by_time() else {
            return Ok(None);
        };
        let every = interval.as_nanos();
        let offset = match offset {
            None => 0,
            Some(TimeOffset::Duration(d)) => d.as_nanos().rem_euclid(every),
            Some(TimeOffset::Now) => self.scope.now_ns.rem_euclid(every),
        };
        let range = self.filter.range;
        // Without an upper bound InfluxDB ends the buckets at now().
        let max = range.max.unwrap_or(self.scope.now_ns);
        let b = Bucketing {
            every,
            offset,
            min: range.min,
            max,
            zone: self.stmt.timezone.clone(),
        };
        if let Some(lo) = range.min {
            let buckets = b
                .start_of(max)
                .checked_sub(b.start_of(lo))
                .map_or(i64::MAX, |span| span / every + 1);
            if buckets > MAX_BUCKETS {
                return Err(PlanError::Invalid(format!(
                    "GROUP BY time({interval}) over this time range makes {buckets} buckets, more than {MAX_BUCKETS}: use a larger interval or a shorter range"
                )));
            }
        }
        Ok(Some(b))
    }
}

/// A call's value where it has no values to work on: `count` of none is no value (InfluxDB
/// has no point there, and fills it as an empty bucket), not 0; the others are NULL already.
fn no_values(name: &str, sql: String) -> String {
    if name == "count" {
        // Int64, InfluxDB's type of a count: a fill of -1 must fit it.
        format!("nullIf(toInt64({sql}), 0)")
    } else {
        sql
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
pub(super) fn fill_sql(c: &str, fill: Fill, count: bool, desc: bool, ty: FieldType) -> String {
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

/// InfluxDB answers one selector with other fields or tags beside it (`max("v"), "host"`: the
/// host of the greatest point); sluice does not yet, and says so rather than calling it mixing.
fn lone_selector_beside_fields(exprs: &[&Expr]) -> Result<(), PlanError> {
    let mut calls = Vec::new();
    let mut bare = false;
    for e in exprs {
        let before = calls.len();
        cond::visit(e, &mut |x| match x {
            Expr::Call { name, .. } if !math::is_math(name) => calls.push(name.clone()),
            _ => {}
        });
        bare |= calls.len() == before;
    }
    match calls.as_slice() {
        [name] if bare && functions::function_kind(name) == Some(functions::Kind::Selector) => {
            Err(PlanError::Unsupported(format!(
                "{name}() with other fields or tags beside it is not supported by sluice yet"
            )))
        }
        _ => Ok(()),
    }
}

/// The name of a transform `e` calls, if any.
fn transform_in(e: &Expr) -> Option<String> {
    let mut found = None;
    cond::visit(e, &mut |x| match x {
        Expr::Call { name, .. } if functions::is_transform(name) => found = Some(name.clone()),
        _ => {}
    });
    found
}

/// The bucket as a selected column and as a grouping key (`, ... AS __sl_t`, `, __sl_t`), or
/// nothing without buckets.
fn bucket_columns(bucketing: Option<&Bucketing>) -> (String, String) {
    match bucketing {
        Some(b) => (
            format!(", {} AS {TIME}", b.bucket_sql()),
            format!(", {TIME}"),
        ),
        None => (String::new(), String::new()),
    }
}

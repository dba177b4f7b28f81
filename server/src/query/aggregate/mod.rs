//! The aggregate half of a `SELECT` plan: aggregates and selectors per series and bucket (in
//! two phases when grouped by tag), gaps filled, transforms over the buckets.
//!
//! The calls are planned first (`calls`), their rows then grouped per tags and bucket here,
//! and the answer finished from those rows (`finish`: gaps, transforms, order and limits).

mod calls;
mod finish;

use sluice_influxql::{Expr, TimeOffset};

use super::buckets::Bucketing;
use super::cond::{self, Operand};
use super::functions;
use super::order_key::Part;
use super::plan::{Mode, Query, MAX_BUCKETS, SID, TAGS, TIME};
use super::PlanError;
use calls::{lone_selector_beside_fields, Calls};
pub(super) use finish::fill_sql;

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
        )
        .with_ordered_sums(self.src.ordered_sums);
        let calls = self.calls(exprs, bucketing.as_ref(), &mut states)?;
        let floor: Vec<String> = self
            .tail_floor(exprs, bucketing.is_some())
            .into_iter()
            .collect();
        let time = match &bucketing {
            Some(b) => b.bucket_sql(),
            None => self.selector_time(exprs, &mut states),
        };
        if matches!(self.mode, Mode::Partial | Mode::Shape) {
            return Ok(self.partial_states(&states, bucketing.as_ref(), two_phase, &floor));
        }
        let rows = self.grouped(&calls, &states, bucketing.as_ref(), time, &floor);
        self.finish(exprs, calls, rows, bucketing.as_ref())
    }

    /// The calls' rows per grouping tags (and bucket) on this pod, or on the gathering pod
    /// from the pods' states (`time` is a row's bucket, or without buckets the selector's
    /// time). A bucket (or range) where no call has a value is no point in InfluxDB, even
    /// where the measurement has rows of other fields: it is no row, and a series without one
    /// is not answered; a fill then treats the bucket as empty.
    fn grouped(
        &self,
        calls: &Calls,
        states: &functions::States,
        bucketing: Option<&Bucketing>,
        time: String,
        floor: &[String],
    ) -> String {
        // Without buckets the time is a constant or a selector's aggregate: not a key.
        let keys = if bucketing.is_some() {
            format!("{TAGS}, {TIME}")
        } else {
            TAGS.to_string()
        };
        let having = format!(" HAVING {}", calls.present.join(" OR "));
        let cols = calls.cols.join(", ");
        match self.mode {
            Mode::Final(source) => {
                let time = if bucketing.is_some() {
                    TIME.to_string()
                } else {
                    time
                };
                format!(
                    "SELECT {TAGS}, {time} AS {TIME}, {cols} FROM {source} GROUP BY {keys}{having}"
                )
            }
            _ if self.per_series() => {
                let time = match bucketing {
                    Some(_) => format!("p.{TIME}"),
                    None => time,
                };
                let first = self.first_phase(states, bucketing, floor);
                format!(
                    "SELECT {} AS {TAGS}, {time} AS {TIME}, {cols} FROM {first} GROUP BY {keys}{having}",
                    self.partial_tags_sql(),
                )
            }
            _ => {
                let join = self.grouping.tagged() || self.filter.rows_use_tags;
                format!(
                    "SELECT {} AS {TAGS}, {time} AS {TIME}, {cols} {} GROUP BY {keys}{having}",
                    self.grouping.sql(),
                    self.tables_and_filter(join, floor)
                )
            }
        }
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

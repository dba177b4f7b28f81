//! A `SELECT` against one measurement as one ClickHouse query.
//!
//! ClickHouse does the work: time buckets (`GROUP BY` on the bucket start), aggregates and
//! selectors, tag grouping (through the series table), gaps (`WITH FILL`, and window functions
//! for `fill(previous)` and `fill(linear)`), order, and `LIMIT`/`OFFSET` per series
//! (`LIMIT ... BY`). Every row of the answer is `(tags, time, value...)`: `tags` a JSON object
//! of the series' grouping tags as text (it orders the series, as InfluxDB orders them by tag
//! set), `time` in nanoseconds. Rust only cuts the rows into series ([`super::shape`]).
//!
//! This module holds what every kind of statement shares (the rows and series read are in
//! `reads`, the grouping in `grouping`); the select list is expanded in `select_list`,
//! aggregates are planned in [`super::aggregate`] (with `tail` and `groups` for two shapes of
//! it), points in `raw`, `top()` and `bottom()` in `top`, `distinct()` in `distinct`,
//! `integral()` in `integral`.

use std::collections::BTreeMap;

use sluice_core::FieldType;
use sluice_influxql::{Expr, SelectStatement, SortOrder};

use super::cond::{self, Operand, Scope, TimeRange};
use super::functions;
pub(super) use super::grouping::Grouping;
use super::select_list::expand_fields;
use super::PlanError;

/// Most time buckets a `GROUP BY time(...)` may span (InfluxDB 1.8's `max-select-buckets` is
/// unlimited by default; a bound keeps a one-nanosecond interval over a year from filling
/// memory).
pub const MAX_BUCKETS: i64 = 1_000_000;

/// Column names of the query: unlikely to be a field's, and never shown to clients.
pub(super) const TAGS: &str = "__sl_tags";
pub(super) const TIME: &str = "__sl_t";
/// The series of a partial aggregate (two-phase aggregation).
pub(super) const SID: &str = "__sl_sid";

pub(super) fn value_col(i: usize) -> String {
    format!("__sl_c{i}")
}

/// One measurement a statement reads.
#[derive(Clone, Copy)]
pub struct Source<'a> {
    pub db: &'a str,
    pub measurement: &'a str,
    /// What the points are read from: the table's quoted name, or a subquery that gives the
    /// table the tenant's field types (see [`super::partial::table_sql`]).
    pub table: &'a str,
    pub fields: &'a BTreeMap<String, FieldType>,
    /// The tag keys of the measurement's series (for `*`).
    pub tag_keys: &'a [String],
    /// What the series and their tags are read from (`series_id`, `tags`): the series table
    /// when `None`, else a subquery (a subquery's answer as a measurement, see
    /// [`super::subquery`]).
    pub series: Option<&'a str>,
    /// The ids of the series the statement's tag conditions select ([`series_lookup`]), when
    /// the caller has them ([`super::series_ids`]): the plan then names them instead of
    /// looking them up.
    pub series_ids: Option<&'a [u64]>,
    /// Each of [`Self::series_ids`]' tags, in their order, when the caller has them (a few
    /// series, [`super::series_ids::MAX_TAGGED`]): a plan grouped by tags then names them
    /// instead of joining the series table ([`super::inline_tags`]).
    pub series_tags: Option<&'a [super::series_ids::Tags]>,
    /// Whether `mean` and `sum` of a float field add their points in time order
    /// ([`super::functions::States::ordered_sums`]): `holt_winters()`'s input, whose fit can
    /// turn a last-bit difference into another forecast.
    pub ordered_sums: bool,
}

/// The series table's condition for the series `stmt`'s tag conditions select in `src`;
/// `None` without tag conditions, or when the series are a subquery's.
pub fn series_lookup(
    stmt: &SelectStatement,
    src: &Source,
    now_ns: i64,
) -> Result<Option<String>, PlanError> {
    if src.series.is_some() {
        return Ok(None);
    }
    let scope = Scope {
        fields: src.fields,
        now_ns,
    };
    let filter = cond::split(stmt.condition.as_ref(), &scope)?;
    Ok((!filter.series.is_empty())
        .then(|| super::reads::series_conds(src.db, src.measurement, &filter.series)))
}

/// Which part of the work a query does.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'a> {
    /// All of it, over this pod's data.
    Whole,
    /// A pod's share for a gathering read: aggregate states per tags and bucket (`-State`), or
    /// the filtered points, in `Native`.
    Partial,
    /// A share planned only for its columns (the gathering pod `DESCRIBE`s it): without what
    /// only narrows or speeds the read (`last()`'s floor, numbered groups of series), whose
    /// scalar subqueries the engine would run to describe it (the floor's scans every row),
    /// and without the time range, so that one description serves every range
    /// ([`super::shapes::Shapes`]).
    Shape,
    /// The gathering pod's part over its peers' partials (`source`, a `url()` over them):
    /// `-Merge`, gaps, transforms, order and limits.
    Final(&'a str),
}

impl Mode<'_> {
    /// Whether the plan reads this pod's rows, so that what only narrows or speeds the read
    /// (`last()`'s floor, numbered groups of series) is worth building.
    pub(super) fn reads_rows(self) -> bool {
        matches!(self, Mode::Whole | Mode::Partial)
    }
}

/// Column of a raw partial that orders points of one time by series, as InfluxDB merges them.
pub(super) const KEY: &str = "__sl_key";

/// The query for one measurement, and how to read its rows.
#[derive(Debug)]
pub struct Plan {
    pub sql: String,
    /// The answer's columns, `time` (or its alias) first.
    pub columns: Vec<String>,
    /// Whether the series carry tags (`GROUP BY` a tag, a regex or `*`).
    pub tagged: bool,
    /// Whether it aggregates each series over the whole range (`GROUP BY` the series alone,
    /// no time buckets), which runs faster in key order
    /// ([`crate::engine::ReadSettings::aggregation_in_order`]).
    pub aggregation_in_order: bool,
    /// Whether it must run on one thread: `last` in key order keys `argMax` by (time, value),
    /// which copies its key for every row read, as time only grows; on two threads the last
    /// point of 10,000 series over 50 M points needed 132 MiB, past the 128 a query gets. A
    /// `last` that reads only the series' tails (`super::tail`) runs on two. `integral()` orders
    /// every point of a group: on two threads 3.6 M points needed more than 128 MiB, on a pod
    /// and on the gathering pod (which then reads the pods one after the other).
    pub one_thread: bool,
    /// The grouping tag keys, sorted: a subquery's answer has them as its tags.
    pub grouping_keys: Vec<String>,
    /// The type of each value column (after `time`) as a statement around this one reads it
    /// ([`super::subquery::column_type`]); `None` when the columns are not one per select
    /// field (`top()` with tags beside it).
    pub value_types: Option<Vec<FieldType>>,
    /// Where the statement's groups of series are listed, when it groups by tags: `SLIMIT`
    /// and `SOFFSET` count them all.
    pub groups: Option<super::series_limit::GroupSource>,
}

impl Plan {
    /// How the engine runs it: a plan reads on two threads unless it must not.
    pub fn read_settings(&self) -> crate::engine::ReadSettings {
        crate::engine::ReadSettings {
            aggregation_in_order: self.aggregation_in_order,
            planned: !self.one_thread,
            ..Default::default()
        }
    }
}

/// Plans `stmt` against `src`. `None` when the measurement has none of the fields the
/// statement reads: InfluxDB leaves such a measurement out of the answer.
pub fn plan(
    stmt: &SelectStatement,
    src: &Source,
    now_ns: i64,
    mode: Mode,
) -> Result<Option<Plan>, PlanError> {
    let scope = Scope {
        fields: src.fields,
        now_ns,
    };
    let grouping = Grouping::of(stmt, src)?;
    let mut fields = expand_fields(stmt, src, &grouping)?;
    for f in &mut fields {
        if let Some(call) = super::distinct::as_call(&f.expr) {
            f.expr = call;
        }
    }
    if fields.is_empty() {
        return Ok(None);
    }
    let named = SelectStatement {
        fields: fields.clone(),
        ..stmt.clone()
    };
    let columns = named.column_names();
    let exprs: Vec<&Expr> = fields
        .iter()
        .map(|f| &f.expr)
        .filter(|e| !matches!(e, Expr::VarRef { name, data_type: None } if name == "time"))
        .collect();
    for e in &exprs {
        super::math::check_calls(e)?;
    }
    let integral = super::integral::integral_calls(&exprs)?;
    if !exprs.iter().any(|e| reads_a_field(e, &scope)) {
        return Ok(None);
    }
    let ranked = match super::top::ranked(&exprs, stmt.limit)? {
        Some(r) => Some(r),
        None => super::top::selector_beside_fields(&exprs),
    };
    let distinct = super::distinct::distinct_field(&exprs)?;
    let aggregate = ranked.is_none()
        && distinct.is_none()
        && integral.is_none()
        && exprs
            .iter()
            .any(|e| has_call(e) && !functions::is_raw_transform(e));
    let mut filter = cond::split(stmt.condition.as_ref(), &scope)?;
    if let Some((interval, _)) = stmt.group_by_time() {
        if exprs.iter().any(|e| functions::reads_a_bucket_more(e)) {
            filter.asked = Some(filter.range);
            filter.range.widen(interval.as_nanos(), descending(stmt));
        }
    }
    if matches!(mode, Mode::Shape) {
        // The time range narrows the rows and changes no column: without it a dashboard's
        // refreshes plan the same shape, which the gathering pod then describes only once.
        filter.range = TimeRange::default();
    }
    let q = Query {
        stmt,
        src,
        scope: &scope,
        grouping: &grouping,
        filter: &filter,
        mode,
    };
    let sql = if let Some(r) = &ranked {
        q.ranked(&exprs, r)?
    } else if let Some((f, wraps)) = &distinct {
        q.distinct(f, wraps)?
    } else if let Some(i) = &integral {
        q.integral(i)?
    } else if aggregate {
        q.aggregate(&exprs)?
    } else {
        q.raw(&exprs)?
    };
    let aggregation_in_order = aggregate && q.in_key_order();
    // Reading only the series' tails, `last` needs little memory on two threads.
    let one_thread = aggregation_in_order
        && exprs.iter().any(|e| calls(e, "last"))
        && !q.reads_tails(&exprs, stmt.group_by_time().is_some())
        || integral.is_some();
    let value_types = (exprs.len() + 1 == columns.len()).then(|| {
        exprs
            .iter()
            .map(|e| super::subquery::column_type(e, src.fields))
            .collect()
    });
    let groups = match grouping.tagged() {
        true => Some(super::series_limit::GroupSource {
            db: src.db.to_string(),
            measurement: src.measurement.to_string(),
            keys: grouping.keys().to_vec(),
            series: cond::series_superset(stmt.condition.as_ref(), &scope)?,
        }),
        false => None,
    };
    Ok(Some(Plan {
        sql,
        columns,
        tagged: grouping.tagged(),
        aggregation_in_order,
        one_thread,
        grouping_keys: grouping.keys().to_vec(),
        groups,
        value_types,
    }))
}

/// Whether `e` calls an aggregate, a selector or a transform (math functions work value by
/// value, on points as on aggregates).
pub(super) fn has_call(e: &Expr) -> bool {
    let mut found = false;
    cond::visit(e, &mut |x| {
        found |= matches!(x, Expr::Call { name, .. } if !super::math::is_math(name))
            || matches!(x, Expr::Distinct(_))
    });
    found
}

/// Whether `stmt` answers latest first (`ORDER BY time DESC`).
fn descending(stmt: &SelectStatement) -> bool {
    matches!(stmt.order, Some(SortOrder::Descending))
}

fn calls(e: &Expr, function: &str) -> bool {
    let mut found = false;
    cond::visit(e, &mut |x| {
        found |= matches!(x, Expr::Call { name, .. } if name == function)
    });
    found
}

fn reads_a_field(e: &Expr, scope: &Scope) -> bool {
    let mut found = false;
    cond::visit(e, &mut |x| match x {
        Expr::VarRef { name, data_type } => {
            found |= matches!(scope.resolve(name, *data_type), Operand::Field(..));
        }
        // `count(DISTINCT "f")`
        Expr::Distinct(name) => found |= matches!(scope.resolve(name, None), Operand::Field(..)),
        _ => {}
    });
    found
}

pub(super) struct Query<'a> {
    pub(super) stmt: &'a SelectStatement,
    pub(super) src: &'a Source<'a>,
    pub(super) scope: &'a Scope<'a>,
    pub(super) grouping: &'a Grouping,
    pub(super) filter: &'a cond::Where,
    pub(super) mode: Mode<'a>,
}

impl Query<'_> {
    /// `LIMIT`/`OFFSET`, which InfluxDB applies to each series.
    pub(super) fn limit_by(&self) -> String {
        match (self.stmt.limit, self.stmt.offset) {
            (None, None) => String::new(),
            (limit, offset) => format!(
                " LIMIT {}, {} BY {TAGS}",
                offset.unwrap_or(0),
                limit.unwrap_or(i64::MAX as u64)
            ),
        }
    }

    /// SQL true for the rows of the bucket read beyond the asked range for a transform
    /// ([`cond::Where::asked`]); none when the range was not widened.
    pub(super) fn beyond_asked(&self) -> Option<String> {
        let asked = self.filter.asked?;
        let (interval, _) = self.stmt.group_by_time()?;
        if self.descending() {
            asked.max.map(|max| format!("{TIME} > {max}"))
        } else {
            let every = interval.as_nanos();
            asked
                .min
                .map(|min| format!("{TIME} <= {}", min.saturating_sub(every)))
        }
    }

    /// SQL true for the points of the asked range, where a transform had the range widened
    /// ([`cond::Where::asked`]): the other calls beside it read these alone.
    pub(super) fn asked_rows(&self) -> Option<String> {
        let asked = self.filter.asked?;
        let bound = |op: &str, t: i64| format!("m.time {op} fromUnixTimestamp64Nano(toInt64({t}))");
        if self.descending() {
            asked.max.map(|max| bound("<=", max))
        } else {
            asked.min.map(|min| bound(">=", min))
        }
    }

    /// Whether the answer runs latest first (`ORDER BY time DESC`): InfluxDB then computes
    /// transforms and `fill(previous)` in that order too.
    pub(super) fn descending(&self) -> bool {
        descending(self.stmt)
    }

    pub(super) fn direction(&self) -> &'static str {
        match self.stmt.order {
            Some(SortOrder::Descending) => " DESC",
            _ => "",
        }
    }
}

/// The one `SELECT` of `q`, for the planner's tests.
#[cfg(test)]
pub(super) fn select_of(q: &str) -> SelectStatement {
    match sluice_influxql::parse(q).map(|mut s| s.remove(0)) {
        Ok(sluice_influxql::Statement::Select(s)) => *s,
        other => panic!("{q}: {other:?}"),
    }
}

/// `q` planned over this pod's data against a `cpu` of fields `value` (float) and `n`
/// (integer) and tags `dc` and `host`, at `now` = 1,000 s.
#[cfg(test)]
pub(super) fn plan_of(q: &str) -> Result<Option<Plan>, PlanError> {
    plan_in(q, Mode::Whole)
}

/// [`plan_of`] in `mode`.
#[cfg(test)]
pub(super) fn plan_in(q: &str, mode: Mode) -> Result<Option<Plan>, PlanError> {
    with_test_source(|src| plan(&select_of(q), src, 1_000_000_000_000, mode))
}

/// `f` of the source [`plan_of`] plans against.
#[cfg(test)]
pub(super) fn with_test_source<R>(f: impl FnOnce(&Source) -> R) -> R {
    let fields: BTreeMap<String, FieldType> = [
        ("value".to_string(), FieldType::Float),
        ("n".to_string(), FieldType::Integer),
    ]
    .into();
    let tags = vec!["dc".to_string(), "host".to_string()];
    f(&Source {
        db: "db",
        measurement: "cpu",
        table: "`db_autogen_cpu`",
        fields: &fields,
        tag_keys: &tags,
        series: None,
        series_ids: None,
        series_tags: None,
        ordered_sums: false,
    })
}

#[cfg(test)]
mod tests;

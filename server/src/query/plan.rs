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
    let ranked = match super::top::ranked(&exprs, stmt.limit, stmt.offset)? {
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
    Ok(Some(Plan {
        sql,
        columns,
        tagged: grouping.tagged(),
        aggregation_in_order,
        one_thread,
        grouping_keys: grouping.keys().to_vec(),
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
    let fields: BTreeMap<String, FieldType> = [
        ("value".to_string(), FieldType::Float),
        ("n".to_string(), FieldType::Integer),
    ]
    .into();
    let tags = vec!["dc".to_string(), "host".to_string()];
    let src = Source {
        db: "db",
        measurement: "cpu",
        table: "`db_autogen_cpu`",
        fields: &fields,
        tag_keys: &tags,
        series: None,
    };
    plan(&select_of(q), &src, 1_000_000_000_000, mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gathering pod describes its own share for the columns the pods send: the engine
    /// runs a plan's scalar subqueries to describe it, so that plan leaves out the floor of
    /// `last()` (a scan of every row) and the numbering of groups, which change no column.
    #[test]
    fn a_share_described_for_its_columns_runs_no_scalar_subquery() {
        for (q, marker) in [
            ("SELECT last(value) FROM cpu GROUP BY host", "__sl_floor"),
            (
                "SELECT mean(value) FROM cpu WHERE time > now() - 1h GROUP BY time(1m), dc",
                "__sl_groups",
            ),
        ] {
            let share = plan_in(q, Mode::Partial).unwrap().unwrap();
            let shape = plan_in(q, Mode::Shape).unwrap().unwrap();
            assert!(share.sql.contains(marker), "{}", share.sql);
            assert!(!shape.sql.contains(marker), "{}", shape.sql);
            assert!(!shape.sql.contains("(SELECT min("), "{}", shape.sql);
            assert_eq!(share.columns, shape.columns);
        }
    }

    /// A dashboard's refresh moves the time range; the share's columns stay, and so does the
    /// shape the gathering pod describes (and keeps described).
    #[test]
    fn a_share_described_for_its_columns_is_the_same_for_every_time_range() {
        let q = |range: &str| {
            format!("SELECT mean(value), last(n) FROM cpu WHERE host = 'a' AND {range} GROUP BY time(1m), dc fill(0)")
        };
        let a = q("time >= 1000000000000ms AND time <= 1000003600000ms");
        let b = q("time > now() - 6h");
        let (shape_a, shape_b) = (
            plan_in(&a, Mode::Shape).unwrap().unwrap(),
            plan_in(&b, Mode::Shape).unwrap().unwrap(),
        );
        assert_eq!(shape_a.sql, shape_b.sql);
        assert!(!shape_a.sql.contains("m.time >="), "{}", shape_a.sql);
        let share = plan_in(&a, Mode::Partial).unwrap().unwrap();
        assert!(
            share
                .sql
                .contains("m.time >= fromUnixTimestamp64Nano(toInt64(1000000000000000000))"),
            "{}",
            share.sql
        );
        assert_eq!(share.columns, shape_a.columns);
        // Without buckets the time column is the range's start, a constant of the same type.
        let a = plan_in("SELECT mean(value) FROM cpu WHERE time >= 5s", Mode::Shape)
            .unwrap()
            .unwrap();
        let b = plan_in("SELECT mean(value) FROM cpu WHERE time >= 9s", Mode::Shape)
            .unwrap()
            .unwrap();
        assert_eq!(a.sql, b.sql);
    }

    #[test]
    fn wildcard_expands_to_fields_and_ungrouped_tags_in_name_order() {
        let p = plan_of("SELECT * FROM cpu").unwrap().unwrap();
        assert_eq!(p.columns, ["time", "dc", "host", "n", "value"]);
        let p = plan_of("SELECT * FROM cpu GROUP BY host").unwrap().unwrap();
        assert_eq!(p.columns, ["time", "dc", "n", "value"]);
        assert!(p.tagged);
        let p = plan_of("SELECT *::field FROM cpu").unwrap().unwrap();
        assert_eq!(p.columns, ["time", "n", "value"]);
        let p = plan_of("SELECT /^v/ FROM cpu").unwrap().unwrap();
        assert_eq!(p.columns, ["time", "value"]);
    }

    /// Only an aggregate of each series over the whole range asks for key order: with time
    /// buckets in the key the engine's hash path is faster.
    #[test]
    fn per_series_aggregates_without_buckets_aggregate_in_key_order() {
        let in_order = |q: &str| plan_of(q).unwrap().unwrap().aggregation_in_order;
        assert!(in_order("SELECT last(value) FROM cpu GROUP BY host"));
        assert!(in_order(
            "SELECT max(value) FROM cpu WHERE time > now() - 1h GROUP BY *"
        ));
        assert!(!in_order(
            "SELECT mean(value) FROM cpu WHERE time > now() - 1h GROUP BY time(1m), host"
        ));
        assert!(!in_order("SELECT last(value) FROM cpu"));
        let one_thread = |q: &str| plan_of(q).unwrap().unwrap().one_thread;
        assert!(one_thread(
            "SELECT last(value), max(value) FROM cpu GROUP BY host"
        ));
        assert!(!one_thread("SELECT last(value) FROM cpu GROUP BY host"));
        assert!(!one_thread("SELECT max(value) FROM cpu GROUP BY host"));
        assert!(!one_thread(
            "SELECT last(value) FROM cpu WHERE time > now() - 1h GROUP BY time(1m), host"
        ));
        assert!(!in_order("SELECT value FROM cpu GROUP BY host"));
        // integral() orders every point, on a pod and on the gathering pod; nothing else
        // gathers on one thread.
        let gathering_on_one_thread = |q: &str| {
            plan_in(q, Mode::Final("(SELECT 1)"))
                .unwrap()
                .unwrap()
                .one_thread
        };
        assert!(one_thread("SELECT integral(value) FROM cpu GROUP BY host"));
        assert!(gathering_on_one_thread(
            "SELECT integral(value) FROM cpu GROUP BY host"
        ));
        assert!(!gathering_on_one_thread(
            "SELECT last(value) FROM cpu GROUP BY host"
        ));
        assert!(!gathering_on_one_thread(
            "SELECT max(value) FROM cpu GROUP BY host"
        ));
        // A row-level tag condition joins the tags to every row: one phase, no series key.
        assert!(!in_order(
            "SELECT last(value) FROM cpu WHERE host = 'a' OR value > 1 GROUP BY host"
        ));
    }

    /// Only a statement whose every aggregate is `last` of a field, without time buckets,
    /// reads from the earliest of the series' last points on, found under its own conditions.
    #[test]
    fn last_over_whole_series_reads_from_the_earliest_last_point() {
        let sql = |q: &str| plan_of(q).unwrap().unwrap().sql;
        let floor = "m.time >= (SELECT ifNull(min(__sl_floor), fromUnixTimestamp64Nano(toInt64(-9223372036854775806), 'UTC'))";
        let p = sql("SELECT last(value) FROM cpu WHERE n > 2 GROUP BY host");
        assert_eq!(p.matches(floor).count(), 1, "{p}");
        assert!(p.contains("maxIfOrNull(m.time, m.`value` IS NOT NULL) AS __sl_last0"));
        // Every read of the first pass keeps the statement's own conditions: the last 15
        // minutes (one scalar, named three times: its earliest last point, the count of the
        // series without a recent value and their list) and the rows of the others; the
        // aggregation the fifth.
        assert_eq!(p.matches("m.`n` > 2").count(), 5, "{p}");
        let recent = format!(
            "m.time >= fromUnixTimestamp64Nano(toInt64({}))",
            1_000_000_000_000i64 - 15 * 60 * 1_000_000_000
        );
        assert_eq!(p.matches(&recent).count(), 3, "{p}");
        let pass = "(SELECT (min(__sl_last0), groupArrayIf(__sl_sid, __sl_last0 IS NOT NULL)) FROM (SELECT m.series_id AS __sl_sid, maxIfOrNull(m.time, m.`value` IS NOT NULL) AS __sl_last0 FROM `db_autogen_cpu` AS m WHERE (m.`n` > 2) AND m.time >= ";
        assert_eq!(p.matches(pass).count(), 3, "{p}");
        assert!(
            p.contains(", 1) AS __sl_last0 UNION ALL SELECT maxIfOrNull("),
            "{p}"
        );
        // The others by id while they are at most half the series, else every row.
        assert!(
            p.contains("m.series_id IN (SELECT series_id FROM (SELECT series_id, tags FROM `sluice_series` FINAL WHERE db = 'db' AND measurement = 'cpu') WHERE series_id NOT IN"),
            "{p}"
        );
        assert!(p.contains(") * 2 > (SELECT count() FROM ("), "{p}");
        let p = sql("SELECT last(value), last(n) FROM cpu WHERE host = 'a'");
        assert!(
            p.contains(
                "(SELECT (min(__sl_last0), min(__sl_last1), groupArrayIf(__sl_sid, __sl_last0 IS NOT NULL AND __sl_last1 IS NOT NULL))"
            ),
            "{p}"
        );
        assert!(p.contains("SELECT tupleElement("), "{p}");
        // The series the statement's tags select, and no other, count as the others.
        assert!(
            p.contains(
                "measurement = 'cpu' AND (tags['host'] = 'a') LIMIT 1 BY series_id) WHERE series_id NOT IN"
            ),
            "{p}"
        );
        let p = sql("SELECT last(value) * 2, last(n) FROM cpu");
        assert!(p.contains("arrayJoin([__sl_last0, __sl_last1])"), "{p}");
        // Ungrouped over several fields, a series not yet in the series table must still count:
        // the first pass reads every row. Grouped, or over one field, it reads the recent rows.
        assert!(!p.contains("UNION ALL"), "{p}");
        for recent_first in [
            "SELECT last(value), last(n) FROM cpu GROUP BY host",
            "SELECT last(value), last(n) FROM cpu WHERE host = 'a'",
            "SELECT last(value) FROM cpu",
        ] {
            assert!(sql(recent_first).contains("UNION ALL"), "{recent_first}");
        }
        assert!(sql("SELECT last(*) FROM cpu").contains(floor));
        for other in [
            "SELECT last(value), max(value) FROM cpu GROUP BY host",
            "SELECT last(value) FROM cpu WHERE time > now() - 1h GROUP BY time(1m)",
            "SELECT first(value) FROM cpu",
            "SELECT value FROM cpu",
        ] {
            assert!(!sql(other).contains(floor), "{other}");
        }
    }

    #[test]
    fn a_measurement_without_the_fields_is_left_out() {
        assert!(plan_of("SELECT mean(other) FROM cpu").unwrap().is_none());
        assert!(plan_of("SELECT host FROM cpu").unwrap().is_none());
    }

    #[test]
    fn grafana_default_query_buckets_and_fills() {
        let p = plan_of(
            "SELECT mean(\"value\") FROM \"cpu\" WHERE time >= 1596240000000ms and time <= 1596240300000ms GROUP BY time(10s) fill(null)",
        )
        .unwrap()
        .unwrap();
        assert_eq!(p.columns, ["time", "mean"]);
        assert!(p.sql.contains("avg(m.`value`)"), "{}", p.sql);
        assert!(
            p.sql.contains("WITH FILL FROM toInt64(1596240000000000000) TO toInt64(1596240300000000000) + 1 STEP 10000000000"),
            "{}",
            p.sql
        );
        assert!(!p.sql.contains("JOIN"), "no tags read: {}", p.sql);
    }

    #[test]
    fn tag_filters_and_grouping_join_the_series_table() {
        let p = plan_of(
            "SELECT max(value) FROM cpu WHERE time > now() - 1h GROUP BY time(1m), dc fill(none) LIMIT 5",
        )
        .unwrap()
        .unwrap();
        // In buckets, per group of series that share the grouping tags (`super::groups`).
        let series = "(SELECT series_id, tags FROM `sluice_series` FINAL WHERE db = 'db' AND measurement = 'cpu')";
        assert_eq!(p.sql.matches(series).count(), 2, "{}", p.sql);
        assert!(
            p.sql.contains(
                "transform(m.series_id, __sl_groups.1, __sl_groups.2, toUInt64(0)) AS __sl_sid"
            ),
            "{}",
            p.sql
        );
        assert!(
            p.sql
                .contains("GROUP BY __sl_group) AS s ON p.__sl_sid = s.series_id"),
            "{}",
            p.sql
        );
        assert!(
            p.sql.contains("toJSONString(map('dc', s.tags['dc']))"),
            "{}",
            p.sql
        );
        assert!(!p.sql.contains("WITH FILL"), "{}", p.sql);
        assert!(p.sql.ends_with("LIMIT 0, 5 BY __sl_tags"), "{}", p.sql);
        // Without buckets (in key order), or under tag conditions, per series.
        for q in [
            "SELECT max(value) FROM cpu GROUP BY dc",
            "SELECT max(value) FROM cpu WHERE host = 'a' AND time > now() - 1h GROUP BY time(1m), dc",
        ] {
            let sql = plan_of(q).unwrap().unwrap().sql;
            assert!(!sql.contains("__sl_groups"), "{sql}");
            assert!(sql.contains("AS s ON p.__sl_sid = s.series_id"), "{sql}");
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let err = |q: &str| plan_of(q).unwrap_err().to_string();
        assert!(err("SELECT value, mean(value) FROM cpu").contains("mixing aggregate"));
        assert!(err("SELECT bogus(value) FROM cpu").contains("undefined function bogus()"));
        assert!(err("SELECT percentile(value, 5), host FROM cpu").contains("with other fields"));
        assert!(err("SELECT abs(value, 2) FROM cpu").contains("expected 1, got 2"));
        assert!(err("SELECT abs(1) FROM cpu").contains("at least one variable"));
        assert!(err("SELECT abs(derivative(value) - value) FROM cpu")
            .contains("abs() of derivative() is not supported"));
        assert!(
            err("SELECT derivative(mean(value)) - mean(value) FROM cpu GROUP BY time(1m)")
                .contains("derivative() inside arithmetic is not supported")
        );
        // With constants around it, a transform's values are computed on.
        for q in [
            "SELECT abs(derivative(value)) * 2 FROM cpu",
            "SELECT 8 * non_negative_derivative(mean(value), 1s) FROM cpu GROUP BY time(1m)",
        ] {
            assert!(plan_of(q).unwrap().is_some(), "{q}");
        }
        assert!(err("SELECT derivative(value) FROM cpu GROUP BY time(1m)")
            .contains("aggregate function required inside the call to derivative"));
        assert!(err("SELECT derivative(mean(value)) FROM cpu").contains("GROUP BY interval"));
        assert!(
            err("SELECT mean(value) FROM cpu WHERE time > 0 GROUP BY time(1ns)")
                .contains("buckets")
        );
    }
}

//! The planner's tests: SQL shapes that must hold, planned against `plan_of`'s `cpu`.

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
        err("SELECT mean(value) FROM cpu WHERE time > 0 GROUP BY time(1ns)").contains("buckets")
    );
}

/// InfluxDB feeds a transform over buckets one bucket more than the range (before it, or
/// after it under `ORDER BY time DESC`), and answers none of that bucket's rows.
#[test]
fn a_transform_over_buckets_reads_one_interval_more_and_answers_none_of_it() {
    let range = "time >= 600s AND time <= 1200s";
    let p = plan_of(&format!(
        "SELECT derivative(mean(value)) FROM cpu WHERE {range} GROUP BY time(1m)"
    ))
    .unwrap()
    .unwrap();
    assert!(p.sql.contains("toInt64(540000000000)"), "{}", p.sql);
    assert!(p.sql.contains("NOT (__sl_t <= 540000000000)"), "{}", p.sql);
    let p = plan_of(&format!(
        "SELECT difference(max(n)) FROM cpu WHERE {range} GROUP BY time(1m) ORDER BY time DESC"
    ))
    .unwrap()
    .unwrap();
    assert!(p.sql.contains("toInt64(1260000000000)"), "{}", p.sql);
    assert!(p.sql.contains("NOT (__sl_t > 1200000000000)"), "{}", p.sql);
    assert!(p.sql.contains("ORDER BY __sl_t DESC ROWS"), "{}", p.sql);
    // `cumulative_sum` reads the range as asked; so does a transform of points.
    for q in [
        format!("SELECT cumulative_sum(mean(value)) FROM cpu WHERE {range} GROUP BY time(1m)"),
        format!("SELECT derivative(value) FROM cpu WHERE {range}"),
    ] {
        let p = plan_of(&q).unwrap().unwrap();
        assert!(p.sql.contains("toInt64(600000000000)"), "{q}: {}", p.sql);
        assert!(!p.sql.contains("540000000000"), "{q}: {}", p.sql);
    }
}

/// A bucket is a point where some call has a value; a count of nothing is no value; a fill
/// number takes the call's type; fill rows of a range with no rows at all are not a group.
#[test]
fn buckets_without_values_are_empty_and_fills_take_the_calls_type() {
    let p = plan_of(
        "SELECT count(value), max(n) FROM cpu WHERE time >= 0s AND time <= 600s GROUP BY time(1m) fill(2.5)",
    )
    .unwrap()
    .unwrap();
    assert!(p.sql.contains("nullIf(toInt64(count("), "{}", p.sql);
    assert!(p.sql.contains("CAST(2.5, toTypeName("), "{}", p.sql);
    assert!(
        p.sql
            .contains("HAVING __sl_c0 IS NOT NULL OR __sl_c1 IS NOT NULL"),
        "{}",
        p.sql
    );
    assert!(p.sql.contains("WHERE __sl_tags != ''"), "{}", p.sql);
    let p = plan_of("SELECT mean(value) FROM cpu WHERE time >= 0s AND time <= 600s GROUP BY time(1m) fill(none)")
        .unwrap()
        .unwrap();
    assert!(p.sql.contains("HAVING __sl_c0 IS NOT NULL"), "{}", p.sql);
    let p = plan_of(
        "SELECT mean(value) FROM cpu WHERE time >= 0s AND time <= 600s GROUP BY time(1m) fill(previous) ORDER BY time DESC",
    )
    .unwrap()
    .unwrap();
    assert!(
        p.sql
            .contains("ORDER BY __sl_t DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"),
        "{}",
        p.sql
    );
}

/// A raw point is a row where any field an expression reads has a value, even where the
/// expression is null (`"value" - "n"` without `n`), as in InfluxDB.
#[test]
fn a_raw_row_is_there_where_a_field_it_reads_is() {
    let p = plan_of("SELECT value - n FROM cpu").unwrap().unwrap();
    assert!(
        p.sql
            .contains("(m.`value` IS NOT NULL OR m.`n` IS NOT NULL)"),
        "{}",
        p.sql
    );
}

/// Under `fill(none)` with several calls, `LIMIT` and `OFFSET` count each call's own rows, as
/// InfluxDB limits each call's iterator before it zips them (the generated comparison found
/// it: seed 1795991907790632641); with one call, or with rows at every bucket, the rows are
/// limited as they are.
#[test]
fn limits_count_each_calls_rows_under_fill_none() {
    let sql = |q: &str| plan_of(q).unwrap().unwrap().sql;
    let per_call = sql("SELECT last(value), last(n) FROM cpu WHERE time > now() - 1h GROUP BY time(1m) fill(none) LIMIT 3 OFFSET 1");
    assert!(
        per_call.contains("row_number() OVER (PARTITION BY __sl_tags, __sl_c1 IS NULL")
            && per_call.contains("__sl_n1 > 1 AND __sl_n1 <= 4")
            && !per_call.contains("LIMIT 1, 3 BY"),
        "{per_call}"
    );
    for q in [
        "SELECT last(value) FROM cpu WHERE time > now() - 1h GROUP BY time(1m) fill(none) LIMIT 3 OFFSET 1",
        "SELECT last(value), last(n) FROM cpu WHERE time > now() - 1h GROUP BY time(1m) LIMIT 3 OFFSET 1",
    ] {
        let s = sql(q);
        assert!(s.contains("LIMIT 1, 3 BY __sl_tags") && !s.contains("row_number()"), "{q}: {s}");
    }
}

/// Nothing around the rows would change one: the plan is its aggregate as it is, filled and
/// in order; a fill's value, `ORDER BY time DESC` or a `LIMIT` keeps the query around it.
#[test]
fn a_plain_filled_aggregate_is_its_rows_as_they_are() {
    let bare = |q: &str| {
        let sql = plan_of(q).unwrap().unwrap().sql;
        !sql.starts_with("SELECT * FROM (") && !sql.contains(&format!("WHERE {TAGS} != ''"))
    };
    let range = "time >= 0s AND time <= 600s";
    let p = plan_of(&format!(
        "SELECT mean(value) FROM cpu WHERE {range} GROUP BY time(1m)"
    ))
    .unwrap()
    .unwrap();
    assert!(
        p.sql.ends_with("ORDER BY __sl_tags, __sl_t WITH FILL FROM toInt64(0) TO toInt64(600000000000) + 1 STEP 60000000000"),
        "{}",
        p.sql
    );
    assert!(bare(&format!(
        "SELECT mean(value) FROM cpu WHERE {range} GROUP BY time(1m), host fill(none)"
    )));
    assert!(bare(&format!(
        "SELECT max(value), min(value) FROM cpu WHERE {range} GROUP BY host"
    )));
    for kept in [
        format!("SELECT count(value) FROM cpu WHERE {range} GROUP BY time(1m)"),
        format!("SELECT mean(value) FROM cpu WHERE {range} GROUP BY time(1m) fill(0)"),
        format!("SELECT mean(value) * 2 FROM cpu WHERE {range} GROUP BY time(1m)"),
        format!("SELECT mean(value) FROM cpu WHERE {range} GROUP BY time(1m) ORDER BY time DESC"),
        format!("SELECT mean(value) FROM cpu WHERE {range} GROUP BY time(1m) LIMIT 2"),
        format!("SELECT derivative(mean(value)) FROM cpu WHERE {range} GROUP BY time(1m)"),
    ] {
        assert!(!bare(&kept), "{kept}");
    }
}

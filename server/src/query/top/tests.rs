//! `top()` and `bottom()` found in a select list: the call, its tags and count, and what is
//! refused, in InfluxDB's words or as not run yet.

use super::*;

fn check(q: &str) -> Result<Option<(usize, Vec<String>, u64)>, PlanError> {
    let stmt = crate::query::plan::select_of(q);
    let exprs: Vec<&Expr> = stmt.fields.iter().map(|f| &f.expr).collect();
    Ok(ranked(&exprs, stmt.limit)?
        .map(|r| (r.index, r.tags.iter().map(|t| t.to_string()).collect(), r.n)))
}

fn error(q: &str) -> String {
    check(q).expect_err(q).to_string()
}

#[test]
fn finds_the_call_its_tags_and_count() {
    assert_eq!(check("SELECT mean(v) FROM m").unwrap(), None);
    assert_eq!(
        check("SELECT host, top(v, host, dc, 3) FROM m").unwrap(),
        Some((1, vec!["host".into(), "dc".into()], 3))
    );
    assert_eq!(
        check("SELECT bottom(v, 2), u FROM m LIMIT 2").unwrap(),
        Some((0, vec![], 2))
    );
}

#[test]
fn refuses_what_influxdb_refuses_in_its_words() {
    assert_eq!(
        error("SELECT top(v, 2), mean(v) FROM m"),
        "selector function top() cannot be combined with other functions"
    );
    assert_eq!(
        error("SELECT top(v) FROM m"),
        "invalid number of arguments for top, expected at least 2, got 1"
    );
    assert_eq!(
        error("SELECT bottom(v, 0) FROM m"),
        "limit (0) in bottom function must be at least 1"
    );
    assert_eq!(
        error("SELECT top(v, 2.5) FROM m"),
        "expected integer as last argument in top(), found 2.500"
    );
    assert_eq!(
        error("SELECT top(v, 1, 2) FROM m"),
        "only fields or tags are allowed in top(), found 1"
    );
    assert_eq!(
        error("SELECT top(v, 3) FROM m LIMIT 2"),
        "limit (3) in top function can not be larger than the LIMIT (2) in the select statement"
    );
}

#[test]
fn refuses_more_points_per_group_than_the_engine_keeps() {
    // The engine's own refusal would reach the user as its exception text.
    assert_eq!(
        error("SELECT top(v, 99999999999) FROM m"),
        "limit (99999999999) in top function must be at most 16777215"
    );
    assert!(check("SELECT bottom(v, 16777215) FROM m").is_ok());
}

#[test]
fn names_what_sluice_does_not_run_yet() {
    assert!(error("SELECT top(v, 2) * u FROM m").contains("not supported by sluice yet"));
    assert!(error("SELECT top(v, 2) + top(v, 3) FROM m").contains("not supported by sluice yet"));
    assert_eq!(
        check("SELECT abs(top(v, host, 2)) / 100 FROM m").unwrap(),
        Some((0, vec!["host".into()], 2))
    );
    assert_eq!(
        check("SELECT top(v, 2) FROM m OFFSET 1").unwrap(),
        Some((0, vec![], 2))
    );
}

/// Under `LIMIT` or `OFFSET`, `top()` without tags ranks each group's first `OFFSET + LIMIT +
/// 1` points, as InfluxDB's storage iterator hands it; a pod's share sends its whole window,
/// and the gathering pod takes the tenant's window out of the shares before it ranks.
#[test]
fn under_limit_or_offset_only_the_first_points_rank() {
    use crate::query::plan::{plan_in, Mode};
    let sql = |q: &str, mode| plan_in(q, mode).unwrap().unwrap().sql;
    let whole = sql(
        "SELECT top(value, 2) FROM cpu LIMIT 3 OFFSET 1",
        Mode::Whole,
    );
    assert!(
        whole.contains("(m.series_id, m.time) IN (SELECT m.series_id, m.time FROM"),
        "{whole}"
    );
    assert!(
        whole.contains("ORDER BY '{}', m.time, toJSONString(mapSort(s.tags)) LIMIT 5)"),
        "{whole}"
    );
    assert!(whole.contains("LIMIT 2 BY __sl_tags, __sl_b"), "{whole}");
    let grouped = sql(
        "SELECT bottom(value, 2) FROM cpu GROUP BY dc ORDER BY time DESC OFFSET 2",
        Mode::Whole,
    );
    assert!(grouped.contains("m.time DESC, toJSONString(mapSort(s.tags)) LIMIT 3 BY toJSONString(map('dc', s.tags['dc'])))"), "{grouped}");
    let share = sql("SELECT top(value, 2) FROM cpu LIMIT 3", Mode::Partial);
    assert!(share.contains("groupArraySorted(4)"), "{share}");
    assert!(share.contains("LIMIT 4 BY __sl_tags, __sl_b"), "{share}");
    let last = plan_in(
        "SELECT top(value, 2) FROM cpu LIMIT 3",
        Mode::Final("shares"),
    )
    .unwrap()
    .unwrap()
    .sql;
    assert!(
        last.contains("FROM shares) ORDER BY __sl_tags, __sl_t, __sl_key LIMIT 4)"),
        "{last}"
    );
    for q in [
        "SELECT top(value, host, 2) FROM cpu LIMIT 3",
        "SELECT top(value, 2) FROM cpu",
        "SELECT max(value), host FROM cpu LIMIT 3",
    ] {
        assert!(
            !sql(q, Mode::Whole).contains("(m.series_id, m.time) IN"),
            "{q}"
        );
    }
}

//! `top()` and `bottom()` found in a select list: the call, its tags and count, and what is
//! refused, in InfluxDB's words or as not run yet.

use super::*;

fn check(q: &str) -> Result<Option<(usize, Vec<String>, u64)>, PlanError> {
    let stmt = crate::query::plan::select_of(q);
    let exprs: Vec<&Expr> = stmt.fields.iter().map(|f| &f.expr).collect();
    Ok(ranked(&exprs, stmt.limit, stmt.offset)?
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
fn names_what_sluice_does_not_run_yet() {
    assert!(error("SELECT top(v, 2) * u FROM m").contains("not supported by sluice yet"));
    assert!(error("SELECT top(v, 2) + top(v, 3) FROM m").contains("not supported by sluice yet"));
    assert_eq!(
        check("SELECT abs(top(v, host, 2)) / 100 FROM m").unwrap(),
        Some((0, vec!["host".into()], 2))
    );
    assert!(error("SELECT top(v, 2) FROM m OFFSET 1").contains("not supported by sluice yet"));
}

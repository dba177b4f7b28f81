//! What the `influxql` fuzz target checks, shared with `influxql/tests/fuzz_regressions.rs`
//! (which includes this file by path), so a saved input is replayed against exactly these
//! invariants. It depends on `sluice-influxql` alone.
//!
//! `/query` hands the parser whatever a client sends, and pods hand each other statements as
//! text: a subquery's inner statement and a forecast's aggregate are printed by one pod and
//! parsed by the others. So for any text:
//! * parsing never panics (the target runs it on a 2 MiB stack, a server worker's);
//! * an error's message grows at most linearly with the input (it quotes what it found);
//! * every `SELECT` it accepts prints as text that parses back to the same statement, and
//!   every condition of a `SHOW` statement prints as an expression that parses back to the
//!   same expression.

use sluice_influxql::{parse, parse_expr, Expr, Statement};

/// How much longer than its input an error message may be, beyond [`ERROR_GROWTH`] times it:
/// it quotes a token or, like InfluxDB's "too many segments", every segment of a name, each
/// quoted and escaped again (`a.` comes back as `"a".`).
pub const ERROR_SLACK: usize = 300;
pub const ERROR_GROWTH: usize = 4;

pub fn check_influxql(data: &[u8]) {
    let Ok(q) = std::str::from_utf8(data) else {
        return;
    };
    let stmts = match parse(q) {
        Ok(stmts) => stmts,
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty(), "an empty error for {q:?}");
            assert!(
                msg.len() <= ERROR_GROWTH * q.len() + ERROR_SLACK,
                "a {}-byte error for a {}-byte query: {msg:?}",
                msg.len(),
                q.len()
            );
            return;
        }
    };
    for stmt in &stmts {
        if let Statement::Select(s) = stmt {
            let _ = s.column_names();
            let printed = s.to_string();
            match parse(&printed) {
                Ok(again) => assert!(
                    again == std::slice::from_ref(stmt),
                    "{printed:?} (from {q:?}) parses back to another statement: {again:?} against {stmt:?}"
                ),
                Err(err) => panic!("{printed:?} (from {q:?}) does not parse back: {err}"),
            }
        }
        if let Some(cond) = show_condition(stmt) {
            let printed = cond.to_string();
            match parse_expr(&printed) {
                Ok(again) => assert!(
                    &again == cond,
                    "{printed:?} (from {q:?}) parses back to another expression"
                ),
                Err(err) => panic!("{printed:?} (from {q:?}) does not parse back: {err}"),
            }
        }
    }
}

fn show_condition(stmt: &Statement) -> Option<&Expr> {
    match stmt {
        Statement::ShowMeasurements(s) => s.condition.as_ref(),
        Statement::ShowTagKeys(s) => s.condition.as_ref(),
        Statement::ShowTagValues(s) => s.condition.as_ref(),
        Statement::ShowSeries(s) => s.condition.as_ref(),
        Statement::ShowCardinality(s) => s.condition.as_ref(),
        _ => None,
    }
}

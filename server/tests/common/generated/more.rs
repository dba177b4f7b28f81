//! Generated statements of the kinds [`super::statement`] leaves out: over subqueries, of
//! wildcards, regexes, math, casts, `tz()`, `top()`, `distinct()`, and with time bounds in every
//! form.

use super::super::influxql::T0;
use super::buckets;
use super::{field, one_host, range, tail, where_clause, Rng, AGGREGATES, INTERVALS, MEASUREMENTS};

/// Aggregates inside a subquery: no selectors, which keep their point's time there in
/// InfluxDB, and no `stddev`, whose NaN of one point InfluxDB hands on (README, deliberate
/// differences).
const INNER_AGGREGATES: &[&str] = &["mean", "median", "count", "sum", "spread"];

/// One generated statement over a subquery: an outer aggregate, or raw rows under a condition,
/// over an inner aggregate per bucket (maybe per host), with ranges of their own.
pub fn subquery_statement(r: &mut Rng) -> String {
    let m = &MEASUREMENTS[r.below(MEASUREMENTS.len())];
    let inner_agg = format!("{}(\"{}\")", r.pick(INNER_AGGREGATES), field(r, m));
    let per_host = r.chance(60);
    // Outer buckets at least as wide as the inner ones (README, deliberate differences).
    let (inner_interval, outer_intervals): (&str, &[&str]) = match r.below(3) {
        0 => ("30s", &["1m", "2m", "5m"]),
        1 => ("1m", &["1m", "2m", "5m"]),
        _ => ("2m", &["2m", "4m", "6m"]),
    };
    let inner_group = if per_host {
        format!("time({inner_interval}), \"host\"")
    } else {
        format!("time({inner_interval})")
    };
    let inner_where = match r.chance(50).then(|| r.pick(m.tag_conds)) {
        Some(c) => format!("{c} AND {}", range(r)),
        None => range(r),
    };
    let inner = format!(
        "SELECT {inner_agg} AS \"a\" FROM \"{}\" WHERE {inner_where} GROUP BY {inner_group}",
        m.name
    );
    let outer_range = if r.chance(70) {
        format!(" WHERE {}", range(r))
    } else {
        String::new()
    };
    let by_host = per_host && r.chance(50);
    match r.below(4) {
        // Per outer bucket, maybe per host.
        0 | 1 => {
            let outer = r.pick(&["sum", "mean", "max", "min", "count", "spread", "last"]);
            let interval = r.pick(outer_intervals);
            let host = if by_host { ", \"host\"" } else { "" };
            let fill = if r.chance(40) {
                format!(" fill({})", r.pick(&["null", "none", "0"]))
            } else {
                String::new()
            };
            let w = if outer_range.is_empty() {
                format!(" WHERE {}", range(r))
            } else {
                outer_range
            };
            format!("SELECT {outer}(\"a\") FROM ({inner}){w} GROUP BY time({interval}){host}{fill}")
        }
        // Over the whole range, the inner's (README, deliberate differences).
        2 => {
            let outer = r.pick(&["sum", "mean", "max", "min", "count", "spread"]);
            let host = if by_host { " GROUP BY \"host\"" } else { "" };
            format!("SELECT {outer}(\"a\") FROM ({inner}){host}")
        }
        // The inner rows under a condition on their values.
        _ => {
            let cond = format!("\"a\" > {}", r.below(60));
            let w = if outer_range.is_empty() {
                format!(" WHERE {cond}")
            } else {
                format!("{outer_range} AND {cond}")
            };
            // Per host whenever the inner rows are: points of several series at one time come
            // in the order of InfluxDB's merge (README, deliberate differences), which for a
            // first bucket that starts before the inner range is not their tags' order.
            let host = if per_host { " GROUP BY \"host\"" } else { "" };
            format!("SELECT \"a\" FROM ({inner}){w}{host}")
        }
    }
}

/// One generated statement of the kinds [`statement`] leaves out: aggregates of `*` and of a
/// regex over several measurements, math around aggregates, casts, `tz()`, `top()` and
/// `bottom()`, `distinct()`, raw `*`. Points of several series are read per series (README,
/// deliberate differences: their order at one time is InfluxDB's merge's).
pub fn extra_statement(r: &mut Rng) -> String {
    let m = &MEASUREMENTS[r.below(MEASUREMENTS.len())];
    let w = where_clause(r, m, true);
    let g = buckets(r, m);
    let from = match r.below(5) {
        0 => "\"mem\", \"disk\"".to_string(),
        1 => "/^(mem|disk)$/".to_string(),
        // Fields and tags that differ: each series gets all of them (null where absent).
        2 => "\"cpu\", \"mem\"".to_string(),
        _ => format!("\"{}\"", m.name),
    };
    let agg = r.pick(&AGGREGATES[..9]);
    match r.below(8) {
        // Aggregates of every field, or of those a regex names, maybe of several measurements.
        0 => {
            let args = if r.chance(50) { "*" } else { "/e/" };
            let w = format!(" WHERE {}", range(r));
            format!("SELECT {agg}({args}) FROM {from}{w} GROUP BY {g}")
        }
        // Math around an aggregate per bucket (not `ln()` or `exp()`, whose infinities fail
        // InfluxDB's whole answer: README, deliberate differences).
        1 => {
            let math = r.pick(&["abs", "round", "ceil", "floor", "sqrt"]);
            let f = field(r, m);
            format!(
                "SELECT {math}({agg}(\"{f}\")) FROM \"{}\"{w} GROUP BY {g}",
                m.name
            )
        }
        // Casts of raw points of one host, and of a tag.
        2 => {
            let whole = format!(" WHERE {}", range(r));
            let w = one_host(r, &whole);
            let cast = r.pick(&["float", "integer"]);
            format!(
                "SELECT \"{}\"::{cast}, \"{}\"::field, \"host\"::tag FROM \"{}\"{w}",
                m.float, m.integer, m.name
            )
        }
        // Buckets on a zone's wall clock.
        3 => {
            let f = field(r, m);
            let zone = r.pick(&["Europe/Paris", "America/New_York", "Asia/Kolkata"]);
            format!(
                "SELECT {agg}(\"{f}\") FROM \"{}\"{w} GROUP BY {g} tz('{zone}')",
                m.name
            )
        }
        // The greatest or least points, per bucket or over the range, maybe one per tag.
        4 => {
            let call = r.pick(&["top", "bottom"]);
            let f = field(r, m);
            let n = 1 + r.below(3);
            let args = if r.chance(40) {
                format!("\"{f}\", \"host\", {n}")
            } else {
                format!("\"{f}\", {n}")
            };
            let g = if r.chance(50) {
                format!(" GROUP BY time({})", r.pick(&["1m", "2m", "5m"]))
            } else {
                String::new()
            };
            format!("SELECT {call}({args}) FROM \"{}\"{w}{g}", m.name)
        }
        // Distinct values, and how many.
        5 => {
            let f = m.integer;
            let call = if r.chance(50) {
                format!("distinct(\"{f}\")")
            } else {
                format!("count(distinct(\"{f}\"))")
            };
            format!("SELECT {call} FROM \"{}\"{w} GROUP BY {g}", m.name)
        }
        // Every field and tag of each series.
        6 => format!(
            "SELECT * FROM \"{}\"{w} GROUP BY *{}",
            m.name,
            tail(r, false)
        ),
        // Each measurement's own fields, per series.
        _ => format!("SELECT * FROM {from} WHERE {} GROUP BY *", range(r)),
    }
}

/// A bound on `time` in one of the forms InfluxQL takes: integers with and without a unit,
/// RFC 3339 strings and InfluxDB's date-time strings, arithmetic with durations, `now()`.
fn time_bound(r: &mut Rng, s: i64) -> String {
    let t = T0 + s;
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    match r.below(8) {
        0 => format!("{}ms", t * 1000),
        1 => format!("{}s", t),
        2 => format!("{}", t * 1_000_000_000),
        3 => format!("'2020-08-01T{h:02}:{m:02}:{sec:02}Z'"),
        4 => format!("'2020-08-01 {h:02}:{m:02}:{sec:02}'"),
        5 => format!("'2020-08-01T{h:02}:{m:02}:{sec:02}.5+00:00'"),
        6 => format!("{}s - 30s", t + 30),
        _ => format!(
            "'2020-08-01T{h:02}:{m:02}:{sec:02}Z' + 1m",
            m = m.saturating_sub(1).max(0)
        ),
    }
}

/// One generated statement whose time conditions take every form, in every place.
pub fn time_statement(r: &mut Rng) -> String {
    let m = &MEASUREMENTS[r.below(MEASUREMENTS.len())];
    let lo = r.below(300) as i64;
    let hi = lo + 60 + r.below(400) as i64;
    let (lo_op, hi_op) = (r.pick(&[">", ">="]), r.pick(&["<", "<="]));
    let lower = format!("time {lo_op} {}", time_bound(r, lo));
    let upper = format!("time {hi_op} {}", time_bound(r, hi));
    let tag = r.pick(m.tag_conds);
    let cond = match r.below(5) {
        0 => format!("{lower} AND {upper}"),
        1 => format!("{upper} AND {tag} AND {lower}"),
        2 => format!("({lower}) AND ({tag} AND {upper})"),
        3 => format!("{lower} AND {upper} AND time < now()"),
        _ => format!("{tag} AND ({lower} AND {upper})"),
    };
    let f = field(r, m);
    if r.chance(50) {
        let agg = r.pick(&AGGREGATES[..9]);
        let iv = r.pick(INTERVALS);
        format!(
            "SELECT {agg}(\"{f}\") FROM \"{}\" WHERE {cond} GROUP BY time({iv})",
            m.name
        )
    } else {
        format!(
            "SELECT \"{f}\" FROM \"{}\" WHERE {cond} AND \"host\" = 'h1'",
            m.name
        )
    }
}

/// One generated statement of several fields and shapes around them: aggregates side by side
/// and in arithmetic with each other, two subqueries deep, offsets beyond the interval, and
/// keywords and names as clients write them (lower case, unquoted).
pub fn mixed_statement(r: &mut Rng) -> String {
    let m = &MEASUREMENTS[r.below(MEASUREMENTS.len())];
    let (f, g) = (m.float, m.integer);
    match r.below(4) {
        0 => {
            let (a, b) = (r.pick(&AGGREGATES[..9]), r.pick(&AGGREGATES[..9]));
            let iv = r.pick(INTERVALS);
            format!(
                "SELECT {a}(\"{f}\"), {b}(\"{g}\"), {a}(\"{f}\") - {b}(\"{g}\") AS \"d\", max(\"{f}\") / min(\"{g}\") FROM \"{}\" WHERE {} GROUP BY time({iv})",
                m.name,
                range(r)
            )
        }
        1 => {
            let inner = format!(
                "SELECT mean(\"{f}\") AS \"a\" FROM \"{}\" WHERE {} GROUP BY time(30s), \"host\"",
                m.name,
                range(r)
            );
            let middle = format!("SELECT sum(\"a\") AS \"s\" FROM ({inner}) GROUP BY time(1m)");
            let outer = r.pick(&["max", "mean", "count", "sum"]);
            // Buckets without a range of their own would run to now (README).
            let w = range(r);
            format!("SELECT {outer}(\"s\") FROM ({middle}) WHERE {w} GROUP BY time(2m)")
        }
        2 => {
            let iv = r.pick(&["1m", "2m"]);
            let offset = r.pick(&["-15s", "90s", "5m", "-1m"]);
            format!(
                "SELECT count(\"{g}\") FROM \"{}\" WHERE {} GROUP BY time({iv}, {offset}) fill(0)",
                m.name,
                range(r)
            )
        }
        _ => {
            let agg = r.pick(&AGGREGATES[..9]);
            format!(
                "select {agg}({f}) from {} where {} group by time(1m), host fill(previous) order by time desc limit 3",
                m.name,
                range(r).to_lowercase()
            )
        }
    }
}

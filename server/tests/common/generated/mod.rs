//! Generated InfluxQL `SELECT` statements over [`super::influxql::points`], for the tests that
//! compare answers statement by statement (`influxql_generated.rs` against InfluxDB 1.8,
//! `fanout.rs` across pods). What it leaves out, and why, is in `influxql_generated.rs`.

use super::influxql::{ms, T0};

pub mod more;
pub mod show;

/// A small, seedable generator (xorshift64*), so a failing run can be repeated exactly (the
/// generated tests share it).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// A measurement of [`common::influxql::points`]: its float and integer fields, its tags, and
/// conditions on them.
struct Measurement {
    name: &'static str,
    float: &'static str,
    integer: &'static str,
    tags: &'static [&'static str],
    tag_conds: &'static [&'static str],
    field_conds: &'static [&'static str],
}

const MEASUREMENTS: &[Measurement] = &[
    Measurement {
        name: "cpu",
        float: "value",
        integer: "n",
        tags: &["host", "dc"],
        tag_conds: &[
            "\"host\" = 'h1'",
            "\"host\" = 'h3'",
            "\"host\" != 'h2'",
            "\"dc\" = 'a'",
            "\"dc\" != 'b'",
            "\"dc\" = ''",
            "\"host\" =~ /h[13]/",
            "\"host\" !~ /2/",
            "\"dc\" =~ /^$/",
            "\"host\" = 'nobody'",
        ],
        field_conds: &[
            "\"value\" > 50",
            "\"value\" <= 30.5",
            "\"n\" = 3",
            "\"n\" != 4",
            "\"n\" >= 5",
            "\"value\" < \"n\" * 10",
        ],
    },
    Measurement {
        name: "disk",
        float: "free",
        integer: "used",
        tags: &["host"],
        tag_conds: &["\"host\" = 'h1'", "\"host\" = 'h2'", "\"host\" !~ /1/"],
        field_conds: &["\"used\" > 105", "\"free\" < 2", "\"used\" <= 190"],
    },
    Measurement {
        name: "mem",
        float: "free",
        integer: "used",
        tags: &["host"],
        tag_conds: &["\"host\" = 'h1'", "\"host\" != 'h1'"],
        field_conds: &["\"used\" >= 1010", "\"free\" > 40"],
    },
];

/// Not `mode` (ties).
const AGGREGATES: &[&str] = &[
    "mean", "median", "count", "sum", "min", "max", "first", "last", "spread", "stddev",
];
const SELECTORS: &[&str] = &["min", "max", "first", "last"];
const INTERVALS: &[&str] = &["10s", "20s", "30s", "45s", "1m", "90s", "2m", "5m", "7m"];
const OFFSETS: &[&str] = &["5s", "15s", "30s", "1m"];
const FILLS: &[&str] = &["null", "none", "previous", "linear", "0", "-1", "2.5"];
const UNITS: &[&str] = &["1s", "10s", "1m"];

/// A time range over the points (10 minutes from `T0`): all of it, wider, or a part.
fn range(r: &mut Rng) -> String {
    let (from, to) = match r.below(4) {
        0 => (T0, T0 + 599),
        1 => (T0 - 120, T0 + 719),
        2 => (T0 + 95, T0 + 431),
        _ => (T0 + 200, T0 + 260),
    };
    format!("time >= {} AND time <= {}", ms(from), ms(to))
}

/// A condition on tags and fields, `AND`/`OR` and parentheses (no time in an `OR`).
fn condition(r: &mut Rng, m: &Measurement, depth: usize) -> String {
    if depth < 2 && r.chance(35) {
        let op = if r.chance(50) { "AND" } else { "OR" };
        let (a, b) = (condition(r, m, depth + 1), condition(r, m, depth + 1));
        return format!("({a} {op} {b})");
    }
    if r.chance(60) {
        r.pick(m.tag_conds).to_string()
    } else {
        r.pick(m.field_conds).to_string()
    }
}

fn field(r: &mut Rng, m: &Measurement) -> &'static str {
    if r.chance(50) {
        m.float
    } else {
        m.integer
    }
}

/// An aggregate of a field: plain, `percentile`, `count(distinct)`. Over the whole range a
/// percentile answers its point's time, which among equal values depends on InfluxDB's sort:
/// there only of `cpu`'s `value`, whose values in one host are all different (the statement
/// then reads one host, or groups by a tag that holds one). Per bucket not under 50,
/// where a first bucket of too few points empties InfluxDB's whole answer (README,
/// deliberate differences).
fn aggregate(r: &mut Rng, m: &Measurement, per_bucket: bool) -> String {
    let f = field(r, m);
    match r.below(12) {
        0 if per_bucket => {
            let p = r.pick(&["50", "90", "99.9", "100"]);
            format!("percentile(\"{f}\", {p})")
        }
        0 if m.name == "cpu" => {
            let p = r.pick(&["5", "20", "40", "50", "90", "99.9", "100"]);
            format!("percentile(\"{}\", {p})", m.float)
        }
        0 | 1 => format!("count(distinct(\"{f}\"))"),
        _ => format!("{}(\"{f}\")", r.pick(AGGREGATES)),
    }
}

/// An expression of the select list around `inner`: as it is, or with a constant.
fn arithmetic(r: &mut Rng, inner: String) -> String {
    match r.below(8) {
        0 => format!("{inner} * 2"),
        1 => format!("{inner} / 4"),
        2 => format!("100 - {inner}"),
        3 => format!("abs({inner} - 50)"),
        _ => inner,
    }
}

/// A transform over an aggregate per bucket (not of `stddev`: it differs from InfluxDB's in
/// the last bits, another order of sums, and a non-negative difference near zero keeps or
/// drops a row on them).
fn transform(r: &mut Rng, m: &Measurement) -> String {
    let inner = format!("{}(\"{}\")", r.pick(&AGGREGATES[..9]), field(r, m));
    match r.below(7) {
        0 => format!("derivative({inner}, {})", r.pick(UNITS)),
        1 => format!("non_negative_derivative({inner})"),
        2 => format!("difference({inner})"),
        3 => format!("non_negative_difference({inner})"),
        4 => format!("cumulative_sum({inner})"),
        5 => format!("moving_average({inner}, {})", 2 + r.below(3)),
        _ => format!("elapsed({inner}, {})", r.pick(UNITS)),
    }
}

/// `GROUP BY` with time buckets, and maybe tags.
fn buckets(r: &mut Rng, m: &Measurement) -> String {
    let iv = r.pick(INTERVALS);
    let time = if r.chance(25) {
        format!("time({iv}, {})", r.pick(OFFSETS))
    } else {
        format!("time({iv})")
    };
    match r.below(5) {
        0 => format!("{time}, \"{}\"", r.pick(m.tags)),
        1 => format!("{time}, *"),
        _ => time,
    }
}

/// `GROUP BY` tags only, or nothing.
fn tags(r: &mut Rng, m: &Measurement) -> Option<String> {
    match r.below(4) {
        0 => Some(format!("\"{}\"", r.pick(m.tags))),
        1 => Some("*".into()),
        _ => None,
    }
}

/// `ORDER BY`, `LIMIT`/`OFFSET` and (`series_limit`) `SLIMIT`/`SOFFSET`.
fn tail(r: &mut Rng, series_limit: bool) -> String {
    let mut t = String::new();
    if r.chance(20) {
        t.push_str(" ORDER BY time DESC");
    }
    let series_limit = series_limit && r.chance(30);
    if r.chance(30) {
        t.push_str(&format!(" LIMIT {}", 1 + r.below(5)));
        if r.chance(50) {
            t.push_str(&format!(" OFFSET {}", r.below(4)));
        }
    }
    if series_limit {
        t.push_str(&format!(" SLIMIT {}", 1 + r.below(2)));
        if r.chance(50) {
            t.push_str(&format!(" SOFFSET {}", r.below(2)));
        }
    }
    t
}

/// Whether a statement may get `SLIMIT`/`SOFFSET`: grouped by tag.
fn limits_series(g: &str) -> bool {
    g.contains('"') || g.contains('*')
}

fn where_clause(r: &mut Rng, m: &Measurement, time: bool) -> String {
    let cond = r.chance(60).then(|| condition(r, m, 0));
    match (cond, time) {
        (Some(c), true) => format!(" WHERE {c} AND {}", range(r)),
        (Some(c), false) => format!(" WHERE {c}"),
        (None, true) => format!(" WHERE {}", range(r)),
        (None, false) => String::new(),
    }
}

/// `w` (a `WHERE` clause or nothing) narrowed to one host.
fn one_host(r: &mut Rng, w: &str) -> String {
    let pin = format!("\"host\" = '{}'", r.pick(&["h1", "h2", "h3"]));
    if w.is_empty() {
        format!(" WHERE {pin}")
    } else {
        format!("{w} AND {pin}")
    }
}

/// One generated statement.
pub fn statement(r: &mut Rng) -> String {
    let m = &MEASUREMENTS[r.below(MEASUREMENTS.len())];
    let from = format!("\"{}\"", m.name);
    match r.below(6) {
        // Aggregates per time bucket (Grafana's default shape), with fill.
        0 | 1 => {
            let n = 1 + r.below(2);
            let fields: Vec<String> = (0..n)
                .map(|_| {
                    let a = aggregate(r, m, true);
                    arithmetic(r, a)
                })
                .collect();
            let w = where_clause(r, m, true);
            let g = buckets(r, m);
            let fill = if r.chance(60) {
                format!(" fill({})", r.pick(FILLS))
            } else {
                String::new()
            };
            let t = tail(r, limits_series(&g));
            format!(
                "SELECT {} FROM {from}{w} GROUP BY {g}{fill}{t}",
                fields.join(", ")
            )
        }
        // Aggregates over the whole range, maybe per tag.
        2 => {
            let a = aggregate(r, m, false);
            let a = arithmetic(r, a);
            let timed = r.chance(70);
            let mut w = where_clause(r, m, timed);
            let g = tags(r, m);
            if g.is_none() && a.contains("percentile") {
                // One host's values are all different (see `aggregate`).
                w = one_host(r, &w);
            }
            let g = g.map(|g| format!(" GROUP BY {g}")).unwrap_or_default();
            let t = tail(r, limits_series(&g));
            format!("SELECT {a} FROM {from}{w}{g}{t}")
        }
        // Transforms over aggregates per bucket, maybe beside other calls.
        3 => {
            let mut calls = vec![transform(r, m)];
            // Beside it: another transform, or aggregates of the asked range alone.
            match r.below(4) {
                0 => calls.push(transform(r, m)),
                1 => {
                    let a = aggregate(r, m, true);
                    calls.push(arithmetic(r, a));
                }
                _ => {}
            }
            let call = calls.join(", ");
            let w = where_clause(r, m, true);
            let g = buckets(r, m);
            let fill = if r.chance(50) {
                format!(" fill({})", r.pick(&["null", "none", "0", "previous"]))
            } else {
                String::new()
            };
            let t = tail(r, false);
            format!("SELECT {call} FROM {from}{w} GROUP BY {g}{fill}{t}")
        }
        // Raw points and transforms over them, maybe per tag.
        4 => {
            let f = field(r, m);
            let sel = match r.below(8) {
                0 => format!("derivative(\"{f}\", {})", r.pick(UNITS)),
                1 => format!("difference(\"{f}\")"),
                2 => format!("non_negative_difference(\"{f}\")"),
                3 => format!("cumulative_sum(\"{f}\")"),
                4 => format!("moving_average(\"{f}\", {})", 2 + r.below(3)),
                5 => format!("\"{f}\", \"{}\"", r.pick(m.tags)),
                6 => format!("\"{}\" - \"{}\"", m.float, m.integer),
                _ => format!("\"{f}\""),
            };
            let timed = r.chance(70);
            let mut w = where_clause(r, m, timed);
            let g = tags(r, m);
            if g.is_none() {
                // One series: points of several series at one time come in an order InfluxDB
                // does not define (README, "Deliberate differences").
                w = one_host(r, &w);
            }
            let g = g.map(|g| format!(" GROUP BY {g}")).unwrap_or_default();
            let t = tail(r, limits_series(&g));
            format!("SELECT {sel} FROM {from}{w}{g}{t}")
        }
        // Selectors: top/bottom, and a selector beside a tag.
        _ => {
            let f = field(r, m);
            let n = 1 + r.below(4);
            let which = r.pick(&["top", "bottom"]);
            let choice = r.below(4);
            let sel = match choice {
                0 => format!("{which}(\"{f}\", \"{}\", {n})", r.pick(m.tags)),
                1 => format!("{}(\"{f}\"), \"{}\"", r.pick(SELECTORS), r.pick(m.tags)),
                _ => format!("{which}(\"{f}\", {n})"),
            };
            // LIMIT and OFFSET: without tags as arguments InfluxDB ranks each group's first
            // OFFSET + LIMIT + 1 points (`query::top::window`), and which points of several
            // series at one time are first depends on its merge: those statements read one.
            let limited = choice != 1 && r.chance(40);
            let mut w = where_clause(r, m, true);
            if choice == 1 || (limited && choice >= 2) {
                // Of one series: between series with points at one time, InfluxDB's pick
                // beside other fields depends on its merge.
                w.push_str(&format!(
                    " AND \"host\" = '{}'",
                    r.pick(&["h1", "h2", "h3"])
                ));
            }
            let g = match r.below(3) {
                0 => format!(" GROUP BY {}", buckets(r, m)),
                1 => tags(r, m)
                    .map(|g| format!(" GROUP BY {g}"))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            let mut t = if r.chance(20) {
                " ORDER BY time DESC".to_string()
            } else {
                String::new()
            };
            if limited {
                match r.below(3) {
                    0 => t.push_str(&format!(" LIMIT {}", n + r.below(3))),
                    1 => t.push_str(&format!(" LIMIT {} OFFSET {}", n + r.below(3), r.below(4))),
                    _ => t.push_str(&format!(" OFFSET {}", 1 + r.below(3))),
                }
            }
            format!("SELECT {sel} FROM {from}{w}{g}{t}")
        }
    }
}

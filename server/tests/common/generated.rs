//! Generated InfluxQL `SELECT` statements over [`super::influxql::points`], for the tests that
//! compare answers statement by statement (`influxql_generated.rs` against InfluxDB 1.8,
//! `fanout.rs` across pods). What it leaves out, and why, is in `influxql_generated.rs`.

use super::influxql::{ms, T0};

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

/// Tag conditions for `SHOW` statements over every measurement (the `dc` tag is `cpu`'s).
const SHOW_CONDS: &[&str] = &[
    "\"host\" = 'h1'",
    "\"host\" != 'h2'",
    "\"host\" =~ /h[13]/",
    "\"host\" !~ /^h/",
    "\"dc\" = 'a'",
    "\"dc\" != 'b'",
    "\"dc\" = ''",
    "\"host\" = 'nobody'",
];

/// For `SHOW MEASUREMENTS`, whose `!=`, `!~` and `= ''` InfluxDB's index answers otherwise
/// than its `SELECT` (README, deliberate differences).
const MEASUREMENT_CONDS: &[&str] = &[
    "\"host\" = 'h1'",
    "\"host\" =~ /h[13]/",
    "\"dc\" = 'a'",
    "\"host\" = 'nobody'",
];

/// For `SHOW TAG VALUES CARDINALITY`, where InfluxDB's comparison of a tag a series lacks is
/// false whatever the operator (README): on `host`, which every series has.
const HOST_CONDS: &[&str] = &[
    "\"host\" = 'h1'",
    "\"host\" != 'h2'",
    "\"host\" =~ /h[13]/",
    "\"host\" !~ /^h/",
    "\"host\" = 'nobody'",
];

/// `FROM` for `SHOW` statements: a measurement, a regex, several, or none.
fn show_from(r: &mut Rng) -> String {
    match r.below(6) {
        0 => " FROM \"cpu\"".into(),
        1 => " FROM \"mem\"".into(),
        2 => " FROM /^(cpu|disk)$/".into(),
        3 => " FROM \"disk\", \"mem\"".into(),
        _ => String::new(),
    }
}

/// A `WHERE` of tag conditions of `conds`, joined by `AND`/`OR`, or nothing. `SHOW`
/// statements with time or field conditions are deliberate differences (README).
fn show_where(r: &mut Rng, conds: &[&str]) -> String {
    if !r.chance(50) {
        return String::new();
    }
    let a = r.pick(conds);
    if r.chance(30) {
        let op = if r.chance(50) { "AND" } else { "OR" };
        format!(" WHERE ({a} {op} {})", r.pick(conds))
    } else {
        format!(" WHERE {a}")
    }
}

fn show_limits(r: &mut Rng) -> String {
    let mut t = String::new();
    if r.chance(25) {
        t.push_str(&format!(" LIMIT {}", r.below(4)));
    }
    if r.chance(20) {
        t.push_str(&format!(" OFFSET {}", r.below(3)));
    }
    t
}

/// One generated `SHOW` statement: the metadata Grafana's template variables ask for, and
/// every cardinality.
pub fn show_statement(r: &mut Rng) -> String {
    let from = show_from(r);
    let w = show_where(r, SHOW_CONDS);
    let exact = if r.chance(50) { " EXACT" } else { "" };
    let group = match r.below(5) {
        0 => " GROUP BY \"host\"",
        1 => " GROUP BY \"dc\"",
        2 => " GROUP BY \"host\", \"dc\"",
        _ => "",
    };
    let key = match r.below(5) {
        0 => " WITH KEY = \"host\"",
        1 => " WITH KEY != \"host\"",
        2 => " WITH KEY IN (\"host\", \"dc\")",
        3 => " WITH KEY =~ /o/",
        _ => " WITH KEY = \"dc\"",
    };
    match r.below(10) {
        0 => {
            let with = if r.chance(40) {
                " WITH MEASUREMENT =~ /m|c/"
            } else {
                ""
            };
            let w = show_where(r, MEASUREMENT_CONDS);
            format!("SHOW MEASUREMENTS{with}{w}{}", show_limits(r))
        }
        1 => format!("SHOW TAG KEYS{from}{w}{}", show_limits(r)),
        2 => format!("SHOW TAG VALUES{from}{key}{w}{}", show_limits(r)),
        3 => format!("SHOW FIELD KEYS{from}"),
        4 => format!("SHOW SERIES{from}{w}{}", show_limits(r)),
        5 => format!(
            "SHOW MEASUREMENT{exact} CARDINALITY{from}{w}{group}{}",
            show_limits(r)
        ),
        6 => format!(
            "SHOW SERIES{exact} CARDINALITY{from}{w}{group}{}",
            show_limits(r)
        ),
        7 => format!(
            "SHOW TAG KEY{exact} CARDINALITY{from}{w}{group}{}",
            show_limits(r)
        ),
        8 => {
            let w = show_where(r, HOST_CONDS);
            format!(
                "SHOW TAG VALUES{exact} CARDINALITY{from}{key}{w}{group}{}",
                show_limits(r)
            )
        }
        _ => format!(
            "SHOW FIELD KEY{exact} CARDINALITY{from}{w}{group}{}",
            show_limits(r)
        ),
    }
}

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
            let host = if by_host { " GROUP BY \"host\"" } else { "" };
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
    let from = match r.below(4) {
        0 => "\"mem\", \"disk\"".to_string(),
        1 => "/^(mem|disk)$/".to_string(),
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

//! Generated `SHOW` statements: every listing and cardinality, with `FROM`, tag conditions,
//! `GROUP BY` tags and limits.

use super::Rng;

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

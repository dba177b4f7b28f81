//! The parser faces whatever arrives on `/query`: it must never panic, never overflow the
//! stack, and what it prints back must parse to the same thing.

use sluice_influxql::*;

const CORPUS: &[&str] = &[
    r#"SELECT mean("value") FROM "policy"."cpu" WHERE time >= 1596240000000ms and time <= 1596240300000ms GROUP BY time(10s) fill(null)"#,
    r#"SELECT mean("value") FROM "cpu" WHERE ("hostname" = 'server1' OR "hostname" = 'server2') AND time >= 1596240000000ms and time <= 1596240300000ms GROUP BY time(10s), "datacenter" fill(none)"#,
    r#"SELECT "value" FROM "cpu" WHERE time >= now() - 6h and time <= now() ORDER BY time ASC limit 1 slimit 1 tz('Europe/Paris')"#,
    r#"SELECT mean("value") /100 AS "text", "host"::tag, count(distinct("v")), count(distinct v) FROM "autogen"."cpu" WHERE "a" =~ /^(a|b)$/ AND "b" !~ /x\/y/ GROUP BY time(1m, -30s) fill(-1.5)"#,
    r#"SELECT derivative(mean("value"), 1s), moving_average(max(*), 5), percentile(/u.*/, 95) FROM /^cpu$/, db..mem, "rp"./re/ WHERE v > -1.5 OR w <> 'it\'s' LIMIT 10 OFFSET 2 SLIMIT 3 SOFFSET 4"#,
    "SELECT * FROM (SELECT max(v) AS m FROM cpu GROUP BY time(1h), *) WHERE m % 2 = 0 AND t & 1 | 2 ^ 3 >= 4",
    r#"SHOW MEASUREMENTS ON "db" WITH MEASUREMENT =~ /(?i)cp/ WHERE "host" = 'a' LIMIT 100 OFFSET 1"#,
    r#"SHOW TAG KEYS ON db FROM "rp"."m", /x/ WHERE "host" = 'a' ORDER BY time DESC LIMIT 5 SLIMIT 1"#,
    r#"SHOW TAG VALUES FROM "m" WITH KEY IN ("a", b) WHERE "dc" = 'x' AND time > now() - 1h"#,
    r#"SHOW FIELD KEYS ON "d" FROM "m"; SHOW SERIES EXACT CARDINALITY ON db FROM m WHERE a = 'b' GROUP BY c LIMIT 1"#,
    r#"SHOW RETENTION POLICIES on "db"; SHOW DATABASES; show measurements;"#,
    "CREATE DATABASE \"tele graf\" WITH DURATION 7d REPLICATION 1 SHARD DURATION 1h NAME raw",
    "DROP SERIES FROM cpu WHERE host = 'a'; SELECT v::float, u::integer, *::field FROM m -- trailing\n",
    "/* c */ SELECT\r\n\"a\"\t,b FROM m WHERE time > '2020-01-01 00:00:00' AND x = true AND y = 18446744073709551615",
];

/// Every expression the statement holds, for the print-and-reparse check.
fn expressions(stmt: &Statement) -> Vec<&Expr> {
    let mut out = Vec::new();
    match stmt {
        Statement::Select(s) => select_exprs(s, &mut out),
        Statement::ShowMeasurements(s) => out.extend(&s.condition),
        Statement::ShowTagKeys(s) => out.extend(&s.condition),
        Statement::ShowTagValues(s) => out.extend(&s.condition),
        Statement::ShowSeries(s) => out.extend(&s.condition),
        Statement::ShowCardinality(s) => out.extend(&s.condition),
        _ => {}
    }
    out
}

fn select_exprs<'a>(s: &'a SelectStatement, out: &mut Vec<&'a Expr>) {
    for f in &s.fields {
        if !matches!(f.expr, Expr::Literal(Literal::Regex(_))) {
            out.push(&f.expr);
        }
    }
    out.extend(&s.condition);
    for src in &s.sources {
        if let Source::Subquery(inner) = src {
            select_exprs(inner, out);
        }
    }
}

/// Parses without panicking; for accepted input, checks that printed expressions parse back
/// and print the same.
fn check(q: &str) {
    let Ok(stmts) = parse(q) else { return };
    for stmt in &stmts {
        for e in expressions(stmt) {
            let printed = e.to_string();
            match parse_expr(&printed) {
                Ok(again) => assert_eq!(again.to_string(), printed, "from {q:?}"),
                Err(err) => panic!("{printed:?} (from {q:?}) does not parse back: {err}"),
            }
        }
        for f in match stmt {
            Statement::Select(s) => s.fields.as_slice(),
            _ => &[],
        } {
            let _ = f.column_name();
        }
        if let Statement::Select(s) = stmt {
            let _ = s.column_names();
            // Pods send each other statements as this text (a subquery's inner statement,
            // a forecast's aggregate): it must parse back to the same statement.
            let printed = s.to_string();
            match parse(&printed) {
                Ok(again) => {
                    assert_eq!(again, std::slice::from_ref(stmt), "{printed:?} from {q:?}")
                }
                Err(err) => panic!("{printed:?} (from {q:?}) does not parse back: {err}"),
            }
        }
    }
}

#[test]
fn corpus_parses() {
    for q in CORPUS {
        if let Err(e) = parse(q) {
            panic!("{q}: {e}");
        }
        check(q);
    }
}

#[test]
fn truncations_and_mutations_never_panic() {
    const INSERTS: &[char] = &[
        '(', ')', '"', '\'', '/', '\\', '$', ';', ' ', '-', ':', '.', '*', '=', '~', '!', '<', 'µ',
        '\n', '\r', '0', 'a', ',', '%', 'é', '\u{a0}',
    ];
    for q in CORPUS {
        let chars: Vec<char> = q.chars().collect();
        for cut in 0..=chars.len() {
            let prefix: String = chars[..cut].iter().collect();
            check(&prefix);
            let suffix: String = chars[cut..].iter().collect();
            check(&suffix);
            if cut < chars.len() {
                let mut deleted = chars.clone();
                deleted.remove(cut);
                check(&deleted.iter().collect::<String>());
                for &c in INSERTS {
                    let mut replaced = chars.clone();
                    replaced[cut] = c;
                    check(&replaced.iter().collect::<String>());
                    let mut inserted = chars.clone();
                    inserted.insert(cut, c);
                    check(&inserted.iter().collect::<String>());
                }
            }
        }
    }
}

/// A small deterministic generator, so failures reproduce.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

#[test]
fn random_token_soup_never_panics() {
    const PIECES: &[&str] = &[
        "SELECT",
        "FROM",
        "WHERE",
        "GROUP",
        "BY",
        "time(",
        "fill(",
        "tz(",
        "SHOW",
        "TAG",
        "KEYS",
        "VALUES",
        "WITH",
        "KEY",
        "MEASUREMENT",
        "MEASUREMENTS",
        "SERIES",
        "FIELD",
        "CARDINALITY",
        "EXACT",
        "ON",
        "CREATE",
        "DATABASE",
        "DURATION",
        "INF",
        "NAME",
        "ORDER",
        "LIMIT",
        "SLIMIT",
        "OFFSET",
        "AS",
        "AND",
        "OR",
        "DISTINCT",
        "INTO",
        "mean(",
        "now()",
        "\"q\"",
        "'s'",
        "x",
        "10s",
        "1.5",
        "-",
        "+",
        "*",
        "/",
        "/re/",
        "=~",
        "!~",
        "=",
        "<>",
        ">=",
        "(",
        ")",
        ",",
        ";",
        ".",
        "..",
        "::",
        "::tag",
        "$v",
        " ",
        "\n",
        "--c\n",
        "/*c*/",
        "\\",
        "'",
        "\"",
        "99999999999999999999",
    ];
    let mut rng = XorShift(0x5eed_1234_abcd_0001);
    for _ in 0..20_000 {
        let n = 1 + rng.next() % 24;
        let mut q = String::new();
        for _ in 0..n {
            q.push_str(rng.pick(PIECES));
            if rng.next() & 3 == 0 {
                q.push(' ');
            }
        }
        check(&q);
    }
}

/// Runs `f` on a thread with a 2 MiB stack, the default for spawned threads (and so for
/// the server's workers), so that stack overflows show up here rather than in production.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    if handle.join().is_err() {
        panic!("parser thread panicked");
    }
}

fn too_deep(q: &str) {
    match parse(q) {
        Err(e) => assert_eq!(e.kind(), ErrorKind::TooDeep, "{e}"),
        Ok(_) => panic!("accepted {} bytes of nesting", q.len()),
    }
}

const HOSTILE: usize = 100_000;

#[test]
fn hostile_parentheses_are_refused() {
    on_small_stack(|| {
        let n = HOSTILE;
        too_deep(&format!(
            "SELECT {}v{} FROM m",
            "(".repeat(n),
            ")".repeat(n)
        ));
        too_deep(&format!("SELECT v FROM m WHERE {}", "(".repeat(n)));
    });
}

#[test]
fn hostile_calls_are_refused() {
    on_small_stack(|| too_deep(&format!("SELECT {} FROM m", "mean(".repeat(HOSTILE))));
}

#[test]
fn hostile_signs_are_refused() {
    on_small_stack(|| too_deep(&format!("SELECT {}v FROM m", "-(".repeat(HOSTILE))));
}

#[test]
fn hostile_subqueries_are_refused() {
    on_small_stack(|| too_deep(&"SELECT * FROM (".repeat(HOSTILE)));
}

#[test]
fn hostile_operator_chains_are_refused() {
    on_small_stack(|| {
        let n = HOSTILE;
        too_deep(&format!(
            "SELECT v FROM m WHERE {}",
            vec!["a = 1"; n].join(" OR ")
        ));
        too_deep(&format!("SELECT {} FROM m", vec!["v"; n].join(" + ")));
    });
}

#[test]
fn the_deepest_accepted_trees_are_safe_to_use() {
    on_small_stack(|| {
        let parens = MAX_NESTING - 1;
        let q = format!(
            "SELECT {}v{} FROM m",
            "(".repeat(parens),
            ")".repeat(parens)
        );
        let stmts = parse(&q).unwrap_or_else(|e| panic!("{e}"));
        let copy = stmts.clone();
        assert_eq!(copy, stmts);
        let _ = format!("{stmts:?}");
        check(&q);

        let calls = MAX_NESTING - 1;
        let q = format!(
            "SELECT {}v{} FROM m",
            "mean(".repeat(calls),
            ")".repeat(calls)
        );
        let stmts = parse(&q).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stmts.clone(), stmts);
        check(&q);

        let subqueries = MAX_NESTING - 1;
        let q = format!(
            "{}SELECT v FROM m{}",
            "SELECT * FROM (".repeat(subqueries),
            ")".repeat(subqueries)
        );
        let stmts = parse(&q).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stmts.clone(), stmts);
        let _ = format!("{stmts:?}");
        check(&q);

        let chain = vec!["a = 1"; MAX_EXPR_HEIGHT - 1].join(" OR ");
        let q = format!("SELECT v FROM m WHERE {chain}");
        let stmts = parse(&q).unwrap_or_else(|e| panic!("{e}"));
        let copy = stmts.clone();
        assert_eq!(copy, stmts);
        let _ = format!("{stmts:?}");
        check(&q);
        drop(stmts);
    });
}

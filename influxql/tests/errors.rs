//! Error messages and positions, as InfluxDB 1.8 reports them. Clients show these verbatim,
//! so the wording, the token named after `found`, the list after `expected` and the
//! `line L, char C` position all follow InfluxDB, including its quirks: the end of input is
//! reported one character further on once the scanner has read past it (after a word, a
//! number-free run of whitespace, or where the parser looked for a regex), and strings and
//! regexes are located at the character before their opening quote or slash.

use sluice_influxql::{parse, ErrorKind, Pos};

fn err(q: &str) -> String {
    match parse(q) {
        Ok(s) => panic!("{q:?} parsed as {s:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn end_of_input() {
    for (q, e) in [
        (
            "SELECT",
            "found EOF, expected identifier, string, number, bool at line 1, char 8",
        ),
        (
            "SELECT v FROM",
            "found EOF, expected identifier at line 1, char 15",
        ),
        (
            "SELECT v FROM m WHERE",
            "found EOF, expected identifier, string, number, bool at line 1, char 23",
        ),
        (
            "SELECT v FROM m WHERE a =",
            "found EOF, expected identifier, string, number, bool at line 1, char 26",
        ),
        (
            "SELECT v FROM m WHERE a = ",
            "found EOF, expected identifier, string, number, bool at line 1, char 28",
        ),
        (
            "SELECT v FROM m WHERE a = 1 AND",
            "found EOF, expected identifier, string, number, bool at line 1, char 33",
        ),
        (
            "SELECT v,",
            "found EOF, expected identifier, string, number, bool at line 1, char 11",
        ),
        (
            "SELECT v FROM m GROUP BY",
            "found EOF, expected identifier, string, number, bool at line 1, char 26",
        ),
        (
            "SELECT v FROM m GROUP BY time(",
            "found EOF, expected identifier, string, number, bool at line 1, char 32",
        ),
        (
            "SELECT v FROM m tz('x'",
            "found EOF, expected ) at line 1, char 23",
        ),
        (
            "SELECT v::",
            "found EOF, expected float, integer, string, boolean, field, tag at line 1, char 11",
        ),
        (
            "SELECT v FROM m; SELECT",
            "found EOF, expected identifier, string, number, bool at line 1, char 25",
        ),
        (
            "SELECT v\nFROM m\nWHERE",
            "found EOF, expected identifier, string, number, bool at line 3, char 7",
        ),
        (
            "SHOW TAG",
            "found EOF, expected KEY, KEYS, VALUES at line 1, char 10",
        ),
        (
            "SHOW FIELD",
            "found EOF, expected KEY, KEYS at line 1, char 12",
        ),
        (
            "SHOW MEASUREMENT",
            "found EOF, expected EXACT, CARDINALITY at line 1, char 18",
        ),
        (
            "SHOW MEASUREMENTS WITH",
            "found EOF, expected MEASUREMENT at line 1, char 24",
        ),
        (
            "SHOW MEASUREMENTS WITH MEASUREMENT =",
            "found EOF, expected identifier at line 1, char 38",
        ),
        (
            "SHOW TAG VALUES FROM m WITH KEY",
            "found EOF, expected IN, =, =~ at line 1, char 33",
        ),
        (
            "SHOW TAG VALUES WITH KEY IN (",
            "found EOF, expected identifier at line 1, char 30",
        ),
        (
            "SHOW TAG VALUES WITH KEY IN (a",
            "found EOF, expected ) at line 1, char 32",
        ),
        (
            "CREATE DATABASE db WITH SHARD DURATION",
            "found EOF, expected duration at line 1, char 40",
        ),
    ] {
        assert_eq!(err(q), e, "{q:?}");
    }
}

#[test]
fn unexpected_tokens() {
    for (q, e) in [
        (
            "SELECT mean(v FROM m",
            "found FROM, expected ) at line 1, char 15",
        ),
        (
            "SELECT v FROM m LIMIT x",
            "found x, expected integer at line 1, char 23",
        ),
        (
            "SELECT v FROM m SHOW DATABASES",
            "found SHOW, expected ; at line 1, char 17",
        ),
        (
            "SELECT count(distinct) FROM m",
            "found ), expected (, identifier at line 1, char 22",
        ),
        (
            "SELECT \"v FROM m",
            "found v FROM m, expected identifier, string, number, bool at line 1, char 7",
        ),
        (
            "SELECT v FROM m WHERE a = 'open",
            "found open, expected identifier, string, number, bool at line 1, char 26",
        ),
        (
            r"SELECT 'a\qb' FROM m",
            r"found \q, expected identifier, string, number, bool at line 1, char 11",
        ),
        (
            "SELECT v FROM m WHERE a =~ 'x'",
            "found x, expected regex at line 1, char 27",
        ),
        (
            "SELECT v FROM m WHERE a = = 1",
            "found =, expected identifier, string, number, bool at line 1, char 27",
        ),
        (
            "SELECT v FROM m WHERE a = '' ''",
            "found STRING, expected ; at line 1, char 29",
        ),
        (
            "SELECT v FROM m WHERE a = 1 b",
            "found b, expected ; at line 1, char 29",
        ),
        (
            "SELECT v FROM 12",
            "found 12, expected identifier at line 1, char 15",
        ),
        (
            "SELECT v FROM m GROUP time(1m)",
            "found time, expected BY at line 1, char 23",
        ),
        (
            "SELECT v FROM m ORDER time",
            "found time, expected BY at line 1, char 23",
        ),
        (
            "SELECT v FROM m ORDER BY 1",
            "found 1, expected identifier, ASC, DESC at line 1, char 26",
        ),
        (
            "SELECT v AS FROM m",
            "found FROM, expected identifier at line 1, char 13",
        ),
        (
            "SELECT ÷ FROM m",
            "found ÷, expected identifier, string, number, bool at line 1, char 8",
        ),
    ] {
        assert_eq!(err(q), e, "{q:?}");
    }
}

#[test]
fn messages_without_tokens() {
    for (q, e) in [
        (
            "SELECT v FROM m ORDER BY time, host",
            "only ORDER BY time supported at this time",
        ),
        (
            "SELECT v FROM m WHERE time > now() - 1x",
            "invalid duration",
        ),
        (
            "SELECT v FROM a.b.c.d",
            r#"too many segments in "a"."b"."c".d at line 1, char 1"#,
        ),
        (
            "SELECT v FROM m WHERE host = 'a' AND $timeFilter",
            "missing parameter: timeFilter",
        ),
        (
            "SELECT v FROM m WHERE a =~ /x",
            "bad regex: unterminated regex at line 1, char 27",
        ),
        (
            "SELECT 99999999999999999999 FROM m",
            "unable to parse integer at line 1, char 8",
        ),
        (
            "SELECT -99999999999999999999 FROM m",
            "unable to parse integer at line 1, char 9",
        ),
        (
            "SELECT -18446744073709551615 FROM m",
            "constant -18446744073709551615 underflows int64",
        ),
    ] {
        assert_eq!(err(q), e, "{q:?}");
    }
}

#[test]
fn errors_carry_kind_and_position() {
    let e = parse("SELECT v FROM").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Syntax);
    assert_eq!(
        e.position(),
        Some(Pos {
            line: 1,
            column: 15
        })
    );
    assert_eq!(e.found(), Some("EOF"));
    assert_eq!(e.expected(), ["identifier"]);
    let e = parse("SELECT v INTO w FROM m").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert_eq!(
        e.position(),
        Some(Pos {
            line: 1,
            column: 10
        })
    );
    let e = parse("SELECT v FROM m GROUP BY now()").unwrap_err();
    assert_eq!((e.kind(), e.position()), (ErrorKind::Compile, None));
    let e = parse("SELECT v FROM m WHERE t > 1x").unwrap_err();
    assert_eq!((e.kind(), e.position()), (ErrorKind::Invalid, None));
}

#[test]
fn parse_errors_win_over_later_refusals() {
    // InfluxDB parses the whole query before it compiles any statement, so a syntax error
    // anywhere is what it reports, even after a statement it would refuse.
    assert_eq!(
        err("SELECT v FROM m GROUP BY now(); SHOW DATABASES x"),
        "found x, expected ; at line 1, char 48"
    );
    assert_eq!(
        err("SELECT v INTO w FROM m; SELECT"),
        "found EOF, expected identifier, string, number, bool at line 1, char 32"
    );
    assert_eq!(
        err("SELECT v FROM m GROUP BY now(), time(1m), time(2m)"),
        "only time() calls allowed in dimensions"
    );
    assert_eq!(
        err("SELECT v INTO w FROM m GROUP BY now()"),
        "SELECT ... INTO is not supported at line 1, char 10"
    );
}

#[test]
fn lenient_where_influxdb_is_lenient() {
    // `1.` is the float 1, and an EXACT without CARDINALITY is ignored, as in InfluxDB.
    assert!(parse("SELECT v FROM m WHERE a = 1.").is_ok());
    assert!(parse("SHOW SERIES EXACT").is_ok());
    assert!(parse("select V from M where A = 'x' limit 1 offset 1").is_ok());
}

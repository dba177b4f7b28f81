//! The condition translator's tests: time bounds, series and row conditions, and the SQL
//! they become.

use super::*;

#[test]
fn widening_moves_the_end_a_transform_reads_past_and_keeps_an_open_end_open() {
    let mut r = TimeRange {
        min: Some(600),
        max: Some(1200),
    };
    r.widen(60, false);
    assert_eq!((r.min, r.max), (Some(540), Some(1200)));
    r.widen(60, true);
    assert_eq!((r.min, r.max), (Some(540), Some(1260)));
    let mut open = TimeRange::default();
    open.widen(60, false);
    open.widen(60, true);
    assert_eq!(open, TimeRange::default());
}

fn scope(fields: &BTreeMap<String, FieldType>) -> Scope<'_> {
    Scope {
        fields,
        now_ns: 2_000_000_000_000_000_000,
    }
}

fn fields() -> BTreeMap<String, FieldType> {
    [
        ("value".to_string(), FieldType::Float),
        ("n".to_string(), FieldType::Integer),
    ]
    .into()
}

#[test]
fn time_bounds_come_out_and_tags_go_to_the_series_table() {
    let f = fields();
    let e = sluice_influxql::parse_expr(
        "time >= 1596240000000ms and time <= now() and (\"host\" = 'a' OR \"host\" =~ /^b/) and value > 1",
    )
    .unwrap();
    let w = split(Some(&e), &scope(&f)).unwrap();
    assert_eq!(w.range.min, Some(1_596_240_000_000_000_000));
    assert_eq!(w.range.max, Some(2_000_000_000_000_000_000));
    assert_eq!(
        w.series,
        ["((tags['host'] = 'a') OR (tags['host'] IS NOT NULL AND match(toString(tags['host']), '^b')))"]
    );
    assert_eq!(w.rows, ["(m.`value` > 1)"]);
    assert!(!w.rows_use_tags);
}

#[test]
fn the_series_a_condition_can_select_take_what_reads_a_field_as_true() {
    let f = fields();
    let superset = |q: &str| {
        let e = sluice_influxql::parse_expr(q).unwrap();
        series_superset(Some(&e), &scope(&f)).unwrap()
    };
    let d = "(tags['dc'] != 'b')";
    assert_eq!(
        superset("time > 0 AND ((dc != 'b' AND value > 1) OR (dc != 'b' AND n != 4))"),
        [format!("({d} OR {d})")]
    );
    assert!(superset("host = 'a' OR value > 1").is_empty());
    assert_eq!(
        superset("value > 1 AND host = 'a'"),
        ["(tags['host'] = 'a')"]
    );
    assert!(superset("value > 1").is_empty());
}

#[test]
fn mixed_conditions_read_tags_per_row() {
    let f = fields();
    let set = |q: &str| {
        let e = sluice_influxql::parse_expr(q).unwrap();
        sql(&e, &scope(&f), "tags").unwrap()
    };
    assert_eq!(
        set("host = 'a' OR (host = 'b' OR 'c' = host)"),
        "(tags['host'] IN ('a', 'b', 'c'))"
    );
    // Another key, another operator or a field in the chain: the plain `OR`.
    assert_eq!(
        set("host = 'a' OR dc = 'b'"),
        "((tags['host'] = 'a') OR (tags['dc'] = 'b'))"
    );
    assert_eq!(
        set("host = 'a' OR host != 'b'"),
        "((tags['host'] = 'a') OR (tags['host'] != 'b'))"
    );
    assert!(set("host = 'a' OR value = 1").contains(" OR "));
    let e = sluice_influxql::parse_expr("host = 'a' OR value > 1").unwrap();
    let w = split(Some(&e), &scope(&f)).unwrap();
    assert!(w.series.is_empty());
    assert_eq!(w.rows, ["((s.tags['host'] = 'a') OR (m.`value` > 1))"]);
    assert!(w.rows_use_tags);
}

#[test]
fn strict_bounds_and_flipped_sides() {
    let f = fields();
    let e = sluice_influxql::parse_expr("time > 10 and 20 > time").unwrap();
    let w = split(Some(&e), &scope(&f)).unwrap();
    assert_eq!(
        w.range,
        TimeRange {
            min: Some(11),
            max: Some(19)
        }
    );
    let e = sluice_influxql::parse_expr("time > '2020-08-01T00:00:00Z' - 1h").unwrap();
    let w = split(Some(&e), &scope(&f)).unwrap();
    assert_eq!(w.range.min, Some(1_596_236_400_000_000_001));
}

#[test]
fn bad_time_conditions_are_named() {
    let f = fields();
    for bad in ["time > 'yesterday'", "time > 1 OR value > 1", "time != 5"] {
        let e = sluice_influxql::parse_expr(bad).unwrap();
        let err = split(Some(&e), &scope(&f)).unwrap_err().to_string();
        assert!(err.contains("time"), "{bad}: {err}");
    }
}

#[test]
fn casts_decide_and_tags_never_equal_numbers() {
    let f = fields();
    let s = scope(&f);
    assert_eq!(
        s.resolve("value", Some(DataType::Tag)),
        Operand::Tag("value".into())
    );
    // Numbers cast between their types (InfluxDB truncates a float to an integer);
    // nothing else does.
    assert_eq!(
        s.resolve("value", Some(DataType::Integer)),
        Operand::Field("toInt64(m.`value`)".into(), FieldType::Integer)
    );
    assert_eq!(
        s.resolve("n", Some(DataType::Float)),
        Operand::Field("toFloat64(m.`n`)".into(), FieldType::Float)
    );
    assert_eq!(
        s.resolve("n", Some(DataType::Integer)),
        Operand::Field("m.`n`".into(), FieldType::Integer)
    );
    assert_eq!(s.resolve("n", Some(DataType::String)), Operand::Missing);
    assert_eq!(
        s.resolve("value", Some(DataType::Boolean)),
        Operand::Missing
    );
    assert_eq!(s.resolve("host", None), Operand::Tag("host".into()));
    let e = sluice_influxql::parse_expr("host = 5").unwrap();
    assert_eq!(split(Some(&e), &s).unwrap().series, ["0"]);
}

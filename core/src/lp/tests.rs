use super::*;
use crate::series::series_id;
use std::collections::HashMap;

const NOW: i64 = 1_700_000_000_123_456_789;

fn opts() -> ParseOptions {
    ParseOptions::new(Precision::Nanosecond, NOW)
}

fn p(body: &str) -> ParsedBody {
    let out = parse(body.as_bytes(), &opts(), &NoSchema);
    for b in &out.batches {
        b.validate().unwrap();
        // Without a schema that knows series, every row's series is defined in its batch.
        for id in &b.series_id {
            assert!(
                b.series.iter().any(|s| s.id == *id),
                "series {id:#x} undefined"
            );
        }
    }
    out
}

fn only_error(body: &str) -> LineError {
    let out = p(body);
    assert_eq!(out.points, 0, "{body:?} should be rejected: {out:?}");
    assert_eq!(out.errors.len(), 1, "{body:?}: {:?}", out.errors);
    out.errors[0].clone()
}

fn kind(body: &str) -> LineErrorKind {
    only_error(body).kind
}

fn floats(b: &MeasurementBatch, name: &str) -> Vec<Option<f64>> {
    let col = b.field(name).unwrap();
    let ColumnValues::Float(v) = &col.values else {
        panic!("{name} is {:?}", col.field_type())
    };
    v.iter()
        .zip(&col.valid)
        .map(|(x, ok)| ok.then_some(*x))
        .collect()
}

fn strings(b: &MeasurementBatch, name: &str) -> Vec<Option<String>> {
    let col = b.field(name).unwrap();
    let ColumnValues::String(s) = &col.values else {
        panic!("{name} is {:?}", col.field_type())
    };
    (0..s.len())
        .map(|i| col.valid[i].then(|| s.get(i).unwrap().to_owned()))
        .collect()
}

fn tags_of(b: &MeasurementBatch, row: usize) -> Vec<(String, String)> {
    b.series_def(b.series_id[row]).unwrap().tags.clone()
}

fn id_of(b: &MeasurementBatch, row: usize) -> u64 {
    let def = b.series_def(b.series_id[row]).unwrap();
    let tags: Vec<(&str, &str)> = def
        .tags
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    series_id(&b.measurement, &tags)
}

const TELEGRAF: &str = "cpu,host=server01,region=us-west usage_user=0.5,usage_system=0.2,usage_idle=99.1,usage_iowait=0.0,usage_steal=0.0 1700000000000000000";

#[test]
fn parses_telegraf_line() {
    let out = p(TELEGRAF);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(out.points, 1);
    let b = &out.batches[0];
    assert_eq!(b.measurement, "cpu");
    assert_eq!(b.time_ns, vec![1_700_000_000_000_000_000]);
    assert_eq!(b.line, vec![1]);
    let names: Vec<_> = b.fields.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "usage_user",
            "usage_system",
            "usage_idle",
            "usage_iowait",
            "usage_steal"
        ]
    );
    assert_eq!(floats(b, "usage_idle"), vec![Some(99.1)]);
    assert_eq!(
        tags_of(b, 0),
        vec![
            ("host".to_owned(), "server01".to_owned()),
            ("region".to_owned(), "us-west".to_owned())
        ]
    );
    assert_eq!(
        b.series_id[0],
        series_id("cpu", &[("host", "server01"), ("region", "us-west")])
    );
    assert_eq!(b.series_id[0], 0x6abec04e0c53ef91);
}

#[test]
fn groups_by_measurement_with_nulls() {
    let body = "cpu,host=a v=1\nmem free=10i\ncpu,host=b v=2,extra=\"x\"\ncpu,host=a extra=\"y\"\n";
    let out = p(body);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(out.points, 4);
    assert_eq!(out.batches.len(), 2);
    let cpu = out.batch("cpu").unwrap();
    assert_eq!(cpu.len(), 3);
    assert_eq!(cpu.line, vec![1, 3, 4]);
    assert_eq!(floats(cpu, "v"), vec![Some(1.0), Some(2.0), None]);
    assert_eq!(
        strings(cpu, "extra"),
        vec![None, Some("x".into()), Some("y".into())]
    );
    assert_eq!(cpu.series.len(), 2);
    assert_eq!(cpu.series_id[0], cpu.series_id[2]);
    let mem = out.batch("mem").unwrap();
    assert_eq!(mem.field_type("free"), Some(FieldType::Integer));
    assert_eq!(
        mem.series,
        vec![SeriesDef {
            id: series_id("mem", &[]),
            tags: vec![]
        }]
    );
}

#[test]
fn all_value_types() {
    let body = r#"m f=-1.5e3,i=-42i,u=42u,s="hi",b=t,b2=FALSE,z=0"#;
    let out = p(body);
    let b = &out.batches[0];
    assert_eq!(b.field_type("f"), Some(FieldType::Float));
    assert_eq!(b.field_type("i"), Some(FieldType::Integer));
    assert_eq!(b.field_type("u"), Some(FieldType::UInteger));
    assert_eq!(b.field_type("s"), Some(FieldType::String));
    assert_eq!(b.field_type("b"), Some(FieldType::Boolean));
    assert_eq!(
        b.field("i").unwrap().values,
        ColumnValues::Integer(vec![-42])
    );
    assert_eq!(
        b.field("u").unwrap().values,
        ColumnValues::UInteger(vec![42])
    );
    assert_eq!(
        b.field("b").unwrap().values,
        ColumnValues::Boolean(vec![true])
    );
    assert_eq!(
        b.field("b2").unwrap().values,
        ColumnValues::Boolean(vec![false])
    );
    assert_eq!(floats(b, "f"), vec![Some(-1500.0)]);
    assert_eq!(floats(b, "z"), vec![Some(0.0)]);
    for t in [
        "t", "T", "true", "True", "TRUE", "f", "F", "false", "False", "FALSE",
    ] {
        let out = p(&format!("m b={t}"));
        assert_eq!(out.points, 1, "{t}");
    }
}

#[test]
fn escapes() {
    let body =
        r#"my\ meas\,ure,tag\ k\=1=v\,a\ l\=ue,path=C:\Users f\ k\,e\=y="say \"hi\" \\ \n",x=1"#;
    let out = p(body);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let b = &out.batches[0];
    assert_eq!(b.measurement, "my meas,ure");
    assert_eq!(
        tags_of(b, 0),
        vec![
            ("path".to_owned(), r"C:\Users".to_owned()),
            ("tag k=1".to_owned(), "v,a l=ue".to_owned()),
        ]
    );
    assert_eq!(
        strings(b, "f k,e=y"),
        vec![Some(r#"say "hi" \ \n"#.to_owned())]
    );
    assert_eq!(b.series_id[0], id_of(b, 0));
    // Backslash before a non-special character is literal.
    let out = p(r"cpu,a=\1 v=1");
    assert_eq!(
        tags_of(&out.batches[0], 0),
        vec![("a".into(), r"\1".into())]
    );
    assert_ne!(out.batches[0].series_id[0], series_id("cpu", &[("a", "1")]));
    // `=` in a measurement needs no escape; `\=` there stays literal.
    let out = p(r"a=b,t=1 v=1");
    assert_eq!(out.batches[0].measurement, "a=b");
    let out = p(r"a\=b v=1");
    assert_eq!(out.batches[0].measurement, r"a\=b");
}

#[test]
fn unicode() {
    let out = p("température,ville=Zürich,capteur=☃ valeur=21.5,note=\"très chaud ☀\"");
    let b = &out.batches[0];
    assert_eq!(b.measurement, "température");
    assert_eq!(b.series_id[0], 0x742980aa3508f840);
    assert_eq!(strings(b, "note"), vec![Some("très chaud ☀".into())]);
}

#[test]
fn unsorted_and_sorted_tags_are_one_series() {
    let out = p("cpu,b=2,a=1 v=1\ncpu,a=1,b=2 v=2\ncpu,b=2,a=1 v=3\n");
    let b = &out.batches[0];
    assert_eq!(b.series.len(), 1);
    assert!(b.series_id.iter().all(|id| *id == b.series_id[0]));
    assert_eq!(b.series_id[0], series_id("cpu", &[("a", "1"), ("b", "2")]));
}

#[test]
fn parser_ids_match_series_id() {
    let lines = [
        "cpu v=1",
        "cpu,z=1,a=2 v=1",
        r"c\ pu,t\,k=v\ 1 v=1",
        r"cpu,b=x\=y,a=\\ v=1",
        r"cpu,a=\\\,z v=1",
        r"cpu,a=x\y,b=C:\x v=1",
        r"cpu,b=C:\\ v=1",
        "cpu,ü=1,u=2,é=3 v=1",
        r"m\=x,k=v v=1",
        "m,k1=v,k10=v,k2=v v=1",
        r"m,k\ 1=v,k=v v=1",
    ];
    for line in lines {
        let out = p(line);
        assert!(out.errors.is_empty(), "{line}: {:?}", out.errors);
        let b = &out.batches[0];
        assert_eq!(b.series_id[0], id_of(b, 0), "{line}");
        let mut sorted = b.series[0].tags.clone();
        sorted.sort();
        assert_eq!(sorted, b.series[0].tags, "{line}");
    }
}

#[test]
fn parser_reproduces_golden_ids() {
    // A canonical key is itself a valid line-protocol key, so parsing
    // `<key> v=1` must give the pinned id (except for duplicate tag keys,
    // which line protocol rejects).
    for (m, tags, key, id) in crate::series::tests::GOLDEN {
        let line = format!("{key} v=1");
        let out = p(&line);
        let dup = tags
            .iter()
            .any(|(k, _)| tags.iter().filter(|(k2, _)| k2 == k).count() > 1);
        if dup {
            assert_eq!(out.errors[0].kind, LineErrorKind::DuplicateTags);
            continue;
        }
        assert!(out.errors.is_empty(), "{line}: {:?}", out.errors);
        let b = &out.batches[0];
        assert_eq!(b.measurement, *m);
        assert_eq!(b.series_id[0], *id, "{line}");
        // Shuffled tag order: same id.
        let mut shuffled: Vec<String> = key.split(',').map(str::to_owned).collect();
        if shuffled.len() > 2 && !key.contains('\\') {
            shuffled[1..].reverse();
            let out = p(&format!("{} v=1", shuffled.join(",")));
            assert_eq!(out.batches[0].series_id[0], *id, "{shuffled:?}");
        }
    }
}

#[test]
fn duplicate_fields_last_wins() {
    let out = p("m a=1,b=2,a=3\nm a=4");
    let b = &out.batches[0];
    assert_eq!(floats(b, "a"), vec![Some(3.0), Some(4.0)]);
    assert_eq!(floats(b, "b"), vec![Some(2.0), None]);
    let out = p("m n=\"x\",n=\"y\"");
    assert_eq!(strings(&out.batches[0], "n"), vec![Some("y".into())]);
}

#[test]
fn timestamps_and_precision() {
    let body = "m v=1 1\nm v=1 -5\nm v=1\n";
    let out = parse(
        body.as_bytes(),
        &ParseOptions::new(Precision::Second, NOW),
        &NoSchema,
    );
    let b = &out.batches[0];
    assert_eq!(
        b.time_ns,
        vec![1_000_000_000, -5_000_000_000, 1_700_000_000_000_000_000]
    );
    let out = p("m v=1 9223372036854775806\nm v=1 -9223372036854775806");
    assert_eq!(out.points, 2);
    assert_eq!(
        kind("m v=1 9223372036854775807"),
        LineErrorKind::TimestampOutOfRange
    );
    assert_eq!(
        kind("m v=1 -9223372036854775807"),
        LineErrorKind::TimestampOutOfRange
    );
    assert_eq!(
        kind("m v=1 99999999999999999999"),
        LineErrorKind::TimestampOutOfRange
    );
    let out = parse(
        b"m v=1 9223372036854775",
        &ParseOptions::new(Precision::Millisecond, 0),
        &NoSchema,
    );
    assert_eq!(out.errors[0].kind, LineErrorKind::TimestampOutOfRange);
    for bad in ["m v=1 12a", "m v=1 1.5", "m v=1 +1", "m v=1 1 2", "m v=1 -"] {
        assert_eq!(kind(bad), LineErrorKind::BadTimestamp, "{bad}");
    }
}

#[test]
fn whitespace_comments_and_crlf() {
    let body = "# comment\n\n   \n  cpu v=1 10\r\n\tcpu v=2\r\ncpu  v=3   20  \r\n# end";
    let out = p(body);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let b = &out.batches[0];
    assert_eq!(b.time_ns, vec![10, NOW, 20]);
    assert_eq!(b.line, vec![4, 5, 6]);
    assert_eq!(p("").points, 0);
    assert_eq!(p("\n\n").errors.len(), 0);
}

#[test]
fn multiline_strings_keep_line_numbers() {
    let body = "m s=\"a\nb\" 1\nm s=\"c\"\nbad\n";
    let out = p(body);
    let b = &out.batches[0];
    assert_eq!(strings(b, "s"), vec![Some("a\nb".into()), Some("c".into())]);
    assert_eq!(b.line, vec![1, 3]);
    assert_eq!(out.errors.len(), 1);
    assert_eq!(out.errors[0].line, 4);
    // An error after a multi-line string skips the whole logical line.
    let out = p("m s=\"a\nb\",x=bogus\nm v=1\n");
    assert_eq!(out.errors.len(), 1);
    assert_eq!(out.errors[0].line, 1);
    assert_eq!(out.batches[0].line, vec![3]);
}

#[test]
fn unterminated_string_does_not_swallow_the_body() {
    let out = p("m s=\"oops\nm v=1\nm v=2\n");
    assert_eq!(out.errors.len(), 1);
    assert_eq!(out.errors[0].kind, LineErrorKind::UnterminatedString);
    assert_eq!(out.points, 2);
    assert_eq!(out.batches[0].line, vec![2, 3]);
}

#[test]
fn structural_errors() {
    use LineErrorKind::*;
    let cases: &[(&str, LineErrorKind)] = &[
        ("cpu", MissingFields),
        ("cpu ", MissingFields),
        ("cpu,host=a", MissingFields),
        ("cpu,host=a  \r", MissingFields),
        (",host=a v=1", MissingMeasurement),
        ("cpu,=a v=1", MissingTagKey),
        ("cpu, v=1", MissingTagKey),
        ("cpu,host= v=1", MissingTagValue),
        ("cpu,host v=1", MissingTagValue),
        ("cpu,a=b=c v=1", InvalidTagFormat),
        ("cpu,a=1,a=2 v=1", DuplicateTags),
        ("cpu,b=1,a=2,b=3 v=1", DuplicateTags),
        ("cpu =1", MissingFieldKey),
        ("cpu v=1,", MissingFieldKey),
        ("cpu v=1,=2", MissingFieldKey),
        ("cpu v", InvalidField { field: "v".into() }),
        ("cpu v,w=1", InvalidField { field: "v".into() }),
        ("cpu v=\"x\"y", InvalidField { field: "v".into() }),
        (
            "cpu a=1,b\\ c",
            InvalidField {
                field: "b c".into(),
            },
        ),
        ("cpu v=", MissingFieldValue { field: "v".into() }),
        ("cpu v=,w=1", MissingFieldValue { field: "v".into() }),
        ("cpu v=1.2.3", BadNumber { field: "v".into() }),
        ("cpu v=abc", BadNumber { field: "v".into() }),
        ("cpu v=NaN", BadNumber { field: "v".into() }),
        ("cpu v=-Inf", BadNumber { field: "v".into() }),
        ("cpu v=inf", BadNumber { field: "v".into() }),
        ("cpu v=1e999", NonFiniteFloat { field: "v".into() }),
        (
            "cpu v=9223372036854775808i",
            IntegerOutOfRange { field: "v".into() },
        ),
        ("cpu v=-1u", BadNumber { field: "v".into() }),
        ("cpu v=tru", InvalidBoolean { field: "v".into() }),
        ("cpu v=\"abc", UnterminatedString),
        (
            "cpu,time=1 v=1",
            ReservedTagKey {
                measurement: "cpu".into(),
            },
        ),
        (
            "cpu time=1",
            ReservedFieldKey {
                measurement: "cpu".into(),
            },
        ),
        (
            "cpu v=1,time=1",
            ReservedFieldKey {
                measurement: "cpu".into(),
            },
        ),
    ];
    for (line, want) in cases {
        assert_eq!(&kind(line), want, "{line:?}");
    }
}

#[test]
fn invalid_utf8_is_rejected_per_line() {
    for body in [
        &b"c\xffpu v=1\nok v=1"[..],
        b"cpu,h=\xff v=1\nok v=1",
        b"cpu f\xff=1\nok v=1",
        b"cpu f=\"\xc3\"\nok v=1",
    ] {
        let out = parse(body, &opts(), &NoSchema);
        assert_eq!(out.errors.len(), 1, "{body:?}");
        assert_eq!(out.errors[0].kind, LineErrorKind::InvalidUtf8);
        assert_eq!(out.points, 1);
        assert!(out.errors[0].excerpt.contains('\u{fffd}'));
    }
}

#[test]
fn error_display_and_excerpt() {
    let out = p("cpu v=1\ncpu v=oops 1\n");
    let e = &out.errors[0];
    assert_eq!(e.line, 2);
    assert_eq!(
        e.to_string(),
        "unable to parse 'cpu v=oops 1': invalid number (line 2)"
    );
    let long = format!("cpu v={}", "x".repeat(1000));
    let e = only_error(&long);
    assert_eq!(e.excerpt.len(), 256);
    let too_long_key = format!("cpu,t={} v=1", "x".repeat(MAX_KEY_LEN));
    assert!(matches!(
        kind(&too_long_key),
        LineErrorKind::KeyTooLong { .. }
    ));
}

#[test]
fn type_conflicts_within_body() {
    let body = "m f=1\nm f=1i\nm f=\"s\"\nm f=2,g=1i\nm g=1\n";
    let out = p(body);
    assert_eq!(out.points, 2);
    assert_eq!(out.errors.len(), 3);
    assert_eq!(
        out.errors[0].to_string(),
        "field type conflict: input field \"f\" on measurement \"m\" is type integer, already exists as type float (line 2)"
    );
    assert_eq!(out.errors[1].line, 3);
    assert_eq!(out.errors[2].line, 5);
    let b = &out.batches[0];
    assert_eq!(floats(b, "f"), vec![Some(1.0), Some(2.0)]);
    assert_eq!(b.line, vec![1, 4]);
}

#[test]
fn rejected_line_registers_nothing() {
    // Line 1 would make `f` an integer but is rejected for its timestamp,
    // so line 2 defines `f` as float; its series and measurement only
    // appear through accepted lines.
    let out = p("m,h=a f=1i bad\nm,h=b f=1.5\nx v=1 bad\n");
    assert_eq!(out.points, 1);
    assert_eq!(out.batches.len(), 1);
    let b = &out.batches[0];
    assert_eq!(b.field_type("f"), Some(FieldType::Float));
    assert_eq!(b.series.len(), 1);
    assert_eq!(tags_of(b, 0), vec![("h".into(), "b".into())]);
    // A rejected line adds no column.
    let out = p("m a=1\nm b=1,c=oops\n");
    assert!(out.batches[0].field("b").is_none());
}

#[test]
fn schema_conflicts() {
    let mut schema: HashMap<String, HashMap<String, FieldType>> = HashMap::new();
    schema
        .entry("m".into())
        .or_default()
        .insert("f".into(), FieldType::Integer);
    let out = parse(b"m f=1.5\nm f=2i\nother f=1.5\n", &opts(), &schema);
    assert_eq!(out.points, 2);
    assert_eq!(out.errors.len(), 1);
    assert_eq!(
        out.errors[0].kind,
        LineErrorKind::FieldTypeConflict {
            field: "f".into(),
            measurement: "m".into(),
            existing: FieldType::Integer,
            input: FieldType::Float,
        }
    );
}

#[test]
fn same_series_different_spelling_is_one_def() {
    let out = p("cpu,b=1,a=2 v=1\ncpu,a=2,b=1 v=2\n");
    assert_eq!(out.batches[0].series.len(), 1);
}

#[test]
fn many_columns_and_series_stay_consistent() {
    let mut body = String::new();
    for i in 0..500 {
        body.push_str(&format!(
            "m,host=h{},dc=d{} f{}={}i,common={}\n",
            i % 37,
            i % 5,
            i % 13,
            i,
            i
        ));
    }
    let out = p(&body);
    assert_eq!(out.points, 500);
    let b = &out.batches[0];
    assert_eq!(b.fields.len(), 14);
    for row in 0..b.len() {
        assert_eq!(b.series_id[row], id_of(b, row));
    }
    let f3 = b.field("f3").unwrap();
    assert_eq!(f3.valid.iter().filter(|v| **v).count(), 39);
}

/// Deterministic xorshift for fuzz-style tests without extra dependencies.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn never_panics_on_garbage() {
    let alphabet = b"cpu,= \\\"\n\r\tif0123.e-+#tTuxy\xc3\xa9\xff";
    let mut seed = 0x1234_5678_9abc_def1;
    for _ in 0..3000 {
        let len = (rng(&mut seed) % 80) as usize;
        let body: Vec<u8> = (0..len)
            .map(|_| alphabet[(rng(&mut seed) % alphabet.len() as u64) as usize])
            .collect();
        let out = parse(&body, &opts(), &NoSchema);
        let rows: usize = out.batches.iter().map(MeasurementBatch::len).sum();
        assert_eq!(rows, out.points);
        for b in &out.batches {
            b.validate().unwrap();
            for row in 0..b.len() {
                assert_eq!(b.series_id[row], id_of(b, row), "{body:?}");
            }
        }
    }
}

#[test]
fn mutated_valid_lines_never_panic() {
    let base = format!("{TELEGRAF}\nm\\ x,t\\=k=v\\,1 s=\"a\\\"b\",i=1i,u=2u,b=T 5\n");
    let mut seed = 42;
    for _ in 0..3000 {
        let mut body = base.clone().into_bytes();
        for _ in 0..(rng(&mut seed) % 4 + 1) {
            let i = (rng(&mut seed) % body.len() as u64) as usize;
            match rng(&mut seed) % 3 {
                0 => body[i] = (rng(&mut seed) & 0xff) as u8,
                1 => {
                    body.remove(i);
                }
                _ => body.insert(i, b"\\\" ,=\n"[(rng(&mut seed) % 6) as usize]),
            }
            if body.is_empty() {
                break;
            }
        }
        let out = parse(&body, &opts(), &NoSchema);
        for b in &out.batches {
            b.validate().unwrap();
            for row in 0..b.len() {
                assert_eq!(b.series_id[row], id_of(b, row));
            }
        }
    }
}

/// Rough speed check; run with
/// `cargo test -p sluice-core --release -- --ignored --nocapture perf`.
#[test]
#[ignore]
fn perf_telegraf_lines() {
    let series: usize = std::env::var("PERF_SERIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    let mut body = String::new();
    for i in 0..100_000usize {
        body.push_str(&format!(
            "cpu,host=server{:02},region=us-west usage_user={}.5,usage_system=0.2,usage_idle=99.1,usage_iowait=0.0,usage_steal=0.0 {}\n",
            i % series,
            i % 100,
            1_700_000_000_000_000_000i64 + i as i64
        ));
    }
    let mut best = f64::MAX;
    for _ in 0..10 {
        let t = std::time::Instant::now();
        let out = parse(body.as_bytes(), &opts(), &NoSchema);
        let ns = t.elapsed().as_nanos() as f64 / out.points as f64;
        assert_eq!(out.points, 100_000);
        best = best.min(ns);
    }
    println!("best {best:.1} ns/point");
}

/// A schema that has recorded some series keys, as the server's catalog does.
struct KnownKeys(HashMap<&'static [u8], u64>);

impl SchemaLookup for KnownKeys {
    fn field_type(&self, _: &str, _: &str) -> Option<FieldType> {
        None
    }
    fn known_series(&self, raw_key: &[u8], hash: KeyHash) -> Option<u64> {
        assert_eq!(hash, KeyHash::of(raw_key));
        self.0.get(raw_key).copied()
    }
}

#[test]
fn new_keys_point_at_their_bytes_and_carry_their_ids() {
    let body = "cpu,host=a v=1 1\ncpu,host=b v=2 2\ncpu,host=a v=3 3\nmem v=4 4\n";
    let out = p(body);
    let keys: Vec<(&str, u64)> = out
        .new_keys
        .iter()
        .map(|k| (&body[k.start..k.start + k.len], k.id))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("cpu,host=a", series_id("cpu", &[("host", "a")])),
            ("cpu,host=b", series_id("cpu", &[("host", "b")])),
            ("mem", series_id("mem", &[])),
        ]
    );
}

#[test]
fn a_known_key_gets_the_schema_id_and_no_series_definition() {
    let known = KnownKeys(HashMap::from([(&b"cpu,host=a"[..], 4242u64)]));
    let body = "cpu,host=a v=1 1\ncpu,host=b v=2 2\ncpu,host=a v=3 3\n";
    let out = parse(body.as_bytes(), &opts(), &known);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let b = out.batch("cpu").unwrap();
    b.validate().unwrap();
    let b_id = series_id("cpu", &[("host", "b")]);
    assert_eq!(b.series_id, vec![4242, b_id, 4242]);
    // Only the unknown series is defined (and would be claimed and recorded).
    assert_eq!(
        b.series.iter().map(|s| s.id).collect::<Vec<_>>(),
        vec![b_id]
    );
    assert_eq!(out.new_keys.len(), 1);
    assert_eq!(out.new_keys[0].id, b_id);
    // Escaped keys are looked up exactly as written.
    let known = KnownKeys(HashMap::from([(&br"my\ cpu,host=a\,b"[..], 7u64)]));
    let out = parse(br"my\ cpu,host=a\,b v=1 1".as_slice(), &opts(), &known);
    let b = out.batch("my cpu").unwrap();
    assert_eq!(b.series_id, vec![7]);
    assert!(b.series.is_empty() && out.new_keys.is_empty());
}

#[test]
fn body_limits_reject_only_the_lines_past_them() {
    let limited = |body: &str, f: &dyn Fn(&mut ParseOptions)| {
        let mut o = opts();
        f(&mut o);
        parse(body.as_bytes(), &o, &NoSchema)
    };
    // A series whose only line failed does not use up the limit.
    let out = limited("m,h=a v=oops\nm,h=b v=1\nm,h=c v=1", &|o| {
        o.max_new_series = 1
    });
    assert_eq!(out.points, 1);
    assert_eq!(out.rejected, 1, "{:?}", out.errors);
    assert_eq!(out.series_limited, 1);
    // ...but it is still new when a later line of it is accepted: the limit holds then.
    let out = limited("m,h=a v=oops\nm,h=b v=1\nm,h=a v=2\nm,h=b v=3", &|o| {
        o.max_new_series = 1
    });
    assert_eq!(out.points, 2, "{:?}", out.errors);
    assert_eq!(out.batches[0].series.len(), 1);
    let out = limited("m a=1\nm b=1\nm c=1", &|o| o.max_fields = 2);
    assert_eq!(out.points, 2);
    assert!(matches!(
        out.errors[0].kind,
        LineErrorKind::TooManyFields { limit: 2, .. }
    ));
    let out = limited("a v=1\nb v=1", &|o| o.max_measurements = 1);
    assert_eq!(out.points, 1);
    let out = limited("m,a=1,b=2 v=1\nm,a=1 v=1", &|o| o.max_tags = 1);
    assert_eq!(out.points, 1);
    assert!(matches!(
        out.errors[0].kind,
        LineErrorKind::TooManyTags { count: 2, limit: 1 }
    ));
}

#[test]
fn errors_are_counted_past_the_kept_ones() {
    let body = "x\n".repeat(1000) + "m v=1i\nm v=1.5\n";
    let out = p(&body);
    assert_eq!(out.rejected, 1001);
    // The first 100, and the schema error (a type conflict) wherever it came.
    assert_eq!(out.errors.len(), crate::body::MAX_KEPT_ERRORS + 1);
    assert!(out.errors.last().is_some_and(|e| e.kind.is_schema_error()));
}

#[test]
fn a_nul_in_a_name_is_refused_for_its_line() {
    let out = p("c\0pu v=1\ncpu f\0=1\ncpu v=2");
    assert_eq!(out.points, 1);
    assert_eq!(out.rejected, 2);
    assert!(out
        .errors
        .iter()
        .all(|e| matches!(e.kind, LineErrorKind::InvalidName { .. })));
}

#[test]
fn ids_clustered_by_a_tag_take_its_unescaped_value() {
    let mut o = opts();
    o.cluster_tag = Some("region".into());
    // Sorted, unsorted and escaped keys take the three paths to an id.
    let body = "cpu,host=a,region=eu v=1 1\n\
                cpu,region=eu,host=b v=1 1\n\
                cpu,host=c,region=e\\ u v=1 1\n\
                cpu,host=d v=1 1\n\
                disk,region=eu v=1 1\n";
    let out = parse(body.as_bytes(), &o, &NoSchema);
    assert_eq!(out.points, 5);
    let mut ids = HashMap::new();
    for b in &out.batches {
        for s in &b.series {
            assert_eq!(s.id, s.expected_id(&b.measurement, Some("region")));
            ids.insert(format!("{}{:?}", b.measurement, s.tags), s.id);
        }
    }
    let top = |k: &str| ids[k] >> 48;
    let eu = top(r#"cpu[("host", "a"), ("region", "eu")]"#);
    assert_eq!(top(r#"cpu[("host", "b"), ("region", "eu")]"#), eu);
    assert_eq!(top(r#"disk[("region", "eu")]"#), eu);
    assert_ne!(top(r#"cpu[("host", "c"), ("region", "e u")]"#), eu);
    // A series without the tag keeps its plain id.
    assert_eq!(
        ids[r#"cpu[("host", "d")]"#],
        series_id("cpu", &[("host", "d")])
    );
}

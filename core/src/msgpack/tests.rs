use super::*;
use crate::body::NoSchema;
use crate::line_error::Origin;
use crate::precision::Precision;
use rmp::encode as enc;
use std::collections::HashMap;

/// Test value for building bodies.
#[derive(Clone)]
enum V {
    Nil,
    B(bool),
    I(i64),
    U(u64),
    F(f64),
    S(&'static str),
}

fn put(buf: &mut Vec<u8>, v: &V) {
    match v {
        V::Nil => enc::write_nil(buf).unwrap(),
        V::B(b) => enc::write_bool(buf, *b).unwrap(),
        V::I(i) => {
            enc::write_sint(buf, *i).unwrap();
        }
        V::U(u) => {
            enc::write_uint(buf, *u).unwrap();
        }
        V::F(f) => enc::write_f64(buf, *f).unwrap(),
        V::S(s) => enc::write_str(buf, s).unwrap(),
    }
}

struct Obj {
    measurement: Option<&'static str>,
    tags: Vec<(&'static str, &'static str)>,
    times: Option<Vec<i64>>,
    fields: Option<Vec<(&'static str, Vec<V>)>>,
}

fn obj(m: &'static str, times: &[i64], fields: Vec<(&'static str, Vec<V>)>) -> Obj {
    Obj {
        measurement: Some(m),
        tags: vec![],
        times: Some(times.to_vec()),
        fields: Some(fields),
    }
}

impl Obj {
    fn tags(mut self, tags: &[(&'static str, &'static str)]) -> Self {
        self.tags = tags.to_vec();
        self
    }

    fn encode(&self, buf: &mut Vec<u8>) {
        let n = 1
            + u32::from(self.measurement.is_some())
            + u32::from(self.times.is_some())
            + u32::from(self.fields.is_some());
        enc::write_map_len(buf, n).unwrap();
        if let Some(m) = self.measurement {
            enc::write_str(buf, "measurement").unwrap();
            enc::write_str(buf, m).unwrap();
        }
        enc::write_str(buf, "tags").unwrap();
        enc::write_map_len(buf, self.tags.len() as u32).unwrap();
        for (k, v) in &self.tags {
            enc::write_str(buf, k).unwrap();
            enc::write_str(buf, v).unwrap();
        }
        if let Some(times) = &self.times {
            enc::write_str(buf, "timestamps").unwrap();
            enc::write_array_len(buf, times.len() as u32).unwrap();
            for t in times {
                enc::write_sint(buf, *t).unwrap();
            }
        }
        if let Some(fields) = &self.fields {
            enc::write_str(buf, "fields").unwrap();
            enc::write_map_len(buf, fields.len() as u32).unwrap();
            for (name, values) in fields {
                enc::write_str(buf, name).unwrap();
                enc::write_array_len(buf, values.len() as u32).unwrap();
                for v in values {
                    put(buf, v);
                }
            }
        }
    }
}

fn array(objs: &[Obj]) -> Vec<u8> {
    let mut buf = Vec::new();
    enc::write_array_len(&mut buf, objs.len() as u32).unwrap();
    for o in objs {
        o.encode(&mut buf);
    }
    buf
}

fn opts() -> ParseOptions {
    ParseOptions::new(Precision::Nanosecond, 0)
}

fn dec(body: &[u8]) -> ParsedBody {
    dec_with(body, &NoSchema)
}

fn dec_with(body: &[u8], schema: &dyn SchemaLookup) -> ParsedBody {
    let out = decode(body, &opts(), schema);
    for b in &out.batches {
        b.validate().unwrap();
    }
    out
}

fn one_error(objs: &[Obj]) -> LineErrorKind {
    let out = dec(&array(objs));
    assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
    out.errors[0].kind.clone()
}

#[test]
fn decodes_columns_with_nulls() {
    let body = array(&[
        obj(
            "cpu",
            &[10, 20, 30],
            vec![
                ("f", vec![V::F(0.5), V::Nil, V::F(2.0)]),
                ("i", vec![V::I(-1), V::I(2), V::Nil]),
                ("s", vec![V::S("a"), V::S(""), V::S("ü")]),
                ("b", vec![V::B(true), V::Nil, V::B(false)]),
            ],
        )
        .tags(&[("region", "eu"), ("host", "h1")]),
        obj("cpu", &[40], vec![("f", vec![V::F(4.0)])]).tags(&[("host", "h2")]),
    ]);
    let out = dec(&body);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(out.points, 4);
    let b = &out.batches[0];
    assert_eq!(b.time_ns, vec![10, 20, 30, 40]);
    assert_eq!(b.line, vec![1, 1, 1, 2]);
    let f = b.field("f").unwrap();
    assert_eq!(f.values, ColumnValues::Float(vec![0.5, 0.0, 2.0, 4.0]));
    assert_eq!(f.valid, vec![true, false, true, true]);
    let i = b.field("i").unwrap();
    assert_eq!(i.values, ColumnValues::Integer(vec![-1, 2, 0, 0]));
    assert_eq!(i.valid, vec![true, true, false, false]);
    let ColumnValues::String(s) = &b.field("s").unwrap().values else {
        panic!()
    };
    assert_eq!(
        (s.get(0), s.get(1), s.get(2)),
        (Some("a"), Some(""), Some("ü"))
    );
    assert_eq!(b.field("s").unwrap().valid, vec![true, true, true, false]);
    assert_eq!(b.series.len(), 2);
    assert_eq!(
        b.series_id[0],
        series::series_id("cpu", &[("host", "h1"), ("region", "eu")])
    );
    assert_eq!(
        b.series[0].tags,
        vec![("host".into(), "h1".into()), ("region".into(), "eu".into())]
    );
    assert_eq!(b.series_id[3], series::series_id("cpu", &[("host", "h2")]));
}

#[test]
fn accepts_single_and_concatenated_objects() {
    let mut body = Vec::new();
    obj("a", &[1], vec![("v", vec![V::I(1)])]).encode(&mut body);
    let out = dec(&body);
    assert_eq!(out.points, 1);
    obj("b", &[2], vec![("v", vec![V::I(2)])]).encode(&mut body);
    body.extend(array(&[obj("c", &[3], vec![("v", vec![V::I(3)])])]));
    let out = dec(&body);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(out.points, 3);
    assert_eq!(out.batches.len(), 3);
    assert_eq!(out.batch("c").unwrap().line, vec![3]);
    assert_eq!(dec(&[]).points, 0);
}

#[test]
fn integer_rule() {
    // Non-negative ints (whatever marker) go to Integer.
    let out = dec(&array(&[obj(
        "m",
        &[1, 2],
        vec![("v", vec![V::U(5), V::I(-5)])],
    )]));
    assert_eq!(out.batches[0].field_type("v"), Some(FieldType::Integer));
    // ... unless the column is UInteger already (schema).
    let mut schema: HashMap<String, HashMap<String, FieldType>> = HashMap::new();
    schema
        .entry("m".into())
        .or_default()
        .insert("u".into(), FieldType::UInteger);
    let out = dec_with(
        &array(&[obj("m", &[1], vec![("u", vec![V::U(5)])])]),
        &schema,
    );
    assert_eq!(
        out.batches[0].field("u").unwrap().values,
        ColumnValues::UInteger(vec![5])
    );
    // ... or earlier in the body.
    let out = dec(&array(&[
        obj("m", &[1], vec![("u", vec![V::U(u64::MAX)])]),
        obj("m", &[2], vec![("u", vec![V::U(7)])]),
        obj("m", &[3], vec![("u", vec![V::I(-1)])]),
    ]));
    assert_eq!(
        out.batches[0].field("u").unwrap().values,
        ColumnValues::UInteger(vec![u64::MAX, 7])
    );
    assert_eq!(out.errors.len(), 1);
    assert_eq!(out.errors[0].line, 3);
    assert!(matches!(
        out.errors[0].kind,
        LineErrorKind::FieldTypeConflict {
            existing: FieldType::UInteger,
            input: FieldType::Integer,
            ..
        }
    ));
    // Floats make the array Float and widen its ints; ints widen into an
    // existing Float column; floats never go into integer columns.
    let out = dec(&array(&[
        obj("m", &[1, 2], vec![("f", vec![V::I(1), V::F(1.5)])]),
        obj("m", &[3], vec![("f", vec![V::I(2)])]),
        obj("m", &[4], vec![("i", vec![V::I(2)])]),
        obj("m", &[5], vec![("i", vec![V::F(2.5)])]),
    ]));
    let b = &out.batches[0];
    assert_eq!(
        b.field("f").unwrap().values,
        ColumnValues::Float(vec![1.0, 1.5, 2.0, 0.0])
    );
    assert_eq!(b.field_type("i"), Some(FieldType::Integer));
    assert_eq!(out.errors.len(), 1);
    assert_eq!(out.errors[0].line, 4);
    // Values beyond i64 and negatives cannot share a column.
    assert!(matches!(
        one_error(&[obj(
            "m",
            &[1, 2],
            vec![("v", vec![V::U(u64::MAX), V::I(-1)])]
        )]),
        LineErrorKind::MixedTypes { .. }
    ));
}

#[test]
fn object_errors_keep_other_objects() {
    use LineErrorKind::*;
    let good = || obj("ok", &[1], vec![("v", vec![V::F(1.0)])]);
    let cases: Vec<(Obj, LineErrorKind)> = vec![
        (
            obj("m", &[1, 2], vec![("v", vec![V::F(1.0)])]),
            FieldLengthMismatch {
                field: "v".into(),
                expected: 2,
                actual: 1,
            },
        ),
        (
            Obj {
                measurement: None,
                ..good()
            },
            MissingKey { key: "measurement" },
        ),
        (
            Obj {
                times: None,
                ..good()
            },
            MissingKey { key: "timestamps" },
        ),
        (
            Obj {
                fields: None,
                ..good()
            },
            MissingKey { key: "fields" },
        ),
        (obj("m", &[1], vec![]), MissingFields),
        (
            obj("", &[1], vec![("v", vec![V::I(1)])]),
            MissingMeasurement,
        ),
        (
            obj("m", &[1, 2], vec![("v", vec![V::I(1), V::S("x")])]),
            MixedTypes { field: "v".into() },
        ),
        (
            obj("m", &[1], vec![("v", vec![V::F(f64::NAN)])]),
            NonFiniteFloat { field: "v".into() },
        ),
        (
            obj("m", &[1], vec![("v", vec![V::F(f64::NEG_INFINITY)])]),
            NonFiniteFloat { field: "v".into() },
        ),
        (
            obj(
                "m",
                &[1, 2],
                vec![("v", vec![V::I(1), V::Nil]), ("w", vec![V::Nil, V::Nil])],
            ),
            EmptyRow { row: 1 },
        ),
        (
            obj("m", &[1], vec![("v", vec![V::I(1)]), ("v", vec![V::I(2)])]),
            DuplicateKey { key: "v".into() },
        ),
        (
            obj("m", &[1], vec![("time", vec![V::I(1)])]),
            ReservedFieldKey {
                measurement: "m".into(),
            },
        ),
        (obj("m", &[1], vec![("", vec![V::I(1)])]), MissingFieldKey),
        (
            good().tags(&[("time", "x")]),
            ReservedTagKey {
                measurement: "ok".into(),
            },
        ),
        (good().tags(&[("a", "")]), MissingTagValue),
        (good().tags(&[("", "x")]), MissingTagKey),
        (good().tags(&[("a", "1"), ("a", "2")]), DuplicateTags),
        (
            obj("m", &[i64::MAX], vec![("v", vec![V::I(1)])]),
            TimestampOutOfRange,
        ),
    ];
    for (bad, want) in cases {
        let out = dec(&array(&[good(), bad, good()]));
        assert_eq!(out.points, 2, "{want:?}: {:?}", out.errors);
        assert_eq!(out.errors.len(), 1, "{want:?}");
        let e = &out.errors[0];
        assert_eq!(e.kind, want);
        assert_eq!((e.line, e.origin), (2, Origin::Object));
        assert!(e.to_string().contains("object 2"), "{e}");
        assert_eq!(out.batch("ok").unwrap().line, vec![1, 3]);
    }
}

#[test]
fn wrong_msgpack_types() {
    let mut body = Vec::new();
    enc::write_array_len(&mut body, 3).unwrap();
    enc::write_str(&mut body, "not a map").unwrap();
    // {"measurement": 5, ...}
    enc::write_map_len(&mut body, 1).unwrap();
    enc::write_str(&mut body, "measurement").unwrap();
    enc::write_sint(&mut body, 5).unwrap();
    // fields value not an array; also an unknown key that is ignored.
    enc::write_map_len(&mut body, 4).unwrap();
    enc::write_str(&mut body, "measurement").unwrap();
    enc::write_str(&mut body, "m").unwrap();
    enc::write_str(&mut body, "extra").unwrap();
    enc::write_array_len(&mut body, 1).unwrap();
    enc::write_map_len(&mut body, 0).unwrap();
    enc::write_str(&mut body, "timestamps").unwrap();
    enc::write_array_len(&mut body, 1).unwrap();
    enc::write_sint(&mut body, 1).unwrap();
    enc::write_str(&mut body, "fields").unwrap();
    enc::write_map_len(&mut body, 1).unwrap();
    enc::write_str(&mut body, "v").unwrap();
    enc::write_sint(&mut body, 1).unwrap();
    let out = dec(&body);
    assert_eq!(out.errors.len(), 3);
    for (i, e) in out.errors.iter().enumerate() {
        assert_eq!(e.line, i + 1);
        assert!(matches!(e.kind, LineErrorKind::WrongType { .. }), "{e}");
    }
    assert_eq!(out.errors[2].excerpt, "m");
    assert!(out.errors[2].to_string().contains("values of field \"v\""));
}

#[test]
fn first_type_wins_across_objects_and_schema() {
    let out = dec(&array(&[
        obj("m", &[1], vec![("v", vec![V::S("x")])]),
        obj("m", &[2], vec![("v", vec![V::B(true)])]),
    ]));
    assert_eq!(out.points, 1);
    assert_eq!(
        out.errors[0].to_string(),
        "field type conflict: input field \"v\" on measurement \"m\" is type boolean, already exists as type string (object 2)"
    );
    let mut schema: HashMap<String, HashMap<String, FieldType>> = HashMap::new();
    schema
        .entry("m".into())
        .or_default()
        .insert("v".into(), FieldType::Boolean);
    let out = dec_with(
        &array(&[obj("m", &[1], vec![("v", vec![V::S("x")])])]),
        &schema,
    );
    assert_eq!(out.points, 0);
    assert_eq!(out.errors.len(), 1);
}

#[test]
fn precision_and_all_nil_fields() {
    let body = array(&[obj(
        "m",
        &[1, 2],
        vec![
            ("v", vec![V::I(1), V::I(2)]),
            ("never", vec![V::Nil, V::Nil]),
        ],
    )]);
    let out = decode(&body, &ParseOptions::new(Precision::Second, 0), &NoSchema);
    let b = &out.batches[0];
    assert_eq!(b.time_ns, vec![1_000_000_000, 2_000_000_000]);
    assert!(b.field("never").is_none());
}

#[test]
fn garbage_after_valid_objects_is_reported_at_the_next_index() {
    let mut body = array(&[
        obj("a", &[1], vec![("v", vec![V::I(1)])]),
        obj("b", &[1], vec![("v", vec![V::I(1)])]),
    ]);
    body.push(0xc1);
    let out = dec(&body);
    assert_eq!(out.points, 2);
    assert_eq!(out.errors.len(), 1);
    assert_eq!(out.errors[0].line, 3);
    assert!(matches!(
        out.errors[0].kind,
        LineErrorKind::MalformedMsgpack { .. }
    ));
    // Truncated inside the second object of an array.
    let body = array(&[
        obj("a", &[1], vec![("v", vec![V::I(1)])]),
        obj("b", &[1], vec![("v", vec![V::I(1)])]),
    ]);
    let out = dec(&body[..body.len() - 1]);
    assert_eq!(out.points, 1);
    assert_eq!(out.errors[0].line, 2);
}

#[test]
fn invalid_utf8_is_an_object_error() {
    let mut body = Vec::new();
    enc::write_map_len(&mut body, 3).unwrap();
    enc::write_str(&mut body, "measurement").unwrap();
    body.extend_from_slice(&[0xa2, 0xff, 0xfe]); // fixstr of invalid UTF-8
    enc::write_str(&mut body, "timestamps").unwrap();
    enc::write_array_len(&mut body, 0).unwrap();
    enc::write_str(&mut body, "fields").unwrap();
    enc::write_map_len(&mut body, 0).unwrap();
    let out = dec(&body);
    assert_eq!(out.errors[0].kind, LineErrorKind::InvalidUtf8);
}

#[test]
fn truncated_and_random_bodies_never_panic() {
    let body = array(&[
        obj(
            "cpu",
            &[1, 2],
            vec![
                ("f", vec![V::F(1.0), V::Nil]),
                ("s", vec![V::S("x"), V::S("y")]),
            ],
        )
        .tags(&[("h", "a")]),
        obj("mem", &[3], vec![("u", vec![V::U(u64::MAX)])]),
    ]);
    assert_eq!(dec(&body).points, 3);
    for cut in 0..body.len() {
        let out = dec(&body[..cut]);
        assert!(out.points < 3, "cut {cut}");
        if cut > 0 {
            assert!(!out.errors.is_empty(), "cut {cut}");
        }
    }
    let mut seed: u64 = 0xDEAD_BEEF;
    for _ in 0..5000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut b = body.clone();
        let i = (seed % b.len() as u64) as usize;
        b[i] = (seed >> 32) as u8;
        if seed & 1 == 0 {
            b.truncate((seed >> 40) as usize % (b.len() + 1));
        }
        let out = dec(&b);
        let rows: usize = out.batches.iter().map(|b| b.len()).sum();
        assert_eq!(rows, out.points);
        let noise: Vec<u8> = (0..(seed % 64)).map(|k| (seed >> (k % 56)) as u8).collect();
        dec(&noise);
    }
}

#[test]
fn ids_clustered_by_a_tag_match_line_protocol() {
    let mut body = Vec::new();
    obj("cpu", &[1], vec![("v", vec![V::I(1)])])
        .tags(&[("region", "eu"), ("host", "h1")])
        .encode(&mut body);
    obj("cpu", &[1], vec![("v", vec![V::I(1)])])
        .tags(&[("host", "h2")])
        .encode(&mut body);
    let mut o = opts();
    o.cluster_tag = Some("region".into());
    let out = decode(&body, &o, &NoSchema);
    let lp = crate::lp::parse(
        b"cpu,host=h1,region=eu v=1i 1\ncpu,host=h2 v=1i 1\n",
        &o,
        &NoSchema,
    );
    assert_eq!(out.batches[0].series_id, lp.batches[0].series_id);
    assert_eq!(
        out.batches[0].series_id[0],
        series::series_id_by("cpu", &[("host", "h1"), ("region", "eu")], Some("region"))
    );
    assert_ne!(
        out.batches[0].series_id[0],
        series::series_id("cpu", &[("host", "h1"), ("region", "eu")])
    );
    assert_eq!(
        out.batches[0].series_id[1],
        series::series_id("cpu", &[("host", "h2")])
    );
}

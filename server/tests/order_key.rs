//! The packed selector keys (`query::order_key`) order rows exactly as the tuples they stand
//! for, in the engine itself: every value of each type at its edges (the smallest and greatest,
//! -0 and 0, times before 1970), ties on either half, and nulls.
//! Its own binary: chDB allows one data path per process.

use chdb_rust::format::OutputFormat;
use sluice_core::config::ServerConfig;
use sluice_core::FieldType;
use sluice_server::engine::Engine;
use sluice_server::query::order_key::{key, Part};

fn rows(engine: &Engine, sql: &str) -> String {
    let out = engine.query(sql, OutputFormat::TabSeparated).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn packed_keys_order_as_their_tuples() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerConfig::default();
    let engine = Engine::open(&dir.path().join("chdb"), 1, 1, &cfg.query).unwrap();
    engine
        .execute(
            "CREATE TABLE m (id UInt64, time DateTime64(9, 'UTC'), f Nullable(Float64), \
             i Nullable(Int64), u Nullable(UInt64), b Nullable(Bool)) ENGINE = MergeTree ORDER BY id",
        )
        .unwrap();
    let floats = [
        "-1.7976931348623157e308",
        "-1e300",
        "-2.5",
        "-1",
        "-5e-324",
        "-0.",
        "0.",
        "5e-324",
        "1e-300",
        "1",
        "2.5",
        "1e300",
        "1.7976931348623157e308",
        "NULL",
    ];
    let ints = [
        "-9223372036854775808",
        "-9223372036854775807",
        "-1",
        "0",
        "1",
        "9223372036854775807",
        "NULL",
    ];
    let uints = [
        "0",
        "1",
        "9223372036854775808",
        "18446744073709551615",
        "NULL",
    ];
    let times = [
        "-1000000000000000000",
        "-1",
        "0",
        "1",
        "1700000000000000000",
    ];
    // Every time with several values of each type, so both halves tie with other rows.
    let mut values = Vec::new();
    let mut id = 0;
    for (n, t) in times.iter().enumerate() {
        for k in 0..floats.len() {
            let (f, i, u) = (
                floats[(k + n) % floats.len()],
                ints[(k * 3 + n) % ints.len()],
                uints[(k + 2 * n) % uints.len()],
            );
            let b = ["true", "false", "NULL"][(k + n) % 3];
            values.push(format!(
                "({id}, fromUnixTimestamp64Nano(toInt64({t}), 'UTC'), {f}, {i}, {u}, {b})"
            ));
            id += 1;
        }
    }
    engine
        .execute(&format!("INSERT INTO m VALUES {}", values.join(", ")))
        .unwrap();
    assert_eq!(
        rows(&engine, "SELECT count() FROM m").trim(),
        id.to_string()
    );

    let order = |k: &str, x: &str| {
        rows(
            &engine,
            &format!("SELECT groupArray(id) FROM (SELECT id FROM m WHERE {x} IS NOT NULL ORDER BY {k}, id)"),
        )
    };
    let mut checked = 0;
    for (x, ty) in [
        ("m.f", FieldType::Float),
        ("m.i", FieldType::Integer),
        ("m.u", FieldType::UInteger),
        ("m.b", FieldType::Boolean),
    ] {
        for desc in [false, true] {
            let time = || Part::Time { desc };
            let t = if desc {
                "-toUnixTimestamp64Nano(m.time)"
            } else {
                "toUnixTimestamp64Nano(m.time)"
            };
            for (packed, tuple) in [
                (key(Part::Value(x, Some(ty)), time()), format!("{x}, {t}")),
                (key(time(), Part::Value(x, Some(ty))), format!("{t}, {x}")),
            ] {
                assert!(packed.starts_with("bitOr("), "{packed}");
                let (a, b) = (order(&packed, x), order(&tuple, x));
                assert!(a.len() > 10, "{a}");
                assert_eq!(a, b, "{packed} against ({tuple})");
                // A null value gives a null key, which the aggregates skip.
                let nulls = rows(
                    &engine,
                    &format!(
                        "SELECT countIf(({packed}) IS NULL) = countIf({x} IS NULL) FROM m AS m"
                    ),
                );
                assert_eq!(nulls.trim(), "1", "{packed}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 16);
    // -0 and 0 compare equal, so they tie on the value and the time decides.
    let tie = rows(
        &engine,
        &format!(
            "SELECT {} = {} FROM (SELECT CAST(-0. AS Nullable(Float64)) AS f, toDateTime64(0, 9, 'UTC') AS time) AS m",
            key(Part::Value("m.f", Some(FieldType::Float)), Part::Time { desc: false }),
            key(Part::Value("0.", Some(FieldType::Float)), Part::Time { desc: false }),
        ),
    );
    assert_eq!(tie.trim(), "1");
}

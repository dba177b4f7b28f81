//! A row's `GROUP BY time` bucket as the engine computes it (`query::buckets::Bucketing::
//! bucket_sql`) is the bucket InfluxDB's rule gives it (`start_of`): for times across and
//! at bucket edges, with offsets, and for ranges before and after 1970.
//! Its own binary: chDB allows one data path per process.

use chdb_rust::format::OutputFormat;
use sluice_core::config::ServerConfig;
use sluice_server::engine::Engine;
use sluice_server::query::buckets::Bucketing;

#[test]
fn each_rows_bucket_in_the_engine_is_its_bucket_by_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerConfig::default();
    let engine = Engine::open(&dir.path().join("chdb"), 1, 1, &cfg.query).unwrap();
    let minute = 60_000_000_000_i64;
    for (min, offset) in [
        (1_795_955_940_000_000_001_i64, 0_i64),
        (1_795_955_940_000_000_000, 15_000_000_000),
        (1_795_955_999_999_999_999, -7_000_000_000),
        (59_999_999_999, 0),
        (-90_000_000_000, 20_000_000_000),
    ] {
        let b = Bucketing {
            every: minute,
            offset: offset.rem_euclid(minute),
            min: Some(min),
            max: min + 100 * minute,
            zone: None,
        };
        // Times from the range's start on, a few nanoseconds either side of each edge too.
        let sql = format!(
            "SELECT toUnixTimestamp64Nano(m.time), {} FROM (SELECT fromUnixTimestamp64Nano(toInt64({min} + number * 7919000001 + (number % 3))) AS time FROM numbers(800)) AS m",
            b.bucket_sql()
        );
        let out = engine.query(&sql, OutputFormat::TabSeparated).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut rows = 0;
        for line in text.lines() {
            let (t, bucket) = line.split_once('\t').unwrap();
            let (t, bucket): (i64, i64) = (t.parse().unwrap(), bucket.parse().unwrap());
            assert!(t >= min);
            assert_eq!(
                bucket,
                b.start_of(t),
                "time {t}, range from {min}, offset {offset}"
            );
            rows += 1;
        }
        assert_eq!(rows, 800);
    }
}

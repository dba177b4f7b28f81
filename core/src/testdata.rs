//! The line-protocol payload the benchmarks measure, in one place so every benchmark parses
//! the same bytes: Telegraf's `cpu` shape with three tags and five float fields.

use crate::body::{ParsedBody, SchemaLookup};
use crate::fasthash::{KeyHash, KeyHashMap};
use crate::FieldType;

/// A schema that knows the series keys one parse resolved, as the server remembers the keys
/// of recorded series: parsing the same body again with it measures the steady state.
pub struct KnownKeys(KeyHashMap<u64>);

impl KnownKeys {
    /// The keys that `parsed` resolved.
    pub fn of(parsed: &ParsedBody) -> Self {
        KnownKeys(parsed.new_keys.iter().map(|k| (k.hash, k.id)).collect())
    }
}

impl SchemaLookup for KnownKeys {
    fn field_type(&self, _: &str, _: &str) -> Option<FieldType> {
        None
    }
    fn known_series(&self, _raw_key: &[u8], hash: KeyHash) -> Option<u64> {
        self.0.get(&hash).copied()
    }
}

/// `cpu,dc=dcD,host=host-N,region=rR usage_user=..,usage_system=..,usage_idle=..,usage_iowait=..,usage_steal=.. TS`,
/// `points` lines cycling through `series` hosts, one second apart per round from `t0` (ns).
pub fn cpu_body(points: usize, series: usize, t0: i64) -> String {
    use std::fmt::Write;
    let series = series.max(1);
    let mut s = String::with_capacity(points * 140);
    for i in 0..points {
        let h = i % series;
        let ts = t0 + (i / series) as i64 * 1_000_000_000;
        let f = (i % 997) as f64 / 10.0;
        let _ = writeln!(
            s,
            "cpu,dc=dc{},host=host-{h},region=r{} usage_user={f},usage_system={},usage_idle={},usage_iowait={},usage_steal={} {ts}",
            h % 4,
            h % 16,
            f / 2.0,
            100.0 - f,
            f / 10.0,
            f / 100.0
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{lp, NoSchema, ParseOptions, Precision};

    #[test]
    fn the_body_parses_into_the_promised_shape() {
        let body = cpu_body(1000, 100, 1_700_000_000_000_000_000);
        let out = lp::parse(
            body.as_bytes(),
            &ParseOptions::new(Precision::Nanosecond, 0),
            &NoSchema,
        );
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert_eq!(out.points, 1000);
        let b = out.batch("cpu").unwrap();
        assert_eq!(b.series.len(), 100);
        assert_eq!(b.fields.len(), 5);
        // Parsed again with the keys it resolved, no series is new.
        let known = KnownKeys::of(&out);
        let again = lp::parse(
            body.as_bytes(),
            &ParseOptions::new(Precision::Nanosecond, 0),
            &known,
        );
        assert!(again.new_keys.is_empty());
        assert_eq!(again.batch("cpu").unwrap().series_id, b.series_id);
    }
}

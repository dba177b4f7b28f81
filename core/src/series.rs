//! Series identity: the stable 64-bit id of a (measurement, tag set).
//!
//! # Contract
//!
//! This is a storage compatibility contract: ids are persisted, so the
//! function below must give the same answer in every process and every
//! version of sluice. Changing it requires a data migration.
//!
//! ```text
//! series_id(measurement, tags) = XXH3_64(seed = 0, canonical_key(measurement, tags))
//! ```
//!
//! A server configured with a clustering tag `T` (`series.cluster_tag`) makes the id of a
//! series that has tag `T` with value `v` from both:
//!
//! ```text
//! clustered = (XXH3_64(seed = 0, v) & 0xFFFF_0000_0000_0000)
//!           | (series_id(measurement, tags) & 0x0000_FFFF_FFFF_FFFF)
//! ```
//!
//! Tables are ordered by `(series_id, time)`, so the series sharing a value of `T` lie
//! together and a read of one value (one region of ten) opens only its granules instead of
//! nearly all of them. A series without `T` keeps the plain id. The rule is fixed for a
//! data directory's life (the server refuses to start under another one): under two rules
//! one series would have two ids.
//!
//! `canonical_key` is the UTF-8 byte string built from the *unescaped*
//! measurement and tags (i.e. the values as stored, not as written on the
//! wire):
//!
//! 1. the measurement, with a backslash inserted before every `,` and every
//!    space (U+0020);
//! 2. the tags, sorted by key bytes, then by value bytes for equal keys
//!    (plain byte-wise comparison of UTF-8, no Unicode normalisation, no
//!    case folding); duplicates are kept as given;
//! 3. for each tag: `,` + key + `=` + value, where key and value have a
//!    backslash inserted before every `,`, `=` and space.
//!
//! Nothing else is escaped: backslashes, quotes, tabs, newlines and non-ASCII
//! characters are copied verbatim. An empty tag set gives just the escaped
//! measurement.
//!
//! So the key is exactly the InfluxDB line-protocol series key with tags in
//! sorted order: `cpu,b=2,a=1` and `cpu,a=1,b=2` both have key `cpu,a=1,b=2`,
//! and for the common case (no characters needing escapes, tags already
//! sorted) the raw bytes of a line's key section *are* the canonical key,
//! which lets the parser hash them without copying.
//!
//! # Backslashes
//!
//! In line protocol a backslash before a non-special character is literal
//! (InfluxDB 1.8), so `cpu,a=\1` has tag value `\1` (two characters), a
//! different series from `cpu,a=1`; its canonical key is `cpu,a=\1`. See
//! [`crate::escape`] for the exact unescaping rule.
//!
//! Because backslashes themselves are not escaped, the key is unambiguous
//! for every string the line-protocol parser can produce (each backslash in
//! them pairs with a following non-special character), but not for
//! arbitrary strings from other inputs (msgpack): e.g. tags
//! `{a: "x\", "b\": "c"}` and `{a: "x,b=c"}` both give `m,a=x\,b\=c`. That
//! needs a tag value or key ending in a backslash next to a crafted
//! neighbour; we accept it rather than diverge from the line-protocol form.

use crate::escape::{escape_into, EscapeSet};
use xxhash_rust::xxh3::xxh3_64;

/// The canonical series key of `measurement` and `tags` (see module docs).
pub fn canonical_key(measurement: &str, tags: &[(&str, &str)]) -> String {
    let mut sorted: Vec<(&str, &str)> = tags.to_vec();
    sort_tags(&mut sorted);
    let mut out = Vec::with_capacity(key_capacity(measurement, &sorted));
    write_canonical_key(measurement, sorted.iter().copied(), &mut out);
    // Escaping only inserts ASCII backslashes before ASCII bytes, so the
    // result is valid UTF-8; the lossy path is never taken.
    match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// The series id of `measurement` and `tags` (see module docs).
pub fn series_id(measurement: &str, tags: &[(&str, &str)]) -> u64 {
    id_of_canonical_key(canonical_key(measurement, tags).as_bytes())
}

/// Hashes an already canonical key. Exposed so callers holding a key (e.g.
/// from storage) need not rebuild it.
#[inline]
pub fn id_of_canonical_key(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// Bits of a clustered id that come from the clustering tag's value.
pub const CLUSTER_BITS: u32 = 16;
const OWN_BITS_MASK: u64 = u64::MAX >> CLUSTER_BITS;

/// The id of a series whose clustering tag has the (unescaped) `value`, from the series' plain
/// id `own` (see module docs).
#[inline]
pub fn clustered_id(own: u64, value: &[u8]) -> u64 {
    (xxh3_64(value) & !OWN_BITS_MASK) | (own & OWN_BITS_MASK)
}

/// The series id under a server's rule: clustered by the value of `cluster_tag` when the
/// series has that tag, else plain (see module docs).
pub fn series_id_by(measurement: &str, tags: &[(&str, &str)], cluster_tag: Option<&str>) -> u64 {
    with_cluster(series_id(measurement, tags), tags, cluster_tag)
}

/// Applies the clustering rule to a plain id, given the series' tags.
#[inline]
pub fn with_cluster<K: AsRef<str>, V: AsRef<[u8]>>(
    own: u64,
    tags: &[(K, V)],
    cluster_tag: Option<&str>,
) -> u64 {
    let Some(t) = cluster_tag else { return own };
    match tags.iter().find(|(k, _)| k.as_ref() == t) {
        Some((_, v)) => clustered_id(own, v.as_ref()),
        None => own,
    }
}

/// Sorts tags into canonical order: key bytes, then value bytes.
pub(crate) fn sort_tags<K: AsRef<[u8]>, V: AsRef<[u8]>>(tags: &mut [(K, V)]) {
    tags.sort_unstable_by(|a, b| (a.0.as_ref(), a.1.as_ref()).cmp(&(b.0.as_ref(), b.1.as_ref())));
}

/// Appends the canonical key for tags that are *already sorted*.
pub(crate) fn write_canonical_key<'t>(
    measurement: &str,
    sorted_tags: impl Iterator<Item = (&'t str, &'t str)>,
    out: &mut Vec<u8>,
) {
    escape_into(measurement.as_bytes(), EscapeSet::Measurement, out);
    for (k, v) in sorted_tags {
        out.push(b',');
        escape_into(k.as_bytes(), EscapeSet::Tag, out);
        out.push(b'=');
        escape_into(v.as_bytes(), EscapeSet::Tag, out);
    }
}

fn key_capacity(measurement: &str, tags: &[(&str, &str)]) -> usize {
    measurement.len()
        + tags
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum::<usize>()
        + 8
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Pinned (measurement, tags) -> canonical key -> id. These values are
    /// persisted by deployed servers: never change them. The ids of all keys
    /// were cross-checked with the Python `xxhash` package
    /// (`xxhash.xxh3_64_intdigest(key_bytes)`), an independent XXH3 port.
    #[allow(clippy::type_complexity)]
    pub(crate) const GOLDEN: &[(&str, &[(&str, &str)], &str, u64)] = &[
        ("cpu", &[], "cpu", 0xecaa9c725d358abe),
        (
            "cpu",
            &[("host", "server01"), ("region", "us-west")],
            "cpu,host=server01,region=us-west",
            0x6abec04e0c53ef91,
        ),
        (
            "cpu",
            &[("region", "us-west"), ("host", "server01")],
            "cpu,host=server01,region=us-west",
            0x6abec04e0c53ef91,
        ),
        (
            "cpu load",
            &[("host", "a,b")],
            r"cpu\ load,host=a\,b",
            0x0063c91953a782da,
        ),
        (
            "disk,io",
            &[("path", r"C:\Users"), ("k=v", "x y")],
            r"disk\,io,k\=v=x\ y,path=C:\Users",
            0xd3e85d4e69841d5c,
        ),
        (
            "cpu",
            &[("a", r"\1"), ("b", "2")],
            r"cpu,a=\1,b=2",
            0xa5eaf8f0b8fa5c0c,
        ),
        (
            "température",
            &[("ville", "Zürich"), ("capteur", "☃")],
            "température,capteur=☃,ville=Zürich",
            0x742980aa3508f840,
        ),
        (
            "m",
            &[("a", "2"), ("a", "1")],
            "m,a=1,a=2",
            0x727f9187f9426458,
        ),
        (
            "weather",
            &[("location", "us-midwest"), ("season", "summer")],
            "weather,location=us-midwest,season=summer",
            0xd2593f76bf95ffa4,
        ),
        (
            "m=x",
            &[("t", "\"quoted\"")],
            "m=x,t=\"quoted\"",
            0x6d629c5697f7f1d9,
        ),
    ];

    #[test]
    fn golden_ids_are_stable() {
        for (m, tags, key, id) in GOLDEN {
            assert_eq!(canonical_key(m, tags), *key, "{m} {tags:?}");
            let got = series_id(m, tags);
            assert_eq!(got, *id, "{key}: got {got:#018x}");
            assert_eq!(id_of_canonical_key(key.as_bytes()), *id);
        }
    }

    #[test]
    fn tag_order_does_not_matter() {
        let a = series_id("cpu", &[("b", "2"), ("a", "1"), ("c", "3")]);
        let b = series_id("cpu", &[("c", "3"), ("a", "1"), ("b", "2")]);
        assert_eq!(a, b);
        assert_ne!(a, series_id("cpu", &[("a", "1"), ("b", "2")]));
    }

    #[test]
    fn escaping_distinguishes_structure() {
        // A comma inside a value is not a tag separator.
        assert_ne!(
            series_id("m", &[("a", "1,b=2")]),
            series_id("m", &[("a", "1"), ("b", "2")])
        );
        // A space in the measurement is not the end of the key.
        assert_ne!(series_id("a b", &[]), series_id("a", &[("b", "")]));
    }

    /// Pinned like [`GOLDEN`]: ids persisted by servers clustering by `region`. Cross-checked
    /// with Python's `xxhash`: `(xxh3_64_intdigest(b"us-west") & 0xFFFF << 48) |
    /// (xxh3_64_intdigest(b"cpu,host=server01,region=us-west") & (1 << 48) - 1)`.
    #[test]
    fn clustered_ids_are_stable() {
        let tags = [("host", "server01"), ("region", "us-west")];
        let plain = series_id("cpu", &tags);
        let id = series_id_by("cpu", &tags, Some("region"));
        assert_eq!(id & OWN_BITS_MASK, plain & OWN_BITS_MASK);
        assert_eq!(id >> 48, xxh3_64(b"us-west") >> 48);
        assert_eq!(id, 0x3355c04e0c53ef91, "got {id:#018x}");
        // Without the tag, or without a rule, the id is the plain one.
        assert_eq!(series_id_by("cpu", &tags, Some("rack")), plain);
        assert_eq!(series_id_by("cpu", &tags, None), plain);
    }

    #[test]
    fn series_of_one_value_share_the_top_bits_and_stay_apart() {
        let ids: Vec<u64> = (0..1000)
            .map(|h| {
                let host = format!("h{h}");
                series_id_by("cpu", &[("host", &host), ("region", "eu")], Some("region"))
            })
            .collect();
        assert!(ids.iter().all(|id| id >> 48 == ids[0] >> 48));
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        let other = series_id_by("cpu", &[("host", "h0"), ("region", "us")], Some("region"));
        assert_ne!(other >> 48, ids[0] >> 48);
    }
}

//! `SLIMIT` and `SOFFSET` of a `SELECT`, as InfluxDB 1.8 applies them.
//!
//! InfluxDB limits each measurement's groups of series before it reads them (`LimitTagSets`
//! over the index's tag sets), in the order of the groups' keys: the keys of the grouping tags
//! a group has, then their values, each `|`-joined. A tag the group lacks is left out of its
//! key, so a group without `dc` (`host|h3`) comes after every group with one
//! (`dc|host|a|h1`). The answer still lists the groups in tag order, where a missing tag is
//! an empty value and comes first; so the groups kept are chosen in one order and shown in
//! the other. The groups counted are those of the series the tag conditions select, whether
//! the range (or a field condition, or an `OFFSET`) leaves them points or not.

use std::collections::BTreeMap;

use serde::Deserialize;
use sluice_core::names::quote_str;

/// Where a statement's groups of series are: the measurement's series the tag conditions
/// select (`series`, SQL over the series table's `tags`), grouped by `keys`.
#[derive(Debug, Clone)]
pub struct GroupSource {
    pub db: String,
    pub measurement: String,
    pub keys: Vec<String>,
    pub series: Vec<String>,
}

impl GroupSource {
    /// The distinct groups of a series table `from` (`db, measurement, tags`), each as the
    /// JSON object of its grouping tags.
    pub fn sql(&self, from: &str) -> String {
        let mut conds = vec![
            format!("db = {}", quote_str(&self.db)),
            format!("measurement = {}", quote_str(&self.measurement)),
        ];
        conds.extend(self.series.iter().cloned());
        format!(
            "SELECT DISTINCT {} FROM {from} WHERE {}",
            super::grouping::tags_json(&self.keys, "tags"),
            conds.join(" AND ")
        )
    }
}

/// A group's key (see the module doc) of its tags as JSON text; empty where the text is no
/// object of strings.
pub fn key_of(tags: &str) -> String {
    serde_json::from_str::<BTreeMap<String, String>>(tags)
        .map(|t| tag_set_key(&t))
        .unwrap_or_default()
}

/// What choosing needs of a series as [`super::shape::series`] wrote it.
#[derive(Deserialize)]
struct Head {
    name: String,
    #[serde(default)]
    tags: BTreeMap<String, String>,
}

/// InfluxDB's key of a group: the keys of its non-empty tags, then their values.
fn tag_set_key(tags: &BTreeMap<String, String>) -> String {
    let present: Vec<(&String, &String)> = tags.iter().filter(|(_, v)| !v.is_empty()).collect();
    let keys = present.iter().map(|(k, _)| k.as_str());
    let values = present.iter().map(|(_, v)| v.as_str());
    keys.chain(values).collect::<Vec<_>>().join("|")
}

/// Keeps, of each measurement's series, those `SLIMIT`/`SOFFSET` select in tag-set key
/// order, in the order they are listed. `groups`: each measurement's group keys ([`key_of`])
/// where they are known; else the series answered are the groups. A series that cannot be
/// read back (never the case for the shaper's own output) counts with an empty key.
pub fn limit_tag_sets(
    series: &mut Vec<Vec<u8>>,
    slimit: Option<u64>,
    soffset: Option<u64>,
    groups: &BTreeMap<String, Vec<String>>,
) {
    if slimit.is_none() && soffset.is_none() {
        return;
    }
    let heads: Vec<(String, String)> = series
        .iter()
        .map(|s| match serde_json::from_slice::<Head>(s) {
            Ok(h) => (h.name, tag_set_key(&h.tags)),
            Err(_) => (String::new(), String::new()),
        })
        .collect();
    let mut by_measurement: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, key) in &heads {
        by_measurement.entry(name).or_default().push(key);
    }
    let skip = soffset.unwrap_or(0) as usize;
    let take = slimit.map_or(usize::MAX, |n| n as usize);
    let mut chosen: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, mut keys) in by_measurement {
        keys.extend(groups.get(name).into_iter().flatten().map(String::as_str));
        keys.sort();
        keys.dedup();
        chosen.insert(name, keys.into_iter().skip(skip).take(take).collect());
    }
    let mut i = 0;
    series.retain(|_| {
        let (name, key) = &heads[i];
        i += 1;
        chosen
            .get(name.as_str())
            .is_some_and(|keys| keys.contains(&key.as_str()))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, tags: &str) -> Vec<u8> {
        format!(r#"{{"name":"{name}","tags":{tags},"columns":["time","v"],"values":[[0,1]]}}"#)
            .into_bytes()
    }

    fn tags_of(s: &[Vec<u8>]) -> Vec<String> {
        s.iter()
            .map(|b| {
                let v: serde_json::Value = serde_json::from_slice(b).expect("json");
                format!("{}{}", v["name"].as_str().unwrap_or(""), v["tags"])
            })
            .collect()
    }

    #[test]
    fn a_missing_tag_comes_last_when_choosing_and_first_when_shown() {
        // Listed as the answer lists them: the group without `dc` first.
        let all = vec![
            series("cpu", r#"{"dc":"","host":"h3"}"#),
            series("cpu", r#"{"dc":"a","host":"h1"}"#),
            series("cpu", r#"{"dc":"b","host":"h2"}"#),
        ];
        let mut s = all.clone();
        limit_tag_sets(&mut s, Some(1), Some(1), &BTreeMap::new());
        assert_eq!(tags_of(&s), [r#"cpu{"dc":"b","host":"h2"}"#]);
        let mut s = all.clone();
        limit_tag_sets(&mut s, Some(2), Some(1), &BTreeMap::new());
        assert_eq!(
            tags_of(&s),
            [
                r#"cpu{"dc":"","host":"h3"}"#,
                r#"cpu{"dc":"b","host":"h2"}"#
            ]
        );
        let mut s = all.clone();
        limit_tag_sets(&mut s, Some(1), None, &BTreeMap::new());
        assert_eq!(tags_of(&s), [r#"cpu{"dc":"a","host":"h1"}"#]);
        let mut s = all;
        limit_tag_sets(&mut s, None, Some(5), &BTreeMap::new());
        assert!(s.is_empty());
    }

    #[test]
    fn each_measurement_is_limited_on_its_own() {
        let mut s = vec![
            series("cpu", r#"{"host":"a"}"#),
            series("cpu", r#"{"host":"b"}"#),
            series("mem", r#"{"host":"a"}"#),
            series("mem", r#"{"host":"b"}"#),
        ];
        limit_tag_sets(&mut s, Some(1), Some(1), &BTreeMap::new());
        assert_eq!(tags_of(&s), [r#"cpu{"host":"b"}"#, r#"mem{"host":"b"}"#]);
    }

    #[test]
    fn a_group_without_points_still_counts() {
        // `h1` has no point (the range, a condition or an OFFSET left none): it is still the
        // first group, so `SOFFSET 1` skips it and not `h2`.
        let groups: BTreeMap<String, Vec<String>> = [(
            "cpu".to_string(),
            vec![
                key_of(r#"{"host":"h1"}"#),
                key_of(r#"{"host":"h2"}"#),
                key_of(r#"{"host":"h3"}"#),
            ],
        )]
        .into();
        let all = vec![
            series("cpu", r#"{"host":"h2"}"#),
            series("cpu", r#"{"host":"h3"}"#),
        ];
        let mut s = all.clone();
        limit_tag_sets(&mut s, Some(2), Some(1), &groups);
        assert_eq!(tags_of(&s), [r#"cpu{"host":"h2"}"#, r#"cpu{"host":"h3"}"#]);
        let mut s = all;
        limit_tag_sets(&mut s, Some(1), None, &groups);
        assert!(s.is_empty(), "{:?}", tags_of(&s));
    }

    #[test]
    fn without_limits_nothing_changes() {
        let mut s = vec![series("cpu", "{}"), series("mem", "{}")];
        limit_tag_sets(&mut s, None, None, &BTreeMap::new());
        assert_eq!(s.len(), 2);
    }
}

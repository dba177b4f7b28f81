//! A two-phase aggregate over a few known series names their tags in its plan.
//!
//! Grouped by tags, an aggregate's partials per series are joined to the series table for
//! their tags ([`Query::first_phase`]). Under tag conditions that select a few series whose
//! tags the caller remembered ([`super::series_ids::Selected`]), the plan names each series'
//! grouping tags instead (`transform` from its id), and there is no join: 8 hosts' maximum
//! per minute over an hour took 12.6-14.8 ms in the engine instead of 18.4-19.7, over the
//! query benchmark's data (bench/README, "Queries"). The tags are still the engine's JSON of
//! the same strings, so a share planned either way merges with the other.

use sluice_core::names::quote_str;

use super::grouping::json_of;
use super::plan::{Query, SID};
use super::series_ids::Tags;

impl Query<'_> {
    /// The tags of every series the plan reads, when it names them: the statement's series
    /// are its tag conditions' few known ones (each with its tags), read from the table by
    /// id.
    pub(super) fn inline_tags(&self) -> Option<(&[u64], &[Tags])> {
        let (ids, tags) = (self.src.series_ids?, self.src.series_tags?);
        let named = self.src.series.is_none()
            && !self.filter.series.is_empty()
            && self.mode.reads_rows()
            && !ids.is_empty()
            && ids.len() == tags.len();
        named.then_some((ids, tags))
    }

    /// The grouping tags of a first phase's partial (`p`) as a JSON object in text: named
    /// from its series' id ([`Self::inline_tags`]), else from the series table's row joined
    /// to it (`s`).
    pub(super) fn partial_tags_sql(&self) -> String {
        match self.inline_tags() {
            Some((ids, tags)) => {
                named_tags_sql(self.grouping.keys(), ids, tags, &format!("p.{SID}"))
            }
            None => self.grouping.sql(),
        }
    }
}

/// The tags `keys` of the series `sid` (SQL of its id) as a JSON object in text, from `ids`
/// and their `tags`: `""` where a series has no such tag, as the series table's map gives.
pub(super) fn named_tags_sql(keys: &[String], ids: &[u64], tags: &[Tags], sid: &str) -> String {
    let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
    let ids = format!("CAST([{}], 'Array(UInt64)')", ids.join(", "));
    json_of(keys, |k| {
        let values: Vec<String> = tags
            .iter()
            .map(|t| {
                let v = t.iter().find(|(key, _)| key == k).map_or("", |(_, v)| v);
                quote_str(v)
            })
            .collect();
        format!("transform({sid}, {ids}, [{}], '')", values.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::plan::{plan, select_of, with_test_source, Mode, Source};

    /// The SQL of `q` over series 7 and 19 of known tags, in `mode`.
    fn planned(q: &str, tags: Option<&[Tags]>, mode: Mode) -> String {
        let q = select_of(q);
        with_test_source(|src| {
            let src = Source {
                series_ids: Some(&[7, 19]),
                series_tags: tags,
                ..*src
            };
            plan(&q, &src, 0, mode).unwrap().unwrap().sql
        })
    }

    /// With the few series' tags known, a grouped aggregate names them and joins nothing,
    /// on one pod and in a share; the gathering pod's part reads no rows and names none.
    #[test]
    fn a_grouped_aggregate_over_known_series_names_their_tags() {
        let tags = vec![
            vec![("host".to_string(), "a".to_string())],
            vec![("host".to_string(), "b".to_string())],
        ];
        let q = "SELECT max(value) FROM cpu WHERE (host = 'a' OR host = 'b') AND time >= 0s AND time < 1h GROUP BY time(1m), host";
        for mode in [Mode::Whole, Mode::Partial] {
            let sql = planned(q, Some(&tags), mode);
            assert!(!sql.contains("JOIN"), "{sql}");
            assert!(sql.contains("toJSONString(map('host', transform(p.__sl_sid, CAST([7, 19], 'Array(UInt64)'), ['a', 'b'], '')))"), "{sql}");
            assert!(sql.contains("m.series_id IN (7, 19)"), "{sql}");
            let joined = planned(q, None, mode);
            assert!(
                joined.contains("INNER JOIN (SELECT series_id, tags FROM `sluice_series`"),
                "{joined}"
            );
        }
        let sql = planned(q, Some(&tags), Mode::Final("`t`"));
        assert!(!sql.contains("transform("), "{sql}");
        // Not grouped by tags: no tags to name.
        let sql = planned(
            "SELECT max(value) FROM cpu WHERE host = 'a' GROUP BY time(1m)",
            Some(&tags),
            Mode::Whole,
        );
        assert!(!sql.contains("transform("), "{sql}");
    }

    #[test]
    fn each_key_is_looked_up_by_id_and_a_missing_tag_is_empty() {
        let tags = vec![
            vec![("host".to_string(), "a'1".to_string())],
            vec![
                ("dc".to_string(), "x".to_string()),
                ("host".to_string(), "b".to_string()),
            ],
        ];
        let keys = ["dc".to_string(), "host".to_string()];
        assert_eq!(
            named_tags_sql(&keys, &[7, 19], &tags, "p.__sl_sid"),
            "toJSONString(map('dc', transform(p.__sl_sid, CAST([7, 19], 'Array(UInt64)'), ['', 'x'], ''), \
             'host', transform(p.__sl_sid, CAST([7, 19], 'Array(UInt64)'), ['a\\'1', 'b'], '')))"
        );
    }
}

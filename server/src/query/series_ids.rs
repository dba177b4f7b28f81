//! The series a statement's tag conditions select, remembered between reads.
//!
//! A dashboard sends the same tag conditions on every refresh, and the series they select
//! change only when the series table does. Looked up inside each plan (`series_id IN (SELECT
//! ... FROM sluice_series ...)`), the set costs every read a pass over the measurement's
//! series (6.4 ms alone in the engine at 10,000 series). Remembered, the plan names the ids
//! themselves, which the engine matches against the measurement's key at once, and the
//! series table is read by id for their tags: one host's mean per minute over 12 hours took
//! 30-36 ms before and 20-24 after (bench/README, "Queries").
//!
//! The engine still computes the set, through the series table; this only remembers its
//! answer for as long as the series table is unchanged ([`super::remember`]).
//!
//! A small set is remembered with each series' tags ([`Selected::tags`]): a read grouped by
//! tags then names them in its plan instead of joining its partials to the series table
//! (`super::inline_tags`).

use std::sync::Arc;
use std::time::Duration;

use sluice_core::names::quote_ident;
use sluice_influxql::SelectStatement;

use super::plan::{self, Mode, Plan, Source};
use super::remember::Remembered;
use super::PlanError;
use crate::app::App;
use crate::catalog::SERIES_TABLE;
use crate::engine::{Engine, Readers};

/// Most ids a remembered set holds; a condition selecting more is looked up inside the plan,
/// which keeps the plan's SQL small (a thousand ids are about 20 KB of it).
pub const MAX_IDS: usize = 1000;

/// Most series whose tags a remembered set holds: a plan names every one of them, and a
/// dashboard's chosen hosts are a few. Past it the plan joins the series table.
pub const MAX_TAGGED: usize = 100;

/// Most bytes of tag keys and values a set's named tags may hold together: a plan names each
/// grouping key's values once, and the engine refuses a query's text past 256 KiB
/// (`max_query_size`), which five series with 60 KB tag values pass. Past it the plan joins
/// the series table.
pub const MAX_TAGGED_BYTES: usize = 16 << 10;

/// Most memory the remembered sets hold (4 MiB), their conditions' text included (see
/// [`Remembered::put`]; a condition of megabytes, which a request may send, is not kept).
const MAX_HELD_BYTES: usize = 4 << 20;

/// What each condition selected; `None`: more than [`MAX_IDS`].
pub struct SeriesIds(Remembered<Option<Selected>>);

/// A series' tags as the series table holds them, in its order.
pub type Tags = Vec<(String, String)>;

/// The series a condition selected: their ids, sorted, and with at most [`MAX_TAGGED`] of
/// them (of at most [`MAX_TAGGED_BYTES`] of tags) each one's tags (in the ids' order), unless
/// some series holds a tag key twice (which the engine's map reads by its own rule).
#[derive(Clone)]
pub struct Selected {
    pub ids: Arc<[u64]>,
    pub tags: Option<Arc<[Tags]>>,
}

impl Selected {
    /// The memory it holds beyond its header.
    fn bytes(&self) -> usize {
        let tags = self.tags.iter().flat_map(|t| t.iter()).flatten();
        8 * self.ids.len() + tags.map(|(k, v)| 48 + k.len() + v.len()).sum::<usize>()
    }
}

impl Default for SeriesIds {
    fn default() -> Self {
        Self(Remembered::new(MAX_HELD_BYTES))
    }
}

impl SeriesIds {
    /// The ids of the series whose series table rows match `conds` (SQL over `db`,
    /// `measurement` and `tags`), sorted, remembered or looked up now; none when they are
    /// more than [`MAX_IDS`] or the engine could not answer within `wait` (the plan then
    /// reads them itself, and reports what is wrong).
    pub fn resolve(&self, engine: &Engine, conds: &str, wait: Duration) -> Resolved {
        let writes = engine.series_writes();
        if let Some(selected) = self.0.get(conds, &writes) {
            return Resolved::Remembered(selected);
        }
        let Some(ids) = lookup_ids(engine, conds, wait) else {
            return Resolved::Unanswered;
        };
        let selected = (ids.len() <= MAX_IDS).then(|| {
            // A small set's tags in a second read, so that a large set's lookup reads ids
            // alone and no more than [`MAX_TAGGED`] series' tags are ever held.
            let tags = match ids.len() <= MAX_TAGGED {
                true => lookup_tags(engine, conds, wait),
                false => None,
            };
            as_selected(ids, tags)
        });
        let bytes = selected.as_ref().map_or(0, Selected::bytes);
        self.0.put(conds, writes, selected.clone(), bytes);
        Resolved::LookedUp(selected)
    }
}

/// The looked-up `ids` (sorted) as a set, with the tags read for them kept when they are the
/// same series (the series table may have changed between the two reads), short, and each
/// series holds every tag key once.
fn as_selected(ids: Vec<u64>, tags: Option<Vec<(u64, Tags)>>) -> Selected {
    let once = |t: &Tags| {
        let mut keys: Vec<&str> = t.iter().map(|(k, _)| k.as_str()).collect();
        keys.sort_unstable();
        keys.windows(2).all(|w| w[0] != w[1])
    };
    let tags = tags.and_then(|mut series| {
        series.sort_unstable_by_key(|(id, _)| *id);
        let bytes: usize = series
            .iter()
            .flat_map(|(_, t)| t)
            .map(|(k, v)| k.len() + v.len())
            .sum();
        let keep = series.iter().map(|(id, _)| *id).eq(ids.iter().copied())
            && bytes <= MAX_TAGGED_BYTES
            && series.iter().all(|(_, t)| once(t));
        keep.then(|| series.into_iter().map(|(_, t)| t).collect())
    });
    Selected {
        ids: ids.into(),
        tags,
    }
}

/// Where a condition's series came from; `None` past [`MAX_IDS`].
pub enum Resolved {
    Remembered(Option<Selected>),
    LookedUp(Option<Selected>),
    /// The engine did not answer the lookup.
    Unanswered,
}

impl Resolved {
    /// The series, and the metric label of how they came.
    fn split(self) -> (Option<Selected>, &'static str) {
        match self {
            Resolved::Remembered(Some(s)) => (Some(s), "remembered"),
            Resolved::LookedUp(Some(s)) => (Some(s), "looked_up"),
            _ => (None, "in_plan"),
        }
    }
}

/// `stmt` planned over `src` in `mode`, naming the series its tag conditions select when a
/// plan that reads this pod's rows can have them (the columns of a share, `Mode::Shape`, do
/// not depend on them).
pub fn plan_reading(
    app: &App,
    stmt: &SelectStatement,
    src: &Source,
    now_ns: i64,
    mode: Mode,
) -> Result<Option<Plan>, PlanError> {
    let selected = match (mode.reads_rows(), plan::series_lookup(stmt, src, now_ns)?) {
        (true, Some(conds)) => {
            let (selected, how) = app
                .series_ids
                .resolve(&app.engine, &conds, app.cfg.query.queue_timeout)
                .split();
            app.metrics.series_lookups.with_label_values(&[how]).inc();
            selected
        }
        _ => None,
    };
    let src = Source {
        series_ids: selected.as_ref().map(|s| &s.ids[..]),
        series_tags: selected.as_ref().and_then(|s| s.tags.as_deref()),
        ..*src
    };
    plan::plan(stmt, &src, now_ns, mode)
}

/// At most [`MAX_IDS`] + 1 ids matching `conds`, sorted; `None` on an engine error.
fn lookup_ids(engine: &Engine, conds: &str, wait: Duration) -> Option<Vec<u64>> {
    let out = read(engine, &lookup_sql(conds), wait)?;
    let mut ids: Vec<u64> = String::from_utf8_lossy(&out)
        .lines()
        .map(|l| l.trim().parse().ok())
        .collect::<Option<_>>()?;
    ids.sort_unstable();
    Some(ids)
}

/// At most [`MAX_TAGGED`] + 1 series matching `conds` with their tags; `None` on an engine
/// error or an answer that is not the lookup's.
fn lookup_tags(engine: &Engine, conds: &str, wait: Duration) -> Option<Vec<(u64, Tags)>> {
    let out = read(engine, &tags_sql(conds), wait)?;
    match parse_tags(&out) {
        Ok(series) => Some(series),
        Err(e) => {
            tracing::warn!(error = %e, "series tags unreadable; the plan joins the series table");
            None
        }
    }
}

/// The engine's whole answer to `sql`; `None` on an error.
fn read(engine: &Engine, sql: &str, wait: Duration) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let ran = engine.stream_on(Readers::Local, sql, true, wait, &mut |chunk| {
        out.extend_from_slice(&chunk);
        true
    });
    match ran {
        Ok(_) => Some(out),
        Err(e) => {
            tracing::debug!(error = %e, "series lookup failed; the plan reads the series itself");
            None
        }
    }
}

/// The lookup: without `FINAL`, as inside a plan (a series' rows differ only in when it was
/// first seen, see `reads`).
fn lookup_sql(conds: &str) -> String {
    format!(
        "SELECT DISTINCT series_id FROM {} WHERE {conds} LIMIT {} FORMAT TSV",
        quote_ident(SERIES_TABLE),
        MAX_IDS + 1
    )
}

/// A small set's tags: one row per series with its tags as two arrays (a map's keys may
/// repeat, which a JSON object would hide).
fn tags_sql(conds: &str) -> String {
    format!(
        "SELECT toString(series_id), mapKeys(tags), mapValues(tags) FROM {} WHERE {conds} LIMIT 1 BY series_id LIMIT {} FORMAT JSONCompactEachRow",
        quote_ident(SERIES_TABLE),
        MAX_TAGGED + 1
    )
}

/// The lookup's rows: `["id", [keys], [values]]`.
fn parse_tags(out: &[u8]) -> Result<Vec<(u64, Tags)>, String> {
    let text = std::str::from_utf8(out).map_err(|e| e.to_string())?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let (id, keys, values): (String, Vec<String>, Vec<String>) =
                serde_json::from_str(line).map_err(|e| format!("row {i}: {e}"))?;
            let id = id.parse().map_err(|e| format!("row {i}: id {id:?}: {e}"))?;
            if keys.len() != values.len() {
                return Err(format!(
                    "row {i}: {} keys, {} values",
                    keys.len(),
                    values.len()
                ));
            }
            Ok((id, keys.into_iter().zip(values).collect()))
        })
        .collect()
}

/// `ids` as what an `IN` reads: the list, or for no ids a query of no rows (the engine
/// refuses `IN ()`).
pub fn in_list(ids: &[u64]) -> String {
    if ids.is_empty() {
        return "SELECT toUInt64(0) WHERE 0".into();
    }
    ids.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lookup_reads_one_more_than_a_set_may_hold() {
        let sql = lookup_sql("db = 'd' AND measurement = 'm' AND (tags['host'] = 'a')");
        assert_eq!(
            sql,
            format!("SELECT DISTINCT series_id FROM `sluice_series` WHERE db = 'd' AND measurement = 'm' AND (tags['host'] = 'a') LIMIT {} FORMAT TSV", MAX_IDS + 1)
        );
        let sql = tags_sql("db = 'd' AND measurement = 'm' AND (tags['host'] = 'a')");
        assert_eq!(
            sql,
            format!("SELECT toString(series_id), mapKeys(tags), mapValues(tags) FROM `sluice_series` WHERE db = 'd' AND measurement = 'm' AND (tags['host'] = 'a') LIMIT 1 BY series_id LIMIT {} FORMAT JSONCompactEachRow", MAX_TAGGED + 1)
        );
    }

    fn tags(pairs: &[(&str, &str)]) -> Tags {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_tags_rows_are_ids_with_their_tags_and_garbage_is_an_error() {
        let out = br#"["18232492008166998395",["host","region"],["h\"1","r3"]]
["7",[],[]]
"#;
        assert_eq!(
            parse_tags(out).unwrap(),
            vec![
                (
                    18232492008166998395,
                    tags(&[("host", "h\"1"), ("region", "r3")])
                ),
                (7, vec![])
            ]
        );
        assert!(parse_tags(b"").unwrap().is_empty());
        for bad in [
            &b"[\"x\",[],[]]"[..],
            b"[\"1\",[\"a\"],[]]",
            b"[1,[],[]]",
            b"nope",
        ] {
            assert!(parse_tags(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_small_set_keeps_its_tags_in_the_ids_order_unless_they_differ_repeat_a_key_or_are_long() {
        let s = as_selected(
            vec![2, 9],
            Some(vec![(9, tags(&[("h", "b")])), (2, tags(&[("h", "a")]))]),
        );
        assert_eq!(&s.ids[..], &[2, 9]);
        let kept = s.tags.unwrap();
        assert_eq!(kept[0], tags(&[("h", "a")]));
        assert_eq!(kept[1], tags(&[("h", "b")]));
        // A series new between the two reads.
        let moved = as_selected(vec![2], Some(vec![(2, vec![]), (3, vec![])]));
        assert_eq!(&moved.ids[..], &[2]);
        assert!(moved.tags.is_none());
        let twice = as_selected(vec![1], Some(vec![(1, tags(&[("h", "a"), ("h", "b")]))]));
        assert!(twice.tags.is_none());
        assert!(as_selected(vec![1], None).tags.is_none());
        let long = "x".repeat(MAX_TAGGED_BYTES / 2);
        let within = as_selected(
            vec![1, 2],
            Some(vec![
                (1, tags(&[("h", &long[1..])])),
                (2, tags(&[("h", &long[1..])])),
            ]),
        );
        assert!(within.tags.is_some());
        let past = as_selected(
            vec![1, 2],
            Some(vec![(1, tags(&[("h", &long)])), (2, tags(&[("h", &long)]))]),
        );
        assert_eq!(&past.ids[..], &[1, 2]);
        assert!(past.tags.is_none());
    }

    #[test]
    fn an_empty_set_is_a_query_of_no_rows() {
        assert_eq!(in_list(&[3, 7]), "3, 7");
        assert_eq!(in_list(&[]), "SELECT toUInt64(0) WHERE 0");
    }
}

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

/// Most memory the remembered sets hold (4 MiB), their conditions' text included (see
/// [`Remembered::put`]; a condition of megabytes, which a request may send, is not kept).
const MAX_HELD_BYTES: usize = 4 << 20;

/// What each condition selected; `None`: more than [`MAX_IDS`].
pub struct SeriesIds(Remembered<Option<Arc<[u64]>>>);

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
        if let Some(ids) = self.0.get(conds, &writes) {
            return Resolved::Remembered(ids);
        }
        let Some(ids) = lookup(engine, conds, wait) else {
            return Resolved::Unanswered;
        };
        let ids: Option<Arc<[u64]>> = (ids.len() <= MAX_IDS).then(|| ids.into());
        let bytes = 8 * ids.as_ref().map_or(0, |ids| ids.len());
        self.0.put(conds, writes, ids.clone(), bytes);
        Resolved::LookedUp(ids)
    }
}

/// Where a condition's series came from; the ids are `None` past [`MAX_IDS`].
pub enum Resolved {
    Remembered(Option<Arc<[u64]>>),
    LookedUp(Option<Arc<[u64]>>),
    /// The engine did not answer the lookup.
    Unanswered,
}

impl Resolved {
    /// The ids, and the metric label of how they came.
    fn split(self) -> (Option<Arc<[u64]>>, &'static str) {
        match self {
            Resolved::Remembered(Some(ids)) => (Some(ids), "remembered"),
            Resolved::LookedUp(Some(ids)) => (Some(ids), "looked_up"),
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
    let ids = match (mode.reads_rows(), plan::series_lookup(stmt, src, now_ns)?) {
        (true, Some(conds)) => {
            let (ids, how) = app
                .series_ids
                .resolve(&app.engine, &conds, app.cfg.query.queue_timeout)
                .split();
            app.metrics.series_lookups.with_label_values(&[how]).inc();
            ids
        }
        _ => None,
    };
    let src = Source {
        series_ids: ids.as_deref(),
        ..*src
    };
    plan::plan(stmt, &src, now_ns, mode)
}

/// At most [`MAX_IDS`] + 1 ids matching `conds`, sorted; `None` on an engine error.
fn lookup(engine: &Engine, conds: &str, wait: Duration) -> Option<Vec<u64>> {
    let sql = lookup_sql(conds);
    let mut out = Vec::new();
    let ran = engine.stream_on(Readers::Local, &sql, true, wait, &mut |chunk| {
        out.extend_from_slice(&chunk);
        true
    });
    if let Err(e) = ran {
        tracing::debug!(error = %e, "series lookup failed; the plan reads the series itself");
        return None;
    }
    let mut ids: Vec<u64> = String::from_utf8_lossy(&out)
        .lines()
        .map(|l| l.trim().parse().ok())
        .collect::<Option<_>>()?;
    ids.sort_unstable();
    Some(ids)
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
    }

    #[test]
    fn an_empty_set_is_a_query_of_no_rows() {
        assert_eq!(in_list(&[3, 7]), "3, 7");
        assert_eq!(in_list(&[]), "SELECT toUInt64(0) WHERE 0");
    }
}

//! Handing a leaving pod's data to a pod that stays (the second half of `/decommission`).
//!
//! The leaving pod drives ([`send`]): once its WAL is flushed it asks the receiver to copy its
//! series rows, then each table chunk by chunk (a range of series ids); the receiver pulls
//! each chunk from the leaving pod's internal endpoint through `url()` in `Native`
//! ([`receive`]), streaming, and marks every row it inserts with the hand-off's id and the
//! chunk's number (the `_sluice_origin` column). A chunk whose count on the receiver differs
//! from the sender's was cut short by a kill: it is deleted and copied again, so a chunk
//! lands exactly once however often either side is killed. When a table's copy has the same
//! row count and hash as the original, the leaving pod records the table as handed (durably)
//! and only then drops it; when every table is handed it settles the hand-off with the
//! receiver and reports itself empty.
//!
//! Reads count every row once throughout. The switch from one copy to the other is a single
//! record on one pod: the leaving pod's list of handed tables, which every pod's catalog
//! answer carries to the gathering pod. A read's partial requests carry that list, and:
//! - the leaving pod leaves a handed table out, and refuses a request whose list lacks a
//!   table it has handed (the gathering pod's view is older than the switch; it gathers the
//!   view again and retries), so it never counts a table it may have dropped;
//! - the receiving pod counts the rows of an unsettled hand-off only for the tables the list
//!   names, and every row of a settled one.

pub mod receive;
pub mod send;
pub mod sql;
pub mod state;

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::sync::Mutex;
use std::thread::JoinHandle;

use state::{Leaving, LEAVING_FILE, RECEIVING_FILE};

/// The internal endpoint a leaving pod calls on the receiver.
pub const HANDOFF_PATH: &str = "/internal/v1/handoff";

/// A gathering pod's view of the hand-offs under way: per hand-off id, the tables the
/// leaving pod has handed over.
pub type Handed = BTreeMap<u64, BTreeSet<String>>;

/// [`Handed`] as pairs, as a partial request carries it.
pub fn to_pairs(h: &Handed) -> Vec<(u64, Vec<String>)> {
    h.iter()
        .map(|(id, t)| (*id, t.iter().cloned().collect()))
        .collect()
}

pub fn from_pairs(pairs: &[(u64, Vec<String>)]) -> Handed {
    pairs
        .iter()
        .map(|(id, t)| (*id, t.iter().cloned().collect()))
        .collect()
}

/// The text of the error a leaving pod answers when a read's view of its hand-off is older
/// than a table it has handed; the gathering pod retries with a fresh view.
pub const STALE_VIEW: &str = "stale hand-off view";

#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    #[error("reading the hand-off state in {dir}: {source}")]
    State { dir: String, source: std::io::Error },
}

/// This pod's hand-offs: the one it leaves by, if any, and those it receives.
pub struct Handoff {
    dir: PathBuf,
    leaving: Mutex<Option<Leaving>>,
    receiving: Mutex<BTreeSet<u64>>,
    /// Serializes the receiver's work: two requests for one chunk (a sender killed and
    /// resumed while its first request still runs) must not both copy it.
    pub(crate) receive_lock: Mutex<()>,
    /// The leaving pod's driver thread.
    pub(crate) driver: Mutex<Option<JoinHandle<()>>>,
    /// The driver's last error, for the status.
    pub(crate) last_error: Mutex<Option<String>>,
    /// Counts every change of this pod's part in hand-offs (its leaving state, a hand-off
    /// received or settled): a read planned while this pod took part in none saw none only
    /// if the count did not move until it finished ([`Handoff::changes`]).
    changes: std::sync::atomic::AtomicU64,
}

impl Handoff {
    pub fn open(dir: PathBuf) -> Result<Self, HandoffError> {
        let err = |source| HandoffError::State {
            dir: dir.display().to_string(),
            source,
        };
        let leaving = state::load::<Leaving>(&dir, LEAVING_FILE).map_err(err)?;
        let receiving = state::load::<BTreeSet<u64>>(&dir, RECEIVING_FILE)
            .map_err(err)?
            .unwrap_or_default();
        Ok(Self {
            dir,
            leaving: Mutex::new(leaving),
            receiving: Mutex::new(receiving),
            receive_lock: Mutex::new(()),
            driver: Mutex::new(None),
            last_error: Mutex::new(None),
            changes: std::sync::atomic::AtomicU64::new(0),
        })
    }

    pub fn leaving(&self) -> Option<Leaving> {
        self.leaving
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Changes the leaving state and stores it before anyone sees the change; `None` removes it.
    pub fn update(
        &self,
        change: impl FnOnce(&mut Option<Leaving>),
    ) -> std::io::Result<Option<Leaving>> {
        let mut cur = self.leaving.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = cur.clone();
        change(&mut next);
        if next != *cur {
            match &next {
                Some(l) => state::save(&self.dir, LEAVING_FILE, l)?,
                None => state::remove(&self.dir, LEAVING_FILE)?,
            }
            *cur = next.clone();
            self.changed();
        }
        Ok(next)
    }

    /// The hand-off id and handed tables of this pod, when it is leaving.
    pub fn handed_away(&self) -> Option<(u64, BTreeSet<String>)> {
        self.leaving
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|l| (l.id, l.handed()))
    }

    pub fn receiving(&self) -> BTreeSet<u64> {
        self.receiving
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records that hand-off `id` is received here (before any of its rows land).
    pub fn begin_receiving(&self, id: u64) -> std::io::Result<()> {
        let mut r = self.receiving.lock().unwrap_or_else(|p| p.into_inner());
        if r.insert(id) {
            self.changed();
            if let Err(e) = state::save(&self.dir, RECEIVING_FILE, &*r) {
                r.remove(&id);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Records that hand-off `id` is settled: its rows count like this pod's own.
    pub fn settle(&self, id: u64) -> std::io::Result<()> {
        let mut r = self.receiving.lock().unwrap_or_else(|p| p.into_inner());
        if r.remove(&id) {
            self.changed();
            if let Err(e) = state::save(&self.dir, RECEIVING_FILE, &*r) {
                r.insert(id);
                return Err(e);
            }
        }
        Ok(())
    }

    /// How a read over `table` counts this pod's rows, given the gathering pod's view of the
    /// hand-offs: `Ok(None)` leaves the table out (handed away), `Ok(Some(source))` reads
    /// `source`; an error means the view is older than this pod's state.
    pub fn counted_source(&self, table: &str, view: &Handed) -> Result<Option<String>, String> {
        Ok(self
            .counted(table, view)?
            .map(|excluded| sql::counted_source(table, &excluded)))
    }

    /// [`Handoff::counted_source`] as a row filter on `table` (ClickHouse's
    /// `additional_table_filters`), for reads whose SQL names the tables itself (`/sql`):
    /// `None` reads every row.
    pub fn counted_filter(&self, table: &str, view: &Handed) -> Result<Option<String>, String> {
        Ok(match self.counted(table, view)? {
            None => Some("0".into()),
            Some(excluded) => sql::counted_filter(&excluded),
        })
    }

    /// The hand-offs whose rows of `table` this pod leaves out, or `None` when it leaves the
    /// whole table out (handed away).
    fn counted(&self, table: &str, view: &Handed) -> Result<Option<Vec<u64>>, String> {
        if let Some((id, handed)) = self.handed_away() {
            if handed.contains(table) {
                return if view.get(&id).is_some_and(|t| t.contains(table)) {
                    Ok(None)
                } else {
                    Err(format!(
                        "{STALE_VIEW}: this pod has handed {table} over (hand-off {id})"
                    ))
                };
            }
        }
        Ok(Some(
            self.receiving()
                .into_iter()
                .filter(|id| !view.get(id).is_some_and(|t| t.contains(table)))
                .collect(),
        ))
    }

    /// The changes of this pod's part in hand-offs so far (see the field): a gathering pod
    /// that computed its own share in its own query, planned while it took part in no
    /// hand-off, checks after the read that the count has not moved.
    pub fn changes(&self) -> u64 {
        self.changes.load(std::sync::atomic::Ordering::Acquire)
    }

    fn changed(&self) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// Whether this pod's reads depend on a view of hand-offs: it hands its data over, or
    /// holds received rows not yet settled.
    pub fn involved(&self) -> bool {
        self.handed_away().is_some() || !self.receiving().is_empty()
    }
}

/// The numbers of a query's single row (`SELECT count(), ...`); 0 for what does not parse.
pub(crate) fn numbers(
    engine: &crate::engine::Engine,
    sql: &str,
) -> Result<Vec<u64>, crate::engine::EngineError> {
    let out = engine.query(sql, chdb_rust::format::OutputFormat::TabSeparated)?;
    Ok(String::from_utf8_lossy(&out)
        .trim()
        .split('\t')
        .map(|v| v.parse().unwrap_or(0))
        .collect())
}

/// A new hand-off id: random, non-zero, within [`sql::ID_BITS`].
pub fn new_id() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    (h.finish() >> sql::CHUNK_BITS).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_counts_one_copy_whatever_the_view() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handoff::open(dir.path().to_path_buf()).unwrap();
        let none = Handed::new();
        assert_eq!(
            h.counted_source("t", &none).unwrap().as_deref(),
            Some("`t`")
        );
        assert!(!h.involved());
        assert_eq!(h.counted_filter("t", &none).unwrap(), None);

        // Receiving hand-off 9: its rows count only for tables the view says are handed.
        h.begin_receiving(9).unwrap();
        assert!(h.involved());
        let src = h.counted_source("t", &none).unwrap().unwrap();
        assert!(src.contains("NOT IN (9)"), "{src}");
        let filter = h.counted_filter("t", &none).unwrap().unwrap();
        assert!(
            src.contains(&filter) && filter.ends_with("NOT IN (9)"),
            "{filter}"
        );
        let view: Handed = [(9, ["t".to_string()].into())].into();
        assert_eq!(
            h.counted_source("t", &view).unwrap().as_deref(),
            Some("`t`")
        );
        assert_eq!(h.counted_filter("t", &view).unwrap(), None);
        h.settle(9).unwrap();
        assert_eq!(
            h.counted_source("t", &none).unwrap().as_deref(),
            Some("`t`")
        );

        // Leaving by hand-off 4 with t handed: left out when the view knows, else refused.
        h.update(|l| {
            let mut new = Leaving::new(4, 0, Some("r:1".into()));
            new.tables.insert(
                "t".into(),
                state::TableProgress {
                    db: "d".into(),
                    rp: "r".into(),
                    measurement: "m".into(),
                    duration_ns: 0,
                    fields: vec![],
                    chunks: vec![],
                    handed: true,
                    dropped: true,
                },
            );
            *l = Some(new);
        })
        .unwrap();
        let err = h.counted_source("t", &none).unwrap_err();
        assert!(err.starts_with(STALE_VIEW), "{err}");
        assert!(h
            .counted_filter("t", &none)
            .unwrap_err()
            .starts_with(STALE_VIEW));
        let view: Handed = [(4, ["t".to_string()].into())].into();
        assert_eq!(h.counted_source("t", &view).unwrap(), None);
        assert_eq!(h.counted_filter("t", &view).unwrap().as_deref(), Some("0"));
        assert_eq!(
            h.counted_source("u", &none).unwrap().as_deref(),
            Some("`u`")
        );

        // The state is on disk.
        let again = Handoff::open(dir.path().to_path_buf()).unwrap();
        assert_eq!(again.handed_away().unwrap().0, 4);
        assert!(again.receiving().is_empty());
        assert!(new_id() >> sql::ID_BITS == 0 && new_id() != 0);
    }
}

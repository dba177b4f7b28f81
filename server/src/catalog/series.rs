//! The series recorded per database: what the cardinality limit counts, and the raw keys the
//! parser may trust to skip hashing a known series again.

use std::collections::{HashMap, HashSet};

use chdb_rust::format::OutputFormat;
use sluice_core::names::quote_ident;
use sluice_core::KeyHash;

use super::{unescape_tsv, Catalog, CatalogError, Target, SERIES_TABLE};

/// Series ids recorded per database, and how many in all (what the cardinality limit counts).
#[derive(Default)]
pub(super) struct SeriesIndex {
    by_db: HashMap<String, HashSet<u64>>,
    total: usize,
}

impl SeriesIndex {
    fn contains(&self, db: &str, id: u64) -> bool {
        self.by_db.get(db).is_some_and(|s| s.contains(&id))
    }

    fn insert(&mut self, db: &str, id: u64) -> bool {
        let set = match self.by_db.get_mut(db) {
            Some(s) => s,
            None => self.by_db.entry(db.to_string()).or_default(),
        };
        let new = set.insert(id);
        self.total += usize::from(new);
        new
    }

    fn remove(&mut self, db: &str, id: u64) {
        if self.by_db.get_mut(db).is_some_and(|s| s.remove(&id)) {
            self.total -= 1;
        }
    }
}

/// Memory for remembered series keys: about 50 bytes per key, so about 1.3 million series.
pub(super) const SERIES_KEY_CACHE_BYTES: usize = 64 << 20;

impl Catalog {
    /// Reads the known series of every database from the dimension table (after replay has
    /// flushed it).
    pub fn load_series(&self) -> Result<usize, CatalogError> {
        let out = self.engine.query(
            &format!(
                "SELECT DISTINCT db, series_id FROM {}",
                quote_ident(SERIES_TABLE)
            ),
            OutputFormat::TabSeparated,
        )?;
        let mut index = self.series.lock().unwrap_or_else(|p| p.into_inner());
        for line in String::from_utf8_lossy(&out).lines() {
            let Some((db, id)) = line.rsplit_once('\t') else {
                continue;
            };
            if let Ok(id) = id.trim().parse::<u64>() {
                index.insert(&unescape_tsv(db), id);
            }
        }
        Ok(index.total)
    }

    /// Series recorded, counted once per database they were written to.
    pub fn series_count(&self) -> usize {
        self.series.lock().map(|s| s.total).unwrap_or(0)
    }

    /// Claims the series in `ids` that are new to `db`, as long as the total stays within
    /// `limit`. Returns the ids claimed now, and those refused by the limit.
    pub fn claim_series(&self, db: &str, ids: &[u64], limit: u64) -> (Vec<u64>, HashSet<u64>) {
        let mut index = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let mut claimed = Vec::new();
        let mut refused = HashSet::new();
        for &id in ids {
            if index.contains(db, id) {
                continue;
            }
            if index.total as u64 >= limit {
                refused.insert(id);
                continue;
            }
            index.insert(db, id);
            claimed.push(id);
        }
        (claimed, refused)
    }

    /// Remembers the raw keys (of `target`'s database) of the series among `keys` that are
    /// recorded (or claimed by a write that is now durable); keys of series refused by the
    /// cardinality limit or given back are skipped, so the parser never trusts a key whose
    /// series is not recorded.
    pub fn remember_series_keys(&self, target: &Target, keys: &[(KeyHash, u64)]) {
        if keys.is_empty() {
            return;
        }
        let recorded: Vec<(KeyHash, u64)> = {
            let index = self.series.lock().unwrap_or_else(|p| p.into_inner());
            keys.iter()
                .filter(|(_, id)| index.contains(&target.db, *id))
                .map(|(h, id)| (h.scoped(target.key_scope), *id))
                .collect()
        };
        self.series_keys.remember(recorded);
    }

    /// Gives back series of `db` claimed by a write that did not become durable.
    pub fn release_series(&self, db: &str, ids: &[u64]) {
        let mut index = self.series.lock().unwrap_or_else(|p| p.into_inner());
        for id in ids {
            index.remove(db, *id);
        }
    }
}

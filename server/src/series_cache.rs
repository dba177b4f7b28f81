//! Line-protocol series keys, exactly as written, of series the catalog has recorded.
//!
//! Parsing a key the first time a body shows it (validate, unescape, sort the tags, hash the
//! canonical form, copy the tags out) costs about a microsecond, several times the rest of its
//! line, and a typical agent sends the same keys in every request. The parser asks this cache
//! first ([`sluice_core::SchemaLookup::known_series`]); a hit skips all of that and produces no
//! series definition, because the series is already in the dimension table.
//!
//! So an entry may only exist once its series is recorded: keys are remembered after the
//! write that claimed the series is durable, or at once when the series was known before the
//! write. Series are never forgotten by the catalog, so entries never go stale. Memory is
//! bounded by `max_bytes` of keys; when full, new keys are simply not remembered (they are
//! parsed in full each time, as without the cache).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::RwLock;

use sluice_core::BuildBytesHasher;

/// Bookkeeping per entry beyond the key bytes (table slot, box header, id), for the bound.
const ENTRY_OVERHEAD: usize = 48;

pub struct SeriesKeyCache {
    keys: RwLock<HashMap<Box<[u8]>, u64, BuildBytesHasher>>,
    bytes: AtomicUsize,
    max_bytes: usize,
}

impl SeriesKeyCache {
    pub fn new(max_bytes: usize) -> Self {
        Self {
            keys: RwLock::new(HashMap::default()),
            bytes: AtomicUsize::new(0),
            max_bytes,
        }
    }

    pub fn get(&self, raw_key: &[u8]) -> Option<u64> {
        self.keys
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(raw_key)
            .copied()
    }

    /// Remembers `(raw key, series id)` pairs of recorded series, as long as room remains.
    pub fn remember<'k>(&self, entries: impl IntoIterator<Item = (&'k [u8], u64)>) {
        if self.bytes.load(Ordering::Relaxed) >= self.max_bytes {
            return;
        }
        let mut keys = self.keys.write().unwrap_or_else(|p| p.into_inner());
        for (key, id) in entries {
            let cost = key.len() + ENTRY_OVERHEAD;
            if self.bytes.load(Ordering::Relaxed) + cost > self.max_bytes {
                break;
            }
            if keys.insert(key.into(), id).is_none() {
                self.bytes.fetch_add(cost, Ordering::Relaxed);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.keys.read().map(|k| k.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate memory held, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_within_the_bound_and_keeps_the_first_id() {
        let cache = SeriesKeyCache::new(2 * (ENTRY_OVERHEAD + 10));
        assert_eq!(cache.get(b"cpu,host=a"), None);
        cache.remember([(&b"cpu,host=a"[..], 1), (&b"cpu,host=a"[..], 1)]);
        assert_eq!(cache.get(b"cpu,host=a"), Some(1));
        assert_eq!(cache.len(), 1);
        cache.remember([(&b"cpu,host=b"[..], 2), (&b"cpu,host=c"[..], 3)]);
        assert_eq!(cache.get(b"cpu,host=b"), Some(2));
        assert_eq!(cache.get(b"cpu,host=c"), None, "over the bound");
        assert_eq!(cache.len(), 2);
        assert!(cache.bytes() <= 2 * (ENTRY_OVERHEAD + 10));
    }
}

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
//! bounded by `max_bytes`; when full, new keys are simply not remembered (they are
//! parsed in full each time, as without the cache).

use std::sync::RwLock;

use sluice_core::{KeyHash, KeyHashMap};

/// Memory per entry: the 24-byte slot of the hash table plus its control byte, at the table's
/// worst load (half full right after growing).
const ENTRY_BYTES: usize = 50;

/// Keys are held as their [`KeyHash`], not their bytes: a lookup then never reads a stored key
/// (a cache miss per line with thousands of series), and an entry costs the same for any key
/// length.
pub struct SeriesKeyCache {
    keys: RwLock<KeyHashMap<u64>>,
    max_entries: usize,
}

impl SeriesKeyCache {
    pub fn new(max_bytes: usize) -> Self {
        Self {
            keys: RwLock::new(KeyHashMap::default()),
            max_entries: max_bytes / ENTRY_BYTES,
        }
    }

    pub fn get(&self, hash: KeyHash) -> Option<u64> {
        self.keys
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&hash)
            .copied()
    }

    /// Remembers `(key hash, series id)` pairs of recorded series, as long as room remains.
    pub fn remember(&self, entries: impl IntoIterator<Item = (KeyHash, u64)>) {
        let mut keys = self.keys.write().unwrap_or_else(|p| p.into_inner());
        for (hash, id) in entries {
            if keys.len() >= self.max_entries {
                break;
            }
            keys.entry(hash).or_insert(id);
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
        self.len() * ENTRY_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_within_the_bound_and_keeps_the_first_id() {
        let cache = SeriesKeyCache::new(2 * ENTRY_BYTES);
        let (a, b, c) = (
            KeyHash::of(b"cpu,host=a"),
            KeyHash::of(b"cpu,host=b"),
            KeyHash::of(b"cpu,host=c"),
        );
        assert_eq!(cache.get(a), None);
        cache.remember([(a, 1), (a, 9)]);
        assert_eq!(cache.get(a), Some(1));
        assert_eq!(cache.len(), 1);
        cache.remember([(b, 2), (c, 3)]);
        assert_eq!(cache.get(b), Some(2));
        assert_eq!(cache.get(c), None, "over the bound");
        assert_eq!(cache.len(), 2);
        assert!(cache.bytes() <= 2 * ENTRY_BYTES);
    }
}

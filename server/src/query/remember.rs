//! Answers the engine computed from the series table alone, kept while that table is
//! unchanged.
//!
//! Sluice is the only writer of its engine, and it counts every write to the series table
//! ([`crate::engine::Engine::series_writes`], counted once the write is over, done or failed).
//! An answer that reads nothing but that table is therefore the same for as long as the
//! count is: it is kept with the count it was computed under and given again only while the
//! count has not moved. The count is read before the engine runs, so a write that lands
//! during the read makes the kept answer stale at once rather than wrong.
//!
//! Two users: the series that a read's tag conditions select ([`super::series_ids`]), and
//! what the `SHOW` statements list ([`SeriesAnswers`]): Grafana's template variables ask
//! for the same tag values on every dashboard load, and the series table changes only when
//! a series is new. Across a tenant each pod keeps its share, and the gathering pod keeps
//! the whole answer as of every pod's version of its series table, asked of each pod before
//! the read (a round trip, against a share that lists every series a pod holds).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus::IntCounterVec;

/// An entry's memory beyond its key's text and its value's own bytes: the map's slot and
/// the value's header, about.
const ENTRY_BYTES: usize = 96;

/// Values by key, each as of a version of the series table (by default this pod's count of
/// writes to it), within `max_bytes`.
pub struct Remembered<V, A = u64> {
    held: Mutex<Held<V, A>>,
    max_bytes: usize,
}

struct Held<V, A> {
    entries: HashMap<String, Entry<V, A>>,
    /// The memory of every entry together ([`Entry::cost`]).
    bytes: usize,
}

struct Entry<V, A> {
    as_of: A,
    value: V,
    /// The entry's memory: [`ENTRY_BYTES`], its key and what the caller counted of `value`.
    cost: usize,
}

impl<V: Clone, A: PartialEq> Remembered<V, A> {
    pub fn new(max_bytes: usize) -> Self {
        Self {
            held: Mutex::new(Held {
                entries: HashMap::new(),
                bytes: 0,
            }),
            max_bytes,
        }
    }

    /// The value kept for `key`, if it was computed as of `as_of` (the version now).
    pub fn get<Q: ?Sized>(&self, key: &str, as_of: &Q) -> Option<V>
    where
        A: PartialEq<Q>,
    {
        let held = self.lock();
        let e = held.entries.get(key)?;
        (e.as_of == *as_of).then(|| e.value.clone())
    }

    /// Keeps `value` (of `bytes` bytes of its own) for `key` as of `as_of`. A value that
    /// would pass `max_bytes` makes every other entry forgotten first (the memory is bounded
    /// without an order to evict by); one larger on its own is not kept.
    pub fn put(&self, key: &str, as_of: A, value: V, bytes: usize) {
        let cost = ENTRY_BYTES + key.len() + bytes;
        let mut held = self.lock();
        if let Some(old) = held.entries.remove(key) {
            held.bytes -= old.cost;
        }
        if cost > self.max_bytes {
            return;
        }
        if held.bytes + cost > self.max_bytes {
            held.entries.clear();
            held.bytes = 0;
        }
        held.bytes += cost;
        held.entries
            .insert(key.to_string(), Entry { as_of, value, cost });
    }

    fn lock(&self) -> MutexGuard<'_, Held<V, A>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let held = self.lock();
        (held.entries.len(), held.bytes)
    }
}

/// Most memory the kept `SHOW` answers hold (8 MiB): the tag values of 10,000 hosts are
/// about 200 KB of engine output.
const MAX_ANSWER_BYTES: usize = 8 << 20;

/// The engine's output for `SHOW` statements' SQL: over this pod's series table, as of its
/// count of writes; and over every pod's (a gathering pod's), as of each pod's
/// [`crate::engine::Engine::series_version`].
pub struct SeriesAnswers {
    local: Remembered<Arc<[u8]>>,
    tenant: Remembered<Arc<[u8]>, String>,
    /// `sluice_series_answers_total{how}`: kept or read.
    counted: IntCounterVec,
}

impl SeriesAnswers {
    /// Most bytes of one answer worth keeping; a larger one is streamed and not kept (a
    /// share of every series of a large tenant).
    pub const MAX_KEPT: usize = MAX_ANSWER_BYTES / 4;

    pub fn new(counted: IntCounterVec) -> Self {
        Self {
            local: Remembered::new(MAX_ANSWER_BYTES / 2),
            tenant: Remembered::new(MAX_ANSWER_BYTES / 2),
            counted,
        }
    }

    /// The output kept for `sql`, which must read nothing but this pod's series table, if it
    /// was written under `writes` (the count read before the engine would run it).
    pub fn kept(&self, sql: &str, writes: u64) -> Option<Arc<[u8]>> {
        self.counted_if_kept(self.local.get(sql, &writes))
    }

    /// Counts a read of `sql` run under `writes`, and keeps its output `out` (`None`: not
    /// whole, or too large to keep).
    pub fn read(&self, sql: &str, writes: u64, out: Option<Arc<[u8]>>) {
        self.counted.with_label_values(&["read"]).inc();
        if let Some(out) = out {
            let bytes = out.len();
            if bytes <= Self::MAX_KEPT {
                self.local.put(sql, writes, out, bytes);
            }
        }
    }

    /// [`SeriesAnswers::kept`] for `sql` over the series tables of the pods whose versions
    /// are `versions`.
    pub fn kept_for_tenant(&self, sql: &str, versions: &str) -> Option<Arc<[u8]>> {
        self.counted_if_kept(self.tenant.get(sql, versions))
    }

    /// [`SeriesAnswers::read`] for `sql` over the series tables of the pods whose versions
    /// were `versions` before it ran.
    pub fn read_for_tenant(&self, sql: &str, versions: String, out: Option<Arc<[u8]>>) {
        self.counted.with_label_values(&["read"]).inc();
        if let Some(out) = out {
            let bytes = out.len() + versions.len();
            if bytes <= Self::MAX_KEPT {
                self.tenant.put(sql, versions, out, bytes);
            }
        }
    }

    fn counted_if_kept(&self, out: Option<Arc<[u8]>>) -> Option<Arc<[u8]>> {
        if out.is_some() {
            self.counted.with_label_values(&["kept"]).inc();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_given_only_under_the_count_it_was_kept_with() {
        let r: Remembered<u32> = Remembered::new(1 << 10);
        r.put("a", 3, 7, 4);
        assert_eq!(r.get("a", &3), Some(7));
        assert_eq!(r.get("a", &4), None, "the series table changed since");
        assert_eq!(r.get("b", &3), None);
        r.put("a", 4, 8, 4);
        assert_eq!(r.get("a", &4), Some(8));
        assert_eq!(r.held(), (1, ENTRY_BYTES + 1 + 4), "replaced, not added");
    }

    #[test]
    fn what_is_held_stays_within_its_bounds() {
        let max = 4 * (ENTRY_BYTES + 1000);
        let r: Remembered<()> = Remembered::new(max);
        for i in 0..40 {
            r.put(&format!("k{i}"), 0, (), 1000);
            assert!(r.held().1 <= max, "{:?}", r.held());
        }
        assert!(r.held().0 < 40, "forgotten once full");
        // A value larger than everything held may be is not kept, and keeps nothing out.
        r.put("huge", 0, (), max);
        assert_eq!(r.get("huge", &0), None);
        assert!(r.held().1 <= max);
    }
}

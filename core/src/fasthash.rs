//! Hashers for the per-body lookup maps.
//!
//! std's default SipHash is DoS-resistant but costs tens of nanoseconds per
//! lookup; the parser does one or two lookups per point. XXH3 with a
//! per-process random seed keeps both properties that matter here: speed,
//! and an attacker cannot precompute colliding keys for the maps.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use xxhash_rust::xxh3::{xxh3_128_with_seed, xxh3_64_with_seed};

/// Random per-process seed, so flooding a body with crafted keys cannot
/// degrade the maps to linear scans.
fn process_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        // RandomState is seeded from the OS; hashing nothing extracts it.
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    })
}

/// Hasher for byte-slice keys.
pub struct BytesHasher(u64);

impl Hasher for BytesHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxh3_64_with_seed(bytes, self.0);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[derive(Clone, Copy)]
pub struct BuildBytesHasher(u64);

impl Default for BuildBytesHasher {
    fn default() -> Self {
        BuildBytesHasher(process_seed())
    }
}

impl BuildHasher for BuildBytesHasher {
    type Hasher = BytesHasher;

    #[inline]
    fn build_hasher(&self) -> BytesHasher {
        BytesHasher(self.0)
    }
}

/// Hasher for series ids and [`KeyHash`]es, which are already XXH3 outputs: one keyed
/// multiply is enough. Series ids are unkeyed hashes of what clients write, so passing them
/// through unmixed would let a client choose keys whose ids share the bits that pick a
/// bucket; xor with the per-process seed before the multiply takes that choice away.
pub struct IdHasher {
    seed: u64,
    state: u64,
}

impl Hasher for IdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.state.rotate_left(8) ^ u64::from(b));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.state = (n ^ self.seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The product's high half is the well-mixed one; hash tables index by the low bits.
        self.state ^ (self.state >> 32)
    }
}

/// Builds [`IdHasher`]s with the per-process seed.
#[derive(Clone, Copy)]
pub struct BuildIdHasher(u64);

impl Default for BuildIdHasher {
    fn default() -> Self {
        BuildIdHasher(process_seed())
    }
}

impl BuildHasher for BuildIdHasher {
    type Hasher = IdHasher;

    #[inline]
    fn build_hasher(&self) -> IdHasher {
        IdHasher {
            seed: self.0,
            state: 0,
        }
    }
}

/// Byte-string map key compared with [`bytes_eq`] instead of `memcmp`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawKey<'a>(pub &'a [u8]);

impl PartialEq for RawKey<'_> {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        bytes_eq(self.0, other.0)
    }
}

impl Eq for RawKey<'_> {}

impl std::hash::Hash for RawKey<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.0);
    }
}

pub(crate) type BytesMap<'a, V> = HashMap<RawKey<'a>, V, BuildBytesHasher>;

/// Whether two short byte strings are equal, compared a word at a time
/// inline: for keys of a few dozen bytes a `memcmp` call costs more than
/// the comparison itself.
#[inline(always)]
pub(crate) fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a.iter().zip(b).all(|(x, y)| x == y);
    }
    // Whole words, then the last eight bytes (overlapping the final word).
    let mut i = 0;
    while i + 8 <= n {
        if word(&a[i..i + 8]) != word(&b[i..i + 8]) {
            return false;
        }
        i += 8;
    }
    word(&a[n - 8..]) == word(&b[n - 8..])
}

#[inline(always)]
fn word(chunk: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(chunk);
    u64::from_ne_bytes(w)
}
/// The identity of a series key as written (raw bytes), for the lookups made once per line.
///
/// Comparing the raw bytes of a key found in a map means reading the earlier key, which in a
/// body of thousands of series lies megabytes away and misses the cache: that compare was the
/// largest single cost of looking keys up. So keys are compared by 128 bits of XXH3 seeded
/// per process instead. Two distinct keys collide with probability about 2^-128 per pair, and
/// without the seed nobody can search for a collision; the 64-bit series ids that the store
/// already treats as identities are far more likely to collide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHash(u128);

impl KeyHash {
    #[inline]
    pub fn of(raw_key: &[u8]) -> Self {
        KeyHash(xxh3_128_with_seed(raw_key, process_seed()))
    }

    /// This key's hash within `scope` (itself [`KeyHash::of`] a name, such as a database's):
    /// the same key in two scopes gets two unrelated hashes, so a cache of keys can serve
    /// several databases without one answering for another.
    ///
    /// The two are hashed together, in order: a plain combination such as XOR would give a key
    /// named like its scope the same hash in every scope (`cpu` in database `cpu` and `disk`
    /// in database `disk`), and so the same cached series.
    #[inline]
    pub fn scoped(self, scope: KeyHash) -> Self {
        let mut both = [0u8; 32];
        both[..16].copy_from_slice(&scope.0.to_le_bytes());
        both[16..].copy_from_slice(&self.0.to_le_bytes());
        KeyHash(xxh3_128_with_seed(&both, process_seed()))
    }
}

impl std::hash::Hash for KeyHash {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The low half is already a seeded hash.
        state.write_u64(self.0 as u64);
    }
}

/// A map keyed by [`KeyHash`], hashed by taking its low bits.
pub type KeyHashMap<V> = HashMap<KeyHash, V, BuildIdHasher>;

pub(crate) type IdSet = HashSet<u64, BuildIdHasher>;

/// A map keyed by series id.
pub(crate) type IdMap<V> = HashMap<u64, V, BuildIdHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_hashes_differ_across_scopes_even_for_a_key_named_like_its_scope() {
        let (cpu, disk) = (KeyHash::of(b"cpu"), KeyHash::of(b"disk"));
        assert_ne!(cpu.scoped(cpu), disk.scoped(disk));
        assert_ne!(cpu.scoped(disk), disk.scoped(cpu));
        assert_ne!(cpu.scoped(cpu), cpu.scoped(disk));
        assert_eq!(cpu.scoped(disk), cpu.scoped(disk));
    }

    #[test]
    fn bytes_eq_matches_slice_eq() {
        let samples: [&[u8]; 7] = [
            b"",
            b"a",
            b"abcdefgh",
            b"abcdefgi",
            b"abcdefghi",
            b"abcdefghj",
            b"x",
        ];
        for a in samples {
            for b in samples {
                assert_eq!(bytes_eq(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn maps_work() {
        let mut m: BytesMap<'_, u32> = BytesMap::default();
        m.insert(RawKey(b"a"), 1);
        m.insert(RawKey(b"ab"), 2);
        m.insert(RawKey(b""), 3);
        assert_eq!(m.get(&RawKey(b"a")), Some(&1));
        assert_eq!(m.get(&RawKey(b"ab")), Some(&2));
        assert_eq!(m.get(&RawKey(b"")), Some(&3));
        assert_eq!(m.get(&RawKey(b"b")), None);
        let mut k: KeyHashMap<u32> = KeyHashMap::default();
        k.insert(KeyHash::of(b"cpu,host=a"), 1);
        k.insert(KeyHash::of(b"cpu,host=b"), 2);
        assert_eq!(k.get(&KeyHash::of(b"cpu,host=a")), Some(&1));
        assert_eq!(k.get(&KeyHash::of(b"cpu,host=b")), Some(&2));
        assert_eq!(k.get(&KeyHash::of(b"cpu,host=c")), None);
        let mut s = IdSet::default();
        assert!(s.insert(7));
        assert!(!s.insert(7));
    }
}

//! The read model's caches: a map bounded in entries and in weight whose least recently used
//! entries leave first ([`Lru`]), and on it the one cache type for what is computed from a
//! script's confirmed history and extended by later blocks ([`TipCache`]: its status hash state,
//! its entries): each value is valid while the chain still has the block it runs to, and the
//! next read resumes at the TxNum after that block.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};

use bitcoin::BlockHash;

use crate::types::{ScriptHash, TxNum};

struct Slot<V> {
    value: V,
    weight: usize,
    used: u64,
}

struct Inner<K, V> {
    map: HashMap<K, Slot<V>>,
    /// Keys by last use: the first is the least recently used.
    order: BTreeMap<u64, K>,
    clock: u64,
    /// The weight `map` holds.
    held: usize,
}

/// Values by key, shared by every session and server: at most `max_entries` of them and
/// `max_weight` in total; the least recently used leave first, found in O(log n).
pub struct Lru<K, V> {
    inner: Mutex<Inner<K, V>>,
    max_entries: usize,
    max_weight: usize,
}

impl<K: Hash + Eq + Copy, V: Clone> Lru<K, V> {
    /// A cache of at most `max_entries` values and `max_weight` in total; a value heavier than
    /// half of that is not kept.
    pub fn new(max_entries: usize, max_weight: usize) -> Self {
        Lru {
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                order: BTreeMap::new(),
                clock: 0,
                held: 0,
            }),
            max_entries,
            max_weight,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<K, V>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value kept for `key` if `valid` says it still holds, marked as just used.
    pub fn get(&self, key: &K, valid: impl Fn(&V) -> bool) -> Option<V> {
        let mut inner = self.lock();
        inner.clock += 1;
        let clock = inner.clock;
        let slot = inner.map.get_mut(key)?;
        if !valid(&slot.value) {
            return None;
        }
        let before = std::mem::replace(&mut slot.used, clock);
        let value = slot.value.clone();
        inner.order.remove(&before);
        inner.order.insert(clock, *key);
        Some(value)
    }

    /// Keeps `value` of `weight` for `key`, dropping the least recently used while the total
    /// would pass the bounds.
    pub fn put(&self, key: K, value: V, weight: usize) {
        if weight > self.max_weight / 2 {
            return;
        }
        // What leaves is freed after the lock is let go, not while every reader waits on it.
        let mut gone = Vec::new();
        let mut inner = self.lock();
        inner.clock += 1;
        let used = inner.clock;
        if let Some(old) = inner.map.remove(&key) {
            inner.held -= old.weight;
            inner.order.remove(&old.used);
            gone.push(old);
        }
        while inner.held + weight > self.max_weight || inner.map.len() >= self.max_entries {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            if let Some(slot) = inner.map.remove(&oldest) {
                inner.held -= slot.weight;
                gone.push(slot);
            }
        }
        inner.held += weight;
        inner.order.insert(used, key);
        inner.map.insert(
            key,
            Slot {
                value,
                weight,
                used,
            },
        );
        drop(inner);
        drop(gone);
    }

    /// Entries and weight held (for tests and metrics).
    pub fn held(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.map.len(), inner.held)
    }
}

/// A cached value and where the history it covers ends.
#[derive(Clone)]
pub struct Cached<V> {
    /// The value.
    pub value: V,
    /// The block it runs to: valid while the chain still has it.
    pub tip: (u32, BlockHash),
    /// The TxNum after that block's last transaction: later entries are read from here.
    pub next: TxNum,
}

/// Values per script, each valid up to a block; bounded in scripts and in weight (entries).
pub struct TipCache<V>(Lru<ScriptHash, Cached<V>>);

impl<V: Clone> TipCache<V> {
    /// A cache of at most `max_scripts` scripts and `max_weight` in total; a value heavier
    /// than half of that is not kept.
    pub fn new(max_scripts: usize, max_weight: usize) -> Self {
        TipCache(Lru::new(max_scripts, max_weight))
    }

    /// The value cached for a script if the chain still has the block it runs to
    /// (`chain_has(height, hash)`), marked as just used.
    pub fn get(
        &self,
        sh: &ScriptHash,
        chain_has: impl Fn(u32, &BlockHash) -> bool,
    ) -> Option<Cached<V>> {
        self.0
            .get(sh, |cached| chain_has(cached.tip.0, &cached.tip.1))
    }

    /// Keeps a script's value of `weight`, dropping the least recently used while the total
    /// would pass the bounds.
    pub fn put(&self, sh: ScriptHash, cached: Cached<V>, weight: usize) {
        self.0.put(sh, cached, weight)
    }

    /// Scripts and weight held (for tests and metrics).
    pub fn held(&self) -> (usize, usize) {
        self.0.held()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::hashes::Hash;

    const SCRIPTS: usize = 4_096;
    const WEIGHT: usize = 2_000_000;

    fn value(n: usize) -> Cached<usize> {
        Cached {
            value: n,
            tip: (1, BlockHash::all_zeros()),
            next: TxNum(9),
        }
    }

    fn any_chain(_: u32, _: &BlockHash) -> bool {
        true
    }

    #[test]
    fn the_least_recently_used_leave_first_and_the_weight_stays_bounded() {
        let cache = TipCache::new(SCRIPTS, WEIGHT);
        let (a, b, c) = (
            ScriptHash([1; 32]),
            ScriptHash([2; 32]),
            ScriptHash([3; 32]),
        );
        cache.put(a, value(1), WEIGHT / 2);
        cache.put(b, value(2), WEIGHT / 4);
        assert!(
            cache.get(&a, any_chain).is_some(),
            "a is now the most recently used"
        );
        cache.put(c, value(3), WEIGHT / 2);
        assert!(
            cache.get(&b, any_chain).is_none(),
            "b, the least recently used, made room"
        );
        assert!(cache.get(&a, any_chain).is_some() && cache.get(&c, any_chain).is_some());
        assert_eq!(cache.held(), (2, WEIGHT));
        cache.put(a, value(4), 10);
        assert_eq!(cache.held(), (2, WEIGHT / 2 + 10), "a replaced, not added");
        assert_eq!(cache.get(&a, any_chain).map(|c| c.value), Some(4));
        cache.put(b, value(5), WEIGHT / 2 + 1);
        assert!(cache.get(&b, any_chain).is_none(), "too heavy to keep");
    }

    #[test]
    fn the_number_of_scripts_is_bounded_too() {
        let cache = TipCache::new(SCRIPTS, WEIGHT);
        for i in 0..SCRIPTS + 10 {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&(i as u64).to_le_bytes());
            cache.put(ScriptHash(key), value(i), 20);
        }
        assert_eq!(cache.held(), (SCRIPTS, SCRIPTS * 20));
        assert!(
            cache.get(&ScriptHash([0; 32]), any_chain).is_none(),
            "the first in left first"
        );
    }

    #[test]
    fn a_value_is_only_served_while_the_chain_has_its_block() {
        let cache = TipCache::new(SCRIPTS, WEIGHT);
        let sh = ScriptHash([7; 32]);
        cache.put(sh, value(1), 1);
        assert!(
            cache.get(&sh, |_, _| false).is_none(),
            "its block left the chain"
        );
        assert!(cache
            .get(&sh, |h, b| h == 1 && *b == BlockHash::all_zeros())
            .is_some());
    }
}

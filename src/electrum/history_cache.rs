//! Confirmed histories of long scripts, kept for the `get_history` answers built in memory and
//! extended by the rows later blocks add, as [`super::status::StatusCache`] does for status
//! hashes: a repeated request for a long history reads only the entries added since, not the
//! whole history again (ElectrumX keeps such a cache too).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::types::{ScriptHash, TxNum};
use bitcoin::{BlockHash, Txid};

/// History entries kept over all cached scripts, at most (36 bytes each: about 72 MB); the
/// least recently used scripts leave first.
pub const CACHE_ENTRIES: usize = 2_000_000;
/// Scripts kept, at most (which also bounds the scan that finds the least recently used).
pub const CACHE_SCRIPTS: usize = 4_096;

/// A script's confirmed history up to a block.
#[derive(Clone)]
pub(crate) struct CachedHistory {
    /// The entries in chain order: txid and height.
    pub(crate) entries: Arc<Vec<(Txid, u32)>>,
    /// The block they run to: valid while the chain still has it.
    pub(crate) tip: (u32, BlockHash),
    /// The TxNum after that block's last transaction: later entries are read from here.
    pub(crate) next: TxNum,
    used: u64,
}

impl CachedHistory {
    /// The entries of a history running to block `tip`, whose next TxNum is `next`.
    pub(crate) fn new(entries: Arc<Vec<(Txid, u32)>>, tip: (u32, BlockHash), next: TxNum) -> Self {
        CachedHistory {
            entries,
            tip,
            next,
            used: 0,
        }
    }
}

#[derive(Default)]
struct Inner {
    map: HashMap<ScriptHash, CachedHistory>,
    clock: u64,
    /// Entries held by `map`.
    held: usize,
}

/// Long confirmed histories, shared by every session.
#[derive(Default)]
pub struct HistoryCache {
    inner: Mutex<Inner>,
}

impl HistoryCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached history of a script, if any (marked as just used).
    pub(crate) fn get(&self, sh: &ScriptHash) -> Option<CachedHistory> {
        let mut inner = self.lock();
        inner.clock += 1;
        let clock = inner.clock;
        let entry = inner.map.get_mut(sh)?;
        entry.used = clock;
        Some(entry.clone())
    }

    /// Keeps a script's history, dropping the least recently used ones while the total would
    /// pass [`CACHE_ENTRIES`] or [`CACHE_SCRIPTS`]; one longer than half of the entries is not
    /// kept.
    pub(crate) fn put(&self, sh: ScriptHash, mut entry: CachedHistory) {
        let len = entry.entries.len();
        if len > CACHE_ENTRIES / 2 {
            return;
        }
        let mut inner = self.lock();
        inner.clock += 1;
        entry.used = inner.clock;
        if let Some(old) = inner.map.remove(&sh) {
            inner.held -= old.entries.len();
        }
        while inner.held + len > CACHE_ENTRIES || inner.map.len() >= CACHE_SCRIPTS {
            let Some(oldest) = inner
                .map
                .iter()
                .min_by_key(|(_, c)| c.used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some(gone) = inner.map.remove(&oldest) {
                inner.held -= gone.entries.len();
            }
        }
        inner.held += len;
        inner.map.insert(sh, entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::hashes::Hash;

    fn history(n: usize) -> CachedHistory {
        CachedHistory::new(
            Arc::new(vec![(Txid::all_zeros(), 1); n]),
            (1, BlockHash::all_zeros()),
            TxNum(9),
        )
    }

    #[test]
    fn the_least_recently_used_leave_first_and_the_total_stays_bounded() {
        let cache = HistoryCache::default();
        let (a, b, c) = (
            ScriptHash([1; 32]),
            ScriptHash([2; 32]),
            ScriptHash([3; 32]),
        );
        cache.put(a, history(CACHE_ENTRIES / 2));
        cache.put(b, history(CACHE_ENTRIES / 4));
        assert!(cache.get(&a).is_some(), "a is now the most recently used");
        cache.put(c, history(CACHE_ENTRIES / 2));
        assert!(
            cache.get(&b).is_none(),
            "b, the least recently used, made room"
        );
        assert!(cache.get(&a).is_some() && cache.get(&c).is_some());
        assert_eq!(cache.lock().held, CACHE_ENTRIES);
        cache.put(a, history(10));
        assert_eq!(
            cache.lock().held,
            CACHE_ENTRIES / 2 + 10,
            "a replaced, not added"
        );
        cache.put(b, history(CACHE_ENTRIES / 2 + 1));
        assert!(cache.get(&b).is_none(), "too long to keep");
    }

    #[test]
    fn the_number_of_scripts_is_bounded_too() {
        let cache = HistoryCache::default();
        for i in 0..CACHE_SCRIPTS + 10 {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&(i as u64).to_le_bytes());
            cache.put(ScriptHash(key), history(20));
        }
        assert_eq!(cache.lock().map.len(), CACHE_SCRIPTS);
        assert_eq!(cache.lock().held, CACHE_SCRIPTS * 20);
        assert!(
            cache.get(&ScriptHash([0; 32])).is_none(),
            "the first in left first"
        );
    }
}

//! Knots's eviction order (Core 30's `descendant_score` index and `TrimToSize`; Core 31 evicts
//! chunks, [`super::chunk_index`]): every transaction
//! keeps its fees and size with its descendants', and a full pool evicts, with its descendants,
//! the transaction whose higher of its own fee rate and its rate with descendants is lowest
//! (`CompareTxMemPoolEntryByDescendantScore`; the newer first among equals). A parent a child
//! pays for is not evicted for its own low rate. The totals change along the ancestors of what
//! enters or leaves, at most 25 (the chain limits).

use std::cmp::Reverse;
use std::collections::HashSet;

use bitcoin::{Transaction, Txid};

use super::linearize::{ByRate, FeeFrac};
use super::{Inner, MempoolEntry};

/// A fee over a virtual size (of at least 1) as an exact rate key.
fn by_rate(fee: u64, vsize: u64) -> ByRate {
    ByRate(FeeFrac::new(fee, vsize.max(1)))
}

/// A transaction's fees and virtual size with its descendants' (Core's
/// `GetModFeesWithDescendants` and `GetSizeWithDescendants`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Totals {
    /// Fees, satoshis.
    pub fee: u64,
    /// Virtual size.
    pub vsize: u64,
}

/// A key of the eviction index: lowest score first, then the newer, then by txid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct EvictKey {
    score: ByRate,
    newer_first: Reverse<i64>,
    pub txid: Txid,
}

impl Inner {
    /// The eviction key of a pool transaction, from its totals.
    fn evict_key(&self, entry: &MempoolEntry) -> EvictKey {
        let own = by_rate(entry.fee, entry.vsize);
        let totals = self
            .with_descendants
            .get(&entry.txid)
            .copied()
            .unwrap_or(Totals {
                fee: entry.fee,
                vsize: entry.vsize,
            });
        EvictKey {
            score: own.max(by_rate(totals.fee, totals.vsize)),
            newer_first: Reverse(entry.time),
            txid: entry.txid,
        }
    }

    /// Indexes a transaction just put in `txs`: its totals are its own, and its ancestors'
    /// grow by it.
    pub(super) fn index_for_eviction(&mut self, txid: &Txid) {
        let Some(entry) = self.txs.get(txid) else {
            return;
        };
        let own = Totals {
            fee: entry.fee,
            vsize: entry.vsize,
        };
        self.with_descendants.insert(*txid, own);
        let key = self.evict_key(entry);
        self.by_score.insert(key);
        for ancestor in self.pool_ancestors(txid) {
            self.reweigh(&ancestor, |t| Totals {
                fee: t.fee.saturating_add(own.fee),
                vsize: t.vsize.saturating_add(own.vsize),
            });
        }
    }

    /// Takes the transactions `ids` (still in `txs`) out of their ancestors' totals, except the
    /// ancestors among them, which leave too: read before any of them leaves, so no path up is
    /// cut.
    pub(super) fn detach(&mut self, ids: &[Txid]) {
        if self.clusters {
            return;
        }
        let leaving: HashSet<Txid> = ids.iter().copied().collect();
        for id in ids {
            let Some(entry) = self.txs.get(id) else {
                continue;
            };
            let own = Totals {
                fee: entry.fee,
                vsize: entry.vsize,
            };
            for ancestor in self.pool_ancestors(id) {
                if !leaving.contains(&ancestor) {
                    self.reweigh(&ancestor, |t| Totals {
                        fee: t.fee.saturating_sub(own.fee),
                        vsize: t.vsize.saturating_sub(own.vsize),
                    });
                }
            }
        }
    }

    /// Drops a transaction leaving `txs` from the eviction index.
    pub(super) fn unindex_for_eviction(&mut self, entry: &MempoolEntry) {
        let key = self.evict_key(entry);
        self.by_score.remove(&key);
        self.with_descendants.remove(&entry.txid);
    }

    /// The next transaction to evict and its totals (a key naming no transaction, which no
    /// removal leaves, is dropped all the same).
    pub(super) fn lowest_score(&mut self) -> Option<(Txid, Totals)> {
        loop {
            let key = *self.by_score.first()?;
            match self.with_descendants.get(&key.txid) {
                Some(totals) if self.txs.contains_key(&key.txid) => {
                    return Some((key.txid, *totals))
                }
                _ => {
                    self.by_score.remove(&key);
                }
            }
        }
    }

    /// Changes a transaction's totals, moving its key in the index.
    fn reweigh(&mut self, txid: &Txid, change: impl Fn(Totals) -> Totals) {
        let Some(entry) = self.txs.get(txid) else {
            return;
        };
        let old = self.evict_key(entry);
        let totals = self.with_descendants.get(txid).copied().unwrap_or_default();
        self.with_descendants.insert(*txid, change(totals));
        let new = self.evict_key(entry);
        self.by_score.remove(&old);
        self.by_score.insert(new);
    }

    /// The pool ancestors of a pool transaction, each once.
    pub(super) fn pool_ancestors(&self, txid: &Txid) -> Vec<Txid> {
        match self.txs.get(txid) {
            Some(entry) => self.ancestors_of(&entry.tx),
            None => Vec::new(),
        }
    }

    /// The pool ancestors of any transaction, each once.
    pub(super) fn ancestors_of(&self, tx: &Transaction) -> Vec<Txid> {
        let mut seen: HashSet<Txid> = HashSet::new();
        let mut stack: Vec<Txid> = tx.input.iter().map(|i| i.previous_output.txid).collect();
        let mut found = Vec::new();
        while let Some(id) = stack.pop() {
            let Some(entry) = self.txs.get(&id) else {
                continue;
            };
            if seen.insert(id) {
                found.push(id);
                stack.extend(entry.tx.input.iter().map(|i| i.previous_output.txid));
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fee_rates_order_exactly() {
        let rate = by_rate;
        assert!(rate(1, 3) < rate(1, 2));
        assert_eq!(rate(2, 4), rate(1, 2));
        // No rounding: 1 sat over 1,000,000 vB is still above nothing.
        assert!(rate(0, 1) < rate(1, 1_000_000));
        assert!(rate(u64::MAX, 1) > rate(u64::MAX - 1, 1));
    }
}

//! After a block or a reorg: what the chain now confirms leaves alone, what it conflicts with
//! or no longer lets be final leaves with its descendants (Core's `removeForBlock` and
//! `removeForReorg`).

use std::collections::{HashMap, HashSet};

use bitcoin::{BlockHash, OutPoint, Txid};

use super::{finality, persist, CoinSource, Mempool};
use crate::index::Index;
use crate::types::ScriptHash;

impl Mempool {
    /// Drops transactions the chain now confirms or conflicts with (inputs no longer available);
    /// returns the touched script hashes.
    pub fn revalidate(&self, index: &Index) -> HashSet<ScriptHash> {
        self.revalidate_from(index)
    }

    /// [`Mempool::revalidate`] over any [`CoinSource`].
    pub(super) fn revalidate_from(&self, index: &dyn CoinSource) -> HashSet<ScriptHash> {
        let mut touched = self.take_unannounced();
        self.rolling_fee().block(persist::now());
        // One look at the pool, then the index checks without holding the lock.
        let snapshot: Vec<(Txid, Vec<OutPoint>)> = {
            let inner = self.read();
            inner
                .txs
                .values()
                .map(|e| {
                    (
                        e.txid,
                        e.tx.input.iter().map(|i| i.previous_output).collect(),
                    )
                })
                .collect()
        };
        self.reread_moved_coins(index);
        // After a reorg the tip can be lower: what its lock time or its inputs' relative lock
        // times no longer allow leaves with its descendants (Core's `removeForReorg` with
        // `CheckFinalTxAtTip` and `CheckSequenceLocksAtTip`; the coins' heights as last read,
        // a mempool parent's the next block's).
        let (next, time) = finality::next_block(index);
        let non_final: Vec<Txid> = self
            .read()
            .txs
            .values()
            .filter(|e| {
                let locks = finality::sequence_locks(&e.tx, &e.coin_heights, index);
                !finality::is_final(&e.tx, next, time) || !finality::locks_passed(locks, next, time)
            })
            .map(|e| e.txid)
            .collect();
        // Confirmed transactions leave alone: their children stay, spending what is now the
        // chain's (Core's removeForBlock). A transaction whose input is gone leaves with its
        // descendants.
        let confirmed: HashSet<Txid> = snapshot
            .iter()
            .filter(|(id, _)| index.is_confirmed(id).unwrap_or(false))
            .map(|(id, _)| *id)
            .collect();
        let in_pool: HashSet<Txid> = snapshot
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| !confirmed.contains(id))
            .collect();
        let conflicted: Vec<Txid> = snapshot
            .iter()
            .filter(|(id, _)| !confirmed.contains(id))
            .filter(|(_, inputs)| {
                !inputs.iter().all(|op| {
                    in_pool.contains(&op.txid) || index.is_confirmed_unspent(op).unwrap_or(false)
                })
            })
            .map(|(id, _)| *id)
            .collect();
        let mut inner = self.write();
        for id in &confirmed {
            inner.remove_one(id, &mut touched);
        }
        inner.expire(persist::now() - persist::EXPIRY_SECS, &mut touched);
        let non_final = non_final.iter().filter(|id| !confirmed.contains(*id));
        for id in conflicted.iter().chain(non_final) {
            inner.remove_with_descendants(id, &mut touched);
        }
        // Parents that confirmed make their children's height 0.
        let ids: Vec<Txid> = inner.txs.keys().copied().collect();
        for id in ids {
            let has_parent = inner
                .txs
                .get(&id)
                .map(|e| {
                    e.tx.input
                        .iter()
                        .any(|i| inner.txs.contains_key(&i.previous_output.txid))
                })
                .unwrap_or(false);
            if let Some(e) = inner.txs.get_mut(&id) {
                if e.has_unconfirmed_parent != has_parent {
                    e.has_unconfirmed_parent = has_parent;
                    touched.extend(e.scripthashes().collect::<Vec<_>>());
                }
            }
        }
        touched
    }

    /// Reads again the coin heights of every transaction whose highest coin's block left the
    /// chain (Core's `TestLockPointValidity`, then `CalculateLockPointsAtTip`): a reorg may
    /// have confirmed its coins later, which its relative lock times count from. One hash
    /// lookup a distinct height otherwise; the index is read only for what moved.
    fn reread_moved_coins(&self, index: &dyn CoinSource) {
        let mut hashes: HashMap<u32, Option<BlockHash>> = HashMap::new();
        let moved: Vec<(Txid, Vec<OutPoint>, Vec<Option<u32>>)> = {
            let inner = self.read();
            inner
                .txs
                .values()
                .filter(|e| {
                    e.coins_block.is_some_and(|(height, hash)| {
                        *hashes
                            .entry(height)
                            .or_insert_with(|| index.block_hash(height))
                            != Some(hash)
                    })
                })
                .map(|e| {
                    let inputs = e.tx.input.iter().map(|i| i.previous_output).collect();
                    (e.txid, inputs, e.coin_heights.clone())
                })
                .collect()
        };
        let reread: Vec<(Txid, Vec<Option<u32>>)> = moved
            .into_iter()
            .map(|(txid, inputs, old)| {
                let heights = inputs
                    .iter()
                    .zip(old)
                    .map(|(op, old)| {
                        // A mempool parent's output stays one; a coin now spent or gone leaves
                        // with the conflicts below, whatever its height.
                        old.and_then(|_| index.confirmed_unspent(op).ok().flatten())
                            .map(|coin| coin.height)
                            .or(old)
                    })
                    .collect();
                (txid, heights)
            })
            .collect();
        if reread.is_empty() {
            return;
        }
        let mut inner = self.write();
        for (txid, heights) in reread {
            if let Some(entry) = inner.txs.get_mut(&txid) {
                entry.coins_block = finality::coins_block(&heights, index);
                entry.coin_heights = heights;
            }
        }
    }
}

//! What the mempool answers about scripts, outputs and its transactions (the read side the
//! view, the servers and the relay use), each under the read lock.

use std::collections::HashMap;

use bitcoin::{OutPoint, TxOut, Txid, Wtxid};

use super::projection::Node;
use super::{Inner, Mempool, MempoolEntry, RecentTx, ScriptActivity};
use crate::index::silent_payments::TxTweak;
use crate::types::{Height, HistoryEntry, ScriptHash};

impl Mempool {
    /// A script's unconfirmed history in protocol order: every input confirmed (Electrum's
    /// height 0) before spending the mempool (-1), then by txid; each with its fee.
    pub fn history(&self, sh: &ScriptHash) -> Vec<HistoryEntry> {
        let inner = self.read();
        let mut out: Vec<HistoryEntry> = inner
            .scripts
            .get(sh)
            .into_iter()
            .flatten()
            .filter_map(|id| inner.txs.get(id))
            .map(|e| HistoryEntry {
                txid: e.txid,
                height: height_of(e),
                fee: Some(bitcoin::Amount::from_sat(e.fee)),
            })
            .collect();
        out.sort_by(|a, b| {
            b.height
                .electrum()
                .cmp(&a.height.electrum())
                .then_with(|| a.txid.to_string().cmp(&b.txid.to_string()))
        });
        out
    }

    /// What a script's unconfirmed transactions do to it.
    pub fn script_activity(&self, sh: &ScriptHash) -> ScriptActivity {
        let inner = self.read();
        let mut activity = ScriptActivity::default();
        for entry in inner
            .scripts
            .get(sh)
            .into_iter()
            .flatten()
            .filter_map(|id| inner.txs.get(id))
        {
            activity.txs += 1;
            for out in entry
                .tx
                .output
                .iter()
                .filter(|o| !o.script_pubkey.is_op_return())
            {
                if ScriptHash::of(&out.script_pubkey) == *sh {
                    activity.funded += 1;
                    activity.funded_sum = activity.funded_sum.saturating_add(out.value.to_sat());
                }
            }
            for prevout in &entry.prevouts {
                if ScriptHash::of(&prevout.script_pubkey) == *sh {
                    activity.spent += 1;
                    activity.spent_sum = activity.spent_sum.saturating_add(prevout.value.to_sat());
                }
            }
        }
        activity
    }

    /// The change the mempool makes to a script's balance (may be negative).
    pub fn balance_delta(&self, sh: &ScriptHash) -> i64 {
        let inner = self.read();
        let mut delta: i64 = 0;
        for id in inner.scripts.get(sh).into_iter().flatten() {
            let Some(e) = inner.txs.get(id) else { continue };
            for o in &e.tx.output {
                if ScriptHash::of(&o.script_pubkey) == *sh {
                    delta += o.value.to_sat() as i64;
                }
            }
            for p in &e.prevouts {
                if ScriptHash::of(&p.script_pubkey) == *sh {
                    delta -= p.value.to_sat() as i64;
                }
            }
        }
        delta
    }

    /// Unconfirmed outputs paying a script that nothing in the mempool spends.
    pub fn unspent(&self, sh: &ScriptHash) -> Vec<(Txid, u32, u64)> {
        let inner = self.read();
        let mut out = Vec::new();
        for id in inner.scripts.get(sh).into_iter().flatten() {
            let Some(e) = inner.txs.get(id) else { continue };
            for (vout, o) in e.tx.output.iter().enumerate() {
                let op = OutPoint::new(e.txid, vout as u32);
                if ScriptHash::of(&o.script_pubkey) == *sh && !inner.spends.contains_key(&op) {
                    out.push((e.txid, vout as u32, o.value.to_sat()));
                }
            }
        }
        out.sort();
        out
    }

    /// A mempool transaction's output, with where the transaction stands (spending the mempool
    /// or not): `None` if the transaction is not in the mempool, an output of `None` if it has
    /// no such output.
    pub fn output(&self, op: &OutPoint) -> Option<(Option<TxOut>, Height)> {
        let inner = self.read();
        let entry = inner.txs.get(&op.txid)?;
        let out = usize::try_from(op.vout)
            .ok()
            .and_then(|i| entry.tx.output.get(i))
            .cloned();
        Some((out, height_of(entry)))
    }

    /// The mempool transaction that spends an outpoint, with where it stands.
    pub fn spender(&self, op: &OutPoint) -> Option<(Txid, Height)> {
        let inner = self.read();
        let txid = inner.spends.get(op)?;
        let height = inner.txs.get(txid).map_or(Height::Unconfirmed, height_of);
        Some((*txid, height))
    }

    /// The mempool transaction and input that spend an outpoint, with where the transaction
    /// stands (without copying the transaction).
    pub fn spending_input(&self, op: &OutPoint) -> Option<(Txid, u32, Height)> {
        let inner = self.read();
        let txid = inner.spends.get(op)?;
        let entry = inner.txs.get(txid)?;
        let vin = entry
            .tx
            .input
            .iter()
            .position(|i| i.previous_output == *op)?;
        Some((*txid, u32::try_from(vin).ok()?, height_of(entry)))
    }

    /// Whether a mempool transaction spends this outpoint.
    pub fn is_spent(&self, op: &OutPoint) -> bool {
        self.read().spends.contains_key(op)
    }

    /// A mempool transaction's bytes.
    pub fn raw(&self, txid: &Txid) -> Option<Vec<u8>> {
        self.read().txs.get(txid).map(|e| e.raw.clone())
    }

    /// A mempool transaction with what its inputs spend (a copy).
    pub fn entry(&self, txid: &Txid) -> Option<MempoolEntry> {
        self.read().txs.get(txid).cloned()
    }

    /// The `n` transactions that entered last, newest first (ties by txid, highest first), as
    /// summaries: the last `n` of the index by entry time, nothing else read or copied.
    pub fn recent(&self, n: usize) -> Vec<RecentTx> {
        let inner = self.read();
        inner
            .by_time
            .iter()
            .rev()
            .filter_map(|(_, id)| inner.txs.get(id))
            .take(n)
            .map(|e| RecentTx {
                txid: e.txid,
                fee: e.fee,
                vsize: e.vsize,
                value: e
                    .tx
                    .output
                    .iter()
                    .fold(0u64, |sum, o| sum.saturating_add(o.value.to_sat())),
            })
            .collect()
    }

    /// The `n` transactions of a script's unconfirmed history that entered last, newest first,
    /// copied.
    pub fn newest_of_script(&self, sh: &ScriptHash, n: usize) -> Vec<MempoolEntry> {
        let inner = self.read();
        let entries = inner
            .scripts
            .get(sh)
            .into_iter()
            .flatten()
            .filter_map(|id| inner.txs.get(id));
        newest_of(entries, n)
    }

    /// A mempool transaction's bytes by witness id.
    pub fn raw_by_wtxid(&self, wtxid: &Wtxid) -> Option<Vec<u8>> {
        let inner = self.read();
        let txid = inner.by_wtxid.get(wtxid)?;
        inner.txs.get(txid).map(|e| e.raw.clone())
    }

    /// Number of transactions and their total virtual size (without reading every entry).
    pub fn size(&self) -> (usize, u64) {
        let inner = self.read();
        (inner.txs.len(), inner.total_vsize)
    }

    /// The memory the pool takes as Core counts it (bitcoind's `getmempoolinfo` `usage`), and
    /// its limit (`maxmempool`), bytes.
    pub fn memory_usage(&self) -> (u64, u64) {
        (self.read().usage(), self.config.max_bytes)
    }

    /// Number of transactions, total virtual size and total fees.
    pub fn info(&self) -> (usize, u64, u64) {
        let inner = self.read();
        (
            inner.txs.len(),
            inner.total_vsize,
            inner.txs.values().map(|e| e.fee).sum(),
        )
    }

    /// The fee histogram as ElectrumX builds it (see [`fees::FeeRates`]).
    pub fn fee_histogram(&self) -> Vec<(f64, u64)> {
        self.fee_rates().histogram.clone()
    }

    /// A fee rate (BTC/kvB) that enters the `blocks`th projected block, or `None` when the
    /// mempool would clear within `blocks` blocks (then the minimum applies).
    pub fn estimate_fee(&self, blocks: u32) -> Option<f64> {
        self.fee_rates().estimate(blocks)
    }

    /// The silent-payment tweak data of those of `txids` in the mempool that are eligible
    /// (copies, computed once as each entered): what a silent-payment scan needs of them.
    pub fn tweaks(&self, txids: &[Txid]) -> Vec<(Txid, TxTweak)> {
        let inner = self.read();
        (txids.iter())
            .filter_map(|id| inner.txs.get(id))
            .filter_map(|e| Some((e.txid, e.sp_tweak.clone()?)))
            .collect()
    }

    /// Every transaction, for re-announcing.
    pub fn txids(&self) -> Vec<Txid> {
        self.read().txs.keys().copied().collect()
    }
}

impl Inner {
    /// The generation and every transaction as the block assembler reads it: fee, sizes,
    /// sigops and mempool parents, copied so the projection runs outside the lock.
    pub(super) fn projection_nodes(&self) -> (u64, Vec<Node>) {
        let position: HashMap<Txid, u32> = self
            .txs
            .keys()
            .enumerate()
            .map(|(i, txid)| (*txid, i as u32))
            .collect();
        let nodes = self
            .txs
            .values()
            .map(|e| {
                let mut parents: Vec<u32> =
                    e.tx.input
                        .iter()
                        .filter_map(|i| position.get(&i.previous_output.txid).copied())
                        .collect();
                parents.sort_unstable();
                parents.dedup();
                Node {
                    txid: e.txid,
                    fee: e.fee,
                    vsize: e.vsize,
                    weight: e.weight,
                    sigops: e.sigop_cost,
                    parents,
                }
            })
            .collect();
        (self.generation, nodes)
    }
}

/// The `n` newest of `entries` (ties by txid), newest first, copied.
fn newest_of<'a>(entries: impl Iterator<Item = &'a MempoolEntry>, n: usize) -> Vec<MempoolEntry> {
    let mut kept: Vec<&MempoolEntry> = Vec::with_capacity(n.saturating_add(1));
    for entry in entries {
        let at = kept.partition_point(|k| (k.time, k.txid) > (entry.time, entry.txid));
        if at < n {
            kept.insert(at, entry);
            kept.truncate(n);
        }
    }
    kept.into_iter().cloned().collect()
}

/// Where a mempool transaction stands: spending another mempool transaction or not.
fn height_of(entry: &MempoolEntry) -> Height {
    Height::unconfirmed(entry.has_unconfirmed_parent)
}

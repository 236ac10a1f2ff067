//! Writing and undoing blocks: one atomic batch per group of blocks, with the new index tip.

use std::cell::RefCell;
use std::collections::HashMap;

use bitcoin::bip158::FilterHeader;
use bitcoin::Txid;

use super::batch::SortedBatch;
use super::error::IndexError;
use super::rows::{PreparedBlock, PreparedInput, PreparedTx};
use super::silent_payments::TxTweak;
use crate::store::schema::{
    cf, meta, scripthash_prefix, BlockRow, BlockTweaks, FilterRow, HistoryKey, OutPointNum,
    SpentRow, TipRow, TweakRow, TxRow, TxidKey, UtxoKey,
};
use crate::store::undo::{UndoInput, UndoRow, UndoTx};
use crate::store::{Store, TxidCursor};
use crate::types::TxNum;

/// Where a [`TxNumLookup`] finds the TxNums of transactions written before the current batch:
/// the store ([`StoreTxNums`]); in unit tests, a map.
pub trait StoredTxNums {
    /// The TxNum of `txid`, a transaction the store holds (a validated block's prevout, whose
    /// block is indexed); the newest if a txid repeats. `None` if none is stored; for a txid the
    /// store does not hold, the answer may also be another transaction's.
    fn stored_txnum(&self, txid: &Txid) -> Result<Option<TxNum>, IndexError>;
}

impl<T: StoredTxNums + ?Sized> StoredTxNums for &T {
    fn stored_txnum(&self, txid: &Txid) -> Result<Option<TxNum>, IndexError> {
        (**self).stored_txnum(txid)
    }
}

/// The store's TxNums as one batch looks them up: one cursor over the `txid` rows for all its
/// lookups (an iterator created for each lookup cost a quarter of the lookup's time on the
/// signature-free chain's profile), and no `txs` read when only one transaction's id starts
/// like the one asked: a prevout's transaction is in the index, so that one is it. Only ids
/// sharing their first 8 bytes with another stored id (1 lookup in 10^10 at mainnet's 1.2
/// billion transactions, and mainnet's two BIP30 duplicates) are told apart by their `txs` rows.
pub struct StoreTxNums<'a> {
    store: &'a Store,
    cursor: RefCell<TxidCursor<'a>>,
}

impl<'a> StoreTxNums<'a> {
    /// The store's TxNums as they are now: the cursor sees no later write.
    pub fn new(store: &'a Store) -> Self {
        StoreTxNums {
            store,
            cursor: RefCell::new(store.txid_cursor()),
        }
    }
}

impl StoredTxNums for StoreTxNums<'_> {
    fn stored_txnum(&self, txid: &Txid) -> Result<Option<TxNum>, IndexError> {
        let mut candidates = Vec::new();
        let prefix = TxidKey::prefix(txid);
        self.cursor
            .borrow_mut()
            .keys_with_prefix(&prefix, |key| -> Result<bool, IndexError> {
                candidates.push(TxidKey::decode(key)?);
                Ok(true)
            })?;
        if let [only] = candidates[..] {
            return Ok(Some(only));
        }
        newest_with_txid(self.store, None, candidates, txid)
    }
}

/// Finds the TxNum of a confirmed txid: first among the batch being built, then in the store.
pub struct TxNumLookup<S: StoredTxNums> {
    store: S,
    pending: HashMap<Txid, TxNum>,
}

impl<'a> TxNumLookup<StoreTxNums<'a>> {
    /// A lookup over `store` as it is now, with nothing pending.
    pub fn new(store: &'a Store) -> Self {
        TxNumLookup::over(StoreTxNums::new(store))
    }
}

impl<S: StoredTxNums> TxNumLookup<S> {
    /// A lookup over what `store` holds, with nothing pending.
    pub fn over(store: S) -> Self {
        TxNumLookup {
            store,
            pending: HashMap::new(),
        }
    }

    /// Records a transaction written in the current batch.
    pub fn add(&mut self, txid: Txid, txnum: TxNum) {
        self.pending.insert(txid, txnum);
    }

    /// The outpoint `input` of `tx` spends, as TxNum and output index.
    fn spent_outpoint(
        &self,
        tx: &PreparedTx,
        input: &PreparedInput,
        height: u32,
    ) -> Result<OutPointNum, IndexError> {
        let txnum = self
            .get(&input.prev_txid)?
            .ok_or(IndexError::MissingPrevout {
                txid: tx.txid,
                prev: input.prev_txid,
                height,
            })?;
        Ok(OutPointNum {
            txnum,
            vout: input.prev_vout,
        })
    }

    /// The TxNum of `txid`, a transaction the batch or the store holds (a validated block's
    /// prevout); the newest if a txid repeats (mainnet's two BIP30 duplicates). For a txid
    /// held by neither, `None`, or rarely another transaction's TxNum (see [`StoreTxNums`]).
    pub fn get(&self, txid: &Txid) -> Result<Option<TxNum>, IndexError> {
        if let Some(n) = self.pending.get(txid) {
            return Ok(Some(*n));
        }
        self.store.stored_txnum(txid)
    }
}

/// Looks a txid up in the store: scans its prefix and checks the full txid in each tx row.
pub fn find_txnum(
    store: &Store,
    snapshot: Option<&rocksdb::Snapshot<'_>>,
    txid: &Txid,
) -> Result<Option<TxNum>, IndexError> {
    let mut candidates = Vec::new();
    for item in store.scan_prefix(snapshot, cf::TXID, &TxidKey::prefix(txid)) {
        let (key, _) = item?;
        candidates.push(TxidKey::decode(&key)?);
    }
    newest_with_txid(store, snapshot, candidates, txid)
}

/// The last of `candidates` (TxNums in order) whose `txs` row holds `txid`: the newest, if a
/// txid repeats.
fn newest_with_txid(
    store: &Store,
    snapshot: Option<&rocksdb::Snapshot<'_>>,
    candidates: Vec<TxNum>,
    txid: &Txid,
) -> Result<Option<TxNum>, IndexError> {
    let mut found = None;
    for txnum in candidates {
        let row = match snapshot {
            Some(s) => store.get_at(s, cf::TXS, &TxRow::key(txnum))?,
            None => store.get(cf::TXS, &TxRow::key(txnum))?,
        };
        if let Some(bytes) = row {
            if TxRow::decode(&bytes)?.txid == *txid {
                found = Some(txnum);
            }
        }
    }
    Ok(found)
}

/// Adds the rows of `block`, whose coinbase gets `first`, to `batch`; with `prev_filter` (the
/// filter header of its parent) it writes its filter too and returns its filter header.
pub fn connect<S: StoredTxNums>(
    batch: &mut SortedBatch,
    lookup: &mut TxNumLookup<S>,
    block: &PreparedBlock,
    first: TxNum,
    prev_filter: Option<FilterHeader>,
) -> Result<Option<FilterHeader>, IndexError> {
    let row = BlockRow {
        header: block.header,
        first_txnum: first,
        tx_count: block.txs.len() as u32,
    };
    batch.put(cf::BLOCKS, BlockRow::key(block.height), row.encode());
    let filter_header = prev_filter.map(|prev| {
        let header = super::filters::filter_header(&block.filter, &prev);
        let filter_row = FilterRow {
            header,
            filter: block.filter.clone(),
        };
        batch.put(
            cf::FILTERS,
            FilterRow::key(block.height),
            filter_row.encode(),
        );
        header
    });
    let mut undo = UndoRow {
        txs: Vec::with_capacity(block.txs.len()),
    };
    for (i, tx) in block.txs.iter().enumerate() {
        let t = TxNum(first.0 + i as u64);
        let mut undo_tx = UndoTx {
            outputs: tx
                .outputs
                .iter()
                .map(|o| scripthash_prefix(&o.scripthash))
                .collect(),
            inputs: Vec::with_capacity(tx.inputs.len()),
        };
        let txrow = TxRow {
            txid: tx.txid,
            offset: tx.offset,
            len: tx.len,
        };
        batch.put(cf::TXS, TxRow::key(t), txrow.encode());
        batch.put(cf::TXID, TxidKey::encode(&tx.txid, t), []);
        // Inputs first: a transaction's outputs cannot be spent by its own inputs.
        for (vin, input) in tx.inputs.iter().enumerate() {
            let spent = lookup.spent_outpoint(tx, input, block.height)?;
            let sh = &input.spent.scripthash;
            batch.put(cf::HISTORY, HistoryKey::encode(sh, t), []);
            batch.delete(cf::UTXO, UtxoKey::encode(sh, spent));
            let by = SpentRow {
                txnum: t,
                vin: vin as u32,
            };
            batch.put(cf::SPENT, spent.encode(), by.encode());
            undo_tx.inputs.push(UndoInput {
                spent,
                scripthash: scripthash_prefix(sh),
                value: input.spent.value,
                spendable: input.spent.spendable,
            });
        }
        for (vout, out) in tx.outputs.iter().enumerate() {
            if !out.op_return {
                batch.put(cf::HISTORY, HistoryKey::encode(&out.scripthash, t), []);
            }
            // Genesis's output is not spendable (Core never adds it to the UTXO set).
            if out.spendable && block.height > 0 {
                let op = OutPointNum {
                    txnum: t,
                    vout: vout as u32,
                };
                // A new output's key: spent within the batch, it is never written.
                batch.put_new(
                    cf::UTXO,
                    UtxoKey::encode(&out.scripthash, op),
                    out.value.to_le_bytes(),
                );
            }
        }
        lookup.add(tx.txid, t);
        undo.txs.push(undo_tx);
    }
    batch.put(cf::UNDO, UndoRow::key(block.height), undo.encode());
    if let Some(tweaks) = block_tweaks(block) {
        batch.put(cf::TWEAKS, BlockTweaks::key(block.height), tweaks);
    }
    Ok(filter_header)
}

/// The `tweaks` row of `block`, if it has an eligible transaction.
pub fn block_tweaks(block: &PreparedBlock) -> Option<Vec<u8>> {
    let rows: Vec<(u32, TweakRow)> = block
        .txs
        .iter()
        .enumerate()
        .filter_map(|(i, tx)| Some((i as u32, tweak_row(tx.tweak.as_ref()?))))
        .collect();
    (!rows.is_empty()).then(|| BlockTweaks::encode(rows.iter().map(|(i, row)| (*i, row))))
}

/// The stored form of a transaction's tweak data.
pub fn tweak_row(tweak: &TxTweak) -> TweakRow {
    TweakRow {
        tweak: tweak.tweak,
        outputs: tweak
            .outputs
            .iter()
            .map(|o| (o.vout, o.key, o.value))
            .collect(),
    }
}

/// What undoing `block` (indexed, its coinbase at `first`) takes, from the block and the
/// kernel's undo data: the same row [`connect`] wrote, for blocks whose row is gone.
pub fn undo_row_of(store: &Store, block: &PreparedBlock) -> Result<UndoRow, IndexError> {
    undo_row_from(&TxNumLookup::new(store), block)
}

/// [`undo_row_of`], the spent outputs' TxNums found by `lookup`.
fn undo_row_from<S: StoredTxNums>(
    lookup: &TxNumLookup<S>,
    block: &PreparedBlock,
) -> Result<UndoRow, IndexError> {
    let mut undo = UndoRow {
        txs: Vec::with_capacity(block.txs.len()),
    };
    for tx in &block.txs {
        let mut inputs = Vec::with_capacity(tx.inputs.len());
        for input in &tx.inputs {
            inputs.push(UndoInput {
                spent: lookup.spent_outpoint(tx, input, block.height)?,
                scripthash: scripthash_prefix(&input.spent.scripthash),
                value: input.spent.value,
                spendable: input.spent.spendable,
            });
        }
        undo.txs.push(UndoTx {
            outputs: tx
                .outputs
                .iter()
                .map(|o| scripthash_prefix(&o.scripthash))
                .collect(),
            inputs,
        });
    }
    Ok(undo)
}

/// Adds to `batch` what removes the block at `height` (the index tip, whose coinbase is
/// `first`, whose transactions are `txids`) as `undo` says, and sets the tip to its parent.
pub fn disconnect(
    batch: &mut SortedBatch,
    height: u32,
    txids: &[Txid],
    undo: &UndoRow,
    first: TxNum,
    parent: TipRow,
) -> Result<(), IndexError> {
    if txids.len() != undo.txs.len() {
        return Err(IndexError::Inconsistent(format!(
            "block at height {height}: {} transactions, undo row for {}",
            txids.len(),
            undo.txs.len()
        )));
    }
    for (i, (txid, tx)) in txids.iter().zip(&undo.txs).enumerate().rev() {
        let t = TxNum(first.0 + i as u64);
        batch.delete(cf::TXS, TxRow::key(t));
        batch.delete(cf::TXID, TxidKey::encode(txid, t));
        for (vout, prefix) in tx.outputs.iter().enumerate() {
            batch.delete(cf::HISTORY, HistoryKey::encode_prefix(prefix, t));
            let op = OutPointNum {
                txnum: t,
                vout: vout as u32,
            };
            batch.delete(cf::UTXO, UtxoKey::encode_prefix(prefix, op));
        }
        for input in &tx.inputs {
            batch.delete(cf::HISTORY, HistoryKey::encode_prefix(&input.scripthash, t));
            batch.delete(cf::SPENT, input.spent.encode());
            // The spent output is unspent again, unless this block also created it.
            if input.spent.txnum < first && input.spendable {
                batch.put(
                    cf::UTXO,
                    UtxoKey::encode_prefix(&input.scripthash, input.spent),
                    input.value.to_le_bytes(),
                );
            }
        }
    }
    batch.delete(cf::BLOCKS, BlockRow::key(height));
    batch.delete(cf::FILTERS, FilterRow::key(height));
    batch.delete(cf::UNDO, UndoRow::key(height));
    // Whether or not tweaks are built now: a row written while they were must not outlive its
    // block (the height will be another block's).
    batch.delete(cf::TWEAKS, BlockTweaks::key(height));
    batch.put(cf::META, meta::TIP, parent.encode());
    Ok(())
}

#[cfg(test)]
mod tests;

//! Silent-payment tweaks read from one view: a block's eligible transactions with their tweak
//! data and taproot outputs, in block order.

use std::ops::Range;

use bitcoin::Txid;

use super::{IndexView, QueryError};
use crate::index::IndexError;
use crate::store::schema::{cf, meta, BlockTweaks, OutPointNum, TweakEntry, TweakRow, TxRow};
use crate::types::TxNum;

/// An eligible transaction of a block, with its tweak row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TweakedTx {
    /// Its place in the chain.
    pub txnum: TxNum,
    /// Its id.
    pub txid: Txid,
    /// Its tweak and taproot outputs.
    pub row: TweakRow,
}

impl IndexView<'_> {
    /// Whether this view can serve tweaks: built (`silent_payments`) and none still to build.
    /// Asked once per view: its snapshot cannot change. A view whose snapshot came after the
    /// index knew them all built (`Index::tweaks_built`) need not read the marker.
    pub fn tweaks_ready(&self) -> Result<bool, QueryError> {
        if let Some(ready) = self.tweaks_ready.get() {
            return Ok(*ready);
        }
        // The index's flag as it was before this view's snapshot (a view that took its snapshot
        // while the backfill ran reads the marker from it, whatever the flag says since).
        let ready = self.index.tweaks_from().is_some()
            && (self.tweaks_built || self.get(cf::META, meta::TWEAK_BACKFILL)?.is_none());
        Ok(*self.tweaks_ready.get_or_init(|| ready))
    }

    /// The eligible transactions of the view's block at `height`, in block order, with their
    /// tweak rows; `None` when tweaks are not ready, the height is below the first with tweaks
    /// or beyond the view's tip.
    pub fn tweaks_at(&self, height: u32) -> Result<Option<Vec<TweakedTx>>, QueryError> {
        let Some(rows) = self.tweak_rows_at(height)? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(rows.len());
        for (txnum, row) in rows {
            let Some(bytes) = self.get(cf::TXS, &TxRow::key(txnum))? else {
                return Err(IndexError::Inconsistent(format!(
                    "tweak row for TxNum {} without its transaction",
                    txnum.0
                ))
                .into());
            };
            let txid = TxRow::decode(&bytes)?.txid;
            out.push(TweakedTx { txnum, txid, row });
        }
        Ok(Some(out))
    }

    /// The tweak rows of the view's block at `height`, in block order, as [`Self::tweaks_at`]
    /// finds them, without the transactions' ids (one read fewer per transaction: a list of
    /// tweaks needs none).
    pub fn tweak_rows_at(&self, height: u32) -> Result<Option<Vec<(TxNum, TweakRow)>>, QueryError> {
        self.block_tweaks_mapped(height, |txnums, entry| {
            let txnum = txnums.start + u64::from(entry.position);
            if !txnums.contains(&txnum) {
                return Err(IndexError::Inconsistent(format!(
                    "tweak row of height {height} names position {} of {} transactions",
                    entry.position,
                    txnums.end - txnums.start
                )));
            }
            Ok(Some((TxNum(txnum), entry.row())))
        })
    }

    /// The tweaks of the view's block at `height` whose transaction has a taproot output of at
    /// least `dust` satoshis, in block order, as [`Self::tweaks_at`] finds them: read in place,
    /// nothing else of a transaction copied.
    pub fn tweak_list_at(
        &self,
        height: u32,
        dust: u64,
    ) -> Result<Option<Vec<[u8; 33]>>, QueryError> {
        self.block_tweaks_mapped(height, |_, entry| {
            Ok(entry.pays_at_least(dust).then_some(*entry.tweak))
        })
    }

    /// What `f` makes of each eligible transaction of the view's block at `height` (given the
    /// block's TxNums), read in place from its one row, those it keeps; `None` when tweaks are
    /// not ready, the height is below the first with tweaks or beyond the view's tip.
    fn block_tweaks_mapped<T>(
        &self,
        height: u32,
        mut f: impl FnMut(&Range<u64>, TweakEntry<'_>) -> Result<Option<T>, IndexError>,
    ) -> Result<Option<Vec<T>>, QueryError> {
        let indexed_here = self.index.tweaks_from().is_some_and(|f| height >= f);
        if !indexed_here || !self.tweaks_ready()? {
            return Ok(None);
        }
        let Some(txnums) = self.chain.txnums(height) else {
            return Ok(None);
        };
        let read = self.get_with(cf::TWEAKS, &BlockTweaks::key(height), |row| {
            let mut kept = Vec::new();
            for entry in BlockTweaks::entries(row) {
                kept.extend(f(&txnums, entry?)?);
            }
            Ok::<_, IndexError>(kept)
        })?;
        Ok(Some(read.transpose()?.unwrap_or_default()))
    }

    /// Whether the view's chain spends output `vout` of the transaction `txnum`.
    pub fn is_spent(&self, txnum: TxNum, vout: u32) -> Result<bool, QueryError> {
        let key = OutPointNum { txnum, vout }.encode();
        Ok(self.get(cf::SPENT, &key)?.is_some())
    }
}

//! Silent-payment tweaks read from one view: a block's eligible transactions with their tweak
//! data and taproot outputs, in block order.

use bitcoin::Txid;

use super::{IndexView, QueryError};
use crate::index::IndexError;
use crate::store::schema::{cf, meta, OutPointNum, TweakRow, TxRow};
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
    /// Asked once per view: its snapshot cannot change.
    pub fn tweaks_ready(&self) -> Result<bool, QueryError> {
        if let Some(ready) = self.tweaks_ready.get() {
            return Ok(*ready);
        }
        let ready = self.index.tweaks_from().is_some()
            && self.get(cf::META, meta::TWEAK_BACKFILL)?.is_none();
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
        let indexed_here = self.index.tweaks_from().is_some_and(|f| height >= f);
        if !indexed_here || !self.tweaks_ready()? {
            return Ok(None);
        }
        let Some(txnums) = self.chain.txnums(height) else {
            return Ok(None);
        };
        let mut rows = Vec::new();
        let start = TweakRow::key(TxNum(txnums.start));
        self.walk(cf::TWEAKS, &[], &start, false, |key, value| {
            let txnum = TweakRow::decode_key(key)?;
            if txnum.0 >= txnums.end {
                return Ok(false);
            }
            rows.push((txnum, TweakRow::decode(value)?));
            Ok(true)
        })?;
        Ok(Some(rows))
    }

    /// Whether the view's chain spends output `vout` of the transaction `txnum`.
    pub fn is_spent(&self, txnum: TxNum, vout: u32) -> Result<bool, QueryError> {
        let key = OutPointNum { txnum, vout }.encode();
        Ok(self.get(cf::SPENT, &key)?.is_some())
    }
}

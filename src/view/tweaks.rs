//! Silent-payment tweaks (BIP352) as the view's chain has them: per block, each eligible
//! transaction's tweak data and taproot outputs.

use bitcoin::Txid;

use crate::types::TxNum;

use super::model::{ChainView, ViewError};

/// Whether the index can answer for tweaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TweakState {
    /// The index builds no tweaks (`silent_payments = false`).
    Off,
    /// The tweaks of blocks indexed before they were turned on are still being built.
    Building,
    /// Every block of the view from the first height with tweaks has them.
    Ready,
}

/// Where a height stands for tweaks in one view.
enum TweakHeight {
    /// Beyond the view's tip (or no tip): no answer.
    AboveTip,
    /// Below the first height with tweaks, all built: no silent payment is older, none to list.
    BeforeFirst,
    /// A height whose rows are read (the read itself says when they are not ready).
    Indexed,
}

/// One eligible transaction of a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxTweak {
    /// Its place in the chain, for reads about its outputs.
    txnum: TxNum,
    /// Its id.
    pub txid: Txid,
    /// Its tweak data `input_hash·A`, a compressed point.
    pub tweak: [u8; 33],
    /// Its taproot outputs: output index, x-only key, amount in satoshis.
    pub outputs: Vec<(u32, [u8; 32], u64)>,
}

impl ChainView<'_> {
    /// Whether tweaks can be served from this view.
    pub fn tweak_state(&self) -> Result<TweakState, ViewError> {
        if self.model.index().tweaks_from().is_none() {
            return Ok(TweakState::Off);
        }
        Ok(match self.index.tweaks_ready()? {
            true => TweakState::Ready,
            false => TweakState::Building,
        })
    }

    /// The eligible transactions of the view's block at `height`, in block order: empty below
    /// the first height with tweaks (no silent payment is older), `None` above the tip or while
    /// tweaks are not [`TweakState::Ready`].
    pub fn block_tweaks(&self, height: u32) -> Result<Option<Vec<TxTweak>>, ViewError> {
        match self.tweak_height(height)? {
            TweakHeight::AboveTip => return Ok(None),
            TweakHeight::BeforeFirst => return Ok(Some(Vec::new())),
            TweakHeight::Indexed => {}
        }
        let rows = self.index.tweaks_at(height)?;
        Ok(rows.map(|rows| {
            rows.into_iter()
                .map(|t| TxTweak {
                    txnum: t.txnum,
                    txid: t.txid,
                    tweak: t.row.tweak,
                    outputs: t.row.outputs,
                })
                .collect()
        }))
    }

    /// The tweaks of the view's block at `height` whose transaction has a taproot output of at
    /// least `dust` satoshis, as [`Self::block_tweaks`] finds them: what a list of tweaks needs,
    /// without the transactions' ids or outputs.
    pub fn block_tweak_list(
        &self,
        height: u32,
        dust: u64,
    ) -> Result<Option<Vec<[u8; 33]>>, ViewError> {
        match self.tweak_height(height)? {
            TweakHeight::AboveTip => return Ok(None),
            TweakHeight::BeforeFirst => return Ok(Some(Vec::new())),
            TweakHeight::Indexed => {}
        }
        Ok(self.index.tweak_list_at(height, dust)?)
    }

    /// Where `height` stands for tweaks in this view.
    fn tweak_height(&self, height: u32) -> Result<TweakHeight, ViewError> {
        let first = self.model.index().tweaks_from();
        if self.tip().is_none_or(|(tip, _)| height > tip) {
            return Ok(TweakHeight::AboveTip);
        }
        if first.is_some_and(|f| height < f) && self.tweak_state()? == TweakState::Ready {
            return Ok(TweakHeight::BeforeFirst);
        }
        Ok(TweakHeight::Indexed)
    }

    /// Whether `tx` has a taproot output of at least `dust` satoshis that the view's chain has
    /// not spent (cut-through: a scanning wallet need not look at what is gone). Only outputs
    /// of at least `dust` are looked up, the largest first, until one is unspent.
    pub fn has_unspent_taproot(&self, tx: &TxTweak, dust: u64) -> Result<bool, ViewError> {
        let mut candidates: Vec<&(u32, [u8; 32], u64)> =
            tx.outputs.iter().filter(|(_, _, v)| *v >= dust).collect();
        candidates.sort_by_key(|o| std::cmp::Reverse(o.2));
        for (vout, _, _) in candidates {
            if !self.tweak_output_spent(tx, *vout)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether the view's chain has spent output `vout` of `tx`.
    pub fn tweak_output_spent(&self, tx: &TxTweak, vout: u32) -> Result<bool, ViewError> {
        Ok(self.index.is_spent(tx.txnum, vout)?)
    }
}

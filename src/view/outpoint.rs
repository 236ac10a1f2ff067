//! An output's questions: whether it exists and where, and what spends it (the chain first,
//! then the mempool).

use bitcoin::{OutPoint, Txid};

use super::model::{ChainView, ViewError};
use crate::types::{Height, ScriptHash};

/// An output's status as Electrum 1.7 defines it: which transactions fund and spend it, and
/// where they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutpointStatus {
    /// Where the funding transaction stands. `None`: no such output, in the chain or the
    /// mempool.
    pub height: Option<Height>,
    /// The spending transaction and where it stands.
    pub spender: Option<(Txid, Height)>,
}

impl OutpointStatus {
    /// Whether a transaction of it is in the mempool: a block that confirms its parents changes
    /// its height from -1 to 0 without touching its script.
    pub fn unconfirmed(&self) -> bool {
        let unconfirmed = |h: Height| h.confirmed().is_none();
        self.height.is_some_and(unconfirmed) || self.spender.is_some_and(|(_, h)| unconfirmed(h))
    }
}

/// The input that spends an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spender {
    /// The spending transaction.
    pub txid: Txid,
    /// Its input that spends the output.
    pub vin: u32,
    /// The spending block's height; `None` in the mempool.
    pub height: Option<u32>,
}

impl ChainView<'_> {
    /// The status of `op`, and the script hash of its output when the output exists.
    pub fn outpoint_status(
        &self,
        op: &OutPoint,
    ) -> Result<(OutpointStatus, Option<ScriptHash>), ViewError> {
        let pool = self.mempool();
        if let Some(found) = self.confirmed(&op.txid)? {
            let (tx, height) = (found.tx, found.position.height);
            let Some(out) = usize::try_from(op.vout).ok().and_then(|i| tx.output.get(i)) else {
                return Ok((OutpointStatus::default(), None));
            };
            let spender = match self.index.spender(&op.txid, op.vout)? {
                Some(spend) => Some((spend.txid, Height::Confirmed(spend.height))),
                None => pool.and_then(|p| p.spender(op)),
            };
            let status = OutpointStatus {
                height: Some(Height::Confirmed(height)),
                spender,
            };
            return Ok((status, Some(ScriptHash::of(&out.script_pubkey))));
        }
        match pool.and_then(|p| p.output(op)) {
            Some((Some(out), height)) => {
                let status = OutpointStatus {
                    height: Some(height),
                    spender: pool.and_then(|p| p.spender(op)),
                };
                Ok((status, Some(ScriptHash::of(&out.script_pubkey))))
            }
            _ => Ok((OutpointStatus::default(), None)),
        }
    }

    /// What spends an output: a confirmed input, else a mempool one.
    pub fn spender(&self, op: &OutPoint) -> Result<Option<Spender>, ViewError> {
        if let Some(spend) = self.index.spender(&op.txid, op.vout)? {
            return Ok(Some(Spender {
                txid: spend.txid,
                vin: spend.vin,
                height: Some(spend.height),
            }));
        }
        Ok(self.mempool_spender(op))
    }

    fn mempool_spender(&self, op: &OutPoint) -> Option<Spender> {
        let (txid, vin, _) = self.mempool()?.spending_input(op)?;
        Some(Spender {
            txid,
            vin,
            height: None,
        })
    }

    /// What spends each of a transaction's `outputs` outputs, in output order: confirmed
    /// inputs (one scan of its spent-by rows when `confirmed`), else mempool ones.
    pub fn spenders(
        &self,
        txid: &Txid,
        outputs: usize,
        confirmed: bool,
    ) -> Result<Vec<Option<Spender>>, ViewError> {
        let mut answers = vec![None; outputs];
        if confirmed {
            for spend in self.index.spenders(txid)?.unwrap_or_default() {
                if let Some(slot) = answers.get_mut(spend.vout as usize) {
                    *slot = Some(Spender {
                        txid: spend.txid,
                        vin: spend.vin,
                        height: Some(spend.height),
                    });
                }
            }
        }
        for (vout, slot) in answers.iter_mut().enumerate() {
            if slot.is_none() {
                *slot = self.mempool_spender(&OutPoint::new(*txid, vout as u32));
            }
        }
        Ok(answers)
    }
}

//! A block's undo data in cairn's own types: what every input of every transaction spent.

use bitcoin::{Amount, ScriptBuf, TxOut};
use bitcoinkernel::prelude::*;
use bitcoinkernel::BlockSpentOutputs;

/// The output one input spent, with where it was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpentOutput {
    /// The spent output's script and amount.
    pub txout: TxOut,
    /// The height of the block that created it.
    pub height: u32,
    /// Whether it was a coinbase output.
    pub coinbase: bool,
}

/// The spent outputs of one block: one list per non-coinbase transaction, in block order, each
/// with one entry per input in input order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockUndo {
    /// Per transaction (coinbase excluded), per input.
    pub txs: Vec<Vec<SpentOutput>>,
}

impl BlockUndo {
    pub(crate) fn from_kernel(spent: &BlockSpentOutputs) -> Self {
        let txs = spent
            .iter()
            .map(|tx| {
                tx.coins()
                    .map(|coin| {
                        let out = coin.output();
                        SpentOutput {
                            txout: TxOut {
                                value: Amount::from_sat(u64::try_from(out.value()).unwrap_or(0)),
                                script_pubkey: ScriptBuf::from_bytes(
                                    out.script_pubkey().to_bytes(),
                                ),
                            },
                            height: coin.confirmation_height(),
                            coinbase: coin.is_coinbase(),
                        }
                    })
                    .collect()
            })
            .collect();
        BlockUndo { txs }
    }

    /// How many inputs the block spends in all.
    pub fn input_count(&self) -> usize {
        self.txs.iter().map(Vec::len).sum()
    }
}

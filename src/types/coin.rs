//! An unspent output as the mempool's checks and the servers read it.

use bitcoin::TxOut;

/// A confirmed output nothing in the chain spends: what it pays and where it was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coin {
    /// Its amount and script.
    pub output: TxOut,
    /// The height of the block that created it.
    pub height: u32,
    /// Whether a coinbase created it (spendable 100 blocks on).
    pub coinbase: bool,
}

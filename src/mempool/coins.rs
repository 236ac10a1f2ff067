//! What the mempool asks of the chain: confirmed transactions and their unspent outputs. The
//! index answers in production; a unit test answers from coins it holds in memory.

use bitcoin::{BlockHash, OutPoint, Txid};

use crate::index::Index;
use crate::types::Coin;

/// The chain could not answer (the index's error, as text).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct CoinError(pub String);

/// The confirmed chain as the mempool's rules read it.
pub trait CoinSource {
    /// The height of the chain's tip; `None` for an empty chain.
    fn tip_height(&self) -> Option<u32>;

    /// The median time past of the chain's tip (Core's `GetMedianTimePast`: the median of its
    /// and its ten predecessors' times); `None` for an empty chain.
    fn tip_median_time_past(&self) -> Option<u32> {
        self.median_time_past(self.tip_height()?)
    }

    /// The median time past of the block at `height` of the chain; `None` above the tip.
    fn median_time_past(&self, height: u32) -> Option<u32>;

    /// The hash of the chain's block at `height`; `None` above the tip.
    fn block_hash(&self, height: u32) -> Option<BlockHash>;

    /// Whether a transaction is confirmed.
    fn is_confirmed(&self, txid: &Txid) -> Result<bool, CoinError>;

    /// A confirmed output nothing in the chain spends.
    fn confirmed_unspent(&self, op: &OutPoint) -> Result<Option<Coin>, CoinError>;

    /// Whether a confirmed transaction has this output and nothing in the chain spends it.
    fn is_confirmed_unspent(&self, op: &OutPoint) -> Result<bool, CoinError>;
}

impl CoinSource for Index {
    fn tip_height(&self) -> Option<u32> {
        self.tip().map(|(height, _)| height)
    }

    fn median_time_past(&self, height: u32) -> Option<u32> {
        self.with_chain(|chain| {
            chain.header(height)?;
            let mut times: Vec<u32> = (height.saturating_sub(10)..=height)
                .filter_map(|h| chain.header(h).map(|header| header.time))
                .collect();
            times.sort_unstable();
            times.get(times.len() / 2).copied()
        })
    }

    fn block_hash(&self, height: u32) -> Option<BlockHash> {
        self.with_chain(|chain| chain.hash(height))
    }

    fn is_confirmed(&self, txid: &Txid) -> Result<bool, CoinError> {
        self.tx_position(txid)
            .map(|position| position.is_some())
            .map_err(|e| CoinError(e.to_string()))
    }

    fn confirmed_unspent(&self, op: &OutPoint) -> Result<Option<Coin>, CoinError> {
        Index::confirmed_unspent(self, op).map_err(|e| CoinError(e.to_string()))
    }

    fn is_confirmed_unspent(&self, op: &OutPoint) -> Result<bool, CoinError> {
        Index::is_confirmed_unspent(self, op).map_err(|e| CoinError(e.to_string()))
    }
}

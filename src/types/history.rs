//! A script's history as wallets read it: each transaction with where it stands.

use bitcoin::{Amount, Txid};

/// Where a transaction of a script's history stands. Electrum answers it as a number (the
/// block height, 0 or -1: [`Height::electrum`]); here each case has its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Height {
    /// In the block at this height.
    Confirmed(u32),
    /// In the mempool, every input confirmed (Electrum's 0).
    Unconfirmed,
    /// In the mempool, spending another mempool transaction (Electrum's -1).
    UnconfirmedParents,
}

impl Height {
    /// The number Electrum answers: the block height, 0 or -1.
    pub fn electrum(self) -> i64 {
        match self {
            Height::Confirmed(height) => i64::from(height),
            Height::Unconfirmed => 0,
            Height::UnconfirmedParents => -1,
        }
    }

    /// The block height, if confirmed.
    pub fn confirmed(self) -> Option<u32> {
        match self {
            Height::Confirmed(height) => Some(height),
            Height::Unconfirmed | Height::UnconfirmedParents => None,
        }
    }

    /// The mempool's case for a transaction with or without an unconfirmed parent.
    pub fn unconfirmed(with_unconfirmed_parent: bool) -> Height {
        match with_unconfirmed_parent {
            true => Height::UnconfirmedParents,
            false => Height::Unconfirmed,
        }
    }
}

/// One transaction of a script's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryEntry {
    /// The transaction.
    pub txid: Txid,
    /// Where it stands.
    pub height: Height,
    /// Its fee, known for a mempool entry (Electrum gives it there only).
    pub fee: Option<Amount>,
}

impl HistoryEntry {
    /// A transaction confirmed at `height`.
    pub fn confirmed(txid: Txid, height: u32) -> HistoryEntry {
        HistoryEntry {
            txid,
            height: Height::Confirmed(height),
            fee: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heights_answer_as_electrum_numbers() {
        assert_eq!(Height::Confirmed(2473).electrum(), 2473);
        assert_eq!(Height::Unconfirmed.electrum(), 0);
        assert_eq!(Height::UnconfirmedParents.electrum(), -1);
        assert_eq!(Height::unconfirmed(true), Height::UnconfirmedParents);
        assert_eq!(Height::Confirmed(0).confirmed(), Some(0));
        assert_eq!(Height::Unconfirmed.confirmed(), None);
    }
}

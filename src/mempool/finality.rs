//! Whether a transaction could be mined in the next block, as Core's `CheckFinalTxAtTip`
//! (`IsFinalTx` at the tip's height plus one and the tip's median time past, BIP113).

use bitcoin::Transaction;

use super::coins::CoinSource;
use super::rejection::Rejection;

/// Core's `LOCKTIME_THRESHOLD`: a lock time below it is a height, else a time.
const LOCKTIME_THRESHOLD: u32 = 500_000_000;

/// Core's `IsFinalTx`: no lock time, one already passed at `height` and `time`, or every input's
/// sequence final (which turns the lock time off).
pub fn is_final(tx: &Transaction, height: u32, time: u32) -> bool {
    let lock = tx.lock_time.to_consensus_u32();
    if lock == 0 {
        return true;
    }
    let now = if lock < LOCKTIME_THRESHOLD {
        height
    } else {
        time
    };
    lock < now
        || tx
            .input
            .iter()
            .all(|i| i.sequence == bitcoin::Sequence::MAX)
}

/// Core's `CheckFinalTxAtTip`: final in the block after the tip, whose time is at least the
/// tip's median time past.
pub fn is_final_at_tip(tx: &Transaction, coins: &dyn CoinSource) -> bool {
    let (next, time) = next_block(coins);
    is_final(tx, next, time)
}

/// The height of the block after the tip, and the earliest time it may have.
pub fn next_block(coins: &dyn CoinSource) -> (u32, u32) {
    let next = coins.tip_height().map_or(0, |h| h.saturating_add(1));
    (next, coins.tip_median_time_past().unwrap_or(0))
}

/// [`is_final_at_tip`] as an acceptance check: Core's `non-final`.
pub fn check_final_at_tip(tx: &Transaction, coins: &dyn CoinSource) -> Result<(), Rejection> {
    if is_final_at_tip(tx, coins) {
        Ok(())
    } else {
        Err(Rejection::NonFinal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::absolute::LockTime;
    use bitcoin::{Sequence, TxIn};

    fn tx(lock: u32, sequence: Sequence) -> Transaction {
        Transaction {
            version: bitcoin::transaction::Version::TWO,
            lock_time: LockTime::from_consensus(lock),
            input: vec![TxIn {
                sequence,
                ..Default::default()
            }],
            output: vec![],
        }
    }

    #[test]
    fn lock_times_pass_strictly_below_the_height_or_the_median_time() {
        let locked = Sequence::ENABLE_LOCKTIME_NO_RBF;
        assert!(is_final(&tx(0, locked), 0, 0));
        assert!(is_final(&tx(99, locked), 100, 0));
        assert!(
            !is_final(&tx(100, locked), 100, 0),
            "not below the next height"
        );
        let t = 1_700_000_000;
        assert!(is_final(&tx(t, locked), 100, t + 1));
        assert!(
            !is_final(&tx(t, locked), 100, t),
            "not below the median time"
        );
        assert!(
            !is_final(&tx(t, locked), u32::MAX, 0),
            "a time, not a height"
        );
        assert!(
            is_final(&tx(u32::MAX, Sequence::MAX), 0, 0),
            "final sequences"
        );
    }
}

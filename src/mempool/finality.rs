//! Whether a transaction could be mined in the next block, as Core's `CheckFinalTxAtTip`
//! (`IsFinalTx` at the tip's height plus one and the tip's median time past, BIP113).

use bitcoin::Transaction;

use super::coins::CoinSource;
use crate::policy::Rejection;

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

/// BIP68's flags and mask (Core's `CTxIn::SEQUENCE_LOCKTIME_*`).
const DISABLE_FLAG: u32 = 1 << 31;
const TYPE_FLAG: u32 = 1 << 22;
const MASK: u32 = 0x0000_ffff;
/// BIP68's time granularity: 512 seconds.
const GRANULARITY: u32 = 9;

/// The last height and time at which a transaction is still locked by its inputs' relative
/// lock times (Core's `LockPoints`, from `CalculateSequenceLocks`); -1 for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockPoints {
    /// The last locked height.
    pub height: i64,
    /// The last locked median time past.
    pub time: i64,
}

/// Core's `CalculateSequenceLocks` at the tip for a version 2 or later transaction whose inputs
/// spend coins of blocks `heights` (`None` for a mempool parent's: the block after the tip, as
/// Core's `MEMPOOL_HEIGHT`): a height lock counts from the coin's block, a time lock from the
/// The height and hash of the block of the highest of `heights` (the confirmed coins'), for
/// [`super::MempoolEntry::coins_block`].
pub fn coins_block(
    heights: &[Option<u32>],
    coins: &dyn CoinSource,
) -> Option<(u32, bitcoin::BlockHash)> {
    let highest = heights.iter().flatten().max().copied()?;
    Some((highest, coins.block_hash(highest)?))
}

/// median time past of the block before it.
pub fn sequence_locks(
    tx: &Transaction,
    heights: &[Option<u32>],
    coins: &dyn CoinSource,
) -> LockPoints {
    let mut locks = LockPoints {
        height: -1,
        time: -1,
    };
    if tx.version.0 < 2 {
        return locks;
    }
    let (next, _) = next_block(coins);
    for (input, height) in tx.input.iter().zip(heights) {
        let height = height.unwrap_or(next);
        let sequence = input.sequence.0;
        if sequence & DISABLE_FLAG != 0 {
            continue;
        }
        let value = i64::from(sequence & MASK);
        if sequence & TYPE_FLAG != 0 {
            let before = height.saturating_sub(1);
            let coin_time = coins
                .median_time_past(before)
                .or_else(|| coins.tip_median_time_past());
            let coin_time = i64::from(coin_time.unwrap_or(0));
            locks.time = locks.time.max(coin_time + (value << GRANULARITY) - 1);
        } else {
            locks.height = locks.height.max(i64::from(height) + value - 1);
        }
    }
    locks
}

/// Core's `EvaluateSequenceLocks` at the block after the tip: whether the locks have passed.
pub fn locks_passed(locks: LockPoints, next_height: u32, time: u32) -> bool {
    locks.height < i64::from(next_height) && locks.time < i64::from(time)
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

//! The rolling minimum fee (Core's `CTxMemPool::GetMinFee` and `trackPackageRemoved`): when a
//! full mempool evicts, what enters after must pay the evicted package's fee rate plus the
//! incremental relay fee; after the next block that floor halves every 12 hours (every 6 or 3
//! while the pool is under a half or a quarter full), and below half the incremental fee it is
//! gone. Without it a client could refill a full pool at the fee just evicted, over and over,
//! each time pushing out what paid only a little less (the churn Core's floor prevents).

/// Core's `ROLLING_FEE_HALFLIFE`: 12 hours, in seconds.
const HALFLIFE_SECS: f64 = 12.0 * 60.0 * 60.0;
/// How often the floor decays at most (Core's `lastRollingFeeUpdate + 10`), seconds.
const UPDATE_EVERY_SECS: i64 = 10;

/// The floor's state.
#[derive(Debug)]
pub(super) struct RollingFee {
    /// The incremental relay fee, sat per 1,000 vbytes (`-incrementalrelayfee`, which cairn
    /// keeps equal to the minimum relay fee: 1,000 by default).
    incremental: u64,
    /// Satoshis per 1,000 vbytes; 0 when there is no floor.
    rate: f64,
    /// When it last decayed (or rose), seconds since 1970.
    last_update: i64,
    /// Whether a block came since it last rose: it decays only then.
    block_since_bump: bool,
}

impl RollingFee {
    /// No floor yet, with this incremental relay fee.
    pub(super) fn new(incremental: u64) -> RollingFee {
        RollingFee {
            incremental,
            rate: 0.0,
            last_update: 0,
            block_since_bump: false,
        }
    }

    /// An eviction of a package paying `fee` over `vsize` vbytes at `now`: the floor is at
    /// least its rate plus the incremental relay fee (`trackPackageRemoved`).
    pub(super) fn evicted(&mut self, fee: u64, vsize: u64, now: i64) {
        let rate = fee.saturating_mul(1000) / vsize.max(1) + self.incremental;
        let rate = rate as f64;
        if rate > self.rate {
            self.rate = rate;
            self.block_since_bump = false;
            self.last_update = now;
        }
    }

    /// A block connected at `now`: from now on the floor may decay, counted from now (Core's
    /// `removeForBlock` resets `lastRollingFeeUpdate`).
    pub(super) fn block(&mut self, now: i64) {
        self.block_since_bump = true;
        self.last_update = now;
    }

    /// The floor at `now` in satoshis per 1,000 vbytes, decayed first for a pool `fullness`
    /// full (its size over its limit): 0, or at least the incremental relay fee.
    pub(super) fn floor(&mut self, now: i64, fullness: f64) -> u64 {
        if !self.block_since_bump || self.rate == 0.0 {
            return self.rate.round() as u64;
        }
        if now > self.last_update + UPDATE_EVERY_SECS {
            let halflife = match fullness {
                f if f < 0.25 => HALFLIFE_SECS / 4.0,
                f if f < 0.5 => HALFLIFE_SECS / 2.0,
                _ => HALFLIFE_SECS,
            };
            let elapsed = (now - self.last_update) as f64;
            self.rate /= 2f64.powf(elapsed / halflife);
            self.last_update = now;
            if self.rate < self.incremental as f64 / 2.0 {
                self.rate = 0.0;
                return 0;
            }
        }
        (self.rate.round() as u64).max(self.incremental)
    }
}

/// The fee `per_kvb` asks of `vsize` vbytes, rounded up (Core's `CFeeRate::GetFee`).
pub fn fee_for(per_kvb: u64, vsize: u64) -> u64 {
    per_kvb.saturating_mul(vsize).div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eviction_raises_the_floor_which_halves_every_halflife_after_a_block() {
        let mut fee = RollingFee::new(1_000);
        assert_eq!(fee.floor(0, 1.0), 0);
        // 5 sat/vB evicted: 6 sat/vB to enter.
        fee.evicted(500, 100, 1_000);
        assert_eq!(
            fee.floor(1_000 + 86_400, 1.0),
            6_000,
            "no decay before a block"
        );
        // The decay counts from the block, not from the eviction.
        fee.block(1_000 + 86_400);
        assert_eq!(fee.floor(1_000 + 86_400 + 5, 1.0), 6_000);
        let half = 1_000 + 86_400 + 12 * 3_600;
        assert_eq!(fee.floor(half, 1.0), 3_000);
        // A lower eviction does not lower it.
        fee.evicted(100, 100, half);
        assert_eq!(fee.floor(half, 1.0), 3_000);
        // A quarter-full pool decays four times as fast: 3 hours halve it.
        assert_eq!(fee.floor(half + 3 * 3_600, 0.1), 1_500);
        // Under half the incremental fee it is gone, never below the incremental fee before.
        assert_eq!(fee.floor(half + 4 * 3_600, 0.1), 1_191);
        assert_eq!(fee.floor(half + 10 * 3_600, 0.1), 0);
        assert_eq!(fee.floor(half + 20 * 3_600, 0.1), 0);
    }

    #[test]
    fn a_fee_rate_asks_whole_satoshis_rounded_up() {
        assert_eq!(fee_for(1_000, 141), 141);
        assert_eq!(fee_for(1_500, 141), 212);
        assert_eq!(fee_for(0, 141), 0);
    }
}

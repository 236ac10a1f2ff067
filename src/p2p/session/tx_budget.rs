//! What one peer's transactions may cost the mempool. Every transaction a peer sends is checked
//! (its inputs looked up, its scripts run, its cluster linearized, and with Core 31's cluster
//! mempool a replacement's changed clusters linearized twice), whether it was asked for or not,
//! valid or not. Core bounds a peer's share by serving peers in turn, one message each
//! (net.cpp's `ThreadMessageHandler`); cairn's peers run side by side, so each peer pays for its
//! transactions in the units Electrum's broadcasts pay ([`crate::listen::broadcast_checks`],
//! about a millisecond of CPU each) into an account that drains at a steady rate, and while the
//! account is over its allowance the peer is not read from: its next messages wait in its
//! socket. An honest peer relays a few transactions a second, under a unit each, and never waits.

use std::time::Duration;

use crate::listen::cost::units;
use crate::listen::{broadcast_checks, Account};

/// How much a peer's transactions may cost before it waits, and how fast that drains.
#[derive(Debug, Clone, Copy)]
pub struct TxAllowance {
    /// Units a peer may run ahead.
    pub burst: f64,
    /// Units a second it earns back.
    pub per_sec: f64,
}

/// An inbound peer's: about 2.5% of a core over time (some 47 ordinary transactions a second)
/// and a burst of 250 units (about 470).
pub const INBOUND: TxAllowance = TxAllowance {
    burst: 250.0,
    per_sec: 25.0,
};

/// An outbound peer's (one cairn chose): ten times an inbound one's, so a mempool it sends on
/// request (BIP35) or a busy hour arrives at its pace.
pub const OUTBOUND: TxAllowance = TxAllowance {
    burst: 2_500.0,
    per_sec: 250.0,
};

/// One peer's account of its transactions' checks.
#[derive(Debug)]
pub struct TxBudget {
    spent: Account,
    allowance: TxAllowance,
}

impl TxBudget {
    /// An empty account under `allowance`.
    pub fn new(allowance: TxAllowance) -> Self {
        TxBudget {
            spent: Account::default(),
            allowance,
        }
    }

    /// Charges the checks of `raws` (refused or not) and the linearization work they caused.
    pub fn charge(&self, raws: &[&[u8]], refused: bool, linearized: u64) {
        let bytes = raws.iter().map(|r| r.len()).sum();
        let cost = broadcast_checks(raws, refused, linearized);
        (self.spent).charge(units(raws.len(), cost, bytes), self.allowance.per_sec);
    }

    /// How long the peer must wait before it is read from again: `None` within its allowance.
    pub fn wait(&self) -> Option<Duration> {
        let over = self.spent.level(self.allowance.per_sec) - self.allowance.burst;
        (over > 0.0).then(|| Duration::from_secs_f64(over / self.allowance.per_sec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ordinary payment of about 225 bytes, valid or not (only its size is charged here).
    const PAYMENT: [u8; 225] = [0; 225];

    #[test]
    fn an_honest_peers_relay_never_waits() {
        let budget = TxBudget::new(INBOUND);
        for _ in 0..400 {
            budget.charge(&[&PAYMENT], false, 1);
        }
        assert_eq!(
            budget.wait(),
            None,
            "400 payments at once are within the burst"
        );
    }

    #[test]
    fn a_peer_over_its_allowance_waits_for_what_it_ran_over() {
        let budget = TxBudget::new(INBOUND);
        // A replacement that made cairn linearize 200 clusters of 64, refused, again and again.
        for _ in 0..20 {
            budget.charge(&[&PAYMENT], true, 200 * 64 * 64);
        }
        let wait = budget.wait().expect("over its allowance");
        // 20 × (0.05 + 11 rows + 500 + 2,048 = 2,559 rows, 51.2 units) − 250 = 774 units over.
        assert!(
            wait > Duration::from_secs(30) && wait < Duration::from_secs(32),
            "{wait:?}"
        );
        let outbound = TxBudget::new(OUTBOUND);
        for _ in 0..20 {
            outbound.charge(&[&PAYMENT], true, 200 * 64 * 64);
        }
        assert_eq!(outbound.wait(), None, "an outbound peer's burst is larger");
    }
}

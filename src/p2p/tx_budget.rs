//! What an inbound peer's transactions may cost the mempool. Every transaction a peer sends is
//! checked (its inputs looked up, its scripts run, its cluster linearized, and with Core 31's
//! cluster mempool a replacement's changed clusters linearized twice), whether it was asked for
//! or not, valid or not. Core bounds a peer's share by serving peers in turn, one message each
//! (net.cpp's `ThreadMessageHandler`); cairn's peers run side by side, so an inbound peer's host
//! pays for its transactions in the units Electrum's broadcasts pay
//! ([`crate::listen::broadcast_checks`], about a millisecond of CPU each) into an account that
//! drains at a steady rate and outlives its connections. A transaction whose estimated checks
//! do not fit the account is not checked: it is dropped unread, neither refused nor marked as
//! answered, so the same transaction from another peer still enters; the peer's other messages
//! (blocks, headers, pings) are read as ever. The estimate is taken before the work, the rest
//! (the linearization) charged after. An honest peer relays a few transactions a second, under
//! a unit each, and never comes near. Outbound peers, which cairn chose, are not held (as in
//! Core); an exempt host's connections (loopback, where Tor arrives) each have their own.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use super::inbound::host;
use super::sync::PeerId;
use crate::listen::cost::units;
use crate::listen::{broadcast_checks, Account};
use crate::types::Subnet;

/// How much a host's transactions may cost before they are dropped, and how fast that drains.
#[derive(Debug, Clone, Copy)]
pub struct TxAllowance {
    /// Units a host may run ahead.
    pub burst: f64,
    /// Units a second it earns back.
    pub per_sec: f64,
}

/// An inbound host's: about 2.5% of a core over time (some 47 ordinary transactions a second)
/// and a burst of 250 units (about 470).
pub const INBOUND: TxAllowance = TxAllowance {
    burst: 250.0,
    per_sec: 25.0,
};

/// One host's (or one exempt connection's) account of its transactions' checks.
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

    /// What checking `raw` costs at most before any linearization: its checks as if refused.
    pub fn estimate(raw: &[u8]) -> f64 {
        units(1, broadcast_checks(&[raw], true, 0), raw.len())
    }

    /// Whether `estimate` more units fit the allowance now; an idle account takes one however
    /// large (a standard transaction of a thousand inputs costs more than the burst), which it
    /// then pays back over time.
    pub fn has_room(&self, estimate: f64) -> bool {
        let level = self.spent.level(self.allowance.per_sec);
        level <= 0.0 || level + estimate <= self.allowance.burst
    }

    /// Charges the checks of `raws` (refused or not) and the linearization work they caused.
    pub fn charge(&self, raws: &[&[u8]], refused: bool, linearized: u64) {
        let bytes = raws.iter().map(|r| r.len()).sum();
        let cost = broadcast_checks(raws, refused, linearized);
        (self.spent).charge(units(raws.len(), cost, bytes), self.allowance.per_sec);
    }

    fn idle(&self) -> bool {
        self.spent.level(self.allowance.per_sec) <= 0.0
    }
}

/// Every inbound host's account, kept while it has a peer connected or has not drained, and
/// which account each connected peer pays into.
#[derive(Debug)]
pub struct TxBudgets {
    exempt: Vec<Subnet>,
    accounts: Mutex<Accounts>,
}

#[derive(Debug, Default)]
struct Accounts {
    by_host: HashMap<Subnet, Arc<TxBudget>>,
    by_peer: HashMap<PeerId, Arc<TxBudget>>,
}

impl TxBudgets {
    /// No accounts yet; hosts in `exempt` get one per connection.
    pub fn new(exempt: Vec<Subnet>) -> Self {
        TxBudgets {
            exempt,
            accounts: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Accounts> {
        self.accounts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The account inbound peer `id` from `ip` pays into: its host's (kept from its host's
    /// earlier connections), or its own for an exempt host. Drained accounts no peer holds are
    /// dropped meanwhile.
    pub fn join(&self, id: PeerId, ip: IpAddr) -> Arc<TxBudget> {
        let mut accounts = self.lock();
        let Accounts { by_host, by_peer } = &mut *accounts;
        by_host.retain(|_, b| Arc::strong_count(b) > 1 || !b.idle());
        let budget = match self.exempt.iter().any(|net| net.contains(ip)) {
            true => Arc::new(TxBudget::new(INBOUND)),
            false => (by_host.entry(host(ip)))
                .or_insert_with(|| Arc::new(TxBudget::new(INBOUND)))
                .clone(),
        };
        by_peer.insert(id, budget.clone());
        budget
    }

    /// The account of connected peer `id`, if it has one.
    pub fn of(&self, id: PeerId) -> Option<Arc<TxBudget>> {
        self.lock().by_peer.get(&id).cloned()
    }

    /// Peer `id` has gone (its host's account stays until it drains).
    pub fn leave(&self, id: PeerId) {
        self.lock().by_peer.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ordinary payment of about 225 bytes, valid or not (only its size is charged here).
    const PAYMENT: [u8; 225] = [0; 225];

    #[test]
    fn an_honest_peers_relay_always_has_room() {
        let budget = TxBudget::new(INBOUND);
        for _ in 0..400 {
            assert!(budget.has_room(TxBudget::estimate(&PAYMENT)));
            budget.charge(&[&PAYMENT], false, 1);
        }
    }

    #[test]
    fn refused_replacements_run_out_of_room() {
        let budget = TxBudget::new(INBOUND);
        // A replacement that made cairn linearize 200 clusters of 64, refused: 0.05 + 11 rows +
        // 500 + 2,048 = 2,559 rows, about 51.3 units each; the fifth does not fit 250.
        let tried = (0..20)
            .take_while(|_| budget.has_room(TxBudget::estimate(&PAYMENT)))
            .inspect(|_| budget.charge(&[&PAYMENT], true, 200 * 64 * 64))
            .count();
        assert_eq!(tried, 5);
    }

    #[test]
    fn a_hosts_account_outlives_its_connections_but_not_an_exempt_ones() {
        let budgets = TxBudgets::new(vec!["127.0.0.1/32".parse().unwrap()]);
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        budgets.join(1, ip).charge(&[&PAYMENT], true, 40_000_000);
        budgets.leave(1);
        let again = budgets.join(2, ip);
        assert!(
            !again.has_room(1.0),
            "a reconnection starts where its host left off"
        );
        assert!(Arc::ptr_eq(&again, &budgets.of(2).unwrap()));
        let tor: IpAddr = "127.0.0.1".parse().unwrap();
        budgets.join(3, tor).charge(&[&PAYMENT], true, 40_000_000);
        assert!(
            budgets.join(4, tor).has_room(1.0),
            "an exempt connection's is its own"
        );
        budgets.leave(2);
        budgets.leave(3);
        budgets.leave(4);
        assert!(budgets.of(2).is_none());
    }
}

//! What an inbound peer's transactions may cost the mempool. Every transaction a peer sends is
//! checked (its inputs looked up, its scripts run, its cluster linearized, and with Core 31's
//! cluster mempool a replacement's changed clusters linearized twice), whether it was asked for
//! or not, valid or not. Core bounds a peer's share by serving peers in turn, one message each
//! (net.cpp's `ThreadMessageHandler`); cairn's peers run side by side, so an inbound peer's host
//! pays for its transactions in the units Electrum's broadcasts pay
//! ([`crate::work::broadcast_checks`], about a millisecond of CPU each) into an account that
//! drains at a steady rate and outlives its connections. A transaction whose estimated checks
//! do not fit the account is not checked: it is dropped unread, neither refused nor marked as
//! answered, so the same transaction from another peer still enters; the peer's other messages
//! (blocks, headers, pings) are read as ever. The estimate is taken before the work, the rest
//! (the linearization) charged after. An honest peer relays a few transactions a second, under
//! a unit each, and never comes near. Outbound peers, which cairn chose, are not held (as in
//! Core); an exempt host's connections (loopback, where Tor arrives) each have their own. A
//! host's account is one of its group's (IPv4 /24, IPv6 /48; every exempt connection together
//! is one group, kept while cairn runs), which may run up four hosts' worth, and every inbound
//! peer's together are held to ten hosts' worth: a subnet, or Tor's loopback, takes a tenth of
//! a core at most, and inbound relay all together a quarter, while outbound peers' transactions
//! are checked as ever.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use super::inbound::host;
use super::sync::PeerId;
use crate::types::Subnet;
use crate::work::cost::{units, GROUP_FACTOR};
use crate::work::{broadcast_checks, Account, GroupKey};

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

/// A group's: four hosts' worth, as an Electrum group's cost ([`GROUP_FACTOR`]).
pub const GROUP: TxAllowance = TxAllowance {
    burst: INBOUND.burst * GROUP_FACTOR,
    per_sec: INBOUND.per_sec * GROUP_FACTOR,
};

/// Every inbound peer's together: ten hosts' worth, about a quarter of a core over time.
pub const TOTAL: TxAllowance = TxAllowance {
    burst: INBOUND.burst * 10.0,
    per_sec: INBOUND.per_sec * 10.0,
};

/// Held while a peer's transaction reserves its estimate on its accounts.
static RESERVING: Mutex<()> = Mutex::new(());

/// One account and its allowance.
#[derive(Debug)]
struct Held {
    spent: Account,
    allowance: TxAllowance,
}

impl Held {
    fn new(allowance: TxAllowance) -> Self {
        Held {
            spent: Account::default(),
            allowance,
        }
    }

    /// Whether `estimate` more units fit now; an idle account takes one however large.
    fn has_room(&self, estimate: f64) -> bool {
        let level = self.spent.level(self.allowance.per_sec);
        level <= 0.0 || level + estimate <= self.allowance.burst
    }

    fn charge(&self, units: f64) {
        self.spent.charge(units, self.allowance.per_sec);
    }

    fn idle(&self) -> bool {
        self.spent.level(self.allowance.per_sec) <= 0.0
    }
}

/// One host's (or one exempt connection's) account of its transactions' checks, with its
/// group's and every inbound peer's.
#[derive(Debug)]
pub struct TxBudget {
    host: Held,
    group: Arc<Held>,
    total: Arc<Held>,
}

impl TxBudget {
    /// An empty account under `allowance`, alone in its group and in all.
    pub fn new(allowance: TxAllowance) -> Self {
        TxBudget {
            host: Held::new(allowance),
            group: Arc::new(Held::new(GROUP)),
            total: Arc::new(Held::new(TOTAL)),
        }
    }

    /// What checking `raw` costs at most before any linearization: its checks as if refused.
    pub fn estimate(raw: &[u8]) -> f64 {
        units(1, broadcast_checks(&[raw], true, 0), raw.len())
    }

    /// Whether `estimate` more units fit the host's allowance, its group's and the total now;
    /// an idle account takes one however large (a standard transaction of a thousand inputs
    /// costs more than a host's burst), which it then pays back over time.
    pub fn has_room(&self, estimate: f64) -> bool {
        [&self.host, &*self.group, &*self.total]
            .iter()
            .all(|held| held.has_room(estimate))
    }

    /// Charges `estimate` to the host's, group's and total accounts if it fits all three, in one
    /// step for every inbound peer at once (so peers checking at the same moment never pass an
    /// allowance together): whether it did.
    pub fn reserve(&self, estimate: f64) -> bool {
        let _one_at_a_time = RESERVING.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.has_room(estimate) {
            return false;
        }
        self.charge_units(estimate);
        true
    }

    /// Settles the checks of `raws` (refused or not) and the linearization work they caused
    /// against the `reserved` estimate paid before them: the rest charged, or what they did not
    /// cost given back (an accepted transaction pays no refusal).
    pub fn settle(&self, raws: &[&[u8]], refused: bool, linearized: u64, reserved: f64) {
        let bytes = raws.iter().map(|r| r.len()).sum();
        let checks = broadcast_checks(raws, refused, linearized);
        let cost = units(raws.len(), checks, bytes);
        match cost >= reserved {
            true => self.charge_units(cost - reserved),
            false => {
                for held in [&self.host, &*self.group, &*self.total] {
                    held.spent.refund(reserved - cost, held.allowance.per_sec);
                }
            }
        }
    }

    /// Charges the checks of `raws` (refused or not) and the linearization work they caused.
    pub fn charge(&self, raws: &[&[u8]], refused: bool, linearized: u64) {
        self.settle(raws, refused, linearized, 0.0);
    }

    fn charge_units(&self, units: f64) {
        for held in [&self.host, &*self.group, &*self.total] {
            held.charge(units);
        }
    }

    fn idle(&self) -> bool {
        self.host.idle()
    }
}

/// Every inbound host's account, kept while it has a peer connected or has not drained, and
/// which account each connected peer pays into.
#[derive(Debug)]
pub struct TxBudgets {
    exempt: Vec<Subnet>,
    accounts: Mutex<Accounts>,
    /// Every inbound peer's together.
    total: Arc<Held>,
}

#[derive(Debug, Default)]
struct Accounts {
    by_host: HashMap<Subnet, Arc<TxBudget>>,
    by_group: HashMap<GroupKey, Arc<Held>>,
    by_peer: HashMap<PeerId, Arc<TxBudget>>,
}

impl TxBudgets {
    /// No accounts yet; hosts in `exempt` get one per connection, in one group.
    pub fn new(exempt: Vec<Subnet>) -> Self {
        TxBudgets {
            exempt,
            accounts: Mutex::default(),
            total: Arc::new(Held::new(TOTAL)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Accounts> {
        self.accounts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The account inbound peer `id` from `ip` pays into: its host's (kept from its host's
    /// earlier connections), or its own for an exempt host; either in its group's. Drained
    /// accounts no peer holds are dropped meanwhile (the exempt group's is kept).
    pub fn join(&self, id: PeerId, ip: IpAddr) -> Arc<TxBudget> {
        let mut accounts = self.lock();
        let Accounts {
            by_host,
            by_group,
            by_peer,
        } = &mut *accounts;
        by_host.retain(|_, b| Arc::strong_count(b) > 1 || !b.idle());
        by_group.retain(|k, g| *k == GroupKey::Exempt || Arc::strong_count(g) > 1 || !g.idle());
        let exempt = self.exempt.iter().any(|net| net.contains(ip));
        let group_key = if exempt {
            GroupKey::Exempt
        } else {
            GroupKey::of(ip)
        };
        let group = by_group
            .entry(group_key)
            .or_insert_with(|| Arc::new(Held::new(GROUP)))
            .clone();
        let new = || {
            Arc::new(TxBudget {
                host: Held::new(INBOUND),
                group,
                total: self.total.clone(),
            })
        };
        let budget = match exempt {
            true => new(),
            false => by_host.entry(host(ip)).or_insert_with(new).clone(),
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
        let first = budgets.join(3, tor);
        while first.has_room(TxBudget::estimate(&PAYMENT)) {
            first.charge(&[&PAYMENT], true, 0);
        }
        assert!(
            budgets.join(4, tor).has_room(TxBudget::estimate(&PAYMENT)),
            "an exempt connection's is its own (its group's has room)"
        );
        budgets.leave(2);
        budgets.leave(3);
        budgets.leave(4);
        assert!(budgets.of(2).is_none());
    }

    /// Refused transactions of about 10 units each, from `ip` as peer `id`, until its account
    /// has no room: how many were checked.
    fn until_full(budgets: &TxBudgets, id: PeerId, ip: &str) -> usize {
        let budget = budgets.join(id, ip.parse().unwrap());
        (0..10_000)
            .take_while(|_| budget.has_room(TxBudget::estimate(&PAYMENT)))
            .inspect(|_| budget.charge(&[&PAYMENT], true, 0))
            .count()
    }

    #[test]
    fn a_subnets_hosts_together_and_every_exempt_connection_hold_four_hosts_worth() {
        let budgets = TxBudgets::new(vec!["127.0.0.1/32".parse().unwrap()]);
        let one = until_full(&budgets, 1, "10.0.0.1");
        let subnet: usize = (2..12)
            .map(|i| until_full(&budgets, i, &format!("10.0.0.{i}")))
            .sum();
        println!("one host {one}, ten more of its /24 {subnet}");
        assert!(
            subnet <= 3 * one + 1,
            "a /24 ran {subnet} past one host's {one}"
        );
        let tor: usize = (20..40).map(|i| until_full(&budgets, i, "127.0.0.1")).sum();
        assert!(tor <= 4 * one + 1, "exempt connections ran {tor}");
        // Another subnet's host is not held by them.
        assert_eq!(until_full(&budgets, 50, "10.0.1.1"), one);
    }

    #[test]
    fn every_inbound_peer_together_holds_ten_hosts_worth() {
        let budgets = TxBudgets::new(Vec::new());
        let one = until_full(&budgets, 1, "10.0.0.1");
        let all: usize = (2..40u64)
            .map(|i| until_full(&budgets, i, &format!("10.0.{i}.1")))
            .sum();
        assert!(all <= 9 * one + 5, "{all} past one host's {one}");
    }

    #[test]
    fn a_subnets_peers_reserving_at_once_never_pass_its_allowance_together() {
        let budgets = TxBudgets::new(Vec::new());
        let accounts: Vec<Arc<TxBudget>> = (1..=16u64)
            .map(|i| budgets.join(i, format!("10.0.0.{i}").parse().unwrap()))
            .collect();
        // 118 units each: a 90 kB transaction's estimate.
        let checked: usize = std::thread::scope(|scope| {
            let tries: Vec<_> = accounts
                .iter()
                .map(|b| scope.spawn(move || (0..4).filter(|_| b.reserve(118.0)).count()))
                .collect();
            tries.into_iter().map(|t| t.join().unwrap()).sum()
        });
        // The group's burst is 1,000: eight fit, one more when it was idle.
        assert!(checked <= 9, "{checked} reserved by one /24 at once");
        assert!(checked >= 8, "{checked}");
    }

    #[test]
    fn a_reservation_settled_is_charged_once() {
        let (reserved, charged) = (TxBudget::new(INBOUND), TxBudget::new(INBOUND));
        let estimate = TxBudget::estimate(&PAYMENT);
        assert!(reserved.reserve(estimate));
        reserved.settle(&[&PAYMENT], true, 0, estimate);
        charged.charge(&[&PAYMENT], true, 0);
        let level = |b: &TxBudget| b.host.spent.level(INBOUND.per_sec);
        assert!((level(&reserved) - level(&charged)).abs() < 0.5);
    }
}

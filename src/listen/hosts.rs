//! How many connections each host and subnet holds, for one server.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::cost::Account;
use crate::config::HostLimits;
use crate::types::Subnet;

/// Connections held by each host and subnet, for one server (all its listeners): a new client is
/// admitted only while its host and its subnet are under their limits ([`HostLimits`]), and its
/// [`HostGuard`] gives the place back when the connection ends. As Fulcrum's per-IP count
/// (`Servers.cpp`, `attachPerIPDataAndCheckLimits`), taken at accept, before any handshake.
pub struct HostTable {
    limits: HostLimits,
    what: &'static str,
    live: Mutex<HashMap<Subnet, Live>>,
    /// The costs of hosts whose connections all ended, for when they come back (ElectrumX's
    /// `retained_cost`), [`RETAINED`] at most: the accounts themselves, so that what a request
    /// still under way charges after its host's last connection ended is kept too.
    retained: Mutex<HashMap<Subnet, Arc<Account>>>,
    warned: Mutex<Option<Instant>>,
}

/// Hosts whose cost is kept after their last connection ends, at most; the cheapest goes first.
const RETAINED: usize = 4_096;

/// What a host or subnet holds now.
#[derive(Debug, Default)]
struct Live {
    /// Its connections.
    conns: usize,
    /// What its connections hold together.
    shared: Arc<HostShares>,
}

/// What all the connections of one host hold together, counted against its shares.
#[derive(Debug, Default)]
pub struct HostShares {
    /// Bytes of answers queued for it (the Electrum answer budget).
    pub bytes: AtomicUsize,
    /// Its Electrum subscriptions.
    pub subscriptions: AtomicUsize,
    /// Its silent-payment subscriptions (Frigate's remote scanner).
    pub silent_subscriptions: AtomicUsize,
    /// What its requests cost, decaying ([`super::cost`]); kept by its table when the host
    /// leaves.
    pub cost: Arc<Account>,
    /// The host's key (its IPv4 address or IPv6 /64); `None` for an exempt host, whose
    /// connections each have their own shares.
    pub key: Option<Subnet>,
    /// Its share of the query work pool (the pool's, found by `key` on the host's first job,
    /// so that every server's connections of the host share it).
    pub work: OnceLock<Arc<super::work::HostWork>>,
}

/// Why a host's new connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its address (IPv4, or IPv6 /64) holds its limit already.
    Ip,
    /// Its subnet (IPv4 /24, IPv6 /48) holds its limit already.
    Subnet,
}

impl Refused {
    /// The reason as metrics label it.
    pub fn label(self) -> &'static str {
        match self {
            Refused::Ip => "ip",
            Refused::Subnet => "subnet",
        }
    }
}

/// A connection's place in its [`HostTable`], given back when dropped.
pub struct HostGuard {
    table: Arc<HostTable>,
    /// The host's and its subnet's keys; `None` for an exempt host.
    keys: Option<[Subnet; 2]>,
    /// What every connection of the host shares (its own for an exempt host).
    shared: Arc<HostShares>,
}

impl HostGuard {
    /// What this connection shares with every other of its host (an exempt host's
    /// connections share nothing: each has its own).
    pub fn shared(&self) -> Arc<HostShares> {
        self.shared.clone()
    }
}

/// Refusals are logged at most this often per server (Fulcrum's 5 s,
/// `kMaxClientsPerIPWarningRateLimitSecs`).
const WARN_EVERY: Duration = Duration::from_secs(5);

impl HostTable {
    /// An empty table for the server `what` (named in its log lines).
    pub fn new(limits: HostLimits, what: &'static str) -> Arc<Self> {
        Arc::new(HostTable {
            limits,
            what,
            live: Mutex::new(HashMap::new()),
            retained: Mutex::new(HashMap::new()),
            warned: Mutex::new(None),
        })
    }

    /// The host key and the subnet key of `ip`.
    fn keys(ip: IpAddr) -> [Subnet; 2] {
        match ip.to_canonical() {
            IpAddr::V4(_) => [Subnet::around(ip, 32), Subnet::around(ip, 24)],
            IpAddr::V6(_) => [Subnet::around(ip, 64), Subnet::around(ip, 48)],
        }
    }

    /// Takes a place for a new connection from `ip`, or says which limit it would pass.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<HostGuard, Refused> {
        if self.limits.exempt.iter().any(|net| net.contains(ip)) {
            return Ok(HostGuard {
                table: self.clone(),
                keys: None,
                shared: Arc::default(),
            });
        }
        let keys = Self::keys(ip);
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let held = |key: &Subnet| live.get(key).map_or(0, |l| l.conns);
        let refused = if held(&keys[0]) >= self.limits.per_ip {
            Some(Refused::Ip)
        } else if held(&keys[1]) >= self.limits.per_subnet {
            Some(Refused::Subnet)
        } else {
            None
        };
        if let Some(refused) = refused {
            drop(live);
            self.warn(ip, refused);
            return Err(refused);
        }
        live.entry(keys[1]).or_default().conns += 1;
        let host = live.entry(keys[0]).or_insert_with(|| Live {
            conns: 0,
            shared: Arc::new(HostShares {
                key: Some(keys[0]),
                cost: self.retained_cost(&keys[0]),
                ..HostShares::default()
            }),
        });
        host.conns += 1;
        let shared = host.shared.clone();
        Ok(HostGuard {
            table: self.clone(),
            keys: Some(keys),
            shared,
        })
    }

    /// The cost `key` left with when its last connection ended, if it is still kept.
    fn retained_cost(&self, key: &Subnet) -> Arc<Account> {
        let mut retained = self.retained.lock().unwrap_or_else(PoisonError::into_inner);
        retained.remove(key).unwrap_or_default()
    }

    /// Keeps the cost of a host that leaves, making room by forgetting the cheapest (as last
    /// charged: a host cannot push a costly one out with many cheap ones).
    fn retain_cost(&self, key: Subnet, shares: &Arc<HostShares>) {
        // Nothing charged and nothing under way that could charge: nothing to keep.
        if shares.cost.snapshot().units <= 0.0 && Arc::strong_count(shares) == 1 {
            return;
        }
        let cost = shares.cost.clone();
        let mut retained = self.retained.lock().unwrap_or_else(PoisonError::into_inner);
        if retained.len() >= RETAINED {
            let cheapest = retained
                .iter()
                .min_by(|a, b| a.1.snapshot().units.total_cmp(&b.1.snapshot().units))
                .map(|(k, _)| *k);
            if let Some(cheapest) = cheapest {
                retained.remove(&cheapest);
            }
        }
        retained.insert(key, cost);
    }

    /// Logs a refusal, at most once per [`WARN_EVERY`].
    fn warn(&self, ip: IpAddr, refused: Refused) {
        let (limit, of) = match refused {
            Refused::Ip => (self.limits.per_ip, "its address"),
            Refused::Subnet => (self.limits.per_subnet, "its subnet"),
        };
        self.log_refusal(ip, format_args!("{of} holds {limit} connections already"));
    }

    /// Logs that `ip` was refused and why, at most once per [`WARN_EVERY`] for the whole server
    /// (a flood of refusals is one line).
    pub fn log_refusal(&self, ip: IpAddr, why: std::fmt::Arguments<'_>) {
        let mut warned = self.warned.lock().unwrap_or_else(PoisonError::into_inner);
        if warned.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        *warned = Some(Instant::now());
        tracing::warn!(
            "{}: refusing {ip}: {why} (logged at most every {}s)",
            self.what,
            WARN_EVERY.as_secs()
        );
    }

    /// Connections held by the host (IPv4 address or IPv6 /64) of `ip`.
    #[cfg(test)]
    fn held_by(&self, ip: IpAddr) -> usize {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.get(&Self::keys(ip)[0]).map_or(0, |l| l.conns)
    }
}

impl Drop for HostGuard {
    fn drop(&mut self) {
        let Some(keys) = self.keys else { return };
        let mut live = self
            .table
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut left = None;
        for key in keys {
            if let Some(l) = live.get_mut(&key) {
                l.conns -= 1;
                if l.conns == 0 {
                    let gone = live.remove(&key);
                    if key == keys[0] {
                        left = gone;
                    }
                }
            }
        }
        // Kept before the table is let go: a connection of the host admitted meanwhile would
        // start from nothing, and its leaving overwrite this.
        if let Some(host) = left {
            self.table.retain_cost(keys[0], &host.shared);
        }
        drop(live);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_host_and_its_subnet_are_held_to_their_limits_and_freed() {
        let table = HostTable::new(HostLimits::new(2, 3), "test");
        let a1 = table.admit(ip("203.0.113.2")).unwrap();
        let a2 = table.admit(ip("::ffff:203.0.113.2")).unwrap();
        assert_eq!(table.admit(ip("203.0.113.2")).err(), Some(Refused::Ip));
        let b1 = table.admit(ip("203.0.113.3")).unwrap();
        assert_eq!(table.admit(ip("203.0.113.4")).err(), Some(Refused::Subnet));
        let other = table.admit(ip("203.0.114.4"));
        assert!(other.is_ok(), "another /24");
        drop(a1);
        assert_eq!(table.held_by(ip("203.0.113.2")), 1);
        let a3 = table.admit(ip("203.0.113.2")).unwrap();
        assert!(
            Arc::ptr_eq(&a2.shared(), &a3.shared()),
            "one host, one count"
        );
        assert!(!Arc::ptr_eq(&a2.shared(), &b1.shared()), "another host");
        drop((a2, a3, b1, other));
        assert_eq!(table.held_by(ip("203.0.113.2")), 0);
        let live = table.live.lock().unwrap();
        assert!(
            live.is_empty(),
            "entries go with their last connection: {live:?}"
        );
    }

    #[test]
    fn a_hosts_cost_outlives_its_connections() {
        let table = HostTable::new(HostLimits::new(2, 4), "test");
        let a = table.admit(ip("203.0.113.9")).unwrap();
        let b = table.admit(ip("203.0.113.9")).unwrap();
        a.shared().cost.charge(500.0, 0.0);
        assert_eq!(
            b.shared().cost.level(0.0),
            500.0,
            "one account for the host"
        );
        drop((a, b));
        let again = table.admit(ip("203.0.113.9")).unwrap();
        assert_eq!(again.shared().cost.level(0.0), 500.0, "kept when it left");
        let other = table.admit(ip("203.0.113.10")).unwrap();
        assert_eq!(other.shared().cost.level(0.0), 0.0);
        let exempt = table.admit(ip("127.0.0.1")).unwrap();
        exempt.shared().cost.charge(50.0, 0.0);
        drop(exempt);
        let exempt = table.admit(ip("127.0.0.1")).unwrap();
        assert_eq!(
            exempt.shared().cost.level(0.0),
            0.0,
            "an exempt connection's own"
        );
    }

    #[test]
    fn what_a_request_charges_after_its_host_left_is_kept() {
        let table = HostTable::new(HostLimits::new(2, 4), "test");
        let a = table.admit(ip("203.0.113.9")).unwrap();
        // A request under way holds the host's shares; its client hangs up, the job goes on.
        let job = a.shared();
        drop(a);
        job.cost.charge(700.0, 0.0);
        let again = table.admit(ip("203.0.113.9")).unwrap();
        assert_eq!(again.shared().cost.level(0.0), 700.0);
    }

    #[test]
    fn ipv6_hosts_count_by_64_and_exempt_hosts_not_at_all() {
        let table = HostTable::new(HostLimits::new(1, 2), "test");
        let _a = table.admit(ip("2001:db8:0:1::1")).unwrap();
        assert_eq!(
            table.admit(ip("2001:db8:0:1::ffff")).err(),
            Some(Refused::Ip),
            "the same /64"
        );
        let _b = table.admit(ip("2001:db8:0:2::1")).unwrap();
        assert_eq!(
            table.admit(ip("2001:db8:0:3::1")).err(),
            Some(Refused::Subnet),
            "the same /48"
        );
        let exempt: Vec<HostGuard> = (0..10)
            .map(|_| table.admit(ip("127.0.0.1")).unwrap())
            .collect();
        let _c = table.admit(ip("127.0.0.2")).unwrap();
        assert_eq!(
            table.admit(ip("127.0.0.2")).err(),
            Some(Refused::Ip),
            "only 127.0.0.1 is exempt"
        );
        drop(exempt);
        assert_eq!(table.held_by(ip("127.0.0.1")), 0);
    }
}

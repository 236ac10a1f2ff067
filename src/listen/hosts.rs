//! How many connections each host and group holds, for one server: the per-host and
//! per-subnet limits, the server's total with its seats taken back from the group holding the
//! most, and the costs kept when hosts leave.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use super::groups::{Seat, SilentFull, SilentLimits, SilentRoom};
use super::seats::{leave, Held, Live};
use crate::config::HostLimits;
use crate::types::Subnet;
use crate::work::{Account, Accounts};
use crate::work::{GroupKey, GroupShares, HostShares};

/// Connections held by each host and group, for one server (all its listeners): a new client
/// is admitted only while its host and its subnet are under their limits ([`HostLimits`]), as
/// Fulcrum's per-IP count (`Servers.cpp`, `attachPerIPDataAndCheckLimits`), taken at accept,
/// before any handshake. When the server holds its total, the group with the most connections
/// gives its busiest host's youngest one up for a newcomer that is not that host (so a newcomer
/// of another group always gets in); every exempt connection together is one group, holding
/// at most half the total and never evicted for others below a quarter. Its [`HostGuard`]
/// gives the place back when the connection ends.
pub struct HostTable {
    limits: HostLimits,
    /// Connections at once (`usize::MAX`: counted by the server instead).
    total: usize,
    what: &'static str,
    live: Mutex<Live>,
    /// The group of every exempt connection, kept for as long as the table.
    exempt: Arc<GroupShares>,
    /// The costs of hosts and groups whose connections all ended, for when they come back
    /// (ElectrumX's `retained_cost`): the accounts themselves, so that what a request still
    /// under way charges after its host's last connection ended is kept too.
    retained_hosts: Mutex<Retained<Subnet>>,
    retained_groups: Mutex<Retained<GroupKey>>,
    /// Every connection's silent-payment subscriptions.
    silent_total: Arc<AtomicUsize>,
    next_seat: AtomicU64,
    warned: Mutex<Option<Instant>>,
}

/// Hosts (and groups) whose cost is kept after their last connection ends, at most; the
/// cheapest goes first.
const RETAINED: usize = 4_096;

/// Why a host's new connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its address (IPv4, or IPv6 /64) holds its limit already.
    Ip,
    /// Its subnet (IPv4 /24, IPv6 /48) holds its limit already.
    Subnet,
    /// The server holds its total, and the newcomer's own host holds the most of the group
    /// holding the most.
    Full,
}

impl Refused {
    /// The reason as metrics label it.
    pub fn label(self) -> &'static str {
        match self {
            Refused::Ip => "ip",
            Refused::Subnet => "subnet",
            Refused::Full => "limit",
        }
    }
}

/// A connection's place in its [`HostTable`], given back when dropped.
pub struct HostGuard {
    table: Arc<HostTable>,
    seat: Arc<Seat>,
}

impl HostGuard {
    /// What this connection shares with every other of its host (an exempt host's
    /// connections share nothing but their group: each has its own).
    pub fn shared(&self) -> Arc<HostShares> {
        self.seat.host.clone()
    }

    /// The connection's seat.
    pub fn seat(&self) -> Arc<Seat> {
        self.seat.clone()
    }
}

/// Refusals are logged at most this often per server (Fulcrum's 5 s,
/// `kMaxClientsPerIPWarningRateLimitSecs`).
const WARN_EVERY: Duration = Duration::from_secs(5);

impl HostTable {
    /// An empty table for the server `what` (named in its log lines), whose total the server
    /// counts itself.
    pub fn new(limits: HostLimits, what: &'static str) -> Arc<Self> {
        Self::with_total(limits, usize::MAX, what)
    }

    /// An empty table for the server `what` that holds at most `total` connections.
    pub fn with_total(limits: HostLimits, total: usize, what: &'static str) -> Arc<Self> {
        Arc::new(HostTable {
            limits,
            total,
            what,
            live: Mutex::new(Live::default()),
            exempt: Arc::new(GroupShares {
                key: Some(GroupKey::Exempt),
                ..GroupShares::default()
            }),
            retained_hosts: Mutex::new(Retained::default()),
            retained_groups: Mutex::new(Retained::default()),
            silent_total: Arc::default(),
            next_seat: AtomicU64::new(1),
            warned: Mutex::new(None),
        })
    }

    /// Whether `host_limit_exempt` spares `ip`.
    fn is_exempt(&self, ip: IpAddr) -> bool {
        self.limits.exempt.iter().any(|net| net.contains(ip))
    }

    /// The host key of `ip`: its IPv4 address or IPv6 /64.
    fn host_key(ip: IpAddr) -> Subnet {
        match ip.to_canonical() {
            IpAddr::V4(_) => Subnet::around(ip, 32),
            IpAddr::V6(_) => Subnet::around(ip, 64),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a place for a new connection from `ip`, taking one back from the group holding
    /// the most when the server is full, or says which limit it would pass.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<HostGuard, Refused> {
        let exempt = self.is_exempt(ip);
        let (host, group) = match exempt {
            true => (None, GroupKey::Exempt),
            false => (Some(Self::host_key(ip)), GroupKey::of(ip)),
        };
        let mut live = self.lock();
        if let Err(refused) = self.make_room(&mut live, host, group) {
            drop(live);
            self.warn(ip, refused);
            return Err(refused);
        }
        let group_shares = self.group_entry(&mut live, group);
        let shares = match host {
            None => Arc::new(HostShares {
                cost: Accounts {
                    host: Arc::default(),
                    group: group_shares.cost.clone(),
                    exempt: true,
                },
                group: group_shares,
                ..HostShares::default()
            }),
            Some(key) => {
                let entry = live.hosts.entry(key).or_insert_with(|| Held {
                    conns: 0,
                    shared: Arc::new(HostShares {
                        key: Some(key),
                        cost: Accounts {
                            host: self
                                .retained_hosts
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .take(&key),
                            group: group_shares.cost.clone(),
                            exempt: false,
                        },
                        group: group_shares,
                        ..HostShares::default()
                    }),
                });
                entry.conns += 1;
                entry.shared.clone()
            }
        };
        let id = self.next_seat.fetch_add(1, Ordering::SeqCst);
        let table: Weak<dyn SilentRoom> = Arc::downgrade(self) as Weak<HostTable>;
        let seat = Arc::new(Seat::new(
            id,
            shares,
            Some(table),
            self.silent_total.clone(),
        ));
        live.seats.insert(id, seat.clone());
        Ok(HostGuard {
            table: self.clone(),
            seat,
        })
    }

    /// Refuses a newcomer of `host` (`None`: exempt) and `group` at its host's or subnet's
    /// limit, or when the server is full and its own group holds the most; otherwise takes a
    /// seat back if the server (or, for an exempt newcomer, the exempt share) is full.
    fn make_room(
        &self,
        live: &mut Live,
        host: Option<Subnet>,
        group: GroupKey,
    ) -> Result<(), Refused> {
        if let Some(key) = host {
            if live.hosts.get(&key).map_or(0, |h| h.conns) >= self.limits.per_ip {
                return Err(Refused::Ip);
            }
            if live.group_conns(&group) >= self.limits.per_subnet {
                return Err(Refused::Subnet);
            }
        } else if self.total != usize::MAX && live.group_conns(&group) >= self.exempt_share() {
            let victim = live
                .victim(GroupKey::Exempt, None, 0)
                .ok_or(Refused::Full)?;
            self.evict(live, &victim);
        }
        if live.seats.len() >= self.total {
            let floor = self.total / 4;
            let victim = live.victim(group, host, floor).ok_or(Refused::Full)?;
            self.evict(live, &victim);
        }
        Ok(())
    }

    /// The most connections every exempt one together holds: half the total (at least one).
    fn exempt_share(&self) -> usize {
        (self.total / 2).max(1)
    }

    /// What a connection from `ip` would be charged to, without admitting it: so that a host
    /// at its hard limit is refused before it could take anyone's place.
    pub fn cost_of(&self, ip: IpAddr) -> Accounts {
        if self.is_exempt(ip) {
            return Accounts {
                host: Arc::default(),
                group: self.exempt.cost.clone(),
                exempt: true,
            };
        }
        let (host, group) = (Self::host_key(ip), GroupKey::of(ip));
        let live = self.lock();
        let host_cost = live.hosts.get(&host).map(|h| h.shared.cost.host.clone());
        let group_cost = live.groups.get(&group).map(|g| g.shared.cost.clone());
        drop(live);
        Accounts {
            host: host_cost.unwrap_or_else(|| peek(&self.retained_hosts, &host)),
            group: group_cost.unwrap_or_else(|| peek(&self.retained_groups, &group)),
            exempt: false,
        }
    }

    /// The shares of `key`'s group, counting one more connection in it.
    fn group_entry(&self, live: &mut Live, key: GroupKey) -> Arc<GroupShares> {
        let exempt = &self.exempt;
        let entry = live.groups.entry(key).or_insert_with(|| Held {
            conns: 0,
            shared: match key {
                GroupKey::Exempt => exempt.clone(),
                GroupKey::Subnet(_) => Arc::new(GroupShares {
                    key: Some(key),
                    cost: self
                        .retained_groups
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take(&key),
                    ..GroupShares::default()
                }),
            },
        });
        entry.conns += 1;
        entry.shared.clone()
    }

    /// Takes `seat` back: its connection ends, and its place is free at once.
    fn evict(&self, live: &mut Live, seat: &Arc<Seat>) {
        self.unseat(live, seat.id);
        seat.evict();
        crate::metrics::metrics()
            .connections_evicted
            .with_label_values(&[self.what])
            .inc();
        tracing::debug!(
            "{}: a connection gives its place up for a newcomer",
            self.what
        );
    }

    /// Removes seat `id` and its counts (nothing if it went already).
    fn unseat(&self, live: &mut Live, id: u64) {
        let Some(seat) = live.seats.remove(&id) else {
            return;
        };
        let shares = &seat.host;
        if let Some(key) = shares.key {
            if let Some(left) = leave(&mut live.hosts, key) {
                self.retained_hosts
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .keep(key, &left.cost.host, Arc::strong_count(&left) > 2);
            }
        }
        if let Some(key) = shares.group.key {
            if let Some(left) = leave(&mut live.groups, key) {
                if key != GroupKey::Exempt {
                    self.retained_groups
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .keep(key, &left.cost, false);
                }
            }
        }
    }

    /// Logs a refusal, at most once per [`WARN_EVERY`].
    fn warn(&self, ip: IpAddr, refused: Refused) {
        match refused {
            Refused::Ip => self.log_refusal(
                ip,
                format_args!(
                    "its address holds {} connections already",
                    self.limits.per_ip
                ),
            ),
            Refused::Subnet => self.log_refusal(
                ip,
                format_args!(
                    "its subnet holds {} connections already",
                    self.limits.per_subnet
                ),
            ),
            Refused::Full => self.log_refusal(
                ip,
                format_args!(
                    "the server holds {} connections, the most of them from its host",
                    self.total
                ),
            ),
        }
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

    /// Every connection's silent-payment subscriptions.
    pub fn silent_total(&self) -> usize {
        self.silent_total.load(Ordering::SeqCst)
    }

    /// Connections held by the host (IPv4 address or IPv6 /64) of `ip`.
    #[cfg(test)]
    fn held_by(&self, ip: IpAddr) -> usize {
        self.lock()
            .hosts
            .get(&Self::host_key(ip))
            .map_or(0, |l| l.conns)
    }
}

impl SilentRoom for HostTable {
    /// Counts one more silent-payment subscription of `asker`'s, all under the table's lock:
    /// refused at its host's limit or its group's; past the exempt connections' limit, the one
    /// holding the most gives its seat up if it holds more than the asker would; past the
    /// server's, the group holding the most (the exempt one only above its floor) gives up its
    /// connection holding the most, if it holds more than the asker's would.
    fn reserve_silent(&self, asker: &Seat, limits: &SilentLimits) -> Result<(), SilentFull> {
        let held = |count: &AtomicUsize| count.load(Ordering::SeqCst);
        let mut live = self.lock();
        if held(&asker.host.silent_subscriptions) >= limits.per_host {
            return Err(SilentFull::Host);
        }
        let group = &asker.host.group;
        if group.is_exempt() {
            if held(&self.exempt.silent_subscriptions) >= limits.exempt {
                let victim = live.exempt_silent_victim(asker);
                self.take_silent_back(&mut live, victim.ok_or(SilentFull::Exempt)?);
            }
        } else if held(&group.silent_subscriptions) >= limits.per_group {
            return Err(SilentFull::Group);
        }
        if self.silent_total() >= limits.total {
            let victim = live.silent_victim(asker, limits.exempt_floor);
            self.take_silent_back(&mut live, victim.ok_or(SilentFull::Total)?);
        }
        asker.hold_silent(asker.silent() + 1);
        Ok(())
    }
}

impl HostTable {
    /// Takes `victim`'s seat back, and its silent-payment subscriptions from the counts.
    fn take_silent_back(&self, live: &mut Live, victim: Arc<Seat>) {
        victim.release_silent();
        self.evict(live, &victim);
    }
}

/// The account kept in `retained` for `key`, or a new one.
fn peek<K: Eq + Hash + Copy>(retained: &Mutex<Retained<K>>, key: &K) -> Arc<Account> {
    retained
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .peek(key)
}

/// Accounts kept after their owners' last connection ended, [`RETAINED`] at most.
struct Retained<K>(HashMap<K, Arc<Account>>);

impl<K> Default for Retained<K> {
    fn default() -> Self {
        Retained(HashMap::new())
    }
}

impl<K: Eq + Hash + Copy> Retained<K> {
    /// The account `key` left with, if it is still kept; a new one otherwise.
    fn take(&mut self, key: &K) -> Arc<Account> {
        self.0.remove(key).unwrap_or_default()
    }

    /// The account `key` left with, still kept here, or a new one.
    fn peek(&self, key: &K) -> Arc<Account> {
        self.0.get(key).cloned().unwrap_or_default()
    }

    /// Keeps the account of `key`, which leaves (`busy`: a request under way may still charge
    /// it), unless nothing was ever charged to it; makes room by forgetting the cheapest (as
    /// last charged: a host cannot push a costly one out with many cheap ones).
    fn keep(&mut self, key: K, cost: &Arc<Account>, busy: bool) {
        if cost.snapshot().units <= 0.0 && !busy {
            return;
        }
        if self.0.len() >= RETAINED {
            let cheapest = self
                .0
                .iter()
                .min_by(|a, b| a.1.snapshot().units.total_cmp(&b.1.snapshot().units))
                .map(|(k, _)| *k);
            if let Some(cheapest) = cheapest {
                self.0.remove(&cheapest);
            }
        }
        self.0.insert(key, cost.clone());
    }
}

impl Drop for HostGuard {
    fn drop(&mut self) {
        let mut live = self.table.lock();
        // Kept before the table is let go: a connection of the host admitted meanwhile would
        // start from nothing, and its leaving overwrite this.
        self.table.unseat(&mut live, self.seat.id);
        drop(live);
        // Its session gives them back as it ends; whatever it left is given back here.
        self.seat.release_silent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CostLimits;
    use crate::work::Verdict;

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
        assert!(
            Arc::ptr_eq(&a2.shared().group, &b1.shared().group),
            "one subnet, one group"
        );
        drop((a2, a3, b1, other));
        assert_eq!(table.held_by(ip("203.0.113.2")), 0);
        let live = table.lock();
        assert!(
            live.hosts.is_empty() && live.groups.is_empty() && live.seats.is_empty(),
            "entries go with their last connection"
        );
    }

    #[test]
    fn a_hosts_cost_outlives_its_connections() {
        let table = HostTable::new(HostLimits::new(2, 4), "test");
        let free = CostLimits {
            decay_per_sec: 0.0,
            ..CostLimits::default()
        };
        let a = table.admit(ip("203.0.113.9")).unwrap();
        let b = table.admit(ip("203.0.113.9")).unwrap();
        a.shared().cost.charge(500.0, &free);
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
        assert_eq!(other.shared().cost.group.level(0.0), 500.0, "its group's");
        let exempt = table.admit(ip("127.0.0.1")).unwrap();
        exempt.shared().cost.charge(50.0, &free);
        drop(exempt);
        let exempt = table.admit(ip("127.0.0.1")).unwrap();
        assert_eq!(
            exempt.shared().cost.level(0.0),
            0.0,
            "an exempt connection's own"
        );
        assert_eq!(
            exempt.shared().cost.group.level(0.0),
            50.0,
            "the exempt connections' group keeps what they cost"
        );
    }

    #[test]
    fn what_a_request_charges_after_its_host_left_is_kept() {
        let table = HostTable::new(HostLimits::new(2, 4), "test");
        let a = table.admit(ip("203.0.113.9")).unwrap();
        // A request under way holds the host's shares; its client hangs up, the job goes on.
        let job = a.shared();
        drop(a);
        job.cost.host.charge(700.0, 0.0);
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

    #[test]
    fn a_group_over_its_cost_slows_its_costly_hosts_and_closes_none_but_its_own() {
        let table = HostTable::new(HostLimits::new(4, 16), "test");
        let limits = CostLimits {
            decay_per_sec: 0.0,
            ..CostLimits::default()
        };
        // Four hosts of one /24 spend just under their hard limit each: the group is past its.
        let hosts: Vec<HostGuard> = (1..=4)
            .map(|i| table.admit(ip(&format!("198.51.100.{i}"))).unwrap())
            .collect();
        for h in &hosts {
            h.shared().cost.charge(9_999.0, &limits);
        }
        let neighbour = table.admit(ip("198.51.100.77")).unwrap();
        neighbour.shared().cost.charge(10.0, &limits);
        assert_eq!(
            neighbour.shared().cost.verdict(&limits),
            Verdict::Go,
            "a quiet neighbour is served as ever"
        );
        neighbour.shared().cost.charge(1_000.0, &limits);
        assert_eq!(
            neighbour.shared().cost.verdict(&limits),
            Verdict::Wait(crate::work::cost::REQUEST_SLEEP),
            "past the soft limit, a host of a costly group waits the longest pause"
        );
        let elsewhere = table.admit(ip("198.51.101.77")).unwrap();
        assert_eq!(elsewhere.shared().cost.verdict(&limits), Verdict::Go);
        hosts[0].shared().cost.charge(1.0, &limits);
        assert_eq!(hosts[0].shared().cost.verdict(&limits), Verdict::Close);
    }

    #[test]
    fn a_full_server_takes_a_seat_back_from_the_group_holding_the_most() {
        let table = HostTable::with_total(HostLimits::new(6, 9), 10, "test");
        // One /24 holds 8 of 10 places (5 from one host), another 2.
        let crowd: Vec<HostGuard> = (0..8)
            .map(|i| {
                table
                    .admit(ip(&format!("198.51.100.{}", 1 + usize::from(i >= 5))))
                    .unwrap()
            })
            .collect();
        let few: Vec<HostGuard> = (0..2)
            .map(|_| table.admit(ip("203.0.113.5")).unwrap())
            .collect();
        // The busiest host of the largest group is refused; one from a third group evicts its
        // youngest connection.
        assert_eq!(table.admit(ip("198.51.100.1")).err(), Some(Refused::Full));
        let newcomer = table.admit(ip("192.0.2.1")).unwrap();
        assert_eq!(table.lock().seats.len(), 10);
        let evicted: Vec<usize> = (0..8)
            .filter(|&i| crowd[i].seat().evicted.load(Ordering::SeqCst))
            .collect();
        assert_eq!(evicted, vec![4], "the busiest host's youngest");
        assert!(few.iter().all(|g| !g.seat().evicted.load(Ordering::SeqCst)));
        drop((crowd, few, newcomer));
        assert!(
            table.lock().seats.is_empty(),
            "an evicted seat is counted once"
        );
    }

    #[test]
    fn exempt_connections_hold_half_the_server_and_make_room_among_themselves() {
        let table = HostTable::with_total(HostLimits::new(4, 8), 10, "test");
        let tor: Vec<HostGuard> = (0..5)
            .map(|_| table.admit(ip("127.0.0.1")).unwrap())
            .collect();
        // A sixth evicts the youngest of them rather than take more than half.
        let newest = table.admit(ip("127.0.0.1")).unwrap();
        let evicted = |g: &HostGuard| g.seat().evicted.load(Ordering::SeqCst);
        assert!(evicted(&tor[4]));
        assert!(tor[..4].iter().all(|g| !evicted(g)), "the older stay");
        let others: Vec<HostGuard> = (0..5)
            .map(|i| table.admit(ip(&format!("198.51.{i}.1"))).unwrap())
            .collect();
        assert_eq!(table.lock().seats.len(), 10);
        // The server full, newcomers of other groups take the exempt connections' places down
        // to a quarter of the total; then, every group holding one, they are refused.
        let more: Vec<Result<HostGuard, Refused>> = (0..6)
            .map(|i| table.admit(ip(&format!("203.0.{i}.1"))))
            .collect();
        let taken = more.iter().filter(|m| m.is_ok()).count();
        let exempt_left = tor[..4]
            .iter()
            .chain([&newest])
            .filter(|g| !evicted(g))
            .count();
        assert_eq!(
            (taken, exempt_left),
            (3, 2),
            "the exempt connections keep their floor"
        );
        drop((tor, newest, others, more));
        assert!(table.lock().seats.is_empty());
    }

    #[test]
    fn silent_payment_places_are_taken_back_from_who_holds_the_most() {
        let table = HostTable::with_total(HostLimits::new(4, 8), 100, "test");
        let evicted = |g: &HostGuard| g.seat().evicted.load(Ordering::SeqCst);
        // One exempt connection holds every exempt place: another takes its seat.
        let (hog, honest) = (
            table.admit(ip("127.0.0.1")).unwrap(),
            table.admit(ip("::1")).unwrap(),
        );
        let limits = |exempt, total, exempt_floor| SilentLimits {
            per_host: 1_000,
            per_group: 1_000,
            exempt,
            total,
            exempt_floor,
        };
        hog.seat().hold_silent(50);
        assert_eq!(honest.seat().reserve_silent(&limits(50, 1_000, 0)), Ok(()));
        let exempt_held = table.exempt.silent_subscriptions.load(Ordering::SeqCst);
        assert!(evicted(&hog) && exempt_held == 1, "{exempt_held}");
        // Two subnets fill the server's 30: a third's newcomer takes a seat of the larger, once.
        let (a, b) = (
            table.admit(ip("198.51.100.1")).unwrap(),
            table.admit(ip("203.0.113.1")).unwrap(),
        );
        a.seat().hold_silent(20);
        b.seat().hold_silent(9);
        let newcomer = table.admit(ip("192.0.2.1")).unwrap();
        assert_eq!(newcomer.seat().reserve_silent(&limits(50, 30, 0)), Ok(()));
        assert!(evicted(&a) && !evicted(&b));
        assert_eq!(
            table.silent_total(),
            11,
            "b's 9, the exempt 1, the newcomer's"
        );
        assert_eq!(
            newcomer.seat().reserve_silent(&limits(50, 30, 0)),
            Ok(()),
            "room now, nobody else evicted"
        );
        assert!(!evicted(&b));
        // The exempt connections keep what they hold up to their floor.
        drop(b);
        honest.seat().hold_silent(30);
        assert_eq!(
            newcomer.seat().reserve_silent(&limits(50, 30, 30)),
            Err(SilentFull::Total)
        );
        assert!(!evicted(&honest));
        assert_eq!(
            newcomer.seat().reserve_silent(&limits(50, 30, 29)),
            Ok(()),
            "above it, they give a seat up"
        );
        assert!(evicted(&honest));
        drop((hog, honest, a, newcomer));
        assert_eq!(table.silent_total(), 0, "every count given back once");
    }

    #[test]
    fn many_reserving_at_once_never_pass_the_total() {
        let table = HostTable::with_total(HostLimits::new(4, 8), 100, "test");
        let limits = SilentLimits {
            per_host: 1_000,
            per_group: 1_000,
            exempt: 1_000,
            total: 100,
            exempt_floor: 0,
        };
        // Eight hosts of eight subnets, each asking 50 times at once (one holding more than
        // another would with one more gives its seat up).
        let guards: Vec<HostGuard> = (1..=8)
            .map(|i| table.admit(ip(&format!("10.0.{i}.1"))).unwrap())
            .collect();
        let taken: usize = std::thread::scope(|scope| {
            let asking: Vec<_> = guards
                .iter()
                .map(|g| {
                    let seat = g.seat();
                    scope.spawn(move || {
                        (0..50)
                            .filter(|_| seat.reserve_silent(&limits).is_ok())
                            .count()
                    })
                })
                .collect();
            asking.into_iter().map(|t| t.join().unwrap()).sum()
        });
        let total = table.silent_total();
        assert!(total <= 100, "{total} held of 100");
        assert!(taken >= 100 && total >= 50, "{taken} taken, {total} held");
        drop(guards);
        assert_eq!(table.silent_total(), 0);
    }
}

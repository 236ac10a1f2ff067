//! The inbound places, and who gives one up when they are all taken (Core's
//! `AttemptToEvictConnection` and `SelectNodeToEvict`): the network group (IPv4 /16, IPv6 /32,
//! Core's `NetGroupManager::GetGroup` for routable addresses) with the most connections gives
//! up its busiest host's (IPv4 address, IPv6 /64) youngest connection. The newcomer counts as
//! one of its host's connections, and when it would be the one to go it is refused instead: a
//! host that holds every place cannot take another by evicting itself, and a peer from a host
//! with fewer connections always gets in. Before choosing, Core's protections apply
//! (`SelectNodeToEvict`): 4 peers by a keyed hash of their network group, the 8 with the lowest
//! ping, the 4 that last sent a new transaction and the 4 that last sent a new block, then the
//! longest-connected half of the rest; only the others can be evicted.
//!
//! Unlike Core, one host (an IPv4 address, an IPv6 /64) holds at most `per_host` places, as
//! Fulcrum's `max_clients_per_ip` does for Electrum: what a host's connections hold (a send
//! buffer and a block each) is bounded before the eviction rules ever run.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::task::AbortHandle;

use super::sync::PeerId;
use crate::types::Subnet;

/// One inbound connection holding a place.
struct Held {
    group: Subnet,
    host: Subnet,
    since: Instant,
    /// Ends its task (set once the task is spawned).
    task: Option<AbortHandle>,
    /// What protects it from eviction.
    merits: Merits,
    /// Whether it comes from a local address (Core's `m_is_local`).
    local: bool,
}

/// What a connection has shown, for Core's eviction protections.
#[derive(Debug, Clone, Copy, Default)]
struct Merits {
    /// Its lowest ping round trip (`m_min_ping_time`).
    min_ping: Option<Duration>,
    /// When it last sent a block new to cairn (`m_last_block_time`).
    last_block: Option<Instant>,
    /// When it last sent a transaction the mempool took (`m_last_tx_time`).
    last_tx: Option<Instant>,
}

/// Something a connection did that counts for it when places are scarce.
#[derive(Debug, Clone, Copy)]
pub enum Merit {
    /// It answered a ping after this long.
    Ping(Duration),
    /// It sent a block new to cairn.
    Block,
    /// It sent a transaction the mempool took.
    Tx,
}

/// The inbound places.
pub struct Inbound {
    max: usize,
    per_host: usize,
    /// Hosts spared the per-host cap (`host_limit_exempt`).
    exempt: Vec<Subnet>,
    /// Keys the network-group hash that protects 4 peers (Core's `CompareNetGroupKeyed`).
    group_key: RandomState,
    held: Mutex<HashMap<PeerId, Held>>,
}

/// A place, given back when dropped (or taken away by an eviction before).
pub struct Place {
    inbound: Arc<Inbound>,
    id: PeerId,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.inbound.lock().remove(&self.id);
    }
}

/// The IPv4 address an address is or carries (mapped, 6to4, Teredo, NAT64: Core's
/// `GetLinkedIPv4`), else the address itself.
fn as_ipv4(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .or_else(|| super::addrbook::linked_ipv4(&v6))
            .map_or(ip, IpAddr::V4),
    }
}

/// Core's network group of an address: IPv4 /16, IPv6 /32.
fn group(ip: IpAddr) -> Subnet {
    let ip = as_ipv4(ip);
    Subnet::around(ip, if ip.is_ipv4() { 16 } else { 32 })
}

/// A host: an IPv4 address, an IPv6 /64.
pub(super) fn host(ip: IpAddr) -> Subnet {
    let ip = as_ipv4(ip);
    Subnet::around(ip, if ip.is_ipv4() { 32 } else { 64 })
}

impl Inbound {
    /// `max` places, at most `per_host` of them for one host unless `exempt` spares it.
    pub fn new(max: usize, per_host: usize, exempt: Vec<Subnet>) -> Arc<Inbound> {
        Arc::new(Inbound {
            max,
            per_host,
            exempt,
            group_key: RandomState::new(),
            held: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PeerId, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for connection `id` from `addr`, evicting another connection if they are all
    /// taken; `None` when the newcomer is refused.
    pub fn admit(self: &Arc<Self>, id: PeerId, addr: SocketAddr) -> Option<Place> {
        let (group, host) = (group(addr.ip()), host(addr.ip()));
        let mut held = self.lock();
        let spared = self.exempt.iter().any(|s| s.contains(addr.ip()));
        if !spared && held.values().filter(|h| h.host == host).count() >= self.per_host {
            crate::metrics::metrics().p2p_inbound_host_full.inc();
            return None;
        }
        if held.len() >= self.max {
            let protected = protected(&held, &self.group_key);
            let candidates: HashMap<PeerId, &Held> = held
                .iter()
                .filter(|(id, _)| !protected.contains(id))
                .map(|(id, h)| (*id, h))
                .collect();
            let victim = choose_victim(&candidates, group, host, spared)?;
            if let Some(task) = held.remove(&victim).and_then(|h| h.task) {
                task.abort();
            }
            crate::metrics::metrics().p2p_inbound_evicted.inc();
            tracing::debug!("evicting inbound peer {victim} for a peer from {addr}");
        }
        held.insert(
            id,
            Held {
                group,
                host,
                since: Instant::now(),
                task: None,
                merits: Merits::default(),
                local: super::addrbook::is_local(addr.ip()),
            },
        );
        Some(Place {
            inbound: self.clone(),
            id,
        })
    }

    /// Notes the task running connection `id`, which an eviction ends.
    pub fn running(&self, id: PeerId, task: AbortHandle) {
        match self.lock().get_mut(&id) {
            Some(h) => h.task = Some(task),
            // Evicted (or ended) before its task was noted.
            None => task.abort(),
        }
    }
}

impl Inbound {
    /// Notes what connection `id` did (nothing if it holds no inbound place).
    pub fn note(&self, id: PeerId, merit: Merit) {
        let mut held = self.lock();
        let Some(merits) = held.get_mut(&id).map(|h| &mut h.merits) else {
            return;
        };
        match merit {
            Merit::Ping(rtt) => merits.min_ping = Some(merits.min_ping.map_or(rtt, |m| m.min(rtt))),
            Merit::Block => merits.last_block = Some(Instant::now()),
            Merit::Tx => merits.last_tx = Some(Instant::now()),
        }
    }
}

/// The connections Core's `SelectNodeToEvict` protects: each rule in turn takes the best of
/// what the rules before left (ties go to the longer connected).
fn protected(held: &HashMap<PeerId, Held>, group_key: &RandomState) -> HashSet<PeerId> {
    let now = Instant::now();
    let mut left: Vec<(&PeerId, &Held)> = held.iter().collect();
    let mut out = HashSet::new();
    let any = |_: &Held| true;
    let age = |at: Option<Instant>| at.map_or(u128::MAX, |t| now.duration_since(t).as_nanos());
    let group = |h: &Held| u128::from(group_key.hash_one(h.group));
    let ping = |h: &Held| h.merits.min_ping.map_or(u128::MAX, |p| p.as_nanos());
    protect(&mut left, &mut out, 4, &any, &group);
    protect(&mut left, &mut out, 8, &any, &ping);
    protect(&mut left, &mut out, 4, &any, &|h| age(h.merits.last_tx));
    protect(&mut left, &mut out, 4, &any, &|h| age(h.merits.last_block));
    // Half of the rest by uptime, up to a quarter of them local peers first (Core's
    // `ProtectEvictionCandidatesByRatio`: behind a local Tor every inbound peer is local).
    let half = left.len() / 2;
    let locals = protect(&mut left, &mut out, half / 2, &|h| h.local, &|_| 0);
    protect(&mut left, &mut out, half - locals, &any, &|_| 0);
    out
}

/// Moves the best `n` of `left` by `key` (lowest first; ties go to the older connection, ids
/// counting up), among those `which` allows, into `out`; returns how many it moved.
fn protect(
    left: &mut Vec<(&PeerId, &Held)>,
    out: &mut HashSet<PeerId>,
    n: usize,
    which: &dyn Fn(&Held) -> bool,
    key: &dyn Fn(&Held) -> u128,
) -> usize {
    left.sort_by_key(|(id, h)| (!which(h), key(h), h.since, **id));
    let n = n.min(left.iter().take_while(|(_, h)| which(h)).count());
    for (id, _) in left.drain(..n) {
        out.insert(*id);
    }
    n
}

/// The connection to evict for a newcomer from `group` and `host`, or `None` when the newcomer
/// is the one that would go. A `spared` newcomer's host (127.0.0.1, where every Tor peer
/// arrives) gives its youngest connection up even when it is the busiest, as in Core, which
/// never counts the newcomer: a host behind which many peers hide cannot be shut by some of
/// them holding every place.
fn choose_victim(
    held: &HashMap<PeerId, &Held>,
    new_group: Subnet,
    new_host: Subnet,
    spared: bool,
) -> Option<PeerId> {
    let mut groups: HashMap<Subnet, usize> = HashMap::new();
    for h in held.values() {
        *groups.entry(h.group).or_default() += 1;
    }
    *groups.entry(new_group).or_default() += 1;
    // The largest group, then its busiest host; ties go to the newcomer's, so that equals do
    // not push each other out.
    let top_group = *groups
        .iter()
        .max_by_key(|(g, n)| (**n, **g == new_group))?
        .0;
    let mut hosts: HashMap<Subnet, usize> = HashMap::new();
    for h in held.values().filter(|h| h.group == top_group) {
        *hosts.entry(h.host).or_default() += 1;
    }
    if new_group == top_group {
        *hosts.entry(new_host).or_default() += 1;
    }
    let top_host = *hosts.iter().max_by_key(|(h, n)| (**n, **h == new_host))?.0;
    if top_host == new_host && !spared {
        return None;
    }
    held.iter()
        .filter(|(_, h)| h.host == top_host)
        .max_by_key(|(id, h)| (h.since, **id))
        .map(|(id, _)| *id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        format!("{s}:8333").parse().unwrap()
    }

    /// Places held by `conns` (id, address), the later ones younger, without protections.
    fn held(conns: &[(PeerId, &str)]) -> HashMap<PeerId, Held> {
        let start = Instant::now();
        conns
            .iter()
            .enumerate()
            .map(|(i, (id, a))| {
                let ip = addr(a).ip();
                let h = Held {
                    group: group(ip),
                    host: host(ip),
                    since: start + Duration::from_millis(i as u64),
                    task: None,
                    merits: Merits::default(),
                    local: false,
                };
                (*id, h)
            })
            .collect()
    }

    fn victim(conns: &[(PeerId, &str)], newcomer: &str) -> Option<PeerId> {
        victim_spared(conns, newcomer, false)
    }

    fn victim_spared(conns: &[(PeerId, &str)], newcomer: &str, spared: bool) -> Option<PeerId> {
        let held = held(conns);
        let ip = addr(newcomer).ip();
        choose_victim(
            &held.iter().map(|(i, h)| (*i, h)).collect(),
            group(ip),
            host(ip),
            spared,
        )
    }

    #[test]
    fn the_busiest_host_gives_way_and_equals_keep_their_places() {
        let crowd = [
            (0, "10.0.0.2"),
            (1, "10.0.0.2"),
            (2, "10.0.0.2"),
            (3, "10.1.0.3"),
        ];
        // The host with three gives its youngest to a newcomer from anywhere else...
        assert_eq!(victim(&crowd, "192.0.2.9"), Some(2));
        // ...but not to itself, unless it is spared the per-host rules (Tor's 127.0.0.1): then
        // its youngest gives way, as in Core.
        assert_eq!(victim(&crowd, "10.0.0.2"), None);
        assert_eq!(victim_spared(&crowd, "10.0.0.2", true), Some(2));
        // With every host at one connection in its own group, a newcomer is refused.
        let spread = [
            (10, "10.2.0.1"),
            (11, "10.3.0.1"),
            (12, "10.4.0.1"),
            (13, "10.5.0.1"),
        ];
        assert_eq!(victim(&spread, "10.6.0.1"), None);
        // A group of many hosts gives way to a host from a smaller group.
        let group = [
            (31, "10.9.0.1"),
            (32, "10.9.0.2"),
            (33, "10.9.0.3"),
            (34, "10.9.0.4"),
        ];
        assert!(victim(&group, "172.16.0.1").is_some());
    }

    #[test]
    fn one_host_holds_at_most_its_share_and_a_place_comes_back_when_dropped() {
        let inbound = Inbound::new(10, 3, Vec::new());
        let places: Vec<Place> = (0..3)
            .map(|id| inbound.admit(id, addr("10.0.0.2")).unwrap())
            .collect();
        assert!(inbound.admit(3, addr("10.0.0.2")).is_none(), "a fourth");
        let other = inbound.admit(4, addr("10.0.0.3"));
        assert!(other.is_some(), "another host");
        drop(places);
        let back = inbound.admit(5, addr("10.0.0.2"));
        assert!(back.is_some());
        assert_eq!(inbound.lock().len(), 2);
    }

    /// 20 places held by hosts of their own groups, then 40 by one host (ids 0 to 39).
    fn crowd(inbound: &Arc<Inbound>) -> Vec<Place> {
        let others = (40..60u64).map(|id| (id, format!("10.{id}.0.1")));
        let one_host = (0..40u64).map(|id| (id, "10.0.0.2".to_string()));
        others
            .chain(one_host)
            .map(|(id, a)| inbound.admit(id, addr(&a)).unwrap())
            .collect()
    }

    /// 60 places: 20 held by hosts of their own groups, then 40 by one host's connections.
    /// Core's protections leave the youngest 20 to be evicted; among them the crowded host's
    /// youngest goes, unless what it did protects it.
    #[test]
    fn a_low_ping_or_a_new_block_or_transaction_protects_a_connection() {
        let inbound = Inbound::new(60, 100, Vec::new());
        let _places = crowd(&inbound);
        // The crowded host's three youngest did something for cairn.
        inbound.note(39, Merit::Ping(Duration::from_millis(3)));
        inbound.note(38, Merit::Tx);
        inbound.note(37, Merit::Block);
        inbound.note(37, Merit::Ping(Duration::from_millis(900)));
        let newcomer = inbound.admit(100, addr("192.0.2.9"));
        assert!(newcomer.is_some());
        let held = inbound.lock();
        assert_eq!(held.len(), 60);
        assert!(
            [37, 38, 39].iter().all(|id| held.contains_key(id)),
            "protected"
        );
        let gone: Vec<PeerId> = (0..40).filter(|id| !held.contains_key(id)).collect();
        assert_eq!(gone, vec![36], "the youngest one not protected");
        // Without merits the youngest goes.
        drop(held);
        let plain = Inbound::new(60, 100, Vec::new());
        let _more = crowd(&plain);
        assert!(plain.admit(100, addr("192.0.2.9")).is_some());
        assert!(!plain.lock().contains_key(&39));
    }
}

//! The inbound places, and who gives one up when they are all taken (Core's
//! `AttemptToEvictConnection` and `SelectNodeToEvict`): the network group (IPv4 /16, IPv6 /32,
//! Core's `NetGroupManager::GetGroup` for routable addresses) with the most connections gives
//! up its busiest host's (IPv4 address, IPv6 /64) youngest connection. The newcomer counts as
//! one of its host's connections, and when it would be the one to go it is refused instead: a
//! host that holds every place cannot take another by evicting itself, and a peer from a host
//! with fewer connections always gets in. Core also protects peers by ping time, recent blocks
//! and transactions and uptime before choosing; cairn does not measure those yet.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

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
}

/// The inbound places.
pub struct Inbound {
    max: usize,
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

/// Core's network group of an address: IPv4 /16, IPv6 /32.
fn group(ip: IpAddr) -> Subnet {
    match ip {
        IpAddr::V4(_) => Subnet::around(ip, 16),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => Subnet::around(IpAddr::V4(v4), 16),
            None => Subnet::around(ip, 32),
        },
    }
}

/// A host: an IPv4 address, an IPv6 /64.
pub(super) fn host(ip: IpAddr) -> Subnet {
    match ip {
        IpAddr::V4(_) => Subnet::around(ip, 32),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => Subnet::around(IpAddr::V4(v4), 32),
            None => Subnet::around(ip, 64),
        },
    }
}

impl Inbound {
    /// `max` places.
    pub fn new(max: usize) -> Arc<Inbound> {
        Arc::new(Inbound {
            max,
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
        if held.len() >= self.max {
            let victim = choose_victim(&held, group, host)?;
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

/// The connection to evict for a newcomer from `group` and `host`, or `None` when the newcomer
/// is the one that would go.
fn choose_victim(
    held: &HashMap<PeerId, Held>,
    new_group: Subnet,
    new_host: Subnet,
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
    if top_host == new_host {
        return None;
    }
    held.iter()
        .filter(|(_, h)| h.host == top_host)
        .max_by_key(|(_, h)| h.since)
        .map(|(id, _)| *id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        format!("{s}:8333").parse().unwrap()
    }

    #[test]
    fn the_busiest_host_gives_way_and_equals_keep_their_places() {
        let inbound = Inbound::new(4);
        let mut places = Vec::new();
        for id in 0..3 {
            places.push(inbound.admit(id, addr("10.0.0.2")).unwrap());
        }
        places.push(inbound.admit(3, addr("10.1.0.3")).unwrap());
        // Full. The host with three gives its youngest to a newcomer from anywhere else...
        let honest = inbound.admit(4, addr("192.0.2.9")).unwrap();
        assert!(!inbound.lock().contains_key(&2));
        // ...but not to itself.
        assert!(inbound.admit(5, addr("10.0.0.2")).is_none());
        // With every host at one connection in its own group, a newcomer is refused.
        drop(places);
        drop(honest);
        let others: Vec<Place> = ["10.2.0.1", "10.3.0.1", "10.4.0.1", "10.5.0.1"]
            .iter()
            .enumerate()
            .map(|(i, a)| inbound.admit(10 + i as u64, addr(a)).unwrap())
            .collect();
        assert!(inbound.admit(20, addr("10.6.0.1")).is_none());
        // A group of many hosts gives way to a host from a smaller group.
        drop(others);
        let crowd: Vec<Place> = (1..=4)
            .map(|i| inbound.admit(30 + i, addr(&format!("10.9.0.{i}"))).unwrap())
            .collect();
        let newcomer = inbound.admit(40, addr("172.16.0.1"));
        assert!(newcomer.is_some());
        assert_eq!(inbound.lock().len(), 4);
        drop(crowd);
        assert_eq!(inbound.lock().len(), 1, "the newcomer's place, still held");
    }
}

//! The address book: peer addresses learnt from seeds and from peers' `addr`/`addrv2`
//! messages, with when each was last heard of and how connecting to it went. Outbound
//! connections are picked from it; `getaddr` answers are sampled from it.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bitcoin::p2p::ServiceFlags;
use rand::seq::SliceRandom;

/// Most addresses kept; the stalest are dropped beyond it.
pub const MAX_ADDRESSES: usize = 20_000;
/// Most addresses one `addr`/`addrv2` message may carry (more is a protocol violation).
pub const MAX_ADDR_PER_MESSAGE: usize = 1000;
/// Share of the book a `getaddr` answer gives away, in percent (as Bitcoin Core).
const GETADDR_PERCENT: usize = 23;
/// The first retry waits this long; each failure doubles it, up to [`MAX_BACKOFF`].
const BASE_BACKOFF: Duration = Duration::from_secs(60);
const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// Addresses that failed this many times in a row are forgotten.
const MAX_FAILURES: u32 = 10;

/// One known address.
#[derive(Debug, Clone)]
struct Entry {
    services: ServiceFlags,
    /// Seconds since the epoch when a peer last vouched for it (or we last talked to it).
    last_seen: u32,
    failures: u32,
    last_try: Option<Instant>,
}

/// An address as it goes out in `addr` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownAddr {
    /// Where it is.
    pub addr: SocketAddr,
    /// The services it advertised.
    pub services: ServiceFlags,
    /// When it was last heard of, seconds since the epoch.
    pub last_seen: u32,
}

/// The address book, shared by the peer tasks.
pub struct AddrBook {
    entries: Mutex<HashMap<SocketAddr, Entry>>,
    /// Whether loopback and private addresses are kept (regtest only: its peers are local).
    allow_local: bool,
}

fn now_secs() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

/// Whether an address can be reached over the public internet (Bitcoin Core's `IsRoutable`,
/// for the IPv4 and IPv6 ranges that matter).
pub fn is_routable(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1])) // shared address space (RFC 6598)
                || (o[0] == 198 && (o[1] == 18 || o[1] == 19)) // benchmarking (RFC 2544)
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_routable(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local (and CJDNS)
                || (s[0] & 0xffc0) == 0xfe80 // link local
                || (s[0] == 0x2001 && s[1] == 0x0db8)) // documentation
        }
    }
}

impl AddrBook {
    /// An empty book. `allow_local` keeps loopback and private addresses (for regtest).
    pub fn new(allow_local: bool) -> Self {
        AddrBook {
            entries: Mutex::new(HashMap::new()),
            allow_local,
        }
    }

    fn usable(&self, addr: &SocketAddr) -> bool {
        addr.port() != 0 && (self.allow_local || is_routable(addr.ip()))
    }

    /// Adds or refreshes addresses (a newer `last_seen` wins); returns how many were new.
    /// Timestamps from the future are clamped to now.
    pub fn add(&self, addrs: impl IntoIterator<Item = KnownAddr>) -> usize {
        let now = now_secs();
        let mut map = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut added = 0;
        for known in addrs {
            if !self.usable(&known.addr) {
                continue;
            }
            let seen = known.last_seen.min(now);
            match map.get_mut(&known.addr) {
                Some(e) => {
                    if seen > e.last_seen {
                        e.last_seen = seen;
                        e.services = known.services;
                    }
                }
                None => {
                    map.insert(
                        known.addr,
                        Entry {
                            services: known.services,
                            last_seen: seen,
                            failures: 0,
                            last_try: None,
                        },
                    );
                    added += 1;
                }
            }
        }
        if map.len() > MAX_ADDRESSES {
            let mut by_age: Vec<(u32, SocketAddr)> =
                map.iter().map(|(a, e)| (e.last_seen, *a)).collect();
            by_age.sort_unstable();
            let excess = map.len() - MAX_ADDRESSES;
            for (_, addr) in by_age.into_iter().take(excess) {
                map.remove(&addr);
            }
        }
        added
    }

    /// How many addresses are known.
    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no address is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An address worth an outbound attempt: offers full blocks with witnesses, is not in
    /// `exclude` (connected or being connected), and is not waiting out a back-off after
    /// failures. Picks at random among the candidates, preferring the recently seen.
    pub fn pick(
        &self,
        exclude: &HashSet<SocketAddr>,
        banned: impl Fn(&SocketAddr) -> bool,
    ) -> Option<SocketAddr> {
        let now = Instant::now();
        let mut map = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let wanted = ServiceFlags::NETWORK | ServiceFlags::WITNESS;
        let mut candidates: Vec<(u32, SocketAddr)> = map
            .iter()
            .filter(|(a, e)| {
                e.services.has(wanted)
                    && !exclude.contains(a)
                    && !banned(a)
                    && e.last_try
                        .is_none_or(|t| now.duration_since(t) >= backoff(e.failures))
            })
            .map(|(a, e)| (e.last_seen, *a))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        // The freshest half (at least one), then a random one of those.
        candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        candidates.truncate(candidates.len().div_ceil(2));
        let (_, chosen) = *candidates.choose(&mut rand::thread_rng())?;
        if let Some(e) = map.get_mut(&chosen) {
            e.last_try = Some(now);
        }
        Some(chosen)
    }

    /// The services the book knows `addr` by (from gossip, or from its last handshake).
    pub fn services(&self, addr: &SocketAddr) -> Option<ServiceFlags> {
        let map = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(addr).map(|e| e.services)
    }

    /// Records a completed outbound handshake: the address is good and seen now. One the book
    /// did not have (an `addnode` or `connect` peer) is added, so that a saved book keeps it.
    pub fn mark_good(&self, addr: SocketAddr, services: ServiceFlags) {
        let now = now_secs();
        let mut map = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = map.get_mut(&addr) {
            e.failures = 0;
            e.last_seen = now;
            e.services = services;
        } else if self.usable(&addr) && map.len() < MAX_ADDRESSES {
            map.insert(
                addr,
                Entry {
                    services,
                    last_seen: now,
                    failures: 0,
                    last_try: None,
                },
            );
        }
    }

    /// Records a failed attempt; after [`MAX_FAILURES`] in a row the address is dropped.
    pub fn mark_failed(&self, addr: SocketAddr) {
        let mut map = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let forget = match map.get_mut(&addr) {
            Some(e) => {
                e.failures += 1;
                e.last_try = Some(Instant::now());
                e.failures >= MAX_FAILURES
            }
            None => false,
        };
        if forget {
            map.remove(&addr);
        }
    }

    /// Every address, for saving the book.
    pub fn all(&self) -> Vec<KnownAddr> {
        let map = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        map.iter()
            .map(|(a, e)| KnownAddr {
                addr: *a,
                services: e.services,
                last_seen: e.last_seen,
            })
            .collect()
    }

    /// A random sample for a `getaddr` answer: at most [`GETADDR_PERCENT`]% of the book
    /// (at least one when there is any) and at most [`MAX_ADDR_PER_MESSAGE`].
    pub fn sample(&self) -> Vec<KnownAddr> {
        let map = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<KnownAddr> = map
            .iter()
            .filter(|(_, e)| e.failures < 3)
            .map(|(a, e)| KnownAddr {
                addr: *a,
                services: e.services,
                last_seen: e.last_seen,
            })
            .collect();
        let n = (all.len() * GETADDR_PERCENT)
            .div_ceil(100)
            .min(MAX_ADDR_PER_MESSAGE);
        all.shuffle(&mut rand::thread_rng());
        all.truncate(n);
        all
    }
}

fn backoff(failures: u32) -> Duration {
    if failures == 0 {
        // Never tried or last attempt succeeded: allow a retry after a short pause.
        return Duration::from_secs(10);
    }
    BASE_BACKOFF
        .saturating_mul(1 << failures.min(6))
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(s: &str, services: ServiceFlags, last_seen: u32) -> KnownAddr {
        KnownAddr {
            addr: s.parse().expect("address"),
            services,
            last_seen,
        }
    }

    fn full() -> ServiceFlags {
        ServiceFlags::NETWORK | ServiceFlags::WITNESS
    }

    #[test]
    fn refuses_unroutable_unless_local_allowed() {
        let book = AddrBook::new(false);
        let added = book.add([
            known("127.0.0.1:8333", full(), 1),
            known("10.1.2.3:8333", full(), 1),
            known("192.168.1.1:8333", full(), 1),
            known("[::1]:8333", full(), 1),
            known("[fe80::1]:8333", full(), 1),
            known("8.8.8.8:0", full(), 1),
            known("8.8.8.8:8333", full(), 1),
            known("[2a01:4f8::2]:8333", full(), 1),
        ]);
        assert_eq!(added, 2);
        let local = AddrBook::new(true);
        assert_eq!(local.add([known("127.0.0.1:18444", full(), 1)]), 1);
    }

    #[test]
    fn pick_wants_full_nodes_and_skips_excluded_and_banned() {
        let book = AddrBook::new(false);
        book.add([
            known("1.1.1.1:8333", ServiceFlags::NETWORK_LIMITED, 5),
            known("2.2.2.2:8333", full(), 5),
            known("3.3.3.3:8333", full(), 5),
        ]);
        let mut exclude = HashSet::new();
        exclude.insert("2.2.2.2:8333".parse().expect("address"));
        let banned = |a: &SocketAddr| a.ip().to_string() == "3.3.3.3";
        assert_eq!(book.pick(&exclude, banned), None);
        assert_eq!(
            book.pick(&exclude, |_| false),
            Some("3.3.3.3:8333".parse().expect("address"))
        );
        // Just tried: waits before the same address comes up again.
        assert_eq!(book.pick(&exclude, |_| false), None);
    }

    #[test]
    fn failures_back_off_then_forget() {
        let book = AddrBook::new(false);
        let a: SocketAddr = "4.4.4.4:8333".parse().expect("address");
        book.add([known("4.4.4.4:8333", full(), 5)]);
        for _ in 0..MAX_FAILURES {
            book.mark_failed(a);
        }
        assert!(book.is_empty());
    }

    #[test]
    fn bounded_and_keeps_the_freshest() {
        let book = AddrBook::new(false);
        let many = (0..MAX_ADDRESSES as u32 + 50).map(|i| {
            let ip = std::net::Ipv4Addr::from(0x0b00_0000 + i);
            KnownAddr {
                addr: SocketAddr::new(ip.into(), 8333),
                services: full(),
                last_seen: i + 1,
            }
        });
        book.add(many);
        assert_eq!(book.len(), MAX_ADDRESSES);
        // The 50 stalest went.
        let oldest = SocketAddr::new(std::net::Ipv4Addr::from(0x0b00_0000u32).into(), 8333);
        assert!(book.sample().iter().all(|k| k.addr != oldest));
    }

    #[test]
    fn sample_is_a_bounded_share() {
        let book = AddrBook::new(false);
        assert!(book.sample().is_empty());
        book.add([known("5.5.5.5:8333", full(), 5)]);
        assert_eq!(book.sample().len(), 1);
        book.add((0..100u32).map(|i| KnownAddr {
            addr: SocketAddr::new(std::net::Ipv4Addr::from(0x0c00_0000 + i).into(), 8333),
            services: full(),
            last_seen: 9,
        }));
        assert_eq!(book.sample().len(), (101 * 23usize).div_ceil(100));
    }

    #[test]
    fn future_timestamps_are_clamped() {
        let book = AddrBook::new(false);
        book.add([known("6.6.6.6:8333", full(), u32::MAX)]);
        assert!(book.sample()[0].last_seen <= now_secs());
    }
}

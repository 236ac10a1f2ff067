//! The address book: peer addresses learnt from seeds and from peers' `addr`/`addrv2`
//! messages, kept in Bitcoin Core's new and tried tables ([`tables`]), so that no one source
//! can fill it. Outbound connections and feelers are picked from it; `getaddr` answers are
//! sampled from it. Gossip is rate limited per peer ([`AddrRate`]).

pub mod tables;

use std::collections::HashSet;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bitcoin::hashes::{sha256, Hash};
use bitcoin::p2p::ServiceFlags;
use rand::Rng;

pub use tables::Info;
use tables::Tables;

/// Most addresses one `addr`/`addrv2` message may carry (more is a protocol violation), and
/// most in a `getaddr` answer (Core's `MAX_ADDR_TO_SEND`).
pub const MAX_ADDR_PER_MESSAGE: usize = 1000;
/// Most entries the book holds: every place of both tables.
pub const MAX_ADDRESSES: usize =
    (tables::NEW_BUCKETS + tables::TRIED_BUCKETS) * tables::BUCKET_SIZE;
/// Share of the book a `getaddr` answer gives away, in percent (Core's `MAX_PCT_ADDR_TO_SEND`).
const GETADDR_PERCENT: usize = 23;
/// What a gossiped address's time loses, so that gossip never looks fresher than a peer's
/// own word (Core's two hours in `ProcessMessage(ADDR)`).
const GOSSIP_PENALTY: i64 = 2 * 3600;
/// Gossip refills a peer's allowance at this many addresses a second
/// (`MAX_ADDR_RATE_PER_SECOND`)...
const ADDR_RATE_PER_SECOND: f64 = 0.1;
/// ...up to this many (`MAX_ADDR_PROCESSING_TOKEN_BUCKET`).
const ADDR_BUCKET: f64 = MAX_ADDR_PER_MESSAGE as f64;
/// Core's prefix of internal addresses (`INTERNAL_IN_IPV6_PREFIX`): the sources of addresses
/// that come from a seed rather than a peer.
const INTERNAL_PREFIX: [u8; 6] = [0xfd, 0x6b, 0x88, 0xc0, 0x87, 0x24];

/// An address as it comes in gossip and goes out in `addr` answers.
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
    tables: Mutex<Tables>,
    /// Whether loopback and private addresses are kept (regtest only: its peers are local).
    allow_local: bool,
    /// Addresses whose own handshake announced another chain ([`AddrBook::mark_other_chain`]):
    /// never picked again while cairn runs. At most [`OTHER_CHAIN_KEPT`]; only an outbound
    /// handshake cairn itself made adds one, so gossip cannot.
    other_chain: Mutex<HashSet<SocketAddr>>,
}

/// The service bit Bitcoin Knots's nodes announce since they left Bitcoin's chain at block
/// 961,632 and moved to a BLAKE2b proof of work with 164-byte headers (Knots's
/// `doc/blake2b-fork.md`; its `getnetworkinfo` names it `BLAKE2B?`): on mainnet a peer
/// announcing it follows another chain. Knots sets it on every network.
pub const OTHER_CHAIN_BLAKE2B: u64 = 1 << 28;

/// How many addresses of another chain the book remembers.
const OTHER_CHAIN_KEPT: usize = 4_096;

/// Whether `services` announce another chain than Bitcoin's ([`OTHER_CHAIN_BLAKE2B`]).
pub fn follows_other_chain(services: ServiceFlags) -> bool {
    services.to_u64() & OTHER_CHAIN_BLAKE2B != 0
}

/// `services` without the other chain's bit: what gossip may say of an address is never taken
/// as the address's own word (a peer could otherwise mark honest nodes as another chain's).
fn without_other_chain(services: ServiceFlags) -> ServiceFlags {
    ServiceFlags::from(services.to_u64() & !OTHER_CHAIN_BLAKE2B)
}

/// Seconds since the epoch.
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
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
                || (s[0] == 0x2001 && matches!(s[1] & 0xfff0, 0x0010 | 0x0020)) // ORCHID, v2
                || (s[0] == 0x2001 && s[1] == 0x0db8)) // documentation
        }
    }
}

/// Core's `CNetAddr::IsLocal`: 0.0.0.0/8, 127.0.0.0/8 and `::1`.
pub(super) fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[0] == 0 || v4.is_loopback(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_local(IpAddr::V4(v4)),
            None => v6.is_loopback(),
        },
    }
}

/// Core's `CNetAddr::GetLinkedIPv4` for IPv6 addresses that carry an IPv4 one: 6to4
/// (2002::/16, RFC 3964), Teredo (2001::/32, RFC 4380, inverted), NAT64 (64:ff9b::/96,
/// RFC 6052) and SIIT (::ffff:0:0:0/96, RFC 6145).
pub(super) fn linked_ipv4(v6: &Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let o = v6.octets();
    let at = |i: usize| std::net::Ipv4Addr::new(o[i], o[i + 1], o[i + 2], o[i + 3]);
    if o[..2] == [0x20, 0x02] {
        Some(at(2))
    } else if o[..4] == [0x20, 0x01, 0, 0] {
        Some(std::net::Ipv4Addr::from(!u32::from(at(12))))
    } else if o[..12] == [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0]
        || o[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0]
    {
        Some(at(12))
    } else {
        None
    }
}

/// Core's `NetGroupManager::GetGroup` without an asmap: the network class, then IPv4 /16
/// (an IPv6 address carrying an IPv4 one is grouped by it), IPv6 /32 (he.net's
/// 2001:470::/32 as /36), internal addresses (seeds) one group each, and every local or
/// otherwise unroutable address in one group.
pub fn group(ip: IpAddr) -> Vec<u8> {
    const UNROUTABLE: u8 = 0;
    const IPV4: u8 = 1;
    const IPV6: u8 = 2;
    const INTERNAL: u8 = 6;
    let v6 = match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    let o = v6.octets();
    if is_local(ip) {
        vec![UNROUTABLE]
    } else if o[..6] == INTERNAL_PREFIX {
        [&[INTERNAL][..], &o[6..]].concat()
    } else if !is_routable(ip) {
        vec![UNROUTABLE]
    } else if let Some(v4) = v6.to_ipv4_mapped().or_else(|| linked_ipv4(&v6)) {
        vec![IPV4, v4.octets()[0], v4.octets()[1]]
    } else if o[..4] == [0x20, 0x01, 0x04, 0x70] {
        vec![IPV6, o[0], o[1], o[2], o[3], o[4] & 0xf0]
    } else {
        vec![IPV6, o[0], o[1], o[2], o[3]]
    }
}

/// Core's `CNetAddr::SetInternal`: the source an address from the seed `name` is filed under
/// (its own network group, so seeds fill buckets of their own).
pub fn internal_source(name: &str) -> IpAddr {
    let digest = sha256::Hash::hash(name.as_bytes());
    let mut octets = [0u8; 16];
    octets[..6].copy_from_slice(&INTERNAL_PREFIX);
    octets[6..].copy_from_slice(&digest.as_byte_array()[..10]);
    IpAddr::V6(Ipv6Addr::from(octets))
}

/// Core's handling of a gossiped time in `ProcessMessage(ADDR)`: one before 1973 or more than
/// 10 minutes ahead becomes five days ago.
fn gossip_time(claimed: u32, now: i64) -> u32 {
    let t = i64::from(claimed);
    if t <= 100_000_000 || t > now + 600 {
        (now - 5 * 86_400).max(0) as u32
    } else {
        claimed
    }
}

/// One peer's allowance of gossiped addresses, a token bucket as Core's
/// `m_addr_token_bucket`: one to start with, 0.1 more a second up to 1,000, and 1,000 more
/// when cairn asks the peer with `getaddr`. Addresses beyond it are dropped unread.
#[derive(Debug)]
pub struct AddrRate {
    tokens: f64,
    refilled: Instant,
}

impl Default for AddrRate {
    fn default() -> Self {
        AddrRate {
            tokens: 1.0,
            refilled: Instant::now(),
        }
    }
}

impl AddrRate {
    /// cairn sent the peer a `getaddr`: its answer may be whole.
    pub fn asked(&mut self) {
        self.tokens += MAX_ADDR_PER_MESSAGE as f64;
    }

    /// How many of `offered` addresses may be taken now (the tokens are spent).
    pub fn take(&mut self, offered: usize) -> usize {
        let now = Instant::now();
        if self.tokens < ADDR_BUCKET {
            let grown = now.duration_since(self.refilled).as_secs_f64() * ADDR_RATE_PER_SECOND;
            self.tokens = (self.tokens + grown).min(ADDR_BUCKET);
        }
        self.refilled = now;
        let taken = (self.tokens.floor() as usize).min(offered);
        self.tokens -= taken as f64;
        taken
    }
}

impl AddrBook {
    /// An empty book with a fresh secret key. `allow_local` keeps loopback and private
    /// addresses (for regtest).
    pub fn new(allow_local: bool) -> Self {
        Self::with_key(allow_local, rand::thread_rng().gen())
    }

    /// An empty book placing with `key` (a saved book's).
    pub fn with_key(allow_local: bool, key: [u8; 32]) -> Self {
        AddrBook {
            tables: Mutex::new(Tables::new(key)),
            allow_local,
            other_chain: Mutex::new(HashSet::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn usable(&self, addr: &SocketAddr) -> bool {
        addr.port() != 0 && (self.allow_local || is_routable(addr.ip()))
    }

    /// Adds addresses `source` told of, their times less Core's two-hour penalty (none for a
    /// peer's own address); returns how many took a place.
    pub fn add(&self, addrs: impl IntoIterator<Item = KnownAddr>, source: IpAddr) -> usize {
        let now = now_secs();
        let mut rng = rand::thread_rng();
        let mut tables = self.lock();
        let mut added = 0;
        for mut known in addrs {
            known.services = without_other_chain(known.services);
            // Core refuses IPv4 mapped into `addrv2`'s IPv6; taken as the IPv4 it is, it is one
            // entry, not two.
            if let IpAddr::V6(v6) = known.addr.ip() {
                if let Some(v4) = v6.to_ipv4_mapped() {
                    known.addr = SocketAddr::new(IpAddr::V4(v4), known.addr.port());
                }
            }
            if !self.usable(&known.addr) {
                continue;
            }
            known.last_seen = gossip_time(known.last_seen, now);
            if tables.add(&known, source, GOSSIP_PENALTY, now, &mut rng) {
                added += 1;
            }
        }
        added
    }

    /// How many addresses are known.
    pub fn len(&self) -> usize {
        let (new, tried) = self.lock().counts();
        new + tried
    }

    /// Whether no address is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Addresses in the new and in the tried table.
    pub fn counts(&self) -> (usize, usize) {
        self.lock().counts()
    }

    /// What the book knows of `addr`.
    pub fn info(&self, addr: &SocketAddr) -> Option<Info> {
        self.lock().get(addr).cloned()
    }

    /// An address for an outbound connection, as Core's `ThreadOpenConnections` picks one: up
    /// to 100 draws from the tables, skipping the connected (`exclude`) and the banned, a
    /// network group an outbound peer is in already (`groups`; regtest's local addresses
    /// aside, which Core never dials), one tried in the last 10 minutes (for the first 30
    /// draws) and one without full blocks and witnesses. The attempt is recorded, a failure
    /// counting if `count_failure`.
    pub fn pick(
        &self,
        exclude: &HashSet<SocketAddr>,
        groups: &HashSet<Vec<u8>>,
        banned: impl Fn(&SocketAddr) -> bool,
        count_failure: bool,
    ) -> Option<SocketAddr> {
        let (wanted, now) = (ServiceFlags::NETWORK | ServiceFlags::WITNESS, now_secs());
        let other_chain = self.other_chain();
        self.draw(false, count_failure, |info, draws| {
            let group = group(info.addr.ip());
            !exclude.contains(&info.addr)
                && !banned(&info.addr)
                && (group == [0] || !groups.contains(&group))
                && info.services.has(wanted)
                && !other_chain.contains(&info.addr)
                && (draws >= 30 || now - info.last_try >= 600)
        })
    }

    /// An address for a feeler connection (Core's `FEELER_INTERVAL` branch): the tried entry
    /// a collision waits on, else one from the new table that offers blocks.
    pub fn pick_feeler(
        &self,
        exclude: &HashSet<SocketAddr>,
        banned: impl Fn(&SocketAddr) -> bool,
    ) -> Option<SocketAddr> {
        let collision = {
            let mut tables = self.lock();
            let old = tables
                .tried_collision(&mut rand::thread_rng())
                .map(|i| i.addr);
            match old {
                Some(addr) if exclude.contains(&addr) => {
                    // Connected already: it is good, and the collision resolves for it.
                    tables.good(&addr, now_secs());
                    None
                }
                other => other,
            }
        };
        if let Some(addr) = collision.filter(|a| !banned(a)) {
            self.lock().attempt(&addr, true, now_secs());
            return Some(addr);
        }
        let now = now_secs();
        let other_chain = self.other_chain();
        self.draw(true, true, |info, draws| {
            !exclude.contains(&info.addr)
                && !banned(&info.addr)
                && info.services.has(ServiceFlags::NETWORK)
                && !other_chain.contains(&info.addr)
                && (draws >= 30 || now - info.last_try >= 600)
        })
    }

    fn draw(
        &self,
        new_only: bool,
        count_failure: bool,
        fits: impl Fn(&Info, usize) -> bool,
    ) -> Option<SocketAddr> {
        let now = now_secs();
        let mut rng = rand::thread_rng();
        let mut tables = self.lock();
        let mut chosen = None;
        for draws in 1..=100 {
            let Some(info) = tables.select(new_only, now, &mut rng) else {
                break;
            };
            if fits(info, draws) {
                chosen = Some(info.addr);
                break;
            }
        }
        let chosen = chosen?;
        tables.attempt(&chosen, count_failure, now);
        Some(chosen)
    }

    /// Resolves the tried-table collisions whose tests are over (Core's `ResolveCollisions`).
    pub fn resolve_collisions(&self) {
        self.lock().resolve_collisions(now_secs());
    }

    /// The services the book knows `addr` by (from gossip, or from its last handshake).
    pub fn services(&self, addr: &SocketAddr) -> Option<ServiceFlags> {
        self.lock().get(addr).map(|i| i.services)
    }

    /// Records a completed outbound handshake (Core's `Good`): the address moves to the tried
    /// table. One the book did not have (an `addnode` or `connect` peer) is added first, as
    /// its own source.
    pub fn mark_good(&self, addr: SocketAddr, services: ServiceFlags) {
        if !self.usable(&addr) {
            return;
        }
        let now = now_secs();
        let mut tables = self.lock();
        let known = KnownAddr {
            addr,
            services,
            last_seen: now as u32,
        };
        tables.add(&known, addr.ip(), 0, now, &mut rand::thread_rng());
        tables.good(&addr, now);
    }

    /// Records that `addr` announced another chain in its own handshake: outbound and feeler
    /// picks pass it over while cairn runs (the first [`OTHER_CHAIN_KEPT`] such addresses).
    pub fn mark_other_chain(&self, addr: SocketAddr) {
        let mut other_chain = self.other_chain();
        if other_chain.len() < OTHER_CHAIN_KEPT {
            other_chain.insert(addr);
        }
    }

    fn other_chain(&self) -> MutexGuard<'_, HashSet<SocketAddr>> {
        self.other_chain
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// An outbound connection to `addr` ended (Core's `Connected`).
    pub fn disconnected(&self, addr: &SocketAddr) {
        self.lock().connected(addr, now_secs());
    }

    /// Every entry and the key, for saving the book.
    pub fn saved(&self) -> ([u8; 32], Vec<Info>) {
        let tables = self.lock();
        (tables.key(), tables.entries().cloned().collect())
    }

    /// Puts saved entries back; returns how many found a place.
    pub fn restore(&self, entries: impl IntoIterator<Item = Info>) -> usize {
        let now = now_secs();
        let mut tables = self.lock();
        entries
            .into_iter()
            .filter(|info| self.usable(&info.addr))
            .filter(|info| tables.restore(info.clone(), now))
            .count()
    }

    /// A random sample for a `getaddr` answer (Core's `GetAddr`): at most
    /// [`GETADDR_PERCENT`]% of the book and [`MAX_ADDR_PER_MESSAGE`], none terrible. Unlike
    /// Core, a book of a few (regtest's) gives at least one.
    pub fn sample(&self) -> Vec<KnownAddr> {
        let tables = self.lock();
        let (new, tried) = tables.counts();
        let n = ((new + tried) * GETADDR_PERCENT)
            .div_ceil(100)
            .min(MAX_ADDR_PER_MESSAGE);
        let now = now_secs();
        tables
            .sample(n, 100, now, &mut rand::thread_rng())
            .into_iter()
            .map(|i| KnownAddr {
                addr: i.addr,
                services: i.services,
                last_seen: i.time.clamp(0, i64::from(u32::MAX)) as u32,
            })
            .collect()
    }
}

/// The answer every `getaddr` gets until it expires, 21 to 27 hours after it was drawn (Core's
/// `m_addr_response_caches`, `AVG_ADDRESS_RESPONSE_CACHE_LIFETIME` of 24 h with a random
/// spread): a peer that asks again or reconnects learns nothing more of the book.
#[derive(Default)]
pub struct AnswerCache {
    cached: Mutex<Option<(std::time::Instant, Vec<KnownAddr>)>>,
}

impl AnswerCache {
    /// The cached answer at `now`, or a fresh one from `draw` once it expired.
    pub fn get(
        &self,
        now: std::time::Instant,
        draw: impl FnOnce() -> Vec<KnownAddr>,
    ) -> Vec<KnownAddr> {
        let mut cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
        match &*cached {
            Some((until, sample)) if *until > now => sample.clone(),
            _ => {
                let sample = draw();
                let hours = 21.0 + 6.0 * rand::random::<f64>();
                let until = now + std::time::Duration::from_secs_f64(hours * 3600.0);
                *cached = Some((until, sample.clone()));
                sample
            }
        }
    }
}

#[cfg(test)]
mod tests;

//! The address book's tables, a port of Bitcoin Core's `AddrManImpl` (`src/addrman.cpp`).
//!
//! Addresses heard of through gossip live in the *new* table: 1,024 buckets of 64 places,
//! and the bucket is chosen from the address's network group *and the group of the peer that
//! sent it*, so that one source group reaches at most 64 buckets
//! (`ADDRMAN_NEW_BUCKETS_PER_SOURCE_GROUP`) and can never fill the table. Addresses cairn
//! connected to move to the *tried* table: 256 buckets of 64, at most 8 buckets per network
//! group. A place already held is given up only by an entry that is terrible (`IsTerrible`),
//! and a tried entry only after it failed a test connection (test-before-evict,
//! `ResolveCollisions`). Positions are keyed hashes with a secret key kept in the saved book,
//! so an attacker cannot aim at them.
//!
//! Every method takes the time (`now`, seconds since the epoch) so that tests can move it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use bitcoin::hashes::{sha256d, Hash, HashEngine};
use bitcoin::p2p::ServiceFlags;
use rand::Rng;

use super::{group, KnownAddr};

mod check;
pub mod replay;

/// `ADDRMAN_NEW_BUCKET_COUNT`.
pub const NEW_BUCKETS: usize = 1024;
/// `ADDRMAN_TRIED_BUCKET_COUNT`.
pub const TRIED_BUCKETS: usize = 256;
/// `ADDRMAN_BUCKET_SIZE`.
pub const BUCKET_SIZE: usize = 64;
/// `ADDRMAN_TRIED_BUCKETS_PER_GROUP`.
const TRIED_BUCKETS_PER_GROUP: u64 = 8;
/// `ADDRMAN_NEW_BUCKETS_PER_SOURCE_GROUP`.
const NEW_BUCKETS_PER_SOURCE_GROUP: u64 = 64;
/// `ADDRMAN_NEW_BUCKETS_PER_ADDRESS`: most new-table places one address holds.
const NEW_BUCKETS_PER_ADDRESS: u8 = 8;
/// `ADDRMAN_HORIZON`: an address not heard of for 30 days is terrible.
const HORIZON: i64 = 30 * 86_400;
/// `ADDRMAN_RETRIES`: tried this often and never connected is terrible.
const RETRIES: u32 = 3;
/// `ADDRMAN_MAX_FAILURES` failures in a row, and no success for `ADDRMAN_MIN_FAIL` (7 days).
const MAX_FAILURES: u32 = 10;
const MIN_FAIL: i64 = 7 * 86_400;
/// `ADDRMAN_REPLACEMENT`: a tried entry that connected within 4 hours is not evicted.
const REPLACEMENT: i64 = 4 * 3600;
/// `ADDRMAN_SET_TRIED_COLLISION_SIZE`.
const MAX_COLLISIONS: usize = 10;
/// `ADDRMAN_TEST_WINDOW`: how long a collision waits for its test connection.
const TEST_WINDOW: i64 = 40 * 60;

type Id = u64;

/// One address and what is known of it (Core's `AddrInfo`).
#[derive(Debug, Clone)]
pub struct Info {
    /// The address.
    pub addr: SocketAddr,
    /// The peer it was first heard from (whose network group chose its new bucket).
    pub source: IpAddr,
    /// The services it advertised.
    pub services: ServiceFlags,
    /// When it was last heard of (`nTime`), less the time penalty.
    pub time: i64,
    /// The last connection attempt (`m_last_try`).
    pub last_try: i64,
    /// The last attempt that counted as a failure (`m_last_count_attempt`).
    pub last_count_attempt: i64,
    /// The last successful connection (`m_last_success`), 0 for never.
    pub last_success: i64,
    /// Failed attempts since the last success (`nAttempts`).
    pub attempts: u32,
    /// Whether it is in the tried table.
    pub in_tried: bool,
    ref_count: u8,
    list_pos: usize,
}

impl Info {
    fn new(known: &KnownAddr, source: IpAddr) -> Info {
        Info {
            addr: known.addr,
            source,
            services: known.services,
            time: i64::from(known.last_seen),
            last_try: 0,
            last_count_attempt: 0,
            last_success: 0,
            attempts: 0,
            in_tried: false,
            ref_count: 0,
            list_pos: 0,
        }
    }

    /// An entry read back from a saved book, before its saved fields are set.
    pub fn restored(addr: SocketAddr, source: IpAddr) -> Info {
        let known = KnownAddr {
            addr,
            services: ServiceFlags::NONE,
            last_seen: 0,
        };
        Info::new(&known, source)
    }

    /// Core's `IsTerrible`: worth giving its place up and not worth telling peers about.
    pub fn is_terrible(&self, now: i64) -> bool {
        if now.saturating_sub(self.last_try) <= 60 {
            return false;
        }
        self.time > now.saturating_add(600)
            || now.saturating_sub(self.time) > HORIZON
            || (self.last_success == 0 && self.attempts >= RETRIES)
            || (now.saturating_sub(self.last_success) > MIN_FAIL && self.attempts >= MAX_FAILURES)
    }

    /// Core's `GetChance`: how likely a pick settles on it.
    fn chance(&self, now: i64) -> f64 {
        let recent = if now.saturating_sub(self.last_try) < 600 {
            0.01
        } else {
            1.0
        };
        recent * 0.66f64.powi(self.attempts.min(8) as i32)
    }
}

/// The two tables and the entries they place.
pub struct Tables {
    key: [u8; 32],
    infos: HashMap<Id, Info>,
    by_addr: HashMap<SocketAddr, Id>,
    new_slots: Vec<Option<Id>>,
    tried_slots: Vec<Option<Id>>,
    /// The entries of each table, in no order, for picking at random (Core's `vRandom`).
    new_list: Vec<Id>,
    tried_list: Vec<Id>,
    next_id: Id,
    /// New entries that connected but whose tried place is held (`m_tried_collisions`).
    collisions: Vec<Id>,
    /// The last successful connection to any address (`m_last_good`).
    last_good: i64,
}

/// Which table a place is in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Table {
    New,
    Tried,
}

impl Tables {
    /// Empty tables placing with `key`.
    pub fn new(key: [u8; 32]) -> Tables {
        Tables {
            key,
            infos: HashMap::new(),
            by_addr: HashMap::new(),
            new_slots: vec![None; NEW_BUCKETS * BUCKET_SIZE],
            tried_slots: vec![None; TRIED_BUCKETS * BUCKET_SIZE],
            new_list: Vec::new(),
            tried_list: Vec::new(),
            next_id: 0,
            collisions: Vec::new(),
            last_good: 1,
        }
    }

    /// The secret the positions are keyed with (saved with the book).
    pub fn key(&self) -> [u8; 32] {
        self.key
    }

    /// Entries in the new and the tried table.
    pub fn counts(&self) -> (usize, usize) {
        (self.new_list.len(), self.tried_list.len())
    }

    /// What is known of `addr`.
    pub fn get(&self, addr: &SocketAddr) -> Option<&Info> {
        self.by_addr.get(addr).and_then(|id| self.infos.get(id))
    }

    /// Every entry (for saving).
    pub fn entries(&self) -> impl Iterator<Item = &Info> {
        self.infos.values()
    }

    fn hash(&self, parts: &[&[u8]]) -> u64 {
        let mut engine = sha256d::Hash::engine();
        engine.input(&self.key);
        for part in parts {
            engine.input(&(part.len() as u32).to_le_bytes());
            engine.input(part);
        }
        let digest = sha256d::Hash::from_engine(engine);
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest.as_byte_array()[..8]);
        u64::from_le_bytes(first)
    }

    /// Core's `GetNewBucket`: the address's group and its source's group pick one of the
    /// source group's 64 buckets.
    fn new_bucket(&self, addr: &SocketAddr, source: IpAddr) -> usize {
        let (group, source_group) = (group(addr.ip()), group(source));
        let hash1 = self.hash(&[&group, &source_group]) % NEW_BUCKETS_PER_SOURCE_GROUP;
        (self.hash(&[&source_group, &hash1.to_le_bytes()]) % NEW_BUCKETS as u64) as usize
    }

    /// Core's `GetTriedBucket`: one of the address group's 8 buckets.
    fn tried_bucket(&self, addr: &SocketAddr) -> usize {
        let hash1 = self.hash(&[&key_of(addr)]) % TRIED_BUCKETS_PER_GROUP;
        let group = group(addr.ip());
        (self.hash(&[&group, &hash1.to_le_bytes()]) % TRIED_BUCKETS as u64) as usize
    }

    /// Core's `GetBucketPosition`, as an index into the table's places.
    fn place(&self, table: Table, bucket: usize, addr: &SocketAddr) -> usize {
        let tag: &[u8] = if table == Table::New { b"N" } else { b"K" };
        let pos = self.hash(&[tag, &(bucket as u32).to_le_bytes(), &key_of(addr)]);
        bucket * BUCKET_SIZE + (pos % BUCKET_SIZE as u64) as usize
    }

    fn new_place(&self, info: &Info) -> usize {
        self.place(
            Table::New,
            self.new_bucket(&info.addr, info.source),
            &info.addr,
        )
    }

    fn tried_place(&self, addr: &SocketAddr) -> usize {
        self.place(Table::Tried, self.tried_bucket(addr), addr)
    }

    fn list(&mut self, table: Table) -> &mut Vec<Id> {
        match table {
            Table::New => &mut self.new_list,
            Table::Tried => &mut self.tried_list,
        }
    }

    fn list_insert(&mut self, table: Table, id: Id) {
        let list = self.list(table);
        list.push(id);
        let pos = list.len() - 1;
        if let Some(info) = self.infos.get_mut(&id) {
            info.list_pos = pos;
        }
    }

    fn list_remove(&mut self, table: Table, id: Id) {
        let Some(pos) = self.infos.get(&id).map(|i| i.list_pos) else {
            return;
        };
        let list = self.list(table);
        if list.get(pos) != Some(&id) {
            return;
        }
        list.swap_remove(pos);
        if let Some(&moved) = list.get(pos) {
            if let Some(info) = self.infos.get_mut(&moved) {
                info.list_pos = pos;
            }
        }
    }

    fn create(&mut self, info: Info) -> Id {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.by_addr.insert(info.addr, id);
        self.infos.insert(id, info);
        id
    }

    fn delete(&mut self, id: Id) {
        if let Some(info) = self.infos.remove(&id) {
            self.by_addr.remove(&info.addr);
        }
    }

    /// Core's `ClearNew`: empties a new-table place, deleting an entry left in no place.
    fn clear_new(&mut self, place: usize) {
        let Some(id) = self.new_slots[place].take() else {
            return;
        };
        let Some(info) = self.infos.get_mut(&id) else {
            return;
        };
        info.ref_count -= 1;
        if info.ref_count == 0 {
            self.list_remove(Table::New, id);
            self.delete(id);
        }
    }

    /// Puts `id` in a new-table place (its count of places and the list kept right).
    fn put_new(&mut self, place: usize, id: Id) {
        if self.new_slots[place] == Some(id) {
            return;
        }
        self.clear_new(place);
        let Some(info) = self.infos.get_mut(&id) else {
            return;
        };
        info.ref_count += 1;
        let first = info.ref_count == 1;
        self.new_slots[place] = Some(id);
        if first {
            self.list_insert(Table::New, id);
        }
    }

    /// Core's `AddSingle`: learns `known` from `source`, its time less `penalty` seconds
    /// (none when a peer announces itself). Returns whether it took a new place.
    pub fn add(
        &mut self,
        known: &KnownAddr,
        source: IpAddr,
        penalty: i64,
        now: i64,
        rng: &mut impl Rng,
    ) -> bool {
        let penalty = if known.addr.ip() == source {
            0
        } else {
            penalty
        };
        let time = i64::from(known.last_seen);
        let id = match self.by_addr.get(&known.addr).copied() {
            Some(id) => {
                let Some(info) = self.infos.get_mut(&id) else {
                    return false;
                };
                let update_interval = if now - time < 86_400 { 3600 } else { 86_400 };
                if info.time < time - update_interval - penalty {
                    info.time = (time - penalty).max(0);
                }
                info.services |= known.services;
                if time <= info.time || info.in_tried || info.ref_count >= NEW_BUCKETS_PER_ADDRESS {
                    return false;
                }
                // Each further place is twice as hard to get as the one before.
                if rng.gen_range(0..1u32 << info.ref_count) != 0 {
                    return false;
                }
                id
            }
            None => {
                let mut info = Info::new(known, source);
                info.time = (time - penalty).max(0);
                self.create(info)
            }
        };
        let Some(info) = self.infos.get(&id) else {
            return false;
        };
        let place = self.place(
            Table::New,
            self.new_bucket(&known.addr, source),
            &known.addr,
        );
        let fresh = info.ref_count == 0;
        let insert = match self.new_slots[place] {
            None => true,
            Some(held) if held == id => return false,
            Some(held) => self
                .infos
                .get(&held)
                .is_some_and(|old| old.is_terrible(now) || (old.ref_count > 1 && fresh)),
        };
        if insert {
            self.put_new(place, id);
        } else if fresh {
            self.delete(id);
        }
        insert
    }

    /// Core's `Good_`: `addr` completed a handshake. It moves to the tried table, unless that
    /// would evict a tried entry: then the move waits for a test of the one it would evict
    /// (with `test_before_evict`, always but when a collision is being resolved).
    pub fn good(&mut self, addr: &SocketAddr, now: i64) {
        self.good_id(addr, true, now);
    }

    fn good_id(&mut self, addr: &SocketAddr, test_before_evict: bool, now: i64) {
        self.last_good = now;
        let Some(&id) = self.by_addr.get(addr) else {
            return;
        };
        let Some(info) = self.infos.get_mut(&id) else {
            return;
        };
        info.last_success = now;
        info.last_try = now;
        info.attempts = 0;
        if info.in_tried || info.ref_count == 0 {
            return;
        }
        let place = self.tried_place(addr);
        if test_before_evict && self.tried_slots[place].is_some() {
            if self.collisions.len() < MAX_COLLISIONS && !self.collisions.contains(&id) {
                self.collisions.push(id);
            }
            return;
        }
        self.make_tried(id, place);
    }

    /// Core's `MakeTried`: out of every new place, into `place`; whoever held it goes back
    /// to the new table.
    fn make_tried(&mut self, id: Id, place: usize) {
        let mut held = self.infos.get(&id).map_or(0, |i| i.ref_count);
        for slot in self.new_slots.iter_mut() {
            if held == 0 {
                break;
            }
            if *slot == Some(id) {
                *slot = None;
                held -= 1;
            }
        }
        self.list_remove(Table::New, id);
        if let Some(info) = self.infos.get_mut(&id) {
            info.ref_count = 0;
        }
        if let Some(old) = self.tried_slots[place].take() {
            self.list_remove(Table::Tried, old);
            let back = self.infos.get_mut(&old).map(|info| {
                info.in_tried = false;
                info.clone()
            });
            if let Some(info) = back {
                let new_place = self.new_place(&info);
                self.put_new(new_place, old);
            }
        }
        self.tried_slots[place] = Some(id);
        if let Some(info) = self.infos.get_mut(&id) {
            info.in_tried = true;
        }
        self.list_insert(Table::Tried, id);
    }

    /// Core's `Attempt_`: a connection to `addr` is being tried; a failure counts once per
    /// success anywhere (so an offline node does not ruin its own book).
    pub fn attempt(&mut self, addr: &SocketAddr, count_failure: bool, now: i64) {
        let last_good = self.last_good;
        let Some(info) = self.by_addr.get(addr).and_then(|id| self.infos.get_mut(id)) else {
            return;
        };
        info.last_try = now;
        if count_failure && info.last_count_attempt < last_good {
            info.last_count_attempt = now;
            info.attempts = info.attempts.saturating_add(1);
        }
    }

    /// Core's `Connected_`: a connection to `addr` ended; its time is refreshed if it is more
    /// than 20 minutes old.
    pub fn connected(&mut self, addr: &SocketAddr, now: i64) {
        if let Some(info) = self.by_addr.get(addr).and_then(|id| self.infos.get_mut(id)) {
            if now.saturating_sub(info.time) > 20 * 60 {
                info.time = now;
            }
        }
    }

    /// Core's `Select_`: the tried or the new table (even odds, or new only), then a random
    /// bucket, scanned from a random place for an entry, settled on with its chance, each
    /// refusal raising the odds by 1.2. Drawing buckets, not entries, keeps a source group
    /// that packed its 64 buckets to 1/16 of the new table's picks.
    pub fn select(&self, new_only: bool, now: i64, rng: &mut impl Rng) -> Option<&Info> {
        let (new, tried) = (self.new_list.len(), self.tried_list.len());
        let use_tried = !new_only && tried > 0 && (new == 0 || rng.gen_bool(0.5));
        if !use_tried && new == 0 {
            return None;
        }
        let slots = if use_tried {
            &self.tried_slots
        } else {
            &self.new_slots
        };
        let buckets = slots.len() / BUCKET_SIZE;
        let mut factor = 1.0f64;
        loop {
            let bucket = rng.gen_range(0..buckets) * BUCKET_SIZE;
            let start = rng.gen_range(0..BUCKET_SIZE);
            let found = (0..BUCKET_SIZE)
                .find_map(|i| slots[bucket + (start + i) % BUCKET_SIZE])
                .and_then(|id| self.infos.get(&id));
            let Some(info) = found else {
                continue;
            };
            if rng.gen::<f64>() < factor * info.chance(now) {
                return Some(info);
            }
            factor *= 1.2;
        }
    }

    /// Core's `ResolveCollisions_`: a new entry waiting for a tried place takes it once the
    /// holder failed a test (or was not tested within 40 minutes), and gives up if the holder
    /// connected within 4 hours.
    pub fn resolve_collisions(&mut self, now: i64) {
        let waiting = std::mem::take(&mut self.collisions);
        for id in waiting {
            let Some(addr) = self.infos.get(&id).map(|i| i.addr) else {
                continue;
            };
            let place = self.tried_place(&addr);
            let keep = match self.tried_slots[place].and_then(|old| self.infos.get(&old)) {
                None => {
                    self.good_id(&addr, false, now);
                    false
                }
                Some(old) if now.saturating_sub(old.last_success) < REPLACEMENT => false,
                Some(old) if now.saturating_sub(old.last_try) < REPLACEMENT => {
                    let waited = now.saturating_sub(old.last_try) > 60;
                    if waited {
                        self.good_id(&addr, false, now);
                    }
                    !waited
                }
                Some(_) => {
                    let late = self
                        .infos
                        .get(&id)
                        .is_some_and(|i| now.saturating_sub(i.last_success) > TEST_WINDOW);
                    if late {
                        self.good_id(&addr, false, now);
                    }
                    !late
                }
            };
            if keep {
                self.collisions.push(id);
            }
        }
    }

    /// Core's `SelectTriedCollision_`: the tried entry a waiting new one would evict, to test
    /// with a feeler connection.
    pub fn tried_collision(&self, rng: &mut impl Rng) -> Option<&Info> {
        if self.collisions.is_empty() {
            return None;
        }
        let id = self.collisions[rng.gen_range(0..self.collisions.len())];
        let addr = self.infos.get(&id)?.addr;
        let old = self.tried_slots[self.tried_place(&addr)]?;
        self.infos.get(&old)
    }

    /// Core's `GetAddr_`: up to `max` entries and `percent`% of the book, at random, none
    /// terrible.
    pub fn sample(&self, max: usize, percent: usize, now: i64, rng: &mut impl Rng) -> Vec<&Info> {
        use rand::seq::SliceRandom;
        let mut all: Vec<&Info> = self.infos.values().collect();
        let n = (all.len() * percent / 100).min(max);
        all.shuffle(rng);
        all.into_iter()
            .filter(|i| !i.is_terrible(now))
            .take(n)
            .collect()
    }

    /// Puts a saved entry back: a tried one in its tried place (to the new table if that is
    /// held), a new one in the place its source chooses. Returns whether it was placed.
    pub fn restore(&mut self, info: Info, now: i64) -> bool {
        if self.by_addr.contains_key(&info.addr) {
            return false;
        }
        let (tried, addr) = (info.in_tried, info.addr);
        let mut info = info;
        info.in_tried = false;
        info.ref_count = 0;
        let place = self.new_place(&info);
        let id = self.create(info);
        if tried {
            let tried_place = self.tried_place(&addr);
            if self.tried_slots[tried_place].is_none() {
                self.tried_slots[tried_place] = Some(id);
                if let Some(i) = self.infos.get_mut(&id) {
                    i.in_tried = true;
                }
                self.list_insert(Table::Tried, id);
                return true;
            }
        }
        let free = self.new_slots[place]
            .and_then(|held| self.infos.get(&held))
            .is_none_or(|old| old.is_terrible(now));
        if free {
            self.put_new(place, id);
        } else {
            self.delete(id);
        }
        free
    }
}

/// Core's `CService::GetKey`: the address and port, as placed.
fn key_of(addr: &SocketAddr) -> [u8; 18] {
    let ip = match addr.ip() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    let mut key = [0u8; 18];
    key[..16].copy_from_slice(&ip.octets());
    key[16..].copy_from_slice(&addr.port().to_be_bytes());
    key
}

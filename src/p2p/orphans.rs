//! Transactions from peers whose parents cairn has not seen, as Core 31's orphanage keeps them
//! (node/txorphanage.cpp): kept while their parents are asked for from the peers that sent them,
//! and tried again when a parent enters the mempool. Each (orphan, peer) pair is an
//! announcement, and every peer that sent an orphan is one of its announcers, so an attacker
//! that sends an honest peer's orphan first cannot keep it from that peer's 1p1c package.
//!
//! Limits no peer can take from another: every peer holding announcements is reserved
//! [`RESERVED_WEIGHT_PER_PEER`] of orphan weight and an equal share of
//! [`MAX_LATENCY_SCORE`] (an announcement scores 1, and 1 more per 10 inputs); the orphanage as a
//! whole may hold the sum. Over either, the peer using the most for its share (its DoS score)
//! loses its oldest announcements until it is no longer the worst or the orphanage fits
//! (`LimitOrphans`); an orphan leaves with its last announcer. So a peer within its reservation
//! never loses an orphan to another's flood, however many addresses the flood comes from.
//! Orphans heavier than a standard transaction are not kept. An orphan leaves when it enters
//! the mempool or is refused, with its last announcer, under the limits, or 20 minutes after it
//! came.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bitcoin::hashes::Hash;
use bitcoin::{Transaction, Txid, Wtxid};

use super::sync::PeerId;
use crate::mempool::linearize::FeeFrac;

/// The orphan weight reserved to each peer that holds announcements (Core's
/// `DEFAULT_RESERVED_ORPHAN_WEIGHT_PER_PEER`).
pub const RESERVED_WEIGHT_PER_PEER: u64 = 404_000;
/// The latency score of the whole orphanage, shared equally by the peers that hold
/// announcements (Core's `DEFAULT_MAX_ORPHANAGE_LATENCY_SCORE`).
pub const MAX_LATENCY_SCORE: u64 = 3_000;
/// Heavier orphans are not kept (Core's `MAX_STANDARD_TX_WEIGHT`).
pub const MAX_ORPHAN_WEIGHT: u64 = 400_000;
/// An orphan still kept this long after it came is dropped (Core 28's `ORPHAN_TX_EXPIRE_TIME`;
/// Core 31 drops orphans a block makes moot instead, which cairn's orphanage does not see).
const EXPIRY: Duration = Duration::from_secs(20 * 60);

/// A transaction offered to the orphanage: what identifies it and what it costs.
#[derive(Debug, Clone)]
pub struct NewOrphan {
    /// Its txid and witness id.
    pub ids: (Txid, Wtxid),
    /// Its serialization.
    pub raw: Vec<u8>,
    /// Its weight: the memory it is counted for.
    pub weight: u64,
    /// Its inputs: the work it adds to every scan of the orphanage.
    pub inputs: usize,
    /// The parents it waits for.
    pub parents: Vec<Txid>,
}

impl NewOrphan {
    /// `tx` (serialized as `raw`), waiting for `parents`.
    pub fn of(tx: &Transaction, raw: Vec<u8>, parents: Vec<Txid>) -> Self {
        NewOrphan {
            ids: (tx.compute_txid(), tx.compute_wtxid()),
            raw,
            weight: tx.weight().to_wu(),
            inputs: tx.input.len(),
            parents,
        }
    }

    /// Its latency score: 1, and 1 more for every 10 inputs (Core's `GetLatencyScore`).
    fn latency(&self) -> u64 {
        1 + self.inputs as u64 / 10
    }
}

/// One kept orphan, the peers that announced it (each with its announcement's number) and
/// when it came.
struct Orphan {
    new: NewOrphan,
    announcers: Vec<(PeerId, u64)>,
    came: Instant,
}

/// What one peer's announcements cost (Core's `PeerDoSInfo`).
#[derive(Debug, Default, Clone, Copy)]
struct PeerUsage {
    announcements: u64,
    weight: u64,
    latency: u64,
}

impl PeerUsage {
    /// The larger of its latency score and its weight over their allowances, as a fraction
    /// (Core's `GetDosScore`); above 1, the peer uses more than its share.
    fn dos_score(&self, max_latency: u64) -> FeeFrac {
        let latency = FeeFrac::new(self.latency, max_latency.max(1));
        let weight = FeeFrac::new(self.weight, RESERVED_WEIGHT_PER_PEER);
        match latency.rate_cmp(&weight) {
            std::cmp::Ordering::Less => weight,
            _ => latency,
        }
    }
}

/// The orphanage shared by all peers.
#[derive(Default)]
pub struct Orphans(Mutex<Pool>);

#[derive(Default)]
struct Pool {
    by_wtxid: HashMap<Wtxid, Orphan>,
    /// Orphans waiting for each missing parent.
    by_parent: HashMap<Txid, HashSet<Wtxid>>,
    /// Every announcement by peer, oldest first.
    by_peer: BTreeSet<(PeerId, u64, Wtxid)>,
    /// Every orphan by when it came, oldest first.
    by_age: BTreeSet<(Instant, Wtxid)>,
    peers: HashMap<PeerId, PeerUsage>,
    /// The weight of the orphans kept, each once.
    weight: u64,
    /// Each kept orphan's latency score beyond 1, summed; with one per announcement, the
    /// orphanage's latency score.
    extra_latency: u64,
    next: u64,
}

impl Pool {
    fn latency_score(&self) -> u64 {
        self.extra_latency + self.by_peer.len() as u64
    }

    fn peer_count(&self) -> u64 {
        (self.peers.len() as u64).max(1)
    }

    /// Whether the orphanage holds more than every peer's shares together (Core's
    /// `NeedsTrim`).
    fn needs_trim(&self) -> bool {
        self.latency_score() > MAX_LATENCY_SCORE
            || self.weight > RESERVED_WEIGHT_PER_PEER * self.peer_count()
    }

    /// Adds `peer`'s announcement of `wtxid` (kept); false if it had announced it.
    fn announce(&mut self, wtxid: Wtxid, peer: PeerId) -> bool {
        let number = self.next;
        let Some(orphan) = self.by_wtxid.get_mut(&wtxid) else {
            return false;
        };
        if orphan.announcers.iter().any(|(p, _)| *p == peer) {
            return false;
        }
        self.next += 1;
        orphan.announcers.push((peer, number));
        self.by_peer.insert((peer, number, wtxid));
        let usage = self.peers.entry(peer).or_default();
        usage.announcements += 1;
        usage.weight += orphan.new.weight;
        usage.latency += orphan.new.latency();
        true
    }

    /// Drops one announcement; the orphan goes with its last.
    fn drop_announcement(&mut self, peer: PeerId, number: u64, wtxid: Wtxid) {
        self.by_peer.remove(&(peer, number, wtxid));
        let Some(orphan) = self.by_wtxid.get_mut(&wtxid) else {
            return;
        };
        orphan.announcers.retain(|a| *a != (peer, number));
        let (weight, latency) = (orphan.new.weight, orphan.new.latency());
        let last = orphan.announcers.is_empty();
        if let Some(usage) = self.peers.get_mut(&peer) {
            usage.announcements -= 1;
            usage.weight -= weight;
            usage.latency -= latency;
            if usage.announcements == 0 {
                self.peers.remove(&peer);
            }
        }
        if last {
            self.forget(&wtxid);
        }
    }

    /// Removes an orphan whose announcements are gone.
    fn forget(&mut self, wtxid: &Wtxid) {
        let Some(orphan) = self.by_wtxid.remove(wtxid) else {
            return;
        };
        self.by_age.remove(&(orphan.came, *wtxid));
        self.weight -= orphan.new.weight;
        self.extra_latency -= orphan.new.latency() - 1;
        for parent in &orphan.new.parents {
            if let Some(children) = self.by_parent.get_mut(parent) {
                children.remove(wtxid);
                if children.is_empty() {
                    self.by_parent.remove(parent);
                }
            }
        }
    }

    /// Removes an orphan with all its announcements.
    fn remove(&mut self, wtxid: &Wtxid) {
        let Some(orphan) = self.by_wtxid.get(wtxid) else {
            return;
        };
        for (peer, number) in orphan.announcers.clone() {
            self.drop_announcement(peer, number, *wtxid);
        }
    }

    /// Trims while the orphanage is over its limits (Core's `LimitOrphans`): each time, the
    /// peer with the highest DoS score (the later of equal ones) loses its oldest announcement,
    /// the scores taken against the shares of when the trim began.
    fn limit(&mut self) {
        if !self.needs_trim() {
            return;
        }
        let max_latency = MAX_LATENCY_SCORE / self.peer_count();
        while self.needs_trim() {
            let worst = (self.peers.iter())
                .map(|(peer, usage)| (*peer, usage.dos_score(max_latency)))
                .max_by(|a, b| a.1.rate_cmp(&b.1).then(a.0.cmp(&b.0)));
            let Some((peer, _)) = worst else {
                break;
            };
            let oldest = self.by_peer.range((peer, 0, min_wtxid())..).next().copied();
            match oldest {
                Some((p, number, wtxid)) if p == peer => self.drop_announcement(p, number, wtxid),
                _ => break,
            }
        }
    }

    /// Drops the orphans kept longer than [`EXPIRY`] at `now`.
    fn expire(&mut self, now: Instant) {
        while let Some(&(at, wtxid)) = self.by_age.first() {
            if now.saturating_duration_since(at) < EXPIRY {
                break;
            }
            self.by_age.remove(&(at, wtxid));
            self.remove(&wtxid);
        }
    }
}

/// The lowest witness id, to start a peer's range of announcements.
fn min_wtxid() -> Wtxid {
    Wtxid::all_zeros()
}

impl Orphans {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `orphan` from peer `from` until one of its parents arrives; kept already, notes
    /// `from` as one more announcer. Whether `from` should be asked for the parents: false if
    /// it is too heavy, waits for nothing, or `from` announced it before.
    pub fn add(&self, orphan: NewOrphan, from: PeerId) -> bool {
        if orphan.weight > MAX_ORPHAN_WEIGHT || orphan.parents.is_empty() {
            return false;
        }
        let wtxid = orphan.ids.1;
        let now = Instant::now();
        let mut pool = self.lock();
        pool.expire(now);
        if !pool.by_wtxid.contains_key(&wtxid) {
            for parent in &orphan.parents {
                pool.by_parent.entry(*parent).or_default().insert(wtxid);
            }
            pool.weight += orphan.weight;
            pool.extra_latency += orphan.latency() - 1;
            let kept = Orphan {
                new: orphan,
                announcers: Vec::new(),
                came: now,
            };
            pool.by_age.insert((now, wtxid));
            pool.by_wtxid.insert(wtxid, kept);
        }
        let new = pool.announce(wtxid, from);
        pool.limit();
        new && pool.by_wtxid.contains_key(&wtxid)
    }

    /// The orphans `peer` announced that spend `parent`, the newest announcement first (Core's
    /// `GetChildrenFromSamePeer`): candidates for a 1p1c package with it. They stay kept.
    pub fn children_from(&self, parent: &Txid, peer: PeerId) -> Vec<(Txid, Wtxid)> {
        let pool = self.lock();
        let mut found: Vec<(u64, Txid, Wtxid)> = (pool.by_parent.get(parent).into_iter())
            .flatten()
            .filter_map(|w| pool.by_wtxid.get(w))
            .filter_map(|o| {
                let (_, number) = o.announcers.iter().find(|(p, _)| *p == peer)?;
                Some((*number, o.new.ids.0, o.new.ids.1))
            })
            .collect();
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        found.into_iter().map(|(_, t, w)| (t, w)).collect()
    }

    /// A kept orphan's serialization.
    pub fn raw(&self, wtxid: &Wtxid) -> Option<Vec<u8>> {
        self.lock().by_wtxid.get(wtxid).map(|o| o.new.raw.clone())
    }

    /// Drops one orphan (it entered the mempool by another way, or was refused).
    pub fn remove(&self, wtxid: &Wtxid) {
        let mut pool = self.lock();
        pool.remove(wtxid);
        pool.limit();
    }

    /// The orphans that wait for `parent`, to be tried again now that it came, each with one
    /// of its announcers at random (Core's `AddChildrenToWorkSet`): (wtxid, txid, raw,
    /// announcer). They stay kept until [`Orphans::remove`]: one still missing another parent
    /// waits on with every announcer.
    pub fn children_of(&self, parent: &Txid) -> Vec<(Wtxid, Txid, Vec<u8>, PeerId)> {
        let pool = self.lock();
        let children = pool.by_parent.get(parent).into_iter().flatten();
        children
            .filter_map(|wtxid| {
                let o = pool.by_wtxid.get(wtxid)?;
                let pick = rand::random::<u64>() as usize % o.announcers.len().max(1);
                let (from, _) = *o.announcers.get(pick)?;
                Some((*wtxid, o.new.ids.0, o.new.raw.clone(), from))
            })
            .collect()
    }

    /// Forgets a peer that has gone (Core's `EraseForPeer`): its announcements are dropped,
    /// and what only it announced.
    pub fn forget_peer(&self, peer: PeerId) {
        let mut pool = self.lock();
        let own: Vec<(PeerId, u64, Wtxid)> = (pool.by_peer.range((peer, 0, min_wtxid())..))
            .take_while(|(p, _, _)| *p == peer)
            .copied()
            .collect();
        for (p, number, wtxid) in own {
            pool.drop_announcement(p, number, wtxid);
        }
        pool.limit();
    }

    /// How many orphans are kept.
    pub fn len(&self) -> usize {
        self.lock().by_wtxid.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txid(n: u32) -> Txid {
        let mut bytes = [0u8; 32];
        bytes[..4].copy_from_slice(&n.to_le_bytes());
        Txid::from_byte_array(bytes)
    }

    fn wtxid(n: u32) -> Wtxid {
        Wtxid::from_byte_array(txid(n).to_byte_array())
    }

    /// Orphan `n` of `weight`, one input, waiting for `parent`.
    fn orphan(n: u32, weight: u64, parent: u32) -> NewOrphan {
        NewOrphan {
            ids: (txid(n), wtxid(n)),
            raw: n.to_le_bytes().to_vec(),
            weight,
            inputs: 1,
            parents: vec![txid(parent)],
        }
    }

    /// The pool's counts as a fresh sum finds them.
    fn assert_counts_fresh(pool: &Orphans) {
        let p = pool.lock();
        let weight: u64 = p.by_wtxid.values().map(|o| o.new.weight).sum();
        assert_eq!(p.weight, weight);
        let announcements: usize = p.by_wtxid.values().map(|o| o.announcers.len()).sum();
        assert_eq!(p.by_peer.len(), announcements);
        let per_peer: u64 = p.peers.values().map(|u| u.announcements).sum();
        assert_eq!(per_peer, announcements as u64);
        assert!(p.by_wtxid.values().all(|o| !o.announcers.is_empty()));
    }

    #[test]
    fn bounded_by_weight_and_latency_whatever_peers_send() {
        let pool = Orphans::default();
        for n in 0..20_000u32 {
            pool.add(orphan(n, 4_000, 1_000_000 + n), PeerId::from(n % 10));
            let p = pool.lock();
            assert!(p.latency_score() <= MAX_LATENCY_SCORE);
            assert!(p.weight <= RESERVED_WEIGHT_PER_PEER * p.peer_count());
        }
        assert_counts_fresh(&pool);
        // 10 peers: 4,040,000 weight units, 1,010 orphans of 4,000.
        assert_eq!(pool.len(), 1_010);
        assert!(
            pool.lock().by_parent.len() <= 1_010,
            "parent links of dropped orphans go with them"
        );
        let heavy = orphan(5_000_000, MAX_ORPHAN_WEIGHT + 1, 1);
        assert!(!pool.add(heavy, 1));
    }

    #[test]
    fn a_flood_from_a_whole_subnet_evicts_none_of_an_honest_peers_orphans() {
        let pool = Orphans::default();
        for n in 0..10 {
            assert!(pool.add(orphan(n, 2_000, 100), 1));
        }
        // Twenty attacking peers, each announcing far over its share of both limits.
        for n in 1_000..60_000u32 {
            pool.add(orphan(n, 20_000, 100 + n), PeerId::from(2 + n % 20));
        }
        assert_counts_fresh(&pool);
        assert_eq!(pool.children_from(&txid(100), 1).len(), 10);
        let p = pool.lock();
        assert!(p.latency_score() <= MAX_LATENCY_SCORE);
        assert!(p.weight <= RESERVED_WEIGHT_PER_PEER * p.peer_count());
    }

    #[test]
    fn orphans_expire_twenty_minutes_after_they_came() {
        let pool = Orphans::default();
        pool.add(orphan(1, 400, 100), 7);
        let later = Instant::now() + EXPIRY;
        pool.lock().expire(later);
        assert!(pool.is_empty());
        assert_counts_fresh(&pool);
    }

    #[test]
    fn every_announcer_is_remembered_and_the_orphan_leaves_with_the_last() {
        let pool = Orphans::default();
        assert!(pool.add(orphan(1, 400, 100), 7));
        // An attacker sent it first: the honest peer is still asked and may package it.
        assert!(pool.add(orphan(1, 400, 100), 8));
        assert!(!pool.add(orphan(1, 400, 100), 8), "announced once");
        assert_eq!(pool.children_from(&txid(100), 8), vec![(txid(1), wtxid(1))]);
        pool.forget_peer(7);
        assert_eq!(pool.len(), 1, "kept while one announcer remains");
        pool.forget_peer(8);
        assert!(pool.is_empty());
        assert_counts_fresh(&pool);
        assert!(
            pool.lock().peers.is_empty(),
            "peers without announcements leave"
        );
    }

    #[test]
    fn a_parents_children_from_one_peer_come_newest_first_and_stay() {
        let pool = Orphans::default();
        pool.add(orphan(1, 400, 100), 7);
        pool.add(orphan(2, 400, 100), 8);
        pool.add(orphan(3, 400, 100), 7);
        let of_7: Vec<Txid> = (pool.children_from(&txid(100), 7).into_iter())
            .map(|c| c.0)
            .collect();
        assert_eq!(
            of_7,
            vec![txid(3), txid(1)],
            "peer 8's child is not offered"
        );
        assert!(pool.children_from(&txid(101), 7).is_empty());
        assert_eq!(pool.len(), 3, "looking takes nothing out");
        pool.remove(&wtxid(3));
        assert_eq!(pool.children_from(&txid(100), 7).len(), 1);
        assert_counts_fresh(&pool);
    }

    #[test]
    fn children_are_offered_when_a_parent_arrives_and_peers_take_theirs_along() {
        let pool = Orphans::default();
        let two_parents = NewOrphan {
            parents: vec![txid(100), txid(101)],
            ..orphan(1, 400, 100)
        };
        assert!(pool.add(two_parents, 7));
        assert!(pool.add(orphan(2, 400, 100), 8));
        let mut out: Vec<(Txid, PeerId)> = (pool.children_of(&txid(100)).into_iter())
            .map(|c| (c.1, c.3))
            .collect();
        out.sort();
        assert_eq!(out, vec![(txid(1), 7), (txid(2), 8)]);
        // The second entered the mempool; the first still waits for its other parent.
        pool.remove(&wtxid(2));
        let waiting: Vec<Txid> = (pool.children_of(&txid(101)).into_iter())
            .map(|c| c.1)
            .collect();
        assert_eq!(waiting, vec![txid(1)], "still waiting, with its announcer");
        assert_eq!(pool.children_from(&txid(101), 7).len(), 1);
        pool.remove(&wtxid(1));
        assert!(pool.is_empty());
        pool.add(orphan(3, 400, 102), 9);
        pool.add(orphan(4, 400, 102), 10);
        pool.forget_peer(9);
        let left: Vec<Txid> = (pool.children_of(&txid(102)).into_iter())
            .map(|c| c.1)
            .collect();
        assert_eq!(left, vec![txid(4)]);
        assert_counts_fresh(&pool);
    }
}

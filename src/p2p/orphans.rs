//! Transactions from peers whose parents cairn has not seen (Core's `TxOrphanage`): kept, within
//! bounds no peer controls, while their parents are asked for from the peers that sent them, and
//! tried again when a parent enters the mempool. Every peer that sent one is remembered (Core's
//! `AddAnnouncer`, at most [`MAX_ANNOUNCERS`]), so an attacker that sends an honest peer's
//! orphan first cannot keep it from that peer's 1p1c package; one peer holds at most
//! [`MAX_PER_PEER`] of the places, its oldest making room for its newest.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bitcoin::{Txid, Wtxid};

use super::sync::PeerId;

/// Most orphans kept at once (Core's `DEFAULT_MAX_ORPHAN_TRANSACTIONS`); a random one makes room.
pub const MAX_ORPHANS: usize = 100;
/// Larger orphans are not kept (Core: `MAX_STANDARD_TX_WEIGHT`, 400,000 weight units; here the
/// serialized size, which is at most the weight).
pub const MAX_ORPHAN_BYTES: usize = 400_000;
/// Most orphans one peer is the first sender of (a quarter of the pool).
pub const MAX_PER_PEER: usize = MAX_ORPHANS / 4;
/// Most peers remembered as senders of one orphan.
pub const MAX_ANNOUNCERS: usize = 8;
/// An orphan whose parents never came is dropped after this (Core's `ORPHAN_TX_EXPIRE_TIME`).
const EXPIRY: Duration = Duration::from_secs(20 * 60);

/// One kept orphan.
struct Orphan {
    raw: Vec<u8>,
    wtxid: Wtxid,
    /// The peers that sent it, the first sender first.
    announcers: Vec<PeerId>,
    parents: Vec<Txid>,
    expires: Instant,
}

/// The orphan pool shared by all peers.
#[derive(Default)]
pub struct Orphans(Mutex<Pool>);

#[derive(Default)]
struct Pool {
    by_txid: HashMap<Txid, Orphan>,
    /// Orphans waiting for each missing parent.
    by_parent: HashMap<Txid, HashSet<Txid>>,
}

impl Pool {
    fn remove(&mut self, txid: &Txid) -> Option<Orphan> {
        let orphan = self.by_txid.remove(txid)?;
        for parent in &orphan.parents {
            if let Some(children) = self.by_parent.get_mut(parent) {
                children.remove(txid);
                if children.is_empty() {
                    self.by_parent.remove(parent);
                }
            }
        }
        Some(orphan)
    }

    /// Frees a place for a new orphan from `from`: its own oldest if it holds
    /// [`MAX_PER_PEER`], else a random one if the pool is full.
    fn make_room(&mut self, from: PeerId) {
        let own = (self.by_txid.iter())
            .filter(|(_, o)| o.announcers.first() == Some(&from))
            .min_by_key(|(_, o)| o.expires)
            .map(|(t, _)| *t);
        let owned = (self.by_txid.values())
            .filter(|o| o.announcers.first() == Some(&from))
            .count();
        if let (Some(oldest), true) = (own, owned >= MAX_PER_PEER) {
            self.remove(&oldest);
            return;
        }
        if self.by_txid.len() >= MAX_ORPHANS {
            let victim = rand::random::<u64>() as usize % self.by_txid.len();
            if let Some(victim) = self.by_txid.keys().nth(victim).copied() {
                self.remove(&victim);
            }
        }
    }

    fn expire(&mut self, now: Instant) {
        let old: Vec<Txid> = self
            .by_txid
            .iter()
            .filter(|(_, o)| o.expires <= now)
            .map(|(t, _)| *t)
            .collect();
        for txid in old {
            self.remove(&txid);
        }
    }
}

impl Orphans {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `raw` (transaction `txid`, `wtxid`, from peer `from`) until one of `parents`
    /// arrives; kept already, notes `from` as one more sender. Whether `from` should be asked
    /// for the parents: false if it is too large, or `from` sent it before.
    pub fn add(&self, tx: (Txid, Wtxid), raw: Vec<u8>, from: PeerId, parents: Vec<Txid>) -> bool {
        let (txid, wtxid) = tx;
        if raw.len() > MAX_ORPHAN_BYTES || parents.is_empty() {
            return false;
        }
        let mut pool = self.lock();
        if let Some(kept) = pool.by_txid.get_mut(&txid) {
            let new = !kept.announcers.contains(&from) && kept.announcers.len() < MAX_ANNOUNCERS;
            if new {
                kept.announcers.push(from);
            }
            return new;
        }
        pool.expire(Instant::now());
        pool.make_room(from);
        for parent in &parents {
            pool.by_parent.entry(*parent).or_default().insert(txid);
        }
        let expires = Instant::now() + EXPIRY;
        let orphan = Orphan {
            raw,
            wtxid,
            announcers: vec![from],
            parents,
            expires,
        };
        pool.by_txid.insert(txid, orphan);
        true
    }

    /// The orphans `peer` sent that spend `parent`, the newest first (Core's
    /// `GetChildrenFromSamePeer`): candidates for a 1p1c package with it. They stay kept.
    pub fn children_from(&self, parent: &Txid, peer: PeerId) -> Vec<(Txid, Wtxid)> {
        let pool = self.lock();
        let mut found: Vec<(Instant, Txid, Wtxid)> = (pool.by_parent.get(parent).into_iter())
            .flatten()
            .filter_map(|t| pool.by_txid.get(t).map(|o| (t, o)))
            .filter(|(_, o)| o.announcers.contains(&peer))
            .map(|(t, o)| (o.expires, *t, o.wtxid))
            .collect();
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        found.into_iter().map(|(_, t, w)| (t, w)).collect()
    }

    /// A kept orphan's serialization.
    pub fn raw(&self, txid: &Txid) -> Option<Vec<u8>> {
        self.lock().by_txid.get(txid).map(|o| o.raw.clone())
    }

    /// Drops one orphan (it entered the mempool by another way, or was refused).
    pub fn remove(&self, txid: &Txid) {
        self.lock().remove(txid);
    }

    /// Takes out the orphans that wait for `parent`, to be tried again: (txid, raw, sender).
    pub fn take_children(&self, parent: &Txid) -> Vec<(Txid, Vec<u8>, PeerId)> {
        let mut pool = self.lock();
        let children = pool.by_parent.get(parent).cloned().unwrap_or_default();
        children
            .into_iter()
            .filter_map(|txid| {
                let o = pool.remove(&txid)?;
                Some((txid, o.raw, *o.announcers.first()?))
            })
            .collect()
    }

    /// Forgets a peer that has gone (Core's `EraseForPeer`): what only it sent is dropped.
    pub fn forget_peer(&self, peer: PeerId) {
        let mut pool = self.lock();
        let mut orphaned = Vec::new();
        for (txid, o) in pool.by_txid.iter_mut() {
            o.announcers.retain(|a| *a != peer);
            if o.announcers.is_empty() {
                orphaned.push(*txid);
            }
        }
        for txid in orphaned {
            pool.remove(&txid);
        }
    }

    /// How many orphans are kept.
    pub fn len(&self) -> usize {
        self.lock().by_txid.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::hashes::Hash;

    fn txid(n: u32) -> Txid {
        let mut bytes = [0u8; 32];
        bytes[..4].copy_from_slice(&n.to_le_bytes());
        Txid::from_byte_array(bytes)
    }

    fn wtxid(n: u32) -> Wtxid {
        Wtxid::from_byte_array(txid(n).to_byte_array())
    }

    #[test]
    fn bounded_by_count_and_size_whatever_peers_send() {
        let pool = Orphans::default();
        for n in 0..10 * MAX_ORPHANS as u32 {
            let peer = PeerId::from(n % 10);
            pool.add(
                (txid(n), wtxid(n)),
                vec![0; 10],
                peer,
                vec![txid(1_000_000 + n)],
            );
            assert!(pool.len() <= MAX_ORPHANS);
        }
        assert_eq!(pool.len(), MAX_ORPHANS);
        assert!(
            pool.lock().by_parent.len() <= MAX_ORPHANS,
            "parent links of dropped orphans go with them"
        );
        assert!(!pool.add(
            (txid(5_000_000), wtxid(5_000_000)),
            vec![0; MAX_ORPHAN_BYTES + 1],
            1,
            vec![txid(1)]
        ));
    }

    #[test]
    fn every_sender_is_remembered_and_one_peer_holds_a_quarter_at_most() {
        let pool = Orphans::default();
        assert!(pool.add((txid(1), wtxid(1)), vec![1], 7, vec![txid(100)]));
        // An attacker sent it first: the honest peer is still asked and may package it.
        assert!(pool.add((txid(1), wtxid(1)), vec![1], 8, vec![txid(100)]));
        assert!(!pool.add((txid(1), wtxid(1)), vec![1], 8, vec![txid(100)]));
        assert_eq!(pool.children_from(&txid(100), 8), vec![(txid(1), wtxid(1))]);
        pool.forget_peer(7);
        assert_eq!(pool.len(), 1, "kept while one sender remains");
        pool.forget_peer(8);
        assert!(pool.is_empty());
        // One peer's flood takes its own oldest places, not the others'.
        for n in 0..10 {
            pool.add((txid(n), wtxid(n)), vec![0], 2, vec![txid(100)]);
        }
        for n in 10..10 + 4 * MAX_ORPHANS as u32 {
            pool.add((txid(n), wtxid(n)), vec![0], 3, vec![txid(100)]);
        }
        assert_eq!(pool.len(), 10 + MAX_PER_PEER);
        assert_eq!(pool.children_from(&txid(100), 2).len(), 10);
    }

    #[test]
    fn a_parents_children_from_one_peer_come_newest_first_and_stay() {
        let pool = Orphans::default();
        pool.add((txid(1), wtxid(1)), vec![1], 7, vec![txid(100)]);
        std::thread::sleep(Duration::from_millis(2));
        pool.add((txid(2), wtxid(2)), vec![2], 8, vec![txid(100)]);
        std::thread::sleep(Duration::from_millis(2));
        pool.add((txid(3), wtxid(3)), vec![3], 7, vec![txid(100)]);
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
        pool.remove(&txid(3));
        assert_eq!(pool.children_from(&txid(100), 7).len(), 1);
    }

    #[test]
    fn children_come_out_once_their_parent_arrives_and_peers_take_theirs_along() {
        let pool = Orphans::default();
        assert!(pool.add((txid(1), wtxid(1)), vec![1], 7, vec![txid(100), txid(101)]));
        assert!(pool.add((txid(2), wtxid(2)), vec![2], 8, vec![txid(100)]));
        assert!(
            !pool.add((txid(2), wtxid(2)), vec![2], 8, vec![txid(100)]),
            "kept once"
        );
        let mut out: Vec<Txid> = pool
            .take_children(&txid(100))
            .into_iter()
            .map(|c| c.0)
            .collect();
        out.sort();
        assert_eq!(out, vec![txid(1), txid(2)]);
        assert!(
            pool.take_children(&txid(101)).is_empty(),
            "taken out with its first parent"
        );
        assert!(pool.is_empty());
        pool.add((txid(3), wtxid(3)), vec![3], 9, vec![txid(102)]);
        pool.add((txid(4), wtxid(4)), vec![4], 10, vec![txid(102)]);
        pool.forget_peer(9);
        assert_eq!(
            pool.take_children(&txid(102))
                .into_iter()
                .map(|c| c.0)
                .collect::<Vec<_>>(),
            vec![txid(4)]
        );
    }
}

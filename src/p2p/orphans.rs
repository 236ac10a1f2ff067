//! Transactions from peers whose parents cairn has not seen (Core's `TxOrphanage`): kept, within
//! bounds no peer controls, while their parents are asked for from the peer that sent them, and
//! tried again when a parent enters the mempool.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bitcoin::Txid;

use super::sync::PeerId;

/// Most orphans kept at once (Core's `DEFAULT_MAX_ORPHAN_TRANSACTIONS`); a random one makes room.
pub const MAX_ORPHANS: usize = 100;
/// Larger orphans are not kept (Core: `MAX_STANDARD_TX_WEIGHT`, 400,000 weight units; here the
/// serialized size, which is at most the weight).
pub const MAX_ORPHAN_BYTES: usize = 400_000;
/// An orphan whose parents never came is dropped after this (Core's `ORPHAN_TX_EXPIRE_TIME`).
const EXPIRY: Duration = Duration::from_secs(20 * 60);

/// One kept orphan.
struct Orphan {
    raw: Vec<u8>,
    from: PeerId,
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

    /// Keeps `raw` (transaction `txid`, from peer `from`) until one of `parents` arrives; false
    /// if it is too large or already kept. A full pool drops a random orphan first.
    pub fn add(&self, txid: Txid, raw: Vec<u8>, from: PeerId, parents: Vec<Txid>) -> bool {
        if raw.len() > MAX_ORPHAN_BYTES || parents.is_empty() {
            return false;
        }
        let mut pool = self.lock();
        if pool.by_txid.contains_key(&txid) {
            return false;
        }
        pool.expire(Instant::now());
        if pool.by_txid.len() >= MAX_ORPHANS {
            let victim = rand::random::<u64>() as usize % pool.by_txid.len();
            if let Some(victim) = pool.by_txid.keys().nth(victim).copied() {
                pool.remove(&victim);
            }
        }
        for parent in &parents {
            pool.by_parent.entry(*parent).or_default().insert(txid);
        }
        let expires = Instant::now() + EXPIRY;
        pool.by_txid.insert(
            txid,
            Orphan {
                raw,
                from,
                parents,
                expires,
            },
        );
        true
    }

    /// Takes out the orphans that wait for `parent`, to be tried again: (txid, raw, sender).
    pub fn take_children(&self, parent: &Txid) -> Vec<(Txid, Vec<u8>, PeerId)> {
        let mut pool = self.lock();
        let children = pool.by_parent.get(parent).cloned().unwrap_or_default();
        children
            .into_iter()
            .filter_map(|txid| pool.remove(&txid).map(|o| (txid, o.raw, o.from)))
            .collect()
    }

    /// The orphans `peer` sent that spend `parent`, the newest first (Core's
    /// `GetChildrenFromSamePeer`): candidates for a 1p1c package with it. They stay kept.
    pub fn children_from(&self, parent: &Txid, peer: PeerId) -> Vec<(Txid, Vec<u8>)> {
        let pool = self.lock();
        let mut found: Vec<(Instant, Txid, Vec<u8>)> = (pool.by_parent.get(parent).into_iter())
            .flatten()
            .filter_map(|t| pool.by_txid.get(t).map(|o| (t, o)))
            .filter(|(_, o)| o.from == peer)
            .map(|(t, o)| (o.expires, *t, o.raw.clone()))
            .collect();
        found.sort_by(|a, b| b.0.cmp(&a.0));
        found.into_iter().map(|(_, t, raw)| (t, raw)).collect()
    }

    /// Drops one orphan (it entered the mempool by another way).
    pub fn remove(&self, txid: &Txid) {
        self.lock().remove(txid);
    }

    /// Drops what a peer sent, once it has gone (Core's `EraseForPeer`).
    pub fn forget_peer(&self, peer: PeerId) {
        let mut pool = self.lock();
        let sent: Vec<Txid> = pool
            .by_txid
            .iter()
            .filter(|(_, o)| o.from == peer)
            .map(|(t, _)| *t)
            .collect();
        for txid in sent {
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

    #[test]
    fn bounded_by_count_and_size_whatever_peers_send() {
        let pool = Orphans::default();
        for n in 0..10 * MAX_ORPHANS as u32 {
            pool.add(txid(n), vec![0; 10], 1, vec![txid(1_000_000 + n)]);
            assert!(pool.len() <= MAX_ORPHANS);
        }
        assert_eq!(pool.len(), MAX_ORPHANS);
        assert!(
            pool.lock().by_parent.len() <= MAX_ORPHANS,
            "parent links of dropped orphans go with them"
        );
        assert!(!pool.add(
            txid(5_000_000),
            vec![0; MAX_ORPHAN_BYTES + 1],
            1,
            vec![txid(1)]
        ));
    }

    #[test]
    fn a_parents_children_from_one_peer_come_newest_first_and_stay() {
        let pool = Orphans::default();
        pool.add(txid(1), vec![1], 7, vec![txid(100)]);
        std::thread::sleep(Duration::from_millis(2));
        pool.add(txid(2), vec![2], 8, vec![txid(100)]);
        std::thread::sleep(Duration::from_millis(2));
        pool.add(txid(3), vec![3], 7, vec![txid(100)]);
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
        assert!(pool.add(txid(1), vec![1], 7, vec![txid(100), txid(101)]));
        assert!(pool.add(txid(2), vec![2], 8, vec![txid(100)]));
        assert!(!pool.add(txid(2), vec![2], 8, vec![txid(100)]), "kept once");
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
        pool.add(txid(3), vec![3], 9, vec![txid(102)]);
        pool.add(txid(4), vec![4], 10, vec![txid(102)]);
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

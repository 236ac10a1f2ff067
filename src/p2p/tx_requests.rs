//! Which announced transactions to ask whom for, as a small Core `TxRequestTracker`: each peer
//! may have 5,000 announcements waiting (`MAX_PEER_TX_ANNOUNCEMENTS`) and 100 requests in
//! flight (`MAX_PEER_TX_REQUEST_IN_FLIGHT`); one transaction is asked of one peer at a time,
//! of another only after 60 s (`GETDATA_TX_INTERVAL`) or a `notfound`; inbound peers'
//! announcements wait 2 s (`NONPREF_PEER_TX_DELAY`), so an outbound peer that has the same
//! transaction is asked first. Transactions refused lately are not asked for again (Core's
//! `m_lazy_recent_rejects`, 120,000 of them, forgotten when the tip moves).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bitcoin::hashes::Hash;
use bitcoin::p2p::message_blockdata::Inventory;
use bitcoin::BlockHash;

use super::rolling::RollingBloom;
use super::sync::PeerId;

/// Announcements one peer may have waiting (Core's `MAX_PEER_TX_ANNOUNCEMENTS`).
pub const MAX_ANNOUNCEMENTS: usize = 5_000;
/// Requests one peer may have in flight (Core's `MAX_PEER_TX_REQUEST_IN_FLIGHT`).
pub const MAX_IN_FLIGHT: usize = 100;
/// How long a request may go unanswered before another peer is asked (`GETDATA_TX_INTERVAL`).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an inbound peer's announcement waits (Core's `NONPREF_PEER_TX_DELAY`).
pub const INBOUND_DELAY: Duration = Duration::from_secs(2);
/// Transactions refused lately that are not asked for again.
const RECENT_REJECTS: usize = 120_000;

/// A transaction's id as announced: its txid or wtxid bytes.
type Key = [u8; 32];

/// A 1p1c package's key (Core's `GetPackageHash`): SHA-256 of its members' wtxids, sorted.
pub fn package_key(wtxids: &[bitcoin::Wtxid]) -> Key {
    use bitcoin::hashes::sha256;
    let mut sorted: Vec<[u8; 32]> = wtxids.iter().map(|w| w.to_byte_array()).collect();
    sorted.sort_unstable();
    let mut engine = sha256::Hash::engine();
    for w in &sorted {
        bitcoin::hashes::HashEngine::input(&mut engine, w);
    }
    sha256::Hash::from_engine(engine).to_byte_array()
}

/// The key of a transaction inventory item.
pub fn key(item: &Inventory) -> Option<Key> {
    match item {
        Inventory::Transaction(t) | Inventory::WitnessTransaction(t) => Some(t.to_byte_array()),
        Inventory::WTx(w) => Some(w.to_byte_array()),
        _ => None,
    }
}

/// One peer's waiting announcements.
#[derive(Default)]
struct Waiting {
    order: VecDeque<(Key, Inventory, Instant)>,
    keys: HashSet<Key>,
    in_flight: usize,
}

struct Inner {
    peers: HashMap<PeerId, Waiting>,
    in_flight: HashMap<Key, (PeerId, Instant)>,
    rejects: RollingBloom,
    /// Refused for a fee only, and 1p1c packages refused.
    reconsiderable: RollingBloom,
    rejects_tip: Option<BlockHash>,
}

/// The tracker every peer shares.
pub struct TxRequests(Mutex<Inner>);

impl Default for TxRequests {
    fn default() -> Self {
        TxRequests(Mutex::new(Inner {
            peers: HashMap::new(),
            in_flight: HashMap::new(),
            rejects: RollingBloom::new(RECENT_REJECTS, 0.000_001),
            reconsiderable: RollingBloom::new(RECENT_REJECTS, 0.000_001),
            rejects_tip: None,
        }))
    }
}

impl TxRequests {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes what `peer` announced (transactions the mempool lacks), askable after `delay`;
    /// returns how many were kept (the rest: over its limit, waiting already, or refused
    /// lately with `tip` the current tip).
    pub fn announced(
        &self,
        peer: PeerId,
        items: Vec<Inventory>,
        delay: Duration,
        tip: BlockHash,
    ) -> usize {
        let mut inner = self.lock();
        if inner.rejects_tip != Some(tip) {
            inner.rejects.clear();
            inner.reconsiderable.clear();
            inner.rejects_tip = Some(tip);
        }
        let ready = Instant::now() + delay;
        let mut kept = 0;
        for item in items {
            let Some(k) = key(&item) else { continue };
            if inner.rejects.contains(&k) || inner.reconsiderable.contains(&k) {
                continue;
            }
            let waiting = inner.peers.entry(peer).or_default();
            if waiting.keys.len() >= MAX_ANNOUNCEMENTS {
                break;
            }
            if waiting.keys.insert(k) {
                waiting.order.push_back((k, item, ready));
                kept += 1;
            }
        }
        kept
    }

    /// What to ask `peer` for now: its announcements that are due and not asked of another
    /// peer within [`REQUEST_TIMEOUT`], as far as its in-flight limit allows.
    pub fn due(&self, peer: PeerId) -> Vec<Inventory> {
        let now = Instant::now();
        let mut inner = self.lock();
        let Inner {
            peers, in_flight, ..
        } = &mut *inner;
        let Some(waiting) = peers.get_mut(&peer) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        // In announcement order, so the first not yet due ends the look; one asked of another
        // peer goes to the back. Entries whose transaction was answered meanwhile are dropped.
        let mut left = waiting.order.len();
        while left > 0 && waiting.in_flight < MAX_IN_FLIGHT {
            match waiting.order.front() {
                Some((_, _, ready)) if *ready <= now => {}
                _ => break,
            }
            let Some((k, item, ready)) = waiting.order.pop_front() else {
                break;
            };
            left -= 1;
            if !waiting.keys.contains(&k) {
                continue;
            }
            match in_flight.get(&k) {
                Some((_, at)) if now.duration_since(*at) < REQUEST_TIMEOUT => {
                    waiting.order.push_back((k, item, ready));
                }
                _ => {
                    in_flight.insert(k, (peer, now));
                    waiting.in_flight += 1;
                    waiting.keys.remove(&k);
                    out.push(item);
                }
            }
        }
        out
    }

    /// A transaction arrived, or a peer said it does not have it: whoever was asked is asked
    /// no more.
    pub fn answered(&self, k: &Key) {
        let mut inner = self.lock();
        if let Some((peer, _)) = inner.in_flight.remove(k) {
            if let Some(w) = inner.peers.get_mut(&peer) {
                w.in_flight = w.in_flight.saturating_sub(1);
            }
        }
        // Others' waiting entries for it are dropped when next looked at.
        for w in inner.peers.values_mut() {
            w.keys.remove(k);
        }
    }

    /// Notes a refused transaction (its txid and, when it has witness data, its wtxid).
    pub fn rejected(&self, keys: &[Key]) {
        let mut inner = self.lock();
        for k in keys {
            inner.rejects.insert(k);
        }
    }

    /// Whether a transaction was refused lately.
    pub fn recently_rejected(&self, k: &Key) -> bool {
        self.lock().rejects.contains(k)
    }

    /// Notes a transaction refused only for a fee a child may pay (Core's `TX_RECONSIDERABLE`),
    /// or a 1p1c package refused (by [`package_key`]): not asked for, nor tried alone, again.
    pub fn rejected_reconsiderable(&self, k: &Key) {
        self.lock().reconsiderable.insert(k);
    }

    /// Whether a transaction (or a 1p1c package) was refused lately for a fee only.
    pub fn reconsiderable(&self, k: &Key) -> bool {
        self.lock().reconsiderable.contains(k)
    }

    /// Forgets a departed peer: its requests may go to others.
    pub fn forget_peer(&self, peer: PeerId) {
        let mut inner = self.lock();
        inner.peers.remove(&peer);
        inner.in_flight.retain(|_, (who, _)| *who != peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(i: u32) -> Inventory {
        let mut b = [0u8; 32];
        b[..4].copy_from_slice(&i.to_le_bytes());
        Inventory::WTx(bitcoin::Wtxid::from_byte_array(b))
    }

    #[test]
    fn announcements_and_requests_are_bounded_per_peer_and_shared_once() {
        let r = TxRequests::default();
        let tip = BlockHash::all_zeros();
        let many: Vec<Inventory> = (0..50_000).map(tx).collect();
        assert_eq!(
            r.announced(1, many.clone(), Duration::ZERO, tip),
            MAX_ANNOUNCEMENTS
        );
        assert_eq!(
            r.announced(1, many.clone(), Duration::ZERO, tip),
            0,
            "repeats"
        );
        let first = r.due(1);
        assert_eq!(first.len(), MAX_IN_FLIGHT);
        assert!(r.due(1).is_empty(), "nothing more while 100 are in flight");
        // Another peer announcing the same is not asked for what peer 1 was asked.
        r.announced(2, many[..200].to_vec(), Duration::ZERO, tip);
        let second = r.due(2);
        assert_eq!(second, many[100..200].to_vec());
        // An answer frees a place, and what was answered is asked of nobody.
        r.answered(&key(&first[0]).unwrap());
        assert_eq!(r.due(1).len(), 1);
        // A departed peer's requests may go to others.
        r.forget_peer(2);
        r.announced(3, many[100..110].to_vec(), Duration::ZERO, tip);
        assert_eq!(r.due(3).len(), 10);
    }

    #[test]
    fn inbound_announcements_wait_and_refused_ones_are_not_asked_for() {
        let r = TxRequests::default();
        let tip = BlockHash::all_zeros();
        r.announced(1, vec![tx(1)], INBOUND_DELAY, tip);
        assert!(r.due(1).is_empty(), "an inbound announcement waits");
        r.rejected(&[key(&tx(2)).unwrap()]);
        assert_eq!(r.announced(2, vec![tx(2), tx(3)], Duration::ZERO, tip), 1);
        assert!(r.recently_rejected(&key(&tx(2)).unwrap()));
        // A new tip forgets the rejects.
        let next = BlockHash::from_byte_array([1; 32]);
        assert_eq!(r.announced(2, vec![tx(2)], Duration::ZERO, next), 1);
    }
}

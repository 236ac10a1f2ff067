//! Telling the servers what changed: a new index tip with the script hashes whose history
//! changed and the transactions that appeared (for Electrum notifications), and transactions accepted into the mempool (to announce
//! to peers). Whoever makes a change publishes it here; sessions and peers subscribe.

use std::collections::HashSet;
use std::sync::Arc;

use bitcoin::Txid;
use tokio::sync::broadcast;

use crate::index::Index;
use crate::mempool::Accepted;
use crate::types::ScriptHash;

/// Tip updates a slow subscriber may fall behind by before it is told "anything may have
/// changed" instead.
const TIP_UPDATES: usize = 64;
/// Accepted transactions a slow peer may fall behind by before it misses announcements.
const ACCEPTED_TXS: usize = 1024;

/// A new index tip, or a mempool change, and what it changed.
#[derive(Debug, Clone)]
pub struct TipUpdate {
    /// The new tip's height.
    pub height: u32,
    /// The new tip's header.
    pub header: bitcoin::block::Header,
    /// Script hashes touched by connected or undone blocks; `None` means "any may have".
    pub touched: Option<Arc<HashSet<ScriptHash>>>,
    /// Transactions that entered a block or the mempool; `None` means "any may have".
    pub added: Option<Arc<HashSet<Txid>>>,
    /// Those that entered the mempool (a block's own are not among them: what it confirmed
    /// left the pool); `None` means "any may have". What silent-payment subscriptions scan.
    pub entered_mempool: Option<Arc<HashSet<Txid>>>,
}

/// What a change touched, as it is published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Script hashes whose history changed; `None`: any may have.
    pub scripts: Option<HashSet<ScriptHash>>,
    /// Transactions that entered a block or the mempool; `None`: any may have.
    pub added: Option<HashSet<Txid>>,
    /// Transactions that entered the mempool; `None`: any may have.
    pub entered_mempool: Option<HashSet<Txid>>,
}

impl Changes {
    /// Nothing touched yet.
    pub fn none() -> Self {
        Changes {
            scripts: Some(HashSet::new()),
            added: Some(HashSet::new()),
            entered_mempool: Some(HashSet::new()),
        }
    }

    /// A transaction that entered the mempool.
    pub fn accepted(accepted: &Accepted) -> Self {
        Changes {
            scripts: Some(accepted.touched.clone()),
            added: Some(HashSet::from([accepted.txid])),
            entered_mempool: Some(HashSet::from([accepted.txid])),
        }
    }

    /// Changes of blocks: the script hashes they touched and the transactions they confirmed
    /// or undid, none of which entered the mempool.
    pub fn of_blocks(scripts: Option<HashSet<ScriptHash>>, txids: Option<HashSet<Txid>>) -> Self {
        Changes {
            scripts,
            added: txids,
            entered_mempool: Some(HashSet::new()),
        }
    }

    /// What evictions or a package's replacements touched (`scripts`), nothing entering.
    pub fn touching(scripts: HashSet<ScriptHash>) -> Self {
        Changes {
            scripts: Some(scripts),
            ..Changes::none()
        }
    }

    /// Adds what `other` touched.
    pub fn extend(&mut self, other: Changes) {
        fn join<T: std::hash::Hash + Eq>(
            mine: &mut Option<HashSet<T>>,
            theirs: Option<HashSet<T>>,
        ) {
            match (mine.as_mut(), theirs) {
                (Some(m), Some(theirs)) => m.extend(theirs),
                (None, Some(_)) => {}
                (_, None) => *mine = None,
            }
        }
        join(&mut self.scripts, other.scripts);
        join(&mut self.added, other.added);
        join(&mut self.entered_mempool, other.entered_mempool);
    }

    /// Whether nothing is touched.
    pub fn is_empty(&self) -> bool {
        self.scripts.as_ref().is_some_and(HashSet::is_empty)
            && self.added.as_ref().is_some_and(HashSet::is_empty)
            && self.entered_mempool.as_ref().is_some_and(HashSet::is_empty)
    }
}

/// The channels changes travel on; each component that makes or hears of changes holds a clone.
#[derive(Clone)]
pub struct Notifier {
    tips: broadcast::Sender<TipUpdate>,
    txs: broadcast::Sender<Txid>,
}

impl Default for Notifier {
    fn default() -> Self {
        Notifier {
            tips: broadcast::channel(TIP_UPDATES).0,
            txs: broadcast::channel(ACCEPTED_TXS).0,
        }
    }
}

impl Notifier {
    /// Tip updates from now on.
    pub fn subscribe_tips(&self) -> broadcast::Receiver<TipUpdate> {
        self.tips.subscribe()
    }

    /// Transactions accepted into the mempool from now on.
    pub fn subscribe_txs(&self) -> broadcast::Receiver<Txid> {
        self.txs.subscribe()
    }

    /// Tells the sessions that the index tip changed, or what the mempool changed.
    pub fn publish(&self, index: &Index, changes: Changes) {
        let tip = index.with_chain(|c| c.tip().and_then(|(h, _)| c.header(h).map(|hd| (h, *hd))));
        if let Some((height, header)) = tip {
            // No subscriber is not an error: nobody needs telling.
            let _ = self.tips.send(TipUpdate {
                height,
                header,
                touched: changes.scripts.map(Arc::new),
                added: changes.added.map(Arc::new),
                entered_mempool: changes.entered_mempool.map(Arc::new),
            });
        }
    }

    /// Announces a transaction the mempool accepted to the peers.
    pub fn announce(&self, txid: Txid) {
        let _ = self.txs.send(txid);
    }

    /// A transaction entered the mempool: announce it to the peers and tell the sessions whose
    /// scripts it touched.
    pub fn accepted(&self, index: &Index, accepted: Accepted) {
        self.announce(accepted.txid);
        self.publish(index, Changes::accepted(&accepted));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::hashes::Hash;

    fn txid(n: u8) -> Txid {
        Txid::from_byte_array([n; 32])
    }

    #[test]
    fn a_blocks_transactions_never_count_as_entering_the_mempool() {
        let (confirmed, entered) = (txid(1), txid(2));
        let mut changes =
            Changes::of_blocks(Some(HashSet::new()), Some(HashSet::from([confirmed])));
        changes.extend(Changes::touching(HashSet::new()));
        changes.extend(Changes {
            scripts: Some(HashSet::new()),
            added: Some(HashSet::from([entered])),
            entered_mempool: Some(HashSet::from([entered])),
        });
        assert_eq!(changes.added, Some(HashSet::from([confirmed, entered])));
        assert_eq!(changes.entered_mempool, Some(HashSet::from([entered])));
        // A block of too many to list is "any may have" for what it added, not for the pool.
        let mut huge = Changes::of_blocks(None, None);
        huge.extend(Changes::none());
        assert_eq!(huge.added, None);
        assert_eq!(huge.entered_mempool, Some(HashSet::new()));
        assert!(!huge.is_empty());
    }
}

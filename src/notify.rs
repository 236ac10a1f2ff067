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
}

/// What a change touched, as it is published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Script hashes whose history changed; `None`: any may have.
    pub scripts: Option<HashSet<ScriptHash>>,
    /// Transactions that entered a block or the mempool; `None`: any may have.
    pub added: Option<HashSet<Txid>>,
}

impl Changes {
    /// Nothing touched yet.
    pub fn none() -> Self {
        Changes {
            scripts: Some(HashSet::new()),
            added: Some(HashSet::new()),
        }
    }

    /// A transaction that entered the mempool.
    pub fn accepted(accepted: &Accepted) -> Self {
        Changes {
            scripts: Some(accepted.touched.clone()),
            added: Some(HashSet::from([accepted.txid])),
        }
    }

    /// Adds what `other` touched.
    pub fn extend(&mut self, other: Changes) {
        match (&mut self.scripts, other.scripts) {
            (Some(mine), Some(theirs)) => mine.extend(theirs),
            (mine, _) => *mine = None,
        }
        match (&mut self.added, other.added) {
            (Some(mine), Some(theirs)) => mine.extend(theirs),
            (mine, _) => *mine = None,
        }
    }

    /// Whether nothing is touched.
    pub fn is_empty(&self) -> bool {
        self.scripts.as_ref().is_some_and(HashSet::is_empty)
            && self.added.as_ref().is_some_and(HashSet::is_empty)
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

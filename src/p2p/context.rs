//! What every peer connection shares: the chain, the download scheduler, the mempool, the
//! filters, the address book and the list of connected peers.

use std::sync::Arc;

use bitcoin::p2p::{Magic, ServiceFlags};
use bitcoin::BlockHash;

use super::addrbook::AddrBook;
use super::headers_sync::ChainRules;
use super::orphans::Orphans;
use super::registry::Registry;
use super::sync::Downloader;
use crate::index::Index;
use crate::kernel::Validator;
use crate::mempool::Mempool;
use crate::notify::Notifier;

/// What taking in and relaying transactions needs: the mempool, the index it checks spends
/// against, and the notifier that announces accepted transactions to peers and sessions.
#[derive(Clone)]
pub struct MempoolAccess {
    /// The index.
    pub index: Arc<Index>,
    /// The mempool.
    pub mempool: Arc<Mempool>,
    /// Announces accepted transactions and publishes what they changed.
    pub notifier: Notifier,
}

/// What a peer task needs.
pub struct PeerContext {
    /// The network magic.
    pub magic: Magic,
    /// The validator.
    pub validator: Arc<Validator>,
    /// The chain's rules for headers sync (minimum work, proof of work).
    pub rules: ChainRules,
    /// The shared download scheduler.
    pub downloader: Arc<Downloader>,
    /// The services cairn advertises.
    pub services: ServiceFlags,
    /// The mempool peers' transactions go into, when cairn keeps one.
    pub mempool: Option<MempoolAccess>,
    /// Peers' transactions waiting for their parents.
    pub orphans: Orphans,
    /// What each inbound host's transactions have cost.
    pub tx_budgets: super::tx_budget::TxBudgets,
    /// Which announced transactions to ask whom for, and which were refused lately.
    pub tx_requests: super::tx_requests::TxRequests,
    /// When inbound peers are next told of new transactions: one timer for all of them
    /// (Core's `NextInvToInbounds`).
    pub inbound_announcement: super::announce_timer::InboundTimer,
    /// The answer every `getaddr` gets until it expires (Core's `m_addr_response_caches`).
    pub addr_answer: super::addrbook::AnswerCache,
    /// The index whose BIP158 filters are served (with NODE_COMPACT_FILTERS), if there is one.
    pub filter_index: Option<Arc<Index>>,
    /// Known peer addresses.
    pub book: Arc<AddrBook>,
    /// The connected peers.
    pub registry: Arc<Registry>,
    /// How long a peer may send nothing, or read nothing of what it is owed.
    pub timeout: std::time::Duration,
    /// Whether peers' `addr` messages go into the address book (not with `connect`, which
    /// talks to its peers only).
    pub learns_addresses: bool,
    /// Fires when a header sync should start now (SIGUSR1, as electrs).
    pub sync_now: tokio::sync::broadcast::Sender<()>,
    /// The kernel's tip once it has caught up with the best header (`None` before): what the
    /// sessions announce to their peers.
    pub tip: tokio::sync::watch::Sender<Option<BlockHash>>,
    /// The inbound places, and what their peers did that protects them from eviction.
    pub inbound: Arc<super::inbound::Inbound>,
}

impl PeerContext {
    /// The sample of the address book `getaddr` is answered with (Core's `GetAddresses`
    /// cache).
    pub fn addr_answer(&self) -> Vec<super::addrbook::KnownAddr> {
        self.addr_answer
            .get(std::time::Instant::now(), || self.book.sample())
    }
}

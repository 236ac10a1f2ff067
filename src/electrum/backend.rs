//! What the Electrum sessions read from and publish to.

use std::sync::Arc;

use super::history_cache::HistoryCache;
use super::merkle::HeaderRoots;
use super::status::StatusCache;
use crate::config::ElectrumConfig;
use crate::index::Index;
use crate::kernel::Validator;
use crate::mempool::Mempool;
use crate::notify::Notifier;

/// What the sessions read from.
pub struct Backend {
    /// The index.
    pub index: Arc<Index>,
    /// The validator (raw transactions are cut out of its blocks).
    pub validator: Arc<Validator>,
    /// The mempool, when cairn keeps one.
    pub mempool: Option<Arc<Mempool>>,
    /// Where accepted transactions are announced to peers and changes published to sessions.
    pub notifier: Notifier,
    /// The configuration.
    pub config: ElectrumConfig,
    /// Cached roots of the header tree's subtrees, for `cp_height` proofs.
    pub header_roots: HeaderRoots,
    /// Status hashes of long histories, extended block by block.
    pub status_cache: StatusCache,
    /// Long confirmed histories, extended block by block.
    pub history_cache: HistoryCache,
}

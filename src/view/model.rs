//! The read model and one request's view of it.

use std::cell::Cell;
use std::sync::Arc;

use bitcoin::hashes::Hash;

use crate::index::query::{ConfirmedEntry, Cost, IndexView, QueryError};
use crate::index::Index;
use crate::kernel::Validator;
use crate::mempool::Mempool;

use super::cache::{Lru, TipCache};
use super::merkle::{self, MerkleTree};

/// Scripts whose status hash state is cached, at most.
const STATUS_SCRIPTS: usize = 4_096;
/// Scripts whose confirmed history is cached, at most.
const HISTORY_SCRIPTS: usize = 4_096;
/// History entries kept over all cached scripts (36 bytes each: about 72 MB); a history longer
/// than half of it is not kept.
const HISTORY_ENTRIES: usize = 2_000_000;

/// Bytes of blocks' merkle trees kept for transaction proofs (`get_merkle`, `id_from_pos`,
/// Esplora's): Fulcrum gives its blocks' txids half of its `txhash_cache` (128 MB), 64 MB; a tree
/// takes twice its txids.
const BLOCK_TREE_BYTES: usize = 64_000_000;
/// Blocks whose merkle tree is kept, at most.
const BLOCK_TREES: usize = 100_000;
/// What a kept tree weighs besides its hashes (its key, lists and places in the maps).
const BLOCK_TREE_OVERHEAD: usize = 256;

/// The SHA-256 state after a script's confirmed entries, and how many there were.
pub(super) type StatusState = (bitcoin::hashes::sha256::HashEngine, usize);

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The index failed, or an answer would pass its limit ([`QueryError::TooLarge`]).
    #[error(transparent)]
    Query(#[from] QueryError),
    /// Stored data that does not read back: a transaction or block that does not decode, undo
    /// data that does not fit its block.
    #[error("{0}")]
    Damaged(String),
    /// The kernel could not read a block or its undo data.
    #[error("{0}")]
    Kernel(String),
    /// A block read a moment ago left the chain (a reorg): asking again answers.
    #[error("the chain changed during the request; try again")]
    ChainChanged,
}

/// Which histories and statuses the caches keep.
#[derive(Debug, Clone, Copy)]
pub struct CacheSettings {
    /// Status hashes of histories with at least this many confirmed entries are cached.
    pub status_from: usize,
    /// Histories with at least this many confirmed entries are cached whole.
    pub history_from: usize,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            status_from: 1_000,
            history_from: 20,
        }
    }
}

/// What every server reads: shared by all of them, so their caches are one.
pub struct ReadModel {
    index: Arc<Index>,
    pub(super) validator: Arc<Validator>,
    pub(super) mempool: Option<Arc<Mempool>>,
    pub(super) settings: CacheSettings,
    pub(super) statuses: TipCache<StatusState>,
    pub(super) histories: TipCache<Arc<Vec<ConfirmedEntry>>>,
    header_roots: merkle::HeaderRoots,
    /// Blocks' merkle trees by block hash (so a tree never outlives its block in a reorg).
    block_trees: Lru<bitcoin::BlockHash, Arc<MerkleTree>>,
}

impl ReadModel {
    /// The read model over a node's index, kernel and mempool (when it keeps one).
    pub fn new(
        index: Arc<Index>,
        validator: Arc<Validator>,
        mempool: Option<Arc<Mempool>>,
        settings: CacheSettings,
    ) -> Self {
        ReadModel {
            index,
            validator,
            mempool,
            settings,
            statuses: TipCache::new(STATUS_SCRIPTS, STATUS_SCRIPTS),
            histories: TipCache::new(HISTORY_SCRIPTS, HISTORY_ENTRIES),
            header_roots: merkle::HeaderRoots::default(),
            block_trees: Lru::new(BLOCK_TREES, BLOCK_TREE_BYTES),
        }
    }

    /// One view for one request: the index's chain and snapshot taken now.
    pub fn view(&self) -> ChainView<'_> {
        self.view_with(None)
    }

    /// A view whose cost is added to `meter` when it is dropped: a session charges its client
    /// for every view its requests take.
    pub fn metered_view<'a>(&'a self, meter: &'a CostMeter) -> ChainView<'a> {
        self.view_with(Some(meter))
    }

    fn view_with<'a>(&'a self, meter: Option<&'a CostMeter>) -> ChainView<'a> {
        ChainView {
            model: self,
            index: self.index.reader(),
            kernel: Cell::new(Cost::default()),
            meter,
        }
    }

    /// Whether a read would find no writer to wait for now: the initial download over (its
    /// check asks the kernel), no index batch and no mempool change under way. For a request
    /// answered on its connection's task ([`crate::types::try_inline`]); a writer may still start
    /// right after, and is then waited for once.
    pub fn quiet(&self) -> bool {
        self.validator.caught_up()
            && !self.index.writing()
            && !self.mempool.as_ref().is_some_and(|m| m.writing())
    }

    /// The index (the mempool checks new transactions against it).
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// The validator.
    pub fn validator(&self) -> &Arc<Validator> {
        &self.validator
    }

    /// The mempool, when the node keeps one.
    pub fn mempool(&self) -> Option<&Arc<Mempool>> {
        self.mempool.as_ref()
    }
}

/// One request's view: the index as of one snapshot, the mempool and the kernel's reads.
///
/// Its questions are answered in a file per subject, beside the types their answers use:
/// `script.rs` (history, status, balance, unspent outputs), `outpoint.rs`, `tx.rs`,
/// `filters.rs`, `tweaks.rs`; here are only what they all use (the snapshot, the mempool, the
/// kernel's reads and what they cost). One type, so every question of a request reads one
/// snapshot; several files, so a subject's questions are found by its name.
pub struct ChainView<'a> {
    pub(super) model: &'a ReadModel,
    pub(super) index: IndexView<'a>,
    /// What was read through the kernel: blocks and undo data.
    kernel: Cell<Cost>,
    meter: Option<&'a CostMeter>,
}

impl Drop for ChainView<'_> {
    fn drop(&mut self) {
        if let Some(meter) = self.meter {
            meter.add(self.cost());
        }
    }
}

/// What the views of one client's requests read, added up as they end.
#[derive(Debug, Default)]
pub struct CostMeter(Cell<Cost>);

impl CostMeter {
    /// Adds a view's cost.
    pub fn add(&self, cost: Cost) {
        self.0.set(self.0.get().plus(cost));
    }

    /// The cost added since the last take, and a fresh start.
    pub fn take(&self) -> Cost {
        self.0.take()
    }
}

impl<'a> ChainView<'a> {
    /// The index as this view sees it.
    pub fn index(&self) -> &IndexView<'a> {
        &self.index
    }

    /// The mempool, when the node keeps one.
    pub fn mempool(&self) -> Option<&'a Mempool> {
        self.model.mempool.as_deref()
    }

    /// The validator (block and undo reads).
    pub fn validator(&self) -> &'a Validator {
        &self.model.validator
    }

    /// The network's `bitcoin` crate form, for addresses.
    pub fn network(&self) -> bitcoin::Network {
        self.model.validator.network().to_bitcoin()
    }

    /// What this view has read from the index and the block files so far.
    pub fn cost(&self) -> Cost {
        self.index.cost().plus(self.kernel.get())
    }

    /// Fails for an inline job ([`crate::types::try_inline`]), before a read through the
    /// kernel: block files are read from the disk.
    pub(super) fn may_read_kernel(&self) -> Result<(), ViewError> {
        match crate::types::may_block() {
            true => Ok(()),
            false => Err(QueryError::NotInline.into()),
        }
    }

    /// Counts what a read through the kernel brought in; fails once the request is abandoned
    /// ([`crate::types::abandoned`]).
    pub(super) fn charge_kernel(&self, rows: u64, bytes: usize) -> Result<(), ViewError> {
        let read = Cost {
            rows,
            bytes: bytes as u64,
        };
        self.kernel.set(self.kernel.get().plus(read));
        match crate::types::abandoned() {
            true => Err(QueryError::Abandoned.into()),
            false => Ok(()),
        }
    }

    /// The tip the view shows.
    pub fn tip(&self) -> Option<(u32, bitcoin::BlockHash)> {
        self.index.tip()
    }

    /// The header of the view's block at `height`.
    pub fn header(&self, height: u32) -> Option<bitcoin::block::Header> {
        self.index.chain().header(height).copied()
    }

    /// The median time past of the view's block at `height`: the median of its time and the
    /// ten before it (Core's `GetMedianTimePast`).
    pub fn median_time_past(&self, height: u32) -> u32 {
        const SPAN: u32 = 11;
        let mut times: Vec<u32> = (height.saturating_sub(SPAN - 1)..=height)
            .filter_map(|h| self.header(h).map(|h| h.time))
            .collect();
        times.sort_unstable();
        times.get(times.len() / 2).copied().unwrap_or(0)
    }

    /// The hash of the view's block at `height`.
    pub fn block_hash(&self, height: u32) -> Option<bitcoin::BlockHash> {
        self.index.chain().hash(height)
    }

    /// The height of a block of the view's chain.
    pub fn height_of(&self, hash: &bitcoin::BlockHash) -> Option<u32> {
        self.index.chain().height_of_hash(hash)
    }

    /// The proof of the header at `height` against the root of every block hash up to
    /// `cp_height` (Electrum's `cp_height`), with subtree roots from the cache. `None` unless
    /// `height <= cp_height <= tip`.
    pub fn header_proof(&self, height: u32, cp_height: u32) -> Option<(Vec<[u8; 32]>, [u8; 32])> {
        let chain = self.index.chain();
        let (tip, _) = chain.tip()?;
        if height > cp_height || cp_height > tip {
            return None;
        }
        let leaf = |h: usize| {
            chain
                .hash(h as u32)
                .map(|h| h.to_byte_array())
                .unwrap_or_default()
        };
        Some(self.model.header_roots.branch_and_root(
            cp_height as usize + 1,
            height as usize,
            merkle::CHUNK_LEVELS,
            leaf,
        ))
    }

    /// The merkle tree of the view's block at `height` (`None` without one): kept from an
    /// earlier request, else built from its txid rows and kept. Charged as reading those rows
    /// either way (one row per 50 txids), so that a block too large for an inline request goes to
    /// the pool, and a request that walks every leaf pays for them.
    pub fn block_tree(&self, height: u32) -> Result<Option<Arc<MerkleTree>>, ViewError> {
        let Some(hash) = self.block_hash(height) else {
            return Ok(None);
        };
        if let Some(tree) = self.model.block_trees.get(&hash, |_| true) {
            let count = tree.leaves().len();
            self.index.charge_kept(1 + count as u64 / 50, count * 32)?;
            return Ok(Some(tree));
        }
        let Some(txids) = self.index.block_txids(height)? else {
            return Ok(None);
        };
        let tree = Arc::new(MerkleTree::new(
            txids.iter().map(|t| t.to_byte_array()).collect(),
        ));
        let weight = tree.bytes() + BLOCK_TREE_OVERHEAD;
        self.model.block_trees.put(hash, Arc::clone(&tree), weight);
        Ok(Some(tree))
    }
}

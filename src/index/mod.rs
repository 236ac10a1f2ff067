//! The indexer: every block the kernel connects becomes rows in the store (script-hash history,
//! transactions, unspent outputs, spent-by), written in one atomic batch with the index tip.
//! Disconnected blocks are undone from the same undo data. It never looks a prevout's script or
//! amount up: they come with the block from the kernel.

mod backfill;
mod batch;
pub mod chain;
mod error;
pub mod filters;
pub mod query;
pub mod rows;
pub mod silent_payments;
mod tweaks;
mod writer;

use std::collections::HashSet;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use bitcoin::{BlockHash, Txid};
use rayon::prelude::*;
use rocksdb::WriteBatch;

use crate::kernel::blockfiles::{FilePos, KernelBlockFiles};
use crate::kernel::{ChainReader, Validator};
use crate::store::schema::{cf, meta, BlockPosRow, BlockRow, FilterRow, ScanPosRow, TipRow, TxRow};
use crate::store::undo::UndoRow;
use crate::store::{KeyValue, Store};
use chain::IndexedChain;

/// What one index batch does, for the metrics.
struct BatchCounts {
    connected: u64,
    disconnected: u64,
    txs: u64,
}
use rows::{prepare, Extras, PreparedBlock};

use crate::types::{ScriptHash, TxNum};
pub use error::IndexError;
pub use writer::find_txnum;

/// What one [`Index::sync`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SyncStats {
    /// Blocks added.
    pub connected: u32,
    /// Blocks undone (reorgs).
    pub disconnected: u32,
    /// Script hashes whose history changed; `None` when too many to list (any may have).
    pub touched: Option<HashSet<ScriptHash>>,
    /// Transactions of the connected and undone blocks; `None` when too many to list.
    pub txids: Option<HashSet<bitcoin::Txid>>,
    /// The non-coinbase transactions of undone blocks, serialized (for the mempool).
    pub undone_txs: Vec<Vec<u8>>,
    /// The lowest height undone, if any block was.
    pub lowest_undone: Option<u32>,
}

/// Past this many touched script hashes a sync reports "any" instead of the list.
const MAX_TOUCHED: usize = 100_000;

impl SyncStats {
    /// Adds the transactions and script hashes of `blocks` (one batch, or one undone block) to
    /// the lists, or gives a list up (`None`: any may have changed) when the whole batch could
    /// take it past [`MAX_TOUCHED`], before hashing any of it in: a batch of a catch-up (the
    /// initial download: hundreds of blocks, up to 100,000 transactions) gives the lists up at
    /// once, where filling them block by block up to the limit first cost the indexer a
    /// twentieth of its time, once for every sync; a block at the tip is listed.
    fn touch(&mut self, blocks: &[PreparedBlock]) {
        let within = |len: usize, more: usize| len.saturating_add(more) <= MAX_TOUCHED;
        let txs = || blocks.iter().flat_map(|b| &b.txs);
        if let Some(set) = self.txids.as_mut() {
            match within(set.len(), txs().count()) {
                true => set.extend(txs().map(|tx| tx.txid)),
                false => self.txids = None,
            }
        }
        let Some(set) = self.touched.as_mut() else {
            return;
        };
        let scripts: usize = txs().map(|tx| tx.outputs.len() + tx.inputs.len()).sum();
        if !within(set.len(), scripts) {
            self.touched = None;
            return;
        }
        for tx in txs() {
            set.extend(tx.outputs.iter().map(|o| o.scripthash));
            set.extend(tx.inputs.iter().map(|i| i.spent.scripthash));
        }
    }
}

/// Blocks read and prepared in parallel, then written in one batch.
const BATCH_BLOCKS: usize = 256;
/// A batch is also closed once it holds this many transactions.
const BATCH_TXS: usize = 100_000;

/// The index: the store plus the indexed chain in memory.
pub struct Index {
    store: Arc<Store>,
    /// Replaced, never changed in place, and only together with a store write: a reader that
    /// takes it and a snapshot under the read lock has the two agree.
    chain: RwLock<Arc<IndexedChain>>,
    block_files: Option<KernelBlockFiles>,
    /// Whether BIP158 filters are built and served.
    filters: bool,
    /// The height from which silent-payment tweaks are built and served, if they are.
    tweaks_from: Option<u32>,
    /// The kernel that reads what the block files cannot give ([`Index::read_through`]); not
    /// owned, so it closes when its node closes.
    kernel: std::sync::OnceLock<std::sync::Weak<Validator>>,
    /// The last block read through the kernel for a transaction (one block: the inputs of a
    /// transaction into one torn block read it once, not once each).
    kernel_block: std::sync::Mutex<Option<(BlockHash, Arc<Vec<u8>>)>>,
    /// Whether every indexed block's tweaks are built: set when the index opens without
    /// `meta/tweak_backfill`, or once the backfill has deleted it (the marker is written only
    /// when the index opens, so it stays gone). A view reads the flag before it takes its
    /// snapshot.
    tweaks_built: std::sync::atomic::AtomicBool,
}

/// Every row of an index, by column family ([`Index::dump`]).
pub type IndexDump = Vec<(&'static str, Vec<KeyValue>)>;

/// What an index builds beside the rows every block has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexOptions {
    /// Whether BIP158 filters are built and served (`block_filters`).
    pub filters: bool,
    /// The height from which BIP352 tweaks are built and served (`silent_payments`: taproot's
    /// activation on mainnet, genesis elsewhere); `None`, not built.
    pub tweaks_from: Option<u32>,
}

impl Index {
    /// Opens the index over `store`, loading the indexed headers. With `block_files` (the
    /// kernel's `blocks/` folder) it maps where every block sits, so transactions are served
    /// from the files without the kernel's lock.
    pub fn open(
        store: Arc<Store>,
        block_files: Option<KernelBlockFiles>,
    ) -> Result<Self, IndexError> {
        Self::open_with_filters(store, block_files, true)
    }

    /// As [`Index::open`], choosing whether BIP158 filters are built and served. Turning them
    /// off marks the store; turning them on again rebuilds every filter before new blocks are
    /// indexed (rows left from before may be stale).
    pub fn open_with_filters(
        store: Arc<Store>,
        block_files: Option<KernelBlockFiles>,
        filters: bool,
    ) -> Result<Self, IndexError> {
        let options = IndexOptions {
            filters,
            tweaks_from: None,
        };
        Self::open_with_options(store, block_files, options)
    }

    /// As [`Index::open`], with what is built beside the rows: filters as
    /// [`Index::open_with_filters`] says, and tweaks likewise (turned on over indexed blocks,
    /// they are built for those first).
    pub fn open_with_options(
        store: Arc<Store>,
        block_files: Option<KernelBlockFiles>,
        options: IndexOptions,
    ) -> Result<Self, IndexError> {
        let IndexOptions {
            filters,
            tweaks_from,
        } = options;
        tweaks::mark(&store, tweaks_from)?;
        let tweaks_built =
            tweaks_from.is_some() && store.get(cf::META, meta::TWEAK_BACKFILL)?.is_none();
        let marked_off = store.get(cf::META, meta::FILTERS_OFF)?.is_some();
        if filters && marked_off {
            let mut batch = WriteBatch::default();
            batch.delete_cf(store.cf(cf::META), meta::FILTERS_OFF);
            batch.put_cf(
                store.cf(cf::META),
                meta::FILTER_BACKFILL,
                0u32.to_le_bytes(),
            );
            store.write(batch)?;
            tracing::info!("block filters turned back on: rebuilding them all");
        } else if !filters && !marked_off {
            let mut batch = WriteBatch::default();
            batch.put_cf(store.cf(cf::META), meta::FILTERS_OFF, []);
            store.write(batch)?;
        }
        let mut chain = IndexedChain::default();
        let tip = store.tip()?;
        for item in store.scan_prefix(None, cf::BLOCKS, &[]) {
            let (key, value) = item?;
            let height = BlockRow::decode_key(&key)?;
            if height as usize != chain.len() {
                return Err(IndexError::Inconsistent(format!(
                    "block rows jump from height {} to {height}",
                    chain.len() as i64 - 1
                )));
            }
            let row = BlockRow::decode(&value)?;
            if !chain.is_empty() && chain.next_txnum() != row.first_txnum {
                return Err(IndexError::Inconsistent(format!(
                    "block {height} starts at TxNum {}, expected {}",
                    row.first_txnum.0,
                    chain.next_txnum().0
                )));
            }
            chain.push(row.header, row.first_txnum, row.tx_count);
        }
        let in_memory = chain.tip().map(|(height, hash)| TipRow { height, hash });
        if in_memory != tip {
            return Err(IndexError::Inconsistent(format!(
                "tip row {tip:?} does not match the block rows' top {in_memory:?}"
            )));
        }
        Ok(Index {
            store,
            chain: RwLock::new(Arc::new(chain)),
            block_files,
            filters,
            tweaks_from,
            kernel: Default::default(),
            kernel_block: Default::default(),
            tweaks_built: std::sync::atomic::AtomicBool::new(tweaks_built),
        })
    }

    /// Transactions the block files cannot give (a block not mapped, or a record torn by a
    /// crash) are read through `validator` from then on (once set, kept).
    pub fn read_through(&self, validator: &Arc<Validator>) {
        let _ = self.kernel.set(Arc::downgrade(validator));
    }

    /// The serialized block `hash` read through `validator`, or the same block read last.
    pub(crate) fn kernel_block(
        &self,
        validator: &Validator,
        hash: &BlockHash,
    ) -> Result<Arc<Vec<u8>>, IndexError> {
        let last = || {
            self.kernel_block
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        if let Some((held, bytes)) = &*last() {
            if held == hash {
                return Ok(bytes.clone());
            }
        }
        // Read without the lock: other requests do not wait for this one.
        let bytes = Arc::new(validator.read_block_bytes_by_hash(hash)?);
        // Unmapped, the indexer warned once already; still mapped, its record was torn after
        // the block was indexed.
        let mapped = || self.store.get(cf::BLOCKPOS, &BlockPosRow::key(hash));
        if self.block_files.is_some() && mapped()?.is_some() {
            tracing::warn!(
                "block {hash} read through the kernel: the block files do not hold it where the \
                 index maps it (a record torn or written over after a crash?)"
            );
        }
        *last() = Some((*hash, bytes.clone()));
        Ok(bytes)
    }

    /// The kernel given to [`Index::read_through`], while it is open.
    pub(crate) fn kernel(&self) -> Option<Arc<Validator>> {
        self.kernel.get().and_then(std::sync::Weak::upgrade)
    }

    /// The kernel's block files, when the index reads them directly.
    pub fn block_files(&self) -> Option<&KernelBlockFiles> {
        self.block_files.as_ref()
    }

    /// Records where the blocks written since the last scan sit in the kernel's files.
    fn scan_block_files(&self) -> Result<(), IndexError> {
        let Some(files) = &self.block_files else {
            return Ok(());
        };
        let from = match self.store.get(cf::META, meta::BLKSCAN)? {
            Some(bytes) => ScanPosRow::decode(&bytes)?,
            None => FilePos::default(),
        };
        let (found, next) = files
            .scan_from(from)
            .map_err(|e| IndexError::BlockFiles(e.to_string()))?;
        if next == from {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        for block in found {
            let row = BlockPosRow {
                at: block.at,
                len: block.len,
            };
            batch.put_cf(
                self.store.cf(cf::BLOCKPOS),
                BlockPosRow::key(&block.hash),
                row.encode(),
            );
        }
        batch.put_cf(
            self.store.cf(cf::META),
            meta::BLKSCAN,
            ScanPosRow::encode(next),
        );
        self.store.write(batch)?;
        Ok(())
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// A read of the indexed chain as it is now (a shared copy: no lock is held while `f` runs).
    pub fn with_chain<R>(&self, f: impl FnOnce(&IndexedChain) -> R) -> R {
        let chain = self
            .chain
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        f(&chain)
    }

    /// The indexed chain and a store snapshot taken together: the snapshot holds exactly the
    /// rows of the chain's blocks. A query scans them without a lock, so the writer never waits
    /// for it, and never sees a block half written or half undone.
    pub fn view(&self) -> (Arc<IndexedChain>, rocksdb::Snapshot<'_>) {
        let chain = self.chain.read().unwrap_or_else(PoisonError::into_inner);
        (chain.clone(), self.store.snapshot())
    }

    /// Whether a batch is being written now (the chain's write lock held): a
    /// [`Index::view`] would wait for it.
    pub fn writing(&self) -> bool {
        matches!(
            self.chain.try_read(),
            Err(std::sync::TryLockError::WouldBlock)
        )
    }

    /// Writes `batch` and then changes the chain by `change`, both under the write lock, so no
    /// reader takes a snapshot of one without the other. `counts` (blocks connected and
    /// disconnected, transactions added) and the write's time go to the metrics.
    fn commit(
        &self,
        batch: rocksdb::WriteBatch,
        counts: BatchCounts,
        change: impl FnOnce(&mut IndexedChain),
    ) -> Result<(), IndexError> {
        let mut chain = self.chain.write().unwrap_or_else(PoisonError::into_inner);
        let started = Instant::now();
        self.store.write(batch)?;
        crate::metrics::metrics().index_batch(
            counts.connected,
            counts.disconnected,
            counts.txs,
            started.elapsed(),
        );
        change(Arc::make_mut(&mut *chain));
        Ok(())
    }

    /// The index tip.
    pub fn tip(&self) -> Option<(u32, BlockHash)> {
        self.with_chain(|c| c.tip())
    }

    /// Brings the index to the kernel's active chain: undoes blocks that left it, then adds
    /// every block up to its tip. Safe to call at any time and after any crash.
    pub fn sync(&self, validator: &Validator) -> Result<SyncStats, IndexError> {
        let _span = tracing::info_span!("index_sync").entered();
        let mut stats = SyncStats {
            touched: Some(HashSet::new()),
            txids: Some(HashSet::new()),
            ..Default::default()
        };
        let mut backfilled = false;
        loop {
            self.scan_block_files()?;
            if !self.undo_blocks_left_behind(validator, &mut stats)? {
                return Ok(stats);
            }
            // Only once every indexed block is one the kernel has (after a crash it may have
            // lost some), and before new blocks are indexed.
            if !backfilled {
                self.backfill_filters(validator)?;
                self.backfill_tweaks(validator)?;
                backfilled = true;
            }
            let kernel_tip = validator.tip().height;
            let next = self.tip().map(|(h, _)| i64::from(h) + 1).unwrap_or(0);
            if next > kernel_tip {
                return Ok(stats);
            }
            let started = Instant::now();
            // The kernel's chain moved under us (a reorg) when either step says so: start over
            // from the tip check.
            let Some(prepared) = self.prepare_batch(validator, next, kernel_tip)? else {
                continue;
            };
            if !self.connect_batch(&prepared)? {
                continue;
            }
            stats.connected += prepared.len() as u32;
            stats.touch(&prepared);
            let txs: usize = prepared.iter().map(|b| b.txs.len()).sum();
            tracing::debug!(
                "indexed heights {next}..={} ({txs} txs) in {:.0} ms",
                next + prepared.len() as i64 - 1,
                started.elapsed().as_secs_f64() * 1000.0
            );
        }
    }

    /// Undoes indexed blocks the kernel's active chain no longer has, recording them in
    /// `stats`. `false` when the kernel is behind the index: after a crash it can lose blocks it
    /// had not flushed, which the index had already written; the index then waits until the
    /// kernel has validated that height again, and the hashes decide.
    fn undo_blocks_left_behind(
        &self,
        validator: &Validator,
        stats: &mut SyncStats,
    ) -> Result<bool, IndexError> {
        while let Some((height, hash)) = self.tip() {
            if validator.hash_at(i64::from(height)) == Some(hash) {
                break;
            }
            if i64::from(height) > validator.tip().height {
                tracing::debug!("index tip {height} is above the kernel's; waiting for it");
                return Ok(false);
            }
            match self.disconnect_tip(validator, height, hash)? {
                Some((undone, raw)) => {
                    stats.touch(std::slice::from_ref(&undone));
                    for tx in undone.txs.iter().skip(1) {
                        if let Some(bytes) =
                            raw.get(tx.offset as usize..(tx.offset + tx.len) as usize)
                        {
                            stats.undone_txs.push(bytes.to_vec());
                        }
                    }
                }
                // Undone from the index's own rows, which keep script hash prefixes only: any
                // script may have changed (and its transactions cannot go back to the mempool).
                None => (stats.touched, stats.txids) = (None, None),
            }
            stats.disconnected += 1;
            stats.lowest_undone = Some(height);
        }
        Ok(true)
    }

    /// Reads and prepares the blocks from `next` on, in parallel while the kernel may validate
    /// later ones: at most [`BATCH_BLOCKS`] and [`BATCH_TXS`] transactions (at least one block),
    /// reading past that only as far as an estimate from the blocks read before overshoots.
    /// `None` if the kernel's chain got shorter meanwhile (a reorg).
    fn prepare_batch(
        &self,
        validator: &Validator,
        next: i64,
        kernel_tip: i64,
    ) -> Result<Option<Vec<PreparedBlock>>, IndexError> {
        let end = (next + BATCH_BLOCKS as i64 - 1).min(kernel_tip);
        let reader = match validator.chain_reader(end) {
            Ok(reader) => reader,
            Err(_) if validator.tip().height < end => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        // Only about as many blocks as the batch takes: mainnet's blocks hold thousands of
        // transactions, a batch a few dozen of them, not BATCH_BLOCKS. A first chunk tells how
        // many transactions a block holds here; each further round reads as many blocks as
        // that average says the batch still takes.
        let first = (rayon::current_num_threads() * 4).max(16);
        let (mut prepared, mut from, mut txs) = (Vec::<PreparedBlock>::new(), next, 0usize);
        let mut unmap = Vec::new();
        while from <= end && txs < BATCH_TXS {
            let blocks = match prepared.len() {
                0 => first,
                n => (BATCH_TXS - txs) / (txs / n).max(1) + 1,
            };
            let to = (from + blocks as i64 - 1).min(end);
            let blocks: Result<Vec<(PreparedBlock, Option<BlockHash>)>, IndexError> = (from..=to)
                .into_par_iter()
                .map(|h| self.read_and_prepare(&reader, h))
                .collect();
            match blocks {
                Ok(blocks) => {
                    for (block, bad_record) in blocks {
                        txs += block.txs.len();
                        prepared.push(block);
                        unmap.extend(bad_record);
                    }
                }
                Err(_) if validator.tip().height < end => return Ok(None),
                Err(e) => return Err(e),
            }
            from = to + 1;
        }
        self.unmap_records(&unmap);
        let mut txs = 0usize;
        if let Some(cut) = prepared.iter().position(|b| {
            txs += b.txs.len();
            txs > BATCH_TXS
        }) {
            prepared.truncate(cut.max(1));
        }
        // The reader kept to the chain it started on: a reorg to a shorter chain meanwhile
        // leaves these blocks readable but off the active chain.
        if let Some(last) = prepared.last() {
            let height = i64::from(last.height);
            if validator.hash_at(height) != Some(last.header.block_hash()) {
                return Ok(None);
            }
        }
        Ok(Some(prepared))
    }

    /// Reads and prepares the block at `height`: its bytes from the kernel's block files where
    /// the scan found it, without the kernel's lock (which a validating kernel holds nearly all
    /// the time, so a read through it waits), checked to be that block; read through the
    /// kernel when they are not or not mapped yet. Also the block's hash when its record is
    /// not the block (torn or written over after a crash: the kernel's bytes differ), to be
    /// unmapped. The undo data is always the kernel's (its read still waits).
    fn read_and_prepare(
        &self,
        reader: &ChainReader<'_>,
        height: i64,
    ) -> Result<(PreparedBlock, Option<BlockHash>), IndexError> {
        let (h, extras) = (height as u32, self.extras_at(height as u32));
        let undo = reader.read_undo(height)?;
        let hash = reader.hash_at(height)?;
        let Some(raw) = self.mapped_block_bytes(&hash)? else {
            return Ok((
                prepare(h, &reader.read_block(height)?, &undo, extras)?,
                None,
            ));
        };
        let refused = match rows::prepare_from_files(h, &raw, &undo, extras, &hash) {
            Ok(block) => return Ok((block, None)),
            Err(e) => e,
        };
        let kernel_raw = reader.read_block(height)?;
        let block = prepare(h, &kernel_raw, &undo, extras)?;
        // The same bytes refused, the kernel's prepared: cannot be, but never unmap a good one.
        let bad = (kernel_raw != raw).then(|| {
            tracing::warn!("{refused}; read through the kernel, its record unmapped");
            hash
        });
        Ok((block, bad))
    }

    /// Deletes the block-file places of `hashes`, whose records are not their blocks: the scan
    /// never goes back, so they are read through the kernel from now on, here and for queries.
    /// On the indexer thread, between scans; a failure costs only a warning more next time.
    fn unmap_records(&self, hashes: &[BlockHash]) {
        if hashes.is_empty() {
            return;
        }
        let mut batch = WriteBatch::default();
        for hash in hashes {
            batch.delete_cf(self.store.cf(cf::BLOCKPOS), BlockPosRow::key(hash));
        }
        if let Err(e) = self.store.write(batch) {
            tracing::warn!("block-file places not deleted: {e}");
        }
    }

    /// The bytes at the place the block-file scan found `hash`, unchecked; `None` when it has
    /// not found it or they cannot be read.
    fn mapped_block_bytes(&self, hash: &BlockHash) -> Result<Option<Vec<u8>>, IndexError> {
        let Some(files) = &self.block_files else {
            return Ok(None);
        };
        let Some(row) = self.store.get(cf::BLOCKPOS, &BlockPosRow::key(hash))? else {
            return Ok(None);
        };
        let row = BlockPosRow::decode(&row)?;
        match files.read(row.at, row.len) {
            Ok(raw) => Ok(Some(raw)),
            Err(e) => {
                tracing::debug!("block {hash} not read from the block files: {e}");
                Ok(None)
            }
        }
    }

    /// Writes `blocks` (consecutive, on top of the tip) in one batch; `false` if they do not
    /// extend the tip (the kernel reorganized meanwhile) and nothing was written.
    fn connect_batch(&self, blocks: &[PreparedBlock]) -> Result<bool, IndexError> {
        let (mut prev, mut next_txnum) =
            self.with_chain(|c| (c.tip().map(|(_, h)| h), c.next_txnum()));
        let mut batch = batch::SortedBatch::default();
        let mut lookup = writer::TxNumLookup::new(&self.store);
        let mut firsts = Vec::with_capacity(blocks.len());
        let mut prev_filter = self.tip_filter_header()?;
        for block in blocks {
            if let Some(prev) = prev {
                if block.header.prev_blockhash != prev {
                    return Ok(false);
                }
            }
            prev_filter = writer::connect(&mut batch, &mut lookup, block, next_txnum, prev_filter)?;
            firsts.push(next_txnum);
            next_txnum = TxNum(next_txnum.0 + block.txs.len() as u64);
            prev = Some(block.header.block_hash());
        }
        drop(lookup); // its cursor pins the store as it was: not across the commit
        let Some(last) = blocks.last() else {
            return Ok(true);
        };
        let tip = TipRow {
            height: last.height,
            hash: last.header.block_hash(),
        };
        batch.put(cf::META, meta::TIP, tip.encode());
        let counts = BatchCounts {
            connected: blocks.len() as u64,
            disconnected: 0,
            txs: blocks.iter().map(|b| b.txs.len() as u64).sum(),
        };
        self.commit(batch.into_write_batch(&self.store), counts, |chain| {
            for (block, first) in blocks.iter().zip(firsts) {
                chain.push(block.header, first, block.txs.len() as u32);
            }
        })?;
        Ok(true)
    }

    /// The filter header new blocks chain onto: the tip's (all zeros before genesis), or `None`
    /// while filters of indexed blocks are still being built.
    fn tip_filter_header(&self) -> Result<Option<bitcoin::bip158::FilterHeader>, IndexError> {
        if !self.filters || self.store.get(cf::META, meta::FILTER_BACKFILL)?.is_some() {
            return Ok(None);
        }
        let Some((height, _)) = self.tip() else {
            return Ok(Some(filters::genesis_prev_header()));
        };
        match self.store.get(cf::FILTERS, &FilterRow::key(height))? {
            Some(bytes) => Ok(Some(FilterRow::decode_header(&bytes)?)),
            None => Err(IndexError::Inconsistent(format!(
                "no filter row at the tip height {height}"
            ))),
        }
    }

    /// Whether every indexed block has its filter (false while a store upgraded from schema 1
    /// is still building them).
    pub fn filters_ready(&self) -> Result<bool, IndexError> {
        Ok(self.filters && self.store.get(cf::META, meta::FILTER_BACKFILL)?.is_none())
    }

    /// Whether this index builds and serves BIP158 filters (`block_filters`).
    pub fn filters_enabled(&self) -> bool {
        self.filters
    }

    /// The filter and filter header of the indexed block at `height`, once filters are ready.
    pub fn filter_at(&self, height: u32) -> Result<Option<FilterRow>, IndexError> {
        if !self.filters_ready()? {
            return Ok(None);
        }
        match self.store.get(cf::FILTERS, &FilterRow::key(height))? {
            Some(bytes) => Ok(Some(FilterRow::decode(&bytes)?)),
            None => Ok(None),
        }
    }

    /// The filter hashes of heights `start..=stop` (for `cfheaders`), hashed in place from the
    /// store: no allocation per block. `None` if filters are not ready or a row is missing.
    pub fn filter_hashes(
        &self,
        start: u32,
        stop: u32,
    ) -> Result<Option<Vec<bitcoin::bip158::FilterHash>>, IndexError> {
        use bitcoin::hashes::Hash;
        if !self.filters_ready()? || start > stop {
            return Ok(None);
        }
        let mut out = Vec::with_capacity((stop - start + 1) as usize);
        for h in start..=stop {
            let hashed = self.store.read_with(cf::FILTERS, &FilterRow::key(h), |v| {
                v.get(32..).map(bitcoin::bip158::FilterHash::hash)
            })?;
            match hashed.flatten() {
                Some(hash) => out.push(hash),
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// Undoes the tip block `hash` at `height`, from its `undo` row, or from the kernel's block
    /// and undo data when the row is gone (pruned once the kernel had the block on disk).
    /// Returns the block as the kernel has it, when it still does (after a crash it may not).
    fn disconnect_tip(
        &self,
        validator: &Validator,
        height: u32,
        hash: BlockHash,
    ) -> Result<Option<(PreparedBlock, Vec<u8>)>, IndexError> {
        if height == 0 {
            return Err(IndexError::Inconsistent(format!(
                "the indexed genesis {hash} is not the kernel's"
            )));
        }
        tracing::info!("undoing block {hash} at height {height} (reorg)");
        let kernel_copy = validator
            .read_block_bytes_by_hash(&hash)
            .and_then(|raw| Ok((validator.read_undo_by_hash(&hash)?, raw)))
            .map_err(IndexError::from)
            .and_then(|(undo, raw)| Ok((prepare(height, &raw, &undo, Extras::default())?, raw)));
        let (range, parent) = self.with_chain(|c| (c.txnums(height), c.hash(height - 1)));
        let (Some(range), Some(parent_hash)) = (range, parent) else {
            return Err(IndexError::Inconsistent(format!(
                "no rows for height {height}"
            )));
        };
        let undo = match (self.store.get(cf::UNDO, &UndoRow::key(height))?, &kernel_copy) {
            (Some(bytes), _) => UndoRow::decode(&bytes)?,
            (None, Ok((block, _))) => writer::undo_row_of(&self.store, block)?,
            (None, Err(e)) => {
                return Err(IndexError::Inconsistent(format!(
                    "block {hash} at height {height} can be undone neither from the index (no undo row) nor by the kernel ({e})"
                )))
            }
        };
        let txids = match &kernel_copy {
            Ok((block, _)) => block.txs.iter().map(|t| t.txid).collect(),
            Err(e) => {
                tracing::warn!("the kernel no longer has block {hash} ({e}); undoing it from the index's own rows");
                self.txids(range.clone())?
            }
        };
        let mut batch = batch::SortedBatch::default();
        let parent = TipRow {
            height: height - 1,
            hash: parent_hash,
        };
        writer::disconnect(
            &mut batch,
            height,
            &txids,
            &undo,
            TxNum(range.start),
            parent,
        )?;
        let counts = BatchCounts {
            connected: 0,
            disconnected: 1,
            txs: 0,
        };
        self.commit(
            batch.into_write_batch(&self.store),
            counts,
            IndexedChain::pop,
        )?;
        Ok(kernel_copy.ok())
    }

    /// The txids of a run of indexed transactions, from their `txs` rows.
    fn txids(&self, range: std::ops::Range<u64>) -> Result<Vec<Txid>, IndexError> {
        range
            .map(|n| {
                let bytes = self.store.get(cf::TXS, &TxRow::key(TxNum(n)))?;
                let bytes = bytes
                    .ok_or_else(|| IndexError::Inconsistent(format!("no txs row for TxNum {n}")))?;
                Ok(TxRow::decode(&bytes)?.txid)
            })
            .collect()
    }

    /// Deletes the `undo` rows up to `height`: the kernel has those blocks on disk and can undo
    /// them itself.
    pub fn prune_undo_through(&self, height: u32) -> Result<(), IndexError> {
        self.store.delete_range(
            cf::UNDO,
            &UndoRow::key(0),
            &UndoRow::key(height.saturating_add(1)),
        )?;
        Ok(())
    }

    /// Every row of the logical index, for comparing two indexes in tests: all column families
    /// but the map of the kernel's block files (`blockpos`, `meta/blkscan`), which depends on
    /// the order blocks reached the kernel, not on the chain, and the `undo` rows and the mark
    /// of a compaction due (`meta/unsettled`), which depend on when the kernel last wrote its
    /// state and on when the process stopped.
    pub fn dump(&self) -> Result<IndexDump, IndexError> {
        let mut out = Vec::new();
        for name in cf::ALL {
            if name == cf::BLOCKPOS || name == cf::UNDO {
                continue;
            }
            let rows: Result<Vec<_>, _> = self
                .store
                .scan_prefix(None, name, &[])
                .filter(|item| {
                    !matches!(item, Ok((k, _)) if name == cf::META
                        && [meta::BLKSCAN, meta::UNSETTLED].contains(&&**k))
                })
                .collect();
            out.push((name, rows?));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::rows::{PreparedOutput, PreparedTx};
    use super::*;
    use bitcoin::hashes::Hash;

    /// A block of `txs` transactions with `outputs` outputs each, every script its own.
    fn block(txs: u32, outputs: u32, seed: u32) -> PreparedBlock {
        let hash = |i: u32, j: u32| {
            let mut bytes = [0u8; 32];
            bytes[..4].copy_from_slice(&seed.to_le_bytes());
            bytes[4..8].copy_from_slice(&i.to_le_bytes());
            bytes[8..12].copy_from_slice(&j.to_le_bytes());
            bytes
        };
        let txs = (0..txs)
            .map(|i| PreparedTx {
                txid: Txid::from_byte_array(hash(i, u32::MAX)),
                offset: 0,
                len: 0,
                outputs: (0..outputs)
                    .map(|j| PreparedOutput {
                        scripthash: ScriptHash(hash(i, j)),
                        value: 1,
                        spendable: true,
                        op_return: false,
                    })
                    .collect(),
                inputs: Vec::new(),
                tweak: None,
            })
            .collect();
        PreparedBlock {
            height: 1,
            header: bitcoin::constants::genesis_block(bitcoin::Network::Regtest).header,
            txs,
            filter: Vec::new(),
        }
    }

    /// The lists grow batch by batch while they stay within the limit, and are given up
    /// before a batch that could take them past it is hashed in, even when its first blocks
    /// would fit.
    #[test]
    fn touched_lists_are_given_up_before_they_pass_the_limit() {
        let mut stats = SyncStats {
            touched: Some(HashSet::new()),
            txids: Some(HashSet::new()),
            ..Default::default()
        };
        stats.touch(&[block(10, 3, 1)]);
        assert_eq!(stats.touched.as_ref().map(HashSet::len), Some(30));
        assert_eq!(stats.txids.as_ref().map(HashSet::len), Some(10));
        // 30 scripts listed; a batch of 3 + 99,969 more would pass 100,000: given up, though
        // its first block fits; the txids (10 + 1 + 33,323) kept.
        stats.touch(&[block(1, 3, 2), block(33_323, 3, 3)]);
        assert_eq!(stats.touched, None);
        assert_eq!(stats.txids.as_ref().map(HashSet::len), Some(33_334));
        stats.touch(&[block(66_667, 1, 4)]);
        assert_eq!(stats.txids, None, "33,334 + 66,667 is past the limit");
    }
}

//! The RocksDB database under the index: column families, atomic durable batches, point and
//! multi reads, prefix scans and consistent snapshots for readers. What the rows mean lives in
//! [`super::schema`].

use std::path::{Path, PathBuf};

use rocksdb::{ColumnFamily, ColumnFamilyDescriptor, Options, WriteBatch, WriteOptions, DB};

use super::schema::{cf, meta, RowError, TipRow, SCHEMA_VERSION, TXID_PREFIX_LEN};

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// RocksDB failed (I/O, corruption, lock held by another process).
    #[error("index store {path}: {message}")]
    Db {
        /// The store's folder.
        path: PathBuf,
        /// RocksDB's message.
        message: String,
    },
    /// The store was written by a newer cairn.
    #[error("index store {path} has schema version {found}, newer than this cairn's {SCHEMA_VERSION}; use a newer cairn or remove the index folder to rebuild it")]
    NewerSchema {
        /// The store's folder.
        path: PathBuf,
        /// Its version.
        found: u32,
    },
    /// The store has no version or a version no migration knows.
    #[error("index store {path}: {message}; remove the index folder to rebuild it")]
    UnknownSchema {
        /// The store's folder.
        path: PathBuf,
        /// What was found.
        message: String,
    },
    /// A row could not be decoded.
    #[error(transparent)]
    Row(#[from] RowError),
}

/// Data block size of the families read by key one row at a time (`txs`, `txid`, `blockpos`):
/// RocksDB's default, so a miss reads and decompresses little.
const POINT_READ_BLOCK: usize = 4 << 10;
/// Data block size of the families read by prefix or range, or seldom (history, unspent
/// outputs, spent-by, filters, headers, undo): larger blocks compress better (zstd finds more in
/// them; 4% less on chain S) and a scan reads them whole anyway.
const SCAN_BLOCK: usize = 16 << 10;
/// The zstd level of files in the last level (RocksDB's default is zstd's 3): 6 makes the index
/// of ten times chain M 5% smaller than 3 does and as small as 9 does, whose compactions took a
/// quarter of a reindex's CPU there (6: 0.82x of 9's CPU; 3: 0.74x).
const ZSTD_LEVEL: i32 = 6;
/// RocksDB's default `window_bits`, passed along with the level (zlib's setting; zstd ignores it).
const ZSTD_WINDOW_BITS: i32 = -14;
/// Bloom filter bits per txid prefix in the `txid` family's files (1% false positives).
const TXID_BLOOM_BITS: f64 = 10.0;
/// The `txid` family's memtable prefix bloom, as a share of the memtable's size.
const TXID_MEMTABLE_BLOOM: f64 = 0.05;

/// A row as the store iterates it: its key and its value.
pub type KeyValue = (Box<[u8]>, Box<[u8]>);

/// The block cache's state, for /metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct CacheStats {
    /// Bytes held.
    pub usage: u64,
    /// Reads it answered.
    pub hits: u64,
    /// Reads that went to the files.
    pub misses: u64,
}

/// The open store.
pub struct Store {
    db: DB,
    path: PathBuf,
    /// The options it was opened with: they hold RocksDB's statistics (block cache hits).
    opts: Options,
    cache: rocksdb::Cache,
    /// Writes skip the write-ahead log (see [`Store::set_bulk_load`]).
    bulk_load: std::sync::atomic::AtomicBool,
}

impl Store {
    /// Opens or creates the RocksDB database in `path` with every column family of the schema,
    /// and a block cache of `cache_bytes` shared by them all: the uncompressed blocks that reads
    /// (history scans, txid lookups) come from before the disk. Also says whether a database
    /// existed there before. Only [`super::Store::open_with_cache`] calls it, which then checks
    /// the schema version.
    pub(super) fn open_db(path: &Path, cache_bytes: usize) -> Result<(Self, bool), StoreError> {
        let cache = rocksdb::Cache::new_lru_cache(cache_bytes);
        let table = |block_size: usize| {
            let mut table = rocksdb::BlockBasedOptions::default();
            table.set_block_cache(&cache);
            table.set_block_size(block_size);
            table
        };
        let (point_reads, scans) = (table(POINT_READ_BLOCK), table(SCAN_BLOCK));
        let mut txids = table(POINT_READ_BLOCK);
        txids.set_bloom_filter(TXID_BLOOM_BITS, false);
        txids.set_whole_key_filtering(false);
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_max_open_files(256);
        opts.set_keep_log_file_num(4);
        opts.increase_parallelism(2);
        // Memtables of all families flush together, so that writes made without the WAL (bulk
        // loading) come back after a crash as of one batch, never some families ahead of others.
        opts.set_atomic_flush(true);
        // Counters only (no timers or histograms): the block cache's hits and misses, for
        // /metrics.
        opts.enable_statistics();
        opts.set_statistics_level(rocksdb::statistics::StatsLevel::ExceptHistogramOrTimers);
        let cfs = cf::ALL.iter().map(|name| {
            let mut o = Options::default();
            // LZ4 where files are rewritten soon; zstd where rows settle, which is nearly all.
            o.set_compression_type(rocksdb::DBCompressionType::Lz4);
            o.set_bottommost_compression_type(rocksdb::DBCompressionType::Zstd);
            o.set_bottommost_compression_options(ZSTD_WINDOW_BITS, ZSTD_LEVEL, 0, 0, true);
            let point_read = [cf::TXS, cf::BLOCKPOS].contains(name);
            if *name == cf::TXID {
                txid_prefix_filters(&mut o, &txids);
            } else {
                o.set_block_based_table_factory(if point_read { &point_reads } else { &scans });
            }
            ColumnFamilyDescriptor::new(*name, o)
        });
        let existed = path.join("CURRENT").exists();
        let db = DB::open_cf_descriptors(&opts, path, cfs).map_err(|e| StoreError::Db {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let store = Store {
            db,
            path: path.to_path_buf(),
            opts,
            cache,
            bulk_load: Default::default(),
        };
        Ok((store, existed))
    }

    /// The store's folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn db_err(&self, e: rocksdb::Error) -> StoreError {
        // A read of an inline job that would have gone to the disk ([`read_options`]).
        if e.kind() == rocksdb::ErrorKind::Incomplete {
            crate::types::refuse_inline();
        }
        StoreError::Db {
            path: self.path.clone(),
            message: e.to_string(),
        }
    }

    /// A column family handle; every name in [`cf::ALL`] exists once the store is open.
    pub fn cf(&self, name: &'static str) -> &ColumnFamily {
        match self.db.cf_handle(name) {
            Some(handle) => handle,
            // open_cf_descriptors created every family in cf::ALL.
            None => unreachable_cf(name),
        }
    }

    /// Reads one value.
    pub fn get(&self, cf: &'static str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.db
            .get_cf_opt(self.cf(cf), key, &read_options())
            .map_err(|e| self.db_err(e))
    }

    /// Reads one value in place (no copy out of RocksDB's block cache) and maps it with `f`.
    pub fn read_with<T>(
        &self,
        cf: &'static str,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, StoreError> {
        let pinned = self
            .db
            .get_pinned_cf_opt(self.cf(cf), key, &read_options())
            .map_err(|e| self.db_err(e))?;
        Ok(pinned.as_deref().map(f))
    }

    /// Writes a batch atomically and durably (synced to the WAL); while bulk loading, atomically
    /// but not durably (durable at the next flush).
    pub fn write(&self, batch: WriteBatch) -> Result<(), StoreError> {
        let mut opts = WriteOptions::default();
        if self.bulk_load.load(std::sync::atomic::Ordering::Relaxed) {
            opts.disable_wal(true);
        } else {
            opts.set_sync(true);
        }
        self.db.write_opt(batch, &opts).map_err(|e| self.db_err(e))
    }

    /// Bulk loading on: batches skip the write-ahead log, so each row is written once (to the
    /// memtable, later its SST file) instead of twice, and nothing waits for a sync. A crash
    /// loses the batches since the last flush, all families alike (atomic flush), and the
    /// index resumes from the older tip it then finds, as after any crash. Off: writes use the
    /// log again and everything written in bulk is flushed, durable once this returns. Every
    /// write in between must be a bulk one (a logged write replayed after a crash without the
    /// unlogged ones before it could be out of order). For `cairn reindex`, and the indexer
    /// thread's catch-ups (`node::runner::BulkLoad`).
    pub fn set_bulk_load(&self, on: bool) -> Result<(), StoreError> {
        self.bulk_load
            .store(on, std::sync::atomic::Ordering::Relaxed);
        if !on {
            self.flush()?;
        }
        Ok(())
    }

    /// Deletes the keys from `from` (included) to `to` (excluded) of a column family, durably,
    /// then compacts that range so the space comes back now rather than at some later compaction.
    pub fn delete_range(&self, cf: &'static str, from: &[u8], to: &[u8]) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(self.cf(cf), from, to);
        self.write(batch)?;
        self.db.compact_range_cf(self.cf(cf), Some(from), Some(to));
        Ok(())
    }

    /// The index tip, if any block is indexed.
    pub fn tip(&self) -> Result<Option<TipRow>, StoreError> {
        match self.get(cf::META, meta::TIP)? {
            Some(bytes) => Ok(Some(TipRow::decode(&bytes)?)),
            None => Ok(None),
        }
    }

    /// The index tip of the store in `path`, read without writing anything there or taking its
    /// lock (for `cairn status` on a stopped node; a `cairn run` may start meanwhile): `None`
    /// where there is no store or no tip. RocksDB's own log of the read goes to the system's
    /// temporary folder.
    pub fn read_tip(path: &Path) -> Result<Option<TipRow>, StoreError> {
        if !path.join("CURRENT").exists() {
            return Ok(None);
        }
        let err = |e: rocksdb::Error| StoreError::Db {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let mut opts = Options::default();
        // A few tables at a time: the tip is one read.
        opts.set_max_open_files(16);
        let logs = private_temp_dir().map_err(|e| StoreError::Db {
            path: path.to_path_buf(),
            message: format!("no temporary folder for RocksDB's log: {e}"),
        })?;
        opts.set_db_log_dir(&logs);
        let read = (|| {
            let families = DB::list_cf(&opts, path).map_err(err)?;
            let db = DB::open_cf_for_read_only(&opts, path, &families, false).map_err(err)?;
            let Some(family) = db.cf_handle(cf::META) else {
                return Ok(None);
            };
            match db.get_cf(family, meta::TIP).map_err(err)? {
                Some(bytes) => Ok(Some(TipRow::decode(&bytes)?)),
                None => Ok(None),
            }
        })();
        let _ = std::fs::remove_dir_all(&logs);
        read
    }

    /// Every key and value of a column family that starts with `prefix`, in key order.
    pub fn scan_prefix<'a>(
        &'a self,
        snapshot: Option<&'a rocksdb::Snapshot<'a>>,
        cf: &'static str,
        prefix: &[u8],
    ) -> impl Iterator<Item = Result<KeyValue, StoreError>> + 'a {
        let mode = rocksdb::IteratorMode::From(prefix, rocksdb::Direction::Forward);
        let prefix = prefix.to_vec();
        let opts = read_options_within(cf, &prefix);
        let iter = match snapshot {
            Some(s) => s.iterator_cf_opt(self.cf(cf), opts, mode),
            None => self.db.iterator_cf_opt(self.cf(cf), opts, mode),
        };
        iter.take_while(move |item| match item {
            Ok((k, _)) => k.starts_with(&prefix),
            Err(_) => true,
        })
        .map(move |item| item.map_err(|e| self.db_err(e)))
    }

    /// Calls `f` with every key and value of a column family that starts with `prefix`, in key
    /// order, without copying them out of RocksDB, until `f` returns `Ok(false)` or an error.
    pub fn for_each_in_prefix<E: From<StoreError>>(
        &self,
        snapshot: &rocksdb::Snapshot<'_>,
        cf: &'static str,
        prefix: &[u8],
        f: impl FnMut(&[u8], &[u8]) -> Result<bool, E>,
    ) -> Result<(), E> {
        self.for_each_from(snapshot, cf, prefix, prefix, f)
    }

    /// As [`Store::for_each_in_prefix`], starting at the first key at or after `start` (a key
    /// under `prefix`).
    pub fn for_each_from<E: From<StoreError>>(
        &self,
        snapshot: &rocksdb::Snapshot<'_>,
        cf: &'static str,
        prefix: &[u8],
        start: &[u8],
        f: impl FnMut(&[u8], &[u8]) -> Result<bool, E>,
    ) -> Result<(), E> {
        self.walk(snapshot, cf, prefix, start, false, f)
    }

    /// As [`Store::for_each_from`], backwards: from the last key at or before `start` down, while
    /// the keys are under `prefix` and `f` returns `true`.
    pub fn for_each_back_from<E: From<StoreError>>(
        &self,
        snapshot: &rocksdb::Snapshot<'_>,
        cf: &'static str,
        prefix: &[u8],
        start: &[u8],
        f: impl FnMut(&[u8], &[u8]) -> Result<bool, E>,
    ) -> Result<(), E> {
        self.walk(snapshot, cf, prefix, start, true, f)
    }

    /// Visits the keys under `prefix` from `start` on, forwards or `backwards`, while `f`
    /// returns `true` (seeking by prefix where [`read_options_within`] says, if `start` lies
    /// under `prefix`).
    fn walk<E: From<StoreError>>(
        &self,
        snapshot: &rocksdb::Snapshot<'_>,
        cf: &'static str,
        prefix: &[u8],
        start: &[u8],
        backwards: bool,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, E>,
    ) -> Result<(), E> {
        let mut opts = match start.starts_with(prefix) {
            true => read_options_within(cf, prefix),
            false => read_options(),
        };
        opts.set_snapshot(snapshot);
        let mut iter = self.db.raw_iterator_cf_opt(self.cf(cf), opts);
        match backwards {
            true => iter.seek_for_prev(start),
            false => iter.seek(start),
        }
        while let (Some(key), Some(value)) = (iter.key(), iter.value()) {
            if !key.starts_with(prefix) || !f(key, value)? {
                return Ok(());
            }
            match backwards {
                true => iter.prev(),
                false => iter.next(),
            }
        }
        Ok(iter.status().map_err(|e| self.db_err(e))?)
    }

    /// One iterator over the `txid` family as it is now, sought again for each txid prefix asked
    /// of it: many lookups in a row without creating an iterator each (each creation takes a
    /// reference to every memtable and file of the family). It sees no write made after it was
    /// created. Its seeks stay within the prefix sought, so a file or memtable whose prefix bloom
    /// filter does not hold the prefix is passed over unread (see [`txid_prefix_filters`]).
    pub fn txid_cursor(&self) -> TxidCursor<'_> {
        TxidCursor {
            iter: self
                .db
                .raw_iterator_cf_opt(self.cf(cf::TXID), prefix_read_options()),
            store: self,
        }
    }

    /// A consistent view for readers: what one request sees does not change under it.
    pub fn snapshot(&self) -> rocksdb::Snapshot<'_> {
        self.db.snapshot()
    }

    /// Reads one value from a snapshot.
    pub fn get_at(
        &self,
        snapshot: &rocksdb::Snapshot<'_>,
        cf: &'static str,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        snapshot
            .get_cf_opt(self.cf(cf), key, read_options())
            .map_err(|e| self.db_err(e))
    }

    /// Reads one value from a snapshot in place (no copy out of RocksDB's block cache) and maps
    /// it with `f`.
    pub fn read_at_with<T>(
        &self,
        snapshot: &rocksdb::Snapshot<'_>,
        cf: &'static str,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, StoreError> {
        let pinned = snapshot
            .get_pinned_cf_opt(self.cf(cf), key, read_options())
            .map_err(|e| self.db_err(e))?;
        Ok(pinned.as_deref().map(f))
    }

    /// Reads many values of one column family from a snapshot in one RocksDB `MultiGet` (much
    /// cheaper than one `get` each), mapping each found value in place with `f`. `sorted` says
    /// the keys are in ascending order already. With `fill_cache` false, blocks read from the
    /// files are not kept in the block cache (the rest of a long history's reads, which would
    /// otherwise push out what every small request keeps warm there).
    pub fn multi_read_at<K: AsRef<[u8]>, T>(
        &self,
        snapshot: &rocksdb::Snapshot<'_>,
        cf: &'static str,
        keys: &[K],
        sorted: bool,
        fill_cache: bool,
        mut f: impl FnMut(&[u8]) -> T,
    ) -> Result<Vec<Option<T>>, StoreError> {
        // RocksDB's batched MultiGet reads a data block missing from the cache from its file
        // whatever the read tier: an inline job reads its keys one by one, each from memory.
        if crate::types::inline() {
            let family = self.cf(cf);
            return keys
                .iter()
                .map(|key| {
                    let found = snapshot.get_pinned_cf_opt(family, key, read_options());
                    let found = found.map_err(|e| self.db_err(e))?;
                    Ok(found.as_deref().map(&mut f))
                })
                .collect();
        }
        let mut opts = read_options();
        opts.set_snapshot(snapshot);
        opts.fill_cache(fill_cache);
        self.db
            .batched_multi_get_cf_opt(self.cf(cf), keys.iter().map(|k| k.as_ref()), sorted, &opts)
            .into_iter()
            .map(|r| {
                r.map(|v| v.as_deref().map(&mut f))
                    .map_err(|e| self.db_err(e))
            })
            .collect()
    }

    /// Approximate bytes on disk of every column family (SST files), for size reports.
    pub fn disk_bytes(&self) -> Vec<(&'static str, u64)> {
        cf::ALL
            .iter()
            .map(|name| {
                let size = self
                    .db
                    .property_int_value_cf(self.cf(name), "rocksdb.total-sst-files-size")
                    .ok()
                    .flatten()
                    .unwrap_or(0);
                (*name, size)
            })
            .collect()
    }

    /// The block cache: bytes held, and reads it answered and missed since the store opened.
    pub fn cache_stats(&self) -> CacheStats {
        use rocksdb::statistics::Ticker;
        CacheStats {
            usage: self.cache.get_usage() as u64,
            hits: self.opts.get_ticker_count(Ticker::BlockCacheHit),
            misses: self.opts.get_ticker_count(Ticker::BlockCacheMiss),
        }
    }

    /// Writes a consistent copy of the store into `dir`, which must not exist (RocksDB's
    /// checkpoint): the memtables flushed first, the table files hard-linked where `dir` is on
    /// the same file system, the rest copied.
    pub fn checkpoint(&self, dir: &Path) -> Result<(), StoreError> {
        let checkpoint =
            rocksdb::checkpoint::Checkpoint::new(&self.db).map_err(|e| self.db_err(e))?;
        checkpoint
            .create_checkpoint(dir)
            .map_err(|e| self.db_err(e))
    }

    /// Flushes every family's memtable to SST files, all in one atomic step (size figures are
    /// real afterwards; rows written in bulk are durable).
    pub fn flush(&self) -> Result<(), StoreError> {
        let families: Vec<&ColumnFamily> = cf::ALL.iter().map(|name| self.cf(name)).collect();
        self.db
            .flush_cfs_opt(&families, &rocksdb::FlushOptions::default())
            .map_err(|e| self.db_err(e))
    }

    /// Compacts every column family into its last level, rewriting even files already there
    /// (so each is compressed as that level says; for size measurements).
    pub fn compact(&self) {
        for name in cf::ALL {
            self.compact_family(name);
        }
    }

    /// Compacts one column family whole, as [`Store::compact`] does each.
    pub fn compact_family(&self, name: &'static str) {
        let mut opts = rocksdb::CompactOptions::default();
        opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Force);
        self.db
            .compact_range_cf_opt::<&[u8], &[u8]>(self.cf(name), None, None, &opts);
    }
}

/// How a read of the query side reads: from memory only (RocksDB's memtables and block cache,
/// failing with `Incomplete` where it would read a file) while an inline job runs on this
/// thread ([`crate::types::try_inline`]), from anywhere otherwise.
fn read_options() -> rocksdb::ReadOptions {
    let mut opts = rocksdb::ReadOptions::default();
    // Every iterator in key order across prefixes (the `txid` family has a prefix extractor,
    // under which an iterator would otherwise see only the prefix it was sought to), unless
    // [`read_options_within`] keeps it to one prefix.
    opts.set_total_order_seek(true);
    if crate::types::inline() {
        opts.set_read_tier(rocksdb::ReadTier::BlockCache);
    }
    opts
}

/// [`read_options`] for an iterator that stays under `prefix` in family `cf`: in the `txid`
/// family, with a whole txid prefix, it seeks by prefix, so it passes over every file and
/// memtable whose prefix bloom filter does not hold the prefix (a total-order seek reads them
/// all).
fn read_options_within(cf: &'static str, prefix: &[u8]) -> rocksdb::ReadOptions {
    match cf == cf::TXID && prefix.len() >= TXID_PREFIX_LEN {
        true => prefix_read_options(),
        false => read_options(),
    }
}

/// [`read_options`] seeking by the family's prefix extractor: an iterator that stays within
/// the prefix it was sought to.
fn prefix_read_options() -> rocksdb::ReadOptions {
    let mut opts = read_options();
    opts.set_total_order_seek(false);
    opts.set_prefix_same_as_start(true);
    opts
}

/// The `txid` family's options: rows are found by their 8-byte txid prefix (every input of a
/// block being indexed looks its spent transaction up), so its files carry bloom filters of
/// those prefixes and its memtable one too, and a lookup passes over each file and memtable
/// that does not hold the prefix instead of seeking in it (a quarter of a reindex's CPU at ten
/// times chain M went to those seeks, most of them in level-0 files during the initial sync).
/// No filter in the last level, where nearly all rows settle and a lookup (of a transaction
/// that exists) ends anyway: the filters (1.25 bytes a prefix, held in memory beside the block
/// cache, not in it) cover only the files above it, about a tenth of the rows once compactions
/// settle. An iterator that keeps to one txid prefix seeks by it ([`read_options_within`]).
fn txid_prefix_filters(o: &mut Options, table: &rocksdb::BlockBasedOptions) {
    o.set_prefix_extractor(rocksdb::SliceTransform::create_fixed_prefix(
        TXID_PREFIX_LEN,
    ));
    o.set_memtable_prefix_bloom_ratio(TXID_MEMTABLE_BLOOM);
    o.set_optimize_filters_for_hits(true);
    o.set_block_based_table_factory(table);
}

#[cold]
fn unreachable_cf(name: &str) -> ! {
    panic!("column family {name} missing although the store opened with it")
}

/// An iterator over the `txid` family kept for many prefix lookups ([`Store::txid_cursor`]).
pub struct TxidCursor<'a> {
    iter: rocksdb::DBRawIteratorWithThreadMode<'a, DB>,
    store: &'a Store,
}

impl TxidCursor<'_> {
    /// Calls `f` with every key that starts with `prefix` (a txid's), in key order, until `f`
    /// returns `Ok(false)` or an error.
    pub fn keys_with_prefix<E: From<StoreError>>(
        &mut self,
        prefix: &[u8; TXID_PREFIX_LEN],
        mut f: impl FnMut(&[u8]) -> Result<bool, E>,
    ) -> Result<(), E> {
        self.iter.seek(prefix);
        while let Some(key) = self.iter.key() {
            if !key.starts_with(prefix) || !f(key)? {
                return Ok(());
            }
            self.iter.next();
        }
        Ok(self.iter.status().map_err(|e| self.store.db_err(e))?)
    }
}

/// A new folder of this user's only, under the system's temporary folder, with a name nobody
/// can guess beforehand.
fn private_temp_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    loop {
        let name = format!(
            "cairn-status-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        );
        let dir = std::env::temp_dir().join(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::try_inline;

    /// A row flushed to a table file, in a store opened again (its block cache empty).
    fn store_with_a_row_on_disk(dir: &Path) -> Store {
        {
            let store = Store::open(dir).unwrap();
            let mut batch = WriteBatch::default();
            batch.put_cf(store.cf(cf::TXS), b"on disk", b"row");
            store.write(batch).unwrap();
            store.flush().unwrap();
        }
        Store::open(dir).unwrap()
    }

    /// The row as read the `kind`th way: a point read, from a snapshot, a multi-get, a walk.
    fn read(store: &Store, kind: usize) -> Option<Vec<u8>> {
        let snapshot = store.snapshot();
        let key: &[u8] = b"on disk";
        match kind {
            0 => store.get(cf::TXS, key).ok().flatten(),
            1 => store.get_at(&snapshot, cf::TXS, key).ok().flatten(),
            2 => {
                let read =
                    store.multi_read_at(&snapshot, cf::TXS, &[key], true, true, <[u8]>::to_vec);
                read.ok().and_then(|mut found| found.pop().flatten())
            }
            _ => {
                let mut found = None;
                let walk = store.for_each_in_prefix(&snapshot, cf::TXS, b"on", |_, value| {
                    found = Some(value.to_vec());
                    Ok::<_, StoreError>(false)
                });
                walk.ok().and(found)
            }
        }
    }

    /// Seeks of table files that a prefix filter answered with "not here", so far.
    fn seeks_filtered(store: &Store) -> u64 {
        use rocksdb::statistics::Ticker;
        [
            Ticker::NonLastLevelSeekFiltered,
            Ticker::LastLevelSeekFiltered,
        ]
        .into_iter()
        .map(|ticker| store.opts.get_ticker_count(ticker))
        .sum()
    }

    /// A `txid` key: an 8-byte prefix and a 5-byte TxNum.
    fn txid_key(prefix: u64, txnum: u8) -> Vec<u8> {
        let mut key = prefix.to_be_bytes().to_vec();
        key.extend_from_slice(&[0, 0, 0, 0, txnum]);
        key
    }

    #[test]
    fn txid_rows_are_found_by_prefix_and_walked_in_order_across_files() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        // Three files (each with its prefix bloom filter) and the memtable, a prefix in three
        // of them: rows of 0xaaaa_0001 and 0xaaaa_0002 apart, 0xaaaa_0003 in the
        // memtable only, beside more of 0xaaaa_0001 and 0xbbbb_0001.
        let files: [&[(u64, u8)]; 4] = [
            &[(0xaaaa_0001, 1), (0xbbbb_0001, 2)],
            &[(0xaaaa_0002, 3), (0xcccc_0001, 4)],
            &[(0xaaaa_0001, 5)],
            &[(0xaaaa_0003, 6), (0xbbbb_0001, 7), (0xaaaa_0001, 8)],
        ];
        let mut all = Vec::new();
        for (i, rows) in files.iter().enumerate() {
            let mut batch = WriteBatch::default();
            for &(prefix, txnum) in rows.iter() {
                batch.put_cf(store.cf(cf::TXID), txid_key(prefix, txnum), []);
                all.push(txid_key(prefix, txnum));
            }
            store.write(batch).unwrap();
            if i < 3 {
                store.flush().unwrap();
            }
        }
        all.sort();
        // By prefix, one cursor for every lookup, present or not.
        let mut cursor = store.txid_cursor();
        for prefix in [
            0xaaaa_0001u64,
            0xdddd_0001,
            0xaaaa_0003,
            0xaaaa_0002,
            0xbbbb_0001,
        ] {
            let mut found = Vec::new();
            cursor
                .keys_with_prefix(&prefix.to_be_bytes(), |key| {
                    found.push(key.to_vec());
                    Ok::<_, StoreError>(true)
                })
                .unwrap();
            let expected = all
                .iter()
                .filter(|k| k[..8] == prefix.to_be_bytes())
                .cloned();
            let expected: Vec<_> = expected.collect();
            assert_eq!(found, expected, "prefix {prefix:x}");
            // The same by the other walks of a whole txid prefix, which seek by prefix too: for
            // a prefix no file holds, the files' prefix filters pass them over (a total-order
            // seek never asks a filter).
            let filtered_before = seeks_filtered(&store);
            let scanned = store.scan_prefix(None, cf::TXID, &prefix.to_be_bytes());
            let scanned: Vec<_> = scanned.map(|r| r.unwrap().0.to_vec()).collect();
            assert_eq!(scanned, expected, "scan of prefix {prefix:x}");
            if prefix == 0xdddd_0001 {
                assert!(seeks_filtered(&store) > filtered_before);
            }
            let mut walked = Vec::new();
            let snapshot = store.snapshot();
            let walk =
                store.for_each_in_prefix(&snapshot, cf::TXID, &prefix.to_be_bytes(), |k, _| {
                    walked.push(k.to_vec());
                    Ok::<_, StoreError>(true)
                });
            walk.unwrap();
            assert_eq!(walked, expected, "walk of prefix {prefix:x}");
        }
        // In key order across prefixes: from the first row, and from a row under a shorter
        // prefix than the filters' (the walk must not stop at the file that held its start).
        let every = store
            .scan_prefix(None, cf::TXID, &[])
            .map(|r| r.unwrap().0.to_vec());
        assert_eq!(every.collect::<Vec<_>>(), all);
        let snapshot = store.snapshot();
        let mut walked = Vec::new();
        let start = txid_key(0xaaaa_0001, 0);
        let walk = store.for_each_from(
            &snapshot,
            cf::TXID,
            &[0, 0, 0, 0, 0xaa, 0xaa],
            &start,
            |k, _| {
                walked.push(k.to_vec());
                Ok::<_, StoreError>(true)
            },
        );
        walk.unwrap();
        assert_eq!(walked, all[..5].to_vec());
    }

    #[test]
    fn a_read_told_not_to_fill_the_cache_leaves_it_as_it_was() {
        let tmp = tempfile::tempdir().unwrap();
        let keys: Vec<[u8; 8]> = (0..20_000u64).map(|i| (i * 7919).to_be_bytes()).collect();
        {
            let store = Store::open(tmp.path()).unwrap();
            let mut batch = WriteBatch::default();
            for key in &keys {
                batch.put_cf(store.cf(cf::TXS), key, [7u8; 40]);
            }
            store.write(batch).unwrap();
            store.flush().unwrap();
        }
        let mut sorted = keys.clone();
        sorted.sort();
        let store = Store::open(tmp.path()).unwrap();
        let snapshot = store.snapshot();
        let read = |fill| {
            let found = store.multi_read_at(&snapshot, cf::TXS, &sorted, true, fill, |v| v.len());
            assert!(found.unwrap().iter().all(|v| *v == Some(40)));
            store.cache_stats().usage
        };
        let before = store.cache_stats().usage;
        let passed_through = read(false);
        let kept = read(true);
        // 800 KB of rows: a few hundred 4 KiB blocks kept when filling, none when not.
        assert!(
            passed_through - before < 64 << 10,
            "{before} -> {passed_through}"
        );
        assert!(
            kept - passed_through > 512 << 10,
            "{passed_through} -> {kept}"
        );
    }

    #[test]
    fn an_inline_read_takes_only_what_memory_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let row = Some(b"row".to_vec());
        for kind in 0..4 {
            let store = store_with_a_row_on_disk(&tmp.path().join(kind.to_string()));
            // Cold: refused inline (whatever the read made of the failure), read from the file
            // otherwise; then from the block cache, inline too.
            assert_eq!(try_inline(10, || read(&store, kind)), None, "read {kind}");
            assert_eq!(read(&store, kind), row, "read {kind}");
            let cached = try_inline(10, || read(&store, kind));
            assert_eq!(cached, Some(row.clone()), "read {kind} from the cache");
        }
    }
}

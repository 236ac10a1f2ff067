//! The store's schema version and the upgrades between versions. Each version's layout and each
//! change is written down in `migrations/` at the top of the repository.

use rocksdb::WriteBatch;

use super::db::{Store, StoreError};
use super::schema::{cf, meta, BlockRow, BlockTweaks, TweakRow, SCHEMA_VERSION};

/// Reads the stored version: stamps a new store, upgrades an older one step by step, refuses a
/// newer or unknown one.
pub fn check_and_upgrade(store: &Store, existed: bool) -> Result<(), StoreError> {
    let found = store.get(cf::META, meta::VERSION)?;
    let version = match found {
        None if !existed || store_is_empty(store)? => {
            let mut batch = WriteBatch::default();
            batch.put_cf(
                store.cf(cf::META),
                meta::VERSION,
                SCHEMA_VERSION.to_le_bytes(),
            );
            store.write(batch)?;
            return Ok(());
        }
        None => {
            return Err(StoreError::UnknownSchema {
                path: store.path().to_path_buf(),
                message: "it holds data but no schema version (not written by cairn?)".into(),
            })
        }
        Some(bytes) => {
            let b: [u8; 4] =
                bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| StoreError::UnknownSchema {
                        path: store.path().to_path_buf(),
                        message: format!("its schema version is {} bytes long", bytes.len()),
                    })?;
            u32::from_le_bytes(b)
        }
    };
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: store.path().to_path_buf(),
            found: version,
        });
    }
    if version == 0 {
        return Err(StoreError::UnknownSchema {
            path: store.path().to_path_buf(),
            message: "schema version 0 does not exist".into(),
        });
    }
    // One step per version, each one atomic batch that also writes the version it reaches.
    let mut version = version;
    while version < SCHEMA_VERSION {
        let mut batch = WriteBatch::default();
        match version {
            4 => v4_to_v5(store, &mut batch),
            1 => v1_to_v2(store, &mut batch),
            // Version 3 adds the `undo` family (created on open); blocks indexed before have no
            // rows there, and need none: the older cairn stopped cleanly, so the kernel has them
            // on disk (`migrations/v3.md`).
            2 => {}
            3 => v3_to_v4(store, &mut batch),
            other => {
                return Err(StoreError::UnknownSchema {
                    path: store.path().to_path_buf(),
                    message: format!("no upgrade from schema version {other}"),
                })
            }
        }
        version += 1;
        batch.put_cf(store.cf(cf::META), meta::VERSION, version.to_le_bytes());
        store.write(batch)?;
        tracing::info!("index store upgraded to schema version {version}");
    }
    if store.get(cf::META, meta::TWEAKS_V4_LEFT)?.is_some() {
        rewrite_v4_tweaks(store, V4_REWRITE_BATCH_ROWS)?;
    }
    Ok(())
}

/// Version 2 adds BIP158 filters (`filters` column family, created on open). The blocks indexed
/// under version 1 have none: mark them to be built from height 0; the indexer builds them from
/// the kernel's data before it indexes new blocks (`migrations/v2.md`).
fn v1_to_v2(store: &Store, batch: &mut WriteBatch) {
    batch.put_cf(
        store.cf(cf::META),
        meta::FILTER_BACKFILL,
        0u32.to_le_bytes(),
    );
}

/// Version 4 adds silent-payment tweaks (`tweaks` column family, created on open), off by
/// default. The blocks indexed under version 3 have none: mark them off, so that turning silent
/// payments on builds them all (`migrations/v4.md`).
fn v3_to_v4(store: &Store, batch: &mut WriteBatch) {
    batch.put_cf(store.cf(cf::META), meta::TWEAKS_OFF, []);
}

/// Version 5 keeps a block's silent-payment tweaks in one `tweaks` row keyed by its height
/// instead of a row per transaction keyed by TxNum (`migrations/v5.md`). Too many rows for one
/// batch on mainnet: the version is written at once with a marker that rows of version 4 are
/// left ([`rewrite_v4_tweaks`], run on every open while the marker is there), so that a cairn of
/// version 4 never opens a store holding rows it cannot read.
fn v4_to_v5(store: &Store, batch: &mut WriteBatch) {
    batch.put_cf(store.cf(cf::META), meta::TWEAKS_V4_LEFT, []);
}

/// Version-4 tweak rows rewritten per batch (about 10 MB).
const V4_REWRITE_BATCH_ROWS: usize = 100_000;

/// Rewrites the `tweaks` rows of version 4 (5-byte TxNum keys) block by block as rows of
/// version 5 (4-byte height keys), in batches of about `batch_rows` rows that each delete what
/// they rewrote and hold only whole blocks, so a crash resumes with what is left; the last
/// deletes [`meta::TWEAKS_V4_LEFT`]. A row whose TxNum is in no indexed block is dropped.
pub(crate) fn rewrite_v4_tweaks(store: &Store, batch_rows: usize) -> Result<(), StoreError> {
    let _span = tracing::info_span!("tweak_rows_v5").entered();
    let blocks = indexed_blocks(store)?;
    let mut rewriter = V5Rewriter::new(store, batch_rows);
    for item in store.scan_prefix(None, cf::TWEAKS, &[]) {
        let (key, value) = item?;
        if key.len() == BlockTweaks::key(0).len() {
            continue; // a block rewritten before a crash
        }
        // Any other length than a TxNum's is an error.
        let txnum = TweakRow::decode_v4_key(&key)?.0;
        // The block holding it: the last whose first TxNum is at most its own.
        let block = blocks.partition_point(|b| b.first <= txnum);
        let owner = block
            .checked_sub(1)
            .map(|i| blocks[i])
            .filter(|b| txnum < b.first + u64::from(b.count));
        rewriter.take(owner, txnum, &key, TweakRow::decode_v4(&value)?)?;
    }
    rewriter.finish()?;
    // The deleted rows' tombstones, gone now rather than at some later compaction.
    store.compact_family(cf::TWEAKS);
    Ok(())
}

/// An indexed block's height and TxNums.
#[derive(Debug, Clone, Copy)]
struct IndexedBlock {
    height: u32,
    first: u64,
    count: u32,
}

/// Every indexed block, in height order.
fn indexed_blocks(store: &Store) -> Result<Vec<IndexedBlock>, StoreError> {
    let mut blocks = Vec::new();
    for item in store.scan_prefix(None, cf::BLOCKS, &[]) {
        let (key, value) = item?;
        let row = BlockRow::decode(&value)?;
        blocks.push(IndexedBlock {
            height: BlockRow::decode_key(&key)?,
            first: row.first_txnum.0,
            count: row.tx_count,
        });
    }
    Ok(blocks)
}

/// Gathers version-4 tweak rows block by block into version-5 rows, writing a batch once it
/// holds `batch_rows` rows, at a block's end.
struct V5Rewriter<'a> {
    store: &'a Store,
    batch_rows: usize,
    batch: WriteBatch,
    rows_in_batch: usize,
    rows_done: usize,
    /// The block being gathered, and its rows by position.
    block: Option<(IndexedBlock, Vec<(u32, TweakRow)>)>,
}

impl<'a> V5Rewriter<'a> {
    fn new(store: &'a Store, batch_rows: usize) -> Self {
        V5Rewriter {
            store,
            batch_rows,
            batch: WriteBatch::default(),
            rows_in_batch: 0,
            rows_done: 0,
            block: None,
        }
    }

    /// Takes the version-4 row `key` of `txnum`, of the block `owner` (dropped without one).
    fn take(
        &mut self,
        owner: Option<IndexedBlock>,
        txnum: u64,
        key: &[u8],
        row: TweakRow,
    ) -> Result<(), StoreError> {
        // The block before ends first: the batch it may write must not delete this row.
        let same = |b: &IndexedBlock| owner.is_some_and(|o| o.height == b.height);
        if self.block.as_ref().is_some_and(|(b, _)| !same(b)) || owner.is_none() {
            self.end_block()?;
        }
        self.batch.delete_cf(self.store.cf(cf::TWEAKS), key);
        self.rows_in_batch += 1;
        let Some(owner) = owner else {
            return Ok(());
        };
        let (_, rows) = self.block.get_or_insert_with(|| (owner, Vec::new()));
        rows.push(((txnum - owner.first) as u32, row));
        Ok(())
    }

    /// Puts the gathered block's row in the batch, and writes the batch once it is full.
    fn end_block(&mut self) -> Result<(), StoreError> {
        if let Some((block, rows)) = self.block.take() {
            let value = BlockTweaks::encode(rows.iter().map(|(p, r)| (*p, r)));
            let family = self.store.cf(cf::TWEAKS);
            self.batch
                .put_cf(family, BlockTweaks::key(block.height), value);
        }
        if self.rows_in_batch >= self.batch_rows {
            self.store.write(std::mem::take(&mut self.batch))?;
            self.rows_done += std::mem::take(&mut self.rows_in_batch);
            tracing::info!("{} tweak rows rewritten a row per block", self.rows_done);
        }
        Ok(())
    }

    /// Writes what is left with the marker's deletion.
    fn finish(mut self) -> Result<(), StoreError> {
        self.end_block()?;
        self.batch
            .delete_cf(self.store.cf(cf::META), meta::TWEAKS_V4_LEFT);
        self.store.write(self.batch)
    }
}

fn store_is_empty(store: &Store) -> Result<bool, StoreError> {
    for name in cf::ALL {
        if let Some(item) = store.scan_prefix(None, name, &[]).next() {
            item?;
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_store_is_stamped_and_newer_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let store = Store::open(tmp.path()).unwrap();
            assert_eq!(
                store.get(cf::META, meta::VERSION).unwrap().unwrap(),
                SCHEMA_VERSION.to_le_bytes()
            );
            let mut batch = WriteBatch::default();
            batch.put_cf(store.cf(cf::META), meta::VERSION, 99u32.to_le_bytes());
            store.write(batch).unwrap();
        }
        let err = Store::open(tmp.path()).err().unwrap().to_string();
        assert!(err.contains("schema version 99"), "{err}");
    }

    /// Version-4 tweak rows rewritten a row per block, in batches of three rows: whole blocks
    /// per batch, a block rewritten before (a crash) kept, a row of no block dropped, the marker
    /// gone at the end; again, nothing changes; a key of neither length is an error.
    #[test]
    fn version_4_tweak_rows_are_rewritten_a_row_per_block() {
        use crate::store::schema::{BlockRow, BlockTweaks, TweakRow};
        use crate::types::TxNum;
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let header = bitcoin::constants::genesis_block(bitcoin::Network::Regtest).header;
        let row = |seed: u8| TweakRow {
            tweak: [seed; 33],
            outputs: vec![(seed as u32, [seed; 32], 1_000 * seed as u64)],
        };
        let mut batch = WriteBatch::default();
        // Heights 0 to 4: coinbase only, then 4, 3, 5 and 2 transactions.
        for (height, first, count) in [
            (0u32, 0u64, 1u32),
            (1, 1, 4),
            (2, 5, 3),
            (3, 8, 5),
            (4, 13, 2),
        ] {
            let block = BlockRow {
                header,
                first_txnum: TxNum(first),
                tx_count: count,
            };
            batch.put_cf(store.cf(cf::BLOCKS), BlockRow::key(height), block.encode());
        }
        for txnum in [2u64, 3, 4, 6, 9, 10, 11, 12, 40] {
            let v4 = row(txnum as u8).encode_v4();
            batch.put_cf(store.cf(cf::TWEAKS), TweakRow::v4_key(TxNum(txnum)), v4);
        }
        let done = BlockTweaks::encode([(1, &row(14))]);
        batch.put_cf(store.cf(cf::TWEAKS), BlockTweaks::key(4), &done);
        batch.put_cf(store.cf(cf::META), meta::TWEAKS_V4_LEFT, []);
        store.write(batch).unwrap();

        let rows = |store: &Store| -> Vec<(Vec<u8>, Vec<u8>)> {
            let found = store.scan_prefix(None, cf::TWEAKS, &[]).map(Result::unwrap);
            found.map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
        };
        let block = |positions: &[(u32, u8)]| {
            let rows: Vec<(u32, TweakRow)> = positions.iter().map(|(p, s)| (*p, row(*s))).collect();
            BlockTweaks::encode(rows.iter().map(|(p, r)| (*p, r)))
        };
        let want = vec![
            (
                BlockTweaks::key(1).to_vec(),
                block(&[(1, 2), (2, 3), (3, 4)]),
            ),
            (BlockTweaks::key(2).to_vec(), block(&[(1, 6)])),
            (
                BlockTweaks::key(3).to_vec(),
                block(&[(1, 9), (2, 10), (3, 11), (4, 12)]),
            ),
            (BlockTweaks::key(4).to_vec(), done.clone()),
        ];
        rewrite_v4_tweaks(&store, 3).unwrap();
        assert_eq!(rows(&store), want);
        assert!(store.get(cf::META, meta::TWEAKS_V4_LEFT).unwrap().is_none());
        rewrite_v4_tweaks(&store, 3).unwrap();
        assert_eq!(rows(&store), want, "nothing left to rewrite");

        let mut batch = WriteBatch::default();
        batch.put_cf(store.cf(cf::TWEAKS), [0u8; 3], []);
        store.write(batch).unwrap();
        let err = rewrite_v4_tweaks(&store, 3).unwrap_err().to_string();
        assert!(err.contains("key is 3 bytes"), "{err}");
    }

    #[test]
    fn data_without_version_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let store = Store::open(tmp.path()).unwrap();
            let mut batch = WriteBatch::default();
            batch.delete_cf(store.cf(cf::META), meta::VERSION);
            batch.put_cf(store.cf(cf::TXS), b"x", b"y");
            store.write(batch).unwrap();
        }
        let err = Store::open(tmp.path()).err().unwrap().to_string();
        assert!(err.contains("no schema version"), "{err}");
    }
}

//! The store's schema version and the upgrades between versions. Each version's layout and each
//! change is written down in `migrations/` at the top of the repository.

use rocksdb::WriteBatch;

use super::db::{Store, StoreError};
use super::schema::{cf, meta, BlockRow, BlockTweaks, TweakRow, SCHEMA_VERSION};
use crate::types::TXNUM_LEN;

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
            // Too large for one batch on mainnet: rewritten in batches first (a crash resumes with
            // the rows not yet rewritten), then the version alone.
            4 => v4_to_v5(store)?,
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
/// instead of a row per transaction keyed by TxNum (`migrations/v5.md`): the version-4 rows are
/// rewritten block by block, in batches that each delete the rows they rewrote, so a crash
/// resumes with what is left. The two kinds of key differ in length (4 and 5 bytes).
fn v4_to_v5(store: &Store) -> Result<(), StoreError> {
    let firsts = first_txnums(store)?;
    let mut converter = V5Converter::new(store);
    for item in store.scan_prefix(None, cf::TWEAKS, &[]) {
        let (key, value) = item?;
        if key.len() != TXNUM_LEN {
            continue; // a block rewritten before a crash
        }
        let txnum = TweakRow::decode_v4_key(&key)?.0;
        // The block holding it: the last whose first TxNum is at most its own.
        let block = firsts.partition_point(|(_, first, _)| *first <= txnum);
        let owner = block
            .checked_sub(1)
            .map(|i| firsts[i])
            .filter(|(_, first, count)| txnum < first + u64::from(*count));
        // A row of no indexed block (none should exist: undone blocks take theirs) is dropped.
        converter.take(owner, txnum, &key, TweakRow::decode_v4(&value)?)?;
    }
    converter.finish()
}

/// Every indexed block's height, first TxNum and transaction count, in height order.
fn first_txnums(store: &Store) -> Result<Vec<(u32, u64, u32)>, StoreError> {
    let mut firsts = Vec::new();
    for item in store.scan_prefix(None, cf::BLOCKS, &[]) {
        let (key, value) = item?;
        let row = BlockRow::decode(&value)?;
        firsts.push((BlockRow::decode_key(&key)?, row.first_txnum.0, row.tx_count));
    }
    Ok(firsts)
}

/// Gathers version-4 tweak rows block by block into version-5 rows, writing a batch every
/// [`V5Converter::BATCH_ROWS`] rows at a block's end.
struct V5Converter<'a> {
    store: &'a Store,
    batch: WriteBatch,
    rows_in_batch: usize,
    /// The block being gathered: height, first TxNum, and its rows by position.
    block: Option<(u32, u64, Vec<(u32, TweakRow)>)>,
}

impl<'a> V5Converter<'a> {
    /// About 10 MB of rows per batch.
    const BATCH_ROWS: usize = 100_000;

    fn new(store: &'a Store) -> Self {
        V5Converter {
            store,
            batch: WriteBatch::default(),
            rows_in_batch: 0,
            block: None,
        }
    }

    /// Takes the version-4 row `key` of `txnum`, in the block `owner` (height, first TxNum,
    /// count), or dropped without one.
    fn take(
        &mut self,
        owner: Option<(u32, u64, u32)>,
        txnum: u64,
        key: &[u8],
        row: TweakRow,
    ) -> Result<(), StoreError> {
        // The block before ends first: the batch it may write must not delete this row.
        if self
            .block
            .as_ref()
            .is_some_and(|(h, _, _)| Some(*h) != owner.map(|o| o.0))
        {
            self.end_block()?;
        }
        self.batch.delete_cf(self.store.cf(cf::TWEAKS), key);
        self.rows_in_batch += 1;
        let Some((height, first, _)) = owner else {
            return Ok(());
        };
        let (_, _, rows) = self
            .block
            .get_or_insert_with(|| (height, first, Vec::new()));
        rows.push(((txnum - first) as u32, row));
        Ok(())
    }

    /// Puts the gathered block's row in the batch, and writes the batch once it is full.
    fn end_block(&mut self) -> Result<(), StoreError> {
        if let Some((height, _, rows)) = self.block.take() {
            let value = BlockTweaks::encode(rows.iter().map(|(p, r)| (*p, r)));
            self.batch
                .put_cf(self.store.cf(cf::TWEAKS), BlockTweaks::key(height), value);
        }
        if self.rows_in_batch >= Self::BATCH_ROWS {
            self.store.write(std::mem::take(&mut self.batch))?;
            self.rows_in_batch = 0;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<(), StoreError> {
        self.end_block()?;
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

//! The store's schema version and the upgrades between versions. Each version's layout and each
//! change is written down in `migrations/` at the top of the repository.

use rocksdb::WriteBatch;

use super::db::{Store, StoreError};
use super::schema::{cf, meta, SCHEMA_VERSION};

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

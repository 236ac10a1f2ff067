//! cairn's RocksDB store: the database ([`db`]), the typed rows it holds ([`schema`]) and the
//! upgrades between schema versions ([`migrations`]). Opening a store checks its version first:
//! an older one is upgraded, a newer or unknown one refused.

pub mod db;
pub mod migrations;
pub mod schema;
pub mod undo;

use std::path::Path;

use crate::config::DEFAULT_INDEX_CACHE_MB;
pub use db::{KeyValue, Store, StoreError, TxidCursor};
pub use schema::SCHEMA_VERSION;

impl Store {
    /// Opens or creates the store in `path`, upgrading an older schema or refusing an unknown one,
    /// with the default block cache ([`DEFAULT_INDEX_CACHE_MB`]).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with_cache(path, DEFAULT_INDEX_CACHE_MB << 20)
    }

    /// [`Store::open`] with a block cache of `cache_bytes` shared by every column family.
    pub fn open_with_cache(path: &Path, cache_bytes: usize) -> Result<Self, StoreError> {
        let (store, existed) = Store::open_db(path, cache_bytes)?;
        migrations::check_and_upgrade(&store, existed)?;
        Ok(store)
    }
}

//! One index batch, its rows kept per column family and handed to RocksDB in key order.
//!
//! RocksDB's memtable is a skip list that continues from where its last insert ended, so keys
//! inserted in order cost a step or two each, while the random order in which a block produces
//! them (script hashes, txids) costs a full search each: with random order, inserting into the
//! memtable was half of the indexer thread's time.

use rocksdb::WriteBatch;

use crate::store::Store;

/// What happens to a key.
enum Op {
    Put(Box<[u8]>),
    Delete,
}

/// Rows of one atomic index batch, per column family.
#[derive(Default)]
pub struct SortedBatch {
    families: Vec<(&'static str, Vec<(Box<[u8]>, Op)>)>,
}

impl SortedBatch {
    fn rows(&mut self, cf: &'static str) -> &mut Vec<(Box<[u8]>, Op)> {
        let i = match self.families.iter().position(|(name, _)| *name == cf) {
            Some(i) => i,
            None => {
                self.families.push((cf, Vec::new()));
                self.families.len() - 1
            }
        };
        &mut self.families[i].1
    }

    /// Sets `key` to `value` in column family `cf`.
    pub fn put(&mut self, cf: &'static str, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let row = (Box::from(key.as_ref()), Op::Put(Box::from(value.as_ref())));
        self.rows(cf).push(row);
    }

    /// Removes `key` from column family `cf`.
    pub fn delete(&mut self, cf: &'static str, key: impl AsRef<[u8]>) {
        let row = (Box::from(key.as_ref()), Op::Delete);
        self.rows(cf).push(row);
    }

    /// The RocksDB batch: every family's rows sorted by key; operations on one key keep the
    /// order they were added in (a stable sort), so a put followed by a delete still deletes.
    pub fn into_write_batch(self, store: &Store) -> WriteBatch {
        let mut batch = WriteBatch::default();
        for (cf, mut rows) in self.families {
            rows.sort_by(|a, b| a.0.cmp(&b.0));
            let handle = store.cf(cf);
            for (key, op) in rows {
                match op {
                    Op::Put(value) => batch.put_cf(handle, key, value),
                    Op::Delete => batch.delete_cf(handle, key),
                }
            }
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema::cf;

    #[test]
    fn keys_are_sorted_and_one_keys_operations_keep_their_order() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let mut b = SortedBatch::default();
        b.put(cf::UTXO, [3u8], [1u8]);
        b.put(cf::UTXO, [1u8], [1u8]);
        b.put(cf::HISTORY, [9u8], []);
        b.put(cf::UTXO, [2u8], [2u8]);
        b.delete(cf::UTXO, [2u8]); // created and spent in one batch: gone
        b.delete(cf::UTXO, [1u8]);
        b.put(cf::UTXO, [1u8], [7u8]); // deleted, then written again: kept
        store.write(b.into_write_batch(&store)).unwrap();
        assert_eq!(store.get(cf::UTXO, &[1]).unwrap(), Some(vec![7]));
        assert_eq!(store.get(cf::UTXO, &[2]).unwrap(), None);
        assert_eq!(store.get(cf::UTXO, &[3]).unwrap(), Some(vec![1]));
        assert_eq!(store.get(cf::HISTORY, &[9]).unwrap(), Some(vec![]));
    }
}

//! One index batch, its rows kept per column family (in one byte arena each) and handed to
//! RocksDB in key order.
//!
//! RocksDB's memtable is a skip list that continues from where its last insert ended, so keys
//! inserted in order cost a step or two each, while the random order in which a block produces
//! them (script hashes, txids) costs a full search each: with random order, inserting into the
//! memtable was half of the indexer thread's time.

use rocksdb::WriteBatch;

use crate::store::Store;

/// One row: where its key (and its value, for a put) sit in the family's byte arena.
struct Row {
    key: std::ops::Range<usize>,
    /// `None`: the key is deleted.
    value: Option<std::ops::Range<usize>>,
}

/// One column family's rows, their bytes in one arena (no allocation per key or value).
struct Family {
    cf: &'static str,
    bytes: Vec<u8>,
    rows: Vec<Row>,
}

impl Family {
    fn push(&mut self, data: &[u8]) -> std::ops::Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(data);
        start..self.bytes.len()
    }
}

/// One row of a batch as a test reads it: the column family, the key, and the value (`None`:
/// the key is deleted).
#[cfg(test)]
pub type BatchRow = (&'static str, Vec<u8>, Option<Vec<u8>>);

/// Rows of one atomic index batch, per column family.
#[derive(Default)]
pub struct SortedBatch {
    families: Vec<Family>,
}

impl SortedBatch {
    fn family(&mut self, cf: &'static str) -> &mut Family {
        let i = match self.families.iter().position(|f| f.cf == cf) {
            Some(i) => i,
            None => {
                self.families.push(Family {
                    cf,
                    bytes: Vec::new(),
                    rows: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        &mut self.families[i]
    }

    /// Sets `key` to `value` in column family `cf`.
    pub fn put(&mut self, cf: &'static str, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let family = self.family(cf);
        let key = family.push(key.as_ref());
        let value = Some(family.push(value.as_ref()));
        family.rows.push(Row { key, value });
    }

    /// Removes `key` from column family `cf`.
    pub fn delete(&mut self, cf: &'static str, key: impl AsRef<[u8]>) {
        let family = self.family(cf);
        let key = family.push(key.as_ref());
        family.rows.push(Row { key, value: None });
    }

    /// Every row in the order added, per column family.
    #[cfg(test)]
    pub fn rows(&self) -> Vec<BatchRow> {
        let mut out = Vec::new();
        for family in &self.families {
            for row in &family.rows {
                let value = row.value.clone().map(|v| family.bytes[v].to_vec());
                out.push((family.cf, family.bytes[row.key.clone()].to_vec(), value));
            }
        }
        out
    }

    /// The RocksDB batch: every family's rows sorted by key; operations on one key keep the
    /// order they were added in (a stable sort), so a put followed by a delete still deletes.
    pub fn into_write_batch(self, store: &Store) -> WriteBatch {
        let mut batch = WriteBatch::default();
        for Family {
            cf,
            bytes,
            mut rows,
        } in self.families
        {
            rows.sort_by(|a, b| bytes[a.key.clone()].cmp(&bytes[b.key.clone()]));
            let handle = store.cf(cf);
            for row in rows {
                let key = &bytes[row.key];
                match row.value {
                    Some(value) => batch.put_cf(handle, key, &bytes[value]),
                    None => batch.delete_cf(handle, key),
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

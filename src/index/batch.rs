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
    /// The key's first 8 bytes, big-endian (zero-padded): what orders nearly every pair of
    /// keys (script hashes, txids) without reading the arena.
    head: u64,
    key: std::ops::Range<usize>,
    /// `None`: the key is deleted.
    value: Option<std::ops::Range<usize>>,
    /// A put of a key the store cannot hold before this batch ([`SortedBatch::put_new`]).
    fresh: bool,
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

    fn push_row(&mut self, key: &[u8], value: Option<&[u8]>, fresh: bool) {
        let mut head = [0u8; 8];
        let n = key.len().min(8);
        head[..n].copy_from_slice(&key[..n]);
        let key = self.push(key);
        let value = value.map(|v| self.push(v));
        self.rows.push(Row {
            head: u64::from_be_bytes(head),
            key,
            value,
            fresh,
        });
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
        self.push_put(cf, key.as_ref(), value.as_ref(), false);
    }

    /// Sets `key`, which the store cannot hold before this batch (it names something the
    /// batch creates, such as a new transaction's output), to `value`: if the batch deletes it
    /// again, neither reaches RocksDB (an output created and spent within one batch costs no
    /// memtable insert and leaves no tombstone).
    pub fn put_new(&mut self, cf: &'static str, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.push_put(cf, key.as_ref(), value.as_ref(), true);
    }

    fn push_put(&mut self, cf: &'static str, key: &[u8], value: &[u8], fresh: bool) {
        self.family(cf).push_row(key, Some(value), fresh);
    }

    /// Removes `key` from column family `cf`.
    pub fn delete(&mut self, cf: &'static str, key: impl AsRef<[u8]>) {
        self.family(cf).push_row(key.as_ref(), None, false);
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

    /// The RocksDB batch: every family's rows sorted by key, each key once with its last
    /// operation (so a put followed by a delete still deletes), and a key first put with
    /// [`Self::put_new`] and deleted in the end not at all.
    pub fn into_write_batch(self, store: &Store) -> WriteBatch {
        let mut batch = WriteBatch::default();
        for Family {
            cf,
            bytes,
            mut rows,
        } in self.families
        {
            // Stable: one key's operations keep their order. The heads decide most pairs.
            rows.sort_by(|a, b| {
                a.head
                    .cmp(&b.head)
                    .then_with(|| bytes[a.key.clone()].cmp(&bytes[b.key.clone()]))
            });
            let handle = store.cf(cf);
            for group in rows.chunk_by(|a, b| bytes[a.key.clone()] == bytes[b.key.clone()]) {
                // Only a key's last operation counts; none when the key was new to the batch
                // and is deleted in the end.
                let (Some(first), Some(last)) = (group.first(), group.last()) else {
                    continue;
                };
                let key = &bytes[last.key.clone()];
                match &last.value {
                    Some(value) => batch.put_cf(handle, key, &bytes[value.clone()]),
                    None if first.fresh => {}
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

    /// An empty store in a folder that lives as long as the first half.
    fn temp_store() -> (tempfile::TempDir, Store) {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        (tmp, store)
    }

    #[test]
    fn keys_are_sorted_and_one_keys_operations_keep_their_order() {
        let (_tmp, store) = temp_store();
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

    /// A key's operations reach RocksDB as its last one; a key new to the batch and deleted in
    /// it not at all, while a delete of a key put without `put_new` still goes (it may be in
    /// the store from before).
    #[test]
    fn each_key_goes_once_and_new_keys_deleted_again_not_at_all() {
        let (_tmp, store) = temp_store();
        let mut before = SortedBatch::default();
        before.put(cf::UTXO, [5u8], [1u8]);
        store.write(before.into_write_batch(&store)).unwrap();
        let mut b = SortedBatch::default();
        b.put_new(cf::UTXO, [6u8], [1u8]);
        b.delete(cf::UTXO, [6u8]); // created and spent in the batch: nothing written
        b.put(cf::UTXO, [5u8], [2u8]);
        b.delete(cf::UTXO, [5u8]); // in the store before: the delete goes
        b.put_new(cf::UTXO, [7u8], [1u8]);
        b.delete(cf::UTXO, [7u8]);
        b.put(cf::UTXO, [7u8], [3u8]); // put again after: the last put goes
        b.put(cf::UTXO, [8u8], [1u8]);
        b.put(cf::UTXO, [8u8], [4u8]);
        let batch = b.into_write_batch(&store);
        assert_eq!(batch.len(), 3, "a delete of 5, a put each of 7 and 8");
        store.write(batch).unwrap();
        assert_eq!(store.get(cf::UTXO, &[5]).unwrap(), None);
        assert_eq!(store.get(cf::UTXO, &[6]).unwrap(), None);
        assert_eq!(store.get(cf::UTXO, &[7]).unwrap(), Some(vec![3]));
        assert_eq!(store.get(cf::UTXO, &[8]).unwrap(), Some(vec![4]));
    }
}

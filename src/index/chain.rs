//! The indexed chain in memory: every header and the TxNum range of every block, loaded from
//! the `blocks` column family at start and updated after each committed batch.
//!
//! Queries hold a copy of it, taken with their RocksDB snapshot, for as long as they scan, so
//! that a commit never waits for a slow query. The copy is cheap: the lists are kept in shared
//! chunks, and a commit copies only the chunk it changes.

use std::sync::Arc;

use crate::types::TxNum;
use bitcoin::block::Header;
use bitcoin::BlockHash;

/// Entries per chunk: a commit on top of a shared copy copies one chunk (about 330 kB of
/// headers), and a copy of a mainnet chain shares about 230 chunks per list.
const CHUNK: usize = 4096;

/// A list in shared chunks of [`CHUNK`] entries; a clone shares them all.
#[derive(Debug, Clone)]
struct Chunked<T> {
    chunks: Vec<Arc<Vec<T>>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Clone> Chunked<T> {
    fn push(&mut self, value: T) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => Arc::make_mut(last).push(value),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(value);
                self.chunks.push(Arc::new(chunk));
            }
        }
        self.len += 1;
    }

    fn pop(&mut self) -> Option<T> {
        let last = self.chunks.last_mut()?;
        let value = Arc::make_mut(last).pop();
        if last.is_empty() {
            self.chunks.pop();
        }
        self.len -= usize::from(value.is_some());
        value
    }

    fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK)
    }

    /// The index of the last entry that `pred` holds for.
    fn rposition(&self, pred: impl Fn(&T) -> bool) -> Option<usize> {
        self.chunks
            .iter()
            .enumerate()
            .rev()
            .find_map(|(c, chunk)| chunk.iter().rposition(&pred).map(|i| c * CHUNK + i))
    }

    /// How many leading entries `pred` holds for, when it holds for a prefix of the list.
    fn partition_point(&self, pred: impl Fn(&T) -> bool) -> usize {
        let full = self
            .chunks
            .partition_point(|chunk| chunk.last().is_some_and(&pred));
        match self.chunks.get(full) {
            Some(chunk) => full * CHUNK + chunk.partition_point(&pred),
            None => self.len,
        }
    }
}

/// Headers and TxNum ranges of the indexed blocks, height 0 upwards.
#[derive(Debug, Default, Clone)]
pub struct IndexedChain {
    headers: Chunked<Header>,
    hashes: Chunked<BlockHash>,
    first_txnums: Chunked<u64>,
    next_txnum: u64,
}

impl IndexedChain {
    /// Appends a block on top.
    pub fn push(&mut self, header: Header, first_txnum: TxNum, tx_count: u32) {
        self.hashes.push(header.block_hash());
        self.headers.push(header);
        self.first_txnums.push(first_txnum.0);
        self.next_txnum = first_txnum.0 + u64::from(tx_count);
    }

    /// Removes the top block.
    pub fn pop(&mut self) {
        self.headers.pop();
        self.hashes.pop();
        if let Some(first) = self.first_txnums.pop() {
            self.next_txnum = first;
        }
    }

    /// Number of blocks (tip height + 1).
    pub fn len(&self) -> usize {
        self.headers.len
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.headers.len == 0
    }

    /// The tip's height and hash.
    pub fn tip(&self) -> Option<(u32, BlockHash)> {
        let h = self.hashes.len.checked_sub(1)?;
        Some((h as u32, *self.hashes.get(h)?))
    }

    /// The header at a height.
    pub fn header(&self, height: u32) -> Option<&Header> {
        self.headers.get(height as usize)
    }

    /// The hash at a height.
    pub fn hash(&self, height: u32) -> Option<BlockHash> {
        self.hashes.get(height as usize).copied()
    }

    /// The height of a block hash in the indexed chain.
    pub fn height_of_hash(&self, hash: &BlockHash) -> Option<u32> {
        // Recent blocks are asked for most; search from the tip.
        self.hashes.rposition(|h| h == hash).map(|p| p as u32)
    }

    /// The TxNum the next block's coinbase gets.
    pub fn next_txnum(&self) -> TxNum {
        TxNum(self.next_txnum)
    }

    /// The TxNum range of the block at `height`.
    pub fn txnums(&self, height: u32) -> Option<std::ops::Range<u64>> {
        let h = height as usize;
        let first = *self.first_txnums.get(h)?;
        let end = self
            .first_txnums
            .get(h + 1)
            .copied()
            .unwrap_or(self.next_txnum);
        Some(first..end)
    }

    /// The height and in-block position of a transaction.
    pub fn locate(&self, txnum: TxNum) -> Option<(u32, u32)> {
        if txnum.0 >= self.next_txnum {
            return None;
        }
        let idx = self.first_txnums.partition_point(|&f| f <= txnum.0);
        let height = idx.checked_sub(1)?;
        Some((
            height as u32,
            (txnum.0 - self.first_txnums.get(height)?) as u32,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_finds_height_and_position() {
        let genesis = bitcoin::blockdata::constants::genesis_block(bitcoin::Network::Regtest);
        let mut chain = IndexedChain::default();
        chain.push(genesis.header, TxNum(0), 1);
        chain.push(genesis.header, TxNum(1), 3);
        chain.push(genesis.header, TxNum(4), 1);
        assert_eq!(chain.locate(TxNum(0)), Some((0, 0)));
        assert_eq!(chain.locate(TxNum(3)), Some((1, 2)));
        assert_eq!(chain.locate(TxNum(4)), Some((2, 0)));
        assert_eq!(chain.locate(TxNum(5)), None);
        assert_eq!(chain.txnums(1), Some(1..4));
        chain.pop();
        assert_eq!(chain.next_txnum(), TxNum(4));
        assert_eq!(chain.locate(TxNum(4)), None);
    }

    /// Across chunk boundaries, and a copy keeps what it saw while the original changes.
    #[test]
    fn chunks_behave_as_one_list_and_copies_stay_apart() {
        let genesis = bitcoin::blockdata::constants::genesis_block(bitcoin::Network::Regtest);
        let mut chain = IndexedChain::default();
        let n = 3 * CHUNK as u64 + 5;
        for h in 0..n {
            chain.push(genesis.header, TxNum(2 * h), 2);
        }
        let copy = chain.clone();
        for h in [
            0,
            CHUNK as u64 - 1,
            CHUNK as u64,
            2 * CHUNK as u64 + 1,
            n - 1,
        ] {
            assert_eq!(chain.locate(TxNum(2 * h + 1)), Some((h as u32, 1)));
            assert_eq!(chain.txnums(h as u32), Some(2 * h..2 * h + 2));
        }
        assert_eq!(chain.locate(TxNum(2 * n)), None);
        for _ in 0..6 {
            chain.pop();
        }
        chain.push(genesis.header, TxNum(2 * (n - 6)), 7);
        assert_eq!(chain.len(), n as usize - 5);
        assert_eq!(chain.next_txnum(), TxNum(2 * (n - 6) + 7));
        assert_eq!(
            chain.locate(TxNum(2 * (n - 6) + 6)),
            Some(((n - 6) as u32, 6))
        );
        // The copy is unchanged.
        assert_eq!(copy.len(), n as usize);
        assert_eq!(copy.locate(TxNum(2 * n - 1)), Some(((n - 1) as u32, 1)));
        assert_eq!(
            copy.txnums((n - 6) as u32),
            Some(2 * (n - 6)..2 * (n - 6) + 2)
        );
    }
}

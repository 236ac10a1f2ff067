//! The indexed chain in memory: every header and the TxNum range of every block, loaded from
//! the `blocks` column family at start and updated after each committed batch.

use bitcoin::block::Header;
use bitcoin::BlockHash;

use crate::store::schema::TxNum;

/// Headers and TxNum ranges of the indexed blocks, height 0 upwards.
#[derive(Debug, Default, Clone)]
pub struct IndexedChain {
    headers: Vec<Header>,
    hashes: Vec<BlockHash>,
    first_txnums: Vec<u64>,
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
        self.headers.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// The tip's height and hash.
    pub fn tip(&self) -> Option<(u32, BlockHash)> {
        let h = self.hashes.len().checked_sub(1)?;
        Some((h as u32, self.hashes[h]))
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
        self.hashes.iter().rposition(|h| h == hash).map(|p| p as u32)
    }

    /// The TxNum the next block's coinbase gets.
    pub fn next_txnum(&self) -> TxNum {
        TxNum(self.next_txnum)
    }

    /// The TxNum range of the block at `height`.
    pub fn txnums(&self, height: u32) -> Option<std::ops::Range<u64>> {
        let h = height as usize;
        let first = *self.first_txnums.get(h)?;
        let end = self.first_txnums.get(h + 1).copied().unwrap_or(self.next_txnum);
        Some(first..end)
    }

    /// The height and in-block position of a transaction.
    pub fn locate(&self, txnum: TxNum) -> Option<(u32, u32)> {
        if txnum.0 >= self.next_txnum {
            return None;
        }
        let idx = self.first_txnums.partition_point(|&f| f <= txnum.0);
        let height = idx.checked_sub(1)?;
        Some((height as u32, (txnum.0 - self.first_txnums[height]) as u32))
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
}

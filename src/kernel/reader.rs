//! Reading blocks and their undo data through the kernel: entries of the active chain or the
//! block tree, and [`ChainReader`], which reads one chain's blocks without the kernel's lock.

use bitcoin::hashes::Hash;
use bitcoin::BlockHash;
use bitcoinkernel::prelude::*;
use bitcoinkernel::ChainstateManager;

use super::{reopen, BlockUndo, KernelError};

pub(super) fn entry_at(
    cm: &ChainstateManager,
    height: i64,
) -> Result<bitcoinkernel::BlockTreeEntry<'_>, KernelError> {
    usize::try_from(height)
        .ok()
        .and_then(|h| cm.active_chain().at_height(h))
        .ok_or(KernelError::Read {
            what: "block",
            height,
            message: "no block at that height in the active chain".into(),
        })
}

pub(super) fn entry_of<'c>(
    cm: &'c ChainstateManager,
    hash: &BlockHash,
) -> Result<bitcoinkernel::BlockTreeEntry<'c>, KernelError> {
    let kernel_hash = bitcoinkernel::BlockHash::from(hash.to_byte_array());
    cm.get_block_tree_entry(&kernel_hash)
        .ok_or_else(|| KernelError::Read {
            what: "block",
            height: -1,
            message: format!("block {hash} is unknown to the kernel"),
        })
}

pub(super) fn read_entry_bytes(
    cm: &ChainstateManager,
    entry: &bitcoinkernel::BlockTreeEntry<'_>,
) -> Result<Vec<u8>, KernelError> {
    let height = i64::from(entry.height());
    let read_err = |message: String| KernelError::Read {
        what: "block",
        height,
        message,
    };
    let block = cm
        .read_block_data(entry)
        .map_err(|e| read_err(e.to_string()))?;
    block
        .consensus_encode()
        .map_err(|e| read_err(e.to_string()))
}

pub(super) fn read_entry_undo(
    cm: &ChainstateManager,
    entry: &bitcoinkernel::BlockTreeEntry<'_>,
) -> Result<BlockUndo, KernelError> {
    let height = i64::from(entry.height());
    if height == 0 {
        // Genesis spends nothing and has no undo data.
        return Ok(BlockUndo::default());
    }
    let spent = cm
        .read_spent_outputs(entry)
        .map_err(|e| KernelError::Read {
            what: "undo data",
            height,
            message: e.to_string(),
        })?;
    Ok(BlockUndo::from_kernel(&spent))
}

/// Blocks of one chain, up to a last one ([`Validator::chain_reader`]); shared by threads.
pub struct ChainReader<'a> {
    // Field order matters: what borrows from the manager is dropped before the read it holds.
    pub(super) last: bitcoinkernel::BlockTreeEntry<'a>,
    pub(super) manager: &'a ChainstateManager,
    pub(super) _held: reopen::Held<'a>,
}

impl ChainReader<'_> {
    /// The entry at `height`, at most the last one's, found without the kernel's lock.
    fn entry(&self, height: i64) -> Result<bitcoinkernel::BlockTreeEntry<'_>, KernelError> {
        i32::try_from(height)
            .ok()
            .and_then(|h| self.last.ancestor(h))
            .ok_or(KernelError::Read {
                what: "block",
                height,
                message: "no block at that height below the reader's last".into(),
            })
    }

    /// The hash of the block at `height` (at most the last one's), without the kernel's lock.
    pub fn hash_at(&self, height: i64) -> Result<BlockHash, KernelError> {
        let hash = self.entry(height)?.block_hash().to_bytes();
        Ok(BlockHash::from_byte_array(hash))
    }

    /// The serialized block at `height` (at most the last one's).
    pub fn read_block(&self, height: i64) -> Result<Vec<u8>, KernelError> {
        read_entry_bytes(self.manager, &self.entry(height)?)
    }

    /// The undo data of the block at `height` (at most the last one's).
    pub fn read_undo(&self, height: i64) -> Result<BlockUndo, KernelError> {
        read_entry_undo(self.manager, &self.entry(height)?)
    }
}

//! The indexer's errors.

use bitcoin::Txid;

use super::rows::PrepareError;
use crate::kernel::KernelError;
use crate::store::schema::RowError;
use crate::store::StoreError;

/// Errors of the indexer.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored row is damaged.
    #[error(transparent)]
    Row(#[from] RowError),
    /// Reading a block from the kernel failed.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A block did not decode or its undo data did not fit.
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    /// An input spends a transaction the index does not have: the index is damaged.
    #[error("transaction {txid} at height {height} spends {prev}, which the index does not have; the index is damaged: remove it to rebuild")]
    MissingPrevout {
        /// The spending transaction.
        txid: Txid,
        /// The missing one.
        prev: Txid,
        /// The height being indexed.
        height: u32,
    },
    /// The kernel's block files could not be read.
    #[error("reading the kernel's block files: {0}")]
    BlockFiles(String),
    /// The stored rows disagree with each other.
    #[error("the index is inconsistent: {0}; remove it to rebuild")]
    Inconsistent(String),
}

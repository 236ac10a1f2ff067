//! A transaction's questions: its bytes, where it is, what its inputs spent (the block's undo
//! data for a confirmed one), and the proofs that it was mined.

use std::collections::HashMap;
use std::sync::Arc;

use bitcoin::consensus::Decodable;
use bitcoin::hashes::Hash;
use bitcoin::{Block, BlockHash, Transaction, TxOut, Txid, Wtxid};

use super::merkle::{branch_and_root, MerkleTree};
use super::model::{ChainView, ViewError};
use crate::index::query::{ConfirmedEntry, ConfirmedTx, TxPosition};
use crate::kernel::BlockUndo;

/// A block of the view's chain, as a transaction's confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confirmation {
    /// Its height.
    pub height: u32,
    /// Its hash.
    pub hash: BlockHash,
    /// Its header's time.
    pub time: u32,
}

/// A transaction of the chain or the mempool.
pub struct FoundTx {
    /// The transaction.
    pub tx: Transaction,
    /// Its serialization (left empty by [`ChainView::block_transactions`], whose callers render
    /// the decoded transaction only).
    pub raw: Vec<u8>,
    /// The outputs its inputs spend, in input order (`None` for a coinbase's); empty unless
    /// asked for.
    pub prevouts: Vec<Option<TxOut>>,
    /// Its block, `None` in the mempool.
    pub confirmation: Option<Confirmation>,
}

/// A confirmed transaction's block: where in it the transaction is, and its merkle tree.
pub struct BlockOfTx {
    /// The block's height.
    pub height: u32,
    /// The transaction's position in it.
    pub pos: u32,
    /// The block's header.
    pub header: bitcoin::block::Header,
    /// The block's merkle tree, its txids the leaves.
    pub tree: Arc<MerkleTree>,
}

/// The transaction at a position of a block, with its merkle branch to the block's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxAtPosition {
    /// Its id.
    pub txid: Txid,
    /// The hashes from its leaf up to the root.
    pub branch: Vec<[u8; 32]>,
}

impl BlockOfTx {
    /// The transaction's merkle branch to the header's root (its position is one of the tree's:
    /// [`ChainView::confirming_block`] found the txid there).
    pub fn branch(&self) -> Vec<[u8; 32]> {
        self.tree.branch(self.pos as usize).unwrap_or_default()
    }

    /// The block's txids, in order.
    pub fn txids(&self) -> Vec<Txid> {
        let leaves = self.tree.leaves().iter();
        leaves.map(|leaf| Txid::from_byte_array(*leaf)).collect()
    }
}

/// A proof that a transaction with a given wtxid was mined (BIP141's witness commitment).
pub struct WitnessProof {
    /// The transaction's wtxid.
    pub wtxid: Wtxid,
    /// The block.
    pub confirmation: Confirmation,
    /// The transaction's position.
    pub pos: u32,
    /// The wtxid's branch to the witness root when the coinbase commits to the witnesses
    /// (`true`), else the txid's branch to the header's root (`false`).
    pub branch: (Vec<[u8; 32]>, bool),
    /// The coinbase.
    pub coinbase: Transaction,
    /// The coinbase's branch to the header's root.
    pub coinbase_branch: Vec<[u8; 32]>,
}

/// The start of a witness commitment output's script (BIP141): OP_RETURN, a 36-byte push, and
/// the commitment header `aa21a9ed`.
const COMMITMENT_PREFIX: [u8; 6] = [0x6a, 0x24, 0xaa, 0x21, 0xa9, 0xed];

/// Whether a coinbase commits to its block's witnesses: an output whose script starts with the
/// commitment header and is at least 38 bytes long (BIP141).
fn has_witness_commitment(coinbase: &Transaction) -> bool {
    coinbase.output.iter().any(|o| {
        let script = o.script_pubkey.as_bytes();
        script.len() >= 38 && script[..6] == COMMITMENT_PREFIX
    })
}

/// Decodes a stored transaction.
pub fn decode(raw: &[u8]) -> Result<Transaction, ViewError> {
    Transaction::consensus_decode(&mut &raw[..])
        .map_err(|e| ViewError::Damaged(format!("a stored transaction does not decode: {e}")))
}

/// The outputs the inputs of the block's transaction at `pos` spend, from the block's undo data.
fn spent_outputs(
    undo: &BlockUndo,
    pos: u32,
    tx: &Transaction,
) -> Result<Vec<Option<TxOut>>, ViewError> {
    if pos == 0 {
        return Ok(vec![None; tx.input.len()]);
    }
    let spent = undo
        .txs
        .get(pos as usize - 1)
        .filter(|spent| spent.len() == tx.input.len())
        .ok_or_else(|| {
            ViewError::Damaged(format!(
                "the undo data does not fit transaction {}",
                tx.compute_txid()
            ))
        })?;
    Ok(spent.iter().map(|s| Some(s.txout.clone())).collect())
}

/// What a transaction's inputs spent (`prevouts`, in input order; an unknown one counts 0)
/// minus what its outputs pay; 0 for a coinbase (as Esplora shows it).
pub fn fee_paid(tx: &Transaction, prevouts: &[Option<TxOut>]) -> u64 {
    if tx.is_coinbase() {
        return 0;
    }
    let spent = prevouts
        .iter()
        .flatten()
        .try_fold(0u64, |sum, p| sum.checked_add(p.value.to_sat()));
    let paid = tx
        .output
        .iter()
        .try_fold(0u64, |sum, o| sum.checked_add(o.value.to_sat()));
    match (spent, paid) {
        (Some(spent), Some(paid)) => spent.saturating_sub(paid),
        _ => 0,
    }
}

impl FoundTx {
    /// Its fee, from what its inputs spent ([`fee_paid`]).
    pub fn fee(&self) -> u64 {
        fee_paid(&self.tx, &self.prevouts)
    }
}

impl ChainView<'_> {
    /// The view's block at `height` as a confirmation.
    pub fn confirmation(&self, height: u32) -> Option<Confirmation> {
        let header = self.header(height)?;
        Some(Confirmation {
            height,
            hash: header.block_hash(),
            time: header.time,
        })
    }

    /// A confirmed transaction: its bytes, decoded, and where it is.
    pub(super) fn confirmed(&self, txid: &Txid) -> Result<Option<ConfirmedTx>, ViewError> {
        Ok(self.index.confirmed_tx(self.validator(), txid)?)
    }

    /// A confirmed transaction of a history just read; the chain may have changed since (a
    /// reorg), which asks the client to try again.
    pub(super) fn confirmed_of_history(&self, txid: &Txid) -> Result<ConfirmedTx, ViewError> {
        self.confirmed(txid)?.ok_or(ViewError::ChainChanged)
    }

    /// A transaction's bytes: the mempool's first, then the chain's.
    pub fn raw_transaction(&self, txid: &Txid) -> Result<Option<Vec<u8>>, ViewError> {
        if let Some(raw) = self.mempool().and_then(|p| p.raw(txid)) {
            return Ok(Some(raw));
        }
        Ok(self.confirmed(txid)?.map(|found| found.bytes))
    }

    /// The chain's transaction `txid`, else the mempool's; `with_prevouts` reads what its inputs
    /// spend (the block's undo data for a confirmed one).
    pub fn transaction(
        &self,
        txid: &Txid,
        with_prevouts: bool,
    ) -> Result<Option<FoundTx>, ViewError> {
        if let Some(ConfirmedTx {
            bytes: raw,
            tx,
            position: pos,
        }) = self.confirmed(txid)?
        {
            let confirmation = self.confirmation(pos.height);
            let prevouts = match (with_prevouts, confirmation) {
                (true, Some(c)) => spent_outputs(&self.undo(&c.hash)?, pos.pos, &tx)?,
                _ => Vec::new(),
            };
            return Ok(Some(FoundTx {
                tx,
                raw,
                prevouts,
                confirmation,
            }));
        }
        let Some(entry) = self.mempool().and_then(|m| m.entry(txid)) else {
            return Ok(None);
        };
        Ok(Some(FoundTx {
            prevouts: entry.prevouts.into_iter().map(Some).collect(),
            tx: entry.tx,
            raw: entry.raw,
            confirmation: None,
        }))
    }

    /// The block of a confirmed transaction, if the view's chain has it there.
    pub fn tx_confirmation(&self, txid: &Txid) -> Result<Option<Confirmation>, ViewError> {
        Ok(self
            .index
            .tx_position(txid)?
            .and_then(|pos| self.confirmation(pos.height)))
    }

    /// A confirmed transaction's block with its txids; `None` if it is not confirmed.
    pub fn confirming_block(&self, txid: &Txid) -> Result<Option<BlockOfTx>, ViewError> {
        let Some(pos) = self.index.tx_position(txid)? else {
            return Ok(None);
        };
        let (Some(header), Some(tree)) = (self.header(pos.height), self.block_tree(pos.height)?)
        else {
            return Ok(None);
        };
        if tree.leaves().get(pos.pos as usize) != Some(&txid.to_byte_array()) {
            return Ok(None);
        }
        Ok(Some(BlockOfTx {
            height: pos.height,
            pos: pos.pos,
            header,
            tree,
        }))
    }

    /// Where a confirmed transaction of the view's chain is.
    pub fn tx_position(&self, txid: &Txid) -> Result<Option<TxPosition>, ViewError> {
        Ok(self.index.tx_position(txid)?)
    }

    /// The txids of the view's block at `height`, in block order.
    pub fn block_txids(&self, height: u32) -> Result<Option<Vec<Txid>>, ViewError> {
        Ok(self.index.block_txids(height)?)
    }

    /// The txid at position `pos` of the block at `height` with its merkle branch; `Ok(None)`
    /// when the block has no such position, `Err` when there is no such block.
    pub fn txid_at(
        &self,
        height: u32,
        pos: u32,
    ) -> Result<Option<Option<TxAtPosition>>, ViewError> {
        let Some(tree) = self.block_tree(height)? else {
            return Ok(None);
        };
        let (Some(leaf), Some(branch)) =
            (tree.leaves().get(pos as usize), tree.branch(pos as usize))
        else {
            return Ok(Some(None));
        };
        let txid = Txid::from_byte_array(*leaf);
        Ok(Some(Some(TxAtPosition { txid, branch })))
    }

    /// A block's undo data, from the kernel.
    pub fn undo(&self, hash: &BlockHash) -> Result<BlockUndo, ViewError> {
        self.may_read_kernel()?;
        let undo = self
            .validator()
            .read_undo_by_hash(hash)
            .map_err(|e| ViewError::Kernel(e.to_string()))?;
        let spent = undo.txs.iter().flatten();
        let bytes = spent.clone().map(|s| s.txout.script_pubkey.len() + 8).sum();
        // A read of the kernel's files at least, whatever it holds (a coinbase-only block's).
        self.charge_kernel((spent.count() as u64).max(1), bytes)?;
        Ok(undo)
    }

    /// A block's bytes, from the kernel.
    pub fn block_bytes(&self, hash: &BlockHash) -> Result<Vec<u8>, ViewError> {
        self.may_read_kernel()?;
        let raw = self
            .validator()
            .read_block_bytes_by_hash(hash)
            .map_err(|e| ViewError::Kernel(e.to_string()))?;
        self.charge_kernel(1, raw.len())?;
        Ok(raw)
    }

    /// A block, decoded, with its serialized size.
    pub fn block(&self, hash: &BlockHash) -> Result<(Block, usize), ViewError> {
        let raw = self.block_bytes(hash)?;
        let block = bitcoin::consensus::deserialize(&raw)
            .map_err(|e| ViewError::Damaged(format!("a stored block does not decode: {e}")))?;
        Ok((block, raw.len()))
    }

    /// The transactions of a history page with what their inputs spent, each block's undo data
    /// read once.
    pub fn history_transactions(
        &self,
        entries: &[ConfirmedEntry],
    ) -> Result<Vec<FoundTx>, ViewError> {
        let mut undos: HashMap<u32, BlockUndo> = HashMap::new();
        let mut found = Vec::with_capacity(entries.len());
        for entry in entries {
            let ConfirmedTx {
                bytes: raw,
                tx,
                position: pos,
            } = self.confirmed_of_history(&entry.txid)?;
            let confirmation = self
                .confirmation(pos.height)
                .ok_or(ViewError::ChainChanged)?;
            let undo = match undos.entry(pos.height) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(self.undo(&confirmation.hash)?)
                }
            };
            found.push(FoundTx {
                prevouts: spent_outputs(undo, pos.pos, &tx)?,
                tx,
                raw,
                confirmation: Some(confirmation),
            });
        }
        Ok(found)
    }

    /// Up to `count` transactions of a block from position `start`, with what their inputs
    /// spent; `None` when `start` is past its last transaction.
    pub fn block_transactions(
        &self,
        hash: &BlockHash,
        start: usize,
        count: usize,
    ) -> Result<Option<Vec<FoundTx>>, ViewError> {
        let height = self.height_of(hash).ok_or(ViewError::ChainChanged)?;
        let (block, _) = self.block(hash)?;
        if start >= block.txdata.len() {
            return Ok(None);
        }
        let undo = self.undo(hash)?;
        let confirmation = self.confirmation(height);
        let mut page = Vec::with_capacity(count);
        for (pos, tx) in block.txdata.into_iter().enumerate().skip(start).take(count) {
            page.push(FoundTx {
                prevouts: spent_outputs(&undo, pos as u32, &tx)?,
                raw: Vec::new(),
                tx,
                confirmation,
            });
        }
        Ok(Some(page))
    }

    /// The witness proof of the confirmed transaction at `height`, position `pos`, checked to be
    /// `txid`.
    pub fn witness_proof(
        &self,
        txid: &Txid,
        height: u32,
        pos: u32,
    ) -> Result<WitnessProof, ViewError> {
        let confirmation = self.confirmation(height).ok_or(ViewError::ChainChanged)?;
        let (block, _) = self.block(&confirmation.hash)?;
        let index = pos as usize;
        let (Some(tx), Some(coinbase)) = (block.txdata.get(index), block.txdata.first()) else {
            return Err(ViewError::Damaged(
                "transaction position outside its block".into(),
            ));
        };
        if tx.compute_txid() != *txid {
            return Err(ViewError::Damaged(
                "the index and the block disagree on the transaction".into(),
            ));
        }
        let txid_tree = MerkleTree::new(
            block
                .txdata
                .iter()
                .map(|t| t.compute_txid().to_byte_array())
                .collect(),
        );
        let branch = match has_witness_commitment(coinbase) {
            // The coinbase's wtxid counts as zero in the witness tree (BIP141).
            true => {
                let wtxids: Vec<[u8; 32]> = std::iter::once([0u8; 32])
                    .chain(
                        block.txdata[1..]
                            .iter()
                            .map(|t| t.compute_wtxid().to_byte_array()),
                    )
                    .collect();
                (branch_and_root(&wtxids, index).0, true)
            }
            false => (txid_tree.branch(index).unwrap_or_default(), false),
        };
        Ok(WitnessProof {
            wtxid: tx.compute_wtxid(),
            confirmation,
            pos,
            branch,
            coinbase: coinbase.clone(),
            coinbase_branch: txid_tree.branch(0).unwrap_or_default(),
        })
    }
}

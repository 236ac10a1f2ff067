//! `blockchain.transaction.get_merkle_witness` (protocol 1.7): a proof that a transaction with a
//! given wtxid was mined, through the coinbase's witness commitment (BIP141): the wtxid's branch
//! up to the witness root, and the coinbase with its own branch up to the header's merkle root.

use bitcoin::hashes::Hash;
use bitcoin::hex::DisplayHex;
use bitcoin::{Block, Transaction, Txid};
use serde_json::{json, Value};

use super::merkle::{branch_and_root, rpc_hex};
use super::methods::Ctx;
use super::rpc::{RpcError, BACKEND_ERROR};

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

impl Ctx<'_> {
    /// `get_merkle_witness(txid, height=None, cb=false)`.
    pub(crate) fn get_merkle_witness(
        &self,
        txid: Txid,
        height: Option<u64>,
        cb: bool,
    ) -> Result<Value, RpcError> {
        let pos = self.confirmed_position(txid, height)?;
        let hash = self
            .backend
            .index
            .with_chain(|c| c.hash(pos.height))
            .ok_or_else(|| {
                RpcError::new(BACKEND_ERROR, "block of the transaction left the chain")
            })?;
        let raw = self
            .backend
            .validator
            .read_block_bytes_by_hash(&hash)
            .map_err(|e| RpcError::new(BACKEND_ERROR, e.to_string()))?;
        let block: Block = bitcoin::consensus::deserialize(&raw)
            .map_err(|e| RpcError::new(BACKEND_ERROR, e.to_string()))?;
        let index = pos.pos as usize;
        let (Some(tx), Some(coinbase)) = (block.txdata.get(index), block.txdata.first()) else {
            return Err(RpcError::new(
                BACKEND_ERROR,
                "transaction position outside its block",
            ));
        };
        if tx.compute_txid() != txid {
            return Err(RpcError::new(
                BACKEND_ERROR,
                "the index and the block disagree on the transaction",
            ));
        }
        let mut result = json!({
            "wtxid": tx.compute_wtxid().to_string(),
            "block_height": pos.height,
            "block_hash": hash.to_string(),
            "pos": pos.pos,
        });
        let txids: Vec<[u8; 32]> = block
            .txdata
            .iter()
            .map(|t| t.compute_txid().to_byte_array())
            .collect();
        if has_witness_commitment(coinbase) {
            // The coinbase's wtxid counts as zero in the witness tree (BIP141).
            let wtxids: Vec<[u8; 32]> = block
                .txdata
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    if i == 0 {
                        [0u8; 32]
                    } else {
                        t.compute_wtxid().to_byte_array()
                    }
                })
                .collect();
            let (branch, _) = branch_and_root(&wtxids, index);
            result["wmerkle"] = json!(branch.iter().map(rpc_hex).collect::<Vec<_>>());
        } else {
            let (branch, _) = branch_and_root(&txids, index);
            result["merkle"] = json!(branch.iter().map(rpc_hex).collect::<Vec<_>>());
        }
        if cb {
            let (branch, _) = branch_and_root(&txids, 0);
            result["cb_tx"] = json!(bitcoin::consensus::serialize(coinbase).to_lower_hex_string());
            result["cb_proof"] = json!(branch.iter().map(rpc_hex).collect::<Vec<_>>());
        }
        Ok(result)
    }
}

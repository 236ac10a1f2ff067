//! `blockchain.transaction.get_merkle_witness` (protocol 1.7): a proof that a transaction with a
//! given wtxid was mined, through the coinbase's witness commitment (BIP141): the wtxid's branch
//! up to the witness root, and the coinbase with its own branch up to the header's merkle root.
//! The proof is the view's ([`crate::view::WitnessProof`]); this renders it.

use bitcoin::hex::DisplayHex;
use bitcoin::Txid;
use serde_json::{json, Value};

use super::methods::{view_err, Ctx};
use super::rpc::RpcError;
use crate::view::merkle::rpc_hex;

impl Ctx<'_> {
    /// `get_merkle_witness(txid, height=None, cb=false)`.
    pub(crate) fn get_merkle_witness(
        &self,
        txid: Txid,
        height: Option<u64>,
        cb: bool,
    ) -> Result<Value, RpcError> {
        let view = self.view();
        let pos = Self::confirmed_position(&view, txid, height)?;
        let proof = view
            .witness_proof(&txid, pos.height, pos.pos)
            .map_err(view_err)?;
        let hexes = |branch: &[[u8; 32]]| branch.iter().map(rpc_hex).collect::<Vec<_>>();
        let mut result = json!({
            "wtxid": proof.wtxid.to_string(),
            "block_height": proof.confirmation.height,
            "block_hash": proof.confirmation.hash.to_string(),
            "pos": proof.pos,
        });
        let key = match proof.branch.1 {
            true => "wmerkle",
            false => "merkle",
        };
        result[key] = json!(hexes(&proof.branch.0));
        if cb {
            let coinbase = bitcoin::consensus::serialize(&proof.coinbase);
            result["cb_tx"] = json!(coinbase.to_lower_hex_string());
            result["cb_proof"] = json!(hexes(&proof.coinbase_branch));
        }
        Ok(result)
    }
}

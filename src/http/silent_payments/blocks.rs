//! What BlindBit light wallets fetch per block besides tweaks, in BlindBit Oracle's v1 shapes
//! (its `src/server/api.go` at e9d1f4c, the API spdk's `backend-blindbit-v1`, Dana and
//! BlindBit Scan speak), and BlindBit's v2 `compute-index`. The filters and the spent-index are
//! computed from the block and the kernel's undo data when asked, in a query-pool slot in the
//! host's turn like any Esplora block read (HTTP keeps no cost account: its bounds are the
//! host's share of the pool and the queue); `utxos` and `compute-index` from the tweak rows.

use bitcoin::hex::DisplayHex;
use bitcoin::{Block, BlockHash};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use super::super::{error, reply};
use super::gcs;
use crate::view::{ChainView, ViewError};

/// BlindBit's `filter_type` of both its filters.
const FILTER_TYPE: u32 = 4;

/// An answer or the error response to send instead.
type Answer = Result<Value, Response<Full<Bytes>>>;

/// `filter/new-utxos/{height}`: the filter of the x-only keys of every taproot output of the
/// block (every transaction's, eligible or not), as BlindBit builds it.
pub(super) fn new_utxos_filter(view: &ChainView, height: &str) -> Response<Full<Bytes>> {
    respond((|| {
        let (height, hash) = block_at(view, height)?;
        let (block, _) = view.block(&hash).map_err(failed)?;
        let keys: Vec<&[u8]> = block
            .txdata
            .iter()
            .flat_map(|tx| tx.output.iter())
            .filter(|o| o.script_pubkey.is_p2tr())
            .map(|o| &o.script_pubkey.as_bytes()[2..34])
            .collect();
        Ok(filter_answer(height, &hash, &gcs::filter(&hash, &keys)))
    })())
}

/// `filter/spent/{height}`: the filter of [`spent_elements`].
pub(super) fn spent_filter(view: &ChainView, height: &str) -> Response<Full<Bytes>> {
    respond((|| {
        let (height, hash) = block_at(view, height)?;
        let elements = spent_elements(view, &hash)?;
        Ok(filter_answer(height, &hash, &gcs::filter(&hash, &elements)))
    })())
}

/// `spent-index/{height}`: [`spent_elements`] in block order, each 16 hex digits. BlindBit
/// answers a bare `[]` for a block without any; this is always the object its clients parse.
pub(super) fn spent_index(view: &ChainView, height: &str) -> Response<Full<Bytes>> {
    respond((|| {
        let (_, hash) = block_at(view, height)?;
        let elements = spent_elements(view, &hash)?;
        let data: Vec<String> = elements.iter().map(|e| e.to_lower_hex_string()).collect();
        Ok(json!({ "block_hash": hash.to_string(), "data": data }))
    })())
}

/// `utxos/{height}`: every taproot output of the block's eligible transactions, spent ones
/// marked (a wallet needs a transaction's every output to find its later `k`). Unlike BlindBit,
/// with their real `block_height` and `timestamp` (BlindBit's are 0), in block order (BlindBit's
/// by txid), and transactions whose outputs are all spent are kept (BlindBit drops them).
pub(super) fn utxos(view: &ChainView, height: &str) -> Response<Full<Bytes>> {
    respond((|| {
        let (height, hash) = block_at(view, height)?;
        let time = view.header(height).map_or(0, |h| h.time);
        let mut out = Vec::new();
        for tx in tweaks_at(view, height)? {
            for (vout, key, value) in &tx.outputs {
                let spent = view.tweak_output_spent(&tx, *vout).map_err(failed)?;
                out.push(json!({
                    "txid": tx.txid.to_string(),
                    "vout": vout,
                    "value": value,
                    "scriptpubkey": format!("5120{}", key.to_lower_hex_string()),
                    "block_height": height,
                    "block_hash": hash.to_string(),
                    "timestamp": time,
                    "spent": spent,
                }));
            }
        }
        Ok(Value::Array(out))
    })())
}

/// `compute-index/{height}`, BlindBit v2's (`internal/server/handler.go`): each eligible
/// transaction's id, tweak and the first 8 bytes of each taproot output's x-only key, in block
/// order, under a `block_identifier`.
pub(super) fn compute_index(view: &ChainView, height: &str) -> Response<Full<Bytes>> {
    respond((|| {
        let (height, hash) = block_at(view, height)?;
        let index: Vec<Value> = tweaks_at(view, height)?
            .iter()
            .map(|tx| {
                let outputs: Vec<String> = tx
                    .outputs
                    .iter()
                    .map(|(_, key, _)| key[..8].to_lower_hex_string())
                    .collect();
                json!({
                    "txid": tx.txid.to_string(),
                    "tweak": tx.tweak.to_lower_hex_string(),
                    "outputs": outputs,
                })
            })
            .collect();
        Ok(json!({
            "block_identifier": { "block_hash": hash.to_string(), "block_height": height },
            "index": index,
        }))
    })())
}

/// BlindBit's spent elements of a block: for every input spending a taproot output, in block
/// order, [`gcs::spent_element`] of its outpoint.
fn spent_elements(
    view: &ChainView,
    hash: &BlockHash,
) -> Result<Vec<[u8; 8]>, Response<Full<Bytes>>> {
    let (block, _) = view.block(hash).map_err(failed)?;
    let undo = view.undo(hash).map_err(failed)?;
    let spending = spending_transactions(&block);
    if spending.len() != undo.txs.len() {
        return Err(failed(ViewError::Damaged(format!(
            "block {hash}'s undo data has {} transactions, the block {}",
            undo.txs.len(),
            spending.len()
        ))));
    }
    let mut elements = Vec::new();
    for (tx, spent) in spending.iter().zip(&undo.txs) {
        if tx.input.len() != spent.len() {
            return Err(failed(ViewError::Damaged(format!(
                "block {hash}'s undo data has {} spent outputs for transaction {}, which has {} inputs",
                spent.len(),
                tx.compute_txid(),
                tx.input.len()
            ))));
        }
        for (input, prevout) in tx.input.iter().zip(spent) {
            if prevout.txout.script_pubkey.is_p2tr() {
                elements.push(gcs::spent_element(&input.previous_output, hash));
            }
        }
    }
    Ok(elements)
}

/// The block's transactions after its coinbase (those with undo data).
fn spending_transactions(block: &Block) -> &[bitcoin::Transaction] {
    block.txdata.get(1..).unwrap_or(&[])
}

/// A filter answer as BlindBit's.
fn filter_answer(height: u32, hash: &BlockHash, data: &[u8]) -> Value {
    json!({
        "block_hash": hash.to_string(),
        "block_height": height,
        "data": data.to_lower_hex_string(),
        "filter_type": FILTER_TYPE,
    })
}

/// The height in a path and the view's block there: 400 for a bad height, 404 above the tip.
fn block_at(view: &ChainView, height: &str) -> Result<(u32, BlockHash), Response<Full<Bytes>>> {
    let height = super::parse_height(height)?;
    match view.block_hash(height) {
        Some(hash) => Ok((height, hash)),
        None => Err(super::above_tip(height)),
    }
}

/// The block's eligible transactions.
fn tweaks_at(
    view: &ChainView,
    height: u32,
) -> Result<Vec<crate::view::TxTweak>, Response<Full<Bytes>>> {
    match view.block_tweaks(height) {
        Ok(Some(txs)) => Ok(txs),
        Ok(None) => Err(super::above_tip(height)),
        Err(e) => Err(failed(e)),
    }
}

fn failed(e: ViewError) -> Response<Full<Bytes>> {
    error(StatusCode::INTERNAL_SERVER_ERROR, e)
}

fn respond(answer: Answer) -> Response<Full<Bytes>> {
    match answer {
        Ok(body) => reply(StatusCode::OK, body),
        Err(response) => response,
    }
}

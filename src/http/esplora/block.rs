//! Blocks as Esplora shows them, and the `/block`, `/block-height` and `/blocks` endpoints.
//! Blocks of the indexed chain only: a block another branch holds is not found.

use bitcoin::hashes::Hash;
use bitcoin::{BlockHash, Txid};
use serde::Serialize;

use super::api::{binary, json, text, Failure, Reply, BLOCKS_PER_PAGE, TXS_PER_PAGE};
use super::tx::TxValue;
use crate::http::context::Query;
use crate::view::ChainView;

/// A block's summary as Esplora shows it.
#[derive(Debug, Serialize)]
struct BlockValue {
    id: BlockHash,
    height: u32,
    version: u32,
    timestamp: u32,
    tx_count: u32,
    size: usize,
    weight: u64,
    merkle_root: bitcoin::TxMerkleNode,
    previousblockhash: Option<BlockHash>,
    mediantime: u32,
    nonce: u32,
    bits: u32,
    difficulty: f64,
}

fn block_not_found() -> Failure {
    Failure::not_found("Block not found")
}

/// The height of an indexed block.
fn height_of(view: &ChainView<'_>, hash: &BlockHash) -> Result<u32, Failure> {
    view.height_of(hash).ok_or_else(block_not_found)
}

fn block_value(view: &ChainView<'_>, height: u32, hash: &BlockHash) -> Result<BlockValue, Failure> {
    let (block, size) = view.block(hash)?;
    let header = block.header;
    Ok(BlockValue {
        id: *hash,
        height,
        version: header.version.to_consensus() as u32,
        timestamp: header.time,
        tx_count: block.txdata.len() as u32,
        size,
        weight: block.weight().to_wu(),
        merkle_root: header.merkle_root,
        previousblockhash: (header.prev_blockhash != BlockHash::all_zeros())
            .then_some(header.prev_blockhash),
        mediantime: view.median_time_past(height),
        nonce: header.nonce,
        bits: header.bits.to_consensus(),
        difficulty: header.difficulty_float(),
    })
}

/// `GET /blocks/tip/height`.
pub fn tip_height(ctx: &Query) -> Reply {
    let (height, _) = ctx.view().tip().ok_or_else(block_not_found)?;
    text(height.to_string())
}

/// `GET /blocks/tip/hash`.
pub fn tip_hash(ctx: &Query) -> Reply {
    let (_, hash) = ctx.view().tip().ok_or_else(block_not_found)?;
    text(hash.to_string())
}

/// `GET /block-height/:height`.
pub fn hash_at(ctx: &Query, height: u32) -> Reply {
    let hash = ctx.view().block_hash(height).ok_or_else(block_not_found)?;
    text(hash.to_string())
}

/// `GET /blocks[/:start_height]`: ten blocks down from the start (the tip by default).
pub fn list(ctx: &Query, start: Option<u32>) -> Reply {
    let view = ctx.view();
    let (tip, _) = view.tip().ok_or_else(block_not_found)?;
    let start = start.unwrap_or(tip);
    if start > tip {
        return Err(block_not_found());
    }
    let mut blocks = Vec::new();
    for height in (start.saturating_sub(BLOCKS_PER_PAGE - 1)..=start).rev() {
        let hash = view.block_hash(height).ok_or_else(block_not_found)?;
        blocks.push(block_value(&view, height, &hash)?);
    }
    json(&blocks)
}

/// `GET /block/:hash`.
pub fn summary(ctx: &Query, hash: &BlockHash) -> Reply {
    let view = ctx.view();
    let height = height_of(&view, hash)?;
    json(&block_value(&view, height, hash)?)
}

/// `GET /block/:hash/header`: the 80 bytes in hex.
pub fn header(ctx: &Query, hash: &BlockHash) -> Reply {
    let view = ctx.view();
    let height = height_of(&view, hash)?;
    let header = view.header(height).ok_or_else(block_not_found)?;
    text(bitcoin::consensus::encode::serialize_hex(&header))
}

/// Whether a block is in the best chain (`/block/:hash/status`).
#[derive(Debug, Serialize)]
struct BlockStatus {
    in_best_chain: bool,
    height: Option<u32>,
    next_best: Option<BlockHash>,
}

/// `GET /block/:hash/status`: not in the best chain also for a block nobody knows (as Esplora).
pub fn status(ctx: &Query, hash: &BlockHash) -> Reply {
    let view = ctx.view();
    let status = match view.height_of(hash) {
        Some(height) => BlockStatus {
            in_best_chain: true,
            height: Some(height),
            next_best: view.block_hash(height + 1),
        },
        None => BlockStatus {
            in_best_chain: false,
            height: None,
            next_best: None,
        },
    };
    json(&status)
}

fn block_txids(ctx: &Query, hash: &BlockHash) -> Result<Vec<Txid>, Failure> {
    let view = ctx.view();
    let height = height_of(&view, hash)?;
    view.block_txids(height)?.ok_or_else(block_not_found)
}

/// `GET /block/:hash/txids`.
pub fn txids(ctx: &Query, hash: &BlockHash) -> Reply {
    json(&block_txids(ctx, hash)?)
}

/// `GET /block/:hash/txid/:index`.
pub fn txid_at(ctx: &Query, hash: &BlockHash, index: usize) -> Reply {
    let txids = block_txids(ctx, hash)?;
    let txid = txids
        .get(index)
        .ok_or_else(|| Failure::not_found("tx index out of range"))?;
    text(txid.to_string())
}

/// `GET /block/:hash/txs[/:start_index]`: 25 transactions from `start`, a multiple of 25.
pub fn txs(ctx: &Query, hash: &BlockHash, start: usize) -> Reply {
    let view = ctx.view();
    height_of(&view, hash)?;
    if !start.is_multiple_of(TXS_PER_PAGE) {
        return Err(Failure::bad(format!(
            "start index must be a multiple of {TXS_PER_PAGE}"
        )));
    }
    let page = view
        .block_transactions(hash, start, TXS_PER_PAGE)?
        .ok_or_else(|| Failure::bad("start index out of range"))?;
    let network = view.network();
    let page: Vec<TxValue> = page.iter().map(|f| TxValue::found(f, network)).collect();
    json(&page)
}

/// `GET /block/:hash/raw`: the serialized block.
pub fn raw(ctx: &Query, hash: &BlockHash) -> Reply {
    let view = ctx.view();
    height_of(&view, hash)?;
    binary(view.block_bytes(hash)?)
}

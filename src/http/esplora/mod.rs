//! The Esplora REST API (Blockstream/esplora `API.md`) over the index and the mempool, with the
//! JSON shapes, status codes and error texts of Blockstream's electrs, so that its clients
//! (esplora-client, bdk_esplora, block explorers) work unchanged. Every answer is bounded: 25
//! confirmed transactions a page, at most 50 mempool ones, 10 blocks.

mod address;
mod api;
mod block;
mod mempool;
mod tx;

use hyper::Method;

use crate::http::context::Query;
use api::{block_hash, number, txid, unknown};
pub use api::{Failure, Reply, TxStatus, BLOCKS_PER_PAGE, MEMPOOL_TXS, TXS_PER_PAGE};

/// Answers one request of the Esplora API; unknown paths get Esplora's 404.
pub fn route(ctx: &Query, method: &Method, path: &str, body: &[u8]) -> Reply {
    // Esplora's paths have at most six parts; a seventh only makes the path unknown.
    let parts: Vec<&str> = path.split('/').skip(1).take(7).collect();
    if method == Method::POST {
        return match parts.as_slice() {
            ["tx"] => tx::broadcast(ctx, body),
            _ => Err(unknown(path)),
        };
    }
    if method != Method::GET {
        return Err(unknown(path));
    }
    match parts.as_slice() {
        ["blocks", "tip", "height"] => block::tip_height(ctx),
        ["blocks", "tip", "hash"] => block::tip_hash(ctx),
        // As Esplora: a start that is not a number means the tip.
        ["blocks"] => block::list(ctx, None),
        ["blocks", start] => block::list(ctx, start.parse().ok()),
        ["block-height", height] => block::hash_at(ctx, number(height)?),
        ["block", hash] => block::summary(ctx, &block_hash(hash)?),
        ["block", hash, "header"] => block::header(ctx, &block_hash(hash)?),
        ["block", hash, "status"] => block::status(ctx, &block_hash(hash)?),
        ["block", hash, "txids"] => block::txids(ctx, &block_hash(hash)?),
        ["block", hash, "txid", index] => block::txid_at(ctx, &block_hash(hash)?, number(index)?),
        ["block", hash, "txs"] => block::txs(ctx, &block_hash(hash)?, 0),
        // As Esplora: a start that is not a number means 0.
        ["block", hash, "txs", start] => {
            block::txs(ctx, &block_hash(hash)?, start.parse().unwrap_or(0))
        }
        ["block", hash, "raw"] => block::raw(ctx, &block_hash(hash)?),
        ["tx", id] => tx::json(ctx, &txid(id)?),
        ["tx", id, "hex"] => tx::hex(ctx, &txid(id)?),
        ["tx", id, "raw"] => tx::raw(ctx, &txid(id)?),
        ["tx", id, "status"] => tx::status(ctx, &txid(id)?),
        ["tx", id, "merkle-proof"] => tx::merkle_proof(ctx, &txid(id)?),
        ["tx", id, "merkleblock-proof"] => tx::merkleblock_proof(ctx, &txid(id)?),
        ["tx", id, "outspend", vout] => tx::outspend(ctx, &txid(id)?, number(vout)?),
        ["tx", id, "outspends"] => tx::outspends(ctx, &txid(id)?),
        [kind @ ("address" | "scripthash"), script, rest @ ..] => {
            address::route(ctx, kind, script, rest, path)
        }
        ["mempool"] => mempool::stats(ctx),
        ["mempool", "txids"] => mempool::txids(ctx),
        ["mempool", "recent"] => mempool::recent(ctx),
        ["fee-estimates"] => mempool::fee_estimates(ctx),
        _ => Err(unknown(path)),
    }
}

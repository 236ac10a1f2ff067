//! The Esplora REST API (Blockstream/esplora `API.md`) over the index and the mempool, with the
//! JSON shapes, status codes and error texts of Blockstream's electrs, so that its clients
//! (esplora-client, bdk_esplora, block explorers) work unchanged. Every answer is bounded: 25
//! confirmed transactions a page, at most 50 mempool ones, 10 blocks.

mod address;
mod block;
mod mempool;
mod tx;

use std::str::FromStr;

use bitcoin::{BlockHash, Txid};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Response, StatusCode};
use serde::Serialize;

use super::HttpContext;
use crate::index::query::QueryError;

/// Confirmed transactions per page of a history or a block (Esplora's `CHAIN_TXS_PER_PAGE`).
pub const TXS_PER_PAGE: usize = 25;
/// Most mempool transactions in an address's history (Esplora's `MAX_MEMPOOL_TXS`).
pub const MEMPOOL_TXS: usize = 50;
/// Blocks per `/blocks` answer (Esplora's `BLOCK_LIMIT`).
pub const BLOCKS_PER_PAGE: u32 = 10;

/// An answer other than 200: its status and the text Esplora sends with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub StatusCode, pub String);

impl Failure {
    fn bad(message: impl Into<String>) -> Self {
        Failure(StatusCode::BAD_REQUEST, message.into())
    }

    fn not_found(message: impl Into<String>) -> Self {
        Failure(StatusCode::NOT_FOUND, message.into())
    }

    fn internal(message: impl std::fmt::Display) -> Self {
        Failure(StatusCode::INTERNAL_SERVER_ERROR, message.to_string())
    }
}

impl From<QueryError> for Failure {
    fn from(e: QueryError) -> Self {
        match e {
            // A property of what was asked for, as Esplora's "too big history" (400).
            QueryError::TooLarge { .. } => Failure::bad(e.to_string()),
            other => Failure::internal(other),
        }
    }
}

/// What a route answers.
pub type Reply = Result<Response<Full<Bytes>>, Failure>;

/// Answers one request of the Esplora API; unknown paths get Esplora's 404.
pub fn route(ctx: &HttpContext, method: &Method, path: &str, body: &[u8]) -> Reply {
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

/// Esplora's answer to a path it does not serve.
fn unknown(path: &str) -> Failure {
    Failure::not_found(format!("endpoint does not exist {path:?}"))
}

fn txid(text: &str) -> Result<Txid, Failure> {
    Txid::from_str(text).map_err(|_| Failure::bad("Invalid hash string"))
}

fn block_hash(text: &str) -> Result<BlockHash, Failure> {
    BlockHash::from_str(text).map_err(|_| Failure::bad("Invalid hash string"))
}

fn number<T: FromStr>(text: &str) -> Result<T, Failure> {
    text.parse().map_err(|_| Failure::bad("Invalid number"))
}

/// A 200 answer with a body of `content_type`.
fn ok(content_type: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    super::answer_with(hyper::StatusCode::OK, content_type, body)
}

fn json(value: &impl Serialize) -> Reply {
    let body = serde_json::to_vec(value).map_err(Failure::internal)?;
    Ok(ok("application/json", body))
}

fn text(body: String) -> Reply {
    Ok(ok("text/plain", body))
}

fn binary(body: Vec<u8>) -> Reply {
    Ok(ok("application/octet-stream", body))
}

/// Whether a transaction is in a block, as Esplora shows it (`status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TxStatus {
    confirmed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    block_height: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    block_hash: Option<BlockHash>,
    #[serde(skip_serializing_if = "Option::is_none")]
    block_time: Option<u32>,
}

impl TxStatus {
    const UNCONFIRMED: TxStatus = TxStatus {
        confirmed: false,
        block_height: None,
        block_hash: None,
        block_time: None,
    };

    /// In the indexed block at `height`; unconfirmed if the chain no longer has one there.
    fn at(ctx: &HttpContext, height: u32) -> Self {
        match ctx.index.with_chain(|c| c.header(height).copied()) {
            Some(header) => TxStatus {
                confirmed: true,
                block_height: Some(height),
                block_hash: Some(header.block_hash()),
                block_time: Some(header.time),
            },
            None => TxStatus::UNCONFIRMED,
        }
    }
}

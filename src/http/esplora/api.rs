//! What every Esplora endpoint shares: the page sizes, the parsing of path parts, the failures
//! with their status codes and texts, the 200 bodies, and a transaction's status.

use std::str::FromStr;

use bitcoin::{BlockHash, Txid};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use serde::Serialize;

use crate::index::query::QueryError;
use crate::view::{Confirmation, ViewError};

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
    pub(super) fn bad(message: impl Into<String>) -> Self {
        Failure(StatusCode::BAD_REQUEST, message.into())
    }

    pub(super) fn not_found(message: impl Into<String>) -> Self {
        Failure(StatusCode::NOT_FOUND, message.into())
    }

    pub(super) fn internal(message: impl std::fmt::Display) -> Self {
        Failure(StatusCode::INTERNAL_SERVER_ERROR, message.to_string())
    }
}

impl From<QueryError> for Failure {
    fn from(e: QueryError) -> Self {
        match e {
            // A property of what was asked for, as Esplora's "too big history" (400).
            QueryError::TooLarge { .. } => Failure::bad(e.to_string()),
            // Seen only while the server stops (a client that went reads no answer).
            QueryError::Abandoned => Failure(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
            other => Failure::internal(other),
        }
    }
}

impl From<ViewError> for Failure {
    fn from(e: ViewError) -> Self {
        match e {
            ViewError::Query(e) => e.into(),
            ViewError::ChainChanged => Failure(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
            other => Failure::internal(other),
        }
    }
}

/// What a route answers.
pub type Reply = Result<Response<Full<Bytes>>, Failure>;

/// A 200 answer with a body of `content_type`.
pub(super) fn ok(content_type: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    crate::http::serve::answer_with(hyper::StatusCode::OK, content_type, body)
}

pub(super) fn json(value: &impl Serialize) -> Reply {
    let body = serde_json::to_vec(value).map_err(Failure::internal)?;
    Ok(ok("application/json", body))
}

pub(super) fn text(body: String) -> Reply {
    Ok(ok("text/plain", body))
}

pub(super) fn binary(body: Vec<u8>) -> Reply {
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
    pub(super) const UNCONFIRMED: TxStatus = TxStatus {
        confirmed: false,
        block_height: None,
        block_hash: None,
        block_time: None,
    };

    /// In `block`, or unconfirmed.
    pub fn of(block: Option<Confirmation>) -> Self {
        match block {
            Some(block) => TxStatus {
                confirmed: true,
                block_height: Some(block.height),
                block_hash: Some(block.hash),
                block_time: Some(block.time),
            },
            None => TxStatus::UNCONFIRMED,
        }
    }
}

/// Esplora's answer to a path it does not serve.
pub(super) fn unknown(path: &str) -> Failure {
    Failure::not_found(format!("endpoint does not exist {path:?}"))
}

pub(super) fn txid(text: &str) -> Result<Txid, Failure> {
    Txid::from_str(text).map_err(|_| Failure::bad("Invalid hash string"))
}

pub(super) fn block_hash(text: &str) -> Result<BlockHash, Failure> {
    BlockHash::from_str(text).map_err(|_| Failure::bad("Invalid hash string"))
}

pub(super) fn number<T: FromStr>(text: &str) -> Result<T, Failure> {
    text.parse().map_err(|_| Failure::bad("Invalid number"))
}

//! What every Electrum handler shares: the context a call reads ([`Ctx`]: the back end, the
//! view charged to the session, the mempool, the negotiated version) and the errors common to
//! many methods (a read that failed, a history over the limit, no mempool, still syncing). The
//! handlers themselves are in their namespaces' files.

use super::backend::Backend;
use super::rpc::{RpcError, BACKEND_ERROR, HISTORY_TOO_LARGE};
use crate::index::query::QueryError;
use crate::mempool::Mempool;
use crate::types::ProtocolVersion;
use crate::view::{ChainView, Cost, CostMeter, ViewError};
use crate::work::HostShares;

/// The answer for everything that needs the mempool when this cairn runs without one.
fn no_mempool() -> RpcError {
    RpcError::new(
        BACKEND_ERROR,
        "mempool not available: this cairn runs without an index, so it keeps no mempool; unconfirmed data, fee figures and broadcast are not served",
    )
}

/// The answer to every request but `server.*` during the initial download.
pub(crate) fn syncing_error(sync: crate::kernel::SyncProgress) -> RpcError {
    RpcError::new(
        BACKEND_ERROR,
        format!(
            "server is syncing: height {} of {}",
            sync.height, sync.headers
        ),
    )
}

/// A read's failure as an answer (see [`backend_err`] for a history over the limit).
pub(crate) fn view_err(e: ViewError) -> RpcError {
    match e {
        ViewError::Query(e) => backend_err(e),
        other => RpcError::new(BACKEND_ERROR, other.to_string()),
    }
}

/// A query's failure as an answer; a history over the limit gets the code protocol 1.7
/// standardised (older sessions see ElectrumX 1.x's code 1, `Session::call`).
pub(crate) fn backend_err(e: QueryError) -> RpcError {
    match e {
        QueryError::TooLarge { limit } => RpcError::new(
            HISTORY_TOO_LARGE,
            format!(
                "history too large: more than {limit} entries (the server's max_history limit)"
            ),
        ),
        other => RpcError::new(BACKEND_ERROR, other.to_string()),
    }
}

/// What a method's handler reads: the back end, and the protocol and transport of the
/// connection asking. Handlers that change the connection's state are `Session`'s own.
///
/// Its handlers are not in this file: each is in its namespace's (`server.rs`, `headers.rs`,
/// `scripthash.rs`, `transaction.rs`, `mempool.rs`, `outpoint.rs`, and the silent-payment
/// dialects `cake_tweaks.rs` and `frigate_scan.rs`), beside its renderer, so a method is found
/// by its name. Here are what they share: the view, the mempool, the protocol's version.
pub(crate) struct Ctx<'a> {
    /// What the sessions read from and publish to.
    pub(crate) backend: &'a Backend,
    /// Where the reads of this connection's requests are counted.
    pub(crate) meter: &'a CostMeter,
    /// The asking connection's host: what it may spend, paid ahead of a broadcast's checks.
    pub(crate) host: &'a HostShares,
    /// The protocol version whose rules apply.
    pub(crate) version: ProtocolVersion,
    /// Whether a long answer may be streamed now (a transport that takes answers in pieces,
    /// outside a batch).
    pub(crate) streams: bool,
}

impl Ctx<'_> {
    /// Whether a long answer may be streamed now.
    pub(crate) fn streams_answers(&self) -> bool {
        self.streams
    }

    /// Whether the client negotiated protocol 1.6 or later.
    pub(crate) fn v16(&self) -> bool {
        self.version >= ProtocolVersion::new(1, 6, 0)
    }

    /// Whether the client negotiated protocol 1.7 or later.
    pub(crate) fn v17(&self) -> bool {
        self.version >= ProtocolVersion::new(1, 7, 0)
    }

    /// One view of the read model for this request, its reads charged to the session.
    pub(crate) fn view(&self) -> ChainView<'_> {
        self.backend.model.metered_view(self.meter)
    }

    /// The mempool, or why there is none (a cairn without an index keeps none).
    pub(crate) fn mempool(&self) -> Result<&Mempool, RpcError> {
        self.backend
            .model
            .mempool()
            .map(|p| &**p)
            .ok_or_else(no_mempool)
    }

    /// Charges work that reads no rows at ElectrumX's price in units (50 rows a unit).
    pub(super) fn charge_units(&self, units: u64) {
        self.meter.add(Cost {
            rows: units * 50,
            bytes: 0,
        });
    }
}

//! Histories of any size: a short `get_history` answer is built from the view (which caches
//! long histories and status hash states and extends them by later blocks' rows); a long one
//! is written to the client page by page as it is read from the store, so the memory an answer
//! holds is one page, however long the history.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::backend::Backend;
use super::methods::{backend_err, history_entries_text, view_err, Ctx, MAX_BUFFERED_HISTORY};
use super::rpc::{error_value, RpcError};
use crate::index::query::{QueryError, HISTORY_PAGE};
use crate::listen::cost::{self, Verdict};
use crate::listen::{HostShares, Slot, WorkPool};
use crate::types::{run_marked, ScriptHash};
use crate::view::{Cost, CostMeter, ViewError};

impl Ctx<'_> {
    /// A script's status: its confirmed history then its mempool entries (the view keeps long
    /// histories' hash states). `None` when it has no history.
    pub(crate) fn status_of(&self, sh: &ScriptHash) -> Result<Option<String>, RpcError> {
        self.view()
            .status(sh, self.backend.config.max_history)
            .map_err(view_err)
    }

    /// `get_history`'s answer when it can be built in memory: a history of at most one page, or
    /// any within [`MAX_BUFFERED_HISTORY`] where it cannot be streamed. `Ok(None)`: a longer one,
    /// to stream.
    pub(crate) fn history_in_memory(&self, sh: &ScriptHash) -> Result<Option<String>, RpcError> {
        let max = self.backend.config.max_history;
        let (limit, streamable) = match self.streams_answers() {
            true => (self.backend.config.stream_history_from.min(max), true),
            false => (MAX_BUFFERED_HISTORY.min(max), false),
        };
        match self.view().history(sh, limit) {
            Ok(all) => Ok(Some(super::methods::history_text(&all))),
            // Over the limit: stream it when it may be and is under the cap, else say why not.
            Err(ViewError::Query(QueryError::TooLarge { .. })) => match (streamable, limit < max) {
                (true, true) => Ok(None),
                (false, true) => Err(too_long_to_buffer(limit)),
                (_, false) => Err(backend_err(QueryError::TooLarge { limit })),
            },
            Err(e) => Err(view_err(e)),
        }
    }
}

/// The error for a history too long to build in memory where it cannot be streamed.
fn too_long_to_buffer(limit: usize) -> RpcError {
    RpcError::new(
        super::rpc::HISTORY_TOO_LARGE,
        format!("history too large to answer in a batch or over WebSocket: more than {limit} entries; ask for it alone over TCP or TLS, where it is streamed"),
    )
}

/// A long `get_history` answer to write out in pieces.
pub struct HistoryJob {
    pub(crate) backend: Arc<Backend>,
    pub(crate) sh: ScriptHash,
    pub(crate) id: serde_json::Value,
    /// Whether the client speaks 1.7 (whose "history too large" code is 10001, not 1).
    pub(crate) v17: bool,
    /// The method's metrics label, and when its request came: the request is counted once
    /// the whole answer is written.
    pub(crate) method: &'static str,
    pub(crate) started: std::time::Instant,
}

/// One piece of a streamed answer; `true` with the last.
pub type Piece = (String, bool);

impl HistoryJob {
    /// Reads the history in one view of the index and sends the answer as pieces of about a
    /// page each: first the count is checked against `electrum_max_history` (an error line
    /// then, before any of the result), then each page as it is read, then the mempool
    /// entries. Runs on a blocking thread, reading in a slot of `pool` taken in `host`'s turn
    /// and given back while it waits for the client; stops when the receiver is gone or the
    /// pool closes. Returns what it read.
    pub fn run(self, tx: mpsc::Sender<Piece>, pool: &WorkPool, host: &HostShares) -> Cost {
        let rt = tokio::runtime::Handle::current();
        let slot = || rt.block_on(pool.slot(host)).ok();
        let meter = CostMeter::default();
        // Each page is charged to the host as it is sent; at the hard limit the stream stops.
        let pay = |read: Cost, bytes: usize| {
            let limits = self.backend.config.cost;
            host.cost.charge(cost::units(0, read, bytes), &limits) != Verdict::Close
        };
        run_marked(&[pool.closing()], || self.answer(&meter, &tx, slot, pay));
        let read = meter.take();
        crate::metrics::metrics().electrum_read(self.method, read.rows, read.bytes);
        read
    }

    /// [`HistoryJob::run`]'s answer, read through a view charged to `meter`, in the slots
    /// `slot` gives (none: the pool closed), each piece's reads and bytes paid with `pay`
    /// (`false`: the host may not go on).
    fn answer(
        &self,
        meter: &CostMeter,
        tx: &mpsc::Sender<Piece>,
        slot: impl Fn() -> Option<Slot>,
        pay: impl Fn(Cost, usize) -> bool,
    ) {
        let mut held = slot();
        if held.is_none() {
            return;
        }
        let limit = self.backend.config.max_history;
        let chain = self.backend.model.metered_view(meter);
        let mempool = chain.mempool_entries(&self.sh);
        let counted =
            chain
                .confirmed_len(&self.sh, limit)
                .and_then(|n| match n + mempool.len() > limit {
                    true => Err(QueryError::TooLarge { limit }.into()),
                    false => Ok(n),
                });
        if let Err(e) = counted {
            drop(held);
            let mut err = view_err(e);
            if err.code == super::rpc::HISTORY_TOO_LARGE && !self.v17 {
                err.code = super::rpc::BAD_REQUEST;
            }
            let _ = tx.blocking_send((error_value(self.id.clone(), &err).to_string(), true));
            return;
        }
        let mut first = true;
        let head = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":[", self.id);
        let mut piece = head;
        let page = self
            .backend
            .config
            .stream_history_from
            .clamp(1, HISTORY_PAGE);
        let mut paid = Cost::default();
        let sent = chain.confirmed_pages(&self.sh, page, |page| {
            let entries: Vec<_> = page
                .iter()
                .map(|e| (e.txid, i64::from(e.height), None))
                .collect();
            history_entries_text(&mut piece, &entries, first);
            first = false;
            let read = chain.cost();
            let fresh = Cost {
                rows: read.rows - paid.rows,
                bytes: read.bytes - paid.bytes,
            };
            paid = read;
            if !pay(fresh, piece.len()) {
                return Err(QueryError::Abandoned); // Over the hard limit: cut short.
            }
            // The slot is given back while the client takes the piece, and taken again to
            // read the next page.
            drop(held.take());
            if tx
                .blocking_send((std::mem::take(&mut piece), false))
                .is_err()
            {
                return Ok(false); // The client went.
            }
            held = slot();
            match held {
                Some(_) => Ok(true),
                // The pool closed: the answer must not end as if it were whole.
                None => Err(QueryError::Abandoned),
            }
        });
        if let Err(e) = sent {
            // Part of the result is out: the answer cannot become an error any more. Ending
            // the piece stream unfinished makes the session drop the connection.
            crate::outsider_log!(warn, "electrum: streaming a history failed midway: {e}");
            return;
        }
        if tx.is_closed() {
            return;
        }
        drop(held);
        history_entries_text(&mut piece, &mempool, first);
        piece.push_str("]}");
        pay(Cost::default(), piece.len());
        let _ = tx.blocking_send((piece, true));
    }
}

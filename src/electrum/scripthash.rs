//! The script methods (`blockchain.scripthash.*`, renamed `blockchain.scriptpubkey.*` in 1.7):
//! balance, history, mempool entries, unspent outputs and subscriptions with their
//! notifications. Histories of any size: a short `get_history` answer is built from the view
//! (which caches long histories and status hash states and extends them by later blocks' rows);
//! a long one is written to the client page by page as it is read from the store, so the memory
//! an answer holds is one page, however long the history.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::backend::Backend;
use super::context::{backend_err, view_err, Ctx};
use super::rpc::{error_value, Piece, Reply, RpcError};
use crate::index::query::{QueryError, HISTORY_PAGE};
use crate::types::{run_marked, HistoryEntry, ScriptHash};
use crate::view::{status, Cost, CostMeter, ViewError};
use crate::work::cost::{self, Verdict};
use crate::work::{HostShares, Slot, WorkPool};

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
            Ok(all) => Ok(Some(history_text(&all))),
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
            let entries: Vec<HistoryEntry> = page.iter().map(|e| HistoryEntry::from(*e)).collect();
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

/// Most entries of a history answer built whole in memory: in a batch, or over WebSocket (one
/// message per answer), and of a `listunspent`. Longer histories are answered alone over TCP or
/// TLS, streamed.
pub const MAX_BUFFERED_HISTORY: usize = 200_000;

/// A history as `get_history` answers it, as JSON text: `{"height", "tx_hash"}` per entry, with
/// `"fee"` for mempool ones. Written straight into one string (no JSON tree, no allocation per
/// entry): histories can have hundreds of thousands of entries.
pub fn history_text(history: &[HistoryEntry]) -> String {
    let mut out = String::with_capacity(2 + history.len() * 104);
    out.push('[');
    history_entries_text(&mut out, history, true);
    out.push(']');
    out
}

/// Appends history entries to a JSON list being written: comma-separated, with a comma before
/// the first unless it is the list's `first`.
pub(crate) fn history_entries_text(out: &mut String, history: &[HistoryEntry], first: bool) {
    out.reserve(history.len() * 104);
    let mut number = [0u8; 24];
    for (i, entry) in history.iter().enumerate() {
        if i > 0 || !first {
            out.push(',');
        }
        out.push_str("{\"height\":");
        push_ascii(out, status::decimal(entry.height.electrum(), &mut number));
        out.push_str(",\"tx_hash\":\"");
        push_ascii(out, &status::txid_hex(&entry.txid));
        out.push('"');
        if let Some(fee) = entry.fee {
            out.push_str(",\"fee\":");
            let sat = i64::try_from(fee.to_sat()).unwrap_or(i64::MAX);
            push_ascii(out, status::decimal(sat, &mut number));
        }
        out.push('}');
    }
}

/// Appends ASCII bytes (digits, hex) to a string.
fn push_ascii(out: &mut String, ascii: &[u8]) {
    out.extend(ascii.iter().map(|&b| char::from(b)));
}

impl Ctx<'_> {
    pub(crate) fn get_balance(&self, sh: ScriptHash) -> Result<Value, RpcError> {
        let balance = self.view().balance(&sh).map_err(view_err)?;
        Ok(json!({
            "confirmed": balance.confirmed.to_sat(),
            "unconfirmed": balance.unconfirmed.to_sat(),
        }))
    }

    /// A history answer: built here when short (or where it cannot be streamed), else left to
    /// the session to stream.
    pub(crate) fn get_history(&self, sh: ScriptHash) -> Result<Reply, RpcError> {
        Ok(match self.history_in_memory(&sh)? {
            Some(text) => Reply::Text(text),
            None => Reply::History(sh),
        })
    }

    pub(crate) fn listunspent(&self, sh: ScriptHash) -> Result<Value, RpcError> {
        // Built whole in memory: bounded like a history that cannot be streamed.
        let limit = self.backend.config.max_history.min(MAX_BUFFERED_HISTORY);
        let unspent = self.view().unspent(&sh, limit).map_err(view_err)?;
        Ok(Value::Array(
            unspent
                .iter()
                .map(|u| {
                    json!({
                        "height": u.height.unwrap_or(0),
                        "tx_pos": u.vout,
                        "tx_hash": u.txid.to_string(),
                        "value": u.value.to_sat(),
                    })
                })
                .collect(),
        ))
    }

    pub(crate) fn get_mempool(&self, sh: ScriptHash) -> Result<Value, RpcError> {
        self.mempool()?;
        let entries = self.view().mempool_entries(&sh);
        Ok(Value::Array(
            entries
                .iter()
                .map(|e| {
                    json!({
                        "height": e.height.electrum(),
                        "tx_hash": e.txid.to_string(),
                        "fee": e.fee.map(bitcoin::Amount::to_sat),
                    })
                })
                .collect(),
        ))
    }
}

/// The notifications of the subscribed scripts among `touched` whose status changed, each new
/// status kept in `subscriptions` as sent. 1.7 (`v17`) renamed the script methods; a
/// notification carries the script hash either way.
pub(crate) fn script_notes(
    ctx: &Ctx<'_>,
    subscriptions: &mut HashMap<ScriptHash, Option<String>>,
    touched: Vec<ScriptHash>,
) -> Vec<String> {
    let method = if ctx.v17() {
        "blockchain.scriptpubkey.subscribe"
    } else {
        "blockchain.scripthash.subscribe"
    };
    let mut out = Vec::new();
    for sh in touched {
        let Ok(new_status) = ctx.status_of(&sh) else {
            continue;
        };
        let old = subscriptions.insert(sh, new_status.clone());
        if old.as_ref() != Some(&new_status) {
            out.push(
                json!({"jsonrpc": "2.0", "method": method,
                       "params": [sh.to_electrum_hex(), new_status]})
                .to_string(),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_text_is_the_json_of_every_entry() {
        use crate::types::Height;
        use std::str::FromStr;
        let txid = |s: &str| bitcoin::Txid::from_str(s).unwrap();
        let a = txid("a6c9c361bd0bc536d6a22648efbf8f9b200e425ef6c3a7a9669dc444c532a347");
        let b = txid("bb4c8ab438c13b89ca80d1d5bee25b0b6b7f55673f4d801998ba97db161d9e85");
        let in_mempool = |txid, height, sat| HistoryEntry {
            txid,
            height,
            fee: Some(bitcoin::Amount::from_sat(sat)),
        };
        let history = [
            HistoryEntry::confirmed(a, 0),
            HistoryEntry::confirmed(b, 2473),
            in_mempool(a, Height::Unconfirmed, 1234),
            in_mempool(b, Height::UnconfirmedParents, 2_100_000_000_000_000),
        ];
        let parsed: serde_json::Value = serde_json::from_str(&history_text(&history)).unwrap();
        let expected = serde_json::json!([
            {"height": 0, "tx_hash": a.to_string()},
            {"height": 2473, "tx_hash": b.to_string()},
            {"height": 0, "tx_hash": a.to_string(), "fee": 1234},
            {"height": -1, "tx_hash": b.to_string(), "fee": 2_100_000_000_000_000u64},
        ]);
        assert_eq!(parsed, expected);
        assert_eq!(history_text(&[]), "[]");
    }
}

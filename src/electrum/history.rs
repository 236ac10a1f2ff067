//! Histories of any size. A script's status hash is kept for long histories and extended by
//! the rows later blocks add, instead of being recomputed from the first entry; and a long
//! `get_history` answer is written to the client page by page as it is read from the store, so
//! the memory an answer holds is one page, however long the history.

use std::sync::Arc;

use bitcoin::hashes::{sha256, Hash};
use tokio::sync::mpsc;

use super::backend::Backend;
use super::history_cache::CachedHistory;
use super::methods::{backend_err, history_entries_text, Ctx, MAX_BUFFERED_HISTORY};
use super::rpc::{error_value, RpcError};
use super::status::{self, Cached};
use crate::index::query::{QueryError, HISTORY_PAGE};
use crate::mempool::MempoolHistoryEntry;
use crate::types::{ScriptHash, TxNum};

impl Ctx<'_> {
    /// A script's status: its confirmed history (from the cache, extended by newer rows, for a
    /// long one) then its mempool entries. `None` when it has no history.
    pub(crate) fn status_of(&self, sh: &ScriptHash) -> Result<Option<String>, RpcError> {
        let limit = self.backend.config.max_history;
        let (mut engine, count) = self.confirmed_status(sh, limit)?;
        let mempool = self
            .backend
            .mempool
            .as_ref()
            .map(|p| p.history(sh))
            .unwrap_or_default();
        if count.saturating_add(mempool.len()) > limit {
            return Err(backend_err(QueryError::TooLarge { limit }));
        }
        if count == 0 && mempool.is_empty() {
            return Ok(None);
        }
        for m in &mempool {
            status::feed(&mut engine, &m.txid, m.height);
        }
        Ok(Some(sha256::Hash::from_engine(engine).to_string()))
    }

    /// The hash state and entry count of a script's confirmed history, in one view of the index.
    fn confirmed_status(
        &self,
        sh: &ScriptHash,
        limit: usize,
    ) -> Result<(sha256::HashEngine, usize), RpcError> {
        let view = self.backend.index.reader();
        let cache = &self.backend.status_cache;
        let cached = cache.get(sh).filter(|c| view.has_block(c.tip.0, &c.tip.1));
        let (mut engine, mut count, from) = match cached {
            Some(c) => (c.engine, c.count, c.next),
            None => (sha256::HashEngine::default(), 0, TxNum(0)),
        };
        view.history_pages(sh, from, HISTORY_PAGE, |page| {
            count += page.len();
            if count > limit {
                return Err(QueryError::TooLarge { limit });
            }
            for entry in page {
                status::feed(&mut engine, &entry.txid, i64::from(entry.height));
            }
            Ok(true)
        })
        .map_err(backend_err)?;
        if count >= self.backend.config.cache_status_from {
            if let Some(tip) = view.tip() {
                cache.put(
                    *sh,
                    Cached::new(engine.clone(), count, tip, view.next_txnum()),
                );
            }
        }
        Ok((engine, count))
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
        let view = self.backend.index.reader();
        // A long history read before: only the entries of blocks since.
        let cached = self
            .backend
            .history_cache
            .get(sh)
            .filter(|c| view.has_block(c.tip.0, &c.tip.1));
        let (known, from) = match &cached {
            Some(c) => (c.entries.as_slice(), c.next),
            None => (&[][..], TxNum(0)),
        };
        let mut newer = Vec::new();
        let read = view.history_pages(sh, from, HISTORY_PAGE, |page| {
            if known.len() + newer.len() + page.len() > limit {
                return Err(QueryError::TooLarge { limit });
            }
            newer.extend(page.iter().map(|e| (e.txid, e.height)));
            Ok(true)
        });
        // Over the limit: stream it when it may be and is under the cap, else say why not.
        let too_long = || match (streamable, limit < max) {
            (true, true) => Ok(None),
            (false, true) => Err(too_long_to_buffer(limit)),
            (_, false) => Err(backend_err(QueryError::TooLarge { limit })),
        };
        match read {
            Err(QueryError::TooLarge { .. }) => return too_long(),
            other => other.map_err(backend_err)?,
        }
        let count = known.len() + newer.len();
        if count >= self.backend.config.cache_history_from
            && (cached.is_none() || !newer.is_empty())
        {
            if let Some(tip) = view.tip() {
                let entries = Arc::new([known, &newer[..]].concat());
                self.backend
                    .history_cache
                    .put(*sh, CachedHistory::new(entries, tip, view.next_txnum()));
            }
        }
        let mempool = self
            .backend
            .mempool
            .as_ref()
            .map(|p| p.history(sh))
            .unwrap_or_default();
        if count + mempool.len() > limit {
            return too_long();
        }
        let mut all: Vec<(bitcoin::Txid, i64, Option<u64>)> =
            Vec::with_capacity(count + mempool.len());
        all.extend(
            known
                .iter()
                .chain(&newer)
                .map(|(txid, height)| (*txid, i64::from(*height), None)),
        );
        all.extend(mempool.iter().map(|m| (m.txid, m.height, Some(m.fee))));
        Ok(Some(super::methods::history_text(&all)))
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
    /// entries. Runs on a blocking thread; stops when the receiver is gone.
    pub fn run(self, tx: mpsc::Sender<Piece>) {
        let limit = self.backend.config.max_history;
        let view = self.backend.index.reader();
        let mempool: Vec<MempoolHistoryEntry> = self
            .backend
            .mempool
            .as_ref()
            .map(|p| p.history(&self.sh))
            .unwrap_or_default();
        let counted = view.history_len(&self.sh, TxNum(0), limit).and_then(|n| {
            match n + mempool.len() > limit {
                true => Err(QueryError::TooLarge { limit }),
                false => Ok(n),
            }
        });
        if let Err(e) = counted {
            let mut err = backend_err(e);
            if err.code == super::rpc::HISTORY_TOO_LARGE && !self.v17 {
                err.code = super::rpc::BAD_REQUEST;
            }
            let _ = tx.blocking_send((error_value(self.id, &err).to_string(), true));
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
        let sent = view.history_pages(&self.sh, TxNum(0), page, |page| {
            let entries: Vec<_> = page
                .iter()
                .map(|e| (e.txid, i64::from(e.height), None))
                .collect();
            history_entries_text(&mut piece, &entries, first);
            first = false;
            Ok(tx
                .blocking_send((std::mem::take(&mut piece), false))
                .is_ok())
        });
        if let Err(e) = sent {
            // Part of the result is out: the answer cannot become an error any more. Ending
            // the piece stream unfinished makes the session drop the connection.
            tracing::warn!("electrum: streaming a history failed midway: {e}");
            return;
        }
        let entries: Vec<_> = mempool
            .iter()
            .map(|m| (m.txid, m.height, Some(m.fee)))
            .collect();
        history_entries_text(&mut piece, &entries, first);
        piece.push_str("]}");
        let _ = tx.blocking_send((piece, true));
    }
}

//! The dispatcher: one function per Electrum method, in the order of the protocol's method list.

use std::collections::HashMap;
use std::sync::Arc;

use bitcoin::hex::{DisplayHex, FromHex};
use bitcoin::{BlockHash, Txid};
use serde_json::{json, Value};

use super::backend::Backend;
use super::outpoint::OutpointSub;
use super::params::{
    bool_param, scripthash_param, scriptpubkey_param, str_param, txid_param, u32_param,
};
use super::rpc::{
    Reply, RpcError, BACKEND_ERROR, BAD_REQUEST, HISTORY_TOO_LARGE, METHOD_NOT_FOUND,
};
use super::verbose;
use crate::config::SERVER_SOFTWARE;
use crate::index::query::{QueryError, TxPosition};
use crate::mempool::{Mempool, Rejection, MAX_PACKAGE_COUNT, MIN_RELAY_FEERATE};
use crate::notify::Changes;
use crate::types::ScriptHash;
use crate::view::merkle::rpc_hex;
use crate::view::{status, ChainView, ViewError};

/// Protocol versions served, oldest first.
const VERSIONS: [(u32, u32, u32); 5] = [(1, 4, 0), (1, 4, 1), (1, 4, 2), (1, 6, 0), (1, 7, 0)];
/// The oldest protocol version served.
pub const PROTOCOL_MIN: (u32, u32) = (1, 4);
/// The newest protocol version served.
pub const PROTOCOL_MAX: (u32, u32) = (1, 7);
/// Most entries of a history answer built whole in memory: in a batch, or over WebSocket (one
/// message per answer), and of a `listunspent`. Longer histories are answered alone over TCP or
/// TLS, streamed.
pub const MAX_BUFFERED_HISTORY: usize = 200_000;
/// Most hex characters a `server.ping` may ask back (protocol 1.7): the hex of the largest
/// transaction consensus allows (4,000,000 weight units, so at most 4,000,000 bytes), as the
/// spec asks pings to support.
const MAX_PONG_LEN: u64 = 2 * bitcoin::Weight::MAX_BLOCK.to_wu();

/// The minimum relay fee in BTC per 1000 vbytes, as Electrum wants fee rates.
fn min_relay_btc_per_kvb() -> f64 {
    bitcoin::Amount::from_sat(MIN_RELAY_FEERATE * 1000).to_btc()
}

/// The answer for everything that needs the mempool when this cairn runs without one.
fn no_mempool() -> RpcError {
    RpcError::new(
        BACKEND_ERROR,
        "mempool not available: this cairn runs without an index, so it keeps no mempool; unconfirmed data, fee figures and broadcast are not served",
    )
}

/// The answer to every request but `server.*` during the initial download.
fn syncing_error(sync: crate::kernel::SyncProgress) -> RpcError {
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
/// standardised (older sessions see ElectrumX 1.x's code 1, [`Session::call`]).
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

/// `server.add_peer(features)`: a server introducing itself. cairn does no peer discovery (the
/// peers it lists are `electrum_peers`), so it answers `false`, as ElectrumX does with discovery
/// off; `features` must still be the object `server.features` returns.
fn add_peer(params: &[Value]) -> Result<Value, RpcError> {
    match params.first() {
        Some(Value::Object(_)) => Ok(json!(false)),
        _ => Err(RpcError::invalid_params(
            "server.add_peer takes the features object of server.features",
        )),
    }
}

/// `server.ping(pong_len=0, data="")` as 1.7 defines it: `data` (hex, ignored) and an answer
/// `{"data"}` of `pong_len` hex characters.
fn ping(params: &[Value]) -> Result<Value, RpcError> {
    let pong_len = match params.first() {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_u64().ok_or_else(|| {
            RpcError::invalid_params(format!("pong_len must be a non-negative integer, not {v}"))
        })?,
    };
    if pong_len > MAX_PONG_LEN {
        return Err(RpcError::bad_request(format!(
            "pong_len over {MAX_PONG_LEN}"
        )));
    }
    match params.get(1) {
        None | Some(Value::Null) => {}
        Some(Value::String(data)) if data.bytes().all(|b| b.is_ascii_hexdigit()) => {}
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "data must be a hex string, not {other}"
            )))
        }
    }
    Ok(json!({"data": "0".repeat(pong_len as usize)}))
}

fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next().unwrap_or(Some(0))?;
    let patch = parts.next().unwrap_or(Some(0))?;
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

fn version_text(v: (u32, u32, u32)) -> String {
    if v.2 == 0 {
        format!("{}.{}", v.0, v.1)
    } else {
        format!("{}.{}.{}", v.0, v.1, v.2)
    }
}

/// A history as `get_history` answers it, as JSON text: `{"height", "tx_hash"}` per entry, with
/// `"fee"` for mempool ones. Written straight into one string (no JSON tree, no allocation per
/// entry): histories can have hundreds of thousands of entries.
pub fn history_text(history: &[(Txid, i64, Option<u64>)]) -> String {
    let mut out = String::with_capacity(2 + history.len() * 104);
    out.push('[');
    history_entries_text(&mut out, history, true);
    out.push(']');
    out
}

/// Appends history entries to a JSON list being written: comma-separated, with a comma before
/// the first unless it is the list's `first`.
pub(crate) fn history_entries_text(
    out: &mut String,
    history: &[(Txid, i64, Option<u64>)],
    first: bool,
) {
    out.reserve(history.len() * 104);
    let mut number = [0u8; 24];
    for (i, (txid, height, fee)) in history.iter().enumerate() {
        if i > 0 || !first {
            out.push(',');
        }
        out.push_str("{\"height\":");
        push_ascii(out, status::decimal(*height, &mut number));
        out.push_str(",\"tx_hash\":\"");
        push_ascii(out, &status::txid_hex(txid));
        out.push('"');
        if let Some(fee) = fee {
            out.push_str(",\"fee\":");
            push_ascii(
                out,
                status::decimal(i64::try_from(*fee).unwrap_or(i64::MAX), &mut number),
            );
        }
        out.push('}');
    }
}

/// Appends ASCII bytes (digits, hex) to a string.
fn push_ascii(out: &mut String, ascii: &[u8]) {
    out.extend(ascii.iter().map(|&b| char::from(b)));
}

/// Per-connection protocol state.
pub struct Session {
    pub(crate) backend: Arc<Backend>,
    /// Negotiated version (major, minor, patch); `None` until `server.version` (1.4 rules).
    pub(crate) version: Option<(u32, u32, u32)>,
    pub(crate) headers_subscribed: bool,
    pub(crate) last_notified: Option<(u32, bitcoin::BlockHash)>,
    /// Subscribed script hashes and their last status sent.
    pub(crate) subscriptions: HashMap<ScriptHash, Option<String>>,
    /// Subscribed outpoints (1.7) and their last status sent.
    pub(crate) outpoints: HashMap<bitcoin::OutPoint, OutpointSub>,
    /// The tip height of the last update handled, to tell a new block from a mempool change.
    pub(crate) seen_height: Option<u32>,
    /// When the server last sent this client a `server.ping` (1.7).
    pub(crate) last_ping: std::time::Instant,
    /// Whether the transport can take an answer in pieces (newline-delimited, not WebSocket).
    pub(crate) streams: bool,
    /// Whether a batch is being answered (its answers are built whole).
    pub(crate) in_batch: bool,
}

impl Session {
    /// A new connection's state: nothing negotiated or subscribed yet.
    pub(crate) fn new(backend: Arc<Backend>) -> Self {
        Session {
            backend,
            version: None,
            headers_subscribed: false,
            last_notified: None,
            subscriptions: HashMap::new(),
            outpoints: HashMap::new(),
            seen_height: None,
            last_ping: std::time::Instant::now(),
            streams: false,
            in_batch: false,
        }
    }

    /// Whether a long answer may be streamed now.
    pub(crate) fn streams_answers(&self) -> bool {
        self.streams && !self.in_batch
    }

    /// Whether the client negotiated protocol 1.6 or later.
    pub(crate) fn v16(&self) -> bool {
        self.version.is_some_and(|v| v >= (1, 6, 0))
    }

    /// Whether the client negotiated protocol 1.7 or later.
    pub(crate) fn v17(&self) -> bool {
        self.version.is_some_and(|v| v >= (1, 7, 0))
    }

    /// Refuses a new subscription when the connection holds its limit of script and outpoint
    /// subscriptions together.
    pub(crate) fn check_subscription_room(&self) -> Result<(), RpcError> {
        let limit = self.backend.config.max_subscriptions;
        if self.subscriptions.len() + self.outpoints.len() >= limit {
            return Err(RpcError::bad_request(format!(
                "too many subscriptions on this connection (limit {limit})"
            )));
        }
        Ok(())
    }
}

impl Session {
    /// Answers one method call.
    pub(crate) fn call(&mut self, method: &str, params: &[Value]) -> Result<Reply, RpcError> {
        // While the node is in its initial download only the `server.*` methods answer: a wallet
        // must not take an old tip and empty histories for the chain.
        if !method.starts_with("server.") {
            if let Some(sync) = self.backend.model.validator().initial_download() {
                return Err(syncing_error(sync));
            }
        }
        let answer = match method {
            "blockchain.scripthash.get_history" if !self.v17() => {
                self.get_history(scripthash_param(params, 0)?)
            }
            "blockchain.scriptpubkey.get_history" if self.v17() => {
                self.get_history(scriptpubkey_param(params, 0)?)
            }
            _ => self.call_json(method, params).map(Reply::Json),
        };
        // Before 1.7 a history over the limit was a plain "bad request".
        answer.map_err(|mut e| {
            if e.code == HISTORY_TOO_LARGE && !self.v17() {
                e.code = BAD_REQUEST;
            }
            e
        })
    }

    /// The methods whose answers are built as JSON values; each one only in the protocol
    /// versions that have it.
    fn call_json(&mut self, method: &str, params: &[Value]) -> Result<Value, RpcError> {
        let (v16, v17) = (self.v16(), self.v17());
        match method {
            "blockchain.block.header" => self.block_header(params),
            "blockchain.block.headers" => self.block_headers(params),
            "blockchain.estimatefee" => self.estimatefee(params),
            "blockchain.headers.subscribe" => self.headers_subscribe(),
            "blockchain.outpoint.get_status" if v17 => self.outpoint_get_status(params),
            "blockchain.outpoint.subscribe" if v17 => self.outpoint_subscribe(params),
            "blockchain.outpoint.unsubscribe" if v17 => self.outpoint_unsubscribe(params),
            "blockchain.relayfee" if !v16 => self.mempool().map(|_| json!(min_relay_btc_per_kvb())),
            "blockchain.scripthash.get_balance" if !v17 => self.get_balance(scripthash_param(params, 0)?),
            "blockchain.scripthash.get_mempool" if !v17 => self.get_mempool(scripthash_param(params, 0)?),
            "blockchain.scripthash.listunspent" if !v17 => self.listunspent(scripthash_param(params, 0)?),
            "blockchain.scripthash.subscribe" if !v17 => self.subscribe(scripthash_param(params, 0)?),
            "blockchain.scripthash.unsubscribe" if !v17 => {
                Ok(json!(self.subscriptions.remove(&scripthash_param(params, 0)?).is_some()))
            }
            "blockchain.scriptpubkey.get_balance" if v17 => self.get_balance(scriptpubkey_param(params, 0)?),
            "blockchain.scriptpubkey.get_mempool" if v17 => self.get_mempool(scriptpubkey_param(params, 0)?),
            "blockchain.scriptpubkey.listunspent" if v17 => self.listunspent(scriptpubkey_param(params, 0)?),
            "blockchain.scriptpubkey.subscribe" if v17 => self.subscribe(scriptpubkey_param(params, 0)?),
            "blockchain.scriptpubkey.unsubscribe" if v17 => {
                Ok(json!(self.subscriptions.remove(&scriptpubkey_param(params, 0)?).is_some()))
            }
            "blockchain.transaction.broadcast" => self.broadcast(params),
            "blockchain.transaction.broadcast_package" if v16 => self.broadcast_package(params),
            "blockchain.transaction.get" => self.transaction_get(params),
            "blockchain.transaction.get_merkle" => self.get_merkle(params),
            "blockchain.transaction.get_merkle_witness" if v17 => self.get_merkle_witness(params),
            "blockchain.transaction.id_from_pos" => self.id_from_pos(params),
            "mempool.get_fee_histogram" => self.fee_histogram(),
            "mempool.get_info" if v16 => self.mempool().map(|_| {
                json!({"mempoolminfee": min_relay_btc_per_kvb(), "minrelaytxfee": min_relay_btc_per_kvb(), "incrementalrelayfee": min_relay_btc_per_kvb()})
            }),
            "server.banner" => Ok(json!(self.backend.config.banner)),
            "server.donation_address" => Ok(json!(self.backend.config.donation_address)),
            "server.add_peer" => add_peer(params),
            "server.features" => Ok(self.features()),
            "server.peers.subscribe" => Ok(self.peers()),
            "server.ping" if v17 => ping(params),
            "server.ping" => Ok(Value::Null),
            "server.version" => self.server_version(params),
            _ => Err(RpcError::new(METHOD_NOT_FOUND, format!("unknown method {method:?}"))),
        }
    }

    fn server_version(&mut self, params: &[Value]) -> Result<Value, RpcError> {
        if self.version.is_some() {
            return Err(RpcError::bad_request("server.version already sent"));
        }
        let (min, max) = match params.get(1) {
            None | Some(Value::Null) => ((1, 4, 0), (1, 4, 0)),
            Some(Value::String(v)) => {
                let v = parse_version(v).ok_or_else(|| {
                    RpcError::invalid_params(format!("bad protocol version {v:?}"))
                })?;
                (v, v)
            }
            Some(Value::Array(pair)) if pair.len() == 2 => {
                let get = |i: usize| {
                    pair[i].as_str().and_then(parse_version).ok_or_else(|| {
                        RpcError::invalid_params(format!("bad protocol version {}", pair[i]))
                    })
                };
                (get(0)?, get(1)?)
            }
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "bad protocol version {other}"
                )))
            }
        };
        let chosen = VERSIONS
            .iter()
            .rev()
            .find(|v| **v >= min && **v <= max)
            .copied();
        let Some(chosen) = chosen else {
            return Err(RpcError::bad_request(format!(
                "unsupported protocol version: this server speaks {}.{} to {}.{}",
                PROTOCOL_MIN.0, PROTOCOL_MIN.1, PROTOCOL_MAX.0, PROTOCOL_MAX.1
            )));
        };
        self.version = Some(chosen);
        Ok(json!([SERVER_SOFTWARE, version_text(chosen)]))
    }

    fn features(&self) -> Value {
        let genesis = self
            .backend
            .model
            .view()
            .block_hash(0)
            .map(|h| h.to_string());
        let mut features = json!({
            "genesis_hash": genesis,
            "hosts": {},
            "protocol_min": version_text(VERSIONS[0]),
            "protocol_max": version_text(VERSIONS[VERSIONS.len() - 1]),
            "pruning": null,
            "server_version": SERVER_SOFTWARE,
        });
        if self.v17() {
            // Every optional feature of 1.7 is served and no optional argument is required, so
            // no method has a flavour to declare.
            features["method_flavours"] = json!({});
        } else {
            features["hash_function"] = json!("sha256");
        }
        if let Some(sync) = self.backend.model.validator().initial_download() {
            // Not a key of the spec: clients ignore what they do not know.
            features["syncing"] = json!({"height": sync.height, "headers": sync.headers});
        }
        features
    }

    fn peers(&self) -> Value {
        Value::Array(
            self.backend
                .config
                .peers
                .iter()
                .map(|host| json!([host, host, ["v1.4", "t"]]))
                .collect(),
        )
    }

    fn tip_height(view: &ChainView<'_>) -> Result<u32, RpcError> {
        view.tip()
            .map(|(h, _)| h)
            .ok_or_else(|| RpcError::new(BACKEND_ERROR, "the index is empty"))
    }

    fn header_hex(view: &ChainView<'_>, height: u32) -> Option<String> {
        view.header(height)
            .map(|h| bitcoin::consensus::serialize(&h).to_lower_hex_string())
    }

    fn headers_subscribe(&mut self) -> Result<Value, RpcError> {
        let view = self.backend.model.view();
        let height = Self::tip_height(&view)?;
        let hex = Self::header_hex(&view, height)
            .ok_or_else(|| RpcError::new(BACKEND_ERROR, "no tip header"))?;
        self.headers_subscribed = true;
        self.last_notified = view.block_hash(height).map(|h| (height, h));
        Ok(json!({"height": height, "hex": hex}))
    }

    /// The checkpoint proof of the header at `height` against all headers up to `cp_height`.
    fn header_proof(
        view: &ChainView<'_>,
        height: u32,
        cp_height: u32,
    ) -> Result<(Vec<String>, String), RpcError> {
        let tip = Self::tip_height(view)?;
        let (branch, root) = view.header_proof(height, cp_height).ok_or_else(|| {
            RpcError::bad_request(format!(
                "header height {height} must be <= cp_height {cp_height} <= tip height {tip}"
            ))
        })?;
        Ok((branch.iter().map(rpc_hex).collect(), rpc_hex(&root)))
    }

    fn block_header(&mut self, params: &[Value]) -> Result<Value, RpcError> {
        let height = u32_param(params, 0, "height", None)?;
        let cp_height = u32_param(params, 1, "cp_height", Some(0))?;
        let view = self.backend.model.view();
        let hex = Self::header_hex(&view, height)
            .ok_or_else(|| RpcError::bad_request(format!("height {height} out of range")))?;
        if cp_height == 0 {
            return Ok(json!(hex));
        }
        let (branch, root) = Self::header_proof(&view, height, cp_height)?;
        Ok(json!({"branch": branch, "header": hex, "root": root}))
    }

    fn block_headers(&mut self, params: &[Value]) -> Result<Value, RpcError> {
        let start = u32_param(params, 0, "start_height", None)?;
        let count = u32_param(params, 1, "count", None)?;
        let cp_height = u32_param(params, 2, "cp_height", Some(0))?;
        let max = self.backend.config.max_headers;
        let view = self.backend.model.view();
        let headers: Vec<String> = (start..start.saturating_add(count.min(max)))
            .map_while(|h| Self::header_hex(&view, h))
            .collect();
        let mut result = if self.v16() {
            json!({"count": headers.len(), "headers": headers, "max": max})
        } else {
            json!({"count": headers.len(), "hex": headers.concat(), "max": max})
        };
        if cp_height != 0 && !headers.is_empty() {
            let last = start + headers.len() as u32 - 1;
            let (branch, root) = Self::header_proof(&view, last, cp_height)?;
            result["branch"] = json!(branch);
            result["root"] = json!(root);
        }
        Ok(result)
    }

    fn mempool(&self) -> Result<&Mempool, RpcError> {
        self.backend
            .model
            .mempool()
            .map(|p| &**p)
            .ok_or_else(no_mempool)
    }

    fn get_mempool(&self, sh: ScriptHash) -> Result<Value, RpcError> {
        self.mempool()?;
        let entries = self.backend.model.view().mempool_entries(&sh);
        Ok(Value::Array(
            entries
                .iter()
                .map(|(txid, height, fee)| json!({"height": height, "tx_hash": txid.to_string(), "fee": fee}))
                .collect(),
        ))
    }

    fn estimatefee(&self, params: &[Value]) -> Result<Value, RpcError> {
        let blocks = u32_param(params, 0, "number", None)?;
        let pool = self.mempool()?;
        // Below a full block's worth of the mempool, the minimum relay fee confirms next block.
        Ok(json!(pool
            .estimate_fee(blocks)
            .unwrap_or(min_relay_btc_per_kvb())))
    }

    fn fee_histogram(&self) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        Ok(Value::Array(
            pool.fee_histogram()
                .iter()
                .map(|(rate, vsize)| json!([rate, vsize]))
                .collect(),
        ))
    }

    fn broadcast(&self, params: &[Value]) -> Result<Value, RpcError> {
        let text = str_param(params, 0, "raw_tx")?;
        let raw =
            Vec::<u8>::from_hex(text).map_err(|_| RpcError::invalid_params("raw_tx is not hex"))?;
        let pool = self.mempool()?;
        let index = self.backend.model.index();
        let accepted = pool.accept(&raw, index).map_err(|e| {
            RpcError::bad_request(format!(
                "the transaction was rejected by network rules.\n\n{e}"
            ))
        })?;
        let txid = accepted.txid;
        self.backend.notifier.accepted(index, accepted);
        Ok(json!(txid.to_string()))
    }

    /// `broadcast_package(raw_txs, verbose=false)`: a child with its parents, child last. Each
    /// accepted transaction is relayed; the answer says whether all were, with a reason per
    /// refused one (the `verbose` form, bitcoind's own `submitpackage` answer, is not offered).
    fn broadcast_package(&self, params: &[Value]) -> Result<Value, RpcError> {
        const MAX_TXS: usize = MAX_PACKAGE_COUNT;
        let list = params.first().and_then(Value::as_array).ok_or_else(|| {
            RpcError::invalid_params("raw_txs must be a list of hex transactions")
        })?;
        if params.get(1).and_then(Value::as_bool) == Some(true) {
            return Err(RpcError::bad_request(
                "verbose package results are not offered by cairn; use verbose=false",
            ));
        }
        if list.is_empty() || list.len() > MAX_TXS {
            return Err(RpcError::invalid_params(format!(
                "a package has 1 to {MAX_TXS} transactions"
            )));
        }
        let raws = list
            .iter()
            .map(|v| v.as_str().and_then(|t| Vec::<u8>::from_hex(t).ok()))
            .collect::<Option<Vec<Vec<u8>>>>()
            .ok_or_else(|| RpcError::invalid_params("every raw_txs entry must be a hex string"))?;
        let pool = self.mempool()?;
        let results = pool
            .accept_package(&raws, self.backend.model.index())
            .map_err(|e| RpcError::bad_request(format!("the package was rejected: {e}")))?;
        let mut errors = Vec::new();
        let mut changes = Changes::none();
        for (raw, result) in raws.iter().zip(results) {
            match result {
                Ok(accepted) => {
                    self.backend.notifier.announce(accepted.txid);
                    changes.extend(Changes::accepted(&accepted));
                }
                Err(Rejection::AlreadyKnown | Rejection::AlreadyInMempool) => {}
                Err(e) => {
                    let txid = bitcoin::consensus::deserialize::<bitcoin::Transaction>(raw)
                        .map(|t| t.compute_txid().to_string())
                        .unwrap_or_default();
                    errors.push(json!({"txid": txid, "error": e.to_string()}));
                }
            }
        }
        if !changes.is_empty() {
            self.backend
                .notifier
                .publish(self.backend.model.index(), changes);
        }
        if errors.is_empty() {
            Ok(json!({"success": true}))
        } else {
            Ok(json!({"success": false, "errors": errors}))
        }
    }

    fn get_balance(&self, sh: ScriptHash) -> Result<Value, RpcError> {
        let (confirmed, unconfirmed) = self.backend.model.view().balance(&sh).map_err(view_err)?;
        Ok(json!({"confirmed": confirmed, "unconfirmed": unconfirmed}))
    }

    /// A history answer: built here when short (or where it cannot be streamed), else left to
    /// the session to stream.
    fn get_history(&self, sh: ScriptHash) -> Result<Reply, RpcError> {
        Ok(match self.history_in_memory(&sh)? {
            Some(text) => Reply::Text(text),
            None => Reply::History(sh),
        })
    }

    fn listunspent(&self, sh: ScriptHash) -> Result<Value, RpcError> {
        // Built whole in memory: bounded like a history that cannot be streamed.
        let limit = self.backend.config.max_history.min(MAX_BUFFERED_HISTORY);
        let unspent = self
            .backend
            .model
            .view()
            .unspent(&sh, limit)
            .map_err(view_err)?;
        Ok(Value::Array(
            unspent
                .iter()
                .map(|u| json!({"height": u.height.unwrap_or(0), "tx_pos": u.vout, "tx_hash": u.txid.to_string(), "value": u.value}))
                .collect(),
        ))
    }

    fn subscribe(&mut self, sh: ScriptHash) -> Result<Value, RpcError> {
        if !self.subscriptions.contains_key(&sh) {
            self.check_subscription_room()?;
        }
        let status = self.status_of(&sh)?;
        self.subscriptions.insert(sh, status.clone());
        Ok(json!(status))
    }

    fn transaction_get(&self, params: &[Value]) -> Result<Value, RpcError> {
        let txid = txid_param(params, 0)?;
        let verbose = bool_param(params, 1, "verbose")?;
        let view = self.backend.model.view();
        let unknown =
            || RpcError::bad_request(format!("no transaction {txid} in the chain or the mempool"));
        if !verbose {
            let (raw, _) = view
                .raw_transaction(&txid)
                .map_err(view_err)?
                .ok_or_else(unknown)?;
            return Ok(json!(raw.to_lower_hex_string()));
        }
        let found = view
            .transaction(&txid, false)
            .map_err(view_err)?
            .ok_or_else(unknown)?;
        let network = view.network();
        let Some(block) = found.confirmation else {
            return Ok(verbose::unconfirmed(&found.tx, &found.raw, network));
        };
        let tip = view.tip().map(|(h, _)| h).unwrap_or(block.height);
        Ok(verbose::transaction(
            &found.tx,
            &found.raw,
            network,
            &block.hash,
            block.time,
            tip - block.height + 1,
        ))
    }

    fn merkle_of(
        view: &ChainView<'_>,
        height: u32,
        pos: u32,
    ) -> Result<(Vec<String>, Txid), RpcError> {
        let found = view
            .txid_at(height, pos)
            .map_err(view_err)?
            .ok_or_else(|| RpcError::bad_request(format!("no block at height {height}")))?;
        let Some((txid, branch)) = found else {
            return Err(RpcError::bad_request(format!(
                "no transaction at position {pos} of block {height}"
            )));
        };
        Ok((branch.iter().map(rpc_hex).collect(), txid))
    }

    /// Where the confirmed transaction of parameter 0 is, checked against the height of
    /// parameter 1 when given (required when `height_required`).
    pub(crate) fn confirmed_position(
        view: &ChainView<'_>,
        params: &[Value],
        height_required: bool,
    ) -> Result<TxPosition, RpcError> {
        let txid = txid_param(params, 0)?;
        let pos = view
            .index()
            .tx_position(&txid)
            .map_err(backend_err)?
            .ok_or_else(|| RpcError::bad_request(format!("transaction {txid} is not confirmed")))?;
        match params.get(1).filter(|v| !v.is_null()) {
            Some(asked) => {
                let asked = asked
                    .as_u64()
                    .ok_or_else(|| RpcError::invalid_params("height must be an integer"))?;
                if asked != u64::from(pos.height) {
                    return Err(RpcError::bad_request(format!(
                        "transaction {txid} is not in block {asked} (it is in {})",
                        pos.height
                    )));
                }
            }
            None if height_required => {
                return Err(RpcError::invalid_params("missing parameter height"))
            }
            None => {}
        }
        Ok(pos)
    }

    fn get_merkle(&self, params: &[Value]) -> Result<Value, RpcError> {
        // 1.7 made the height optional.
        let view = self.backend.model.view();
        let pos = Self::confirmed_position(&view, params, !self.v17())?;
        let (merkle, _) = Self::merkle_of(&view, pos.height, pos.pos)?;
        let mut result = json!({"block_height": pos.height, "merkle": merkle, "pos": pos.pos});
        if self.v17() {
            let hash: Option<BlockHash> = view.block_hash(pos.height);
            result["block_hash"] = json!(hash.map(|h| h.to_string()));
        }
        Ok(result)
    }

    fn id_from_pos(&self, params: &[Value]) -> Result<Value, RpcError> {
        let height = u32_param(params, 0, "height", None)?;
        let pos = u32_param(params, 1, "tx_pos", None)?;
        let want_merkle = bool_param(params, 2, "merkle")?;
        let (merkle, txid) = Self::merkle_of(&self.backend.model.view(), height, pos)?;
        if want_merkle {
            Ok(json!({"tx_hash": txid.to_string(), "merkle": merkle}))
        } else {
            Ok(json!(txid.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn history_text_is_the_json_of_every_entry() {
        use std::str::FromStr;
        let txid = |s: &str| bitcoin::Txid::from_str(s).unwrap();
        let a = txid("a6c9c361bd0bc536d6a22648efbf8f9b200e425ef6c3a7a9669dc444c532a347");
        let b = txid("bb4c8ab438c13b89ca80d1d5bee25b0b6b7f55673f4d801998ba97db161d9e85");
        let history = [
            (a, 0i64, None),
            (b, 2473, None),
            (a, 0, Some(1234u64)),
            (b, -1, Some(2_100_000_000_000_000)),
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

    use super::*;

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version("1.4"), Some((1, 4, 0)));
        assert_eq!(parse_version("1.4.2"), Some((1, 4, 2)));
        assert_eq!(parse_version("x"), None);
        assert_eq!(version_text((1, 6, 0)), "1.6");
    }
}

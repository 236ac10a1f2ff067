//! The Electrum methods' handlers, in the order of the protocol's method list: functions on
//! [`Ctx`], what a call reads. The session (`session.rs`) parses and dispatches the calls and
//! keeps the connection's state; the history, outpoint and merkle-witness handlers are in their
//! own modules.

use bitcoin::hex::DisplayHex;
use bitcoin::{BlockHash, Txid};
use serde_json::{json, Value};

use super::backend::Backend;
use super::request::{ProtocolVersion, VERSIONS};
use super::rpc::{Reply, RpcError, BACKEND_ERROR, HISTORY_TOO_LARGE};
use super::verbose;
use crate::config::SERVER_SOFTWARE;
use crate::index::query::{QueryError, TxPosition};
use crate::listen::{KeptVerdict, VerdictKey};
use crate::mempool::linearize::metered;
use crate::mempool::{Mempool, Rejection};
use crate::notify::Changes;
use crate::types::ScriptHash;
use crate::view::merkle::rpc_hex;
use crate::view::{status, ChainView, Cost, CostMeter, TweakState, ViewError};

/// How many transactions `mempool.recent` lists (ElectrumX's `count=10`).
const RECENT_TXS: usize = 10;

/// Most entries of a history answer built whole in memory: in a batch, or over WebSocket (one
/// message per answer), and of a `listunspent`. Longer histories are answered alone over TCP or
/// TLS, streamed.
pub const MAX_BUFFERED_HISTORY: usize = 200_000;

/// The minimum relay fee in BTC per 1000 vbytes, as Electrum wants fee rates.
/// Satoshis per 1,000 vbytes in BTC/kvB.
pub(crate) fn btc_per_kvb(sat_per_kvb: u64) -> f64 {
    bitcoin::Amount::from_sat(sat_per_kvb).to_btc()
}

/// Borrowed views of transactions' bytes.
fn slices(raws: &[Vec<u8>]) -> Vec<&[u8]> {
    raws.iter().map(Vec::as_slice).collect()
}

/// The refusal of a broadcast the network's rules refuse (`why`).
pub(crate) fn rejected(why: &str) -> RpcError {
    RpcError::bad_request(format!(
        "the transaction was rejected by network rules.\n\n{why}"
    ))
}

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

/// `Ok` when silent-payment tweaks can be served from `view`, else why not.
fn tweaks_ready_in(view: &ChainView<'_>) -> Result<(), RpcError> {
    match view.tweak_state().map_err(view_err)? {
        TweakState::Off => Err(RpcError::bad_request(
            "silent-payment tweaks are not indexed here (silent_payments = false)",
        )),
        TweakState::Building => Err(RpcError::bad_request(
            "silent-payment tweaks of indexed blocks are still being built",
        )),
        TweakState::Ready => Ok(()),
    }
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

/// `server.add_peer(features)`: a server introducing itself. cairn does no peer discovery (the
/// peers it lists are `electrum_peers`), so it answers `false`, as ElectrumX does with discovery
/// off; `features` must still be the object `server.features` returns (the parser checks it).
pub(crate) fn add_peer() -> Result<Value, RpcError> {
    Ok(json!(false))
}

/// `server.ping(pong_len=0, data="")` as 1.7 defines it: `data` (hex, ignored) and an answer
/// `{"data"}` of `pong_len` hex characters (at most `MAX_PONG_LEN`, the parser checks), as
/// JSON text written once.
pub(crate) fn pong_text(pong_len: u64) -> String {
    let n = pong_len as usize;
    // Room for the envelope the session puts around it, so that it is never copied.
    let mut text = String::with_capacity(n + 12 + 128);
    text.push_str("{\"data\":\"");
    text.extend(std::iter::repeat_n('0', n));
    text.push_str("\"}");
    text
}

/// A protocol version as `server.version` answers it: `1.4`, `1.4.2`.
pub(crate) fn version_text(v: ProtocolVersion) -> String {
    v.to_string()
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

/// What a method's handler reads: the back end, and the protocol and transport of the
/// connection asking. Handlers that change the connection's state are `Session`'s own.
pub(crate) struct Ctx<'a> {
    /// What the sessions read from and publish to.
    pub(crate) backend: &'a Backend,
    /// Where the reads of this connection's requests are counted.
    pub(crate) meter: &'a CostMeter,
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

    pub(crate) fn features(&self) -> Value {
        let genesis = self.view().block_hash(0).map(|h| h.to_string());
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
        if self.tweaks_ready().is_ok() {
            // Frigate's: the silent-payment protocol versions served (`blockchain.silentpayments.*`).
            features["silent_payments"] = json!([0]);
        }
        if let Some(sync) = self.backend.model.validator().initial_download() {
            // Not a key of the spec: clients ignore what they do not know.
            features["syncing"] = json!({"height": sync.height, "headers": sync.headers});
        }
        features
    }

    pub(crate) fn peers(&self) -> Value {
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

    /// `headers.subscribe`'s answer, and the tip it names (the session's last notified).
    pub(crate) fn headers_subscribe(&self) -> Result<(Value, Option<(u32, BlockHash)>), RpcError> {
        let view = self.view();
        let height = Self::tip_height(&view)?;
        let hex = Self::header_hex(&view, height)
            .ok_or_else(|| RpcError::new(BACKEND_ERROR, "no tip header"))?;
        let tip = view.block_hash(height).map(|h| (height, h));
        Ok((json!({"height": height, "hex": hex}), tip))
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

    pub(crate) fn block_header(&self, height: u32, cp_height: u32) -> Result<Value, RpcError> {
        let view = self.view();
        let hex = Self::header_hex(&view, height)
            .ok_or_else(|| RpcError::bad_request(format!("height {height} out of range")))?;
        if cp_height == 0 {
            return Ok(json!(hex));
        }
        let (branch, root) = Self::header_proof(&view, height, cp_height)?;
        Ok(json!({"branch": branch, "header": hex, "root": root}))
    }

    pub(crate) fn block_headers(
        &self,
        start: u32,
        count: u32,
        cp_height: u32,
    ) -> Result<Value, RpcError> {
        let max = self.backend.config.max_headers;
        let view = self.view();
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

    /// `Ok` when silent-payment tweaks can be served, else why not.
    pub(crate) fn tweaks_ready(&self) -> Result<(), RpcError> {
        tweaks_ready_in(&self.view())
    }

    /// `blockchain.block.tweaks(height)`, Cake Wallet's silent-payment dialect: the tweak data
    /// of the block's eligible transactions with a taproot output of at least `sp_min_dust`, in
    /// block order, each a compressed point in hex (none below the first height with tweaks:
    /// taproot's activation).
    pub(crate) fn block_tweaks(&self, height: u32) -> Result<Value, RpcError> {
        let view = self.view();
        tweaks_ready_in(&view)?;
        let tweaks = view
            .block_tweak_rows(height)
            .map_err(view_err)?
            .ok_or_else(|| RpcError::bad_request(format!("height {height} out of range")))?;
        // As Cake's server: only transactions with a taproot output of at least the dust limit.
        let dust = self.backend.config.sp_min_dust;
        let hex: Vec<String> = tweaks
            .iter()
            .filter(|t| t.outputs.iter().any(|(_, _, value)| *value >= dust))
            .map(|t| t.tweak[..].to_lower_hex_string())
            .collect();
        Ok(json!(hex))
    }

    /// `blockchain.tweaks.subscribe(height, count, historical)`, Cake Wallet's tweak stream
    /// (`super::cake_tweaks`): checked here, streamed by the session. Over TCP and TLS only, alone:
    /// a stream of notifications cannot sit in a batch or be built whole.
    pub(crate) fn tweaks_subscribe(
        &self,
        height: u32,
        count: u32,
        historical: bool,
    ) -> Result<Reply, RpcError> {
        tweaks_ready_in(&self.view())?;
        if !self.streams_answers() {
            return Err(RpcError::bad_request(
                "blockchain.tweaks.subscribe streams notifications: ask for it alone (not in a batch), over TCP or TLS",
            ));
        }
        Ok(Reply::Tweaks {
            height,
            count,
            historical,
        })
    }

    pub(crate) fn mempool(&self) -> Result<&Mempool, RpcError> {
        self.backend
            .model
            .mempool()
            .map(|p| &**p)
            .ok_or_else(no_mempool)
    }

    pub(crate) fn get_mempool(&self, sh: ScriptHash) -> Result<Value, RpcError> {
        self.mempool()?;
        let entries = self.view().mempool_entries(&sh);
        Ok(Value::Array(
            entries
                .iter()
                .map(|(txid, height, fee)| json!({"height": height, "tx_hash": txid.to_string(), "fee": fee}))
                .collect(),
        ))
    }

    pub(crate) fn estimatefee(&self, blocks: u32) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        // ElectrumX's `bump_cost(2.0)`.
        self.charge_units(2);
        // Where the mempool would clear within `blocks` blocks, the least fee that enters
        // confirms in time; no estimate is below it.
        let floor = btc_per_kvb(pool.entry_fee_per_kvb());
        Ok(json!(pool
            .estimate_fee(blocks)
            .map_or(floor, |e| e.max(floor))))
    }

    /// `mempool.get_info`: bitcoind's `getmempoolinfo` fee rates in BTC/kvB; `mempoolminfee`
    /// rises above the relay fee after evictions (the rolling minimum fee).
    pub(crate) fn mempool_info(&self) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        Ok(json!({
            "mempoolminfee": btc_per_kvb(pool.entry_fee_per_kvb()),
            "minrelaytxfee": btc_per_kvb(pool.min_relay_per_kvb()),
            "incrementalrelayfee": btc_per_kvb(pool.min_relay_per_kvb()),
        }))
    }

    pub(crate) fn fee_histogram(&self) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        self.charge_units(1);
        Ok(Value::Array(
            pool.fee_histogram()
                .iter()
                .map(|(rate, vsize)| json!([rate, vsize]))
                .collect(),
        ))
    }

    /// Charges a broadcast's checks, which read outside the view
    /// ([`crate::listen::broadcast_checks`]), beyond what was `paid` for them before they ran.
    fn charge_checks(&self, raws: &[&[u8]], refused: bool, linearized: u64, paid: Cost) {
        let cost = crate::listen::broadcast_checks(raws, refused, linearized);
        self.meter.add(Cost {
            rows: cost.rows.saturating_sub(paid.rows),
            bytes: 0,
        });
    }

    /// The key a `kind` answer for `raws` is kept under, decided against the mempool and the
    /// tip now, and the answer kept under it, if any ([`crate::listen::VerdictCache`]).
    pub(crate) fn kept_verdict(
        &self,
        kind: &str,
        raws: &[&[u8]],
    ) -> Result<(VerdictKey, Option<KeptVerdict>), RpcError> {
        self.mempool()?;
        let model = &self.backend.model;
        let kept = self.backend.verdicts.lookup(model, kind, raws);
        kept.ok_or_else(|| RpcError::bad_request("this server keeps no mempool"))
    }

    /// Keeps `verdict`, decided against the state `key` names, if the tip and the mempool are
    /// still that state, `writes` generations on; else a later request is checked again.
    fn keep_verdict(
        &self,
        kind: &str,
        raws: &[&[u8]],
        key: VerdictKey,
        writes: u64,
        verdict: KeptVerdict,
    ) {
        let model = &self.backend.model;
        (self.backend.verdicts).keep_now(model, (kind, raws), &key, writes, verdict);
    }

    /// Charges an answer given again from the verdicts kept: a refused broadcast's 10 units
    /// ([`crate::listen::broadcast_checks`]), its checks not run again, so that a flood of
    /// repeats costs its sender as a flood of refusals does.
    pub(crate) fn charge_repeat(&self) {
        self.meter.add(crate::listen::cost::repeated());
    }

    /// Charges work that reads no rows at ElectrumX's price in units (50 rows a unit).
    fn charge_units(&self, units: u64) {
        self.meter.add(Cost {
            rows: units * 50,
            bytes: 0,
        });
    }

    /// `broadcast(raw_tx)`, its checks' estimated cost `paid` before; a refusal is kept under
    /// `key` for the same request against the same mempool and tip.
    pub(crate) fn broadcast(
        &self,
        raw: &[u8],
        paid: Cost,
        key: VerdictKey,
    ) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        let index = self.backend.model.index();
        let (accepted, linearized) = metered(|| pool.accept(raw, index));
        self.charge_checks(&[raw], accepted.is_err(), linearized, paid);
        let accepted = accepted.map_err(|e| {
            let refused = e.to_string();
            // A store that failed may answer next time. A refusal writes nothing: kept only
            // when nothing else wrote meanwhile either (else the refusal may be stale).
            if !matches!(e, Rejection::Backend(_)) {
                self.keep_verdict("broadcast", &[raw], key, 0, Err(refused.clone()));
            }
            rejected(&refused)
        })?;
        let txid = accepted.txid;
        self.backend.notifier.accepted(index, accepted);
        Ok(json!(txid.to_string()))
    }

    /// `broadcast_package(raw_txs, verbose=false)`: a child with its parents, child last. Each
    /// accepted transaction is relayed; the answer says whether all were, with a reason per
    /// refused one (the `verbose` form, bitcoind's own `submitpackage` answer, is not offered:
    /// the parser refuses it).
    pub(crate) fn broadcast_package(
        &self,
        raws: &[Vec<u8>],
        paid: Cost,
    ) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        let index = self.backend.model.index();
        let (results, linearized) = metered(|| pool.accept_package(raws, index));
        let refused = match &results {
            Ok(package) => package.each.iter().any(Result::is_err),
            Err(_) => true,
        };
        self.charge_checks(&slices(raws), refused, linearized, paid);
        let package =
            results.map_err(|e| RpcError::bad_request(format!("the package was rejected: {e}")))?;
        let mut errors = Vec::new();
        // What left the pool for the package (evicted) is told whether or not it entered.
        let mut changes = Changes::touching(package.touched);
        for (raw, result) in raws.iter().zip(package.each) {
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
            self.backend.notifier.publish(index, changes);
        }
        if errors.is_empty() {
            Ok(json!({"success": true}))
        } else {
            Ok(json!({"success": false, "errors": errors}))
        }
    }

    /// `testmempoolaccept(raw_txs)`: the mempool's dry run ([`Mempool::test_accept`]), nothing
    /// relayed, in ElectrumX's shape: per transaction `txid`, `wtxid`, `allowed` when decided
    /// and `reason` (the package's error, else the transaction's) when refused. Charged as a
    /// broadcast's checks, `paid` before they ran; the answer is kept under `key` for the same
    /// request against the same mempool and tip.
    pub(crate) fn test_mempool_accept(
        &self,
        raws: &[Vec<u8>],
        paid: Cost,
        key: VerdictKey,
    ) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        let (results, linearized) = metered(|| pool.test_accept(raws, self.backend.model.index()));
        // A dry run keeps nothing, so it is charged as a refusal whatever its answer.
        self.charge_checks(&slices(raws), true, linearized, paid);
        let results = results.map_err(|e| RpcError::bad_request(e.to_string()))?;
        let answer = Value::Array(
            results
                .iter()
                .map(|r| {
                    let mut item =
                        json!({"txid": r.txid.to_string(), "wtxid": r.wtxid.to_string()});
                    if let Some(verdict) = &r.verdict {
                        item["allowed"] = json!(verdict.is_ok());
                    }
                    let reason = r.package_error.clone().or_else(|| match &r.verdict {
                        Some(Err(e)) => Some(e.to_string()),
                        _ => None,
                    });
                    if let Some(reason) = reason {
                        item["reason"] = json!(reason);
                    }
                    item
                })
                .collect(),
        );
        let failed = results
            .iter()
            .any(|r| matches!(r.verdict, Some(Err(Rejection::Backend(_)))));
        if !failed {
            self.keep_verdict(
                "testmempoolaccept",
                &slices(raws),
                key,
                0,
                Ok(answer.clone()),
            );
        }
        Ok(answer)
    }

    /// `mempool.recent()`: the last 10 transactions to enter, newest first, as ElectrumX's
    /// `{txid, fee, vsize}` (read from the mempool's index by entry time).
    pub(crate) fn mempool_recent(&self) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        self.charge_units(1); // ElectrumX's `bump_cost(1.0)`.
        Ok(Value::Array(
            pool.recent(RECENT_TXS)
                .iter()
                .map(|e| json!({"txid": e.txid.to_string(), "fee": e.fee, "vsize": e.vsize}))
                .collect(),
        ))
    }

    pub(crate) fn get_balance(&self, sh: ScriptHash) -> Result<Value, RpcError> {
        let (confirmed, unconfirmed) = self.view().balance(&sh).map_err(view_err)?;
        Ok(json!({"confirmed": confirmed, "unconfirmed": unconfirmed}))
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
                .map(|u| json!({"height": u.height.unwrap_or(0), "tx_pos": u.vout, "tx_hash": u.txid.to_string(), "value": u.value}))
                .collect(),
        ))
    }

    pub(crate) fn transaction_get(&self, txid: Txid, verbose: bool) -> Result<Value, RpcError> {
        let view = self.view();
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

    /// Where the confirmed transaction `txid` is, checked against the height the client
    /// expects when it gives one.
    pub(crate) fn confirmed_position(
        view: &ChainView<'_>,
        txid: Txid,
        height: Option<u64>,
    ) -> Result<TxPosition, RpcError> {
        let pos = view
            .tx_position(&txid)
            .map_err(view_err)?
            .ok_or_else(|| RpcError::bad_request(format!("transaction {txid} is not confirmed")))?;
        if let Some(asked) = height {
            if asked != u64::from(pos.height) {
                return Err(RpcError::bad_request(format!(
                    "transaction {txid} is not in block {asked} (it is in {})",
                    pos.height
                )));
            }
        }
        Ok(pos)
    }

    pub(crate) fn get_merkle(&self, txid: Txid, height: Option<u64>) -> Result<Value, RpcError> {
        // 1.7 made the height optional (the parser requires it before).
        let view = self.view();
        let pos = Self::confirmed_position(&view, txid, height)?;
        let (merkle, _) = Self::merkle_of(&view, pos.height, pos.pos)?;
        let mut result = json!({"block_height": pos.height, "merkle": merkle, "pos": pos.pos});
        if self.v17() {
            let hash: Option<BlockHash> = view.block_hash(pos.height);
            result["block_hash"] = json!(hash.map(|h| h.to_string()));
        }
        Ok(result)
    }

    pub(crate) fn id_from_pos(
        &self,
        height: u32,
        pos: u32,
        want_merkle: bool,
    ) -> Result<Value, RpcError> {
        let (merkle, txid) = Self::merkle_of(&self.view(), height, pos)?;
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
    fn versions_print() {
        assert_eq!(version_text(ProtocolVersion::new(1, 6, 0)), "1.6");
        assert_eq!(version_text(ProtocolVersion::new(1, 4, 2)), "1.4.2");
    }
}

//! One client's Electrum session: its protocol state ([`Session`]: the negotiated version, the
//! subscriptions and what was last sent for them), the dispatcher of its calls, requests and
//! batches as JSON, and the notifications its subscriptions owe. The transports that carry it
//! are in `connection.rs`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bitcoin::hex::DisplayHex;
use bitcoin::OutPoint;
use serde_json::{json, Value};

use super::backend::Backend;
use super::cake_tweaks::TweaksJob;
use super::counted::busy;
pub(crate) use super::counted::{excessive, NoBudget, Room, Spent, SubscriptionShares, Taken};
use super::frigate_scan::{ScanJob, Start, Subscriptions as SpSubscriptions};
use super::history::{HistoryJob, Piece};
use super::methods::{add_peer, btc_per_kvb, pong_text, syncing_error, version_text, Ctx};
use super::outpoint::outpoint_notes;
use super::outpoint::{status_json, OutpointSub};
use super::request::{
    method_label, ProtocolVersion, Request, SpKeys, PROTOCOL_MAX, PROTOCOL_MIN, VERSIONS,
};
use super::rpc::{
    error_value, Reply, RpcError, BAD_REQUEST, HISTORY_TOO_LARGE, INVALID_REQUEST, PARSE_ERROR,
};
use crate::config::SERVER_SOFTWARE;
use crate::index::silent_payments::scan::ScanKeys;
use crate::listen::cost::{self, Verdict};
use crate::listen::{HostShares, WorkPool};
use crate::notify::TipUpdate;
use crate::types::ScriptHash;
use crate::view::Cost;
use crate::view::CostMeter;
use tokio::sync::mpsc;

/// Total bytes of one batch's answers before the rest of the batch is refused.
const MAX_BATCH_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// What one request line gets back.
pub(crate) enum Answer {
    /// A whole answer (or a batch's answers), JSON text.
    Line(String),
    /// An answer written in pieces by a job of its own: a long history, or a tweak stream.
    Stream(StreamJob),
    /// A batch's answers, to be written as one line `[a,b,...]` in pieces, never copied into
    /// one string (transports that take pieces; others get [`Answer::Line`]).
    Batch(Vec<String>),
    /// Nothing: the answer budget had no room for it (the client holds its share unread, or
    /// the budget stayed full), so the session ends.
    NoRoom,
}

/// An answer the session streams: written by its job, on a thread of its own.
pub(crate) enum StreamJob {
    /// A long history ([`HistoryJob::run`]).
    History(HistoryJob),
    /// Silent-payment tweaks of a range of heights ([`TweaksJob::run`]).
    Tweaks(TweaksJob),
}

impl StreamJob {
    /// The request's id, its method's label, and when it came.
    pub(crate) fn request(&self) -> (&Value, &'static str, std::time::Instant) {
        match self {
            StreamJob::History(j) => (&j.id, j.method, j.started),
            StreamJob::Tweaks(j) => (&j.id, j.method, j.started),
        }
    }

    /// Writes the answer's pieces to `tx` (see each job's `run`); returns what it read.
    pub(crate) fn run(self, tx: mpsc::Sender<Piece>, pool: &WorkPool, host: &HostShares) -> Cost {
        match self {
            StreamJob::History(j) => j.run(tx, pool, host),
            StreamJob::Tweaks(j) => j.run(tx, pool, host),
        }
    }
}

/// One connection's protocol state: the negotiated version, the subscriptions and what was last
/// sent for them. Its methods parse and dispatch calls ([`Session::call`]) and keep that state;
/// the methods' answers are built by the handlers on [`Ctx`] in the topic modules.
pub struct Session {
    backend: Arc<Backend>,
    /// Negotiated version (major, minor, patch); `None` until `server.version` (1.4 rules).
    version: Option<ProtocolVersion>,
    headers_subscribed: bool,
    last_notified: Option<(u32, bitcoin::BlockHash)>,
    /// Subscribed script hashes and their last status sent.
    subscriptions: HashMap<ScriptHash, Option<String>>,
    /// Subscribed outpoints (1.7) and their last status sent.
    outpoints: HashMap<OutPoint, OutpointSub>,
    /// The tip height of the last update handled, to tell a new block from a mempool change.
    seen_height: Option<u32>,
    /// When the server last sent this client a `server.ping` (1.7).
    last_ping: std::time::Instant,
    /// Whether the transport can take an answer in pieces (newline-delimited, not WebSocket).
    streams: bool,
    /// Whether a batch is being answered (its answers are built whole).
    in_batch: bool,
    /// What the views of the request being answered read.
    meter: CostMeter,
    /// What was read since the connection last charged the host ([`Session::take_spent`]).
    spent: Spent,
    /// Its subscriptions, counted for its host and the server.
    shares: SubscriptionShares,
    /// Its silent-payment subscriptions (Frigate's remote scanner) and the scans they need.
    silent: SpSubscriptions,
    /// The tip the silent-payment subscriptions were last brought up to.
    silent_tip: Option<(u32, bitcoin::BlockHash)>,
}

impl Session {
    /// A new connection's state: nothing negotiated or subscribed yet. `streams`: whether the
    /// transport takes a long answer in pieces.
    pub(crate) fn new(backend: Arc<Backend>, streams: bool, shares: SubscriptionShares) -> Self {
        Session {
            backend,
            version: None,
            headers_subscribed: false,
            last_notified: None,
            subscriptions: HashMap::new(),
            outpoints: HashMap::new(),
            seen_height: None,
            last_ping: std::time::Instant::now(),
            streams,
            in_batch: false,
            meter: CostMeter::default(),
            spent: Spent::default(),
            shares,
            silent: SpSubscriptions::default(),
            silent_tip: None,
        }
    }

    /// The protocol version whose rules apply: the negotiated one, 1.4 before `server.version`.
    fn protocol(&self) -> ProtocolVersion {
        self.version.unwrap_or(VERSIONS[0])
    }

    /// Whether the client negotiated protocol 1.7 or later.
    fn v17(&self) -> bool {
        self.protocol() >= ProtocolVersion::new(1, 7, 0)
    }

    /// What the handlers read for this connection now.
    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            backend: &self.backend,
            meter: &self.meter,
            version: self.protocol(),
            streams: self.streams && !self.in_batch,
        }
    }

    /// Charges the host what the requests and notifications read since the last charge, and
    /// `bytes` they moved ([`cost::units`]); says what its cost now lets it do.
    pub(crate) fn charge(&mut self, bytes: usize) -> Verdict {
        let Spent { requests, read } = std::mem::take(&mut self.spent);
        let limits = self.backend.config.cost;
        let units = cost::units(requests, read, bytes);
        self.shares.host.cost.charge(units, &limits)
    }

    /// The script and outpoint subscriptions held.
    pub(crate) fn subscription_count(&self) -> usize {
        self.subscriptions.len() + self.outpoints.len()
    }

    /// Refuses a new subscription when the connection holds its limit of script and outpoint
    /// subscriptions together.
    fn check_subscription_room(&self) -> Result<(), RpcError> {
        let config = &self.backend.config;
        let held = [
            (
                self.subscription_count(),
                config.max_subscriptions,
                "on this connection",
            ),
            (
                self.shares.host.subscriptions.load(Ordering::SeqCst),
                config.max_subscriptions_per_ip,
                "from this address",
            ),
            (
                self.shares.total.load(Ordering::SeqCst),
                config.max_subscriptions_total,
                "on this server",
            ),
        ];
        for (now, limit, of) in held {
            if now >= limit {
                return Err(RpcError::bad_request(format!(
                    "too many subscriptions {of} (limit {limit})"
                )));
            }
        }
        Ok(())
    }

    /// Answers one method call (whose id is `id_len` bytes of JSON), asking `room` first for
    /// the bytes the answer is known to take: `None` when the client is over its share.
    pub(crate) fn call(
        &mut self,
        method: &str,
        params: &[Value],
        id_len: usize,
        room: &mut dyn Room,
    ) -> Option<Result<Reply, RpcError>> {
        let request = match self.parse_call(method, params) {
            Ok(request) => request,
            Err(e) => return Some(Err(e)),
        };
        // Asked first only where the size is known; the rest is asked once built.
        let need = match request.answer_bytes(self.backend.config.max_headers) {
            0 => 0,
            known => known.saturating_add(id_len),
        };
        if need > room.most() {
            let over = room.most().saturating_sub(128);
            let err = RpcError::bad_request(format!(
                "answer over {over} bytes: more than this server's answer budget allows one client"
            ));
            return Some(Err(err));
        }
        match room.take(need) {
            Taken::Yes => {}
            Taken::OverShare => return None,
            Taken::Busy => return Some(Err(busy())),
        }
        let answer = self.dispatch(request).map_err(|e| self.in_protocol(e));
        self.shares.hold(self.subscription_count());
        self.shares.hold_silent(self.silent.len());
        Some(answer)
    }

    /// The call parsed, after the checks that come before any method.
    fn parse_call(&self, method: &str, params: &[Value]) -> Result<Request, RpcError> {
        // While the node is in its initial download only the `server.*` methods answer: a wallet
        // must not take an old tip and empty histories for the chain.
        if !method.starts_with("server.") {
            if let Some(sync) = self.backend.model.validator().initial_download() {
                return Err(syncing_error(sync));
            }
        }
        // The version is negotiated once: a second `server.version` is refused whatever its
        // parameters.
        if method == "server.version" && self.version.is_some() {
            return Err(RpcError::bad_request("server.version already sent"));
        }
        Request::parse(method, params, self.protocol())
    }

    /// An error as the negotiated protocol words it: before 1.7 a history over the limit was a
    /// plain "bad request".
    fn in_protocol(&self, mut e: RpcError) -> RpcError {
        if e.code == HISTORY_TOO_LARGE && !self.v17() {
            e.code = BAD_REQUEST;
        }
        e
    }

    /// Answers a parsed call: one arm per request, each calling its method's handler.
    fn dispatch(&mut self, request: Request) -> Result<Reply, RpcError> {
        use Request as R;
        let ctx = self.ctx();
        let value = match request {
            R::BlockHeader { height, cp_height } => ctx.block_header(height, cp_height),
            R::BlockHeaders {
                start_height,
                count,
                cp_height,
            } => ctx.block_headers(start_height, count, cp_height),
            R::BlockTweaks { height } => ctx.block_tweaks(height),
            R::TweaksSubscribe {
                height,
                count,
                historical,
            } => return ctx.tweaks_subscribe(height, count, historical),
            R::SilentPaymentsSubscribe {
                keys,
                start,
                labels,
            } => self.silent_subscribe(&keys, start, &labels),
            R::SilentPaymentsUnsubscribe { keys } => self.silent_unsubscribe(&keys),
            R::EstimateFee { number } => ctx.estimatefee(number),
            R::HeadersSubscribe => self.headers_subscribe(),
            R::OutpointGetStatus(op) => ctx.outpoint_get_status(op),
            R::OutpointSubscribe(op) => self.outpoint_subscribe(op),
            R::OutpointUnsubscribe(op) => Ok(json!(self.outpoints.remove(&op).is_some())),
            R::RelayFee => ctx
                .mempool()
                .map(|p| json!(btc_per_kvb(p.min_relay_per_kvb()))),
            R::GetBalance(sh) => ctx.get_balance(sh),
            R::GetHistory(sh) => return ctx.get_history(sh),
            R::GetMempool(sh) => ctx.get_mempool(sh),
            R::ListUnspent(sh) => ctx.listunspent(sh),
            R::Subscribe(sh) => self.subscribe(sh),
            R::Unsubscribe(sh) => Ok(json!(self.subscriptions.remove(&sh).is_some())),
            R::Broadcast { raw_tx } => self.broadcast(&ctx, &raw_tx),
            R::BroadcastPackage { raw_txs } => {
                ctx.mempool()?;
                let paid = self.pay_ahead(&raw_txs, false)?;
                ctx.broadcast_package(&raw_txs, paid)
            }
            R::TestMempoolAccept { raw_txs } => self.test_mempool_accept(&ctx, &raw_txs),
            R::TransactionGet { txid, verbose } => ctx.transaction_get(txid, verbose),
            R::GetMerkle { txid, height } => ctx.get_merkle(txid, height),
            R::GetMerkleWitness { txid, height, cb } => ctx.get_merkle_witness(txid, height, cb),
            R::IdFromPos {
                height,
                tx_pos,
                merkle,
            } => ctx.id_from_pos(height, tx_pos, merkle),
            R::FeeHistogram => ctx.fee_histogram(),
            R::MempoolInfo => ctx.mempool_info(),
            R::MempoolRecent => ctx.mempool_recent(),
            R::AddPeer => add_peer(),
            R::Banner => Ok(json!(ctx.backend.config.banner)),
            R::DonationAddress => Ok(json!(ctx.backend.config.donation_address)),
            R::Features => Ok(ctx.features()),
            R::PeersSubscribe => Ok(ctx.peers()),
            R::Ping { pong_len: Some(n) } => return Ok(Reply::Text(pong_text(n))),
            R::Ping { pong_len: None } => Ok(Value::Null),
            R::ServerVersion { min, max } => self.server_version(min, max),
        };
        value.map(Reply::Json)
    }

    /// `broadcast(raw_tx)`: refused again from the verdicts kept when the same transaction was
    /// refused against the same mempool and tip, else checked, its estimated cost paid first.
    fn broadcast(&self, ctx: &Ctx, raw: &[u8]) -> Result<Value, RpcError> {
        let (key, kept) = ctx.kept_verdict("broadcast", &[raw])?;
        if let Some(Err(refused)) = kept {
            ctx.charge_repeat();
            return Err(super::methods::rejected(&refused));
        }
        let paid = self.pay_ahead(&[raw.to_vec()], false)?;
        ctx.broadcast(raw, paid, key)
    }

    /// `testmempoolaccept(raw_txs)`: the answer kept for the same request against the same
    /// mempool and tip, else the dry run, its estimated cost paid first.
    fn test_mempool_accept(&self, ctx: &Ctx, raws: &[Vec<u8>]) -> Result<Value, RpcError> {
        let slices: Vec<&[u8]> = raws.iter().map(Vec::as_slice).collect();
        let (key, kept) = ctx.kept_verdict("testmempoolaccept", &slices)?;
        if let Some(kept) = kept {
            ctx.charge_repeat();
            return kept.map_err(RpcError::bad_request);
        }
        let paid = self.pay_ahead(raws, true)?;
        ctx.test_mempool_accept(raws, paid, key)
    }

    /// Charges the host, before a broadcast's, a package's or a dry run's checks run, what they
    /// are estimated to cost ([`crate::listen::broadcast_checks`]: their bytes, legacy hashing,
    /// signature checks, and for a `dry_run` the refusal's price it always pays); refuses them
    /// (`excessive resource usage`) without running when that takes the host to the hard limit
    /// (its session is then closed), or an exempt connection's group to its own (an exempt
    /// connection's account starts afresh with each connection). What they cost beyond is
    /// charged after. Returns what was paid.
    fn pay_ahead(&self, raws: &[Vec<u8>], dry_run: bool) -> Result<Cost, RpcError> {
        let limits = self.backend.config.cost;
        let slices: Vec<&[u8]> = raws.iter().map(Vec::as_slice).collect();
        let estimate = crate::listen::broadcast_checks(&slices, dry_run, 0);
        let units = cost::units(0, estimate, 0);
        // Refused, the host is at the hard limit, and its session is closed as any over its
        // cost.
        if !self.shares.host.cost.pay_ahead(units, &limits) {
            crate::metrics::metrics().electrum_refused_ahead.inc();
            return Err(super::counted::excessive());
        }
        Ok(estimate)
    }

    /// `server.version`: the newest version served within what the client accepts.
    fn server_version(
        &mut self,
        min: ProtocolVersion,
        max: ProtocolVersion,
    ) -> Result<Value, RpcError> {
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

    /// `blockchain.silentpayments.subscribe`: the address, its scan queued
    /// ([`Session::take_scans`]).
    fn silent_subscribe(
        &mut self,
        keys: &SpKeys,
        start: Option<Start>,
        labels: &[u32],
    ) -> Result<Value, RpcError> {
        self.ctx().tweaks_ready()?;
        let labels: Vec<u32> = [0].into_iter().chain(labels.iter().copied()).collect();
        let keys = ScanKeys::new(&keys.scan, &keys.spend, &labels)
            .map_err(|e| RpcError::invalid_params(e.to_string()))?;
        let tip = self.backend.model.view().tip();
        let room = || self.shares.silent_room();
        let address = self.silent.subscribe(&self.backend, keys, start, room)?;
        self.silent_tip = tip;
        Ok(address)
    }

    /// `blockchain.silentpayments.unsubscribe`: the address, its scan stopped.
    fn silent_unsubscribe(&mut self, keys: &SpKeys) -> Result<Value, RpcError> {
        let keys = ScanKeys::new(&keys.scan, &keys.spend, &[])
            .map_err(|e| RpcError::invalid_params(e.to_string()))?;
        Ok(self.silent.unsubscribe(&self.backend, &keys))
    }

    /// Whether a silent-payment scan's notification is still to be sent (its scan not
    /// replaced, its subscription not dropped).
    pub(crate) fn scan_is_current(&self, address: &str, generation: u64) -> bool {
        self.silent.is_current(address, generation)
    }

    /// The silent-payment scans to start now.
    pub(crate) fn take_scans(&mut self) -> Vec<ScanJob> {
        self.silent.take_jobs()
    }

    /// A silent-payment scan ended: the subscription's next one, if it needs one.
    pub(crate) fn scan_ended(
        &mut self,
        address: &Arc<str>,
        generation: u64,
        scanned: Vec<(u32, bitcoin::BlockHash)>,
        told: Vec<bitcoin::Txid>,
    ) {
        self.silent
            .ended(&self.backend, address, generation, scanned, told);
    }

    /// `blockchain.headers.subscribe`: the tip, from now on notified when it changes.
    fn headers_subscribe(&mut self) -> Result<Value, RpcError> {
        let (answer, tip) = self.ctx().headers_subscribe()?;
        self.headers_subscribed = true;
        self.last_notified = tip;
        Ok(answer)
    }

    /// `blockchain.scripthash.subscribe` / `scriptpubkey.subscribe`: the script's status, from
    /// now on notified when it changes.
    fn subscribe(&mut self, sh: ScriptHash) -> Result<Value, RpcError> {
        if !self.subscriptions.contains_key(&sh) {
            self.check_subscription_room()?;
        }
        let status = self.ctx().status_of(&sh)?;
        self.subscriptions.insert(sh, status.clone());
        Ok(json!(status))
    }

    /// `blockchain.outpoint.subscribe(tx_hash, txout_idx, spk_hint=None)`: kept even when the
    /// output does not exist yet, as the protocol asks. Counts against the connection's
    /// subscription limit together with script subscriptions.
    fn outpoint_subscribe(&mut self, op: OutPoint) -> Result<Value, RpcError> {
        if !self.outpoints.contains_key(&op) {
            self.check_subscription_room()?;
        }
        let (status, script) = self.ctx().outpoint_status(&op)?;
        let answer = status_json(&status);
        self.outpoints.insert(op, OutpointSub { script, status });
        Ok(answer)
    }

    /// Answers one request object as JSON text (`None` for a notification, a request without
    /// an `id`, which is neither run nor answered).
    fn handle_request(&mut self, request: &Value, room: &mut dyn Room) -> Option<Answer> {
        let Some(obj) = request.as_object() else {
            let err = RpcError::new(INVALID_REQUEST, "a request must be a JSON object");
            return Some(Answer::Line(error_value(Value::Null, &err).to_string()));
        };
        let id = obj.get("id").cloned();
        let Some(method) = obj.get("method").and_then(Value::as_str) else {
            let err = RpcError::new(INVALID_REQUEST, "missing method");
            return Some(Answer::Line(
                error_value(id.unwrap_or(Value::Null), &err).to_string(),
            ));
        };
        let params = match super::named_params::params_of(method, obj.get("params")) {
            Ok(params) => params,
            Err(err) => {
                return Some(Answer::Line(
                    error_value(id.unwrap_or(Value::Null), &err).to_string(),
                ))
            }
        };
        tracing::trace!("electrum request {method}");
        let (started, label) = (std::time::Instant::now(), method_label(method));
        let Some(id) = id else {
            // A notification gets no answer, so it does no work either (ElectrumX and Fulcrum
            // run none): counted as an error of its method, nothing else.
            crate::metrics::metrics().electrum_request(label, started.elapsed(), true);
            self.spent.requests += 1;
            return None;
        };
        let before = room.held();
        let id_len = id.to_string().len();
        let Some(result) = self.call(method, &params, id_len, room) else {
            crate::metrics::metrics().electrum_request(label, started.elapsed(), true);
            return Some(Answer::NoRoom);
        };
        let read = self.meter.take();
        self.spent.requests += 1;
        self.spent.read = self.spent.read.plus(read);
        crate::metrics::metrics().electrum_read(label, read.rows, read.bytes);
        // A history streamed in pieces is counted when its last piece is written (`stream`).
        let streamed = matches!(result, Ok(Reply::History(_) | Reply::Tweaks { .. }));
        if !streamed {
            crate::metrics::metrics().electrum_request(label, started.elapsed(), result.is_err());
        }
        let answered_id = id.clone();
        let answer = match result {
            Ok(Reply::Json(value)) => {
                Answer::Line(json!({"jsonrpc": "2.0", "id": id, "result": value}).to_string())
            }
            Ok(Reply::Text(mut text)) => {
                // In place: the text's own allocation, moved up (it has room, for a pong).
                let head = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":");
                text.insert_str(0, &head);
                text.push('}');
                Answer::Line(text)
            }
            Ok(Reply::History(sh)) => {
                let v17 = self.v17();
                Answer::Stream(StreamJob::History(HistoryJob {
                    backend: self.backend.clone(),
                    sh,
                    id,
                    v17,
                    method: label,
                    started,
                }))
            }
            Ok(Reply::Tweaks {
                height,
                count,
                historical,
            }) => Answer::Stream(StreamJob::Tweaks(TweaksJob {
                backend: self.backend.clone(),
                id,
                height,
                count,
                historical,
                method: label,
                started,
            })),
            Err(e) => Answer::Line(error_value(id, &e).to_string()),
        };
        // What the answer took beyond what was asked before it was built.
        if let Answer::Line(text) = &answer {
            let asked = room.held() - before;
            match room.take(text.len().saturating_sub(asked)) {
                Taken::Yes => {}
                Taken::OverShare => return Some(Answer::NoRoom),
                // Its text goes; a short error takes its place (its bytes are asked when it
                // is queued).
                Taken::Busy => {
                    return Some(Answer::Line(error_value(answered_id, &busy()).to_string()))
                }
            }
        }
        Some(answer)
    }

    /// Answers one line: a request or a batch, each answer's bytes held in `room` (an
    /// answer that finds none is [`Answer::NoRoom`]).
    pub(crate) fn handle_line(&mut self, line: &[u8], room: &mut dyn Room) -> Option<Answer> {
        let parsed: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                let err = RpcError::new(PARSE_ERROR, format!("invalid JSON: {e}"));
                return Some(Answer::Line(error_value(Value::Null, &err).to_string()));
            }
        };
        // The request's bytes are charged, and a single answer's (a batch's are charged item by
        // item, a streamed history's as it is written).
        let (answer, answered) = match parsed {
            Value::Array(batch) => {
                self.in_batch = true;
                let answer = self.handle_batch(&batch, room);
                self.in_batch = false;
                (answer, 0)
            }
            single => {
                let answer = self.handle_request(&single, room);
                let answered = match &answer {
                    Some(Answer::Line(text)) => text.len(),
                    _ => 0,
                };
                (answer, answered)
            }
        };
        self.charge(line.len() + answered);
        answer
    }

    /// A batch's answers, built whole (nothing in it is streamed), each held in `room` as it is
    /// built.
    fn handle_batch(&mut self, batch: &[Value], room: &mut dyn Room) -> Option<Answer> {
        if batch.is_empty() {
            let err = RpcError::new(INVALID_REQUEST, "empty batch");
            return Some(Answer::Line(error_value(Value::Null, &err).to_string()));
        }
        if batch.len() > self.backend.config.max_batch {
            let err = RpcError::bad_request(format!(
                "batch of {} requests exceeds the limit of {}",
                batch.len(),
                self.backend.config.max_batch
            ));
            return Some(Answer::Line(error_value(Value::Null, &err).to_string()));
        }
        let mut answers: Vec<String> = Vec::new();
        let (mut bytes, mut over_cost) = (0usize, false);
        for request in batch {
            let id = || request.get("id").cloned().unwrap_or(Value::Null);
            let answer = if bytes > MAX_BATCH_RESPONSE_BYTES {
                let err = RpcError::bad_request(
                    "response too large: the batch's answers exceed the limit",
                );
                Some(error_value(id(), &err).to_string())
            } else if over_cost {
                Some(error_value(id(), &excessive()).to_string())
            } else {
                match self.handle_request(request, room) {
                    Some(Answer::Line(text)) => Some(text),
                    // Not reached: a session in a batch builds every answer whole.
                    Some(Answer::Stream(job)) => {
                        let err = RpcError::bad_request("not streamed in a batch");
                        Some(error_value(job.request().0.clone(), &err).to_string())
                    }
                    Some(Answer::NoRoom) => return Some(Answer::NoRoom),
                    // Not reached: only a batch answers in pieces.
                    Some(Answer::Batch(parts)) => Some(format!("[{}]", parts.join(","))),
                    None => None,
                }
            };
            // Each answer is charged as it is built: a batch pays as it goes, and what comes
            // after the hard limit is refused.
            let answered = answer.as_ref().map_or(0, String::len);
            over_cost = over_cost || self.charge(answered) == Verdict::Close;
            if let Some(a) = answer {
                bytes += a.len() + 1;
                answers.push(a);
            }
        }
        if answers.is_empty() {
            return None;
        }
        if self.streams {
            return Some(Answer::Batch(answers));
        }
        // Its brackets and commas are held too; each answer is freed as it is copied into the
        // line (whose pages fill as they are written), so the copy costs one answer at most.
        if room.take(answers.len() + 1) == Taken::OverShare {
            return Some(Answer::NoRoom);
        }
        let mut out = String::with_capacity(bytes + 1);
        out.push('[');
        for (i, a) in answers.into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&a);
        }
        out.push(']');
        Some(Answer::Line(out))
    }

    /// The subscribed scripts `update` may have changed: those it touched (walking the smaller
    /// of the two sets), or all of them when it cannot say (`None`, or a lagged session).
    fn touched_subscriptions(&self, update: Option<&TipUpdate>) -> Vec<ScriptHash> {
        match update.and_then(|u| u.touched.as_deref()) {
            Some(touched) if touched.len() < self.subscriptions.len() => touched
                .iter()
                .filter(|sh| self.subscriptions.contains_key(sh))
                .copied()
                .collect(),
            Some(touched) => self
                .subscriptions
                .keys()
                .filter(|sh| touched.contains(sh))
                .copied()
                .collect(),
            None => self.subscriptions.keys().copied().collect(),
        }
    }

    /// Whether `update` may change anything this session is notified of (a lagged session's
    /// `None` always may): a tip a header subscriber has not been told, a subscribed script it
    /// touched, an outpoint it may have changed. Told without reading anything, so a session
    /// with nothing to recompute takes no place in the query pool.
    pub(crate) fn cares_about(&self, update: Option<&TipUpdate>) -> bool {
        let Some(u) = update else { return true };
        let tip = Some((u.height, u.header.block_hash()));
        (self.headers_subscribed && self.last_notified != tip)
            || (self.silent.len() > 0
                && (self.silent_tip != tip
                    || u.entered_mempool.as_ref().is_none_or(|a| !a.is_empty())))
            || self.must_read_for(update)
    }

    /// Whether `update` makes this session read statuses again (a subscribed script touched, an
    /// outpoint that may have changed, a lagged session): what only tells a header subscriber
    /// of the new tip reads nothing but the tip, and needs no place in the query pool.
    pub(crate) fn must_read_for(&self, update: Option<&TipUpdate>) -> bool {
        let Some(u) = update else { return true };
        let new_block = self.seen_height != Some(u.height);
        !self.touched_subscriptions(update).is_empty()
            || self
                .outpoints
                .iter()
                .any(|(op, sub)| sub.may_change(op, update, new_block))
    }

    /// Notifications owed after a tip update.
    pub(crate) fn on_update(&mut self, update: Option<&TipUpdate>) -> Vec<String> {
        let mut out = Vec::new();
        let view = self.backend.model.view();
        let tip = view
            .tip()
            .and_then(|(h, _)| view.header(h).map(|header| (h, header)));
        drop(view);
        if self.headers_subscribed {
            if let Some((height, header)) = tip {
                let now = Some((height, header.block_hash()));
                if self.last_notified != now {
                    self.last_notified = now;
                    let hex = bitcoin::consensus::serialize(&header).to_lower_hex_string();
                    out.push(
                        json!({"jsonrpc": "2.0", "method": "blockchain.headers.subscribe",
                               "params": [{"height": height, "hex": hex}]})
                        .to_string(),
                    );
                }
            }
        }
        let hashes = self.touched_subscriptions(update);
        // 1.7 renamed the script methods; a notification carries the script hash either way.
        let method = if self.v17() {
            "blockchain.scriptpubkey.subscribe"
        } else {
            "blockchain.scripthash.subscribe"
        };
        for sh in hashes {
            let Ok(new_status) = self.ctx().status_of(&sh) else {
                continue;
            };
            let old = self.subscriptions.insert(sh, new_status.clone());
            if old.as_ref() != Some(&new_status) {
                out.push(
                    json!({"jsonrpc": "2.0", "method": method,
                           "params": [sh.to_electrum_hex(), new_status]})
                    .to_string(),
                );
            }
        }
        let tip_id = tip.map(|(h, header)| (h, header.block_hash()));
        // A block's own transactions left the pool: only what entered it is scanned again.
        let entered = update.and_then(|u| u.entered_mempool.as_ref());
        if self.silent.len() > 0
            && (update.is_none()
                || self.silent_tip != tip_id
                || entered.is_none_or(|a| !a.is_empty()))
        {
            self.silent_tip = tip_id;
            self.silent.on_update(&self.backend, entered);
        }
        let height = tip.map(|(h, _)| h);
        let new_block = update.is_none() || height != self.seen_height;
        self.seen_height = height;
        // Built from the fields, not `self.ctx()`: the outpoints are changed meanwhile.
        let ctx = Ctx {
            backend: &self.backend,
            meter: &self.meter,
            version: self.protocol(),
            streams: false,
        };
        out.extend(outpoint_notes(&ctx, &mut self.outpoints, update, new_block));
        // What recomputing the statuses read, counted apart from any request's, and charged.
        let read = self.meter.take();
        self.spent.read = self.spent.read.plus(read);
        crate::metrics::metrics().electrum_read("notifications", read.rows, read.bytes);
        if self.v17() {
            out.extend(self.pings(out.len(), new_block));
        }
        out
    }

    /// The `server.ping` notifications a 1.7 client gets as cover traffic, as ElectrumX sends
    /// them: after a block that brought it fewer than two notifications, one (and another each
    /// time a 1-in-10 draw says so); after mempool changes, one when none was sent for ten
    /// minutes. Each carries 128 hex characters, about a script notification's length.
    fn pings(&mut self, sent: usize, new_block: bool) -> Vec<String> {
        use rand::Rng;
        const QUIET: std::time::Duration = std::time::Duration::from_secs(600);
        let mut count = 0;
        if new_block {
            count += usize::from(sent < 2);
            let mut rng = rand::thread_rng();
            while count < 8 && rng.gen_bool(0.1) {
                count += 1;
            }
        } else if self.last_ping.elapsed() >= QUIET {
            count = 1;
        }
        if count > 0 {
            self.last_ping = std::time::Instant::now();
        }
        let ping = json!({"jsonrpc": "2.0", "method": "server.ping", "params": ["0".repeat(128)]})
            .to_string();
        vec![ping; count]
    }
}

/// One client's requests answered without a socket: the request parser and dispatcher a session
/// runs, for the request fuzzer (`fuzz/fuzz_targets/electrum_request.rs`).
pub struct Requests(Session);

impl Requests {
    /// A fresh client (no version negotiated, no subscriptions) of `backend`.
    pub fn new(backend: Arc<Backend>) -> Self {
        let shares = SubscriptionShares::new(crate::listen::Seat::detached(), Arc::default());
        Requests(Session::new(backend, false, shares))
    }

    /// The answer to one request line (a request or a batch), `None` when it owes none.
    pub fn answer(&mut self, line: &[u8]) -> Option<String> {
        match self.0.handle_line(line, &mut NoBudget)? {
            Answer::Line(text) => Some(text),
            Answer::Batch(parts) => Some(format!("[{}]", parts.join(","))),
            Answer::NoRoom => None,
            // A session without a socket builds every answer whole.
            Answer::Stream(job) => {
                let err = RpcError::bad_request("not streamed here");
                Some(error_value(job.request().0.clone(), &err).to_string())
            }
        }
    }
}

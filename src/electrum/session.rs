//! One client's Electrum session: its protocol state ([`Session`]: the negotiated version, the
//! subscriptions and what was last sent for them), the dispatcher of its calls, and the
//! notifications its subscriptions owe after an update. The handlers, their renderers and
//! notifications are in their namespaces' files (`server.rs`, `headers.rs`, `scripthash.rs`,
//! `transaction.rs`, `mempool.rs`, `outpoint.rs`, `cake_tweaks.rs`, `frigate_scan.rs`); what
//! changes the session's own state (a subscription, the version) stays here, a few lines
//! each. JSON-RPC's framing (a line, a request, a batch) is `framing.rs`'s; the transports that
//! carry it are in `connection.rs`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bitcoin::OutPoint;
use serde_json::{json, Value};

use super::backend::Backend;
use super::context::{syncing_error, Ctx};
use super::counted::{busy, Room, Spent, SubscriptionShares, Taken};
use super::frigate_scan::{ScanJob, Start, Subscriptions as SpSubscriptions};
use super::headers::header_note;
use super::outpoint::{outpoint_notes, status_json, OutpointSub};
use super::request::{Request, SpKeys, VERSIONS};
use super::rpc::{Reply, RpcError, BAD_REQUEST, HISTORY_TOO_LARGE};
use super::scripthash::script_notes;
use super::server::{add_peer, negotiate, pings, pong_text, version_answer};
use crate::index::silent_payments::scan::ScanKeys;
use crate::notify::TipUpdate;
use crate::types::{ProtocolVersion, ScriptHash};
use crate::view::CostMeter;

mod framing;

use crate::work::cost::{self, Verdict};
pub use framing::Requests;
pub(crate) use framing::{Answer, StreamJob};

/// One connection's protocol state: the negotiated version, the subscriptions and what was last
/// sent for them. Its methods parse and dispatch calls ([`Session::call`]), keep that state
/// and tell what an update changed ([`Session::on_update`]); the answers are built by the
/// handlers on [`Ctx`], each in its namespace's file.
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
            host: &self.shares.host,
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
        // Tried on the connection's task: refused before anything is taken or changed.
        let max_headers = self.backend.config.max_headers;
        if crate::types::inline() && !request.may_answer_inline(max_headers) {
            crate::types::refuse_inline();
            return Some(Err(RpcError::bad_request("not answered inline")));
        }
        // Asked first only where the size is known; the rest is asked once built.
        let need = match request.answer_bytes(max_headers) {
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
            R::BlockTweaks { height } => return ctx.block_tweaks(height),
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
            R::RelayFee => ctx.relayfee(),
            R::GetBalance(sh) => ctx.get_balance(sh),
            R::GetHistory(sh) => return ctx.get_history(sh),
            R::GetMempool(sh) => ctx.get_mempool(sh),
            R::ListUnspent(sh) => ctx.listunspent(sh),
            R::Subscribe(sh) => self.subscribe(sh),
            R::Unsubscribe(sh) => Ok(json!(self.subscriptions.remove(&sh).is_some())),
            R::Broadcast { raw_tx } => ctx.broadcast(&raw_tx),
            R::BroadcastPackage { raw_txs } => ctx.broadcast_package(&raw_txs),
            R::TestMempoolAccept { raw_txs } => ctx.test_mempool_accept(&raw_txs),
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
            R::Banner => Ok(ctx.banner()),
            R::DonationAddress => Ok(ctx.donation_address()),
            R::Features => Ok(ctx.features()),
            R::PeersSubscribe => Ok(ctx.peers()),
            R::Ping { pong_len: Some(n) } => return Ok(Reply::Text(pong_text(n))),
            R::Ping { pong_len: None } => Ok(Value::Null),
            R::ServerVersion { min, max } => self.server_version(min, max),
        };
        value.map(Reply::Json)
    }

    /// `server.version`: the newest version served within what the client accepts, kept for
    /// the connection.
    fn server_version(
        &mut self,
        min: ProtocolVersion,
        max: ProtocolVersion,
    ) -> Result<Value, RpcError> {
        let chosen = negotiate(min, max)?;
        self.version = Some(chosen);
        Ok(version_answer(chosen))
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
                    out.push(header_note(height, &header));
                }
            }
        }
        let touched = self.touched_subscriptions(update);
        // Built from the fields, not `self.ctx()`: the subscriptions are changed meanwhile.
        let ctx = Ctx {
            backend: &self.backend,
            meter: &self.meter,
            host: &self.shares.host,
            version: self.protocol(),
            streams: false,
        };
        out.extend(script_notes(&ctx, &mut self.subscriptions, touched));
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
        out.extend(outpoint_notes(&ctx, &mut self.outpoints, update, new_block));
        // What recomputing the statuses read, counted apart from any request's, and charged.
        let read = self.meter.take();
        self.spent.read = self.spent.read.plus(read);
        crate::metrics::metrics().electrum_read("notifications", read.rows, read.bytes);
        if self.v17() {
            out.extend(pings(&mut self.last_ping, out.len(), new_block));
        }
        out
    }
}

//! A peer connection after its handshake: one handler per message the peer sends, block
//! requests from the shared [`super::sync::Downloader`], and announcements of the transactions
//! the mempool accepts.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bitcoin::hashes::Hash;
use bitcoin::p2p::address::{AddrV2, AddrV2Message, Address};
use bitcoin::p2p::message::NetworkMessage;
use bitcoin::p2p::message_blockdata::{GetHeadersMessage, Inventory};
use bitcoin::p2p::ServiceFlags;
use bitcoin::{BlockHash, Transaction};
use rand::seq::SliceRandom;
use tokio::sync::{broadcast, mpsc};

use super::addrbook::{AddrRate, KnownAddr, MAX_ADDR_PER_MESSAGE};
use super::codec::{CodecError, Held, Incoming, Outgoing};
use super::context::{MempoolAccess, PeerContext};
use super::error::PeerError;
use super::filters;
use super::handshake::{PeerTraits, PROTOCOL_VERSION};
use super::headers_sync::HeadersSync;
use super::inbound::Merit;
use super::orphans::NewOrphan;
use super::send::SendQueue;
use super::sync::{Delivered, PeerId};
use crate::index::Index;
use crate::kernel::Validator;
use crate::mempool::linearize::metered;
use crate::mempool::Rejection;

mod headers;
mod owed;
mod packages;
mod ping;
mod relay;
use super::tx_budget::TxBudget;
use owed::Owed;

/// Most headers in one `headers` message.
pub const MAX_HEADERS: usize = 2000;
/// Whether an acceptance ran its checks and refused: one already held, or a backend failure of
/// cairn's own, costs the sender no refusal.
fn refused_after_checks<T>(outcome: &Result<T, Rejection>) -> bool {
    !matches!(
        outcome,
        Ok(_) | Err(Rejection::AlreadyInMempool | Rejection::AlreadyKnown | Rejection::Backend(_))
    )
}

/// The transactions `tx` spends from that neither the mempool nor the chain has: the parents to
/// ask for (an input of a known transaction that is spent or missing makes no orphan).
fn unknown_parents(tx: &Transaction, m: &MempoolAccess) -> Vec<bitcoin::Txid> {
    let mut parents: Vec<bitcoin::Txid> = tx.input.iter().map(|i| i.previous_output.txid).collect();
    parents.sort();
    parents.dedup();
    parents.retain(|p| m.mempool.raw(p).is_none() && matches!(m.index.tx_position(p), Ok(None)));
    parents
}

/// Most hashes in a `getheaders` locator (Core's MAX_LOCATOR_SZ).
pub const MAX_LOCATOR: usize = 101;
/// `headers` messages that do not connect to a known header a peer may send before it is
/// treated as misbehaving (Core's MAX_NUM_UNCONNECTING_HEADERS_MSGS); each is answered with a
/// `getheaders`, as after a reorg the peer may simply be ahead of what it announced.
const MAX_UNCONNECTING_HEADERS: u32 = 10;
/// Most entries of an `inv` or `getdata` (Core's MAX_INV_SZ).
const MAX_INV: usize = 50_000;
/// How often block requests are topped up and silence is checked.
const TICK: Duration = Duration::from_millis(200);

/// One connected peer's state and the queue to its writer task.
///
/// Its message handlers are here but for the exchanges with rules of their own, each in a file
/// under `session/` named for it (`headers`, `owed` answers, `relay`, `packages`; `ping` keeps
/// the pings' own state), as Core's net_processing.cpp has a function for each.
pub struct Session<'a> {
    /// Where messages to the peer are queued.
    out: &'a SendQueue,
    /// What it asked for and has not been sent yet.
    owed: Owed,
    /// Transactions to announce to it, and those it has.
    trickle: relay::Trickle,
    id: PeerId,
    /// Where it connects from: the source its gossip is filed under.
    addr: SocketAddr,
    ctx: &'a PeerContext,
    traits: &'a PeerTraits,
    inbound: bool,
    /// How many gossiped addresses it may still send (Core's `m_addr_token_bucket`).
    addr_rate: AddrRate,
    /// Whether this peer's one `getaddr` was answered.
    answered_getaddr: bool,
    /// `headers` messages in a row that did not connect.
    unconnecting_headers: u32,
    /// Its low-work chain being checked before any of it reaches the kernel.
    headers_sync: Option<HeadersSync>,
    /// When the `getheaders` it has not answered yet was sent (Core's
    /// `m_last_getheaders_timestamp`): one at a time, so answers to two requests do not cross.
    getheaders_sent: Option<tokio::time::Instant>,
    /// It asked for new blocks as `headers` (BIP130 `sendheaders`) rather than `inv`.
    wants_headers: bool,
    /// The highest block it is known to have (Core's `pindexBestKnownBlock`): what its headers
    /// and block announcements showed, never the height its `version` claims.
    best_known: i64,
    /// Whether a BIP35 `mempool` request is still owed to it (an outbound NODE_BLOOM peer),
    /// sent once cairn's mempool is at the tip.
    mempool_owed: bool,
    /// Its ping in flight (Core's `MaybeSendPing`).
    pinger: ping::Pinger,
    /// What its host's transactions' checks have cost (inbound peers only): a transaction that
    /// does not fit is dropped unread.
    tx_budget: Option<Arc<TxBudget>>,
}

impl<'a> Session<'a> {
    /// A session over a connection whose handshake is done.
    pub fn new(
        out: &'a SendQueue,
        id: PeerId,
        addr: SocketAddr,
        ctx: &'a PeerContext,
        traits: &'a PeerTraits,
        inbound: bool,
    ) -> Self {
        Session {
            out,
            owed: Owed::default(),
            trickle: relay::Trickle::new(),
            id,
            addr,
            ctx,
            traits,
            inbound,
            addr_rate: AddrRate::default(),
            answered_getaddr: false,
            unconnecting_headers: 0,
            headers_sync: None,
            getheaders_sent: None,
            wants_headers: false,
            best_known: -1,
            mempool_owed: !inbound
                && ctx.mempool.is_some()
                && traits.services.has(ServiceFlags::BLOOM),
            pinger: ping::Pinger::default(),
            tx_budget: inbound.then(|| ctx.tx_budgets.join(id, addr.ip())),
        }
    }

    /// Runs until the peer disconnects, misbehaves or goes silent; returns why it ended.
    pub async fn run(
        mut self,
        mut incoming: mpsc::Receiver<Result<(Incoming, Option<Held>), CodecError>>,
    ) -> Result<Infallible, PeerError> {
        let mut accepted = match &self.ctx.mempool {
            Some(m) => m.notifier.subscribe_txs(),
            None => broadcast::channel(1).1,
        };
        let mut sync_now = self.ctx.sync_now.subscribe();
        let mut tips = self.ctx.tip.subscribe();
        // Blocks are announced from the tip at the start on; the peer learns older ones from its
        // own `getheaders`.
        let mut announced = *tips.borrow_and_update();
        // From the best header's parent, as Core's first `getheaders`: the answer then has at
        // least one header, which shows how far the peer's chain goes.
        let first = tokio::task::block_in_place(|| self.ctx.validator.locator_before_best());
        self.send_getheaders(get_headers_from(first))?;
        if !self.inbound {
            self.queue(NetworkMessage::GetAddr)?;
            self.addr_rate.asked();
        }
        let mut tick = tokio::time::interval(TICK);
        let mut last_heard = tokio::time::Instant::now();
        let timeout = self.ctx.timeout;
        let mut reading = self.out.watch(timeout);
        loop {
            // Core's `fPauseSend`: while the peer is owed answers or has not read enough of what
            // is queued, its next messages wait (and so does its idle clock).
            let listening = self.owed.is_empty() && !self.out.paused();
            tokio::select! {
                msg = incoming.recv(), if listening => {
                    // The message's share of the receive budget goes back once it is handled.
                    let (msg, _held) = msg.ok_or(PeerError::Closed)??;
                    last_heard = tokio::time::Instant::now();
                    self.on_message(msg)?;
                }
                () = self.out.written(), if !listening => self.serve_owed()?,
                txid = accepted.recv(), if self.ctx.mempool.is_some() => {
                    if let Ok(txid) = txid {
                        self.announce(txid);
                    }
                }
                moved = tips.changed() => {
                    let tip = *tips.borrow_and_update();
                    if let (Ok(()), Some(tip)) = (moved, tip) {
                        self.announce_block(announced, tip)?;
                        announced = Some(tip);
                    }
                }
                nudge = sync_now.recv() => {
                    if nudge.is_ok() {
                        self.ask_headers()?;
                    }
                }
                _ = tick.tick() => {
                    // Time spent owing the peer is not its silence (its messages wait on cairn),
                    // nor is time it spends reading what cairn sent.
                    if !listening || reading.advanced() {
                        last_heard = tokio::time::Instant::now();
                    }
                    // Not read while paused: an end of either direction is seen here.
                    if !listening && incoming.is_closed() && incoming.is_empty() {
                        return Err(PeerError::Closed);
                    }
                    if self.out.writer_gone() {
                        return Err(PeerError::WriterGone);
                    }
                    if last_heard.elapsed() > timeout {
                        return Err(PeerError::Timeout);
                    }
                    // Core pings every 2 minutes; a quiet peer is pinged halfway through its
                    // timeout too, so an honest one that has nothing to say answers in time.
                    let quiet = last_heard.elapsed() > timeout / 2
                        && self.pinger.last_sent().is_none_or(|t| t.elapsed() > timeout / 2);
                    if let Some(nonce) = self.pinger.due(ping::PING_INTERVAL, quiet) {
                        self.queue(NetworkMessage::Ping(nonce))?;
                    }
                    if reading.stalled(self.out.queued(), tokio::time::Instant::now()) {
                        return Err(PeerError::NotReading(format!(
                            "{} bytes unread for {}s",
                            self.out.queued(),
                            timeout.as_secs()
                        )));
                    }
                    if let Some(offence) = self.ctx.registry.take_offence(self.id) {
                        return Err(PeerError::Misbehaving(offence));
                    }
                    // Core's stalling disconnect (no ban): its blocks went to others.
                    if self.ctx.downloader.take_stalling(self.id) {
                        return Err(PeerError::Refused("stalling block download".into()));
                    }
                    // A peer that is not read from is not asked for blocks or transactions either.
                    if listening {
                        self.request_blocks()?;
                        self.request_txs()?;
                    }
                    self.trickle_due()?;
                    self.ask_mempool_when_synced()?;
                }
            }
        }
    }

    /// BIP35: what a peer that serves it already holds reaches cairn too (transactions broadcast
    /// before cairn connected; Core serves it only with NODE_BLOOM). Asked once the kernel is out
    /// of its initial download and the index at its tip: a transaction whose coins were not yet
    /// indexed would be refused, and not offered again.
    fn ask_mempool_when_synced(&mut self) -> Result<(), PeerError> {
        let Some(m) = self.ctx.mempool.as_ref().filter(|_| self.mempool_owed) else {
            return Ok(());
        };
        let validator = &self.ctx.validator;
        let synced = tokio::task::block_in_place(|| {
            validator.initial_download().is_none()
                && m.index.tip().map(|(height, _)| i64::from(height))
                    == Some(validator.tip().height)
        });
        if synced {
            self.mempool_owed = false;
            self.queue(NetworkMessage::MemPool)?;
        }
        Ok(())
    }

    /// Answers one message from the peer.
    fn on_message(&mut self, msg: Incoming) -> Result<(), PeerError> {
        let msg = match msg {
            Incoming::Block(bytes) => return self.on_block(bytes),
            Incoming::Message(m) => m,
        };
        tracing::trace!("peer {}: received {}", self.id, msg.cmd());
        match msg {
            NetworkMessage::Headers(headers) => self.on_headers(headers),
            NetworkMessage::Inv(items) => self.on_inv(items),
            NetworkMessage::Tx(tx) => self.on_tx(tx),
            // As Core without NODE_BLOOM (which cairn does not offer): a disconnect, no ban.
            NetworkMessage::MemPool => Err(PeerError::Refused(
                "mempool request, and cairn does not offer NODE_BLOOM".into(),
            )),
            NetworkMessage::Ping(nonce) => self.queue(NetworkMessage::Pong(nonce)),
            NetworkMessage::Pong(nonce) => {
                if let Some(rtt) = self.pinger.pong(nonce) {
                    self.ctx.inbound.note(self.id, Merit::Ping(rtt));
                }
                Ok(())
            }
            NetworkMessage::SendHeaders => {
                self.wants_headers = true;
                Ok(())
            }
            NetworkMessage::GetHeaders(req) => {
                // As Core: a longer locator is a disconnect, without a ban.
                if req.locator_hashes.len() > MAX_LOCATOR {
                    return Err(PeerError::Refused(format!(
                        "getheaders locator of {} hashes",
                        req.locator_hashes.len()
                    )));
                }
                let v = &self.ctx.validator;
                let headers = tokio::task::block_in_place(|| {
                    v.headers_after(&req.locator_hashes, &req.stop_hash, MAX_HEADERS)
                });
                self.queue(NetworkMessage::Headers(headers))
            }
            NetworkMessage::GetData(items) => self.on_getdata(items),
            NetworkMessage::Version(_) => {
                Err(PeerError::Misbehaving("second version message".into()))
            }
            NetworkMessage::Addr(list) => {
                check_addr_count(list.len(), "addr")?;
                let known = list.iter().filter_map(|(time, a)| {
                    Some(KnownAddr {
                        addr: a.socket_addr().ok()?,
                        services: a.services,
                        last_seen: *time,
                    })
                });
                self.learn_addresses(known.collect(), list.len(), "addr");
                Ok(())
            }
            NetworkMessage::AddrV2(list) => {
                check_addr_count(list.len(), "addrv2")?;
                // Only IPv4 and IPv6 are reachable without a proxy; the rest is skipped.
                let known = list.iter().filter_map(|m| {
                    Some(KnownAddr {
                        addr: m.socket_addr().ok()?,
                        services: m.services,
                        last_seen: m.time,
                    })
                });
                self.learn_addresses(known.collect(), list.len(), "addrv2");
                Ok(())
            }
            NetworkMessage::GetCFilters(req) => {
                crate::metrics::metrics().bip157_request("cfilters", "p2p");
                let (index, v) = (self.serving_filters()?, &self.ctx.validator);
                let range =
                    tokio::task::block_in_place(|| filters::cfilters_range(index, v, &req))?;
                if let Some(range) = range {
                    self.owed.filters(range, req.stop_hash);
                }
                self.serve_owed()
            }
            NetworkMessage::GetCFHeaders(req) => {
                crate::metrics::metrics().bip157_request("cfheaders", "p2p");
                let (index, v) = (self.serving_filters()?, &self.ctx.validator);
                let answer =
                    tokio::task::block_in_place(|| filters::get_cfheaders(index, v, &req))?;
                self.queue_some(answer)
            }
            NetworkMessage::GetCFCheckpt(req) => {
                crate::metrics::metrics().bip157_request("cfcheckpt", "p2p");
                let (index, v) = (self.serving_filters()?, &self.ctx.validator);
                let answer =
                    tokio::task::block_in_place(|| filters::get_cfcheckpt(index, v, &req))?;
                self.queue_some(answer)
            }
            NetworkMessage::GetAddr => self.on_getaddr(),
            NetworkMessage::NotFound(items) => {
                for k in items.iter().filter_map(super::tx_requests::key) {
                    self.ctx.tx_requests.answered(&k);
                }
                self.request_txs()
            }
            _ => Ok(()),
        }
    }

    /// A block: checked for mutation, to the scheduler, then ask for more at once to keep the
    /// pipe full.
    fn on_block(&mut self, bytes: Vec<u8>) -> Result<(), PeerError> {
        if let Some(why) = tokio::task::block_in_place(|| mutated(&bytes)) {
            return Err(PeerError::Misbehaving(format!("mutated block: {why}")));
        }
        let dl = self.ctx.downloader.clone();
        match tokio::task::block_in_place(|| dl.deliver(bytes, self.id)) {
            Delivered::Taken => self.ctx.inbound.note(self.id, Merit::Block),
            Delivered::Unwanted => tracing::debug!("peer {}: unrequested block ignored", self.id),
        }
        self.request_blocks()
    }

    /// An announcement: blocks are fetched through headers, transactions the mempool lacks are
    /// asked for.
    fn on_inv(&mut self, items: Vec<Inventory>) -> Result<(), PeerError> {
        if items.len() > MAX_INV {
            return Err(PeerError::Misbehaving(format!(
                "inv with more than {MAX_INV} items"
            )));
        }
        let blocks: Vec<BlockHash> = items
            .iter()
            .filter_map(|i| match i {
                Inventory::Block(h) | Inventory::WitnessBlock(h) => Some(*h),
                _ => None,
            })
            .collect();
        if !blocks.is_empty() {
            // Core's `UpdateBlockAvailability`: an announced block we know raises what the
            // peer is known to have.
            let v = &self.ctx.validator;
            for h in &blocks {
                if let Some(height) = tokio::task::block_in_place(|| v.header_height(h)) {
                    self.best_known = self.best_known.max(height);
                }
            }
            self.ask_headers()?;
        }
        let Some(m) = &self.ctx.mempool else {
            return Ok(());
        };
        let wanted: Vec<Inventory> = items
            .into_iter()
            .filter(|i| match i {
                Inventory::Transaction(t) | Inventory::WitnessTransaction(t) => {
                    m.mempool.raw(t).is_none()
                }
                Inventory::WTx(w) => m.mempool.raw_by_wtxid(w).is_none(),
                _ => false,
            })
            .map(|i| match i {
                Inventory::Transaction(t) => Inventory::WitnessTransaction(t),
                other => other,
            })
            .collect();
        for k in wanted.iter().filter_map(super::tx_requests::key) {
            self.knows_tx(&k);
        }
        if wanted.is_empty() {
            return Ok(());
        }
        // Asked for through the tracker: bounded per peer, one peer at a time per transaction,
        // inbound announcements after a delay (Core's TxRequestTracker).
        let delay = if self.inbound {
            super::tx_requests::INBOUND_DELAY
        } else {
            Duration::ZERO
        };
        let tip = tokio::task::block_in_place(|| self.ctx.validator.tip().hash);
        self.ctx.tx_requests.announced(self.id, wanted, delay, tip);
        self.request_txs()
    }

    /// Asks the peer for the announced transactions that are due from it.
    fn request_txs(&mut self) -> Result<(), PeerError> {
        let due = self.ctx.tx_requests.due(self.id);
        if due.is_empty() {
            return Ok(());
        }
        self.queue(NetworkMessage::GetData(due))
    }

    /// A transaction: into the mempool, announced if accepted, and then the orphans waiting for
    /// it. One whose parents are unknown is kept as an orphan and its parents are asked for from
    /// this peer.
    fn on_tx(&mut self, tx: Transaction) -> Result<(), PeerError> {
        let Some(m) = &self.ctx.mempool else {
            return Ok(());
        };
        let raw = bitcoin::consensus::serialize(&tx);
        let txid = tx.compute_txid();
        let wtxid = tx.compute_wtxid();
        self.knows_tx(&txid.to_byte_array());
        self.knows_tx(&wtxid.to_byte_array());
        // Over its host's allowance: not checked, nor taken as the answer to a request (the
        // same transaction from another peer still is).
        let estimate = TxBudget::estimate(&raw);
        if !self.tx_budget.as_ref().is_none_or(|b| b.has_room(estimate)) {
            crate::metrics::metrics().p2p_tx_over_allowance.inc();
            tracing::debug!(
                "peer {}: transaction {txid} over its host's allowance",
                self.id
            );
            return Ok(());
        }
        let requests = &self.ctx.tx_requests;
        requests.answered(&txid.to_byte_array());
        requests.answered(&wtxid.to_byte_array());
        // Refused lately: not checked again (its scripts cost the same every time).
        if requests.recently_rejected(&wtxid.to_byte_array()) {
            tracing::debug!("peer {}: transaction {txid} refused lately", self.id);
            return Ok(());
        }
        // Refused lately for its fee: only with a child (Core's `Find1P1CPackage`).
        if requests.reconsiderable(&wtxid.to_byte_array()) {
            tokio::task::block_in_place(|| self.try_with_child(&tx, &raw, m));
            return Ok(());
        }
        // Its estimate reserved before the checks (the allowance asked above may have gone to
        // another peer of its host or group meanwhile).
        if !self.tx_budget.as_ref().is_none_or(|b| b.reserve(estimate)) {
            crate::metrics::metrics().p2p_tx_over_allowance.inc();
            return Ok(());
        }
        let (outcome, linearized) =
            tokio::task::block_in_place(|| metered(|| m.mempool.accept(&raw, &m.index)));
        if let Some(budget) = &self.tx_budget {
            budget.settle(
                &[&raw],
                refused_after_checks(&outcome),
                linearized,
                estimate,
            );
        }
        match outcome {
            Ok(accepted) => {
                tracing::debug!("peer {}: accepted transaction {txid}", self.id);
                self.ctx.inbound.note(self.id, Merit::Tx);
                m.notifier.accepted(&m.index, accepted);
                tokio::task::block_in_place(|| self.accept_orphans_of(txid, m));
            }
            Err(Rejection::MissingInputs(_)) => {
                let parents = tokio::task::block_in_place(|| unknown_parents(&tx, m));
                let orphan = NewOrphan::of(&tx, raw, parents.clone());
                if self.ctx.orphans.add(orphan, self.id) {
                    tracing::debug!(
                        "peer {}: orphan {txid}, asking for {} parents",
                        self.id,
                        parents.len()
                    );
                    let ask = parents
                        .into_iter()
                        .map(Inventory::WitnessTransaction)
                        .collect();
                    self.queue(NetworkMessage::GetData(ask))?;
                }
            }
            Err(Rejection::AlreadyInMempool | Rejection::AlreadyKnown | Rejection::Backend(_)) => {}
            Err(e) if m.mempool.child_may_pay(&tx, &e) => {
                tracing::debug!("peer {}: {txid} refused for its fee alone: {e}", self.id);
                requests.rejected_reconsiderable(&wtxid.to_byte_array());
                tokio::task::block_in_place(|| self.try_with_child(&tx, &raw, m));
            }
            Err(e) => {
                tracing::debug!("peer {}: transaction {txid} rejected: {e}", self.id);
                // By wtxid (its txid when it has no witness): the same transaction with another
                // witness may be valid.
                requests.rejected(&[wtxid.to_byte_array()]);
                // No punishment: Core 31 and Knots 29.4 disconnect no peer for a transaction
                // (validation.cpp: "Tx failures never trigger disconnections/bans", so a soft
                // fork or a policy rule splits no network); its wtxid is remembered above, so it
                // is not asked for again.
            }
        }
        Ok(())
    }

    /// Tries again the orphans that waited for `parent`, and theirs in turn (Core's
    /// `ProcessOrphanTx`); one still missing another parent waits on.
    fn accept_orphans_of(&self, parent: bitcoin::Txid, m: &MempoolAccess) {
        let mut accepted = vec![parent];
        while let Some(parent) = accepted.pop() {
            for (wtxid, txid, raw, from) in self.ctx.orphans.children_of(&parent) {
                let (outcome, linearized) = metered(|| m.mempool.accept(&raw, &m.index));
                // Charged to the peer that sent it (its host's account), not to this one.
                if let Some(budget) = self.ctx.tx_budgets.of(from) {
                    budget.charge(&[&raw], refused_after_checks(&outcome), linearized);
                }
                match outcome {
                    Ok(a) => {
                        tracing::debug!("accepted orphan {txid} from peer {from}");
                        m.notifier.accepted(&m.index, a);
                        self.ctx.orphans.remove(&wtxid);
                        accepted.push(txid);
                    }
                    // Still missing another parent: it waits on, with every announcer.
                    Err(Rejection::MissingInputs(_)) => {}
                    Err(e) => {
                        tracing::debug!("orphan {txid} from peer {from} rejected: {e}");
                        self.ctx.orphans.remove(&wtxid);
                    }
                }
            }
        }
    }

    /// Charges this peer's host for checking `raws` (an outbound peer is not held).
    fn charge_tx(&self, raws: &[&[u8]], refused: bool, linearized: u64) {
        if let Some(budget) = &self.tx_budget {
            budget.charge(raws, refused, linearized);
        }
    }

    /// A request for transactions (from the mempool) and blocks (from the active chain),
    /// served as the send buffer has room ([`Owed`]); what is not found is listed in one
    /// `notfound`.
    fn on_getdata(&mut self, items: Vec<Inventory>) -> Result<(), PeerError> {
        if items.len() > MAX_INV {
            return Err(PeerError::Misbehaving(format!(
                "getdata with more than {MAX_INV} items"
            )));
        }
        self.owed.items(items);
        self.serve_owed()
    }

    /// The mempool transaction an inventory item names.
    fn pool_tx(&self, item: &Inventory) -> Option<Transaction> {
        let m = self.ctx.mempool.as_ref()?;
        let raw = match item {
            Inventory::Transaction(t) | Inventory::WitnessTransaction(t) => m.mempool.raw(t),
            Inventory::WTx(w) => m.mempool.raw_by_wtxid(w),
            _ => None,
        };
        raw.and_then(|raw| bitcoin::consensus::deserialize::<Transaction>(&raw).ok())
    }

    /// A block of the active chain, serialized.
    fn active_block(&self, hash: &BlockHash) -> Option<Vec<u8>> {
        let v = &self.ctx.validator;
        tokio::task::block_in_place(|| {
            v.active_height(hash)
                .and_then(|height| v.read_block_bytes(height).ok())
        })
    }

    /// Adds what an `addr` or `addrv2` message carried to the address book (unless cairn
    /// talks to its `connect` peers only), as Core's `ProcessMessage(ADDR)`: in random order,
    /// as many as the peer's allowance covers, the rest dropped unread.
    fn learn_addresses(&mut self, mut known: Vec<KnownAddr>, sent: usize, what: &str) {
        if !self.ctx.learns_addresses {
            tracing::debug!(
                "peer {}: {sent} addresses ({what}) not kept (connect)",
                self.id
            );
            return;
        }
        known.shuffle(&mut rand::thread_rng());
        let allowed = self.addr_rate.take(known.len());
        let dropped = known.len() - allowed;
        known.truncate(allowed);
        // Core's `MayHaveUsefulAddressDB`: an address that serves no blocks at all is not kept
        // (checked after the allowance is spent, as in Core).
        known.retain(|k| {
            k.services.has(ServiceFlags::NETWORK) || k.services.has(ServiceFlags::NETWORK_LIMITED)
        });
        let added = self.ctx.book.add(known, self.addr.ip());
        if dropped > 0 {
            crate::metrics::metrics()
                .p2p_addr_rate_limited
                .inc_by(dropped as u64);
        }
        tracing::debug!(
            "peer {}: {sent} addresses ({what}), {added} new, {dropped} over its rate",
            self.id
        );
    }

    /// As Bitcoin Core: only inbound peers are answered, once per connection, all with the same
    /// sample for about a day, so a peer cannot map the book by asking repeatedly or by
    /// reconnecting.
    fn on_getaddr(&mut self) -> Result<(), PeerError> {
        if !self.inbound || self.answered_getaddr {
            return Ok(());
        }
        self.answered_getaddr = true;
        self.queue(addr_message(self.ctx.addr_answer(), self.traits.addrv2))
    }

    /// Announces a new tip as Core does (`SendMessages`): the headers from the last announced
    /// block up to it when the peer asked for headers and there are at most eight
    /// (`MAX_BLOCKS_TO_ANNOUNCE`), else an `inv` of the tip, which the peer follows with
    /// `getheaders`.
    fn announce_block(&mut self, from: Option<BlockHash>, tip: BlockHash) -> Result<(), PeerError> {
        const MAX_BLOCKS_TO_ANNOUNCE: usize = 8;
        if let (true, Some(from)) = (self.wants_headers, from) {
            let v = &self.ctx.validator;
            let headers = tokio::task::block_in_place(|| {
                v.headers_after(&[from], &tip, MAX_BLOCKS_TO_ANNOUNCE + 1)
            });
            let connects = headers.first().is_some_and(|h| h.prev_blockhash == from);
            if connects
                && headers.len() <= MAX_BLOCKS_TO_ANNOUNCE
                && headers.last().is_some_and(|h| h.block_hash() == tip)
            {
                return self.queue(NetworkMessage::Headers(headers));
            }
        }
        self.queue(NetworkMessage::Inv(vec![Inventory::Block(tip)]))
    }

    /// Asks the peer for the blocks the scheduler gives it. During the initial download only
    /// outbound peers are asked while there are any (Core's `fPreferredDownload`): an inbound
    /// peer is whoever chose to connect.
    fn request_blocks(&mut self) -> Result<(), PeerError> {
        if self.inbound && self.ctx.registry.has_outbound() {
            let v = &self.ctx.validator;
            if tokio::task::block_in_place(|| v.initial_download().is_some()) {
                return Ok(());
            }
        }
        let (dl, id) = (self.ctx.downloader.clone(), self.id);
        let has = self.best_known;
        let wanted = tokio::task::block_in_place(|| dl.assign(id, dl.in_flight(id), has));
        if wanted.is_empty() {
            return Ok(());
        }
        let inv = wanted.into_iter().map(Inventory::WitnessBlock).collect();
        self.queue(NetworkMessage::GetData(inv))
    }

    /// The index whose filters are served; asking a node that does not advertise
    /// NODE_COMPACT_FILTERS is a protocol violation (Core disconnects too).
    fn serving_filters(&self) -> Result<&'a Index, PeerError> {
        self.ctx.filter_index.as_deref().ok_or_else(|| {
            PeerError::Misbehaving("compact filters requested from a node without an index".into())
        })
    }

    /// Queues a message to the peer.
    fn queue(&self, msg: NetworkMessage) -> Result<(), PeerError> {
        self.out.push(Outgoing::Message(msg))
    }

    fn queue_some(&self, msg: Option<NetworkMessage>) -> Result<(), PeerError> {
        match msg {
            Some(m) => self.queue(m),
            None => Ok(()),
        }
    }
}

/// Core's `IsBlockMutated`: a block whose transactions do not hash to its merkle root (or that
/// hides a 64-byte transaction, which could pose as an inner merkle node), or whose witness
/// data does not match its coinbase's commitment. `None` for a good block and for one that
/// does not parse (the kernel refuses that itself).
fn mutated(bytes: &[u8]) -> Option<&'static str> {
    let block = bitcoin::consensus::deserialize::<bitcoin::Block>(bytes).ok()?;
    if !block.check_merkle_root() {
        return Some("merkle root");
    }
    if block.txdata.iter().any(|tx| tx.base_size() == 64) {
        return Some("a 64-byte transaction");
    }
    if !block.check_witness_commitment() {
        return Some("witness commitment");
    }
    None
}

/// An `addr` or `addrv2` over Core's limit is a protocol violation.
fn check_addr_count(len: usize, what: &str) -> Result<(), PeerError> {
    if len > MAX_ADDR_PER_MESSAGE {
        return Err(PeerError::Misbehaving(format!("{what} with {len} entries")));
    }
    Ok(())
}

/// An `addr` (or `addrv2`, if the peer asked for it) message carrying these addresses.
fn addr_message(addrs: Vec<KnownAddr>, addrv2: bool) -> NetworkMessage {
    if addrv2 {
        NetworkMessage::AddrV2(
            addrs
                .into_iter()
                .map(|k| AddrV2Message {
                    time: k.last_seen,
                    services: k.services,
                    addr: match k.addr.ip() {
                        std::net::IpAddr::V4(ip) => AddrV2::Ipv4(ip),
                        std::net::IpAddr::V6(ip) => AddrV2::Ipv6(ip),
                    },
                    port: k.addr.port(),
                })
                .collect(),
        )
    } else {
        NetworkMessage::Addr(
            addrs
                .into_iter()
                .map(|k| (k.last_seen, Address::new(&k.addr, k.services)))
                .collect(),
        )
    }
}

/// How long a `getheaders` may go unanswered before another is sent (Core's
/// `HEADERS_RESPONSE_TIME`).
const HEADERS_RESPONSE_TIME: Duration = Duration::from_secs(120);

impl Session<'_> {
    /// Asks for headers from the kernel's best header, unless a request is unanswered (Core's
    /// `MaybeSendGetHeaders`).
    fn ask_headers(&mut self) -> Result<(), PeerError> {
        if self.awaiting_headers() {
            return Ok(());
        }
        let msg = get_headers(&self.ctx.validator);
        self.send_getheaders(msg)
    }

    /// Whether a `getheaders` sent less than [`HEADERS_RESPONSE_TIME`] ago is unanswered.
    fn awaiting_headers(&self) -> bool {
        self.getheaders_sent
            .is_some_and(|at| at.elapsed() < HEADERS_RESPONSE_TIME)
    }

    /// Sends a `getheaders` and notes when.
    fn send_getheaders(&mut self, msg: NetworkMessage) -> Result<(), PeerError> {
        self.getheaders_sent = Some(tokio::time::Instant::now());
        self.queue(msg)
    }
}

/// A `getheaders` from the kernel's locator, up to the peer's best. Called from peer tasks: the
/// kernel's lock is waited for off the async workers.
fn get_headers(validator: &Validator) -> NetworkMessage {
    get_headers_from(tokio::task::block_in_place(|| validator.locator()))
}

/// A `getheaders` with this locator, up to the peer's best.
fn get_headers_from(locator_hashes: Vec<BlockHash>) -> NetworkMessage {
    NetworkMessage::GetHeaders(GetHeadersMessage {
        version: PROTOCOL_VERSION,
        locator_hashes,
        stop_hash: BlockHash::all_zeros(),
    })
}

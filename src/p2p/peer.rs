//! One peer connection: the version handshake, then headers-first sync driven by the shared
//! [`Downloader`], answers to the peer's getheaders and getdata, and ping/pong.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bitcoin::p2p::address::{AddrV2, AddrV2Message, Address};
use bitcoin::p2p::message::NetworkMessage;
use bitcoin::p2p::message_blockdata::{GetHeadersMessage, Inventory};
use bitcoin::p2p::message_network::VersionMessage;
use bitcoin::p2p::{Magic, ServiceFlags};
use bitcoin::BlockHash;
use bitcoin::hashes::Hash;
use tokio::io::{BufReader, BufWriter};
use tokio::net::TcpStream;

use super::addrbook::{KnownAddr, MAX_ADDR_PER_MESSAGE};
use super::codec::{read_message, write_message, write_message_with, write_raw_block, CodecError, Incoming};
use super::sync::{Delivered, Downloader, PeerId};
use crate::kernel::Validator;

/// The protocol version cairn speaks (wtxidrelay, sendheaders).
pub const PROTOCOL_VERSION: u32 = 70016;
/// Most headers in one `headers` message.
pub const MAX_HEADERS: usize = 2000;
/// How long the handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);
/// A peer silent for this long is dropped.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// A message waiting to be written to the peer.
pub enum Outgoing {
    /// A decoded message.
    Message(NetworkMessage),
    /// A block as serialized bytes.
    Block(Vec<u8>),
}

/// The queue to a peer's writer task.
type Outbox = tokio::sync::mpsc::Sender<Outgoing>;

async fn queue(out: &Outbox, msg: NetworkMessage) -> Result<(), PeerError> {
    out.send(Outgoing::Message(msg)).await.map_err(|_| PeerError::Timeout)
}

async fn queue_block(out: &Outbox, block: Vec<u8>) -> Result<(), PeerError> {
    out.send(Outgoing::Block(block)).await.map_err(|_| PeerError::Timeout)
}

/// Why a peer was disconnected.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// Its bytes were refused.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The handshake failed.
    #[error("handshake: {0}")]
    Handshake(String),
    /// It broke the protocol.
    #[error("misbehaving: {0}")]
    Misbehaving(String),
    /// It went silent.
    #[error("timed out")]
    Timeout,
    /// cairn could not answer (its store failed).
    #[error("internal error: {0}")]
    Internal(String),
}

impl PeerError {
    /// Whether the peer broke the protocol on purpose or by a bug, rather than speaking another
    /// transport (a BIP324 v2 handshake looks like a wrong magic: the peer then retries with v1)
    /// or going away.
    pub fn deserves_ban(&self) -> bool {
        match self {
            PeerError::Misbehaving(_) => true,
            PeerError::Codec(c) => matches!(
                c,
                CodecError::Oversized { .. } | CodecError::BadChecksum(_) | CodecError::Malformed { .. }
            ),
            PeerError::Handshake(_) | PeerError::Timeout | PeerError::Internal(_) => false,
        }
    }
}

/// What the handshake learnt about the peer.
#[derive(Debug, Clone)]
pub struct PeerTraits {
    /// It announces transactions by wtxid (BIP339).
    pub wtxid_relay: bool,
    /// It takes `addrv2` (BIP155).
    pub addrv2: bool,
    /// The services it advertised.
    pub services: ServiceFlags,
    /// Its user agent.
    pub user_agent: String,
}

/// What a peer task needs.
pub struct PeerContext {
    /// The network magic.
    pub magic: Magic,
    /// The validator.
    pub validator: Arc<Validator>,
    /// The shared download scheduler.
    pub downloader: Arc<Downloader>,
    /// The services cairn advertises.
    pub services: ServiceFlags,
    /// Transaction relay, when cairn keeps a mempool.
    pub tx_relay: Option<super::TxRelay>,
    /// The index whose BIP158 filters are served (with NODE_COMPACT_FILTERS), if there is one.
    pub filters: Option<Arc<crate::index::Index>>,
    /// Known peer addresses.
    pub book: Arc<super::addrbook::AddrBook>,
    /// The connected peers.
    pub registry: Arc<super::Registry>,
    /// Fires when a header sync should start now (SIGUSR1, as electrs).
    pub sync_now: tokio::sync::broadcast::Sender<()>,
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Runs one connection (outbound or inbound) until it ends; returns why it ended.
pub async fn run(
    stream: TcpStream,
    addr: SocketAddr,
    inbound: bool,
    id: PeerId,
    ctx: Arc<PeerContext>,
) -> PeerError {
    let _ = stream.set_nodelay(true);
    let (r, w) = stream.into_split();
    let mut reader = BufReader::with_capacity(256 * 1024, r);
    let mut writer = BufWriter::new(w);
    let result = async {
        let traits = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&mut reader, &mut writer, addr, &ctx))
            .await
            .map_err(|_| PeerError::Timeout)??;
        tracing::info!("peer {id} {addr}: connected ({}, {})", if inbound { "inbound" } else { "outbound" }, traits.user_agent);
        if !inbound {
            ctx.book.mark_good(addr, traits.services);
        }
        let _registered = ctx.registry.register(id, addr, inbound, &traits);
        // Reading is not cancel-safe, so one task reads and hands whole messages over.
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let magic = ctx.magic;
        let reading = tokio::spawn(async move {
            loop {
                let msg = read_message(&mut reader, magic).await;
                let end = msg.is_err();
                if tx.send(msg).await.is_err() || end {
                    break;
                }
            }
        });
        // Writing has its own task too: the session never stops reading because the peer is
        // slow to read (two nodes each waiting for the other to read would deadlock).
        let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<Outgoing>(256);
        let writing = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let mut buf = Vec::new();
            while let Some(first) = out_rx.recv().await {
                let mut next = Some(first);
                while let Some(item) = next.take() {
                    let written = match item {
                        Outgoing::Message(m) => write_message_with(&mut writer, magic, m, &mut buf).await,
                        Outgoing::Block(b) => write_raw_block(&mut writer, magic, &b).await,
                    };
                    if written.is_err() {
                        return;
                    }
                    next = out_rx.try_recv().ok();
                }
                if writer.flush().await.is_err() {
                    return;
                }
            }
        });
        let outcome = session(rx, &out_tx, id, &ctx, &traits, inbound).await;
        reading.abort();
        writing.abort();
        outcome
    }
    .await;
    ctx.downloader.forget_peer(id);
    match result {
        Ok(()) => PeerError::Timeout,
        Err(e) => e,
    }
}

async fn send<W: tokio::io::AsyncWrite + Unpin>(
    writer: &mut W,
    magic: Magic,
    msg: NetworkMessage,
) -> Result<(), PeerError> {
    use tokio::io::AsyncWriteExt;
    write_message(writer, magic, msg).await?;
    writer.flush().await.map_err(CodecError::from)?;
    Ok(())
}

async fn handshake<R, W>(
    reader: &mut R,
    writer: &mut W,
    addr: SocketAddr,
    ctx: &PeerContext,
) -> Result<PeerTraits, PeerError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut version = VersionMessage::new(
        ctx.services,
        now_secs(),
        Address::new(&addr, ServiceFlags::NONE),
        Address::new(&SocketAddr::from(([0, 0, 0, 0], 0)), ctx.services),
        rand_nonce(),
        format!("/cairn:{}/", env!("CARGO_PKG_VERSION")),
        ctx.validator.tip().height as i32,
    );
    version.version = PROTOCOL_VERSION;
    version.relay = ctx.tx_relay.is_some();
    let our_nonce = version.nonce;
    ctx.registry.remember_nonce(our_nonce);
    let sent = send(writer, ctx.magic, NetworkMessage::Version(version)).await;
    let result = async {
        sent?;
        handshake_replies(reader, writer, ctx).await
    }
    .await;
    ctx.registry.forget_nonce(our_nonce);
    result
}

async fn handshake_replies<R, W>(reader: &mut R, writer: &mut W, ctx: &PeerContext) -> Result<PeerTraits, PeerError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut got_version = false;
    let mut got_verack = false;
    let mut traits = PeerTraits {
        wtxid_relay: false,
        addrv2: false,
        services: ServiceFlags::NONE,
        user_agent: String::new(),
    };
    while !(got_version && got_verack) {
        match read_message(reader, ctx.magic).await? {
            Incoming::Message(NetworkMessage::Version(v)) => {
                if got_version {
                    return Err(PeerError::Misbehaving("second version message".into()));
                }
                if v.version < 70012 {
                    return Err(PeerError::Handshake(format!("protocol version {} too old", v.version)));
                }
                if ctx.registry.is_own_nonce(v.nonce) {
                    return Err(PeerError::Handshake("connected to ourselves".into()));
                }
                got_version = true;
                traits.services = v.services;
                traits.user_agent = v.user_agent.chars().take(256).collect();
                if v.version >= 70016 {
                    send(writer, ctx.magic, NetworkMessage::WtxidRelay).await?;
                }
                send(writer, ctx.magic, NetworkMessage::SendAddrV2).await?;
                send(writer, ctx.magic, NetworkMessage::Verack).await?;
            }
            Incoming::Message(NetworkMessage::Verack) => got_verack = true,
            Incoming::Message(NetworkMessage::WtxidRelay) => traits.wtxid_relay = true,
            Incoming::Message(NetworkMessage::SendAddrV2) => traits.addrv2 = true,
            Incoming::Message(other) if !got_version => {
                return Err(PeerError::Misbehaving(format!("{} before version", other.cmd())));
            }
            _ => {}
        }
    }
    send(writer, ctx.magic, NetworkMessage::SendHeaders).await?;
    Ok(traits)
}

fn rand_nonce() -> u64 {
    use rand::RngCore;
    rand::rngs::OsRng.next_u64()
}

/// Asks the peer for the blocks the scheduler gives it.
async fn request_blocks(
    writer: &Outbox,
    id: PeerId,
    ctx: &PeerContext,
) -> Result<(), PeerError> {
    let dl = ctx.downloader.clone();
    let wanted = tokio::task::block_in_place(|| dl.assign(id, dl.in_flight(id)));
    if !wanted.is_empty() {
        let inv = wanted.into_iter().map(Inventory::WitnessBlock).collect();
        queue(writer, NetworkMessage::GetData(inv)).await?;
    }
    Ok(())
}

/// The index whose filters are served; asking a node that does not advertise
/// NODE_COMPACT_FILTERS is a protocol violation (Core disconnects too).
fn serving_filters(ctx: &PeerContext) -> Result<&crate::index::Index, PeerError> {
    ctx.filters
        .as_deref()
        .ok_or_else(|| PeerError::Misbehaving("compact filters requested from a node without an index".into()))
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
        NetworkMessage::Addr(addrs.into_iter().map(|k| (k.last_seen, Address::new(&k.addr, k.services))).collect())
    }
}

fn get_headers(validator: &Validator) -> NetworkMessage {
    NetworkMessage::GetHeaders(GetHeadersMessage {
        version: PROTOCOL_VERSION,
        locator_hashes: validator.locator(),
        stop_hash: BlockHash::all_zeros(),
    })
}

async fn session(
    mut incoming: tokio::sync::mpsc::Receiver<Result<Incoming, CodecError>>,
    writer: &Outbox,
    id: PeerId,
    ctx: &PeerContext,
    traits: &PeerTraits,
    inbound: bool,
) -> Result<(), PeerError> {
    let v = &ctx.validator;
    let wtxid_relay = traits.wtxid_relay;
    let mut announced = match &ctx.tx_relay {
        Some(r) => r.relay.subscribe(),
        None => tokio::sync::broadcast::channel(1).1,
    };
    let mut sync_now = ctx.sync_now.subscribe();
    let mut answered_getaddr = false;
    queue(writer, get_headers(v)).await?;
    if !inbound {
        queue(writer, NetworkMessage::GetAddr).await?;
    }
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut last_heard = tokio::time::Instant::now();
    loop {
        tokio::select! {
            msg = incoming.recv() => {
                let Some(msg) = msg else { return Err(PeerError::Timeout) };
                let msg = msg?;
                last_heard = tokio::time::Instant::now();
                if let Incoming::Message(m) = &msg {
                    tracing::trace!("peer {id}: received {}", m.cmd());
                }
                match msg {
                    Incoming::Block(bytes) => {
                        let dl = ctx.downloader.clone();
                        let outcome = tokio::task::block_in_place(|| dl.deliver(bytes));
                        if outcome == Delivered::Unwanted {
                            tracing::debug!("peer {id}: unrequested block ignored");
                        }
                        // Keep the pipe full: ask for more as soon as one arrives.
                        request_blocks(writer, id, ctx).await?;
                    }
                    Incoming::Message(NetworkMessage::Headers(headers)) => {
                        if headers.len() > MAX_HEADERS {
                            return Err(PeerError::Misbehaving(format!("{} headers in one message", headers.len())));
                        }
                        let full = headers.len() == MAX_HEADERS;
                        let outcome = tokio::task::block_in_place(|| {
                            for h in &headers {
                                v.submit_header(h)?;
                            }
                            Ok::<_, crate::kernel::KernelError>(())
                        });
                        ctx.downloader.headers_changed();
                        if let Err(e) = outcome {
                            return Err(PeerError::Misbehaving(format!("bad header: {e}")));
                        }
                        if full {
                            queue(writer, get_headers(v)).await?;
                        }
                    }
                    Incoming::Message(NetworkMessage::Inv(items)) => {
                        if items.len() > 50_000 {
                            return Err(PeerError::Misbehaving("inv with more than 50000 items".into()));
                        }
                        if items.iter().any(|i| matches!(i, Inventory::Block(_) | Inventory::WitnessBlock(_))) {
                            queue(writer, get_headers(v)).await?;
                        }
                        if let Some(r) = &ctx.tx_relay {
                            let wanted: Vec<Inventory> = items
                                .into_iter()
                                .filter(|i| match i {
                                    Inventory::Transaction(t) | Inventory::WitnessTransaction(t) => r.mempool.raw(t).is_none(),
                                    Inventory::WTx(w) => r.mempool.raw_by_wtxid(w).is_none(),
                                    _ => false,
                                })
                                .map(|i| match i {
                                    Inventory::Transaction(t) => Inventory::WitnessTransaction(t),
                                    other => other,
                                })
                                .collect();
                            if !wanted.is_empty() {
                                queue(writer, NetworkMessage::GetData(wanted)).await?;
                            }
                        }
                    }
                    Incoming::Message(NetworkMessage::Tx(tx)) => {
                        if let Some(r) = &ctx.tx_relay {
                            let raw = bitcoin::consensus::serialize(&tx);
                            match tokio::task::block_in_place(|| r.mempool.accept(&raw, &r.index)) {
                                Ok(accepted) => {
                                    tracing::debug!("peer {id}: accepted transaction {}", accepted.txid);
                                    let _ = r.relay.send(accepted.txid);
                                    crate::index::runner::publish(&r.index, &r.updates, Some(accepted.touched));
                                }
                                Err(e) => tracing::debug!("peer {id}: transaction {} rejected: {e}", tx.compute_txid()),
                            }
                        }
                    }
                    Incoming::Message(NetworkMessage::Ping(nonce)) => {
                        queue(writer, NetworkMessage::Pong(nonce)).await?;
                    }
                    Incoming::Message(NetworkMessage::GetHeaders(req)) => {
                        let headers = tokio::task::block_in_place(|| v.headers_after(&req.locator_hashes, &req.stop_hash, MAX_HEADERS));
                        queue(writer, NetworkMessage::Headers(headers)).await?;
                    }
                    Incoming::Message(NetworkMessage::GetData(items)) => {
                        if items.len() > 50_000 {
                            return Err(PeerError::Misbehaving("getdata with more than 50000 items".into()));
                        }
                        let mut missing = Vec::new();
                        for item in items {
                            let from_pool = match (&ctx.tx_relay, &item) {
                                (Some(r), Inventory::Transaction(t) | Inventory::WitnessTransaction(t)) => Some(r.mempool.raw(t)),
                                (Some(r), Inventory::WTx(w)) => Some(r.mempool.raw_by_wtxid(w)),
                                _ => None,
                            };
                            if let Some(found) = from_pool {
                                match found.and_then(|raw| bitcoin::consensus::deserialize::<bitcoin::Transaction>(&raw).ok()) {
                                    Some(tx) => queue(writer, NetworkMessage::Tx(tx)).await?,
                                    None => missing.push(item),
                                }
                                continue;
                            }
                            let hash = match item {
                                Inventory::Block(h) | Inventory::WitnessBlock(h) => h,
                                other => { missing.push(other); continue; }
                            };
                            let bytes = tokio::task::block_in_place(|| {
                                v.active_height(&hash).and_then(|height| v.read_block_bytes(height).ok())
                            });
                            match bytes {
                                Some(b) => queue_block(writer, b).await?,
                                None => missing.push(item),
                            }
                        }
                        if !missing.is_empty() {
                            queue(writer, NetworkMessage::NotFound(missing)).await?;
                        }
                    }
                    Incoming::Message(NetworkMessage::Version(_)) => {
                        return Err(PeerError::Misbehaving("second version message".into()));
                    }
                    Incoming::Message(NetworkMessage::Addr(list)) => {
                        if list.len() > MAX_ADDR_PER_MESSAGE {
                            return Err(PeerError::Misbehaving(format!("addr with {} entries", list.len())));
                        }
                        let known = list.iter().filter_map(|(time, a)| {
                            Some(KnownAddr { addr: a.socket_addr().ok()?, services: a.services, last_seen: *time })
                        });
                        let added = ctx.book.add(known.collect::<Vec<_>>());
                        tracing::debug!("peer {id}: {} addresses, {added} new", list.len());
                    }
                    Incoming::Message(NetworkMessage::AddrV2(list)) => {
                        if list.len() > MAX_ADDR_PER_MESSAGE {
                            return Err(PeerError::Misbehaving(format!("addrv2 with {} entries", list.len())));
                        }
                        // Only IPv4 and IPv6 are reachable without a proxy; the rest is skipped.
                        let known = list.iter().filter_map(|m| {
                            Some(KnownAddr { addr: m.socket_addr().ok()?, services: m.services, last_seen: m.time })
                        });
                        let added = ctx.book.add(known.collect::<Vec<_>>());
                        tracing::debug!("peer {id}: {} addresses (addrv2), {added} new", list.len());
                    }
                    Incoming::Message(NetworkMessage::GetCFilters(req)) => {
                        let index = serving_filters(ctx)?;
                        for m in tokio::task::block_in_place(|| super::filters::get_cfilters(index, v, &req))? {
                            queue(writer, m).await?;
                        }
                    }
                    Incoming::Message(NetworkMessage::GetCFHeaders(req)) => {
                        let index = serving_filters(ctx)?;
                        if let Some(m) = tokio::task::block_in_place(|| super::filters::get_cfheaders(index, v, &req))? {
                            queue(writer, m).await?;
                        }
                    }
                    Incoming::Message(NetworkMessage::GetCFCheckpt(req)) => {
                        let index = serving_filters(ctx)?;
                        if let Some(m) = tokio::task::block_in_place(|| super::filters::get_cfcheckpt(index, v, &req))? {
                            queue(writer, m).await?;
                        }
                    }
                    Incoming::Message(NetworkMessage::GetAddr) => {
                        // As Bitcoin Core: only inbound peers are answered, once per connection,
                        // so a peer cannot map the book by asking repeatedly.
                        if inbound && !answered_getaddr {
                            answered_getaddr = true;
                            queue(writer, addr_message(ctx.book.sample(), traits.addrv2)).await?;
                        }
                    }
                    Incoming::Message(_) => {}
                }
            }
            txid = announced.recv(), if ctx.tx_relay.is_some() => {
                let Ok(txid) = txid else { continue };
                let Some(r) = &ctx.tx_relay else { continue };
                let item = if wtxid_relay {
                    match r.mempool.raw(&txid).and_then(|raw| bitcoin::consensus::deserialize::<bitcoin::Transaction>(&raw).ok()) {
                        Some(tx) => Inventory::WTx(tx.compute_wtxid()),
                        None => continue,
                    }
                } else {
                    Inventory::Transaction(txid)
                };
                queue(writer, NetworkMessage::Inv(vec![item])).await?;
            }
            nudge = sync_now.recv() => {
                if nudge.is_ok() {
                    queue(writer, get_headers(v)).await?;
                }
            }
            _ = tick.tick() => {
                if last_heard.elapsed() > IDLE_TIMEOUT {
                    return Err(PeerError::Timeout);
                }
                request_blocks(writer, id, ctx).await?;
            }
        }
    }
}

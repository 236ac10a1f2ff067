//! The P2P side: outbound connections to the configured peers, headers-first sync with a
//! parallel block download, and answers to peers' getheaders and getdata.

pub mod addrbook;
pub mod addrbook_file;
mod announce_timer;
pub mod codec;
mod context;
mod error;
pub mod filters;
mod handshake;
pub mod headers_sync;
mod inbound;
pub mod orphans;
mod outbound;
pub mod peer;
mod registry;
mod rolling;
pub mod seeds;
mod send;
mod session;
pub mod sync;
mod tx_budget;
mod tx_requests;
pub mod v2;
mod wire;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bitcoin::p2p::{Magic, ServiceFlags};
use tokio::net::{TcpListener, TcpStream};

use crate::config::P2pConfig;
use crate::datadir::space::SpaceWatch;
use crate::kernel::{KernelError, Validator};
use crate::listen::proxy::{self, Balancers};
use crate::types::Network;
use addrbook::AddrBook;
pub use context::{MempoolAccess, PeerContext};
pub use error::PeerError;
use orphans::Orphans;
pub use registry::{PeerInfo, Registry};
use sync::Downloader;

/// How long a misbehaving peer's address is refused.
pub const BAN_TIME: Duration = Duration::from_secs(24 * 3600);
/// Wait before reconnecting to a configured peer.
const RECONNECT_DELAY: Duration = Duration::from_secs(5);
/// How long an outbound connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the outbound manager looks for a free slot.
const MANAGER_TICK: Duration = Duration::from_millis(500);

/// Errors starting the P2P side.
#[derive(Debug, thiserror::Error)]
pub enum P2pError {
    /// The listener could not bind.
    #[error("cannot listen for peers on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A thread could not start.
    #[error("cannot start the block feeder: {0}")]
    Thread(std::io::Error),
}

/// The P2P side's state, for `cairn status`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct P2pStatus {
    /// Where peers are accepted, if anywhere.
    pub listen: Option<SocketAddr>,
    /// The connected peers.
    pub peers: Vec<PeerInfo>,
    /// How many addresses the address book holds.
    pub known_addresses: usize,
}

/// Most hosts banned at once: past it the ban ending soonest goes first.
const MAX_BANS: usize = 10_000;

/// Banned hosts (an IPv4 address, an IPv6 /64: a host's other addresses are as cheap) and
/// until when; expired bans are pruned as new ones come.
#[derive(Default)]
struct BanList(Mutex<HashMap<crate::types::Subnet, Instant>>);

impl BanList {
    fn ban(&self, addr: SocketAddr, why: &str) {
        crate::outsider_log!(warn, "banning {addr}: {why}");
        let mut m = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        m.retain(|_, until| *until > now);
        if m.len() >= MAX_BANS {
            if let Some(soonest) = m.iter().min_by_key(|(_, until)| **until).map(|(k, _)| *k) {
                m.remove(&soonest);
            }
        }
        m.insert(inbound::host(addr.ip()), now + BAN_TIME);
    }

    fn is_banned(&self, addr: &SocketAddr) -> bool {
        let bans = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        bans.get(&inbound::host(addr.ip()))
            .is_some_and(|until| *until > Instant::now())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// The running P2P side.
pub struct P2p {
    /// The address it listens on, if it does.
    pub listen_addr: Option<SocketAddr>,
    ctx: Arc<PeerContext>,
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Where the address book is saved, with the network magic it is saved under.
    book_file: Option<(std::path::PathBuf, [u8; 4])>,
}

/// Outbound addresses in use (connecting or connected), released when the guard drops.
#[derive(Default)]
struct Slots(Mutex<HashSet<SocketAddr>>);

struct Slot<'a>(&'a Slots, SocketAddr);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut s = (self.0).0.lock().unwrap_or_else(PoisonError::into_inner);
        s.remove(&self.1);
    }
}

impl Slots {
    fn take(&self, addr: SocketAddr) -> Option<Slot<'_>> {
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        s.insert(addr).then_some(Slot(self, addr))
    }

    fn snapshot(&self) -> HashSet<SocketAddr> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// Shared by the connection tasks.
struct Shared {
    ctx: Arc<PeerContext>,
    bans: BanList,
    ids: AtomicU64,
    /// Outbound connections made from the address book.
    slots: Slots,
}

impl Shared {
    /// Connects to `addr` and runs the peer until it disconnects; returns whether the TCP
    /// connection was made. A `manual` peer (`connect`, `addnode`) is never banned, as Core
    /// never punishes manual connections: it is redialled instead. With v2 on, a manual peer
    /// is tried with BIP324 first, a peer from the book when the book knows it offers it
    /// (NODE_P2P_V2), as Core's `CConnman` decides.
    async fn connect_and_run(&self, addr: SocketAddr, manual: bool) -> bool {
        let Some(stream) = dial(addr).await else {
            return false;
        };
        let offers_v2 = manual
            || self
                .ctx
                .book
                .services(&addr)
                .is_some_and(|s| s.has(ServiceFlags::P2P_V2));
        let v2 = self.ctx.services.has(ServiceFlags::P2P_V2) && offers_v2;
        let id = self.ids.fetch_add(1, Ordering::SeqCst);
        let mut why = peer::run(stream, addr, false, v2, id, self.ctx.clone()).await;
        // As Core: a peer that hangs up on the v2 handshake is dialled again with v1.
        if matches!(why, PeerError::NoV2) {
            tracing::debug!("peer {id} {addr}: {why}; reconnecting with v1");
            let Some(stream) = dial(addr).await else {
                return true;
            };
            why = peer::run(stream, addr, false, false, id, self.ctx.clone()).await;
        }
        tracing::info!("peer {id} {addr}: disconnected: {why}");
        self.punish(addr, &why, manual);
        true
    }

    /// A feeler connection (Core's `ConnectionType::FEELER`): the handshake, which tells the
    /// book whether `addr` is alive, then goodbye.
    async fn feel(&self, addr: SocketAddr) {
        let Some(stream) = dial(addr).await else {
            return;
        };
        let v2 = self.ctx.services.has(ServiceFlags::P2P_V2)
            && (self.ctx.book.services(&addr)).is_some_and(|s| s.has(ServiceFlags::P2P_V2));
        match peer::feel(stream, addr, v2, &self.ctx).await {
            Ok(()) => tracing::debug!("feeler {addr}: alive"),
            Err(why) => {
                tracing::debug!("feeler {addr}: {why}");
                self.punish(addr, &why, false);
            }
        }
    }

    /// After a peer left because of `why`: bans its address if it misbehaved, except where Core's
    /// `MaybeDiscourageAndDisconnect` only disconnects: a manual connection, and a local address
    /// (behind a Tor onion service every inbound peer comes from 127.0.0.1, so a ban would shut
    /// out every honest one with it).
    fn punish(&self, addr: SocketAddr, why: &PeerError, manual: bool) {
        if !why.deserves_ban() {
            return;
        }
        if manual {
            tracing::warn!("not banning manually connected peer {addr}: {why}");
        } else if addrbook::is_local(addr.ip()) {
            tracing::warn!("disconnected but not banning local peer {addr}: {why}");
        } else {
            self.bans.ban(addr, &why.to_string());
        }
    }
}

/// Opens a TCP connection to `addr` within [`CONNECT_TIMEOUT`].
async fn dial(addr: SocketAddr) -> Option<TcpStream> {
    match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            tracing::debug!("cannot connect to {addr}: {e}");
            None
        }
        Err(_) => {
            tracing::debug!("cannot connect to {addr}: timed out");
            None
        }
    }
}

impl P2p {
    /// Starts the peer tasks (and the listener). Must run inside a tokio runtime.
    pub async fn start(
        config: P2pConfig,
        validator: Arc<Validator>,
        mempool: Option<MempoolAccess>,
        space: Option<SpaceWatch>,
    ) -> Result<Self, P2pError> {
        let book_file = config
            .addrbook_file
            .clone()
            .map(|path| (path, config.magic));
        let allow_local = config.network == Network::Regtest;
        let book = match &book_file {
            Some((path, magic)) => addrbook_file::load(path, *magic, allow_local),
            None => AddrBook::new(allow_local),
        };
        let ctx = Arc::new(peer_context(&config, validator, mempool, space, book)?);
        let shared = Arc::new(Shared {
            ctx: ctx.clone(),
            bans: BanList::default(),
            ids: AtomicU64::new(1),
            slots: Slots::default(),
        });
        // Fixed peers: `connect` (only these) or `addnode` (these and others).
        let fixed = config.connect.iter().chain(&config.addnode);
        let mut tasks: Vec<_> = fixed
            .map(|addr| tokio::spawn(keep_connected(shared.clone(), *addr)))
            .collect();
        tasks.push(tokio::spawn(watch_tip(ctx.clone())));
        if let Some((path, magic)) = book_file.clone() {
            tasks.push(tokio::spawn(save_book_periodically(
                ctx.book.clone(),
                path,
                magic,
            )));
        }
        if config.connect.is_empty() && config.max_outbound > 0 {
            let anchors = book_file
                .as_ref()
                .map(|(path, magic)| addrbook_file::take_anchors(&anchors_path(path), *magic))
                .unwrap_or_default();
            if !anchors.is_empty() {
                tracing::info!("dialling {} anchors of the last run first", anchors.len());
            }
            let manage = outbound::manage(shared.clone(), config.clone(), anchors);
            tasks.push(tokio::spawn(manage));
        }
        let mut listen_addr = None;
        if let Some(addr) = config.listen {
            match TcpListener::bind(addr).await {
                Ok(listener) => {
                    listen_addr = listener.local_addr().ok();
                    tracing::info!("accepting peers on {}", listen_addr.unwrap_or(addr));
                    let balancers = Balancers::new(config.inbound_balancers.clone());
                    let accepting = accept_loop(listener, shared.clone(), balancers);
                    tasks.push(tokio::spawn(accepting));
                }
                Err(source) if config.listen_required => {
                    return Err(P2pError::Listen { addr, source })
                }
                Err(e) => tracing::warn!("not accepting peers: cannot listen on {addr}: {e}"),
            }
        }
        Ok(P2p {
            listen_addr,
            ctx,
            shared,
            tasks,
            book_file,
        })
    }

    /// Asks every peer for headers now (what electrs does on SIGUSR1).
    pub fn sync_now(&self) {
        let _ = self.ctx.sync_now.send(());
    }

    /// The connected peers and the address book's size.
    pub fn status(&self) -> P2pStatus {
        (self.status_source())()
    }

    /// A handle that reports [`P2p::status`] from elsewhere (the admin RPC).
    pub fn status_source(&self) -> impl Fn() -> P2pStatus + Send + Sync + 'static {
        let ctx = self.ctx.clone();
        let listen = self.listen_addr;
        move || P2pStatus {
            listen,
            peers: ctx.registry.list(),
            known_addresses: ctx.book.len(),
        }
    }

    /// A handle that saves the address book, as the node saves it, to a file of the caller's
    /// choice (a snapshot's).
    pub fn book_saver(
        &self,
        magic: [u8; 4],
    ) -> impl Fn(&std::path::Path) -> std::io::Result<usize> + Send + Sync + 'static {
        let book = self.ctx.book.clone();
        move |path| addrbook_file::save(&book, path, magic)
    }

    /// Stops every peer task, then saves the address book and the automatic outbound peers
    /// still connected as the next start's anchors (Core's `DumpAnchors`).
    pub fn stop(self) {
        let anchors = self.anchors();
        for t in self.tasks {
            t.abort();
        }
        if let Some((path, magic)) = &self.book_file {
            save_book(&self.ctx.book, path, *magic);
            let path = anchors_path(path);
            if let Err(e) = addrbook_file::save_anchors(&path, &anchors, *magic) {
                tracing::warn!("anchors not saved to {}: {e}", path.display());
            }
        }
    }

    /// The automatic outbound peers connected now.
    fn anchors(&self) -> Vec<SocketAddr> {
        let automatic = self.shared.slots.snapshot();
        let peers = self.ctx.registry.list().into_iter();
        peers
            .filter(|p| !p.inbound && automatic.contains(&p.addr))
            .map(|p| p.addr)
            .collect()
    }
}

/// Where the anchors are saved: `anchors.dat` beside the address book.
fn anchors_path(book: &std::path::Path) -> std::path::PathBuf {
    book.with_file_name("anchors.dat")
}

/// Saves the address book every [`addrbook_file::SAVE_INTERVAL`].
async fn save_book_periodically(book: Arc<AddrBook>, path: std::path::PathBuf, magic: [u8; 4]) {
    loop {
        tokio::time::sleep(addrbook_file::SAVE_INTERVAL).await;
        let (book, path) = (book.clone(), path.clone());
        let _ = tokio::task::spawn_blocking(move || save_book(&book, &path, magic)).await;
    }
}

fn save_book(book: &AddrBook, path: &std::path::Path, magic: [u8; 4]) {
    match addrbook_file::save(book, path, magic) {
        Ok(n) => tracing::debug!("address book: {n} addresses saved to {}", path.display()),
        Err(e) => tracing::warn!("address book not saved to {}: {e}", path.display()),
    }
}

/// What every peer connection shares; the services advertised follow from it (compact
/// filters only with an index that builds them).
fn peer_context(
    config: &P2pConfig,
    validator: Arc<Validator>,
    mempool: Option<MempoolAccess>,
    space: Option<SpaceWatch>,
    book: AddrBook,
) -> Result<PeerContext, P2pError> {
    let registry = Arc::new(Registry::default());
    let blame = registry.clone();
    // As Core's MaybePunishNodeForBlock: the peer that sent a block the kernel finds invalid
    // (or that does not parse) is disconnected and banned; the block is not held against others.
    let downloader = Downloader::new(validator.clone(), space, move |hash, from, e| {
        if matches!(e, KernelError::Invalid { .. } | KernelError::Malformed(_)) {
            blame.report_offence(from, format!("sent block {hash}, which is invalid: {e}"));
        }
    })
    .map_err(P2pError::Thread)?;
    let filter_index = mempool
        .as_ref()
        .map(|m| m.index.clone())
        .filter(|i| i.filters_enabled());
    let mut services = ServiceFlags::NETWORK | ServiceFlags::WITNESS;
    if filter_index.is_some() {
        services |= ServiceFlags::COMPACT_FILTERS;
    }
    if config.v2_transport {
        services |= ServiceFlags::P2P_V2;
    }
    Ok(PeerContext {
        magic: Magic::from_bytes(config.magic),
        rules: headers_sync::ChainRules::of(config.network, config.custom_signet),
        validator,
        downloader,
        services,
        filter_index,
        mempool,
        orphans: Orphans::default(),
        tx_budgets: tx_budget::TxBudgets::new(config.inbound_exempt.clone()),
        tx_requests: Default::default(),
        inbound_announcement: Default::default(),
        addr_answer: Default::default(),
        book: Arc::new(book),
        registry,
        timeout: config.timeout,
        learns_addresses: config.connect.is_empty(),
        sync_now: tokio::sync::broadcast::channel(4).0,
        tip: tokio::sync::watch::channel(None).0,
        inbound: inbound::Inbound::new(
            config.max_inbound,
            config.max_inbound_per_host,
            config.inbound_exempt.clone(),
        ),
    })
}

/// Keeps a configured peer connected: reconnects after every disconnect.
async fn keep_connected(shared: Arc<Shared>, addr: SocketAddr) {
    loop {
        shared.connect_and_run(addr, true).await;
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

/// Accepts inbound peers, refusing banned addresses and any the inbound places do not admit. A
/// connection holds its place from accept to close, handshake or not, so half-open connections
/// count against the limits too (each is dropped after the handshake timeout).
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, balancers: Balancers) {
    loop {
        let (stream, peer_addr) = crate::listen::accept(&listener, "P2P").await;
        if !balancers.trusts(peer_addr.ip()) {
            admit(stream, peer_addr, &shared);
            continue;
        }
        // A balancer's connection: its peer is known once its header is read.
        let shared = shared.clone();
        proxy::admit_after_header(&balancers, stream, peer_addr, "P2P", move |s, peer| {
            admit(s, peer, &shared)
        });
    }
}

/// Runs the inbound peer at `peer_addr` in a task of its own, unless it is banned or the
/// inbound places do not admit it (its connection then closed at once).
fn admit(stream: TcpStream, peer_addr: SocketAddr, shared: &Arc<Shared>) {
    if shared.bans.is_banned(&peer_addr) {
        return;
    }
    let places = shared.ctx.inbound.clone();
    let id = shared.ids.fetch_add(1, Ordering::SeqCst);
    let Some(place) = places.admit(id, peer_addr) else {
        tracing::debug!("refusing {peer_addr}: no inbound place for it");
        return;
    };
    let shared = shared.clone();
    let task = tokio::spawn(async move {
        let _place = place;
        let v2 = shared.ctx.services.has(ServiceFlags::P2P_V2);
        let why = peer::run(stream, peer_addr, true, v2, id, shared.ctx.clone()).await;
        // As Core (`-debug=net`): an inbound peer's comings and goings are for debugging; a
        // host that connects and hangs up in a loop would otherwise write the log.
        tracing::debug!("peer {id} {peer_addr} (inbound): disconnected: {why}");
        shared.punish(peer_addr, &why, false);
    });
    places.running(id, task.abort_handle());
}

/// How often the kernel's tip is looked at for announcements.
const TIP_WATCH: Duration = Duration::from_millis(250);

/// Publishes the kernel's tip to the sessions whenever it moves, once the initial download is
/// over: Core announces no blocks before either. (Not "tip equals the best header": a valid
/// header whose block turns out invalid stays the best header and would stop announcements.)
async fn watch_tip(ctx: Arc<PeerContext>) {
    let mut tick = tokio::time::interval(TIP_WATCH);
    loop {
        tick.tick().await;
        let v = &ctx.validator;
        let (tip, syncing) = tokio::task::block_in_place(|| (v.tip(), v.initial_download()));
        if syncing.is_none() {
            ctx.tip.send_if_modified(|seen| {
                let moved = *seen != Some(tip.hash);
                *seen = Some(tip.hash);
                moved
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::addrbook::is_local;
    use super::{BanList, MAX_BANS};

    #[test]
    fn bans_are_kept_per_host_and_bounded() {
        let bans = BanList::default();
        bans.ban("[2001:db8::1]:8333".parse().unwrap(), "test");
        assert!(
            bans.is_banned(&"[2001:db8::ffff]:1".parse().unwrap()),
            "same /64"
        );
        assert!(
            !bans.is_banned(&"[2001:db8:0:1::1]:1".parse().unwrap()),
            "another /64"
        );
        for i in 0..MAX_BANS as u32 + 5 {
            let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i);
            bans.ban(std::net::SocketAddr::from((ip, 8333)), "test");
        }
        assert_eq!(bans.len(), MAX_BANS);
        assert!(
            bans.is_banned(&"10.0.39.19:1".parse().unwrap()),
            "the newest is kept"
        );
    }

    #[test]
    fn local_addresses_are_cores() {
        for local in [
            "127.0.0.1",
            "127.9.8.7",
            "0.0.0.0",
            "0.1.2.3",
            "::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_local(local.parse().unwrap()), "{local}");
        }
        for remote in [
            "192.0.2.2",
            "10.0.0.1",
            "1.0.0.0",
            "128.0.0.1",
            "::2",
            "fd00::2",
            "::ffff:8.8.8.8",
        ] {
            assert!(!is_local(remote.parse().unwrap()), "{remote}");
        }
    }
}

//! The Electrum server: newline-delimited JSON-RPC 2.0 over TCP, protocol 1.4 to 1.6, answered
//! from cairn's index. One task per connection; the index and the kernel are only read.

pub mod merkle;
mod methods;
mod session;
pub mod status;

pub use methods::history_text;
mod verbose;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{broadcast, Semaphore};

use crate::config::Network;
use crate::index::schema::ScriptHash;
use crate::index::Index;
use crate::kernel::Validator;
use crate::mempool::Mempool;

pub use merkle::{branch_and_root, root_from_branch, rpc_hex};
pub use status::status;

/// The oldest protocol version served.
pub const PROTOCOL_MIN: (u32, u32) = (1, 4);
/// The newest protocol version served.
pub const PROTOCOL_MAX: (u32, u32) = (1, 6);
/// What `server.version` reports as the server software.
pub const SERVER_SOFTWARE: &str = concat!("cairn ", env!("CARGO_PKG_VERSION"));

/// Limits and identity of the Electrum server; every one is configurable.
#[derive(Debug, Clone)]
pub struct ElectrumConfig {
    /// Where to listen for TCP clients.
    pub addr: SocketAddr,
    /// Where to listen for WebSocket clients (`None`: no WebSocket listener).
    pub ws_addr: Option<SocketAddr>,
    /// Longest request line in bytes; longer lines get an error and a disconnect.
    pub max_line_bytes: usize,
    /// Most requests in one batch.
    pub max_batch: usize,
    /// Most script-hash subscriptions on one connection.
    pub max_subscriptions: usize,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// Most connections at once.
    pub max_connections: usize,
    /// Most history entries in one answer (a larger history is an explicit error).
    pub max_history: usize,
    /// Most headers in one `blockchain.block.headers` answer.
    pub max_headers: u32,
    /// Text of `server.banner`.
    pub banner: String,
    /// Answer of `server.donation_address` (empty: none).
    pub donation_address: String,
    /// Peers announced by `server.peers.subscribe`, as `host` strings.
    pub peers: Vec<String>,
}

impl ElectrumConfig {
    /// Defaults for `network`, listening on loopback at the conventional port.
    pub fn defaults(network: Network) -> Self {
        ElectrumConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], network.default_electrum_port())),
            ws_addr: None,
            max_line_bytes: 2 * 1024 * 1024,
            max_batch: 1_000,
            max_subscriptions: 50_000,
            idle_timeout: Duration::from_secs(600),
            max_connections: 1_000,
            max_history: 200_000,
            max_headers: 2016,
            banner: format!("Welcome to {SERVER_SOFTWARE}, a validating Electrum server"),
            donation_address: String::new(),
            peers: Vec::new(),
        }
    }
}

/// A new index tip and the script hashes whose history changed to reach it.
#[derive(Debug, Clone)]
pub struct TipUpdate {
    /// The new tip's height.
    pub height: u32,
    /// The new tip's header.
    pub header: bitcoin::block::Header,
    /// Script hashes touched by connected or undone blocks; `None` means "any may have".
    pub touched: Option<Arc<HashSet<ScriptHash>>>,
}

/// What the sessions read from.
pub struct Backend {
    /// The index.
    pub index: Arc<Index>,
    /// The validator (raw transactions are cut out of its blocks).
    pub validator: Arc<Validator>,
    /// The mempool, when cairn keeps one.
    pub mempool: Option<Arc<Mempool>>,
    /// Where accepted transactions go to be announced to peers.
    pub relay: broadcast::Sender<bitcoin::Txid>,
    /// Where changes are published to every session.
    pub updates: broadcast::Sender<TipUpdate>,
    /// The configuration.
    pub config: ElectrumConfig,
}

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen for Electrum clients on {addr}: {source}")]
pub struct ListenError {
    /// The address.
    pub addr: SocketAddr,
    /// What the OS said.
    pub source: std::io::Error,
}

/// A running Electrum server.
pub struct ElectrumServer {
    /// The address it listens on for TCP clients.
    pub addr: SocketAddr,
    /// The address it listens on for WebSocket clients, when it does.
    pub ws_addr: Option<SocketAddr>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The transports a listener speaks.
#[derive(Debug, Clone, Copy)]
enum Transport {
    /// Newline-delimited JSON over TCP.
    Tcp,
    /// One JSON text per WebSocket message.
    WebSocket,
}

impl ElectrumServer {
    /// Starts listening (TCP, and WebSocket when configured); every accepted client gets a
    /// session task. Both listeners share the connection limit.
    pub async fn start(
        backend: Arc<Backend>,
        updates: broadcast::Sender<TipUpdate>,
    ) -> Result<Self, ListenError> {
        let permits = Arc::new(Semaphore::new(backend.config.max_connections));
        let (addr, tcp) = listen(backend.config.addr, Transport::Tcp, &backend, &updates, &permits).await?;
        let mut tasks = vec![tcp];
        let ws_addr = match backend.config.ws_addr {
            Some(ws) => {
                let (local, task) = listen(ws, Transport::WebSocket, &backend, &updates, &permits).await?;
                tasks.push(task);
                Some(local)
            }
            None => None,
        };
        Ok(ElectrumServer { addr, ws_addr, tasks })
    }

    /// Stops accepting clients.
    pub fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

async fn listen(
    addr: SocketAddr,
    transport: Transport,
    backend: &Arc<Backend>,
    updates: &broadcast::Sender<TipUpdate>,
    permits: &Arc<Semaphore>,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), ListenError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ListenError { addr, source })?;
    let (backend, updates, permits) = (backend.clone(), updates.clone(), permits.clone());
    let task = tokio::spawn(async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("electrum accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                tracing::warn!("electrum: refusing {peer}, connection limit reached");
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let backend = backend.clone();
            let rx = updates.subscribe();
            tokio::spawn(async move {
                match transport {
                    Transport::Tcp => session::run(stream, peer, backend, rx).await,
                    Transport::WebSocket => session::run_websocket(stream, peer, backend, rx).await,
                }
                drop(permit);
            });
        }
    });
    match transport {
        Transport::Tcp => tracing::info!("Electrum server listening on {local}"),
        Transport::WebSocket => tracing::info!("Electrum server listening for WebSocket clients on {local}"),
    }
    Ok((local, task))
}

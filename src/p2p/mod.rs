//! The P2P side: outbound connections to the configured peers, headers-first sync with a
//! parallel block download, and answers to peers' getheaders and getdata.

pub mod codec;
pub mod peer;
pub mod sync;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bitcoin::p2p::{Magic, ServiceFlags};
use tokio::net::{TcpListener, TcpStream};

use crate::kernel::Validator;
use peer::PeerContext;
use sync::Downloader;

/// How long a misbehaving peer's address is refused.
pub const BAN_TIME: Duration = Duration::from_secs(24 * 3600);
/// Wait before reconnecting to a configured peer.
const RECONNECT_DELAY: Duration = Duration::from_secs(5);

/// P2P settings.
#[derive(Debug, Clone)]
pub struct P2pConfig {
    /// Peers to connect to (and keep reconnecting to).
    pub connect: Vec<SocketAddr>,
    /// Where to accept peers, if anywhere.
    pub listen: Option<SocketAddr>,
    /// The network magic.
    pub magic: [u8; 4],
}

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

/// What transaction relay needs: the mempool, the index it checks against, where accepted
/// transactions are announced and where changes reach the Electrum sessions.
#[derive(Clone)]
pub struct TxRelay {
    /// The index.
    pub index: Arc<crate::index::Index>,
    /// The mempool.
    pub mempool: Arc<crate::mempool::Mempool>,
    /// Accepted transactions to announce.
    pub relay: tokio::sync::broadcast::Sender<bitcoin::Txid>,
    /// Changes for the Electrum sessions.
    pub updates: tokio::sync::broadcast::Sender<crate::electrum::TipUpdate>,
}

/// Banned addresses (by IP) and until when.
#[derive(Default)]
struct BanList(Mutex<HashMap<std::net::IpAddr, Instant>>);

impl BanList {
    fn ban(&self, addr: SocketAddr, why: &str) {
        tracing::warn!("banning {addr}: {why}");
        if let Ok(mut m) = self.0.lock() {
            m.insert(addr.ip(), Instant::now() + BAN_TIME);
        }
    }

    fn is_banned(&self, addr: &SocketAddr) -> bool {
        self.0
            .lock()
            .map(|m| m.get(&addr.ip()).is_some_and(|until| *until > Instant::now()))
            .unwrap_or(false)
    }
}

/// The running P2P side.
pub struct P2p {
    /// The address it listens on, if it does.
    pub listen_addr: Option<SocketAddr>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl P2p {
    /// Starts the peer tasks (and the listener). Must run inside a tokio runtime.
    pub async fn start(
        config: P2pConfig,
        validator: Arc<Validator>,
        tx_relay: Option<TxRelay>,
    ) -> Result<Self, P2pError> {
        let bans = Arc::new(BanList::default());
        let downloader = Downloader::new(validator.clone(), |hash, e| {
            tracing::warn!("invalid block {hash} from the network: {e}");
        })
        .map_err(P2pError::Thread)?;
        let ctx = Arc::new(PeerContext {
            magic: Magic::from_bytes(config.magic),
            validator,
            downloader,
            services: ServiceFlags::NETWORK | ServiceFlags::WITNESS,
            tx_relay,
        });
        let ids = Arc::new(AtomicU64::new(1));
        let mut tasks = Vec::new();
        for addr in config.connect.clone() {
            let ctx = ctx.clone();
            let ids = ids.clone();
            let bans = bans.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    if bans.is_banned(&addr) {
                        tokio::time::sleep(RECONNECT_DELAY).await;
                        continue;
                    }
                    match TcpStream::connect(addr).await {
                        Ok(stream) => {
                            let id = ids.fetch_add(1, Ordering::SeqCst);
                            let why = peer::run(stream, addr, id, ctx.clone()).await;
                            tracing::info!("peer {id} {addr}: disconnected: {why}");
                            if why.deserves_ban() {
                                bans.ban(addr, &why.to_string());
                            }
                        }
                        Err(e) => tracing::debug!("cannot connect to {addr}: {e}"),
                    }
                    tokio::time::sleep(RECONNECT_DELAY).await;
                }
            }));
        }
        let mut listen_addr = None;
        if let Some(addr) = config.listen {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| P2pError::Listen { addr, source })?;
            listen_addr = listener.local_addr().ok();
            tracing::info!("accepting peers on {}", listen_addr.unwrap_or(addr));
            let ctx = ctx.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let Ok((stream, peer_addr)) = listener.accept().await else { continue };
                    if bans.is_banned(&peer_addr) {
                        continue;
                    }
                    let id = ids.fetch_add(1, Ordering::SeqCst);
                    let ctx = ctx.clone();
                    let bans = bans.clone();
                    tokio::spawn(async move {
                        let why = peer::run(stream, peer_addr, id, ctx).await;
                        tracing::info!("peer {id} {peer_addr} (inbound): disconnected: {why}");
                        if why.deserves_ban() {
                            bans.ban(peer_addr, &why.to_string());
                        }
                    });
                }
            }));
        }
        Ok(P2p { listen_addr, tasks })
    }

    /// Stops every peer task.
    pub fn stop(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}

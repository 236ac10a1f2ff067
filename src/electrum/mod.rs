//! The Electrum server: newline-delimited JSON-RPC 2.0 over TCP or TLS, or over WebSocket (with
//! or without TLS), protocol 1.4 to 1.7, answered from cairn's index. One task per connection;
//! the index and the kernel are only read.

// The session, its framing and the context its handlers share.
mod backend;
mod connection;
mod context;
mod counted;
mod named_params;
mod outbox;
mod params;
mod request;
pub mod rpc;
mod session;

// The handlers and their renderers, a file per protocol namespace.
mod cake_tweaks;
mod frigate_scan;
mod headers;
mod mempool;
mod outpoint;
mod scripthash;
mod server;
mod transaction;
mod verbose;

#[cfg(test)]
mod readme_table;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};

pub use backend::Backend;
pub use request::{PROTOCOL_MAX, PROTOCOL_MIN};
pub use scripthash::history_text;
pub use session::Requests;

use crate::config::CostLimits;
use crate::listen::proxy::{self, Balancers};
use crate::listen::{HostGuard, HostTable};
use crate::tls::Tls;
use crate::work::cost;

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
    /// The address it listens on for clients over TLS, when it does.
    pub tls_addr: Option<SocketAddr>,
    /// The address it listens on for WebSocket clients over TLS, when it does.
    pub wss_addr: Option<SocketAddr>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// How a listener's clients frame their requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// Newline-delimited JSON.
    Lines,
    /// One JSON text per WebSocket message.
    WebSocket,
}

/// What one listener speaks: a framing, over TLS or not.
#[derive(Clone)]
struct Transport {
    framing: Framing,
    tls: Option<Arc<Tls>>,
}

impl Transport {
    /// The metrics label.
    fn label(&self) -> &'static str {
        use crate::metrics::transport;
        match (self.framing, self.tls.is_some()) {
            (Framing::Lines, false) => transport::TCP,
            (Framing::Lines, true) => transport::TLS,
            (Framing::WebSocket, false) => transport::WS,
            (Framing::WebSocket, true) => transport::WSS,
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match (self.framing, self.tls.is_some()) {
            (Framing::Lines, false) => "TCP",
            (Framing::Lines, true) => "TLS",
            (Framing::WebSocket, false) => "WebSocket",
            (Framing::WebSocket, true) => "WebSocket over TLS",
        })
    }
}

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl ElectrumServer {
    /// Starts listening (TCP, and WebSocket, TLS and WebSocket over TLS when configured); every
    /// accepted client gets a session task. The listeners share the connection limit and the
    /// answer budget. `tls` is the identity the TLS listeners present (needed when either is
    /// configured).
    pub async fn start(backend: Arc<Backend>, tls: Option<Arc<Tls>>) -> Result<Self, ListenError> {
        let hosts = HostTable::with_total(
            backend.config.hosts.clone(),
            backend.config.max_connections,
            "electrum",
        );
        let budget = connection::Shares::new(backend.config.answer_budget_bytes);
        let balancers = Balancers::new(backend.config.hosts.balancers.clone());
        let config = &backend.config;
        let wanted = [
            (Some(config.addr), Framing::Lines, false),
            (config.ws_addr, Framing::WebSocket, false),
            (config.tls_addr, Framing::Lines, true),
            (config.wss_addr, Framing::WebSocket, true),
        ];
        let mut tasks = Vec::new();
        let mut bound = [None; 4];
        for (slot, (addr, framing, secure)) in bound.iter_mut().zip(wanted) {
            let Some(addr) = addr else { continue };
            let tls = match secure {
                true => Some(tls.clone().ok_or_else(|| ListenError {
                    addr,
                    source: std::io::Error::other("no TLS certificate loaded"),
                })?),
                false => None,
            };
            let (local, task) = listen(
                addr,
                Transport { framing, tls },
                &backend,
                Places {
                    hosts: hosts.clone(),
                    cost: backend.config.cost,
                    balancers: balancers.clone(),
                },
                &budget,
            )
            .await?;
            tasks.push(task);
            *slot = Some(local);
        }
        let [addr, ws_addr, tls_addr, wss_addr] = bound;
        let addr = addr.unwrap_or(config.addr);
        Ok(ElectrumServer {
            addr,
            ws_addr,
            tls_addr,
            wss_addr,
            tasks,
        })
    }

    /// Stops accepting clients.
    pub fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

/// The places every listener of the server shares: connections in all, per host and per
/// group; and the balancers whose connections name their clients.
#[derive(Clone)]
struct Places {
    hosts: Arc<HostTable>,
    cost: CostLimits,
    balancers: Balancers,
}

impl Places {
    /// A place for a client from `peer` (one taken back from the group holding the most when
    /// the server is full), or the limit it met (counted in
    /// `cairn_electrum_connections_refused_total`), its host's cost among them.
    fn take(&self, peer: SocketAddr) -> Option<HostGuard> {
        let refused = |reason: &str| {
            crate::metrics::metrics()
                .electrum_connections_refused
                .with_label_values(&[reason])
                .inc();
        };
        // A host at the hard limit of its cost gets no handshake (and pays nothing more for
        // being refused), and takes nobody's place.
        if self.hosts.cost_of(peer.ip()).verdict(&self.cost) == cost::Verdict::Close {
            refused("cost");
            return None;
        }
        let host = match self.hosts.admit(peer.ip()) {
            Ok(host) => host,
            Err(limit) => {
                refused(limit.label());
                return None;
            }
        };
        // Any other pays for its handshake.
        host.shared().cost.charge(cost::CONNECTION, &self.cost);
        Some(host)
    }
}

async fn listen(
    addr: SocketAddr,
    transport: Transport,
    backend: &Arc<Backend>,
    places: Places,
    budget: &connection::Shares,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), ListenError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ListenError { addr, source })?;
    let (backend, budget) = (backend.clone(), budget.clone());
    tracing::info!("Electrum server listening for {transport} clients on {local}");
    let task = tokio::spawn(async move {
        loop {
            let (stream, peer) = crate::listen::accept(&listener, "Electrum").await;
            if !places.balancers.trusts(peer.ip()) {
                admit(stream, peer, &places, &backend, &budget, &transport);
                continue;
            }
            // A balancer's connection: its client is known once its header is read.
            let (balancers, places) = (places.balancers.clone(), places.clone());
            let (backend, budget, transport) = (backend.clone(), budget.clone(), transport.clone());
            proxy::admit_after_header(&balancers, stream, peer, "Electrum", move |s, client| {
                admit(s, client, &places, &backend, &budget, &transport)
            });
        }
    });
    Ok((local, task))
}

/// Gives the client at `peer` a place and serves it in a task of its own, or closes its
/// connection at once when no place is its (before any handshake: a refused client costs one
/// accept and one close).
fn admit(
    stream: TcpStream,
    peer: SocketAddr,
    places: &Places,
    backend: &Arc<Backend>,
    budget: &connection::Shares,
    transport: &Transport,
) {
    let Some(place) = places.take(peer) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let client = Client {
        peer,
        backend: backend.clone(),
        budget: budget.for_seat(place.seat()),
    };
    let transport = transport.clone();
    let seat = place.seat();
    let task = tokio::spawn(async move {
        client.serve(stream, transport).await;
        drop(place);
    });
    seat.running(task.abort_handle());
}

/// One accepted client, before its transport is set up.
struct Client {
    peer: SocketAddr,
    backend: Arc<Backend>,
    budget: connection::Shares,
}

impl Client {
    /// Completes the TLS handshake when the transport has one (within [`HANDSHAKE_TIMEOUT`]),
    /// then serves the session.
    async fn serve(self, stream: TcpStream, transport: Transport) {
        let Some(tls) = &transport.tls else {
            return self.session(stream, &transport).await;
        };
        let peer = self.peer;
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor().accept(stream)).await {
            Ok(Ok(secured)) => self.session(secured, &transport).await,
            Ok(Err(e)) => tracing::debug!("electrum client {peer}: TLS handshake failed: {e}"),
            Err(_) => tracing::debug!("electrum client {peer}: TLS handshake timed out"),
        }
    }

    async fn session<S>(self, stream: S, transport: &Transport)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let Client {
            peer,
            backend,
            budget,
        } = self;
        let rx = backend.notifier.subscribe_tips();
        let label = transport.label();
        match transport.framing {
            Framing::Lines => connection::run(stream, peer, label, backend, rx, budget).await,
            Framing::WebSocket => {
                connection::run_websocket(stream, peer, label, backend, rx, budget).await
            }
        }
    }
}

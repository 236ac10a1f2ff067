//! The Electrum server: newline-delimited JSON-RPC 2.0 over TCP, protocol 1.4 to 1.6, answered
//! from cairn's index. One task per connection; the index and the kernel are only read.

mod backend;
pub mod merkle;
mod methods;
mod params;
pub mod rpc;
mod session;
pub mod status;
mod verbose;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub use backend::Backend;
pub use session::Requests;
pub use merkle::{branch_and_root, root_from_branch, rpc_hex};
pub use methods::{history_text, PROTOCOL_MAX, PROTOCOL_MIN};
pub use status::status;

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
    pub async fn start(backend: Arc<Backend>) -> Result<Self, ListenError> {
        let permits = Arc::new(Semaphore::new(backend.config.max_connections));
        let budget = session::AnswerBudget::new(backend.config.answer_budget_bytes);
        let (addr, tcp) = listen(backend.config.addr, Transport::Tcp, &backend, &permits, &budget).await?;
        let mut tasks = vec![tcp];
        let ws_addr = match backend.config.ws_addr {
            Some(ws) => {
                let (local, task) = listen(ws, Transport::WebSocket, &backend, &permits, &budget).await?;
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
    permits: &Arc<Semaphore>,
    budget: &session::AnswerBudget,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), ListenError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ListenError { addr, source })?;
    let (backend, permits, budget) = (backend.clone(), permits.clone(), budget.clone());
    let task = tokio::spawn(async move {
        loop {
            let (stream, peer) = crate::listen::accept(&listener, "Electrum").await;
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                tracing::warn!("electrum: refusing {peer}, connection limit reached");
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let backend = backend.clone();
            let rx = backend.notifier.subscribe_tips();
            let budget = budget.clone();
            tokio::spawn(async move {
                match transport {
                    Transport::Tcp => session::run(stream, peer, backend, rx, budget).await,
                    Transport::WebSocket => session::run_websocket(stream, peer, backend, rx, budget).await,
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

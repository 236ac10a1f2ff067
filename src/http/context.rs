//! What the HTTP endpoints read from, and the errors starting a listener.

use std::net::SocketAddr;
use std::sync::Arc;

use super::status_page;
use crate::listen::WorkPool;
use crate::notify::Notifier;
use crate::view::ReadModel;

/// Errors starting the HTTP server.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The listener could not bind.
    #[error("cannot listen for HTTP on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// What the HTTP endpoints read from, and where broadcast transactions go.
pub struct HttpContext {
    /// The read model every answer comes from (index, mempool, kernel reads).
    pub model: Arc<ReadModel>,
    /// Where accepted transactions are announced to peers and published to sessions.
    pub notifier: Notifier,
    /// The node's status as `cairn status --json` prints it, for the status page.
    pub node_status: Option<status_page::NodeStatus>,
    /// The status page's samples of the last hour.
    pub samples: status_page::Samples,
    /// The pool answers are built in (shared with the Electrum server).
    pub pool: Arc<WorkPool>,
}

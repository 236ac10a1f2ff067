//! What the HTTP endpoints read from, and the errors starting a listener.

use std::net::SocketAddr;
use std::sync::Arc;

use super::status_page;
use crate::config::CostLimits;
use crate::listen::WorkPool;
use crate::notify::Notifier;
use crate::view::{ChainView, Cost, CostMeter, ReadModel};

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
    /// What a host's requests may cost (`http_cost_*`).
    pub cost: CostLimits,
}

/// One request's access to what the endpoints read: every view it takes is metered, and what
/// the meter counts is charged to the request's host once it is answered.
pub struct Query<'a> {
    /// The read model.
    pub model: &'a ReadModel,
    /// Where accepted transactions are announced.
    pub notifier: &'a Notifier,
    meter: &'a CostMeter,
}

impl<'a> Query<'a> {
    /// The access of one request to `ctx`, its reads counted in `meter`.
    pub fn new(ctx: &'a HttpContext, meter: &'a CostMeter) -> Self {
        Query {
            model: &ctx.model,
            notifier: &ctx.notifier,
            meter,
        }
    }

    /// One view of the read model, its reads counted against the request.
    pub fn view(&self) -> ChainView<'a> {
        self.model.metered_view(self.meter)
    }

    /// Counts work done outside any view (a broadcast's checks) against the request.
    pub fn charge(&self, cost: Cost) {
        self.meter.add(cost);
    }
}

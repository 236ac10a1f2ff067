//! What the HTTP endpoints read from, and the errors starting a listener.

use std::net::SocketAddr;
use std::sync::Arc;

use super::status_page;
use crate::config::CostLimits;
use crate::notify::Notifier;
use crate::view::{ChainView, Cost, CostMeter, ReadModel};
use crate::work::{cost, HostShares, KeptVerdict, VerdictCache, VerdictKey, WorkPool};

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
    /// Broadcasts' refusals, kept while the mempool and the tip stay.
    pub verdicts: VerdictCache,
    /// Blocks the kernel may be behind the best header while `/health` answers 200
    /// (`health_max_blocks_behind`).
    pub health_max_blocks_behind: u32,
}

/// One request's access to what the endpoints read: every view it takes is metered, and what
/// the meter counts is charged to the request's host once it is answered.
pub struct Query<'a> {
    /// The read model.
    pub model: &'a ReadModel,
    /// Where accepted transactions are announced.
    pub notifier: &'a Notifier,
    meter: &'a CostMeter,
    /// What the request's host shares with its other connections: its cost among them.
    host: &'a HostShares,
    limits: CostLimits,
    verdicts: &'a VerdictCache,
}

impl<'a> Query<'a> {
    /// The access of one request of `host`'s to `ctx`, its reads counted in `meter`.
    pub fn new(ctx: &'a HttpContext, meter: &'a CostMeter, host: &'a HostShares) -> Self {
        Query {
            model: &ctx.model,
            notifier: &ctx.notifier,
            meter,
            host,
            limits: ctx.cost,
            verdicts: &ctx.verdicts,
        }
    }

    /// Charges the host `estimate` before the work it stands for runs: whether it may run
    /// ([`crate::work::Accounts::pay_ahead`]). Not counted again when the request is
    /// answered.
    pub fn pay_ahead(&self, estimate: Cost) -> bool {
        self.host
            .cost
            .pay_ahead(cost::units(0, estimate, 0), &self.limits)
    }

    /// The key a `kind` answer for `raws` is kept under against the mempool and the tip now,
    /// and the answer kept under it, if any (`None` without a mempool).
    pub fn kept_verdict(
        &self,
        kind: &str,
        raws: &[&[u8]],
    ) -> Option<(VerdictKey, Option<KeptVerdict>)> {
        self.verdicts.lookup(self.model, kind, raws)
    }

    /// Keeps `verdict`, decided against the state `key` names, if the tip and the mempool are
    /// still that state, `writes` generations on.
    pub fn keep_verdict(
        &self,
        kind: &str,
        raws: &[&[u8]],
        key: VerdictKey,
        writes: u64,
        verdict: KeptVerdict,
    ) {
        (self.verdicts).keep_now(self.model, (kind, raws), &key, writes, verdict);
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

//! What the Electrum sessions read from and publish to.

use std::sync::Arc;

use crate::config::ElectrumConfig;
use crate::notify::Notifier;
use crate::view::ReadModel;
use crate::work::{VerdictCache, WorkPool};

/// What the sessions read from.
pub struct Backend {
    /// The read model every answer comes from (index, mempool, kernel reads, caches).
    pub model: Arc<ReadModel>,
    /// Where accepted transactions are announced to peers and changes published to sessions.
    pub notifier: Notifier,
    /// The configuration.
    pub config: ElectrumConfig,
    /// The pool the sessions' answers are built in (shared with the HTTP server).
    pub pool: Arc<WorkPool>,
    /// Dry runs' answers and broadcasts' refusals, kept while the mempool and tip stay.
    pub verdicts: VerdictCache,
}

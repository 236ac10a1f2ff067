//! What `cairn status` reports, locally or from a running cairn through the admin RPC.

use serde::{Deserialize, Serialize};

use crate::kernel::ChainTip;
use crate::p2p::P2pStatus;

/// A tip as reported by `cairn status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TipStatus {
    /// Height of the tip.
    pub height: i64,
    /// Hash of the tip, hex in display order.
    pub hash: String,
}

impl From<ChainTip> for TipStatus {
    fn from(tip: ChainTip) -> Self {
        TipStatus {
            height: tip.height,
            hash: tip.hash.to_string(),
        }
    }
}

/// What `cairn status --json` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The network name (a custom signet shows as `signet-<tag>`).
    pub network: String,
    /// The kernel's active tip.
    pub kernel_tip: TipStatus,
    /// The index's tip; `null` until the index exists.
    pub index_tip: Option<TipStatus>,
    /// The network's data folder.
    pub datadir: String,
    /// Whether the answer came from a running cairn (over the admin RPC).
    pub running: bool,
    /// The P2P side of a running cairn: listener, peers, known addresses.
    #[serde(default)]
    pub p2p: Option<P2pStatus>,
    /// While the node is in its initial download: how far (clients are then refused).
    #[serde(default)]
    pub syncing: Option<SyncStatus>,
    /// The kernel's fatal error, once it had one (it then validates nothing more).
    #[serde(default)]
    pub kernel_error: Option<String>,
    /// Free space under a running cairn's data folder.
    #[serde(default)]
    pub disk: Option<DiskStatus>,
}

/// How far an initial download has come.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncStatus {
    /// The validated tip's height.
    pub height: i64,
    /// The best known header's height.
    pub headers: i64,
}

/// Free disk space as a running cairn sees it (`min_free_space_mb`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskStatus {
    /// Free MiB on the fullest file system holding the data folder.
    pub free_mb: u64,
    /// The margin below which no blocks are taken, MiB.
    pub min_free_mb: u64,
    /// Whether it is below the margin now (blocks wait until space is freed).
    pub low: bool,
}

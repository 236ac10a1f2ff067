//! Whether the node is still in its initial download, by Bitcoin Core's rule
//! (`ChainstateManager::IsInitialBlockDownload`): the tip is older than 24 hours
//! (`DEFAULT_MAX_TIP_AGE`) or behind the best known header. Once caught up it stays so for the
//! life of the process, as Core latches it. Regtest chains are old by construction (a demo chain
//! imported to its end is synced), so there only the header rule applies.

use std::sync::atomic::Ordering;

use super::Validator;
use crate::types::Network;

/// Core's `DEFAULT_MAX_TIP_AGE`: a tip older than this means the node is still catching up.
pub const MAX_TIP_AGE_SECS: i64 = 24 * 60 * 60;

/// How far an initial download has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncProgress {
    /// The validated tip's height.
    pub height: i64,
    /// The best known header's height.
    pub headers: i64,
}

/// The rule on its own: behind the best header, or a tip older than [`MAX_TIP_AGE_SECS`] at
/// `now` (seconds since 1970), which on regtest counts only at genesis.
pub fn in_initial_download(
    network: Network,
    tip_height: i64,
    tip_time: i64,
    best_header: i64,
    now: i64,
) -> bool {
    let old = now.saturating_sub(tip_time) > MAX_TIP_AGE_SECS;
    tip_height < best_header || (old && (network != Network::Regtest || tip_height == 0))
}

impl Validator {
    /// Whether the initial download ended (latched by [`Validator::initial_download`]): asks
    /// nothing of the kernel.
    pub fn caught_up(&self) -> bool {
        self.caught_up.load(Ordering::SeqCst)
    }

    /// `Some` (with the heights) while the node is in its initial download; `None` once it has
    /// caught up, and from then on.
    pub fn initial_download(&self) -> Option<SyncProgress> {
        if self.caught_up.load(Ordering::SeqCst) {
            return None;
        }
        let tip = self.tip();
        let best = self.best_header();
        let tip_time = self.header(&tip.hash).map_or(0, |h| i64::from(h.time));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        if in_initial_download(self.network, tip.height, tip_time, best.height, now) {
            return Some(SyncProgress {
                height: tip.height,
                headers: best.height.max(tip.height),
            });
        }
        if !self.caught_up.swap(true, Ordering::SeqCst) {
            tracing::info!(
                "initial download done at height {}: serving clients",
                tip.height
            );
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_rule() {
        let now = 1_800_000_000;
        // Behind the best header: syncing, on every network.
        assert!(in_initial_download(Network::Regtest, 5, now, 6, now));
        assert!(in_initial_download(Network::Mainnet, 5, now, 6, now));
        // A tip 25 hours old: syncing, except on regtest.
        let old = now - 25 * 3600;
        assert!(in_initial_download(Network::Mainnet, 6, old, 6, now));
        assert!(in_initial_download(Network::Signet, 6, old, 6, now));
        assert!(!in_initial_download(Network::Regtest, 6, old, 6, now));
        // Except a regtest node that has no block yet.
        assert!(in_initial_download(Network::Regtest, 0, old, 0, now));
        // Recent and at the best header: caught up.
        assert!(!in_initial_download(
            Network::Mainnet,
            6,
            now - 3600,
            6,
            now
        ));
        // Genesis of a fresh mainnet data dir: 2009.
        assert!(in_initial_download(
            Network::Mainnet,
            0,
            1_231_006_505,
            0,
            now
        ));
    }
}

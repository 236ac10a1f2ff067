//! What every server's listener shares: accepting the next client without spinning when accept
//! fails (out of file descriptors, say), which would starve every other task; the count of
//! connections each host holds ([`HostTable`]) and what their requests cost ([`Account`],
//! [`Verdict`]); the log lines they may cause ([`log_limit`]); writes that fail once they stall
//! ([`WriteDeadline`]); the pool their query work runs in ([`WorkPool`]); and the answers to
//! checks of transactions kept for repeats ([`VerdictCache`]).

pub mod cost;
mod groups;
mod hosts;
pub mod log_limit;
mod seats;
mod shares;
mod stall;
mod verdicts;
mod work;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

pub use cost::{broadcast_checks, Account, Accounts, Charged, Verdict};
pub use groups::{Seat, SilentFull, SilentLimits};
pub use hosts::{HostGuard, HostTable, Refused};
pub use log_limit::{sanitized, LimitedLine};
pub use shares::{GroupKey, GroupShares, HostShares};
pub use stall::WriteDeadline;
pub use verdicts::{Verdict as KeptVerdict, VerdictCache, VerdictKey};
pub use work::{
    Refused as WorkRefused, Slot, StreamPlace, WorkPool, QUICK_SCAN_BLOCKS, QUICK_SCAN_MEMPOOL,
    STREAMS,
};

/// How long to wait after a failed accept before trying again.
const AFTER_FAILURE: Duration = Duration::from_millis(100);

/// The next client of `listener`; a failure is logged (naming `what` listens) and retried after
/// a pause.
pub async fn accept(listener: &TcpListener, what: &str) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => {
                crate::outsider_log!(warn, "accepting a {what} client failed: {e}");
                tokio::time::sleep(AFTER_FAILURE).await;
            }
        }
    }
}

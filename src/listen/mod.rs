//! Accepting connections, shared by every server's listener: the next client without spinning
//! when accept fails (out of file descriptors, say), which would starve every other task; the
//! places each host, group (IPv4 /24, IPv6 /48, every exempt connection together) and the
//! server hold, and whose connection gives its place to a newcomer ([`HostTable`], [`Seat`]);
//! the log lines clients may cause ([`log_limit`]); and writes that fail once they stall
//! ([`WriteDeadline`]). What the connections' work costs and where it runs is `work`'s.

mod groups;
mod hosts;
pub mod log_limit;
pub mod proxy;
mod seats;
mod stall;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

pub use groups::{Seat, SilentFull, SilentLimits};
pub use hosts::{HostGuard, HostTable, Refused};
pub use log_limit::{sanitized, LimitedLine};
pub use stall::WriteDeadline;

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

//! What the servers' clients spend and where their work runs: each request's cost in units,
//! charged to its host's account inside its group's and the server's ([`Account`],
//! [`Accounts`], [`Verdict`]); the shares one host and one group (IPv4 /24, IPv6 /48, every
//! exempt connection together) hold of the server ([`HostShares`], [`GroupShares`]); the pool
//! their query work runs in, the history streams and the silent-payment scans ([`WorkPool`]);
//! and the verdicts of transaction checks kept for repeats ([`VerdictCache`]). Accepting the
//! connections that spend it is `listen`'s.

pub mod cost;
mod pool;
mod shares;
mod verdicts;

pub use cost::{broadcast_checks, Account, Accounts, Charged, Verdict};
pub use pool::{
    InlineCounts, Refused as WorkRefused, Slot, StreamPlace, WorkPool, INLINE_ROWS,
    QUICK_SCAN_BLOCKS, QUICK_SCAN_MEMPOOL, STREAMS,
};
pub use shares::{GroupKey, GroupShares, HostShares};
pub use verdicts::{Verdict as KeptVerdict, VerdictCache, VerdictKey};

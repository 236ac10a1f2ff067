//! What the connections of one host, and of one group, hold together ([`HostShares`],
//! [`GroupShares`]), and their share of the query pool ([`HostWork`]): plain counts that the
//! host table, the seats and the pool all read.

use std::net::IpAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};

use tokio::sync::Semaphore;

use super::cost::{Account, Accounts};
use crate::types::Subnet;

/// The group of a host: its IPv4 /24 or IPv6 /48 (ElectrumX's session groups), or, for every
/// exempt connection (127.0.0.1, where a Tor onion service's clients arrive), one group of
/// them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupKey {
    /// The hosts of one subnet.
    Subnet(Subnet),
    /// Every exempt connection.
    Exempt,
}

impl GroupKey {
    /// The group of a host at `ip`, not exempt.
    pub fn of(ip: IpAddr) -> GroupKey {
        match ip.to_canonical() {
            IpAddr::V4(_) => GroupKey::Subnet(Subnet::around(ip, 24)),
            IpAddr::V6(_) => GroupKey::Subnet(Subnet::around(ip, 48)),
        }
    }
}

/// What every connection of one group holds together.
#[derive(Debug, Default)]
pub struct GroupShares {
    /// Its key; `None` for a connection counted in no table (a session without a socket, a
    /// test), whose group is its own.
    pub key: Option<GroupKey>,
    /// What its hosts' requests cost together ([`super::cost::Accounts`]); kept by its table
    /// when the group's last connection ends.
    pub cost: Arc<Account>,
    /// Its silent-payment subscriptions.
    pub silent_subscriptions: AtomicUsize,
    /// Its share of the query work pool (found by `key` on its first job).
    pub work: OnceLock<Arc<HostWork>>,
}

impl GroupShares {
    /// Whether this is the group of every exempt connection.
    pub fn is_exempt(&self) -> bool {
        self.key == Some(GroupKey::Exempt)
    }
}

/// What all the connections of one host hold together, counted against its shares.
#[derive(Debug, Default)]
pub struct HostShares {
    /// Bytes of answers queued for it (the Electrum answer budget).
    pub bytes: AtomicUsize,
    /// Its Electrum subscriptions.
    pub subscriptions: AtomicUsize,
    /// Its silent-payment subscriptions (Frigate's remote scanner).
    pub silent_subscriptions: AtomicUsize,
    /// What its requests cost, decaying ([`super::cost`]), and its group's; kept by its table
    /// when the host leaves.
    pub cost: Accounts,
    /// The host's key (its IPv4 address or IPv6 /64); `None` for an exempt host, whose
    /// connections each have their own shares.
    pub key: Option<Subnet>,
    /// What its group holds.
    pub group: Arc<GroupShares>,
    /// Its share of the query work pool (the pool's, found by `key` on the host's first job,
    /// so that every server's connections of the host share it).
    pub work: OnceLock<Arc<HostWork>>,
}

/// One host's (or one group's) share of the pool: its jobs, its streamed histories and its
/// scans at once.
#[derive(Debug)]
pub struct HostWork {
    pub(super) jobs: Arc<Semaphore>,
    pub(super) streams: Arc<Semaphore>,
    pub(super) scans: Arc<Semaphore>,
    pub(super) quick_scans: Arc<Semaphore>,
}

impl HostWork {
    /// A share of `jobs` jobs, `streams` streamed histories and `scans` long and short scans.
    pub(super) fn new(jobs: usize, streams: usize, scans: [usize; 2]) -> Self {
        HostWork {
            jobs: Arc::new(Semaphore::new(jobs)),
            streams: Arc::new(Semaphore::new(streams)),
            scans: Arc::new(Semaphore::new(scans[0])),
            quick_scans: Arc::new(Semaphore::new(scans[1])),
        }
    }
}

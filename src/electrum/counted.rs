//! What a session counts against besides its own state: room in the answer budget
//! ([`Room`]), its host's and the server's subscription counts ([`SubscriptionShares`]), and
//! what its requests read until they are charged to its host ([`Spent`]); and the errors for
//! running out of each.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::rpc::{RpcError, EXCESSIVE_RESOURCE_USAGE};
use crate::listen::{Seat, SilentFull, SilentLimits};
use crate::work::HostShares;

/// Room in the answer budget for what a session builds: its bytes are asked before an answer
/// is built when they are known ([`Request::answer_bytes`]), and once it is built otherwise, so
/// that what waits for clients never passes the budget. Asking never waits (the session builds
/// on a blocking thread, and must not sit there holding part of the budget).
pub(crate) trait Room {
    /// Holds `n` more bytes for the answer being built.
    fn take(&mut self, n: usize) -> Taken;
    /// The most one answer may hold.
    fn most(&self) -> usize;
    /// The bytes held so far.
    fn held(&self) -> usize;
}

/// What asking the budget for room gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// The bytes are held.
    Yes,
    /// The client, or its host, would hold more than its share: the session ends.
    OverShare,
    /// The budget is full for now (other clients' answers wait): this answer is an error.
    Busy,
}

/// The answer to a request of a host whose cost is at the hard limit (aiorpcX's).
pub(crate) fn excessive() -> RpcError {
    RpcError::new(EXCESSIVE_RESOURCE_USAGE, "excessive resource usage")
}

/// The answer to a call the budget had no room for yet.
pub(super) fn busy() -> RpcError {
    RpcError::bad_request("server busy: no room in its answer budget now; try again")
}

/// No budget: a session without a socket (the request fuzzer's).
pub(crate) struct NoBudget;

impl Room for NoBudget {
    fn take(&mut self, _: usize) -> Taken {
        Taken::Yes
    }

    fn most(&self) -> usize {
        usize::MAX
    }

    fn held(&self) -> usize {
        0
    }
}

/// What a session's subscriptions count against besides its own limit: its host's
/// (`electrum_max_subscriptions_per_ip`, Fulcrum's `max_subs_per_ip`) and the server's
/// (`electrum_max_subscriptions_total`, Fulcrum's `max_subs`); its silent-payment ones apart,
/// counted with its seat ([`Seat::hold_silent`]) against [`SILENT_PER_HOST`],
/// [`SILENT_PER_GROUP`] (or [`SILENT_EXEMPT`]) and [`SILENT_TOTAL`]. Given back when the
/// session ends.
pub(crate) struct SubscriptionShares {
    pub(super) host: Arc<HostShares>,
    pub(super) total: Arc<AtomicUsize>,
    /// The connection's seat, which counts its silent-payment subscriptions.
    seat: Arc<Seat>,
    /// What this session has added to its host's and the server's counts.
    held: usize,
}

/// Silent-payment subscriptions one host's connections may hold together: two connections'
/// worth of Frigate's limit. Each is scanned again for every new block and mempool transaction.
pub const SILENT_PER_HOST: usize = 2 * super::frigate_scan::MAX_SUBSCRIPTIONS;
/// Silent-payment subscriptions the hosts of one subnet (IPv4 /24, IPv6 /48) may hold
/// together: two hosts' worth, a tenth of the server's.
pub const SILENT_PER_GROUP: usize = 2 * SILENT_PER_HOST;
/// Silent-payment subscriptions every exempt connection (127.0.0.1, where a Tor onion service's
/// clients arrive) may hold together: a quarter of the server's. Past it, the exempt connection
/// holding the most gives its seat up for one holding fewer; they lose none to other groups
/// below half of it.
pub const SILENT_EXEMPT: usize = SILENT_TOTAL / 4;
/// Silent-payment subscriptions the server holds over every connection. Each new mainnet block
/// has some 640 eligible transactions (153.7 million from Taproot's activation to height
/// 950,000, as Frigate counts them), so the follow-up scans of 2,000 subscriptions are about
/// 1.3 million a block, some 66 s of one core here at the 52 µs each measured
/// (`contrib/bench/sp-block-cpu.sh`): a ninth of one core at a block each ten minutes. When they are all held, the group holding the most gives a connection's up for a
/// newcomer of a group holding fewer.
pub const SILENT_TOTAL: usize = 2_000;

/// Every limit of silent-payment subscriptions above; the exempt connections lose none of
/// theirs to other groups below half their share.
const SILENT_LIMITS: SilentLimits = SilentLimits {
    per_host: SILENT_PER_HOST,
    per_group: SILENT_PER_GROUP,
    exempt: SILENT_EXEMPT,
    total: SILENT_TOTAL,
    exempt_floor: SILENT_EXEMPT / 2,
};

impl SubscriptionShares {
    /// Counting against the host of `seat`, `total`, and (silent-payment ones) the seat.
    pub(crate) fn new(seat: Arc<Seat>, total: Arc<AtomicUsize>) -> Self {
        SubscriptionShares {
            host: seat.host.clone(),
            total,
            seat,
            held: 0,
        }
    }

    /// The session now holds `now` subscriptions.
    pub(super) fn hold(&mut self, now: usize) {
        for count in [&self.host.subscriptions, &*self.total] {
            match now >= self.held {
                true => count.fetch_add(now - self.held, Ordering::SeqCst),
                false => count.fetch_sub(self.held - now, Ordering::SeqCst),
            };
        }
        self.held = now;
        self.seat.set_subscribed(now + self.seat.silent() > 0);
    }

    /// The session now holds `now` silent-payment subscriptions.
    pub(super) fn hold_silent(&mut self, now: usize) {
        self.seat.hold_silent(now);
        self.seat.set_subscribed(now + self.held > 0);
    }

    /// Refuses one more silent-payment subscription when the host or its group holds its
    /// limit, or the server does, unless a connection holding more gives its seat up: within
    /// the exempt connections, the one holding the most; over the server, one of the group
    /// holding the most (the exempt connections' only while they hold more than half their
    /// share).
    /// The one it takes is counted at once, every limit checked and counted together, so
    /// that many connections asking at once never pass one.
    pub(super) fn silent_room(&self) -> Result<(), RpcError> {
        self.seat
            .reserve_silent(&SILENT_LIMITS)
            .map_err(|limit| match limit {
                SilentFull::Host => full(SILENT_PER_HOST, "from this address"),
                SilentFull::Group => full(SILENT_PER_GROUP, "from this network"),
                SilentFull::Exempt => full(SILENT_EXEMPT, "from exempt addresses"),
                SilentFull::Total => full(SILENT_TOTAL, "on this server"),
            })
    }
}

/// The refusal of a silent-payment subscription past `limit` (`of` says whose).
fn full(limit: usize, of: &str) -> RpcError {
    RpcError::invalid_params(format!("at most {limit} silent-payment subscriptions {of}"))
}

impl Drop for SubscriptionShares {
    fn drop(&mut self) {
        self.hold(0);
        self.hold_silent(0);
    }
}

/// What a session's requests and notifications read since it was last charged for them.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Spent {
    /// Requests answered (or ignored: a notification costs its parse).
    pub requests: usize,
    /// What their views read.
    pub read: crate::view::Cost,
}

//! One connection's seat in its server's table ([`Seat`]): what it holds, and how it ends when a
//! full server takes it back (as Core's inbound eviction takes the youngest of the largest
//! network group, `SelectNodeToEvict`); and which seat of a group goes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use tokio::task::AbortHandle;

use crate::work::HostShares;

/// Where a seat reserves one more silent-payment subscription: its table
/// (`super::HostTable`), which checks every limit and counts the reservation in one step under
/// its lock (so that many asking at once never pass a limit together), and can take another
/// seat back for it.
pub trait SilentRoom: Send + Sync {
    /// Counts one more of `asker`'s if it fits `limits`, taking a seat back where a limit
    /// allows; else says which limit it met.
    fn reserve_silent(&self, asker: &Seat, limits: &SilentLimits) -> Result<(), SilentFull>;
}

/// The silent-payment subscriptions connections may hold together.
#[derive(Debug, Clone, Copy)]
pub struct SilentLimits {
    /// One host's connections (an exempt connection alone).
    pub per_host: usize,
    /// One group's hosts, not exempt: past it, refused.
    pub per_group: usize,
    /// Every exempt connection: past it, the one holding the most gives its seat up for one
    /// holding fewer.
    pub exempt: usize,
    /// Every connection: past it, a connection of the group holding the most gives its seat
    /// up for a newcomer of a group holding fewer (the exempt group only while it holds more
    /// than `exempt_floor`).
    pub total: usize,
    /// What the exempt connections keep of the total whoever asks.
    pub exempt_floor: usize,
}

/// The limit a silent-payment subscription met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SilentFull {
    /// Its host's.
    Host,
    /// Its group's.
    Group,
    /// Every exempt connection's.
    Exempt,
    /// The server's.
    Total,
}

/// One connection's seat in its server's table: what it holds, for choosing which
/// connection gives its seat up, and how to end it.
#[derive(Debug)]
pub struct Seat {
    /// Its number in its table: a younger seat has a larger one.
    pub(super) id: u64,
    /// What it shares with every connection of its host (its own, for an exempt connection).
    pub host: Arc<HostShares>,
    /// Its silent-payment subscriptions (moved with the counts it adds to under this lock, so
    /// that an eviction and the session's own change never interleave).
    silent: Mutex<usize>,
    /// Whether it holds a subscription (a wallet's mark: it protects the seat from eviction).
    subscribed: AtomicBool,
    /// Ends its task (set once the task is spawned).
    task: OnceLock<AbortHandle>,
    /// Whether it was evicted (its task ends as soon as it is known).
    pub(super) evicted: AtomicBool,
    /// The table it is seated in (none for a detached seat).
    table: Option<Weak<dyn SilentRoom>>,
    /// Its table's count of silent-payment subscriptions (its own, for a detached seat).
    silent_total: Arc<AtomicUsize>,
}

impl Seat {
    /// A seat of `host` in `table`, numbered `id`, its silent-payment subscriptions counted in
    /// `silent_total`.
    pub(super) fn new(
        id: u64,
        host: Arc<HostShares>,
        table: Option<Weak<dyn SilentRoom>>,
        silent_total: Arc<AtomicUsize>,
    ) -> Self {
        Seat {
            id,
            host,
            silent: Mutex::new(0),
            subscribed: AtomicBool::new(false),
            task: OnceLock::new(),
            evicted: AtomicBool::new(false),
            table,
            silent_total,
        }
    }

    /// A seat in no table (a session without a socket, a test): its host and group are its own.
    pub fn detached() -> Arc<Seat> {
        Arc::new(Seat::new(0, Arc::default(), None, Arc::default()))
    }

    /// Notes the task serving the connection, which an eviction ends (at once if the seat was
    /// taken back already).
    pub fn running(&self, task: AbortHandle) {
        let task = self.task.get_or_init(|| task);
        if self.evicted.load(Ordering::SeqCst) {
            task.abort();
        }
    }

    /// Notes whether the connection holds a subscription now.
    pub fn set_subscribed(&self, yes: bool) {
        self.subscribed.store(yes, Ordering::SeqCst);
    }

    /// Ends the connection: its seat was taken back.
    pub(super) fn evict(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }

    fn lock_silent(&self) -> std::sync::MutexGuard<'_, usize> {
        self.silent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Its silent-payment subscriptions.
    pub fn silent(&self) -> usize {
        *self.lock_silent()
    }

    /// The connection now holds `now` silent-payment subscriptions: its host's, its group's
    /// and its table's counts move with it.
    pub fn hold_silent(&self, now: usize) {
        let mut held = self.lock_silent();
        self.shift_silent(*held, now);
        *held = now;
    }

    /// Gives every silent-payment subscription of the connection up from the counts (it is
    /// being evicted for them).
    pub(super) fn release_silent(&self) {
        self.hold_silent(0);
    }

    /// Reserves one more silent-payment subscription of this connection under `limits` (its
    /// table's rules, [`SilentRoom`]), counted at once; the session sets its exact count after
    /// ([`Seat::hold_silent`]). For a seat in no table, only its host's limit holds.
    pub fn reserve_silent(&self, limits: &SilentLimits) -> Result<(), SilentFull> {
        match self.table.as_ref().and_then(Weak::upgrade) {
            Some(table) => table.reserve_silent(self, limits),
            None if self.host.silent_subscriptions.load(Ordering::SeqCst) >= limits.per_host => {
                Err(SilentFull::Host)
            }
            None => {
                self.hold_silent(self.silent() + 1);
                Ok(())
            }
        }
    }

    fn shift_silent(&self, before: usize, now: usize) {
        let counts = [
            &self.host.silent_subscriptions,
            &self.host.group.silent_subscriptions,
            &*self.silent_total,
        ];
        for count in counts {
            match now >= before {
                true => count.fetch_add(now - before, Ordering::SeqCst),
                false => count.fetch_sub(before - now, Ordering::SeqCst),
            };
        }
    }
}

/// The seat of `seats` to give up, as Core's `SelectNodeToEvict` chooses: the oldest
/// connections holding a subscription (a wallet's, as Core protects peers that relayed blocks
/// and transactions), half of the seats at most, then the longest-connected half of the rest
/// are protected; the youngest of the others goes. So a flood of new connections evicts its
/// own while wallets and the long-lived stay, and subscribing on every connection protects no
/// more than half of them. `None` only for no seats.
pub(super) fn victim_among<'a>(seats: impl Iterator<Item = &'a Arc<Seat>>) -> Option<Arc<Seat>> {
    let mut all: Vec<&Arc<Seat>> = seats.collect();
    all.sort_by_key(|s| s.id);
    let mut wallets = all.len() / 2;
    let mut rest: Vec<&Arc<Seat>> = Vec::with_capacity(all.len());
    for seat in all {
        if wallets > 0 && seat.subscribed.load(Ordering::SeqCst) {
            wallets -= 1;
        } else {
            rest.push(seat);
        }
    }
    let protected = rest.len() / 2;
    rest.get(protected..)?.last().map(|s| (*s).clone())
}

/// The seat of `seats` holding the most silent-payment subscriptions (ties to the younger).
pub(super) fn richest<'a>(seats: impl Iterator<Item = &'a Arc<Seat>>) -> Option<Arc<Seat>> {
    seats
        .map(|s| (s.silent(), s))
        .filter(|(n, _)| *n > 0)
        .max_by_key(|(n, s)| (*n, s.id))
        .map(|(_, s)| s.clone())
}

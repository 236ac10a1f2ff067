//! The groups hosts belong to, and the connections they hold: what a whole subnet shares
//! ([`GroupShares`]), and one connection's seat ([`Seat`]), which a full server can take back
//! from the group holding the most (as Core's inbound eviction picks from the largest network
//! group, `SelectNodeToEvict`).

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Instant;

use tokio::task::AbortHandle;

use super::cost::Account;
use super::hosts::{HostShares, HostTable};
use super::work::HostWork;
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

/// One connection's seat in its server's [`HostTable`]: what it does, for choosing which
/// connection gives its seat up, and how to end it.
#[derive(Debug)]
pub struct Seat {
    /// Its number in its table.
    pub(super) id: u64,
    /// What it shares with every connection of its host (its own, for an exempt connection).
    pub host: Arc<HostShares>,
    /// When it last sent a request (or connected).
    last_request: Mutex<Instant>,
    /// Its silent-payment subscriptions.
    silent: AtomicUsize,
    /// Ends its task (set once the task is spawned).
    task: OnceLock<AbortHandle>,
    /// Whether it was evicted (its task ends as soon as it is known).
    pub(super) evicted: AtomicBool,
    /// The table it is seated in (none for a detached seat).
    pub(super) table: Weak<HostTable>,
}

impl Seat {
    /// A seat of `host` in `table`, numbered `id`.
    pub(super) fn new(id: u64, host: Arc<HostShares>, table: Weak<HostTable>) -> Self {
        Seat {
            id,
            host,
            last_request: Mutex::new(Instant::now()),
            silent: AtomicUsize::new(0),
            task: OnceLock::new(),
            evicted: AtomicBool::new(false),
            table,
        }
    }

    /// A seat in no table (a session without a socket, a test): its host and group are its own.
    pub fn detached() -> Arc<Seat> {
        Arc::new(Seat::new(0, Arc::default(), Weak::new()))
    }

    /// Notes that the connection sent a request now (an idle connection gives its seat up
    /// first).
    pub fn requested(&self) {
        *self.lock_last() = Instant::now();
    }

    /// Notes the task serving the connection, which an eviction ends (at once if the seat was
    /// taken back already).
    pub fn running(&self, task: AbortHandle) {
        let task = self.task.get_or_init(|| task);
        if self.evicted.load(Ordering::SeqCst) {
            task.abort();
        }
    }

    /// Ends the connection: its seat was taken back.
    pub(super) fn evict(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }

    /// How long since its last request.
    pub(super) fn idle_since(&self) -> Instant {
        *self.lock_last()
    }

    fn lock_last(&self) -> std::sync::MutexGuard<'_, Instant> {
        self.last_request
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Its silent-payment subscriptions.
    pub fn silent(&self) -> usize {
        self.silent.load(Ordering::SeqCst)
    }

    /// The connection now holds `now` silent-payment subscriptions: its host's, its group's
    /// and its table's counts move with it.
    pub fn hold_silent(&self, now: usize) {
        let before = self.silent.swap(now, Ordering::SeqCst);
        self.shift_silent(before, now);
    }

    /// Whether the table has room for one more silent-payment subscription of this
    /// connection's under `limit` in all, taking a seat back from the group holding the most
    /// if it has not (always, for a seat in no table).
    pub fn table_room(&self, limit: usize) -> bool {
        let Some(table) = self.table.upgrade() else {
            return true;
        };
        table.silent_total() < limit || table.evict_for_silent(self)
    }

    /// Gives every silent-payment subscription of the connection up from the counts (it is
    /// being evicted for them).
    pub(super) fn release_silent(&self) -> usize {
        let before = self.silent.swap(0, Ordering::SeqCst);
        self.shift_silent(before, 0);
        before
    }

    fn shift_silent(&self, before: usize, now: usize) {
        let table = self.table.upgrade();
        let counts = [
            Some(&self.host.silent_subscriptions),
            Some(&self.host.group.silent_subscriptions),
            table.as_ref().map(|t| &t.silent_total),
        ];
        for count in counts.into_iter().flatten() {
            match now >= before {
                true => count.fetch_add(now - before, Ordering::SeqCst),
                false => count.fetch_sub(before - now, Ordering::SeqCst),
            };
        }
    }
}

/// The key a seat's host counts under (`None`: exempt, a host of its own).
fn host_of(seat: &Seat) -> Option<Subnet> {
    seat.host.key
}

/// The seat to take back for a newcomer of `new_group` (and `new_host`, `None` when exempt)
/// when the server is full: from the group with the most seats (the newcomer counted in its
/// own; ties go to the newcomer's, so that equals do not push each other out), its host with
/// the most, that host's longest idle seat. `None` when the newcomer's own host would be the
/// one to give way: a group that holds the most cannot take one more by evicting itself,
/// except an exempt newcomer, who evicts the longest idle exempt connection (every Tor client
/// is one host, as in Core, where the youngest of the largest group goes).
pub(super) fn victim(
    seats: &[Arc<Seat>],
    new_group: GroupKey,
    new_host: Option<Subnet>,
) -> Option<Arc<Seat>> {
    let group_of = |s: &Arc<Seat>| s.host.group.key;
    let top_group = busiest(seats.iter().map(group_of), Some(new_group))?;
    let in_group: Vec<&Arc<Seat>> = seats
        .iter()
        .filter(|s| group_of(s) == Some(top_group))
        .collect();
    if top_group == GroupKey::Exempt {
        return longest_idle(in_group.iter().copied());
    }
    let newcomer_here = (top_group == new_group).then_some(new_host).flatten();
    let top_host = busiest(in_group.iter().map(|s| host_of(s)), newcomer_here)?;
    if new_group == top_group && Some(top_host) == new_host {
        return None;
    }
    longest_idle(
        in_group
            .into_iter()
            .filter(|s| host_of(s) == Some(top_host)),
    )
}

/// The key counted most often among `keys` and `newcomer` (ties to the newcomer's).
fn busiest<K: Copy + Eq + std::hash::Hash>(
    keys: impl Iterator<Item = Option<K>>,
    newcomer: Option<K>,
) -> Option<K> {
    let mut counts: std::collections::HashMap<K, usize> = std::collections::HashMap::new();
    for key in keys.chain(std::iter::once(newcomer)).flatten() {
        *counts.entry(key).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(k, n)| (*n, Some(*k) == newcomer))
        .map(|(k, _)| k)
}

/// The seat idle the longest (ties to the younger).
pub(super) fn longest_idle<'a>(seats: impl Iterator<Item = &'a Arc<Seat>>) -> Option<Arc<Seat>> {
    seats
        .min_by_key(|s| (s.idle_since(), std::cmp::Reverse(s.id)))
        .cloned()
}

/// The seat to take back for a silent-payment subscription of `asker`'s when the server holds
/// all it takes: from the group holding the most, if it holds more than the asker's would with
/// one more, its connection holding the most (ties to the longest idle).
pub(super) fn silent_victim(seats: &[Arc<Seat>], asker: &Seat) -> Option<Arc<Seat>> {
    let mine = asker.host.group.silent_subscriptions.load(Ordering::SeqCst);
    let top = seats
        .iter()
        .filter(|s| s.silent() > 0)
        .map(|s| &s.host.group)
        .max_by_key(|g| g.silent_subscriptions.load(Ordering::SeqCst))?;
    if top.silent_subscriptions.load(Ordering::SeqCst) <= mine + 1 {
        return None;
    }
    seats
        .iter()
        .filter(|s| Arc::ptr_eq(&s.host.group, top) && s.silent() > 0)
        .min_by_key(|s| (std::cmp::Reverse(s.silent()), s.idle_since()))
        .cloned()
}

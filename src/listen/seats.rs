//! What a [`super::HostTable`] holds now: the connections of each host and group, and every
//! seat; and which seat a full table takes back, chosen from the counts it keeps (a look at the
//! seats only once a group and a host are chosen).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::groups::{self, Seat};
use crate::types::Subnet;
use crate::work::{GroupKey, GroupShares, HostShares};

/// What a table holds now.
#[derive(Default)]
pub(super) struct Live {
    pub hosts: HashMap<Subnet, Held<HostShares>>,
    pub groups: HashMap<GroupKey, Held<GroupShares>>,
    pub seats: HashMap<u64, Arc<Seat>>,
}

/// A host or group with connections, and what they share.
pub(super) struct Held<T> {
    pub conns: usize,
    pub shared: Arc<T>,
}

/// One connection of `key` fewer in `table`; what it held when that was its last.
pub(super) fn leave<K: Eq + Hash, T>(table: &mut HashMap<K, Held<T>>, key: K) -> Option<Arc<T>> {
    let held = table.get_mut(&key)?;
    held.conns = held.conns.saturating_sub(1);
    match held.conns {
        0 => table.remove(&key).map(|h| h.shared),
        _ => None,
    }
}

impl Live {
    /// Connections of group `key`.
    pub fn group_conns(&self, key: &GroupKey) -> usize {
        self.groups.get(key).map_or(0, |h| h.conns)
    }

    /// The seat to take back for a newcomer of `new_group` (and `new_host`, `None` when exempt)
    /// when the table is full: from the group with the most connections (the newcomer counted
    /// in its own; ties go to the newcomer's, so that equals do not push each other out; the
    /// exempt connections' group only while it holds more than `exempt_floor`), its host with
    /// the most, that host's youngest unprotected ([`groups::victim_among`]). Every exempt
    /// connection is a host of one group. `None` when the newcomer's own host would be the one
    /// to give way (a host that holds the most cannot take one more by evicting itself).
    pub fn victim(
        &self,
        new_group: GroupKey,
        new_host: Option<Subnet>,
        exempt_floor: usize,
    ) -> Option<Arc<Seat>> {
        let count = |g: &GroupKey| self.group_conns(g) + usize::from(*g == new_group);
        let top = self
            .groups
            .keys()
            .chain(std::iter::once(&new_group))
            .filter(|g| **g != GroupKey::Exempt || count(g) > exempt_floor)
            .max_by_key(|g| (count(g), **g == new_group))
            .copied()?;
        let in_group = |s: &&Arc<Seat>| s.host.group.key == Some(top);
        if top == GroupKey::Exempt {
            return groups::victim_among(self.seats.values().filter(in_group));
        }
        let newcomer_here = new_host.filter(|_| top == new_group);
        let hosts_count = |h: &Subnet| {
            self.hosts.get(h).map_or(0, |x| x.conns) + usize::from(Some(*h) == newcomer_here)
        };
        let top_host = self
            .hosts
            .iter()
            .filter(|(_, h)| h.shared.group.key == Some(top))
            .map(|(k, _)| k)
            .chain(newcomer_here.as_ref())
            .max_by_key(|h| (hosts_count(h), Some(**h) == newcomer_here))
            .copied()?;
        if Some(top_host) == newcomer_here {
            return None;
        }
        groups::victim_among(self.seats.values().filter(|s| s.host.key == Some(top_host)))
    }

    /// The seat to take back for one more silent-payment subscription of `asker`'s: from the
    /// group holding the most (the exempt connections' only while they hold more than
    /// `exempt_floor`), if it holds more than the asker's would with one more, its connection
    /// holding the most.
    pub fn silent_victim(&self, asker: &Seat, exempt_floor: usize) -> Option<Arc<Seat>> {
        let held = |g: &GroupShares| g.silent_subscriptions.load(Ordering::SeqCst);
        let mine = held(&asker.host.group);
        let top = self
            .groups
            .values()
            .map(|g| &g.shared)
            .filter(|g| !g.is_exempt() || held(g) > exempt_floor)
            .max_by_key(|g| held(g))?;
        if held(top) <= mine + 1 {
            return None;
        }
        groups::richest(
            self.seats
                .values()
                .filter(|s| Arc::ptr_eq(&s.host.group, top)),
        )
    }

    /// The exempt connection to take back for one more silent-payment subscription of the
    /// exempt `asker`'s: the one holding the most, if it holds more than the asker would with
    /// one more.
    pub fn exempt_silent_victim(&self, asker: &Seat) -> Option<Arc<Seat>> {
        let mine = asker.silent();
        let richest = groups::richest(
            self.seats
                .values()
                .filter(|s| s.host.group.is_exempt() && s.id != asker.id),
        )?;
        (richest.silent() > mine + 1).then_some(richest)
    }
}

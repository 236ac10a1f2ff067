//! The scan threads' turns. A scan's arithmetic runs in batches of [`BATCH`] transactions, a
//! few batches at a time (one per four scan threads, at least one) each spread over the scan
//! threads, and the next batch goes to the waiting scan whose group (IPv4 /24, IPv6 /48, every
//! exempt connection together) has used the scan threads least lately: an account of seconds
//! that drains at [`FORGET_PER_SEC`] and holds [`MOST_USED`] at most. So a subnet that has been
//! scanning for a while gives way to a newcomer's scan batch by batch, however many scans it
//! queues, as fair queueing by recent use gives a newcomer the link; a newcomer runs ahead of
//! it for [`MOST_USED`] of use at most; and two groups scanning for as long share the threads
//! evenly.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use crate::work::{Account, GroupKey};

/// Transactions a turn scans: about 15 ms of one core, so a newcomer waits that long at most
/// for a turn another group holds.
pub(super) const BATCH: usize = 256;

/// Seconds of use a group's account forgets a second: a group that scanned for half a minute
/// ranks behind a newcomer for five more.
const FORGET_PER_SEC: f64 = 0.1;
/// Seconds of use a group's account holds at most: however long a group has scanned, a
/// newcomer runs ahead of it for this much of its own use, then they take turns.
const MOST_USED: f64 = 30.0;

/// Groups whose use is kept at most; the least used is forgotten first past it.
const KEPT: usize = 1_024;

/// Which scans' batches run next on the scan threads.
pub(super) struct ScanTurns {
    /// Batches that may run at once.
    slots: usize,
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Default)]
struct State {
    /// Batches running now.
    running: usize,
    next_ticket: u64,
    /// The batches waiting, by ticket (the order they came in), with their group.
    waiting: Vec<(u64, Option<GroupKey>)>,
    /// Each group's use of the scan threads lately, in seconds.
    used: HashMap<Option<GroupKey>, Account>,
}

impl State {
    /// A group's use now.
    fn used(&self, group: &Option<GroupKey>) -> f64 {
        self.used
            .get(group)
            .map_or(0.0, |used| used.level(FORGET_PER_SEC))
    }

    /// The waiting batch to run next: of the group that used the threads least, the oldest.
    fn next(&self) -> Option<u64> {
        self.waiting
            .iter()
            .map(|(ticket, group)| (self.used(group), *ticket))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map(|(_, ticket)| ticket)
    }

    /// Counts `seconds` more of `group`'s use (up to [`MOST_USED`]), forgetting the least used
    /// past [`KEPT`].
    fn charge(&mut self, group: Option<GroupKey>, seconds: f64) {
        let used = self.used.entry(group).or_default();
        let room = (MOST_USED - used.level(FORGET_PER_SEC)).max(0.0);
        used.charge(seconds.min(room), FORGET_PER_SEC);
        if self.used.len() > KEPT {
            self.used.retain(|_, used| used.level(FORGET_PER_SEC) > 0.0);
        }
        while self.used.len() > KEPT {
            let least = self
                .used
                .iter()
                .map(|(group, used)| (*group, used.level(FORGET_PER_SEC)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(group, _)| group);
            match least {
                Some(group) => self.used.remove(&group),
                None => break,
            };
        }
    }
}

impl ScanTurns {
    /// Turns for `threads` scan threads: a batch at a time per four of them, at least one.
    pub(super) fn new(threads: usize) -> Self {
        ScanTurns {
            slots: (threads / 4).max(1),
            state: Mutex::default(),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `batch` (a scan's arithmetic for `group`) in its turn: once a slot is free and it is
    /// the one [`State::next`] picks; its time is then charged to its group. Blocks the calling
    /// thread meanwhile (a scan's blocking thread, one per scan place).
    pub(super) fn run<T>(&self, group: Option<GroupKey>, batch: impl FnOnce() -> T) -> T {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.waiting.push((ticket, group));
        while state.running >= self.slots || state.next() != Some(ticket) {
            state = self
                .freed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.running += 1;
        state.waiting.retain(|(t, _)| *t != ticket);
        drop(state);
        let _turn = Turn {
            turns: self,
            group,
            started: Instant::now(),
        };
        batch()
    }
}

/// A batch's turn, given back (and its time charged) when it ends, panicking or not.
struct Turn<'a> {
    turns: &'a ScanTurns,
    group: Option<GroupKey>,
    started: Instant,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut state = self.turns.lock();
        state.running = state.running.saturating_sub(1);
        state.charge(self.group, self.started.elapsed().as_secs_f64());
        drop(state);
        self.turns.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn group(n: u8) -> Option<GroupKey> {
        Some(GroupKey::of(std::net::IpAddr::from([10, 0, n, 1])))
    }

    #[test]
    fn a_group_that_scanned_lately_gives_way_to_a_newcomer() {
        let turns = Arc::new(ScanTurns::new(2));
        // A group has used the threads for a while.
        turns.run(group(1), || std::thread::sleep(Duration::from_millis(50)));
        // It holds a turn; its next batch and a newcomer's wait: the newcomer's goes first.
        let order = Arc::new(Mutex::new(Vec::new()));
        let running = {
            let turns = turns.clone();
            std::thread::spawn(move || {
                turns.run(group(1), || std::thread::sleep(Duration::from_millis(100)))
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        let waiting: Vec<_> = [(1, "busy group"), (2, "newcomer")]
            .into_iter()
            .map(|(n, name)| {
                let (turns, order) = (turns.clone(), order.clone());
                let t = std::thread::spawn(move || {
                    turns.run(group(n), || order.lock().unwrap().push(name))
                });
                std::thread::sleep(Duration::from_millis(10));
                t
            })
            .collect();
        running.join().unwrap();
        for t in waiting {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["newcomer", "busy group"]);
    }

    #[test]
    fn a_groups_use_is_held_to_the_most_kept() {
        let mut state = State::default();
        state.charge(group(1), 100.0);
        state.charge(group(1), 100.0);
        assert!(
            state.used(&group(1)) <= MOST_USED,
            "{}",
            state.used(&group(1))
        );
        assert!(state.used(&group(1)) > MOST_USED - 1.0);
    }

    #[test]
    fn a_panicking_batch_gives_its_turn_back() {
        let turns = ScanTurns::new(2);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            turns.run(group(1), || panic!("a batch failed"))
        }));
        assert!(panicked.is_err());
        assert_eq!(turns.run(group(2), || 7), 7);
    }
}

//! When the kernel certainly has a block on disk, so that the index's own `undo` row for it can
//! go (`store::undo`). cairn can neither ask the kernel to write its state nor hear that it did
//! (its C API has neither), so it infers it from Core's rules (validation.cpp,
//! `FlushStateToDisk`):
//! - the tip the kernel loaded when it opened is on disk;
//! - while running, the kernel writes its block index and chainstate at the end of the first
//!   validation step (at most 32 blocks) that ends 70 minutes or more after its previous write
//!   (`DATABASE_WRITE_INTERVAL_MAX`). So a block seen connected at time t is on disk once the
//!   tip has moved within an interval that began 75 minutes or more after t, and moved again
//!   in an interval that began 10 minutes or more after that (the first move's step, and its
//!   write, are over by then). A reorg seen after t caps what counts as on disk below its fork.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bitcoin::BlockHash;

/// Wait after a block is seen before a tip move proves a write came after it.
const WRITE_INTERVAL: Duration = Duration::from_secs(75 * 60);
/// Wait after that move before the next move proves its step has ended.
const STEP_END: Duration = Duration::from_secs(10 * 60);
/// Moves seen within this of the last one are merged into it (its interval only grows, which
/// proves less, never more): during a sync the tip moves at every look, and the list, which
/// [`FlushWatch::on_disk`] walks in quadratic time, stays at about 150 entries.
const MERGE: Duration = Duration::from_secs(60);

/// One tip move: the last look before it, when it was seen, and the tip height then; with the
/// lowest height a reorg rewrote, if the move was a reorg.
#[derive(Debug, Clone, Copy)]
struct Move {
    after: Instant,
    seen: Instant,
    height: i64,
    rewrote_from: Option<i64>,
}

/// What the kernel's tip did, as the indexer saw it.
#[derive(Debug, Default)]
pub struct FlushWatch {
    moves: VecDeque<Move>,
    last_look: Option<(Instant, BlockHash)>,
}

impl FlushWatch {
    /// Notes the kernel's tip at `now`; `rewrote_from` is the lowest height a reorg since the
    /// last look replaced, if there was one.
    pub fn look(&mut self, now: Instant, tip: (i64, BlockHash), rewrote_from: Option<i64>) {
        let moved = self.last_look.is_none_or(|(_, hash)| hash != tip.1);
        if moved {
            match self.moves.back_mut() {
                Some(last) if now.saturating_duration_since(last.seen) < MERGE => {
                    last.seen = now;
                    last.height = tip.0;
                    last.rewrote_from = match (last.rewrote_from, rewrote_from) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                _ => {
                    let after = self.last_look.map(|(at, _)| at).unwrap_or(now);
                    self.moves.push_back(Move {
                        after,
                        seen: now,
                        height: tip.0,
                        rewrote_from,
                    });
                }
            }
        }
        self.last_look = Some((now, tip.1));
    }

    /// The highest height the kernel certainly has on disk by these rules, if any. Moves older
    /// than the one that proves it are forgotten: the list stays about two write intervals long.
    pub fn on_disk(&mut self) -> Option<i64> {
        let mut best = None;
        for (j, m) in self.moves.iter().enumerate() {
            let later = || self.moves.iter().skip(j + 1);
            let Some(write) = later().find(|k| k.after >= m.seen + WRITE_INTERVAL) else {
                break;
            };
            if !later().any(|l| l.after >= write.seen + STEP_END) {
                break;
            }
            let cap = later().filter_map(|k| k.rewrote_from).min().map(|h| h - 1);
            best = Some((j, cap.map_or(m.height, |c| c.min(m.height))));
        }
        let (j, height) = best?;
        self.moves.drain(..j);
        Some(height)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::hashes::Hash;

    fn hash(n: u8) -> BlockHash {
        BlockHash::from_byte_array([n; 32])
    }

    #[test]
    fn a_block_is_on_disk_only_after_a_later_write_certainly_ended() {
        let t0 = Instant::now();
        let min = |m: u64| t0 + Duration::from_secs(m * 60);
        let mut w = FlushWatch::default();
        w.look(min(0), (10, hash(10)), None);
        assert_eq!(w.on_disk(), None);
        // A sync's many moves a second apart are one entry.
        for s in 1..=30u64 {
            w.look(
                min(1) + Duration::from_secs(s),
                (10, hash(100 + s as u8)),
                None,
            );
        }
        assert_eq!(w.moves.len(), 2);
        // Moves within 75 minutes prove nothing.
        w.look(min(30), (11, hash(11)), None);
        w.look(min(74), (12, hash(12)), None);
        w.look(min(80), (12, hash(12)), None);
        assert_eq!(w.on_disk(), None);
        // A move after a look 75 minutes on: a write came after it, but its step may go on.
        w.look(min(81), (13, hash(13)), None);
        assert_eq!(w.on_disk(), None);
        w.look(min(90), (13, hash(13)), None);
        w.look(min(92), (14, hash(14)), None);
        assert_eq!(
            w.on_disk(),
            None,
            "the look before the second move is under 10 minutes after the first"
        );
        w.look(min(93), (14, hash(14)), None);
        w.look(min(94), (15, hash(15)), None);
        assert_eq!(w.on_disk(), Some(10));
    }

    #[test]
    fn a_later_reorg_caps_what_is_on_disk() {
        let t0 = Instant::now();
        let min = |m: u64| t0 + Duration::from_secs(m * 60);
        let mut w = FlushWatch::default();
        w.look(min(0), (10, hash(10)), None);
        w.look(min(80), (10, hash(10)), None);
        w.look(min(81), (11, hash(11)), None);
        w.look(min(91), (11, hash(11)), None);
        w.look(min(92), (12, hash(12)), None);
        // A reorg replaced heights 8 on after height 10 was seen: those blocks are new.
        w.look(min(93), (12, hash(120)), Some(8));
        assert_eq!(w.on_disk(), Some(7));
    }
}

//! What Core's net_processing reads from a header's `CBlockIndex` and the kernel's C API does
//! not hand out: its chain work (`nChainWork`), its median time past and its `nBits`. The work
//! is summed from the headers themselves, with the sum kept at every 1,000th height of the
//! branch last asked about, so an answer walks 1,000 headers at most once the sums are there.

use std::sync::{Mutex, PoisonError};

use bitcoin::hashes::Hash;
use bitcoin::pow::{CompactTarget, Target, Work};
use bitcoin::BlockHash;
use bitcoinkernel::prelude::*;
use bitcoinkernel::BlockTreeEntry;

use super::events::to_hash;
use super::Validator;

/// Heights between kept sums.
const STRIDE: i32 = 1000;

/// A known header as the anti-DoS checks of headers sync need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderEntry {
    /// Its hash.
    pub hash: BlockHash,
    /// Its height.
    pub height: i64,
    /// Its difficulty target, compact.
    pub bits: CompactTarget,
    /// The median of its and its ten predecessors' times (Core's `GetMedianTimePast`).
    pub median_time_past: u32,
    /// The work of the chain up to and including it (Core's `nChainWork`).
    pub chain_work: Work,
}

/// The chain work at every [`STRIDE`]th height of one branch: `sums[k]` is the work up to
/// height `k * STRIDE`, with that block's hash; and the last few headers' own (the tip and the
/// headers peers build on are asked about again and again).
#[derive(Default)]
pub(super) struct WorkSums {
    sums: Mutex<Vec<(BlockHash, Work)>>,
    recent: Mutex<std::collections::VecDeque<(BlockHash, Work)>>,
}

/// Headers whose chain work is remembered.
const RECENT: usize = 16;

/// The work one header proves (Core's `GetBlockProof`): zero for a target that does not decode.
pub fn header_work(bits: CompactTarget) -> Work {
    let target = Target::from_compact(bits);
    if target == Target::ZERO {
        return Work::from_be_bytes([0; 32]);
    }
    target.to_work()
}

fn entry_work(e: &BlockTreeEntry<'_>) -> Work {
    header_work(CompactTarget::from_consensus(e.header().bits()))
}

impl Validator {
    /// A known header (in any branch), with its chain work and median time past.
    pub fn header_entry(&self, hash: &BlockHash) -> Option<HeaderEntry> {
        let kernel_hash = bitcoinkernel::BlockHash::from(hash.to_byte_array());
        let cm = self.chainman.get();
        let entry = cm.get_block_tree_entry(&kernel_hash)?;
        Some(self.describe(&entry))
    }

    /// A known header itself.
    pub fn header(&self, hash: &BlockHash) -> Option<bitcoin::block::Header> {
        let kernel_hash = bitcoinkernel::BlockHash::from(hash.to_byte_array());
        let cm = self.chainman.get();
        let entry = cm.get_block_tree_entry(&kernel_hash)?;
        let raw = entry.header().consensus_encode().ok()?;
        bitcoin::consensus::deserialize(&raw).ok()
    }

    /// Whether a known header is in the active chain or below the best header (Core's
    /// `IsAncestorOfBestHeaderOrTip`): headers that lead to it were checked already.
    pub fn is_on_best_chains(&self, hash: &BlockHash) -> bool {
        let kernel_hash = bitcoinkernel::BlockHash::from(hash.to_byte_array());
        let cm = self.chainman.get();
        let Some(entry) = cm.get_block_tree_entry(&kernel_hash) else {
            return false;
        };
        let below_best = cm.best_entry().is_some_and(|best| {
            best.ancestor(entry.height())
                .is_some_and(|a| a.block_hash().to_bytes() == entry.block_hash().to_bytes())
        });
        below_best || cm.active_chain().contains(&entry)
    }

    /// The active chain's tip, as [`Validator::header_entry`] describes it.
    pub fn tip_entry(&self) -> HeaderEntry {
        let tip = self.tip();
        self.header_entry(&tip.hash)
            .expect("the active tip is in the block tree")
    }

    fn describe(&self, entry: &BlockTreeEntry<'_>) -> HeaderEntry {
        HeaderEntry {
            hash: to_hash(entry.block_hash().to_bytes()),
            height: i64::from(entry.height()),
            bits: CompactTarget::from_consensus(entry.header().bits()),
            median_time_past: median_time_past(entry),
            chain_work: self.chain_work(entry),
        }
    }

    /// The work of the chain ending at `entry`.
    fn chain_work(&self, entry: &BlockTreeEntry<'_>) -> Work {
        let hash = to_hash(entry.block_hash().to_bytes());
        let lock = || {
            self.work_sums
                .recent
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        if let Some((_, work)) = lock().iter().find(|(h, _)| *h == hash) {
            return *work;
        }
        let work = self.chain_work_summed(entry);
        let mut recent = lock();
        if recent.len() >= RECENT {
            recent.pop_front();
        }
        recent.push_back((hash, work));
        work
    }

    /// The work of the chain ending at `entry`, from the kept sums.
    fn chain_work_summed(&self, entry: &BlockTreeEntry<'_>) -> Work {
        let k = entry.height() / STRIDE;
        let mut work = self.work_sum(entry, k);
        let mut e = *entry;
        while e.height() > k * STRIDE {
            work = work + entry_work(&e);
            match e.prev() {
                Some(p) => e = p,
                None => break,
            }
        }
        work
    }

    /// The work up to height `k * STRIDE` on `entry`'s branch: from the highest kept sum that is
    /// on it, the sums above computed and kept (replacing another branch's).
    fn work_sum(&self, entry: &BlockTreeEntry<'_>, k: i32) -> Work {
        let mut sums = self
            .work_sums
            .sums
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let on_branch = |j: i32, sums: &[(BlockHash, Work)]| {
            let at = entry
                .ancestor(j * STRIDE)
                .map(|a| to_hash(a.block_hash().to_bytes()));
            sums.get(j as usize).map(|(hash, _)| Some(*hash)) == Some(at)
        };
        let mut j = k.min(sums.len() as i32 - 1);
        while j >= 0 && !on_branch(j, &sums) {
            j -= 1;
        }
        if j < 0 {
            let Some(genesis) = entry.ancestor(0) else {
                return header_work(CompactTarget::from_consensus(0));
            };
            sums.clear();
            sums.push((
                to_hash(genesis.block_hash().to_bytes()),
                entry_work(&genesis),
            ));
            j = 0;
        }
        for i in j + 1..=k {
            let (_, below) = sums[(i - 1) as usize];
            let Some(top) = entry.ancestor(i * STRIDE) else {
                break;
            };
            let mut work = below;
            let mut e = top;
            while e.height() > (i - 1) * STRIDE {
                work = work + entry_work(&e);
                match e.prev() {
                    Some(p) => e = p,
                    None => break,
                }
            }
            sums.truncate(i as usize);
            sums.push((to_hash(top.block_hash().to_bytes()), work));
        }
        sums[k as usize].1
    }

    /// A block locator from the best header's parent (Core's first `getheaders`).
    pub fn locator_before_best(&self) -> Vec<BlockHash> {
        let cm = self.chainman.get();
        match cm.best_entry() {
            Some(best) => locator_entries(&best.prev().unwrap_or(best)),
            None => Vec::new(),
        }
    }

    /// A block locator from `hash` (Core's `LocatorEntries`): it and its ancestors, one by one
    /// for ten, then each step twice the last, ending at genesis. Empty for an unknown hash.
    pub fn locator_from(&self, hash: &BlockHash) -> Vec<BlockHash> {
        let kernel_hash = bitcoinkernel::BlockHash::from(hash.to_byte_array());
        let cm = self.chainman.get();
        match cm.get_block_tree_entry(&kernel_hash) {
            Some(entry) => locator_entries(&entry),
            None => Vec::new(),
        }
    }
}

/// Core's `LocatorEntries` from `entry`.
pub(super) fn locator_entries(entry: &BlockTreeEntry<'_>) -> Vec<BlockHash> {
    let mut out = Vec::new();
    let mut height = entry.height();
    let mut step = 1;
    while height > 0 {
        if let Some(e) = entry.ancestor(height) {
            out.push(to_hash(e.block_hash().to_bytes()));
        }
        if out.len() >= 10 {
            step *= 2;
        }
        height -= step;
    }
    if let Some(genesis) = entry.ancestor(0) {
        out.push(to_hash(genesis.block_hash().to_bytes()));
    }
    out
}

/// The median of the times of `entry` and its ten predecessors (fewer near genesis).
fn median_time_past(entry: &BlockTreeEntry<'_>) -> u32 {
    let mut times = Vec::with_capacity(11);
    let mut e = Some(*entry);
    while let Some(x) = e.filter(|_| times.len() < 11) {
        times.push(x.header().timestamp());
        e = x.prev();
    }
    times.sort_unstable();
    times[times.len() / 2]
}

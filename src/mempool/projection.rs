//! The next blocks a miner would build from the mempool, by Core 29's `BlockAssembler`
//! (`node/miner.cpp`, `addPackageTxs`): the best package by ancestor fee rate first, its
//! descendants' ancestor totals reduced by what entered, a package that does not fit passed
//! over. Where Core stops at one block, the packages passed over open the next block, as
//! mempool.space's projection does; the first block is Core's template. Blocks are projected
//! as Core's defaults build them, which most hash power mines; Knots's miner defaults build
//! smaller blocks (`-blockmaxweight` 1,200,000, `-blockmaxsize` 300,000, coin-age priority).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::linearize::{ByRate, FeeFrac};
use bitcoin::Txid;

/// A block's most weight (Core 30's `DEFAULT_BLOCK_MAX_WEIGHT`, the consensus limit; Core 29
/// had 3,996,000 and kept 4,000 for the coinbase, which leaves the same room).
pub const BLOCK_MAX_WEIGHT: u64 = 4_000_000;
/// Weight and sigop cost kept for the header and coinbase (Core 30's
/// `DEFAULT_BLOCK_RESERVED_WEIGHT` and the 400 sigops of `resetBlock`).
const COINBASE_WEIGHT: u64 = 8_000;
const COINBASE_SIGOPS: u64 = 400;
/// Most sigop cost of a block (Core's `MAX_BLOCK_SIGOPS_COST`).
const BLOCK_MAX_SIGOPS: u64 = 80_000;
/// Core's `MAX_CONSECUTIVE_FAILURES` and `BLOCK_FULL_ENOUGH_WEIGHT_DELTA`: a block within 4,000
/// weight of full that saw 1,000 packages in a row not fit is closed.
const MAX_CONSECUTIVE_FAILURES: u32 = 1_000;
const FULL_ENOUGH_DELTA: u64 = 4_000;

/// One mempool transaction as the assembler reads it.
#[derive(Debug, Clone)]
pub struct Node {
    /// Its id.
    pub txid: Txid,
    /// Its fee (cairn has no `prioritisetransaction`: the modified fee is the fee).
    pub fee: u64,
    /// Its virtual size counting sigops (Core's `GetTxSize`): what a package is measured by.
    pub vsize: u64,
    /// Its weight (Core's `GetTxWeight`): what a block adds up.
    pub weight: u64,
    /// Its sigop cost.
    pub sigops: u64,
    /// Its mempool parents, as indexes into the same list.
    pub parents: Vec<u32>,
}

/// One projected block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProjectedBlock {
    /// Its transactions, package by package, parents first.
    pub txids: Vec<Txid>,
    /// Their virtual size.
    pub vsize: u64,
    /// Their fees.
    pub fees: u64,
    /// The lowest fee rate of a package it took, sat/vB: what a transaction must beat to enter it.
    pub min_rate: f64,
    /// The highest fee rate of a package it took, sat/vB: the top of its fee range.
    pub max_rate: f64,
}

impl ProjectedBlock {
    /// Widens its fee range to a package or chunk of `rate` sat/vB it takes (before its members
    /// are added: an empty block's range is that rate).
    pub(super) fn take_rate(&mut self, rate: f64) {
        (self.min_rate, self.max_rate) = match self.txids.is_empty() {
            true => (rate, rate),
            false => (self.min_rate.min(rate), self.max_rate.max(rate)),
        };
    }
}

/// A package's fee, size and sigops: a transaction's with its ancestors not yet in a block.
#[derive(Debug, Clone, Copy)]
struct Totals {
    fee: u64,
    vsize: u64,
    sigops: u64,
}

/// A transaction waiting in the queue, ordered as Core's `CompareTxMemPoolEntryByAncestorFee`:
/// the lower of its own and its package's fee rate, higher first, then the lower txid (its
/// bytes as stored, Core's `uint256` order).
#[derive(Debug, Clone, Copy)]
struct Queued {
    score: ByRate,
    txid: Txid,
    index: u32,
    version: u32,
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> Ordering {
        // a/b against c/d as a*d against c*b, exactly (Core compares the same products as
        // doubles).
        (self.score.cmp(&other.score)).then_with(|| other.txid.cmp(&self.txid))
    }
}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Queued {}

/// The assembler's state over the whole projection.
struct Assembler<'a> {
    nodes: &'a [Node],
    children: Vec<Vec<u32>>,
    /// Each transaction's package: itself with its ancestors not yet in a block.
    package: Vec<Totals>,
    /// Each transaction's count of mempool ancestors, itself included.
    ancestors: Vec<u32>,
    marks: Marks,
    /// Bumped when `package` changes: older queue entries are stale.
    version: Vec<u32>,
    in_block: Vec<bool>,
    queue: BinaryHeap<Queued>,
    /// Packages that did not fit the open block: queued again for the next.
    passed_over: Vec<u32>,
    min_fee_per_kvb: u64,
}

/// Projects `nodes` (every mempool transaction) into blocks, at most `max_blocks`, leaving out
/// packages paying under `min_fee_per_kvb` (Core's `-blockmintxfee`).
pub fn project(nodes: &[Node], min_fee_per_kvb: u64, max_blocks: usize) -> Vec<ProjectedBlock> {
    let mut assembler = Assembler::new(nodes, min_fee_per_kvb);
    let mut blocks = Vec::new();
    while blocks.len() < max_blocks {
        let block = assembler.fill_block(blocks.is_empty());
        if block.txids.is_empty() {
            break;
        }
        blocks.push(block);
    }
    blocks
}

impl<'a> Assembler<'a> {
    fn new(nodes: &'a [Node], min_fee_per_kvb: u64) -> Self {
        let mut children = vec![Vec::new(); nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            for &p in &node.parents {
                children[p as usize].push(i as u32);
            }
        }
        let mut assembler = Assembler {
            nodes,
            children,
            package: Vec::with_capacity(nodes.len()),
            ancestors: Vec::with_capacity(nodes.len()),
            version: vec![0; nodes.len()],
            in_block: vec![false; nodes.len()],
            marks: Marks::new(nodes.len()),
            queue: BinaryHeap::with_capacity(nodes.len()),
            passed_over: Vec::new(),
            min_fee_per_kvb,
        };
        for i in 0..nodes.len() as u32 {
            let members = assembler.walk_outside_ancestors(i);
            let totals = members
                .iter()
                .fold(Totals::ZERO, |t, &a| t.plus(&nodes[a as usize]));
            assembler.package.push(totals);
            assembler.ancestors.push(members.len() as u32);
            assembler.enqueue(i);
        }
        assembler
    }

    /// `i` with its ancestors not yet in a block, in no order; each visited once (marks, not
    /// searches, so a dense chain costs its edges).
    fn walk_outside_ancestors(&mut self, i: u32) -> Vec<u32> {
        self.marks.clear();
        self.marks.set(i);
        let mut seen = vec![i];
        let mut next = 0;
        while next < seen.len() {
            let at = seen[next] as usize;
            next += 1;
            for &p in &self.nodes[at].parents {
                if !self.in_block[p as usize] && self.marks.set(p) {
                    seen.push(p);
                }
            }
        }
        seen
    }

    /// `i` with its ancestors not yet in a block in Core's `SortForBlock` order: by their
    /// count of mempool ancestors (a parent has fewer than its child), then by txid.
    fn outside_ancestors(&mut self, i: u32) -> Vec<u32> {
        let mut members = self.walk_outside_ancestors(i);
        members
            .sort_unstable_by_key(|&m| (self.ancestors[m as usize], self.nodes[m as usize].txid));
        members
    }

    fn enqueue(&mut self, i: u32) {
        let node = &self.nodes[i as usize];
        let package = self.package[i as usize];
        // Core's `GetModFeeAndSize`: the lower of the transaction's own and its package's rate.
        let own = ByRate(FeeFrac::new(node.fee, node.vsize.max(1)));
        let with_package = ByRate(FeeFrac::new(package.fee, package.vsize.max(1)));
        self.queue.push(Queued {
            score: own.min(with_package),
            txid: node.txid,
            index: i,
            version: self.version[i as usize],
        });
    }

    /// The next current entry of the queue.
    fn pop(&mut self) -> Option<u32> {
        while let Some(q) = self.queue.pop() {
            let i = q.index as usize;
            if !self.in_block[i] && q.version == self.version[i] {
                return Some(q.index);
            }
        }
        None
    }

    /// Fills one block from the queue (the `first` exactly as Core's assembler); what did not
    /// fit is queued again for the next.
    fn fill_block(&mut self, first: bool) -> ProjectedBlock {
        let mut block = ProjectedBlock::default();
        let (mut weight, mut sigops) = (COINBASE_WEIGHT, COINBASE_SIGOPS);
        let mut failures = 0u32;
        while let Some(i) = self.pop() {
            let package = self.package[i as usize];
            if u128::from(package.fee) * 1000
                < u128::from(self.min_fee_per_kvb) * u128::from(package.vsize)
            {
                // Everything else pays less (Core returns here): only what this block passed
                // over may fill the next.
                self.enqueue(i);
                break;
            }
            let fits = weight + 4 * package.vsize < BLOCK_MAX_WEIGHT
                && sigops + package.sigops < BLOCK_MAX_SIGOPS;
            if !fits {
                self.passed_over.push(i);
                failures += 1;
                // Core closes its block only when also nearly full, and may read the whole
                // mempool to fill the last few thousand weight units; a block after the first
                // is a guess about the future anyway, so it closes without that.
                let full_enough = weight > BLOCK_MAX_WEIGHT - FULL_ENOUGH_DELTA || !first;
                if failures > MAX_CONSECUTIVE_FAILURES && full_enough {
                    break;
                }
                continue;
            }
            failures = 0;
            sigops += package.sigops;
            let rate = package.fee as f64 / package.vsize.max(1) as f64;
            block.take_rate(rate);
            weight += self.add_package(i, &mut block);
        }
        for i in std::mem::take(&mut self.passed_over) {
            if !self.in_block[i as usize] {
                self.version[i as usize] += 1;
                self.enqueue(i);
            }
        }
        block
    }

    /// Puts `i` and its outside ancestors in `block`, then takes them from their descendants'
    /// packages (Core's `UpdatePackagesForAdded`); returns the weight added.
    fn add_package(&mut self, i: u32, block: &mut ProjectedBlock) -> u64 {
        let members = self.outside_ancestors(i);
        let mut weight = 0;
        for &m in &members {
            self.in_block[m as usize] = true;
            let node = &self.nodes[m as usize];
            weight += node.weight;
            block.txids.push(node.txid);
            block.vsize += node.vsize;
            block.fees += node.fee;
        }
        let mut changed = Vec::new();
        let nodes = self.nodes;
        for &m in &members {
            let node = &nodes[m as usize];
            for d in self.descendants(m) {
                let totals = &mut self.package[d as usize];
                totals.fee -= node.fee;
                totals.vsize -= node.vsize;
                totals.sigops -= node.sigops;
                changed.push(d);
            }
        }
        changed.sort_unstable();
        changed.dedup();
        for d in changed {
            self.version[d as usize] += 1;
            self.enqueue(d);
        }
        weight
    }

    /// `i`'s descendants not in a block, found through any path, members of the block
    /// included (a descendant reached only through another member of the same package must
    /// lose this one's share too: Core's `CalculateDescendants`).
    fn descendants(&mut self, i: u32) -> Vec<u32> {
        self.marks.clear();
        self.marks.set(i);
        let mut found = Vec::new();
        let mut stack = vec![i];
        while let Some(at) = stack.pop() {
            for &c in &self.children[at as usize] {
                if self.marks.set(c) {
                    stack.push(c);
                    if !self.in_block[c as usize] {
                        found.push(c);
                    }
                }
            }
        }
        found
    }
}

/// Visited marks for the walks, cleared in constant time by moving to a new epoch.
struct Marks {
    epoch: u32,
    at: Vec<u32>,
}

impl Marks {
    fn new(len: usize) -> Self {
        Marks {
            epoch: 1,
            at: vec![0; len],
        }
    }

    fn clear(&mut self) {
        self.epoch += 1;
    }

    /// Marks `i`; whether it was unmarked.
    fn set(&mut self, i: u32) -> bool {
        let slot = &mut self.at[i as usize];
        let fresh = *slot != self.epoch;
        *slot = self.epoch;
        fresh
    }
}

impl Totals {
    const ZERO: Totals = Totals {
        fee: 0,
        vsize: 0,
        sigops: 0,
    };

    fn plus(self, node: &Node) -> Totals {
        Totals {
            fee: self.fee + node.fee,
            vsize: self.vsize + node.vsize,
            sigops: self.sigops + node.sigops,
        }
    }
}

//! What the fee estimates and the fee histogram are read from, built once per change of the
//! mempool and shared by every request: the blocks a miner would build next (by chunks as
//! Core 31's block assembler, [`block_builder`], under Core's profile; by ancestor fee rate as
//! Core 29's, [`projection`], under Knots's) and the histogram of own fee rates (ElectrumX's).

use std::time::{Duration, Instant};

use super::block_builder;
use super::projection::{self, Node, ProjectedBlock};

/// How many blocks are projected: one more than Esplora's longest confirmation target (an
/// estimate for n blocks needs to know whether the mempool fills them).
pub const PROJECTED_BLOCKS: usize = 1009;

/// From this cost on, a projection serves until ten times its cost has passed even if the
/// mempool changed; cheaper ones (small mempools) are redone at every change.
pub const THROTTLED_FROM: Duration = Duration::from_millis(1);

/// The projected blocks and the fee histogram of one mempool generation.
#[derive(Debug)]
pub struct FeeRates {
    /// The mempool generation these are of.
    pub(super) generation: u64,
    /// When they were built and how long that took: a changed mempool is projected again only
    /// after ten times that ([`super::Mempool::fee_rates`]).
    pub(super) built: Instant,
    pub(super) cost: Duration,
    /// The blocks a miner would build next, the first as Core's `getblocktemplate`.
    pub blocks: Vec<ProjectedBlock>,
    /// The fee histogram as ElectrumX builds it: [fee rate, vsize] bins from the highest rate
    /// down, the first closed at 100 kvB and each next one 10% larger; the rest in a last bin
    /// at the lowest rate.
    pub histogram: Vec<(f64, u64)>,
}

impl FeeRates {
    /// The projection of `nodes` (every mempool transaction) leaving out what pays under
    /// `min_fee_per_kvb`, and the histogram of their own rates.
    /// `started` is when the work began (the snapshot included), for its cost.
    pub(super) fn of(
        generation: u64,
        nodes: &[Node],
        min_fee_per_kvb: u64,
        clusters: bool,
        started: Instant,
    ) -> Self {
        let (mut sorted, blocks) = match clusters {
            true => {
                let chunks = block_builder::chunk_clusters(nodes);
                let blocks =
                    block_builder::project(nodes, &chunks, min_fee_per_kvb, PROJECTED_BLOCKS);
                (chunk_rates(nodes, &chunks), blocks)
            }
            false => {
                let blocks = projection::project(nodes, min_fee_per_kvb, PROJECTED_BLOCKS);
                (own_rates(nodes), blocks)
            }
        };
        sorted.sort_by(|a, b| b.0.total_cmp(&a.0));
        let histogram = histogram(&sorted);
        FeeRates {
            generation,
            built: Instant::now(),
            cost: started.elapsed(),
            blocks,
            histogram,
        }
    }

    /// A fee rate (BTC/kvB) that enters one of the first `blocks` projected blocks (the
    /// lowest package rate any of them took, so a longer target never asks more), or `None`
    /// when the mempool would clear within `blocks` blocks (any fee the mempool takes would do).
    pub fn estimate(&self, blocks: u32) -> Option<f64> {
        let n = blocks.max(1) as usize;
        if self.blocks.len() <= n {
            return None;
        }
        let sat_per_vb = self.blocks[..n]
            .iter()
            .map(|b| b.min_rate)
            .fold(f64::INFINITY, f64::min);
        Some(sat_per_vb * 1000.0 / bitcoin::Amount::ONE_BTC.to_sat() as f64)
    }

    /// Whether this projection serves a mempool at `generation`: it is of that generation, or
    /// it cost 1 ms or more and ten times that has not passed.
    pub(super) fn serves(&self, generation: u64) -> bool {
        let throttled =
            self.cost >= THROTTLED_FROM && self.built.elapsed() < self.cost.saturating_mul(10);
        self.generation == generation || throttled
    }
}

/// The histogram of `sorted` (highest rate first).
fn histogram(sorted: &[(f64, u64)]) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    let mut bin_size = 100_000u64;
    let mut cum = 0u64;
    for &(rate, vsize) in sorted {
        cum += vsize;
        if cum >= bin_size {
            out.push((rate, cum));
            cum = 0;
            bin_size += bin_size / 10;
        }
    }
    if let (true, Some(&(lowest, _))) = (cum > 0, sorted.last()) {
        out.push((lowest, cum));
    }
    out
}

/// Each transaction's own fee rate, sat/vB, with its vsize (Core 29, ElectrumX).
fn own_rates(nodes: &[Node]) -> Vec<(f64, u64)> {
    nodes
        .iter()
        .map(|n| (n.fee as f64 / n.vsize.max(1) as f64, n.vsize))
        .collect()
}

/// Each transaction's chunk's fee rate, sat/vB, with its vsize: the rate it is mined at in a
/// cluster mempool (Core 31).
fn chunk_rates(nodes: &[Node], clusters: &[Vec<block_builder::Chunk>]) -> Vec<(f64, u64)> {
    clusters
        .iter()
        .flatten()
        .flat_map(|chunk| {
            let vsize = chunk.feerate.size.div_ceil(4).max(1);
            let rate = chunk.feerate.fee as f64 / vsize as f64;
            chunk
                .members
                .iter()
                .map(move |&m| (rate, nodes[m as usize].vsize))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use bitcoin::hashes::Hash;
    use bitcoin::Txid;

    use super::*;

    fn node(n: u32, fee: u64, vsize: u64, parents: &[u32]) -> Node {
        let mut id = [0u8; 32];
        id[..4].copy_from_slice(&n.to_be_bytes());
        Node {
            txid: Txid::from_byte_array(id),
            fee,
            vsize,
            weight: vsize * 4,
            sigops: 4,
            parents: parents.to_vec(),
        }
    }

    /// The fee rates of `nodes` at 1 sat/vB, projected by chunks (Core 31) and by ancestor
    /// packages (Core 29): on these mempools, whose clusters are trees, the blocks agree; the
    /// histograms differ where a child pays for its parent (chunk rates against own rates).
    fn of_both(generation: u64, nodes: &[Node]) -> FeeRates {
        let chunks = FeeRates::of(generation, nodes, 1000, true, Instant::now());
        let packages = FeeRates::of(generation, nodes, 1000, false, Instant::now());
        assert_eq!(chunks.blocks, packages.blocks, "chunks and packages");
        packages
    }

    #[test]
    fn estimates_read_the_projected_blocks_and_bins_walk_own_rates() {
        // 300 transactions of 10 kvB at 1 to 300 sat/vB: 3 MvB in all; 99 fit a block
        // (8,000 + 99 * 40,000 < 4,000,000).
        let nodes: Vec<Node> = (1..=300)
            .map(|r| node(r, u64::from(r) * 10_000, 10_000, &[]))
            .collect();
        let rates = of_both(7, &nodes);
        assert_eq!(rates.generation, 7);
        let counts: Vec<usize> = rates.blocks.iter().map(|b| b.txids.len()).collect();
        assert_eq!(counts, [99, 99, 99, 3]);
        assert_eq!(rates.estimate(1), Some(202.0 * 1000.0 / 1e8));
        assert_eq!(rates.estimate(3), Some(4.0 * 1000.0 / 1e8));
        assert_eq!(
            rates.estimate(4),
            None,
            "the mempool clears within 4 blocks"
        );
        // Bins close at 100 kvB, then 110 kvB, 121 kvB...: the first at the 10th rate.
        assert_eq!(rates.histogram[0], (291.0, 100_000));
        assert_eq!(rates.histogram[1], (280.0, 110_000));
        let total: u64 = rates.histogram.iter().map(|(_, v)| v).sum();
        assert_eq!(total, 3_000_000, "every vbyte is in a bin");
        assert_eq!(rates.histogram.last().map(|b| b.0), Some(1.0));
    }

    #[test]
    fn a_child_pays_for_its_parent_and_a_package_too_big_waits_for_the_next_block() {
        let mut nodes = vec![
            // A 1 sat/vB parent whose child brings the package to 50 sat/vB.
            node(0, 1_000, 1_000, &[]),
            node(1, 99_000, 1_000, &[0]),
            // A 90 kvB package at 25 sat/vB: a 10 sat/vB parent, a 40 sat/vB child.
            node(2, 45_000 * 10, 45_000, &[]),
            node(3, 45_000 * 40, 45_000, &[2]),
        ];
        // 24 at 30 sat/vB, 40 kvB each: with the 8,000 kept for the coinbase and the first
        // package's 8,000 they weigh 3,856,000, leaving 144,000 (36 kvB).
        nodes.extend((10..34).map(|n| node(n, 40_000 * 30, 40_000, &[])));
        // 15 at 20 sat/vB, 3 kvB each: 11 fit the room left (3,856,000 + 12 * 12,000 is not
        // under 4,000,000).
        nodes.extend((40..55).map(|n| node(n, 20 * 3_000, 3_000, &[])));
        let rates = of_both(1, &nodes);
        let [first, second] = &rates.blocks[..] else {
            panic!("{} blocks", rates.blocks.len())
        };
        assert_eq!(
            first.txids[..2],
            [nodes[0].txid, nodes[1].txid],
            "parent then child, first"
        );
        assert!(nodes[4..28].iter().all(|n| first.txids.contains(&n.txid)));
        assert_eq!(first.txids.len(), 2 + 24 + 11);
        assert_eq!(first.min_rate, 20.0);
        assert!(first.max_rate >= first.min_rate);
        assert_eq!(first.vsize, 2_000 + 24 * 40_000 + 11 * 3_000);
        assert_eq!(
            second.txids[..2],
            [nodes[2].txid, nodes[3].txid],
            "the package passed over opens the next block"
        );
        assert_eq!(second.txids.len(), 2 + 4);
        assert_eq!(rates.estimate(1), Some(20.0 * 1000.0 / 1e8));
        assert_eq!(rates.estimate(2), None);
    }

    #[test]
    fn a_sibling_of_a_paid_for_package_is_freed_of_all_of_it() {
        // G <- P <- {C1, C2}: C1 pays for G and P; C2 then stands alone at 20 sat/vB, ahead
        // of Y (15) and X (10). Were G still counted in C2's package it would fall to about 4.
        let nodes = vec![
            node(0, 1_000, 1_000, &[]),
            node(1, 1_000, 1_000, &[0]),
            node(2, 100_000, 1_000, &[1]),
            node(3, 20 * 200, 200, &[1]),
            node(4, 10_000, 1_000, &[]),
            node(5, 15_000, 1_000, &[]),
        ];
        let rates = of_both(1, &nodes);
        let order: Vec<Txid> = [0, 1, 2, 3, 5, 4].iter().map(|&i| nodes[i].txid).collect();
        assert_eq!(rates.blocks[0].txids, order);
    }

    #[test]
    fn chunks_take_a_parent_with_both_children_that_pay_for_it_at_their_rate_together() {
        // A 1 sat/vB parent with two 100 sat/vB children: one chunk of 201,000 for 3,000 vB
        // (67 sat/vB) under Core 31; Core 29's packages take parent and first child at 50.5,
        // then the second alone.
        let nodes = vec![
            node(0, 1_000, 1_000, &[]),
            node(1, 100_000, 1_000, &[0]),
            node(2, 100_000, 1_000, &[0]),
        ];
        let chunks = FeeRates::of(1, &nodes, 1000, true, Instant::now());
        let packages = FeeRates::of(1, &nodes, 1000, false, Instant::now());
        assert_eq!(chunks.blocks[0].txids, packages.blocks[0].txids);
        assert_eq!(chunks.blocks[0].min_rate, 67.0);
        assert_eq!(chunks.blocks[0].max_rate, 67.0);
        assert_eq!(packages.blocks[0].min_rate, 50.5);
        // Core 29's second package: the other child alone, at 100.
        assert_eq!(packages.blocks[0].max_rate, 100.0);
        // Under 100 kvB the histogram is one bin at the lowest rate: the chunk's, where by own
        // rates the parent's 1 sat/vB.
        assert_eq!(chunks.histogram, vec![(67.0, 3_000)]);
        assert_eq!(packages.histogram, vec![(1.0, 3_000)]);
    }

    #[test]
    fn nothing_under_the_block_minimum_is_projected() {
        let nodes = vec![node(0, 999, 1_000, &[]), node(1, 1_000, 1_000, &[])];
        let rates = of_both(1, &nodes);
        assert_eq!(rates.blocks.len(), 1);
        assert_eq!(rates.blocks[0].txids, [nodes[1].txid]);
    }
}

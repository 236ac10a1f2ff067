//! The next blocks a miner would build from a cluster mempool, by Core 31's `BlockAssembler`
//! (node/miner.cpp's `addChunks` over txgraph.cpp's `BlockBuilder`): every cluster linearized
//! and cut into chunks ([`super::linearize`]), the best next chunk of any cluster first, a
//! chunk that does not fit passed over with the rest of its cluster, and the first chunk under
//! the block's minimum fee rate ending the template. Where Core stops at one block, what was
//! passed over opens the next, as with [`super::projection`] (Knots's profile, by ancestor
//! packages); the first block is Core's template.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use bitcoin::Txid;

use super::linearize::{chunked, components, linearize, sub_cluster, FeeFrac};
use super::projection::{Node, ProjectedBlock, BLOCK_MAX_WEIGHT};
use crate::policy::inputs;

/// Weight and sigop cost kept for the header and coinbase (Core's
/// `DEFAULT_BLOCK_RESERVED_WEIGHT` and `DEFAULT_COINBASE_OUTPUT_MAX_ADDITIONAL_SIGOPS`).
const RESERVED_WEIGHT: u64 = 8_000;
const RESERVED_SIGOPS: u64 = 400;
/// Most sigop cost of a block (Core's `MAX_BLOCK_SIGOPS_COST`).
const BLOCK_MAX_SIGOPS: u64 = 80_000;
/// Core's `MAX_CONSECUTIVE_FAILURES` and `BLOCK_FULL_ENOUGH_WEIGHT_DELTA`.
const MAX_CONSECUTIVE_FAILURES: u32 = 1_000;
const FULL_ENOUGH_DELTA: u64 = 4_000;

/// One chunk of a cluster as the builder reads it.
pub struct Chunk {
    /// Its fee and sigop-adjusted weight: what its rate and fit are judged by.
    pub feerate: FeeFrac,
    /// Its members (indices into the projection's nodes), parents first.
    pub members: Vec<u32>,
    /// Its real weight and sigop cost: what the block adds up.
    weight: u64,
    sigops: u64,
    /// The highest txid among its members: ties between clusters go to the lower one.
    max_txid: Txid,
}

/// A cluster's next chunk waiting in the builder's queue.
struct Next<'a> {
    chunk: &'a Chunk,
    cluster: usize,
}

impl Ord for Next<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.chunk
            .feerate
            .rate_cmp(&other.chunk.feerate)
            .then_with(|| other.chunk.max_txid.cmp(&self.chunk.max_txid))
            .then_with(|| other.cluster.cmp(&self.cluster))
    }
}

impl PartialOrd for Next<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Next<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Next<'_> {}

/// Projects `nodes` (every mempool transaction, cut into `clusters` by [`chunk_clusters`]) into
/// blocks, at most `max_blocks`, leaving out chunks paying under `min_fee_per_kvb` (Core's
/// `-blockmintxfee`).
pub fn project(
    nodes: &[Node],
    clusters: &[Vec<Chunk>],
    min_fee_per_kvb: u64,
    max_blocks: usize,
) -> Vec<ProjectedBlock> {
    let mut taken = vec![0usize; clusters.len()];
    let mut queue: BinaryHeap<Next> = clusters
        .iter()
        .enumerate()
        .filter_map(|(cluster, chunks)| {
            Some(Next {
                chunk: chunks.first()?,
                cluster,
            })
        })
        .collect();
    let mut blocks = Vec::new();
    while blocks.len() < max_blocks {
        let first = blocks.is_empty();
        let mut block = ProjectedBlock::default();
        let (mut weight, mut sigops, mut failures) = (RESERVED_WEIGHT, RESERVED_SIGOPS, 0u32);
        let mut passed_over: Vec<Next> = Vec::new();
        while let Some(next) = queue.pop() {
            let chunk = next.chunk;
            if below(chunk.feerate, min_fee_per_kvb) {
                queue.push(next);
                break;
            }
            if weight + chunk.feerate.size >= BLOCK_MAX_WEIGHT
                || sigops + chunk.sigops >= BLOCK_MAX_SIGOPS
            {
                // The rest of its cluster waits for the next block.
                passed_over.push(next);
                failures += 1;
                let full_enough = weight + FULL_ENOUGH_DELTA > BLOCK_MAX_WEIGHT || !first;
                if failures > MAX_CONSECUTIVE_FAILURES && full_enough {
                    break;
                }
                continue;
            }
            failures = 0;
            weight += chunk.weight;
            sigops += chunk.sigops;
            add(&mut block, chunk, nodes);
            taken[next.cluster] += 1;
            if let Some(following) = clusters[next.cluster].get(taken[next.cluster]) {
                queue.push(Next {
                    chunk: following,
                    cluster: next.cluster,
                });
            }
        }
        queue.extend(passed_over);
        if block.txids.is_empty() {
            break;
        }
        blocks.push(block);
    }
    blocks
}

/// Whether a chunk pays under `min_fee_per_kvb` for its virtual size (Core's `CFeeRate`
/// of its fee and its adjusted weight in vbytes, rounded up).
fn below(feerate: FeeFrac, min_fee_per_kvb: u64) -> bool {
    let vsize = feerate.size.div_ceil(4);
    u128::from(feerate.fee) * 1000 < u128::from(min_fee_per_kvb) * u128::from(vsize)
}

/// Puts a chunk's members in `block`.
fn add(block: &mut ProjectedBlock, chunk: &Chunk, nodes: &[Node]) {
    let vsize = chunk.feerate.size.div_ceil(4).max(1);
    block.take_rate(chunk.feerate.fee as f64 / vsize as f64);
    for &m in &chunk.members {
        let node = &nodes[m as usize];
        block.txids.push(node.txid);
        block.vsize += node.vsize;
        block.fees += node.fee;
    }
}

/// Every cluster of `nodes`, linearized and cut into chunks, best first.
pub fn chunk_clusters(nodes: &[Node]) -> Vec<Vec<Chunk>> {
    let graph: Vec<super::linearize::Node> = nodes
        .iter()
        .map(|n| super::linearize::Node {
            feerate: FeeFrac::new(n.fee, inputs::adjusted_weight(n.weight, n.sigops as usize)),
            parents: n.parents.iter().map(|&p| p as usize).collect(),
        })
        .collect();
    components(&graph)
        .into_iter()
        .map(|component| {
            let cluster = sub_cluster(&graph, &component);
            chunked(&cluster, &linearize(&cluster))
                .into_iter()
                .map(|c| {
                    let members: Vec<u32> =
                        c.members.iter().map(|&m| component[m] as u32).collect();
                    let of = |m: &u32| &nodes[*m as usize];
                    Chunk {
                        feerate: c.feerate,
                        weight: members.iter().map(|m| of(m).weight).sum(),
                        sigops: members.iter().map(|m| of(m).sigops).sum(),
                        max_txid: members
                            .iter()
                            .map(|m| of(m).txid)
                            .max()
                            .unwrap_or(Txid::from_raw_hash(bitcoin::hashes::Hash::all_zeros())),
                        members,
                    }
                })
                .collect()
        })
        .collect()
}

//! Linearizing a cluster and cutting it into chunks, the orders Core 31's cluster mempool
//! judges replacements, mines and evicts by (cluster_linearize.h, util/feefrac.h).
//!
//! A linearization is a topological order of a cluster's transactions; its chunks are the
//! groups that order cuts into where each group pays at least the fee rate of the next
//! (merging a later group into the one before while it pays more). cairn linearizes by
//! ancestor-set fee rate, as Core's miner did before clusters: the highest-rate set of a
//! transaction with its remaining ancestors goes first, repeatedly. That is optimal for chains,
//! a parent with children and a child with parents; Core 31 searches further (spanning-forest
//! linearization within a budget) and can find better chunks where transactions share several
//! parents and children.

use std::cmp::Ordering;

/// A fee and a size (sigop-adjusted weight units), compared by their ratio (Core's `FeeFrac`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeeFrac {
    /// Satoshis.
    pub fee: u64,
    /// Weight units.
    pub size: u64,
}

impl FeeFrac {
    /// A fee for a size.
    pub fn new(fee: u64, size: u64) -> Self {
        FeeFrac { fee, size }
    }

    /// Both summed.
    pub fn plus(self, other: FeeFrac) -> FeeFrac {
        FeeFrac {
            fee: self.fee.saturating_add(other.fee),
            size: self.size.saturating_add(other.size),
        }
    }

    /// Compares fee rates exactly (cross-multiplied); an empty size counts as size 1.
    pub fn rate_cmp(&self, other: &FeeFrac) -> Ordering {
        let left = u128::from(self.fee) * u128::from(other.size.max(1));
        let right = u128::from(other.fee) * u128::from(self.size.max(1));
        left.cmp(&right)
    }
}

/// A transaction of a cluster: its fee and size, and its parents (indices into the cluster).
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// Its fee and sigop-adjusted weight.
    pub feerate: FeeFrac,
    /// The cluster members it spends from.
    pub parents: Vec<usize>,
}

/// A topological order of `nodes` (parents first) by ancestor-set fee rate: repeatedly the
/// not yet ordered transaction whose not yet ordered ancestors with itself pay the highest
/// rate, those ancestors first (ties: the smaller set, then the lower index). Quadratic in the
/// cluster's size times its ancestry: about 64 × 64 × 64 steps for Core's largest cluster.
pub fn linearize(nodes: &[Node]) -> Vec<usize> {
    let ancestors: Vec<Vec<usize>> = (0..nodes.len()).map(|i| ancestry(nodes, i)).collect();
    let mut done = vec![false; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    while order.len() < nodes.len() {
        let mut best: Option<(usize, FeeFrac, usize)> = None;
        for (i, set) in ancestors.iter().enumerate().filter(|(i, _)| !done[*i]) {
            let left: Vec<usize> = set.iter().copied().filter(|&a| !done[a]).collect();
            let rate = left
                .iter()
                .fold(FeeFrac::default(), |sum, &a| sum.plus(nodes[a].feerate));
            let better = best.is_none_or(|(_, r, n)| match rate.rate_cmp(&r) {
                Ordering::Greater => true,
                Ordering::Equal => left.len() < n,
                Ordering::Less => false,
            });
            if better {
                best = Some((i, rate, left.len()));
            }
        }
        let Some((pick, _, _)) = best else {
            break;
        };
        // The set in topological order: ancestry lists ancestors before descendants.
        for &a in &ancestors[pick] {
            if !done[a] {
                done[a] = true;
                order.push(a);
            }
        }
    }
    order
}

/// `i` with its ancestors in `nodes`, each once, every one after its own ancestors.
fn ancestry(nodes: &[Node], i: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut seen = vec![false; nodes.len()];
    visit(nodes, i, &mut seen, &mut out);
    out
}

/// Depth-first, parents before the child (a cluster of at most 64 keeps the depth small; a
/// cycle, which transactions cannot form, would be cut where it closes).
fn visit(nodes: &[Node], i: usize, seen: &mut [bool], out: &mut Vec<usize>) {
    if seen[i] {
        return;
    }
    seen[i] = true;
    for &p in &nodes[i].parents {
        if p < nodes.len() {
            visit(nodes, p, seen, out);
        }
    }
    out.push(i);
}

/// The chunks of `order` (Core's `ChunkLinearization`): each transaction starts a group, and a
/// group is merged into the one before while it pays a higher rate; the result's rates do not
/// increase.
pub fn chunks(nodes: &[Node], order: &[usize]) -> Vec<FeeFrac> {
    chunked(nodes, order)
        .into_iter()
        .map(|c| c.feerate)
        .collect()
}

/// A chunk: its members in the linearization's order, and their fee and size together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Their fee and size.
    pub feerate: FeeFrac,
    /// The members (indices into the cluster), parents first.
    pub members: Vec<usize>,
}

/// [`chunks`] with each chunk's members.
pub fn chunked(nodes: &[Node], order: &[usize]) -> Vec<Chunk> {
    let mut out: Vec<Chunk> = Vec::with_capacity(order.len());
    for &i in order {
        let mut chunk = Chunk {
            feerate: nodes[i].feerate,
            members: vec![i],
        };
        while let Some(last) = out.last() {
            if chunk.feerate.rate_cmp(&last.feerate) != Ordering::Greater {
                break;
            }
            let Some(mut before) = out.pop() else {
                break;
            };
            before.feerate = before.feerate.plus(chunk.feerate);
            before.members.append(&mut chunk.members);
            chunk = before;
        }
        out.push(chunk);
    }
    out
}

/// Compares two fee-rate diagrams, each given as chunks in decreasing rate (Core's
/// `CompareChunks`, util/feefrac.cpp): `Greater` if `a` is nowhere below `b` and above it
/// somewhere, `Less` for the reverse, `Equal` if they coincide, `None` if each is above the
/// other somewhere. Past its end a diagram continues at a rate of zero.
pub fn compare_diagrams(a: &[FeeFrac], b: &[FeeFrac]) -> Option<Ordering> {
    let chunk = [a, b];
    let mut next = [0usize; 2];
    let mut accum = [FeeFrac::default(); 2];
    let mut better = [false; 2];
    loop {
        let done = [next[0] == chunk[0].len(), next[1] == chunk[1].len()];
        if done[0] && done[1] {
            break;
        }
        let point =
            |d: usize, accum: &[FeeFrac; 2], next: &[usize; 2]| accum[d].plus(chunk[d][next[d]]);
        // The side whose next point comes first (the other where one is done).
        let side = if done[0] || done[1] {
            usize::from(done[0])
        } else {
            usize::from(point(0, &accum, &next).size > point(1, &accum, &next).size)
        };
        let other = 1 - side;
        let p = point(side, &accum, &next);
        let a_point = accum[other];
        let slope_ap = Slope::between(a_point, p);
        let cmp = if done[other] {
            slope_ap.cmp_to(&Slope { fee: 0, size: 1 })
        } else {
            let b_point = point(other, &accum, &next);
            let slope_ab = Slope::between(a_point, b_point);
            if b_point.size == p.size {
                accum[other] = b_point;
                next[other] += 1;
            }
            slope_ap.cmp_to(&slope_ab)
        };
        match cmp {
            Ordering::Greater => better[side] = true,
            Ordering::Less => better[other] = true,
            Ordering::Equal => {}
        }
        accum[side] = p;
        next[side] += 1;
        if better[0] && better[1] {
            return None;
        }
    }
    Some(better[0].cmp(&better[1]))
}

/// The slope from one diagram point to another: a fee difference, which may be negative
/// between points of two diagrams, over a size difference.
struct Slope {
    fee: i128,
    size: i128,
}

impl Slope {
    fn between(from: FeeFrac, to: FeeFrac) -> Slope {
        Slope {
            fee: i128::from(to.fee) - i128::from(from.fee),
            size: i128::from(to.size) - i128::from(from.size),
        }
    }

    /// Compares by ratio; both sizes are positive where [`compare_diagrams`] asks.
    fn cmp_to(&self, other: &Slope) -> Ordering {
        (self.fee * other.size.max(1)).cmp(&(other.fee * self.size.max(1)))
    }
}

/// The connected components of `nodes` (indices), parents and children alike linking.
pub fn components(nodes: &[Node]) -> Vec<Vec<usize>> {
    let mut neighbours: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &p in &n.parents {
            neighbours[i].push(p);
            neighbours[p].push(i);
        }
    }
    let mut component_of = vec![usize::MAX; nodes.len()];
    let mut out: Vec<Vec<usize>> = Vec::new();
    for start in 0..nodes.len() {
        if component_of[start] != usize::MAX {
            continue;
        }
        let mut members = Vec::new();
        let mut stack = vec![start];
        component_of[start] = out.len();
        while let Some(i) = stack.pop() {
            members.push(i);
            for &j in &neighbours[i] {
                if component_of[j] == usize::MAX {
                    component_of[j] = out.len();
                    stack.push(j);
                }
            }
        }
        members.sort_unstable();
        out.push(members);
    }
    out
}

/// The nodes of `component` as a cluster of their own, parents renumbered.
pub fn sub_cluster(nodes: &[Node], component: &[usize]) -> Vec<Node> {
    component
        .iter()
        .map(|&i| Node {
            feerate: nodes[i].feerate,
            parents: nodes[i]
                .parents
                .iter()
                .filter_map(|p| component.binary_search(p).ok())
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests;

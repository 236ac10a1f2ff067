//! Linearizing a cluster and cutting it into chunks, the orders Core 31's cluster mempool
//! judges replacements, mines and evicts by (cluster_linearize.h, util/feefrac.h).
//!
//! A linearization is a topological order of a cluster's transactions; its chunks are the
//! groups that order cuts into where each group pays at least the fee rate of the next
//! (merging a later group into the one before while it pays more). cairn linearizes by
//! ancestor-set fee rate, as Core's miner did before clusters (the highest-rate set of a
//! transaction with its remaining ancestors goes first, repeatedly), then runs Core's
//! `PostLinearize`, which makes the result optimal for trees (every transaction with at most one
//! parent, or every one with at most one child: chains, 1p1c, TRUC, fan-outs and fan-ins). Other
//! clusters, where transactions share several parents and several children, are then made
//! optimal exactly ([`closure`]), as Core 31's spanning-forest search makes them within its budget.

use std::cell::Cell;
use std::cmp::Ordering;

mod closure;

thread_local! {
    /// The linearization work this thread has done: each cluster's size, squared, summed.
    static WORK: Cell<u64> = const { Cell::new(0) };
}

/// The linearization work this thread has done so far (each linearized cluster's size squared,
/// summed: [`linearize`] is quadratic). Read before and after a mempool call to charge the
/// caller for what the call linearized: replacement diagrams, evictions, packages.
pub fn work_on_this_thread() -> u64 {
    WORK.with(Cell::get)
}

/// Runs `call` and returns what it returned with the linearization work it did on this thread.
pub fn metered<T>(call: impl FnOnce() -> T) -> (T, u64) {
    let before = work_on_this_thread();
    let out = call();
    (out, work_on_this_thread().saturating_sub(before))
}

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

    /// `self` less `other` (a part of it), never below zero.
    pub fn minus(self, other: FeeFrac) -> FeeFrac {
        FeeFrac {
            fee: self.fee.saturating_sub(other.fee),
            size: self.size.saturating_sub(other.size),
        }
    }

    /// Compares fee rates exactly (cross-multiplied); an empty size counts as size 1.
    pub fn rate_cmp(&self, other: &FeeFrac) -> Ordering {
        let left = u128::from(self.fee) * u128::from(other.size.max(1));
        let right = u128::from(other.fee) * u128::from(self.size.max(1));
        left.cmp(&right)
    }
}

/// A fee and a size ordered by their rate alone, exactly ([`FeeFrac::rate_cmp`]): equal rates
/// are equal whatever the sizes. The key of every fee-rate order of the pool (eviction, the
/// chunk index, the Knots profile's block projection).
#[derive(Debug, Clone, Copy)]
pub struct ByRate(pub FeeFrac);

impl Ord for ByRate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.rate_cmp(&other.0)
    }
}

impl PartialOrd for ByRate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for ByRate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ByRate {}

/// A transaction of a cluster: its fee and size, and its parents (indices into the cluster).
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// Its fee and sigop-adjusted weight.
    pub feerate: FeeFrac,
    /// The cluster members it spends from.
    pub parents: Vec<usize>,
}

/// A topological order of `nodes` (parents first): by ancestor-set fee rate (repeatedly the not
/// yet ordered transaction whose not yet ordered ancestors with itself pay the highest rate,
/// those ancestors first; ties: the smaller set, then the lower index), then improved by Core's
/// `PostLinearize` (a backward and a forward pass), which makes it optimal for trees: clusters
/// where each transaction has at most one parent, or at most one child. Quadratic in the
/// cluster's size: about 64 × 64 steps for Core's largest cluster. Any other cluster of up to
/// 100 is then made optimal ([`closure::optimal_order`], within a budget of edge visits, which
/// count as work too) and post-linearized again.
pub fn linearize(nodes: &[Node]) -> Vec<usize> {
    let n = nodes.len() as u64;
    WORK.with(|w| w.set(w.get().saturating_add(n.saturating_mul(n))));
    let order = ancestor_set_order(nodes);
    let order = post_linearize_pass(nodes, &order, false);
    let order = post_linearize_pass(nodes, &order, true);
    if nodes.len() > EXACT_UP_TO || is_tree(nodes) {
        return order;
    }
    let mut spent = 0;
    let exact = closure::optimal_order(nodes, &order, closure::BUDGET, &mut spent);
    WORK.with(|w| w.set(w.get().saturating_add(spent)));
    let Some(order) = exact else {
        return order;
    };
    let order = post_linearize_pass(nodes, &order, false);
    post_linearize_pass(nodes, &order, true)
}

/// The largest cluster linearized exactly ([`closure`]): Core's 64, and room for a cluster a
/// reorg grew past it.
const EXACT_UP_TO: usize = 100;

/// Whether every transaction of the cluster has at most one parent in it, or every one at most
/// one child: a tree, which `PostLinearize` alone makes optimal.
fn is_tree(nodes: &[Node]) -> bool {
    let mut children = vec![0usize; nodes.len()];
    let mut one_parent = true;
    for node in nodes {
        let mut parents: Vec<usize> = node.parents.clone();
        parents.sort_unstable();
        parents.dedup();
        one_parent &= parents.len() <= 1;
        for p in parents.into_iter().filter(|&p| p < nodes.len()) {
            children[p] += 1;
        }
    }
    one_parent || children.iter().all(|&c| c <= 1)
}

/// The ancestor-set order of [`linearize`], each transaction's remaining ancestors' fee and
/// size kept up to date as sets leave (no set is summed twice).
fn ancestor_set_order(nodes: &[Node]) -> Vec<usize> {
    let ancestors = ancestor_lists(nodes);
    let mut descendants: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, set) in ancestors.iter().enumerate() {
        for &a in set {
            descendants[a].push(i);
        }
    }
    let mut left: Vec<(FeeFrac, usize)> = ancestors
        .iter()
        .map(|set| {
            let sum = set
                .iter()
                .fold(FeeFrac::default(), |s, &a| s.plus(nodes[a].feerate));
            (sum, set.len())
        })
        .collect();
    let mut done = vec![false; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    while order.len() < nodes.len() {
        let best = (0..nodes.len()).filter(|&i| !done[i]).reduce(|best, i| {
            let (rate, count) = left[i];
            let (best_rate, best_count) = left[best];
            match rate.rate_cmp(&best_rate) {
                Ordering::Greater => i,
                Ordering::Equal if count < best_count => i,
                _ => best,
            }
        });
        let Some(pick) = best else {
            break;
        };
        for &a in &ancestors[pick] {
            if done[a] {
                continue;
            }
            done[a] = true;
            order.push(a);
            for &d in &descendants[a] {
                let (sum, count) = &mut left[d];
                *sum = sum.minus(nodes[a].feerate);
                *count = count.saturating_sub(1);
            }
        }
    }
    order
}

/// Each node with its ancestors, in a topological order of the cluster (Kahn's, lowest index
/// first); a node on a cycle, which transactions cannot form, comes after the rest.
fn ancestor_lists(nodes: &[Node]) -> Vec<Vec<usize>> {
    let n = nodes.len();
    let parents: Vec<Vec<usize>> = nodes
        .iter()
        .map(|node| {
            let mut p: Vec<usize> = node.parents.iter().copied().filter(|&p| p < n).collect();
            p.sort_unstable();
            p.dedup();
            p
        })
        .collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut waiting: Vec<usize> = parents.iter().map(Vec::len).collect();
    for (i, ps) in parents.iter().enumerate() {
        for &p in ps {
            children[p].push(i);
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut topo = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        topo.push(i);
        for &c in &children[i] {
            waiting[c] -= 1;
            if waiting[c] == 0 {
                ready.insert(c);
            }
        }
    }
    let placed: Vec<bool> = {
        let mut placed = vec![false; n];
        topo.iter().for_each(|&i| placed[i] = true);
        placed
    };
    topo.extend((0..n).filter(|&i| !placed[i]));
    let mut position = vec![0usize; n];
    for (at, &i) in topo.iter().enumerate() {
        position[i] = at;
    }
    let mut ancestors: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut mark = vec![usize::MAX; n];
    for &i in &topo {
        let mut set = vec![i];
        mark[i] = i;
        for &p in &parents[i] {
            for &a in &ancestors[p] {
                if mark[a] != i {
                    mark[a] = i;
                    set.push(a);
                }
            }
        }
        set.sort_unstable_by_key(|&a| position[a]);
        ancestors[i] = set;
    }
    ancestors
}

/// A group of Core's `PostLinearize`: members in order, and their fee and size.
struct Group {
    members: Vec<usize>,
    feerate: FeeFrac,
}

/// One pass of Core's `PostLinearize` (cluster_linearize.h) over `order`, `forward` or from
/// the back: each transaction starts a group placed last (first, going backward); while the
/// group next to it the other way pays less (more, going backward) it merges with it if one
/// depends on the other, else the two swap. The result is never worse, its chunks are
/// connected, and a forward pass makes a cluster whose transactions have at most one child
/// optimal, a backward one a cluster whose transactions have at most one parent.
fn post_linearize_pass(nodes: &[Node], order: &[usize], forward: bool) -> Vec<usize> {
    // Going backward, `groups` holds the final order reversed: the group before a position is
    // the one after it in the final order.
    let mut groups: Vec<Group> = Vec::with_capacity(order.len());
    let walk: Box<dyn Iterator<Item = &usize>> = match forward {
        true => Box::new(order.iter()),
        false => Box::new(order.iter().rev()),
    };
    for &i in walk {
        groups.push(Group {
            members: vec![i],
            feerate: nodes[i].feerate,
        });
        let mut at = groups.len() - 1;
        while at > 0 {
            let wanted = match forward {
                true => Ordering::Less,
                false => Ordering::Greater,
            };
            if groups[at - 1].feerate.rate_cmp(&groups[at].feerate) != wanted {
                break;
            }
            // Which of the two comes first in the final order.
            let (first, second) = match forward {
                true => (at - 1, at),
                false => (at, at - 1),
            };
            if depends(nodes, &groups[second].members, &groups[first].members) {
                let mut members = std::mem::take(&mut groups[first].members);
                members.extend_from_slice(&groups[second].members);
                let feerate = groups[first].feerate.plus(groups[second].feerate);
                groups[at - 1] = Group { members, feerate };
                groups.remove(at);
            } else {
                groups.swap(at - 1, at);
            }
            at -= 1;
        }
    }
    let mut out: Vec<usize> = Vec::with_capacity(order.len());
    match forward {
        true => groups
            .iter()
            .for_each(|g| out.extend_from_slice(&g.members)),
        false => groups
            .iter()
            .rev()
            .for_each(|g| out.extend_from_slice(&g.members)),
    }
    out
}

/// Whether any of `later` spends from any of `earlier`.
fn depends(nodes: &[Node], later: &[usize], earlier: &[usize]) -> bool {
    later
        .iter()
        .any(|&l| nodes[l].parents.iter().any(|p| earlier.contains(p)))
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

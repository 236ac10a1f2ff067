//! An optimal linearization of any cluster, where [`super::linearize`]'s ancestor sets and
//! `PostLinearize` are optimal only for trees: repeatedly the remaining transactions' subset of
//! the highest fee rate that holds all its remaining ancestors (the first chunk of every optimal
//! linearization, cluster_linearize.h), found exactly. Core 31 searches for it with its
//! spanning-forest algorithm within a budget; here each candidate rate λ is tested by a maximum
//! weight closure (each transaction weighing its fee less λ times its size, a minimum cut of a
//! graph of the cluster: Picard's reduction), and λ is raised to the rate of the closure found
//! until none beats it (Dinkelbach's method). The diagram is the optimal one, so replacements are
//! judged as Core judges them whenever its search ends optimal.

use std::collections::VecDeque;

use super::{chunked, FeeFrac, Node};

/// Capacity standing for "never cut": a child's edge to its parent.
const NEVER: i128 = i128::MAX / 4;

/// Most edge visits one linearization's minimum cuts may make (Core 31 caps its search too,
/// `ACCEPTABLE_COST`): a dense cluster of 64 takes some tens of thousands; past this the
/// caller's order stands.
pub(super) const BUDGET: u64 = 200_000;

/// An optimal linearization of `nodes`, each chunk's members in the order `order` (any
/// topological order, the better the fewer steps) gives them; `None` once the minimum cuts have
/// visited `budget` edges. Adds the edges visited to `spent`.
pub(super) fn optimal_order(
    nodes: &[Node],
    order: &[usize],
    budget: u64,
    spent: &mut u64,
) -> Option<Vec<usize>> {
    let mut left = vec![true; nodes.len()];
    let mut out = Vec::with_capacity(nodes.len());
    while out.len() < nodes.len() {
        let rest: Vec<usize> = order.iter().copied().filter(|&i| left[i]).collect();
        let Some(first) = chunked(nodes, &rest).into_iter().next() else {
            break;
        };
        let best = best_closure(nodes, &left, first.members, spent);
        if *spent > budget {
            return None;
        }
        let mut take = vec![false; nodes.len()];
        best.iter().for_each(|&i| take[i] = true);
        for &i in &rest {
            if take[i] {
                left[i] = false;
                out.push(i);
            }
        }
    }
    Some(out)
}

/// The subset of the `left` transactions with the highest fee rate that holds its remaining
/// ancestors, starting from such a subset, `start`.
fn best_closure(nodes: &[Node], left: &[bool], start: Vec<usize>, spent: &mut u64) -> Vec<usize> {
    let mut best = start;
    loop {
        let rate = total(nodes, &best);
        let weights: Vec<i128> = (nodes.iter())
            .map(|n| {
                i128::from(n.feerate.fee) * i128::from(rate.size.max(1))
                    - i128::from(n.feerate.size) * i128::from(rate.fee)
            })
            .collect();
        let found = max_weight_closure(nodes, left, &weights, spent);
        let gain: i128 = found.iter().map(|&i| weights[i]).sum();
        if found.is_empty() || gain <= 0 {
            return best;
        }
        best = found;
    }
}

/// The fee and size of `members` together.
fn total(nodes: &[Node], members: &[usize]) -> FeeFrac {
    (members.iter()).fold(FeeFrac::default(), |s, &i| s.plus(nodes[i].feerate))
}

/// The `left` transactions' subset of the most total weight that holds its remaining ancestors:
/// the source side of a minimum cut (source to each positive weight, each negative weight to
/// the sink, each child to its parents never cut).
fn max_weight_closure(
    nodes: &[Node],
    left: &[bool],
    weights: &[i128],
    spent: &mut u64,
) -> Vec<usize> {
    let n = nodes.len();
    let (source, sink) = (n, n + 1);
    let mut flow = Flow::new(n + 2);
    for (i, node) in nodes.iter().enumerate().filter(|(i, _)| left[*i]) {
        match weights[i] {
            w if w > 0 => flow.edge(source, i, w),
            w if w < 0 => flow.edge(i, sink, -w),
            _ => {}
        }
        for &p in node.parents.iter().filter(|&&p| p < n && left[p]) {
            flow.edge(i, p, NEVER);
        }
    }
    flow.max_flow(source, sink);
    *spent = spent.saturating_add(flow.visits);
    let reached = flow.reachable(source);
    (0..n).filter(|&i| left[i] && reached[i]).collect()
}

/// A flow network for Dinic's maximum flow.
struct Flow {
    /// Each edge: (to, remaining capacity); an edge's reverse is at its index xor 1.
    edges: Vec<(usize, i128)>,
    /// Each vertex's edges.
    out: Vec<Vec<usize>>,
    level: Vec<u32>,
    next: Vec<usize>,
    /// Edges looked at so far: the work done.
    visits: u64,
}

impl Flow {
    fn new(vertices: usize) -> Flow {
        Flow {
            edges: Vec::new(),
            out: vec![Vec::new(); vertices],
            level: vec![0; vertices],
            next: vec![0; vertices],
            visits: 0,
        }
    }

    fn edge(&mut self, from: usize, to: usize, capacity: i128) {
        self.out[from].push(self.edges.len());
        self.edges.push((to, capacity));
        self.out[to].push(self.edges.len());
        self.edges.push((from, 0));
    }

    fn max_flow(&mut self, source: usize, sink: usize) {
        while self.levels(source, sink) {
            self.next.iter_mut().for_each(|n| *n = 0);
            while self.push(source, sink, NEVER) > 0 {}
        }
    }

    /// Levels by breadth-first search over edges with room; whether the sink is reached.
    fn levels(&mut self, source: usize, sink: usize) -> bool {
        self.level.iter_mut().for_each(|l| *l = u32::MAX);
        self.level[source] = 0;
        let mut queue = VecDeque::from([source]);
        while let Some(v) = queue.pop_front() {
            self.visits += self.out[v].len() as u64;
            for &e in &self.out[v] {
                let (to, room) = self.edges[e];
                if room > 0 && self.level[to] == u32::MAX {
                    self.level[to] = self.level[v] + 1;
                    queue.push_back(to);
                }
            }
        }
        self.level[sink] != u32::MAX
    }

    /// Pushes up to `limit` from `v` toward the sink along rising levels; what it pushed.
    fn push(&mut self, v: usize, sink: usize, limit: i128) -> i128 {
        if v == sink {
            return limit;
        }
        while self.next[v] < self.out[v].len() {
            self.visits += 1;
            let e = self.out[v][self.next[v]];
            let (to, room) = self.edges[e];
            if room > 0 && self.level[to] == self.level[v] + 1 {
                let pushed = self.push(to, sink, limit.min(room));
                if pushed > 0 {
                    self.edges[e].1 -= pushed;
                    self.edges[e ^ 1].1 += pushed;
                    return pushed;
                }
            }
            self.next[v] += 1;
        }
        0
    }

    /// The vertices reachable from `source` over edges with room left.
    fn reachable(&self, source: usize) -> Vec<bool> {
        let mut seen = vec![false; self.out.len()];
        seen[source] = true;
        let mut stack = vec![source];
        while let Some(v) = stack.pop() {
            for &e in &self.out[v] {
                let (to, room) = self.edges[e];
                if room > 0 && !seen[to] {
                    seen[to] = true;
                    stack.push(to);
                }
            }
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dense cluster of `n`: each transaction spends up to four of the five before it.
    fn dense(n: usize) -> Vec<Node> {
        (0..n)
            .map(|i| Node {
                feerate: FeeFrac::new(
                    1_000 + (i as u64 * 7_919) % 50_000,
                    400 + (i as u64 * 31) % 4_000,
                ),
                parents: (i.saturating_sub(4)..i).collect(),
            })
            .collect()
    }

    #[test]
    fn the_search_stops_at_its_budget_and_counts_its_work() {
        let nodes = dense(64);
        let order: Vec<usize> = (0..64).collect();
        let mut spent = 0;
        let found = optimal_order(&nodes, &order, BUDGET, &mut spent);
        assert!(found.is_some(), "a dense 64 fits the budget: {spent} edges");
        assert!(spent > 0 && spent <= BUDGET, "{spent}");
        let mut again = 0;
        assert_eq!(optimal_order(&nodes, &order, spent / 2, &mut again), None);
        assert!(again > spent / 2);
    }
}

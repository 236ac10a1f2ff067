//! Core 31's cluster limits (the cluster mempool, txmempool.cpp's `CheckMemPoolPolicyLimits`
//! over txgraph.cpp's `IsOversized`): a cluster is a set of mempool transactions connected by
//! spending each other, and none may grow past 64 transactions (`DEFAULT_CLUSTER_LIMIT`) or
//! 101,000 vbytes (`DEFAULT_CLUSTER_SIZE_LIMIT_KVB`, counted as 404,000 sigop-adjusted weight
//! units). A transaction that would join clusters into one past either limit is refused
//! (`too-large-cluster`). They replace the ancestor and descendant limits and the CPFP
//! carve-out of Core 30 and Knots (`limits`), which the Knots profile keeps.
//!
//! A walk visits at most 64 transactions besides the newcomers before it stops, so a check
//! costs about 64 times a transaction's inputs and children whatever the pool holds.

use std::collections::{HashMap, HashSet};

use bitcoin::{Transaction, Txid};

use super::linearize::{chunks, components, linearize, sub_cluster, FeeFrac, Node};
use super::{Inner, MempoolEntry};
use crate::policy::Rejection;

/// Most transactions in a cluster (Core's `DEFAULT_CLUSTER_LIMIT`).
pub const CLUSTER_COUNT_LIMIT: usize = 64;
/// Most sigop-adjusted weight of a cluster: 101 kvB (Core's `DEFAULT_CLUSTER_SIZE_LIMIT_KVB`
/// times 1,000, times `WITNESS_SCALE_FACTOR`, as txmempool.cpp hands it to the graph).
pub const CLUSTER_WEIGHT_LIMIT: u64 = 101_000 * 4;

/// Transactions about to join the pool: what they spend, and their size.
pub(super) struct Newcomers<'a> {
    /// The transactions.
    pub txs: &'a [&'a Transaction],
    /// Their sigop-adjusted weight together (Core's `GetSigOpsAdjustedWeight`).
    pub weight: u64,
}

impl Inner {
    /// Refuses `new` if, with the pool as it is without `gone` (what they replace), the cluster
    /// they would join (their in-mempool parents' clusters merged, and themselves) holds more
    /// than [`CLUSTER_COUNT_LIMIT`] transactions or [`CLUSTER_WEIGHT_LIMIT`] weight.
    pub(super) fn check_cluster_limits(
        &self,
        new: &Newcomers,
        gone: &HashSet<Txid>,
    ) -> Result<(), Rejection> {
        let own: HashSet<Txid> = new.txs.iter().map(|t| t.compute_txid()).collect();
        let seeds = new
            .txs
            .iter()
            .flat_map(|t| &t.input)
            .map(|i| i.previous_output.txid)
            .filter(|p| !own.contains(p));
        let room = CLUSTER_COUNT_LIMIT.saturating_sub(new.txs.len());
        let Some(weight) = self.cluster_weight(seeds, gone, room) else {
            return Err(Rejection::TooLargeCluster);
        };
        if new.txs.len() > CLUSTER_COUNT_LIMIT
            || weight.saturating_add(new.weight) > CLUSTER_WEIGHT_LIMIT
        {
            return Err(Rejection::TooLargeCluster);
        }
        Ok(())
    }

    /// Refuses a package (`txs`, sigop-adjusted `weights`) if any cluster it would make is over
    /// the limits: its members fall into groups that spend each other or join the same mempool
    /// cluster, and each group is counted with the mempool clusters it joins (txgraph's
    /// `IsOversized` over the staged package: unrelated members are separate clusters).
    pub(super) fn check_package_clusters(
        &self,
        txs: &[&Transaction],
        weights: &[u64],
    ) -> Result<(), Rejection> {
        let ids: Vec<Txid> = txs.iter().map(|t| t.compute_txid()).collect();
        let mut joined: Vec<HashMap<Txid, u64>> = Vec::with_capacity(txs.len());
        for tx in txs {
            let seeds = tx.input.iter().map(|i| i.previous_output.txid);
            let found = self.cluster_members(seeds, &HashSet::new(), CLUSTER_COUNT_LIMIT);
            joined.push(found.ok_or(Rejection::TooLargeCluster)?);
        }
        // Groups by relabelling (a package has at most 25 members).
        let mut group: Vec<usize> = (0..txs.len()).collect();
        for (i, tx) in txs.iter().enumerate() {
            for j in 0..i {
                let spends = tx
                    .input
                    .iter()
                    .any(|inp| inp.previous_output.txid == ids[j]);
                let share = joined[i].keys().any(|t| joined[j].contains_key(t));
                if (spends || share) && group[i] != group[j] {
                    let (from, to) = (group[i], group[j]);
                    group
                        .iter_mut()
                        .filter(|g| **g == from)
                        .for_each(|g| *g = to);
                }
            }
        }
        for label in 0..txs.len() {
            let members: Vec<usize> = (0..txs.len()).filter(|&i| group[i] == label).collect();
            let mut pool: HashMap<Txid, u64> = HashMap::new();
            members.iter().for_each(|&i| pool.extend(&joined[i]));
            let count = members.len() + pool.len();
            let weight: u64 =
                members.iter().map(|&i| weights[i]).sum::<u64>() + pool.values().sum::<u64>();
            if count > CLUSTER_COUNT_LIMIT || weight > CLUSTER_WEIGHT_LIMIT {
                return Err(Rejection::TooLargeCluster);
            }
        }
        Ok(())
    }

    /// The mempool transactions connected to `seeds` (those of them in the pool) without
    /// passing through `gone`, with their sigop-adjusted weights, or `None` once they are more
    /// than `room`: the walk stops there.
    fn cluster_members(
        &self,
        seeds: impl Iterator<Item = Txid>,
        gone: &HashSet<Txid>,
        room: usize,
    ) -> Option<HashMap<Txid, u64>> {
        let mut seen: HashMap<Txid, u64> = HashMap::new();
        let mut stack: Vec<Txid> = seeds.collect();
        while let Some(id) = stack.pop() {
            if gone.contains(&id) || seen.contains_key(&id) {
                continue;
            }
            let Some(entry) = self.txs.get(&id) else {
                continue;
            };
            seen.insert(id, entry.adjusted_weight());
            if seen.len() > room {
                return None;
            }
            stack.extend(self.relatives(id, entry));
        }
        Some(seen)
    }

    /// The sigop-adjusted weight of the mempool transactions connected to `seeds` (those of
    /// them in the pool) without passing through `gone`, or `None` once they are more than
    /// `room`: the walk stops there.
    fn cluster_weight(
        &self,
        seeds: impl Iterator<Item = Txid>,
        gone: &HashSet<Txid>,
        room: usize,
    ) -> Option<u64> {
        let members = self.cluster_members(seeds, gone, room)?;
        Some(members.values().sum())
    }

    /// The whole clusters of `seeds` (those of them in the pool): every mempool transaction
    /// connected to one of them.
    pub(super) fn clusters_of(&self, seeds: impl Iterator<Item = Txid>) -> HashSet<Txid> {
        let mut seen: HashSet<Txid> = HashSet::new();
        let mut stack: Vec<Txid> = seeds.collect();
        while let Some(id) = stack.pop() {
            if seen.contains(&id) {
                continue;
            }
            let Some(entry) = self.txs.get(&id) else {
                continue;
            };
            seen.insert(id);
            stack.extend(self.relatives(id, entry));
        }
        seen
    }

    /// How many distinct clusters `txs` belong to, counting no further than `stop`.
    pub(super) fn cluster_count(&self, txs: &HashSet<Txid>, stop: usize) -> usize {
        let mut counted: HashSet<Txid> = HashSet::new();
        let mut clusters = 0;
        for id in txs {
            if clusters >= stop {
                break;
            }
            if counted.contains(id) || !self.txs.contains_key(id) {
                continue;
            }
            counted.extend(self.clusters_of(std::iter::once(*id)));
            clusters += 1;
        }
        clusters
    }

    /// A mempool transaction's parents and children in the pool.
    fn relatives<'a>(
        &'a self,
        id: Txid,
        entry: &'a MempoolEntry,
    ) -> impl Iterator<Item = Txid> + 'a {
        let parents = entry.tx.input.iter().map(|i| i.previous_output.txid);
        let children = self.children.get(&id).into_iter().flatten().copied();
        parents.chain(children)
    }

    /// The chunks of the clusters `members` (mempool transactions) and `newcomers` form among
    /// themselves, each cluster linearized ([`linearize`]) and chunked on its own, all the
    /// chunks in decreasing fee rate: a fee-rate diagram (txgraph.cpp's
    /// `GetMainStagingDiagrams`).
    pub(super) fn diagram(
        &self,
        members: &HashSet<Txid>,
        newcomers: &[(&Transaction, FeeFrac)],
    ) -> Vec<FeeFrac> {
        let mut ids: Vec<Txid> = members
            .iter()
            .filter(|id| self.txs.contains_key(*id))
            .copied()
            .collect();
        ids.sort();
        let nodes = self.graph_of(&ids, newcomers);
        let mut diagram: Vec<FeeFrac> = components(&nodes)
            .into_iter()
            .flat_map(|component| {
                let part = sub_cluster(&nodes, &component);
                chunks(&part, &linearize(&part))
            })
            .collect();
        diagram.sort_by(|a, b| b.rate_cmp(a));
        diagram
    }

    /// The graph of the mempool transactions `ids` and `newcomers` (last, in order), for
    /// [`linearize`]: each one's fee and sigop-adjusted weight, and its parents among them.
    pub(super) fn graph_of(
        &self,
        ids: &[Txid],
        newcomers: &[(&Transaction, FeeFrac)],
    ) -> Vec<Node> {
        let mut txs: Vec<(&Transaction, FeeFrac)> = ids
            .iter()
            .filter_map(|id| self.txs.get(id))
            .map(|e| (&e.tx, FeeFrac::new(e.fee, e.adjusted_weight())))
            .collect();
        let mut at: HashMap<Txid, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        for (tx, rate) in newcomers {
            at.insert(tx.compute_txid(), txs.len());
            txs.push((tx, *rate));
        }
        txs.iter()
            .map(|(tx, feerate)| Node {
                feerate: *feerate,
                parents: tx
                    .input
                    .iter()
                    .filter_map(|i| at.get(&i.previous_output.txid).copied())
                    .collect(),
            })
            .collect()
    }
}

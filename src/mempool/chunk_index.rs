//! Core 31's eviction order (txgraph.cpp's chunk index and `GetWorstMainChunk`, txmempool.cpp's
//! `TrimToSize`): every cluster is linearized and cut into chunks, and a full pool evicts the
//! worst chunk of all, the one a miner would take last: the lowest fee rate; among equal rates,
//! the one with more of its cluster's equal-rate chunks before it (so the later of a cluster's
//! chunks); then the one whose highest txid is higher (`CompareMainTransactions` with the
//! mempool's txid fallback order). The worst chunk is the last of its cluster, so nothing it
//! leaves behind spends from it, and a parent its child pays for leaves only with the child.
//!
//! A transaction that enters, and the neighbours of one that leaves, mark their clusters
//! changed; when the write lock that changed them is released (and before an eviction reads the
//! index), each changed cluster (at most 64 transactions under Core's limits) is linearized
//! again, once however many changes it took; a lone transaction is its own chunk, with no
//! linearization. The first eviction of a full pool so finds the index ready, as Core's
//! txgraph keeps its chunk index.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, HashMap, HashSet};

use bitcoin::Txid;

use super::linearize::{chunked, linearize, ByRate, FeeFrac};
use super::{memory, Inner};

/// The chunks of every mempool cluster, worst first.
#[derive(Debug, Default)]
pub(super) struct ChunkIndex {
    /// Every chunk's key, the worst first.
    worst_first: BTreeSet<ChunkKey>,
    /// Each chunk, by its key's number.
    chunks: HashMap<u64, IndexedChunk>,
    /// The chunk each mempool transaction was last put in (possibly one since dropped).
    chunk_of: HashMap<Txid, u64>,
    /// Transactions whose clusters changed since their chunks were computed.
    changed: HashSet<Txid>,
    /// The next chunk's number.
    next: u64,
    /// The memory Core's cluster graph takes for the clusters and chunks indexed
    /// ([`memory::cluster_usage`], [`memory::CHUNK_USAGE`]).
    usage: u64,
}

/// A chunk in the index: its key, its members and the memory Core's graph takes for it
/// ([`memory::CHUNK_USAGE`]; the first of a cluster's chunks also carries the cluster's).
#[derive(Debug)]
struct IndexedChunk {
    key: ChunkKey,
    members: Vec<Txid>,
    usage: u64,
}

/// A chunk's place in the eviction order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ChunkKey {
    rate: ByRate,
    /// The size of the run of equal-rate chunks of its cluster up to and including it.
    equal_rate_prefix: Reverse<u64>,
    max_txid: Reverse<Txid>,
    number: u64,
}

/// The chunk a full pool evicts next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WorstChunk {
    /// Its members, parents first.
    pub txids: Vec<Txid>,
    /// Their fee and sigop-adjusted weight together.
    pub feerate: FeeFrac,
}

impl ChunkIndex {
    /// A transaction entered: its cluster changed.
    pub(super) fn entered(&mut self, txid: Txid) {
        self.changed.insert(txid);
    }

    /// A transaction left: its chunk is dropped, and the clusters of `neighbours` (its parents
    /// and children still in the pool), which hold every part its cluster fell into, changed.
    pub(super) fn left(&mut self, txid: &Txid, neighbours: impl Iterator<Item = Txid>) {
        self.changed.remove(txid);
        if let Some(number) = self.chunk_of.remove(txid) {
            self.drop_chunk(number);
        }
        self.changed.extend(neighbours);
    }

    /// The memory Core's cluster graph takes for what the index holds.
    pub(super) fn usage(&self) -> u64 {
        self.usage
    }

    fn drop_chunk(&mut self, number: u64) {
        if let Some(chunk) = self.chunks.remove(&number) {
            self.worst_first.remove(&chunk.key);
            self.usage -= chunk.usage;
        }
    }

    /// Puts one cluster's chunks (members and fee rates, best first) in the index.
    fn insert_cluster(&mut self, chunks: Vec<(Vec<Txid>, FeeFrac)>) {
        let size = chunks.iter().map(|(members, _)| members.len()).sum();
        let mut cluster_usage = memory::cluster_usage(size);
        let mut run: Option<FeeFrac> = None;
        for (members, feerate) in chunks {
            let prefix = match run {
                Some(before) if before.rate_cmp(&feerate) == Ordering::Equal => {
                    before.plus(feerate)
                }
                _ => feerate,
            };
            run = Some(prefix);
            let number = self.next;
            self.next += 1;
            let Some(max_txid) = members.iter().max().copied() else {
                continue;
            };
            for txid in &members {
                self.chunk_of.insert(*txid, number);
            }
            let key = ChunkKey {
                rate: ByRate(feerate),
                equal_rate_prefix: Reverse(prefix.size),
                max_txid: Reverse(max_txid),
                number,
            };
            let usage = memory::CHUNK_USAGE + std::mem::take(&mut cluster_usage);
            self.usage += usage;
            self.worst_first.insert(key);
            let chunk = IndexedChunk {
                key,
                members,
                usage,
            };
            self.chunks.insert(number, chunk);
        }
    }
}

impl Inner {
    /// The chunk a full pool evicts next (Core's `GetWorstMainChunk`), the changed clusters
    /// linearized first. A chunk naming a transaction no longer in the pool, which the
    /// refresh leaves none of, is dropped all the same, so an eviction always removes one.
    pub(super) fn worst_chunk(&mut self) -> Option<WorstChunk> {
        self.refresh_chunks();
        loop {
            let key = *self.chunk_index.worst_first.first()?;
            let members = self.chunk_index.chunks.get(&key.number).map(|c| &c.members);
            match members {
                Some(txids) if txids.iter().all(|t| self.txs.contains_key(t)) => {
                    return Some(WorstChunk {
                        txids: txids.clone(),
                        feerate: key.rate.0,
                    })
                }
                _ => self.chunk_index.drop_chunk(key.number),
            }
        }
    }

    /// Linearizes every changed cluster again, once each, and replaces its chunks.
    pub(super) fn refresh_chunks(&mut self) {
        let changed = std::mem::take(&mut self.chunk_index.changed);
        let mut done: HashSet<Txid> = HashSet::new();
        for txid in changed {
            if done.contains(&txid) || !self.txs.contains_key(&txid) {
                continue;
            }
            let cluster = self.clusters_of(std::iter::once(txid));
            for member in &cluster {
                if let Some(number) = self.chunk_index.chunk_of.remove(member) {
                    self.chunk_index.drop_chunk(number);
                }
            }
            let chunks = self.chunks_of_cluster(&cluster);
            self.chunk_index.insert_cluster(chunks);
            done.extend(cluster);
        }
    }

    /// One cluster's chunks, best first, each with its members parents first.
    fn chunks_of_cluster(&self, cluster: &HashSet<Txid>) -> Vec<(Vec<Txid>, FeeFrac)> {
        if let (1, Some(entry)) = (cluster.len(), cluster.iter().find_map(|t| self.txs.get(t))) {
            let rate = FeeFrac::new(entry.fee, entry.adjusted_weight());
            return vec![(vec![entry.txid], rate)];
        }
        let mut ids: Vec<Txid> = cluster.iter().copied().collect();
        ids.sort();
        let nodes = self.graph_of(&ids, &[]);
        chunked(&nodes, &linearize(&nodes))
            .into_iter()
            .map(|chunk| {
                let members = chunk.members.iter().map(|&m| ids[m]).collect();
                (members, chunk.feerate)
            })
            .collect()
    }

    /// Panics unless the last write left nothing to linearize and the index holds exactly the
    /// chunks a fresh linearization of every cluster gives, every transaction in one of them, and
    /// counts the memory Core's graph takes for them as a fresh count does.
    #[cfg(test)]
    pub(super) fn assert_chunks_fresh(&mut self) {
        assert!(
            self.chunk_index.changed.is_empty(),
            "the last write left clusters to linearize"
        );
        self.refresh_chunks();
        let mut kept: Vec<(Vec<Txid>, u64, u64)> = (self.chunk_index.chunks.values())
            .map(|c| (c.members.clone(), c.key.rate.0.fee, c.key.rate.0.size))
            .collect();
        let mut fresh = Vec::new();
        let mut usage = 0;
        let mut seen: HashSet<Txid> = HashSet::new();
        let ids: Vec<Txid> = self.txs.keys().copied().collect();
        for id in ids {
            if seen.contains(&id) {
                continue;
            }
            let cluster = self.clusters_of(std::iter::once(id));
            let chunks = self.chunks_of_cluster(&cluster);
            usage +=
                memory::cluster_usage(cluster.len()) + memory::CHUNK_USAGE * chunks.len() as u64;
            fresh
                .extend((chunks.into_iter()).map(|(members, rate)| (members, rate.fee, rate.size)));
            seen.extend(cluster);
        }
        assert_eq!(
            self.chunk_index.usage, usage,
            "the graph's memory as counted anew"
        );
        kept.sort();
        fresh.sort();
        assert_eq!(
            kept, fresh,
            "the index holds a fresh linearization's chunks"
        );
        assert_eq!(self.chunk_index.worst_first.len(), kept.len());
        for (txid, number) in &self.chunk_index.chunk_of {
            let chunk = &self.chunk_index.chunks[number];
            assert!(chunk.members.contains(txid) && self.txs.contains_key(txid));
        }
        assert_eq!(self.chunk_index.chunk_of.len(), self.txs.len());
    }
}

//! The pool's tables under its lock ([`Inner`]): what enters and leaves is written to every one
//! of them at once, and the write guard ([`Writing`]) brings Core's chunk index up to date as
//! it is released.

use std::collections::{BTreeSet, HashMap, HashSet};

use bitcoin::{OutPoint, Transaction, Txid, Wtxid};

use super::{chunk_index, evict, memory, MempoolEntry, Rejection};
use crate::types::ScriptHash;

/// The pool's tables, under the mempool's lock: every transaction, by txid and wtxid, what
/// spends each outpoint, each script hash's transactions, each transaction's children, the
/// indexes eviction reads, and what Core's memory count needs.
///
/// Adding and removing are here; each policy rule over the tables is in its own file, as
/// `Mempool`'s are: `relatives.rs`, `limits.rs`, `cluster.rs`, `truc.rs`, `evict.rs`,
/// `chunk_index.rs`.
#[derive(Default)]
pub(super) struct Inner {
    pub(super) txs: HashMap<Txid, MempoolEntry>,
    /// The txid of each transaction by its wtxid (peers announce and ask by wtxid).
    pub(super) by_wtxid: HashMap<Wtxid, Txid>,
    /// Which mempool transaction spends an outpoint.
    pub(super) spends: HashMap<OutPoint, Txid>,
    /// Mempool transactions per script hash.
    pub(super) scripts: HashMap<ScriptHash, HashSet<Txid>>,
    /// The mempool transactions spending each mempool transaction's outputs (Core's
    /// `m_children`): descendants are found without reading any transaction's outputs.
    pub(super) children: HashMap<Txid, HashSet<Txid>>,
    /// Every transaction by the time it entered, oldest first: expiry reads only what expires.
    pub(super) by_time: BTreeSet<(i64, Txid)>,
    /// Knots's profile: every transaction by its descendant score, lowest first: eviction reads
    /// only what it evicts ([`evict`]).
    pub(super) by_score: BTreeSet<evict::EvictKey>,
    /// Knots's profile: every transaction's fees and size with its descendants'.
    pub(super) with_descendants: HashMap<Txid, evict::Totals>,
    /// Core's profile: every cluster's chunks, worst first ([`chunk_index`]).
    pub(super) chunk_index: chunk_index::ChunkIndex,
    pub(super) total_vsize: u64,
    /// The memory Core counts for the transactions themselves ([`memory::transaction_usage`]).
    pub(super) tx_usage: u64,
    /// Core's vector of wtxids in random order, its capacity as Core's would be.
    pub(super) randomized: memory::RandomizedCapacity,
    /// Links between a mempool parent and a mempool child (each in `children`).
    pub(super) links: u64,
    /// Whether version 3 transactions are held to the TRUC rules (`mempool_truc = enforce`).
    pub(super) enforce_truc: bool,
    /// Whether the chain limits are Core 31's clusters, not Knots's ancestors and descendants.
    pub(super) clusters: bool,
    /// Counts the times the mempool was taken to be changed: the fee rates computed at one
    /// count serve until the next ([`Mempool::fee_rates`]).
    pub(super) generation: u64,
}

impl Inner {
    pub(super) fn insert(&mut self, entry: MempoolEntry) {
        for input in &entry.tx.input {
            self.spends.insert(input.previous_output, entry.txid);
            let parent = input.previous_output.txid;
            if self.txs.contains_key(&parent)
                && self.children.entry(parent).or_default().insert(entry.txid)
            {
                self.links += 1;
            }
        }
        self.tx_usage += memory::transaction_usage(&entry.tx);
        self.randomized.entered();
        for sh in entry.scripthashes() {
            self.scripts.entry(sh).or_default().insert(entry.txid);
        }
        self.total_vsize += entry.vsize;
        self.by_time.insert((entry.time, entry.txid));
        self.by_wtxid.insert(entry.wtxid, entry.txid);
        let txid = entry.txid;
        self.txs.insert(txid, entry);
        match self.clusters {
            true => self.chunk_index.entered(txid),
            false => self.index_for_eviction(&txid),
        }
    }

    /// For a transaction about to be inserted: refuses it if it is in already or a mempool
    /// parent it spends (`from_parents`) has left; else the mempool transactions that spend the
    /// same outputs, which it must replace.
    pub(super) fn still_valid(
        &self,
        tx: &Transaction,
        txid: &Txid,
        from_parents: &[OutPoint],
    ) -> Result<HashSet<Txid>, Rejection> {
        if self.txs.contains_key(txid) {
            return Err(Rejection::AlreadyInMempool);
        }
        if let Some(gone) = from_parents
            .iter()
            .find(|op| !self.txs.contains_key(&op.txid))
        {
            return Err(Rejection::MissingInputs(*gone));
        }
        Ok(self.direct_conflicts(tx))
    }

    /// The mempool transactions spending what `tx` spends.
    pub(super) fn direct_conflicts(&self, tx: &Transaction) -> HashSet<Txid> {
        tx.input
            .iter()
            .filter_map(|i| self.spends.get(&i.previous_output))
            .copied()
            .collect()
    }

    /// Removes a transaction and everything spending its outputs; returns the touched scripts.
    pub(super) fn remove_with_descendants(
        &mut self,
        txid: &Txid,
        touched: &mut HashSet<ScriptHash>,
    ) {
        if !self.txs.contains_key(txid) {
            return;
        }
        let leaving = self.descendants(txid);
        self.detach(&leaving);
        for id in &leaving {
            self.take_out(id, touched);
        }
    }

    /// Removes the transactions that entered before `cutoff` with their descendants (Core's
    /// `CTxMemPool::Expire`, after `-mempoolexpiry`); returns how many left.
    pub(super) fn expire(&mut self, cutoff: i64, touched: &mut HashSet<ScriptHash>) -> usize {
        let before = self.txs.len();
        while let Some(&(time, id)) = self.by_time.first() {
            if time >= cutoff {
                break;
            }
            if self.remove_one_with_descendants(&id, touched) == 0 {
                // Never left behind by a removal; dropped all the same, so the loop ends.
                self.by_time.remove(&(time, id));
            }
        }
        before.saturating_sub(self.txs.len())
    }

    /// [`Inner::remove_with_descendants`], returning how many left.
    pub(super) fn remove_one_with_descendants(
        &mut self,
        id: &Txid,
        touched: &mut HashSet<ScriptHash>,
    ) -> usize {
        let before = self.txs.len();
        self.remove_with_descendants(id, touched);
        before.saturating_sub(self.txs.len())
    }

    /// The mempool transactions `tx` would replace: those spending what it spends, and their
    /// descendants.
    pub(super) fn replaced_by(&self, tx: &Transaction) -> HashSet<Txid> {
        tx.input
            .iter()
            .filter_map(|i| self.spends.get(&i.previous_output))
            .flat_map(|c| self.descendants(c))
            .collect()
    }

    /// Removes one transaction, leaving those that spend it (a block confirmed it: its outputs
    /// are now the chain's); adds the scripts it touched.
    pub(super) fn remove_one(
        &mut self,
        id: &Txid,
        touched: &mut HashSet<ScriptHash>,
    ) -> Option<MempoolEntry> {
        self.detach(&[*id]);
        self.take_out(id, touched)
    }

    /// Removes one transaction from every index, its ancestors' totals already without it
    /// ([`Inner::detach`]); adds the scripts it touched.
    pub(super) fn take_out(
        &mut self,
        id: &Txid,
        touched: &mut HashSet<ScriptHash>,
    ) -> Option<MempoolEntry> {
        let entry = self.txs.remove(id)?;
        match self.clusters {
            true => {
                let parents = entry.tx.input.iter().map(|i| i.previous_output.txid);
                let children = self.children.get(id).into_iter().flatten().copied();
                let neighbours: Vec<Txid> = parents
                    .chain(children)
                    .filter(|n| self.txs.contains_key(n))
                    .collect();
                self.chunk_index.left(id, neighbours.into_iter());
            }
            false => self.unindex_for_eviction(&entry),
        }
        self.total_vsize -= entry.vsize;
        self.tx_usage -= memory::transaction_usage(&entry.tx);
        self.randomized.left();
        self.by_time.remove(&(entry.time, *id));
        self.by_wtxid.remove(&entry.wtxid);
        for input in &entry.tx.input {
            if self.spends.get(&input.previous_output) == Some(id) {
                self.spends.remove(&input.previous_output);
            }
            let parent = input.previous_output.txid;
            if let Some(siblings) = self.children.get_mut(&parent) {
                if siblings.remove(id) {
                    self.links -= 1;
                }
                if siblings.is_empty() {
                    self.children.remove(&parent);
                }
            }
        }
        // Children that stay (their parent confirmed) have no mempool parent here any more.
        if let Some(children) = self.children.remove(id) {
            self.links -= children.len() as u64;
        }
        for sh in entry.scripthashes() {
            touched.insert(sh);
            if let Some(set) = self.scripts.get_mut(&sh) {
                set.remove(id);
                if set.is_empty() {
                    self.scripts.remove(&sh);
                }
            }
        }
        Some(entry)
    }

    /// The memory Core would count for this pool ([`memory`]): its transactions, the random-order
    /// vector, and the cluster graph (Core's profile; its chunks fresh) or the parent and child
    /// links (Knots's).
    pub(super) fn usage(&self) -> u64 {
        let graph = match self.clusters {
            true => memory::GRAPH_ENTRY * self.txs.len() as u64 + self.chunk_index.usage(),
            false => memory::LINK_USAGE * self.links,
        };
        self.tx_usage + self.randomized.usage() + graph
    }

    pub(super) fn descendants(&self, txid: &Txid) -> Vec<Txid> {
        let mut out = Vec::new();
        let mut stack = vec![*txid];
        let mut seen = HashSet::new();
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            out.push(id);
            stack.extend(self.children.get(&id).into_iter().flatten().copied());
        }
        out
    }
}

/// The mempool under its write lock. Released, it brings Core's chunk index up to date with
/// what the change touched ([`chunk_index`]), so an eviction never finds the whole pool to
/// linearize at once.
pub(super) struct Writing<'a>(pub(super) std::sync::RwLockWriteGuard<'a, Inner>);

impl std::ops::Deref for Writing<'_> {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl std::ops::DerefMut for Writing<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.0
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        if self.0.clusters {
            self.0.refresh_chunks();
        }
    }
}

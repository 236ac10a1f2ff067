//! Knots's (and Core 30's) chain limits on unconfirmed ancestors and descendants (`CalculateAncestorsAndCheckLimits`
//! in txmempool.cpp, the defaults of policy/policy.h) with the CPFP carve-out of
//! `MemPoolAccept::PreChecks`: a transaction is refused (`too-long-mempool-chain`) if it would
//! have more than 25 in-mempool ancestors with itself, or of more than 101,000 vbytes, or would
//! give an ancestor more than 25 descendants or 101,000 vbytes of them. The walks follow the
//! pool's children index and stop once a limit is passed, so a check costs at most about 25
//! ancestors times 27 descendants.

use std::collections::HashSet;

use bitcoin::{Transaction, Txid};

use super::cluster::Newcomers;
use super::truc::TRUC_VERSION;
use super::Inner;
use crate::policy::Rejection;

/// A set of chain limits (Core's `CTxMemPool::Limits`).
#[derive(Debug, Clone, Copy)]
struct Limits {
    ancestor_count: usize,
    ancestor_size: u64,
    descendant_count: usize,
    descendant_size: u64,
}

/// Core's defaults: `-limitancestorcount`, `-limitancestorsize`, `-limitdescendantcount`,
/// `-limitdescendantsize`.
const DEFAULT: Limits = Limits {
    ancestor_count: 25,
    ancestor_size: 101_000,
    descendant_count: 25,
    descendant_size: 101_000,
};

/// Largest transaction the carve-out takes (Core's `EXTRA_DESCENDANT_TX_SIZE_LIMIT`, vbytes).
const EXTRA_DESCENDANT_TX_SIZE_LIMIT: u64 = 10_000;

impl Inner {
    /// Refuses `tx` of `weight` sigop-adjusted weight units if it breaks the profile's limits
    /// with the pool as it is without `gone` (the transactions it replaces): Core's cluster
    /// limits ([`super::cluster`]) or Knots's chain limits. Past those, a transaction of at most
    /// 10,000 vbytes with a single in-mempool ancestor is still let in once more (the CPFP
    /// carve-out, for two-party contracts whose other side filled the descendant limit).
    pub(super) fn check_chain_limits(
        &self,
        tx: &Transaction,
        weight: u64,
        gone: &HashSet<Txid>,
    ) -> Result<(), Rejection> {
        if self.clusters {
            let newcomers = Newcomers { txs: &[tx], weight };
            return self.check_cluster_limits(&newcomers, gone);
        }
        let vsize = weight.div_ceil(4);
        let Err(message) = self.within(tx, vsize, &DEFAULT, gone) else {
            return Ok(());
        };
        // A version 3 transaction held to the TRUC rules gets no carve-out.
        let truc = self.enforce_truc && tx.version.0 == TRUC_VERSION;
        if vsize > EXTRA_DESCENDANT_TX_SIZE_LIMIT || truc {
            return Err(Rejection::TooLongChain(message));
        }
        let carve_out = Limits {
            ancestor_count: 2,
            descendant_count: DEFAULT.descendant_count + 1,
            descendant_size: DEFAULT.descendant_size + EXTRA_DESCENDANT_TX_SIZE_LIMIT,
            ..DEFAULT
        };
        self.within(tx, vsize, &carve_out, gone)
            .map_err(|_| Rejection::TooLongChain(message))
    }

    /// The mempool transactions `tx` spends from, except `gone`.
    fn parents_of(&self, tx: &Transaction, gone: &HashSet<Txid>) -> HashSet<Txid> {
        tx.input
            .iter()
            .map(|i| i.previous_output.txid)
            .filter(|p| self.txs.contains_key(p) && !gone.contains(p))
            .collect()
    }

    /// Refuses a package of transactions of `vsize` vbytes in all, as Core's
    /// `CheckPackageLimits`: taken together as one transaction, whether they spend each other
    /// or not, with the in-mempool parents of them all. The error is Core's.
    pub(super) fn check_package_limits(
        &self,
        txs: &[&Transaction],
        weights: &[u64],
        vsize: u64,
    ) -> Result<(), Rejection> {
        if self.clusters {
            return self.check_package_clusters(txs, weights);
        }
        self.check_package_chain_limits(txs, vsize)
            .map_err(Rejection::TooLongChain)
    }

    /// [`Inner::check_package_limits`] under Knots's chain limits.
    fn check_package_chain_limits(&self, txs: &[&Transaction], vsize: u64) -> Result<(), String> {
        let (count, limits) = (txs.len(), &DEFAULT);
        if count > limits.ancestor_count {
            let limit = limits.ancestor_count;
            return Err(format!(
                "package count {count} exceeds ancestor count limit [limit: {limit}]"
            ));
        }
        if count > limits.descendant_count {
            let limit = limits.descendant_count;
            return Err(format!(
                "package count {count} exceeds descendant count limit [limit: {limit}]"
            ));
        }
        if vsize > limits.ancestor_size {
            let limit = limits.ancestor_size;
            return Err(format!(
                "package size {vsize} exceeds ancestor size limit [limit: {limit}]"
            ));
        }
        if vsize > limits.descendant_size {
            let limit = limits.descendant_size;
            return Err(format!(
                "package size {vsize} exceeds descendant size limit [limit: {limit}]"
            ));
        }
        let none = HashSet::new();
        let parents: HashSet<Txid> = txs.iter().flat_map(|t| self.parents_of(t, &none)).collect();
        // Core counts the members as ancestors of each other: it may overestimate, and says so.
        self.within_staged(parents, count, vsize, limits, &none)
            .map_err(|e| match e.starts_with("too many unconfirmed parents") {
                true => e,
                false => format!("possibly {e}"),
            })
    }

    /// Walks `tx`'s ancestors as `CalculateAncestorsAndCheckLimits` does; the error is Core's.
    fn within(
        &self,
        tx: &Transaction,
        vsize: u64,
        limits: &Limits,
        gone: &HashSet<Txid>,
    ) -> Result<(), String> {
        self.within_staged(self.parents_of(tx, gone), 1, vsize, limits, gone)
    }

    /// The walk of [`Inner::within`] for `count` transactions of `vsize` vbytes in all that
    /// spend from `parents`.
    fn within_staged(
        &self,
        parents: HashSet<Txid>,
        count: usize,
        vsize: u64,
        limits: &Limits,
        gone: &HashSet<Txid>,
    ) -> Result<(), String> {
        if parents.len() + count > limits.ancestor_count {
            let limit = limits.ancestor_count;
            return Err(format!("too many unconfirmed parents [limit: {limit}]"));
        }
        // Every transaction staged or visited, so none is staged twice.
        let mut queued: HashSet<Txid> = parents.clone();
        let mut staged: Vec<Txid> = parents.into_iter().collect();
        let mut ancestors: HashSet<Txid> = HashSet::new();
        let mut size = vsize;
        while let Some(id) = staged.pop() {
            let Some(entry) = self.txs.get(&id) else {
                continue;
            };
            if !ancestors.insert(id) {
                continue;
            }
            size = size.saturating_add(entry.vsize);
            let (descendants, bytes) =
                self.descendant_totals(&id, gone, limits.descendant_count + 1);
            if bytes.saturating_add(vsize) > limits.descendant_size {
                let limit = limits.descendant_size;
                return Err(format!(
                    "exceeds descendant size limit for tx {id} [limit: {limit}]"
                ));
            }
            if descendants + count > limits.descendant_count {
                let limit = limits.descendant_count;
                return Err(format!("too many descendants for tx {id} [limit: {limit}]"));
            }
            if size > limits.ancestor_size {
                let limit = limits.ancestor_size;
                return Err(format!("exceeds ancestor size limit [limit: {limit}]"));
            }
            for parent in self.parents_of(&entry.tx, gone) {
                if queued.insert(parent) {
                    staged.push(parent);
                }
            }
            if staged.len() + ancestors.len() + count > limits.ancestor_count {
                let limit = limits.ancestor_count;
                return Err(format!("too many unconfirmed ancestors [limit: {limit}]"));
            }
        }
        Ok(())
    }

    /// How many transactions `id` and its descendants are (without `gone`) and their vbytes,
    /// counting no further than `stop` transactions.
    fn descendant_totals(&self, id: &Txid, gone: &HashSet<Txid>, stop: usize) -> (usize, u64) {
        let mut seen: HashSet<Txid> = HashSet::new();
        let mut stack = vec![*id];
        let mut size = 0u64;
        while let Some(t) = stack.pop() {
            if seen.len() > stop {
                break;
            }
            if gone.contains(&t) || !seen.insert(t) {
                continue;
            }
            size = size.saturating_add(self.txs.get(&t).map_or(0, |e| e.vsize));
            stack.extend(self.children.get(&t).into_iter().flatten().copied());
        }
        (seen.len(), size)
    }
}

//! Full replace-by-fee as `MemPoolAccept::ReplacementChecks` (validation.cpp, policy/rbf.cpp):
//! what a transaction that spends what mempool transactions spend must pay to take their
//! place. Core 31 (the default profile) asks that it pay for what it replaces and its own relay
//! and improve the fee-rate diagram of the clusters it changes; Knots 29.4 asks BIP125's rules
//! 2 to 6.

use std::cmp::Ordering;
use std::collections::HashSet;

use bitcoin::{OutPoint, Txid};

use super::cluster::Newcomers;
use super::linearize::{compare_diagrams, FeeFrac};
use super::{Checked, Inner, MempoolEntry};
use crate::policy::Rejection;

/// The mempool transactions `new` replaces (the conflicts and their descendants), or why it
/// may not, under the pool's profile: [`diagram_replacement`] for Core's, [`bip125_replacement`]
/// for Knots's. `needed` is the incremental relay fee for its size.
pub(super) fn replacement(
    inner: &Inner,
    conflicts: &HashSet<Txid>,
    new: &MempoolEntry,
    from_parents: &[OutPoint],
    needed: u64,
) -> Result<Vec<Txid>, Rejection> {
    if conflicts.is_empty() {
        return Ok(Vec::new());
    }
    match inner.clusters {
        true => diagram_replacement(inner, conflicts, new, needed),
        false => bip125_replacement(inner, conflicts, new, from_parents, needed),
    }
}

/// Core 31's replacement rules, in its order: the direct conflicts in at most 100 clusters
/// (rule 5, `GetEntriesForConflicts`: `too many potential replacements`); at least the fees of
/// everything replaced, and more by the relay fee for its own size (rules 3 and 4,
/// `PaysForRBF`: `insufficient fee`); the cluster limits without what it replaces; a fee-rate
/// diagram of the changed clusters strictly better than theirs (`ImprovesFeerateDiagram`:
/// `replacement-failed`); and none of what it replaces directly among its ancestors
/// (`EntriesAndTxidsDisjoint`).
fn diagram_replacement(
    inner: &Inner,
    conflicts: &HashSet<Txid>,
    new: &MempoolEntry,
    needed: u64,
) -> Result<Vec<Txid>, Rejection> {
    let txid = new.txid;
    let clusters = inner.cluster_count(conflicts, MAX_REPLACEMENT_CANDIDATES + 1);
    if clusters > MAX_REPLACEMENT_CANDIDATES {
        return Err(Rejection::TooManyReplacements { txid });
    }
    let mut all: Vec<Txid> = conflicts
        .iter()
        .flat_map(|c| inner.descendants(c))
        .collect::<HashSet<Txid>>()
        .into_iter()
        .collect();
    all.sort();
    let old_fees: u64 = all
        .iter()
        .filter_map(|t| inner.txs.get(t))
        .map(|e| e.fee)
        .sum();
    if new.fee < old_fees {
        return Err(Rejection::Replacement {
            txid,
            reason: format!("less fees than conflicting txs; {} < {old_fees}", new.fee),
        });
    }
    if new.fee - old_fees < needed {
        let added = new.fee - old_fees;
        return Err(Rejection::Replacement {
            txid,
            reason: format!("not enough additional fees to relay; {added} < {needed}"),
        });
    }
    let gone: HashSet<Txid> = all.iter().copied().collect();
    inner.check_chain_limits(&new.tx, new.adjusted_weight(), &gone)?;
    let parents = new.tx.input.iter().map(|i| i.previous_output.txid);
    let changed = inner.clusters_of(all.iter().copied().chain(parents));
    let before = inner.diagram(&changed, &[]);
    let remaining: HashSet<Txid> = changed.difference(&gone).copied().collect();
    let own = FeeFrac::new(new.fee, new.adjusted_weight());
    let after = inner.diagram(&remaining, &[(&new.tx, own)]);
    if compare_diagrams(&after, &before) != Some(Ordering::Greater) {
        return Err(Rejection::ReplacementFailed { txid });
    }
    disjoint_from_ancestors(inner, conflicts, new)?;
    Ok(all)
}

/// Core 31's package replacement (validation.cpp's `PackageRBFChecks`), for a parent and its
/// child submitted together whose members spend what mempool transactions spend: what they
/// replace (the conflicts of both and their descendants), refused in Core's order if the
/// package is not one parent and one child (`package must be 1-parent-1-child`), if a member
/// spends a mempool transaction (`new transaction cannot have mempool ancestors`), if the
/// conflicts are in more than 100 clusters (`too many potential replacements`), if the package
/// does not pay their fees and the relay fee `needed` for its size (`insufficient anti-DoS
/// fees`), if its fee rate is not above the parent's (so the child pays more than the relay
/// fee), if a cluster would be over the limits, or if the diagram of the changed clusters does
/// not improve. Nothing when no member conflicts.
pub(super) fn package_replacement(
    inner: &Inner,
    members: &[&Checked],
    needed: u64,
) -> Result<Vec<Txid>, Rejection> {
    let conflicts: HashSet<Txid> = (members.iter())
        .flat_map(|c| inner.direct_conflicts(&c.entry.tx))
        .collect();
    if conflicts.is_empty() {
        return Ok(Vec::new());
    }
    let refuse = |reason: &str| Err(Rejection::PackageReplacement(reason.to_string()));
    let [parent, child] = members else {
        return refuse("package must be 1-parent-1-child");
    };
    if members.iter().any(|c| !c.from_parents.is_empty()) {
        return refuse("new transaction cannot have mempool ancestors");
    }
    if inner.cluster_count(&conflicts, MAX_REPLACEMENT_CANDIDATES + 1) > MAX_REPLACEMENT_CANDIDATES
    {
        return refuse("too many potential replacements");
    }
    let all: HashSet<Txid> = conflicts
        .iter()
        .flat_map(|c| inner.descendants(c))
        .collect();
    let old_fees: u64 = all
        .iter()
        .filter_map(|t| inner.txs.get(t))
        .map(|e| e.fee)
        .sum();
    let (fees, vsize) = (
        parent.entry.fee + child.entry.fee,
        parent.entry.vsize + child.entry.vsize,
    );
    if fees < old_fees || fees - old_fees < needed {
        return refuse("insufficient anti-DoS fees");
    }
    // Core 31's CFeeRate compares the exact ratios (a FeeFrac), not whole sat/kvB.
    let parent_rate = FeeFrac::new(parent.entry.fee, parent.entry.vsize);
    if FeeFrac::new(fees, vsize).rate_cmp(&parent_rate) != Ordering::Greater {
        return refuse("package feerate is less than or equal to parent feerate");
    }
    let txs = [&parent.entry.tx, &child.entry.tx];
    let weight = parent.entry.adjusted_weight() + child.entry.adjusted_weight();
    inner.check_cluster_limits(&Newcomers { txs: &txs, weight }, &all)?;
    let changed = inner.clusters_of(all.iter().copied());
    let before = inner.diagram(&changed, &[]);
    let remaining: HashSet<Txid> = changed.difference(&all).copied().collect();
    let rate = |c: &Checked| FeeFrac::new(c.entry.fee, c.entry.adjusted_weight());
    let newcomers = [
        (&parent.entry.tx, rate(parent)),
        (&child.entry.tx, rate(child)),
    ];
    let after = inner.diagram(&remaining, &newcomers);
    if compare_diagrams(&after, &before) != Some(Ordering::Greater) {
        return refuse("insufficient feerate: does not improve feerate diagram");
    }
    let mut all: Vec<Txid> = all.into_iter().collect();
    all.sort();
    Ok(all)
}

/// Core's `EntriesAndTxidsDisjoint`: none of what `new` replaces directly may be among its
/// ancestors (`bad-txns-spends-conflicting-tx`).
fn disjoint_from_ancestors(
    inner: &Inner,
    conflicts: &HashSet<Txid>,
    new: &MempoolEntry,
) -> Result<(), Rejection> {
    match inner
        .ancestors_of(&new.tx)
        .into_iter()
        .find(|a| conflicts.contains(a))
    {
        Some(gone) => Err(Rejection::SpendsConflicting {
            txid: new.txid,
            conflict: gone,
        }),
        None => Ok(()),
    }
}

/// Full replace-by-fee (every transaction replaceable): the mempool transactions that `new`
/// replaces (the conflicts and their descendants), refused in Core's order: if it descends
/// from one of them (`bad-txns-spends-conflicting-tx`), if its fee rate is not above each
/// direct conflict's (rule 6, `PaysMoreThanConflicts`, in Core's whole sat/kvB), if they are
/// over 100 (rule 5, the walk stopping there), if it spends an unconfirmed output (`from_parents`) of a transaction none of
/// the conflicts spends from (rule 2, `HasNoNewUnconfirmed`), or if it does not pay more than all
/// of them by the relay fee `needed` for its size (rules 3 and 4).
fn bip125_replacement(
    inner: &Inner,
    conflicts: &HashSet<Txid>,
    new: &MempoolEntry,
    from_parents: &[OutPoint],
    needed: u64,
) -> Result<Vec<Txid>, Rejection> {
    let (txid, fee, vsize) = (new.txid, new.fee, new.vsize);
    // Knots checks `EntriesAndTxidsDisjoint` first, in `PreChecks`.
    disjoint_from_ancestors(inner, conflicts, new)?;
    // Core's CFeeRate: satoshis per 1,000 virtual bytes, rounded down.
    let per_kvb = |fee: u64, size: u64| fee.saturating_mul(1000) / size.max(1);
    let new_rate = per_kvb(fee, vsize);
    for old in conflicts.iter().filter_map(|c| inner.txs.get(c)) {
        let old_rate = per_kvb(old.fee, old.vsize);
        if new_rate <= old_rate {
            return Err(Rejection::Replacement {
                txid,
                reason: format!("new feerate {new_rate} sat/kvB <= old feerate {old_rate} sat/kvB"),
            });
        }
    }
    let all = replaced_at_most(inner, conflicts, MAX_REPLACEMENT_CANDIDATES).ok_or_else(|| {
        Rejection::Replacement {
            txid,
            reason: format!("it would replace more than {MAX_REPLACEMENT_CANDIDATES} transactions"),
        }
    })?;
    let parents_of_conflicts: HashSet<Txid> = conflicts
        .iter()
        .filter_map(|c| inner.txs.get(c))
        .flat_map(|e| e.tx.input.iter().map(|i| i.previous_output.txid))
        .filter(|parent| inner.txs.contains_key(parent))
        .collect();
    if let Some(added) = from_parents
        .iter()
        .find(|op| !parents_of_conflicts.contains(&op.txid))
    {
        return Err(Rejection::AddsUnconfirmed {
            txid,
            input: *added,
        });
    }
    let old_fees: u64 = all
        .iter()
        .filter_map(|t| inner.txs.get(t))
        .map(|e| e.fee)
        .sum();
    if fee <= old_fees {
        return Err(Rejection::Replacement {
            txid,
            reason: format!("fee {fee} not above the replaced transactions' {old_fees}"),
        });
    }
    if fee - old_fees < needed {
        return Err(Rejection::Replacement {
            txid,
            reason: format!(
                "additional fee {} below the relay fee for its size, {needed}",
                fee - old_fees
            ),
        });
    }
    Ok(all)
}

/// Core's `MAX_REPLACEMENT_CANDIDATES` (BIP125 rule 5).
const MAX_REPLACEMENT_CANDIDATES: usize = 100;

/// The conflicts and their descendants, each once, or `None` as soon as they pass `limit`:
/// the walk stops there, however many there are.
fn replaced_at_most(inner: &Inner, conflicts: &HashSet<Txid>, limit: usize) -> Option<Vec<Txid>> {
    let mut seen: HashSet<Txid> = HashSet::new();
    let mut stack: Vec<Txid> = conflicts.iter().copied().collect();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        if seen.len() > limit {
            return None;
        }
        stack.extend(inner.children.get(&id).into_iter().flatten().copied());
    }
    let mut all: Vec<Txid> = seen.into_iter().collect();
    all.sort();
    Some(all)
}

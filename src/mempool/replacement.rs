//! Full replace-by-fee as Core's `ReplacementChecks` (policy/rbf.cpp): what a transaction that
//! spends what mempool transactions spend must pay to take their place.

use std::collections::HashSet;

use bitcoin::{OutPoint, Txid};

use super::rejection::Rejection;
use super::{Inner, MempoolEntry};

/// Full replace-by-fee (every transaction replaceable): the mempool transactions that `new`
/// replaces (the conflicts and their descendants), refused in Core's order: if it descends
/// from one of them (`bad-txns-spends-conflicting-tx`), if its fee rate is not above each
/// direct conflict's (rule 6, `PaysMoreThanConflicts`, in Core's whole sat/kvB), if they are
/// over 100 (rule 5, the walk stopping there), if it spends an unconfirmed output (`from_parents`) of a transaction none of
/// the conflicts spends from (rule 2, `HasNoNewUnconfirmed`), or if it does not pay more than all
/// of them by the relay fee `needed` for its size (rules 3 and 4).
pub(super) fn replacement(
    inner: &Inner,
    conflicts: &HashSet<Txid>,
    new: &MempoolEntry,
    from_parents: &[OutPoint],
    needed: u64,
) -> Result<Vec<Txid>, Rejection> {
    let (txid, fee, vsize) = (new.txid, new.fee, new.vsize);
    if conflicts.is_empty() {
        return Ok(Vec::new());
    }
    // Core's `EntriesAndTxidsDisjoint` (in `PreChecks`): none of what it replaces directly
    // may be among its ancestors.
    if let Some(gone) = inner
        .ancestors_of(&new.tx)
        .into_iter()
        .find(|a| conflicts.contains(a))
    {
        return Err(Rejection::SpendsConflicting {
            txid,
            conflict: gone,
        });
    }
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

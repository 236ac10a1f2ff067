//! A new transaction's checks against the pool before any script runs, in the profile's order
//! (Core 31's `PreChecks`, `ReplacementChecks` and `AcceptSingleTransactionInternal`; Knots's as
//! Core 29's): TRUC, the replacement rules, the cluster or chain limits, ephemeral dust.

use std::collections::{HashMap, HashSet};

use bitcoin::{OutPoint, Transaction, Txid};

use super::replacement::replacement;
use super::{truc, Inner, MempoolEntry, Rejection};
use crate::policy::standard;

impl Inner {
    /// A package member's checks against its relatives in the pool, in the profile's order
    /// (Core 31: TRUC, then clusters, then ephemeral dust; Knots: chain limits, then TRUC), with
    /// the pool as it would be without what the candidate replaces (a replacing package's whole
    /// verdict comes after, [`replacement::package_replacement`]); no TRUC sibling is evicted.
    pub(super) fn check_relatives(
        &self,
        candidate: &truc::Candidate,
        weight: u64,
    ) -> Result<(), Rejection> {
        let truc = || {
            (self.check_truc(candidate, &self.direct_conflicts(candidate.tx)))
                .map_err(|breach| breach.rejection)
        };
        let gone = self.replaced_by(candidate.tx);
        if !self.clusters {
            self.check_chain_limits(candidate.tx, weight, &gone)?;
            return truc();
        }
        truc()?;
        self.check_chain_limits(candidate.tx, weight, &gone)?;
        self.check_ephemeral_spends(candidate.tx)
    }

    /// The checks of a single new transaction against the pool before any script runs, in the
    /// profile's order; what it replaces. Core 31 (validation.cpp's `PreChecks`, then
    /// `ReplacementChecks`, then `AcceptSingleTransactionInternal`): TRUC (a sibling it may evict
    /// joining its conflicts), the replacement rules (conflicting clusters, fees, cluster limits,
    /// the diagram), the cluster limits without what it replaces, then ephemeral dust. Knots 29.4
    /// (as Core 29): the chain limits, TRUC, then BIP125's rules. Run under the read lock that
    /// checks and again under the write lock that admits, unless nothing changed between.
    pub(super) fn check_against_pool(
        &self,
        entry: &MempoolEntry,
        from_parents: &[OutPoint],
        needed: u64,
    ) -> Result<Vec<Txid>, Rejection> {
        let weight = entry.adjusted_weight();
        if !self.clusters {
            self.check_chain_limits(&entry.tx, weight, &self.replaced_by(&entry.tx))?;
        }
        let conflicts = self.conflicts_of(entry, from_parents, true)?;
        let replaced = replacement(self, &conflicts, entry, from_parents, needed)?;
        let gone: HashSet<Txid> = replaced.iter().copied().collect();
        self.check_chain_limits(&entry.tx, weight, &gone)?;
        if self.clusters {
            self.check_ephemeral_spends(&entry.tx)?;
        }
        Ok(replaced)
    }

    /// Core's `CheckEphemeralSpends` for one transaction (policy/ephemeral_policy.cpp): every
    /// dust output of each mempool parent it spends from must be spent by it
    /// (`missing-ephemeral-spends`).
    pub(super) fn check_ephemeral_spends(&self, tx: &Transaction) -> Result<(), Rejection> {
        self.check_package_ephemeral_spends(&[tx])
            .map_err(|(_, refusal)| refusal)
    }

    /// Core's `CheckEphemeralSpends` for a package: every dust output of each parent a member
    /// spends from, in the package or the pool, must be spent by that member; else the first
    /// that leaves one, and its refusal.
    pub(super) fn check_package_ephemeral_spends(
        &self,
        txs: &[&Transaction],
    ) -> Result<(), (usize, Rejection)> {
        let members: HashMap<Txid, &Transaction> =
            txs.iter().map(|t| (t.compute_txid(), *t)).collect();
        for (i, tx) in txs.iter().enumerate() {
            let spent: HashSet<OutPoint> = tx.input.iter().map(|i| i.previous_output).collect();
            let parents: HashSet<Txid> = tx.input.iter().map(|i| i.previous_output.txid).collect();
            for parent in parents {
                let found = members
                    .get(&parent)
                    .copied()
                    .or_else(|| self.txs.get(&parent).map(|e| &e.tx));
                let Some(found) = found else {
                    continue;
                };
                let unspent_dust = found
                    .output
                    .iter()
                    .enumerate()
                    .filter(|(_, out)| standard::is_dust(out))
                    .any(|(vout, _)| !spent.contains(&OutPoint::new(parent, vout as u32)));
                if unspent_dust {
                    let txid = tx.compute_txid();
                    return Err((i, Rejection::MissingEphemeralSpends { txid }));
                }
            }
        }
        Ok(())
    }

    /// What a checked transaction replaces directly, read under the lock that admits it or
    /// answers a dry run: the transactions spending what it spends ([`Inner::still_valid`]),
    /// and the sibling a TRUC child evicts (never in a package dry run, `allow_eviction`
    /// off). Refuses it where the TRUC rules do.
    pub(super) fn conflicts_of(
        &self,
        entry: &MempoolEntry,
        from_parents: &[OutPoint],
        allow_eviction: bool,
    ) -> Result<HashSet<Txid>, Rejection> {
        let mut conflicts = self.still_valid(&entry.tx, &entry.txid, from_parents)?;
        match self.check_truc(&truc::Candidate::of(entry), &conflicts) {
            Ok(()) => {}
            Err(truc::Breach {
                sibling: Some(sibling),
                ..
            }) if allow_eviction => {
                conflicts.insert(sibling);
            }
            Err(breach) => return Err(breach.rejection),
        }
        Ok(conflicts)
    }
}

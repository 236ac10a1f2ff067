//! TRUC, topologically restricted until confirmation (BIP431, Core's policy/truc_policy.cpp): a
//! version 3 transaction has at most one unconfirmed ancestor or descendant, is at most 10,000
//! vbytes, and 1,000 as a child; versions 3 and others do not spend each other unconfirmed. A
//! second child of a version 3 parent may evict the first under the replacement rules (sibling
//! eviction), where a replacement may happen. Enforced with `mempool_truc = enforce` (Core's
//! profile's default; Knots's takes version 3 as any other). Refusals carry Core's reason,
//! `TRUC-violation`, under Core's profile and Knots 29.4's (`truc-…`) under Knots's, with Core's
//! messages.

use std::collections::HashSet;

use bitcoin::{Transaction, Txid, Wtxid};

use super::{Inner, MempoolEntry};
use crate::policy::Rejection;

/// Core's `TRUC_VERSION`.
pub(super) const TRUC_VERSION: i32 = 3;
/// Most unconfirmed transactions in a TRUC transaction's ancestry, itself included
/// (`TRUC_ANCESTOR_LIMIT`); the descendant limit (`TRUC_DESCENDANT_LIMIT`) is the same.
const TRUC_LIMIT: usize = 2;
/// Largest TRUC transaction, sigop-adjusted vbytes (`TRUC_MAX_VSIZE`).
const TRUC_MAX_VSIZE: u64 = 10_000;
/// Largest TRUC transaction with an unconfirmed parent (`TRUC_CHILD_MAX_VSIZE`).
const TRUC_CHILD_MAX_VSIZE: u64 = 1_000;

/// A broken TRUC rule, and the sibling whose eviction would mend it where one is allowed.
#[derive(Debug)]
pub(super) struct Breach {
    /// The refusal when no sibling is evicted.
    pub rejection: Rejection,
    /// The parent's only other child, which a replacement may evict.
    pub sibling: Option<Txid>,
}

/// A transaction as the TRUC rules read it.
pub(super) struct Candidate<'a> {
    pub tx: &'a Transaction,
    pub txid: Txid,
    pub wtxid: Wtxid,
    /// Its sigop-adjusted virtual size.
    pub vsize: u64,
}

impl<'a> Candidate<'a> {
    /// A checked transaction as a candidate.
    pub fn of(entry: &'a MempoolEntry) -> Candidate<'a> {
        Candidate {
            tx: &entry.tx,
            txid: entry.txid,
            wtxid: entry.wtxid,
            vsize: entry.vsize,
        }
    }
}

fn breach(reason: &'static str, message: String) -> Breach {
    Breach {
        rejection: Rejection::Truc { reason, message },
        sibling: None,
    }
}

fn spends_across(child: (Txid, Wtxid, i32), parent: (Txid, Wtxid, i32)) -> Breach {
    let ((c, cw, version), (p, pw, _)) = (child, parent);
    if version == TRUC_VERSION {
        let message = format!(
            "version=3 tx {c} (wtxid={cw}) cannot spend from non-version=3 tx {p} (wtxid={pw})"
        );
        breach("truc-spends-nontruc", message)
    } else {
        let message = format!(
            "non-version=3 tx {c} (wtxid={cw}) cannot spend from version=3 tx {p} (wtxid={pw})"
        );
        breach("truc-spent-by-nontruc", message)
    }
}

impl Inner {
    /// Core's `SingleTRUCChecks` against the mempool's ancestors of `new` (package members not
    /// in the mempool are not seen): `direct_conflicts` are the transactions it replaces by
    /// spending what they spend, so a child it replaces does not count against its parent.
    pub(super) fn check_truc(
        &self,
        new: &Candidate,
        direct_conflicts: &HashSet<Txid>,
    ) -> Result<(), Breach> {
        if !self.enforce_truc {
            return Ok(());
        }
        self.single_truc(new, direct_conflicts)
            .map_err(|b| self.in_profile_words(b))
    }

    /// Core says `TRUC-violation` for every TRUC rule; Knots names each (`truc-…`).
    fn in_profile_words(&self, mut breach: Breach) -> Breach {
        if let Rejection::Truc { reason, .. } = &mut breach.rejection {
            if self.clusters {
                *reason = "TRUC-violation";
            }
        }
        breach
    }

    /// [`Inner::check_truc`] with the rules enforced, in Knots's words.
    fn single_truc(&self, new: &Candidate, direct_conflicts: &HashSet<Txid>) -> Result<(), Breach> {
        let ancestors = self.ancestors_of(new.tx);
        let ids = (new.txid, new.wtxid, new.tx.version.0);
        for id in &ancestors {
            let Some(entry) = self.txs.get(id) else {
                continue;
            };
            let version = entry.tx.version.0;
            if (new.tx.version.0 == TRUC_VERSION) != (version == TRUC_VERSION) {
                return Err(spends_across(ids, (entry.txid, entry.wtxid, version)));
            }
        }
        if new.tx.version.0 != TRUC_VERSION {
            return Ok(());
        }
        self.truc_sizes(new, ancestors.len())?;
        let Some(parent) = ancestors.first().and_then(|p| self.txs.get(p)) else {
            return Ok(());
        };
        let children = self.children.get(&parent.txid);
        let siblings: Vec<Txid> = children.into_iter().flatten().copied().collect();
        let replaced = siblings.iter().any(|s| direct_conflicts.contains(s));
        let with_descendants = self.descendants(&parent.txid).len();
        if with_descendants < TRUC_LIMIT || replaced {
            return Ok(());
        }
        // Sibling eviction only where the parent has one child and that child no other
        // ancestor (a reorg can leave more).
        let sibling = match siblings.as_slice() {
            [only] if with_descendants == 2 && self.pool_ancestors(only).len() == 1 => Some(*only),
            _ => None,
        };
        let message = format!(
            "tx {} (wtxid={}) would exceed descendant count limit",
            parent.txid, parent.wtxid
        );
        Err(Breach {
            sibling,
            ..breach("truc-descendants-toomany", message)
        })
    }

    /// The size and ancestor rules of a TRUC transaction with `ancestors` unconfirmed ones.
    fn truc_sizes(&self, new: &Candidate, ancestors: usize) -> Result<(), Breach> {
        let (txid, wtxid, vsize) = (new.txid, new.wtxid, new.vsize);
        if vsize > TRUC_MAX_VSIZE {
            let message = format!(
                "version=3 tx {txid} (wtxid={wtxid}) is too big: {vsize} > {TRUC_MAX_VSIZE} virtual bytes"
            );
            return Err(breach("truc-vsize-toobig", message));
        }
        if ancestors + 1 > TRUC_LIMIT {
            let message = format!("tx {txid} (wtxid={wtxid}) would have too many ancestors");
            return Err(breach("truc-ancestors-toomany", message));
        }
        if ancestors > 0 && vsize > TRUC_CHILD_MAX_VSIZE {
            let message = format!(
                "version=3 child tx {txid} (wtxid={wtxid}) is too big: {vsize} > {TRUC_CHILD_MAX_VSIZE} virtual bytes"
            );
            return Err(breach("truc-child-toobig", message));
        }
        Ok(())
    }

    /// Core's `PackageTRUCChecks` for every member of a package (after each passed
    /// [`Inner::check_truc`] alone): the members' parents in the package count as the
    /// mempool's do. The error is the first breach.
    pub(super) fn check_package_truc(&self, members: &[Candidate]) -> Result<(), Rejection> {
        if !self.enforce_truc {
            return Ok(());
        }
        for member in members {
            self.package_truc(member, members)
                .map_err(|b| self.in_profile_words(b).rejection)?;
        }
        Ok(())
    }

    fn package_truc(&self, new: &Candidate, members: &[Candidate]) -> Result<(), Breach> {
        let in_package: Vec<&Candidate> = members
            .iter()
            .filter(|m| {
                new.tx
                    .input
                    .iter()
                    .any(|i| i.previous_output.txid == m.txid)
            })
            .collect();
        let ancestors = self.ancestors_of(new.tx);
        let ids = (new.txid, new.wtxid, new.tx.version.0);
        if new.tx.version.0 != TRUC_VERSION {
            let truc_parent = ancestors
                .iter()
                .filter_map(|a| self.txs.get(a))
                .map(|e| (e.txid, e.wtxid, e.tx.version.0))
                .chain(in_package.iter().map(|m| (m.txid, m.wtxid, m.tx.version.0)))
                .find(|p| p.2 == TRUC_VERSION);
            return match truc_parent {
                Some(parent) => Err(spends_across(ids, parent)),
                None => Ok(()),
            };
        }
        self.truc_sizes(new, ancestors.len() + in_package.len())?;
        // At most one parent, in the mempool or the package.
        let parent = match (
            ancestors.first().and_then(|a| self.txs.get(a)),
            in_package.first(),
        ) {
            (Some(e), _) => (
                e.txid,
                e.wtxid,
                e.tx.version.0,
                self.children.contains_key(&e.txid),
            ),
            (None, Some(m)) => (m.txid, m.wtxid, m.tx.version.0, false),
            (None, None) => return Ok(()),
        };
        let (parent_txid, parent_wtxid, version, has_mempool_child) = parent;
        if version != TRUC_VERSION {
            return Err(spends_across(ids, (parent_txid, parent_wtxid, version)));
        }
        let too_many = |txid: Txid, wtxid: Wtxid, reason: &'static str, what: &str| {
            breach(reason, format!("tx {txid} (wtxid={wtxid}) {what}"))
        };
        for other in members.iter().filter(|m| m.txid != new.txid) {
            for input in &other.tx.input {
                if input.previous_output.txid == parent_txid {
                    let what = "would exceed descendant count limit";
                    return Err(too_many(
                        parent_txid,
                        parent_wtxid,
                        "truc-sibling-known",
                        what,
                    ));
                }
                if input.previous_output.txid == new.txid {
                    let what = "would have too many ancestors";
                    let reason = "truc-parent-and-child-both";
                    return Err(too_many(other.txid, other.wtxid, reason, what));
                }
            }
        }
        if has_mempool_child {
            let what = "would exceed descendant count limit";
            return Err(too_many(
                parent_txid,
                parent_wtxid,
                "truc-descendant-toomany",
                what,
            ));
        }
        Ok(())
    }
}

//! Packages: a child with its parents submitted together ([`Mempool::accept_package`], the
//! shape of Core's `submitpackage`, with CPFP for parents below the relay fee), and dry runs of
//! one transaction or a package ([`Mempool::test_accept`], bitcoind's `testmempoolaccept`).

use std::collections::{HashMap, HashSet};

use bitcoin::{OutPoint, Transaction, TxOut, Txid, Wtxid};

use super::coins::CoinSource;
use super::Rejection;
use super::{consensus, persist, replacement, rolling, truc, Accepted, Checked, Mempool};
use crate::config::{PolicyProfile, TrucPolicy};
use crate::index::Index;
use crate::types::ScriptHash;

/// The most a dry run lets a transaction pay, in satoshis per 1,000 vbytes: bitcoind's
/// `testmempoolaccept` default `maxfeerate` (`DEFAULT_MAX_RAW_TX_FEE_RATE`, 0.10 BTC/kvB),
/// which ElectrumX's `testmempoolaccept` leaves at its default.
pub const MAX_TEST_FEE_PER_KVB: u64 = 10_000_000;

/// The members of a package checked before the one being checked (Core's
/// `m_viewmempool.PackageAddTransaction`): their outputs are spendable as a mempool parent's.
#[derive(Default)]
pub(super) struct Staged {
    txs: HashMap<Txid, Transaction>,
    stage: Stage,
}

/// What a transaction is checked as.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Alone: it may replace, judged by the single-transaction rules.
    #[default]
    Single,
    /// A package member that may replace nothing (a package dry run: Core's
    /// `PackageTestAccept` has `m_allow_replacement` off).
    Package,
    /// A member of a 1p1c package that may replace, judged with its package
    /// ([`super::replacement::package_replacement`]).
    PackageReplacing,
}

impl Staged {
    /// An empty stage for a package that replaces nothing.
    fn package() -> Staged {
        Staged {
            txs: HashMap::new(),
            stage: Stage::Package,
        }
    }

    /// An empty stage for a package that may replace as a whole.
    fn package_replacing() -> Staged {
        Staged {
            txs: HashMap::new(),
            stage: Stage::PackageReplacing,
        }
    }

    /// Whether a transaction checked on this stage may conflict with mempool transactions.
    pub(super) fn allows_replacement(&self) -> bool {
        self.stage != Stage::Package
    }

    /// Whether the transaction is checked alone, not as a package member.
    pub(super) fn is_single(&self) -> bool {
        self.stage == Stage::Single
    }

    /// The output a staged member has at `op`.
    pub(super) fn output(&self, op: &OutPoint) -> Option<&TxOut> {
        let tx = self.txs.get(&op.txid)?;
        tx.output.get(usize::try_from(op.vout).ok()?)
    }

    fn add(&mut self, tx: &Transaction) {
        self.txs.insert(tx.compute_txid(), tx.clone());
    }
}

/// What a package submission changed ([`Mempool::accept_package`]).
#[derive(Debug)]
pub struct PackageAccepted {
    /// One result per transaction, in order.
    pub each: Vec<Result<Accepted, Rejection>>,
    /// Scripts of transactions that left the pool for the package (evicted), whether or not
    /// it was accepted; the accepted members' own are in `each`.
    pub touched: HashSet<ScriptHash>,
}

/// What a transaction that would be accepted pays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tested {
    /// Its fee in satoshis.
    pub fee: u64,
    /// Its virtual size (sigop-adjusted).
    pub vsize: u64,
}

/// One transaction's result in a dry run, as bitcoind's `testmempoolaccept` gives it.
#[derive(Debug, Clone)]
pub struct TestAccept {
    /// The transaction.
    pub txid: Txid,
    /// Its witness id.
    pub wtxid: Wtxid,
    /// Whether it would be accepted, and why not; `None` when the run ended before it was
    /// decided (bitcoind then leaves out `allowed`).
    pub verdict: Option<Result<Tested, Rejection>>,
    /// Why the package as a whole was refused (bitcoind's `package-error`).
    pub package_error: Option<String>,
}

impl Mempool {
    /// Checks and adds a package: a child with its unconfirmed parents, topologically sorted (the
    /// child last), no parent spending another (Bitcoin Core's `submitpackage` shape). Each
    /// parent is first tried alone; parents refused only for a fee its child may pay
    /// ([`Mempool::child_may_pay`]) are then taken together with the child, all or none, if
    /// the package's fee rate (their fees and the child's over their sizes) reaches the relay
    /// fee and the rolling minimum (CPFP). An `Err` for
    /// a malformed package as a whole.
    pub fn accept_package(
        &self,
        raws: &[Vec<u8>],
        index: &Index,
    ) -> Result<PackageAccepted, Rejection> {
        self.accept_package_from(raws, index)
    }

    /// [`Mempool::accept_package`] over any [`CoinSource`].
    pub(super) fn accept_package_from(
        &self,
        raws: &[Vec<u8>],
        index: &dyn CoinSource,
    ) -> Result<PackageAccepted, Rejection> {
        let txs: Vec<Transaction> = raws
            .iter()
            .map(|raw| consensus::decode(raw))
            .collect::<Result<_, _>>()?;
        crate::policy::check_package_shape(&txs)?;
        let (parents, child) = raws.split_at(raws.len() - 1);
        let mut each: Vec<Result<Accepted, Rejection>> = Vec::with_capacity(raws.len());
        let mut cheap = Vec::new();
        for (i, raw) in parents.iter().enumerate() {
            match self.accept_with(raw, index, true, persist::now()) {
                Err(e) if self.child_may_pay(&txs[i], &e) => {
                    cheap.push(i);
                    each.push(Err(Rejection::Backend("pending".into())));
                }
                other => each.push(other),
            }
        }
        let mut touched = self.take_unannounced();
        if cheap.is_empty() {
            each.push(self.accept_with(&child[0], index, true, persist::now()));
        } else {
            let members: Vec<usize> = cheap.iter().copied().chain([raws.len() - 1]).collect();
            let member_raws: Vec<&[u8]> = members.iter().map(|&i| raws[i].as_slice()).collect();
            let txids: Vec<Txid> = members.iter().map(|&i| txs[i].compute_txid()).collect();
            let outcome = self.accept_together(&member_raws, &txids, index, &mut touched);
            each.push(Err(Rejection::Backend("pending".into())));
            match outcome {
                Ok(accepted) => {
                    for (&i, a) in members.iter().zip(accepted) {
                        each[i] = Ok(a);
                    }
                }
                Err(errors) => {
                    for (&i, e) in members.iter().zip(errors) {
                        each[i] = Err(e);
                    }
                }
            }
        }
        Ok(PackageAccepted { each, touched })
    }

    /// Whether a parent refused with `refusal` may still enter paid for by its child (Core's
    /// `TX_RECONSIDERABLE`): evicted as soon as it entered, under the rolling minimum fee, or
    /// under the relay fee (Core 31, with or
    /// without fee: validation.cpp's `AcceptPackage`). Under Knots's profile (as Core 28 to
    /// 30) a parent below the relay fee may only if it is version 3 held to the TRUC rules, so
    /// no free transaction can stay behind when its child is replaced.
    pub fn child_may_pay(&self, parent: &Transaction, refusal: &Rejection) -> bool {
        match refusal {
            // Evicted as soon as it entered (Core's `TX_RECONSIDERABLE` "mempool full").
            Rejection::MempoolMinFee { .. } | Rejection::MempoolFull => true,
            Rejection::MinRelayFee { .. } => {
                self.config.profile == PolicyProfile::Core
                    || (self.config.truc == TrucPolicy::Enforce
                        && parent.version.0 == truc::TRUC_VERSION)
            }
            // A replacement short of fees, or of a better diagram, may replace with its child
            // (Core 31's package RBF).
            Rejection::Replacement { .. } | Rejection::ReplacementFailed { .. } => {
                self.config.profile == PolicyProfile::Core
            }
            _ => false,
        }
    }

    /// CPFP: `raws` (the parents below the fee alone, then their child) are checked as one
    /// before any enters: each member's pre-checks with the earlier ones' outputs spendable
    /// and no replacement, the package's fee rate against the relay fee and the rolling
    /// minimum, the package's chain limits, every script; then all enter under one write lock,
    /// with one eviction pass. A refusal leaves the pool as it was, but for what an eviction
    /// pass took before it reached a member (their scripts are added to `touched`).
    fn accept_together(
        &self,
        raws: &[&[u8]],
        txids: &[Txid],
        index: &dyn CoinSource,
        touched: &mut HashSet<ScriptHash>,
    ) -> Result<Vec<Accepted>, Vec<Rejection>> {
        let all = |e: Rejection| vec![e; raws.len()];
        let one = |i: usize, e: Rejection| -> Vec<Rejection> {
            (0..raws.len())
                .map(|j| match j == i {
                    true => e.clone(),
                    false => Rejection::PackageFailed(txids[i]),
                })
                .collect()
        };
        // Core 31 takes a parent and child that replace together (package RBF); a larger
        // package that conflicts is judged, and refused, by the same rules.
        let replacing = self.config.profile == PolicyProfile::Core;
        let mut staged = match replacing {
            true => Staged::package_replacing(),
            false => Staged::package(),
        };
        let mut checked = Vec::with_capacity(raws.len());
        for (i, raw) in raws.iter().enumerate() {
            let c = self
                .pre_check(raw, index, false, persist::now(), &staged)
                .map_err(|e| one(i, e))?;
            staged.add(&c.entry.tx);
            checked.push(c);
        }
        let (fees, vsize) = checked.iter().fold((0u64, 0u64), |(f, v), c| {
            (f + c.entry.fee, v + c.entry.vsize)
        });
        let floor = rolling::fee_for(self.min_fee_per_kvb(), vsize);
        let needed = self.relay_fee(vsize).max(floor);
        if fees < needed {
            return Err(all(Rejection::PackageFee { fees, needed }));
        }
        let txs: Vec<&Transaction> = checked.iter().map(|c| &c.entry.tx).collect();
        let weights: Vec<u64> = checked.iter().map(|c| c.entry.adjusted_weight()).collect();
        let relay = self.relay_fee(vsize);
        {
            let inner = self.read();
            let members: Vec<&Checked> = checked.iter().collect();
            replacement::package_replacement(&inner, &members, relay).map_err(all)?;
            inner
                .check_package_limits(&txs, &weights, vsize)
                .map_err(all)?;
            if self.config.profile == PolicyProfile::Core {
                inner
                    .check_package_ephemeral_spends(&txs)
                    .map_err(|(i, e)| one(i, e))?;
            }
        }
        for (i, c) in checked.iter_mut().enumerate() {
            self.check_scripts(c).map_err(|e| one(i, e))?;
            c.entry.compute_tweak();
        }
        self.admit_all(checked, relay, touched)
    }

    /// Adds checked package members in order under one write lock, each read again as
    /// [`Mempool::admit`] does but replacing nothing, then one expiry and eviction pass; on any
    /// refusal every member leaves again.
    fn admit_all(
        &self,
        checked: Vec<Checked>,
        relay: u64,
        touched: &mut HashSet<ScriptHash>,
    ) -> Result<Vec<Accepted>, Vec<Rejection>> {
        let count = checked.len();
        let txids: Vec<Txid> = checked.iter().map(|c| c.entry.txid).collect();
        let mut inner = self.write();
        // A member that entered alone meanwhile would conflict with itself: refused first.
        if let Some(i) = txids.iter().position(|t| inner.txs.contains_key(t)) {
            let mut errors = vec![Rejection::PackageFailed(txids[i]); count];
            errors[i] = Rejection::AlreadyInMempool;
            return Err(errors);
        }
        let members: Vec<&Checked> = checked.iter().collect();
        let mut replaced = replacement::package_replacement(&inner, &members, relay)
            .map_err(|e| vec![e; count])?;
        for txid in &replaced {
            inner.remove_with_descendants(txid, touched);
        }
        let mut accepted = Vec::with_capacity(count);
        for (i, c) in checked.into_iter().enumerate() {
            let conflicts = inner.conflicts_of(&c.entry, &c.from_parents, false);
            let admissible = conflicts
                .and_then(|conflicts| match conflicts.is_empty() {
                    true => Ok(()),
                    false => Err(Rejection::ReplacementDisallowed),
                })
                .and_then(|()| {
                    inner.check_chain_limits(
                        &c.entry.tx,
                        c.entry.adjusted_weight(),
                        &HashSet::new(),
                    )
                });
            if let Err(e) = admissible {
                let mut scratch = HashSet::new();
                for txid in &txids[..i] {
                    inner.remove_with_descendants(txid, &mut scratch);
                }
                let mut errors = vec![Rejection::PackageFailed(txids[i]); count];
                errors[i] = e;
                return Err(errors);
            }
            accepted.push(Accepted {
                txid: c.entry.txid,
                wtxid: c.entry.wtxid,
                replaced: std::mem::take(&mut replaced),
                touched: c.entry.scripthashes().collect(),
            });
            inner.insert(c.entry);
        }
        inner.expire(persist::now() - persist::EXPIRY_SECS, touched);
        if self.evict_over_limit(&mut inner, &txids, touched).is_err() {
            let mut scratch = HashSet::new();
            for txid in &txids {
                inner.remove_with_descendants(txid, &mut scratch);
            }
            return Err(vec![Rejection::MempoolFull; count]);
        }
        Ok(accepted)
    }

    /// Whether transactions would be accepted now, nothing changed (bitcoind's
    /// `testmempoolaccept`): one alone is checked as [`Mempool::accept`] checks it, replacement
    /// included; more than one as a package in Core's order (its form, then every member's
    /// pre-checks with the earlier members' outputs spendable and no replacement, the package's
    /// chain limits, then every member's scripts), the run ending at the first refusal. A fee
    /// over [`MAX_TEST_FEE_PER_KVB`] is refused and ends the run. `Err` if one does not decode.
    pub fn test_accept(
        &self,
        raws: &[Vec<u8>],
        index: &Index,
    ) -> Result<Vec<TestAccept>, Rejection> {
        self.test_accept_from(raws, index)
    }

    /// [`Mempool::test_accept`] over any [`CoinSource`].
    pub(super) fn test_accept_from(
        &self,
        raws: &[Vec<u8>],
        index: &dyn CoinSource,
    ) -> Result<Vec<TestAccept>, Rejection> {
        let txs: Vec<Transaction> = raws
            .iter()
            .map(|raw| consensus::decode(raw))
            .collect::<Result<_, _>>()?;
        let mut results: Vec<TestAccept> = txs
            .iter()
            .map(|tx| TestAccept {
                txid: tx.compute_txid(),
                wtxid: tx.compute_wtxid(),
                verdict: None,
                package_error: None,
            })
            .collect();
        if let [raw] = raws {
            results[0].verdict = Some(self.test_one(raw, index));
        } else if let Err(error) = self.test_package(raws, &txs, index, &mut results) {
            for result in &mut results {
                result.package_error = Some(error.clone());
            }
        }
        cap_fees(&mut results);
        Ok(results)
    }

    /// A dry run of one transaction: [`Mempool::accept`]'s checks, those against the pool
    /// under a read lock before its scripts, as in Core.
    fn test_one(&self, raw: &[u8], index: &dyn CoinSource) -> Result<Tested, Rejection> {
        let checked = self.pre_check(raw, index, true, persist::now(), &Staged::default())?;
        self.check_scripts(&checked)?;
        Ok(tested(&checked))
    }

    /// A dry run of a package into `results` (Core's `AcceptMultipleTransactions` with
    /// `test_accept`); `Err` with Core's words when the package as a whole is refused.
    fn test_package(
        &self,
        raws: &[Vec<u8>],
        txs: &[Transaction],
        index: &dyn CoinSource,
        results: &mut [TestAccept],
    ) -> Result<(), String> {
        crate::policy::check_well_formed(txs).map_err(str::to_string)?;
        let mut staged = Staged::package();
        let mut checked = Vec::with_capacity(raws.len());
        for (i, raw) in raws.iter().enumerate() {
            match self.pre_check(raw, index, true, persist::now(), &staged) {
                Ok(c) => {
                    staged.add(&c.entry.tx);
                    checked.push(c);
                }
                Err(e) => {
                    results[i].verdict = Some(Err(e));
                    return Ok(());
                }
            }
        }
        let vsize = checked.iter().map(|c| c.entry.vsize).sum();
        {
            let inner = self.read();
            let members: Vec<truc::Candidate> = checked
                .iter()
                .map(|c| truc::Candidate::of(&c.entry))
                .collect();
            inner
                .check_package_truc(&members)
                .map_err(|e| e.to_string())?;
            let weights: Vec<u64> = checked.iter().map(|c| c.entry.adjusted_weight()).collect();
            inner
                .check_package_limits(&txs.iter().collect::<Vec<_>>(), &weights, vsize)
                .map_err(|e| match e {
                    Rejection::TooLongChain(e) => format!("package-mempool-limits, {e}"),
                    e => e.to_string(),
                })?;
            let members: Vec<&Transaction> = txs.iter().collect();
            if self.config.profile == PolicyProfile::Core {
                // Core's `unspent-dust` is the member's refusal, not a package error.
                if let Err((i, e)) = inner.check_package_ephemeral_spends(&members) {
                    results[i].verdict = Some(Err(e));
                    return Ok(());
                }
            }
        }
        for (c, result) in checked.iter().zip(results.iter_mut()) {
            let verdict = self.check_scripts(c).map(|()| tested(c));
            let refused = verdict.is_err();
            result.verdict = Some(verdict);
            if refused {
                break;
            }
        }
        Ok(())
    }
}

fn tested(checked: &Checked) -> Tested {
    Tested {
        fee: checked.entry.fee,
        vsize: checked.entry.vsize,
    }
}

/// bitcoind's fee guard over the results in order: the first accepted transaction paying over
/// [`MAX_TEST_FEE_PER_KVB`] is refused (`max-fee-exceeded`) and the results after it are left
/// undecided.
fn cap_fees(results: &mut [TestAccept]) {
    let Some(first) = results
        .iter()
        .position(|r| matches!(r.verdict, Some(Ok(t)) if t.fee > max_test_fee(t.vsize)))
    else {
        return;
    };
    if let Some(Ok(t)) = results[first].verdict {
        results[first].verdict = Some(Err(Rejection::MaxFeeExceeded {
            fee: t.fee,
            max: max_test_fee(t.vsize),
        }));
    }
    for later in &mut results[first + 1..] {
        later.verdict = None;
    }
}

/// The most [`MAX_TEST_FEE_PER_KVB`] lets `vsize` vbytes pay.
fn max_test_fee(vsize: u64) -> u64 {
    MAX_TEST_FEE_PER_KVB.saturating_mul(vsize) / 1000
}

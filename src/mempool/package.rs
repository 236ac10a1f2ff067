//! Packages: a child with its parents submitted together ([`Mempool::accept_package`], the
//! shape of Core's `submitpackage`, with CPFP for parents below the relay fee), and dry runs of
//! one transaction or a package ([`Mempool::test_accept`], bitcoind's `testmempoolaccept`).

use std::collections::{HashMap, HashSet};

use bitcoin::{OutPoint, Transaction, TxOut, Txid, Wtxid};

use super::coins::CoinSource;
use super::{consensus, persist, policy, replacement, rolling, truc, Accepted, Checked, Mempool};
use super::{Rejection, MIN_RELAY_FEERATE};
use crate::index::Index;

/// The most a dry run lets a transaction pay, in satoshis per 1,000 vbytes: bitcoind's
/// `testmempoolaccept` default `maxfeerate` (`DEFAULT_MAX_RAW_TX_FEE_RATE`, 0.10 BTC/kvB),
/// which ElectrumX's `testmempoolaccept` leaves at its default.
pub const MAX_TEST_FEE_PER_KVB: u64 = 10_000_000;

/// The members of a package checked before the one being checked (Core's
/// `m_viewmempool.PackageAddTransaction`): their outputs are spendable as a mempool parent's.
#[derive(Default)]
pub(super) struct Staged {
    txs: HashMap<Txid, Transaction>,
    /// Whether a member may replace mempool transactions (not in a package dry run: Core's
    /// `PackageTestAccept` has `m_allow_replacement` off).
    no_replacement: bool,
}

impl Staged {
    /// An empty stage for a package dry run: no replacement.
    fn package() -> Staged {
        Staged {
            txs: HashMap::new(),
            no_replacement: true,
        }
    }

    /// Whether a transaction checked on this stage may replace mempool transactions.
    pub(super) fn allows_replacement(&self) -> bool {
        !self.no_replacement
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
    /// parent is first tried alone; parents refused only for paying less than the minimum relay
    /// fee are then taken together with the child if the package's fee rate (their fees and the
    /// child's over their sizes) reaches it (CPFP). Returns one result per transaction, in order;
    /// an `Err` for a malformed package as a whole.
    pub fn accept_package(
        &self,
        raws: &[Vec<u8>],
        index: &Index,
    ) -> Result<Vec<Result<Accepted, Rejection>>, Rejection> {
        self.accept_package_from(raws, index)
    }

    /// [`Mempool::accept_package`] over any [`CoinSource`].
    pub(super) fn accept_package_from(
        &self,
        raws: &[Vec<u8>],
        index: &dyn CoinSource,
    ) -> Result<Vec<Result<Accepted, Rejection>>, Rejection> {
        let txs: Vec<Transaction> = raws
            .iter()
            .map(|raw| consensus::decode(raw))
            .collect::<Result<_, _>>()?;
        policy::check_package_shape(&txs)?;
        let (parents, child) = raws.split_at(raws.len() - 1);
        let mut results: Vec<Result<Accepted, Rejection>> = Vec::with_capacity(raws.len());
        let mut cheap = Vec::new();
        for (i, raw) in parents.iter().enumerate() {
            match self.accept_with(raw, index, true, persist::now()) {
                Err(Rejection::MinRelayFee { .. } | Rejection::MempoolMinFee { .. }) => {
                    cheap.push(i);
                    results.push(Err(Rejection::Backend("pending".into())));
                }
                other => results.push(other),
            }
        }
        if cheap.is_empty() {
            results.push(self.accept_with(&child[0], index, true, persist::now()));
        } else {
            self.accept_paid_by_child(parents, &child[0], &cheap, &mut results, index);
        }
        Ok(results)
    }

    /// CPFP: the `cheap` parents (below the relay fee alone) and the child go in together if
    /// their fees over their sizes reach the relay fee, else all of them come back out. Fills in
    /// the results of the cheap parents and pushes the child's.
    fn accept_paid_by_child(
        &self,
        parents: &[Vec<u8>],
        child: &[u8],
        cheap: &[usize],
        results: &mut Vec<Result<Accepted, Rejection>>,
        index: &dyn CoinSource,
    ) {
        for &i in cheap {
            results[i] = self.accept_with(&parents[i], index, false, persist::now());
        }
        let child_result = self.accept_with(child, index, false, persist::now());
        let members: Vec<Txid> = cheap
            .iter()
            .filter_map(|&i| results[i].as_ref().ok().map(|a| a.txid))
            .chain(child_result.as_ref().ok().map(|a| a.txid))
            .collect();
        let (fees, vsize) = {
            let inner = self.read();
            members
                .iter()
                .filter_map(|t| inner.txs.get(t))
                .fold((0u64, 0u64), |(f, v), e| (f + e.fee, v + e.vsize))
        };
        let needed =
            (MIN_RELAY_FEERATE * vsize).max(rolling::fee_for(self.min_fee_per_kvb(), vsize));
        let all_in = child_result.is_ok() && cheap.iter().all(|&i| results[i].is_ok());
        if all_in && fees >= needed {
            results.push(child_result);
            return;
        }
        // Not paid for: take the cheap parents (and the child) back out.
        let mut touched = HashSet::new();
        {
            let mut inner = self.write();
            for t in &members {
                inner.remove_with_descendants(t, &mut touched);
            }
        }
        for &i in cheap {
            if results[i].is_ok() {
                results[i] = Err(Rejection::PackageFee { fees, needed });
            }
        }
        results.push(match child_result {
            Ok(_) => Err(Rejection::PackageFee { fees, needed }),
            Err(e) => Err(e),
        });
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

    /// A dry run of one transaction: [`Mempool::accept`]'s checks, those of the write lock
    /// under a read lock, before its scripts as in Core.
    fn test_one(&self, raw: &[u8], index: &dyn CoinSource) -> Result<Tested, Rejection> {
        let checked = self.pre_check(raw, index, true, persist::now(), &Staged::default())?;
        {
            let inner = self.read();
            let Checked {
                entry,
                from_parents,
                needed,
            } = &checked;
            let conflicts = inner.conflicts_of(entry, from_parents, true)?;
            let replaced = replacement(&inner, &conflicts, entry, from_parents, *needed)?;
            inner.check_chain_limits(&entry.tx, entry.vsize, &replaced.into_iter().collect())?;
        }
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
        policy::check_well_formed(txs).map_err(str::to_string)?;
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
            inner
                .check_package_limits(txs, vsize)
                .map_err(|e| format!("package-mempool-limits, {e}"))?;
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

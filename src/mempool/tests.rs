//! The mempool's rules over coins held in memory, scripts taken as valid (unsigned
//! transactions): no kernel, no index.

use std::collections::{HashMap, HashSet};

use bitcoin::absolute::LockTime;
use bitcoin::consensus::serialize;
use bitcoin::hashes::Hash;
use bitcoin::transaction::Version;
use bitcoin::{Amount, OutPoint, ScriptBuf, Sequence, Transaction, TxIn, TxOut, Txid, Witness};

use super::*;
use crate::config::MempoolConfig;
use crate::types::{Coin, Height};

/// A confirmed chain in memory: its tip and its unspent outputs.
#[derive(Default)]
struct Coins {
    tip: u32,
    /// Bumped by a reorg: every block's hash changes with it.
    epoch: u32,
    confirmed: HashSet<Txid>,
    unspent: HashMap<OutPoint, Coin>,
}

impl CoinSource for Coins {
    fn tip_height(&self) -> Option<u32> {
        Some(self.tip)
    }

    fn median_time_past(&self, height: u32) -> Option<u32> {
        // Ten minutes a block.
        (height <= self.tip).then(|| 1_700_000_000 + height * 600)
    }

    fn block_hash(&self, height: u32) -> Option<bitcoin::BlockHash> {
        let mut bytes = [0u8; 32];
        bytes[..4].copy_from_slice(&height.to_le_bytes());
        bytes[4..8].copy_from_slice(&self.epoch.to_le_bytes());
        (height <= self.tip).then(|| bitcoin::BlockHash::from_byte_array(bytes))
    }

    fn is_confirmed(&self, txid: &Txid) -> Result<bool, CoinError> {
        Ok(self.confirmed.contains(txid))
    }

    fn confirmed_unspent(&self, op: &OutPoint) -> Result<Option<Coin>, CoinError> {
        Ok(self.unspent.get(op).cloned())
    }

    fn is_confirmed_unspent(&self, op: &OutPoint) -> Result<bool, CoinError> {
        Ok(self.unspent.contains_key(op))
    }
}

impl Coins {
    /// A chain at height 200.
    fn new() -> Self {
        Coins {
            tip: 200,
            ..Default::default()
        }
    }

    /// Adds a confirmed output of `sats` paying `script(n)` at `height`.
    fn add_at(&mut self, n: u8, sats: u64, height: u32, coinbase: bool) -> OutPoint {
        let op = OutPoint::new(Txid::from_byte_array([n; 32]), 0);
        self.confirmed.insert(op.txid);
        let out = TxOut {
            value: Amount::from_sat(sats),
            script_pubkey: script(n),
        };
        self.unspent.insert(
            op,
            Coin {
                output: out,
                height,
                coinbase,
            },
        );
        op
    }

    /// Adds a confirmed, mature, non-coinbase output of `sats` paying `script(n)`.
    fn add(&mut self, n: u8, sats: u64) -> OutPoint {
        self.add_at(n, sats, 10, false)
    }

    /// A block confirms `tx`: what it spends leaves the unspent set, its outputs enter it.
    fn confirm(&mut self, tx: &Transaction) {
        let txid = tx.compute_txid();
        self.tip += 1;
        self.confirmed.insert(txid);
        for input in &tx.input {
            self.unspent.remove(&input.previous_output);
        }
        for (vout, out) in tx.output.iter().enumerate() {
            let op = OutPoint::new(txid, vout as u32);
            let coin = Coin {
                output: out.clone(),
                height: self.tip,
                coinbase: false,
            };
            self.unspent.insert(op, coin);
        }
    }
}

/// A standard (P2WPKH) output script, one per `n`.
fn script(n: u8) -> ScriptBuf {
    ScriptBuf::new_p2wpkh(&bitcoin::WPubkeyHash::from_byte_array([n; 20]))
}

/// An unsigned transaction spending `inputs` into outputs of `outputs` satoshis paying
/// `script(100)`.
fn spend(inputs: &[OutPoint], outputs: &[u64]) -> Transaction {
    spend_to(inputs, outputs, 100)
}

/// As [`spend`], paying `script(n)`.
fn spend_to(inputs: &[OutPoint], outputs: &[u64], n: u8) -> Transaction {
    Transaction {
        version: Version::TWO,
        lock_time: LockTime::ZERO,
        input: inputs
            .iter()
            .map(|op| TxIn {
                previous_output: *op,
                script_sig: ScriptBuf::new(),
                sequence: Sequence::MAX,
                witness: Witness::new(),
            })
            .collect(),
        output: outputs
            .iter()
            .map(|sats| TxOut {
                value: Amount::from_sat(*sats),
                script_pubkey: script(n),
            })
            .collect(),
    }
}

fn all_scripts_valid(_: &Transaction, _: &[u8], _: &[TxOut], _: bool) -> Result<(), Rejection> {
    Ok(())
}

/// A mempool of the default size that takes every script as valid.
fn pool() -> Mempool {
    pool_of(MempoolConfig::knots().max_bytes)
}

fn pool_of(max_bytes: u64) -> Mempool {
    let config = MempoolConfig {
        max_bytes,
        persist: false,
        ..MempoolConfig::knots()
    };
    Mempool::with_script_check(config, all_scripts_valid)
}

/// The memory a pool of `config`'s profile takes for `txs`, accepted in order with no limit:
/// what a test's limit is set against.
fn usage_of(config: MempoolConfig, coins: &Coins, txs: &[&Transaction]) -> u64 {
    let config = MempoolConfig {
        persist: false,
        ..config
    };
    let pool = Mempool::with_script_check(config, all_scripts_valid);
    for tx in txs {
        accept(&pool, coins, tx).unwrap();
    }
    pool.memory_usage().0
}

/// [`usage_of`] in Knots's profile, that of [`pool_of`].
fn knots_usage(coins: &Coins, txs: &[&Transaction]) -> u64 {
    usage_of(MempoolConfig::knots(), coins, txs)
}

fn accept(pool: &Mempool, coins: &Coins, tx: &Transaction) -> Result<Accepted, Rejection> {
    pool.accept_with(&serialize(tx), coins, true, persist::now())
}

fn vsize(tx: &Transaction) -> u64 {
    tx.vsize() as u64
}

fn out(tx: &Transaction, vout: u32) -> OutPoint {
    OutPoint::new(tx.compute_txid(), vout)
}

fn has(pool: &Mempool, tx: &Transaction) -> bool {
    pool.entry(&tx.compute_txid()).is_some()
}

fn replacement_reason(result: Result<Accepted, Rejection>) -> String {
    match result {
        Err(Rejection::Replacement { reason, .. }) => reason,
        other => panic!("expected a refused replacement, got {other:?}"),
    }
}

#[test]
fn accepts_a_spend_of_a_confirmed_coin() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = pool();
    let tx = spend(&[coin], &[99_000]);
    let accepted = accept(&pool, &coins, &tx).unwrap();
    assert_eq!(accepted.txid, tx.compute_txid());
    assert!(accepted.replaced.is_empty());
    let touched: HashSet<ScriptHash> = [script(1), script(100)]
        .iter()
        .map(|s| ScriptHash::of(s))
        .collect();
    assert_eq!(accepted.touched, touched);
    let entry = pool.entry(&tx.compute_txid()).unwrap();
    assert_eq!((entry.fee, entry.vsize), (1000, vsize(&tx)));
    assert_eq!(entry.prevouts, vec![coins.unspent[&coin].output.clone()]);
    assert!(!entry.has_unconfirmed_parent);
    assert_eq!(pool.size(), (1, vsize(&tx)));
    assert!(pool.is_spent(&coin));
    let history = pool.history(&ScriptHash::of(&script(1)));
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].height, history[0].fee),
        (Height::Unconfirmed, Some(Amount::from_sat(1000)))
    );
}

#[test]
fn refuses_missing_inputs_and_known_transactions() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = pool();
    let nowhere = OutPoint::new(Txid::from_byte_array([9; 32]), 0);
    assert_eq!(
        accept(&pool, &coins, &spend(&[coin, nowhere], &[90_000])).unwrap_err(),
        Rejection::MissingInputs(nowhere)
    );
    let parent = spend(&[coin], &[99_000]);
    accept(&pool, &coins, &parent).unwrap();
    assert_eq!(
        accept(&pool, &coins, &parent).unwrap_err(),
        Rejection::AlreadyInMempool
    );
    // The same transaction with another witness: Core's own reason.
    let mut malleated = parent.clone();
    malleated.input[0].witness = Witness::from_slice(&[vec![1u8; 72]]);
    assert_eq!(
        accept(&pool, &coins, &malleated).unwrap_err(),
        Rejection::SameNonWitnessData
    );
    // An output the mempool parent does not have.
    let beyond = out(&parent, 1);
    assert_eq!(
        accept(&pool, &coins, &spend(&[beyond], &[1000])).unwrap_err(),
        Rejection::MissingInputs(beyond)
    );
    // Spent in the chain meanwhile.
    let other = coins.add(2, 50_000);
    coins.unspent.remove(&other);
    assert_eq!(
        accept(&pool, &coins, &spend(&[other], &[40_000])).unwrap_err(),
        Rejection::MissingInputs(other)
    );
    // Already confirmed.
    let third = coins.add(3, 50_000);
    let confirmed = spend(&[third], &[40_000]);
    coins.confirmed.insert(confirmed.compute_txid());
    assert_eq!(
        accept(&pool, &coins, &confirmed).unwrap_err(),
        Rejection::AlreadyKnown
    );
    assert_eq!(pool.size().0, 1);
}

#[test]
fn coinbase_outputs_mature_after_100_blocks() {
    let mut coins = Coins::new();
    // The next block is 201: an output of block 102 has 99 confirmations then, of 101 100.
    let young = coins.add_at(1, 100_000, 102, true);
    let old = coins.add_at(2, 100_000, 101, true);
    let pool = pool();
    assert_eq!(
        accept(&pool, &coins, &spend(&[young], &[99_000])).unwrap_err(),
        Rejection::ImmatureCoinbase(young)
    );
    accept(&pool, &coins, &spend(&[old], &[99_000])).unwrap();
    let mut coinbase = spend(&[OutPoint::null()], &[1000]);
    coinbase.input[0].script_sig = ScriptBuf::from_bytes(vec![1, 2]);
    assert_eq!(
        accept(&pool, &coins, &coinbase).unwrap_err(),
        Rejection::Coinbase
    );
}

#[test]
fn fee_must_reach_the_minimum_relay_fee_and_outputs_not_exceed_inputs() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = pool();
    let size = vsize(&spend(&[coin], &[0]));
    let cheap = spend(&[coin], &[100_000 - (size - 1)]);
    assert_eq!(
        accept(&pool, &coins, &cheap).unwrap_err(),
        Rejection::MinRelayFee {
            fee: size - 1,
            needed: size
        }
    );
    let over = spend(&[coin], &[100_001]);
    assert_eq!(
        accept(&pool, &coins, &over).unwrap_err(),
        Rejection::InBelowOut {
            inputs: 100_000,
            outputs: 100_001
        }
    );
    accept(&pool, &coins, &spend(&[coin], &[100_000 - size])).unwrap();
}

#[test]
fn a_child_of_a_mempool_transaction_has_an_unconfirmed_parent() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = pool();
    let parent = spend(&[coin], &[99_000]);
    let child = spend(&[out(&parent, 0)], &[98_000]);
    accept(&pool, &coins, &parent).unwrap();
    accept(&pool, &coins, &child).unwrap();
    let entry = pool.entry(&child.compute_txid()).unwrap();
    assert!(entry.has_unconfirmed_parent);
    assert_eq!(entry.prevouts, vec![parent.output[0].clone()]);
    let heights: Vec<(Txid, Height)> = pool
        .history(&ScriptHash::of(&script(100)))
        .iter()
        .map(|e| (e.txid, e.height))
        .collect();
    assert_eq!(
        heights,
        vec![
            (parent.compute_txid(), Height::Unconfirmed),
            (child.compute_txid(), Height::UnconfirmedParents)
        ]
    );
    assert_eq!(
        pool.spender(&out(&parent, 0)),
        Some((child.compute_txid(), Height::UnconfirmedParents))
    );
}

#[test]
fn a_double_spend_paying_no_more_is_refused() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = pool();
    let first = spend(&[coin], &[99_000]);
    accept(&pool, &coins, &first).unwrap();
    // Same size, same fee, another transaction.
    let second = spend_to(&[coin], &[99_000], 101);
    let reason = replacement_reason(accept(&pool, &coins, &second));
    assert!(reason.contains("feerate"), "{reason}");
    assert!(has(&pool, &first) && !has(&pool, &second));
    assert_eq!(
        pool.spender(&coin),
        Some((first.compute_txid(), Height::Unconfirmed))
    );
}

#[test]
fn rbf_needs_a_higher_feerate_than_each_conflict() {
    // Rule 6: more fee in all, but over a larger size a lower rate.
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = pool();
    let old = spend(&[a], &[99_000]);
    accept(&pool, &coins, &old).unwrap();
    let new = spend(&[a, b], &[198_600]);
    assert!(1400 * vsize(&old) < 1000 * vsize(&new));
    let reason = replacement_reason(accept(&pool, &coins, &new));
    assert!(reason.contains("feerate"), "{reason}");
    assert!(has(&pool, &old));
}

#[test]
fn rbf_must_pay_more_than_everything_it_replaces() {
    // Rule 3: a higher rate than the conflict, but less than it and its child paid together.
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = pool();
    let old = spend(&[coin], &[99_000]);
    let child = spend(&[out(&old, 0)], &[94_000]);
    accept(&pool, &coins, &old).unwrap();
    accept(&pool, &coins, &child).unwrap();
    let new = spend(&[coin], &[97_000]);
    let reason = replacement_reason(accept(&pool, &coins, &new));
    assert_eq!(
        reason, "fee 3000 not above the replaced transactions' 6000",
        "{reason}"
    );
    assert!(has(&pool, &old) && has(&pool, &child) && !has(&pool, &new));
}

#[test]
fn rbf_pays_the_relay_fee_for_its_own_size_on_top() {
    // Rule 4, then an accepted replacement that takes the conflict's child with it.
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = pool();
    let old = spend(&[coin], &[99_000]);
    let child = spend(&[out(&old, 0)], &[98_000]);
    accept(&pool, &coins, &old).unwrap();
    accept(&pool, &coins, &child).unwrap();
    let size = vsize(&old);
    let short = spend(&[coin], &[100_000 - (2000 + size - 1)]);
    let reason = replacement_reason(accept(&pool, &coins, &short));
    assert_eq!(
        reason,
        format!(
            "additional fee {} below the relay fee for its size, {size}",
            size - 1
        )
    );
    let enough = spend(&[coin], &[100_000 - (2000 + size)]);
    let accepted = accept(&pool, &coins, &enough).unwrap();
    let mut replaced = vec![old.compute_txid(), child.compute_txid()];
    replaced.sort();
    assert_eq!(accepted.replaced, replaced);
    assert_eq!(pool.txids(), vec![enough.compute_txid()]);
    assert_eq!(pool.size(), (1, size));
    assert_eq!(
        pool.spender(&coin),
        Some((enough.compute_txid(), Height::Unconfirmed))
    );
    assert!(!pool.is_spent(&out(&old, 0)));
}

#[test]
fn rbf_may_not_add_new_unconfirmed_inputs() {
    // Rule 2: the replacement may spend unconfirmed outputs only of transactions a conflict
    // spends from.
    let mut coins = Coins::new();
    let (a, b, c) = (
        coins.add(1, 100_000),
        coins.add(2, 100_000),
        coins.add(3, 100_000),
    );
    let pool = pool();
    let parent = spend(&[b], &[40_000, 40_000]);
    accept(&pool, &coins, &parent).unwrap();
    let old = spend(&[a], &[99_000]);
    accept(&pool, &coins, &old).unwrap();
    let new = spend(&[a, out(&parent, 0)], &[100_000]);
    assert_eq!(
        accept(&pool, &coins, &new).unwrap_err(),
        Rejection::AddsUnconfirmed {
            txid: new.compute_txid(),
            input: out(&parent, 0)
        }
    );
    assert!(has(&pool, &old));
    // A conflict that spends from `parent` allows another of its outputs.
    let old = spend(&[c, out(&parent, 0)], &[139_000]);
    accept(&pool, &coins, &old).unwrap();
    let new = spend(&[c, out(&parent, 1)], &[130_000]);
    let accepted = accept(&pool, &coins, &new).unwrap();
    assert_eq!(accepted.replaced, vec![old.compute_txid()]);
    assert!(
        pool.entry(&new.compute_txid())
            .unwrap()
            .has_unconfirmed_parent
    );
    assert!(!pool.is_spent(&out(&parent, 0)));
}

/// A mempool holding `n` spends of `n` coins, each with a child (the chain limits allow no
/// wider fan of one transaction); the coins.
fn fan_out(n: u8) -> (Mempool, Coins, Vec<OutPoint>) {
    let mut coins = Coins::new();
    let spent: Vec<OutPoint> = (1..=n).map(|i| coins.add(i, 100_000)).collect();
    let pool = pool();
    for coin in &spent {
        let conflict = spend(&[*coin], &[99_000]);
        accept(&pool, &coins, &conflict).unwrap();
        accept(&pool, &coins, &spend(&[out(&conflict, 0)], &[98_000])).unwrap();
    }
    (pool, coins, spent)
}

#[test]
fn rbf_replaces_at_most_100_transactions() {
    // Rule 5: the conflicts and their descendants count.
    let (pool, coins, spent) = fan_out(51);
    let new = spend(&spent, &[51 * 100_000 - 300_000]);
    let reason = replacement_reason(accept(&pool, &coins, &new));
    assert_eq!(reason, "it would replace more than 100 transactions");
    assert_eq!(pool.size().0, 102);
    // One conflict fewer.
    let (pool, coins, spent) = fan_out(50);
    let new = spend(&spent, &[50 * 100_000 - 300_000]);
    let accepted = accept(&pool, &coins, &new).unwrap();
    assert_eq!(accepted.replaced.len(), 100);
    assert_eq!(pool.txids(), vec![new.compute_txid()]);
    assert!(
        pool.read().children.is_empty(),
        "no edge outlives its transactions"
    );
}

#[test]
fn chains_stop_at_25_transactions_with_one_carve_out() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 10_000_000);
    let pool = pool();
    let first = spend(&[coin], &[3_000_000, 3_000_000, 3_000_000]);
    accept(&pool, &coins, &first).unwrap();
    let (mut tip, mut value) = (out(&first, 0), 3_000_000);
    for _ in 1..25 {
        value -= 1_000;
        let next = spend(&[tip], &[value]);
        accept(&pool, &coins, &next).unwrap();
        tip = out(&next, 0);
    }
    let too_long = spend(&[tip], &[value - 1_000]);
    let refused = accept(&pool, &coins, &too_long);
    assert!(
        matches!(refused, Err(Rejection::TooLongChain(_))),
        "{refused:?}"
    );
    // The first has 25 with its descendants: one more small child with a single unconfirmed
    // ancestor is let in (the carve-out), a second is not.
    accept(&pool, &coins, &spend(&[out(&first, 1)], &[2_999_000])).unwrap();
    let again = accept(&pool, &coins, &spend(&[out(&first, 2)], &[2_999_000]));
    assert!(
        matches!(again, Err(Rejection::TooLongChain(_))),
        "{again:?}"
    );
    assert_eq!(pool.size().0, 26);
}

#[test]
fn a_replacement_may_not_spend_what_it_replaces() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = pool();
    let c1 = spend(&[a], &[40_000, 40_000]);
    accept(&pool, &coins, &c1).unwrap();
    accept(&pool, &coins, &spend(&[out(&c1, 0)], &[39_000])).unwrap();
    // Conflicts with c1 and spends c1's second output.
    let new = spend(&[a, out(&c1, 1), b], &[150_000]);
    let refused = accept(&pool, &coins, &new);
    assert!(
        matches!(refused, Err(Rejection::SpendsConflicting { .. })),
        "{refused:?}"
    );
    assert_eq!(pool.size().0, 2);
}

#[test]
fn over_its_size_the_mempool_evicts_the_lowest_score() {
    let mut coins = Coins::new();
    let (a, b, c, d) = (
        coins.add(1, 100_000),
        coins.add(2, 100_000),
        coins.add(3, 100_000),
        coins.add(4, 100_000),
    );
    // A cheap parent with a child paying well (a package of about 45 sat/vB), and a
    // transaction paying about 4.5.
    let cheap = spend(&[a], &[99_800]);
    let child = spend(&[out(&cheap, 0)], &[90_000]);
    let low = spend(&[b], &[99_500]);
    let pool = pool_of(knots_usage(&coins, &[&cheap, &child, &low]));
    for tx in [&cheap, &child, &low] {
        accept(&pool, &coins, tx).unwrap();
    }
    assert_eq!(pool.min_fee_per_kvb(), 0, "no floor before an eviction");
    // The newcomer is the lowest: refused, the rest stays.
    let lowest = spend(&[d], &[99_850]);
    assert_eq!(
        accept(&pool, &coins, &lowest).unwrap_err(),
        Rejection::MempoolFull
    );
    assert_eq!(pool.size().0, 3);
    assert!(!pool.is_spent(&d));
    // A better one evicts the lowest score, not the cheap parent its child pays for.
    let mid = spend(&[c], &[99_000]);
    let accepted = accept(&pool, &coins, &mid).unwrap();
    assert!(accepted.touched.contains(&ScriptHash::of(&script(2))));
    assert!(has(&pool, &cheap) && has(&pool, &child) && has(&pool, &mid));
    assert!(!has(&pool, &low) && !pool.is_spent(&b));
    let inner = pool.read();
    assert_eq!(
        inner.by_score.len(),
        3,
        "the index holds what the pool holds"
    );
    assert_eq!(inner.by_time.len(), 3);
    drop(inner);
}

#[test]
fn after_an_eviction_what_enters_pays_the_evicted_rate_and_more() {
    let mut coins = Coins::new();
    let (a, b, c) = (
        coins.add(1, 100_000),
        coins.add(2, 100_000),
        coins.add(3, 100_000),
    );
    let low = spend(&[a], &[99_500]);
    let mid = spend(&[b], &[99_000]);
    let pool = pool_of(knots_usage(&coins, &[&low, &mid]) - 1);
    accept(&pool, &coins, &low).unwrap();
    accept(&pool, &coins, &mid).unwrap();
    assert!(!has(&pool, &low));
    // Core's trackPackageRemoved: the evicted package's rate plus the incremental relay fee,
    // 1 sat/vB.
    let floor = 500 * 1000 / vsize(&low) + 1000;
    assert_eq!(pool.min_fee_per_kvb(), floor);
    assert_eq!(pool.entry_fee_per_kvb(), floor);
    let under = spend(&[c], &[99_450]);
    let needed = rolling::fee_for(floor, vsize(&under));
    assert_eq!(
        accept(&pool, &coins, &under).unwrap_err(),
        Rejection::MempoolMinFee { fee: 550, needed }
    );
    accept(&pool, &coins, &spend(&[c], &[95_000])).unwrap();
    // A block starts the decay; a fresh floor stays until its first ten seconds pass.
    pool.revalidate_from(&coins);
    assert!(pool.min_fee_per_kvb() >= floor);
}

/// A pool enforcing TRUC, whose version 3 parents below the relay fee a child may pay for.
fn truc_pool() -> Mempool {
    let config = MempoolConfig {
        persist: false,
        truc: crate::config::TrucPolicy::Enforce,
        ..MempoolConfig::knots()
    };
    Mempool::with_script_check(config, all_scripts_valid)
}

/// `tx` as version 3.
fn v3(mut tx: Transaction) -> Transaction {
    tx.version = Version(3);
    tx
}

#[test]
fn a_child_pays_for_its_parent_in_a_package() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = truc_pool();
    let parent = v3(spend(&[coin], &[100_000]));
    let child = v3(spend(&[out(&parent, 0)], &[99_000]));
    assert!(matches!(
        accept(&pool, &coins, &parent),
        Err(Rejection::MinRelayFee { fee: 0, .. })
    ));
    let raws = vec![serialize(&parent), serialize(&child)];
    let results = pool.accept_package_from(&raws, &coins).unwrap().each;
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].as_ref().unwrap().txid, parent.compute_txid());
    assert_eq!(results[1].as_ref().unwrap().txid, child.compute_txid());
    assert!(has(&pool, &parent) && has(&pool, &child));
}

#[test]
fn a_free_parent_of_another_version_is_refused_even_with_a_child() {
    // Core 28 and later, and the reference Knots: `min relay fee not met` is final for any
    // parent but a TRUC one; its child then spends nothing known.
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    for pool in [pool(), truc_pool()] {
        let parent = spend(&[coin], &[100_000]);
        let child = spend(&[out(&parent, 0)], &[90_000]);
        let raws = vec![serialize(&parent), serialize(&child)];
        let results = pool.accept_package_from(&raws, &coins).unwrap().each;
        assert!(matches!(
            results[0],
            Err(Rejection::MinRelayFee { fee: 0, .. })
        ));
        assert!(matches!(results[1], Err(Rejection::MissingInputs(_))));
        assert_eq!(pool.size(), (0, 0));
    }
}

#[test]
fn a_package_whose_child_pays_too_little_leaves_nothing() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = truc_pool();
    let parent = v3(spend(&[coin], &[100_000]));
    // Enough for the child alone, not for both.
    let child = v3(spend(&[out(&parent, 0)], &[100_000 - vsize(&parent)]));
    let needed = vsize(&parent) + vsize(&child);
    let raws = vec![serialize(&parent), serialize(&child)];
    let results = pool.accept_package_from(&raws, &coins).unwrap().each;
    let fee_too_low = Rejection::PackageFee {
        fees: vsize(&parent),
        needed,
    };
    let errors: Vec<Option<Rejection>> = results.into_iter().map(Result::err).collect();
    assert_eq!(errors, vec![Some(fee_too_low.clone()), Some(fee_too_low)]);
    assert_eq!(pool.size(), (0, 0));
    assert!(!pool.is_spent(&coin));
}

#[test]
fn a_package_is_a_child_with_its_parents() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = pool();
    let parent = spend(&[a], &[99_000]);
    let stranger = spend(&[b], &[99_000]);
    let child = spend(&[out(&parent, 0)], &[98_000]);
    let shape = |txs: &[&Transaction]| {
        let raws: Vec<Vec<u8>> = txs.iter().map(|t| serialize(*t)).collect();
        pool.accept_package_from(&raws, &coins).map(|_| ())
    };
    let not_a_parent = shape(&[&stranger, &child]).unwrap_err();
    assert!(matches!(not_a_parent, Rejection::PackageShape(_)));
    assert!(matches!(
        shape(&[&parent, &parent, &child]).unwrap_err(),
        Rejection::PackageShape(_)
    ));
    let grandchild = spend(&[out(&child, 0)], &[97_000]);
    assert!(matches!(
        shape(&[&parent, &child, &grandchild]).unwrap_err(),
        Rejection::PackageShape(_)
    ));
    assert!(matches!(
        shape(&[]).unwrap_err(),
        Rejection::PackageShape(_)
    ));
    assert_eq!(pool.size().0, 0);
    // Well formed, each paying its way: each goes in on its own.
    let results = pool
        .accept_package_from(&[serialize(&parent), serialize(&child)], &coins)
        .unwrap()
        .each;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(pool.size().0, 2);
}

#[test]
fn a_block_removes_what_it_confirms_and_what_it_conflicts_with() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = pool();
    let parent = spend(&[a], &[99_000]);
    let child = spend(&[out(&parent, 0)], &[98_000]);
    let doomed = spend(&[b], &[99_000]);
    let doomed_child = spend(&[out(&doomed, 0)], &[98_000]);
    for tx in [&parent, &child, &doomed, &doomed_child] {
        accept(&pool, &coins, tx).unwrap();
    }
    coins.confirm(&parent);
    coins.confirm(&spend(&[b], &[90_000]));
    let touched = pool.revalidate_from(&coins);
    assert_eq!(pool.txids(), vec![child.compute_txid()]);
    let entry = pool.entry(&child.compute_txid()).unwrap();
    assert!(!entry.has_unconfirmed_parent);
    assert_eq!(
        pool.history(&ScriptHash::of(&script(100)))[0].height,
        Height::Unconfirmed
    );
    assert!(touched.contains(&ScriptHash::of(&script(1))));
    assert!(touched.contains(&ScriptHash::of(&script(2))));
    assert!(!pool.is_spent(&b) && !pool.is_spent(&a));
}

fn non_standard(tx: &Transaction) -> String {
    match standard::check_standard(tx, &MempoolConfig::knots()) {
        Err(Rejection::NonStandard(reason)) => reason,
        other => panic!("expected a standardness rejection, got {other:?}"),
    }
}

#[test]
fn standardness_rules() {
    let coin = OutPoint::new(Txid::from_byte_array([1; 32]), 0);
    let base = spend(&[coin], &[1000]);
    assert!(standard::check_standard(&base, &MempoolConfig::knots()).is_ok());
    for version in [0, 4] {
        let mut tx = base.clone();
        tx.version = Version(version);
        assert_eq!(non_standard(&tx), "version");
    }
    // P2WPKH's dust threshold at Core's 3 sat/vB: 294.
    assert!(standard::check_standard(&spend(&[coin], &[294]), &MempoolConfig::knots()).is_ok());
    assert_eq!(non_standard(&spend(&[coin], &[293])), "dust");
    let mut bare = base.clone();
    bare.output[0].script_pubkey = ScriptBuf::from_bytes(vec![0x51]);
    assert_eq!(non_standard(&bare), "scriptpubkey");
    let data = |len: usize| TxOut {
        value: Amount::ZERO,
        script_pubkey: ScriptBuf::from_bytes(
            [vec![0x6a, 0x4c, len as u8 - 3], vec![0; len - 3]].concat(),
        ),
    };
    let mut op_return = base.clone();
    op_return.output.push(data(83));
    assert!(standard::check_standard(&op_return, &MempoolConfig::knots()).is_ok());
    op_return.output[1] = data(84);
    assert_eq!(non_standard(&op_return), "scriptpubkey");
    op_return.output[1] = data(83);
    op_return.output.push(data(10));
    assert_eq!(non_standard(&op_return), "multi-op-return");
    let mut not_push = base.clone();
    not_push.input[0].script_sig = ScriptBuf::from_bytes(vec![0x61]);
    assert_eq!(non_standard(&not_push), "scriptsig-not-pushonly");
    let mut long_sig = base.clone();
    long_sig.input[0].script_sig = ScriptBuf::from_bytes(vec![0; 1651]);
    assert_eq!(non_standard(&long_sig), "scriptsig-size");
    let heavy = spend(&[coin], &[1000; 3300]);
    assert!(heavy.weight().to_wu() > standard::MAX_STANDARD_TX_WEIGHT);
    assert_eq!(non_standard(&heavy), "tx-size");
}

/// A bare `m`-of-`n` multisig of one repeated key.
fn multisig(m: u8, n: u8) -> ScriptBuf {
    let mut bytes = vec![0x50 + m];
    for _ in 0..n {
        bytes.push(33);
        bytes.extend_from_slice(&[2; 33]);
    }
    bytes.extend_from_slice(&[0x50 + n, 0xae]);
    ScriptBuf::from_bytes(bytes)
}

#[test]
fn bare_multisig_tiny_transactions_and_bare_data_follow_core_and_knots() {
    let coin = OutPoint::new(Txid::from_byte_array([1; 32]), 0);
    let knots = MempoolConfig::knots();
    let core = MempoolConfig {
        permit_bare_multisig: true,
        permit_bare_datacarrier: true,
        permit_bare_pubkey: true,
        ..MempoolConfig::knots()
    };
    let paying = |script: ScriptBuf| {
        let mut tx = spend(&[coin], &[100_000]);
        tx.output[0].script_pubkey = script;
        tx
    };
    // 1 to 3 keys, m at most n; Knots refuses even those by default.
    for (m, n, ok) in [
        (1, 1, true),
        (1, 3, true),
        (3, 3, true),
        (1, 4, false),
        (2, 1, false),
    ] {
        let verdict = standard::check_standard(&paying(multisig(m, n)), &core);
        assert_eq!(verdict.is_ok(), ok, "{m}-of-{n}");
        let knots_reason = if ok { "bare-multisig" } else { "scriptpubkey" };
        assert_eq!(
            standard::check_standard(&paying(multisig(m, n)), &knots),
            Err(Rejection::NonStandard(knots_reason.into())),
            "{m}-of-{n} under Knots"
        );
    }
    // One input and a 4-byte output script: 64 bytes without witness, one too few.
    let tiny = paying(ScriptBuf::from_bytes(vec![0x51, 0x02, 0xca, 0xfe]));
    assert_eq!(tiny.base_size(), 64);
    assert_eq!(
        standard::check_standard(&tiny, &core),
        Err(Rejection::NonStandard("tx-size-small".into()))
    );
    // Only an OP_RETURN (and an anchor, which pays nobody): Knots's bare-datacarrier.
    let mut data = paying(ScriptBuf::from_bytes(vec![0x6a, 0x02, 0xca, 0xfe]));
    data.output[0].value = Amount::ZERO;
    data.output.push(TxOut {
        value: Amount::from_sat(240),
        script_pubkey: ScriptBuf::from_bytes(vec![0x51, 0x02, 0x4e, 0x73]),
    });
    assert_eq!(
        standard::check_standard(&data, &knots),
        Err(Rejection::NonStandard("bare-datacarrier".into()))
    );
    assert!(standard::check_standard(&data, &core).is_ok());
    // A bare pubkey output: Knots's bare-pubkey.
    let mut key = vec![0x21, 0x02];
    key.extend([0x11; 32]);
    key.push(0xac);
    let p2pk = paying(ScriptBuf::from_bytes(key));
    assert!(standard::check_standard(&p2pk, &core).is_ok());
    assert_eq!(
        standard::check_standard(&p2pk, &knots),
        Err(Rejection::NonStandard("bare-pubkey".into()))
    );
}

#[test]
fn op_return_outputs_follow_knots_by_default_and_core_30_when_told() {
    let coin = OutPoint::new(Txid::from_byte_array([1; 32]), 0);
    let with_data = |sizes: &[usize]| {
        let mut tx = spend(&[coin], &[100_000]);
        for &size in sizes {
            // OP_RETURN, OP_PUSHDATA1 and the data: `size` bytes of script.
            let mut script = vec![0x6a, 0x4c, (size - 3) as u8];
            script.resize(size, 0xab);
            tx.output.push(TxOut {
                value: Amount::ZERO,
                script_pubkey: ScriptBuf::from_bytes(script),
            });
        }
        tx
    };
    let knots = MempoolConfig::knots();
    let core_30 = MempoolConfig {
        datacarrier_size: 100_000,
        permit_multiple_datacarrier: true,
        ..MempoolConfig::knots()
    };
    let verdict = |tx: &Transaction, config: &MempoolConfig| {
        standard::check_standard(tx, config)
            .err()
            .map(|e| e.to_string())
    };
    assert_eq!(verdict(&with_data(&[83]), &knots), None);
    assert_eq!(
        verdict(&with_data(&[84]), &knots).as_deref(),
        Some("scriptpubkey")
    );
    assert_eq!(
        verdict(&with_data(&[40, 40]), &knots).as_deref(),
        Some("multi-op-return")
    );
    assert_eq!(verdict(&with_data(&[200, 200, 200]), &core_30), None);
    // Core 30 counts them together.
    let small = MempoolConfig {
        datacarrier_size: 100,
        ..core_30
    };
    assert_eq!(verdict(&with_data(&[50, 50]), &small), None);
    assert_eq!(
        verdict(&with_data(&[50, 51]), &small).as_deref(),
        Some("datacarrier")
    );
}

#[test]
fn the_relay_fee_can_be_core_30s_tenth() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let config = MempoolConfig {
        persist: false,
        min_relay_per_kvb: 100,
        ..MempoolConfig::knots()
    };
    let pool = Mempool::with_script_check(config, all_scripts_valid);
    // 82 vbytes at 0.1 sat/vB: 9 satoshis (rounded up), 8 too few.
    let cheap = spend(&[coin], &[100_000 - 8]);
    assert_eq!(
        accept(&pool, &coins, &cheap).unwrap_err(),
        Rejection::MinRelayFee { fee: 8, needed: 9 }
    );
    accept(&pool, &coins, &spend(&[coin], &[100_000 - 9])).unwrap();
    assert_eq!(pool.entry_fee_per_kvb(), 100);
}

#[test]
fn standardness_comes_before_the_inputs() {
    // Dust spending nothing that exists: refused as dust, the coins never asked.
    let coins = Coins::new();
    let nowhere = OutPoint::new(Txid::from_byte_array([9; 32]), 0);
    assert_eq!(
        accept(&pool(), &coins, &spend(&[nowhere], &[1])).unwrap_err(),
        Rejection::NonStandard("dust".into())
    );
}

#[test]
fn without_a_stub_scripts_are_verified() {
    // The production mempool: an unsigned spend of a P2WPKH output fails its script, in Core
    // 31's words for any script failure in the mempool.
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = Mempool::new(MempoolConfig::knots());
    let result = accept(&pool, &coins, &spend(&[coin], &[99_000]));
    assert!(
        matches!(&result, Err(Rejection::PolicyScript { input: 0, message })
            if message == "Witness program hash mismatch"),
        "{result:?}"
    );
    assert_eq!(pool.size().0, 0);
}

#[test]
fn a_lock_time_must_pass_at_the_next_block_and_a_reorg_below_it_drops_the_transaction() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 10_000);
    let mut tx = spend(&[coin], &[9_000]);
    tx.input[0].sequence = Sequence::ENABLE_LOCKTIME_NO_RBF;
    tx.lock_time = LockTime::from_consensus(201);
    let pool = pool();
    assert_eq!(accept(&pool, &coins, &tx).unwrap_err(), Rejection::NonFinal);
    // Height 200 is below the next block's (201): final.
    tx.lock_time = LockTime::from_consensus(200);
    accept(&pool, &coins, &tx).unwrap();
    // A reorg to height 199: the next block is 200, which the lock time does not pass.
    coins.tip = 199;
    let touched = pool.revalidate_from(&coins);
    assert!(pool.txids().is_empty(), "a non-final transaction stayed");
    assert!(touched.contains(&ScriptHash::of(&script(100))));
}

#[test]
fn relative_lock_times_count_from_the_coins_block_as_bip68() {
    let mut coins = Coins::new();
    let pool = pool();
    // Coins of block 195 (the tip is 200, the next block 201; ten minutes a block).
    let coin = |coins: &mut Coins, n: u8| coins.add_at(n, 10_000, 195, false);
    let locked = |coins: &mut Coins, n: u8, version: i32, sequence: u32| {
        let mut tx = spend(&[coin(coins, n)], &[9_000]);
        tx.version = Version(version);
        tx.input[0].sequence = Sequence(sequence);
        tx
    };
    let cases = [
        // By height: 195 + 6 - 1 = 200 is below 201; 195 + 7 - 1 is not.
        (2, 6, true),
        (2, 7, false),
        // By time (512 s units from the median time past of block 194, 3,600 s before the
        // tip's): 7 units pass, 8 do not.
        (2, (1 << 22) | 7, true),
        (2, (1 << 22) | 8, false),
        // Version 1 and the disable flag: no relative lock.
        (1, 7, true),
        (2, (1 << 31) | 7, true),
    ];
    for (n, (version, sequence, passes)) in cases.into_iter().enumerate() {
        let tx = locked(&mut coins, 10 + n as u8, version, sequence);
        let verdict = accept(&pool, &coins, &tx);
        assert_eq!(
            verdict.is_ok(),
            passes,
            "version {version}, sequence {sequence:#x}: {verdict:?}"
        );
        if !passes {
            assert_eq!(verdict.unwrap_err(), Rejection::NonBip68Final);
        }
    }
    // A mempool parent's outputs count as of the next block: a lock of 1 waits for it.
    let parent = spend(&[coins.add(30, 10_000)], &[9_000]);
    accept(&pool, &coins, &parent).unwrap();
    let from_parent = |sequence: u32| {
        let mut tx = spend(&[OutPoint::new(parent.compute_txid(), 0)], &[8_000]);
        tx.input[0].sequence = Sequence(sequence);
        tx
    };
    assert_eq!(
        accept(&pool, &coins, &from_parent(1)).unwrap_err(),
        Rejection::NonBip68Final
    );
    accept(&pool, &coins, &from_parent(0)).unwrap();
    // A reorg to 199: the height lock of 6 (last locked at 200) holds again, and it leaves.
    let six = pool
        .txids()
        .into_iter()
        .find(|id| {
            pool.entry(id)
                .is_some_and(|e| e.tx.input[0].sequence == Sequence(6))
        })
        .expect("the height lock of 6 entered");
    coins.tip = 199;
    pool.revalidate_from(&coins);
    assert!(pool.entry(&six).is_none());
}

#[test]
fn transactions_expire_after_two_weeks_with_their_descendants() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = pool();
    let old = spend(&[a], &[99_000]);
    // Two seconds from expiring: a second boundary passing meanwhile does not expire it early.
    let expiring = persist::now() - persist::EXPIRY_SECS + 2;
    pool.accept_with(&serialize(&old), &coins, true, expiring)
        .unwrap();
    let child = spend(&[out(&old, 0)], &[98_000]);
    accept(&pool, &coins, &child).unwrap();
    assert_eq!(pool.size().0, 2);
    // Past its two weeks, the next acceptance takes it out, with its child.
    std::thread::sleep(std::time::Duration::from_millis(3_100));
    let new = spend(&[b], &[99_000]);
    let accepted = accept(&pool, &coins, &new).unwrap();
    assert_eq!(pool.txids(), vec![new.compute_txid()]);
    assert!(accepted.touched.contains(&ScriptHash::of(&script(1))));
    assert!(pool.read().by_time.len() == 1 && pool.read().children.is_empty());
    // One already expired when it arrives is not kept.
    let stale = spend(&[out(&new, 0)], &[98_000]);
    let refused = pool.accept_with(&serialize(&stale), &coins, true, expiring - 10);
    assert_eq!(refused.err(), Some(Rejection::MempoolFull));
    assert_eq!(pool.size().0, 1);
}

mod core_policy;
mod evict;
mod evict_chunks;
mod projection;
mod test_accept;
mod truc;

#[test]
fn a_reorg_that_confirms_a_coin_later_restarts_its_relative_lock() {
    let mut coins = Coins::new();
    let pool = pool();
    // A coin of block 198 and a lock of 3: 198 + 3 - 1 = 200 is below the next block, 201.
    let coin = coins.add_at(1, 10_000, 198, false);
    let mut tx = spend(&[coin], &[9_000]);
    tx.input[0].sequence = Sequence(3);
    accept(&pool, &coins, &tx).unwrap();
    let entry = pool.entry(&tx.compute_txid()).unwrap();
    assert_eq!(entry.coins_block.map(|(h, _)| h), Some(198));
    // A block on top changes nothing.
    coins.tip = 201;
    pool.revalidate_from(&coins);
    assert!(has(&pool, &tx));
    // A reorg replaces blocks 198 on with three that confirm the coin in block 200: the lock
    // now ends at 202, the next block's height.
    coins.epoch += 1;
    coins.tip = 201;
    coins.unspent.get_mut(&coin).unwrap().height = 200;
    pool.revalidate_from(&coins);
    assert!(!has(&pool, &tx), "a lock the reorg restarted is not final");
}

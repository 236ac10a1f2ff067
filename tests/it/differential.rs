//! Issue 12, part 1: cairn's mempool acceptance against bitcoind's `testmempoolaccept`, the
//! oracle. Two oracles: Bitcoin Core 31.99 ([`Pair::start`]), judging against cairn's default
//! policy profile (Core 31's), for everything but Knots's own rules and knobs; and Bitcoin Knots
//! 29.4 ([`Pair::start_knots`]), judging against the Knots profile
//! ([`MempoolConfig::knots`]), for those (tests/differential/data_rules.rs, and the cases of a
//! Knots default or of a rule Core 31 dropped). Core is built without a wallet, so no test here
//! uses one: the test holds its own keys (tests/differential/keys.rs), mines coinbases to its
//! own address, builds and signs every transaction itself and keeps its own coins. `proptest`
//! mutates spends of those coins (an input twice, amounts at the edges, no inputs or outputs, an
//! unknown, spent or immature prevout, a broken signature, fees too low or negative); each
//! result is signed again where the mutation allows and given to both. Accept or refuse must
//! agree, and a refusal must name the same rule.

use crate::common;
mod data_rules;
mod defaults;
mod fees;
mod finality;
mod keys;
mod policy;
mod script_run;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use bitcoin::hex::{DisplayHex, FromHex};
use bitcoin::{Amount, OutPoint, Transaction, TxIn, TxOut, Txid};
use cairn::config::MempoolConfig;
use cairn::index::Index;
use cairn::mempool::Mempool;
use cairn::store::Store;
use cairn::types::Network;
use keys::{Keys, Kind};
use proptest::prelude::*;
use serde_json::{json, Value};

/// The seed of the test's keys.
const SEED: u64 = 12;

/// The bitcoind that judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Oracle {
    /// Bitcoin Core 31.99 (no wallet): cairn with its default profile, Core 31's.
    Core,
    /// Bitcoin Knots 29.4: cairn with the Knots profile.
    Knots,
}

/// bitcoind and a cairn index on the same chain, and the coins of the test's own keys.
struct Pair {
    node: common::Bitcoind,
    index: Arc<Index>,
    _validator: cairn::kernel::Validator,
    /// cairn's mempool settings: the policy profile of the oracle's.
    config: MempoolConfig,
    /// The keys every coin here belongs to.
    keys: Keys,
    /// The address blocks pay their coinbase to (a P2WPKH of `keys`).
    miner: String,
    /// Confirmed, mature coins: (outpoint, value, script), the 40 outputs of a transaction 5
    /// blocks deep first, then coinbases.
    coins: Vec<(OutPoint, u64, bitcoin::ScriptBuf)>,
    /// Coinbase outputs of the last blocks, not yet mature.
    immature: Vec<(OutPoint, u64)>,
    /// An output spent in the chain.
    spent: OutPoint,
    /// What the test's own payments ([`Pair::pay`]) spend, none of `coins`: mature coinbases,
    /// then each payment's change.
    reserve: RefCell<Vec<(OutPoint, TxOut)>>,
    /// The outputs of transactions looked up so far, by txid: what signatures commit to.
    outputs: RefCell<HashMap<Txid, Vec<TxOut>>>,
    _tmp: tempfile::TempDir,
}

impl Pair {
    /// Bitcoin Core 31.99 and cairn with its default profile.
    fn start() -> Pair {
        Pair::start_with(&[])
    }

    /// As [`Pair::start`], bitcoind with `extra` options.
    fn start_with(extra: &[&str]) -> Pair {
        Pair::launch(Oracle::Core, extra)
    }

    /// Bitcoin Knots 29.4 and cairn with the Knots profile.
    fn start_knots() -> Pair {
        Pair::launch(Oracle::Knots, &[])
    }

    /// `oracle` with `extra` options on a chain of 115 blocks mined to the test's address: the
    /// first coinbase spent to 40 outputs at 110 blocks (`spent`), the next three kept for
    /// [`Pair::pay`], those to 16 deep in `coins` with the 40, the last six `immature`.
    fn launch(oracle: Oracle, extra: &[&str]) -> Pair {
        let tmp = tempfile::tempdir().unwrap();
        let mut args = vec!["-txindex=1".to_string()];
        args.extend(extra.iter().map(|a| a.to_string()));
        let (node, config) = match oracle {
            Oracle::Core => (
                common::Bitcoind::start_core(&tmp.path().join("core"), &args),
                MempoolConfig::default(),
            ),
            Oracle::Knots => (
                common::Bitcoind::start(&tmp.path().join("knots"), &args),
                MempoolConfig::knots(),
            ),
        };
        let keys = Keys::new(SEED);
        let miner = keys.address(Kind::Bech32);
        node.rpc(&["generatetoaddress", "110", &miner]);
        node.wait_for_indexes(std::time::Duration::from_secs(60));
        let (validator, _events) = common::open_validator(tmp.path());
        let store = Arc::new(Store::open(&tmp.path().join("index")).unwrap());
        let files = cairn::kernel::blockfiles::KernelBlockFiles::new(
            &tmp.path().join("kernel/blocks"),
            Network::Regtest.magic(),
        );
        let index = Arc::new(Index::open(store, Some(files)).unwrap());
        let mut pair = Pair {
            node,
            index,
            _validator: validator,
            config,
            keys,
            miner,
            coins: Vec::new(),
            immature: Vec::new(),
            spent: OutPoint::null(),
            reserve: RefCell::new(Vec::new()),
            outputs: RefCell::new(HashMap::new()),
            _tmp: tmp,
        };
        pair.follow(1..=110);
        *pair.reserve.borrow_mut() = (1..=4).map(|h| pair.coinbase(h)).collect();
        pair.spent = pair.coinbase(1).0;
        // Coins over many confirmed outputs (the first coinbase is spent), then mined in with
        // some immature coinbases on top.
        let many: Vec<TxOut> = (0..40)
            .map(|_| TxOut {
                value: Amount::from_sat(50_000_000),
                script_pubkey: pair.keys.script(Kind::Bech32),
            })
            .collect();
        let fanned = pair.pay(many);
        assert_eq!(fanned.input[0].previous_output, pair.spent);
        pair.mine(5);
        let height: u32 = pair.node.rpc(&["getblockcount"]).parse().unwrap();
        let txid = fanned.compute_txid();
        let mut coins: Vec<_> = (0..40)
            .map(|vout| {
                let out = &fanned.output[vout];
                (
                    OutPoint::new(txid, vout as u32),
                    out.value.to_sat(),
                    out.script_pubkey.clone(),
                )
            })
            .collect();
        // Coinbases of 100 confirmations and more.
        coins.extend((5..=height - 99).map(|h| {
            let (op, out) = pair.coinbase(h);
            (op, out.value.to_sat(), out.script_pubkey)
        }));
        let immature = (height - 5..=height)
            .map(|h| {
                let (op, out) = pair.coinbase(h);
                (op, out.value.to_sat())
            })
            .collect::<Vec<_>>();
        assert_eq!(
            pair._validator.tip().hash.to_string(),
            pair.node.rpc(&["getbestblockhash"])
        );
        assert!(
            coins.len() >= 40 && !immature.is_empty(),
            "{} coins, {} immature",
            coins.len(),
            immature.len()
        );
        pair.coins = coins;
        pair.immature = immature;
        pair
    }

    /// Block `height` of bitcoind's active chain.
    fn block(&self, height: u32) -> bitcoin::Block {
        let hash = self.node.rpc(&["getblockhash", &height.to_string()]);
        let raw = Vec::from_hex(&self.node.rpc(&["getblock", &hash, "0"])).unwrap();
        bitcoin::consensus::deserialize(&raw).unwrap()
    }

    /// The output of the coinbase of block `height`, the test's.
    fn coinbase(&self, height: u32) -> (OutPoint, TxOut) {
        let tx = self.block(height).txdata.swap_remove(0);
        (OutPoint::new(tx.compute_txid(), 0), tx.output[0].clone())
    }

    /// Pays `outputs` from [`Pair::reserve`] at 2 sat/vB, change last, and sends it to bitcoind
    /// (not mined, not to cairn).
    fn pay(&self, outputs: Vec<TxOut>) -> Transaction {
        let want: u64 = outputs.iter().map(|o| o.value.to_sat()).sum::<u64>() + 100_000;
        let mut reserve = self.reserve.borrow_mut();
        let mut spent = Vec::new();
        while spent
            .iter()
            .map(|(_, o): &(_, TxOut)| o.value.to_sat())
            .sum::<u64>()
            < want
        {
            assert!(!reserve.is_empty(), "the reserve ran dry");
            spent.push(reserve.remove(0));
        }
        let have: u64 = spent.iter().map(|(_, o)| o.value.to_sat()).sum();
        let mut tx = unsigned_spend(&spent, outputs);
        let paid: u64 = tx.output.iter().map(|o| o.value.to_sat()).sum();
        tx.output.push(TxOut {
            value: Amount::from_sat(have - paid),
            script_pubkey: self.keys.script(Kind::Bech32),
        });
        let prevouts: Vec<Option<TxOut>> = spent.iter().map(|(_, o)| Some(o.clone())).collect();
        assert!(self.keys.sign(&mut tx, &prevouts));
        let fee = 2 * tx.vsize() as u64;
        tx.output.last_mut().unwrap().value = Amount::from_sat(have - paid - fee);
        assert!(self.keys.sign(&mut tx, &prevouts));
        let raw = bitcoin::consensus::serialize(&tx);
        if let Err(e) =
            self.node
                .rpc_result(&["sendrawtransaction", &raw.to_lower_hex_string(), "0"])
        {
            panic!("bitcoind refused a payment: {e}");
        }
        let change = tx.output.len() - 1;
        reserve.insert(
            0,
            (
                OutPoint::new(tx.compute_txid(), change as u32),
                tx.output[change].clone(),
            ),
        );
        self.outputs
            .borrow_mut()
            .insert(tx.compute_txid(), tx.output.clone());
        tx
    }

    /// The output `op` spends: of one of `parents`, else of a transaction bitcoind holds in its
    /// chain (`-txindex`) or mempool; `None` if none has it.
    fn prevout(&self, op: OutPoint, parents: &[&Transaction]) -> Option<TxOut> {
        if let Some(parent) = parents.iter().find(|p| p.compute_txid() == op.txid) {
            return parent.output.get(op.vout as usize).cloned();
        }
        if let Some(outputs) = self.outputs.borrow().get(&op.txid) {
            return outputs.get(op.vout as usize).cloned();
        }
        let hex = self
            .node
            .rpc_result(&["getrawtransaction", &op.txid.to_string()])
            .ok()?;
        let tx: Transaction =
            bitcoin::consensus::deserialize(&Vec::from_hex(&hex).unwrap()).unwrap();
        let out = tx.output.get(op.vout as usize).cloned();
        self.outputs.borrow_mut().insert(op.txid, tx.output);
        out
    }

    /// Signs with the test's keys, as `signrawtransactionwithwallet` did: inputs spending outputs
    /// of unknown transactions or of others' scripts stay as they are.
    fn sign(&self, tx: &Transaction) -> Transaction {
        self.sign_with(tx, &[]).0
    }

    /// As [`Pair::sign`], told of `parents` no chain or mempool of bitcoind's has; and whether
    /// every input is signed.
    fn sign_with(&self, tx: &Transaction, parents: &[&Transaction]) -> (Transaction, bool) {
        let prevouts: Vec<Option<TxOut>> = tx
            .input
            .iter()
            .map(|i| self.prevout(i.previous_output, parents))
            .collect();
        let mut signed = tx.clone();
        let complete = self.keys.sign(&mut signed, &prevouts);
        (signed, complete)
    }

    /// bitcoind's verdict: `None` if accepted, else its reject reason.
    fn core(&self, tx: &Transaction) -> Option<String> {
        self.core_verdict(tx).map(|(reason, _)| reason)
    }

    /// As [`Pair::core`], with the reject details where bitcoind gives them (`reason, message`:
    /// Core's `TxValidationState::ToString`).
    fn core_verdict(&self, tx: &Transaction) -> Option<(String, Option<String>)> {
        let hex = bitcoin::consensus::serialize(tx).to_lower_hex_string();
        // maxfeerate 0: the RPC's guard against absurd fees is not a mempool rule.
        let result =
            match self
                .node
                .rpc_result(&["testmempoolaccept", &json!([hex]).to_string(), "0"])
            {
                Ok(text) => serde_json::from_str::<Value>(&text).unwrap(),
                Err(message) => return Some((message, None)),
            };
        match result[0]["allowed"].as_bool() {
            Some(true) => None,
            _ => Some((
                result[0]["reject-reason"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string(),
                result[0]["reject-details"].as_str().map(str::to_string),
            )),
        }
    }

    /// cairn's verdict on a fresh mempool of the oracle's profile: `None` if accepted, else its
    /// reason.
    fn cairn(&self, tx: &Transaction) -> Option<String> {
        self.mempool()
            .accept(&bitcoin::consensus::serialize(tx), &self.index)
            .err()
            .map(|e| e.to_string())
    }
}

/// A version 2 transaction spending `coins` into `outputs`, signalling replaceability, unsigned.
fn unsigned_spend(coins: &[(OutPoint, TxOut)], outputs: Vec<TxOut>) -> Transaction {
    Transaction {
        version: bitcoin::transaction::Version::TWO,
        lock_time: bitcoin::absolute::LockTime::ZERO,
        input: coins
            .iter()
            .map(|(op, _)| TxIn {
                previous_output: *op,
                sequence: bitcoin::Sequence::ENABLE_RBF_NO_LOCKTIME,
                ..Default::default()
            })
            .collect(),
        output: outputs,
    }
}

/// The rule a reason names: its first word, with Core's two names for a missing input made one
/// (`testmempoolaccept` reports `bad-txns-inputs-missingorspent` as `missing-inputs`), Knots
/// 29.4's names for Core's `dust` (`dust-nonanchor`), for `bad-txns-nonstandard-inputs`
/// (`bad-txns-input-…`) and `bad-witness-nonstandard` (`bad-witness-…`), cairn's names for
/// Core 31's `TRUC-violation` (`truc-…`), and script failures by their class.
fn rule(reason: &str) -> String {
    if reason.contains("TX decode failed") {
        return "decode".into();
    }
    let word = reason.split([':', ' ', ',', '(']).next().unwrap_or(reason);
    match word {
        "bad-txns-inputs-missingorspent" => "missing-inputs".into(),
        "dust-nonanchor" => "dust".into(),
        // cairn names the TRUC rule that failed, as Knots 29.4 did; Core 31 says
        // `TRUC-violation` for all (tests/differential/policy.rs compares the messages).
        w if w.starts_with("truc-") => "TRUC-violation".into(),
        // Knots names the rule of `AreInputsStandard` and `IsWitnessStandard` that failed.
        w if w.starts_with("bad-txns-input-") => "bad-txns-nonstandard-inputs".into(),
        w if w.starts_with("bad-witness-") => "bad-witness-nonstandard".into(),
        // Core 31 and Knots 29.4 say `mempool-…` for any script failure in the mempool (they run
        // the standard flags once, without telling a consensus failure apart), as cairn does;
        // tests/differential/policy.rs and `own_signatures_agree` compare the words.
        w if w.contains("script-verify-flag-failed") => "script-verify-flag-failed".into(),
        "min" if reason.starts_with("min relay fee not met") => "min-relay-fee-not-met".into(),
        "mempool" if reason.starts_with("mempool min fee not met") => {
            "min-relay-fee-not-met".into()
        }
        w => w.to_string(),
    }
}

/// How a transaction of the test's is changed before both judge it.
#[derive(Debug, Clone)]
enum Mutation {
    None,
    DuplicateInput,
    OutputValue(u64),
    NoOutputs,
    NoInputs,
    UnknownPrevout,
    SpentPrevout,
    ImmaturePrevout,
    BreakSignature,
    Fee(u64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let max = Amount::MAX_MONEY.to_sat();
    prop_oneof![
        Just(Mutation::None),
        Just(Mutation::DuplicateInput),
        prop::sample::select(vec![
            0,
            1,
            293,
            294,
            545,
            546,
            max - 1,
            max,
            max + 1,
            1 << 63,
            u64::MAX
        ])
        .prop_map(Mutation::OutputValue),
        Just(Mutation::NoOutputs),
        Just(Mutation::NoInputs),
        Just(Mutation::UnknownPrevout),
        Just(Mutation::SpentPrevout),
        Just(Mutation::ImmaturePrevout),
        Just(Mutation::BreakSignature),
        // About the minimum relay fee of a 1-in, 1-out spend of 110 vB: Core's 0.1 sat/vB, Knots's
        // 1 sat/vB.
        prop::sample::select(vec![0, 10, 11, 12, 50, 109, 110, 111, 1_000, 100_000])
            .prop_map(Mutation::Fee),
    ]
}

/// A transaction of the test's spending `inputs` coins into `outputs` outputs paying 1,000 sat
/// fee, then mutated (and signed where the mutation keeps it signable).
fn build(pair: &Pair, first: usize, inputs: usize, outputs: usize, m: &Mutation) -> Transaction {
    let coins: Vec<_> = (0..inputs)
        .map(|i| pair.coins[(first + i) % pair.coins.len()].clone())
        .collect();
    let total: u64 = coins.iter().map(|c| c.1).sum();
    let fee = match m {
        Mutation::Fee(f) => *f,
        _ => 1_000,
    };
    let each = (total - fee) / outputs as u64;
    let mut tx = Transaction {
        version: bitcoin::transaction::Version::TWO,
        lock_time: bitcoin::absolute::LockTime::ZERO,
        input: coins
            .iter()
            .map(|c| TxIn {
                previous_output: c.0,
                sequence: bitcoin::Sequence::ENABLE_RBF_NO_LOCKTIME,
                ..Default::default()
            })
            .collect(),
        output: (0..outputs)
            .map(|i| TxOut {
                value: Amount::from_sat(each),
                script_pubkey: coins[i % coins.len()].2.clone(),
            })
            .collect(),
    };
    // Whatever `each` left over goes to the first output, so the fee is exactly `fee`.
    tx.output[0].value = Amount::from_sat(each + (total - fee) % outputs as u64);
    match m {
        Mutation::None | Mutation::Fee(_) => {}
        Mutation::DuplicateInput => tx.input.push(tx.input[0].clone()),
        Mutation::OutputValue(v) => tx.output[0].value = Amount::from_sat(*v),
        Mutation::NoOutputs => tx.output.clear(),
        Mutation::NoInputs => tx.input.clear(),
        Mutation::UnknownPrevout => {
            tx.input[0].previous_output = OutPoint::new(Txid::from_byte_array_for_test(first), 0)
        }
        Mutation::SpentPrevout => tx.input[0].previous_output = pair.spent,
        Mutation::ImmaturePrevout => {
            let (op, value) = pair.immature[first % pair.immature.len()];
            tx.input[0].previous_output = op;
            tx.output[0].value = Amount::from_sat(value.saturating_sub(1_000));
        }
        Mutation::BreakSignature => {}
    }
    // A transaction without inputs reads as a segwit marker: nothing to sign, and it does not
    // decode (the same bytes go to both).
    let mut signed = if tx.input.is_empty() {
        tx
    } else {
        pair.sign(&tx)
    };
    if let Mutation::BreakSignature = m {
        if let Some(sig) = signed.input[0].witness.nth(0).map(<[u8]>::to_vec) {
            let mut broken = sig.clone();
            broken[10] ^= 1;
            let mut w = bitcoin::Witness::new();
            w.push(broken);
            for item in signed.input[0].witness.iter().skip(1) {
                w.push(item);
            }
            signed.input[0].witness = w;
        }
    }
    signed
}

/// A txid nobody made.
trait ForTest {
    fn from_byte_array_for_test(n: usize) -> Txid;
}

impl ForTest for Txid {
    fn from_byte_array_for_test(n: usize) -> Txid {
        use bitcoin::hashes::Hash;
        let mut b = [0xabu8; 32];
        b[..8].copy_from_slice(&(n as u64).to_le_bytes());
        Txid::from_byte_array(b)
    }
}

/// `CAIRN_DIFF_CASES` (400 unless given) mutated transactions judged by Bitcoin Core 31.99 and
/// cairn's default profile.
#[test]
fn mempool_acceptance_agrees_with_bitcoinds_testmempoolaccept() {
    mutated_transactions_agree(&Pair::start());
}

/// As [`mempool_acceptance_agrees_with_bitcoinds_testmempoolaccept`], Bitcoin Knots 29.4 and the
/// Knots profile (its relay fee of 1 sat/vB, which the fees about 110 sat probe, and its
/// `dust-nonanchor`).
#[test]
fn mempool_acceptance_agrees_with_knots() {
    mutated_transactions_agree(&Pair::start_knots());
}

/// Mutated transactions ([`build`]) judged by `pair`'s bitcoind and cairn: the same verdict and
/// rule for every one.
fn mutated_transactions_agree(pair: &Pair) {
    let agreed = std::cell::Cell::new(0u32);
    let cases: u32 = std::env::var("CAIRN_DIFF_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(400);
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 64,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(
        &(0usize..40, 1usize..=3, 1usize..=3, mutation()),
        |(first, inputs, outputs, m)| {
            let tx = build(pair, first, inputs, outputs, &m);
            let (core, ours) = (pair.core(&tx), pair.cairn(&tx));
            eprintln!("{m:?} {inputs}x{outputs}: bitcoind {core:?}, cairn {ours:?}");
            prop_assert_eq!(
                core.as_deref().map(rule),
                ours.as_deref().map(rule),
                "{:?} ({} in, {} out): bitcoind {:?}, cairn {:?}",
                m,
                inputs,
                outputs,
                core,
                ours
            );
            agreed.set(agreed.get() + 1);
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!("{} cases agreed with bitcoind", agreed.get());
    assert_eq!(agreed.get(), cases);
}

/// Replacements of a 1-in, 1-out spend of 110 vB paying 1,000 sat: (fee, outputs).
const REPLACEMENTS: [(u64, usize); 8] = [
    (500, 1),
    (1_000, 1),
    (1_001, 2),
    (1_100, 1),
    (2_000, 1),
    (2_000, 3),
    (5_000, 2),
    (50_000, 1),
];

/// Replacements paying more than the first at a lower fee rate: Knots's rule 6 refuses them
/// (`insufficient fee`), Core 31 because they do not improve its feerate diagram
/// (`replacement-failed`).
const AT_A_LOWER_RATE: [(u64, usize); 2] = [(1_200, 2), (1_300, 3)];

/// Conflicting spends, the case the mutations above cannot make alone: for each of `cases`, a
/// first spend of a coin (from coin `from` on) enters both mempools, then a second spend of the
/// same coin with the case's fee and outputs is judged by both (replace-by-fee: rules 3 and 4,
/// and Core 31's feerate diagram or Knots's rule 6, against cairn's). The cases that disagree.
fn replacements(
    pair: &Pair,
    mempool: &Mempool,
    cases: &[(u64, usize)],
    from: usize,
) -> Vec<String> {
    let mut disagreed = Vec::new();
    for (i, &(fee, outputs)) in cases.iter().enumerate() {
        let first = build(pair, from + i, 1, 1, &Mutation::Fee(1_000));
        let raw = bitcoin::consensus::serialize(&first);
        pair.node
            .rpc(&["sendrawtransaction", &raw.to_lower_hex_string()]);
        mempool
            .accept(&raw, &pair.index)
            .expect("the first spend enters cairn's mempool");
        let second = build(pair, from + i, 1, outputs, &Mutation::Fee(fee));
        let core = pair.core(&second);
        let ours = mempool
            .accept(&bitcoin::consensus::serialize(&second), &pair.index)
            .err()
            .map(|e| e.to_string());
        let what = format!("replacement paying {fee} in {outputs} outputs");
        eprintln!("{what}: bitcoind {core:?}, cairn {ours:?}");
        if core.as_deref().map(rule) != ours.as_deref().map(rule) {
            disagreed.push(format!("{what}: bitcoind {core:?}, cairn {ours:?}"));
        }
    }
    disagreed
}

/// A replacement that spends, besides the coin of the transaction it replaces, an unconfirmed
/// output that the replaced transaction does not spend from (BIP125's rule 2, which Knots keeps
/// and Core 31 dropped), paying plenty: the verdicts of bitcoind and of cairn.
fn replacement_adding_an_unconfirmed_input(
    pair: &Pair,
    mempool: &Mempool,
) -> (Option<String>, Option<String>) {
    let first = build(pair, 20, 1, 1, &Mutation::Fee(1_000));
    let parent = build(pair, 21, 1, 1, &Mutation::Fee(1_000));
    for tx in [&first, &parent] {
        let raw = bitcoin::consensus::serialize(tx);
        pair.node
            .rpc(&["sendrawtransaction", &raw.to_lower_hex_string()]);
        mempool
            .accept(&raw, &pair.index)
            .expect("enters cairn's mempool");
    }
    let mut second = first.clone();
    second.input.push(TxIn {
        previous_output: OutPoint::new(parent.compute_txid(), 0),
        ..first.input[0].clone()
    });
    second.output[0].value =
        first.output[0].value + parent.output[0].value - Amount::from_sat(20_000);
    let second = pair.sign(&second);
    let core = pair.core(&second);
    let ours = mempool
        .accept(&bitcoin::consensus::serialize(&second), &pair.index)
        .err()
        .map(|e| e.to_string());
    eprintln!("replacement adding an unconfirmed input: bitcoind {core:?}, cairn {ours:?}");
    (core, ours)
}

/// [`REPLACEMENTS`] judged by Bitcoin Core 31.99 and cairn's default profile.
#[test]
fn replacements_agree_with_bitcoind() {
    let pair = Pair::start();
    let disagreed = replacements(&pair, &pair.mempool(), &REPLACEMENTS, 0);
    assert!(disagreed.is_empty(), "{disagreed:#?}");
}

/// A replacement at a lower fee rate than the transaction it replaces (about 17 sat/vB against
/// 20) that pays for that transaction's parent better (the parent, at 1.8 sat/vB, and the
/// replacement together about 13.9 sat/vB, against about 10.9 with the replaced): Knots's rule
/// 6 refuses it, Core 31 takes it, as it improves the feerate diagram. The verdicts of
/// bitcoind and of cairn.
fn replacement_raising_its_parents_chunk(
    pair: &Pair,
    mempool: &Mempool,
) -> (Option<String>, Option<String>) {
    let (op, value, script) = pair.coins[30].clone();
    let out = |value: u64| TxOut {
        value: Amount::from_sat(value),
        script_pubkey: script.clone(),
    };
    let parent = spend_of(pair, op, 2, vec![out(value - 200)], 0, 0xffff_fffd);
    pair.submit(mempool, &parent);
    let (from, value) = (OutPoint::new(parent.compute_txid(), 0), value - 200);
    let first = spend_of(pair, from, 2, vec![out(value - 2_200)], 0, 0xffff_fffd);
    pair.submit(mempool, &first);
    let mut outputs = vec![out((value - 8_000) / 13); 13];
    outputs[0].value += Amount::from_sat((value - 8_000) % 13);
    let second = spend_of(pair, from, 2, outputs, 0, 0xffff_fffd);
    let core = pair.core(&second);
    let ours = mempool
        .accept(&bitcoin::consensus::serialize(&second), &pair.index)
        .err()
        .map(|e| e.to_string());
    eprintln!(
        "replacement of {} vB paying 8,000 for one of 110 vB paying 2,200: bitcoind {core:?}, \
         cairn {ours:?}",
        second.vsize()
    );
    (core, ours)
}

/// [`AT_A_LOWER_RATE`], which both refuse, for the same reason, and
/// [`replacement_raising_its_parents_chunk`], which Core takes, judged by Bitcoin Core 31.99 and
/// cairn's default profile.
#[test]
fn replacements_at_a_lower_fee_rate_agree_with_bitcoind() {
    let pair = Pair::start();
    let mempool = pair.mempool();
    let mut disagreed = replacements(&pair, &mempool, &AT_A_LOWER_RATE, 0);
    let (core, ours) = replacement_raising_its_parents_chunk(&pair, &mempool);
    assert_eq!(core, None, "Core 31 takes what improves its diagram");
    if ours.as_deref().map(rule) != core.as_deref().map(rule) {
        disagreed.push(format!(
            "replacement raising its parent's chunk: bitcoind {core:?}, cairn {ours:?}"
        ));
    }
    assert!(disagreed.is_empty(), "{disagreed:#?}");
}

/// A replacement adding an unconfirmed input judged by Bitcoin Core 31.99, which takes it (it
/// has no rule 2), and cairn's default profile.
#[test]
fn a_replacement_adding_an_unconfirmed_input_agrees_with_bitcoind() {
    let pair = Pair::start();
    let (core, ours) = replacement_adding_an_unconfirmed_input(&pair, &pair.mempool());
    assert_eq!(core, None, "Core 31 has no rule 2");
    assert_eq!(
        ours.as_deref().map(rule),
        core.as_deref().map(rule),
        "cairn {ours:?}"
    );
}

/// [`REPLACEMENTS`], [`AT_A_LOWER_RATE`], [`replacement_raising_its_parents_chunk`] and a
/// replacement adding an unconfirmed input judged by Bitcoin Knots 29.4 and the Knots profile
/// (its rule 6 and incremental relay fee of 1 sat/vB), where rule 2 refuses the last however
/// much it pays.
#[test]
fn replacements_agree_with_knots() {
    let pair = Pair::start_knots();
    let mempool = pair.mempool();
    let mut disagreed = replacements(&pair, &mempool, &REPLACEMENTS, 0);
    disagreed.extend(replacements(&pair, &mempool, &AT_A_LOWER_RATE, 10));
    assert!(disagreed.is_empty(), "{disagreed:#?}");
    let (core, ours) = replacement_raising_its_parents_chunk(&pair, &mempool);
    assert_eq!(
        core.as_deref().map(rule).as_deref(),
        Some("insufficient"),
        "rule 6: {core:?}"
    );
    assert_eq!(
        ours.as_deref().map(rule),
        core.as_deref().map(rule),
        "cairn {ours:?}"
    );
    let (core, ours) = replacement_adding_an_unconfirmed_input(&pair, &mempool);
    assert_eq!(
        core.as_deref().map(rule),
        Some("replacement-adds-unconfirmed".to_string()),
        "{core:?}"
    );
    assert_eq!(
        ours.as_deref().map(rule),
        core.as_deref().map(rule),
        "cairn {ours:?}"
    );
}

/// A spend of coin `coin` into `outputs` (the rest of the coin is the fee) with the given lock
/// time and sequence, signed with the test's keys.
fn spend(pair: &Pair, coin: usize, outputs: Vec<TxOut>, lock: u32, sequence: u32) -> Transaction {
    spend_of(pair, pair.coins[coin].0, 2, outputs, lock, sequence)
}

/// As [`spend`], of any coin of the test's keys and with a version.
fn spend_of(
    pair: &Pair,
    coin: OutPoint,
    version: i32,
    outputs: Vec<TxOut>,
    lock: u32,
    sequence: u32,
) -> Transaction {
    let tx = Transaction {
        version: bitcoin::transaction::Version(version),
        lock_time: bitcoin::absolute::LockTime::from_consensus(lock),
        input: vec![TxIn {
            previous_output: coin,
            sequence: bitcoin::Sequence(sequence),
            ..Default::default()
        }],
        output: outputs,
    };
    pair.sign(&tx)
}

/// A bare pubkey (P2PK) output script of the secp256k1 generator.
fn bare_pubkey() -> bitcoin::ScriptBuf {
    let key =
        <[u8; 33]>::from_hex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")
            .unwrap();
    bitcoin::blockdata::script::Builder::new()
        .push_slice(key)
        .push_opcode(bitcoin::opcodes::all::OP_CHECKSIG)
        .into_script()
}

/// A bare `m`-of-`n` multisig output script of the secp256k1 generator (any valid key does).
fn bare_multisig(m: u8, n: u8) -> bitcoin::ScriptBuf {
    let key =
        <[u8; 33]>::from_hex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")
            .unwrap();
    let mut b = bitcoin::blockdata::script::Builder::new().push_int(i64::from(m));
    for _ in 0..n {
        b = b.push_slice(key);
    }
    b.push_int(i64::from(n))
        .push_opcode(bitcoin::opcodes::all::OP_CHECKMULTISIG)
        .into_script()
}

/// Issue 27: finality (`CheckFinalTxAtTip`: lock times by height and by median time past;
/// `CheckSequenceLocksAtTip`: BIP68 relative lock times by height and by time) and
/// the standardness rules a well-formed, validly signed transaction can break (`tx-size-small`,
/// bare multisig of more than 3 keys or with m above n, and the outputs of Knots's
/// `bare-multisig`, `bare-pubkey` and `bare-datacarrier` defaults, which Core relays), named.
fn finality_and_standardness_cases(pair: &Pair) -> Vec<(&'static str, Transaction)> {
    let tip: u32 = pair.node.rpc(&["getblockcount"]).parse().unwrap();
    let mtp = pair.node.rpc_json(&["getblockchaininfo"])["mediantime"]
        .as_u64()
        .unwrap() as u32;
    let pay = |coin: usize, value: u64, script: bitcoin::ScriptBuf| {
        let back = pair.coins[coin].1 - value - 1_000;
        vec![
            TxOut {
                value: Amount::from_sat(value),
                script_pubkey: script,
            },
            TxOut {
                value: Amount::from_sat(back),
                script_pubkey: pair.coins[coin].2.clone(),
            },
        ]
    };
    let plain = |coin: usize| pay(coin, 100_000, pair.coins[coin].2.clone());
    let (locked, unlocked) = (0xffff_fffe, 0xffff_ffff);
    let op_return = bitcoin::ScriptBuf::from_bytes(vec![0x6a, 0x02, 0xca, 0xfe]);
    let small = vec![TxOut {
        value: Amount::ZERO,
        script_pubkey: op_return,
    }];
    // One byte more: 65 bytes without witness.
    let bare_data = vec![TxOut {
        value: Amount::ZERO,
        script_pubkey: bitcoin::ScriptBuf::from_bytes(vec![0x6a, 0x03, 0xca, 0xfe, 0x00]),
    }];
    // A witness program of version 1 and 2 bytes (standard, unknown): one input and this output
    // are 64 bytes without witness.
    let tiny = vec![TxOut {
        value: Amount::from_sat(pair.coins[10].1 - 1_000),
        script_pubkey: bitcoin::ScriptBuf::from_bytes(vec![0x51, 0x02, 0xca, 0xfe]),
    }];
    let cases: Vec<(&'static str, Transaction)> = vec![
        (
            "lock time tip+100",
            spend(pair, 0, plain(0), tip + 100, locked),
        ),
        ("lock time tip+1", spend(pair, 1, plain(1), tip + 1, locked)),
        ("lock time tip", spend(pair, 2, plain(2), tip, locked)),
        ("lock time MTP", spend(pair, 3, plain(3), mtp, locked)),
        ("lock time MTP-1", spend(pair, 4, plain(4), mtp - 1, locked)),
        (
            "lock time tip+100, final sequences",
            spend(pair, 5, plain(5), tip + 100, unlocked),
        ),
        (
            "only an OP_RETURN, 64 bytes",
            spend(pair, 6, small, 0, locked),
        ),
        (
            "only an OP_RETURN, 65 bytes",
            spend(pair, 12, bare_data, 0, locked),
        ),
        ("64 bytes without witness", spend(pair, 10, tiny, 0, locked)),
        (
            "bare 1-of-4 multisig",
            spend(pair, 7, pay(7, 100_000, bare_multisig(1, 4)), 0, locked),
        ),
        (
            "bare 2-of-1 multisig",
            spend(pair, 8, pay(8, 100_000, bare_multisig(2, 1)), 0, locked),
        ),
        (
            "bare 1-of-3 multisig",
            spend(pair, 9, pay(9, 100_000, bare_multisig(1, 3)), 0, locked),
        ),
        (
            "a bare pubkey output",
            spend(pair, 11, pay(11, 100_000, bare_pubkey()), 0, locked),
        ),
    ];
    // BIP68 on coins of 5 confirmations (the block 4 below the tip): a height lock of 5 ends
    // at the tip, one of 6 holds for the next block; a time lock of one 512 s unit holds (the
    // blocks are seconds apart), one of 0 units does not; version 1 has no relative locks.
    let young: Vec<(OutPoint, u64, bitcoin::ScriptBuf)> = pair
        .coins
        .iter()
        .filter(|(op, _, _)| {
            let out = pair
                .node
                .rpc_json(&["gettxout", &op.txid.to_string(), &op.vout.to_string()]);
            out["confirmations"].as_u64() == Some(5)
        })
        .cloned()
        .collect();
    assert!(young.len() >= 5, "{} coins of 5 confirmations", young.len());
    let relative = |i: usize, version: i32, sequence: u32| {
        let (op, value, script) = &young[i];
        let out = vec![TxOut {
            value: Amount::from_sat(value - 1_000),
            script_pubkey: script.clone(),
        }];
        spend_of(pair, *op, version, out, 0, sequence)
    };
    let mut cases = cases;
    cases.extend([
        (
            "relative height lock 5 on 5 confirmations",
            relative(0, 2, 5),
        ),
        (
            "relative height lock 6 on 5 confirmations",
            relative(1, 2, 6),
        ),
        (
            "relative time lock of 1 unit",
            relative(2, 2, (1 << 22) | 1),
        ),
        ("relative time lock of 0 units", relative(3, 2, 1 << 22)),
        ("relative height lock 6, version 1", relative(4, 1, 6)),
    ]);
    cases
}

/// The outputs of Knots's defaults against bare data and keys.
const KNOTS_BARE_OUTPUTS: [&str; 4] = [
    "only an OP_RETURN, 64 bytes",
    "only an OP_RETURN, 65 bytes",
    "bare 1-of-3 multisig",
    "a bare pubkey output",
];

/// [`finality_and_standardness_cases`] judged by Bitcoin Core 31.99 and cairn's default
/// profile: the same verdict and rule for every case.
#[test]
fn finality_and_standardness_agree_with_bitcoind() {
    let pair = Pair::start();
    let cases = finality_and_standardness_cases(&pair);
    let disagreed = policy::disagreements(&pair, &cases);
    assert!(disagreed.is_empty(), "{disagreed:#?}");
    // The cases are what they say: the first two and "MTP" are refused as non-final by the
    // oracle, the rest of the lock times pass.
    let non_final = |name: &str| {
        let tx = &cases.iter().find(|(n, _)| *n == name).unwrap().1;
        pair.core(tx).as_deref() == Some("non-final")
    };
    assert!(non_final("lock time tip+100") && non_final("lock time tip+1"));
    assert!(non_final("lock time MTP") && !non_final("lock time MTP-1"));
    let reason = |name: &str| pair.core(&cases.iter().find(|(n, _)| *n == name).unwrap().1);
    assert_eq!(
        reason("relative height lock 6 on 5 confirmations").as_deref(),
        Some("non-BIP68-final")
    );
    assert_eq!(reason("relative height lock 5 on 5 confirmations"), None);
    // Core relays bare data, a bare 1-of-3 multisig and a bare pubkey.
    for name in &KNOTS_BARE_OUTPUTS[1..] {
        assert_eq!(reason(name), None, "{name}");
    }
}

/// The cases of [`KNOTS_BARE_OUTPUTS`] judged by Bitcoin Knots 29.4 and the Knots profile, whose
/// defaults refuse them all (the first for its size, as Core does): the same verdict and rule.
#[test]
fn knots_bare_output_defaults_agree_with_knots() {
    let pair = Pair::start_knots();
    let cases: Vec<(&str, Transaction)> = finality_and_standardness_cases(&pair)
        .into_iter()
        .filter(|(name, _)| KNOTS_BARE_OUTPUTS.contains(name))
        .collect();
    assert_eq!(cases.len(), KNOTS_BARE_OUTPUTS.len());
    let disagreed = policy::disagreements(&pair, &cases);
    assert!(disagreed.is_empty(), "{disagreed:#?}");
    for (name, tx) in &cases {
        assert!(pair.core(tx).is_some(), "Knots refuses {name}");
    }
}

/// Issue 27: output kinds as Core's `Solver` tells them (OP_RETURN followed by pushes only, a
/// version 0 witness program of 20 or 32 bytes only, keys of a size their first byte
/// announces), each output in a validly signed spend judged by Bitcoin Core 31.99 and by cairn's
/// default profile. rust-bitcoin's shape tests, which cairn used before, took the first three.
#[test]
fn output_kinds_agree_with_bitcoind() {
    let pair = Pair::start();
    let key = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";
    let script = |hex: String| bitcoin::ScriptBuf::from_hex(&hex).unwrap();
    let kinds: Vec<(&str, bitcoin::ScriptBuf, u64)> = vec![
        ("OP_RETURN then OP_CHECKSIG", script("6aac".into()), 0),
        (
            "OP_RETURN with a push cut short",
            script("6a0501".into()),
            0,
        ),
        (
            "a version 0 witness program of 25 bytes",
            script(format!("0019{}", "11".repeat(25))),
            10_000,
        ),
        (
            "a bare pubkey of 33 bytes with an uncompressed header",
            script(format!("2104{}ac", &key[2..])),
            10_000,
        ),
        (
            "a bare 1-of-2 multisig with a key of header 05",
            script(format!("5121{key}2105{}52ae", &key[2..])),
            10_000,
        ),
        ("a pay-to-anchor", script("51024e73".into()), 1_000),
        (
            "a version 2 witness program",
            script("5202cafe".into()),
            1_000,
        ),
        (
            "OP_RETURN of pushes and small numbers",
            script("6a02cafe5160".into()),
            0,
        ),
    ];
    let mut disagreed = Vec::new();
    for (coin, (name, output, value)) in kinds.into_iter().enumerate() {
        let (_, held, back_script) = &pair.coins[coin];
        let outputs = vec![
            TxOut {
                value: Amount::from_sat(value),
                script_pubkey: output,
            },
            TxOut {
                value: Amount::from_sat(held - value - 1_000),
                script_pubkey: back_script.clone(),
            },
        ];
        let tx = spend(&pair, coin, outputs, 0, 0xffff_fffe);
        let (core, ours) = (pair.core(&tx), pair.cairn(&tx));
        eprintln!("{name}: bitcoind {core:?}, cairn {ours:?}");
        if core.as_deref().map(rule) != ours.as_deref().map(rule) {
            disagreed.push(format!("{name}: bitcoind {core:?}, cairn {ours:?}"));
        }
    }
    assert!(disagreed.is_empty(), "{disagreed:#?}");
}

/// The harness's own signatures, of every kind `Pair::wallet_script` gives (P2WPKH, P2PKH,
/// P2SH-P2WPKH, taproot's key path): a spend of each alone and one of all four together are
/// taken by Bitcoin Core 31.99 and cairn alike, and the same with one signature broken is
/// refused by both in the same words (Core 31's `mempool-script-verify-flag-failed` and the
/// script error, though a broken signature breaks consensus). (Without this, a signer that
/// failed would only turn some other case's verdict.)
#[test]
fn the_tests_own_signatures_of_every_kind_agree_with_bitcoind() {
    own_signatures_agree(&Pair::start());
}

/// [`the_tests_own_signatures_of_every_kind_agree_with_bitcoind`] against Knots 29.4 under the
/// Knots profile.
#[test]
fn the_tests_own_signatures_of_every_kind_agree_with_knots() {
    own_signatures_agree(&Pair::start_knots());
}

fn own_signatures_agree(pair: &Pair) {
    let kinds = ["bech32", "legacy", "p2sh-segwit", "bech32m"];
    let scripts: Vec<bitcoin::ScriptBuf> = kinds.iter().map(|k| pair.wallet_script(k)).collect();
    let funded = pair.fund(&scripts);
    let back = pair.coins[0].2.clone();
    let spend_all = |coins: &[(OutPoint, TxOut)]| {
        let value: u64 = coins.iter().map(|(_, o)| o.value.to_sat()).sum();
        let tx = unsigned_spend(
            coins,
            vec![TxOut {
                value: Amount::from_sat(value - 5_000),
                script_pubkey: back.clone(),
            }],
        );
        let (signed, complete) = pair.sign_with(&tx, &[]);
        assert!(complete, "every input signed");
        signed
    };
    let mut cases: Vec<(String, Transaction)> = kinds
        .iter()
        .zip(&funded)
        .map(|(kind, coin)| {
            (
                format!("a {kind} spend"),
                spend_all(std::slice::from_ref(coin)),
            )
        })
        .collect();
    cases.push(("a spend of all four".into(), spend_all(&funded)));
    let mut disagreed = Vec::new();
    for (name, tx) in &cases {
        let (core, ours) = (pair.core(tx), pair.cairn(tx));
        eprintln!("{name}: bitcoind {core:?}, cairn {ours:?}");
        assert_eq!(core, None, "bitcoind takes {name}");
        if ours.is_some() {
            disagreed.push(format!("{name}: cairn {ours:?}"));
        }
        // The same, the signature of its last input broken (a byte of the signature proper:
        // of the witness's first item, else of the script sig's first push).
        let mut broken = tx.clone();
        let input = broken.input.last_mut().unwrap();
        if input.witness.is_empty() {
            let mut bytes = input.script_sig.to_bytes();
            bytes[10] ^= 1;
            input.script_sig = bitcoin::ScriptBuf::from_bytes(bytes);
        } else {
            let mut items = input.witness.to_vec();
            items[0][10] ^= 1;
            input.witness = bitcoin::Witness::from_slice(&items);
        }
        let (core, ours) = (pair.core(&broken), pair.cairn(&broken));
        eprintln!("{name}, broken: bitcoind {core:?}, cairn {ours:?}");
        assert!(core.is_some(), "bitcoind refuses {name} broken");
        // The reason in full: cairn's only adds the failing input after it.
        let same_words = matches!((&core, &ours), (Some(c), Some(o)) if o.starts_with(c.as_str()));
        if !same_words {
            disagreed.push(format!("{name}, broken: bitcoind {core:?}, cairn {ours:?}"));
        }
    }
    assert!(disagreed.is_empty(), "{disagreed:#?}");
}

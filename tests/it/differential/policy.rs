//! Issue 27, part 2: the standard script flags the kernel does not take, `AreInputsStandard`
//! (BIP54's legacy sigops among them), `IsWitnessStandard`, the chain limits, TRUC, ephemeral
//! dust and packages of a child paying for its parent, each case a transaction valid in a block
//! that breaks one rule only, judged by bitcoind's `testmempoolaccept` (or `submitpackage`) and
//! by cairn: the same verdict and rule, and for a policy flag the same words. The oracle is
//! Bitcoin Core 31.99 against cairn's default (Core) profile, but for Knots's chain limits with
//! the CPFP carve-out (which Core 31's clusters replaced), its `-mempooltruc=accept` default and
//! its packages (a parent below the relay fee only if TRUC): Bitcoin Knots 29.4 against the
//! Knots profile.

use bitcoin::hashes::Hash;
use bitcoin::script::{Builder, PushBytesBuf};
use bitcoin::secp256k1::{self, Secp256k1, SecretKey};
use bitcoin::sighash::{EcdsaSighashType, SighashCache};
use bitcoin::taproot::{LeafVersion, TaprootBuilder};
use bitcoin::{PublicKey, ScriptBuf, Witness};

use super::*;

/// The order of secp256k1's group, big-endian.
const ORDER: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
];

/// The fee every spend here pays (enough for the largest witness at 1 sat/vB).
pub(super) const FEE: u64 = 20_000;
/// What each funded output holds.
pub(super) const FUNDS: u64 = 100_000;

impl Pair {
    /// Mines `n` blocks on bitcoind (to the test's address) and feeds them to cairn's validator
    /// and index.
    pub(super) fn mine(&self, n: u32) {
        let from: u32 = self.node.rpc(&["getblockcount"]).parse().unwrap();
        self.node
            .rpc(&["generatetoaddress", &n.to_string(), &self.miner]);
        self.node
            .wait_for_indexes(std::time::Duration::from_secs(60));
        self.follow(from + 1..=from + n);
    }

    /// Feeds bitcoind's blocks at `heights` (of its active chain) to cairn's validator and index.
    pub(super) fn follow(&self, heights: std::ops::RangeInclusive<u32>) {
        for h in heights {
            let hash = self.node.rpc(&["getblockhash", &h.to_string()]);
            let raw = Vec::from_hex(&self.node.rpc(&["getblock", &hash, "0"])).unwrap();
            self._validator.submit_block(&raw).unwrap();
        }
        self.index.sync(&self._validator).unwrap();
    }

    /// The coin among `coins` ([`Pair::fund`]'s) that pays `script`.
    pub(super) fn coin_paying(coins: &[(OutPoint, TxOut)], script: &ScriptBuf) -> OutPoint {
        coins
            .iter()
            .find(|(_, out)| out.script_pubkey == *script)
            .expect("a funded script")
            .0
    }

    /// Pays [`FUNDS`] to each script in one transaction of the test's, mined: the outputs, in
    /// order.
    pub(super) fn fund(&self, scripts: &[ScriptBuf]) -> Vec<(OutPoint, TxOut)> {
        let distinct: std::collections::HashSet<&ScriptBuf> = scripts.iter().collect();
        assert_eq!(distinct.len(), scripts.len(), "every script once");
        let tx = self.pay(
            scripts
                .iter()
                .map(|s| TxOut {
                    value: Amount::from_sat(FUNDS),
                    script_pubkey: s.clone(),
                })
                .collect(),
        );
        self.mine(1);
        let txid = tx.compute_txid();
        (0..scripts.len())
            .map(|vout| (OutPoint::new(txid, vout as u32), tx.output[vout].clone()))
            .collect()
    }

    /// Sends `tx` to bitcoind's mempool and `mempool`; both must take it.
    pub(super) fn submit(&self, mempool: &Mempool, tx: &Transaction) {
        let raw = bitcoin::consensus::serialize(tx);
        if let Err(e) = self
            .node
            .rpc_result(&["sendrawtransaction", &raw.to_lower_hex_string()])
        {
            panic!("bitcoind refused {}: {e}", tx.compute_txid());
        }
        mempool
            .accept(&raw, &self.index)
            .unwrap_or_else(|e| panic!("cairn refused what bitcoind took: {e}"));
    }

    /// The output script of a fresh key of the test's, of the kind `getnewaddress` calls
    /// `kind` (`bech32`, `legacy`, `p2sh-segwit`, `bech32m`); [`Pair::sign`] signs its spends.
    pub(super) fn wallet_script(&self, kind: &str) -> ScriptBuf {
        self.keys.script(Kind::named(kind))
    }

    /// An empty mempool of cairn's with the profile of the oracle's ([`Pair::config`]).
    pub(super) fn mempool(&self) -> Mempool {
        Mempool::new(self.config)
    }
}

/// A spend of `coin` (worth [`FUNDS`]) back to the wallet, paying [`FEE`], with the given script
/// sig and witness.
pub(super) fn spend_with(
    pair: &Pair,
    coin: OutPoint,
    script_sig: ScriptBuf,
    witness: Vec<Vec<u8>>,
) -> Transaction {
    Transaction {
        version: bitcoin::transaction::Version::TWO,
        lock_time: bitcoin::absolute::LockTime::ZERO,
        input: vec![TxIn {
            previous_output: coin,
            script_sig,
            sequence: bitcoin::Sequence::ENABLE_RBF_NO_LOCKTIME,
            witness: Witness::from_slice(&witness),
        }],
        output: vec![TxOut {
            value: Amount::from_sat(FUNDS - FEE),
            script_pubkey: pair.coins[0].2.clone(),
        }],
    }
}

/// A DER signature with its hash type, S replaced by n - S (valid all the same).
pub(super) fn flip_s(sig: &[u8]) -> Vec<u8> {
    let (hash_type, der) = sig.split_last().unwrap();
    let compact = secp256k1::ecdsa::Signature::from_der(der)
        .unwrap()
        .serialize_compact();
    let mut s = [0u8; 32];
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let d = i16::from(ORDER[i]) - i16::from(compact[32 + i]) - borrow;
        borrow = i16::from(d < 0);
        s[i] = d.rem_euclid(256) as u8;
    }
    let high =
        secp256k1::ecdsa::Signature::from_compact(&[&compact[..32], &s[..]].concat()).unwrap();
    let mut out = high.serialize_der().to_vec();
    out.push(*hash_type);
    out
}

/// A script sig of these pushes.
fn pushes(items: &[Vec<u8>]) -> ScriptBuf {
    items
        .iter()
        .fold(Builder::new(), |b, item| {
            b.push_slice(PushBytesBuf::try_from(item.clone()).unwrap())
        })
        .into_script()
}

/// The pushes of a push-only script.
fn pushed(script: &ScriptBuf) -> Vec<Vec<u8>> {
    script
        .instructions()
        .map(|i| match i.unwrap() {
            bitcoin::script::Instruction::PushBytes(b) => b.as_bytes().to_vec(),
            other => panic!("not a push: {other:?}"),
        })
        .collect()
}

/// A P2WSH output of `script` and the witness script's bytes.
pub(super) fn p2wsh(script: Vec<u8>) -> (ScriptBuf, Vec<u8>) {
    let s = ScriptBuf::from_bytes(script.clone());
    (ScriptBuf::new_p2wsh(&s.wscript_hash()), script)
}

/// A P2SH output of `redeem` and the redeem script's bytes.
fn p2sh(redeem: Vec<u8>) -> (ScriptBuf, Vec<u8>) {
    let s = ScriptBuf::from_bytes(redeem.clone());
    (ScriptBuf::new_p2sh(&s.script_hash()), redeem)
}

/// A taproot output with one leaf `script` of `version`: the output script, and the leaf and
/// control block that spend it.
pub(super) fn tap_leaf(script: Vec<u8>, version: u8) -> (ScriptBuf, Vec<u8>, Vec<u8>) {
    let secp = Secp256k1::new();
    let internal = SecretKey::from_slice(&[3; 32])
        .unwrap()
        .x_only_public_key(&secp)
        .0;
    let leaf = ScriptBuf::from_bytes(script.clone());
    let version = LeafVersion::from_consensus(version).unwrap();
    let info = TaprootBuilder::new()
        .add_leaf_with_ver(0, leaf.clone(), version)
        .unwrap()
        .finalize(&secp, internal)
        .unwrap();
    let control = info.control_block(&(leaf, version)).unwrap().serialize();
    let output = ScriptBuf::new_p2tr_tweaked(info.output_key());
    (output, script, control)
}

/// The verdicts of both on `cases`, cairn's mempool of the oracle's profile ([`Pair::config`]):
/// the names of those that disagree (the same rule, and for a script flag of policy the same
/// words, or not).
pub(super) fn disagreements(pair: &Pair, cases: &[(&str, Transaction)]) -> Vec<String> {
    let mut disagreed = Vec::new();
    for (name, tx) in cases {
        let (core, ours) = (pair.core(tx), pair.cairn(tx));
        eprintln!("{name}: bitcoind {core:?}, cairn {ours:?}");
        let words = |r: &Option<String>| {
            r.as_deref()
                .filter(|r| r.starts_with("mempool-script-verify-flag-failed"))
                .and_then(|r| r.split(['(', ')']).nth(1).map(str::to_string))
        };
        let same_rule = core.as_deref().map(rule) == ours.as_deref().map(rule);
        if !same_rule || words(&core) != words(&ours) {
            disagreed.push(format!("{name}: bitcoind {core:?}, cairn {ours:?}"));
        }
    }
    disagreed
}

/// Every standard script flag and input rule a standard-looking spend can break, one per case,
/// with a passing neighbour for each limit; Bitcoin Core 31.99 the oracle, cairn's default
/// profile (no Knots rule against data, whose `-maxscriptsize` would refuse the 3,600-byte
/// P2WSH script first).
#[test]
fn policy_script_flags_and_input_rules_agree_with_bitcoind() {
    let pair = Pair::start();
    let secp = Secp256k1::new();
    let key = SecretKey::from_slice(&[7; 32]).unwrap();
    let compressed = PublicKey::new(key.public_key(&secp));
    let uncompressed = PublicKey::new_uncompressed(key.public_key(&secp));
    let mut two_drops = vec![0x6d; 50];
    two_drops.extend([0x75, 0x51]);
    let mut sigops16 = vec![0x51, 0x63, 0x51, 0x67];
    sigops16.extend([0xac; 16]);
    sigops16.push(0x68);
    let mut sigops15 = vec![0x51, 0x63, 0x51, 0x67];
    sigops15.extend([0xac; 15]);
    sigops15.push(0x68);
    let drop1 = p2wsh(vec![0x75, 0x51]);
    // Witness scripts of 3,601 and 3,600 bytes (Core's MAX_STANDARD_P2WSH_SCRIPT_SIZE): six
    // pushes of 520 bytes and one of 452 or 451, each dropped, then OP_TRUE.
    let long_script = |last: usize| {
        let mut script = Vec::new();
        for n in [520, 520, 520, 520, 520, 520, last] {
            script.extend([0x4d, n as u8, (n >> 8) as u8]);
            script.extend(vec![0x5a; n]);
            script.push(0x75);
        }
        script.push(0x51);
        p2wsh(script)
    };
    let (script3601, script3600) = (long_script(452), long_script(451));
    assert_eq!((script3601.1.len(), script3600.1.len()), (3_601, 3_600));
    let drop2 = p2wsh(vec![0x75, 0x75, 0x51]);
    let many = p2wsh(two_drops);
    let v2 = p2sh(vec![0x52, 0x02, 0xab, 0xcd]);
    let nop4 = p2sh(vec![0xb3, 0x51]);
    let separator = p2sh(vec![0xab, 0x51]);
    let ops16 = p2sh(sigops16);
    let ops15 = p2sh(sigops15);
    let success = tap_leaf(vec![0x50], 0xc0);
    let future = tap_leaf(vec![0x51], 0xc2);
    let tap_drop = tap_leaf(vec![0x75, 0x51], 0xc0);
    let tap_true = tap_leaf(vec![0x52], 0xc0);
    let own_p2wpkh_long =
        ScriptBuf::new_p2wpkh(&bitcoin::WPubkeyHash::hash(&uncompressed.to_bytes()));
    let own_p2pkh = ScriptBuf::new_p2pkh(&compressed.pubkey_hash());
    let legacy = [
        pair.wallet_script("legacy"),
        pair.wallet_script("legacy"),
        pair.wallet_script("legacy"),
    ];
    let segwit = pair.wallet_script("bech32");
    let mut scripts: Vec<ScriptBuf> = vec![
        drop1.0.clone(),
        drop2.0.clone(),
        many.0.clone(),
        script3601.0.clone(),
        script3600.0.clone(),
        v2.0.clone(),
        nop4.0.clone(),
        separator.0.clone(),
        ops16.0.clone(),
        ops15.0.clone(),
        success.0.clone(),
        future.0.clone(),
        tap_drop.0.clone(),
        tap_true.0.clone(),
        own_p2wpkh_long.clone(),
        own_p2pkh.clone(),
        segwit.clone(),
    ];
    scripts.extend(legacy.iter().cloned());
    let coins = pair.fund(&scripts);
    let coin = |script: &ScriptBuf| Pair::coin_paying(&coins, script);
    let bare = |script: &ScriptBuf, witness: Vec<Vec<u8>>| {
        spend_with(&pair, coin(script), ScriptBuf::new(), witness)
    };
    let by_redeem = |(out, redeem): &(ScriptBuf, Vec<u8>)| {
        spend_with(
            &pair,
            coin(out),
            pushes(std::slice::from_ref(redeem)),
            vec![],
        )
    };
    // Spends signed with the test's keys, then changed where the signature does not reach.
    let wallet = |script: &ScriptBuf| pair.sign(&bare(script, vec![]));
    let legacy_high_s = {
        let mut tx = wallet(&legacy[0]);
        let mut items = pushed(&tx.input[0].script_sig);
        items[0] = flip_s(&items[0]);
        tx.input[0].script_sig = pushes(&items);
        tx
    };
    let segwit_high_s = {
        let mut tx = wallet(&segwit);
        let mut items: Vec<Vec<u8>> = tx.input[0].witness.to_vec();
        items[0] = flip_s(&items[0]);
        tx.input[0].witness = Witness::from_slice(&items);
        tx
    };
    let pushdata1 = {
        let mut tx = wallet(&legacy[1]);
        let items = pushed(&tx.input[0].script_sig);
        let mut bytes = pushes(&items[..1]).into_bytes();
        bytes.extend([0x4c, items[1].len() as u8]);
        bytes.extend(&items[1]);
        tx.input[0].script_sig = ScriptBuf::from_bytes(bytes);
        tx
    };
    let extra_push = {
        let mut tx = wallet(&legacy[2]);
        let mut items = pushed(&tx.input[0].script_sig);
        items.insert(0, vec![7, 7]);
        tx.input[0].script_sig = pushes(&items);
        tx
    };
    // Signed with cairn's own key: an uncompressed key in P2WPKH, an undefined hash type.
    let uncompressed_segwit = {
        let mut tx = bare(&own_p2wpkh_long, vec![]);
        let hash = SighashCache::new(&tx)
            .p2wpkh_signature_hash(
                0,
                &own_p2wpkh_long,
                Amount::from_sat(FUNDS),
                EcdsaSighashType::All,
            )
            .unwrap();
        let sig = secp.sign_ecdsa(&secp256k1::Message::from(hash), &key);
        let mut sig = sig.serialize_der().to_vec();
        sig.push(0x01);
        tx.input[0].witness = Witness::from_slice(&[sig, uncompressed.to_bytes()]);
        tx
    };
    let hash_type_4 = {
        let mut tx = bare(&own_p2pkh, vec![]);
        let hash = SighashCache::new(&tx)
            .legacy_signature_hash(0, &own_p2pkh, 4)
            .unwrap();
        let sig = secp.sign_ecdsa(&secp256k1::Message::from(hash), &key);
        let mut sig = sig.serialize_der().to_vec();
        sig.push(0x04);
        tx.input[0].script_sig = pushes(&[sig, compressed.to_bytes()]);
        tx
    };
    let cases: Vec<(&str, Transaction)> = vec![
        ("P2PKH signature with a high S", legacy_high_s),
        ("P2WPKH signature with a high S", segwit_high_s),
        ("P2PKH key pushed with OP_PUSHDATA1", pushdata1),
        ("P2PKH script sig with an extra push", extra_push),
        ("P2WPKH with an uncompressed key", uncompressed_segwit),
        ("P2PKH signature of hash type 4", hash_type_4),
        (
            "P2WSH stack item of 81 bytes",
            bare(&drop1.0, vec![vec![1; 81], drop1.1.clone()]),
        ),
        (
            "P2WSH stack items of 80 bytes",
            bare(&drop2.0, vec![vec![1; 80], vec![2; 80], drop2.1.clone()]),
        ),
        (
            "P2WSH witness script of 3,601 bytes",
            bare(&script3601.0, vec![script3601.1.clone()]),
        ),
        (
            "P2WSH witness script of 3,600 bytes",
            bare(&script3600.0, vec![script3600.1.clone()]),
        ),
        ("P2WSH with 101 stack items", {
            let mut w = vec![vec![]; 101];
            w.push(many.1.clone());
            bare(&many.0, w)
        }),
        ("P2SH-wrapped witness version 2", by_redeem(&v2)),
        ("P2SH redeem script running OP_NOP4", by_redeem(&nop4)),
        (
            "P2SH redeem script running OP_CODESEPARATOR",
            by_redeem(&separator),
        ),
        ("P2SH redeem script of 16 sigops", by_redeem(&ops16)),
        ("P2SH redeem script of 15 sigops", by_redeem(&ops15)),
        (
            "tapscript OP_SUCCESS80",
            bare(&success.0, vec![success.1.clone(), success.2.clone()]),
        ),
        (
            "taproot leaf version 0xc2",
            bare(&future.0, vec![future.1.clone(), future.2.clone()]),
        ),
        (
            "tapscript stack item of 81 bytes",
            bare(
                &tap_drop.0,
                vec![vec![1; 81], tap_drop.1.clone(), tap_drop.2.clone()],
            ),
        ),
        (
            "taproot script path with an annex",
            bare(
                &tap_true.0,
                vec![tap_true.1.clone(), tap_true.2.clone(), vec![0x50, 0]],
            ),
        ),
    ];
    let disagreed = disagreements(&pair, &cases);
    assert!(disagreed.is_empty(), "{disagreed:#?}");
    // The cases are what they say: the oracle refuses all but the neighbours at the limits, and
    // every one is valid in a block (bitcoind mines them all into one, past its mempool).
    let passing = [
        "P2WSH stack items of 80 bytes",
        "P2WSH witness script of 3,600 bytes",
        "P2SH redeem script of 15 sigops",
    ];
    for (name, tx) in &cases {
        let verdict = pair.core(tx);
        assert_eq!(
            verdict.is_none(),
            passing.contains(name),
            "{name}: {verdict:?}"
        );
    }
    assert_valid_in_a_block(&pair, &cases);
}

/// BIP54's limit on the legacy sigops of a transaction's inputs, which Core 31 applies as policy
/// (`MAX_TX_LEGACY_SIGOPS`, 2,500: the sigops of each input's script sig and of the output it
/// spends, a P2SH output's by its redeem script): 166 spends of a P2SH redeem script of 15
/// sigops (in a branch not run) and one of 10, 2,500 in all, are taken; with one of 11 instead,
/// 2,501, refused (`bad-txns-nonstandard-inputs`), though valid in a block. Bitcoin Core 31.99
/// and cairn's default profile.
#[test]
fn legacy_sigops_limit_agrees_with_bitcoind() {
    let pair = Pair::start();
    // OP_1 OP_IF OP_1 OP_ELSE <n × OP_CHECKSIG> OP_ENDIF.
    let redeem = |n: usize| {
        let mut script = vec![0x51, 0x63, 0x51, 0x67];
        script.extend(vec![0xac; n]);
        script.push(0x68);
        p2sh(script)
    };
    let (fifteen, ten, eleven) = (redeem(15), redeem(10), redeem(11));
    let mut outputs = vec![
        TxOut {
            value: Amount::from_sat(FUNDS),
            script_pubkey: fifteen.0.clone(),
        };
        166
    ];
    for last in [&ten, &eleven] {
        outputs.push(TxOut {
            value: Amount::from_sat(FUNDS),
            script_pubkey: last.0.clone(),
        });
    }
    let funding = pair.pay(outputs);
    pair.mine(1);
    let txid = funding.compute_txid();
    let spend = |last: u32| {
        let input = |vout: u32, redeem: &Vec<u8>| TxIn {
            previous_output: OutPoint::new(txid, vout),
            script_sig: pushes(std::slice::from_ref(redeem)),
            sequence: bitcoin::Sequence::ENABLE_RBF_NO_LOCKTIME,
            witness: Witness::new(),
        };
        let mut inputs: Vec<TxIn> = (0..166).map(|vout| input(vout, &fifteen.1)).collect();
        inputs.push(input(last, if last == 166 { &ten.1 } else { &eleven.1 }));
        Transaction {
            version: bitcoin::transaction::Version::TWO,
            lock_time: bitcoin::absolute::LockTime::ZERO,
            input: inputs,
            output: vec![TxOut {
                value: Amount::from_sat(167 * FUNDS - 100_000),
                script_pubkey: pair.coins[0].2.clone(),
            }],
        }
    };
    let cases = vec![
        ("2,500 legacy sigops in the inputs", spend(166)),
        ("2,501 legacy sigops in the inputs", spend(167)),
    ];
    let disagreed = disagreements(&pair, &cases);
    assert!(disagreed.is_empty(), "{disagreed:#?}");
    assert_eq!(pair.core(&cases[0].1), None);
    assert_eq!(
        pair.core(&cases[1].1).as_deref().map(rule).as_deref(),
        Some("bad-txns-nonstandard-inputs")
    );
    assert_valid_in_a_block(&pair, &cases[1..]);
}

/// Every case is valid by consensus: bitcoind mines them all into one block, past its mempool.
pub(super) fn assert_valid_in_a_block(pair: &Pair, cases: &[(&str, Transaction)]) {
    let raws: Vec<String> = cases
        .iter()
        .map(|(_, tx)| bitcoin::consensus::serialize(tx).to_lower_hex_string())
        .collect();
    let mined = pair
        .node
        .rpc_result(&["generateblock", &pair.miner, &json!(raws).to_string()]);
    assert!(mined.is_ok(), "a case is invalid by consensus: {mined:?}");
}

/// Knots's chain limits (Core's before its cluster mempool): a chain of 25 unconfirmed
/// transactions enters both mempools, the 26th is refused; a second child of the first is taken
/// once by the CPFP carve-out, a third is not. Bitcoin Knots 29.4 and the Knots profile
/// ([`cluster_limits_agree_with_bitcoind`] has Core 31's).
#[test]
fn chain_limits_and_the_carve_out_agree_with_knots() {
    let pair = Pair::start_knots();
    let mempool = pair.mempool();
    let submit = |tx: &Transaction| pair.submit(&mempool, tx);
    let judge = |tx: &Transaction| {
        let ours = mempool
            .accept(&bitcoin::consensus::serialize(tx), &pair.index)
            .err()
            .map(|e| e.to_string());
        (pair.core(tx), ours)
    };
    let (coin, value, script) = pair.coins[0].clone();
    let wallet_out = |value: u64| TxOut {
        value: Amount::from_sat(value),
        script_pubkey: script.clone(),
    };
    // The first: three outputs; the chain goes on from the first of them.
    let third = value / 3;
    let first = spend_of(
        &pair,
        coin,
        2,
        vec![
            wallet_out(third),
            wallet_out(third),
            wallet_out(third - 2_000),
        ],
        0,
        0xffff_fffd,
    );
    submit(&first);
    let mut tip = (OutPoint::new(first.compute_txid(), 0), third);
    for _ in 1..25 {
        let next = spend_of(
            &pair,
            tip.0,
            2,
            vec![wallet_out(tip.1 - 1_000)],
            0,
            0xffff_fffd,
        );
        submit(&next);
        tip = (OutPoint::new(next.compute_txid(), 0), tip.1 - 1_000);
    }
    let too_long = spend_of(
        &pair,
        tip.0,
        2,
        vec![wallet_out(tip.1 - 1_000)],
        0,
        0xffff_fffd,
    );
    let (core, ours) = judge(&too_long);
    eprintln!("26th in a chain: bitcoind {core:?}, cairn {ours:?}");
    assert_eq!(
        core.as_deref().map(rule).as_deref(),
        Some("too-long-mempool-chain")
    );
    assert_eq!(ours.as_deref().map(rule), core.as_deref().map(rule));

    let child = |vout: u32| {
        let op = OutPoint::new(first.compute_txid(), vout);
        let value = first.output[vout as usize].value.to_sat();
        spend_of(
            &pair,
            op,
            2,
            vec![wallet_out(value - 1_000)],
            0,
            0xffff_fffd,
        )
    };
    let carved = child(1);
    let (core, ours) = judge(&carved);
    eprintln!("carve-out: bitcoind {core:?}, cairn {ours:?}");
    assert_eq!(core, None, "bitcoind takes the carve-out");
    assert_eq!(ours, None, "cairn takes the carve-out");
    let raw = bitcoin::consensus::serialize(&carved);
    pair.node
        .rpc(&["sendrawtransaction", &raw.to_lower_hex_string()]);
    let (core, ours) = judge(&child(2));
    eprintln!("a second carve-out: bitcoind {core:?}, cairn {ours:?}");
    assert_eq!(
        core.as_deref().map(rule).as_deref(),
        Some("too-long-mempool-chain")
    );
    assert_eq!(ours.as_deref().map(rule), core.as_deref().map(rule));
}

/// Core 31's cluster limits (64 transactions and 101 kvB to a cluster; no count of ancestors or
/// descendants, no carve-out): a chain grows link by link, each judged by both before it enters
/// both mempools; bitcoind takes the 64th and refuses the 65th (`too-large-cluster`), and so a
/// second child of the first, the carve-out's case in Knots. Bitcoin Core 31.99 and cairn's
/// default profile ([`chain_limits_and_the_carve_out_agree_with_knots`] has Knots's limits).
#[test]
fn cluster_limits_agree_with_bitcoind() {
    let pair = Pair::start();
    let mempool = pair.mempool();
    let judge = |what: &str, tx: &Transaction| {
        let ours = mempool
            .accept(&bitcoin::consensus::serialize(tx), &pair.index)
            .err()
            .map(|e| e.to_string());
        let core = pair.core(tx);
        eprintln!("{what}: bitcoind {core:?}, cairn {ours:?}");
        assert_eq!(
            ours.as_deref().map(rule),
            core.as_deref().map(rule),
            "{what}: bitcoind {core:?}, cairn {ours:?}"
        );
        core
    };
    // Taken by both (cairn's verdict put it in its mempool): into bitcoind's too.
    let enter = |tx: &Transaction| {
        let raw = bitcoin::consensus::serialize(tx);
        pair.node
            .rpc(&["sendrawtransaction", &raw.to_lower_hex_string()]);
    };
    let (coin, value, script) = pair.coins[0].clone();
    let out = |value: u64| TxOut {
        value: Amount::from_sat(value),
        script_pubkey: script.clone(),
    };
    let link = |from: OutPoint, value: u64| {
        spend_of(&pair, from, 2, vec![out(value - 1_000)], 0, 0xffff_fffd)
    };
    let third = value / 3;
    let first = spend_of(
        &pair,
        coin,
        2,
        vec![out(third), out(third), out(third - 2_000)],
        0,
        0xffff_fffd,
    );
    assert_eq!(judge("1st in a chain", &first), None);
    enter(&first);
    let mut tip = (OutPoint::new(first.compute_txid(), 0), third);
    for n in 2..=65 {
        let next = link(tip.0, tip.1);
        let core = judge(&format!("{n}th in a chain"), &next);
        if n < 65 {
            assert_eq!(core, None, "bitcoind takes the {n}th in a chain");
            enter(&next);
            tip = (OutPoint::new(next.compute_txid(), 0), tip.1 - 1_000);
        } else {
            assert_eq!(
                core.as_deref().map(rule).as_deref(),
                Some("too-large-cluster")
            );
        }
    }
    let second_child = link(
        OutPoint::new(first.compute_txid(), 1),
        first.output[1].value.to_sat(),
    );
    let core = judge("a second child of the first", &second_child);
    assert_eq!(
        core.as_deref().map(rule).as_deref(),
        Some("too-large-cluster")
    );
}

/// Core 31's limit on a cluster's size (101 kvB), which no ancestor or descendant set reaches:
/// a small parent and a large one (about 59 kvB) with a common child, all in both mempools;
/// then a second child of the small parent, whose ancestors and descendants stay far under 101
/// kvB (Knots's limits) but whose cluster would be about 94 kvB (taken) or 104 kvB (refused,
/// `too-large-cluster`), judged by dry runs. Bitcoin Core 31.99 and cairn's default profile.
#[test]
fn cluster_size_limit_agrees_with_bitcoind() {
    let pair = Pair::start();
    let mempool = pair.mempool();
    let script = pair.coins[0].2.clone();
    let out = |value: u64| TxOut {
        value: Amount::from_sat(value),
        script_pubkey: script.clone(),
    };
    // A spend of `from` (worth `value`) into `n` outputs of 1,000 sat and the rest less `fee`.
    let spread = |from: Vec<(OutPoint, u64)>, n: usize, fee: u64, parents: &[&Transaction]| {
        let value: u64 = from.iter().map(|(_, v)| v).sum();
        let mut outputs = vec![out(1_000); n];
        outputs.push(out(value - 1_000 * n as u64 - fee));
        let tx = Transaction {
            version: bitcoin::transaction::Version::TWO,
            lock_time: bitcoin::absolute::LockTime::ZERO,
            input: from
                .iter()
                .map(|(op, _)| TxIn {
                    previous_output: *op,
                    sequence: bitcoin::Sequence(0xffff_fffd),
                    ..Default::default()
                })
                .collect(),
            output: outputs,
        };
        sign_spending(&pair, &tx, parents)
    };
    let last = |tx: &Transaction| {
        let vout = tx.output.len() - 1;
        (
            OutPoint::new(tx.compute_txid(), vout as u32),
            tx.output[vout].value.to_sat(),
        )
    };
    let small = spread(vec![(pair.coins[0].0, pair.coins[0].1)], 1, 1_000, &[]);
    let large = spread(
        vec![(pair.coins[1].0, pair.coins[1].1)],
        1_900,
        100_000,
        &[],
    );
    let child = spread(
        vec![
            last(&large),
            (OutPoint::new(small.compute_txid(), 0), 1_000),
        ],
        0,
        1_000,
        &[&large, &small],
    );
    for tx in [&small, &large, &child] {
        pair.submit(&mempool, tx);
    }
    let held = small.vsize() + large.vsize() + child.vsize();
    let second = |n: usize| spread(vec![last(&small)], n, 100_000, &[]);
    let mut disagreed = Vec::new();
    for (n, taken) in [(1_100, true), (1_450, false)] {
        let tx = second(n);
        let cluster = held + tx.vsize();
        let core = pair.core(&tx);
        let ours = cairn_dry_run(&mempool, &pair, &[&tx]);
        let ours = ours[0].1.clone();
        eprintln!("a second child of the small parent, a cluster of {cluster} vB: bitcoind {core:?}, cairn {ours:?}");
        assert_eq!(cluster <= 101_000, taken, "{cluster} vB");
        let want = (!taken).then(|| "too-large-cluster".to_string());
        assert_eq!(core.as_deref().map(rule), want, "bitcoind, {cluster} vB");
        if core.as_deref().map(rule) != ours {
            disagreed.push(format!(
                "a cluster of {cluster} vB: bitcoind {core:?}, cairn {ours:?}"
            ));
        }
    }
    assert!(disagreed.is_empty(), "{disagreed:#?}");
}

/// Signs `tx` with the test's keys, told of the outputs it spends that no chain or mempool of
/// bitcoind's has (`parents`): every input must be signed.
fn sign_spending(pair: &Pair, tx: &Transaction, parents: &[&Transaction]) -> Transaction {
    let (signed, complete) = pair.sign_with(tx, parents);
    assert!(complete, "an input of {} left unsigned", tx.compute_txid());
    signed
}

/// A dry run's verdict per transaction: `allowed` (absent when undecided) and the rule of the
/// reason (the package's error, else the transaction's).
type Verdicts = Vec<(Option<bool>, Option<String>)>;

/// bitcoind's `testmempoolaccept` of `txs` together (no fee guard).
fn core_dry_run(pair: &Pair, txs: &[&Transaction]) -> Verdicts {
    let hexes: Vec<String> = txs
        .iter()
        .map(|t| bitcoin::consensus::serialize(*t).to_lower_hex_string())
        .collect();
    let answer = pair
        .node
        .rpc_json(&["testmempoolaccept", &json!(hexes).to_string(), "0"]);
    answer
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let reason = r["package-error"].as_str().or(r["reject-reason"].as_str());
            (r["allowed"].as_bool(), reason.map(rule))
        })
        .collect()
}

/// cairn's dry run of `txs` together ([`Mempool::test_accept`]).
fn cairn_dry_run(mempool: &Mempool, pair: &Pair, txs: &[&Transaction]) -> Verdicts {
    let raws: Vec<Vec<u8>> = txs
        .iter()
        .map(|t| bitcoin::consensus::serialize(*t))
        .collect();
    mempool
        .test_accept(&raws, &pair.index)
        .unwrap()
        .iter()
        .map(|r| {
            let reason = match (&r.package_error, &r.verdict) {
                (Some(e), _) => Some(e.clone()),
                (None, Some(Err(e))) => Some(e.to_string()),
                _ => None,
            };
            (
                r.verdict.as_ref().map(Result::is_ok),
                reason.map(|e| rule(&e)),
            )
        })
        .collect()
}

/// TRUC (version 3) as Core enforces it: inheritance both ways, one ancestor, the size limits,
/// sibling eviction paid and unpaid, and a package's TRUC rules in a dry run, each judged by
/// Bitcoin Core 31.99 and cairn's default profile with the same mempool.
#[test]
fn truc_rules_agree_with_bitcoind() {
    let pair = Pair::start();
    let mempool = pair.mempool();
    let submit = |tx: &Transaction| pair.submit(&mempool, tx);
    let script = pair.coins[0].2.clone();
    let outs = |values: &[u64]| -> Vec<TxOut> {
        values
            .iter()
            .map(|v| TxOut {
                value: Amount::from_sat(*v),
                script_pubkey: script.clone(),
            })
            .collect()
    };
    let coin = |i: usize| (pair.coins[i].0, pair.coins[i].1);
    let seq = 0xffff_fffd;
    // A spend of `from` (an outpoint worth `value`) into `values`, version `version`.
    let make = |from: (OutPoint, u64), version: i32, values: &[u64], parents: &[&Transaction]| {
        let tx = Transaction {
            version: bitcoin::transaction::Version(version),
            lock_time: bitcoin::absolute::LockTime::ZERO,
            input: vec![TxIn {
                previous_output: from.0,
                sequence: bitcoin::Sequence(seq),
                ..Default::default()
            }],
            output: outs(values),
        };
        assert!(values.iter().sum::<u64>() < from.1);
        sign_spending(&pair, &tx, parents)
    };
    let output = |tx: &Transaction, vout: u32| {
        (
            OutPoint::new(tx.compute_txid(), vout),
            tx.output[vout as usize].value.to_sat(),
        )
    };
    let (a, b, c, d) = (coin(1), coin(2), coin(3), coin(4));
    let third = a.1 / 3 - 1_000;
    let parent = make(a, 3, &[third, third, third], &[]);
    submit(&parent);
    let plain = make(b, 2, &[b.1 - 1_000], &[]);
    submit(&plain);
    let child = make(output(&parent, 0), 3, &[third - 1_000], &[]);
    let mut single: Vec<(&str, Transaction)> = vec![
        (
            "a version 2 child of version 3",
            make(output(&parent, 0), 2, &[third - 1_000], &[]),
        ),
        (
            "a version 3 child of version 2",
            make(output(&plain, 0), 3, &[b.1 - 2_000], &[]),
        ),
        (
            "a version 3 transaction over 10,000 vB",
            make(c, 3, &vec![100_000; 330], &[]),
        ),
        ("a version 3 child", child.clone()),
    ];
    let mut disagree = Vec::new();
    // The message after a reason (`reason, message`).
    let message = |r: &str| r.split_once(", ").map(|(_, m)| m.to_string());
    let mut judge = |what: &str, tx: &Transaction| {
        let verdict = pair.core_verdict(tx);
        let core = verdict.as_ref().map(|(reason, _)| reason.clone());
        let ours = mempool
            .accept(&bitcoin::consensus::serialize(tx), &pair.index)
            .err()
            .map(|e| e.to_string());
        eprintln!("{what}: bitcoind {verdict:?}, cairn {ours:?}");
        // A TRUC rule's: the same message too (Core's reason names no rule).
        let same_message = match &verdict {
            Some((reason, details)) if reason == "TRUC-violation" => {
                details.as_deref().and_then(message) == ours.as_deref().and_then(message)
            }
            _ => true,
        };
        if core.as_deref().map(rule) != ours.as_deref().map(rule) || !same_message {
            disagree.push(format!("{what}: bitcoind {verdict:?}, cairn {ours:?}"));
        }
        core.is_none()
    };
    for (what, tx) in single.drain(..) {
        judge(what, &tx);
    }
    // The child entered cairn's mempool with its verdict; bitcoind's too.
    pair.node.rpc(&[
        "sendrawtransaction",
        &bitcoin::consensus::serialize(&child).to_lower_hex_string(),
    ]);
    let later: Vec<(&str, Transaction)> = vec![
        (
            "a grandchild",
            make(output(&child, 0), 3, &[third - 2_000], &[]),
        ),
        (
            "a child over 1,000 vB",
            make(output(&parent, 2), 3, &vec![10_000; 35], &[]),
        ),
        (
            "a sibling paying as little",
            make(output(&parent, 1), 3, &[third - 1_000], &[]),
        ),
        (
            "a sibling paying for the eviction",
            make(output(&parent, 1), 3, &[third - 20_000], &[]),
        ),
    ];
    for (what, tx) in &later {
        judge(what, tx);
    }

    // Packages of a version 3 parent no mempool has (dry runs).
    let p = make(d, 3, &[d.1 / 2 - 1_000, d.1 / 2 - 1_000], &[]);
    let kid = make(output(&p, 0), 3, &[d.1 / 2 - 2_000], &[&p]);
    let sibling = make(output(&p, 1), 3, &[d.1 / 2 - 2_000], &[&p]);
    let grandkid = make(output(&kid, 0), 3, &[d.1 / 2 - 3_000], &[&kid]);
    let plain_kid = make(output(&p, 1), 2, &[d.1 / 2 - 2_000], &[&p]);
    let packages: Vec<(&str, Vec<&Transaction>)> = vec![
        ("a parent and its child", vec![&p, &kid]),
        ("two children", vec![&p, &kid, &sibling]),
        ("a grandchild", vec![&p, &kid, &grandkid]),
        ("a version 2 child", vec![&p, &plain_kid]),
    ];
    for (what, txs) in &packages {
        let core = core_dry_run(&pair, txs);
        let ours = cairn_dry_run(&mempool, &pair, txs);
        eprintln!("package, {what}: bitcoind {core:?}, cairn {ours:?}");
        if core != ours {
            disagree.push(format!(
                "package, {what}: bitcoind {core:?}, cairn {ours:?}"
            ));
        }
    }
    assert!(disagree.is_empty(), "{disagree:#?}");
}

/// Which of `txs` bitcoind's mempool holds after its `submitpackage` of them (no fee guard),
/// and what it said.
fn core_submit_package(pair: &Pair, txs: &[&Transaction]) -> (Vec<bool>, String) {
    let hexes: Vec<String> = txs
        .iter()
        .map(|t| bitcoin::consensus::serialize(*t).to_lower_hex_string())
        .collect();
    let said = pair
        .node
        .rpc_result(&["submitpackage", &json!(hexes).to_string(), "0"])
        .unwrap_or_else(|e| e);
    let pool = pair.node.rpc_json(&["getrawmempool"]);
    let held = txs
        .iter()
        .map(|t| {
            let txid = t.compute_txid().to_string();
            pool.as_array()
                .unwrap()
                .iter()
                .any(|p| p.as_str() == Some(&txid))
        })
        .collect();
    (held, said.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Which of `txs` cairn's `mempool` holds after [`Mempool::accept_package`], and why it
/// refused those it refused.
fn cairn_submit_package(
    pair: &Pair,
    mempool: &Mempool,
    txs: &[&Transaction],
) -> (Vec<bool>, String) {
    let raws: Vec<Vec<u8>> = txs
        .iter()
        .map(|t| bitcoin::consensus::serialize(*t))
        .collect();
    let said = match mempool.accept_package(&raws, &pair.index) {
        Ok(accepted) => format!(
            "{:?}",
            accepted
                .each
                .iter()
                .map(|r| r.as_ref().err().map(ToString::to_string))
                .collect::<Vec<_>>()
        ),
        Err(e) => e.to_string(),
    };
    let held = txs
        .iter()
        .map(|t| mempool.entry(&t.compute_txid()).is_some())
        .collect();
    (held, said)
}

/// A parent paying no fee, with its coin's value in one output and, if `dust`, a second output
/// of 0 sat; and a child spending all of the parent's outputs, paying `fee`.
fn parent_and_child(pair: &Pair, coin: usize, dust: bool, fee: u64) -> (Transaction, Transaction) {
    let (op, value, script) = pair.coins[coin].clone();
    let mut outputs = vec![TxOut {
        value: Amount::from_sat(value),
        script_pubkey: script.clone(),
    }];
    if dust {
        outputs.push(TxOut {
            value: Amount::ZERO,
            script_pubkey: script.clone(),
        });
    }
    let parent = spend_of(pair, op, 2, outputs, 0, 0xffff_fffd);
    let child = Transaction {
        version: bitcoin::transaction::Version::TWO,
        lock_time: bitcoin::absolute::LockTime::ZERO,
        input: (0..parent.output.len() as u32)
            .map(|vout| TxIn {
                previous_output: OutPoint::new(parent.compute_txid(), vout),
                sequence: bitcoin::Sequence(0xffff_fffd),
                ..Default::default()
            })
            .collect(),
        output: vec![TxOut {
            value: Amount::from_sat(value - fee),
            script_pubkey: script,
        }],
    };
    let child = sign_spending(pair, &child, &[&parent]);
    (parent, child)
}

/// A package of one parent paying nothing and one child paying for both (CPFP), submitted
/// (`submitpackage`; cairn's [`Mempool::accept_package`]) after a dry run of the parent alone,
/// which both refuse for its fee: which of the two each mempool holds, and what each said.
fn child_paying_for_its_parent(pair: &Pair) -> (Vec<bool>, String, Vec<bool>, String) {
    let mempool = pair.mempool();
    let (parent, child) = parent_and_child(pair, 0, false, 5_000);
    let (core, ours) = (pair.core(&parent), pair.cairn(&parent));
    eprintln!("the parent alone: bitcoind {core:?}, cairn {ours:?}");
    assert_eq!(
        core.as_deref().map(rule).as_deref(),
        Some("min-relay-fee-not-met")
    );
    assert_eq!(ours.as_deref().map(rule), core.as_deref().map(rule));
    let (core, core_said) = core_submit_package(pair, &[&parent, &child]);
    let (ours, ours_said) = cairn_submit_package(pair, &mempool, &[&parent, &child]);
    eprintln!("the package: bitcoind {core:?} ({core_said}), cairn {ours:?} ({ours_said})");
    (core, core_said, ours, ours_said)
}

/// [`child_paying_for_its_parent`] judged by Bitcoin Core 31.99, which takes both, and cairn's
/// default profile.
#[test]
fn a_child_paying_for_its_parent_agrees_with_bitcoind() {
    let pair = Pair::start();
    let (core, core_said, ours, ours_said) = child_paying_for_its_parent(&pair);
    assert_eq!(
        core,
        [true, true],
        "bitcoind takes the package: {core_said}"
    );
    assert_eq!(ours, core, "cairn: {ours_said}");
}

/// [`child_paying_for_its_parent`] judged by Bitcoin Knots 29.4, which refuses a parent below
/// the relay fee unless it is TRUC, and the Knots profile.
#[test]
fn a_child_paying_for_its_parent_agrees_with_knots() {
    let pair = Pair::start_knots();
    let (core, core_said, ours, ours_said) = child_paying_for_its_parent(&pair);
    assert_eq!(
        core,
        [false, false],
        "Knots refuses the package: {core_said}"
    );
    assert_eq!(ours, core, "cairn: {ours_said}");
}

/// Ephemeral dust (Core 31's `PreCheckEphemeralTx` and `CheckEphemeralSpends`): a transaction
/// may have one dust output if it pays no fee and a child in its package spends the dust. Dry
/// runs of a transaction with a dust output paying nothing (refused for its fee, not its dust),
/// paying a fee (`dust`), with two dust outputs (`dust`); then packages of a parent paying
/// nothing with one dust output and a child paying for both that spends it (taken), or spends
/// another coin of the parent but not the dust (`missing-ephemeral-spends`). Bitcoin Core
/// 31.99 and cairn's default profile: the same verdicts and rules, the same transactions held.
#[test]
fn ephemeral_dust_agrees_with_bitcoind() {
    let pair = Pair::start();
    let (op, value, script) = pair.coins[1].clone();
    let with_dust = |fee: u64, dusts: usize| {
        let mut outputs = vec![TxOut {
            value: Amount::from_sat(value - fee),
            script_pubkey: script.clone(),
        }];
        outputs.extend(vec![
            TxOut {
                value: Amount::ZERO,
                script_pubkey: script.clone(),
            };
            dusts
        ]);
        spend_of(&pair, op, 2, outputs, 0, 0xffff_fffd)
    };
    let singles = vec![
        ("one dust output, no fee", with_dust(0, 1)),
        ("one dust output, a fee", with_dust(1_000, 1)),
        ("two dust outputs, no fee", with_dust(0, 2)),
    ];
    let mut disagreed = disagreements(&pair, &singles);
    let expected = [
        ("one dust output, no fee", "min-relay-fee-not-met"),
        ("one dust output, a fee", "dust"),
        ("two dust outputs, no fee", "dust"),
    ];
    for ((name, tx), (_, reason)) in singles.iter().zip(expected) {
        let core = pair.core(tx);
        assert_eq!(core.as_deref().map(rule).as_deref(), Some(reason), "{name}");
    }

    let mempool = pair.mempool();
    let (parent, child) = parent_and_child(&pair, 2, true, 5_000);
    let (core, core_said) = core_submit_package(&pair, &[&parent, &child]);
    let (ours, ours_said) = cairn_submit_package(&pair, &mempool, &[&parent, &child]);
    eprintln!(
        "dust spent by the child: bitcoind {core:?} ({core_said}), cairn {ours:?} ({ours_said})"
    );
    assert_eq!(
        core,
        [true, true],
        "bitcoind takes the package: {core_said}"
    );
    if ours != core {
        disagreed.push(format!(
            "dust spent by the child: bitcoind holds {core:?} ({core_said}), cairn {ours:?} \
             ({ours_said})"
        ));
    }
    let (parent, mut child) = parent_and_child(&pair, 3, true, 5_000);
    child.input.pop();
    let child = sign_spending(&pair, &child, &[&parent]);
    let (core, core_said) = core_submit_package(&pair, &[&parent, &child]);
    let (ours, ours_said) = cairn_submit_package(&pair, &mempool, &[&parent, &child]);
    eprintln!(
        "dust the child leaves: bitcoind {core:?} ({core_said}), cairn {ours:?} ({ours_said})"
    );
    assert_eq!(
        core,
        [false, false],
        "bitcoind refuses the package: {core_said}"
    );
    assert!(
        core_said.contains("missing-ephemeral-spends"),
        "{core_said}"
    );
    if ours != core || !ours_said.contains("missing-ephemeral-spends") {
        disagreed.push(format!(
            "dust the child leaves: bitcoind holds {core:?} ({core_said}), cairn {ours:?} \
             ({ours_said})"
        ));
    }
    assert!(disagreed.is_empty(), "{disagreed:#?}");
}

/// Knots's default (`-mempooltruc=accept`, the Knots profile's) takes version 3 as any version:
/// a version 2 child and a version 3 grandchild of an unconfirmed version 3 transaction enter
/// both mempools. Bitcoin Knots 29.4.
#[test]
fn truc_is_off_by_default_as_in_knots() {
    let pair = Pair::start_knots();
    let mempool = pair.mempool();
    let script = pair.coins[0].2.clone();
    let (mut from, mut value) = (pair.coins[1].0, pair.coins[1].1);
    for version in [3, 2, 3] {
        value -= 1_000;
        let tx = Transaction {
            version: bitcoin::transaction::Version(version),
            lock_time: bitcoin::absolute::LockTime::ZERO,
            input: vec![TxIn {
                previous_output: from,
                ..Default::default()
            }],
            output: vec![TxOut {
                value: Amount::from_sat(value),
                script_pubkey: script.clone(),
            }],
        };
        let tx = pair.sign(&tx);
        assert_eq!(pair.core(&tx), None, "bitcoind, version {version}");
        let raw = bitcoin::consensus::serialize(&tx);
        pair.node
            .rpc(&["sendrawtransaction", &raw.to_lower_hex_string()]);
        mempool
            .accept(&raw, &pair.index)
            .unwrap_or_else(|e| panic!("cairn, version {version}: {e}"));
        from = OutPoint::new(tx.compute_txid(), 0);
    }
}

/// Core 31's package replacement (`PackageRBFChecks`): a mempool transaction paying 1,000 sat,
/// then a parent spending its coin and paying less (alone refused, `insufficient fee`) with a
/// child, submitted together (`submitpackage`; cairn's [`Mempool::accept_package`]): a child
/// paying for both takes the old one's place; a package short of the old one's fee, or whose
/// child pays a lower rate than its parent, is refused and the old one stays. Bitcoin Core
/// 31.99 and cairn's default profile: the same transactions held, the same reasons.
#[test]
fn package_replacements_agree_with_bitcoind() {
    let pair = Pair::start();
    let mempool = pair.mempool();
    let cases = [
        (
            "a child paying for both",
            500,
            20_000,
            "",
            [false, true, true],
        ),
        (
            "short of the old fee",
            500,
            400,
            "insufficient anti-DoS fees",
            [true, false, false],
        ),
        (
            "a child at a lower rate",
            900,
            200,
            "package feerate is less than or equal to parent feerate",
            [true, false, false],
        ),
    ];
    let mut disagreed = Vec::new();
    for (coin, (what, parent_fee, child_fee, reason, held)) in (4..).zip(cases) {
        let (op, value, script) = pair.coins[coin].clone();
        let pay = |fee: u64| {
            vec![TxOut {
                value: Amount::from_sat(value - fee),
                script_pubkey: script.clone(),
            }]
        };
        let old = spend_of(&pair, op, 2, pay(1_000), 0, 0xffff_fffd);
        let raw = bitcoin::consensus::serialize(&old);
        pair.node
            .rpc(&["sendrawtransaction", &raw.to_lower_hex_string()]);
        mempool.accept(&raw, &pair.index).unwrap();
        let parent = spend_of(&pair, op, 2, pay(parent_fee), 0, 0xffff_fffd);
        assert_eq!(
            pair.core(&parent).as_deref().map(rule).as_deref(),
            Some("insufficient"),
            "{what}: the parent alone"
        );
        let child = Transaction {
            version: bitcoin::transaction::Version::TWO,
            lock_time: bitcoin::absolute::LockTime::ZERO,
            input: vec![TxIn {
                previous_output: OutPoint::new(parent.compute_txid(), 0),
                sequence: bitcoin::Sequence(0xffff_fffd),
                ..Default::default()
            }],
            output: pay(parent_fee + child_fee),
        };
        let child = sign_spending(&pair, &child, &[&parent]);
        let (core, core_said) = core_submit_package(&pair, &[&parent, &child]);
        let (ours, ours_said) = cairn_submit_package(&pair, &mempool, &[&parent, &child]);
        let old_held = |held: bool, txs: Vec<bool>| [vec![held], txs].concat();
        let pool = pair.node.rpc_json(&["getrawmempool"]);
        let in_core = (pool.as_array().unwrap().iter())
            .any(|t| t.as_str() == Some(&old.compute_txid().to_string()));
        let core = old_held(in_core, core);
        let ours = old_held(mempool.entry(&old.compute_txid()).is_some(), ours);
        eprintln!("{what}: bitcoind {core:?} ({core_said}), cairn {ours:?} ({ours_said})");
        assert_eq!(core, held, "{what}: bitcoind {core_said}");
        assert!(core_said.contains(reason), "{what}: {core_said}");
        if ours != core || !ours_said.contains(reason) {
            disagreed.push(format!(
                "{what}: bitcoind {core:?} ({core_said}), cairn {ours:?} ({ours_said})"
            ));
        }
    }
    assert!(disagreed.is_empty(), "{disagreed:#?}");
}

/// The memory the pool takes, as Core counts it against `-maxmempool` (`getmempoolinfo`
/// `usage`): cairn's count of the same transactions after each arrival, in Core 31.99's and
/// cairn's default pools: a spend of each kind of coin (a P2PKH script sig over 28 bytes,
/// P2SH-P2WPKH, P2WPKH and taproot witnesses), outputs of every kind, a chain of 10, a parent
/// with six children, two parents sharing two children (a cluster no tree), a spend of five
/// coins, a replacement, and a block that takes them all. The two must agree to the byte: the pool evicts by it, and the limit means what
/// it means in Core.
#[test]
fn memory_usage_agrees_with_bitcoind() {
    let pair = Pair::start();
    let mempool = pair.mempool();
    let kinds = ["legacy", "p2sh-segwit", "bech32", "bech32m"];
    let scripts: Vec<ScriptBuf> = kinds.iter().map(|k| pair.wallet_script(k)).collect();
    let funded = pair.fund(&scripts);
    let core_usage = || {
        pair.node.rpc_json(&["getmempoolinfo"])["usage"]
            .as_u64()
            .unwrap()
    };
    let mut seen = Vec::new();
    let mut enter = |what: &str, tx: &Transaction| {
        pair.submit(&mempool, tx);
        let (ours, core) = (mempool.memory_usage().0, core_usage());
        eprintln!("{what}: bitcoind {core}, cairn {ours}");
        seen.push((what.to_string(), core, ours));
    };
    let out = |value: u64, kind: usize| TxOut {
        value: Amount::from_sat(value),
        script_pubkey: scripts[kind].clone(),
    };
    for (i, (coin, _)) in funded.iter().enumerate() {
        let tx = spend_of(&pair, *coin, 2, vec![out(FUNDS - FEE, (i + 1) % 4)], 0, 0);
        enter(&format!("a spend of a {} coin", kinds[i]), &tx);
    }
    let coin = |i: usize| (pair.coins[i].0, pair.coins[i].1);
    let mut tip = coin(0);
    for n in 1..=10 {
        let next = spend_of(&pair, tip.0, 2, vec![out(tip.1 - FEE, n % 4)], 0, 0);
        enter(&format!("link {n} of a chain"), &next);
        tip = (OutPoint::new(next.compute_txid(), 0), tip.1 - FEE);
    }
    let (from, value) = coin(1);
    let sixth = (value - FEE) / 6;
    let parent = spend_of(
        &pair,
        from,
        2,
        (0..6).map(|k| out(sixth, k % 4)).collect(),
        0,
        0,
    );
    enter("a parent of six", &parent);
    for k in 0..6u32 {
        let from = OutPoint::new(parent.compute_txid(), k);
        let child = spend_of(&pair, from, 2, vec![out(sixth - FEE, 2)], 0, 0);
        enter(&format!("child {} of six", k + 1), &child);
    }
    let halves = |i: usize| {
        let (from, value) = coin(i);
        let half = (value - FEE) / 2;
        (
            spend_of(&pair, from, 2, vec![out(half, 2), out(half, 3)], 0, 0),
            half,
        )
    };
    let ((left, half_l), (right, half_r)) = (halves(2), halves(3));
    enter("the first of two parents", &left);
    enter("the second of two parents", &right);
    for k in 0..2u32 {
        let both = Transaction {
            version: bitcoin::transaction::Version::TWO,
            lock_time: bitcoin::absolute::LockTime::ZERO,
            input: [&left, &right]
                .iter()
                .map(|p| TxIn {
                    previous_output: OutPoint::new(p.compute_txid(), k),
                    ..Default::default()
                })
                .collect(),
            output: vec![out(half_l + half_r - FEE, k as usize)],
        };
        enter(&format!("shared child {}", k + 1), &pair.sign(&both));
    }
    let five: Vec<TxIn> = (4..9)
        .map(|i| TxIn {
            previous_output: coin(i).0,
            ..Default::default()
        })
        .collect();
    let total: u64 = (4..9).map(|i| coin(i).1).sum();
    let third = (total - FEE) / 3;
    let spend_of_five = Transaction {
        version: bitcoin::transaction::Version::TWO,
        lock_time: bitcoin::absolute::LockTime::ZERO,
        input: five,
        output: vec![out(third, 0), out(third, 1), out(third, 3)],
    };
    enter("a spend of five coins", &pair.sign(&spend_of_five));
    let from = OutPoint::new(parent.compute_txid(), 5);
    let bumped = spend_of(&pair, from, 2, vec![out(sixth - 3 * FEE, 1)], 0, 0);
    enter("child 6 of six replaced", &bumped);
    pair.mine(1);
    mempool.revalidate(&pair.index);
    let (ours, core) = (mempool.memory_usage().0, core_usage());
    eprintln!("after a block of them all: bitcoind {core}, cairn {ours}");
    seen.push(("after a block".into(), core, ours));
    let differ: Vec<_> = seen.iter().filter(|(_, core, ours)| core != ours).collect();
    assert!(differ.is_empty(), "bitcoind and cairn differ: {differ:#?}");
}

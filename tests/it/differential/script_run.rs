//! Issue 27: the standard script flags that only a run of the script can check (NULLFAIL,
//! MINIMALIF in segwit v0, NOPs and number encodings in branching scripts, LOW_S and key
//! encodings outside the templates, CLEANSTACK in P2SH, unknown key types in tapscript),
//! which cairn's policy interpreter checks beside the kernel. Each case is valid in a block
//! and breaks one flag, or is a neighbour of such cases that breaks none (signed spends outside
//! the templates included). Judged by Bitcoin Core 31.99's `testmempoolaccept` and by cairn's
//! default profile: the same verdict, and the same words when refused.

use bitcoin::hashes::Hash;
use bitcoin::secp256k1::{self, Secp256k1, SecretKey};
use bitcoin::sighash::{EcdsaSighashType, SighashCache};
use bitcoin::{PublicKey, ScriptBuf};

use super::policy::{
    assert_valid_in_a_block, disagreements, flip_s, p2wsh, spend_with, tap_leaf, FUNDS,
};
use super::*;

/// `<key> opcode` then `tail`.
fn key_then(key: &[u8], opcode: u8, tail: &[u8]) -> Vec<u8> {
    let mut script = vec![key.len() as u8];
    script.extend_from_slice(key);
    script.push(opcode);
    script.extend_from_slice(tail);
    script
}

const CHECKSIG: u8 = 0xac;
const CHECKSIGVERIFY: u8 = 0xad;

/// An ECDSA signature of `hash` by `key` with hash type ALL.
fn signature(secp: &Secp256k1<secp256k1::All>, key: &SecretKey, hash: [u8; 32]) -> Vec<u8> {
    let sig = secp.sign_ecdsa(&secp256k1::Message::from_digest(hash), key);
    let mut sig = sig.serialize_der().to_vec();
    sig.push(0x01);
    sig
}

/// A non-minimal script number: Core 31 says "Script number overflowed or is non-minimally
/// encoded" (`SCRIPT_ERR_SCRIPTNUM`) where Core 30 and Knots 29.4 said "unknown error".
const SCRIPT_NUMBER: &str = "MINIMALDATA: 1 as 0x0100 to OP_1ADD";

/// Every case but [`SCRIPT_NUMBER`], judged by Bitcoin Core 31.99 and cairn's default profile.
#[test]
fn flags_that_need_the_script_run_agree_with_bitcoind() {
    script_run_flags_agree_with_bitcoind(|name| name != SCRIPT_NUMBER);
}

/// [`SCRIPT_NUMBER`] and its neighbour, judged by Bitcoin Core 31.99 and cairn's default
/// profile.
#[test]
fn a_non_minimal_script_number_agrees_with_bitcoind() {
    script_run_flags_agree_with_bitcoind(|name| name.starts_with("MINIMALDATA"));
}

/// The cases whose names `judged` takes, judged by Bitcoin Core 31.99 and cairn: the same
/// verdict, and the same words when refused; Core refuses all but the neighbours, and every one
/// is valid in a block.
fn script_run_flags_agree_with_bitcoind(judged: impl Fn(&str) -> bool) {
    let pair = Pair::start();
    let secp = Secp256k1::new();
    let key = SecretKey::from_slice(&[9; 32]).unwrap();
    let compressed = PublicKey::new(key.public_key(&secp)).to_bytes();
    let uncompressed = PublicKey::new_uncompressed(key.public_key(&secp)).to_bytes();
    let other =
        PublicKey::new(SecretKey::from_slice(&[8; 32]).unwrap().public_key(&secp)).to_bytes();
    // CHECKSIG NOT: true when the signature fails.
    let fail_ok = p2wsh(key_then(&compressed, CHECKSIG, &[0x91]));
    let fail_ok_2 = p2wsh(key_then(&other, CHECKSIG, &[0x91]));
    // IF 1 ELSE 1 ENDIF / IF 1 ELSE 2 ENDIF.
    let branch = p2wsh(vec![0x63, 0x51, 0x67, 0x51, 0x68]);
    let branch_2 = p2wsh(vec![0x63, 0x51, 0x67, 0x52, 0x68]);
    // 1 IF NOP4 ENDIF 1 / 0 IF NOP4 ENDIF 1.
    let nop_run = p2wsh(vec![0x51, 0x63, 0xb3, 0x68, 0x51]);
    let nop_skipped = p2wsh(vec![0x00, 0x63, 0xb3, 0x68, 0x51]);
    // 1ADD 2 EQUAL / 1ADD 2 NUMEQUAL.
    let add = p2wsh(vec![0x8b, 0x52, 0x87]);
    let add_2 = p2wsh(vec![0x8b, 0x52, 0x9c]);
    // <key> CHECKSIGVERIFY 1: a signed spend outside the templates.
    let signed = p2wsh(key_then(&compressed, CHECKSIGVERIFY, &[0x51]));
    let signed_2 = p2wsh(key_then(&compressed, CHECKSIGVERIFY, &[0x52]));
    let long_key = p2wsh(key_then(&uncompressed, CHECKSIGVERIFY, &[0x51]));
    // P2SH redeem scripts of OP_1 and OP_2.
    let redeem = |op: u8| ScriptBuf::new_p2sh(&ScriptBuf::from_bytes(vec![op]).script_hash());
    let (one, two) = ((redeem(0x51), vec![0x51]), (redeem(0x52), vec![0x52]));
    // A tapscript leaf with a 33-byte key: an unknown key type, its signature unchecked; the
    // neighbour a 32-byte key with an empty signature (a failed check, then NOT).
    let tap_unknown = tap_leaf(key_then(&compressed, CHECKSIG, &[]), 0xc0);
    let tap_known = tap_leaf(key_then(&other[1..], CHECKSIG, &[0x91]), 0xc0);
    let outputs = [
        &fail_ok.0,
        &fail_ok_2.0,
        &branch.0,
        &branch_2.0,
        &nop_run.0,
        &nop_skipped.0,
        &add.0,
        &add_2.0,
        &signed.0,
        &signed_2.0,
        &long_key.0,
        &one.0,
        &two.0,
        &tap_unknown.0,
        &tap_known.0,
    ];
    let scripts: Vec<ScriptBuf> = outputs.iter().map(|s| (*s).clone()).collect();
    let coins = pair.fund(&scripts);
    let coin = |script: &ScriptBuf| Pair::coin_paying(&coins, script);
    let bare = |script: &ScriptBuf, witness: Vec<Vec<u8>>| {
        spend_with(&pair, coin(script), ScriptBuf::new(), witness)
    };
    // Signs a P2WSH spend of `witness_script` with the test key.
    let sign_p2wsh = |out: &ScriptBuf, witness_script: &[u8], high_s: bool| {
        let mut tx = bare(out, vec![]);
        let code = ScriptBuf::from_bytes(witness_script.to_vec());
        let hash = SighashCache::new(&tx)
            .p2wsh_signature_hash(0, &code, Amount::from_sat(FUNDS), EcdsaSighashType::All)
            .unwrap();
        let mut sig = signature(&secp, &key, hash.to_byte_array());
        if high_s {
            sig = flip_s(&sig);
        }
        tx.input[0].witness = bitcoin::Witness::from_slice(&[sig, witness_script.to_vec()]);
        tx
    };
    let wrong_sig = signature(&secp, &key, [0x42; 32]);
    let cases: Vec<(&str, Transaction)> = vec![
        (
            "NULLFAIL: a failed signature left non-empty",
            bare(&fail_ok.0, vec![wrong_sig.clone(), fail_ok.1.clone()]),
        ),
        (
            "NULLFAIL's neighbour: the failed signature empty",
            bare(&fail_ok_2.0, vec![vec![], fail_ok_2.1.clone()]),
        ),
        (
            "MINIMALIF: OP_IF of 0x02 in segwit v0",
            bare(&branch.0, vec![vec![2], branch.1.clone()]),
        ),
        (
            "MINIMALIF's neighbour: OP_IF of 0x01",
            bare(&branch_2.0, vec![vec![1], branch_2.1.clone()]),
        ),
        (
            "DISCOURAGE_UPGRADABLE_NOPS: OP_NOP4 run in a branch",
            bare(&nop_run.0, vec![nop_run.1.clone()]),
        ),
        (
            "its neighbour: OP_NOP4 in a branch not run",
            bare(&nop_skipped.0, vec![nop_skipped.1.clone()]),
        ),
        (
            "MINIMALDATA: 1 as 0x0100 to OP_1ADD",
            bare(&add.0, vec![vec![1, 0], add.1.clone()]),
        ),
        (
            "MINIMALDATA's neighbour: 1 as 0x01",
            bare(&add_2.0, vec![vec![1], add_2.1.clone()]),
        ),
        (
            "LOW_S: a high S outside the templates",
            sign_p2wsh(&signed.0, &signed.1, true),
        ),
        (
            "WITNESS_PUBKEYTYPE: an uncompressed key outside the templates",
            sign_p2wsh(&long_key.0, &long_key.1, false),
        ),
        (
            "their neighbour: a low S and a compressed key outside the templates",
            sign_p2wsh(&signed_2.0, &signed_2.1, false),
        ),
        (
            "a P2SH redeem script leaving two elements (CLEANSTACK)",
            spend_with(
                &pair,
                coin(&one.0),
                ScriptBuf::from_bytes(vec![0x02, 7, 7, 0x01, 0x51]),
                vec![],
            ),
        ),
        (
            "CLEANSTACK's neighbour: a P2SH redeem script leaving one element",
            spend_with(
                &pair,
                coin(&two.0),
                ScriptBuf::from_bytes(vec![0x01, 0x52]),
                vec![],
            ),
        ),
        (
            "DISCOURAGE_UPGRADABLE_PUBKEYTYPE: a 33-byte key in tapscript",
            bare(
                &tap_unknown.0,
                vec![vec![1; 64], tap_unknown.1.clone(), tap_unknown.2.clone()],
            ),
        ),
        (
            "its neighbour: a 32-byte key and an empty signature",
            bare(
                &tap_known.0,
                vec![vec![], tap_known.1.clone(), tap_known.2.clone()],
            ),
        ),
    ];
    let cases: Vec<(&str, Transaction)> = cases.into_iter().filter(|(n, _)| judged(n)).collect();
    let disagreed = disagreements(&pair, &cases);
    assert!(disagreed.is_empty(), "{disagreed:#?}");
    // The cases are what they say: the oracle refuses all but the neighbours, and every one is
    // valid in a block (bitcoind mines them all into one, past its mempool).
    for (name, tx) in &cases {
        let verdict = pair.core(tx);
        assert_eq!(
            verdict.is_none(),
            name.contains("neighbour"),
            "{name}: {verdict:?}"
        );
    }
    assert_valid_in_a_block(&pair, &cases);
}

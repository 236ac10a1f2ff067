//! BIP352's test vectors (every receiving case's `tweak`), and the rules the vectors leave out:
//! a coinbase, no taproot output, a spent witness program of version 2.

use std::str::FromStr;

use bitcoin::hashes::Hash;
use bitcoin::{Amount, OutPoint, ScriptBuf, Sequence, Transaction, TxIn, TxOut, Txid, Witness};
use serde_json::Value;

use super::*;

/// The vectors' receiving cases: the transaction, the outputs it spends, the expected tweak.
fn receiving_cases() -> Vec<(String, Transaction, Vec<TxOut>, Option<String>)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/bip352-send-and-receive.json"
    );
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for case in &cases {
        for receiving in case["receiving"].as_array().unwrap() {
            let given = &receiving["given"];
            let (mut inputs, mut prevouts) = (Vec::new(), Vec::new());
            for vin in given["vin"].as_array().unwrap() {
                let field = |v: &Value| hex(v.as_str().unwrap());
                let witness = match field(&vin["txinwitness"]) {
                    w if w.is_empty() => Witness::new(),
                    w => bitcoin::consensus::deserialize(&w).unwrap(),
                };
                inputs.push(TxIn {
                    previous_output: OutPoint::new(
                        Txid::from_str(vin["txid"].as_str().unwrap()).unwrap(),
                        vin["vout"].as_u64().unwrap() as u32,
                    ),
                    script_sig: ScriptBuf::from_bytes(field(&vin["scriptSig"])),
                    sequence: Sequence::MAX,
                    witness,
                });
                prevouts.push(TxOut {
                    value: Amount::ZERO,
                    script_pubkey: ScriptBuf::from_bytes(field(
                        &vin["prevout"]["scriptPubKey"]["hex"],
                    )),
                });
            }
            let output = given["outputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|key| TxOut {
                    value: Amount::from_sat(1_000),
                    script_pubkey: ScriptBuf::from_bytes(
                        [vec![0x51, 0x20], hex(key.as_str().unwrap())].concat(),
                    ),
                })
                .collect();
            let tx = Transaction {
                version: bitcoin::transaction::Version::TWO,
                lock_time: bitcoin::absolute::LockTime::ZERO,
                input: inputs,
                output,
            };
            let tweak = receiving["expected"]["tweak"].as_str().map(str::to_string);
            out.push((
                case["comment"].as_str().unwrap().to_string(),
                tx,
                prevouts,
                tweak,
            ));
        }
    }
    out
}

fn hex(s: &str) -> Vec<u8> {
    use bitcoin::hex::FromHex;
    Vec::<u8>::from_hex(s).unwrap()
}

#[test]
fn every_receiving_vector_gets_its_tweak() {
    let cases = receiving_cases();
    assert_eq!(cases.len(), 29);
    let mut none = 0;
    for (comment, tx, prevouts, expected) in &cases {
        let got = tx_tweak(tx, prevouts)
            .map(|t| bitcoin::hex::DisplayHex::to_lower_hex_string(&t.tweak[..]));
        assert_eq!(&got, expected, "{comment}");
        none += usize::from(expected.is_none());
    }
    assert_eq!(none, 2, "the two cases without a tweak");
}

/// The first vector case whose transaction has a tweak.
fn eligible() -> (Transaction, Vec<TxOut>, TxTweak) {
    let (_, tx, prevouts, _) = receiving_cases().swap_remove(0);
    let tweak = tx_tweak(&tx, &prevouts).unwrap();
    (tx, prevouts, tweak)
}

/// `tx` with one more input, spending `script` at an outpoint larger than any vector's.
fn with_input(
    mut tx: Transaction,
    mut prevouts: Vec<TxOut>,
    script: &[u8],
) -> (Transaction, Vec<TxOut>) {
    tx.input.push(TxIn {
        previous_output: OutPoint::new(Txid::from_byte_array([0xff; 32]), 7),
        script_sig: ScriptBuf::new(),
        sequence: Sequence::MAX,
        witness: Witness::from_slice(&[vec![0x01; 64]]),
    });
    prevouts.push(TxOut {
        value: Amount::from_sat(5_000),
        script_pubkey: ScriptBuf::from_bytes(script.to_vec()),
    });
    (tx, prevouts)
}

#[test]
fn the_rules_the_vectors_leave_out() {
    let (tx, prevouts, tweak) = eligible();
    assert_eq!(tweak.outputs.len(), tx.output.len());
    // Spending a witness program of version 2 makes the whole transaction ineligible.
    let v2 = [vec![0x52, 0x20], vec![0x33; 32]].concat();
    let (spends_v2, v2_prevouts) = with_input(tx.clone(), prevouts.clone(), &v2);
    assert_eq!(tx_tweak(&spends_v2, &v2_prevouts), None);
    // A pay-to-anchor (version 1, not taproot) counts no key and changes nothing else.
    let (spends_anchor, anchor_prevouts) =
        with_input(tx.clone(), prevouts.clone(), &[0x51, 0x02, 0x4e, 0x73]);
    assert_eq!(
        tx_tweak(&spends_anchor, &anchor_prevouts).map(|t| t.tweak),
        Some(tweak.tweak)
    );
    // An input the crate cannot read (a P2WPKH spend with a script sig) counts no key; the
    // transaction keeps its tweak.
    let (mut unreadable, unreadable_prevouts) = with_input(
        tx.clone(),
        prevouts.clone(),
        &[vec![0x00, 0x14], vec![0x44; 20]].concat(),
    );
    unreadable.input.last_mut().unwrap().script_sig = ScriptBuf::from_bytes(vec![0x01, 0x01]);
    let kept = tx_tweak(&unreadable, &unreadable_prevouts).map(|t| t.tweak);
    assert_eq!(kept, Some(tweak.tweak));
    // Without a taproot output there is nothing to scan.
    let mut no_taproot = tx.clone();
    for o in &mut no_taproot.output {
        o.script_pubkey = ScriptBuf::new_p2wsh(&bitcoin::WScriptHash::from_byte_array([1; 32]));
    }
    assert_eq!(tx_tweak(&no_taproot, &prevouts), None);
    // Prevouts that do not match the inputs are refused rather than misread.
    assert_eq!(tx_tweak(&tx, &prevouts[1..]), None);
    // A coinbase spends nothing.
    let mut coinbase = tx.clone();
    coinbase.input = vec![TxIn {
        previous_output: OutPoint::null(),
        script_sig: ScriptBuf::from_bytes(vec![0x01, 0x01]),
        sequence: Sequence::MAX,
        witness: Witness::new(),
    }];
    assert_eq!(tx_tweak(&coinbase, &prevouts[..1]), None);
}

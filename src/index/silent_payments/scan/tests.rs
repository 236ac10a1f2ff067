//! The scan against BIP352's receiving vectors (every output found with its key tweak, with
//! and without labels, the K_max limit) and against the `silentpayments` crate's scan.

use bitcoin::hex::{DisplayHex, FromHex};
use bitcoin::secp256k1::{Secp256k1, SecretKey};
use serde_json::Value;
use silentpayments::receiving::{Label, Receiver};
use silentpayments::utils::receiving::calculate_ecdh_shared_secret;

use super::*;

fn hex32(s: &str) -> [u8; 32] {
    <[u8; 32]>::from_hex(s).unwrap()
}

/// An output the vector says a scan finds: its x-only key and its key tweak.
type Found = ([u8; 32], [u8; 32]);

/// One receiving vector with a tweak: keys, labels, the outputs, the tweak, what is found.
struct Case {
    comment: String,
    scan: [u8; 32],
    spend: [u8; 33],
    labels: Vec<u32>,
    outputs: Vec<[u8; 32]>,
    tweak: [u8; 33],
    /// Each output found: its key and key tweak, or only how many when the vector says so.
    expected: Result<Vec<Found>, usize>,
}

fn cases() -> Vec<Case> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/bip352-send-and-receive.json"
    );
    let all: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for case in &all {
        for receiving in case["receiving"].as_array().unwrap() {
            let (given, expected) = (&receiving["given"], &receiving["expected"]);
            let Some(tweak) = expected["tweak"].as_str() else {
                continue;
            };
            let keys = &given["key_material"];
            let spend = SecretKey::from_slice(&hex32(keys["spend_priv_key"].as_str().unwrap()))
                .unwrap()
                .public_key(&Secp256k1::new())
                .serialize();
            let str_of = |v: &Value| v.as_str().unwrap().to_string();
            let expected = match expected["n_outputs"].as_u64() {
                Some(n) => Err(n as usize),
                None => Ok(expected["outputs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| {
                        (
                            hex32(&str_of(&o["pub_key"])),
                            hex32(&str_of(&o["priv_key_tweak"])),
                        )
                    })
                    .collect()),
            };
            out.push(Case {
                comment: str_of(&case["comment"]),
                scan: hex32(keys["scan_priv_key"].as_str().unwrap()),
                spend,
                labels: given["labels"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_u64().unwrap() as u32)
                    .collect(),
                outputs: given["outputs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| hex32(o.as_str().unwrap()))
                    .collect(),
                tweak: <[u8; 33]>::from_hex(tweak).unwrap(),
                expected,
            });
        }
    }
    out
}

#[test]
fn every_receiving_vector_finds_its_outputs() {
    let cases = cases();
    assert_eq!(cases.len(), 27, "the vectors' receiving cases with a tweak");
    for case in &cases {
        let keys = ScanKeys::new(&case.scan, &case.spend, &case.labels).unwrap();
        let found = keys.scan(&case.tweak, &case.outputs);
        match &case.expected {
            Ok(expected) => {
                let mut got: Vec<_> = found
                    .iter()
                    .map(|f| (case.outputs[f.index], f.key_tweak))
                    .collect();
                let mut expected = expected.clone();
                got.sort();
                expected.sort();
                assert_eq!(got, expected, "{}", case.comment);
            }
            Err(n) => assert_eq!(found.len(), *n, "{}", case.comment),
        }
    }
}

#[test]
fn labelled_outputs_name_their_label_both_ways_of_looking() {
    let case = cases()
        .into_iter()
        .find(|c| {
            c.comment
                .starts_with("Multiple outputs with labels: un-labeled, labeled")
        })
        .unwrap();
    // Few labels: each label added to P_k. Many: each output's lifts less P_k looked up.
    for extra in [0u32, 40] {
        let labels: Vec<u32> = case
            .labels
            .iter()
            .copied()
            .chain(5000..5000 + extra)
            .collect();
        let keys = ScanKeys::new(&case.scan, &case.spend, &labels).unwrap();
        let mut labels: Vec<Option<u32>> = keys
            .scan(&case.tweak, &case.outputs)
            .iter()
            .map(|f| f.label)
            .collect();
        labels.sort();
        assert_eq!(
            labels,
            vec![None, Some(1), Some(1337), Some(1337)],
            "{extra} extra labels"
        );
    }
}

#[test]
fn the_crates_scan_agrees() {
    let secp = Secp256k1::new();
    for case in cases().iter().filter(|c| c.expected.is_ok()) {
        let scan = SecretKey::from_slice(&case.scan).unwrap();
        let spend = PublicKey::from_slice(&case.spend).unwrap();
        let mut receiver = Receiver::new(
            silentpayments::SpVersion::ZERO,
            scan.public_key(&secp),
            spend,
            Label::new(scan, 0),
            silentpayments::Network::Regtest,
        )
        .unwrap();
        for &m in &case.labels {
            receiver.add_label(Label::new(scan, m)).unwrap();
        }
        let tweak = PublicKey::from_slice(&case.tweak).unwrap();
        let shared = calculate_ecdh_shared_secret(&tweak, &scan);
        let outputs: Vec<XOnlyPublicKey> = case
            .outputs
            .iter()
            .map(|o| XOnlyPublicKey::from_slice(o).unwrap())
            .collect();
        let mut theirs: Vec<String> = receiver
            .scan_transaction(&shared, &outputs)
            .unwrap()
            .into_values()
            .flat_map(|m| m.into_iter().map(|(k, t)| (k.serialize(), t.to_be_bytes())))
            .map(|(k, t)| format!("{}:{}", k.to_lower_hex_string(), t.to_lower_hex_string()))
            .collect();
        // The crate always knows the change label (m = 0).
        let labels: Vec<u32> = case.labels.iter().copied().chain([0]).collect();
        let keys = ScanKeys::new(&case.scan, &case.spend, &labels).unwrap();
        let mut ours: Vec<String> = keys
            .scan(&case.tweak, &case.outputs)
            .iter()
            .map(|f| {
                let key = case.outputs[f.index].to_lower_hex_string();
                format!("{key}:{}", f.key_tweak.to_lower_hex_string())
            })
            .collect();
        theirs.sort();
        ours.sort();
        assert_eq!(ours, theirs, "{}", case.comment);
    }
}

#[test]
fn bad_keys_are_refused_and_a_bad_tweak_finds_nothing() {
    let case = &cases()[0];
    assert_eq!(
        ScanKeys::new(&[0u8; 32], &case.spend, &[]).unwrap_err(),
        KeyError::ScanKey
    );
    assert_eq!(
        ScanKeys::new(&case.scan, &case.spend[..32], &[]).unwrap_err(),
        KeyError::SpendKey
    );
    let mut x_only_spend = case.spend;
    x_only_spend[0] = 0x05;
    assert_eq!(
        ScanKeys::new(&case.scan, &x_only_spend, &[]).unwrap_err(),
        KeyError::SpendKey
    );
    let keys = ScanKeys::new(&case.scan, &case.spend, &[]).unwrap();
    assert!(keys.scan(&[0u8; 33], &case.outputs).is_empty());
    assert!(!format!("{keys:?}").contains(&case.scan.to_lower_hex_string()));
}

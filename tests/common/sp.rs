//! A client-side silent-payment scanner with the `silentpayments` crate (not cairn's scan), for
//! tests of what cairn's tweak servers hand a light wallet.

use bitcoin::hex::{DisplayHex, FromHex};
use bitcoin::secp256k1::{PublicKey, Secp256k1, SecretKey, XOnlyPublicKey};
use serde_json::Value;
use silentpayments::receiving::{Label, Receiver};
use silentpayments::utils::receiving::calculate_ecdh_shared_secret;

/// The wallet `cairn generate --silent-payments-per-mille` writes (`silent-payments.json`):
/// its scan key and a receiver with change's label 0 and labels 1 and 2.
pub struct Wallet {
    scan: SecretKey,
    labels: Vec<(Label, u32)>,
    receiver: Receiver,
}

/// One output a scan found: output index, label (`None` without one), x-only key in hex.
pub type Found = (u32, Option<u32>, String);

impl Wallet {
    /// From the generator's JSON (`scan_private_key`, `spend_public_key`, `labels`).
    pub fn from_json(wallet: &Value) -> Wallet {
        let hex = |v: &Value| Vec::<u8>::from_hex(v.as_str().unwrap()).unwrap();
        let scan = SecretKey::from_slice(&hex(&wallet["scan_private_key"])).unwrap();
        let spend = PublicKey::from_slice(&hex(&wallet["spend_public_key"])).unwrap();
        let mut numbers = vec![0u32];
        numbers.extend(
            wallet["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_u64().unwrap() as u32),
        );
        let labels: Vec<(Label, u32)> = numbers.iter().map(|&m| (Label::new(scan, m), m)).collect();
        let mut receiver = Receiver::new(
            silentpayments::SpVersion::ZERO,
            scan.public_key(&Secp256k1::new()),
            spend,
            labels[0].0.clone(),
            silentpayments::Network::Regtest,
        )
        .unwrap();
        for (label, _) in &labels[1..] {
            receiver.add_label(label.clone()).unwrap();
        }
        Wallet {
            scan,
            labels,
            receiver,
        }
    }

    /// The wallet's outputs among a transaction's taproot `outputs` (index, x-only key), from
    /// its 33-byte `tweak`, by `Receiver::scan_transaction`.
    pub fn scan(&self, tweak: &[u8], outputs: &[(u32, [u8; 32])]) -> Vec<Found> {
        let tweak = PublicKey::from_slice(tweak).unwrap();
        let keys: Vec<XOnlyPublicKey> = outputs
            .iter()
            .map(|(_, k)| XOnlyPublicKey::from_slice(k).unwrap())
            .collect();
        let secret = calculate_ecdh_shared_secret(&tweak, &self.scan);
        let mut found = Vec::new();
        for (label, mine) in self.receiver.scan_transaction(&secret, &keys).unwrap() {
            let m = label.map(|l| self.labels.iter().find(|(x, _)| *x == l).unwrap().1);
            for key in mine.keys() {
                let key = key.serialize();
                let vout = outputs.iter().find(|(_, k)| *k == key).unwrap().0;
                found.push((vout, m, key.to_lower_hex_string()));
            }
        }
        found
    }
}

/// The payments in the generator's JSON as `(txid, vout, label, key)`, sorted.
pub fn payments(wallet: &Value) -> Vec<(String, u32, Option<u32>, String)> {
    let mut all: Vec<_> = wallet["payments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let label = p["label"].as_u64().map(|l| l as u32);
            let key = p["key"].as_str().unwrap().to_string();
            let txid = p["txid"].as_str().unwrap().to_string();
            (txid, p["vout"].as_u64().unwrap() as u32, label, key)
        })
        .collect();
    all.sort();
    all
}

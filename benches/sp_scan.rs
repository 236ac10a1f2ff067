//! The remote scanner's arithmetic (Frigate's dialect): BIP352's scan of one eligible
//! transaction with a wallet's keys, per transaction on one core, beside the `silentpayments`
//! crate's scan of the same transactions (its ECDH, then `Receiver::scan_transaction`). The
//! workload: 2,000 transactions of random tweak data, each with two taproot outputs that do not
//! pay the wallet (as nearly every transaction a scan meets), the wallet with change's label
//! only (what Sparrow asks) and with ten more.

use std::hint::black_box;

use bitcoin::secp256k1::{PublicKey, Secp256k1, SecretKey, XOnlyPublicKey};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::{RngCore, SeedableRng};

use cairn::index::silent_payments::scan::ScanKeys;
use silentpayments::receiving::{Label, Receiver};
use silentpayments::utils::receiving::calculate_ecdh_shared_secret;

/// Transactions scanned per iteration.
const TXS: usize = 2_000;

/// A random secret key from `rng`.
fn secret(rng: &mut rand_chacha::ChaCha20Rng) -> SecretKey {
    loop {
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        if let Ok(key) = SecretKey::from_slice(&bytes) {
            return key;
        }
    }
}

fn scan(c: &mut Criterion) {
    let secp = Secp256k1::new();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(352);
    let txs: Vec<([u8; 33], Vec<[u8; 32]>)> = (0..TXS)
        .map(|_| {
            let tweak = secret(&mut rng).public_key(&secp).serialize();
            let outputs = (0..2)
                .map(|_| secret(&mut rng).x_only_public_key(&secp).0.serialize())
                .collect();
            (tweak, outputs)
        })
        .collect();
    let (b_scan, b_spend) = (secret(&mut rng), secret(&mut rng).public_key(&secp));
    let mut group = c.benchmark_group("scan a transaction");
    group.throughput(Throughput::Elements(TXS as u64));
    for labels in [vec![0u32], (0..=10).collect()] {
        let keys =
            ScanKeys::new(&b_scan.secret_bytes(), &b_spend.serialize(), &labels).expect("keys");
        group.bench_function(
            format!("cairn ScanKeys::scan, {} labels (txs/s)", labels.len()),
            |b| {
                b.iter(|| {
                    for (tweak, outputs) in &txs {
                        black_box(keys.scan(tweak, outputs));
                    }
                })
            },
        );
        let mut receiver = Receiver::new(
            silentpayments::SpVersion::ZERO,
            b_scan.public_key(&secp),
            b_spend,
            Label::new(b_scan, 0),
            silentpayments::Network::Mainnet,
        )
        .expect("receiver");
        for &m in &labels[1..] {
            receiver.add_label(Label::new(b_scan, m)).expect("label");
        }
        let decoded: Vec<(PublicKey, Vec<XOnlyPublicKey>)> = txs
            .iter()
            .map(|(tweak, outputs)| {
                let keys = outputs
                    .iter()
                    .map(|o| XOnlyPublicKey::from_slice(o).expect("key"));
                (PublicKey::from_slice(tweak).expect("point"), keys.collect())
            })
            .collect();
        group.bench_function(
            format!(
                "silentpayments crate scan_transaction, {} labels (txs/s)",
                labels.len()
            ),
            |b| {
                b.iter(|| {
                    for (tweak, outputs) in &decoded {
                        let ecdh = calculate_ecdh_shared_secret(tweak, &b_scan);
                        black_box(receiver.scan_transaction(&ecdh, outputs).expect("scan"));
                    }
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, scan);
criterion_main!(benches);

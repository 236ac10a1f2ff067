//! The remote scanner's arithmetic (Frigate's dialect): BIP352's scan of one eligible
//! transaction with a wallet's keys, per transaction on one core, beside the `silentpayments`
//! crate's scan of the same transactions (its ECDH, then `Receiver::scan_transaction`) and
//! Frigate's libsecp256k1 calls (change's label only). The
//! workload: 2,000 transactions of random tweak data, each with two taproot outputs that do not
//! pay the wallet (as nearly every transaction a scan meets), the wallet with change's label
//! only (what Sparrow asks) and with ten more.

use std::hint::black_box;

use bitcoin::secp256k1::{PublicKey, Secp256k1, SecretKey, XOnlyPublicKey};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::{RngCore, SeedableRng};

use cairn::index::silent_payments::scan::{tagged, ScanKeys};
use silentpayments::receiving::{Label, Receiver};
use silentpayments::utils::receiving::calculate_ecdh_shared_secret;

/// Transactions scanned per iteration.
const TXS: usize = 2_000;

/// The workload: each transaction's tweak (compressed) and its taproot outputs' x-only keys.
type Txs = [([u8; 33], Vec<[u8; 32]>)];

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
    frigates_calls(c, &txs, &b_scan, &b_spend);
    steps(c, &txs, &b_scan, &b_spend);
}

/// A transaction's scan taken apart, each step alone on the same transactions: where its time
/// goes, and what a scan without giving up constant time for the scan key could shed at most.
fn steps(c: &mut Criterion, txs: &Txs, b_scan: &SecretKey, b_spend: &PublicKey) {
    let secp = Secp256k1::new();
    let points: Vec<PublicKey> = txs
        .iter()
        .map(|(tweak, _)| PublicKey::from_slice(tweak).expect("point"))
        .collect();
    let scalar = bitcoin::secp256k1::Scalar::from(*b_scan);
    let t_ks: Vec<SecretKey> = points
        .iter()
        .map(|p| secret_of(&tagged(b"BIP0352/SharedSecret", &[&p.serialize(), &[0; 4]])))
        .collect();
    let mut group = c.benchmark_group("a scan's steps");
    group.throughput(Throughput::Elements(txs.len() as u64));
    group.bench_function("lift a 33-byte tweak (a square root)", |b| {
        b.iter(|| {
            for (tweak, _) in txs {
                black_box(PublicKey::from_slice(tweak).expect("point"));
            }
        })
    });
    group.bench_function("ECDH, constant time (secp256k1_ecdh)", |b| {
        b.iter(|| {
            for point in &points {
                black_box(bitcoin::secp256k1::ecdh::shared_secret_point(point, b_scan));
            }
        })
    });
    group.bench_function("ECDH, variable time (Frigate's tweak_mul)", |b| {
        b.iter(|| {
            for point in &points {
                black_box(point.mul_tweak(&secp, &scalar).expect("mul"));
            }
        })
    });
    group.bench_function("t_k·G + B_spend by ecmult (tweak_add)", |b| {
        b.iter(|| {
            for t_k in &t_ks {
                let t_k = bitcoin::secp256k1::Scalar::from(*t_k);
                black_box(b_spend.add_exp_tweak(&secp, &t_k).expect("add"));
            }
        })
    });
    group.bench_function("t_k·G by ecmult_gen, then + B_spend (Frigate's)", |b| {
        b.iter(|| {
            for t_k in &t_ks {
                black_box(t_k.public_key(&secp).combine(b_spend).expect("add"));
            }
        })
    });
    group.finish();
    k256_steps(c, txs, b_scan, &t_ks);
}

/// The same steps in RustCrypto's `k256`, whose group operations are exposed: what batching
/// the affine conversions (one inversion for many points) would save, against what its
/// multiplications cost beside libsecp256k1's.
fn k256_steps(c: &mut Criterion, txs: &Txs, b_scan: &SecretKey, t_ks: &[SecretKey]) {
    use k256::elliptic_curve::group::Curve;
    use k256::elliptic_curve::ops::MulByGenerator;
    use k256::elliptic_curve::sec1::FromEncodedPoint;
    use k256::{AffinePoint, EncodedPoint, ProjectivePoint};
    let lift = |tweak: &[u8; 33]| {
        let encoded = EncodedPoint::from_bytes(tweak).expect("encoding");
        Option::<AffinePoint>::from(AffinePoint::from_encoded_point(&encoded)).expect("point")
    };
    let scalar = |key: &SecretKey| {
        *k256::SecretKey::from_slice(&key.secret_bytes())
            .expect("key")
            .to_nonzero_scalar()
    };
    let points: Vec<ProjectivePoint> = txs.iter().map(|(t, _)| lift(t).into()).collect();
    let b = scalar(b_scan);
    let t_ks: Vec<k256::Scalar> = t_ks.iter().map(scalar).collect();
    let products: Vec<ProjectivePoint> = points.iter().map(|p| *p * b).collect();
    let mut group = c.benchmark_group("a scan's steps");
    group.throughput(Throughput::Elements(txs.len() as u64));
    group.bench_function("k256: lift a 33-byte tweak", |bench| {
        bench.iter(|| {
            for (tweak, _) in txs {
                black_box(lift(tweak));
            }
        })
    });
    group.bench_function(
        "k256: ECDH, constant time (ProjectivePoint × Scalar)",
        |bench| {
            bench.iter(|| {
                for point in &points {
                    black_box(*point * b);
                }
            })
        },
    );
    group.bench_function("k256: t_k·G (mul_by_generator, its tables)", |bench| {
        bench.iter(|| {
            for t_k in &t_ks {
                black_box(ProjectivePoint::mul_by_generator(t_k));
            }
        })
    });
    group.bench_function("k256: to affine, one inversion each", |bench| {
        bench.iter(|| {
            for point in &products {
                black_box(point.to_affine());
            }
        })
    });
    group.bench_function("k256: to affine, one inversion for all", |bench| {
        let mut affine = vec![AffinePoint::IDENTITY; products.len()];
        bench.iter(|| {
            ProjectivePoint::batch_normalize(&products, &mut affine);
            black_box(&affine);
        })
    });
    group.finish();
}

/// Frigate's per-transaction calls on the same transactions, for a ratio on this machine: its
/// DuckDB extension (sparrowwallet/duckdb-secp256k1-extension) takes the tweak as an
/// uncompressed point (no square root), multiplies it by the scan secret with
/// `secp256k1_ec_pubkey_tweak_mul` (libsecp256k1's variable-time `ecmult`), hashes `t_0`, makes
/// `t_0·G` with `secp256k1_ec_pubkey_create`, adds the spend key with
/// `secp256k1_ec_pubkey_combine` and compares 8-byte prefixes of `k = 0` only. The same
/// libsecp256k1 calls through the `secp256k1` crate; change's label only.
fn frigates_calls(c: &mut Criterion, txs: &Txs, b_scan: &SecretKey, b_spend: &PublicKey) {
    let secp = Secp256k1::new();
    let uncompressed: Vec<([u8; 65], Vec<u64>)> = txs
        .iter()
        .map(|(tweak, outputs)| {
            let point = PublicKey::from_slice(tweak).expect("point");
            let prefixes = outputs.iter().map(prefix).collect();
            (point.serialize_uncompressed(), prefixes)
        })
        .collect();
    let change = secret_of(&tagged(
        b"BIP0352/Label",
        &[&b_scan.secret_bytes(), &0u32.to_be_bytes()],
    ))
    .public_key(&secp);
    let scalar = bitcoin::secp256k1::Scalar::from(*b_scan);
    let mut group = c.benchmark_group("scan a transaction");
    group.throughput(Throughput::Elements(txs.len() as u64));
    group.bench_function("Frigate's libsecp256k1 calls, 1 label (txs/s)", |b| {
        b.iter(|| {
            for (tweak, outputs) in &uncompressed {
                let point = PublicKey::from_slice(tweak).expect("point");
                let shared = point.mul_tweak(&secp, &scalar).expect("mul").serialize();
                let t_0 = tagged(b"BIP0352/SharedSecret", &[&shared, &0u32.to_be_bytes()]);
                let p_0 = secret_of(&t_0)
                    .public_key(&secp)
                    .combine(b_spend)
                    .expect("add");
                let labelled = p_0.combine(&change).expect("label");
                let hit = [p_0, labelled]
                    .iter()
                    .any(|p| outputs.contains(&prefix(&p.x_only_public_key().0.serialize())));
                black_box(hit);
            }
        })
    });
    group.finish();
}

/// The first 8 bytes of an x-only key, big-endian (Frigate's stored prefix).
fn prefix(key: &[u8; 32]) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&key[..8]);
    u64::from_be_bytes(bytes)
}

/// A hash as a secret key (a failure is 2^-128 odds).
fn secret_of(hash: &[u8; 32]) -> SecretKey {
    SecretKey::from_slice(hash).expect("a valid scalar")
}

criterion_group!(benches, scan);
criterion_main!(benches);

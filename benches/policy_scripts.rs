//! What the mempool's second script run costs: the policy interpreter under Core's standard
//! flags (`cairn::policy::interpreter`) beside the kernel's consensus verification of the same
//! inputs (`cairn::kernel::scripts::verify_scripts`), the baseline every acceptance paid before, on
//! - a wallet's payment: 2 P2WPKH inputs, 2 outputs;
//! - 100 P2PKH inputs (each legacy signature hashes the whole transaction again);
//! - a 2-of-3 P2WSH multisig input;
//! - 1,000 P2WPKH inputs and 1,000 taproot key-path inputs (BIP143's and BIP341's hashes of
//!   the whole transaction computed once, not once an input).

use std::hint::black_box;

use bitcoin::hashes::Hash;
use bitcoin::secp256k1::{Message, Secp256k1, SecretKey};
use bitcoin::sighash::{EcdsaSighashType, SighashCache};
use bitcoin::{
    absolute, transaction, Amount, OutPoint, PublicKey, ScriptBuf, Sequence, Transaction, TxIn,
    TxOut, Txid, Witness,
};
use criterion::{criterion_group, criterion_main, Criterion};

use cairn::kernel::scripts::verify_scripts;
use cairn::policy::interpreter::{verify_input, Flags, TxData};

/// Which kind of output every input spends.
#[derive(Clone, Copy)]
enum Spent {
    P2wpkh,
    P2pkh,
    Multisig,
    Taproot,
}

/// A signed transaction of `n` inputs of `kind` and 2 outputs, with what its inputs spend.
fn signed(kind: Spent, n: usize) -> (Transaction, Vec<TxOut>) {
    let secp = Secp256k1::new();
    let keys: Vec<SecretKey> = (1..=3u8)
        .map(|i| SecretKey::from_slice(&[i; 32]).unwrap())
        .collect();
    let pubs: Vec<PublicKey> = keys
        .iter()
        .map(|k| PublicKey::new(k.public_key(&secp)))
        .collect();
    let multisig = bitcoin::blockdata::script::Builder::new()
        .push_int(2)
        .push_key(&pubs[0])
        .push_key(&pubs[1])
        .push_key(&pubs[2])
        .push_int(3)
        .push_opcode(bitcoin::opcodes::all::OP_CHECKMULTISIG)
        .into_script();
    let spk = match kind {
        Spent::P2wpkh => ScriptBuf::new_p2wpkh(&pubs[0].wpubkey_hash().unwrap()),
        Spent::P2pkh => ScriptBuf::new_p2pkh(&pubs[0].pubkey_hash()),
        Spent::Multisig => ScriptBuf::new_p2wsh(&multisig.wscript_hash()),
        Spent::Taproot => {
            let internal = keys[0].x_only_public_key(&secp).0;
            ScriptBuf::new_p2tr(&secp, internal, None)
        }
    };
    let value = Amount::from_sat(100_000);
    let prevouts = vec![
        TxOut {
            value,
            script_pubkey: spk.clone()
        };
        n
    ];
    let mut tx = Transaction {
        version: transaction::Version::TWO,
        lock_time: absolute::LockTime::ZERO,
        input: (0..n)
            .map(|i| TxIn {
                previous_output: OutPoint::new(Txid::from_byte_array([7; 32]), i as u32),
                script_sig: ScriptBuf::new(),
                sequence: Sequence::ENABLE_RBF_NO_LOCKTIME,
                witness: Witness::new(),
            })
            .collect(),
        output: vec![
            TxOut {
                value: Amount::from_sat(40_000),
                script_pubkey: spk.clone()
            };
            2
        ],
    };
    let sign = |hash: [u8; 32], key: &SecretKey| {
        let mut sig = secp
            .sign_ecdsa(&Message::from_digest(hash), key)
            .serialize_der()
            .to_vec();
        sig.push(0x01);
        sig
    };
    for i in 0..n {
        let cache = SighashCache::new(&tx);
        match kind {
            Spent::P2wpkh => {
                let mut cache = cache;
                let hash = cache
                    .p2wpkh_signature_hash(i, &spk, value, EcdsaSighashType::All)
                    .unwrap();
                let items = [sign(hash.to_byte_array(), &keys[0]), pubs[0].to_bytes()];
                tx.input[i].witness = Witness::from_slice(&items);
            }
            Spent::P2pkh => {
                let hash = cache.legacy_signature_hash(i, &spk, 1).unwrap();
                let sig = sign(hash.to_byte_array(), &keys[0]);
                tx.input[i].script_sig = bitcoin::blockdata::script::Builder::new()
                    .push_slice(<&bitcoin::script::PushBytes>::try_from(sig.as_slice()).unwrap())
                    .push_key(&pubs[0])
                    .into_script();
            }
            Spent::Taproot => {
                let mut cache = cache;
                let all = bitcoin::sighash::Prevouts::All(&prevouts);
                let hash = cache
                    .taproot_key_spend_signature_hash(i, &all, bitcoin::TapSighashType::Default)
                    .unwrap();
                let keypair = bitcoin::key::Keypair::from_secret_key(&secp, &keys[0]);
                let tweaked = bitcoin::key::TapTweak::tap_tweak(keypair, &secp, None);
                let msg = Message::from_digest(hash.to_byte_array());
                let sig = secp.sign_schnorr_no_aux_rand(&msg, &tweaked.to_keypair());
                tx.input[i].witness = Witness::from_slice(&[sig.as_ref().to_vec()]);
            }
            Spent::Multisig => {
                let mut cache = cache;
                let hash = cache
                    .p2wsh_signature_hash(i, &multisig, value, EcdsaSighashType::All)
                    .unwrap();
                let items = [
                    vec![],
                    sign(hash.to_byte_array(), &keys[0]),
                    sign(hash.to_byte_array(), &keys[2]),
                    multisig.to_bytes(),
                ];
                tx.input[i].witness = Witness::from_slice(&items);
            }
        }
    }
    (tx, prevouts)
}

fn policy_scripts(c: &mut Criterion) {
    for (name, kind, n) in [
        ("2 P2WPKH inputs", Spent::P2wpkh, 2),
        ("100 P2PKH inputs", Spent::P2pkh, 100),
        ("a 2-of-3 P2WSH input", Spent::Multisig, 1),
        ("1,000 P2WPKH inputs", Spent::P2wpkh, 1_000),
        ("1,000 taproot key-path inputs", Spent::Taproot, 1_000),
    ] {
        let (tx, prevouts) = signed(kind, n);
        let raw = bitcoin::consensus::serialize(&tx);
        verify_scripts(&raw, &prevouts).expect("the kernel passes it");
        let data = TxData::new(&tx, &prevouts);
        for i in 0..n {
            verify_input(&data, i, Flags::STANDARD).expect("standard");
        }
        let mut group = c.benchmark_group(format!("scripts of {name}"));
        group.bench_function("cairn interpreter, standard flags", |b| {
            b.iter(|| {
                let data = TxData::new(&tx, &prevouts);
                for i in 0..n {
                    black_box(verify_input(&data, i, Flags::STANDARD)).unwrap();
                }
            })
        });
        group.bench_function(
            "cairn with TxData built again for each input (the whole transaction's hashes again, as first landed)",
            |b| {
                b.iter(|| {
                    for i in 0..n {
                        let data = TxData::new(&tx, &prevouts);
                        black_box(verify_input(&data, i, Flags::STANDARD)).unwrap();
                    }
                })
            },
        );
        group.bench_function("baseline: the kernel, consensus flags", |b| {
            b.iter(|| black_box(verify_scripts(&raw, &prevouts)).unwrap())
        });
        group.finish();
    }
}

criterion_group!(benches, policy_scripts);
criterion_main!(benches);

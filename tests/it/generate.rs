//! The chain generator's promises, checked from the blocks it writes: determinism, every script
//! kind spent, chains of spends inside a block, OP_RETURN outputs and heavy-tailed reuse.

use crate::common;

use std::collections::HashMap;

use bitcoin::hex::FromHex;
use bitcoin::{OutPoint, TxOut};

use crate::common::chain;

#[test]
fn same_seed_same_chain_other_seed_other_chain() {
    let a = chain(110, 10, 42);
    let b = chain(110, 10, 42);
    let c = chain(110, 10, 43);
    assert_eq!(
        a.last().unwrap().block_hash(),
        b.last().unwrap().block_hash()
    );
    assert_ne!(
        a.last().unwrap().block_hash(),
        c.last().unwrap().block_hash()
    );
}

#[test]
fn realistic_mix_of_spends_and_reuse() {
    let blocks = chain(400, 60, 2);
    let mut utxo: HashMap<OutPoint, (TxOut, u32)> = HashMap::new();
    let mut spent_kinds: HashMap<&'static str, usize> = HashMap::new();
    let mut uses: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut in_block_chains = 0usize;
    let mut op_returns = 0usize;
    let mut txs = 0usize;
    for (i, block) in blocks.iter().enumerate() {
        let height = i as u32 + 1;
        // BIP34: the coinbase starts with the height.
        let cb = &block.txdata[0];
        let bip34 = bitcoin::script::Builder::new()
            .push_int(height.into())
            .into_script();
        assert!(
            cb.input[0]
                .script_sig
                .as_bytes()
                .starts_with(bip34.as_bytes()),
            "height {height}"
        );
        assert!(
            block.check_witness_commitment(),
            "witness commitment at {height}"
        );
        assert!(block.check_merkle_root());
        txs += block.txdata.len();
        for tx in &block.txdata {
            for input in &tx.input {
                if input.previous_output.is_null() {
                    continue;
                }
                let (prev, created) = utxo
                    .remove(&input.previous_output)
                    .expect("spends a known unspent output");
                if prev.script_pubkey.is_p2pkh() {
                    *spent_kinds.entry("p2pkh").or_default() += 1;
                } else if prev.script_pubkey.is_p2sh() {
                    assert_eq!(input.witness.len(), 2);
                    *spent_kinds.entry("p2sh-p2wpkh").or_default() += 1;
                } else if prev.script_pubkey.is_p2wpkh() {
                    *spent_kinds.entry("p2wpkh").or_default() += 1;
                } else if prev.script_pubkey.is_p2tr() {
                    assert_eq!(input.witness.len(), 1);
                    *spent_kinds.entry("p2tr").or_default() += 1;
                } else if prev.script_pubkey.is_p2wsh() {
                    assert_eq!(input.witness.len(), 4);
                    *spent_kinds.entry("p2wsh").or_default() += 1;
                }
                if created == height {
                    in_block_chains += 1;
                }
                *uses.entry(prev.script_pubkey.to_bytes()).or_default() += 1;
            }
            let txid = tx.compute_txid();
            for (vout, out) in tx.output.iter().enumerate() {
                if out.script_pubkey.is_op_return() {
                    op_returns += 1;
                    continue;
                }
                *uses.entry(out.script_pubkey.to_bytes()).or_default() += 1;
                utxo.insert(OutPoint::new(txid, vout as u32), (out.clone(), height));
            }
        }
    }
    assert!(txs > 15_000, "{txs}");
    for kind in ["p2pkh", "p2sh-p2wpkh", "p2wpkh", "p2tr", "p2wsh"] {
        assert!(
            spent_kinds.get(kind).copied().unwrap_or(0) > 100,
            "{kind}: {spent_kinds:?}"
        );
    }
    assert!(in_block_chains > 1000, "{in_block_chains}");
    assert!(op_returns > 100, "{op_returns}");
    // Heavy tail: most scripts appear once or twice, the hottest thousands of times.
    let mut counts: Vec<usize> = uses.values().copied().collect();
    counts.sort_unstable();
    let median = counts[counts.len() / 2];
    let max = *counts.last().unwrap();
    let once_or_twice = counts.iter().filter(|&&c| c <= 2).count();
    assert!(median <= 2, "median {median}");
    assert!(
        once_or_twice * 10 >= counts.len() * 7,
        "{once_or_twice} of {}",
        counts.len()
    );
    assert!(max > 2_000, "max {max}");
}

#[test]
fn chains_without_a_wallet_did_not_change() {
    // The tip `cairn generate --blocks 150 --txs-per-block 5 --seed 1` wrote before wallets existed.
    let blocks = chain(150, 5, 1);
    assert_eq!(
        blocks.last().unwrap().block_hash().to_string(),
        "65a6d6a8a158a83583b6b4a14838fe063463f0a78726eb17675427572f79b35d"
    );
}

#[test]
fn a_wallet_is_paid_spent_and_restorable_from_its_descriptors() {
    use std::str::FromStr;

    use bitcoin::bip32::{DerivationPath, Xpriv};
    use bitcoin::secp256k1::Secp256k1;
    use bitcoin::{CompressedPublicKey, ScriptBuf};

    let tmp = tempfile::tempdir().unwrap();
    let opts = cairn::generate::GenerateOptions {
        blocks: 150,
        txs_per_block: 5,
        seed: 1,
    };
    let summary = cairn::generate::ChainGenerator::new(opts)
        .with_wallet(20)
        .unwrap()
        .write_to(tmp.path())
        .unwrap();
    // The descriptors, read the way a wallet would: the key and the path, derived here with
    // the bitcoin crate alone.
    let text = std::fs::read_to_string(tmp.path().join("wallet.txt")).unwrap();
    let descriptors: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(descriptors.len(), 2, "{text}");
    assert!(
        descriptors[0].ends_with("/84'/1'/0'/0/*)") && descriptors[1].ends_with("/84'/1'/0'/1/*)"),
        "{text}"
    );
    let xprv = descriptors[0]
        .trim_start_matches("wpkh(")
        .split('/')
        .next()
        .unwrap();
    let master = Xpriv::from_str(xprv).unwrap();
    let secp = Secp256k1::new();
    let wallet: Vec<ScriptBuf> = (0..20)
        .map(|i| {
            let path = DerivationPath::from_str(&format!("m/84'/1'/0'/0/{i}")).unwrap();
            let key = master.derive_priv(&secp, &path).unwrap().to_priv();
            ScriptBuf::new_p2wpkh(
                &CompressedPublicKey::from_private_key(&secp, &key)
                    .unwrap()
                    .wpubkey_hash(),
            )
        })
        .collect();
    // Every transaction paying or spending those scripts, from the blocks written.
    let hex = std::fs::read_to_string(tmp.path().join("blocks.hex")).unwrap();
    let mut owner: HashMap<OutPoint, usize> = HashMap::new();
    let (mut paid, mut spent, mut wallet_txs) = (vec![0usize; 20], 0usize, 0u64);
    for line in hex.lines() {
        let block: bitcoin::Block =
            bitcoin::consensus::deserialize(&Vec::<u8>::from_hex(line).unwrap()).unwrap();
        for tx in &block.txdata {
            let mut touches = false;
            for input in &tx.input {
                if owner.remove(&input.previous_output).is_some() {
                    spent += 1;
                    touches = true;
                }
            }
            for (vout, out) in tx.output.iter().enumerate() {
                if let Some(i) = wallet.iter().position(|s| *s == out.script_pubkey) {
                    paid[i] += 1;
                    owner.insert(OutPoint::new(tx.compute_txid(), vout as u32), i);
                    touches = true;
                }
            }
            wallet_txs += u64::from(touches);
        }
    }
    // Addresses are picked at random: on a chain this short a few get nothing.
    assert!(
        paid.iter().filter(|&&n| n > 0).count() >= 15,
        "the derived addresses are paid: {paid:?}"
    );
    assert!(spent > 0, "wallet coins are spent too");
    assert_eq!(summary.wallet_txs, wallet_txs);
}

/// `--wallet-per-mille`: the wallet's share of outputs sets how many transactions it has (what
/// a client restores), and nothing else about the chain's size.
#[test]
fn a_wallets_share_sets_its_transactions() {
    let opts = cairn::generate::GenerateOptions {
        blocks: 200,
        txs_per_block: 20,
        seed: 3,
    };
    let generate = |per_mille: u32| {
        let tmp = tempfile::tempdir().unwrap();
        cairn::generate::ChainGenerator::new(opts)
            .with_wallet(50)
            .unwrap()
            .with_wallet_share(per_mille)
            .write_to(tmp.path())
            .unwrap()
    };
    let default = generate(cairn::generate::WALLET_PER_MILLE);
    let tenth = generate(2);
    assert_eq!(default.txs, tenth.txs, "the share changes no block's size");
    assert!(default.wallet_txs > 200, "{}", default.wallet_txs);
    // Fewer, though not a tenth: the wallet's scripts are also reused as any other's are.
    assert!(
        tenth.wallet_txs * 4 < default.wallet_txs * 3,
        "a tenth of the share: {} of {}",
        tenth.wallet_txs,
        default.wallet_txs
    );
}

/// `--shape mainnet`: the chain's transactions have mainnet block 951658's input counts, output
/// kinds and OP_RETURN share (within a few points: the first blocks fan coins out, and reused
/// scripts keep the kind they were created with), far from the unshaped chain's.
#[test]
fn a_mainnet_shaped_chain_has_the_blocks_proportions() {
    use cairn::generate::{ChainGenerator, GenerateOptions, Shapes};

    let shapes = Shapes::mainnet().unwrap();
    let block = Proportions::of_shapes(shapes.all());
    let opts = GenerateOptions {
        blocks: 300,
        txs_per_block: 40,
        seed: 5,
    };
    let mut gen = ChainGenerator::new(opts).with_shapes(shapes);
    let blocks: Vec<bitcoin::Block> = (0..opts.blocks)
        .map(|_| gen.next_block().unwrap())
        .collect();
    let shaped = Proportions::of_blocks(&blocks[150..]);
    let plain = Proportions::of_blocks(&common::chain(300, 40, 5)[150..]);
    eprintln!("block {block:?}\nshaped {shaped:?}\nplain {plain:?}");
    assert!(shaped.txs > 5_000, "{shaped:?}");
    let near = |a: f64, b: f64, points: f64| (a - b).abs() <= points / 100.0;
    assert!(
        near(shaped.one_input, block.one_input, 3.0),
        "{shaped:?} {block:?}"
    );
    assert!(
        near(shaped.op_return, block.op_return, 3.0),
        "{shaped:?} {block:?}"
    );
    assert!(near(shaped.p2tr, block.p2tr, 5.0), "{shaped:?} {block:?}");
    assert!(
        near(shaped.p2wpkh, block.p2wpkh, 8.0),
        "{shaped:?} {block:?}"
    );
    assert!(
        !near(plain.op_return, block.op_return, 10.0)
            && !near(plain.one_input, block.one_input, 10.0),
        "{plain:?}"
    );
}

/// Shares of transactions with one input, and of outputs that are OP_RETURN, P2TR, P2WPKH.
#[derive(Debug)]
struct Proportions {
    txs: usize,
    one_input: f64,
    op_return: f64,
    p2tr: f64,
    p2wpkh: f64,
}

impl Proportions {
    fn of_shapes(shapes: &[cairn::generate::TxShape]) -> Self {
        use cairn::generate::{OutputShape, ScriptKind};
        let outputs: Vec<&OutputShape> = shapes.iter().flat_map(|s| s.outputs.iter()).collect();
        let share = |f: &dyn Fn(&OutputShape) -> bool| {
            outputs.iter().filter(|o| f(o)).count() as f64 / outputs.len() as f64
        };
        Proportions {
            txs: shapes.len(),
            one_input: shapes.iter().filter(|s| s.inputs.len() == 1).count() as f64
                / shapes.len() as f64,
            op_return: share(&|o| matches!(o, OutputShape::Data(_))),
            p2tr: share(&|o| *o == OutputShape::Pay(ScriptKind::P2tr)),
            p2wpkh: share(&|o| *o == OutputShape::Pay(ScriptKind::P2wpkh)),
        }
    }

    fn of_blocks(blocks: &[bitcoin::Block]) -> Self {
        let txs: Vec<&bitcoin::Transaction> = blocks
            .iter()
            .flat_map(|b| b.txdata.iter().skip(1))
            .collect();
        let outputs: Vec<&TxOut> = txs.iter().flat_map(|t| t.output.iter()).collect();
        let share = |f: &dyn Fn(&TxOut) -> bool| {
            outputs.iter().filter(|o| f(o)).count() as f64 / outputs.len() as f64
        };
        Proportions {
            txs: txs.len(),
            one_input: txs.iter().filter(|t| t.input.len() == 1).count() as f64 / txs.len() as f64,
            op_return: share(&|o| o.script_pubkey.is_op_return()),
            p2tr: share(&|o| o.script_pubkey.is_p2tr()),
            p2wpkh: share(&|o| o.script_pubkey.is_p2wpkh()),
        }
    }
}

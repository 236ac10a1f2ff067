//! The validator against data we did not make (the 206-block chain and bitcoind's hashes for
//! it) and against generated chains, including blocks that must be rejected.

use crate::common;

use std::path::Path;
use std::sync::atomic::AtomicBool;

use bitcoin::consensus::serialize;
use bitcoin::hashes::Hash;
use bitcoin::hex::FromHex;
use bitcoin::Block;

use cairn::generate::{reseal, ChainGenerator, GenerateOptions};
use cairn::import::{BlkDir, BlkWriter, Importer, Progress};
use cairn::kernel::{Accepted, KernelError, Validator};
use cairn::types::Network;

fn open(dir: &Path) -> Validator {
    common::open_validator(dir).0
}

/// bitcoind's hash for each height of the 206-block chain (from its filter listing).
fn bitcoind_hashes() -> Vec<String> {
    let text =
        std::fs::read_to_string(common::data("regtest-206-filters-by-bitcoind.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row[1].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn regtest_206_chain_imports_to_bitcoinds_tip_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    let hashes = bitcoind_hashes();
    {
        let v = open(tmp.path());
        let stats = Importer::new(&v, Progress::new(true), &stop)
            .import_hex_file(&common::data("regtest-206-blocks.hex.txt"))
            .unwrap();
        assert_eq!(stats.connected, 206);
        assert_eq!(stats.txs, 231);
        let tip = v.tip();
        assert_eq!(tip.height, 206);
        assert_eq!(tip.hash.to_string(), hashes[206]);
        for (h, hash) in hashes.iter().enumerate() {
            assert_eq!(
                v.hash_at(h as i64).unwrap().to_string(),
                *hash,
                "height {h}"
            );
        }
    }
    // A restart finds the tip and skips every block without validating it again.
    let v = open(tmp.path());
    assert_eq!(v.tip().height, 206);
    let stats = Importer::new(&v, Progress::new(true), &stop)
        .import_hex_file(&common::data("regtest-206-blocks.hex.txt"))
        .unwrap();
    assert_eq!(stats.connected, 0);
    assert_eq!(stats.already_had, 206);
    // Block and undo data read back: the undo data has one entry per input of every
    // non-coinbase transaction.
    for h in 1..=206 {
        let block = v.read_block(h).unwrap();
        assert_eq!(block.block_hash().to_string(), hashes[h as usize]);
        let undo = v.read_undo(h).unwrap();
        assert_eq!(undo.txs.len(), block.txdata.len() - 1, "height {h}");
        for (tx, spent) in block.txdata.iter().skip(1).zip(&undo.txs) {
            assert_eq!(tx.input.len(), spent.len());
        }
    }
}

#[test]
fn generated_chain_validates_and_blk_files_import_in_any_order() {
    let tmp = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    let out = tmp.path().join("chain");
    let summary = ChainGenerator::new(GenerateOptions {
        blocks: 500,
        txs_per_block: 55,
        seed: 11,
    })
    .write_to(&out)
    .unwrap();
    assert!(summary.txs >= 20_000, "only {} txs", summary.txs);

    // Hex lines through the kernel.
    let a = open(&tmp.path().join("a"));
    let stats = Importer::new(&a, Progress::new(true), &stop)
        .import_hex_file(&out.join("blocks.hex"))
        .unwrap();
    assert_eq!(stats.connected, 500);
    assert_eq!(stats.txs, summary.txs);
    assert_eq!(a.tip().height, 500);
    assert_eq!(a.tip().hash, summary.tip);

    // The same chain as blk files.
    let b = open(&tmp.path().join("b"));
    let blk = BlkDir::open(&out.join("blocks"), Network::Regtest.magic(), "regtest").unwrap();
    let stats = Importer::new(&b, Progress::new(true), &stop)
        .import_blk_dir(&blk)
        .unwrap();
    assert_eq!(stats.connected, 500);
    assert_eq!(b.tip().hash, summary.tip);

    // Out of order, as Core writes blocks that arrived from several peers, across small files.
    let blocks: Vec<Vec<u8>> = std::fs::read_to_string(out.join("blocks.hex"))
        .unwrap()
        .lines()
        .map(|l| Vec::<u8>::from_hex(l).unwrap())
        .collect();
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    for chunk in order.chunks_mut(16) {
        chunk.reverse();
    }
    let shuffled = tmp.path().join("shuffled");
    let mut w = BlkWriter::new(&shuffled, Network::Regtest.magic(), 1 << 20).unwrap();
    for i in order {
        w.write_block(&blocks[i]).unwrap();
    }
    w.finish().unwrap();
    let c = open(&tmp.path().join("c"));
    let blk = BlkDir::open(&shuffled, Network::Regtest.magic(), "regtest").unwrap();
    assert!(blk.files().len() > 1);
    let stats = Importer::new(&c, Progress::new(true), &stop)
        .import_blk_dir(&blk)
        .unwrap();
    assert_eq!(stats.connected, 500);
    assert_eq!(stats.orphans, 0);
    assert_eq!(c.tip().hash, summary.tip);
}

fn expect_invalid(v: &Validator, block: &Block, reason_part: &str) {
    let before = v.tip();
    match v.submit_block(&serialize(block)) {
        Err(KernelError::Invalid {
            hash,
            height,
            reason,
        }) => {
            eprintln!("rejected: {reason}");
            assert_eq!(hash, block.block_hash());
            assert_eq!(height, before.height + 1);
            assert!(
                reason.contains(reason_part),
                "reason {reason:?} should mention {reason_part:?}"
            );
        }
        other => panic!("expected rejection ({reason_part}), got {other:?}"),
    }
    assert_eq!(v.tip(), before, "the tip must not move");
}

#[test]
fn invalid_blocks_are_rejected_with_the_kernels_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let v = open(tmp.path());
    let chain = common::chain(140, 20, 5);
    let split = 120;
    for block in &chain[..split] {
        assert_eq!(
            v.submit_block(&serialize(block)).unwrap(),
            Accepted::Connected
        );
    }
    let next = &chain[split];
    assert!(next.txdata.len() > 5);

    // A bad signature: flip a byte inside the first signature of a legacy (scriptSig) spend,
    // or else of a witness, then make the block well-formed again.
    let mut bad_sig = next.clone();
    let (ti, legacy) = bad_sig
        .txdata
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, tx)| tx.input[0].script_sig.len() > 70)
        .map(|(i, _)| (i, true))
        .unwrap_or((1, false));
    let tx = &mut bad_sig.txdata[ti];
    if legacy {
        let mut bytes = tx.input[0].script_sig.to_bytes();
        bytes[10] ^= 0x01;
        tx.input[0].script_sig = bitcoin::ScriptBuf::from_bytes(bytes);
    } else {
        let mut items: Vec<Vec<u8>> = tx.input[0].witness.iter().map(|w| w.to_vec()).collect();
        // The signature: the first item, or the second after a multisig's empty dummy.
        let item = if items[0].is_empty() { 1 } else { 0 };
        items[item][10] ^= 0x01;
        tx.input[0].witness = bitcoin::Witness::from_slice(&items);
    }
    reseal(&mut bad_sig);
    expect_invalid(&v, &bad_sig, "script-verify");

    // A bad merkle root.
    let mut bad_root = next.clone();
    bad_root.header.merkle_root = bitcoin::TxMerkleNode::from_byte_array([7u8; 32]);
    cairn::generate::grind(&mut bad_root.header);
    expect_invalid(&v, &bad_root, "bad-txnmrklroot");

    // A double spend: the next block also carries a transaction the chain already confirmed.
    let mut double = next.clone();
    let spent_again = chain[split - 1]
        .txdata
        .get(1)
        .cloned()
        .expect("a spend in the previous block");
    double.txdata.push(spent_again);
    reseal(&mut double);
    expect_invalid(&v, &double, "bad-txns-inputs-missingorspent");

    // The node keeps validating: the real next blocks still connect.
    for block in &chain[split..] {
        assert_eq!(
            v.submit_block(&serialize(block)).unwrap(),
            Accepted::Connected
        );
    }
    assert_eq!(v.tip().hash, chain.last().unwrap().block_hash());
}

#[test]
fn garbage_and_orphans_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let v = open(tmp.path());
    assert!(matches!(
        v.submit_block(&[0xde, 0xad, 0xbe, 0xef]),
        Err(KernelError::Malformed(_))
    ));
    let chain = common::chain(3, 0, 1);
    match v.submit_block(&serialize(&chain[2])) {
        Err(KernelError::UnknownParent { hash, prev }) => {
            assert_eq!(hash, chain[2].block_hash());
            assert_eq!(prev, chain[1].block_hash());
        }
        other => panic!("expected unknown parent, got {other:?}"),
    }
    assert_eq!(v.tip().height, 0);
}

/// `cairn generate --blocks 110 --txs-per-block 4000 --seed 1` once wrote a 1.57 MB block 101
/// that the kernel refused (`bad-blk-length`). Whatever the flags, a block closes before the
/// consensus weight and sigop limits (a transaction that does not fit opens the next block), and
/// the kernel takes every block, plain and mainnet-shaped.
#[test]
fn generated_blocks_stay_within_the_consensus_limits_whatever_the_flags() {
    let plain = ChainGenerator::new(GenerateOptions {
        blocks: 104,
        txs_per_block: 8_000,
        seed: 1,
    });
    let shaped = ChainGenerator::new(GenerateOptions {
        blocks: 104,
        txs_per_block: 8_000,
        seed: 2,
    })
    .with_shapes(cairn::generate::Shapes::mainnet().unwrap());
    for (name, mut gen) in [("plain", plain), ("mainnet-shaped", shaped)] {
        let tmp = tempfile::tempdir().unwrap();
        let v = open(tmp.path());
        let mut heaviest = 0;
        for _ in 0..104 {
            let block = gen.next_block().unwrap();
            heaviest = heaviest.max(block.weight().to_wu());
            assert_eq!(
                v.submit_block(&serialize(&block)).unwrap(),
                Accepted::Connected,
                "{name}"
            );
        }
        // The limit was reached, not stayed away from.
        assert!(heaviest > 3_900_000, "{name}: heaviest block {heaviest} WU");
        assert_eq!(v.tip().height, 104, "{name}");
    }
}

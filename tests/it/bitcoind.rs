//! A real bitcoind as the reference: it must accept the generator's chain, read from the same
//! blk files cairn imports, and end on the same tip as cairn's kernel; cairn's BIP158 filters
//! and filter headers of every block equal its `getblockfilter`.

use crate::common;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bitcoin::hex::DisplayHex;

use cairn::generate::{ChainGenerator, GenerateOptions};
use cairn::import::{BlkDir, Importer, Progress};
use cairn::types::Network;

#[test]
fn bitcoind_loads_the_generated_blk_files_to_the_same_tip_as_cairn() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("chain");
    let summary = ChainGenerator::new(GenerateOptions {
        blocks: 300,
        txs_per_block: 30,
        seed: 21,
    })
    .write_to(&out)
    .unwrap();

    let node = common::Bitcoind::start_core(
        &tmp.path().join("bitcoind"),
        &[
            format!("-loadblock={}", out.join("blocks/blk00000.dat").display()),
            "-blockfilterindex=1".into(),
        ],
    );
    node.wait_for_height(300, Duration::from_secs(120));
    assert_eq!(node.rpc(&["getbestblockhash"]), summary.tip.to_string());
    let info: serde_json::Value = serde_json::from_str(&node.rpc(&["getchaintxstats"])).unwrap();
    assert_eq!(
        info["txcount"].as_u64().unwrap(),
        summary.txs + 1,
        "plus genesis"
    );

    let dir = tmp.path().join("cairn");
    let (validator, _events) = common::open_validator(&dir);
    let stop = AtomicBool::new(false);
    let blk = BlkDir::open(&out.join("blocks"), Network::Regtest.magic(), "regtest").unwrap();
    Importer::new(&validator, Progress::new(true), &stop)
        .import_blk_dir(&blk)
        .unwrap();
    assert_eq!(
        validator.tip().hash.to_string(),
        node.rpc(&["getbestblockhash"])
    );
    for h in [1i64, 101, 150, 299] {
        assert_eq!(
            validator.hash_at(h).unwrap().to_string(),
            node.rpc(&["getblockhash", &h.to_string()])
        );
    }

    // Every filter and filter header equals bitcoind's (its filter index builds in the
    // background: wait until it reports synced).
    let store = std::sync::Arc::new(cairn::store::Store::open(&dir.join("index")).unwrap());
    let index = cairn::index::Index::open(store, None).unwrap();
    index.sync(&validator).unwrap();
    node.wait_for_filter_index(Duration::from_secs(120));
    for h in 0..=300u32 {
        let hash = node.rpc(&["getblockhash", &h.to_string()]);
        let want: serde_json::Value =
            serde_json::from_str(&node.rpc(&["getblockfilter", &hash])).unwrap();
        let got = index.filter_at(h).unwrap().unwrap();
        assert_eq!(
            got.filter.to_lower_hex_string(),
            want["filter"].as_str().unwrap(),
            "filter at {h}"
        );
        assert_eq!(
            got.header.to_string(),
            want["header"].as_str().unwrap(),
            "filter header at {h}"
        );
    }
}

/// A chain shaped after mainnet block 951658 (`cairn generate --shape mainnet`: a third of its
/// outputs OP_RETURN, many script-path spends) is valid for bitcoind and cairn alike, and its
/// filters equal bitcoind's.
#[test]
fn bitcoind_accepts_a_mainnet_shaped_chain_and_cairn_indexes_it_the_same() {
    let shapes = cairn::generate::Shapes::mainnet().unwrap();
    let gen = ChainGenerator::new(GenerateOptions {
        blocks: 200,
        txs_per_block: 40,
        seed: 8,
    })
    .with_shapes(shapes);
    accepted_and_indexed_the_same(gen, 200);
}

/// The signature-free workload (`cairn generate --signatures none --shape mainnet`): no input
/// anywhere carries or needs a signature, and the chain is valid for bitcoind and cairn alike,
/// with the same filters.
#[test]
fn bitcoind_accepts_a_signature_free_chain_and_cairn_indexes_it_the_same() {
    let shapes = cairn::generate::Shapes::mainnet().unwrap();
    let mut gen = ChainGenerator::new(GenerateOptions {
        blocks: 200,
        txs_per_block: 40,
        seed: 9,
    })
    .with_shapes(shapes)
    .with_spending(cairn::generate::Spending::SignatureFree);
    let mut outputs = std::collections::HashMap::new();
    let mut forms = std::collections::BTreeMap::new();
    for _ in 0..200 {
        let block = gen.next_block().unwrap();
        for tx in &block.txdata {
            for input in tx.input.iter().filter(|_| !tx.is_coinbase()) {
                let prevout: &bitcoin::ScriptBuf = &outputs[&input.previous_output];
                *forms
                    .entry(assert_signature_free(prevout, input))
                    .or_insert(0) += 1;
            }
            let txid = tx.compute_txid();
            for (vout, out) in tx.output.iter().enumerate() {
                let outpoint = bitcoin::OutPoint::new(txid, vout as u32);
                outputs.insert(outpoint, out.script_pubkey.clone());
            }
        }
    }
    // Every kind's signature-free form is spent, often.
    for form in ["P2SH", "P2SH-P2WSH", "P2WSH", "taproot script path"] {
        assert!(forms.get(form).copied().unwrap_or(0) > 50, "{forms:?}");
    }
    let gen = ChainGenerator::new(GenerateOptions {
        blocks: 200,
        txs_per_block: 40,
        seed: 9,
    })
    .with_shapes(cairn::generate::Shapes::mainnet().unwrap())
    .with_spending(cairn::generate::Spending::SignatureFree);
    accepted_and_indexed_the_same(gen, 200);
}

/// An input of the signature-free workload, and its form: its prevout is P2SH, P2WSH or taproot
/// (never a key hash nor a bare key), taproot spent by its script path, the script it runs has
/// no signature opcode, and no push it carries is a signature (the generator's stand-ins are
/// runs of one byte).
fn assert_signature_free(prevout: &bitcoin::ScriptBuf, input: &bitcoin::TxIn) -> &'static str {
    use bitcoin::blockdata::opcodes::all::*;
    let witness: Vec<&[u8]> = input.witness.iter().collect();
    let (form, script) = if prevout.is_p2tr() {
        assert_eq!(witness.len(), 3, "taproot spent by its script path");
        assert!(
            witness[0].iter().all(|b| *b == witness[0][0]),
            "a signature"
        );
        ("taproot script path", witness[1].to_vec())
    } else if prevout.is_p2wsh() || (prevout.is_p2sh() && !witness.is_empty()) {
        for item in &witness[..witness.len() - 1] {
            assert!(item.iter().all(|b| *b == item[0]), "a signature");
        }
        let form = if prevout.is_p2wsh() {
            "P2WSH"
        } else {
            "P2SH-P2WSH"
        };
        (form, witness.last().expect("a witness script").to_vec())
    } else {
        assert!(prevout.is_p2sh(), "a script that needs a key: {prevout:?}");
        let pushes = input.script_sig.instructions().filter_map(|i| match i {
            Ok(bitcoin::script::Instruction::PushBytes(p)) => Some(p.as_bytes().to_vec()),
            _ => None,
        });
        let pushes: Vec<Vec<u8>> = pushes.collect();
        for push in &pushes[..pushes.len() - 1] {
            assert!(push.iter().all(|b| *b == push[0]), "a signature");
        }
        ("P2SH", pushes.last().expect("a redeem script").clone())
    };
    let signing = [
        OP_CHECKSIG,
        OP_CHECKSIGVERIFY,
        OP_CHECKMULTISIG,
        OP_CHECKMULTISIGVERIFY,
        OP_CHECKSIGADD,
    ];
    for op in bitcoin::Script::from_bytes(&script).instructions() {
        if let Ok(bitcoin::script::Instruction::Op(op)) = op {
            assert!(!signing.contains(&op), "{op:?} in {script:?}");
        }
    }
    form
}

/// Writes `gen`'s chain of `blocks`, has bitcoind load it and cairn import and index it: the
/// same tip, and the last 50 blocks' filters and filter headers equal bitcoind's.
fn accepted_and_indexed_the_same(gen: ChainGenerator, blocks: u32) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("chain");
    let summary = gen.write_to(&out).unwrap();
    let node = common::Bitcoind::start_core(
        &tmp.path().join("bitcoind"),
        &[
            format!("-loadblock={}", out.join("blocks/blk00000.dat").display()),
            "-blockfilterindex=1".into(),
        ],
    );
    node.wait_for_height(u64::from(blocks), Duration::from_secs(120));
    assert_eq!(node.rpc(&["getbestblockhash"]), summary.tip.to_string());

    let dir = tmp.path().join("cairn");
    let (tip, height) = import_into_cairn(&dir, &out.join("blocks"));
    assert_eq!((tip, height), (summary.tip, i64::from(blocks)));
    let store = std::sync::Arc::new(cairn::store::Store::open(&dir.join("index")).unwrap());
    let index = cairn::index::Index::open(store, None).unwrap();
    let (validator, _events) = common::open_validator(&dir);
    index.sync(&validator).unwrap();
    node.wait_for_filter_index(Duration::from_secs(120));
    for h in blocks - 50..=blocks {
        let hash = node.rpc(&["getblockhash", &h.to_string()]);
        let want: serde_json::Value =
            serde_json::from_str(&node.rpc(&["getblockfilter", &hash])).unwrap();
        let got = index.filter_at(h).unwrap().unwrap();
        assert_eq!(
            got.filter.to_lower_hex_string(),
            want["filter"].as_str().unwrap(),
            "filter at {h}"
        );
        assert_eq!(
            got.header.to_string(),
            want["header"].as_str().unwrap(),
            "filter header at {h}"
        );
    }
}

/// A regtest address for coinbases, so bitcoind mines without a wallet.
const MINE_TO: &str = "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080";

/// Imports `blocks` into a fresh cairn validator and returns its tip.
fn import_into_cairn(dir: &std::path::Path, blocks: &std::path::Path) -> (bitcoin::BlockHash, i64) {
    let (validator, _events) = common::open_validator(dir);
    let stop = AtomicBool::new(false);
    let blk = BlkDir::open(blocks, Network::Regtest.magic(), "regtest").unwrap();
    Importer::new(&validator, Progress::new(true), &stop)
        .import_blk_dir(&blk)
        .unwrap();
    let tip = validator.tip();
    (tip.hash, tip.height)
}

#[test]
fn a_blocks_folder_written_by_bitcoind_imports_with_its_preallocated_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let node = common::Bitcoind::start_core(&tmp.path().join("core"), &[]);
    node.rpc(&["generatetoaddress", "150", MINE_TO]);
    let tip = node.rpc(&["getbestblockhash"]);
    drop(node);
    let blocks = tmp.path().join("core/regtest/blocks");
    // What makes this case: Core pre-allocates blk files in 16 MiB steps (raw zeros on disk)
    // and obfuscates what it writes with a random key.
    let len = std::fs::metadata(blocks.join("blk00000.dat"))
        .unwrap()
        .len();
    assert!(
        len >= 16 << 20,
        "blk00000.dat is {len} bytes: not pre-allocated"
    );
    assert_ne!(
        std::fs::read(blocks.join("xor.dat")).unwrap(),
        [0u8; 8],
        "no obfuscation key"
    );
    let (hash, height) = import_into_cairn(&tmp.path().join("cairn"), &blocks);
    assert_eq!((hash.to_string(), height), (tip, 150));
}

#[test]
fn a_blocks_folder_of_a_killed_bitcoind_imports_to_the_tip_its_reindex_finds() {
    let tmp = tempfile::tempdir().unwrap();
    let datadir = tmp.path().join("core");
    let mut node = common::Bitcoind::start_core(&datadir, &[]);
    let miner = {
        let args = (
            node.rpc_port,
            common::bitcoind_exe().with_file_name("bitcoin-cli"),
        );
        std::thread::spawn(move || {
            // Mines until the node is gone.
            while std::process::Command::new(&args.1)
                .args([
                    "-regtest",
                    "-rpcconnect=127.0.0.1",
                    "-rpcuser=u",
                    "-rpcpassword=p",
                ])
                .arg(format!("-rpcport={}", args.0))
                .args(["generatetoaddress", "5", MINE_TO])
                .output()
                .is_ok_and(|o| o.status.success())
            {}
        })
    };
    // At a random instant, not a fixed delay: the kill lands anywhere in a block's write.
    let delay = 400 + rand::random::<u64>() % 1600;
    eprintln!("killing bitcoind after {delay} ms");
    std::thread::sleep(Duration::from_millis(delay));
    node.kill();
    miner.join().unwrap();
    drop(node);

    let copy = tmp.path().join("blocks-copy");
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(datadir.join("regtest/blocks")).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
    }
    let (hash, height) = import_into_cairn(&tmp.path().join("cairn"), &copy);
    assert!(height > 0, "bitcoind mined nothing before the kill");

    // The oracle: Core's own -reindex of the same files.
    let node = common::Bitcoind::start_core(&datadir, &["-reindex".into()]);
    let start = std::time::Instant::now();
    loop {
        let best = node.rpc(&["getbestblockhash"]);
        if best == hash.to_string() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "bitcoind's reindex ends at {best} (height {}), cairn's import at {hash} (height {height})",
            node.rpc(&["getblockcount"])
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

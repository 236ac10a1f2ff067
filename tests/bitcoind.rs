//! A real bitcoind as the reference: it must accept the generator's chain, read from the same
//! blk files cairn imports, and end on the same tip as cairn's kernel; cairn's BIP158 filters
//! and filter headers of every block equal its `getblockfilter`.

mod common;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bitcoin::hex::DisplayHex;
use cairn::config::Network;
use cairn::generate::{ChainGenerator, GenerateOptions};
use cairn::import::{BlkDir, Importer, Progress};

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

    let node = common::Bitcoind::start(
        &tmp.path().join("bitcoind"),
        &[format!("-loadblock={}", out.join("blocks/blk00000.dat").display()), "-blockfilterindex=1".into()],
    );
    node.wait_for_height(300, Duration::from_secs(120));
    assert_eq!(node.rpc(&["getbestblockhash"]), summary.tip.to_string());
    let info: serde_json::Value =
        serde_json::from_str(&node.rpc(&["getchaintxstats"])).unwrap();
    assert_eq!(info["txcount"].as_u64().unwrap(), summary.txs + 1, "plus genesis");

    let dir = tmp.path().join("cairn");
    let (validator, _events) = common::open_validator(&dir);
    let stop = AtomicBool::new(false);
    let blk = BlkDir::open(&out.join("blocks"), Network::Regtest.magic(), "regtest").unwrap();
    Importer::new(&validator, Progress::new(true), &stop)
        .import_blk_dir(&blk)
        .unwrap();
    assert_eq!(validator.tip().hash.to_string(), node.rpc(&["getbestblockhash"]));
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
    let start = std::time::Instant::now();
    loop {
        let info: serde_json::Value = serde_json::from_str(&node.rpc(&["getindexinfo"])).unwrap();
        if info["basic block filter index"]["synced"] == true {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "bitcoind's filter index never synced: {info}");
        std::thread::sleep(Duration::from_millis(200));
    }
    for h in 0..=300u32 {
        let hash = node.rpc(&["getblockhash", &h.to_string()]);
        let want: serde_json::Value = serde_json::from_str(&node.rpc(&["getblockfilter", &hash])).unwrap();
        let got = index.filter_at(h).unwrap().unwrap();
        assert_eq!(got.filter.to_lower_hex_string(), want["filter"].as_str().unwrap(), "filter at {h}");
        assert_eq!(got.header.to_string(), want["header"].as_str().unwrap(), "filter header at {h}");
    }
}

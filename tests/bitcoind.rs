//! A real bitcoind as the reference: it must accept the generator's chain, read from the same
//! blk files cairn imports, and end on the same tip as cairn's kernel.

mod common;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

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
        &[format!("-loadblock={}", out.join("blocks/blk00000.dat").display())],
    );
    node.wait_for_height(300, Duration::from_secs(120));
    assert_eq!(node.rpc(&["getbestblockhash"]), summary.tip.to_string());
    let info: serde_json::Value =
        serde_json::from_str(&node.rpc(&["getchaintxstats"])).unwrap();
    assert_eq!(info["txcount"].as_u64().unwrap(), summary.txs + 1, "plus genesis");

    let (validator, _events) = common::open_validator(&tmp.path().join("cairn"));
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
}

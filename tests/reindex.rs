//! `cairn reindex`: the index rebuilt from the kernel's blocks alone equals, row for row, the one
//! the import built while validating; killed at random instants, a reindex run again (or a
//! plain start) still ends on that index.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use cairn::generate::{ChainGenerator, GenerateOptions};
use common::index_rows;

fn cairn(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
    cmd.arg("--datadir").arg(dir).env("CAIRN_LOG", "warn");
    cmd
}

/// A random number of milliseconds in `range` (printed, for a failure's log).
fn random_ms(range: std::ops::Range<u64>) -> Duration {
    let ms = range.start + rand::random::<u64>() % (range.end - range.start);
    eprintln!("kill after {ms} ms");
    Duration::from_millis(ms)
}

#[test]
fn a_reindex_rebuilds_the_index_the_import_built() {
    let tmp = tempfile::tempdir().unwrap();
    let chain = tmp.path().join("chain");
    let summary = ChainGenerator::new(GenerateOptions { blocks: 400, txs_per_block: 60, seed: 41 }).write_to(&chain).unwrap();
    let dir = tmp.path().join("cairn");
    let imported = cairn(&dir).args(["import", "--quiet", "--blocks-dir"]).arg(chain.join("blocks")).output().unwrap();
    assert!(imported.status.success(), "{}", String::from_utf8_lossy(&imported.stderr));
    let want = index_rows(&dir);

    let started = std::time::Instant::now();
    let out = cairn(&dir).args(["reindex", "--json"]).output().unwrap();
    let whole = started.elapsed().as_millis() as u64;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["blocks"], 401);
    assert_eq!(report["txs"].as_u64(), Some(summary.txs + 1), "every transaction, genesis's included");
    assert!(index_rows(&dir) == want, "the reindexed rows differ from the imported ones");

    // Killed at random instants within what a whole reindex took: the next reindex, or a plain
    // start, ends on the same index.
    let mut landed = 0;
    for round in 0..4 {
        let mut child = cairn(&dir).arg("reindex").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        std::thread::sleep(random_ms(whole / 10..whole.max(20)));
        landed += usize::from(child.try_wait().unwrap().is_none());
        let _ = child.kill();
        let _ = child.wait();
        if round % 2 == 0 {
            assert!(cairn(&dir).arg("reindex").stdout(Stdio::null()).status().unwrap().success());
        } else {
            let node = common::start_cairn(&dir, &["--no-listen".to_string()]);
            node.wait_for(&summary.tip.to_string(), "the start after a killed reindex");
            node.stop();
        }
        assert!(index_rows(&dir) == want, "round {round}: the rows differ from the imported ones");
    }
    assert!(landed > 0, "no kill landed before a reindex finished");
}

#[test]
fn a_running_node_is_not_reindexed_under_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cairn");
    let node = common::start_cairn(&dir, &["--no-listen".to_string()]);
    let out = cairn(&dir).arg("reindex").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use by a running cairn"), "{}", String::from_utf8_lossy(&out.stderr));
    node.stop();
}

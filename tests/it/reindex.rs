//! `cairn reindex`: the index rebuilt from the kernel's blocks alone equals, row for row, the one
//! the import built while validating; killed at random instants, a reindex run again (or a
//! plain start) still ends on that index.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use crate::common::index_rows;
use cairn::generate::{ChainGenerator, GenerateOptions};

use crate::common::cairn_in as cairn;

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
    let summary = ChainGenerator::new(GenerateOptions {
        blocks: 400,
        txs_per_block: 60,
        seed: 41,
    })
    .write_to(&chain)
    .unwrap();
    let dir = tmp.path().join("cairn");
    let imported = cairn(&dir)
        .args(["import", "--quiet", "--blocks-dir"])
        .arg(chain.join("blocks"))
        .output()
        .unwrap();
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    let want = index_rows(&dir);

    let started = std::time::Instant::now();
    let out = cairn(&dir).args(["reindex", "--json"]).output().unwrap();
    let whole = started.elapsed().as_millis() as u64;
    common::succeeded(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["blocks"], 401);
    assert_eq!(
        report["txs"].as_u64(),
        Some(summary.txs + 1),
        "every transaction, genesis's included"
    );
    assert!(
        index_rows(&dir) == want,
        "the reindexed rows differ from the imported ones"
    );

    // Killed at random instants within what a whole reindex took: the next reindex, or a plain
    // start, ends on the same index.
    let mut landed = 0;
    for round in 0..4 {
        let mut child = cairn(&dir)
            .arg("reindex")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(random_ms(whole / 10..whole.max(20)));
        landed += usize::from(child.try_wait().unwrap().is_none());
        let _ = child.kill();
        let _ = child.wait();
        if round % 2 == 0 {
            assert!(cairn(&dir)
                .arg("reindex")
                .stdout(Stdio::null())
                .status()
                .unwrap()
                .success());
        } else {
            let node = common::start_cairn(&dir, &["--no-listen".to_string()]);
            node.wait_for(&summary.tip.to_string(), "the start after a killed reindex");
            node.stop();
        }
        assert!(
            index_rows(&dir) == want,
            "round {round}: the rows differ from the imported ones"
        );
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
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("in use by a running cairn"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    node.stop();
}

/// A node that indexes 1,000 blocks or more in one catch-up compacts its whole index once it is
/// done (in the background, after it serves): the log says so with sizes that shrank, and the
/// rows are the import's.
#[test]
fn a_long_catch_up_ends_with_the_index_compacted() {
    let tmp = tempfile::tempdir().unwrap();
    let chain = tmp.path().join("chain");
    let summary = ChainGenerator::new(GenerateOptions {
        blocks: 1_050,
        txs_per_block: 8,
        seed: 43,
    })
    .write_to(&chain)
    .unwrap();
    let indexed = tmp.path().join("indexed");
    let out = cairn(&indexed)
        .args(["import", "--quiet", "--blocks-dir"])
        .arg(chain.join("blocks"))
        .output()
        .unwrap();
    common::succeeded(&out);
    let want = index_rows(&indexed);

    // The kernel holds the chain, the index nothing: the node's first sync indexes it all.
    let dir = tmp.path().join("cairn");
    let out = cairn(&dir)
        .args(["import", "--quiet", "--no-index", "--blocks-dir"])
        .arg(chain.join("blocks"))
        .output()
        .unwrap();
    common::succeeded(&out);
    let (mut child, line) = run_until_compacted(&dir, &tmp.path().join("run.log"));
    let after_colon = line.rsplit("initial sync:").next().unwrap_or_default();
    let sizes: Vec<u64> = after_colon
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .filter(|&n| n > 1_000)
        .collect();
    assert!(sizes.len() == 2 && sizes[1] < sizes[0], "{line}");
    let stopped = cairn(&dir).arg("stop").output().unwrap();
    assert!(stopped.status.success());
    assert!(child.wait().unwrap().success());
    assert!(
        index_rows(&dir) == want,
        "the rows after the catch-up differ from the import's"
    );
    eprintln!("{line}; tip {}", summary.tip);

    // The import compacted nothing (its catch-up writes without the log, then ends): the first
    // run of its index does, though that run indexes nothing.
    let (mut child, line) = run_until_compacted(&indexed, &tmp.path().join("after-import.log"));
    assert!(cairn(&indexed)
        .arg("stop")
        .output()
        .unwrap()
        .status
        .success());
    assert!(child.wait().unwrap().success());
    assert!(index_rows(&indexed) == want, "compacting changed rows");
    let store = cairn::store::Store::open(&indexed.join("regtest/index")).unwrap();
    let mark = store.get(
        cairn::store::schema::cf::META,
        cairn::store::schema::meta::UNSETTLED,
    );
    assert_eq!(mark.unwrap(), None, "the compaction is still marked due");
    drop(store);
    // A reindex of as many blocks leaves it due again, for the next run.
    let out = cairn(&indexed).arg("reindex").output().unwrap();
    common::succeeded(&out);
    let store = cairn::store::Store::open(&indexed.join("regtest/index")).unwrap();
    let mark = store.get(
        cairn::store::schema::cf::META,
        cairn::store::schema::meta::UNSETTLED,
    );
    assert!(mark.unwrap().is_some(), "a reindex left no compaction due");
    eprintln!("after the import: {line}");
}

/// Starts `cairn run` on `dir`, logging to `log`, and waits (at most 120 s) for the line of its
/// whole-index compaction.
fn run_until_compacted(
    dir: &std::path::Path,
    log: &std::path::Path,
) -> (std::process::Child, String) {
    let child = cairn(dir)
        .args([
            "--admin-addr",
            "127.0.0.1:0",
            "--electrum-addr",
            "127.0.0.1:0",
            "--no-listen",
            "run",
        ])
        .env("CAIRN_LOG", "info")
        .stderr(std::fs::File::create(log).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let line = loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text
            .lines()
            .find(|l| l.contains("index compacted after the initial sync"))
        {
            break line.to_string();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no compaction logged:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    (child, line)
}

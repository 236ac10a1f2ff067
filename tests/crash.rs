//! Issue 12, part 4: crashes never leave the index stuck. The hard case: after `kill -9` the
//! kernel comes back at its last flush, below the index, having forgotten the blocks above it;
//! then it follows a competing branch. The index must undo blocks the kernel no longer knows,
//! from its own rows, and end equal, row for row, to a fresh index of the same chain.

mod common;

use std::sync::Arc;

use common::{start_cairn, Bitcoind};

const ADDR: &str = "bcrt1qs758ursh4q9z627kt3pp5yysm78ddny6txaqgw";

/// Every row of a stopped cairn's index.
fn index_rows(datadir: &std::path::Path) -> Vec<(&'static str, Vec<(Box<[u8]>, Box<[u8]>)>)> {
    let store = Arc::new(cairn::store::Store::open(&datadir.join("regtest/index")).unwrap());
    cairn::index::Index::open(store, None).unwrap().dump().unwrap()
}

#[test]
fn after_a_crash_the_index_undoes_blocks_the_kernel_forgot_and_follows_its_reorg() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Bitcoind::start(&tmp.path().join("a"), &[]);
    a.rpc(&["generatetoaddress", "110", ADDR]);
    let connect = format!("--connect=127.0.0.1:{}", a.p2p_port);
    let dir = tmp.path().join("cairn");

    // Synced and stopped cleanly: the kernel has 110 blocks on disk.
    let cairn = start_cairn(&dir, &[connect.clone(), "--no-listen".into()]);
    cairn.wait_for(&a.rpc(&["getbestblockhash"]), "initial sync");
    cairn.stop();

    // Five more blocks, indexed, then SIGKILL before the kernel writes its state again.
    let cairn = start_cairn(&dir, &[connect.clone(), "--no-listen".into()]);
    cairn.wait_for(&a.rpc(&["getbestblockhash"]), "sync to 110");
    a.rpc(&["generatetoaddress", "5", ADDR]);
    let lost_tip = a.rpc(&["getbestblockhash"]);
    cairn.wait_for(&lost_tip, "sync to 115");
    drop(cairn);

    // Without peers: the kernel is back at 110, the index still at 115.
    let cairn = start_cairn(&dir, &["--no-listen".into()]);
    let status = cairn.status_when(|s| s["index_tip"]["height"] == 115);
    assert_eq!(status["kernel_tip"]["height"], 110, "the kernel kept blocks it had not flushed: {status}");
    cairn.stop();

    // bitcoind abandons those five blocks for a longer branch.
    let first_lost = a.rpc(&["getblockhash", "111"]);
    a.rpc(&["invalidateblock", &first_lost]);
    a.rpc(&["generatetoaddress", "8", "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"]);
    let new_tip = a.rpc(&["getbestblockhash"]);
    assert_eq!(a.rpc(&["getblockcount"]), "118");

    let cairn = start_cairn(&dir, &[connect.clone(), "--no-listen".into()]);
    cairn.wait_for(&new_tip, "the competing branch after the crash");
    cairn.stop();

    // A fresh index of the same chain, for comparison.
    let fresh_dir = tmp.path().join("fresh");
    let fresh = start_cairn(&fresh_dir, &[connect, "--no-listen".into()]);
    fresh.wait_for(&new_tip, "fresh sync");
    fresh.stop();
    let (ours, theirs) = (index_rows(&dir), index_rows(&fresh_dir));
    for ((name, a), (_, b)) in ours.iter().zip(&theirs) {
        assert_eq!(a.len(), b.len(), "{name}: {} rows after the crash, {} fresh", a.len(), b.len());
        assert!(a == b, "{name} differs from a fresh index");
    }
}

/// How many kills a run makes: `CAIRN_CRASH_KILLS` (`contrib/crash-test.sh` asks for 50), else a
/// number that keeps the suite quick.
fn kills() -> usize {
    std::env::var("CAIRN_CRASH_KILLS").ok().and_then(|n| n.parse().ok()).unwrap_or(6)
}

/// A random delay in `range` milliseconds, printed so a failing run can be told apart.
fn random_delay(range: std::ops::Range<u64>) -> std::time::Duration {
    let ms = range.start + rand::random::<u64>() % (range.end - range.start);
    eprintln!("kill after {ms} ms");
    std::time::Duration::from_millis(ms)
}

/// The generated chain's length.
const BLOCKS: i64 = 1_000;

/// The index height a killed cairn left (read from its data folder), printed.
fn index_height_after_kill(dir: &std::path::Path) -> i64 {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("--datadir")
        .arg(dir)
        .args(["status", "--json"])
        .env("CAIRN_LOG", "warn")
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let height = status["index_tip"]["height"].as_i64().unwrap_or(-1);
    eprintln!("killed with the index at height {height} (kernel {})", status["kernel_tip"]["height"]);
    height
}

/// A generated chain with many transactions, served by a bitcoind that loaded it.
fn chain_on_bitcoind(tmp: &std::path::Path) -> (Bitcoind, String, std::path::PathBuf) {
    let out = tmp.join("chain");
    let summary = cairn::generate::ChainGenerator::new(cairn::generate::GenerateOptions { blocks: BLOCKS as u32, txs_per_block: 60, seed: 12 })
        .write_to(&out)
        .unwrap();
    let node = Bitcoind::start(&tmp.join("a"), &[format!("-loadblock={}", out.join("blocks/blk00000.dat").display())]);
    node.wait_for_height(BLOCKS as u64, std::time::Duration::from_secs(120));
    (node, summary.tip.to_string(), out.join("blocks"))
}

/// The index of a clean sync of the same chain, to compare with.
fn clean_rows(tmp: &std::path::Path, connect: &str, tip: &str) -> Vec<(&'static str, Vec<(Box<[u8]>, Box<[u8]>)>)> {
    let dir = tmp.join("clean");
    let cairn = start_cairn(&dir, &[connect.to_string(), "--no-listen".into()]);
    cairn.wait_for(tip, "clean sync");
    cairn.stop();
    index_rows(&dir)
}

fn assert_same_rows(ours: &[(&'static str, Vec<(Box<[u8]>, Box<[u8]>)>)], clean: &[(&'static str, Vec<(Box<[u8]>, Box<[u8]>)>)]) {
    for ((name, a), (_, b)) in ours.iter().zip(clean) {
        assert_eq!(a.len(), b.len(), "{name}: {} rows after the kills, {} in a clean index", a.len(), b.len());
        assert!(a == b, "{name} differs from a clean index");
    }
}

#[test]
fn killed_at_random_instants_during_a_p2p_sync_it_resumes_to_a_clean_index() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, tip, _) = chain_on_bitcoind(tmp.path());
    let connect = format!("--connect=127.0.0.1:{}", a.p2p_port);
    let dir = tmp.path().join("cairn");
    let mut mid_sync = 0;
    for _ in 0..kills() {
        let cairn = start_cairn(&dir, &[connect.clone(), "--no-listen".into()]);
        std::thread::sleep(random_delay(50..3000));
        drop(cairn); // SIGKILL
        mid_sync += usize::from(index_height_after_kill(&dir) < BLOCKS);
    }
    assert!(mid_sync > 0, "no kill landed before the sync was over");
    let cairn = start_cairn(&dir, &[connect.clone(), "--no-listen".into()]);
    cairn.wait_for(&tip, "sync after the kills");
    cairn.stop();
    assert_same_rows(&index_rows(&dir), &clean_rows(tmp.path(), &connect, &tip));
}

#[test]
fn killed_at_random_instants_during_an_import_it_resumes_to_a_clean_index() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, tip, blocks) = chain_on_bitcoind(tmp.path());
    let connect = format!("--connect=127.0.0.1:{}", a.p2p_port);
    let dir = tmp.path().join("cairn");
    let import = || {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"));
        cmd.arg("--datadir").arg(&dir).args(["import", "--blocks-dir"]).arg(&blocks);
        cmd.env("CAIRN_LOG", "warn").stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
        cmd
    };
    let mut mid_import = 0;
    for _ in 0..kills() {
        let mut child = import().spawn().unwrap();
        std::thread::sleep(random_delay(50..3000));
        let _ = child.kill();
        let _ = child.wait();
        mid_import += usize::from(index_height_after_kill(&dir) < BLOCKS);
    }
    assert!(mid_import > 0, "no kill landed before the import was over");
    assert!(import().status().unwrap().success(), "the import after the kills failed");
    assert_same_rows(&index_rows(&dir), &clean_rows(tmp.path(), &connect, &tip));
}

//! Issue 12, part 4: crashes never leave the index stuck. The hard case: after `kill -9` the
//! kernel comes back at its last flush, below the index, having forgotten the blocks above it;
//! then it follows a competing branch. The index must undo blocks the kernel no longer knows,
//! from its own rows, and end equal, row for row, to a fresh index of the same chain.

use crate::common;

use crate::common::{index_rows, start_cairn, Bitcoind};
use cairn::index::IndexDump;

const ADDR: &str = "bcrt1qs758ursh4q9z627kt3pp5yysm78ddny6txaqgw";

#[test]
fn after_a_crash_the_index_undoes_blocks_the_kernel_forgot_and_follows_its_reorg() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Bitcoind::start_core(&tmp.path().join("a"), &[]);
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
    assert_eq!(
        status["kernel_tip"]["height"], 110,
        "the kernel kept blocks it had not flushed: {status}"
    );
    cairn.stop();

    // bitcoind abandons those five blocks for a longer branch.
    let first_lost = a.rpc(&["getblockhash", "111"]);
    a.rpc(&["invalidateblock", &first_lost]);
    a.rpc(&[
        "generatetoaddress",
        "8",
        "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080",
    ]);
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
        assert_eq!(
            a.len(),
            b.len(),
            "{name}: {} rows after the crash, {} fresh",
            a.len(),
            b.len()
        );
        assert!(a == b, "{name} differs from a fresh index");
    }
}

/// How many kills a run makes: `CAIRN_CRASH_KILLS` (`contrib/crash-test.sh` asks for 50), else a
/// number that keeps the suite quick.
fn kills() -> usize {
    std::env::var("CAIRN_CRASH_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(6)
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
        .args(["--network", "regtest", "--datadir"])
        .arg(dir)
        .args(["status", "--json"])
        .env("CAIRN_LOG", "warn")
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let height = status["index_tip"]["height"].as_i64().unwrap_or(-1);
    eprintln!(
        "killed with the index at height {height} (kernel {})",
        status["kernel_tip"]["height"]
    );
    height
}

/// A generated chain with many transactions, served by a bitcoind that loaded it.
fn chain_on_bitcoind(tmp: &std::path::Path) -> (Bitcoind, String, std::path::PathBuf) {
    let out = tmp.join("chain");
    let summary = cairn::generate::ChainGenerator::new(cairn::generate::GenerateOptions {
        blocks: BLOCKS as u32,
        txs_per_block: 60,
        seed: 12,
    })
    .write_to(&out)
    .unwrap();
    let node = Bitcoind::start_core(
        &tmp.join("a"),
        &[format!(
            "-loadblock={}",
            out.join("blocks/blk00000.dat").display()
        )],
    );
    node.wait_for_height(BLOCKS as u64, std::time::Duration::from_secs(120));
    (node, summary.tip.to_string(), out.join("blocks"))
}

/// The index of a clean sync of the same chain and its Electrum answers, to compare with.
fn clean_rows(tmp: &std::path::Path, connect: &str, tip: &str) -> (IndexDump, Vec<String>) {
    let dir = tmp.join("clean");
    let answers = answers_at_tip(&dir, &[connect.to_string()], tip);
    (index_rows(&dir), answers)
}

/// Requests whose answers must not depend on the kills: the tip, headers with proofs, and the
/// history, balance and unspent outputs of 30 scripts the chain pays, and 20 of its transactions
/// with their proofs.
fn requests() -> Vec<String> {
    let blocks = common::chain(BLOCKS as u32, 60, 12);
    let e = common::expected(&blocks);
    let mut scripts: Vec<_> = e.history.keys().map(|sh| sh.to_electrum_hex()).collect();
    scripts.sort();
    let mut txs: Vec<_> = e
        .positions
        .iter()
        .map(|(txid, (height, _))| (txid.to_string(), *height))
        .collect();
    txs.sort();
    let mut out = vec![serde_json::json!({"method": "blockchain.headers.subscribe", "params": []})];
    out.extend(
        (1..BLOCKS).step_by(97).map(
            |h| serde_json::json!({"method": "blockchain.block.header", "params": [h, BLOCKS]}),
        ),
    );
    for sh in scripts.iter().step_by(scripts.len() / 30).take(30) {
        for method in ["get_history", "get_balance", "listunspent"] {
            out.push(serde_json::json!({"method": format!("blockchain.scripthash.{method}"), "params": [sh]}));
        }
    }
    for (txid, height) in txs.iter().step_by(txs.len() / 20).take(20) {
        out.push(
            serde_json::json!({"method": "blockchain.transaction.get", "params": [txid, false]}),
        );
        out.push(serde_json::json!({"method": "blockchain.transaction.get_merkle", "params": [txid, height]}));
    }
    out.into_iter()
        .enumerate()
        .map(|(id, mut r)| {
            r["id"] = id.into();
            r.to_string()
        })
        .collect()
}

/// Starts cairn on `dir` (with `args`), waits for `tip`, asks [`requests`] over Electrum and
/// stops it: the answers, one line each.
fn answers_at_tip(dir: &std::path::Path, args: &[String], tip: &str) -> Vec<String> {
    use std::io::{BufRead, Write};
    let port = common::free_port();
    let mut args = args.to_vec();
    args.extend([
        "--no-listen".to_string(),
        format!("--electrum-addr=127.0.0.1:{port}"),
    ]);
    let cairn = start_cairn(dir, &args);
    cairn.wait_for(tip, "sync before asking");
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let answers = requests()
        .iter()
        .map(|request| {
            (&stream)
                .write_all(format!("{request}\n").as_bytes())
                .unwrap();
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            assert!(!line.contains("\"error\""), "{request}: {line}");
            line
        })
        .collect();
    cairn.stop();
    answers
}

/// Every answer equal to the clean index's.
fn assert_same_answers(ours: &[String], clean: &[String]) {
    assert_eq!(ours.len(), clean.len());
    for (a, b) in ours.iter().zip(clean) {
        assert_eq!(a, b, "an Electrum answer differs from a clean index's");
    }
}

fn assert_same_rows(ours: &IndexDump, clean: &IndexDump) {
    for ((name, a), (_, b)) in ours.iter().zip(clean) {
        assert_eq!(
            a.len(),
            b.len(),
            "{name}: {} rows after the kills, {} in a clean index",
            a.len(),
            b.len()
        );
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
    let answers = answers_at_tip(&dir, std::slice::from_ref(&connect), &tip);
    let (rows, clean_answers) = clean_rows(tmp.path(), &connect, &tip);
    assert_same_rows(&index_rows(&dir), &rows);
    assert_same_answers(&answers, &clean_answers);
}

#[test]
fn killed_at_random_instants_during_an_import_it_resumes_to_a_clean_index() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, tip, blocks) = chain_on_bitcoind(tmp.path());
    let connect = format!("--connect=127.0.0.1:{}", a.p2p_port);
    let dir = tmp.path().join("cairn");
    let import = || {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"));
        cmd.args(["--network", "regtest", "--datadir"])
            .arg(&dir)
            .args(["import", "--blocks-dir"])
            .arg(&blocks);
        cmd.env("CAIRN_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
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
    assert!(
        import().status().unwrap().success(),
        "the import after the kills failed"
    );
    let (rows, clean_answers) = clean_rows(tmp.path(), &connect, &tip);
    assert_same_rows(&index_rows(&dir), &rows);
    assert_same_answers(&answers_at_tip(&dir, &[], &tip), &clean_answers);
}

/// Issue 28: turned on over an indexed chain, `silent_payments` builds the tweaks of the blocks
/// indexed before on start, a batch of blocks and its progress mark at a time. Killed at random
/// instants while it builds them, cairn resumes on the next start, and its rows (tweaks and all)
/// end equal to those of an index built with tweaks from the start.
#[test]
fn killed_at_random_instants_while_building_tweaks_it_resumes_to_a_clean_index() {
    use cairn::store::schema::meta;
    let tmp = tempfile::tempdir().unwrap();
    let chain = tmp.path().join("chain");
    cairn::generate::ChainGenerator::new(cairn::generate::GenerateOptions {
        blocks: BLOCKS as u32,
        txs_per_block: 60,
        seed: 12,
    })
    .write_to(&chain)
    .unwrap();
    let import = |dir: &std::path::Path, tweaks: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"));
        cmd.args(["--network", "regtest", "--datadir"]).arg(dir);
        if tweaks {
            cmd.arg("--silent-payments");
        }
        let status = cmd
            .args(["import", "--quiet", "--blocks-dir"])
            .arg(chain.join("blocks"))
            .env("CAIRN_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "import into {dir:?}");
    };
    let dir = tmp.path().join("cairn");
    import(&dir, false);
    let tweaks_on = || vec!["--silent-payments".to_string(), "--no-listen".to_string()];
    // Killed later each time nothing was built yet (starting takes a while), until the build
    // is over: the kills land before, between and after its batches.
    let (mut mid_build, mut after) = (0, 100);
    for _ in 0..4 * kills() {
        let cairn = start_cairn(&dir, &tweaks_on());
        std::thread::sleep(random_delay(after..after + 100));
        drop(cairn); // SIGKILL
        let store = cairn::store::Store::open(&dir.join("regtest/index")).unwrap();
        let meta_row = |key| store.get(cairn::store::schema::cf::META, key).unwrap();
        let at =
            meta_row(meta::TWEAK_BACKFILL).map(|h| u32::from_le_bytes(h[..4].try_into().unwrap()));
        eprintln!("killed with the tweaks built up to {at:?}");
        match at {
            None if meta_row(meta::TWEAKS_OFF).is_none() => break,
            Some(h) if h > 0 => mid_build += 1,
            _ => after += 100,
        }
    }
    assert!(mid_build > 0, "no kill landed while the tweaks were built");
    // Once more to the end: `server.features` says `silent_payments` once every block has them.
    let port = common::free_port();
    let mut args = tweaks_on();
    args.push(format!("--electrum-addr=127.0.0.1:{port}"));
    let cairn = start_cairn(&dir, &args);
    let started = std::time::Instant::now();
    loop {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        if let Ok(mut c) = std::panic::catch_unwind(|| common::lines::Lines::connect(addr, "1.4")) {
            let features = c.call("server.features", serde_json::json!([]));
            if features["result"]["silent_payments"].is_array() {
                break;
            }
        }
        assert!(
            started.elapsed().as_secs() < 120,
            "the tweaks were never built"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    cairn.stop();
    let clean = tmp.path().join("clean");
    import(&clean, true);
    assert_same_rows(&rows_with_tweaks(&dir), &rows_with_tweaks(&clean));
}

/// Every row of the index in `datadir`, opened with tweaks on (opened without, it would mark
/// them off).
fn rows_with_tweaks(datadir: &std::path::Path) -> IndexDump {
    let store =
        std::sync::Arc::new(cairn::store::Store::open(&datadir.join("regtest/index")).unwrap());
    let options = cairn::index::IndexOptions {
        filters: true,
        tweaks_from: Some(0),
    };
    let index = cairn::index::Index::open_with_options(store, None, options).unwrap();
    let rows = index.dump().unwrap();
    assert!(
        rows.iter()
            .any(|(name, r)| *name == "tweaks" && !r.is_empty()),
        "no tweak rows in {datadir:?}"
    );
    rows
}

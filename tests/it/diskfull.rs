//! Issue 12, part 4: a full disk. cairn's data folder sits on a small tmpfs; a file fills it
//! while a bitcoind keeps mining. cairn must stop taking blocks, keep answering from what it has,
//! and go on by itself once the file is removed, ending with the index a fresh sync builds.
//! Needs root (`mount -t tmpfs`), as `.ci/run` has.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::tmpfs::Tmpfs;
use crate::common::{index_rows, start_cairn, Bitcoind};

const ADDR: &str = "bcrt1qs758ursh4q9z627kt3pp5yysm78ddny6txaqgw";

/// The Electrum server's whole answer to `blockchain.headers.subscribe`.
fn headers_subscribe(port: u16) -> serde_json::Value {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"{\"id\":1,\"method\":\"blockchain.headers.subscribe\",\"params\":[]}\n")
        .unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

/// The tip height the Electrum server serves.
fn electrum_height(port: u16) -> u64 {
    let answer = headers_subscribe(port);
    answer["result"]["height"]
        .as_u64()
        .unwrap_or_else(|| panic!("no height in {answer}"))
}

/// The error the Electrum server answers instead of its tip.
fn electrum_error(port: u16) -> String {
    let answer = headers_subscribe(port);
    answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no error in {answer}"))
        .to_string()
}

/// Waits until cairn's status says the disk is low, and returns that status.
fn wait_low(cairn: &common::Cairn) -> serde_json::Value {
    cairn.status_when(|s| s["disk"]["low"] == true)
}

/// Ends with the index equal, row for row, to a fresh sync's of the same chain.
fn assert_as_fresh(tmp: &Path, dir: &Path, connect: &str, tip: &str) {
    let fresh_dir = tmp.join("fresh");
    let fresh = start_cairn(&fresh_dir, &[connect.to_string(), "--no-listen".into()]);
    fresh.wait_for(tip, "fresh sync");
    fresh.stop();
    for ((name, a), (_, b)) in index_rows(dir).iter().zip(&index_rows(&fresh_dir)) {
        assert_eq!(
            a.len(),
            b.len(),
            "{name}: {} rows after the full disk, {} fresh",
            a.len(),
            b.len()
        );
        assert!(a == b, "{name} differs from a fresh index");
    }
}

/// Mines `n` blocks with a few wallet transactions each on `node`.
fn mine_with_txs(node: &Bitcoind, n: usize) {
    for _ in 0..n {
        for _ in 0..3 {
            node.rpc(&["sendtoaddress", ADDR, "0.1"]);
        }
        node.rpc(&["generatetoaddress", "1", ADDR]);
    }
}

fn setup(tmp: &Path, mib: u64) -> (Tmpfs, Bitcoind, String) {
    let fs = Tmpfs::mount(&tmp.join("mnt"), mib);
    let (node, _) = Bitcoind::with_wallet(&tmp.join("a"), 110);
    let connect = format!("--connect=127.0.0.1:{}", node.p2p_port);
    (fs, node, connect)
}

#[test]
fn below_the_free_space_margin_no_blocks_are_taken_until_space_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let (fs, node, connect) = setup(tmp.path(), 400);
    let dir = fs.0.join("cairn");
    let port = common::free_port();
    let config = tmp.path().join("cairn.toml");
    std::fs::write(&config, "min_free_space_mb = 150\n").unwrap();
    let args = [
        connect.clone(),
        "--no-listen".into(),
        format!("--electrum-addr=127.0.0.1:{port}"),
        format!("--config={}", config.display()),
    ];
    let cairn = start_cairn(&dir, &args);
    cairn.wait_for(&node.rpc(&["getbestblockhash"]), "first sync");
    mine_with_txs(&node, 5);
    cairn.wait_for(&node.rpc(&["getbestblockhash"]), "sync to 115");

    let filler = fs.fill(100 << 20);
    let low = wait_low(&cairn);
    assert_eq!(low["kernel_tip"]["height"], 115, "{low}");
    mine_with_txs(&node, 10);
    let tip = node.rpc(&["getbestblockhash"]);
    // Headers arrive, blocks wait: the height stays while Electrum keeps answering.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let s = cairn.status();
        assert_eq!(
            s["kernel_tip"]["height"], 115,
            "a block was taken with the disk low: {s}"
        );
        assert_eq!(electrum_height(port), 115);
        std::thread::sleep(Duration::from_millis(250));
    }

    std::fs::remove_file(filler).unwrap();
    cairn.wait_for(&tip, "sync once space is back");
    assert_eq!(electrum_height(port), 125);
    assert_eq!(cairn.status()["disk"]["low"], false);
    cairn.stop();
    assert_as_fresh(tmp.path(), &dir, &connect, &tip);
}

/// A generated chain of `blocks` blocks with 60 transactions each, served by a bitcoind.
fn generated_chain_on_bitcoind(tmp: &Path, blocks: u32) -> (Bitcoind, String) {
    let out = tmp.join("chain");
    let options = cairn::generate::GenerateOptions {
        blocks,
        txs_per_block: 60,
        seed: 21,
    };
    let summary = cairn::generate::ChainGenerator::new(options)
        .write_to(&out)
        .unwrap();
    let node = Bitcoind::start(
        &tmp.join("a"),
        &[format!(
            "-loadblock={}",
            out.join("blocks/blk00000.dat").display()
        )],
    );
    node.wait_for_height(u64::from(blocks), Duration::from_secs(120));
    (node, summary.tip.to_string())
}

#[test]
fn a_disk_filled_mid_sync_stops_the_kernel_and_cairn_keeps_answering_then_restarts_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = Tmpfs::mount(&tmp.path().join("mnt"), 300);
    let (node, tip) = generated_chain_on_bitcoind(tmp.path(), 1_000);
    let connect = format!("--connect=127.0.0.1:{}", node.p2p_port);
    let dir = fs.0.join("cairn");
    let port = common::free_port();
    let config = tmp.path().join("cairn.toml");
    // A margin below the kernel's own (Core's 50 MiB and a block-file chunk): the kernel meets
    // the full disk first, and stops for good.
    std::fs::write(&config, "min_free_space_mb = 1\n").unwrap();
    let args = [
        connect.clone(),
        "--no-listen".into(),
        format!("--electrum-addr=127.0.0.1:{port}"),
        format!("--config={}", config.display()),
    ];
    let cairn = start_cairn(&dir, &args);
    // Mid-sync: somewhere after the first blocks, early enough that the kernel has to grow its
    // block or undo files again.
    let at = 100 + rand::random::<u64>() % 300;
    cairn.status_when(|s| s["index_tip"]["height"].as_u64().is_some_and(|h| h >= at));
    let filler = fs.fill(8 << 20);
    let stopped = cairn.status_when(|s| s["kernel_error"].is_string());
    eprintln!("disk filled at height {at}: {stopped}");
    assert!(
        stopped["kernel_error"]
            .as_str()
            .unwrap()
            .contains("Disk space is too low"),
        "{stopped}"
    );
    // The indexer ends at the stopped kernel's last tip, and stays there.
    let settled = cairn
        .status_when(|s| s["index_tip"]["hash"].is_string() && s["index_tip"] == s["kernel_tip"]);
    // Mid-sync, so Electrum says how far it got (issue 13's rule), and that does not move.
    let height = settled["kernel_tip"]["height"].as_u64().unwrap();
    assert!(height < 1_000);
    let syncing = format!("server is syncing: height {height} of 1000");
    for _ in 0..10 {
        assert_eq!(
            electrum_error(port),
            syncing,
            "Electrum moved with the kernel stopped"
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    std::fs::remove_file(filler).unwrap();
    cairn.wait_for(&tip, "sync once space is back");
    assert_eq!(electrum_height(port), 1_000);
    assert!(cairn.status()["kernel_error"].is_null());
    cairn.stop();
    assert_as_fresh(tmp.path(), &dir, &connect, &tip);
}

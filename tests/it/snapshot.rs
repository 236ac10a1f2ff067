//! `cairn snapshot DIR` on a node that serves a hundred Electrum clients while blocks come: the
//! node started from it answers as its source (Electrum, Esplora, filters, tweaks; the index row
//! for row, at the snapshot's tip and after both caught up), another network is refused, and a
//! snapshot killed at random instants or stopped by a full disk is never started from.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{json, Value};

use crate::common::lines::Lines;
use crate::common::tmpfs::Tmpfs;
use crate::common::{
    cairn_in, free_addr, index_rows, start_cairn_from, succeeded, Bitcoind, Cairn,
};

/// A node serving Electrum and HTTP on `addrs`, with filters and silent-payment tweaks.
fn serving(dir: &Path, node: &Bitcoind, addrs: (SocketAddr, SocketAddr)) -> Cairn {
    start_cairn_from(
        dir,
        node,
        &[
            format!("--electrum-addr={}", addrs.0),
            format!("--http-addr={}", addrs.1),
            "--silent-payments".into(),
        ],
    )
}

/// `cairn snapshot into` asked of the node on `source`: its report.
fn take_snapshot(source: &Path, into: &Path) -> Value {
    let out = cairn_in(source).arg("snapshot").arg(into).output().unwrap();
    serde_json::from_str(&succeeded(&out)).unwrap()
}

/// `cairn run` on `datadir` for `network`, which must fail at once: its error.
fn refused_run(datadir: &Path, network: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["--network", network, "--datadir"])
        .arg(datadir)
        .args([
            "--admin-addr",
            "127.0.0.1:0",
            "--electrum-addr",
            "127.0.0.1:0",
        ])
        .args(["--no-listen", "run"])
        .env_remove("CAIRN_CONFIG")
        .output()
        .unwrap();
    assert!(!out.status.success(), "cairn run on {datadir:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Pays twenty fresh wallet addresses (segwit v0 and taproot) and mines them in.
fn pay_some(node: &Bitcoind, mine: &str) -> Vec<String> {
    let kinds = ["bech32", "bech32m"];
    let addresses: Vec<String> = (0..20)
        .map(|i| node.rpc(&["getnewaddress", "", kinds[i % 2]]))
        .collect();
    for (i, a) in addresses.iter().enumerate() {
        node.rpc(&["sendtoaddress", a, &format!("0.{:02}", i + 1)]);
    }
    node.rpc(&["generatetoaddress", "1", mine]);
    addresses
}

/// What a node answers about the chain up to `height`: Electrum headers, histories and tweaks,
/// Esplora blocks and transactions, and filters.
fn answers(
    addrs: (SocketAddr, SocketAddr),
    node: &Bitcoind,
    paid: &[String],
    height: u64,
) -> Vec<Value> {
    let mut out = Vec::new();
    let mut electrum = Lines::connect(addrs.0, "1.4");
    let got = |path: String| {
        let (code, _, body) = common::http::get(addrs.1, &path);
        assert_eq!(code, 200, "GET {path}: {body}");
        Value::String(body)
    };
    for h in (0..=height).step_by(5) {
        for method in ["blockchain.block.header", "blockchain.block.tweaks"] {
            let answer = electrum.call(method, json!([h]));
            assert!(
                answer["result"].is_string() || answer["result"].is_array(),
                "{method} {h}: {answer}"
            );
            out.push(answer["result"].clone());
        }
        let hash = node.rpc(&["getblockhash", &h.to_string()]);
        for path in ["", "/txids"] {
            out.push(got(format!("/block/{hash}{path}")));
        }
        out.push(got(format!("/filter/{hash}")));
    }
    for address in paid {
        out.push(got(format!("/address/{address}/txs")));
        out.push(got(format!("/address/{address}/utxo")));
    }
    out
}

/// A hundred Electrum clients asking for headers until `stop`: every answer counted, and every
/// request that got none.
fn clients(
    addr: SocketAddr,
    stop: &Arc<AtomicBool>,
) -> (
    Vec<std::thread::JoinHandle<()>>,
    Arc<AtomicU64>,
    Arc<AtomicU64>,
) {
    let (answered, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let handles = (0..100)
        .map(|i| {
            let (stop, answered, failed) = (stop.clone(), answered.clone(), failed.clone());
            std::thread::spawn(move || {
                let mut c = Lines::connect(addr, "1.4");
                while !stop.load(Ordering::SeqCst) {
                    match c.try_call("blockchain.block.header", json!([i % 100])) {
                        Some(v) if v.get("result").is_some() => {
                            answered.fetch_add(1, Ordering::SeqCst)
                        }
                        _ => failed.fetch_add(1, Ordering::SeqCst),
                    };
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        })
        .collect();
    (handles, answered, failed)
}

/// Sets its flag when dropped, panicking or not.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_node_started_from_a_snapshot_answers_as_its_source() {
    let tmp = tempfile::tempdir().unwrap();
    let (node, mine) = Bitcoind::with_wallet(&tmp.path().join("bitcoind"), 110);
    let paid = pay_some(&node, &mine);
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let src_addrs = (free_addr(), free_addr());
    let source = serving(&src, &node, src_addrs);
    source.wait_for(&node.rpc(&["getbestblockhash"]), "source synced");

    // A hundred clients, and a block with a payment every 300 ms, while the snapshot is taken.
    let stop = Arc::new(AtomicBool::new(false));
    let (handles, answered, failed) = clients(src_addrs.0, &stop);
    let (before, report) = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                let to = node.rpc(&["getnewaddress", "", "bech32m"]);
                node.rpc(&["sendtoaddress", &to, "0.5"]);
                node.rpc(&["generatetoaddress", "1", &mine]);
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        // Stopped however this thread ends: a failed snapshot must fail the test, not leave
        // the block maker (which the scope waits for) running forever.
        let _stop = StopOnDrop(&stop);
        std::thread::sleep(Duration::from_secs(2));
        let before = answered.load(Ordering::SeqCst);
        let report = take_snapshot(&src, &dst);
        std::thread::sleep(Duration::from_secs(2));
        (before, report)
    });
    for h in handles {
        h.join().unwrap();
    }
    let snapshot_height = report["height"].as_u64().unwrap();
    eprintln!(
        "snapshot at height {snapshot_height}: block submissions paused {} ms, {} files, {} bytes, {:.2} s; {} answers to 100 clients meanwhile",
        report["pause_ms"], report["files"], report["bytes"], report["seconds"].as_f64().unwrap(),
        answered.load(Ordering::SeqCst) - before,
    );
    assert_eq!(failed.load(Ordering::SeqCst), 0, "a client went unanswered");
    assert!(
        answered.load(Ordering::SeqCst) > before,
        "no client was answered"
    );
    assert!(report["staged"]["linked"].as_u64().unwrap() > 0, "{report}");

    // Kept as it was taken, for the rows at its tip.
    let at_tip = tmp.path().join("at-tip");
    let cp = Command::new("cp")
        .arg("-a")
        .arg(&dst)
        .arg(&at_tip)
        .status()
        .unwrap();
    assert!(cp.success());

    let err = refused_run(&dst, "signet");
    assert!(
        err.contains("holds a snapshot of regtest, not signet"),
        "{err}"
    );

    // Started from the snapshot: at its tip from the first status, then caught up over P2P.
    let dst_addrs = (free_addr(), free_addr());
    let restored = serving(&dst, &node, dst_addrs);
    let first = restored.status();
    assert!(
        first["kernel_tip"]["height"].as_u64().unwrap() >= snapshot_height
            && first["index_tip"]["height"].as_u64().unwrap() >= snapshot_height,
        "the restored node did not start at the snapshot's tip: {first}"
    );
    assert!(dst.join("regtest/snapshot.verified.json").exists());
    let tip = node.rpc(&["getbestblockhash"]);
    source.wait_for(&tip, "source at the final tip");
    restored.wait_for(&tip, "restored node caught up");
    let height = node.rpc_json(&["getblockcount"]).as_u64().unwrap();
    assert_eq!(
        answers(dst_addrs, &node, &paid, height),
        answers(src_addrs, &node, &paid, height),
        "the restored node answers otherwise"
    );
    source.stop();
    restored.stop();
    assert!(
        index_rows(&dst) == index_rows(&src),
        "the indexes differ after catching up"
    );

    // At the snapshot's tip, its index is the one a reindex of its kernel's blocks builds.
    let rebuilt = tmp.path().join("rebuilt");
    let cp = Command::new("cp")
        .arg("-a")
        .arg(&at_tip)
        .arg(&rebuilt)
        .status()
        .unwrap();
    assert!(cp.success());
    succeeded(
        &cairn_in(&rebuilt)
            .args(["--silent-payments", "reindex"])
            .output()
            .unwrap(),
    );
    assert!(
        index_rows(&at_tip) == index_rows(&rebuilt),
        "the snapshot's index is not its kernel's chain indexed"
    );
}

#[test]
fn a_snapshot_killed_or_out_of_space_is_never_started_from() {
    let tmp = tempfile::tempdir().unwrap();
    let (node, mine) = Bitcoind::with_wallet(&tmp.path().join("bitcoind"), 110);
    pay_some(&node, &mine);
    let tip = node.rpc(&["getbestblockhash"]);
    let src = tmp.path().join("src");
    let source = start_cairn_from(&src, &node, &[]);
    source.wait_for(&tip, "source synced");

    // Not into the node's own folder, where the next snapshot would stage this one.
    let out = cairn_in(&src)
        .arg("snapshot")
        .arg(src.join("regtest/snap"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("inside the node's data folder"),
        "{err}"
    );

    // A full disk: DIR on a tmpfs smaller than the snapshot.
    let small = Tmpfs::mount(&tmp.path().join("small"), 4);
    let out = cairn_in(&src)
        .arg("snapshot")
        .arg(tmp.path().join("small"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("No space left"), "{err}");
    assert!(
        !tmp.path().join("small/regtest").exists()
            && !tmp.path().join("small/regtest.partial").exists()
    );
    assert!(
        !src.join("regtest/snapshot.staging").exists(),
        "the staging was left behind"
    );
    assert_eq!(
        source.status()["index_tip"]["hash"],
        tip,
        "the source stopped serving"
    );
    drop(small);

    // A whole snapshot's duration, then kills at random instants from when it began (its
    // partial folder is there) to half as long again as it takes.
    let whole = take_snapshot(&src, &tmp.path().join("whole"))["seconds"]
        .as_f64()
        .unwrap();
    let whole = Duration::from_secs_f64(whole * 1.5);
    drop(source);
    let mut rng = rand::thread_rng();
    let mut outcomes = [0u32; 2];
    for round in 0..8 {
        let source = start_cairn_from(&src, &node, &[]);
        assert!(
            !src.join("regtest/snapshot.staging").exists(),
            "a killed snapshot's staging stayed"
        );
        source.wait_for(&tip, "source restarted");
        let into = tmp.path().join(format!("killed-{round}"));
        let mut asked = cairn_in(&src)
            .arg("snapshot")
            .arg(&into)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (finished, partial) = (into.join("regtest"), into.join("regtest.partial"));
        let asked_at = Instant::now();
        while !partial.exists() && !finished.exists() {
            assert!(
                asked_at.elapsed() < Duration::from_secs(30),
                "the snapshot never began"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        let after = Duration::from_micros(rng.gen_range(0..(whole.as_micros() as u64).max(1)));
        std::thread::sleep(after);
        drop(source); // SIGKILL
        let _ = asked.wait();
        if finished.exists() {
            outcomes[1] += 1;
            let restored = start_cairn_from(&into, &node, &[]);
            restored.wait_for(&tip, "started from a snapshot finished before the kill");
            restored.stop();
        } else {
            outcomes[0] += 1;
            let err = refused_run(&into, "regtest");
            assert!(err.contains("interrupted"), "{err}");
        }
    }
    eprintln!(
        "killed at random within {whole:?} of a snapshot's start: {} partial (refused), {} whole (started)",
        outcomes[0], outcomes[1]
    );
    let source = start_cairn_from(&src, &node, &[]);
    source.wait_for(&tip, "source after the kills");
    source.stop();
}

//! The `cairn` binary as a user runs it: status over the admin RPC, kill -9 during import, and
//! bad input of every kind ending in a clear message and a non-zero exit.

use crate::common;
use bitcoin::hex::{DisplayHex, FromHex};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{cairn_in as cairn, succeeded};

fn ok(out: Output) -> String {
    succeeded(&out)
}

fn fails(out: Output) -> String {
    assert!(
        !out.status.success(),
        "should have failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn status(datadir: &Path) -> serde_json::Value {
    let out = ok(cairn(datadir).args(["status", "--json"]).output().unwrap());
    serde_json::from_str(out.trim()).unwrap()
}

/// Every file below `dir` with its size and modification time.
fn files_and_times(dir: &Path) -> Vec<(std::path::PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                todo.push(entry.path());
            } else {
                out.push((entry.path(), meta.len(), meta.modified().unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn generate(out: &Path, blocks: u32, txs: u32, seed: u64) -> String {
    let text = ok(Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "generate",
            "--blocks",
            &blocks.to_string(),
            "--txs-per-block",
            &txs.to_string(),
        ])
        .args(["--seed", &seed.to_string(), "--out"])
        .arg(out)
        .output()
        .unwrap());
    // "... tip <hash>"
    text.trim().rsplit(' ').next().unwrap().to_string()
}

#[test]
fn status_asks_the_running_node_and_stop_ends_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dd = tmp.path();
    ok(cairn(dd)
        .args(["import", "--quiet", "--blocks-file"])
        .arg(common::data("regtest-206-blocks.hex.txt"))
        .output()
        .unwrap());
    let before = files_and_times(dd);
    let offline = status(dd);
    assert_eq!(
        before,
        files_and_times(dd),
        "status wrote in a stopped node's folder"
    );
    assert_eq!(offline["network"], "regtest");
    assert_eq!(offline["kernel_tip"]["height"], 206);
    assert_eq!(
        offline["index_tip"], offline["kernel_tip"],
        "import indexes as it validates"
    );
    assert_eq!(offline["running"], false);

    let mut run = cairn(dd)
        .args([
            "--admin-addr",
            "127.0.0.1:0",
            "--electrum-addr",
            "127.0.0.1:0",
            "run",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let addr_file = dd.join("regtest/admin.addr");
    let start = Instant::now();
    while !addr_file.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "run never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let online = status(dd);
    assert_eq!(online["running"], true);
    assert_eq!(online["kernel_tip"], offline["kernel_tip"]);
    // A second writer is refused while the node runs.
    let err = fails(
        cairn(dd)
            .args(["import", "--blocks-file"])
            .arg(common::data("regtest-206-blocks.hex.txt"))
            .output()
            .unwrap(),
    );
    assert!(err.contains("in use by a running cairn"), "{err}");
    // Without the cookie the admin RPC refuses.
    let addr = std::fs::read_to_string(&addr_file).unwrap();
    let mut stream = std::net::TcpStream::connect(addr.trim()).unwrap();
    use std::io::{Read, Write};
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"status"}"#;
    write!(stream, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");

    ok(cairn(dd).arg("stop").output().unwrap());
    let start = Instant::now();
    loop {
        if let Some(code) = run.try_wait().unwrap() {
            assert!(code.success());
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "run did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!addr_file.exists());
    assert!(!dd.join("regtest/.cookie").exists());
}

#[test]
fn kill_9_during_import_then_restart_reaches_the_same_tip() {
    let tmp = tempfile::tempdir().unwrap();
    let chain = tmp.path().join("chain");
    let tip = generate(&chain, 400, 60, 3);
    let dd = tmp.path().join("node");
    for delay_ms in [150u64, 600, 1100] {
        let mut child = cairn(&dd)
            .args(["import", "--quiet", "--blocks-dir"])
            .arg(chain.join("blocks"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        // Whatever was committed is readable at once, without opening anything; the kernel's
        // tip is known once it opens again.
        let s = status(&dd);
        assert_eq!(s["running"], false, "{s}");
        match s["state"].as_str() {
            Some(state) => assert!(state.starts_with("stopped without a clean exit"), "{s}"),
            // Killed after the import ended.
            None => assert!(s["kernel_tip"]["height"].as_i64().unwrap() >= 0, "{s}"),
        }
    }
    ok(cairn(&dd)
        .args(["import", "--quiet", "--blocks-dir"])
        .arg(chain.join("blocks"))
        .output()
        .unwrap());
    let s = status(&dd);
    assert_eq!(s["kernel_tip"]["height"], 400);
    assert_eq!(s["kernel_tip"]["hash"], tip);
    assert_eq!(s["index_tip"]["hash"], tip);

    // The index after the kills holds exactly what a fresh index of the same chain holds.
    let fresh = tmp.path().join("fresh");
    ok(cairn(&fresh)
        .args(["import", "--quiet", "--blocks-dir"])
        .arg(chain.join("blocks"))
        .output()
        .unwrap());
    let dump = |dir: &Path| {
        let store =
            std::sync::Arc::new(cairn::store::Store::open(&dir.join("regtest/index")).unwrap());
        cairn::index::Index::open(store, None)
            .unwrap()
            .dump()
            .unwrap()
    };
    assert!(
        dump(&dd) == dump(&fresh),
        "index after kill -9 differs from a fresh index"
    );
}

/// `cairn generate --wallet-per-mille` out of its range, not a number, or without a wallet to
/// pay: refused with the option named, nothing written.
#[test]
fn a_wallet_share_that_cannot_be_used_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("chain");
    let with = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["generate", "--blocks", "2", "--out"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    let err = fails(with(&["--wallet-per-mille", "2"]));
    assert!(err.contains("--wallet-addresses"), "{err}");
    // A negative share reads as an unknown flag: refused too.
    fails(with(&[
        "--wallet-addresses",
        "3",
        "--wallet-per-mille",
        "-1",
    ]));
    for share in ["0", "1001", "x", "99999999999"] {
        let err = fails(with(&[
            "--wallet-addresses",
            "3",
            "--wallet-per-mille",
            share,
        ]));
        assert!(err.contains("--wallet-per-mille"), "{share}: {err}");
    }
    assert!(!out.exists(), "nothing written");
}

#[test]
fn bad_input_stops_with_a_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let dd = tmp.path().join("node");

    // A config typo names the option.
    let cfg = tmp.path().join("bad.toml");
    std::fs::write(&cfg, "network = \"regtest\"\ndatadri = \"/x\"\n").unwrap();
    let err = fails(
        cairn(&dd)
            .arg("--config")
            .arg(&cfg)
            .args(["status"])
            .output()
            .unwrap(),
    );
    assert!(err.contains("datadri"), "{err}");

    // A blk file whose last record was cut short (a node killed mid-write) imports up to it, as
    // Core's -reindex reads it.
    let chain = tmp.path().join("chain");
    generate(&chain, 120, 5, 9);
    let blk = chain.join("blocks/blk00000.dat");
    let bytes = std::fs::read(&blk).unwrap();
    std::fs::write(&blk, &bytes[..bytes.len() - 100]).unwrap();
    let out = cairn(&tmp.path().join("torn"))
        .args(["import", "--quiet", "--blocks-dir"])
        .arg(chain.join("blocks"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("at height 119"),
        "{text}"
    );

    // An invalid block (a bad merkle root) names its hash, height and the kernel's reason; the
    // blocks before it stay validated.
    let lines: Vec<String> = std::fs::read_to_string(chain.join("blocks.hex"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let mut bad: bitcoin::Block =
        bitcoin::consensus::deserialize(&Vec::<u8>::from_hex(&lines[50]).unwrap()).unwrap();
    bad.header.merkle_root =
        bitcoin::TxMerkleNode::from_raw_hash(bitcoin::hashes::Hash::all_zeros());
    cairn::generate::grind(&mut bad.header);
    let mut text = lines[..50].join("\n");
    text.push('\n');
    text.push_str(&bitcoin::consensus::serialize(&bad).to_lower_hex_string());
    let hexfile = tmp.path().join("bad.hex");
    std::fs::write(&hexfile, text).unwrap();
    let err = fails(
        cairn(&dd)
            .args(["import", "--quiet", "--blocks-file"])
            .arg(&hexfile)
            .output()
            .unwrap(),
    );
    assert!(err.contains(&bad.block_hash().to_string()), "{err}");
    assert!(
        err.contains("height 51") && err.contains("bad-txnmrklroot"),
        "{err}"
    );
    assert!(err.contains("line 51"), "{err}");
    assert_eq!(status(&dd)["kernel_tip"]["height"], 50);

    // Non-hex input names the line.
    std::fs::write(&hexfile, "zz\n").unwrap();
    let err = fails(
        cairn(&dd)
            .args(["import", "--blocks-file"])
            .arg(&hexfile)
            .output()
            .unwrap(),
    );
    assert!(err.contains("line 1"), "{err}");

    // A data dir of another network, or of another program, is refused.
    let other = tmp.path().join("other");
    // `status` on a folder nothing ran in says so and creates nothing.
    let told = ok(cairn(&other).args(["status", "--json"]).output().unwrap());
    let told: serde_json::Value = serde_json::from_str(&told).unwrap();
    assert_eq!(told["running"], false, "{told}");
    assert!(
        told["state"].as_str().unwrap().contains("no data dir"),
        "{told}"
    );
    assert!(!other.exists(), "status created {}", other.display());
    ok(cairn(&other)
        .args(["import", "--quiet", "--blocks-file"])
        .arg(common::data("regtest-206-blocks.hex.txt"))
        .output()
        .unwrap());
    std::fs::rename(other.join("regtest"), other.join("signet")).unwrap();
    let err = fails(
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .arg("--datadir")
            .arg(&other)
            .args(["--network", "signet", "status"])
            .output()
            .unwrap(),
    );
    assert!(err.contains("holds a regtest chain"), "{err}");
    let foreign = tmp.path().join("foreign");
    std::fs::create_dir_all(foreign.join("regtest/chainstate")).unwrap();
    let err = fails(cairn(&foreign).args(["status"]).output().unwrap());
    assert!(err.contains("not a cairn data dir"), "{err}");

    // Another network's block files are named as such.
    let err = fails(
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .arg("--datadir")
            .arg(tmp.path().join("sig"))
            .args(["--network", "signet", "import", "--blocks-dir"])
            .arg(chain.join("blocks"))
            .output()
            .unwrap(),
    );
    assert!(err.contains("regtest blocks"), "{err}");
}

#[test]
fn every_option_is_a_flag_and_a_variable_and_they_win_over_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dd = tmp.path().join("node");
    let status = |cmd: &mut Command| cmd.arg("status").output().unwrap();
    // Options that once were the file's only: a bad value from a flag or a variable is named.
    let err = fails(status(cairn(&dd).args(["--electrum-max-batch", "0"])));
    assert!(err.contains("electrum_max_batch"), "{err}");
    let err = fails(status(cairn(&dd).env("CAIRN_MIN_FREE_SPACE_MB", "0")));
    assert!(err.contains("min_free_space_mb"), "{err}");
    let err = fails(status(cairn(&dd).env("CAIRN_DNSSEED", "maybe")));
    assert!(err.contains("maybe"), "{err}");
    // The variable wins over the file, the flag over both.
    let cfg = tmp.path().join("cairn.toml");
    std::fs::write(&cfg, "electrum_max_batch = 0\n").unwrap();
    let with_file = || {
        let mut cmd = cairn(&dd);
        cmd.arg("--config").arg(&cfg);
        cmd
    };
    let err = fails(status(&mut with_file()));
    assert!(err.contains("electrum_max_batch"), "{err}");
    ok(status(with_file().env("CAIRN_ELECTRUM_MAX_BATCH", "5")));
    ok(status(with_file().arg("--electrum-max-batch=5")));
    let err = fails(status(
        with_file()
            .env("CAIRN_ELECTRUM_MAX_BATCH", "5")
            .arg("--electrum-max-batch=0"),
    ));
    assert!(err.contains("electrum_max_batch"), "{err}");
}

/// A supervisor polling `cairn status --json` every 50 ms from before `cairn run` starts until
/// it serves, fifty times, on a fresh data dir and then on one that ran before: every start
/// succeeds, every status exits 0 with a true answer (nothing has run yet, stopped with its
/// recorded tips, starting, or the node's own), and the last says running. (Before: `run` could
/// exit at once with "No such file or directory" when both wrote the new data dir's identity,
/// or with "in use by another cairn process" while a status opened the stopped node; and
/// `status` answered errors while `run` started.)
#[test]
fn status_polled_while_run_starts_never_fails_either() {
    let ran_before = tempfile::tempdir().unwrap();
    for round in 0..50 {
        let fresh = tempfile::tempdir().unwrap();
        let dd = match round < 25 {
            true => fresh.path().to_path_buf(),
            false => ran_before.path().to_path_buf(),
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let poller = {
            let (dd, stop) = (dd.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut answers = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let out = cairn(&dd).args(["status", "--json"]).output().unwrap();
                    let text = ok(out);
                    let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
                    answers.push(answer);
                    std::thread::sleep(Duration::from_millis(50));
                }
                answers
            })
        };
        std::thread::sleep(Duration::from_millis(50 * (round % 3)));
        let mut run = cairn(&dd)
            .args(["--no-listen", "--admin-addr", "127.0.0.1:0"])
            .args(["--electrum-addr", "127.0.0.1:0", "run"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while !dd.join("regtest/admin.addr").exists() {
            if let Some(exit) = run.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut err).unwrap();
                panic!("round {round}: cairn run exited while starting: {exit}: {err}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "round {round}: never served"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // A few answers from the running node, then the poller stops.
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let answers = poller.join().unwrap();
        for answer in &answers {
            assert_eq!(answer["network"], "regtest", "round {round}: {answer}");
            match answer["state"].as_str() {
                Some(state)
                    if state.starts_with("no data dir") || state == "nothing has run here yet" =>
                {
                    assert_eq!(answer["running"], false, "{answer}")
                }
                Some("starting") => assert_eq!(answer["running"], true, "{answer}"),
                Some(state) if state.starts_with("stopped without") => {
                    panic!("round {round}: a clean stop left no tip: {answer}")
                }
                Some(other) => panic!("round {round}: state {other}"),
                None => assert!(answer["kernel_tip"]["height"].is_i64(), "{answer}"),
            }
        }
        let last = status(&dd);
        assert_eq!(last["running"], true, "round {round}: {last}");
        ok(cairn(&dd).arg("stop").output().unwrap());
        assert!(run.wait().unwrap().success(), "round {round}: run's exit");
    }
}

//! Helpers shared by integration tests: a real bitcoind as reference.
#![allow(dead_code)]

pub mod anyone;
pub mod browser;
pub mod http;
pub mod lines;
pub mod peer;
pub mod probe;
pub mod sp;
pub mod tmpfs;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use bitcoin::{Block, OutPoint, Txid};

use cairn::types::ScriptHash;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Opens a regtest validator in `dir` (kernel data in `dir/kernel`).
pub fn open_validator(
    dir: &Path,
) -> (
    cairn::kernel::Validator,
    std::sync::mpsc::Receiver<cairn::kernel::KernelEvent>,
) {
    let config = cairn::kernel::ValidatorConfig {
        network: cairn::types::Network::Regtest,
        signet_challenge: None,
        kernel_dir: dir.join("kernel"),
        blocks_dir: dir.join("kernel/blocks"),
        script_threads: 0,
    };
    cairn::kernel::Validator::open(&config).expect("open validator")
}

/// A regtest validator (as [`open_validator`]) and an index over its block files, built with
/// `options`: the store in `dir/index`. The store is returned too, for tests that read its rows.
pub fn open_index_with(
    dir: &Path,
    options: cairn::index::IndexOptions,
) -> (
    cairn::kernel::Validator,
    cairn::index::Index,
    std::sync::Arc<cairn::store::Store>,
) {
    let validator = open_validator(dir).0;
    let store = std::sync::Arc::new(cairn::store::Store::open(&dir.join("index")).expect("store"));
    let files = cairn::kernel::blockfiles::KernelBlockFiles::new(
        &dir.join("kernel/blocks"),
        cairn::types::Network::Regtest.magic(),
    );
    let index = cairn::index::Index::open_with_options(store.clone(), Some(files), options)
        .expect("open index");
    (validator, index, store)
}

/// As [`open_index_with`], with filters and without tweaks (as `Index::open`).
pub fn open_index(
    dir: &Path,
) -> (
    cairn::kernel::Validator,
    cairn::index::Index,
    std::sync::Arc<cairn::store::Store>,
) {
    let options = cairn::index::IndexOptions {
        filters: true,
        tweaks_from: None,
    };
    open_index_with(dir, options)
}

/// The `cairn` binary as the tests run it: on regtest, logging warnings only, reading no config
/// file named by the environment.
pub fn cairn_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
    cmd.args(["--network", "regtest"])
        .env_remove("CAIRN_CONFIG")
        .env("CAIRN_LOG", "warn");
    cmd
}

/// As [`cairn_command`], on the data dir `datadir`.
pub fn cairn_in(datadir: &Path) -> Command {
    let mut cmd = cairn_command();
    cmd.arg("--datadir").arg(datadir);
    cmd
}

/// The standard output of a command that must have succeeded (its standard error, and what
/// it printed, in the failure).
pub fn succeeded(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Every script `blocks` pay, but OP_RETURN ones, sorted and each once.
pub fn paid_scripts<'a>(blocks: impl IntoIterator<Item = &'a Block>) -> Vec<bitcoin::ScriptBuf> {
    let mut scripts: Vec<bitcoin::ScriptBuf> = blocks
        .into_iter()
        .flat_map(|b| b.txdata.iter())
        .flat_map(|t| t.output.iter().map(|o| o.script_pubkey.clone()))
        .filter(|s| !s.is_op_return())
        .collect();
    scripts.sort();
    scripts.dedup();
    scripts
}

/// A script's history as an Electrum server answers `get_history`: (txid, height) in order.
pub fn electrum_history(
    client: &impl electrum_client::ElectrumApi,
    script: &bitcoin::Script,
) -> Vec<(Txid, u32)> {
    client
        .script_get_history(script)
        .expect("get_history")
        .iter()
        .map(|h| (h.tx_hash, h.height as u32))
        .collect()
}

/// A file of `tests/data/` (data cairn did not make: BIP vectors, bitcoind's answers).
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// `n` blocks of a generated chain.
pub fn chain(n: u32, txs_per_block: u32, seed: u64) -> Vec<Block> {
    let mut gen = cairn::generate::ChainGenerator::new(cairn::generate::GenerateOptions {
        blocks: n,
        txs_per_block,
        seed,
    });
    (0..n).map(|_| gen.next_block().unwrap()).collect()
}

/// Bitcoin Core 31.99 as `contrib/build-core-bitcoind.sh` builds it from the kernel's own source
/// (or `CAIRN_CORE_BITCOIND`): the oracle for everything Bitcoin decides.
pub fn core_bitcoind_exe() -> PathBuf {
    let path = std::env::var_os("CAIRN_CORE_BITCOIND")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/cairn-core/bin/bitcoind"));
    assert!(
        path.exists(),
        "{} not found: run contrib/build-core-bitcoind.sh (the README's test command does)",
        path.display()
    );
    path
}

/// The Bitcoin Knots 29.4 wrapper `contrib/install-bitcoind.sh` installs (or `CAIRN_BITCOIND`):
/// a wallet that signs, and the Knots profile's reference.
pub fn bitcoind_exe() -> PathBuf {
    let path = std::env::var_os("CAIRN_BITCOIND")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/bitcoind/bitcoind"));
    assert!(
        path.exists(),
        "{} not found: run contrib/install-bitcoind.sh (the README's test command does)",
        path.display()
    );
    path
}

/// A free loopback port (bound once, then released), never one this test
/// process handed out before: the kernel may offer a released port again,
/// and two listeners of one cairn on one port fail its start.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Whether a `bitcoin-cli` error says bitcoind never ran the call: no connection to its RPC
/// port, or its work queue full (`-rpcworkqueue`).
fn never_ran(error: &str) -> bool {
    error.contains("Could not connect to the server") || error.contains("Work queue depth exceeded")
}

/// Whether a `bitcoin-cli` error is bitcoind reading a block it has just connected before its
/// undo data is on disk (`getblock` at verbosity 2 right after `generatetoaddress`): asked
/// again, it answers.
fn undo_not_yet_written(error: &str) -> bool {
    error.contains("Undo data expected but can't be read")
}

/// A regtest bitcoind on loopback, stopped when dropped.
pub struct Bitcoind {
    child: Child,
    /// The `bitcoind` it runs; `bitcoin-cli` beside it is asked.
    exe: PathBuf,
    pub datadir: PathBuf,
    pub rpc_port: u16,
    pub p2p_port: u16,
}

impl Bitcoind {
    /// A bitcoind with a wallet (`-fallbackfee=0.0001`) in `datadir` that has mined `blocks`
    /// to its own address; returns it and that address.
    pub fn with_wallet(datadir: &Path, blocks: u32) -> (Self, String) {
        Bitcoind::with_wallet_and(datadir, &[], blocks)
    }

    /// As [`Bitcoind::with_wallet`], started with `extra` arguments too.
    pub fn with_wallet_and(datadir: &Path, extra: &[String], blocks: u32) -> (Self, String) {
        let mut args = vec!["-fallbackfee=0.0001".to_string()];
        args.extend_from_slice(extra);
        let node = Bitcoind::start(datadir, &args);
        node.rpc(&["createwallet", "w"]);
        let mine = node.rpc(&["getnewaddress", "", "bech32"]);
        node.rpc(&["generatetoaddress", &blocks.to_string(), &mine]);
        (node, mine)
    }

    /// Starts Knots's bitcoind with extra arguments and waits until its RPC answers.
    pub fn start(datadir: &Path, extra: &[String]) -> Self {
        Bitcoind::start_exe(bitcoind_exe(), datadir, extra)
    }

    /// Starts Bitcoin Core 31.99 (no wallet) with extra arguments and waits until its RPC
    /// answers.
    pub fn start_core(datadir: &Path, extra: &[String]) -> Self {
        Bitcoind::start_exe(core_bitcoind_exe(), datadir, extra)
    }

    /// Starts `exe` with extra arguments and waits until its RPC answers.
    pub fn start_exe(exe: PathBuf, datadir: &Path, extra: &[String]) -> Self {
        std::fs::create_dir_all(datadir).unwrap();
        let rpc_port = free_port();
        let p2p_port = free_port();
        let child = Command::new(&exe)
            .arg("-regtest")
            .arg(format!("-datadir={}", datadir.display()))
            .args([
                "-listen=1",
                "-bind=127.0.0.1",
                "-rpcbind=127.0.0.1",
                "-rpcallowip=127.0.0.1",
            ])
            .args([
                "-rpcuser=u",
                "-rpcpassword=p",
                "-dnsseed=0",
                "-fixedseeds=0",
                "-printtoconsole=0",
            ])
            .arg(format!("-port={p2p_port}"))
            .arg(format!("-rpcport={rpc_port}"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bitcoind");
        let mut node = Bitcoind {
            child,
            exe,
            datadir: datadir.to_path_buf(),
            rpc_port,
            p2p_port,
        };
        let start = Instant::now();
        while node.try_rpc(&["getblockcount"]).is_none() {
            if let Ok(Some(status)) = node.child.try_wait() {
                panic!("bitcoind exited early: {status}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "bitcoind RPC never came up"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        node
    }

    /// One call, not retried: for polling bitcoind's start and asking it to stop.
    fn try_rpc(&self, args: &[&str]) -> Option<String> {
        self.rpc_once(args).ok()
    }

    /// Calls an RPC: its output, or its error message. A call bitcoind never ran (no
    /// connection, or its RPC work queue full: both refused before the method runs, so a retry
    /// cannot run it twice) is tried again for up to 10 s: on 2 busy cores these happened in
    /// CI under load, failing tests that had nothing to do with them. So is a read of a block
    /// whose undo data bitcoind has not written yet (seen once in CI under load).
    pub fn rpc_result(&self, args: &[&str]) -> Result<String, String> {
        let start = Instant::now();
        loop {
            let answer = self.rpc_once(args);
            match answer {
                Err(e)
                    if (never_ran(&e) || undo_not_yet_written(&e))
                        && start.elapsed() < Duration::from_secs(10) =>
                {
                    std::thread::sleep(Duration::from_millis(200))
                }
                answer => return answer,
            }
        }
    }

    /// One `bitcoin-cli` call: its output, or its error message.
    fn rpc_once(&self, args: &[&str]) -> Result<String, String> {
        let cli = self.exe.with_file_name("bitcoin-cli");
        let out = Command::new(cli)
            .arg("-regtest")
            .arg(format!("-rpcport={}", self.rpc_port))
            .args(["-rpcconnect=127.0.0.1", "-rpcuser=u", "-rpcpassword=p"])
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
            false => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        }
    }

    /// Calls an RPC and returns its output, panicking with bitcoind's error on failure.
    pub fn rpc(&self, args: &[&str]) -> String {
        self.rpc_result(args)
            .unwrap_or_else(|e| panic!("bitcoin-cli {args:?} failed: {e}"))
    }

    /// Calls RPC `method` whose output is JSON, its arguments given on `bitcoin-cli -stdin` (one
    /// a line: for arguments longer than the kernel takes on a command line, 128 KiB).
    pub fn rpc_json_stdin(&self, method: &str, args: &[&str]) -> serde_json::Value {
        use std::io::Write;
        let cli = self.exe.with_file_name("bitcoin-cli");
        let mut child = Command::new(cli)
            .arg("-regtest")
            .arg(format!("-rpcport={}", self.rpc_port))
            .args([
                "-rpcconnect=127.0.0.1",
                "-rpcuser=u",
                "-rpcpassword=p",
                "-stdin",
            ])
            .arg(method)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(args.join("\n").as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "bitcoin-cli {method}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("bitcoin-cli {method}: {e}"))
    }

    /// Calls an RPC whose output is JSON.
    pub fn rpc_json(&self, args: &[&str]) -> serde_json::Value {
        serde_json::from_str(&self.rpc(args))
            .unwrap_or_else(|e| panic!("bitcoin-cli {args:?}: {e}"))
    }

    /// Pays `amount` BTC to `address` from the wallet and returns the txid once the payment is
    /// in bitcoind's mempool. `sendtoaddress` returns the txid even when the mempool refused
    /// the transaction (it stays in the wallet: seen once in CI, no reason logged): then it is
    /// submitted again by `sendrawtransaction`, and a second refusal panics with the mempool's
    /// reason.
    pub fn pay_into_mempool(&self, address: &str, amount: &str) -> String {
        let txid = self.rpc(&["sendtoaddress", address, amount]);
        if self.rpc_result(&["getmempoolentry", &txid]).is_err() {
            let hex = self.rpc_json(&["gettransaction", &txid])["hex"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let sent = self.rpc_result(&["sendrawtransaction", &hex]);
            assert_eq!(sent.as_deref(), Ok(txid.as_str()), "the wallet's {txid}");
        }
        txid
    }

    /// Kills the node with SIGKILL, as a crash or power cut would, and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits until `getblockcount` reaches `height`.
    pub fn wait_for_height(&self, height: u64, timeout: Duration) {
        let start = Instant::now();
        loop {
            let h: u64 = self.rpc(&["getblockcount"]).parse().unwrap();
            if h >= height {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "bitcoind stuck at height {h}, wanted {height}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until bitcoind's BIP158 filter index (built in the background) reports synced.
    pub fn wait_for_filter_index(&self, timeout: Duration) {
        self.wait_for_indexes_until(timeout, |info| {
            info["basic block filter index"]["synced"] == true
        });
    }

    /// Waits until every index bitcoind keeps (its txindex, filters: built in the background,
    /// behind the tip for a moment after each block) reports synced.
    pub fn wait_for_indexes(&self, timeout: Duration) {
        self.wait_for_indexes_until(timeout, |info| {
            info.as_object()
                .is_some_and(|all| all.values().all(|i| i["synced"] == true))
        });
    }

    fn wait_for_indexes_until(&self, timeout: Duration, done: impl Fn(&serde_json::Value) -> bool) {
        let start = Instant::now();
        loop {
            let tip: u64 = self.rpc(&["getblockcount"]).parse().unwrap();
            let info: serde_json::Value =
                serde_json::from_str(&self.rpc(&["getindexinfo"])).unwrap();
            // "synced" turns true once and stays true while an index trails new blocks in
            // its own thread: each index must also have reached the tip.
            let at_tip = info.as_object().is_some_and(|all| {
                all.values()
                    .all(|i| i["best_block_height"].as_u64() == Some(tip))
            });
            if at_tip && done(&info) {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "bitcoind's indexes never synced: {info}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Bitcoind {
    fn drop(&mut self) {
        let _ = self.try_rpc(&["stop"]);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A script's unspent outputs by (height, position in block, output index): txid and amount.
pub type UnspentByPlace = BTreeMap<(u32, u32, u32), (Txid, u64)>;

/// A block's eligible transaction as its tweaks are served: txid, tweak and the amounts of its
/// taproot outputs.
pub type ServedTweak = (bitcoin::Txid, [u8; 33], Vec<u64>);

/// What a correct index holds, computed from the blocks alone.
#[derive(Default)]
pub struct Expected {
    pub history: HashMap<ScriptHash, Vec<(Txid, u32)>>,
    pub unspent: HashMap<ScriptHash, UnspentByPlace>,
    pub outputs: HashMap<OutPoint, (ScriptHash, u32, u32, u32, u64)>,
    pub spent_by: HashMap<OutPoint, (Txid, u32, u32)>,
    pub positions: HashMap<Txid, (u32, u32)>,
}

pub fn expected(blocks: &[Block]) -> Expected {
    let mut e = Expected::default();
    for (i, block) in blocks.iter().enumerate() {
        let height = i as u32 + 1;
        for (pos, tx) in block.txdata.iter().enumerate() {
            let txid = tx.compute_txid();
            e.positions.insert(txid, (height, pos as u32));
            let mut touched: Vec<ScriptHash> = Vec::new();
            for (vin, input) in tx.input.iter().enumerate() {
                if input.previous_output.is_null() {
                    continue;
                }
                let (sh, h, p, vout, _) = e.outputs[&input.previous_output];
                e.unspent.get_mut(&sh).unwrap().remove(&(h, p, vout));
                e.spent_by
                    .insert(input.previous_output, (txid, vin as u32, height));
                touched.push(sh);
            }
            for (vout, out) in tx.output.iter().enumerate() {
                let sh = ScriptHash::of(&out.script_pubkey);
                // OP_RETURN outputs are in no history (as ElectrumX).
                if !out.script_pubkey.is_op_return() {
                    touched.push(sh);
                    let op = OutPoint::new(txid, vout as u32);
                    e.outputs.insert(
                        op,
                        (sh, height, pos as u32, vout as u32, out.value.to_sat()),
                    );
                    e.unspent.entry(sh).or_default().insert(
                        (height, pos as u32, vout as u32),
                        (txid, out.value.to_sat()),
                    );
                }
            }
            touched.sort();
            touched.dedup();
            for sh in touched {
                e.history.entry(sh).or_default().push((txid, height));
            }
        }
    }
    e
}

/// Every row of a stopped cairn's index (regtest), per column family.
pub fn index_rows(datadir: &Path) -> cairn::index::IndexDump {
    let store =
        std::sync::Arc::new(cairn::store::Store::open(&datadir.join("regtest/index")).unwrap());
    cairn::index::Index::open(store, None)
        .unwrap()
        .dump()
        .unwrap()
}

/// A `cairn run` process, killed with SIGKILL when dropped (`stop` ends it cleanly).
pub struct Cairn {
    child: Child,
    /// Its data folder.
    pub datadir: std::path::PathBuf,
}

impl Drop for Cairn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Cairn {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The CPU time it has used so far, user and system, in seconds (`/proc/PID/stat`).
    pub fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // The fields after the command name (which may hold spaces) start at its closing ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace()
            .collect();
        let ticks: f64 = [11, 12] // utime and stime: fields 14 and 15 of the whole line
            .iter()
            .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<f64>().ok()))
            .sum();
        // SAFETY: sysconf only reads a configuration value.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        ticks / per_second.max(1.0)
    }

    /// Its resident memory now, KiB (`VmRSS` in /proc).
    pub fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// `cairn status --json` of its data folder.
    pub fn status(&self) -> serde_json::Value {
        let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["--network", "regtest", "--datadir"])
            .arg(&self.datadir)
            .args(["status", "--json"])
            .env("CAIRN_LOG", "warn")
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
    }

    /// Stops cairn cleanly (`cairn stop`) and waits for it to exit.
    pub fn stop(mut self) {
        let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["--network", "regtest", "--datadir"])
            .arg(&self.datadir)
            .arg("stop")
            .env("CAIRN_LOG", "warn")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cairn stop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "cairn did not stop"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends it SIGTERM and waits `within` at most for it to exit: how long it took, or `None`
    /// if it is still running.
    pub fn terminate_within(&mut self, within: Duration) -> Option<Duration> {
        let pid = i32::try_from(self.pid()).expect("a pid");
        // SAFETY: kill(2) with a live child's pid and a valid signal number.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < within {
            if self.child.try_wait().unwrap().is_some() {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Waits (60 s at most) until its status passes `ready`, and returns that status.
    pub fn status_when(&self, ready: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let start = Instant::now();
        loop {
            let s = self.status();
            if ready(&s) {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "cairn never got there: {s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until both its kernel and its index are at block `hash`.
    pub fn wait_for(&self, hash: &str, what: &str) {
        let start = Instant::now();
        loop {
            let s = self.status();
            if s["kernel_tip"]["hash"] == hash && s["index_tip"]["hash"] == hash {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "{what}: cairn at {s}, wanted {hash}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// A loopback address on a free port.
pub fn free_addr() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], free_port()))
}

/// Starts `cairn run` on `dir` syncing from `node` only (no listener), with `args` besides.
pub fn start_cairn_from(dir: &Path, node: &Bitcoind, args: &[String]) -> Cairn {
    let mut all = vec![
        format!("--connect=127.0.0.1:{}", node.p2p_port),
        "--no-listen".into(),
    ];
    all.extend_from_slice(args);
    start_cairn(dir, &all)
}

/// Starts `cairn run` on `dir` with `args` (admin and Electrum on free ports unless given) and
/// waits until it serves.
/// Its log goes to `DIR.stderr.log`, whose end a start that fails shows.
pub fn start_cairn(dir: &Path, args: &[String]) -> Cairn {
    let path = PathBuf::from(format!("{}.stderr.log", dir.display()));
    let log = std::fs::File::create(&path).unwrap();
    spawn_cairn(dir, args, log.into(), Some(&path))
}

/// [`start_cairn`], its log (at `info`) written to `log`.
pub fn start_cairn_logging(dir: &Path, args: &[String], log: impl Into<Stdio>) -> Cairn {
    spawn_cairn(dir, args, log.into(), None)
}

/// Starts `cairn run` on `dir` and waits until it serves; a start that fails shows the end of
/// the log at `log_path`, if it has one.
fn spawn_cairn(dir: &Path, args: &[String], log: Stdio, log_path: Option<&Path>) -> Cairn {
    let datadir = dir.to_path_buf();
    // A killed cairn leaves its admin address behind: waiting for the file must wait for this one.
    let _ = std::fs::remove_file(dir.join("regtest/admin.addr"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
    cmd.args(["--network", "regtest", "--datadir"])
        .arg(&datadir)
        .args(["--admin-addr", "127.0.0.1:0"]);
    if !args.iter().any(|a| a.starts_with("--electrum-addr")) {
        cmd.args(["--electrum-addr", "127.0.0.1:0"]);
    }
    let child = cmd
        .args(args)
        .arg("run")
        .env("CAIRN_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut c = Cairn { child, datadir };
    let start = Instant::now();
    while !dir.join("regtest/admin.addr").exists() {
        if let Ok(Some(status)) = c.child.try_wait() {
            let said = log_path
                .and_then(|p| std::fs::read_to_string(p).ok())
                .map(|text| {
                    let lines: Vec<&str> = text.lines().collect();
                    lines[lines.len().saturating_sub(5)..].join("\n")
                })
                .unwrap_or_default();
            panic!("cairn run {args:?} exited before serving: {status}\n{said}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "cairn run never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    c
}

/// The tweak rows `blocks` (from height 1) should have, their prevouts from the blocks
/// themselves: per height, txid, tweak and its taproot outputs' amounts.
pub fn expected_tweaks(blocks: &[&bitcoin::Block]) -> Vec<Vec<ServedTweak>> {
    let mut outputs: std::collections::HashMap<bitcoin::OutPoint, bitcoin::TxOut> =
        std::collections::HashMap::new();
    let mut out = Vec::new();
    for block in blocks {
        let mut rows = Vec::new();
        for tx in &block.txdata {
            let txid = tx.compute_txid();
            if !tx.is_coinbase() {
                let prevouts: Vec<bitcoin::TxOut> = tx
                    .input
                    .iter()
                    .map(|i| outputs[&i.previous_output].clone())
                    .collect();
                if let Some(t) = cairn::index::silent_payments::tx_tweak(tx, &prevouts) {
                    rows.push((txid, t.tweak, t.outputs.iter().map(|o| o.value).collect()));
                }
            }
            for (vout, o) in tx.output.iter().enumerate() {
                outputs.insert(bitcoin::OutPoint::new(txid, vout as u32), o.clone());
            }
        }
        out.push(rows);
    }
    out
}

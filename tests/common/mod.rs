//! Helpers shared by integration tests: a real bitcoind as reference.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use bitcoin::{Block, OutPoint, Txid};
use cairn::store::schema::ScriptHash;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Opens a regtest validator in `dir` (kernel data in `dir/kernel`).
pub fn open_validator(
    dir: &Path,
) -> (cairn::kernel::Validator, std::sync::mpsc::Receiver<cairn::kernel::KernelEvent>) {
    let config = cairn::kernel::ValidatorConfig {
        network: cairn::config::Network::Regtest,
        signet_challenge: None,
        kernel_dir: dir.join("kernel"),
        blocks_dir: dir.join("kernel/blocks"),
        script_threads: 0,
    };
    cairn::kernel::Validator::open(&config).expect("open validator")
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

/// The bitcoind wrapper `contrib/install-bitcoind.sh` installs (or `CAIRN_BITCOIND`).
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

/// A free loopback port (bound once, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A regtest bitcoind on loopback, stopped when dropped.
pub struct Bitcoind {
    child: Child,
    pub datadir: PathBuf,
    pub rpc_port: u16,
    pub p2p_port: u16,
}

impl Bitcoind {
    /// Starts bitcoind with extra arguments and waits until its RPC answers.
    pub fn start(datadir: &Path, extra: &[String]) -> Self {
        std::fs::create_dir_all(datadir).unwrap();
        let rpc_port = free_port();
        let p2p_port = free_port();
        let child = Command::new(bitcoind_exe())
            .arg("-regtest")
            .arg(format!("-datadir={}", datadir.display()))
            .args(["-listen=1", "-bind=127.0.0.1", "-rpcbind=127.0.0.1", "-rpcallowip=127.0.0.1"])
            .args(["-rpcuser=u", "-rpcpassword=p", "-dnsseed=0", "-fixedseeds=0", "-printtoconsole=0"])
            .arg(format!("-port={p2p_port}"))
            .arg(format!("-rpcport={rpc_port}"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bitcoind");
        let mut node = Bitcoind {
            child,
            datadir: datadir.to_path_buf(),
            rpc_port,
            p2p_port,
        };
        let start = Instant::now();
        while node.try_rpc(&["getblockcount"]).is_none() {
            if let Ok(Some(status)) = node.child.try_wait() {
                panic!("bitcoind exited early: {status}");
            }
            assert!(start.elapsed() < Duration::from_secs(60), "bitcoind RPC never came up");
            std::thread::sleep(Duration::from_millis(100));
        }
        node
    }

    fn try_rpc(&self, args: &[&str]) -> Option<String> {
        let cli = bitcoind_exe().with_file_name("bitcoin-cli");
        let out = Command::new(cli)
            .arg("-regtest")
            .arg(format!("-rpcport={}", self.rpc_port))
            .args(["-rpcconnect=127.0.0.1", "-rpcuser=u", "-rpcpassword=p"])
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Calls an RPC and returns its output, panicking on failure.
    pub fn rpc(&self, args: &[&str]) -> String {
        self.try_rpc(args)
            .unwrap_or_else(|| panic!("bitcoin-cli {args:?} failed"))
    }

    /// Waits until `getblockcount` reaches `height`.
    pub fn wait_for_height(&self, height: u64, timeout: Duration) {
        let start = Instant::now();
        loop {
            let h: u64 = self.rpc(&["getblockcount"]).parse().unwrap();
            if h >= height {
                return;
            }
            assert!(start.elapsed() < timeout, "bitcoind stuck at height {h}, wanted {height}");
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

/// What a correct index holds, computed from the blocks alone.
#[derive(Default)]
pub struct Expected {
    pub history: HashMap<ScriptHash, Vec<(Txid, u32)>>,
    pub unspent: HashMap<ScriptHash, BTreeMap<(u32, u32, u32), (Txid, u64)>>,
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
                e.spent_by.insert(input.previous_output, (txid, vin as u32, height));
                touched.push(sh);
            }
            for (vout, out) in tx.output.iter().enumerate() {
                let sh = ScriptHash::of(&out.script_pubkey);
                // OP_RETURN outputs are in no history (as ElectrumX).
                if !out.script_pubkey.is_op_return() {
                    touched.push(sh);
                    let op = OutPoint::new(txid, vout as u32);
                    e.outputs.insert(op, (sh, height, pos as u32, vout as u32, out.value.to_sat()));
                    e.unspent
                        .entry(sh)
                        .or_default()
                        .insert((height, pos as u32, vout as u32), (txid, out.value.to_sat()));
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


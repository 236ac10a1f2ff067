//! The Electrum wallet 4.3.4 (Debian's `electrum`) against `cairn demo`: a wallet holding a key
//! the demo chain pays sees the history and balance this test computes from the blocks, and
//! verifies every transaction's SPV proof, over TCP and over TLS (the self-signed certificate).

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bitcoin::hex::FromHex;
use bitcoin::{Amount, Block, PrivateKey, ScriptBuf};
use cairn::generate::{ChainGenerator, GenerateOptions};

use cairn::types::ScriptHash;
use serde_json::Value;

const ELECTRUM: &str = "/usr/bin/electrum";

fn electrum(dir: &Path, args: &[&str]) -> Value {
    let out = Command::new(ELECTRUM)
        .arg("--regtest")
        .arg("-D")
        .arg(dir)
        .args(args)
        .output()
        .expect("run electrum");
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success(),
        "electrum {args:?}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

struct Killer(Child);
impl Drop for Killer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn electrum_wallet_sees_the_demo_chain() {
    assert!(
        Path::new(ELECTRUM).exists(),
        "{ELECTRUM} missing: `apt-get install -y --no-install-recommends electrum` (contrib/test.sh does)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dd = tmp.path().join("cairn");
    let port = common::free_port();
    let tls_port = common::free_port();
    let blocks = 160u32;
    let _cairn = Killer(
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["--network", "regtest", "--datadir"])
            .arg(&dd)
            .args([
                "--admin-addr",
                "127.0.0.1:0",
                "--electrum-addr",
                &format!("127.0.0.1:{port}"),
            ])
            .args(["--electrum-tls-addr", &format!("127.0.0.1:{tls_port}")])
            .args([
                "demo",
                "--blocks",
                &blocks.to_string(),
                "--txs-per-block",
                "15",
            ])
            .env("CAIRN_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "cairn demo never served"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // The demo chain is `cairn generate` with seed 1; the first miner's key is paid often.
    let chain: Vec<Block> = std::fs::read_to_string(dd.join("regtest/demo-chain/blocks.hex"))
        .unwrap()
        .lines()
        .map(|l| bitcoin::consensus::deserialize(&Vec::<u8>::from_hex(l).unwrap()).unwrap())
        .collect();
    assert_eq!(chain.len(), blocks as usize);
    let gen = ChainGenerator::new(GenerateOptions {
        blocks,
        txs_per_block: 15,
        seed: 1,
    });
    let key = PrivateKey::new(gen.miner_keys()[0], bitcoin::Network::Regtest);
    let secp = bitcoin::secp256k1::Secp256k1::new();
    let pk = bitcoin::CompressedPublicKey::from_private_key(&secp, &key).unwrap();
    let script = ScriptBuf::new_p2wpkh(&pk.wpubkey_hash());
    let e = common::expected(&chain);
    let sh = ScriptHash::of(&script);
    let want_history = e.history.get(&sh).cloned().unwrap_or_default();
    assert!(want_history.len() > 10, "the key must have a history");
    let want_balance: u64 = e
        .unspent
        .get(&sh)
        .map(|m| m.values().map(|v| v.1).sum())
        .unwrap_or(0);

    // Over TCP, then over TLS against the self-signed certificate cairn made on first start
    // (the wallet trusts it on first use, as it does ElectrumX's and Fulcrum's).
    let want = Want {
        blocks,
        history: want_history,
        balance: want_balance,
    };
    wallet_sees(
        &tmp.path().join("electrum-tcp"),
        &key,
        &format!("127.0.0.1:{port}:t"),
        &want,
    );
    wallet_sees(
        &tmp.path().join("electrum-tls"),
        &key,
        &format!("127.0.0.1:{tls_port}:s"),
        &want,
    );
    let saved = tmp.path().join("electrum-tls/regtest/certs");
    assert!(
        saved.read_dir().is_ok_and(|mut d| d.next().is_some()),
        "the wallet saved no certificate in {}",
        saved.display()
    );
}

/// What a wallet holding the key should see.
struct Want {
    blocks: u32,
    history: Vec<(bitcoin::Txid, u32)>,
    balance: u64,
}

/// Restores a wallet of `key` in `wallet_dir`, syncs it from `server` alone (Electrum's
/// `HOST:PORT:t` or `:s`) and checks its history, SPV proofs and balance.
fn wallet_sees(wallet_dir: &Path, key: &PrivateKey, server: &str, want: &Want) {
    let (blocks, want_history, want_balance) = (want.blocks, &want.history, want.balance);
    electrum(
        wallet_dir,
        &["--offline", "restore", &format!("p2wpkh:{}", key.to_wif())],
    );
    electrum(
        wallet_dir,
        &["daemon", "-d", "--oneserver", "--server", server],
    );
    struct StopDaemon<'a>(&'a Path);
    impl Drop for StopDaemon<'_> {
        fn drop(&mut self) {
            let _ = Command::new(ELECTRUM)
                .arg("--regtest")
                .arg("-D")
                .arg(self.0)
                .arg("stop")
                .output();
        }
    }
    let _stop = StopDaemon(wallet_dir);
    electrum(wallet_dir, &["load_wallet"]);
    let start = Instant::now();
    loop {
        let info = electrum(wallet_dir, &["getinfo"]);
        let synced = electrum(wallet_dir, &["is_synchronized"]);
        if info["connected"] == true && info["blockchain_height"] == blocks && synced == true {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "wallet never synced over {server}: {info}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let history = electrum(wallet_dir, &["onchain_history"]);
    let txs = history["transactions"].as_array().expect("transactions");
    let mut got: Vec<(String, u64)> = txs
        .iter()
        .map(|t| {
            (
                t["txid"].as_str().unwrap().to_string(),
                t["height"].as_u64().unwrap(),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, u64)> = want_history
        .iter()
        .map(|(t, h)| (t.to_string(), u64::from(*h)))
        .collect();
    want.sort();
    assert_eq!(got, want);
    // SPV: Electrum counts confirmations only for transactions whose merkle proof it verified.
    for t in txs {
        assert!(t["confirmations"].as_u64().unwrap() > 0, "unverified: {t}");
    }
    let balance = electrum(wallet_dir, &["getbalance"]);
    // Electrum splits off coinbase outputs that are not mature yet.
    let btc = |field: &str| {
        balance[field]
            .as_str()
            .map(|v| {
                Amount::from_str_in(v, bitcoin::Denomination::Bitcoin)
                    .unwrap()
                    .to_sat()
            })
            .unwrap_or(0)
    };
    assert_eq!(
        btc("confirmed") + btc("unmatured"),
        want_balance,
        "{balance}"
    );
    assert_eq!(btc("unconfirmed"), 0);
}

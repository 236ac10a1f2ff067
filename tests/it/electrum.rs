//! The Electrum server through a real client (the `electrum-client` crate) and raw sockets:
//! every answer checked against values this test computes from the raw blocks.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bitcoin::consensus::serialize;
use bitcoin::hashes::{sha256, sha256d, Hash};
use bitcoin::hex::{DisplayHex, FromHex};
use bitcoin::{Block, ScriptBuf};
use electrum_client::raw_client::{ElectrumPlaintextStream, RawClient};
use electrum_client::{ElectrumApi, Param};
use serde_json::{json, Value};

use cairn::config::{ElectrumConfig, MempoolConfig};
use cairn::electrum::{Backend, ElectrumServer};
use cairn::generate::{ChainGenerator, GenerateOptions, SpPayment};
use cairn::index::{Index, IndexOptions};
use cairn::kernel::Validator;
use cairn::mempool::Mempool;
use cairn::node::runner::{BulkLoad, IndexRunner};
use cairn::notify::Notifier;
use cairn::view::{CacheSettings, ReadModel};

use crate::common::lines::Lines;
use cairn::store::Store;
use cairn::types::{Network, ScriptHash};

struct Fixture {
    rt: tokio::runtime::Runtime,
    addr: SocketAddr,
    ws_addr: Option<SocketAddr>,
    validator: Arc<Validator>,
    pool: Arc<cairn::work::WorkPool>,
    runner: Option<IndexRunner>,
    gen: ChainGenerator,
    blocks: Vec<Block>,
    _tmp: tempfile::TempDir,
}

impl Fixture {
    fn start(n: u32, txs: u32, seed: u64, tweak: impl FnOnce(&mut ElectrumConfig)) -> Self {
        let options = IndexOptions {
            filters: true,
            tweaks_from: None,
        };
        Self::start_with(n, txs, seed, options, tweak)
    }

    /// As [`Fixture::start`], the index built with `options`.
    fn start_with(
        n: u32,
        txs: u32,
        seed: u64,
        options: IndexOptions,
        tweak: impl FnOnce(&mut ElectrumConfig),
    ) -> Self {
        let gen = ChainGenerator::new(GenerateOptions {
            blocks: 0,
            txs_per_block: txs,
            seed,
        });
        Self::start_from(gen, n, options, tweak)
    }

    /// As [`Fixture::start_with`], the chain's first `n` blocks from `gen`.
    fn start_from(
        gen: ChainGenerator,
        n: u32,
        options: IndexOptions,
        tweak: impl FnOnce(&mut ElectrumConfig),
    ) -> Self {
        Self::start_index(gen, n, options, tweak, false)
    }

    /// As [`Fixture::start`], the index flushed to its files and opened again before the server
    /// starts: nothing of it in memory.
    fn start_cold(n: u32, txs: u32, seed: u64, tweak: impl FnOnce(&mut ElectrumConfig)) -> Self {
        let gen = ChainGenerator::new(GenerateOptions {
            blocks: 0,
            txs_per_block: txs,
            seed,
        });
        let options = IndexOptions {
            filters: true,
            tweaks_from: None,
        };
        Self::start_index(gen, n, options, tweak, true)
    }

    fn start_index(
        mut gen: ChainGenerator,
        n: u32,
        options: IndexOptions,
        tweak: impl FnOnce(&mut ElectrumConfig),
        cold: bool,
    ) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let (validator, events) = common::open_validator(tmp.path());
        let validator = Arc::new(validator);
        let blocks: Vec<Block> = (0..n).map(|_| gen.next_block().unwrap()).collect();
        for b in &blocks {
            validator.submit_block(&serialize(b)).unwrap();
        }
        let store = Arc::new(Store::open(&tmp.path().join("index")).unwrap());
        let files = cairn::kernel::blockfiles::KernelBlockFiles::new(
            &tmp.path().join("kernel/blocks"),
            Network::Regtest.magic(),
        );
        let mut index = Arc::new(Index::open_with_options(store, Some(files), options).unwrap());
        index.sync(&validator).unwrap();
        if cold {
            index.store().flush().unwrap();
            drop(index);
            let store = Arc::new(Store::open(&tmp.path().join("index")).unwrap());
            let files = cairn::kernel::blockfiles::KernelBlockFiles::new(
                &tmp.path().join("kernel/blocks"),
                Network::Regtest.magic(),
            );
            index = Arc::new(Index::open_with_options(store, Some(files), options).unwrap());
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let notifier = Notifier::default();
        let mempool = Arc::new(Mempool::new(MempoolConfig::default()));
        let runner = IndexRunner::spawn(
            index.clone(),
            validator.clone(),
            Some((mempool.clone(), None)),
            events,
            notifier.clone(),
            BulkLoad::WhileDownloading,
        )
        .unwrap();
        let mut econfig = ElectrumConfig::defaults(Network::Regtest);
        econfig.addr = "127.0.0.1:0".parse().unwrap();
        tweak(&mut econfig);
        let cache = CacheSettings {
            status_from: econfig.cache_status_from,
            history_from: econfig.cache_history_from,
        };
        let model = ReadModel::new(index, validator.clone(), Some(mempool), cache);
        let pool = cairn::work::WorkPool::new(4, 64);
        let backend = Arc::new(Backend {
            model: Arc::new(model),
            notifier,
            config: econfig,
            pool: pool.clone(),
            verdicts: Default::default(),
        });
        let server = rt.block_on(ElectrumServer::start(backend, None)).unwrap();
        let (addr, ws_addr) = (server.addr, server.ws_addr);
        std::mem::forget(server);
        Fixture {
            rt,
            addr,
            ws_addr,
            validator,
            pool,
            runner: Some(runner),
            gen,
            blocks,
            _tmp: tmp,
        }
    }

    fn client(&self) -> RawClient<ElectrumPlaintextStream> {
        RawClient::new(self.addr, Some(Duration::from_secs(30)), None).unwrap()
    }

    fn add_blocks(&mut self, n: u32) {
        for _ in 0..n {
            let b = self.gen.next_block().unwrap();
            self.validator.submit_block(&serialize(&b)).unwrap();
            self.blocks.push(b);
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(r) = self.runner.take() {
            let _ = r.finish();
        }
        let _ = &self.rt;
    }
}

/// Waits for the `blockchain.headers.subscribe` notification of `height`.
fn wait_for_header(
    c: &RawClient<ElectrumPlaintextStream>,
    height: usize,
) -> electrum_client::HeaderNotification {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(h) = c.block_headers_pop().unwrap() {
            if h.height == height {
                return h;
            }
            continue;
        }
        assert!(
            Instant::now() < deadline,
            "no header notification for height {height}"
        );
        c.ping().unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn status_of(history: &[(bitcoin::Txid, u32)]) -> Option<String> {
    if history.is_empty() {
        return None;
    }
    let text: String = history.iter().map(|(t, h)| format!("{t}:{h}:")).collect();
    Some(sha256::Hash::hash(text.as_bytes()).to_string())
}

fn fold(leaf: [u8; 32], branch: &[String], mut pos: usize) -> [u8; 32] {
    let mut acc = leaf;
    for hex_hash in branch {
        let mut sib: [u8; 32] = Vec::<u8>::from_hex(hex_hash).unwrap().try_into().unwrap();
        sib.reverse();
        let mut data = Vec::with_capacity(64);
        if pos & 1 == 0 {
            data.extend_from_slice(&acc);
            data.extend_from_slice(&sib);
        } else {
            data.extend_from_slice(&sib);
            data.extend_from_slice(&acc);
        }
        acc = sha256d::Hash::hash(&data).to_byte_array();
        pos >>= 1;
    }
    acc
}

#[test]
fn every_method_answers_what_the_blocks_say() {
    // Every status and history cached, so the answers after new blocks extend cached ones.
    let mut fx = Fixture::start(160, 25, 31, |c| {
        c.cache_status_from = 1;
        c.cache_history_from = 1;
    });
    let c = fx.client();
    let e = common::expected(&fx.blocks);
    let genesis = bitcoin::blockdata::constants::genesis_block(bitcoin::Network::Regtest);

    // The client negotiated 1.6 when it connected; only the first server.version counts.
    assert!(
        c.raw_call("server.version", vec![]).is_err(),
        "only the first server.version is accepted"
    );
    let features = c.server_features().unwrap();
    let mut genesis_display = genesis.block_hash().to_byte_array();
    genesis_display.reverse();
    assert_eq!(features.genesis_hash, genesis_display);
    c.ping().unwrap();
    assert!(c
        .raw_call("server.banner", vec![])
        .unwrap()
        .as_str()
        .unwrap()
        .contains("cairn"));
    assert_eq!(
        c.raw_call("server.donation_address", vec![]).unwrap(),
        json!("")
    );
    assert_eq!(
        c.raw_call("server.peers.subscribe", vec![]).unwrap(),
        json!([])
    );

    // Headers.
    let tip = c.block_headers_subscribe().unwrap();
    assert_eq!(tip.height, 160);
    assert_eq!(tip.header, fx.blocks[159].header);
    assert_eq!(c.block_header(0).unwrap(), genesis.header);
    assert_eq!(c.block_header(77).unwrap(), fx.blocks[76].header);
    let chunk = c.block_headers(150, 50).unwrap();
    assert_eq!(chunk.count, 11);
    assert_eq!(chunk.headers[10], fx.blocks[159].header);
    // Checkpoint proofs against a root this test computes with the bitcoin crate.
    let mut hashes = vec![genesis.block_hash()];
    hashes.extend(fx.blocks.iter().map(|b| b.block_hash()));
    for (height, cp) in [(5u32, 100u32), (100, 100), (0, 160), (159, 160)] {
        let proof = c
            .raw_call(
                "blockchain.block.header",
                vec![Param::Usize(height as usize), Param::Usize(cp as usize)],
            )
            .unwrap();
        let root: bitcoin::TxMerkleNode = bitcoin::merkle_tree::calculate_root(
            hashes[..=cp as usize]
                .iter()
                .map(|h| bitcoin::TxMerkleNode::from_byte_array(h.to_byte_array())),
        )
        .unwrap();
        let mut root_rpc = root.to_byte_array();
        root_rpc.reverse();
        assert_eq!(proof["root"], root_rpc.to_lower_hex_string());
        let branch: Vec<String> = serde_json::from_value(proof["branch"].clone()).unwrap();
        assert_eq!(
            fold(
                hashes[height as usize].to_byte_array(),
                &branch,
                height as usize
            ),
            root.to_byte_array()
        );
    }
    let headers = c
        .raw_call(
            "blockchain.block.headers",
            vec![Param::Usize(10), Param::Usize(5), Param::Usize(50)],
        )
        .unwrap();
    assert_eq!(headers["count"], 5);
    assert!(headers["root"].is_string() && headers["branch"].is_array());
    assert!(c
        .raw_call(
            "blockchain.block.header",
            vec![Param::Usize(10), Param::Usize(500)]
        )
        .is_err());

    // Scripts: history, status, balance, unspent for every script of the last 30 blocks and
    // the busiest ones.
    let scripts: Vec<ScriptBuf> = common::paid_scripts(&fx.blocks[130..]);
    for script in &scripts {
        let sh = ScriptHash::of(script);
        let want = &e.history[&sh];
        assert_eq!(&common::electrum_history(&c, script), want);
        let status = c
            .script_subscribe(script)
            .unwrap()
            .map(|s| (*s).to_lower_hex_string());
        assert_eq!(status, status_of(want));
        let unspent = e.unspent.get(&sh).cloned().unwrap_or_default();
        let balance: u64 = unspent.values().map(|v| v.1).sum();
        let got = c.script_get_balance(script).unwrap();
        assert_eq!((got.confirmed, got.unconfirmed), (balance, 0));
        // Raw, because the client re-sorts by (height, tx_pos) and loses the block order.
        let list = c
            .raw_call(
                "blockchain.scripthash.listunspent",
                vec![Param::String(sh.to_electrum_hex())],
            )
            .unwrap();
        let want: Vec<Value> = unspent
            .iter()
            .map(|((h, _, vout), (txid, v))| json!({"height": h, "tx_hash": txid.to_string(), "tx_pos": vout, "value": v}))
            .collect();
        assert_eq!(list, Value::Array(want));
        assert_eq!(c.script_list_unspent(script).unwrap().len(), unspent.len());
    }
    // An unused script: empty history, null status.
    let unused = ScriptBuf::from_bytes(vec![0x51; 3]);
    assert!(c.script_get_history(&unused).unwrap().is_empty());
    let unused_sh = Param::String(ScriptHash::of(&unused).to_electrum_hex());
    assert_eq!(
        c.raw_call("blockchain.scripthash.subscribe", vec![unused_sh.clone()])
            .unwrap(),
        Value::Null
    );
    assert_eq!(
        c.raw_call("blockchain.scripthash.unsubscribe", vec![unused_sh.clone()])
            .unwrap(),
        json!(true)
    );
    assert_eq!(
        c.raw_call("blockchain.scripthash.unsubscribe", vec![unused_sh])
            .unwrap(),
        json!(false)
    );

    // Transactions: raw, merkle proofs against the header's root, id_from_pos, verbose.
    for block in [&fx.blocks[120], &fx.blocks[159]] {
        let height = fx
            .blocks
            .iter()
            .position(|b| b.block_hash() == block.block_hash())
            .unwrap()
            + 1;
        for (pos, tx) in block.txdata.iter().enumerate().step_by(7) {
            let txid = tx.compute_txid();
            assert_eq!(c.transaction_get_raw(&txid).unwrap(), serialize(tx));
            let m = c.transaction_get_merkle(&txid, height).unwrap();
            assert_eq!((m.block_height, m.pos), (height, pos));
            let branch: Vec<String> = m.merkle.iter().map(|h| h.to_lower_hex_string()).collect();
            assert_eq!(
                fold(txid.to_byte_array(), &branch, pos),
                block.header.merkle_root.to_byte_array()
            );
            assert_eq!(c.txid_from_pos(height, pos).unwrap(), txid);
            let with = c.txid_from_pos_with_merkle(height, pos).unwrap();
            assert_eq!(with.tx_hash, txid);
            let verbose = c
                .raw_call(
                    "blockchain.transaction.get",
                    vec![Param::String(txid.to_string()), Param::Bool(true)],
                )
                .unwrap();
            assert_eq!(verbose["txid"], txid.to_string());
            assert_eq!(verbose["blockhash"], block.block_hash().to_string());
            assert_eq!(verbose["confirmations"], json!(161 - height));
            assert_eq!(verbose["vout"].as_array().unwrap().len(), tx.output.len());
        }
    }
    assert!(c
        .transaction_get_merkle(&fx.blocks[10].txdata[0].compute_txid(), 12)
        .is_err());

    // The mempool is empty: real answers about an empty mempool.
    let some = &scripts[0];
    let sh_hex = ScriptHash::of(some).to_electrum_hex();
    assert_eq!(
        c.raw_call(
            "blockchain.scripthash.get_mempool",
            vec![Param::String(sh_hex.clone())]
        )
        .unwrap(),
        json!([])
    );
    assert_eq!(
        c.raw_call("mempool.get_fee_histogram", vec![]).unwrap(),
        json!([])
    );
    assert_eq!(
        c.raw_call("blockchain.estimatefee", vec![Param::Usize(2)])
            .unwrap(),
        json!(0.000001)
    );
    assert_eq!(
        c.raw_call("mempool.get_info", vec![]).unwrap()["minrelaytxfee"],
        json!(0.000001)
    );
    let err = c
        .raw_call(
            "blockchain.transaction.broadcast",
            vec![Param::String("00".into())],
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("TX decode failed"), "{err}");

    // Notifications: new blocks notify the header and every script whose status changed.
    let before: Vec<Option<String>> = scripts
        .iter()
        .map(|s| status_of(&e.history[&ScriptHash::of(s)]))
        .collect();
    while c.block_headers_pop().unwrap().is_some() {}
    fx.add_blocks(3);
    let header = wait_for_header(&c, 163);
    assert_eq!(header.header, fx.blocks[162].header);
    let e2 = common::expected(&fx.blocks);
    let mut changed = 0;
    for (script, old) in scripts.iter().zip(&before) {
        let new = status_of(&e2.history[&ScriptHash::of(script)]);
        if &new != old {
            changed += 1;
            let mut last = None;
            while let Some(s) = c.script_pop(script).unwrap() {
                last = Some((*s).to_lower_hex_string());
            }
            assert_eq!(last, new, "notification for a changed script");
        } else {
            assert!(
                c.script_pop(script).unwrap().is_none(),
                "no notification without a change"
            );
        }
        // Histories cached before the new blocks, extended by their entries.
        let got: Vec<(bitcoin::Txid, u32)> = c
            .script_get_history(script)
            .unwrap()
            .iter()
            .filter(|h| h.height > 0)
            .map(|h| (h.tx_hash, h.height as u32))
            .collect();
        assert_eq!(
            got,
            e2.history[&ScriptHash::of(script)],
            "history after new blocks"
        );
    }
    assert!(changed > 0);
}

#[test]
fn protocol_1_6_answers_in_its_own_shapes() {
    let fx = Fixture::start(105, 5, 32, |_| {});
    let c = fx.client();
    assert_eq!(
        c.protocol_version().ok().as_deref(),
        Some("1.6"),
        "negotiated on connect"
    );
    let h = c
        .raw_call(
            "blockchain.block.headers",
            vec![Param::Usize(0), Param::Usize(3)],
        )
        .unwrap();
    assert_eq!(h["headers"].as_array().unwrap().len(), 3);
    assert!(h.get("hex").is_none());
    let tx = fx.blocks[104].txdata[0].compute_txid();
    // 1.6 (the released spec) still wants the height and answers without the block hash; the
    // scriptPubKey methods, outpoints and the new ping are 1.7's.
    let err = c
        .raw_call(
            "blockchain.transaction.get_merkle",
            vec![Param::String(tx.to_string())],
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("-32602"), "{err}");
    let m = c
        .raw_call(
            "blockchain.transaction.get_merkle",
            vec![Param::String(tx.to_string()), Param::Usize(105)],
        )
        .unwrap();
    assert_eq!(m["block_height"], 105);
    assert!(m.get("block_hash").is_none(), "{m}");
    let spk = &fx.blocks[104].txdata[0].output[0].script_pubkey;
    for (method, param) in [
        (
            "blockchain.scriptpubkey.get_history",
            Param::String(spk.as_bytes().to_lower_hex_string()),
        ),
        (
            "blockchain.outpoint.get_status",
            Param::String(tx.to_string()),
        ),
    ] {
        let err = c
            .raw_call(method, vec![param, Param::Usize(0)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("-32601"), "{method} on 1.6: {err}");
    }
    assert_eq!(c.raw_call("server.ping", vec![]).unwrap(), Value::Null);
    let f = c.server_features().unwrap();
    assert_eq!(f.protocol_max, "1.7");
    let raw_features = c.raw_call("server.features", vec![]).unwrap();
    assert_eq!(raw_features["hash_function"], "sha256");
    assert!(raw_features.get("method_flavours").is_none());

    // The same over a raw socket, negotiating 1.4 and then asking in 1.4 shapes.
    let mut s = TcpStream::connect(fx.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut ask = |req: Value| -> Value {
        s.write_all(format!("{req}\n").as_bytes()).unwrap();
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let v = ask(
        json!({"jsonrpc":"2.0","id":1,"method":"server.version","params":["t", ["1.1", "1.4.2"]]}),
    );
    assert_eq!(v["result"][1], "1.4.2");
    let h =
        ask(json!({"jsonrpc":"2.0","id":2,"method":"blockchain.block.headers","params":[0, 3]}));
    assert_eq!(h["result"]["hex"].as_str().unwrap().len(), 3 * 160);
    let m = ask(
        json!({"jsonrpc":"2.0","id":3,"method":"blockchain.transaction.get_merkle","params":[tx.to_string()]}),
    );
    assert_eq!(m["error"]["code"], -32602, "1.4 requires the height");
    let relay = ask(json!({"jsonrpc":"2.0","id":6,"method":"blockchain.relayfee","params":[]}));
    // Core 31's 0.1 sat/vB, in BTC/kvB.
    assert_eq!(
        relay["result"],
        json!(0.000001),
        "1.4 has relayfee: {relay}"
    );
    let relay16 = c
        .raw_call("blockchain.relayfee", vec![])
        .unwrap_err()
        .to_string();
    assert!(relay16.contains("-32601"), "1.6 has no relayfee: {relay16}");
    let none = ask(json!({"jsonrpc":"2.0","id":4,"method":"server.version","params":["t", "1.0"]}));
    assert!(none["error"].is_object());
    let mut fresh = TcpStream::connect(fx.addr).unwrap();
    fresh.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"server.version\",\"params\":[\"t\",\"1.0\"]}\n").unwrap();
    let mut line = String::new();
    BufReader::new(fresh).read_line(&mut line).unwrap();
    assert!(line.contains("unsupported protocol version"), "{line}");
}

#[test]
fn protocol_1_7_methods_outpoints_and_pings() {
    let mut fx = Fixture::start(150, 10, 35, |c| c.max_history = 12);
    let e = common::expected(&fx.blocks);
    let mut c = Lines::connect(fx.addr, "1.7");
    let f = c.call("server.features", json!([]))["result"].clone();
    assert_eq!(f["protocol_max"], "1.7");
    assert_eq!(
        f["method_flavours"],
        json!({}),
        "every optional feature is served"
    );
    // A server introducing itself: cairn discovers no peers, so not added (ElectrumX with
    // discovery off); anything but a features object is refused.
    assert_eq!(
        c.call("server.add_peer", json!([f.clone()]))["result"],
        false
    );
    assert_eq!(
        c.call("server.add_peer", json!(["x"]))["error"]["code"],
        -32602
    );
    assert!(f.get("hash_function").is_none(), "1.7 dropped it");
    // The script hash methods are gone; the scriptPubKey ones answer from the blocks.
    let some = &fx.blocks[120].txdata[1].output[0].script_pubkey;
    let sh = ScriptHash::of(some);
    assert_eq!(
        c.call(
            "blockchain.scripthash.get_history",
            json!([sh.to_electrum_hex()])
        )["error"]["code"],
        -32601
    );
    let spk = json!([some.as_bytes().to_lower_hex_string()]);
    let history = c.call("blockchain.scriptpubkey.get_history", spk.clone());
    let want: Vec<Value> = e.history[&sh]
        .iter()
        .map(|(t, h)| json!({"height": h, "tx_hash": t.to_string()}))
        .collect();
    if want.len() <= 12 {
        assert_eq!(history["result"], json!(want));
    }
    // A history over electrum_max_history: 1.7's code, and the old code for a 1.6 client.
    let (big, _) = e
        .history
        .iter()
        .find(|(_, h)| h.len() > 12)
        .expect("a busy script");
    let big_spk = fx
        .blocks
        .iter()
        .flat_map(|b| &b.txdata)
        .flat_map(|t| &t.output)
        .find(|o| ScriptHash::of(&o.script_pubkey) == *big)
        .unwrap()
        .script_pubkey
        .clone();
    let err = c.call(
        "blockchain.scriptpubkey.get_history",
        json!([big_spk.as_bytes().to_lower_hex_string()]),
    );
    assert_eq!(err["error"]["code"], 10001, "{err}");
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("history too large"));
    let mut old = Lines::connect(fx.addr, "1.6");
    let err = old.call(
        "blockchain.scripthash.get_history",
        json!([big.to_electrum_hex()]),
    );
    assert_eq!(err["error"]["code"], 1, "{err}");

    // get_merkle: the height is optional and the block hash is given.
    let tx = fx.blocks[130].txdata[2].compute_txid();
    let m = c.call("blockchain.transaction.get_merkle", json!([tx.to_string()]))["result"].clone();
    assert_eq!(
        (m["block_height"].clone(), m["pos"].clone()),
        (json!(131), json!(2))
    );
    assert_eq!(m["block_hash"], fx.blocks[130].block_hash().to_string());

    // get_merkle_witness: the wtxid's branch folds to the root the coinbase commits to (BIP141,
    // computed here with the witness reserved value), and the coinbase's own branch to the
    // header's merkle root.
    let block = &fx.blocks[130];
    let proof = c.call(
        "blockchain.transaction.get_merkle_witness",
        json!([tx.to_string(), 131, true]),
    )["result"]
        .clone();
    let wtx = &block.txdata[2];
    assert_eq!(proof["wtxid"], wtx.compute_wtxid().to_string());
    assert_eq!(
        (proof["block_height"].clone(), proof["pos"].clone()),
        (json!(131), json!(2))
    );
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_string())
            .collect()
    };
    let coinbase = &block.txdata[0];
    assert_eq!(proof["cb_tx"], serialize(coinbase).to_lower_hex_string());
    let cb_root = fold(
        coinbase.compute_txid().to_byte_array(),
        &strings(&proof["cb_proof"]),
        0,
    );
    assert_eq!(cb_root, block.header.merkle_root.to_byte_array());
    assert!(
        proof.get("merkle").is_none(),
        "a block with a witness commitment gets wmerkle only"
    );
    let witness_root = fold(
        wtx.compute_wtxid().to_byte_array(),
        &strings(&proof["wmerkle"]),
        2,
    );
    let mut preimage = witness_root.to_vec();
    preimage.extend_from_slice(coinbase.input[0].witness.nth(0).unwrap());
    let commitment = sha256d::Hash::hash(&preimage).to_byte_array();
    let committed = coinbase
        .output
        .iter()
        .rev()
        .map(|o| o.script_pubkey.as_bytes())
        .find(|s| s.len() >= 38 && s[..6] == [0x6a, 0x24, 0xaa, 0x21, 0xa9, 0xed])
        .unwrap();
    assert_eq!(&committed[6..38], &commitment[..]);
    let short = c.call(
        "blockchain.transaction.get_merkle_witness",
        json!([tx.to_string()]),
    )["result"]
        .clone();
    assert!(
        short.get("cb_tx").is_none() && short["wmerkle"] == proof["wmerkle"],
        "{short}"
    );
    // A block whose coinbase commits to no witnesses: the plain branch instead.
    let bare = fx.blocks.iter().position(|b| {
        !b.txdata[0].output.iter().any(|o| {
            o.script_pubkey
                .as_bytes()
                .starts_with(&[0x6a, 0x24, 0xaa, 0x21, 0xa9, 0xed])
        })
    });
    if let Some(i) = bare {
        let cb_txid = fx.blocks[i].txdata[0].compute_txid();
        let p = c.call(
            "blockchain.transaction.get_merkle_witness",
            json!([cb_txid.to_string()]),
        )["result"]
            .clone();
        assert!(p.get("wmerkle").is_none());
        assert_eq!(
            fold(cb_txid.to_byte_array(), &strings(&p["merkle"]), 0),
            fx.blocks[i].header.merkle_root.to_byte_array()
        );
    }
    assert_eq!(
        c.call(
            "blockchain.transaction.get_merkle_witness",
            json!([tx.to_string(), 7])
        )["error"]["code"],
        1
    );

    // server.ping: pong_len hex characters back; a ping sent as a notification gets no answer.
    assert_eq!(
        c.call("server.ping", json!([5, "deadbeef"]))["result"],
        json!({"data": "00000"})
    );
    assert_eq!(
        c.call("server.ping", json!([]))["result"],
        json!({"data": ""})
    );
    assert_eq!(
        c.call("server.ping", json!([0, "xyz"]))["error"]["code"],
        -32602
    );
    assert_eq!(
        c.call("server.ping", json!([8_000_001]))["error"]["code"],
        1
    );
    assert_eq!(c.call("server.ping", json!([-1]))["error"]["code"], -32602);
    c.s.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"server.ping\",\"params\":[\"00\"]}\n")
        .unwrap();
    assert_eq!(
        c.call("server.ping", json!([1]))["result"],
        json!({"data": "0"}),
        "the notification was not answered"
    );

    // Outpoint statuses, computed here from the blocks: spent, unspent, no such output.
    let (spent, (spender, _, spent_at)) = e.spent_by.iter().next().unwrap();
    let funded_at = e.positions[&spent.txid].0;
    let status = |c: &mut Lines, op: &bitcoin::OutPoint| {
        c.call(
            "blockchain.outpoint.get_status",
            json!([op.txid.to_string(), op.vout]),
        )["result"]
            .clone()
    };
    assert_eq!(
        status(&mut c, spent),
        json!({"height": funded_at, "spender_txhash": spender.to_string(), "spender_height": spent_at})
    );
    let unspent = e
        .outputs
        .keys()
        .find(|op| !e.spent_by.contains_key(op))
        .unwrap();
    assert_eq!(
        status(&mut c, unspent),
        json!({"height": e.positions[&unspent.txid].0})
    );
    assert_eq!(
        status(&mut c, &bitcoin::OutPoint::new(unspent.txid, 1000)),
        json!({})
    );
    assert_eq!(
        status(
            &mut c,
            &bitcoin::OutPoint::new(bitcoin::Txid::all_zeros(), 0)
        ),
        json!({})
    );
    let hint = c.call(
        "blockchain.outpoint.get_status",
        json!([unspent.txid.to_string(), unspent.vout, "0014ab"]),
    );
    assert_eq!(
        hint["result"],
        json!({"height": e.positions[&unspent.txid].0}),
        "the hint is not needed"
    );
    for bad in [
        json!([unspent.txid.to_string(), -1]),
        json!(["zz", 0]),
        json!([unspent.txid.to_string(), 0, "xyz"]),
        json!([unspent.txid.to_string()]),
    ] {
        assert_eq!(
            c.call("blockchain.outpoint.get_status", bad.clone())["error"]["code"],
            -32602,
            "{bad}"
        );
    }

    // Subscriptions: a mature coin spent in the mempool, and the output of that spend before it
    // exists; each notified as [[txid, vout], status].
    let gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 10,
        seed: 35,
    });
    let key = gen.miner_keys()[0];
    let ((height, _, vout), (coin_txid, value)) = e.unspent[&ScriptHash::of(&p2wpkh(&key))]
        .iter()
        .find(|((h, _, _), _)| h + 100 <= 150)
        .map(|(k, v)| (*k, *v))
        .expect("a mature coin");
    let coin_op = bitcoin::OutPoint::new(coin_txid, vout);
    let tx1 = spend(
        &key,
        coin_op,
        value,
        1_000,
        &p2wpkh(&cairn::generate::derive_key(77, 2)),
    );
    let txid1 = tx1.compute_txid();
    let sub = |c: &mut Lines, op: &bitcoin::OutPoint| {
        c.call(
            "blockchain.outpoint.subscribe",
            json!([op.txid.to_string(), op.vout]),
        )["result"]
            .clone()
    };
    assert_eq!(sub(&mut c, &coin_op), json!({"height": height}));
    assert_eq!(
        sub(&mut c, &bitcoin::OutPoint::new(txid1, 0)),
        json!({}),
        "kept though it does not exist yet"
    );
    let broadcast = c.call(
        "blockchain.transaction.broadcast",
        json!([serialize(&tx1).to_lower_hex_string()]),
    );
    assert_eq!(broadcast["result"], txid1.to_string());
    let mut notes = [
        c.note("blockchain.outpoint.subscribe"),
        c.note("blockchain.outpoint.subscribe"),
    ];
    notes.sort_by_key(|n| n["params"][0][0] != coin_op.txid.to_string());
    assert_eq!(
        notes[0]["params"],
        json!([[coin_op.txid.to_string(), coin_op.vout], {"height": height, "spender_txhash": txid1.to_string(), "spender_height": 0}])
    );
    assert_eq!(
        notes[1]["params"],
        json!([[txid1.to_string(), 0], {"height": 0}])
    );
    assert_eq!(
        c.call(
            "blockchain.outpoint.unsubscribe",
            json!([txid1.to_string(), 0])
        )["result"],
        true
    );
    assert_eq!(
        c.call(
            "blockchain.outpoint.unsubscribe",
            json!([txid1.to_string(), 0])
        )["result"],
        false
    );
    // A block that brings a 1.7 client fewer than two notifications brings a ping as cover.
    fx.add_blocks(1);
    assert_eq!(c.note("server.ping")["params"], json!(["0".repeat(128)]));
    assert_eq!(old.call("server.ping", json!([]))["result"], Value::Null);
    assert!(
        old.notes.iter().all(|n| n["method"] != "server.ping"),
        "1.6 clients get no pings"
    );
}

fn raw_exchange(addr: SocketAddr, send: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = s.write_all(send);
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line
}

#[test]
fn hostile_clients_get_errors_and_others_keep_being_served() {
    let fx = Fixture::start(102, 3, 33, |c| {
        c.max_line_bytes = 64 * 1024;
        c.max_batch = 100;
        c.idle_timeout = Duration::from_secs(5);
        c.max_history = 20;
        c.max_subscriptions = 3;
    });
    let addr = fx.addr;
    // A client that sends requests and never reads its answers.
    let mut hog = TcpStream::connect(addr).unwrap();
    let big = format!(
        "{}\n",
        json!({"jsonrpc":"2.0","id":1,"method":"blockchain.block.headers","params":[0, 2016]})
    );
    let writer = std::thread::spawn(move || {
        for _ in 0..2000 {
            if hog.write_all(big.as_bytes()).is_err() {
                break;
            }
        }
        hog
    });

    // Garbage.
    let answer: Value = serde_json::from_str(&raw_exchange(addr, b"\x00\xffnot json\n")).unwrap();
    assert_eq!(answer["error"]["code"], -32700);
    // Wrong parameter types.
    let answer: Value = serde_json::from_str(&raw_exchange(addr, b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"blockchain.block.header\",\"params\":[\"x\"]}\n")).unwrap();
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["code"], -32602);
    let answer: Value = serde_json::from_str(&raw_exchange(addr, b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"blockchain.scripthash.get_history\",\"params\":[12]}\n")).unwrap();
    assert_eq!(answer["error"]["code"], -32602);
    // Unknown method.
    let answer: Value = serde_json::from_str(&raw_exchange(
        addr,
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"no.such\",\"params\":[]}\n",
    ))
    .unwrap();
    assert_eq!(answer["error"]["code"], -32601);
    // A 10k-request batch.
    let batch: Vec<Value> = (0..10_000)
        .map(|i| json!({"jsonrpc":"2.0","id":i,"method":"server.ping","params":[]}))
        .collect();
    let mut line = serde_json::to_vec(&batch).unwrap();
    line.push(b'\n');
    // Over the line limit too: answered with an error, then the connection is closed.
    let answer: Value = serde_json::from_str(&raw_exchange(addr, &line)).unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"),
        "{answer}"
    );
    let batch: Vec<Value> = (0..500)
        .map(|i| json!({"jsonrpc":"2.0","id":i,"method":"server.ping","params":[]}))
        .collect();
    let mut line = serde_json::to_vec(&batch).unwrap();
    line.push(b'\n');
    let answer: Value = serde_json::from_str(&raw_exchange(addr, &line)).unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeds the limit"),
        "{answer}"
    );
    // A 10 MB line without a newline: an error and a disconnect, not 10 MB of memory.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let chunk = vec![b'a'; 1 << 20];
    let mut sent = 0;
    for _ in 0..10 {
        if s.write_all(&chunk).is_err() {
            break;
        }
        sent += 1;
    }
    let mut reply = String::new();
    let _ = BufReader::new(&s).read_line(&mut reply);
    assert!(reply.contains("longer than") || sent < 10, "{reply}");
    let mut rest = Vec::new();
    let _ = (&s).read_to_end(&mut rest);

    // A well-behaved client is served all along, batches included.
    let c = fx.client();
    // A history over the limit is an explicit error, not a truncated list.
    let miner = &fx.blocks[0].txdata[0].output[0].script_pubkey;
    let err = c.script_get_history(miner).unwrap_err().to_string();
    assert!(err.contains("history too large"), "{err}");
    assert!(c.script_list_unspent(miner).is_err());
    // Subscriptions over the per-connection limit are refused.
    for i in 0..3u8 {
        c.script_subscribe(&ScriptBuf::from_bytes(vec![0x51, i]))
            .unwrap();
    }
    let err = c
        .script_subscribe(&ScriptBuf::from_bytes(vec![0x51, 9]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("too many subscriptions"), "{err}");
    assert_eq!(c.block_headers_subscribe().unwrap().height, 102);
    let answers = c.batch_block_header(vec![1u32, 2, 3]).unwrap();
    assert_eq!(answers[2], fx.blocks[2].header);
    drop(writer);
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next text message of a WebSocket client, as JSON.
fn ws_next(rt: &tokio::runtime::Runtime, ws: &mut Ws) -> Value {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    rt.block_on(async {
        loop {
            match tokio::time::timeout(Duration::from_secs(30), ws.next())
                .await
                .unwrap()
            {
                Some(Ok(Message::Text(t))) => return serde_json::from_str(t.as_str()).unwrap(),
                Some(Ok(_)) => continue,
                other => panic!("no message: {other:?}"),
            }
        }
    })
}

#[test]
fn websocket_clients_get_the_tcp_answers_and_notifications() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let mut fx = Fixture::start(102, 3, 41, |c| {
        c.ws_addr = Some("127.0.0.1:0".parse().unwrap());
        c.max_line_bytes = 64 * 1024;
    });
    let ws_addr = fx.ws_addr.expect("a WebSocket listener");
    let (mut ws, _) = fx
        .rt
        .block_on(tokio_tungstenite::connect_async(format!("ws://{ws_addr}")))
        .unwrap();
    let rt = &fx.rt;
    let ask = |ws: &mut Ws, text: String| -> Value {
        rt.block_on(ws.send(Message::text(text))).unwrap();
        ws_next(rt, ws)
    };
    let version = ask(
        &mut ws,
        json!({"jsonrpc":"2.0","id":0,"method":"server.version","params":["ws-test","1.4"]})
            .to_string(),
    );
    assert_eq!(version["result"][1], "1.4");
    // The same requests over TCP and over WebSocket get the same answers.
    let miner = sha256::Hash::hash(fx.blocks[0].txdata[0].output[0].script_pubkey.as_bytes());
    let mut miner_hash = miner.to_byte_array();
    miner_hash.reverse();
    let requests = [
        json!({"jsonrpc":"2.0","id":1,"method":"blockchain.headers.subscribe","params":[]}),
        json!([{"jsonrpc":"2.0","id":2,"method":"blockchain.scripthash.get_history","params":[miner_hash.to_lower_hex_string()]},
               {"jsonrpc":"2.0","id":3,"method":"blockchain.block.headers","params":[10, 5]}]),
        json!({"jsonrpc":"2.0","id":4,"method":"blockchain.transaction.get","params":[fx.blocks[101].txdata[1].compute_txid().to_string()]}),
    ];
    for request in &requests {
        let over_ws = ask(&mut ws, request.to_string());
        let over_tcp: Value =
            serde_json::from_str(&raw_exchange(fx.addr, format!("{request}\n").as_bytes()))
                .unwrap();
        assert_eq!(over_ws, over_tcp, "{request}");
        assert!(over_ws.to_string().contains("result"), "{over_ws}");
    }
    // A batch whose answer is longer than one write piece (64 KiB) is still one message.
    let batch: Vec<Value> = (0..8)
        .map(|i| json!({"jsonrpc":"2.0","id":100 + i,"method":"blockchain.block.headers","params":[0, 100]}))
        .collect();
    let answer = ask(&mut ws, Value::Array(batch).to_string());
    assert!(answer.to_string().len() > 64 << 10);
    let answers = answer.as_array().expect("the whole batch in one message");
    assert_eq!(answers.len(), 8);
    assert_eq!(answers[7]["id"], 107);
    assert_eq!(answers[7]["result"]["count"], 100);
    // Garbage gets an error and the connection keeps serving.
    let answer = ask(&mut ws, "not json".into());
    assert_eq!(answer["error"]["code"], -32700);
    // A TCP request that arrives in two pieces with a notification sent between them is
    // still read whole.
    let tcp = TcpStream::connect(fx.addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut tcp_lines = BufReader::new(tcp.try_clone().unwrap());
    let mut line = String::new();
    (&tcp).write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"blockchain.headers.subscribe\",\"params\":[]}\n").unwrap();
    tcp_lines.read_line(&mut line).unwrap();
    (&tcp)
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"server.")
        .unwrap();
    // A new block is pushed to the subscribers (over WebSocket: as a message of its own).
    fx.add_blocks(1);
    line.clear();
    tcp_lines.read_line(&mut line).unwrap();
    assert!(line.contains("\"height\":103"), "{line}");
    (&tcp).write_all(b"ping\",\"params\":[]}\n").unwrap();
    line.clear();
    tcp_lines.read_line(&mut line).unwrap();
    let pong: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (pong["id"].clone(), pong["result"].clone()),
        (json!(2), Value::Null),
        "{line}"
    );
    let note = ws_next(&fx.rt, &mut ws);
    assert_eq!(note["method"], "blockchain.headers.subscribe");
    assert_eq!(note["params"][0]["height"], 103);
    // A message over the size limit gets an error, then the connection is closed.
    let answer = {
        fx.rt
            .block_on(ws.send(Message::text("x".repeat(70 * 1024))))
            .unwrap();
        ws_next(&fx.rt, &mut ws)
    };
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"),
        "{answer}"
    );
    let closed = fx.rt.block_on(async {
        loop {
            match tokio::time::timeout(Duration::from_secs(30), ws.next())
                .await
                .unwrap()
            {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return true,
                Some(Ok(_)) => continue,
            }
        }
    });
    assert!(closed);
    // Others are still served.
    assert_eq!(fx.client().block_headers_subscribe().unwrap().height, 103);
}

#[test]
fn a_reorg_changes_answers_and_notifies() {
    // Every status and history cached: the reorg must be noticed and both computed afresh.
    let mut fx = Fixture::start(140, 20, 34, |c| {
        c.cache_status_from = 1;
        c.cache_history_from = 1;
    });
    let fork = fx.gen.fork(5);
    fx.add_blocks(5);
    let c = fx.client();
    // Wait until the index has the 5 new blocks.
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.block_headers_subscribe().unwrap().height != 145 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    // Scripts paid by branch A's last block.
    let a_block = fx.blocks[144].clone();
    let mut fork_probe = fork.clone();
    let branch_b: Vec<Block> = (0..7).map(|_| fork_probe.next_block().unwrap()).collect();
    let chain_b: Vec<Block> = fx.blocks[..140].iter().chain(&branch_b).cloned().collect();
    let e = common::expected(&chain_b);
    // Scripts with a history on both branches (electrum-client cannot parse a null status).
    let scripts: Vec<ScriptBuf> = a_block
        .txdata
        .iter()
        .flat_map(|t| t.output.iter().map(|o| o.script_pubkey.clone()))
        .filter(|s| !s.is_op_return() && e.history.contains_key(&ScriptHash::of(s)))
        .collect();
    assert!(!scripts.is_empty());
    for s in &scripts {
        c.script_subscribe(s).unwrap();
        // Asked on branch A too: the history cache holds them when branch B replaces it.
        assert!(!c.script_get_history(s).unwrap().is_empty());
    }
    let a_tx = a_block.txdata[1].compute_txid();
    assert!(c.transaction_get_raw(&a_tx).is_ok());
    // Height 145's merkle tree is kept from this request: a reorg must not serve it for branch
    // B's block at the same height (the trees are kept by block hash).
    let merkle_of_145 = |block: &Block| {
        let with = c.txid_from_pos_with_merkle(145, 0).unwrap();
        assert_eq!(with.tx_hash, block.txdata[0].compute_txid());
        let branch: Vec<String> = with
            .merkle
            .iter()
            .map(|h| h.to_lower_hex_string())
            .collect();
        let root = fold(with.tx_hash.to_byte_array(), &branch, 0);
        assert_eq!(root, block.header.merkle_root.to_byte_array());
    };
    merkle_of_145(&a_block);

    // Branch B: 7 blocks on top of height 140.
    for b in &branch_b {
        fx.validator.submit_block(&serialize(b)).unwrap();
    }
    assert_eq!(fx.validator.tip().height, 147);
    let header = wait_for_header(&c, 147);
    assert_eq!(header.header, branch_b[6].header);
    let e_a = common::expected(&fx.blocks);
    let mut notified = 0;
    let branch_a_txids: std::collections::HashSet<bitcoin::Txid> = fx.blocks[140..]
        .iter()
        .flat_map(|b| b.txdata.iter().map(|t| t.compute_txid()))
        .collect();
    for s in &scripts {
        let old = e_a
            .history
            .get(&ScriptHash::of(s))
            .map(|h| status_of(h))
            .unwrap_or(None);
        let got = c.script_get_history(s).unwrap();
        let confirmed: Vec<(bitcoin::Txid, u32)> = got
            .iter()
            .filter(|h| h.height > 0)
            .map(|h| (h.tx_hash, h.height as u32))
            .collect();
        assert_eq!(
            confirmed,
            e.history
                .get(&ScriptHash::of(s))
                .cloned()
                .unwrap_or_default()
        );
        // Branch A's transactions that are still valid went back to the mempool.
        let unconfirmed: Vec<(bitcoin::Txid, i64)> = got
            .iter()
            .filter(|h| h.height <= 0)
            .map(|h| (h.tx_hash, h.height as i64))
            .collect();
        for (t, _) in &unconfirmed {
            assert!(
                branch_a_txids.contains(t),
                "only branch A's transactions return to the mempool"
            );
        }
        let want = status_of_with_mempool(&confirmed, &unconfirmed);
        let mut last = None;
        while let Some(st) = c.script_pop(s).unwrap() {
            last = Some((*st).to_lower_hex_string());
        }
        if want != old {
            notified += 1;
            assert_eq!(last, want, "a changed status must be notified");
        } else {
            assert!(last.is_none(), "no notification without a change");
        }
    }
    assert!(notified > 0, "the reorg changed statuses and notified them");
    if !chain_b
        .iter()
        .any(|b| b.txdata.iter().any(|t| t.compute_txid() == a_tx))
    {
        // Gone from the chain: either unknown now, or back in the mempool (no block fields).
        if let Ok(v) = c.raw_call(
            "blockchain.transaction.get",
            vec![Param::String(a_tx.to_string()), Param::Bool(true)],
        ) {
            assert!(
                v.get("blockhash").is_none(),
                "branch A's transaction is not confirmed any more"
            );
        }
    }
    assert_eq!(c.block_header(145).unwrap(), branch_b[4].header);
    merkle_of_145(&branch_b[4]);
}

/// A P2WPKH spend of `coin` (worth `value`) by `key`, paying `value - fee` to `to`.
/// The P2WPKH output script of a key.
fn p2wpkh(key: &bitcoin::secp256k1::SecretKey) -> ScriptBuf {
    let secp = bitcoin::secp256k1::Secp256k1::signing_only();
    ScriptBuf::new_p2wpkh(&bitcoin::CompressedPublicKey(key.public_key(&secp)).wpubkey_hash())
}

/// The unspent outputs of `script` that are mature (100 blocks deep) at the fixtures' 150-block tip.
fn mature_coins(
    c: &RawClient<ElectrumPlaintextStream>,
    script: &ScriptBuf,
) -> Vec<electrum_client::ListUnspentRes> {
    c.script_list_unspent(script)
        .unwrap()
        .into_iter()
        .filter(|u| u.height + 100 <= 150)
        .collect()
}

fn spend(
    key: &bitcoin::secp256k1::SecretKey,
    coin: bitcoin::OutPoint,
    value: u64,
    fee: u64,
    to: &ScriptBuf,
) -> bitcoin::Transaction {
    let out = bitcoin::TxOut {
        value: bitcoin::Amount::from_sat(value - fee),
        script_pubkey: to.clone(),
    };
    spend_all(key, &[(coin, value)], vec![out])
}

#[test]
fn mempool_broadcast_replacement_and_notifications() {
    let fx = Fixture::start(150, 10, 35, |_| {});
    let c = fx.client();
    let gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 10,
        seed: 35,
    });
    let key = gen.miner_keys()[0];
    let miner = p2wpkh(&key);
    // A mature coin of the miner.
    let coin = mature_coins(&c, &miner)
        .into_iter()
        .next()
        .expect("a mature coin");
    let op = bitcoin::OutPoint::new(coin.tx_hash, coin.tx_pos as u32);
    let dest = p2wpkh(&cairn::generate::derive_key(77, 1));
    let before = c.script_subscribe(&dest).unwrap();
    assert!(before.is_none());

    let tx1 = spend(&key, op, coin.value, 1_000, &dest);
    let txid1 = c.transaction_broadcast(&tx1).unwrap();
    assert_eq!(txid1, tx1.compute_txid());
    // Notified, and every answer now includes it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = c.script_pop(&dest).unwrap() {
            break (*s).to_lower_hex_string();
        }
        assert!(
            Instant::now() < deadline,
            "no notification for the mempool transaction"
        );
        c.ping().unwrap();
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(Some(status), status_of_with_mempool(&[], &[(txid1, 0)]));
    let mempool = c
        .raw_call(
            "blockchain.scripthash.get_mempool",
            vec![Param::String(ScriptHash::of(&dest).to_electrum_hex())],
        )
        .unwrap();
    assert_eq!(
        mempool,
        json!([{"height": 0, "tx_hash": txid1.to_string(), "fee": 1000}])
    );
    let bal = c.script_get_balance(&dest).unwrap();
    assert_eq!(
        (bal.confirmed, bal.unconfirmed),
        (0, (coin.value - 1_000) as i64)
    );
    let miner_bal = c.script_get_balance(&miner).unwrap();
    assert_eq!(miner_bal.unconfirmed, -(coin.value as i64));
    assert!(!c
        .script_list_unspent(&miner)
        .unwrap()
        .iter()
        .any(|u| u.tx_hash == coin.tx_hash && u.tx_pos == coin.tx_pos));
    assert_eq!(c.script_list_unspent(&dest).unwrap()[0].height, 0);
    assert_eq!(c.transaction_get_raw(&txid1).unwrap(), serialize(&tx1));
    let hist = c.raw_call("mempool.get_fee_histogram", vec![]).unwrap();
    assert_eq!(hist.as_array().unwrap().len(), 1);

    // A double spend paying less is refused with the reason; one paying more replaces it.
    let low = spend(&key, op, coin.value, 900, &dest);
    let err = c.transaction_broadcast(&low).unwrap_err().to_string();
    assert!(err.contains("insufficient fee"), "{err}");
    let high = spend(&key, op, coin.value, 5_000, &dest);
    let txid2 = c.transaction_broadcast(&high).unwrap();
    assert!(
        c.transaction_get_raw(&txid1).is_err(),
        "the replaced transaction is gone"
    );
    let mempool = c
        .raw_call(
            "blockchain.scripthash.get_mempool",
            vec![Param::String(ScriptHash::of(&dest).to_electrum_hex())],
        )
        .unwrap();
    assert_eq!(
        mempool,
        json!([{"height": 0, "tx_hash": txid2.to_string(), "fee": 5000}])
    );
    // A bad signature is refused by the kernel's script check.
    let mut forged = spend(&key, op, coin.value, 9_000, &dest);
    let mut items: Vec<Vec<u8>> = forged.input[0].witness.iter().map(|w| w.to_vec()).collect();
    items[0][10] ^= 1;
    forged.input[0].witness = bitcoin::Witness::from_slice(&items);
    let err = c.transaction_broadcast(&forged).unwrap_err().to_string();
    assert!(err.contains("script-verify"), "{err}");
    // Spending something that does not exist.
    let ghost = spend(&key, bitcoin::OutPoint::new(txid2, 7), 10_000, 1_000, &dest);
    let err = c.transaction_broadcast(&ghost).unwrap_err().to_string();
    assert!(err.contains("missingorspent"), "{err}");
}

fn status_of_with_mempool(
    confirmed: &[(bitcoin::Txid, u32)],
    mempool: &[(bitcoin::Txid, i64)],
) -> Option<String> {
    let mut text: String = confirmed.iter().map(|(t, h)| format!("{t}:{h}:")).collect();
    text.extend(mempool.iter().map(|(t, h)| format!("{t}:{h}:")));
    (!text.is_empty()).then(|| sha256::Hash::hash(text.as_bytes()).to_string())
}

/// A transaction spending `coins` (the miner's P2WPKH outputs, with their values) into
/// `outputs`, every input signed.
fn spend_all(
    key: &bitcoin::secp256k1::SecretKey,
    coins: &[(bitcoin::OutPoint, u64)],
    outputs: Vec<bitcoin::TxOut>,
) -> bitcoin::Transaction {
    use bitcoin::sighash::{EcdsaSighashType, SighashCache};
    let secp = bitcoin::secp256k1::Secp256k1::new();
    let pk = bitcoin::CompressedPublicKey(key.public_key(&secp));
    let spk = ScriptBuf::new_p2wpkh(&pk.wpubkey_hash());
    let mut tx = bitcoin::Transaction {
        version: bitcoin::transaction::Version::TWO,
        lock_time: bitcoin::absolute::LockTime::ZERO,
        input: coins
            .iter()
            .map(|(op, _)| bitcoin::TxIn {
                previous_output: *op,
                script_sig: ScriptBuf::new(),
                sequence: bitcoin::Sequence::ENABLE_RBF_NO_LOCKTIME,
                witness: bitcoin::Witness::new(),
            })
            .collect(),
        output: outputs,
    };
    let witnesses: Vec<bitcoin::Witness> = {
        let mut cache = SighashCache::new(&tx);
        coins
            .iter()
            .enumerate()
            .map(|(i, (_, value))| {
                let sighash = cache
                    .p2wpkh_signature_hash(
                        i,
                        &spk,
                        bitcoin::Amount::from_sat(*value),
                        EcdsaSighashType::All,
                    )
                    .unwrap();
                let msg = bitcoin::secp256k1::Message::from_digest(sighash.to_byte_array());
                let sig = bitcoin::ecdsa::Signature {
                    signature: secp.sign_ecdsa(&msg, key),
                    sighash_type: EcdsaSighashType::All,
                };
                bitcoin::Witness::p2wpkh(&sig, &pk.0)
            })
            .collect()
    };
    for (input, witness) in tx.input.iter_mut().zip(witnesses) {
        input.witness = witness;
    }
    tx
}

/// Issue 12's attacks through `broadcast`: a signed transaction spending one coin twice (its
/// input value counted twice) and one paying two outputs of 2^63 sat (a `u64` sum that wraps to
/// 0) are refused with Core's reasons, leave no trace in balances, and an honest payment from
/// the same coin is then accepted.
#[test]
fn consensus_invalid_transactions_are_refused_with_cores_reason() {
    let fx = Fixture::start(150, 10, 36, |_| {});
    let c = fx.client();
    let gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 10,
        seed: 36,
    });
    let key = gen.miner_keys()[0];
    let miner = p2wpkh(&key);
    let coin = mature_coins(&c, &miner)
        .into_iter()
        .next()
        .expect("a mature coin");
    let op = bitcoin::OutPoint::new(coin.tx_hash, coin.tx_pos as u32);
    let dest = p2wpkh(&cairn::generate::derive_key(78, 1));
    let pay = |sats: u64| bitcoin::TxOut {
        value: bitcoin::Amount::from_sat(sats),
        script_pubkey: dest.clone(),
    };

    let twice = spend_all(
        &key,
        &[(op, coin.value), (op, coin.value)],
        vec![pay(2 * coin.value - 10_000)],
    );
    let err = c.transaction_broadcast(&twice).unwrap_err().to_string();
    assert!(err.contains("bad-txns-inputs-duplicate"), "{err}");
    let wrap = spend_all(&key, &[(op, coin.value)], vec![pay(1 << 63), pay(1 << 63)]);
    let err = c.transaction_broadcast(&wrap).unwrap_err().to_string();
    assert!(err.contains("bad-txns-vout-negative"), "{err}");
    let over = spend_all(
        &key,
        &[(op, coin.value)],
        vec![pay(bitcoin::Amount::MAX_MONEY.to_sat() + 1)],
    );
    let err = c.transaction_broadcast(&over).unwrap_err().to_string();
    assert!(err.contains("bad-txns-vout-toolarge"), "{err}");
    for script in [&miner, &dest] {
        let bal = c.script_get_balance(script).unwrap();
        assert_eq!(bal.unconfirmed, 0, "a refused transaction left a trace");
    }
    assert_eq!(
        c.raw_call("mempool.get_fee_histogram", vec![]).unwrap(),
        json!([])
    );

    let honest = spend_all(&key, &[(op, coin.value)], vec![pay(coin.value - 1_000)]);
    assert_eq!(
        c.transaction_broadcast(&honest).unwrap(),
        honest.compute_txid()
    );
    assert_eq!(
        c.script_get_balance(&dest).unwrap().unconfirmed,
        (coin.value - 1_000) as i64
    );
}

/// Two clients broadcast conflicting spends of the same coin at the same moment, for many coins:
/// acceptance re-reads the mempool under the lock that inserts, so exactly one of each pair
/// enters (the other is an under-paying replacement) and the mempool never holds both.
#[test]
fn conflicting_transactions_broadcast_at_once_never_both_enter() {
    let fx = Fixture::start(150, 10, 37, |_| {});
    let gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 10,
        seed: 37,
    });
    let c = fx.client();
    let mut coins = Vec::new();
    for key in gen.miner_keys() {
        for u in mature_coins(&c, &p2wpkh(&key)) {
            coins.push((
                key,
                bitcoin::OutPoint::new(u.tx_hash, u.tx_pos as u32),
                u.value,
            ));
        }
    }
    assert!(coins.len() >= 8, "only {} mature coins", coins.len());
    let (dest_a, dest_b) = (
        p2wpkh(&cairn::generate::derive_key(79, 1)),
        p2wpkh(&cairn::generate::derive_key(79, 2)),
    );
    for (key, op, value) in coins.iter().take(16) {
        let pair = [
            spend(key, *op, *value, 1_000, &dest_a),
            spend(key, *op, *value, 1_000, &dest_b),
        ];
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let accepted: usize = std::thread::scope(|s| {
            let racers: Vec<_> = pair
                .iter()
                .map(|tx| {
                    let (barrier, client) = (barrier.clone(), fx.client());
                    s.spawn(move || {
                        barrier.wait();
                        client.transaction_broadcast(tx).is_ok() as usize
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).sum()
        });
        assert_eq!(
            accepted, 1,
            "both or neither of two conflicting spends of {op} were accepted"
        );
    }
    let in_pool: usize = [&dest_a, &dest_b]
        .iter()
        .map(|d| c.script_get_history(d).unwrap().len())
        .sum();
    assert_eq!(
        in_pool,
        coins.len().min(16),
        "the mempool holds one spend per coin"
    );
}

/// Issue 12, part 3: answers queued for clients share one budget. A client that asks for big
/// answers and never reads holds no more than its share (a quarter of
/// `electrum_answer_budget_mb`; what the kernel took does not count) and is disconnected once
/// its writes take nothing for the write timeout (3 s here; issue 25), long before the 60 s an
/// answer may wait for room, while another client is served.
#[test]
fn a_client_over_its_share_of_the_answer_budget_is_disconnected() {
    let fx = Fixture::start(150, 3, 38, |c| {
        c.answer_budget_bytes = 8 << 20;
        c.write_timeout = Duration::from_secs(3);
    });
    let addr = fx.addr;
    let mut hog = TcpStream::connect(addr).unwrap();
    // Each line a batch of 30 requests of 150 headers: about 720 kB of answer.
    let batch: Vec<Value> = (0..30)
        .map(|i| json!({"jsonrpc":"2.0","id":i,"method":"blockchain.block.headers","params":[0, 150]}))
        .collect();
    let line = format!("{}\n", Value::Array(batch));
    let started = Instant::now();
    for _ in 0..40 {
        if hog.write_all(line.as_bytes()).is_err() {
            break;
        }
    }
    // Someone else is served meanwhile.
    let c = fx.client();
    assert_eq!(
        c.block_header(150).unwrap().block_hash(),
        fx.blocks[149].block_hash()
    );
    // The hog reads nothing for a while: the socket buffers fill, then its queue.
    std::thread::sleep(Duration::from_secs(5));
    // Its connection has ended: what was written before reaches it, then EOF.
    hog.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut sink = Vec::new();
    let ended = hog.read_to_end(&mut sink);
    // Closed with requests of it still unread: a reset rather than EOF.
    let closed = ended.is_ok()
        || ended
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset);
    assert!(closed, "the hog was not disconnected: {ended:?}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "disconnected by a timeout, not by the budget"
    );
    assert!(
        sink.len() < 40 * 720_000,
        "every answer was sent: {} bytes",
        sink.len()
    );
}

/// The script with the longest history in `blocks`, and that history as the protocol lists it.
fn longest_history(blocks: &[Block]) -> (ScriptBuf, Value) {
    let e = common::expected(blocks);
    let (sh, history) = e.history.iter().max_by_key(|(_, h)| h.len()).unwrap();
    let script = blocks
        .iter()
        .flat_map(|b| &b.txdata)
        .flat_map(|t| &t.output)
        .find(|o| ScriptHash::of(&o.script_pubkey) == *sh)
        .unwrap()
        .script_pubkey
        .clone();
    let list: Vec<Value> = history
        .iter()
        .map(|(t, h)| json!({"height": h, "tx_hash": t.to_string()}))
        .collect();
    (script, Value::Array(list))
}

#[test]
fn long_histories_are_streamed_and_match_the_blocks() {
    // Histories of more than 50 entries are streamed in pages of 50 (4096 in production); the
    // busiest script here has over a hundred.
    let fx = Fixture::start(150, 20, 36, |c| {
        c.stream_history_from = 50;
        c.cache_status_from = 50;
        c.ws_addr = Some("127.0.0.1:0".parse().unwrap());
    });
    let (script, want) = longest_history(&fx.blocks);
    assert!(
        want.as_array().unwrap().len() > 100,
        "a long history: {}",
        want.as_array().unwrap().len()
    );
    let sh = ScriptHash::of(&script).to_electrum_hex();
    // Streamed over TCP, then a request right behind it: answered in order, whole.
    let mut c = Lines::connect(fx.addr, "1.4");
    let mut line = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": 7, "method": "blockchain.scripthash.get_history", "params": [sh]})
    );
    line.push_str(&format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": 8, "method": "server.ping", "params": []})
    ));
    c.s.write_all(line.as_bytes()).unwrap();
    let streamed: Value = c.next_note(Duration::from_secs(30)).unwrap();
    assert_eq!(
        (streamed["id"].clone(), streamed["result"].clone()),
        (json!(7), want.clone())
    );
    assert_eq!(c.next_note(Duration::from_secs(30)).unwrap()["id"], 8);
    // In a batch and over WebSocket it is built whole: the same entries.
    c.s.write_all(format!("{}\n", json!([{"jsonrpc": "2.0", "id": 9, "method": "blockchain.scripthash.get_history", "params": [sh]}])).as_bytes()).unwrap();
    let batch = c.next_note(Duration::from_secs(30)).unwrap();
    assert_eq!(batch[0]["result"], want);
    let rt = &fx.rt;
    let (mut ws, _) = rt
        .block_on(tokio_tungstenite::connect_async(format!(
            "ws://{}",
            fx.ws_addr.unwrap()
        )))
        .unwrap();
    use futures_util::SinkExt;
    rt.block_on(ws.send(tokio_tungstenite::tungstenite::Message::text(
        json!({"jsonrpc": "2.0", "id": 10, "method": "blockchain.scripthash.get_history", "params": [sh]}).to_string(),
    ))).unwrap();
    assert_eq!(ws_next(rt, &mut ws)["result"], want);
    // The status is the hash of that history (from the cache the first call filled).
    let status = c.call("blockchain.scripthash.subscribe", json!([sh]))["result"].clone();
    let again = Lines::connect(fx.addr, "1.4").call("blockchain.scripthash.subscribe", json!([sh]))
        ["result"]
        .clone();
    let text: String = want
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("{}:{}:", e["tx_hash"].as_str().unwrap(), e["height"]))
        .collect();
    assert_eq!(
        status,
        json!(sha256::Hash::hash(text.as_bytes()).to_string())
    );
    assert_eq!(again, status);
}

/// The history of `sh` as Electrum lists it.
fn history_json(e: &common::Expected, sh: &ScriptHash) -> Value {
    let list = e.history[sh].iter();
    list.map(|(t, h)| json!({"height": h, "tx_hash": t.to_string()}))
        .collect()
}

#[test]
fn answers_built_from_memory_inline_equal_those_built_in_the_pool() {
    // Histories read from their rows each time (none cached whole), the index cold.
    let fx = Fixture::start_cold(300, 20, 36, |c| c.cache_history_from = usize::MAX);
    let e = common::expected(&fx.blocks);
    let mut c = Lines::connect(fx.addr, "1.4");
    // The first request after a start asks the kernel whether its initial download is over
    // (in the pool); then every request is tried inline.
    c.call("blockchain.block.header", json!([0]));
    let counts = std::cell::Cell::new(fx.pool.inline_counts());
    let step = |answered: usize, refused: usize, what: &str| {
        let now = fx.pool.inline_counts();
        let before = counts.replace(now);
        assert_eq!(
            (now.answered - before.answered, now.refused - before.refused),
            (answered, refused),
            "{what}: inline answers and refusals"
        );
    };
    let by_length = |range: std::ops::Range<usize>| {
        let found = e.history.iter().find(|(_, h)| range.contains(&h.len()));
        *found.expect("a history of that length").0
    };
    let (small, long) = (by_length(2..6), by_length(300..100_000));
    const { assert!(cairn::work::INLINE_ROWS < 300) };
    // Cold: refused inline, built in the pool from the files; then inline from the cache.
    let get_history = |c: &mut Lines, sh: &ScriptHash| {
        let params = json!([sh.to_electrum_hex()]);
        c.call("blockchain.scripthash.get_history", params)["result"].clone()
    };
    assert_eq!(get_history(&mut c, &small), history_json(&e, &small));
    step(0, 1, "a small history, cold");
    assert_eq!(get_history(&mut c, &small), history_json(&e, &small));
    step(1, 0, "a small history, cached");
    // More rows than an inline answer may read: refused however warm, built in the pool.
    for round in ["cold", "cached"] {
        assert_eq!(get_history(&mut c, &long), history_json(&e, &long));
        step(0, 1, &format!("a long history, {round}"));
    }
    // A transaction is read from its block file: never tried inline. Its merkle proof reads
    // the block's txids from the index: from memory once they are cached.
    let tx = &fx.blocks[200].txdata[1];
    let txid = tx.compute_txid();
    let raw = c.call("blockchain.transaction.get", json!([txid]))["result"].clone();
    assert_eq!(raw, json!(serialize(tx).to_lower_hex_string()));
    step(0, 1, "a transaction");
    let proof = |c: &mut Lines| {
        c.call("blockchain.transaction.get_merkle", json!([txid, 201]))["result"].clone()
    };
    let first = proof(&mut c);
    let (before, tried) = (counts.get(), fx.pool.inline_counts());
    assert_eq!(
        tried.answered + tried.refused,
        before.answered + before.refused + 1
    );
    counts.set(tried);
    assert_eq!(proof(&mut c), first);
    step(1, 0, "a merkle proof, cached");
    assert_eq!(
        (first["pos"].clone(), first["block_height"].clone()),
        (json!(1), json!(201))
    );
    // A subscription refused inline halfway (its status reads every row) is taken once, in
    // the pool.
    let params = json!([long.to_electrum_hex()]);
    let status = c.call("blockchain.scripthash.subscribe", params.clone())["result"].clone();
    step(0, 1, "a subscription to a long history");
    assert_eq!(status, json!(status_of(&e.history[&long])));
    let unsubscribe = |c: &mut Lines| {
        c.call("blockchain.scripthash.unsubscribe", params.clone())["result"].clone()
    };
    assert_eq!(
        (unsubscribe(&mut c), unsubscribe(&mut c)),
        (json!(true), json!(false))
    );
    step(2, 0, "unsubscribing");
    // Headers are in memory: inline, cold or not.
    let header = c.call("blockchain.block.header", json!([77]))["result"].clone();
    assert_eq!(
        header,
        json!(serialize(&fx.blocks[76].header).to_lower_hex_string())
    );
    step(1, 0, "a header");
    // A batch and a broadcast go to the pool without reading anything inline.
    let batch = json!([{"jsonrpc": "2.0", "id": 90, "method": "blockchain.scripthash.get_history", "params": [small.to_electrum_hex()]}]);
    let answers = c.raw_batch(&format!("{batch}\n"));
    assert_eq!(answers[0]["result"], history_json(&e, &small));
    step(0, 1, "a batch");
    let refused = c.call("blockchain.transaction.broadcast", json!(["00"]));
    assert!(refused["error"].is_object(), "{refused}");
    step(0, 1, "a broadcast");
}

#[test]
fn a_history_over_the_limit_is_an_error_before_any_of_it() {
    let fx = Fixture::start(150, 20, 36, |c| {
        c.stream_history_from = 50;
        c.max_history = 100;
    });
    let (script, want) = longest_history(&fx.blocks);
    assert!(want.as_array().unwrap().len() > 100);
    let sh = ScriptHash::of(&script).to_electrum_hex();
    let mut old = Lines::connect(fx.addr, "1.4");
    let err = old.call("blockchain.scripthash.get_history", json!([sh]));
    assert_eq!(err["error"]["code"], 1, "{err}");
    assert!(err.get("result").is_none());
    let mut new = Lines::connect(fx.addr, "1.7");
    let err = new.call(
        "blockchain.scriptpubkey.get_history",
        json!([script.as_bytes().to_lower_hex_string()]),
    );
    assert_eq!(err["error"]["code"], 10001, "{err}");
    // The connection goes on.
    assert_eq!(
        new.call("server.ping", json!([2]))["result"],
        json!({"data": "00"})
    );
}

/// Issue 28: `blockchain.tweaks.subscribe(height, count, historical)` streams Cake's shape: one
/// notification per height with each eligible transaction's tweak and taproot outputs (x-only
/// key, amount, and in historical mode what spends it), computed here from the generated blocks;
/// without `historical` the outputs a later block spends are left out (and a transaction with
/// none left); then `{"message": "done"}`, which is also the result. The range is cut at the
/// tip; a batch cannot hold a stream.
#[test]
fn tweaks_stream_in_cakes_shape() {
    use std::collections::HashMap;
    let options = IndexOptions {
        filters: true,
        tweaks_from: Some(0),
    };
    let f = Fixture::start_with(120, 20, 63, options, |_| {});
    let blocks: Vec<&Block> = f.blocks.iter().collect();
    let want = common::expected_tweaks(&blocks);
    // What spends each output (txid, input, height), and each transaction's taproot outputs.
    let mut spends = HashMap::new();
    let mut taproot = HashMap::new();
    for (i, block) in f.blocks.iter().enumerate() {
        for tx in &block.txdata {
            let txid = tx.compute_txid();
            for (vin, input) in tx.input.iter().enumerate() {
                spends.insert(input.previous_output, (txid, vin, i + 1));
            }
            let outs: Vec<(u32, String, u64)> = (0..tx.output.len() as u32)
                .filter(|v| tx.output[*v as usize].script_pubkey.is_p2tr())
                .map(|v| {
                    let out = &tx.output[v as usize];
                    let key = out.script_pubkey.as_bytes()[2..].to_lower_hex_string();
                    (v, key, out.value.to_sat())
                })
                .collect();
            taproot.insert(txid, outs);
        }
    }
    let (mut told_spent, mut left_out) = (0, 0);
    let mut expected = |height: usize, historical: bool| -> Value {
        let mut block = serde_json::Map::new();
        for (txid, tweak, _) in want.get(height.wrapping_sub(1)).into_iter().flatten() {
            let mut pubkeys = serde_json::Map::new();
            for (vout, key, value) in &taproot[txid] {
                let spend = spends.get(&bitcoin::OutPoint::new(*txid, *vout));
                let mut item = vec![json!(key), json!(value)];
                match (spend, historical) {
                    (Some(_), false) => {
                        left_out += 1;
                        continue;
                    }
                    (Some((by, vin, at)), true) => {
                        let header = &f.blocks[at - 1].header;
                        let confirmed = json!({"height": at, "hash": header.block_hash().to_string(), "time": header.time});
                        item.push(
                            json!({"txid": by.to_string(), "vin": vin, "confirmed": confirmed}),
                        );
                        told_spent += 1;
                    }
                    (None, _) => {}
                }
                pubkeys.insert(vout.to_string(), Value::Array(item));
            }
            if !pubkeys.is_empty() {
                let entry =
                    json!({"tweak": tweak.to_lower_hex_string(), "output_pubkeys": pubkeys});
                block.insert(txid.to_string(), entry);
            }
        }
        json!({ height.to_string(): block })
    };
    let method = "blockchain.tweaks.subscribe";
    let done = json!({"jsonrpc": "2.0", "method": method, "params": [{"message": "done"}]});
    let mut c = Lines::connect(f.addr, "1.4");
    let mut stream = |params: Value| -> Vec<Value> {
        let answer = c.call(method, params.clone());
        assert_eq!(answer["result"], done, "{params}: {answer}");
        let notes: Vec<Value> = c.notes.drain(..).collect();
        assert_eq!(notes.last(), Some(&done), "{params}");
        assert!(notes.iter().all(|n| n["method"] == method), "{params}");
        notes[..notes.len() - 1]
            .iter()
            .map(|n| n["params"][0].clone())
            .collect()
    };
    for historical in [true, false] {
        let told = stream(json!([0, 200, historical]));
        assert_eq!(told.len(), 121, "heights 0 to the tip");
        for (height, note) in told.iter().enumerate() {
            assert_eq!(*note, expected(height, historical), "height {height}");
        }
    }
    assert!(
        told_spent > 10 && left_out == told_spent,
        "{told_spent} spent outputs told, {left_out} left out"
    );
    let heights = |notes: Vec<Value>| -> Vec<String> {
        let keys = notes.iter().flat_map(|n| n.as_object().unwrap().keys());
        keys.cloned().collect()
    };
    assert_eq!(
        heights(stream(json!([10, 5]))),
        ["10", "11", "12", "13", "14"]
    );
    assert_eq!(
        heights(stream(json!([118, 50, false]))),
        ["118", "119", "120"]
    );
    assert!(stream(json!([121, 5, false])).is_empty(), "above the tip");
    let batch = format!(
        "[{{\"jsonrpc\":\"2.0\",\"id\":90,\"method\":\"{method}\",\"params\":[1,2,false]}}]\n"
    );
    let answers = c.raw_batch(&batch);
    let message = answers[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not in a batch"), "{answers:?}");
}

/// Issue 28: `blockchain.tweaks.subscribe` lists no taproot output under `sp_min_dust`, as
/// Cake's server, which drops them as it indexes: with the dust limit at the largest output of a
/// transaction that has a smaller one too, that transaction is told with its outputs at or over
/// the limit only, and one with none left out.
///
/// *Fails before the fix:* a transaction with an output over the limit was told with all its
/// taproot outputs, the smaller ones included.
#[test]
fn tweaks_stream_leaves_out_outputs_under_the_dust_limit() {
    let options = IndexOptions {
        filters: true,
        tweaks_from: Some(0),
    };
    let f = Fixture::start_with(150, 40, 64, options, |_| {});
    let blocks: Vec<&Block> = f.blocks.iter().collect();
    let want = common::expected_tweaks(&blocks);
    let (height, dust) = want
        .iter()
        .enumerate()
        .find_map(|(i, rows)| {
            let mixed = rows
                .iter()
                .find(|(_, _, v)| v.iter().min() < v.iter().max())?;
            Some((i + 1, *mixed.2.iter().max()?))
        })
        .expect("a transaction with taproot outputs of different amounts");
    drop(f);
    let dusty = Fixture::start_with(height as u32, 40, 64, options, |c| c.sp_min_dust = dust);
    let mut c = Lines::connect(dusty.addr, "1.4");
    let method = "blockchain.tweaks.subscribe";
    // Without `historical` (cut-through) too: no output under the limit is ever told.
    c.call(method, json!([height, 1, false]));
    for note in c.notes.drain(..) {
        let block = note["params"][0][height.to_string()].clone();
        for tx in block.as_object().into_iter().flat_map(|b| b.values()) {
            let told = tx["output_pubkeys"].as_object().expect("output_pubkeys");
            assert!(
                told.values().all(|item| item[1].as_u64() >= Some(dust)),
                "{tx}"
            );
        }
    }
    c.call(method, json!([height, 1, true]));
    let note = c.notes.drain(..).next().expect("the height's notification");
    let block = note["params"][0][height.to_string()]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let kept: Vec<&(bitcoin::Txid, [u8; 33], Vec<u64>)> = want[height - 1]
        .iter()
        .filter(|(_, _, v)| v.iter().any(|v| *v >= dust))
        .collect();
    assert_eq!(block.len(), kept.len(), "{note}");
    for (txid, _, values) in kept {
        let told = &block[&txid.to_string()]["output_pubkeys"];
        let amounts: Vec<u64> = told
            .as_object()
            .expect("output_pubkeys")
            .values()
            .map(|item| item[1].as_u64().unwrap())
            .collect();
        let over = values.iter().filter(|v| **v >= dust).count();
        assert_eq!(amounts.len(), over, "{txid}: {told}");
        assert!(amounts.iter().all(|a| *a >= dust), "{txid}: {told}");
    }
}

/// Issue 28: `blockchain.block.tweaks` (Cake Wallet's dialect) answers each block's tweaks as
/// computed from prevouts the generator made (those with a taproot output of at least
/// `sp_min_dust`: all at the default 1,000 sat; some under a limit taken from the data), `[]`
/// for genesis and below the first height with tweaks, an error above the tip and from a server
/// that builds no tweaks.
#[test]
fn block_tweaks_are_each_eligible_transactions() {
    let options = IndexOptions {
        filters: true,
        tweaks_from: Some(0),
    };
    let f = Fixture::start_with(120, 20, 61, options, |_| {});
    let c = f.client();
    let blocks: Vec<&Block> = f.blocks.iter().collect();
    let want = common::expected_tweaks(&blocks);
    // Every generated output is worth 1,000 sat or more: at the default dust limit all are served.
    let hex_at = |rows: &[(bitcoin::Txid, [u8; 33], Vec<u64>)], dust: u64| {
        let kept: Vec<String> = rows
            .iter()
            .filter(|(_, _, values)| values.iter().any(|v| *v >= dust))
            .map(|(_, tweak, _)| tweak[..].to_lower_hex_string())
            .collect();
        json!(kept)
    };
    let mut eligible = 0;
    for (i, rows) in want.iter().enumerate() {
        let height = i + 1;
        let got = c
            .raw_call("blockchain.block.tweaks", vec![Param::Usize(height)])
            .unwrap();
        assert_eq!(got, hex_at(rows, 1_000), "height {height}");
        eligible += rows.len();
    }
    assert!(eligible > 20, "{eligible} eligible transactions");
    let genesis = c.raw_call("blockchain.block.tweaks", vec![Param::Usize(0)]);
    assert_eq!(genesis.unwrap(), json!([]));
    assert!(c
        .raw_call("blockchain.block.tweaks", vec![Param::Usize(121)])
        .is_err());
    // The same chain with the dust limit at a block's largest transaction's largest output: that
    // transaction is kept, a smaller one left out.
    let largest = |values: &Vec<u64>| values.iter().copied().max().unwrap_or(0);
    let (height, dust) = want
        .iter()
        .enumerate()
        .find_map(|(i, rows)| {
            let maxima: Vec<u64> = rows.iter().map(|r| largest(&r.2)).collect();
            let top = maxima.iter().copied().max()?;
            maxima.iter().any(|m| *m < top).then_some((i + 1, top))
        })
        .expect("a block with two eligible transactions of different sizes");
    let rows = &want[height - 1];
    assert!(hex_at(rows, dust) != hex_at(rows, 0) && hex_at(rows, dust) != json!([]));
    let dusty = Fixture::start_with(height as u32, 20, 61, options, |c| c.sp_min_dust = dust);
    let kept = dusty
        .client()
        .raw_call("blockchain.block.tweaks", vec![Param::Usize(height)]);
    assert_eq!(kept.unwrap(), hex_at(rows, dust));
    // With tweaks built from height 110, lower heights list none (their blocks have eligible
    // transactions: no silent payment is older than the wallet's birth), 110 on all of theirs.
    let first = 110;
    let later = IndexOptions {
        filters: true,
        tweaks_from: Some(first),
    };
    let from_first = Fixture::start_with(first + 4, 20, 61, later, |_| {});
    let c = from_first.client();
    let below = (1..first as usize).filter(|h| !want[h - 1].is_empty());
    assert!(
        below.clone().count() > 3,
        "blocks below {first} with tweaks"
    );
    for height in below.chain(first as usize..=first as usize + 4) {
        let got = c.raw_call("blockchain.block.tweaks", vec![Param::Usize(height)]);
        let expected = match height < first as usize {
            true => json!([]),
            false => hex_at(&want[height - 1], 1_000),
        };
        assert_eq!(
            got.unwrap(),
            expected,
            "height {height}, tweaks from {first}"
        );
    }
    let off = Fixture::start(5, 5, 62, |_| {});
    let refused = off
        .client()
        .raw_call("blockchain.block.tweaks", vec![Param::Usize(1)]);
    let message = format!("{:?}", refused.unwrap_err());
    assert!(message.contains("silent_payments = false"), "{message}");
}

/// BIP352 tagged hash, computed here apart from cairn's.
fn sp_tagged(tag: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let tag = sha256::Hash::hash(tag).to_byte_array();
    let mut data = [&tag[..], &tag[..]].concat();
    for part in parts {
        data.extend_from_slice(part);
    }
    sha256::Hash::hash(&data).to_byte_array()
}

/// A wallet (scan secret `scan`, label `label` if any) made to own taproot output `key` of the
/// transaction with tweak data `tweak`, as its `k = 0` output: its spend key is the output's
/// point less `t_0·G` (and the label's point). Checked with the `silentpayments` crate's scan.
fn sp_wallet_owning(scan: [u8; 32], tweak: &[u8; 33], key: [u8; 32], label: Option<u32>) -> String {
    use bitcoin::secp256k1::{Parity, PublicKey, Scalar, Secp256k1, SecretKey, XOnlyPublicKey};
    use silentpayments::receiving::{Label, Receiver};
    let secp = Secp256k1::new();
    let b_scan = SecretKey::from_slice(&scan).unwrap();
    let tweak_point = PublicKey::from_slice(tweak).unwrap();
    let shared = tweak_point
        .mul_tweak(&secp, &Scalar::from(b_scan))
        .unwrap()
        .serialize();
    let t0 = sp_tagged(b"BIP0352/SharedSecret", &[&shared, &0u32.to_be_bytes()]);
    let output = XOnlyPublicKey::from_slice(&key).unwrap();
    let minus = |secret: [u8; 32]| {
        SecretKey::from_slice(&secret)
            .unwrap()
            .public_key(&secp)
            .negate(&secp)
    };
    let mut spend = output.public_key(Parity::Even).combine(&minus(t0)).unwrap();
    if let Some(m) = label {
        let label = sp_tagged(b"BIP0352/Label", &[&scan, &m.to_be_bytes()]);
        spend = spend.combine(&minus(label)).unwrap();
    }
    let network = silentpayments::Network::Regtest;
    let mut receiver = Receiver::new(
        silentpayments::SpVersion::ZERO,
        b_scan.public_key(&secp),
        spend,
        Label::new(b_scan, 0),
        network,
    )
    .unwrap();
    if let Some(m) = label {
        receiver.add_label(Label::new(b_scan, m)).unwrap();
    }
    let ecdh =
        silentpayments::utils::receiving::calculate_ecdh_shared_secret(&tweak_point, &b_scan);
    let found = receiver.scan_transaction(&ecdh, &[output]).unwrap();
    assert_eq!(
        found.values().map(|m| m.len()).sum::<usize>(),
        1,
        "the crate finds it"
    );
    spend.serialize().to_lower_hex_string()
}

/// The eligible transactions of the last of `blocks` with their tweak and first taproot key.
fn sp_eligible_last(blocks: &[&Block]) -> Vec<(bitcoin::Txid, [u8; 33], [u8; 32])> {
    let tweaks = common::expected_tweaks(blocks);
    let last = blocks[blocks.len() - 1];
    tweaks[tweaks.len() - 1]
        .iter()
        .map(|(txid, tweak, _)| {
            let tx = last
                .txdata
                .iter()
                .find(|t| t.compute_txid() == *txid)
                .unwrap();
            let out = tx
                .output
                .iter()
                .find(|o| o.script_pubkey.is_p2tr())
                .unwrap();
            let key: [u8; 32] = out.script_pubkey.as_bytes()[2..34].try_into().unwrap();
            (*txid, *tweak, key)
        })
        .collect()
}

/// The history told by `subscription`'s scan, up to and with the notification at progress 1.0:
/// each positional (`[subscription, progress, history]`, Frigate's), naming the subscription as
/// its answer did, progress never falling; each entry's `tweak_key` checked against `tweaks`
/// and left out.
fn sp_scan_notes(c: &mut Lines, subscription: &Value) -> Vec<Value> {
    let (mut notes, mut others) = (Vec::new(), Vec::new());
    let mut progress = 0.0;
    loop {
        let note = c.note("blockchain.silentpayments.subscribe");
        let p = note["params"].as_array().unwrap();
        if p[0]["address"] != subscription["address"] {
            others.push(note);
            continue;
        }
        assert_eq!(p.len(), 3, "{note}");
        assert_eq!(&p[0], subscription, "{note}");
        let now = p[1].as_f64().unwrap();
        assert!(now >= progress && now <= 1.0, "{note}");
        progress = now;
        for entry in p[2].as_array().unwrap() {
            let keys: Vec<&String> = entry.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["height", "tweak_key", "tx_hash"], "{note}");
            assert_eq!(entry["tweak_key"].as_str().unwrap().len(), 66, "{note}");
            notes.push(json!({"height": entry["height"], "tx_hash": entry["tx_hash"]}));
        }
        if now == 1.0 {
            c.notes.extend(others);
            return notes;
        }
    }
}
/// The payments `cairn generate --silent-payments-per-mille` made, as the remote scanner tells
/// them: `(height, txid)` once per transaction, from `from`, with `labels` (change's 0 always).
fn sp_expected(payments: &[SpPayment], from: u32, labels: &[u32]) -> Vec<Value> {
    let mut told: Vec<Value> = Vec::new();
    for p in payments {
        let labelled = p.label.is_none_or(|l| l == 0 || labels.contains(&l));
        let entry = json!({"height": p.height, "tx_hash": p.txid.to_string()});
        if p.height >= from && labelled && told.last() != Some(&entry) {
            told.push(entry);
        }
    }
    told
}

/// A client-side scan (the private kind) with the `silentpayments` crate over Cake's
/// `blockchain.tweaks.subscribe(1, tip, true)` stream: each transaction's tweak and outputs
/// scanned by [`common::sp::Wallet`]; what it finds as `(txid, vout, label, key)`, sorted.
fn sp_client_scan(
    c: &mut Lines,
    tip: u32,
    wallet: &Value,
) -> Vec<(String, u32, Option<u32>, String)> {
    let scanner = common::sp::Wallet::from_json(wallet);
    let hex = |v: &Value| Vec::<u8>::from_hex(v.as_str().unwrap()).unwrap();
    let method = "blockchain.tweaks.subscribe";
    let answer = c.call(method, json!([1, tip, true]));
    assert_eq!(answer["result"]["params"][0]["message"], "done", "{answer}");
    let mut found = Vec::new();
    for note in c.notes.drain(..) {
        for (_, block) in note["params"][0].as_object().unwrap() {
            let Some(block) = block.as_object() else {
                continue;
            };
            for (txid, tx) in block {
                let outputs: Vec<(u32, [u8; 32])> = tx["output_pubkeys"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(vout, o)| (vout.parse().unwrap(), hex(&o[0]).try_into().unwrap()))
                    .collect();
                for (vout, label, key) in scanner.scan(&hex(&tx["tweak"]), &outputs) {
                    found.push((txid.clone(), vout, label, key));
                }
            }
        }
    }
    found.sort();
    found
}

/// Issue 28: a chain that pays a silent-payment wallet (`ChainGenerator::with_silent_payments`:
/// its address, labels 1 and 2 and change's 0, paid with the `silentpayments` crate's sending
/// side, one or two outputs per paying transaction). Frigate's remote scanner tells exactly its
/// payments: from the first block, from a later height, without the labels (change's still),
/// and after a reorg to a branch without the last one; a client-side scan with the crate over
/// Cake's tweak stream finds exactly the same outputs with their labels.
#[test]
fn generated_silent_payments_are_found_by_the_remote_scanner_and_a_client_side_scan() {
    let options = IndexOptions {
        filters: true,
        tweaks_from: Some(0),
    };
    let gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 20,
        seed: 88,
    })
    .with_silent_payments(100)
    .unwrap();
    let mut f = Fixture::start_from(gen, 125, options, |_| {});
    let wallet = f.gen.silent_wallet().unwrap();
    let payments = f.gen.silent_payments().to_vec();
    let labelled = payments
        .iter()
        .filter(|p| p.label.is_some_and(|l| l > 0))
        .count();
    let change = payments.iter().filter(|p| p.label == Some(0)).count();
    assert!(
        payments.len() >= 20 && labelled >= 3 && change >= 2,
        "{} payments, {labelled} to labels, {change} to change",
        payments.len()
    );
    let method = "blockchain.silentpayments.subscribe";
    let (scan, spend) = (&wallet["scan_private_key"], &wallet["spend_public_key"]);
    let mut c = Lines::connect(f.addr, "1.4");
    let all = c.call(method, json!([scan, spend, null, [1, 2]]))["result"].clone();
    assert_eq!(
        sp_scan_notes(&mut c, &all),
        sp_expected(&payments, 0, &[1, 2])
    );
    let mid = payments[payments.len() / 2].height;
    let mut other = Lines::connect(f.addr, "1.4");
    // By name, as Frigate also takes them.
    let named = json!({"scan_private_key": scan, "spend_public_key": spend, "start": mid});
    let later = other.call(method, named)["result"].clone();
    assert_eq!(
        sp_scan_notes(&mut other, &later),
        sp_expected(&payments, mid, &[])
    );
    // The client-side scan over the tweak server's data finds exactly the same outputs.
    let mut cake = Lines::connect(f.addr, "1.4");
    let want = common::sp::payments(&wallet);
    assert_eq!(sp_client_scan(&mut cake, 125, &wallet), want);

    // A block that pays the wallet, then a competing branch of two without that payment.
    let (main, fork) = loop {
        let before = f.gen.clone();
        let block = f.gen.next_block().unwrap();
        if f.gen.silent_payments().len() > before.silent_payments().len() {
            break (block, before.fork(5));
        }
        f.validator.submit_block(&serialize(&block)).unwrap();
    };
    let mut fork = fork;
    let branch = [fork.next_block().unwrap(), fork.next_block().unwrap()];
    f.validator.submit_block(&serialize(&main)).unwrap();
    let told = sp_scan_notes(&mut c, &all);
    let paid = f.gen.silent_payments().last().unwrap().clone();
    assert_eq!(
        told,
        sp_expected(std::slice::from_ref(&paid), 0, &[1, 2]),
        "the new block"
    );
    for b in &branch {
        f.validator.submit_block(&serialize(b)).unwrap();
    }
    let after = fork.silent_payments().to_vec();
    assert!(!after.contains(&paid), "the branch has no such payment");
    let mut fresh = Lines::connect(f.addr, "1.4");
    let tip = main_tip_height(&mut fresh, 127);
    assert_eq!(tip, 127, "the index never reached the branch's tip");
    let again = fresh.call(method, json!([scan, spend, null, [1, 2]]))["result"].clone();
    let mut told = sp_scan_notes(&mut fresh, &again);
    // The payment left with its block; back in the mempool (when the branch did not spend
    // its coins), it is told there, at height 0.
    let unconfirmed = json!({"height": 0, "tx_hash": paid.txid.to_string()});
    if told.last() == Some(&unconfirmed) {
        told.pop();
    }
    assert_eq!(told, sp_expected(&after, 0, &[1, 2]));
}

/// The tip height the server's index is at, asked until it is `want` (at most 30 s).
fn main_tip_height(c: &mut Lines, want: u64) -> u64 {
    let started = Instant::now();
    loop {
        let tip = c.call("blockchain.headers.subscribe", json!([]))["result"]["height"]
            .as_u64()
            .unwrap();
        if tip == want || started.elapsed() > Duration::from_secs(30) {
            return tip;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 28: Frigate's remote scanner. Wallets made to own one output of a generated block
/// (checked with the `silentpayments` crate) are found by `blockchain.silentpayments.subscribe`
/// from the start and not from after it, with and only with their label; one paid in a new
/// block is told as the block comes, one paid in a competing branch as the reorg to it comes
/// (a scan that did not notice the reorg would have started after the height it already had).
#[test]
fn frigate_scanner_finds_wallets_payments_through_new_blocks_and_a_reorg() {
    let options = IndexOptions {
        filters: true,
        tweaks_from: Some(0),
    };
    let mut f = Fixture::start_with(120, 20, 67, options, |_| {});
    let method = "blockchain.silentpayments.subscribe";
    let blocks: Vec<&Block> = f.blocks.iter().collect();
    let want = common::expected_tweaks(&blocks);
    let at = |h: usize| {
        let (txid, tweak, _) = want[h - 1][0];
        let tx = f.blocks[h - 1]
            .txdata
            .iter()
            .find(|t| t.compute_txid() == txid)
            .unwrap();
        let out = tx
            .output
            .iter()
            .find(|o| o.script_pubkey.is_p2tr())
            .unwrap();
        let key: [u8; 32] = out.script_pubkey.as_bytes()[2..34].try_into().unwrap();
        (txid, tweak, key)
    };
    let a_height = (105..=120).find(|h| !want[h - 1].is_empty()).unwrap();
    let b_height = (a_height + 1..=120)
        .find(|h| !want[h - 1].is_empty())
        .unwrap();
    let (a_txid, a_tweak, a_key) = at(a_height);
    let (b_txid, b_tweak, b_key) = at(b_height);
    let (scan_a, scan_b) = ([7u8; 32], [9u8; 32]);
    let spend_a = sp_wallet_owning(scan_a, &a_tweak, a_key, None);
    let spend_b = sp_wallet_owning(scan_b, &b_tweak, b_key, Some(1));
    let mut c = Lines::connect(f.addr, "1.4");
    let features = c.call("server.features", json!([]));
    assert_eq!(
        features["result"]["silent_payments"],
        json!([0]),
        "{features}"
    );

    let scan_a_hex = scan_a.to_lower_hex_string();
    let sub = c.call(method, json!([scan_a_hex, spend_a]))["result"].clone();
    let address = sub["address"].as_str().unwrap().to_string();
    assert!(address.starts_with("sprt1q"), "{sub}");
    assert_eq!(
        sub,
        json!({"address": address, "labels": [0], "start_height": 0})
    );
    let a_entry = json!({"height": a_height, "tx_hash": a_txid.to_string()});
    assert_eq!(sp_scan_notes(&mut c, &sub), vec![a_entry.clone()]);
    // From after it on another connection: nothing. From a time: the last block at or before
    // it. On this one the same keys start over, never after what it covered.
    let mut other = Lines::connect(f.addr, "1.4");
    let later = other.call(method, json!([scan_a_hex, spend_a, a_height + 1]))["result"].clone();
    assert_eq!(later["start_height"], a_height + 1);
    assert!(sp_scan_notes(&mut other, &later).is_empty());
    let time = f.blocks[a_height - 1].header.time;
    let timed = other.call(method, json!([scan_a_hex, spend_a, time]))["result"].clone();
    let from_time = (1..=120)
        .rev()
        .find(|h| f.blocks[h - 1].header.time <= time)
        .unwrap();
    assert_eq!(timed["start_height"], from_time, "{timed}");
    assert_eq!(sp_scan_notes(&mut other, &timed), vec![a_entry.clone()]);
    let again = c.call(method, json!([scan_a_hex, spend_a, a_height + 1]))["result"].clone();
    assert_eq!(again, sub, "not narrowed");
    assert_eq!(sp_scan_notes(&mut c, &again), vec![a_entry.clone()]);
    // A range: those heights only.
    let range = format!("{}-{}", a_height - 3, a_height - 1);
    let ranged = other.call(method, json!([scan_a_hex, spend_a, range]))["result"].clone();
    assert!(sp_scan_notes(&mut other, &ranged).is_empty(), "{ranged}");
    let range = format!("{}-{}", a_height, a_height);
    let stranger = [1u8; 32].to_lower_hex_string();
    let ranged = other.call(method, json!([stranger, spend_a, range]));
    assert!(sp_scan_notes(&mut other, &ranged["result"]).is_empty());
    let too_far = other.call(method, json!([scan_a_hex, spend_a, "5-500"]));
    assert_eq!(too_far["error"]["code"], -32602, "{too_far}");

    // The labelled wallet: found with its label only.
    let scan_b_hex = scan_b.to_lower_hex_string();
    let unlabelled = c.call(method, json!([scan_b_hex, spend_b]))["result"].clone();
    assert!(
        sp_scan_notes(&mut c, &unlabelled).is_empty(),
        "no label, not found"
    );
    let labelled = c.call(method, json!([scan_b_hex, spend_b, null, [5, 1]]))["result"].clone();
    assert_eq!(labelled["labels"], json!([0, 1, 5]));
    let b_entry = json!({"height": b_height, "tx_hash": b_txid.to_string()});
    assert_eq!(sp_scan_notes(&mut c, &labelled), vec![b_entry]);
    let b_address = labelled["address"].as_str().unwrap();
    for _ in 0..2 {
        let gone = c.call(
            "blockchain.silentpayments.unsubscribe",
            json!([scan_b_hex, spend_b]),
        );
        assert_eq!(gone["result"], b_address, "the address, subscribed or not");
    }

    // A new block, and a competing branch of two from the same parent.
    let mut fork = f.gen.fork(9);
    let main = f.gen.next_block().unwrap();
    let branch = [fork.next_block().unwrap(), fork.next_block().unwrap()];
    let on_main: Vec<&Block> = blocks.iter().copied().chain([&main]).collect();
    let on_branch: Vec<&Block> = blocks.iter().copied().chain([&branch[0]]).collect();
    let (c_txid, c_tweak, c_key) = sp_eligible_last(&on_main)[0];
    let (d_txid, d_tweak, d_key) = sp_eligible_last(&on_branch)
        .into_iter()
        .find(|(txid, _, _)| !main.txdata.iter().any(|t| t.compute_txid() == *txid))
        .unwrap();
    let (scan_c, scan_d) = ([11u8; 32], [13u8; 32]);
    let spend_c = sp_wallet_owning(scan_c, &c_tweak, c_key, None);
    let spend_d = sp_wallet_owning(scan_d, &d_tweak, d_key, None);
    let sub_c =
        c.call(method, json!([scan_c.to_lower_hex_string(), spend_c, 110]))["result"].clone();
    assert!(sp_scan_notes(&mut c, &sub_c).is_empty());
    let sub_d =
        c.call(method, json!([scan_d.to_lower_hex_string(), spend_d, 110]))["result"].clone();
    assert!(sp_scan_notes(&mut c, &sub_d).is_empty());
    f.validator.submit_block(&serialize(&main)).unwrap();
    let c_entry = json!({"height": 121, "tx_hash": c_txid.to_string()});
    assert_eq!(sp_scan_notes(&mut c, &sub_c), vec![c_entry]);
    for b in &branch {
        f.validator.submit_block(&serialize(b)).unwrap();
    }
    assert_eq!(f.validator.tip().height, 122);
    let d_entry = json!({"height": 121, "tx_hash": d_txid.to_string()});
    assert_eq!(sp_scan_notes(&mut c, &sub_d), vec![d_entry]);

    // The mempool: a wallet paid by a transaction in it is told with height 0 by its first
    // scan, or as the transaction enters when subscribed before.
    let chain: Vec<Block> = f.blocks.iter().chain(&branch).cloned().collect();
    let e = common::expected(&chain);
    let coins: Vec<(bitcoin::secp256k1::SecretKey, bitcoin::OutPoint, u64)> = f
        .gen
        .miner_keys()
        .into_iter()
        .flat_map(|k| {
            let mine = e.unspent.get(&cairn::types::ScriptHash::of(&p2wpkh(&k)));
            let mature = mine
                .into_iter()
                .flatten()
                .filter(|((h, _, _), _)| h + 100 <= 122);
            let coins: Vec<_> = mature
                .map(|((_, _, vout), (txid, value))| {
                    (k, bitcoin::OutPoint::new(*txid, *vout), *value)
                })
                .collect();
            coins
        })
        .take(2)
        .collect();
    assert_eq!(coins.len(), 2, "two mature coins");
    let paying = |(key, coin, value): (bitcoin::secp256k1::SecretKey, bitcoin::OutPoint, u64),
                  seed: u8| {
        let secp = bitcoin::secp256k1::Secp256k1::new();
        let output = bitcoin::secp256k1::SecretKey::from_slice(&[seed; 32]).unwrap();
        let x_only = output.x_only_public_key(&secp).0.serialize();
        let to = ScriptBuf::from_bytes([&[0x51, 0x20][..], &x_only].concat());
        let tx = spend(&key, coin, value, 1_000, &to);
        let prevout = bitcoin::TxOut {
            value: bitcoin::Amount::from_sat(value),
            script_pubkey: p2wpkh(&key),
        };
        let tweak = cairn::index::silent_payments::tx_tweak(&tx, &[prevout])
            .unwrap()
            .tweak;
        (tx, tweak, x_only)
    };
    let (tx_e, tweak_e, key_e) = paying(coins[0], 41);
    let (tx_f, tweak_f, key_f) = paying(coins[1], 43);
    let (scan_e, scan_f) = ([17u8; 32], [19u8; 32]);
    let spend_e = sp_wallet_owning(scan_e, &tweak_e, key_e, None);
    let spend_f = sp_wallet_owning(scan_f, &tweak_f, key_f, None);
    let sub_f =
        c.call(method, json!([scan_f.to_lower_hex_string(), spend_f, 122]))["result"].clone();
    assert!(sp_scan_notes(&mut c, &sub_f).is_empty());
    for tx in [&tx_e, &tx_f] {
        let sent = c.call(
            "blockchain.transaction.broadcast",
            json!([serialize(tx).to_lower_hex_string()]),
        );
        assert_eq!(sent["result"], tx.compute_txid().to_string(), "{sent}");
    }
    let f_entry = json!({"height": 0, "tx_hash": tx_f.compute_txid().to_string()});
    assert_eq!(sp_scan_notes(&mut c, &sub_f), vec![f_entry], "as it enters");
    let sub_e =
        c.call(method, json!([scan_e.to_lower_hex_string(), spend_e, 122]))["result"].clone();
    let e_entry = json!({"height": 0, "tx_hash": tx_e.compute_txid().to_string()});
    assert_eq!(
        sp_scan_notes(&mut c, &sub_e),
        vec![e_entry],
        "by the first scan"
    );

    // Keys that are not keys, label 0 or eleven labels, a 101st subscription: refused.
    let bad = c.call(method, json!(["00".repeat(32), spend_a]));
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("scan private key"),
        "{bad}"
    );
    for labels in [json!([0]), json!((1..=11).collect::<Vec<u32>>())] {
        let refused = c.call(method, json!([scan_a_hex, spend_a, 0, labels]));
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
    }
    for i in 0..95u8 {
        let scan = [i.wrapping_add(20); 32].to_lower_hex_string();
        let sub = c.call(method, json!([scan, spend_b, 121]));
        assert!(sub["result"].is_object(), "{i}: {sub}");
    }
    let last = [200u8; 32].to_lower_hex_string();
    let too_many = c.call(method, json!([last, spend_b]));
    assert!(
        too_many["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 100"),
        "{too_many}"
    );
}

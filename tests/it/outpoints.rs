//! Outpoint subscriptions (Electrum protocol 1.7) on a chain and mempool made by bitcoind's
//! wallet: every status cairn answers or notifies is compared with the one computed from
//! bitcoind's own view (its blocks, `getrawtransaction`, `gettxspendingprevout` and mempool
//! entries), through funding in the mempool, spends by unconfirmed children, confirmation, a
//! reorg that unspends and unfunds, and replacement by fee.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::lines::Lines;
use crate::common::{free_port, start_cairn, Bitcoind, Cairn};
use bitcoin::OutPoint;
use serde_json::{json, Value};

/// bitcoind's height of a transaction: its block's, or 0 or -1 in the mempool (-1 when it
/// depends on another mempool transaction). `None` if bitcoind does not know it.
fn height_of(node: &Bitcoind, txid: &str) -> Option<i64> {
    if let Ok(entry) = node.rpc_result(&["getmempoolentry", txid]) {
        let entry: Value = serde_json::from_str(&entry).unwrap();
        return Some(if entry["depends"].as_array().unwrap().is_empty() {
            0
        } else {
            -1
        });
    }
    let tx: Value =
        serde_json::from_str(&node.rpc_result(&["getrawtransaction", txid, "1"]).ok()?).unwrap();
    let hash = tx["blockhash"].as_str()?;
    let header = node.rpc_json(&["getblockheader", hash]);
    (header["confirmations"].as_i64()? > 0).then(|| header["height"].as_i64().unwrap())
}

/// The confirmed spender of `op` in bitcoind's active chain, found by reading every block from
/// `from` to the tip.
fn chain_spender(node: &Bitcoind, op: &OutPoint, from: i64) -> Option<(String, i64)> {
    let tip: i64 = node.rpc(&["getblockcount"]).parse().unwrap();
    for height in from..=tip {
        let hash = node.rpc(&["getblockhash", &height.to_string()]);
        let block = node.rpc_json(&["getblock", &hash, "2"]);
        for tx in block["tx"].as_array().unwrap() {
            let spends = tx["vin"].as_array().unwrap().iter().any(|i| {
                i["txid"].as_str() == Some(&op.txid.to_string())
                    && i["vout"].as_u64() == Some(u64::from(op.vout))
            });
            if spends {
                return Some((tx["txid"].as_str().unwrap().to_string(), height));
            }
        }
    }
    None
}

/// The status bitcoind's view gives `op`, in the protocol's shape.
fn oracle(node: &Bitcoind, op: &OutPoint) -> Value {
    let txid = op.txid.to_string();
    let Some(height) = height_of(node, &txid) else {
        return json!({});
    };
    let tx = node.rpc_json(&["getrawtransaction", &txid, "1"]);
    if tx["vout"].as_array().unwrap().len() <= op.vout as usize {
        return json!({});
    }
    let spender = match chain_spender(node, op, height.max(1)) {
        Some(found) => Some(found),
        None => {
            let query = json!([{"txid": txid, "vout": op.vout}]).to_string();
            let spending = node.rpc_json(&["gettxspendingprevout", &query]);
            spending[0]["spendingtxid"]
                .as_str()
                .map(|s| (s.to_string(), height_of(node, s).unwrap()))
        }
    };
    match spender {
        None => json!({"height": height}),
        Some((s, h)) => json!({"height": height, "spender_txhash": s, "spender_height": h}),
    }
}

/// A 1.7 client with its subscriptions and the last status it heard for each.
struct Watcher {
    c: Lines,
    last: HashMap<OutPoint, Value>,
}

impl Watcher {
    fn subscribe(&mut self, node: &Bitcoind, op: OutPoint) {
        let answer = self.c.call(
            "blockchain.outpoint.subscribe",
            json!([op.txid.to_string(), op.vout]),
        );
        assert_eq!(answer["result"], oracle(node, &op), "subscribe {op}");
        self.last.insert(op, answer["result"].clone());
    }

    /// Waits until the notifications bring every subscription to the status bitcoind gives it,
    /// then checks `get_status` agrees; returns how many notifications came.
    fn settle(&mut self, node: &Bitcoind, what: &str) -> usize {
        let want: HashMap<OutPoint, Value> =
            self.last.keys().map(|op| (*op, oracle(node, op))).collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut heard = 0;
        while self.last != want {
            assert!(
                Instant::now() < deadline,
                "{what}: heard {:#?}, bitcoind says {want:#?}",
                self.last
            );
            let Some(note) = self.c.next_note(Duration::from_millis(500)) else {
                continue;
            };
            if note["method"] != "blockchain.outpoint.subscribe" {
                continue;
            }
            let params = &note["params"];
            let op = OutPoint::new(
                params[0][0].as_str().unwrap().parse().unwrap(),
                params[0][1].as_u64().unwrap() as u32,
            );
            assert!(
                self.last.contains_key(&op),
                "{what}: a notification for {op}, never subscribed"
            );
            self.last.insert(op, params[1].clone());
            heard += 1;
        }
        for (op, status) in &want {
            let now = self.c.call(
                "blockchain.outpoint.get_status",
                json!([op.txid.to_string(), op.vout]),
            );
            assert_eq!(&now["result"], status, "{what}: get_status {op}");
        }
        heard
    }
}

/// A wallet transaction spending `inputs`, paying `outputs` (address to BTC), signed by
/// bitcoind's wallet and not sent: its hex and txid.
fn build(node: &Bitcoind, inputs: Value, outputs: Value) -> (String, bitcoin::Txid) {
    let raw = node.rpc(&[
        "createrawtransaction",
        &inputs.to_string(),
        &outputs.to_string(),
        "0",
        "true",
    ]);
    let signed = node.rpc_json(&["signrawtransactionwithwallet", &raw]);
    assert_eq!(signed["complete"], true, "{signed}");
    let hex = signed["hex"].as_str().unwrap().to_string();
    let tx: bitcoin::Transaction = bitcoin::consensus::deserialize(
        &<Vec<u8> as bitcoin::hex::FromHex>::from_hex(&hex).unwrap(),
    )
    .unwrap();
    (hex, tx.compute_txid())
}

fn synced(cairn: &Cairn, node: &Bitcoind, what: &str) {
    cairn.wait_for(&node.rpc(&["getbestblockhash"]), what);
}

#[test]
fn outpoint_statuses_follow_bitcoinds_chain_and_mempool() {
    let tmp = tempfile::tempdir().unwrap();
    let (node, mine) =
        Bitcoind::with_wallet_and(&tmp.path().join("bitcoind"), &["-txindex=1".into()], 110);
    let port = free_port();
    let cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[
            format!("--connect=127.0.0.1:{}", node.p2p_port),
            format!("--electrum-addr=127.0.0.1:{port}"),
        ],
    );
    synced(&cairn, &node, "initial sync");
    let mut w = Watcher {
        c: Lines::connect(format!("127.0.0.1:{port}").parse().unwrap(), "1.7"),
        last: HashMap::new(),
    };
    let broadcast = |w: &mut Watcher, hex: &str| {
        let answer = w.c.call("blockchain.transaction.broadcast", json!([hex]));
        assert!(answer.get("result").is_some(), "{answer}");
        let _ = node.rpc_result(&["sendrawtransaction", hex]);
    };

    // Two mature wallet coins: C funds A; W is B's second input, for the reorg below.
    let coins = node.rpc_json(&["listunspent", "101"]);
    let coin = |i: usize| {
        (
            coins[i]["txid"].as_str().unwrap().to_string(),
            coins[i]["vout"].as_u64().unwrap() as u32,
            coins[i]["amount"].as_f64().unwrap(),
        )
    };
    let (c_txid, c_vout, c_amount) = coin(0);
    let (w_txid, w_vout, w_amount) = coin(1);
    let c_op = OutPoint::new(c_txid.parse().unwrap(), c_vout);
    let x = node.rpc(&["getnewaddress", "", "bech32"]);
    let (a_hex, a) = build(
        &node,
        json!([{"txid": c_txid, "vout": c_vout}]),
        json!([{ x.clone(): format!("{:.8}", c_amount - 0.001) }]),
    );
    let a0 = OutPoint::new(a, 0);
    w.subscribe(&node, c_op);
    w.subscribe(&node, a0);
    assert_eq!(w.last[&a0], json!({}), "not funded yet");
    assert_eq!(w.settle(&node, "nothing happened"), 0);

    // Funded in the mempool; its coin spent there.
    broadcast(&mut w, &a_hex);
    assert!(w.settle(&node, "A in the mempool") >= 2);
    assert_eq!(w.last[&a0], json!({"height": 0}));

    // A child spending A's output and W: height -1 (its parent is unconfirmed).
    let y = node.rpc(&["getnewaddress", "", "bech32"]);
    let (b_hex, b) = build(
        &node,
        json!([{"txid": a.to_string(), "vout": 0}, {"txid": w_txid, "vout": w_vout}]),
        json!([{ y.clone(): format!("{:.8}", c_amount - 0.001 + w_amount - 0.001) }]),
    );
    let b0 = OutPoint::new(b, 0);
    w.subscribe(&node, b0);
    broadcast(&mut w, &b_hex);
    w.settle(&node, "B in the mempool");
    assert_eq!(w.last[&b0], json!({"height": -1}));
    assert_eq!(w.last[&a0]["spender_height"], -1);

    // A block with A alone: A confirmed, B's height -1 to 0.
    let h1 = node.rpc_json(&["generateblock", &mine, &json!([a_hex]).to_string()]);
    synced(&cairn, &node, "A mined");
    w.settle(&node, "A mined");
    assert_eq!(w.last[&b0], json!({"height": 0}));
    let h1_height =
        node.rpc_json(&["getblockheader", h1["hash"].as_str().unwrap()])["height"].clone();
    assert_eq!(
        w.last[&a0],
        json!({"height": h1_height, "spender_txhash": b.to_string(), "spender_height": 0})
    );

    // B mined in the next block: both confirmed.
    let h2 = node.rpc_json(&["generateblock", &mine, &json!([b_hex]).to_string()]);
    synced(&cairn, &node, "B mined");
    w.settle(&node, "B mined");
    assert!(w.last[&a0]["spender_height"].as_i64().unwrap() > 0);

    // A reorg: B's block is replaced by a branch that spends W elsewhere, so B can never come
    // back. A's output is unspent again and B's output is gone.
    node.rpc(&["invalidateblock", h2["hash"].as_str().unwrap()]);
    let z = node.rpc(&["getnewaddress", "", "bech32"]);
    let (t_hex, _) = build(
        &node,
        json!([{"txid": w_txid, "vout": w_vout}]),
        json!([{ z.clone(): format!("{:.8}", w_amount - 0.002) }]),
    );
    node.rpc(&["generateblock", &mine, &json!([t_hex]).to_string()]);
    node.rpc(&["generateblock", &mine, "[]"]);
    synced(&cairn, &node, "the reorg");
    w.settle(&node, "the reorg");
    assert_eq!(w.last[&a0], json!({"height": h1_height}), "unspent again");
    assert_eq!(
        w.last[&b0],
        json!({}),
        "its funding transaction left the chain for good"
    );

    // Spent in the mempool, then that spend replaced by one paying more.
    let spend_a = |fee: f64| {
        build(
            &node,
            json!([{"txid": a.to_string(), "vout": 0}]),
            json!([{ y.clone(): format!("{:.8}", c_amount - 0.001 - fee) }]),
        )
    };
    let (r1_hex, r1) = spend_a(0.0002);
    broadcast(&mut w, &r1_hex);
    w.settle(&node, "R1 in the mempool");
    assert_eq!(w.last[&a0]["spender_txhash"], r1.to_string());
    let (r2_hex, r2) = spend_a(0.001);
    broadcast(&mut w, &r2_hex);
    w.settle(&node, "R2 replaced R1");
    assert_eq!(w.last[&a0]["spender_txhash"], r2.to_string());

    // Mined: the spend confirmed.
    node.rpc(&["generatetoaddress", "1", &mine]);
    synced(&cairn, &node, "R2 mined");
    w.settle(&node, "R2 mined");
    assert!(w.last[&a0]["spender_height"].as_i64().unwrap() > 0);
    assert_eq!(
        w.c.call("blockchain.outpoint.unsubscribe", json!([a.to_string(), 0]))["result"],
        true
    );
}

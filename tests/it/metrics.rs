//! `--metrics-addr`: the Prometheus text passes `promtool check metrics`, the gauges equal what
//! bitcoind (the peer cairn synced from) says of the same chain and mempool, and the counters
//! move by exactly the requests the test makes.

use crate::common;

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::http::get;
use crate::common::lines::Lines;
use crate::common::{free_addr, start_cairn_from, Bitcoind};
use bitcoin::hashes::{sha256, Hash};
use serde_json::json;

/// One scrape of `/metrics`.
fn scrape(addr: SocketAddr) -> String {
    let (status, head, body) = get(addr, "/metrics");
    assert_eq!(status, 200, "{head}\n{body}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    body
}

/// The value of the sample `key` (name and labels, as printed), if present.
fn sample(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(' '))
        .map(|value| {
            value
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("{key}: {value}: {e}"))
        })
}

fn value(text: &str, key: &str) -> f64 {
    sample(text, key).unwrap_or_else(|| panic!("no {key} in\n{text}"))
}

/// Scrapes until `ready` holds (30 s at most); returns that scrape.
fn scrape_until(addr: SocketAddr, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let text = scrape(addr);
        if ready(&text) {
            return text;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what} never held:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `promtool check metrics`: Prometheus' own linter of the exposition format and naming rules.
fn promtool_check(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; contrib/test.sh installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics:\n{said}"
    );
}

/// The Electrum script hash of an address, from bitcoind's `getaddressinfo`.
fn scripthash(node: &Bitcoind, address: &str) -> String {
    let script = node.rpc_json(&["getaddressinfo", address])["scriptPubKey"]
        .as_str()
        .unwrap()
        .to_string();
    let script = bitcoin::hex::FromHex::from_hex(&script)
        .map(|b: Vec<u8>| b)
        .unwrap();
    let mut hash = sha256::Hash::hash(&script).to_byte_array();
    hash.reverse();
    bitcoin::hex::DisplayHex::to_lower_hex_string(&hash)
}

#[test]
fn metrics_pass_promtool_agree_with_bitcoind_and_count_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let (node, mine) = Bitcoind::with_wallet(&tmp.path().join("bitcoind"), 105);
    let paid = node.rpc(&["getnewaddress", "", "bech32"]);
    node.rpc(&["sendtoaddress", &paid, "1.0"]);
    node.rpc(&["generatetoaddress", "1", &mine]);

    let (http, metrics, electrum) = (free_addr(), free_addr(), free_addr());
    let cairn = start_cairn_from(
        &tmp.path().join("cairn"),
        &node,
        &[
            format!("--http-addr={http}"),
            format!("--metrics-addr={metrics}"),
            format!("--electrum-addr={electrum}"),
        ],
    );
    let tip = node.rpc(&["getbestblockhash"]);
    cairn.wait_for(&tip, "initial sync");

    // Gauges and sync counters against bitcoind.
    let height: f64 = node.rpc(&["getblockcount"]).parse().unwrap();
    let chain_txs = node.rpc_json(&["getchaintxstats", "1"])["txcount"]
        .as_f64()
        .unwrap();
    let first = scrape_until(metrics, "index at the tip", |t| {
        sample(t, "cairn_index_tip_height") == Some(height)
    });
    promtool_check(&first);
    assert_eq!(value(&first, "cairn_kernel_tip_height"), height);
    assert_eq!(value(&first, "cairn_best_header_height"), height);
    assert_eq!(
        value(&first, "cairn_index_blocks_total{event=\"connected\"}"),
        height + 1.0,
        "genesis and every block"
    );
    assert_eq!(
        value(&first, "cairn_index_blocks_total{event=\"disconnected\"}"),
        0.0
    );
    assert_eq!(
        value(&first, "cairn_index_transactions_total"),
        chain_txs,
        "getchaintxstats' txcount"
    );
    assert!(value(&first, "cairn_index_batch_write_seconds_count") >= 1.0);
    assert_eq!(
        value(&first, "cairn_p2p_peers{direction=\"outbound\"}"),
        1.0
    );
    assert_eq!(value(&first, "cairn_p2p_peers{direction=\"inbound\"}"), 0.0);
    // Every block came over P2P: at least their bytes were received (BIP324 adds its own).
    let block_bytes: f64 = (1..=height as u64)
        .map(|h| {
            node.rpc_json(&[
                "getblock",
                &node.rpc(&["getblockhash", &h.to_string()]),
                "1",
            ])["size"]
                .as_f64()
                .unwrap()
        })
        .sum();
    let received = value(&first, "cairn_p2p_received_bytes_total");
    assert!(
        received >= block_bytes && received < block_bytes * 2.0 + 1e6,
        "{received} bytes for {block_bytes} of blocks"
    );
    assert!(value(&first, "cairn_p2p_sent_bytes_total") > 0.0);
    assert!(value(&first, "cairn_rocksdb_size_bytes") >= 0.0);
    assert!(value(&first, "cairn_process_resident_memory_bytes") > 1e6);
    assert!(value(&first, "cairn_disk_free_bytes") > 0.0);

    // A mempool transaction relayed by bitcoind: count and virtual size as getmempoolentry says.
    let unconfirmed = node.pay_into_mempool(&paid, "0.5");
    let vsize = node.rpc_json(&["getmempoolentry", &unconfirmed])["vsize"]
        .as_f64()
        .unwrap();
    let with_tx = scrape_until(metrics, "the relayed transaction", |t| {
        sample(t, "cairn_mempool_transactions") == Some(1.0)
    });
    assert_eq!(value(&with_tx, "cairn_mempool_vsize_bytes"), vsize);
    // Its memory as Core counts it (checked to the byte against Core 31.99 in
    // tests/differential): some hundreds of bytes beyond its own.
    let usage = value(&with_tx, "cairn_mempool_usage_bytes");
    assert!(usage > 4.0 * vsize, "{usage} bytes for {vsize} vB");

    // Electrum: three histories, two subscriptions, one unknown method (an error, labelled
    // `other`, never with the client's text).
    let history = "cairn_electrum_requests_total{method=\"blockchain.scripthash.get_history\"}";
    let before = scrape(metrics);
    let sent_before = sample(
        &before,
        "cairn_electrum_sent_bytes_total{transport=\"tcp\"}",
    )
    .unwrap_or(0.0);
    let mut client = Lines::connect(electrum, "1.4");
    let sh = scripthash(&node, &paid);
    for _ in 0..3 {
        let answer = client.call("blockchain.scripthash.get_history", json!([sh]));
        assert_eq!(
            answer["result"].as_array().map(Vec::len),
            Some(2),
            "{answer}"
        );
    }
    client.call("blockchain.scripthash.subscribe", json!([sh]));
    client.call(
        "blockchain.scripthash.subscribe",
        json!([scripthash(&node, &mine)]),
    );
    let unknown = client.call("no.such.method\"}", json!([]));
    assert!(unknown.get("error").is_some(), "{unknown}");
    let during = scrape(metrics);
    promtool_check(&during);
    assert_eq!(
        value(&during, history) - sample(&before, history).unwrap_or(0.0),
        3.0
    );
    assert!(value(&during, "cairn_electrum_request_duration_seconds_count{method=\"blockchain.scripthash.get_history\"}") >= 3.0);
    // What the histories read: each at least the confirmed entry's history row and its tx row
    // (the other entry is the mempool transaction).
    let read = "cairn_electrum_read_rows_total{method=\"blockchain.scripthash.get_history\"}";
    assert!(
        value(&during, read) - sample(&before, read).unwrap_or(0.0) >= 6.0,
        "{during}"
    );
    assert!(
        value(
            &during,
            "cairn_electrum_read_bytes_total{method=\"blockchain.scripthash.get_history\"}"
        ) >= 6.0 * 17.0
    );
    assert_eq!(
        value(
            &during,
            "cairn_electrum_requests_total{method=\"server.version\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &during,
            "cairn_electrum_request_errors_total{method=\"other\"}"
        ),
        1.0
    );
    assert!(
        !during.contains("no.such.method"),
        "a client's method name became a label"
    );
    assert_eq!(
        value(&during, "cairn_electrum_connections{transport=\"tcp\"}"),
        1.0
    );
    assert_eq!(
        value(
            &during,
            "cairn_electrum_connections_total{transport=\"tcp\"}"
        ),
        1.0
    );
    assert_eq!(
        value(&during, "cairn_electrum_subscriptions{transport=\"tcp\"}"),
        2.0
    );
    assert!(
        value(
            &during,
            "cairn_electrum_sent_bytes_total{transport=\"tcp\"}"
        ) > sent_before + 100.0
    );
    drop(client);
    scrape_until(metrics, "the session's gauges taken back", |t| {
        sample(t, "cairn_electrum_connections{transport=\"tcp\"}") == Some(0.0)
            && sample(t, "cairn_electrum_subscriptions{transport=\"tcp\"}") == Some(0.0)
    });

    // HTTP: two filters and one filter-header range; a 404.
    for path in [
        format!("/filter/{tip}"),
        format!("/filter/{}", node.rpc(&["getblockhash", "1"])),
        "/filterheaders?start=0&count=5".into(),
    ] {
        assert_eq!(get(http, &path).0, 200, "{path}");
    }
    assert_eq!(get(http, "/no/such/path").0, 404);
    let after = scrape(metrics);
    assert_eq!(
        value(
            &after,
            "cairn_bip157_requests_total{message=\"cfilters\",transport=\"http\"}"
        ),
        2.0
    );
    assert_eq!(
        value(
            &after,
            "cairn_bip157_requests_total{message=\"cfheaders\",transport=\"http\"}"
        ),
        1.0
    );
    assert!(value(&after, "cairn_http_requests_total{status=\"200\"}") >= 3.0);
    assert_eq!(
        value(&after, "cairn_http_requests_total{status=\"404\"}"),
        1.0
    );

    // A new block: the mempool empties, the tips and counters move on.
    node.rpc(&["generatetoaddress", "1", &mine]);
    let mined = scrape_until(metrics, "the next block indexed", |t| {
        sample(t, "cairn_index_tip_height") == Some(height + 1.0)
    });
    assert_eq!(
        value(&mined, "cairn_index_blocks_total{event=\"connected\"}"),
        height + 2.0
    );
    assert_eq!(
        value(&mined, "cairn_index_transactions_total"),
        chain_txs + 2.0,
        "coinbase and the payment"
    );
    scrape_until(metrics, "the mempool emptied", |t| {
        sample(t, "cairn_mempool_transactions") == Some(0.0)
    });

    // Only GET /metrics is served there.
    assert_eq!(get(metrics, "/").0, 404);
    assert_eq!(common::http::post(metrics, "/metrics", "x").0, 405);
    cairn.stop();
}

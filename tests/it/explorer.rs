//! The explorer's pages (`/explorer/...`) against Bitcoin Core 31.99 on the same chain (made by
//! Knots's wallet): every figure a transaction's, a block's, an address's and the mempool's page
//! shows is checked against Core's RPC (`getrawtransaction` verbosity 2, `getblock`, `getblockfilter`,
//! `getmempoolinfo`); the search box's routes; bad queries answered 400 or 404 as pages; an
//! OP_RETURN carrying `<script>` shown as text; and a page as headless Chromium draws it.

use std::net::SocketAddr;

use crate::common::browser::{rendered, screenshot};
use crate::common::http::get;
use crate::common::{free_addr, start_cairn_from, Bitcoind};
use serde_json::Value;

/// A page answered 200, as HTML with the explorer's policy.
fn page(addr: SocketAddr, path: &str) -> String {
    let (status, head, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-type: text/html"), "{path}: {head}");
    assert!(
        head.contains("content-security-policy: default-src 'none'"),
        "{path}: {head}"
    );
    body
}

/// Where a 303 from `path` sends the browser: its `Location`, relative to `path`, resolved.
fn redirect(addr: SocketAddr, path: &str) -> String {
    let (status, head, body) = get(addr, path);
    assert_eq!(status, 303, "{path}: {body}");
    let location = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("location: ")
                .or_else(|| l.strip_prefix("Location: "))
        })
        .unwrap_or_else(|| panic!("{path}: no location in {head}"))
        .trim();
    assert!(
        !location.starts_with('/'),
        "relative, for a proxy's prefix: {location}"
    );
    let mut folders: Vec<&str> = path.split('?').next().unwrap().split('/').collect();
    folders.pop();
    let mut rest = location;
    while let Some(up) = rest.strip_prefix("../") {
        folders.pop();
        rest = up;
    }
    format!("{}/{rest}", folders.join("/"))
}

/// Where a search for `query` sends the visitor.
fn search(addr: SocketAddr, query: &str) -> String {
    redirect(addr, &format!("/explorer/search?q={query}"))
}

/// BTC as the pages show it, from bitcoind's amount.
fn btc(amount: &Value) -> String {
    format!("{:.8} BTC", amount.as_f64().unwrap())
}

/// The date part of a Unix time, `YYYY-MM-DD`, by `date` (not the page's own arithmetic).
fn utc_date(unix: i64) -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{unix}"), "+%Y-%m-%d %H:%M:%S UTC"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `<dt>name</dt><dd>value</dd>`, as a page lists a figure.
fn pair(name: &str, value: impl std::fmt::Display) -> String {
    format!("<dt>{name}</dt><dd>{value}</dd>")
}

/// The transaction page of `txid` against `getrawtransaction txid 2`.
fn check_tx(addr: SocketAddr, node: &Bitcoind, txid: &str) -> String {
    let html = page(addr, &format!("/explorer/tx/{txid}"));
    let core = node.rpc_json(&["getrawtransaction", txid, "2"]);
    for (name, field, unit) in [
        ("size", "size", " bytes"),
        ("virtual size", "vsize", " vB"),
        ("weight", "weight", " WU"),
        ("version", "version", ""),
        ("lock time", "locktime", ""),
    ] {
        assert!(
            html.contains(&pair(name, format!("{}{unit}", core[field]))),
            "{txid} {name}: {html}"
        );
    }
    assert!(
        html.contains(&pair("wtxid", core["hash"].as_str().unwrap())),
        "{txid} wtxid"
    );
    let mempool_fee = || node.rpc_json(&["getmempoolentry", txid])["fees"]["base"].clone();
    if let Some(fee) = core
        .get("fee")
        .cloned()
        .or_else(|| core.get("confirmations").is_none().then(mempool_fee))
    {
        let fee = &fee;
        let sats = (fee.as_f64().unwrap() * 1e8).round() as u64;
        assert!(
            html.contains(&pair("fee", format!("{} ({sats} sat)", btc(fee)))),
            "{txid} fee: {html}"
        );
    }
    let witness = core["vin"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i.get("txinwitness").is_some());
    assert!(html.contains(&pair("witness", if witness { "yes" } else { "no" })));
    if let Some(confirmations) = core.get("confirmations") {
        assert!(
            html.contains(&pair("confirmations", confirmations)),
            "{txid}: {html}"
        );
        let hash = core["blockhash"].as_str().unwrap();
        assert!(
            html.contains(&format!("<span class=\"hash\">{hash}</span>")),
            "{txid} block"
        );
    }
    for input in core["vin"].as_array().unwrap() {
        // A mempool transaction's prevouts are not in bitcoind's answer: from its parents.
        let parent = |i: &Value| {
            let tx = node.rpc_json(&["getrawtransaction", i["txid"].as_str()?, "1"]);
            Some(tx["vout"][i["vout"].as_u64()? as usize].clone())
        };
        let Some(prevout) = input.get("prevout").cloned().or_else(|| parent(input)) else {
            continue;
        };
        // Its address, or its script (bare multisig, P2PK) as the page shows it.
        let shown = match prevout["scriptPubKey"]["address"].as_str() {
            Some(address) => format!("\">{address}</a>"),
            None => "</span>".to_string(),
        };
        let row = format!(
            "{shown}</td><td class=\"num\">{}</td>",
            btc(&prevout["value"])
        );
        assert!(html.contains(&row), "{txid} input {input}");
    }
    for output in core["vout"].as_array().unwrap() {
        let amount = format!("<td class=\"num\">{}</td>", btc(&output["value"]));
        let id = format!("<tr id=\"output-{}\">", output["n"]);
        let at = html.find(&id).unwrap_or_else(|| panic!("{txid}: no {id}"));
        let row = &html[at..at + html[at..].find("</tr>").unwrap()];
        assert!(row.contains(&amount), "{txid} {row}");
        if let Some(address) = output["scriptPubKey"].get("address") {
            assert!(
                row.contains(&format!(">{}</a>", address.as_str().unwrap())),
                "{row}"
            );
        }
        // Spent or not, as bitcoind's UTXO set with its mempool says.
        let n = output["n"].to_string();
        let unspent = node.rpc(&["gettxout", txid, &n, "true"]);
        let nulldata = output["scriptPubKey"]["type"] == "nulldata";
        let said = match (unspent.is_empty(), nulldata) {
            (_, true) => "unspendable",
            (false, false) => "unspent",
            (true, false) => "</a>",
        };
        assert!(row.contains(said), "{txid}:{n} {row}");
    }
    html
}

/// Every row of an address page's history (`html`) against Core: what the transaction did to
/// `address` (its outputs to it minus the prevouts it spent of it, `getrawtransaction` 2) and its
/// fee (`fee`, or `getmempoolentry` for an unconfirmed one; 0 for a coinbase). Returns the rows.
fn check_address_rows(node: &Bitcoind, address: &str, html: &str) -> usize {
    let history = html.split_once("Unspent outputs").unwrap().0;
    let mut rows = 0;
    for row in history.split("<tr><td class=\"hash\">").skip(1) {
        let row = &row[..row.find("</tr>").unwrap()];
        let at = row.find("\">").unwrap() + 2;
        let txid = &row[at..at + 64];
        let tx = node.rpc_json(&["getrawtransaction", txid, "2"]);
        let sats = |v: &Value| (v.as_f64().unwrap() * 1e8).round() as i64;
        let mut net = 0i64;
        for out in tx["vout"].as_array().unwrap() {
            if out["scriptPubKey"]["address"] == address {
                net += sats(&out["value"]);
            }
        }
        let mut spent_unknown = false;
        for input in tx["vin"].as_array().unwrap() {
            match input.get("prevout") {
                Some(p) if p["scriptPubKey"]["address"] == address => net -= sats(&p["value"]),
                Some(_) => {}
                None => spent_unknown |= input.get("coinbase").is_none(),
            }
        }
        let fee = match tx.get("fee") {
            Some(fee) => sats(fee),
            None if spent_unknown => {
                sats(&node.rpc_json(&["getmempoolentry", txid])["fees"]["base"])
            }
            None => 0,
        };
        let sign = if net < 0 { "-" } else { "+" };
        let net = format!("{sign}{:.8} BTC", net.unsigned_abs() as f64 / 1e8);
        let cells = format!("<td class=\"num\">{net}</td><td class=\"num\">{fee} sat</td>");
        assert!(row.contains(&cells), "{txid}: {cells} in {row}");
        rows += 1;
    }
    rows
}

/// The block page at `height` against `getblock` and `getblockfilter`.
fn check_block(addr: SocketAddr, node: &Bitcoind, height: u64) -> String {
    let hash = node.rpc(&["getblockhash", &height.to_string()]);
    assert_eq!(
        search(addr, &height.to_string()),
        format!("/explorer/block-height/{height}")
    );
    let to = redirect(addr, &format!("/explorer/block-height/{height}"));
    assert_eq!(to, format!("/explorer/block/{hash}"));
    let html = page(addr, &format!("/explorer/block/{hash}"));
    let core = node.rpc_json(&["getblock", &hash, "1"]);
    assert!(html.contains(&pair("hash", &hash)));
    assert!(html.contains(&pair("height", height)));
    assert!(html.contains(&pair("confirmations", &core["confirmations"])));
    assert!(html.contains(&pair("merkle root", core["merkleroot"].as_str().unwrap())));
    assert!(html.contains(&pair("bits", core["bits"].as_str().unwrap())));
    assert!(html.contains(&pair("nonce", &core["nonce"])));
    assert!(html.contains(&pair(
        "version",
        format!("0x{}", core["versionHex"].as_str().unwrap())
    )));
    assert!(html.contains(&pair("transactions", &core["nTx"])));
    assert!(html.contains(&pair("size", format!("{} bytes", core["size"]))));
    assert!(html.contains(&pair("weight", format!("{} WU", core["weight"]))));
    if height > 0 {
        let stats = node.rpc_json(&["getblockstats", &hash]);
        let total = format!(
            "{:.8} BTC",
            stats["totalfee"].as_u64().unwrap() as f64 / 1e8
        );
        assert!(html.contains(&pair("total", total)), "{html}");
        if stats["txs"].as_u64() > Some(1) {
            let range = format!("{} to {} sat/vB", stats["minfeerate"], stats["maxfeerate"]);
            assert!(html.contains(&pair("fee rates", range)), "{html}");
        }
    }
    let median = node.rpc_json(&["getblock", &hash, "1"])["mediantime"]
        .as_i64()
        .unwrap();
    assert!(
        html.contains(&format!("<dt>median time</dt><dd>{}", utc_date(median))),
        "{html}"
    );
    let filter = node.rpc_json(&["getblockfilter", &hash]);
    assert!(html.contains(&pair("filter header", filter["header"].as_str().unwrap())));
    assert!(html.contains(&pair("filter", filter["filter"].as_str().unwrap())));
    html
}

#[test]
fn pages_show_what_bitcoind_says_and_refuse_bad_queries_as_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let args = ["-txindex=1", "-blockfilterindex=1", "-datacarriersize=83"].map(String::from);
    let (node, mine) = Bitcoind::with_wallet_and(&tmp.path().join("bitcoind"), &args, 130);
    // A confirmed payment with an OP_RETURN carrying markup, and one left in the mempool.
    let paid = node.rpc(&["getnewaddress", "", "bech32"]);
    let markup = "<script>alert(1)</script>".as_bytes();
    let data = bitcoin::hex::DisplayHex::to_lower_hex_string(markup);
    let outputs = format!("[{{\"{paid}\": 1.0}}, {{\"data\": \"{data}\"}}]");
    let sent = node.rpc_json(&["send", &outputs]);
    let confirmed = sent["txid"].as_str().unwrap().to_string();
    node.rpc(&["generatetoaddress", "1", &mine]);
    // Thirty blocks paying an address nothing spends from (anyone can: OP_TRUE), for a history
    // of coinbases only.
    let script = bitcoin::ScriptBuf::from(vec![0x51]);
    let far = bitcoin::Address::p2wsh(&script, bitcoin::Network::Regtest).to_string();
    node.rpc(&["generatetoaddress", "30", &far]);
    node.wait_for_indexes(std::time::Duration::from_secs(30));
    // The payment's output kept out of the next one, so the address's mempool change is +0.5.
    let vout = node.rpc_json(&["getrawtransaction", &confirmed, "1"])["vout"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["scriptPubKey"]["address"] == paid.as_str())
        .map(|o| o["n"].clone())
        .unwrap();
    let locked = format!("[{{\"txid\": \"{confirmed}\", \"vout\": {vout}}}]");
    node.rpc(&["lockunspent", "false", &locked]);
    // The oracle: Bitcoin Core 31.99 following Knots's chain (Knots's wallet makes the
    // transactions; every figure a page shows is checked against Core's RPC).
    let oracle_dir = tmp.path().join("core");
    let oracle_args = [
        "-txindex=1".to_string(),
        "-blockfilterindex=1".to_string(),
        format!("-connect=127.0.0.1:{}", node.p2p_port),
    ];
    let oracle = Bitcoind::start_core(&oracle_dir, &oracle_args);
    let tip_hash = node.rpc(&["getbestblockhash"]);
    let synced = std::time::Instant::now();
    while oracle.rpc(&["getbestblockhash"]) != tip_hash {
        assert!(synced.elapsed().as_secs() < 60, "Core never synced");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    oracle.wait_for_indexes(std::time::Duration::from_secs(30));

    let (http, electrum) = (free_addr(), free_addr());
    let cairn = start_cairn_from(
        &tmp.path().join("cairn"),
        &node,
        &[
            format!("--http-addr={http}"),
            format!("--electrum-addr={electrum}"),
        ],
    );
    cairn.wait_for(&node.rpc(&["getbestblockhash"]), "initial sync");
    node.wait_for_indexes(std::time::Duration::from_secs(30));
    // Sent once cairn is its peer: bitcoind announces a transaction when it enters.
    let unconfirmed = node.pay_into_mempool(&paid, "0.5");
    let relayed = std::time::Instant::now();
    while oracle
        .rpc_result(&["getmempoolentry", &unconfirmed])
        .is_err()
    {
        assert!(
            relayed.elapsed().as_secs() < 30,
            "the payment never reached Core"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let in_mempool = || page(http, "/explorer/mempool").contains(&unconfirmed);
    let waited = std::time::Instant::now();
    while !in_mempool() {
        assert!(
            waited.elapsed().as_secs() < 30,
            "the payment never reached cairn's mempool"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    // Transactions, confirmed and not, found by search.
    assert_eq!(
        search(http, &confirmed),
        format!("/explorer/tx/{confirmed}")
    );
    let html = check_tx(http, &oracle, &confirmed);
    assert!(
        html.contains("text: <bdi>&lt;script&gt;alert(1)&lt;/script&gt;</bdi>"),
        "{html}"
    );
    assert!(
        !html.contains("<script"),
        "markup of the chain in the page: {html}"
    );
    let html = check_tx(http, &oracle, &unconfirmed);
    assert!(html.contains(&pair("status", "unconfirmed, in the mempool")));
    assert!(
        html.contains(&pair("projected block", "the next block")),
        "{html}"
    );
    let entry = oracle.rpc_json(&["getmempoolentry", &unconfirmed]);
    let rate = entry["fees"]["base"].as_f64().unwrap() * 1e8 / entry["vsize"].as_f64().unwrap();
    assert!(
        html.contains(&pair("fee rate", format!("{rate:.2} sat/vB"))),
        "{html}"
    );
    // The confirmed payment's output is spent by the unconfirmed one or not; either way the
    // page says what bitcoind's wallet says.
    let outpoint = format!("{confirmed}:0");
    assert_eq!(
        search(http, &outpoint),
        format!("/explorer/tx/{confirmed}#output-0")
    );

    // Blocks: the payment's, the first two and the tip.
    let tip: u64 = node.rpc(&["getblockcount"]).parse().unwrap();
    let html = check_block(http, &oracle, tip - 30);
    assert!(html.contains(&confirmed), "the payment's block lists it");
    check_block(http, &oracle, 0);
    check_block(http, &oracle, 1);
    check_block(http, &oracle, tip);

    // The OP_TRUE address: a coinbase a block, newest first, 25 a page.
    assert_eq!(search(http, &far), format!("/explorer/address/{far}"));
    let html = page(http, &format!("/explorer/address/{far}"));
    assert_eq!(check_address_rows(&oracle, &far, &html), 25);
    let (history, unspent) = html.split_once("Unspent outputs").unwrap();
    let coinbase = |h: u64| {
        let hash = oracle.rpc(&["getblockhash", &h.to_string()]);
        oracle.rpc_json(&["getblock", &hash, "1"])["tx"][0]
            .as_str()
            .unwrap()
            .to_string()
    };
    let newest = history.find(&coinbase(tip)).expect("the tip's coinbase");
    let older = history.find(&coinbase(tip - 1)).expect("the one before");
    assert!(newest < older, "newest first");
    assert!(history.contains(&coinbase(tip - 24)));
    assert!(!history.contains(&coinbase(tip - 25)), "25 a page");
    let next = format!("/explorer/address/{far}?after={}", coinbase(tip - 24));
    assert!(history.contains(&next), "a link to the next page");
    let second = page(http, &next);
    assert!(second
        .split_once("Unspent outputs")
        .unwrap()
        .0
        .contains(&coinbase(tip - 25)));
    // Every coinbase is unspent, each worth what bitcoind says its output holds.
    for h in tip - 29..=tip {
        let value = &oracle.rpc_json(&["getrawtransaction", &coinbase(h), "1"])["vout"][0]["value"];
        let row = format!(
            "{}:0</a></td><td>{h}</td><td class=\"num\">{}</td>",
            coinbase(h),
            btc(value)
        );
        assert!(unspent.contains(&row), "{row}");
    }
    assert!(
        html.contains(&pair("transactions", "30 confirmed, 0 unconfirmed")),
        "{html}"
    );
    // The paid address: its balance as bitcoind's wallet counts it.
    let html = page(http, &format!("/explorer/address/{paid}"));
    assert_eq!(check_address_rows(&oracle, &paid, &html), 2);
    let received = node.rpc_json(&["getreceivedbyaddress", &paid, "1"]);
    assert!(html.contains(&pair("confirmed", btc(&received))), "{html}");
    assert!(
        html.contains(&pair("unconfirmed", "+0.50000000 BTC")),
        "{html}"
    );
    assert!(
        html.contains(&pair("transactions", "1 confirmed, 1 unconfirmed")),
        "{html}"
    );

    // The mempool.
    let html = page(http, "/explorer/mempool");
    let info = oracle.rpc_json(&["getmempoolinfo"]);
    // Its one transaction is the next block, whose fee range is that transaction's rate.
    let range = format!("{rate:.2} to {rate:.2} sat/vB");
    assert!(html.contains(&range), "{range}: {html}");
    assert!(
        html.contains(&pair("transactions", &info["size"])),
        "{html}"
    );

    // Bad queries: pages with 400 or 404, never 500.
    for (path, status) in [
        (
            "/explorer/search?q=bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
            303,
        ),
        (
            "/explorer/address/bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
            400,
        ),
        (
            "/explorer/search?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
            400,
        ),
        ("/explorer/search?q=", 400),
        ("/explorer/tx/nothex", 400),
        (&format!("/explorer/tx/{}", "ab".repeat(32)), 404),
        (&format!("/explorer/search?q={}", "ab".repeat(32)), 404),
        ("/explorer/block-height/4000000", 404),
        (&format!("/explorer/search?q={}", tip + 1), 303),
        (
            &format!(
                "/explorer/block/{}?start=9999",
                node.rpc(&["getblockhash", "1"])
            ),
            404,
        ),
        ("/explorer/nothing", 404),
    ] {
        let (got, head, body) = get(http, path);
        assert_eq!(got, status, "{path}: {body}");
        if status != 303 {
            assert!(
                head.to_ascii_lowercase().contains("text/html"),
                "{path}: {head}"
            );
            assert!(!body.contains("<script"), "{path}: {body}");
        }
    }

    // As Chromium draws it, with a screenshot kept for people to look at.
    let url = format!("http://{http}/explorer/tx/{confirmed}");
    let dom = rendered(&url);
    assert!(
        dom.contains(&confirmed)
            && dom.contains("<bdi>&lt;script&gt;alert(1)&lt;/script&gt;</bdi>"),
        "{dom}"
    );
    screenshot(&url, "explorer-tx.png", 1280, 1400);
    let dom = rendered(&format!("http://{http}/"));
    assert!(
        dom.contains("action=\"explorer/search\""),
        "the status page's search box"
    );
    cairn.stop();
}

/// The explorer on `cairn demo`'s chain (300 blocks of every common script kind), against Bitcoin
/// Core 31.99 loading the same blk files: the blocks at every 50th height and the tip, every
/// transaction of the tip's block, the first page of the most paid miner address, all as
/// Chromium draws them too.
#[test]
fn pages_of_the_demo_chain_agree_with_core() {
    use std::process::{Command, Stdio};
    let tmp = tempfile::tempdir().unwrap();
    let dd = tmp.path().join("cairn");
    let (http, electrum) = (free_addr(), free_addr());
    let mut demo = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["--network", "regtest", "--datadir"])
        .arg(&dd)
        .args(["--admin-addr", "127.0.0.1:0"])
        .args([
            "--http-addr",
            &http.to_string(),
            "--electrum-addr",
            &electrum.to_string(),
        ])
        .arg("demo")
        .env("CAIRN_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while get_status(http, "/blocks/tip/height") != Some(200) {
        assert!(
            started.elapsed().as_secs() < 180,
            "cairn demo never served HTTP"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let blocks = dd.join("regtest/demo-chain/blocks");
    let mut files: Vec<_> = std::fs::read_dir(&blocks)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("blk"))
        })
        .collect();
    files.sort();
    let mut args = vec!["-txindex=1".to_string(), "-blockfilterindex=1".to_string()];
    args.extend(files.iter().map(|f| format!("-loadblock={}", f.display())));
    let oracle = Bitcoind::start_core(&tmp.path().join("core"), &args);
    let tip: u64 = get(http, "/blocks/tip/height").2.parse().unwrap();
    oracle.wait_for_height(tip, std::time::Duration::from_secs(120));
    oracle.wait_for_indexes(std::time::Duration::from_secs(60));

    for height in (0..=tip).step_by(50).chain([tip]) {
        check_block(http, &oracle, height);
    }
    let hash = oracle.rpc(&["getblockhash", &tip.to_string()]);
    let txids = oracle.rpc_json(&["getblock", &hash, "1"])["tx"].clone();
    for txid in txids.as_array().unwrap() {
        check_tx(http, &oracle, txid.as_str().unwrap());
    }
    // The address the tip's coinbase pays: a miner's, paid in many blocks.
    let coinbase = oracle.rpc_json(&["getrawtransaction", txids[0].as_str().unwrap(), "1"]);
    let miner = coinbase["vout"][0]["scriptPubKey"]["address"]
        .as_str()
        .unwrap()
        .to_string();
    let html = page(http, &format!("/explorer/address/{miner}"));
    assert!(check_address_rows(&oracle, &miner, &html) > 0);
    let dom = rendered(&format!("http://{http}/explorer/address/{miner}"));
    assert!(
        dom.contains(&miner) && dom.contains("Unspent outputs"),
        "{dom}"
    );
    screenshot(
        &format!("http://{http}/explorer/block/{hash}"),
        "explorer-demo-block.png",
        1280,
        1400,
    );
    let _ = demo.kill();
    let _ = demo.wait();
}

/// The status of `GET path`, `None` while nothing listens.
fn get_status(addr: SocketAddr, path: &str) -> Option<u16> {
    std::net::TcpStream::connect(addr).ok()?;
    Some(get(addr, path).0)
}

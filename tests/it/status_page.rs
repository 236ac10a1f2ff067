//! The status page (`GET /`) in a real browser: headless Chromium loads it from a running
//! cairn that synced from a bitcoind, and the numbers it draws must equal `cairn status --json`
//! and bitcoind's mempool. A screenshot is kept in the target folder
//! (`$CARGO_TARGET_TMPDIR/status-page.png`).

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::browser::{attribute_of, rendered, screenshot, text_of};
use crate::common::http::get;
use crate::common::lines::Lines;
use crate::common::{free_addr, start_cairn_from, Bitcoind};
use serde_json::{json, Value};

fn api_status(addr: SocketAddr) -> Value {
    let (status, _, body) = get(addr, "/api/status");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn the_page_drawn_by_chromium_shows_what_cairn_status_says() {
    let tmp = tempfile::tempdir().unwrap();
    let (node, _) = Bitcoind::with_wallet(&tmp.path().join("bitcoind"), 101);

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
    // A payment bitcoind relays to cairn.
    node.rpc(&["sendtoaddress", &node.rpc(&["getnewaddress"]), "1.0"]);
    let start = Instant::now();
    // The fee histogram is built at each sample (every 5 s).
    while api_status(http)["mempool"]["fee_histogram"]
        .as_array()
        .map(Vec::len)
        != Some(1)
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the payment never reached cairn's mempool"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // One Electrum session with one subscription, open while the page is drawn.
    let mut wallet = Lines::connect(electrum, "1.4");
    wallet.call("blockchain.headers.subscribe", json!([]));
    let sh = "0000000000000000000000000000000000000000000000000000000000000000";
    wallet.call("blockchain.scripthash.subscribe", json!([sh]));

    // The page itself: self-contained (nothing loaded from elsewhere) and locked to itself.
    let (status, head, page) = get(http, "/");
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'"),
        "{head}"
    );
    // Links only to its own paths, relative (the explorer's); nothing loaded.
    let links_away = page.match_indices(" href=\"").any(|(at, found)| {
        let href = &page[at + found.len()..];
        let href = &href[..href.find('"').unwrap_or(href.len())];
        href.starts_with('/') || href.contains(':')
    });
    assert!(
        !page.contains(" src=") && !links_away,
        "the page loads nothing else"
    );
    assert_eq!(common::http::post(http, "/", "x").0, 405);
    assert_eq!(common::http::post(http, "/api/status", "x").0, 405);

    let url = format!("http://{http}/");
    let dom = rendered(&url);
    let status = cairn.status();
    assert_eq!(
        attribute_of(&dom, "state", "class").as_deref(),
        Some(""),
        "{dom}"
    );
    assert!(
        dom.contains("data-drawn=\"true\""),
        "the script never drew: {dom}"
    );
    assert_eq!(text_of(&dom, "error"), "");
    assert_eq!(
        text_of(&dom, "network"),
        status["network"].as_str().unwrap()
    );
    assert_eq!(text_of(&dom, "state"), "in sync");
    assert_eq!(
        text_of(&dom, "kernel-height"),
        status["kernel_tip"]["height"].to_string()
    );
    assert_eq!(
        text_of(&dom, "kernel-hash"),
        status["kernel_tip"]["hash"].as_str().unwrap()
    );
    assert_eq!(
        text_of(&dom, "index-height"),
        status["index_tip"]["height"].to_string()
    );
    assert_eq!(
        text_of(&dom, "index-hash"),
        status["index_tip"]["hash"].as_str().unwrap()
    );
    assert_eq!(
        text_of(&dom, "best-header-height"),
        node.rpc(&["getblockcount"])
    );
    assert_eq!(text_of(&dom, "eta"), "in sync");
    assert_eq!(
        text_of(&dom, "peer-count"),
        status["p2p"]["peers"].as_array().unwrap().len().to_string()
    );
    assert_eq!(
        text_of(&dom, "known-addresses"),
        status["p2p"]["known_addresses"].to_string()
    );
    // Free space moves between the two reads: the index and logs write, and so do the tests
    // running beside this one (copies of whole data dirs among them).
    let drawn_free: i64 = text_of(&dom, "disk-free")
        .trim_end_matches(" MiB")
        .parse()
        .unwrap();
    assert!(
        drawn_free.abs_diff(status["disk"]["free_mb"].as_i64().unwrap()) < 1024,
        "{drawn_free} MiB"
    );
    assert_eq!(text_of(&dom, "electrum-sessions"), "1");
    assert_eq!(text_of(&dom, "electrum-subscriptions"), "1");
    let mempool = node.rpc_json(&["getmempoolinfo"]);
    assert_eq!(
        text_of(&dom, "mempool-transactions"),
        mempool["size"].to_string()
    );
    assert_eq!(
        text_of(&dom, "mempool-vsize"),
        format!("{} vB", mempool["bytes"])
    );
    // The peer table: bitcoind, outbound, its address hidden (`status_page_details` is off), and
    // the data folder nowhere.
    assert!(
        dom.contains("<td>(hidden)</td><td>outbound</td><td>/Satoshi:"),
        "{dom}"
    );
    let bitcoind_addr = format!("127.0.0.1:{}", node.p2p_port);
    let datadir = status["datadir"].as_str().unwrap();
    assert!(
        !dom.contains(&bitcoind_addr) && !dom.contains(datadir),
        "{dom}"
    );
    // The plots: at least the sample taken at start, and the mempool's one fee bin.
    let points: usize = attribute_of(&dom, "chart-height", "data-points")
        .unwrap()
        .parse()
        .unwrap();
    assert!(points >= 1, "{dom}");
    assert_eq!(
        attribute_of(&dom, "chart-fees", "data-bars").as_deref(),
        Some("1")
    );

    // /api/status carries the same status object, for scripts, less the same details.
    let api = api_status(http);
    for field in ["network", "kernel_tip", "index_tip", "running"] {
        assert_eq!(api["node"][field], status[field], "{field}");
    }
    let api_text = api.to_string();
    assert!(
        !api_text.contains(&bitcoind_addr) && !api_text.contains(datadir),
        "{api_text}"
    );

    // The screenshot, kept for people to look at.
    screenshot(&url, "status-page.png", 1280, 900);
    drop(wallet);
    cairn.stop();

    // With `status_page_details = true` the addresses and the data folder are there.
    let config = tmp.path().join("cairn.toml");
    std::fs::write(&config, "status_page_details = true\n").unwrap();
    let args = [
        format!("--http-addr={http}"),
        format!("--electrum-addr={electrum}"),
        format!("--config={}", config.display()),
    ];
    let cairn = start_cairn_from(&tmp.path().join("cairn"), &node, &args);
    let start = Instant::now();
    let detailed = loop {
        let api = api_status(http);
        if api["node"]["p2p"]["peers"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
        {
            break api;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "bitcoind never reconnected: {api}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        detailed["node"]["p2p"]["peers"][0]["addr"],
        bitcoind_addr.as_str()
    );
    assert_eq!(detailed["node"]["datadir"], status["datadir"]);
    cairn.stop();
}

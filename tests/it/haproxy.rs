//! `contrib/haproxy.cfg`: two cairn nodes behind HAProxy (Debian's `haproxy`), checked through
//! `GET /health`. A node whose Electrum port is open but which is not in sync gets no clients;
//! a client keeps its Electrum session (and its notifications) while the other node is stopped,
//! and new clients go to the node that is left.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::lines::Lines;
use crate::common::{free_port, start_cairn, Bitcoind, Cairn};
use serde_json::json;

/// The `server.banner` of the node a new connection reaches, or `None` if none answers.
fn banner_of_new_connection(addr: SocketAddr) -> Option<String> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    let mut r = BufReader::new(s.try_clone().ok()?);
    let mut ask = |req: serde_json::Value| -> Option<serde_json::Value> {
        (&s).write_all(format!("{req}\n").as_bytes()).ok()?;
        let mut line = String::new();
        r.read_line(&mut line).ok()?;
        serde_json::from_str(&line).ok()
    };
    ask(json!({"id": 0, "method": "server.version", "params": ["t", "1.4"]}))?;
    ask(json!({"id": 1, "method": "server.banner", "params": []}))?["result"]
        .as_str()
        .map(String::from)
}

struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A node named `name` (its banner) syncing from the peer on port `peer`, Electrum and HTTP on
/// the given ports.
fn cairn_node(dir: &std::path::Path, name: &str, peer: u16, electrum: u16, http: u16) -> Cairn {
    std::fs::create_dir_all(dir).unwrap();
    let config = dir.join("cairn.toml");
    std::fs::write(&config, format!("electrum_banner = \"{name}\"\n")).unwrap();
    start_cairn(
        &dir.join("data"),
        &[
            format!("--connect=127.0.0.1:{peer}"),
            "--no-listen".into(),
            format!("--electrum-addr=127.0.0.1:{electrum}"),
            format!("--http-addr=127.0.0.1:{http}"),
            "--config".into(),
            config.display().to_string(),
        ],
    )
}

#[test]
fn a_session_survives_the_other_node_stopping_and_new_clients_go_to_the_survivor() {
    assert!(
        Command::new("haproxy").arg("-v").output().is_ok(),
        "haproxy missing: `apt-get install haproxy` (contrib/test.sh does)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let (node, mine) = Bitcoind::with_wallet(&tmp.path().join("bitcoind"), 101);
    let ports = [free_port(), free_port(), free_port(), free_port()];
    // Node B first has no peer: its kernel stays at genesis, in its initial download.
    let a = cairn_node(
        &tmp.path().join("a"),
        "node-a",
        node.p2p_port,
        ports[0],
        ports[1],
    );
    let b = cairn_node(
        &tmp.path().join("b"),
        "node-b",
        free_port(),
        ports[2],
        ports[3],
    );
    let tip = node.rpc(&["getbestblockhash"]);
    a.wait_for(&tip, "node a");

    // The shipped configuration, on this test's ports.
    let (front, http_front) = (free_port(), free_port());
    let config =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/haproxy.cfg"))
            .unwrap();
    let config = [
        ("bind :50001", format!("bind 127.0.0.1:{front}")),
        ("bind :3000", format!("bind 127.0.0.1:{http_front}")),
        ("127.0.0.1:50011", format!("127.0.0.1:{}", ports[0])),
        ("port 3011", format!("port {}", ports[1])),
        ("127.0.0.1:3011", format!("127.0.0.1:{}", ports[1])),
        ("127.0.0.1:50021", format!("127.0.0.1:{}", ports[2])),
        ("port 3021", format!("port {}", ports[3])),
        ("127.0.0.1:3021", format!("127.0.0.1:{}", ports[3])),
    ]
    .iter()
    .fold(config, |text, (from, to)| {
        assert!(text.contains(from), "contrib/haproxy.cfg has {from}");
        text.replace(from, to)
    });
    let path = tmp.path().join("haproxy.cfg");
    std::fs::write(&path, config).unwrap();
    let _haproxy = Haproxy(
        Command::new("haproxy")
            .arg("-f")
            .arg(&path)
            .arg("-db")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let front: SocketAddr = format!("127.0.0.1:{front}").parse().unwrap();
    let start = Instant::now();
    while TcpStream::connect(front).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "HAProxy never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // B's Electrum port answers, but its health check fails: once HAProxy has checked it (it
    // counts a server up until `fall` checks fail: 2 s), every new client goes to A.
    let b_direct: SocketAddr = format!("127.0.0.1:{}", ports[2]).parse().unwrap();
    assert_eq!(
        banner_of_new_connection(b_direct).as_deref(),
        Some("node-b")
    );
    let health = common::http::get(
        format!("127.0.0.1:{}", ports[3]).parse().unwrap(),
        "/health",
    );
    assert_eq!(health.0, 503, "{}", health.2);
    let start = Instant::now();
    let mut to_a = 0;
    while to_a < 10 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "clients never reached node A alone"
        );
        match banner_of_new_connection(front).as_deref() {
            Some("node-a") => to_a += 1,
            Some(other) => {
                assert!(
                    start.elapsed() < Duration::from_secs(5),
                    "a client reached {other}, which is not in sync"
                );
                to_a = 0;
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    // B restarted with the peer: once in sync it gets clients too.
    b.stop();
    let b = cairn_node(
        &tmp.path().join("b"),
        "node-b",
        node.p2p_port,
        ports[2],
        ports[3],
    );
    b.wait_for(&tip, "node b");
    let start = Instant::now();
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "clients never reached both nodes: {seen:?}"
        );
        if let Some(banner) = banner_of_new_connection(front) {
            seen.insert(banner);
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    // A wallet's session, subscribed to headers, on one node; the other node stops.
    let mut wallet = Lines::connect(front, "1.4");
    let mine_node = wallet.call("server.banner", json!([]))["result"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        wallet.call("blockchain.headers.subscribe", json!([]))["result"]["height"],
        101
    );
    let (survivor, stopped) = if mine_node == "node-a" {
        (a, b)
    } else {
        (b, a)
    };
    stopped.stop();

    // New clients all go to the survivor, once HAProxy has marked the other down.
    let start = Instant::now();
    let mut in_a_row = 0;
    while in_a_row < 6 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "new clients still reach the stopped node"
        );
        match banner_of_new_connection(front) {
            Some(banner) if banner == mine_node => in_a_row += 1,
            _ => in_a_row = 0,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The wallet's session is the same one: it answers and hears the next block.
    assert_eq!(
        wallet.call("server.banner", json!([]))["result"],
        mine_node.as_str()
    );
    node.rpc(&["generatetoaddress", "1", &mine]);
    assert_eq!(
        wallet.note("blockchain.headers.subscribe")["params"][0]["height"],
        102
    );
    // The HTTP frontend answers from the survivor too.
    let http: SocketAddr = format!("127.0.0.1:{http_front}").parse().unwrap();
    survivor.wait_for(&node.rpc(&["getbestblockhash"]), "survivor");
    assert_eq!(common::http::get(http, "/blocks/tip/height").2, "102");
}

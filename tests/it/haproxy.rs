//! `contrib/haproxy.cfg`: two cairn nodes behind HAProxy (Debian's `haproxy`), checked through
//! `GET /health`, every connection and check opening with a PROXY header. A node whose Electrum
//! port is open but which is not in sync gets no clients; a client keeps its Electrum session
//! (and its notifications) while the other node is stopped, and new clients go to the node that
//! is left. And one node behind HAProxy, clients of one address beside an honest wallet.

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

impl Haproxy {
    /// HAProxy running `config` (written into `dir`), once it listens on `front`.
    fn start(dir: &std::path::Path, config: &str, front: SocketAddr) -> Haproxy {
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = Command::new("haproxy")
            .arg("-f")
            .arg(&path)
            .arg("-db")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let haproxy = Haproxy(child);
        let start = Instant::now();
        while TcpStream::connect(front).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "HAProxy never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        haproxy
    }
}

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
    // As the shipped file's nodes: HAProxy connects from 127.0.0.4 with PROXY headers.
    let toml = format!("electrum_banner = \"{name}\"\nproxy_protocol_from = [\"127.0.0.4/32\"]\n");
    std::fs::write(&config, toml).unwrap();
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
    let front: SocketAddr = format!("127.0.0.1:{front}").parse().unwrap();
    let _haproxy = Haproxy::start(tmp.path(), &config, front);

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

/// HAProxy in front of one cairn that takes PROXY headers from it (`proxy_protocol_from`):
/// Electrum over TCP with `send-proxy-v2`, HTTP with `send-proxy` (version 1), HAProxy's
/// health checks of the node through the header too (`check-send-proxy`). Every client reaches
/// cairn from HAProxy's address, 127.0.0.4 (its `source`: 127.0.0.1 stays a local Tor's,
/// exempt, and no balancer may share it), yet cairn counts each by the address the header names.
///
/// 100 silent Electrum connections from 127.0.0.2 through the balancer get 12 places (the
/// per-address limit; the rest are closed at accept, counted as `ip`), and an honest wallet
/// from 127.0.0.3 through the same balancer is answered beside them, on a server of 40 places;
/// over TLS through the balancer the wallet is answered and 127.0.0.2 closed before its
/// handshake (its limit is every Electrum listener's together).
/// A client that sends a PROXY header itself, not from the balancer, is closed unanswered; an
/// HTTP request through the balancer is answered.
///
/// *Fails before the fix* (the same test with neither `proxy_protocol_from` nor `send-proxy` nor
/// `source`, as a4782f7 could only run): every client is HAProxy's 127.0.0.1, exempt from the
/// per-address limits (as a balancer must be, or all its clients share one host's), so not one
/// of the 100 is refused (`Err(0.0)` at the first check) and they hold every place.
#[test]
fn behind_a_balancer_each_client_counts_as_its_own_host() {
    let tmp = tempfile::tempdir().unwrap();
    let (node, _) = Bitcoind::with_wallet(&tmp.path().join("bitcoind"), 101);
    let (electrum, http, metrics, tls) = (free_port(), free_port(), free_port(), free_port());
    let cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[
            format!("--connect=127.0.0.1:{}", node.p2p_port),
            "--no-listen".into(),
            format!("--electrum-addr=127.0.0.1:{electrum}"),
            format!("--electrum-tls-addr=127.0.0.1:{tls}"),
            format!("--http-addr=127.0.0.1:{http}"),
            format!("--metrics-addr=127.0.0.1:{metrics}"),
            "--electrum-max-connections=40".into(),
            "--proxy-protocol-from=127.0.0.4".into(),
        ],
    );
    cairn.wait_for(&node.rpc(&["getbestblockhash"]), "sync");
    let (front, http_front, tls_front) = (free_port(), free_port(), free_port());
    let config = format!(
        "defaults\n    timeout connect 5s\n    timeout client 1h\n    timeout server 1h\n\n\
         frontend electrum\n    mode tcp\n    bind 127.0.0.1:{front}\n    default_backend cairn_electrum\n\n\
         backend cairn_electrum\n    mode tcp\n    source 127.0.0.4\n    option httpchk GET /health\n    http-check expect status 200\n    \
         server node 127.0.0.1:{electrum} send-proxy-v2 check port {http} check-send-proxy inter 500ms\n\n\
         frontend electrum_tls\n    mode tcp\n    bind 127.0.0.1:{tls_front}\n    default_backend cairn_tls\n\n\
         backend cairn_tls\n    mode tcp\n    source 127.0.0.4\n    server node 127.0.0.1:{tls} send-proxy-v2\n\n\
         frontend http\n    mode http\n    bind 127.0.0.1:{http_front}\n    default_backend cairn_http\n\n\
         backend cairn_http\n    mode http\n    source 127.0.0.4\n    server node 127.0.0.1:{http} send-proxy\n"
    );
    let front: SocketAddr = format!("127.0.0.1:{front}").parse().unwrap();
    let _haproxy = Haproxy::start(tmp.path(), &config, front);
    let metrics: SocketAddr = format!("127.0.0.1:{metrics}").parse().unwrap();
    let refused_ip = "cairn_electrum_connections_refused_total{reason=\"ip\"}";
    let before = common::probe::metric(metrics, refused_ip);

    // 100 silent connections from 127.0.0.2, through the balancer.
    let _held: Vec<TcpStream> = (0..100)
        .map(|_| common::peer::connect_from_with_rcvbuf("127.0.0.2", front, None).unwrap())
        .collect();
    let refused = common::probe::metric_when(metrics, refused_ip, Duration::from_secs(20), |v| {
        v - before >= 88.0
    });
    assert!(
        refused.is_ok(),
        "127.0.0.2's connections beyond 12 refused: {refused:?}"
    );
    let held = common::probe::metric(metrics, "cairn_electrum_connections{transport=\"tcp\"}");
    assert!(held <= 13.0, "{held} Electrum connections held");

    // After HAProxy's health checks have run (through the PROXY header: one refused would mark
    // the node down, three failures at 500 ms), the honest wallet, through the same balancer,
    // is answered.
    std::thread::sleep(Duration::from_secs(2));
    let mut wallet = Lines::connect_from("127.0.0.3", front, "1.4");
    assert_eq!(
        wallet.call("blockchain.headers.subscribe", json!([]))["result"]["height"],
        101
    );

    // Over TLS through the balancer (the header read before the handshake): the wallet's
    // address is answered, and 127.0.0.2, at its limit on every Electrum listener together, is
    // closed before its handshake.
    let tls_front: SocketAddr = format!("127.0.0.1:{tls_front}").parse().unwrap();
    let mut secured = BufReader::new(common::probe::tls_from("127.0.0.3", tls_front));
    secured
        .get_mut()
        .write_all(b"{\"id\":1,\"method\":\"server.version\",\"params\":[\"t\",\"1.4\"]}\n")
        .unwrap();
    let mut answer = String::new();
    secured.read_line(&mut answer).unwrap();
    assert!(answer.contains("\"result\""), "over TLS: {answer}");
    let mut over = common::peer::connect_from_with_rcvbuf("127.0.0.2", tls_front, None).unwrap();
    over.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut byte = [0u8; 1];
    assert!(
        matches!(std::io::Read::read(&mut over, &mut byte), Ok(0)),
        "127.0.0.2 over TLS beyond its limit was not closed"
    );

    // A PROXY header from a client, not from the balancer: closed, unanswered.
    let direct: SocketAddr = format!("127.0.0.1:{electrum}").parse().unwrap();
    let mut forged = common::peer::connect_from_with_rcvbuf("127.0.0.3", direct, None).unwrap();
    forged
        .write_all(b"PROXY TCP4 10.9.8.7 127.0.0.1 1234 50001\r\n")
        .unwrap();
    forged
        .write_all(b"{\"id\":1,\"method\":\"server.version\",\"params\":[]}\n")
        .unwrap();
    forged
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut answer = String::new();
    let read = BufReader::new(forged).read_line(&mut answer);
    assert!(
        matches!(read, Ok(0)) && answer.is_empty(),
        "a forged PROXY header was answered: {read:?} {answer:?}"
    );

    // HTTP through the balancer, its header version 1.
    let http_front: SocketAddr = format!("127.0.0.1:{http_front}").parse().unwrap();
    let (status, _, body) = common::http::get(http_front, "/blocks/tip/height");
    assert_eq!((status, body.as_str()), (200, "101"));
}

/// P2P behind a balancer: an inbound peer reaching cairn through HAProxy (`send-proxy-v2`, from
/// 127.0.0.4) is the peer at its own address, 127.0.0.3, in cairn's peer list (and so for its
/// place, its transaction budget and any ban); a connection from the balancer's address without
/// a header gets no handshake.
#[test]
fn a_peer_through_the_balancer_is_known_by_its_own_address() {
    let tmp = tempfile::tempdir().unwrap();
    let p2p = free_port();
    let cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[
            format!("--p2p-addr=127.0.0.1:{p2p}"),
            "--proxy-protocol-from=127.0.0.4".into(),
        ],
    );
    let front = free_port();
    let config = format!(
        "defaults\n    timeout connect 5s\n    timeout client 1h\n    timeout server 1h\n\n\
         frontend p2p\n    mode tcp\n    bind 127.0.0.1:{front}\n    default_backend cairn_p2p\n\n\
         backend cairn_p2p\n    mode tcp\n    source 127.0.0.4\n    \
         server node 127.0.0.1:{p2p} send-proxy-v2\n"
    );
    let front: SocketAddr = format!("127.0.0.1:{front}").parse().unwrap();
    let _haproxy = Haproxy::start(tmp.path(), &config, front);
    let mut peer = common::peer::ScriptedPeer::connect("127.0.0.3", front);
    peer.handshake();
    let start = Instant::now();
    loop {
        let status = cairn.status();
        let peers = status["p2p"]["peers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let addrs: Vec<String> = peers
            .iter()
            .filter(|p| p["inbound"] == true)
            .map(|p| p["addr"].as_str().unwrap_or_default().to_string())
            .collect();
        if !addrs.is_empty() {
            assert_eq!(addrs.len(), 1, "{status}");
            assert!(
                addrs[0].starts_with("127.0.0.3:"),
                "the peer is {}",
                addrs[0]
            );
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no inbound peer: {status}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // From the balancer's address, no header: closed, no handshake.
    let direct: SocketAddr = format!("127.0.0.1:{p2p}").parse().unwrap();
    let mut bare = common::peer::ScriptedPeer::connect("127.0.0.4", direct);
    assert!(
        bare.try_handshake().is_none(),
        "a balancer's connection without a header was served"
    );
}

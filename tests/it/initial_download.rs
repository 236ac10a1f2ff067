//! Issue 13, part 4: a node still in its initial download does not serve its old tip as if it
//! were current. A scripted peer hands cairn 30 headers and holds the blocks back: Electrum
//! answers every request but `server.*` with "server is syncing: height 0 of 30",
//! `server.features` and `cairn status` say so, the HTTP endpoints (the health check among
//! them) answer 503; once the peer sends the blocks everything answers from the synced chain,
//! by itself. A synced node that falls more than `health_max_blocks_behind` blocks behind its
//! peers' headers answers `/health` 503 until it catches up.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::common::peer::ScriptedPeer;
use crate::common::{free_port, start_cairn};
use bitcoin::p2p::message::NetworkMessage;
use bitcoin::p2p::message_blockdata::Inventory;
use serde_json::Value;

fn ask(port: u16, requests: &[&str]) -> Vec<Value> {
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    requests
        .iter()
        .map(|r| {
            (&stream).write_all(format!("{r}\n").as_bytes()).unwrap();
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            serde_json::from_str(&line).unwrap()
        })
        .collect()
}

fn http_get(port: u16, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut stream, &mut out).unwrap();
    out
}

const VERSION: &str = r#"{"id":0,"method":"server.version","params":["t","1.4"]}"#;
const TIP: &str = r#"{"id":1,"method":"blockchain.headers.subscribe","params":[]}"#;
const FEATURES: &str = r#"{"id":2,"method":"server.features","params":[]}"#;

#[test]
fn while_syncing_clients_are_told_so_and_served_once_synced() {
    let blocks = common::chain(30, 3, 5);
    let tmp = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (electrum, http) = (free_port(), free_port());
    let cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[
            format!(
                "--connect=127.0.0.1:{}",
                listener.local_addr().unwrap().port()
            ),
            "--no-listen".into(),
            format!("--electrum-addr=127.0.0.1:{electrum}"),
            format!("--http-addr=127.0.0.1:{http}"),
        ],
    );
    // cairn tries BIP324 first; the scripted peer speaks v1 only.
    let mut peer = ScriptedPeer::over(common::peer::accept_v1(&listener));
    peer.handshake();
    peer.recv_until(|m| matches!(m, NetworkMessage::GetHeaders(_)).then_some(()))
        .expect("getheaders");
    peer.send(NetworkMessage::Headers(
        blocks.iter().map(|b| b.header).collect(),
    ))
    .unwrap();
    let asked = peer
        .recv_until(|m| match m {
            NetworkMessage::GetData(items) => Some(items.clone()),
            _ => None,
        })
        .expect("getdata");

    // Headers known, no block: syncing.
    let status = cairn.status_when(|s| s["syncing"]["headers"] == 30);
    assert_eq!(status["syncing"]["height"], 0, "{status}");
    let answers = ask(electrum, &[VERSION, TIP, FEATURES]);
    assert!(
        answers[0]["result"].is_array(),
        "server.version answers: {}",
        answers[0]
    );
    assert_eq!(
        answers[1]["error"]["message"], "server is syncing: height 0 of 30",
        "{}",
        answers[1]
    );
    assert_eq!(
        answers[2]["result"]["syncing"],
        serde_json::json!({"height": 0, "headers": 30})
    );
    let filters = http_get(http, "/filterheaders?start=0&count=1");
    assert!(
        filters.starts_with("HTTP/1.1 503")
            && filters.contains("server is syncing: height 0 of 30"),
        "{filters}"
    );
    // A load balancer's health check sends no wallets here yet.
    let health = http_get(http, "/health");
    assert!(
        health.starts_with("HTTP/1.1 503") && health.contains("initial download: height 0 of 30"),
        "{health}"
    );

    // The blocks, as asked for: caught up, everything answers by itself.
    let served = std::thread::spawn(move || {
        let mut wanted = asked;
        loop {
            for item in wanted {
                if let Inventory::WitnessBlock(hash) | Inventory::Block(hash) = item {
                    if let Some(b) = blocks.iter().find(|b| b.block_hash() == hash) {
                        peer.send(NetworkMessage::Block(b.clone())).unwrap();
                    }
                }
            }
            wanted = match peer.recv() {
                Some(NetworkMessage::GetData(items)) => items,
                Some(_) => Vec::new(),
                None => return,
            };
        }
    });
    let start = Instant::now();
    let status = cairn.status_when(|s| s["index_tip"]["height"] == 30 && s["syncing"].is_null());
    let answers = ask(electrum, &[VERSION, TIP, FEATURES]);
    assert_eq!(
        answers[1]["result"]["height"],
        30,
        "{} after {:?}; {status}",
        answers[1],
        start.elapsed()
    );
    assert!(
        answers[2]["result"].get("syncing").is_none(),
        "{}",
        answers[2]
    );
    assert!(http_get(http, "/filterheaders?start=0&count=1").starts_with("HTTP/1.1 200"));
    let health = http_get(http, "/health");
    assert!(
        health.starts_with("HTTP/1.1 200") && health.contains(r#""index_height":30"#),
        "{health}"
    );
    drop(cairn);
    let _ = served.join();
}

/// The blocks of `blocks` (heights from 1) up to `upto` that cairn asked for, sent as it asks
/// (what it asked for above `upto` is kept in `asked` for later): returns once every block up to
/// `upto` has been sent.
fn serve_to(
    peer: &mut ScriptedPeer,
    blocks: &[bitcoin::Block],
    asked: &mut Vec<bitcoin::BlockHash>,
    sent: &mut usize,
    upto: usize,
) {
    loop {
        asked.retain(|hash| {
            let Some(i) = blocks.iter().position(|b| b.block_hash() == *hash) else {
                return false;
            };
            if i >= upto {
                return true;
            }
            peer.send(NetworkMessage::Block(blocks[i].clone())).unwrap();
            *sent += 1;
            false
        });
        if *sent >= upto {
            return;
        }
        let more = peer
            .recv_until(|m| match m {
                NetworkMessage::GetData(items) => Some(items.clone()),
                _ => None,
            })
            .expect("getdata");
        asked.extend(more.iter().filter_map(|item| match item {
            Inventory::WitnessBlock(hash) | Inventory::Block(hash) => Some(*hash),
            _ => None,
        }));
    }
}

/// `health_max_blocks_behind`: a synced node whose peer announces 10 new headers and holds
/// their blocks back answers `/health` 503 (10 behind, over the 3 allowed), so a balancer drains
/// it; 200 again once it is within 3 blocks (7 of the 10 given), and at the tip.
#[test]
fn a_node_behind_its_peers_is_drained_until_it_catches_up() {
    let blocks = common::chain(40, 3, 7);
    let tmp = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let http = free_port();
    let cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[
            format!(
                "--connect=127.0.0.1:{}",
                listener.local_addr().unwrap().port()
            ),
            "--no-listen".into(),
            format!("--http-addr=127.0.0.1:{http}"),
            "--health-max-blocks-behind=3".into(),
        ],
    );
    let mut peer = ScriptedPeer::over(common::peer::accept_v1(&listener));
    peer.handshake();
    peer.recv_until(|m| matches!(m, NetworkMessage::GetHeaders(_)).then_some(()))
        .expect("getheaders");
    let headers = |range: std::ops::Range<usize>| {
        NetworkMessage::Headers(blocks[range].iter().map(|b| b.header).collect())
    };
    peer.send(headers(0..30)).unwrap();
    let (mut asked, mut sent) = (Vec::new(), 0);
    serve_to(&mut peer, &blocks, &mut asked, &mut sent, 30);
    cairn.status_when(|s| s["index_tip"]["height"] == 30 && s["syncing"].is_null());
    assert!(http_get(http, "/health").starts_with("HTTP/1.1 200"));

    // Ten new headers, their blocks held back.
    peer.send(headers(30..40)).unwrap();
    let start = Instant::now();
    let behind = loop {
        let health = http_get(http, "/health");
        if health.contains("the best header at 40") {
            break health;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{health}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        behind.starts_with("HTTP/1.1 503")
            && behind.contains("the kernel is at height 30, the best header at 40"),
        "{behind}"
    );

    // Within three blocks of the best header: healthy again.
    serve_to(&mut peer, &blocks, &mut asked, &mut sent, 37);
    cairn.status_when(|s| s["index_tip"]["height"] == 37);
    let near = http_get(http, "/health");
    assert!(near.starts_with("HTTP/1.1 200"), "{near}");
    serve_to(&mut peer, &blocks, &mut asked, &mut sent, 40);
    cairn.status_when(|s| s["index_tip"]["height"] == 40);
    assert!(http_get(http, "/health").starts_with("HTTP/1.1 200"));
}

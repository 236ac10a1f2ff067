//! Issue 13, part 4: a node still in its initial download does not serve its old tip as if it
//! were current. A scripted peer hands cairn 30 headers and holds the blocks back: Electrum
//! answers every request but `server.*` with "server is syncing: height 0 of 30",
//! `server.features` and `cairn status` say so, the HTTP endpoints (the health check among
//! them) answer 503; once the peer sends the blocks everything answers from the synced chain,
//! by itself.

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

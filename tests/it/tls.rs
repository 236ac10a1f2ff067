//! Electrum over TLS and WebSocket over TLS, through clients cairn did not write (the
//! `electrum-client` crate's rustls transport, rustls itself pinned to TLS 1.2 or 1.3,
//! tungstenite): the same answers as plain TCP, hostile handshakes that cost only their own
//! connection, and a certificate swapped by SIGHUP without dropping a client.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::probe::{closed_within, AnyCertificate};
use bitcoin::hex::FromHex;
use bitcoin::Block;
use electrum_client::{ConfigBuilder, ElectrumApi};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

/// `cairn demo` with every Electrum transport, killed when dropped.
struct Demo {
    child: Child,
    tcp: u16,
    tls: u16,
    wss: u16,
    log: PathBuf,
    datadir: PathBuf,
    blocks: Vec<Block>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Enough blocks for coinbases to mature and be spent: histories of more than one entry.
const BLOCKS: u32 = 120;

impl Demo {
    fn start(dir: &Path, cert: &Path, key: &Path) -> Demo {
        let (tcp, tls, wss) = (
            common::free_port(),
            common::free_port(),
            common::free_port(),
        );
        let datadir = dir.join("cairn");
        let log = dir.join("cairn.log");
        let child = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["--network", "regtest", "--datadir"])
            .arg(&datadir)
            .args([
                "--admin-addr",
                "127.0.0.1:0",
                "--electrum-addr",
                &format!("127.0.0.1:{tcp}"),
            ])
            .args([
                "--electrum-tls-addr",
                &format!("127.0.0.1:{tls}"),
                "--electrum-wss-addr",
                &format!("127.0.0.1:{wss}"),
            ])
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .args([
                "demo",
                "--blocks",
                &BLOCKS.to_string(),
                "--txs-per-block",
                "8",
            ])
            .env("CAIRN_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut demo = Demo {
            child,
            tcp,
            tls,
            wss,
            log,
            datadir,
            blocks: Vec::new(),
        };
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", tcp)).is_err()
            || TcpStream::connect(("127.0.0.1", wss)).is_err()
        {
            if let Ok(Some(status)) = demo.child.try_wait() {
                panic!(
                    "cairn demo exited: {status}: {}",
                    std::fs::read_to_string(&demo.log).unwrap_or_default()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "cairn demo never served"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        demo.blocks = std::fs::read_to_string(demo.datadir.join("regtest/demo-chain/blocks.hex"))
            .unwrap()
            .lines()
            .map(|l| bitcoin::consensus::deserialize(&Vec::<u8>::from_hex(l).unwrap()).unwrap())
            .collect();
        demo
    }

    fn log_has(&self, text: &str) -> bool {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .contains(text)
    }

    fn hangup(&self) {
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGHUP) };
        assert_eq!(rc, 0);
    }
}

/// A certificate and key for `localhost` written as PEM into `dir`, with the certificate's
/// SHA-256 (hex) computed here, not by cairn.
fn make_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf, String) {
    let pair = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    std::fs::write(&cert, pair.cert.pem()).unwrap();
    std::fs::write(&key, pair.signing_key.serialize_pem()).unwrap();
    use bitcoin::hashes::{sha256, Hash};
    use bitcoin::hex::DisplayHex;
    let fingerprint = sha256::Hash::hash(pair.cert.der())
        .to_byte_array()
        .to_lower_hex_string();
    (cert, key, fingerprint)
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

fn client_config(version: Option<&'static rustls::SupportedProtocolVersion>) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = match version {
        Some(v) => vec![v],
        None => rustls::ALL_VERSIONS.to_vec(),
    };
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    Arc::new(config)
}

/// A finished TLS handshake with the port, and the fingerprint of the certificate it showed.
fn tls_connect(
    port: u16,
    version: Option<&'static rustls::SupportedProtocolVersion>,
) -> (Tls, String) {
    let conn = ClientConnection::new(
        client_config(version),
        ServerName::try_from("localhost").unwrap(),
    )
    .unwrap();
    let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut tls = StreamOwned::new(conn, sock);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).expect("TLS handshake");
    }
    if let Some(v) = version {
        assert_eq!(tls.conn.protocol_version(), Some(v.version));
    }
    let leaf = &tls.conn.peer_certificates().expect("a certificate")[0];
    use bitcoin::hashes::{sha256, Hash};
    use bitcoin::hex::DisplayHex;
    let fingerprint = sha256::Hash::hash(leaf.as_ref())
        .to_byte_array()
        .to_lower_hex_string();
    (tls, fingerprint)
}

/// Sends one request line and reads one answer line.
fn ask<S: Read + Write>(stream: &mut BufReader<S>, request: &str) -> String {
    stream
        .get_mut()
        .write_all(format!("{request}\n").as_bytes())
        .unwrap();
    stream.get_mut().flush().unwrap();
    let mut line = String::new();
    stream.read_line(&mut line).unwrap();
    assert!(line.ends_with('\n'), "no answer to {request}: {line:?}");
    line
}

/// The requests every transport must answer alike: the tip, a header with its proof, a
/// history, a transaction and its merkle proof.
fn requests(blocks: &[Block]) -> Vec<String> {
    let e = common::expected(blocks);
    let (sh, _) = e.history.iter().max_by_key(|(_, h)| h.len()).unwrap();
    let (i, block) = blocks
        .iter()
        .enumerate()
        .rev()
        .find(|(_, b)| b.txdata.len() > 1)
        .expect("a block with transactions");
    let (tx, height) = (&block.txdata[1], i + 1);
    vec![
        r#"{"jsonrpc":"2.0","id":1,"method":"server.version","params":["tls-test","1.4"]}"#
            .to_string(),
        r#"{"jsonrpc":"2.0","id":2,"method":"blockchain.headers.subscribe","params":[]}"#
            .to_string(),
        format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"blockchain.block.header","params":[7,{BLOCKS}]}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":4,"method":"blockchain.scripthash.get_history","params":["{}"]}}"#,
            sh.to_electrum_hex()
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"blockchain.transaction.get","params":["{}"]}}"#,
            tx.compute_txid()
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":6,"method":"blockchain.transaction.get_merkle","params":["{}",{height}]}}"#,
            tx.compute_txid()
        ),
    ]
}

fn answers<S: Read + Write>(stream: S, requests: &[String]) -> Vec<String> {
    let mut stream = BufReader::new(stream);
    requests.iter().map(|r| ask(&mut stream, r)).collect()
}

#[test]
fn tls_and_wss_answer_as_tcp_does() {
    let tmp = tempfile::tempdir().unwrap();
    let (cert, key, fingerprint) = make_pair(tmp.path(), "a");
    let demo = Demo::start(tmp.path(), &cert, &key);
    let requests = requests(&demo.blocks);
    let tcp = TcpStream::connect(("127.0.0.1", demo.tcp)).unwrap();
    let want = answers(tcp, &requests);
    assert!(
        want[1].contains(&format!("\"height\":{BLOCKS}")),
        "{}",
        want[1]
    );
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let (tls, seen) = tls_connect(demo.tls, Some(version));
        assert_eq!(seen, fingerprint, "the certificate given with --tls-cert");
        assert_eq!(answers(tls, &requests), want, "over {version:?}");
    }
    // WebSocket over TLS: one request per text message.
    let (tls, _) = tls_connect(demo.wss, None);
    let (mut ws, _) = tokio_tungstenite::tungstenite::client::client("ws://localhost/", tls)
        .expect("WebSocket handshake");
    for (request, want) in requests.iter().zip(&want) {
        ws.send(tokio_tungstenite::tungstenite::Message::text(
            request.as_str(),
        ))
        .unwrap();
        let answer = ws.read().unwrap().into_text().unwrap();
        assert_eq!(answer.as_str(), want.trim_end(), "over wss");
    }
    // The electrum-client crate over rustls, as a wallet built on it connects to a server
    // with a self-signed certificate; answers checked against the blocks.
    let config = ConfigBuilder::new()
        .validate_domain(false)
        .timeout(Some(Duration::from_secs(30)))
        .build();
    let client =
        electrum_client::Client::from_config(&format!("ssl://127.0.0.1:{}", demo.tls), config)
            .unwrap();
    assert_eq!(
        client.block_headers_subscribe().unwrap().height,
        BLOCKS as usize
    );
    let e = common::expected(&demo.blocks);
    let scripts = common::paid_scripts(&demo.blocks);
    assert!(scripts.len() > 20);
    for script in &scripts {
        let want = &e.history[&cairn::types::ScriptHash::of(script)];
        assert_eq!(&common::electrum_history(&client, script), want);
    }
}

/// The first bytes a TLS client sends: its ClientHello record.
fn client_hello() -> Vec<u8> {
    let mut conn = ClientConnection::new(
        client_config(None),
        ServerName::try_from("localhost").unwrap(),
    )
    .unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    assert!(hello.len() > 100 && hello[0] == 0x16, "a handshake record");
    hello
}

#[test]
fn hostile_handshakes_cost_their_own_connection_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (cert, key, fingerprint) = make_pair(tmp.path(), "a");
    let mut demo = Demo::start(tmp.path(), &cert, &key);
    let requests = requests(&demo.blocks);
    let want = answers(
        TcpStream::connect(("127.0.0.1", demo.tcp)).unwrap(),
        &requests,
    );
    let connect = |port| TcpStream::connect(("127.0.0.1", port)).unwrap();
    let hello = client_hello();
    let mut garbage = Vec::new();
    let mut stalled = Vec::new();
    for port in [demo.tls, demo.wss] {
        for i in 0..20u8 {
            // Bytes that are no TLS record, a plain Electrum request, and a record header that
            // announces 16 KiB and never sends them.
            let junk: Vec<u8> = match i % 3 {
                0 => (0..1000u32)
                    .map(|j| (j as u8).wrapping_mul(31).wrapping_add(i))
                    .collect(),
                1 => requests[1].clone().into_bytes(),
                _ => vec![0x16, 0x03, 0x01, 0x40, 0x00],
            };
            let mut s = connect(port);
            s.write_all(&junk).unwrap();
            if i % 3 == 2 {
                stalled.push(s)
            } else {
                garbage.push(s)
            }
            // Half a ClientHello, then silence; and nothing at all.
            let mut s = connect(port);
            s.write_all(&hello[..hello.len() / 2]).unwrap();
            stalled.push(s);
            stalled.push(connect(port));
        }
    }
    // Every one of them open or closing, a real client is served over TLS and WSS alike, and
    // over plain TCP.
    let (tls, seen) = tls_connect(demo.tls, None);
    assert_eq!(seen, fingerprint);
    assert_eq!(answers(tls, &requests), want);
    let (tls, _) = tls_connect(demo.wss, None);
    let (mut ws, _) =
        tokio_tungstenite::tungstenite::client::client("ws://localhost/", tls).unwrap();
    ws.send(tokio_tungstenite::tungstenite::Message::text(
        requests[1].as_str(),
    ))
    .unwrap();
    assert_eq!(
        ws.read().unwrap().into_text().unwrap().as_str(),
        want[1].trim_end()
    );
    assert_eq!(answers(connect(demo.tcp), &requests), want);
    // Garbage is refused at once; a stalled handshake is dropped when its time is up (10 s).
    for s in &mut garbage {
        assert!(
            closed_within(s, Duration::from_secs(5)),
            "garbage left open"
        );
    }
    for s in &mut stalled {
        assert!(
            closed_within(s, Duration::from_secs(30)),
            "a stalled handshake left open"
        );
    }
    assert!(demo.child.try_wait().unwrap().is_none(), "cairn still runs");
    assert_eq!(
        answers(tls_connect(demo.tls, None).0, &requests),
        want,
        "still serving"
    );
}

/// Waits until a new TLS connection shows `fingerprint`.
fn wait_for_certificate(port: u16, fingerprint: &str) {
    let start = Instant::now();
    while tls_connect(port, None).1 != fingerprint {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the new certificate was never served"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sighup_swaps_the_certificate_without_dropping_clients() {
    let tmp = tempfile::tempdir().unwrap();
    let (cert, key, first) = make_pair(tmp.path(), "served");
    let mut demo = Demo::start(tmp.path(), &cert, &key);
    let requests = requests(&demo.blocks);
    let want = answers(
        TcpStream::connect(("127.0.0.1", demo.tcp)).unwrap(),
        &requests,
    );
    let (tls, seen) = tls_connect(demo.tls, None);
    assert_eq!(seen, first);
    let mut open = BufReader::new(tls);
    assert_eq!(ask(&mut open, &requests[1]), want[1]);
    let (wss, _) = tls_connect(demo.wss, None);
    let (mut ws, _) =
        tokio_tungstenite::tungstenite::client::client("ws://localhost/", wss).unwrap();

    // A renewed pair written over the files (as certbot's deploy hook would), then SIGHUP.
    let (new_cert, new_key, second) = make_pair(tmp.path(), "renewed");
    std::fs::copy(&new_cert, &cert).unwrap();
    std::fs::copy(&new_key, &key).unwrap();
    demo.hangup();
    wait_for_certificate(demo.tls, &second);
    wait_for_certificate(demo.wss, &second);
    assert!(
        demo.log_has(&format!("SHA-256 fingerprint {second}")),
        "the new fingerprint is logged"
    );
    // The clients connected before the swap are still served, on the old certificate.
    for (request, want) in requests.iter().zip(&want) {
        assert_eq!(&ask(&mut open, request), want);
        ws.send(tokio_tungstenite::tungstenite::Message::text(
            request.as_str(),
        ))
        .unwrap();
        assert_eq!(
            ws.read().unwrap().into_text().unwrap().as_str(),
            want.trim_end()
        );
    }

    // A broken certificate file: the reload fails, says so, and the renewed pair stays.
    std::fs::write(
        &cert,
        "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    demo.hangup();
    let start = Instant::now();
    while !demo.log_has("TLS certificate not reloaded") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the failed reload was not logged"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (tls, seen) = tls_connect(demo.tls, None);
    assert_eq!(seen, second);
    assert_eq!(answers(tls, &requests), want);
    assert!(demo.child.try_wait().unwrap().is_none(), "cairn still runs");
}

//! cairn as a peer of a real bitcoind: it syncs a chain over P2P, follows new blocks and a reorg
//! made with `invalidateblock`, serves a second bitcoind that syncs from it, and bans a peer
//! that sends garbage while sync goes on.

use crate::common;

use std::io::Write;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use std::str::FromStr;

use crate::common::peer::{
    accept_v1, bad_checksum_ping, banned_within, connect_from, invalid_block_on, non_loopback_ip,
    ScriptedPeer,
};
use crate::common::{free_port, start_cairn, Bitcoind, Cairn};
use bitcoin::hex::{DisplayHex, FromHex};

const ADDR: &str = "bcrt1qs758ursh4q9z627kt3pp5yysm78ddny6txaqgw";

/// The transport (`v1`, `v2`) of each of bitcoind's connections.
fn transports(node: &Bitcoind) -> Vec<String> {
    let peers: serde_json::Value = serde_json::from_str(&node.rpc(&["getpeerinfo"])).unwrap();
    peers
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p["transport_protocol_type"]
                .as_str()
                .unwrap_or("?")
                .to_string()
        })
        .collect()
}

#[test]
fn syncs_from_bitcoind_follows_reorgs_serves_peers_and_bans_garbage() {
    let tmp = tempfile::tempdir().unwrap();
    let chain = tmp.path().join("chain");
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "generate",
            "--blocks",
            "1000",
            "--txs-per-block",
            "10",
            "--seed",
            "12",
            "--out",
        ])
        .arg(&chain)
        .output()
        .unwrap();
    assert!(out.status.success());
    let a = Bitcoind::start(
        &tmp.path().join("a"),
        &[format!(
            "-loadblock={}",
            chain.join("blocks/blk00000.dat").display()
        )],
    );
    a.wait_for_height(1000, Duration::from_secs(120));

    // Sync 1,000 blocks from bitcoind over P2P, and accept peers.
    let p2p_port = free_port();
    let cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[
            format!("--connect=127.0.0.1:{}", a.p2p_port),
            format!("--p2p-addr=127.0.0.1:{p2p_port}"),
        ],
    );
    cairn.wait_for(&a.rpc(&["getbestblockhash"]), "initial sync");
    // bitcoind at its defaults speaks BIP324, and so does cairn's connection to it.
    assert_eq!(
        transports(&a),
        ["v2"],
        "cairn's outbound connection to bitcoind"
    );

    // New blocks are followed.
    a.rpc(&["generatetoaddress", "2", ADDR]);
    cairn.wait_for(&a.rpc(&["getbestblockhash"]), "new blocks");

    // A reorg made on bitcoind: invalidate the tip's parent, mine a longer branch.
    let old = a.rpc(&["getblockhash", "1001"]);
    a.rpc(&["invalidateblock", &old]);
    let other = {
        let secp = bitcoin::secp256k1::Secp256k1::new();
        let key = cairn::generate::derive_key(99, 0);
        let pk = bitcoin::CompressedPublicKey(key.public_key(&secp));
        bitcoin::Address::p2wpkh(&pk, bitcoin::Network::Regtest).to_string()
    };
    a.rpc(&["generatetoaddress", "3", &other]);
    let new_tip = a.rpc(&["getbestblockhash"]);
    cairn.wait_for(&new_tip, "reorg");
    assert_eq!(cairn.status()["kernel_tip"]["height"], 1003);

    // A second bitcoind, at its defaults, syncs the whole chain from cairn over BIP324; a third
    // with v2 off over v1 (cairn tells them apart by their first bytes).
    let b = Bitcoind::start(
        &tmp.path().join("b"),
        &[format!("-connect=127.0.0.1:{p2p_port}")],
    );
    b.wait_for_height(1003, Duration::from_secs(120));
    assert_eq!(b.rpc(&["getbestblockhash"]), new_tip);
    assert_eq!(transports(&b), ["v2"], "bitcoind's connection to cairn");
    let services = b.rpc(&["getpeerinfo"]);
    assert!(
        services.contains("\"P2P_V2\"") && services.contains("\"COMPACT_FILTERS\""),
        "cairn's advertised services: {services}"
    );
    let c = Bitcoind::start(
        &tmp.path().join("c"),
        &[
            format!("-connect=127.0.0.1:{p2p_port}"),
            "-v2transport=0".into(),
        ],
    );
    c.wait_for_height(1003, Duration::from_secs(120));
    assert_eq!(
        transports(&c),
        ["v1"],
        "a v1-only bitcoind's connection to cairn"
    );

    // A message with a bad checksum is dropped and the connection kept, as Core's V1Transport
    // does: the ping after it is answered, the bad one is not.
    let cairn_p2p = SocketAddr::from(([127, 0, 0, 1], p2p_port));
    let mut peer = ScriptedPeer::connect("127.0.0.2", cairn_p2p);
    peer.handshake();
    peer.stream.write_all(&bad_checksum_ping()).unwrap();
    peer.send(bitcoin::p2p::message::NetworkMessage::Ping(99))
        .unwrap();
    let pong = peer.recv_until(|m| match m {
        bitcoin::p2p::message::NetworkMessage::Pong(n) => Some(*n),
        _ => None,
    });
    assert_eq!(pong, Some(99), "the good ping after a bad checksum");
    drop(peer);

    // A peer from a non-local address that misbehaves (a second version message) is
    // disconnected and banned. The same from a loopback address (every inbound peer of an
    // onion service) is disconnected, not banned, as Core.
    let remote = non_loopback_ip();
    for (from, banned) in [("127.0.0.2", false), (remote.as_str(), true)] {
        let mut peer = ScriptedPeer::connect(from, cairn_p2p);
        peer.handshake();
        peer.send_second_version().unwrap();
        assert_eq!(
            peer.recv_until(|_| None::<()>),
            None,
            "cairn must drop the connection"
        );
        // Banned: the next connection from that address is closed at once. Not banned: it
        // completes a handshake.
        let refused = if banned {
            banned_within(from, cairn_p2p)
        } else {
            ScriptedPeer::connect(from, cairn_p2p)
                .try_handshake()
                .is_none()
        };
        assert_eq!(refused, banned, "peer {from}: banned {banned} expected");
    }
    // Sync goes on with the honest peer.
    a.rpc(&["generatetoaddress", "1", ADDR]);
    cairn.wait_for(&a.rpc(&["getbestblockhash"]), "after the ban");
}

/// A regtest `ping` whose checksum does not match its payload.
/// Waits (30 s at most) for a `blockchain.scripthash.subscribe` notification of `script`.
fn wait_for_script_notification(
    c: &electrum_client::raw_client::RawClient<
        electrum_client::raw_client::ElectrumPlaintextStream,
    >,
    script: &bitcoin::Script,
    what: &str,
) {
    use electrum_client::ElectrumApi;
    let start = Instant::now();
    while c.script_pop(script).unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(30), "{what}");
        c.ping().unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A bitcoind with a wallet and 110 blocks mined to it (the address returned), and a cairn
/// following it over P2P with `extra` options, synced: its Electrum port returned.
fn wallet_and_cairn(dir: &std::path::Path, extra: &[&str]) -> (Bitcoind, String, Cairn, u16) {
    let (a, mine) = Bitcoind::with_wallet(&dir.join("a"), 110);
    let electrum_port = free_port();
    let mut args = vec![
        format!("--connect=127.0.0.1:{}", a.p2p_port),
        format!("--electrum-addr=127.0.0.1:{electrum_port}"),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let cairn = start_cairn(&dir.join("cairn"), &args);
    cairn.wait_for(&a.rpc(&["getbestblockhash"]), "initial sync");
    (a, mine, cairn, electrum_port)
}

#[test]
fn transactions_relay_both_ways_with_bitcoind() {
    use electrum_client::raw_client::RawClient;
    use electrum_client::{ElectrumApi, Param};
    let tmp = tempfile::tempdir().unwrap();
    let (a, mine, cairn, electrum_port) = wallet_and_cairn(tmp.path(), &["--mempool-truc=enforce"]);
    let c = RawClient::new(
        ("127.0.0.1", electrum_port),
        Some(Duration::from_secs(30)),
        None,
    )
    .unwrap();

    // bitcoind's wallet pays an address: cairn's mempool has it within seconds, and a client
    // subscribed to that address is notified.
    let dest = a.rpc(&["getnewaddress", "", "bech32"]);
    let dest_script = bitcoin::Address::from_str(&dest)
        .unwrap()
        .assume_checked()
        .script_pubkey();
    assert!(c.script_subscribe(&dest_script).unwrap().is_none());
    let txid: bitcoin::Txid = a.rpc(&["sendtoaddress", &dest, "1.5"]).parse().unwrap();
    let start = Instant::now();
    loop {
        let mempool = c
            .raw_call(
                "blockchain.scripthash.get_mempool",
                vec![Param::String(
                    cairn::types::ScriptHash::of(&dest_script).to_electrum_hex(),
                )],
            )
            .unwrap();
        if mempool
            .as_array()
            .is_some_and(|m| m.iter().any(|e| e["tx_hash"] == txid.to_string()))
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "bitcoind's transaction never reached cairn's mempool"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let history = c.script_get_history(&dest_script).unwrap();
    assert_eq!(
        history.last().map(|h| (h.tx_hash, h.height)),
        Some((txid, 0))
    );
    wait_for_script_notification(&c, &dest_script, "no notification");

    // A transaction broadcast through cairn's Electrum reaches bitcoind's mempool.
    let unspent: serde_json::Value = serde_json::from_str(&a.rpc(&["listunspent", "100"])).unwrap();
    let coin = &unspent[0];
    let amount = coin["amount"].as_f64().unwrap();
    let to = a.rpc(&["getnewaddress", "", "bech32"]);
    let inputs = serde_json::json!([{"txid": coin["txid"], "vout": coin["vout"]}]).to_string();
    let make = |fee: f64| {
        let outputs = serde_json::json!({ to.clone(): format!("{:.8}", amount - fee) }).to_string();
        let raw = a.rpc(&["createrawtransaction", &inputs, &outputs]);
        let signed: serde_json::Value =
            serde_json::from_str(&a.rpc(&["signrawtransactionwithwallet", &raw])).unwrap();
        signed["hex"].as_str().unwrap().to_string()
    };
    let raw = make(0.0002);
    let sent = c
        .raw_call(
            "blockchain.transaction.broadcast",
            vec![Param::String(raw.clone())],
        )
        .unwrap();
    let sent_txid = sent.as_str().unwrap().to_string();
    let start = Instant::now();
    loop {
        let pool: Vec<String> = serde_json::from_str(&a.rpc(&["getrawmempool"])).unwrap();
        if pool.contains(&sent_txid) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "cairn's broadcast never reached bitcoind"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // A double spend paying less is refused with a reason.
    let err = c
        .raw_call(
            "blockchain.transaction.broadcast",
            vec![Param::String(make(0.0001))],
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("insufficient fee"), "{err}");

    // Mined by bitcoind: the mempool entry becomes confirmed history.
    a.rpc(&["generatetoaddress", "1", &mine]);
    cairn.wait_for(&a.rpc(&["getbestblockhash"]), "mined");
    let start = Instant::now();
    loop {
        let h = c.script_get_history(&dest_script).unwrap();
        if h.last().is_some_and(|e| e.tx_hash == txid && e.height > 0) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "mined transaction still unconfirmed: {h:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // A reorg on bitcoind takes the block away: invalidate it and mine two empty blocks on its
    // parent. The transaction goes back to cairn's mempool (from the disconnected block), its
    // history entry to height 0, and the subscribed client is told.
    let mined = a.rpc(&["getbestblockhash"]);
    while c.script_pop(&dest_script).unwrap().is_some() {}
    a.rpc(&["invalidateblock", &mined]);
    a.rpc(&["generateblock", &mine, "[]"]);
    a.rpc(&["generateblock", &mine, "[]"]);
    cairn.wait_for(&a.rpc(&["getbestblockhash"]), "reorg");
    let start = Instant::now();
    loop {
        let h = c.script_get_history(&dest_script).unwrap();
        if h.iter().any(|e| e.tx_hash == txid && e.height == 0) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "reorged-out transaction not back in the mempool: {h:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_for_script_notification(&c, &dest_script, "no notification after the reorg");

    // Packages (blockchain.transaction.broadcast_package, through the electrum-client crate):
    // a version 3 parent paying no fee (cairn enforces TRUC here, where a child may pay for a
    // free parent as in Core 28 and later) is refused alone, accepted with a child that pays
    // for both, and refused with a child that does not.
    let coins: serde_json::Value = serde_json::from_str(&a.rpc(&["listunspent", "1"])).unwrap();
    let mut coins = coins
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["amount"].as_f64().unwrap() > 1.0);
    let mut package = |child_fee: f64| -> (bitcoin::Transaction, bitcoin::Transaction) {
        let coin = coins.next().expect("a spendable coin");
        let amount = coin["amount"].as_f64().unwrap();
        let to_parent = a.rpc(&["getnewaddress", "", "bech32"]);
        let inputs = serde_json::json!([{"txid": coin["txid"], "vout": coin["vout"]}]).to_string();
        let outputs = serde_json::json!({ to_parent.clone(): format!("{amount:.8}") }).to_string();
        let raw = version_3(&a.rpc(&["createrawtransaction", &inputs, &outputs]));
        let signed: serde_json::Value =
            serde_json::from_str(&a.rpc(&["signrawtransactionwithwallet", &raw])).unwrap();
        let parent: bitcoin::Transaction = bitcoin::consensus::deserialize(
            &Vec::<u8>::from_hex(signed["hex"].as_str().unwrap()).unwrap(),
        )
        .unwrap();
        let info: serde_json::Value =
            serde_json::from_str(&a.rpc(&["getaddressinfo", &to_parent])).unwrap();
        let to_child = a.rpc(&["getnewaddress", "", "bech32"]);
        let inputs =
            serde_json::json!([{"txid": parent.compute_txid().to_string(), "vout": 0}]).to_string();
        let outputs =
            serde_json::json!({ to_child: format!("{:.8}", amount - child_fee) }).to_string();
        let prevtxs = serde_json::json!([{"txid": parent.compute_txid().to_string(), "vout": 0,
            "scriptPubKey": info["scriptPubKey"], "amount": amount}])
        .to_string();
        let raw = version_3(&a.rpc(&["createrawtransaction", &inputs, &outputs]));
        let signed: serde_json::Value =
            serde_json::from_str(&a.rpc(&["signrawtransactionwithwallet", &raw, &prevtxs]))
                .unwrap();
        let child: bitcoin::Transaction = bitcoin::consensus::deserialize(
            &Vec::<u8>::from_hex(signed["hex"].as_str().unwrap()).unwrap(),
        )
        .unwrap();
        (parent, child)
    };
    let (parent, child) = package(0.0002);
    let err = c.transaction_broadcast(&parent).unwrap_err().to_string();
    assert!(err.contains("min relay fee not met"), "{err}");
    let err = c
        .transaction_broadcast_package(&[child.clone(), parent.clone()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("package-not-child-with-parents"), "{err}");
    let res = c
        .transaction_broadcast_package(&[parent.clone(), child.clone()])
        .unwrap();
    assert!(res.success && res.errors.is_empty(), "{res:?}");
    let in_pool = |t: &bitcoin::Transaction| c.transaction_get(&t.compute_txid()).is_ok();
    assert!(in_pool(&parent) && in_pool(&child));
    let child_script = child.output[0].script_pubkey.clone();
    let hist = c.script_get_history(&child_script).unwrap();
    assert_eq!(
        hist.iter()
            .map(|h| (h.tx_hash, h.height))
            .collect::<Vec<_>>(),
        vec![(child.compute_txid(), -1)]
    );
    // 10 sat for both: under 0.1 sat/vB, the relay fee of Core 31 and of cairn's default.
    let (cheap_parent, cheap_child) = package(0.0000001);
    let res = c
        .transaction_broadcast_package(&[cheap_parent.clone(), cheap_child.clone()])
        .unwrap();
    assert!(!res.success, "{res:?}");
    let failed: Vec<bitcoin::Txid> = res.errors.iter().map(|e| e.txid).collect();
    assert_eq!(
        failed,
        vec![cheap_parent.compute_txid(), cheap_child.compute_txid()],
        "{res:?}"
    );
    assert!(
        res.errors
            .iter()
            .all(|e| e.error.contains("package fee rate too low")),
        "{res:?}"
    );
    assert!(
        !in_pool(&cheap_parent) && !in_pool(&cheap_child),
        "a refused package left members behind"
    );
}

#[test]
fn learns_peer_addresses_connects_out_to_them_and_answers_getaddr() {
    use bitcoin::p2p::address::Address;
    use bitcoin::p2p::message::NetworkMessage;
    use bitcoin::p2p::ServiceFlags;
    let tmp = tempfile::tempdir().unwrap();
    // A bitcoind with 20 blocks that cairn is not told about.
    let b = Bitcoind::start(&tmp.path().join("b"), &[]);
    b.rpc(&["generatetoaddress", "20", ADDR]);
    let b_addr = SocketAddr::from(([127, 0, 0, 1], b.p2p_port));

    // cairn with no peers configured: it only listens.
    let p2p_port = free_port();
    let cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[format!("--p2p-addr=127.0.0.1:{p2p_port}")],
    );
    let cairn_p2p = SocketAddr::from(([127, 0, 0, 1], p2p_port));

    // A peer connects, finishes the handshake (cairn offers addrv2 and wtxid relay)...
    let mut q = ScriptedPeer::connect("127.0.0.4", cairn_p2p);
    let handshake = q.handshake();
    assert!(
        handshake
            .iter()
            .any(|m| matches!(m, NetworkMessage::SendAddrV2)),
        "{handshake:?}"
    );
    // ...and tells cairn about bitcoind's address.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    q.send(NetworkMessage::Addr(vec![(
        now,
        Address::new(&b_addr, ServiceFlags::NETWORK | ServiceFlags::WITNESS),
    )]))
    .unwrap();

    // cairn fills an outbound slot with it and syncs bitcoind's chain from it.
    cairn.wait_for(
        &b.rpc(&["getbestblockhash"]),
        "sync from a peer learnt by addr",
    );
    let status = cairn.status();
    let peers = status["p2p"]["peers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        peers
            .iter()
            .any(|p| p["addr"] == b_addr.to_string() && p["inbound"] == false),
        "bitcoind not among the outbound peers: {status}"
    );
    assert!(
        status["p2p"]["known_addresses"].as_u64().unwrap_or(0) >= 1,
        "{status}"
    );

    // An inbound peer's getaddr is answered with what the book holds.
    q.send(NetworkMessage::GetAddr).unwrap();
    let answered = q
        .recv_until(|m| match m {
            NetworkMessage::Addr(list) => Some(
                list.iter()
                    .filter_map(|(_, a)| a.socket_addr().ok())
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .expect("an addr answer");
    assert!(answered.contains(&b_addr), "{answered:?}");

    // More than 1,000 addresses in one message is a protocol violation: disconnected.
    let flood: Vec<(u32, Address)> = (0..1001u32)
        .map(|i| {
            (
                now,
                Address::new(
                    &SocketAddr::from((std::net::Ipv4Addr::from(0x0b00_0000 + i), 8333)),
                    ServiceFlags::NETWORK,
                ),
            )
        })
        .collect();
    q.send(NetworkMessage::Addr(flood)).unwrap();
    assert!(
        q.recv_until(|_| None::<()>).is_none(),
        "still connected after an oversized addr"
    );
    // The honest outbound peer stays.
    b.rpc(&["generatetoaddress", "1", ADDR]);
    cairn.wait_for(&b.rpc(&["getbestblockhash"]), "after the flood");
}

#[test]
fn a_restart_reconnects_to_the_peers_of_the_saved_address_book() {
    let tmp = tempfile::tempdir().unwrap();
    let b = Bitcoind::start(&tmp.path().join("b"), &[]);
    b.rpc(&["generatetoaddress", "20", ADDR]);
    let b_addr = SocketAddr::from(([127, 0, 0, 1], b.p2p_port));
    let dir = tmp.path().join("cairn");
    let listen = || format!("--p2p-addr=127.0.0.1:{}", free_port());

    // Run 1: bitcoind named with --addnode; a clean stop saves the book.
    let cairn = start_cairn(&dir, &[format!("--addnode={b_addr}"), listen()]);
    cairn.wait_for(&b.rpc(&["getbestblockhash"]), "sync from the addnode peer");
    cairn.stop();
    let saved = dir.join("regtest/addrbook.dat");
    assert!(saved.exists(), "no address book saved on stop");

    // Run 2: no peer named (and regtest has no DNS seeds): the saved book brings bitcoind back.
    b.rpc(&["generatetoaddress", "1", ADDR]);
    let cairn = start_cairn(&dir, &[listen()]);
    cairn.wait_for(
        &b.rpc(&["getbestblockhash"]),
        "reconnect from the saved book",
    );
    // The book kept the services of bitcoind's handshake (NODE_P2P_V2 among them): BIP324.
    assert_eq!(transports(&b), ["v2"], "a book peer known to offer v2");
    cairn.stop();

    // The peer picked from the book was saved as an anchor (Core's anchors.dat), to be dialled
    // first next time; removed here so that the next run starts with nothing.
    let anchors = dir.join("regtest/anchors.dat");
    assert!(anchors.exists(), "no anchors saved on stop");
    std::fs::remove_file(&anchors).unwrap();

    // A damaged book is set aside, not fatal: the node starts with an empty one.
    let mut bytes = std::fs::read(&saved).unwrap();
    bytes[20] ^= 0x01;
    std::fs::write(&saved, bytes).unwrap();
    let cairn = start_cairn(&dir, &[listen()]);
    let status = cairn.status_when(|s| s["running"] == true);
    assert_eq!(status["p2p"]["known_addresses"], 0, "{status}");
    let aside: Vec<String> = std::fs::read_dir(dir.join("regtest"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        aside.iter().any(|n| n.starts_with("addrbook.dat.bad-")),
        "{aside:?}"
    );
    cairn.stop();
}

/// A generated chain held by a bitcoind with its filter index (the reference), and a cairn that
/// synced it from that bitcoind over P2P and accepts peers: both at the tip, bitcoind's filter
/// index caught up.
struct FilteredChain {
    a: Bitcoind,
    cairn: Cairn,
    p2p_port: u16,
    tip: String,
    _tmp: tempfile::TempDir,
}

fn filtered_chain(blocks: u32, txs_per_block: u32, seed: u64) -> FilteredChain {
    let tmp = tempfile::tempdir().unwrap();
    let chain = tmp.path().join("chain");
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "generate",
            "--blocks",
            &blocks.to_string(),
            "--txs-per-block",
            &txs_per_block.to_string(),
        ])
        .args(["--seed", &seed.to_string(), "--out"])
        .arg(&chain)
        .output()
        .unwrap();
    assert!(out.status.success());
    let a = Bitcoind::start(
        &tmp.path().join("a"),
        &[
            format!("-loadblock={}", chain.join("blocks/blk00000.dat").display()),
            "-blockfilterindex=1".into(),
        ],
    );
    a.wait_for_height(u64::from(blocks), Duration::from_secs(120));
    let p2p_port = free_port();
    let cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[
            format!("--connect=127.0.0.1:{}", a.p2p_port),
            format!("--p2p-addr=127.0.0.1:{p2p_port}"),
        ],
    );
    let tip = a.rpc(&["getbestblockhash"]);
    cairn.wait_for(&tip, "initial sync");
    let start = Instant::now();
    while !a.rpc(&["getindexinfo"]).contains("\"synced\": true") {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "bitcoind's filter index never synced"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    FilteredChain {
        a,
        cairn,
        p2p_port,
        tip,
        _tmp: tmp,
    }
}

#[test]
fn serves_bip157_filters_like_bitcoind_and_disconnects_abusers() {
    use bitcoin::bip158::{FilterHash, FilterHeader};
    use bitcoin::hashes::Hash;
    use bitcoin::p2p::message::NetworkMessage;
    use bitcoin::p2p::message_filter::{GetCFCheckpt, GetCFHeaders, GetCFilters};
    use bitcoin::p2p::ServiceFlags;
    use bitcoin::BlockHash;
    let FilteredChain {
        a,
        cairn: _cairn,
        p2p_port,
        _tmp,
        ..
    } = filtered_chain(1050, 3, 5);
    let cairn_p2p = SocketAddr::from(([127, 0, 0, 1], p2p_port));
    // bitcoind's filters and headers, the reference.
    let hash = |h: u32| BlockHash::from_str(&a.rpc(&["getblockhash", &h.to_string()])).unwrap();
    let reference = |h: u32| -> (String, FilterHeader) {
        let v: serde_json::Value =
            serde_json::from_str(&a.rpc(&["getblockfilter", &hash(h).to_string()])).unwrap();
        (
            v["filter"].as_str().unwrap().to_string(),
            FilterHeader::from_str(v["header"].as_str().unwrap()).unwrap(),
        )
    };

    let mut q = ScriptedPeer::connect("127.0.0.4", cairn_p2p);
    let handshake = q.handshake();
    let services = handshake.iter().find_map(|m| match m {
        NetworkMessage::Version(v) => Some(v.services),
        _ => None,
    });
    assert!(
        services.is_some_and(|s| s.has(ServiceFlags::COMPACT_FILTERS)),
        "{services:?}"
    );

    // getcfcheckpt: the filter header at height 1000.
    q.send(NetworkMessage::GetCFCheckpt(GetCFCheckpt {
        filter_type: 0,
        stop_hash: hash(1050),
    }))
    .unwrap();
    let checkpt = q
        .recv_until(|m| match m {
            NetworkMessage::CFCheckpt(c) => Some(c.clone()),
            _ => None,
        })
        .expect("cfcheckpt");
    assert_eq!(checkpt.filter_headers, vec![reference(1000).1]);

    // getcfheaders over 2,000 blocks at most: here 1..=1050, chained from height 0's header.
    q.send(NetworkMessage::GetCFHeaders(GetCFHeaders {
        filter_type: 0,
        start_height: 1,
        stop_hash: hash(1050),
    }))
    .unwrap();
    let headers = q
        .recv_until(|m| match m {
            NetworkMessage::CFHeaders(c) => Some(c.clone()),
            _ => None,
        })
        .expect("cfheaders");
    assert_eq!(headers.previous_filter_header, reference(0).1);
    assert_eq!(headers.filter_hashes.len(), 1050);
    let mut prev = headers.previous_filter_header;
    for (i, fh) in headers.filter_hashes.iter().enumerate() {
        prev = fh.filter_header(&prev);
        if i % 97 == 0 || i == 1049 {
            assert_eq!(
                prev,
                reference(i as u32 + 1).1,
                "filter header at {}",
                i + 1
            );
        }
    }

    // getcfilters for 1,000 blocks: every filter equals bitcoind's, in order.
    q.send(NetworkMessage::GetCFilters(GetCFilters {
        filter_type: 0,
        start_height: 50,
        stop_hash: hash(1049),
    }))
    .unwrap();
    for h in 50..=1049u32 {
        let f = q
            .recv_until(|m| match m {
                NetworkMessage::CFilter(f) => Some(f.clone()),
                _ => None,
            })
            .expect("cfilter");
        assert_eq!(f.block_hash, hash(h));
        let (want, _) = reference(h);
        assert_eq!(f.filter.to_lower_hex_string(), want, "filter at {h}");
        assert_eq!(
            FilterHash::hash(&f.filter),
            headers.filter_hashes[h as usize - 1],
            "cfheaders agrees at {h}"
        );
    }

    // Abusive requests get a disconnect: 1,001 filters, a wrong filter type, an unknown stop hash.
    let abuses = [
        NetworkMessage::GetCFilters(GetCFilters {
            filter_type: 0,
            start_height: 49,
            stop_hash: hash(1049),
        }),
        NetworkMessage::GetCFHeaders(GetCFHeaders {
            filter_type: 1,
            start_height: 0,
            stop_hash: hash(10),
        }),
        NetworkMessage::GetCFCheckpt(GetCFCheckpt {
            filter_type: 0,
            stop_hash: BlockHash::all_zeros(),
        }),
        NetworkMessage::GetCFHeaders(GetCFHeaders {
            filter_type: 0,
            start_height: 11,
            stop_hash: hash(10),
        }),
    ];
    for (i, abuse) in abuses.into_iter().enumerate() {
        let mut bad = ScriptedPeer::connect(&format!("127.0.0.{}", 10 + i), cairn_p2p);
        bad.handshake();
        bad.send(abuse.clone()).unwrap();
        let answered = bad.recv_until(|m| match m {
            NetworkMessage::CFilter(_)
            | NetworkMessage::CFHeaders(_)
            | NetworkMessage::CFCheckpt(_) => Some(()),
            _ => None,
        });
        assert!(
            answered.is_none(),
            "{abuse:?} was answered instead of disconnecting"
        );
    }
    // The well-behaved peer is still served.
    q.send(NetworkMessage::GetCFHeaders(GetCFHeaders {
        filter_type: 0,
        start_height: 0,
        stop_hash: hash(3),
    }))
    .unwrap();
    let again = q
        .recv_until(|m| match m {
            NetworkMessage::CFHeaders(c) => Some(c.clone()),
            _ => None,
        })
        .expect("cfheaders");
    assert_eq!(again.previous_filter_header, FilterHeader::all_zeros());
    assert_eq!(again.filter_hashes.len(), 4);
}

#[test]
fn kyoto_light_client_syncs_every_filter_from_cairn() {
    use bip157::builder::Builder;
    use bip157::chain::ChainState;
    use bip157::{Client, Event, HashCheckpoint, TrustedPeer};
    let FilteredChain {
        a,
        cairn: _cairn,
        p2p_port,
        tip,
        _tmp,
    } = filtered_chain(300, 8, 9);

    // Kyoto, pointed at cairn only, from genesis.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let filters: Vec<(u32, bitcoin::BlockHash, Vec<u8>)> = rt.block_on(async {
        let (node, client) = Builder::new(bitcoin::Network::Regtest)
            .add_peer(TrustedPeer::from_socket_addr(SocketAddr::from((
                [127, 0, 0, 1],
                p2p_port,
            ))))
            .whitelist_only()
            .required_peers(1)
            .chain_state(ChainState::Checkpoint(HashCheckpoint::from_genesis(
                bitcoin::Network::Regtest,
            )))
            .build();
        let running = tokio::spawn(async move { node.run().await });
        let Client {
            requester,
            mut event_rx,
            ..
        } = client;
        let mut got = Vec::new();
        let synced = tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(event) = event_rx.recv().await {
                match event {
                    Event::IndexedFilter(f) => {
                        got.push((f.height(), f.block_hash(), f.into_contents()))
                    }
                    Event::FiltersSynced(update) => return Some(update.tip().hash),
                    Event::ChainUpdate(_) => {}
                }
            }
            None
        })
        .await;
        let _ = requester.shutdown();
        running.abort();
        assert_eq!(
            synced.ok().flatten().map(|h| h.to_string()),
            Some(tip.clone()),
            "Kyoto did not sync to cairn's tip"
        );
        got
    });
    // Every block's filter, each equal to bitcoind's.
    let heights: Vec<u32> = filters.iter().map(|f| f.0).collect();
    assert_eq!(heights, (1..=300).collect::<Vec<u32>>());
    for (height, hash, filter) in filters {
        assert_eq!(
            hash.to_string(),
            a.rpc(&["getblockhash", &height.to_string()])
        );
        let want: serde_json::Value =
            serde_json::from_str(&a.rpc(&["getblockfilter", &hash.to_string()])).unwrap();
        assert_eq!(
            filter.to_lower_hex_string(),
            want["filter"].as_str().unwrap(),
            "filter at {height}"
        );
    }
}

#[test]
fn nakamoto_light_client_rescans_every_filter_from_cairn() {
    use nakamoto::client::traits::Handle as _;
    use nakamoto::client::{Client, Config};
    type Reactor = nakamoto::net::poll::Reactor<std::net::TcpStream>;
    let FilteredChain {
        a,
        cairn: _cairn,
        p2p_port,
        tip,
        _tmp: tmp,
    } = filtered_chain(200, 8, 10);

    // nakamoto, connected to cairn only: it syncs headers and filter headers, then a rescan
    // fetches every filter (each checked by nakamoto against the filter headers).
    let mut cfg = Config::new(nakamoto::client::network::Network::Regtest);
    cfg.connect = vec![SocketAddr::from(([127, 0, 0, 1], p2p_port))];
    cfg.root = tmp.path().join("nakamoto");
    std::fs::create_dir_all(&cfg.root).unwrap();
    let client = Client::<Reactor>::new().unwrap();
    let handle = client.handle();
    let filters = handle.filters();
    std::thread::spawn(move || client.run(cfg));
    let reached = handle
        .wait_for_height(200)
        .expect("nakamoto reaches height 200");
    assert_eq!(reached.to_string(), tip);
    // Headers first, then filter headers: rescanning waits for them.
    let script = nakamoto::common::bitcoin::Script::new();
    let mut got = std::collections::BTreeMap::new();
    let start = Instant::now();
    handle.rescan(1..=200, std::iter::once(script)).unwrap();
    while got.len() < 200 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "nakamoto got {} filters",
            got.len()
        );
        if let Ok((filter, hash, height)) = filters.recv_timeout(Duration::from_secs(5)) {
            got.insert(height, (hash.to_string(), filter.content));
        }
    }
    let _ = handle.shutdown();
    assert_eq!(
        got.keys().copied().collect::<Vec<u64>>(),
        (1..=200).collect::<Vec<u64>>()
    );
    for (height, (hash, content)) in got {
        assert_eq!(hash, a.rpc(&["getblockhash", &height.to_string()]));
        let want: serde_json::Value =
            serde_json::from_str(&a.rpc(&["getblockfilter", &hash])).unwrap();
        assert_eq!(
            content.to_lower_hex_string(),
            want["filter"].as_str().unwrap(),
            "filter at {height}"
        );
    }
}

/// Issue 12's oversized locator: a `getheaders` with more than Core's 101 locator hashes (here
/// 50,000) is answered with a disconnect, as Core does, and not a ban: the same address is
/// served again, and a 101-hash locator gets the headers bitcoind's chain has.
#[test]
fn oversized_getheaders_locator_disconnects_without_a_ban() {
    use bitcoin::hashes::Hash;
    use bitcoin::p2p::message::NetworkMessage;
    use bitcoin::p2p::message_blockdata::GetHeadersMessage;
    use bitcoin::BlockHash;
    let FilteredChain {
        a,
        cairn: _cairn,
        p2p_port,
        _tmp,
        ..
    } = filtered_chain(120, 1, 11);
    let cairn_p2p = SocketAddr::from(([127, 0, 0, 1], p2p_port));
    let genesis = BlockHash::from_str(&a.rpc(&["getblockhash", "0"])).unwrap();
    let getheaders = |n: usize| {
        let mut locator: Vec<BlockHash> = (0..n - 1)
            .map(|i| BlockHash::from_byte_array([(i % 251) as u8 + 1; 32]))
            .collect();
        locator.push(genesis);
        NetworkMessage::GetHeaders(GetHeadersMessage {
            version: 70016,
            locator_hashes: locator,
            stop_hash: BlockHash::all_zeros(),
        })
    };
    let headers_of = |m: &NetworkMessage| match m {
        NetworkMessage::Headers(h) => Some(h.len()),
        _ => None,
    };
    let mut big = ScriptedPeer::connect("127.0.0.21", cairn_p2p);
    big.handshake();
    big.send(getheaders(50_000)).unwrap();
    assert_eq!(
        big.recv_until(headers_of),
        None,
        "a 50,000-hash locator was answered instead of disconnecting"
    );
    let mut again = ScriptedPeer::connect("127.0.0.21", cairn_p2p);
    again.handshake();
    again.send(getheaders(101)).unwrap();
    assert_eq!(
        again.recv_until(headers_of),
        Some(120),
        "the same address, with a 101-hash locator, gets every header after genesis"
    );
}

/// Issue 12's unconnecting headers: a `headers` message whose first header follows an unknown
/// block is answered with `getheaders`, as Core does, not with a ban; only the eleventh in a row
/// (Core's MAX_NUM_UNCONNECTING_HEADERS_MSGS is 10) disconnects.
#[test]
fn unconnecting_headers_get_getheaders_until_too_many() {
    use bitcoin::hashes::Hash;
    use bitcoin::p2p::message::NetworkMessage;
    let FilteredChain {
        cairn: _cairn,
        p2p_port,
        _tmp,
        ..
    } = filtered_chain(20, 1, 12);
    let cairn_p2p = SocketAddr::from(([127, 0, 0, 1], p2p_port));
    let mut q = ScriptedPeer::connect("127.0.0.31", cairn_p2p);
    q.handshake();
    let getheaders = |m: &NetworkMessage| matches!(m, NetworkMessage::GetHeaders(_)).then_some(());
    assert_eq!(
        q.recv_until(getheaders),
        Some(()),
        "cairn's first getheaders"
    );
    let orphan = |n: u8| {
        let prev = bitcoin::BlockHash::from_byte_array([n; 32]);
        common::peer::mined_headers(prev, 1_700_000_000, 1, n)
    };
    for n in 1..=10u8 {
        // cairn's getheaders answered (it keeps one unanswered at a time, as Core's
        // MaybeSendGetHeaders), then a header on nothing it knows.
        q.send(NetworkMessage::Headers(Vec::new())).unwrap();
        q.send(NetworkMessage::Headers(orphan(n))).unwrap();
        assert_eq!(
            q.recv_until(getheaders),
            Some(()),
            "unconnecting headers message {n} not answered with getheaders"
        );
    }
    q.send(NetworkMessage::Headers(Vec::new())).unwrap();
    q.send(NetworkMessage::Headers(orphan(11))).unwrap();
    assert_eq!(
        q.recv_until(getheaders),
        None,
        "the eleventh unconnecting headers message in a row must disconnect"
    );
}

/// Issue 12: a `--connect` peer that misbehaves is disconnected but not banned, as Core never
/// punishes manual connections, and cairn dials it again.
#[test]
fn a_misbehaving_connect_peer_is_redialled_not_banned() {
    let tmp = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let _cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[format!("--connect=127.0.0.1:{port}"), "--no-listen".into()],
    );
    // cairn dials with BIP324 first; the scripted peer speaks v1 only (`accept_v1`).
    let mut first = ScriptedPeer::over(accept_v1(&listener));
    first.handshake();
    // A second version message: a ban for any other peer.
    first.send_second_version().unwrap();
    assert_eq!(
        first.recv_until(|_| None::<()>),
        None,
        "cairn must drop the connection"
    );
    let mut second = ScriptedPeer::over(accept_v1(&listener));
    assert!(second
        .handshake()
        .iter()
        .any(|m| matches!(m, bitcoin::p2p::message::NetworkMessage::Verack)));
}

/// Issue 12's half-open connections: connections that never finish the handshake hold inbound
/// places too, so with `p2p_max_inbound = 2` two silent connections keep a third peer out until
/// one of them goes away.
#[test]
fn half_open_connections_count_against_the_inbound_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("cairn.toml");
    std::fs::write(&config, "p2p_max_inbound = 2\n").unwrap();
    let p2p_port = free_port();
    let _cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[
            format!("--config={}", config.display()),
            format!("--p2p-addr=127.0.0.1:{p2p_port}"),
        ],
    );
    let cairn_p2p = SocketAddr::from(([127, 0, 0, 1], p2p_port));
    let silent_a = connect_from("127.0.0.41", cairn_p2p);
    let _silent_b = connect_from("127.0.0.42", cairn_p2p);
    std::thread::sleep(Duration::from_millis(500));
    // cairn waits for an inbound peer's first bytes (v1 or BIP324), so each peer speaks first.
    let mut third = ScriptedPeer::connect("127.0.0.43", cairn_p2p);
    assert!(
        third.try_handshake().is_none(),
        "a third connection was let in beside two half-open ones"
    );
    drop(silent_a);
    std::thread::sleep(Duration::from_millis(500));
    let mut fourth = ScriptedPeer::connect("127.0.0.44", cairn_p2p);
    assert!(
        fourth.try_handshake().is_some_and(|got| got
            .iter()
            .any(|m| matches!(m, bitcoin::p2p::message::NetworkMessage::Version(_)))),
        "a place freed by a closed half-open connection is not given to the next peer"
    );
}

/// Issue 12: the mempool outlives a restart. A `mempool.dat` that bitcoind saved (Core's version
/// 2 format, obfuscated) loads into a cairn that has no peers, and the file cairn saves on its
/// clean shutdown is read by bitcoind's `importmempool` and by cairn's next start.
#[test]
fn mempool_dat_round_trips_between_bitcoind_and_cairn() {
    use electrum_client::raw_client::RawClient;
    use electrum_client::ElectrumApi;
    let tmp = tempfile::tempdir().unwrap();
    let (a, _) = Bitcoind::with_wallet(&tmp.path().join("a"), 110);
    let tip = a.rpc(&["getbestblockhash"]);
    let dir = tmp.path().join("cairn");
    let cairn = start_cairn(&dir, &[format!("--connect=127.0.0.1:{}", a.p2p_port)]);
    cairn.wait_for(&tip, "initial sync");
    cairn.stop();

    // While cairn is down, bitcoind's wallet makes transactions, one of them spending another's
    // unconfirmed output (so the file's order matters), then saves its mempool.
    let mut txids: Vec<String> = (0..4)
        .map(|i| {
            a.rpc(&[
                "sendtoaddress",
                &a.rpc(&["getnewaddress", "", "bech32"]),
                &format!("{}.5", i + 1),
            ])
        })
        .collect();
    let unconfirmed: serde_json::Value =
        serde_json::from_str(&a.rpc(&["listunspent", "0", "0"])).unwrap();
    let coin = &unconfirmed[0];
    let inputs = serde_json::json!([{"txid": coin["txid"], "vout": coin["vout"]}]).to_string();
    let value = format!("{:.8}", coin["amount"].as_f64().unwrap() - 0.0001);
    let outputs = serde_json::json!({ a.rpc(&["getnewaddress", "", "bech32"]): value }).to_string();
    let child = a.rpc(&["createrawtransaction", &inputs, &outputs]);
    let signed: serde_json::Value =
        serde_json::from_str(&a.rpc(&["signrawtransactionwithwallet", &child])).unwrap();
    txids.push(a.rpc(&["sendrawtransaction", signed["hex"].as_str().unwrap()]));
    txids.sort();
    // bitcoind's wallet hands a transaction to its mempool as it returns, but under load the
    // last one can arrive a moment later: wait for all of them (5 s at most).
    let started = std::time::Instant::now();
    loop {
        let mut in_a: Vec<String> = serde_json::from_str(&a.rpc(&["getrawmempool"])).unwrap();
        in_a.sort();
        if in_a == txids || started.elapsed() > Duration::from_secs(5) {
            assert_eq!(in_a, txids);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    a.rpc(&["savemempool"]);
    let saved = tmp.path().join("a/regtest/mempool.dat");
    assert_eq!(
        std::fs::read(&saved).unwrap()[0],
        2,
        "bitcoind wrote a version 2 (obfuscated) file"
    );
    std::fs::copy(&saved, dir.join("regtest/mempool.dat")).unwrap();

    // cairn, with no peer to hear them from, has them from the file.
    let in_cairn = |what: &str| {
        let port = free_port();
        let cairn = start_cairn(
            &dir,
            &[
                "--no-listen".into(),
                format!("--electrum-addr=127.0.0.1:{port}"),
            ],
        );
        let c = RawClient::new(("127.0.0.1", port), Some(Duration::from_secs(30)), None).unwrap();
        for txid in &txids {
            let txid = bitcoin::Txid::from_str(txid).unwrap();
            let start = Instant::now();
            while c.transaction_get_raw(&txid).is_err() {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "{what}: {txid} not in cairn's mempool"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        cairn.stop();
    };
    in_cairn("bitcoind's mempool.dat");

    // The file cairn saved on stopping: bitcoind imports it (a node that synced the chain but
    // never saw the transactions), and cairn loads it again.
    // (-blocksonly: bitcoind announces its unbroadcast wallet transactions to a new peer.)
    let b = Bitcoind::start(
        &tmp.path().join("b"),
        &[
            format!("-connect=127.0.0.1:{}", a.p2p_port),
            "-blocksonly=1".into(),
        ],
    );
    b.wait_for_height(110, Duration::from_secs(60));
    assert_eq!(
        serde_json::from_str::<Vec<String>>(&b.rpc(&["getrawmempool"])).unwrap(),
        Vec::<String>::new()
    );
    let ours = dir.join("regtest/mempool.dat");
    b.rpc(&["importmempool", &ours.display().to_string()]);
    let mut in_b: Vec<String> = serde_json::from_str(&b.rpc(&["getrawmempool"])).unwrap();
    in_b.sort();
    assert_eq!(
        in_b, txids,
        "bitcoind's importmempool of cairn's mempool.dat"
    );
    in_cairn("cairn's own mempool.dat");
}

/// Issue 12: transactions that were in peers' mempools before cairn connected reach it. A peer
/// that offers NODE_BLOOM is asked for its mempool (BIP35); a transaction whose parent cairn has
/// not seen is kept as an orphan while the parent is asked for from the peer that sent it.
#[test]
fn earlier_transactions_arrive_by_bip35_and_orphans_fetch_their_parents() {
    use bitcoin::p2p::message::NetworkMessage;
    use bitcoin::p2p::message_blockdata::Inventory;
    use electrum_client::raw_client::RawClient;
    let tmp = tempfile::tempdir().unwrap();
    let (a, mine) =
        Bitcoind::with_wallet_and(&tmp.path().join("a"), &["-peerbloomfilters=1".into()], 110);
    // Broadcast before cairn exists.
    let early = bitcoin::Txid::from_str(&a.rpc(&["sendtoaddress", &mine, "2.5"])).unwrap();

    // A parent and its child that no node has: made and signed, never sent.
    let (parent, child) = unsent_pair(&a, &mine, &early.to_string(), 0.001);

    let (p2p_port, electrum_port) = (free_port(), free_port());
    let cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[
            format!("--connect=127.0.0.1:{}", a.p2p_port),
            format!("--p2p-addr=127.0.0.1:{p2p_port}"),
            format!("--electrum-addr=127.0.0.1:{electrum_port}"),
        ],
    );
    cairn.wait_for(&a.rpc(&["getbestblockhash"]), "initial sync");
    let c = RawClient::new(
        ("127.0.0.1", electrum_port),
        Some(Duration::from_secs(30)),
        None,
    )
    .unwrap();
    let wait_in_mempool = |txid: bitcoin::Txid, what: &str| wait_in_mempool(&c, txid, what);
    wait_in_mempool(early, "BIP35 mempool request");

    // The child first: cairn asks this peer for the parent, then takes both.
    let mut q = ScriptedPeer::connect("127.0.0.51", SocketAddr::from(([127, 0, 0, 1], p2p_port)));
    q.handshake();
    q.send(NetworkMessage::Tx(child.clone())).unwrap();
    let asked = q.recv_until(|m| match m {
        NetworkMessage::GetData(items) => Some(items.clone()),
        _ => None,
    });
    assert_eq!(
        asked,
        Some(vec![Inventory::WitnessTransaction(parent.compute_txid())])
    );
    q.send(NetworkMessage::Tx(parent.clone())).unwrap();
    wait_in_mempool(parent.compute_txid(), "the orphan's parent");
    wait_in_mempool(child.compute_txid(), "the orphan");
}

/// Signs with `node`'s wallet a payment of `amount` BTC to `to` from `inputs`, `prevtxs`
/// describing inputs no chain or mempool of its has.
fn signed_payment(
    node: &Bitcoind,
    inputs: serde_json::Value,
    to: &str,
    amount: f64,
    prevtxs: Option<serde_json::Value>,
) -> bitcoin::Transaction {
    let outputs = serde_json::json!({ to: format!("{amount:.8}") }).to_string();
    let raw = node.rpc(&["createrawtransaction", &inputs.to_string(), &outputs]);
    let mut args = vec!["signrawtransactionwithwallet".to_string(), raw];
    if let Some(p) = prevtxs {
        args.push(p.to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let signed: serde_json::Value = serde_json::from_str(&node.rpc(&args)).unwrap();
    assert_eq!(signed["complete"], true, "{signed}");
    bitcoin::consensus::deserialize(&Vec::from_hex(signed["hex"].as_str().unwrap()).unwrap())
        .unwrap()
}

/// A parent paying `parent_fee` BTC from a confirmed coin of `node`'s wallet (not of
/// transaction `not_from`) and a child of it paying 0.001 BTC, both to `to`: signed, never sent.
fn unsent_pair(
    node: &Bitcoind,
    to: &str,
    not_from: &str,
    parent_fee: f64,
) -> (bitcoin::Transaction, bitcoin::Transaction) {
    let unspent: serde_json::Value =
        serde_json::from_str(&node.rpc(&["listunspent", "1"])).unwrap();
    let coin = (unspent.as_array().unwrap().iter())
        .find(|c| c["txid"] != not_from)
        .unwrap()
        .clone();
    let parent = signed_payment(
        node,
        serde_json::json!([{"txid": coin["txid"], "vout": coin["vout"]}]),
        to,
        coin["amount"].as_f64().unwrap() - parent_fee,
        None,
    );
    let out = &parent.output[0];
    let prevtx = serde_json::json!([{
        "txid": parent.compute_txid().to_string(), "vout": 0,
        "scriptPubKey": out.script_pubkey.to_hex_string(), "amount": out.value.to_btc(),
    }]);
    let child = signed_payment(
        node,
        serde_json::json!([{"txid": parent.compute_txid().to_string(), "vout": 0}]),
        to,
        out.value.to_btc() - 0.001,
        Some(prevtx),
    );
    (parent, child)
}

/// Waits up to 60 s until cairn's Electrum server has `txid`.
fn wait_in_mempool(
    c: &electrum_client::raw_client::RawClient<
        electrum_client::raw_client::ElectrumPlaintextStream,
    >,
    txid: bitcoin::Txid,
    what: &str,
) {
    use electrum_client::ElectrumApi;
    let start = Instant::now();
    while c.transaction_get_raw(&txid).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what}: {txid} never reached cairn"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Core 31's 1p1c relay (`Find1P1CPackage`): a parent paying no fee is refused alone and not
/// tried alone again, but when its child arrives, the parent is asked for once more and the two
/// enter together. Only a child from the parent's own sender is tried with it: an attacker's
/// fake child of the same parent (a broken signature), sent from 127.0.0.2 just before the
/// parent comes back, is not the one tried, so the honest pair (127.0.0.3) enters at once. An
/// attacker that relays the honest child first does not take it over either: every sender of
/// an orphan is remembered (Core's `AddAnnouncer`).
#[test]
fn a_zero_fee_parent_from_a_peer_enters_with_its_child() {
    use bitcoin::p2p::message::NetworkMessage;
    use bitcoin::p2p::message_blockdata::Inventory;
    use electrum_client::raw_client::RawClient;
    use electrum_client::ElectrumApi;
    let tmp = tempfile::tempdir().unwrap();
    let p2p_port = free_port();
    let p2p_addr = format!("--p2p-addr=127.0.0.1:{p2p_port}");
    let (a, mine, _cairn, electrum_port) = wallet_and_cairn(tmp.path(), &[&p2p_addr]);
    let (parent, child) = unsent_pair(&a, &mine, "", 0.0);
    let core = Bitcoind::start_core(
        &tmp.path().join("core"),
        &[format!("-connect=127.0.0.1:{p2p_port}")],
    );
    core.wait_for_height(110, Duration::from_secs(60));
    let mut fake = child.clone();
    fake.output[0].value = bitcoin::Amount::from_sat(fake.output[0].value.to_sat() - 1_000);
    let c = RawClient::new(
        ("127.0.0.1", electrum_port),
        Some(Duration::from_secs(30)),
        None,
    )
    .unwrap();
    let cairn_p2p = SocketAddr::from(([127, 0, 0, 1], p2p_port));
    let mut honest = ScriptedPeer::connect("127.0.0.3", cairn_p2p);
    honest.handshake();
    let mut attacker = ScriptedPeer::connect("127.0.0.2", cairn_p2p);
    attacker.handshake();

    // The parent alone: refused for its fee.
    honest.send(NetworkMessage::Tx(parent.clone())).unwrap();
    assert!(honest.pinged(1));
    assert!(c.transaction_get_raw(&parent.compute_txid()).is_err());
    // Its child: an orphan, whose parent cairn asks for again.
    honest.send(NetworkMessage::Tx(child.clone())).unwrap();
    let asked = honest.recv_until(|m| match m {
        NetworkMessage::GetData(items) => Some(items.clone()),
        _ => None,
    });
    assert_eq!(
        asked,
        Some(vec![Inventory::WitnessTransaction(parent.compute_txid())])
    );
    // The attacker's fake child arrives before the parent comes back.
    attacker.send(NetworkMessage::Tx(fake.clone())).unwrap();
    assert!(attacker.pinged(2));
    honest.send(NetworkMessage::Tx(parent.clone())).unwrap();
    wait_in_mempool(&c, parent.compute_txid(), "the zero-fee parent");
    wait_in_mempool(&c, child.compute_txid(), "its child");
    assert!(c.transaction_get_raw(&fake.compute_txid()).is_err());

    // The attacker relays the honest peer's next child first: the honest peer, sending it
    // after, is still asked for the parent, and its pair enters.
    let used = parent.input[0].previous_output.txid.to_string();
    let (parent2, child2) = unsent_pair(&a, &mine, &used, 0.0);
    attacker.send(NetworkMessage::Tx(child2.clone())).unwrap();
    assert!(attacker.pinged(3));
    honest.send(NetworkMessage::Tx(parent2.clone())).unwrap();
    honest.send(NetworkMessage::Tx(child2.clone())).unwrap();
    let asked = honest.recv_until(|m| match m {
        NetworkMessage::GetData(items) => Some(items.clone()),
        _ => None,
    });
    assert_eq!(
        asked,
        Some(vec![Inventory::WitnessTransaction(parent2.compute_txid())]),
        "the honest sender of an orphan an attacker sent first is asked for its parent"
    );
    honest.send(NetworkMessage::Tx(parent2.clone())).unwrap();
    wait_in_mempool(&c, child2.compute_txid(), "the second pair");
    // Relayed on as Core 31 relays it: cairn's Bitcoin Core 31.99 peer takes the pair.
    let start = Instant::now();
    while core
        .rpc_result(&["getmempoolentry", &child.compute_txid().to_string()])
        .is_err()
    {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "Bitcoin Core never got the package from cairn"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(core
        .rpc_result(&["getmempoolentry", &parent.compute_txid().to_string()])
        .is_ok());
}

/// A peer announcing Knots's BLAKE2b fork on mainnet (service bit 28: Knots left Bitcoin's chain
/// in August 2026 for a proof of work with 164-byte headers) is told apart in its `version` and
/// disconnected before any header is read: not banned, so the same address is welcome again
/// announcing Bitcoin's services, and cairn still serves an honest peer. On regtest, where Knots
/// announces the bit on Bitcoin's own chain (every other test here syncs from one), it is a peer
/// like any other.
#[test]
fn a_peer_of_knots_blake2b_fork_is_disconnected_on_mainnet_without_a_ban() {
    use bitcoin::p2p::{Magic, ServiceFlags};
    let tmp = tempfile::tempdir().unwrap();
    let p2p = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut cairn = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("--datadir")
        .arg(tmp.path())
        .args([
            "--network=mainnet",
            "--dnsseed=false",
            "--connect=127.0.0.1:9",
        ])
        .args(["--admin-addr=127.0.0.1:0", "--electrum-addr=127.0.0.1:0"])
        .arg(format!("--p2p-addr={p2p}"))
        .arg("run")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect(p2p).is_err() {
        assert!(start.elapsed() < Duration::from_secs(60), "no P2P listener");
        assert!(cairn.try_wait().unwrap().is_none(), "cairn exited");
        std::thread::sleep(Duration::from_millis(100));
    }
    // From a non-loopback address: loopback peers are never banned, so only this one shows it.
    let remote = non_loopback_ip();
    let bitcoin = ServiceFlags::NETWORK | ServiceFlags::WITNESS;
    let fork = bitcoin | ServiceFlags::from(1 << 28);
    for _ in 0..3 {
        let mut forked = ScriptedPeer::connect(&remote, p2p).on(Magic::BITCOIN);
        assert!(
            forked.try_handshake_announcing(fork).is_none(),
            "a peer of the BLAKE2b fork must be disconnected in its handshake"
        );
    }
    let mut back = ScriptedPeer::connect(&remote, p2p).on(Magic::BITCOIN);
    assert!(
        back.try_handshake_announcing(bitcoin).is_some(),
        "and not banned"
    );
    assert!(back.pinged(7), "served as any peer");
    let mut honest = ScriptedPeer::connect("127.0.0.3", p2p).on(Magic::BITCOIN);
    assert!(honest.try_handshake().is_some());
    let _ = cairn.kill();
    let _ = cairn.wait();
}

/// On regtest Knots 29.4 announces the BLAKE2b bit on Bitcoin's chain: cairn takes such a peer.
#[test]
fn the_blake2b_bit_is_only_another_chain_on_mainnet() {
    use bitcoin::p2p::ServiceFlags;
    let tmp = tempfile::tempdir().unwrap();
    let p2p_port = free_port();
    let _cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[format!("--p2p-addr=127.0.0.1:{p2p_port}")],
    );
    let cairn_p2p = SocketAddr::from(([127, 0, 0, 1], p2p_port));
    let knots_like = ServiceFlags::NETWORK | ServiceFlags::WITNESS | ServiceFlags::from(1 << 28);
    let mut peer = ScriptedPeer::connect("127.0.0.3", cairn_p2p);
    assert!(peer.try_handshake_announcing(knots_like).is_some());
}

/// Issue 12: the peer that sends a block the kernel finds invalid is the one disconnected and
/// banned (Core's MaybePunishNodeForBlock), and the block is not held against the chain. A peer
/// that sends `mempool` to cairn, which does not offer NODE_BLOOM, is disconnected without a ban,
/// as by Core.
#[test]
fn the_sender_of_an_invalid_block_is_banned() {
    use bitcoin::p2p::message::NetworkMessage;
    use bitcoin::p2p::message_blockdata::Inventory;
    let tmp = tempfile::tempdir().unwrap();
    let p2p_port = free_port();
    let cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[format!("--p2p-addr=127.0.0.1:{p2p_port}")],
    );
    let cairn_p2p = SocketAddr::from(([127, 0, 0, 1], p2p_port));
    let genesis = bitcoin::constants::genesis_block(bitcoin::Network::Regtest);

    let block = invalid_block_on(&genesis.header);
    let header = block.header;

    let remote = non_loopback_ip();
    let mut bad = ScriptedPeer::connect(&remote, cairn_p2p);
    bad.handshake();
    bad.send(NetworkMessage::Headers(vec![header])).unwrap();
    let asked = bad.recv_until(|m| match m {
        NetworkMessage::GetData(items) => Some(items.clone()),
        _ => None,
    });
    assert_eq!(
        asked,
        Some(vec![Inventory::WitnessBlock(header.block_hash())])
    );
    bad.send(NetworkMessage::Block(block)).unwrap();
    assert!(
        bad.is_closed_within(Duration::from_secs(20)),
        "the invalid block's sender must be disconnected"
    );
    assert!(
        banned_within(&remote, cairn_p2p),
        "the invalid block's sender must be banned"
    );
    assert_eq!(cairn.status()["kernel_tip"]["height"], 0);

    // `mempool` without NODE_BLOOM: disconnected, and welcome again.
    let mut asker = ScriptedPeer::connect("127.0.0.61", cairn_p2p);
    asker.handshake();
    asker.send(NetworkMessage::MemPool).unwrap();
    assert!(
        asker.is_closed_within(Duration::from_secs(20)),
        "a mempool request must disconnect"
    );
    let mut back = ScriptedPeer::connect("127.0.0.61", cairn_p2p);
    assert!(back.try_handshake().is_some(), "and not ban");
}

/// Issue 12: a message longer than its command can be is refused from its header, before cairn
/// reads or holds its payload: a `ping` that claims 3.9 MB is a disconnect at once, while a
/// `tx` of the same length would be read.
#[test]
fn a_message_longer_than_its_command_allows_is_refused_from_its_header() {
    let tmp = tempfile::tempdir().unwrap();
    let p2p_port = free_port();
    let _cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[format!("--p2p-addr=127.0.0.1:{p2p_port}")],
    );
    let cairn_p2p = SocketAddr::from(([127, 0, 0, 1], p2p_port));
    let header = |command: &[u8], len: u32| {
        let mut h = vec![0xfa, 0xbf, 0xb5, 0xda];
        let mut name = [0u8; 12];
        name[..command.len()].copy_from_slice(command);
        h.extend_from_slice(&name);
        h.extend_from_slice(&len.to_le_bytes());
        h.extend_from_slice(&[0u8; 4]);
        h
    };
    let mut ping = ScriptedPeer::connect("127.0.0.71", cairn_p2p);
    ping.handshake();
    ping.stream.write_all(&header(b"ping", 3_900_000)).unwrap();
    assert!(
        ping.is_closed_within(Duration::from_secs(10)),
        "an oversized ping header must disconnect at once"
    );
    // The same length for a tx is allowed: cairn waits for the payload (and closes nothing).
    let mut tx = ScriptedPeer::connect("127.0.0.72", cairn_p2p);
    tx.handshake();
    tx.stream.write_all(&header(b"tx", 3_900_000)).unwrap();
    assert!(
        !tx.is_closed_within(Duration::from_secs(2)),
        "a tx of 3.9 MB may come"
    );
}

/// An unsigned transaction's hex made version 3 (its first four bytes).
fn version_3(hex: &str) -> String {
    assert!(hex.starts_with("02000000"), "{hex}");
    format!("03000000{}", &hex[8..])
}

/// A dry run's verdict per transaction: `allowed` (absent when undecided) and the rule of its
/// reason, the first word with bitcoind's name for a missing input made cairn's.
type Verdicts = Vec<(Option<bool>, Option<String>)>;

fn rule_of(reason: &str) -> String {
    let word = reason.split([':', ' ', ',', '(']).next().unwrap_or(reason);
    match word {
        "bad-txns-inputs-missingorspent" => "missing-inputs".into(),
        w => w.to_string(),
    }
}

/// bitcoind's `testmempoolaccept` (its default `maxfeerate`, as ElectrumX calls it).
fn core_dry_run(node: &Bitcoind, hexes: &[&str]) -> Verdicts {
    let answer: serde_json::Value = serde_json::from_str(
        &node.rpc(&["testmempoolaccept", &serde_json::json!(hexes).to_string()]),
    )
    .unwrap();
    let items = answer.as_array().unwrap();
    items
        .iter()
        .map(|r| {
            let reason = r["package-error"]
                .as_str()
                .or(r["reject-reason"].as_str())
                .map(rule_of);
            (r["allowed"].as_bool(), reason)
        })
        .collect()
}

/// cairn's `blockchain.transaction.testmempoolaccept` over Electrum 1.7, in ElectrumX's shape.
fn cairn_dry_run(client: &mut common::lines::Lines, hexes: &[&str]) -> Verdicts {
    let answer = client.call(
        "blockchain.transaction.testmempoolaccept",
        serde_json::json!([hexes]),
    );
    let items = answer["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"));
    items
        .iter()
        .map(|r| {
            let reason = r["reason"].as_str().map(rule_of);
            (r["allowed"].as_bool(), reason)
        })
        .collect()
}

#[test]
fn testmempoolaccept_and_recent_over_electrum_agree_with_bitcoind() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, _mine, _cairn, electrum_port) = wallet_and_cairn(tmp.path(), &[]);
    let addr: SocketAddr = format!("127.0.0.1:{electrum_port}").parse().unwrap();
    let mut client = common::lines::Lines::connect(addr, "1.7");
    let coins: serde_json::Value = serde_json::from_str(&a.rpc(&["listunspent"])).unwrap();
    let coins = coins.as_array().unwrap();
    assert!(coins.len() >= 8, "{} mature coins", coins.len());
    let height: u32 = a.rpc(&["getblockcount"]).parse().unwrap();
    // A signed spend of `input` (txid, vout, amount, and the script of an output no chain or
    // mempool has) paying `amount - fee` to the wallet.
    let spend = |input: (String, u64, f64, Option<String>), fee: f64, locktime: u32| -> String {
        let (txid, vout, amount, script) = input;
        let to = a.rpc(&["getnewaddress", "", "bech32"]);
        let inputs = serde_json::json!([{"txid": txid, "vout": vout}]).to_string();
        let outputs = serde_json::json!({ to: format!("{:.8}", amount - fee) }).to_string();
        let raw = a.rpc(&[
            "createrawtransaction",
            &inputs,
            &outputs,
            &locktime.to_string(),
        ]);
        let prevtxs = match script {
            Some(script) => serde_json::json!([{"txid": txid, "vout": vout,
                "scriptPubKey": script, "amount": amount}]),
            None => serde_json::json!([]),
        };
        let signed: serde_json::Value = serde_json::from_str(&a.rpc(&[
            "signrawtransactionwithwallet",
            &raw,
            &prevtxs.to_string(),
        ]))
        .unwrap();
        assert_eq!(signed["complete"], true, "{signed}");
        signed["hex"].as_str().unwrap().to_string()
    };
    let coin = |i: usize| {
        let c = &coins[i];
        (
            c["txid"].as_str().unwrap().to_string(),
            c["vout"].as_u64().unwrap(),
            c["amount"].as_f64().unwrap(),
            None,
        )
    };
    // The first output of a signed transaction worth `amount`, as an input for its child.
    let first_output = |hex: &str, amount: f64| {
        let tx: bitcoin::Transaction =
            bitcoin::consensus::deserialize(&Vec::<u8>::from_hex(hex).unwrap()).unwrap();
        let script = tx.output[0].script_pubkey.to_hex_string();
        (tx.compute_txid().to_string(), 0, amount, Some(script))
    };
    let fine = spend(coin(0), 0.0001, 0);
    let free = spend(coin(1), 0.0, 0);
    let parent = spend(coin(2), 0.0001, 0);
    let child = spend(first_output(&parent, coin(2).2 - 0.0001), 0.0001, 0);
    let free_parent = spend(coin(3), 0.0, 0);
    let rich_child = spend(first_output(&free_parent, coin(3).2), 0.001, 0);
    let non_final = spend(coin(4), 0.0001, height + 100);
    let lavish = spend(coin(5), 0.5, 0);
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("a payment", vec![&fine]),
        ("no fee", vec![&free]),
        ("a parent and its child", vec![&parent, &child]),
        ("the child alone", vec![&child]),
        ("a child before its parent", vec![&child, &parent]),
        ("a duplicate", vec![&parent, &parent]),
        (
            "a free parent and a child paying for both",
            vec![&free_parent, &rich_child],
        ),
        ("a lock time 100 blocks ahead", vec![&non_final]),
        ("a fee over 0.10 BTC/kvB", vec![&lavish]),
        (
            "a fee over the guard before a payment",
            vec![&lavish, &fine],
        ),
    ];
    let check = |client: &mut common::lines::Lines, what: &str, hexes: &[&str]| {
        let core = core_dry_run(&a, hexes);
        let ours = cairn_dry_run(client, hexes);
        assert_eq!(ours, core, "{what}: cairn {ours:?}, bitcoind {core:?}");
    };
    for (what, hexes) in &cases {
        check(&mut client, what, hexes);
    }
    // Nothing was kept.
    assert_eq!(
        client.call("mempool.recent", serde_json::json!([]))["result"],
        serde_json::json!([])
    );

    // With a payment in both mempools (broadcast through cairn, relayed to bitcoind): it again,
    // a replacement alone, and the replacement in a package, which may not replace.
    let sent = client.call(
        "blockchain.transaction.broadcast",
        serde_json::json!([fine]),
    );
    let sent_txid = sent["result"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_string();
    let start = Instant::now();
    while !a.rpc(&["getrawmempool"]).contains(&sent_txid) {
        assert!(start.elapsed() < Duration::from_secs(60), "never relayed");
        std::thread::sleep(Duration::from_millis(200));
    }
    let replacement = spend(coin(0), 0.001, 0);
    let unrelated = spend(coin(6), 0.0001, 0);
    check(&mut client, "in the mempool already", &[&fine]);
    check(&mut client, "a replacement", &[&replacement]);
    check(
        &mut client,
        "a replacement in a package",
        &[&unrelated, &replacement],
    );

    // mempool.recent: the payment, with bitcoind's fee and size for it.
    let entry: serde_json::Value =
        serde_json::from_str(&a.rpc(&["getmempoolentry", &sent_txid])).unwrap();
    let fee = (entry["fees"]["base"].as_f64().unwrap() * 1e8).round() as u64;
    let recent = client.call("mempool.recent", serde_json::json!([]));
    assert_eq!(
        recent["result"],
        serde_json::json!([{"txid": sent_txid, "fee": fee, "vsize": entry["vsize"]}])
    );
    // Not a method before 1.7.
    let mut old = common::lines::Lines::connect(addr, "1.6");
    let refused = old.call("mempool.recent", serde_json::json!([]));
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
}

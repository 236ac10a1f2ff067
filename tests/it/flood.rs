//! Issue 12, part 2, all at once: while a real bitcoind syncs from cairn and cairn follows
//! another, scripted peers open 1,000 connections that never finish the handshake, send a
//! 50,000-hash locator, 2,000 headers that chain to nothing (eleven times) and a block the kernel
//! finds invalid. Each attacker gets what Core gives it (a disconnect, `getheaders`, a ban), the
//! honest bitcoind reaches the new tip, and cairn's resident memory stays within a bound.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::peer::{
    banned_within, connect_from, invalid_block_on, non_loopback_ip, ScriptedPeer,
};
use crate::common::{free_port, start_cairn, Bitcoind};
use bitcoin::hashes::Hash;
use bitcoin::p2p::message::NetworkMessage;
use bitcoin::p2p::message_blockdata::{GetHeadersMessage, Inventory};
use bitcoin::BlockHash;

const ADDR: &str = "bcrt1qs758ursh4q9z627kt3pp5yysm78ddny6txaqgw";

/// How much cairn's resident memory may grow under the flood, MiB.
const RSS_GROWTH_BOUND_MIB: u64 = 256;

fn unconnecting_headers(count: usize, seed: u8) -> Vec<bitcoin::block::Header> {
    common::peer::mined_headers(
        BlockHash::from_byte_array([seed; 32]),
        1_700_000_000,
        count,
        seed,
    )
}

#[test]
fn under_a_combined_flood_an_honest_bitcoind_keeps_syncing_from_cairn() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Bitcoind::start_core(&tmp.path().join("a"), &[]);
    a.rpc(&["generatetoaddress", "200", ADDR]);
    let p2p_port = free_port();
    let cairn = start_cairn(
        &tmp.path().join("cairn"),
        &[
            format!("--connect=127.0.0.1:{}", a.p2p_port),
            format!("--p2p-addr=127.0.0.1:{p2p_port}"),
        ],
    );
    let cairn_p2p = SocketAddr::from(([127, 0, 0, 1], p2p_port));
    cairn.wait_for(&a.rpc(&["getbestblockhash"]), "initial sync");
    // The honest peer: syncs only from cairn.
    let b = Bitcoind::start_core(
        &tmp.path().join("b"),
        &[
            format!("-connect=127.0.0.1:{p2p_port}"),
            "-v2transport=0".into(),
        ],
    );
    b.wait_for_height(200, Duration::from_secs(120));
    let rss_before = cairn.rss_kib();

    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(rss_before));
    let sampler = {
        let (done, peak, pid) = (done.clone(), peak.clone(), cairn.pid());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                let status =
                    std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                let rss = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
                peak.fetch_max(rss.unwrap_or(0), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    // The attackers that speak connect first: while the silent connections hold every inbound
    // place, a new peer is refused until one of them times out (20 s).
    let mut locator_peer = ScriptedPeer::connect("127.0.9.1", cairn_p2p);
    locator_peer.handshake();
    let mut unconnecting_peer = ScriptedPeer::connect("127.0.9.2", cairn_p2p);
    unconnecting_peer.handshake();
    let remote = non_loopback_ip();
    let mut bad = ScriptedPeer::connect(&remote, cairn_p2p);
    bad.handshake();

    // 1,000 connections that never send a byte, from 250 loopback addresses (local: never
    // banned, so the flood itself is what cairn must bear).
    let half_open = std::thread::spawn(move || {
        let mut held = Vec::new();
        for i in 0..1_000u32 {
            let ip = format!("127.0.{}.{}", 1 + i / 250, 1 + i % 250);
            held.push(connect_from(&ip, cairn_p2p));
        }
        held
    });

    // A 50,000-hash locator: a disconnect.
    let locator = std::thread::spawn(move || {
        let mut peer = locator_peer;
        let hashes = (0..50_000u32)
            .map(|i| BlockHash::from_byte_array([(i % 251) as u8 + 1; 32]))
            .collect();
        peer.send(NetworkMessage::GetHeaders(GetHeadersMessage {
            version: 70016,
            locator_hashes: hashes,
            stop_hash: BlockHash::all_zeros(),
        }))
        .unwrap();
        peer.is_closed_within(Duration::from_secs(30))
    });

    // 2,000 headers that chain to nothing: `getheaders` back, ten times; the eleventh disconnects.
    let unconnecting = std::thread::spawn(move || {
        let mut peer = unconnecting_peer;
        let getheaders =
            |m: &NetworkMessage| matches!(m, NetworkMessage::GetHeaders(_)).then_some(());
        peer.recv_until(getheaders)
            .expect("cairn's first getheaders");
        for n in 1..=10u8 {
            // cairn's getheaders answered (it keeps one unanswered at a time, as Core), then
            // headers that connect to nothing.
            peer.send(NetworkMessage::Headers(Vec::new())).unwrap();
            peer.send(NetworkMessage::Headers(unconnecting_headers(2_000, n)))
                .unwrap();
            assert!(
                peer.recv_until(getheaders).is_some(),
                "unconnecting headers message {n} was not answered with getheaders"
            );
        }
        peer.send(NetworkMessage::Headers(Vec::new())).unwrap();
        peer.send(NetworkMessage::Headers(unconnecting_headers(2_000, 11)))
            .unwrap();
        peer.is_closed_within(Duration::from_secs(30))
    });

    // Meanwhile bitcoind A mines; cairn follows it and B follows cairn.
    for _ in 0..20 {
        a.rpc(&["generatetoaddress", "1", ADDR]);
        std::thread::sleep(Duration::from_millis(100));
    }
    let new_tip = a.rpc(&["getbestblockhash"]);

    // An invalid block on the tip, from a non-local address: disconnected and banned.
    let tip_header: bitcoin::block::Header = {
        let hex = a.rpc(&["getblockheader", &new_tip, "false"]);
        bitcoin::consensus::encode::deserialize_hex(&hex).unwrap()
    };
    cairn.wait_for(&new_tip, "following bitcoind A under the flood");
    let block = invalid_block_on(&tip_header);
    bad.send(NetworkMessage::Headers(vec![block.header]))
        .unwrap();
    let asked = bad.recv_until(|m| match m {
        NetworkMessage::GetData(items) => Some(items.clone()),
        _ => None,
    });
    assert_eq!(
        asked,
        Some(vec![Inventory::WitnessBlock(block.block_hash())])
    );
    bad.send(NetworkMessage::Block(block)).unwrap();
    assert!(
        bad.is_closed_within(Duration::from_secs(20)),
        "the invalid block's sender must be disconnected"
    );

    assert!(
        locator.join().unwrap(),
        "the 50,000-hash locator must disconnect"
    );
    assert!(
        unconnecting.join().unwrap(),
        "the eleventh unconnecting headers message must disconnect"
    );
    let held = half_open.join().unwrap();
    // The honest peer reaches the tip while the half-open connections are still held.
    let start = Instant::now();
    while b.rpc(&["getbestblockhash"]) != new_tip {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "bitcoind B never got the new tip from cairn"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        cairn.status()["kernel_tip"]["hash"],
        new_tip.as_str(),
        "the invalid block must not be the tip"
    );
    done.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    let peak = peak.load(Ordering::SeqCst);
    eprintln!(
        "RSS: {} MiB before the flood, {} MiB at most during it ({} connections held)",
        rss_before >> 10,
        peak >> 10,
        held.len()
    );
    assert!(
        peak < rss_before + (RSS_GROWTH_BOUND_MIB << 10),
        "RSS grew from {rss_before} KiB to {peak} KiB"
    );

    // The silent connections gone, a new peer is let in again, and the invalid block's sender
    // is not: it is banned.
    drop(held);
    let start = Instant::now();
    while ScriptedPeer::connect("127.0.9.3", cairn_p2p)
        .try_handshake()
        .is_none()
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no place freed after the silent connections closed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        banned_within(&remote, cairn_p2p),
        "the invalid block's sender must be banned"
    );
}

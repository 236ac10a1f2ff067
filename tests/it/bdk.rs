//! BDK wallets against cairn: `bdk_esplora` (with `esplora-client`) restoring a generated
//! wallet from cairn's Esplora API finds exactly the transactions, confirmation heights and
//! balance that `bdk_electrum` finds from cairn's Electrum server on the same chain, and as many
//! transactions as the generator wrote for the wallet.

use crate::common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{free_port, start_cairn};
use bdk_electrum::{electrum_client, BdkElectrumClient};
use bdk_esplora::{esplora_client, EsploraExt};
use bdk_wallet::bitcoin::Network;
use bdk_wallet::chain::ChainPosition;
use bdk_wallet::{KeychainKind, Wallet};
use cairn::generate::{ChainGenerator, GenerateOptions};

/// What a restored wallet holds: each transaction with its confirmation height, the balance
/// (confirmed, trusted pending, untrusted pending, immature) and the last used receive index.
type Found = (BTreeSet<(String, Option<u32>)>, [u64; 4], Option<u32>);

fn restore(descriptors: &[String; 2], scan: impl FnOnce(&Wallet) -> bdk_wallet::Update) -> Found {
    let mut wallet = Wallet::create(descriptors[0].clone(), descriptors[1].clone())
        .network(Network::Regtest)
        .create_wallet_no_persist()
        .unwrap();
    let update = scan(&wallet);
    wallet.apply_update(update).unwrap();
    let txs = wallet
        .transactions()
        .map(|t| {
            let height = match t.chain_position {
                ChainPosition::Confirmed { anchor, .. } => Some(anchor.block_id.height),
                ChainPosition::Unconfirmed { .. } => None,
            };
            (t.tx_node.txid.to_string(), height)
        })
        .collect();
    let b = wallet.balance();
    let balance = [
        b.confirmed.to_sat(),
        b.trusted_pending.to_sat(),
        b.untrusted_pending.to_sat(),
        b.immature.to_sat(),
    ];
    (
        txs,
        balance,
        wallet.derivation_index(KeychainKind::External),
    )
}

#[test]
fn bdk_esplora_finds_what_bdk_electrum_finds() {
    let tmp = tempfile::tempdir().unwrap();
    let chain = tmp.path().join("chain");
    let opts = GenerateOptions {
        blocks: 150,
        txs_per_block: 8,
        seed: 7,
    };
    let summary = ChainGenerator::new(opts)
        .with_wallet(30)
        .unwrap()
        .write_to(&chain)
        .unwrap();
    assert!(
        summary.wallet_txs > 20,
        "the wallet must be used: {}",
        summary.wallet_txs
    );
    let dd = tmp.path().join("cairn");
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["--network", "regtest", "--datadir"])
        .arg(&dd)
        .args(["import", "--quiet", "--blocks-file"])
        .arg(chain.join("blocks.hex"))
        .output()
        .unwrap();
    common::succeeded(&out);
    let electrum_port = free_port();
    let http: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let _cairn = start_cairn(
        &dd,
        &[
            format!("--electrum-addr=127.0.0.1:{electrum_port}"),
            format!("--http-addr={http}"),
            format!("--metrics-addr={metrics}"),
            "--no-listen".into(),
        ],
    );
    let start = Instant::now();
    while common::http::get(http, "/blocks/tip/height").2 != opts.blocks.to_string() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the HTTP server never served the tip"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = std::fs::read_to_string(chain.join("wallet.txt")).unwrap();
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(String::from)
        .collect();
    let descriptors: [String; 2] = lines.try_into().unwrap();

    // A full scan over Electrum that stops `stop_gap` unused addresses past the last used one.
    let over_electrum_to = |stop_gap: usize| {
        restore(&descriptors, |wallet| {
            let client = BdkElectrumClient::new(
                electrum_client::Client::new(&format!("tcp://127.0.0.1:{electrum_port}")).unwrap(),
            );
            client
                .full_scan(wallet.start_full_scan().build(), stop_gap, 5, true)
                .unwrap()
                .into()
        })
    };
    let over_electrum = over_electrum_to(20);
    let over_esplora = restore(&descriptors, |wallet| {
        let client = esplora_client::Builder::new(&format!("http://{http}")).build_blocking();
        client
            .full_scan(wallet.start_full_scan().build(), 20, 4)
            .unwrap()
            .into()
    });
    assert_eq!(over_esplora, over_electrum);
    // A full scan of 1,000 addresses a keychain past the last used one, with cairn's default
    // cost limits (issue 25): an honest wallet is never made to wait.
    let wide = over_electrum_to(1_000);
    assert_eq!(wide, over_electrum);
    let throttled = common::probe::metric(metrics, "cairn_electrum_throttled_total");
    let scrape = common::probe::scrape(metrics);
    assert!(
        scrape.contains("cairn_electrum_throttled_total"),
        "no throttle counter in /metrics"
    );
    assert_eq!(throttled, 0.0, "BDK's full scans were throttled");
    // The same answers whether built on the connection's task from memory or in the pool: the
    // scans above had both.
    for server in ["electrum", "http"] {
        let key = |outcome| {
            format!("cairn_inline_answers_total{{outcome=\"{outcome}\",server=\"{server}\"}}")
        };
        let answered = common::probe::metric(metrics, &key("answered"));
        assert!(answered > 0.0, "no {server} answer built inline:\n{scrape}");
    }
    assert_eq!(
        over_esplora.0.len() as u64,
        summary.wallet_txs,
        "every wallet transaction the generator wrote"
    );
    assert!(
        over_esplora.0.iter().all(|(_, height)| height.is_some()),
        "all confirmed"
    );
    assert!(over_esplora.1[0] > 0, "a confirmed balance");
}

//! Wallet sync as BDK does it: a wallet restored from its descriptors (`wallet.txt` of
//! `cairn generate --wallet-addresses N`) and fully scanned with `bdk_electrum` against each
//! server in turn (A B A B ...), RUNS times, each run with a fresh wallet and connection. Prints
//! every sample, then medians and the ratio against the first server as a markdown table, and
//! writes every sample to a JSON file. Every server must find the same transactions and balance.
//!
//! Usage: cairn-wallet-sync --descriptors FILE --server NAME=tcp://HOST:PORT [--server ...]
//!        [--runs 3] [--stop-gap 50] [--batch-size 5] [--json FILE] [--command TEXT]
//! Stop gap and batch size default to BDK's own Electrum wallet example.

use std::time::Instant;

use bdk_electrum::{electrum_client, BdkElectrumClient};
use bdk_wallet::bitcoin::Network;
use bdk_wallet::{KeychainKind, Wallet};
use serde_json::json;

type Error = Box<dyn std::error::Error>;

struct Sample {
    server: String,
    run: usize,
    seconds: f64,
    txs: usize,
    balance_sat: u64,
    receive_index: Option<u32>,
    change_index: Option<u32>,
}

fn sync_once(receive: &str, change: &str, url: &str, stop_gap: usize, batch: usize) -> Result<(f64, Wallet), Error> {
    let mut wallet = Wallet::create(receive.to_string(), change.to_string())
        .network(Network::Regtest)
        .create_wallet_no_persist()?;
    let start = Instant::now();
    let client = BdkElectrumClient::new(electrum_client::Client::new(url)?);
    let request = wallet.start_full_scan().build();
    let update = client.full_scan(request, stop_gap, batch, true)?;
    wallet.apply_update(update)?;
    Ok((start.elapsed().as_secs_f64(), wallet))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() -> Result<(), Error> {
    let mut descriptors = None;
    let mut servers: Vec<(String, String)> = Vec::new();
    let (mut runs, mut stop_gap, mut batch) = (3usize, 50usize, 5usize);
    let mut json_out = None;
    let mut command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--descriptors" => descriptors = Some(value()?),
            "--server" => {
                let v = value()?;
                let (name, url) = v.split_once('=').ok_or("--server NAME=URL")?;
                servers.push((name.into(), url.into()));
            }
            "--runs" => runs = value()?.parse()?,
            "--stop-gap" => stop_gap = value()?.parse()?,
            "--batch-size" => batch = value()?.parse()?,
            "--json" => json_out = Some(value()?),
            "--command" => command = value()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let descriptors = descriptors.ok_or("--descriptors FILE is required")?;
    if servers.is_empty() {
        return Err("at least one --server NAME=URL".into());
    }
    let text = std::fs::read_to_string(&descriptors)?;
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let [receive, change] = lines[..] else {
        return Err(format!("{descriptors}: expected a receive and a change descriptor").into());
    };

    let mut samples = Vec::new();
    for run in 1..=runs {
        for (name, url) in &servers {
            let (seconds, wallet) = sync_once(receive, change, url, stop_gap, batch)?;
            let s = Sample {
                server: name.clone(),
                run,
                seconds,
                txs: wallet.transactions().count(),
                balance_sat: wallet.balance().total().to_sat(),
                receive_index: wallet.derivation_index(KeychainKind::External),
                change_index: wallet.derivation_index(KeychainKind::Internal),
            };
            eprintln!(
                "run {run} {name}: {seconds:.3} s, {} txs, balance {} sat, last used receive index {:?}",
                s.txs, s.balance_sat, s.receive_index
            );
            samples.push(s);
        }
    }
    // Every server must have found the same wallet.
    let first = &samples[0];
    let disagree: Vec<String> = samples
        .iter()
        .filter(|s| (s.txs, s.balance_sat, s.receive_index) != (first.txs, first.balance_sat, first.receive_index))
        .map(|s| format!("{} run {}: {} txs, {} sat", s.server, s.run, s.txs, s.balance_sat))
        .collect();
    let base = &servers[0].0;
    let med = |name: &str| median(samples.iter().filter(|s| &s.server == name).map(|s| s.seconds).collect());
    println!("BDK full scan (stop gap {stop_gap}, batch size {batch}) of a wallet with {} transactions, {} runs, medians", first.txs, runs);
    println!();
    let mut summary = Vec::new();
    for (other, _) in servers.iter().skip(1) {
        let (a, b) = (med(base), med(other));
        println!("| wallet | {base} | {other} | {other} / {base} |");
        println!("|---|---|---|---|");
        println!("| {} txs, receive index {:?} | {a:.3} s | {b:.3} s | {:.2}x |", first.txs, first.receive_index, b / a);
        summary.push(json!({"baseline": base, "other": other, "seconds": [a, b], "ratio": b / a}));
    }
    if disagree.is_empty() {
        println!("\nevery server found the same {} transactions and balance {} sat", first.txs, first.balance_sat);
    } else {
        println!("\nSERVERS DISAGREE: first {} found {} txs / {} sat; {}", first.server, first.txs, first.balance_sat, disagree.join("; "));
    }
    if let Some(path) = json_out {
        let doc = json!({
            "benchmark": "wallet-sync", "command": command, "descriptors_file": descriptors,
            "stop_gap": stop_gap, "batch_size": batch,
            "servers": servers.iter().map(|(n, u)| json!({"name": n, "url": u})).collect::<Vec<_>>(),
            "samples": samples.iter().map(|s| json!({"server": s.server, "run": s.run, "seconds": s.seconds,
                "txs": s.txs, "balance_sat": s.balance_sat, "receive_index": s.receive_index, "change_index": s.change_index})).collect::<Vec<_>>(),
            "summary": summary, "servers_agree": disagree.is_empty(), "disagreements": disagree,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&doc)?)?;
        eprintln!("samples written to {path}");
    }
    if !disagree.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}

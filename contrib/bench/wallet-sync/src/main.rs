//! One wallet sync as BDK does it, for `contrib/bench/wallet-sync.sh`: a wallet restored from its
//! descriptors (`wallet.txt` of `cairn generate --wallet-addresses N`) with a fresh connection and
//! fully scanned with `bdk_electrum` (a `tcp://` server) or `bdk_esplora` (an `http://` one, the
//! Esplora API; `--batch-size` is then its parallel requests). Prints the seconds the scan took on stdout (the script's
//! `compare` takes medians and ratios) and appends what the wallet found (transactions, balance,
//! last used receive index) to the `--found` file, so the script can check every server found
//! the same.
//!
//! Usage: cairn-wallet-sync --descriptors FILE --server tcp://HOST:PORT|http://HOST:PORT --found FILE
//!        [--stop-gap 50] [--batch-size 5]
//! Stop gap and batch size default to BDK's own Electrum wallet example.

use std::io::Write;
use std::time::Instant;

use bdk_electrum::{electrum_client, BdkElectrumClient};
use bdk_esplora::{esplora_client, EsploraExt};
use bdk_wallet::bitcoin::Network;
use bdk_wallet::{KeychainKind, Wallet};

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let (mut descriptors, mut server, mut found) = (None, None, None);
    let (mut stop_gap, mut batch) = (50usize, 5usize);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--descriptors" => descriptors = Some(value()?),
            "--server" => server = Some(value()?),
            "--found" => found = Some(value()?),
            "--stop-gap" => stop_gap = value()?.parse()?,
            "--batch-size" => batch = value()?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let (Some(descriptors), Some(server), Some(found)) = (descriptors, server, found) else {
        return Err("usage: cairn-wallet-sync --descriptors FILE --server URL --found FILE".into());
    };
    let text = std::fs::read_to_string(&descriptors)?;
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let [receive, change] = lines[..] else {
        return Err(format!("{descriptors}: expected a receive and a change descriptor").into());
    };

    let mut wallet = Wallet::create(receive.to_string(), change.to_string())
        .network(Network::Regtest)
        .create_wallet_no_persist()?;
    let start = Instant::now();
    if server.starts_with("http://") {
        let client = esplora_client::Builder::new(&server).build_blocking();
        let update = client.full_scan(wallet.start_full_scan().build(), stop_gap, batch)?;
        wallet.apply_update(update)?;
    } else {
        let client = BdkElectrumClient::new(electrum_client::Client::new(&server)?);
        let update = client.full_scan(wallet.start_full_scan().build(), stop_gap, batch, true)?;
        wallet.apply_update(update)?;
    }
    let seconds = start.elapsed().as_secs_f64();

    let txs = wallet.transactions().count();
    let balance = wallet.balance().total().to_sat();
    let receive_index = wallet.derivation_index(KeychainKind::External);
    eprintln!("{server}: {seconds:.3} s, {txs} txs, balance {balance} sat, last used receive index {receive_index:?}");
    let mut record = std::fs::OpenOptions::new().create(true).append(true).open(&found)?;
    writeln!(record, "{txs} {balance} {receive_index:?}")?;
    println!("{seconds:.3}");
    Ok(())
}

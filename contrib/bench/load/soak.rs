//! The Electrum soak of `contrib/bench/soak.sh`: many clients, each subscribed to the tip and to
//! many script hashes, held for a long time while a bitcoind mines and pays some of those
//! scripts. Reports the server's resident memory over time, notification latency (p50, p99) and
//! whether every notification owed arrived.
//!
//! Usage: soak --electrum HOST:PORT --pid PID --cli "bitcoin-cli ARGS..." [--clients 1000]
//!        [--subs 100] [--seconds 600] [--block-every 3] [--txs-per-sec 5] [--json FILE]
//!
//! Subscribed scripts are random P2WPKH scripts, one set per client. A payment goes from
//! bitcoind's wallet to one of them; its latency runs from `sendtoaddress` returning to the
//! subscriber's notification (so it includes bitcoind's relay delay to cairn). A block's runs
//! from `generatetoaddress` returning to each client's header notification.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bitcoin::hashes::{sha256, Hash};
use bitcoin::{Address, Network, ScriptBuf, WPubkeyHash};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Options {
    electrum: String,
    pid: u32,
    cli: Vec<String>,
    clients: usize,
    subs: usize,
    seconds: u64,
    block_every: f64,
    txs_per_sec: f64,
    json: Option<String>,
}

fn parse_args() -> Result<Options, Error> {
    let mut o = Options {
        electrum: String::new(),
        pid: 0,
        cli: Vec::new(),
        clients: 1000,
        subs: 100,
        seconds: 600,
        block_every: 3.0,
        txs_per_sec: 5.0,
        json: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--electrum" => o.electrum = value,
            "--pid" => o.pid = value.parse()?,
            "--cli" => o.cli = value.split_whitespace().map(String::from).collect(),
            "--clients" => o.clients = value.parse()?,
            "--subs" => o.subs = value.parse()?,
            "--seconds" => o.seconds = value.parse()?,
            "--block-every" => o.block_every = value.parse()?,
            "--txs-per-sec" => o.txs_per_sec = value.parse()?,
            "--json" => o.json = Some(value),
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if o.electrum.is_empty() || o.cli.is_empty() || o.pid == 0 {
        return Err("--electrum, --pid and --cli are required".into());
    }
    Ok(o)
}

/// What the clients saw and the driver did, with the instants they happened.
#[derive(Default)]
struct Log {
    /// Payment sent to a script hash: when.
    paid: Vec<(String, Instant)>,
    /// Block mined: height and when.
    mined: Vec<(u64, Instant)>,
    /// Script-hash notifications: which, when.
    status_notes: Vec<(String, Instant)>,
    /// Header notifications: client, height, when.
    header_notes: Vec<(usize, u64, Instant)>,
    /// Errors and disconnects, as text.
    errors: Vec<String>,
}

fn electrum_hash(script: &ScriptBuf) -> String {
    let mut h = sha256::Hash::hash(script.as_bytes()).to_byte_array();
    h.reverse();
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// One client: subscribes, then records every notification until the end.
/// How often each client pings the server.
const PING_EVERY: Duration = Duration::from_secs(60);

async fn client(
    id: usize,
    addr: String,
    hashes: Vec<String>,
    log: Arc<Mutex<Log>>,
    until: Instant,
) {
    let fail = |e: String| log.lock().unwrap().errors.push(format!("client {id}: {e}"));
    let stream = match TcpStream::connect(&addr).await {
        Ok(s) => s,
        Err(e) => return fail(format!("connect: {e}")),
    };
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut hello = vec![
        json!({"id": 0, "method": "server.version", "params": ["soak", "1.4"]}),
        json!({"id": 1, "method": "blockchain.headers.subscribe", "params": []}),
    ];
    hello.extend(hashes.iter().enumerate().map(
        |(i, h)| json!({"id": 2 + i, "method": "blockchain.scripthash.subscribe", "params": [h]}),
    ));
    let text = format!("{}\n", Value::Array(hello));
    if let Err(e) = write.write_all(text.as_bytes()).await {
        return fail(format!("write: {e}"));
    }
    // A wallet that holds a connection open pings it now and then: the server's idle timeout
    // counts from the last request (600 s by default), not from its notifications.
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    let ping_line = format!(
        "{}\n",
        json!({"id": "ping", "method": "server.ping", "params": []})
    );
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let read = tokio::select! {
            read = tokio::time::timeout(left, lines.next_line()) => read,
            _ = ping.tick() => {
                if let Err(e) = write.write_all(ping_line.as_bytes()).await {
                    return fail(format!("write: {e}"));
                }
                continue;
            }
        };
        let line = match read {
            Err(_) => return,
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => return fail("closed by the server".into()),
            Ok(Err(e)) => return fail(format!("read: {e}")),
        };
        let now = Instant::now();
        let Ok(value) = serde_json::from_str::<Value>(&line) else {
            return fail(format!("not JSON: {line:.80}"));
        };
        if let Some(answers) = value.as_array() {
            if let Some(err) = answers
                .iter()
                .find(|a| a.get("error").is_some_and(|e| !e.is_null()))
            {
                fail(format!("error answer: {err}"));
            }
            continue;
        }
        let params = &value["params"];
        match value["method"].as_str() {
            Some("blockchain.headers.subscribe") => {
                let height = params[0]["height"].as_u64().unwrap_or(0);
                log.lock().unwrap().header_notes.push((id, height, now));
            }
            Some("blockchain.scripthash.subscribe") => {
                let sh = params[0].as_str().unwrap_or_default().to_string();
                log.lock().unwrap().status_notes.push((sh, now));
            }
            _ if value.get("error").is_some_and(|e| !e.is_null()) => {
                fail(format!("error answer: {value}"))
            }
            _ => {}
        }
    }
}

fn cli(o: &Options, args: &[&str]) -> Result<String, Error> {
    let out = std::process::Command::new(&o.cli[0])
        .args(&o.cli[1..])
        .args(args)
        .output()?;
    if !out.status.success() {
        return Err(format!("{args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        >> 10
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Drives bitcoind (payments and blocks) until the end, sampling the server's RSS.
fn drive(
    o: &Options,
    scripts: &[ScriptBuf],
    log: &Mutex<Log>,
    until: Instant,
) -> Result<Vec<(u64, u64)>, Error> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let miner = cli(o, &["getnewaddress"])?;
    let start = Instant::now();
    let (mut next_block, mut next_tx, mut next_rss) = (start, start, start);
    let mut rss = Vec::new();
    while Instant::now() < until {
        let now = Instant::now();
        if now >= next_rss {
            rss.push((now.duration_since(start).as_secs(), rss_mib(o.pid)));
            next_rss += Duration::from_secs(5);
        }
        if now >= next_tx {
            let script = &scripts[rng.gen_range(0..scripts.len())];
            let address = Address::from_script(script, Network::Regtest)?.to_string();
            match cli(o, &["sendtoaddress", &address, "0.0001"]) {
                Ok(_) => log
                    .lock()
                    .unwrap()
                    .paid
                    .push((electrum_hash(script), Instant::now())),
                Err(e) => log.lock().unwrap().errors.push(format!("bitcoind: {e}")),
            }
            next_tx += Duration::from_secs_f64(1.0 / o.txs_per_sec);
        }
        if now >= next_block {
            cli(o, &["generatetoaddress", "1", &miner])?;
            let height: u64 = cli(o, &["getblockcount"])?.parse()?;
            log.lock().unwrap().mined.push((height, Instant::now()));
            next_block += Duration::from_secs_f64(o.block_every);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(rss)
}

/// Latencies of the payments' first notification and of every header notification, and what
/// was owed but never arrived.
fn tally(log: &Log, clients: usize, final_height: u64) -> Value {
    let mut notes: HashMap<&str, Vec<Instant>> = HashMap::new();
    for (sh, at) in &log.status_notes {
        notes.entry(sh).or_default().push(*at);
    }
    let mut payment_ms = Vec::new();
    let mut missed_payments = 0;
    for (sh, sent) in &log.paid {
        match notes
            .get(sh.as_str())
            .and_then(|v| v.iter().filter(|t| *t >= sent).min())
        {
            Some(at) => payment_ms.push(at.duration_since(*sent).as_secs_f64() * 1e3),
            None => missed_payments += 1,
        }
    }
    let mined: HashMap<u64, Instant> = log.mined.iter().copied().collect();
    let mut header_ms: Vec<f64> = log
        .header_notes
        .iter()
        .filter_map(|(_, h, at)| {
            mined
                .get(h)
                .map(|m| at.saturating_duration_since(*m).as_secs_f64() * 1e3)
        })
        .collect();
    let mut last_seen = vec![0u64; clients];
    for (c, h, _) in &log.header_notes {
        last_seen[*c] = last_seen[*c].max(*h);
    }
    let behind = last_seen.iter().filter(|h| **h < final_height).count();
    payment_ms.sort_by(f64::total_cmp);
    header_ms.sort_by(f64::total_cmp);
    json!({
        "payments": log.paid.len(),
        "payments_notified": log.paid.len() - missed_payments,
        "payment_ms": {"p50": percentile(&payment_ms, 0.5), "p99": percentile(&payment_ms, 0.99)},
        "blocks": log.mined.len(),
        "header_notifications": log.header_notes.len(),
        "header_ms": {"p50": percentile(&header_ms, 0.5), "p99": percentile(&header_ms, 0.99)},
        "clients_behind_the_tip_at_the_end": behind,
        "errors": log.errors.len(),
    })
}

fn main() -> Result<(), Error> {
    let o = parse_args()?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let scripts: Vec<ScriptBuf> = (0..o.clients * o.subs)
        .map(|_| ScriptBuf::new_p2wpkh(&WPubkeyHash::from_byte_array(rng.gen())))
        .collect();
    let log = Arc::new(Mutex::new(Log::default()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let connect_time = Duration::from_secs(o.clients as u64 / 50 + 10);
    let until = Instant::now() + connect_time + Duration::from_secs(o.seconds);
    let mut tasks = Vec::new();
    for (id, chunk) in scripts.chunks(o.subs).enumerate() {
        let hashes = chunk.iter().map(electrum_hash).collect();
        tasks.push(runtime.spawn(client(
            id,
            o.electrum.clone(),
            hashes,
            log.clone(),
            until + Duration::from_secs(15),
        )));
        if id % 50 == 49 {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    eprintln!(
        "{} clients with {} subscriptions each connecting; soak for {} s",
        o.clients, o.subs, o.seconds
    );
    std::thread::sleep(connect_time);
    let rss = drive(&o, &scripts, &log, until)?;
    let final_height: u64 = cli(&o, &["getblockcount"])?.parse()?;
    // Time for the last notifications.
    std::thread::sleep(Duration::from_secs(15));
    runtime.block_on(async {
        for t in tasks {
            let _ = t.await;
        }
    });
    let log = log.lock().unwrap();
    let mut report = tally(&log, o.clients, final_height);
    report["rss_mib_over_time"] = json!(rss);
    report["first_errors"] = json!(log.errors.iter().take(10).collect::<Vec<_>>());
    report["conditions"] = json!({"clients": o.clients, "subscriptions_each": o.subs, "seconds": o.seconds,
        "block_every_s": o.block_every, "payments_per_s": o.txs_per_sec});
    println!("{}", serde_json::to_string_pretty(&report)?);
    if let Some(path) = &o.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(())
}

//! The long-history benchmark of `contrib/bench/history.sh`: one script's whole history asked
//! of Electrum servers (cairn, ElectrumX) over TCP, the servers taking turns (A B A B ...).
//! Per server and run it measures the `blockchain.scripthash.subscribe` latency (the status of
//! the whole history), the `get_history` latency to the first byte and to the last, the bytes
//! per second one client receives, the same with N clients asking at once, and the server's
//! resident memory before and at its peak during the N-client phase (sampled from /proc every
//! 20 ms). Before timing, the answers of every server are parsed and compared (entry count,
//! every (txid, height), the status): a fast wrong answer cannot pass unseen.
//!
//! Usage: history_load --script HEX --server NAME=HOST:PORT[@PID] [--server ...]
//!        [--clients 10] [--runs 3] [--json FILE] [--command TEXT]
//! With `@PID` the server's memory is sampled. The first server is the baseline of the ratios.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bitcoin::hashes::{sha256, Hash};
use bitcoin::hex::FromHex;
use serde_json::{json, Value};

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Server {
    name: String,
    addr: String,
    pid: Option<u32>,
}

struct Options {
    script_hash: String,
    servers: Vec<Server>,
    clients: usize,
    runs: usize,
    json: Option<PathBuf>,
    command: String,
}

fn parse_args() -> Result<Options, Error> {
    let mut o = Options {
        script_hash: String::new(),
        servers: Vec::new(),
        clients: 10,
        runs: 3,
        json: None,
        command: String::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--script" => {
                let script = Vec::<u8>::from_hex(&value()?)?;
                let mut hash = sha256::Hash::hash(&script).to_byte_array();
                hash.reverse();
                o.script_hash = bitcoin::hex::DisplayHex::to_lower_hex_string(&hash[..]);
            }
            "--server" => {
                let text = value()?;
                let (name, rest) = text
                    .split_once('=')
                    .ok_or("--server NAME=HOST:PORT[@PID]")?;
                let (addr, pid) = match rest.split_once('@') {
                    Some((a, p)) => (a.to_string(), Some(p.parse()?)),
                    None => (rest.to_string(), None),
                };
                o.servers.push(Server {
                    name: name.into(),
                    addr,
                    pid,
                });
            }
            "--clients" => o.clients = value()?.parse()?,
            "--runs" => o.runs = value()?.parse()?,
            "--json" => o.json = Some(value()?.into()),
            "--command" => o.command = value()?,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    if o.script_hash.is_empty() || o.servers.is_empty() {
        return Err("give --script and at least one --server".into());
    }
    Ok(o)
}

/// A connection that negotiated protocol 1.4.
fn connect(addr: &str) -> Result<(TcpStream, BufReader<TcpStream>), Error> {
    let s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(600)))?;
    // A request is one write, sent at once (no Nagle delay waiting for the server's ACK).
    s.set_nodelay(true)?;
    let mut r = BufReader::with_capacity(1 << 20, s.try_clone()?);
    let mut w = s.try_clone()?;
    w.write_all(format!("{}\n", json!({"jsonrpc": "2.0", "id": 0, "method": "server.version", "params": ["history_load", "1.4"]})).as_bytes())?;
    let mut line = String::new();
    r.read_line(&mut line)?;
    Ok((s, r))
}

/// What one request's answer took: to the first byte, to the newline, and its bytes.
struct Timed {
    first: Duration,
    total: Duration,
    bytes: u64,
    body: Option<Vec<u8>>,
}

/// Sends `method(script hash)` and reads the answer line; keeps it when `keep`.
fn ask(
    s: &mut TcpStream,
    r: &mut BufReader<TcpStream>,
    method: &str,
    sh: &str,
    keep: bool,
) -> Result<Timed, Error> {
    let start = Instant::now();
    s.write_all(
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": [sh]})
        )
        .as_bytes(),
    )?;
    let mut first = None;
    let mut bytes = 0u64;
    let mut body = Vec::new();
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Err("the server closed the connection".into());
        }
        first.get_or_insert_with(|| start.elapsed());
        let (n, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if keep {
            body.extend_from_slice(&buf[..n]);
        }
        bytes += n as u64;
        r.consume(n);
        if done {
            break;
        }
    }
    Ok(Timed {
        first: first.unwrap_or_default(),
        total: start.elapsed(),
        bytes,
        body: keep.then_some(body),
    })
}

/// The resident memory of a process, KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The entries of a history answer, as (txid, height), and an error text if it is one.
fn entries(body: &[u8]) -> Result<Vec<(String, i64)>, Error> {
    let v: Value = serde_json::from_slice(body)?;
    let list = v["result"].as_array().ok_or_else(|| {
        format!(
            "not a history: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        )
    })?;
    Ok(list
        .iter()
        .map(|e| {
            (
                e["tx_hash"].as_str().unwrap_or("").to_string(),
                e["height"].as_i64().unwrap_or(-2),
            )
        })
        .collect())
}

/// One server's figures in one run.
#[derive(Default, Clone)]
struct Sample {
    subscribe_s: f64,
    subscribe_again_s: f64,
    first_byte_s: f64,
    history_s: f64,
    mb_per_s: f64,
    many_s: f64,
    many_mb_per_s: f64,
    rss_before_mib: f64,
    rss_peak_mib: f64,
    entries_per_s: f64,
    many_entries_per_s: f64,
}

fn run_once(server: &Server, sh: &str, clients: usize) -> Result<Sample, Error> {
    let mut sample = Sample::default();
    let (mut s, mut r) = connect(&server.addr)?;
    sample.subscribe_s = ask(&mut s, &mut r, "blockchain.scripthash.subscribe", sh, false)?
        .total
        .as_secs_f64();
    let (mut s2, mut r2) = connect(&server.addr)?;
    sample.subscribe_again_s = ask(
        &mut s2,
        &mut r2,
        "blockchain.scripthash.subscribe",
        sh,
        false,
    )?
    .total
    .as_secs_f64();
    let one = ask(
        &mut s,
        &mut r,
        "blockchain.scripthash.get_history",
        sh,
        false,
    )?;
    sample.first_byte_s = one.first.as_secs_f64();
    sample.history_s = one.total.as_secs_f64();
    sample.mb_per_s = one.bytes as f64 / 1e6 / one.total.as_secs_f64();
    drop((s, r, s2, r2));
    // N clients at once, the server's memory sampled meanwhile.
    let pid = server.pid;
    sample.rss_before_mib = pid.map(rss_kib).unwrap_or(0) as f64 / 1024.0;
    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                if let Some(pid) = pid {
                    peak.fetch_max(rss_kib(pid), Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let start = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let (addr, sh) = (server.addr.clone(), sh.to_string());
            std::thread::spawn(move || -> Result<u64, Error> {
                let (mut s, mut r) = connect(&addr)?;
                Ok(ask(
                    &mut s,
                    &mut r,
                    "blockchain.scripthash.get_history",
                    &sh,
                    false,
                )?
                .bytes)
            })
        })
        .collect();
    let mut bytes = 0;
    for h in handles {
        bytes += h.join().map_err(|_| "a client thread panicked")??;
    }
    sample.many_s = start.elapsed().as_secs_f64();
    sample.many_mb_per_s = bytes as f64 / 1e6 / sample.many_s;
    done.store(true, Ordering::SeqCst);
    let _ = sampler.join();
    sample.rss_peak_mib = peak.load(Ordering::SeqCst) as f64 / 1024.0;
    Ok(sample)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One server's answers to compare: its status, its history (txid, height), its raw answer.
type Answers = (String, Vec<(String, i64)>, Vec<u8>);

/// A row of the report: its label and how a sample gives its figure.
type Row = (&'static str, fn(&Sample) -> f64);

fn main() -> Result<(), Error> {
    let o = parse_args()?;
    // Untimed: every server's history and status, compared.
    let mut reference: Option<Answers> = None;
    let mut cold_subscribe = Vec::new();
    // Each server's memory before it was asked anything.
    let rss_at_start: Vec<f64> = o
        .servers
        .iter()
        .map(|s| s.pid.map(rss_kib).unwrap_or(0) as f64 / 1024.0)
        .collect();
    for server in &o.servers {
        let (mut s, mut r) = connect(&server.addr)?;
        // The status first, from nothing cached: the cold figure (one sample per server).
        let cold = ask(
            &mut s,
            &mut r,
            "blockchain.scripthash.subscribe",
            &o.script_hash,
            true,
        )?;
        cold_subscribe.push(cold.total.as_secs_f64());
        let status: Value = serde_json::from_slice(&cold.body.unwrap_or_default())?;
        let status = serde_json::to_vec(&status["result"])?;
        let history = entries(
            &ask(
                &mut s,
                &mut r,
                "blockchain.scripthash.get_history",
                &o.script_hash,
                true,
            )?
            .body
            .unwrap_or_default(),
        )?;
        eprintln!(
            "{}: {} history entries, status {}, first subscribe {:.3}s",
            server.name,
            history.len(),
            String::from_utf8_lossy(&status),
            cold.total.as_secs_f64()
        );
        match &reference {
            None => reference = Some((server.name.clone(), history, status)),
            Some((name, h, st)) => {
                if *h != history || *st != status {
                    return Err(format!(
                        "{} and {name} disagree on the history or its status",
                        server.name
                    )
                    .into());
                }
            }
        }
    }
    let entries_count = reference.as_ref().map(|r| r.1.len()).unwrap_or(0);
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); o.servers.len()];
    for run in 1..=o.runs {
        for (i, server) in o.servers.iter().enumerate() {
            let s = run_once(server, &o.script_hash, o.clients)?;
            eprintln!(
                "run {run} {}: subscribe {:.3}s (again {:.3}s), get_history first byte {:.3}s, all {:.3}s ({:.1} MB/s); {} clients {:.2}s ({:.1} MB/s); RSS {:.0} -> {:.0} MiB",
                server.name, s.subscribe_s, s.subscribe_again_s, s.first_byte_s, s.history_s, s.mb_per_s, o.clients, s.many_s, s.many_mb_per_s, s.rss_before_mib, s.rss_peak_mib
            );
            samples[i].push(s);
        }
    }
    let n = entries_count as f64;
    for per_server in samples.iter_mut() {
        for x in per_server.iter_mut() {
            x.entries_per_s = n / x.history_s.max(1e-9);
            x.many_entries_per_s = n * o.clients as f64 / x.many_s.max(1e-9);
        }
    }
    let med = |i: usize, f: fn(&Sample) -> f64| median(samples[i].iter().map(f).collect());
    let rows: [Row; 11] = [
        ("subscribe, status cached (s)", |s| s.subscribe_s),
        ("subscribe again, new connection (s)", |s| {
            s.subscribe_again_s
        }),
        ("get_history, first byte (s)", |s| s.first_byte_s),
        ("get_history, whole answer (s)", |s| s.history_s),
        ("get_history, one client (entries/s)", |s| s.entries_per_s),
        (
            "get_history, one client (MB/s; ElectrumX's JSON has spaces)",
            |s| s.mb_per_s,
        ),
        ("get_history, clients at once, all answered (s)", |s| {
            s.many_s
        }),
        (
            "get_history, clients at once (entries/s, all together)",
            |s| s.many_entries_per_s,
        ),
        ("get_history, clients at once (MB/s, all together)", |s| {
            s.many_mb_per_s
        }),
        ("server RSS before (MiB)", |s| s.rss_before_mib),
        ("server RSS peak with the clients (MiB)", |s| s.rss_peak_mib),
    ];
    println!(
        "history of {entries_count} entries, {} clients at once, {} runs (medians)\n",
        o.clients, o.runs
    );
    println!(
        "first subscribe, nothing cached (one sample each): {}\n",
        o.servers
            .iter()
            .zip(&cold_subscribe)
            .map(|(s, t)| format!("{} {t:.3} s", s.name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "RSS before any request: {}\n",
        o.servers
            .iter()
            .zip(&rss_at_start)
            .map(|(s, m)| format!("{} {m:.0} MiB", s.name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let names: Vec<&str> = o.servers.iter().map(|s| s.name.as_str()).collect();
    println!(
        "| measure | {} | {} |",
        names.join(" | "),
        names
            .iter()
            .skip(1)
            .map(|n| format!("{n} / {}", names[0]))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!(
        "|---|{}{}",
        "---|".repeat(names.len()),
        "---|".repeat(names.len().saturating_sub(1))
    );
    for (label, f) in rows {
        let values: Vec<f64> = (0..names.len()).map(|i| med(i, f)).collect();
        let ratios: Vec<String> = values
            .iter()
            .skip(1)
            .map(|v| format!("{:.3}x", v / values[0].max(1e-9)))
            .collect();
        println!(
            "| {label} | {} | {} |",
            values
                .iter()
                .map(|v| format!("{v:.4}"))
                .collect::<Vec<_>>()
                .join(" | "),
            ratios.join(" | ")
        );
    }
    if let Some(path) = &o.json {
        let record = json!({
            "benchmark": "history",
            "command": o.command,
            "entries": entries_count,
            "first_subscribe_s": cold_subscribe,
            "rss_at_start_mib": rss_at_start,
            "clients": o.clients,
            "servers": o.servers.iter().enumerate().map(|(i, s)| json!({
                "name": s.name,
                "samples": samples[i].iter().map(|x| json!({
                    "subscribe_s": x.subscribe_s, "subscribe_again_s": x.subscribe_again_s,
                    "first_byte_s": x.first_byte_s, "history_s": x.history_s, "mb_per_s": x.mb_per_s,
                    "many_s": x.many_s, "many_mb_per_s": x.many_mb_per_s,
                    "rss_before_mib": x.rss_before_mib, "rss_peak_mib": x.rss_peak_mib,
                    "entries_per_s": x.entries_per_s, "many_entries_per_s": x.many_entries_per_s,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&record)?)?;
        println!("\nsamples written to {}", path.display());
    }
    let _ = std::io::stdout().flush();
    Ok(())
}

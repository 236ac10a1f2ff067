//! The query load generator of `contrib/bench/queries.sh`: replays one request mix against
//! Electrum servers (cairn, ElectrumX, any other) with 1, 10, 100... concurrent clients, the
//! servers taking turns (A B A B ...), and reports p50/p99 latency and throughput of each and
//! their ratios as a markdown table on stdout and every sample in a JSON file.
//!
//! The mix comes from the chain both servers hold (`blocks.hex` of `cairn generate`): script
//! hashes bucketed by history length (small, medium, huge), transactions with their heights and
//! header ranges, picked with a fixed seed so every server gets the same requests. Before timing,
//! one untimed pass asks every server every request and compares the answers (lists of unspent
//! outputs sorted first): a mismatch is reported, so a fast wrong answer cannot pass unseen.
//!
//! Usage: electrum_load --chain DIR --server NAME=ws://HOST:PORT [--server NAME=tcp://HOST:PORT]
//!        [--clients 1,10,100] [--runs 3] [--requests 2000] [--seed 1] [--json FILE]
//!        [--command TEXT] [--only KIND]
//! `--only KIND` (e.g. `--only "get_history huge"`) replays only that kind of request, for looking
//! at one path; `--only KIND,KIND...` those kinds, in their shares of the mix. The first server
//! is the baseline: ratios are (other / first) for latency and throughput.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bitcoin::hashes::{sha256, Hash};
use bitcoin::hex::{DisplayHex, FromHex};
use bitcoin::{Block, OutPoint, Txid};
use futures_util::{SinkExt, StreamExt};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_tungstenite::tungstenite::Message;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The kinds of request in the mix, with their share in percent.
const MIX: &[(&str, u32)] = &[
    ("get_history small", 25),
    ("get_history medium", 10),
    ("get_history huge", 2),
    ("listunspent", 12),
    ("get_balance", 12),
    ("transaction.get", 20),
    ("get_merkle", 12),
    ("block.headers", 7),
];

struct Options {
    chain: PathBuf,
    servers: Vec<(String, String)>,
    clients: Vec<usize>,
    runs: usize,
    requests: usize,
    seed: u64,
    json: Option<PathBuf>,
    command: String,
    only: Option<String>,
}

fn parse_args() -> Result<Options, Error> {
    let mut o = Options {
        chain: PathBuf::new(),
        servers: Vec::new(),
        clients: vec![1, 10, 100],
        runs: 3,
        requests: 2000,
        seed: 1,
        json: None,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--chain" => o.chain = value()?.into(),
            "--server" => {
                let v = value()?;
                let (name, url) = v.split_once('=').ok_or("--server NAME=URL")?;
                o.servers.push((name.to_string(), url.to_string()));
            }
            "--clients" => {
                o.clients = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--runs" => o.runs = value()?.parse()?,
            "--requests" => o.requests = value()?.parse()?,
            "--seed" => o.seed = value()?.parse()?,
            "--json" => o.json = Some(value()?.into()),
            "--command" => o.command = value()?,
            "--only" => o.only = Some(value()?),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if o.servers.is_empty() || o.chain.as_os_str().is_empty() {
        return Err("usage: electrum_load --chain DIR --server NAME=URL [--server ...]".into());
    }
    Ok(o)
}

/// What the mix is drawn from.
struct ChainFacts {
    blocks: u32,
    txs: usize,
    /// (electrum script hash hex, history entries), one per script.
    scripts: Vec<(String, u32)>,
    /// Every transaction and its height.
    tx_heights: Vec<(Txid, u32)>,
}

fn electrum_hash(script: &[u8]) -> String {
    let mut h = sha256::Hash::hash(script).to_byte_array();
    h.reverse();
    h.to_lower_hex_string()
}

fn read_chain(dir: &std::path::Path) -> Result<ChainFacts, Error> {
    let file = std::fs::File::open(dir.join("blocks.hex"))?;
    let mut index: HashMap<[u8; 32], u32> = HashMap::new();
    let mut scripts: Vec<(Vec<u8>, u32)> = Vec::new();
    let mut outputs: HashMap<OutPoint, u32> = HashMap::new();
    let mut tx_heights = Vec::new();
    let mut height = 0u32;
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        height += 1;
        let block: Block = bitcoin::consensus::deserialize(&Vec::<u8>::from_hex(line.trim())?)?;
        for tx in &block.txdata {
            let txid = tx.compute_txid();
            tx_heights.push((txid, height));
            let mut touched: Vec<u32> = Vec::new();
            if !tx.is_coinbase() {
                for input in &tx.input {
                    if let Some(s) = outputs.remove(&input.previous_output) {
                        touched.push(s);
                    }
                }
            }
            for (vout, out) in tx.output.iter().enumerate() {
                if out.script_pubkey.is_op_return() {
                    continue;
                }
                let key = sha256::Hash::hash(out.script_pubkey.as_bytes()).to_byte_array();
                let next = scripts.len() as u32;
                let s = *index.entry(key).or_insert(next);
                if s == next {
                    scripts.push((out.script_pubkey.to_bytes(), 0));
                }
                touched.push(s);
                outputs.insert(OutPoint::new(txid, vout as u32), s);
            }
            touched.sort_unstable();
            touched.dedup();
            for s in touched {
                scripts[s as usize].1 += 1;
            }
        }
    }
    Ok(ChainFacts {
        blocks: height,
        txs: tx_heights.len(),
        scripts: scripts
            .into_iter()
            .map(|(s, n)| (electrum_hash(&s), n))
            .collect(),
        tx_heights,
    })
}

/// One request of the mix.
#[derive(Clone)]
struct Request {
    kind: &'static str,
    method: &'static str,
    params: Value,
}

/// Scripts with 1 to 5 entries, 20 to 1,000, and the largest (over 1,000 when there are any).
fn buckets(facts: &ChainFacts) -> [Vec<usize>; 3] {
    let small: Vec<usize> = (0..facts.scripts.len())
        .filter(|&i| (1..=5).contains(&facts.scripts[i].1))
        .collect();
    let medium: Vec<usize> = (0..facts.scripts.len())
        .filter(|&i| (20..=1000).contains(&facts.scripts[i].1))
        .collect();
    let mut by_size: Vec<usize> = (0..facts.scripts.len()).collect();
    by_size.sort_by_key(|&i| std::cmp::Reverse(facts.scripts[i].1));
    let mut huge: Vec<usize> = by_size
        .iter()
        .copied()
        .take(5)
        .filter(|&i| facts.scripts[i].1 > 1000)
        .collect();
    if huge.is_empty() {
        huge = by_size.into_iter().take(1).collect();
    }
    [small, medium, huge]
}

fn build_mix(
    facts: &ChainFacts,
    n: usize,
    seed: u64,
    only: Option<&str>,
) -> Result<Vec<Request>, Error> {
    let [small, medium, huge] = buckets(facts);
    if small.is_empty() || medium.is_empty() {
        return Err("the chain has no small or no medium histories".into());
    }
    let mix: Vec<(&'static str, u32)> = match only {
        Some(kinds) => kinds
            .split(',')
            .map(|k| {
                MIX.iter()
                    .find(|m| m.0 == k)
                    .copied()
                    .ok_or_else(|| format!("no request kind {k:?}"))
            })
            .collect::<Result<_, _>>()?,
        None => MIX.to_vec(),
    };
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let total: u32 = mix.iter().map(|m| m.1).sum();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut p = rng.gen_range(0..total);
        let kind = mix
            .iter()
            .find(|m| {
                if p < m.1 {
                    true
                } else {
                    p -= m.1;
                    false
                }
            })
            .map(|m| m.0)
            .unwrap_or(mix[0].0);
        let pick = |rng: &mut rand_chacha::ChaCha20Rng, v: &[usize]| {
            facts.scripts[v[rng.gen_range(0..v.len())]].0.clone()
        };
        let (method, params) = match kind {
            "get_history small" => (
                "blockchain.scripthash.get_history",
                json!([pick(&mut rng, &small)]),
            ),
            "get_history medium" => (
                "blockchain.scripthash.get_history",
                json!([pick(&mut rng, &medium)]),
            ),
            "get_history huge" => (
                "blockchain.scripthash.get_history",
                json!([pick(&mut rng, &huge)]),
            ),
            "listunspent" | "get_balance" => {
                let sh = if rng.gen_bool(0.5) {
                    pick(&mut rng, &small)
                } else {
                    pick(&mut rng, &medium)
                };
                let method = if kind == "listunspent" {
                    "blockchain.scripthash.listunspent"
                } else {
                    "blockchain.scripthash.get_balance"
                };
                (method, json!([sh]))
            }
            "transaction.get" => {
                let (txid, _) = facts.tx_heights[rng.gen_range(0..facts.tx_heights.len())];
                ("blockchain.transaction.get", json!([txid.to_string()]))
            }
            "get_merkle" => {
                let (txid, height) = facts.tx_heights[rng.gen_range(0..facts.tx_heights.len())];
                (
                    "blockchain.transaction.get_merkle",
                    json!([txid.to_string(), height]),
                )
            }
            _ => {
                let start = rng.gen_range(0..=facts.blocks.saturating_sub(100));
                ("blockchain.block.headers", json!([start, 100]))
            }
        };
        out.push(Request {
            kind,
            method,
            params,
        });
    }
    Ok(out)
}

/// One client connection, over TCP (newline-delimited) or WebSocket.
enum Conn {
    Tcp(BufReader<tokio::net::TcpStream>, String),
    Ws(
        Box<
            tokio_tungstenite::WebSocketStream<
                tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
            >,
        >,
    ),
}

impl Conn {
    async fn open(url: &str) -> Result<Conn, Error> {
        if let Some(addr) = url.strip_prefix("tcp://") {
            let s = tokio::net::TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            Ok(Conn::Tcp(
                BufReader::with_capacity(1 << 16, s),
                String::new(),
            ))
        } else {
            let (ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true).await?;
            Ok(Conn::Ws(Box::new(ws)))
        }
    }

    /// Sends one request and returns when its answer was received (before it is parsed: the
    /// client's parsing is not the server's latency) and, with `keep`, the answer itself; without,
    /// only whether it was an error (the text is then scanned, not built into a tree).
    async fn call(
        &mut self,
        id: usize,
        method: &str,
        params: &Value,
        keep: bool,
    ) -> Result<(Instant, Answer), Error> {
        let text =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        match self {
            Conn::Tcp(s, _) => {
                s.get_mut()
                    .write_all(format!("{text}\n").as_bytes())
                    .await?
            }
            Conn::Ws(ws) => ws.send(Message::text(text)).await?,
        }
        loop {
            let (received, answer) = match self {
                Conn::Tcp(s, line) => {
                    line.clear();
                    if s.read_line(line).await? == 0 {
                        return Err("connection closed".into());
                    }
                    (Instant::now(), Answer::parse(line, keep)?)
                }
                Conn::Ws(ws) => match ws.next().await {
                    Some(Ok(Message::Text(t))) => {
                        (Instant::now(), Answer::parse(t.as_str(), keep)?)
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Err(e.into()),
                    None => return Err("connection closed".into()),
                },
            };
            if answer.id == Some(id as u64) {
                return Ok((received, answer));
            }
        }
    }
}

/// An answer: its id, and its result (`None` for an error; `Null` unless kept).
struct Answer {
    id: Option<u64>,
    result: Option<Value>,
}

impl Answer {
    fn parse(text: &str, keep: bool) -> Result<Answer, Error> {
        #[derive(serde::Deserialize)]
        struct Head {
            id: Option<Value>,
            error: Option<serde::de::IgnoredAny>,
        }
        if keep {
            let v: Value = serde_json::from_str(text)?;
            let id = v.get("id").and_then(Value::as_u64);
            let result = v
                .get("result")
                .filter(|_| v.get("error").is_none_or(Value::is_null))
                .cloned();
            return Ok(Answer { id, result });
        }
        let head: Head = serde_json::from_str(text)?;
        let id = head.id.as_ref().and_then(Value::as_u64);
        Ok(Answer {
            id,
            result: head.error.is_none().then_some(Value::Null),
        })
    }
}

/// What one request got: its latency and its answer's result (or `None` for an error).
struct Outcome {
    seconds: f64,
    result: Option<Value>,
}

/// Runs `requests` over `clients` connections (request i on connection i mod clients), each
/// connection sending its next request when the last is answered. Returns the outcomes in
/// request order and the wall-clock time of the whole pass.
async fn pass(
    url: &str,
    requests: Arc<Vec<Request>>,
    clients: usize,
    keep: bool,
) -> Result<(Vec<Outcome>, f64), Error> {
    let mut conns = Vec::with_capacity(clients);
    for _ in 0..clients {
        let mut c = Conn::open(url).await?;
        c.call(0, "server.version", &json!(["cairn-load", "1.4"]), false)
            .await?;
        conns.push(c);
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (k, mut conn) in conns.into_iter().enumerate() {
        let requests = requests.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for i in (k..requests.len()).step_by(clients) {
                let r = &requests[i];
                let t = Instant::now();
                let (received, answer) = conn.call(i + 1, r.method, &r.params, keep).await?;
                let seconds = received.duration_since(t).as_secs_f64();
                out.push((
                    i,
                    Outcome {
                        seconds,
                        result: answer.result,
                    },
                ));
            }
            Ok::<_, Error>(out)
        }));
    }
    let mut all: Vec<(usize, Outcome)> = Vec::with_capacity(requests.len());
    for t in tasks {
        all.extend(t.await??);
    }
    let wall = start.elapsed().as_secs_f64();
    all.sort_by_key(|(i, _)| *i);
    Ok((all.into_iter().map(|(_, o)| o).collect(), wall))
}

/// Listunspent answers in a fixed order; everything else as sent.
fn canonical(kind: &str, v: &Value) -> Value {
    let mut v = v.clone();
    if kind == "listunspent" {
        if let Some(a) = v.as_array_mut() {
            a.sort_by_key(|e| {
                (
                    e["height"].as_i64(),
                    e["tx_hash"].as_str().map(String::from),
                    e["tx_pos"].as_u64(),
                )
            });
        }
    }
    v
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
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

fn machine() -> Value {
    let mem_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemTotal"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
    });
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| {
        c.lines()
            .find(|l| l.starts_with("model name"))
            .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
    });
    json!({
        "nproc": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "mem_gib": mem_kib.map(|k| (k as f64 / 1048576.0 * 10.0).round() / 10.0),
        "cpu": cpu,
    })
}

fn commit() -> String {
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let o = parse_args()?;
    let facts = read_chain(&o.chain)?;
    let [small, medium, huge] = buckets(&facts);
    let sizes = |v: &[usize]| {
        let n: Vec<u32> = v.iter().map(|&i| facts.scripts[i].1).collect();
        json!({"scripts": v.len(), "min_entries": n.iter().min(), "max_entries": n.iter().max()})
    };
    let bucket_info =
        json!({"small": sizes(&small), "medium": sizes(&medium), "huge": sizes(&huge)});
    eprintln!(
        "chain: {} blocks, {} txs, {} scripts; buckets {bucket_info}",
        facts.blocks,
        facts.txs,
        facts.scripts.len()
    );
    let requests = Arc::new(build_mix(&facts, o.requests, o.seed, o.only.as_deref())?);

    // The untimed pass: every server answers every request; the answers must agree.
    let mut answers: Vec<Vec<Outcome>> = Vec::new();
    let mut check_errors = Vec::new();
    for (name, url) in &o.servers {
        let (outcomes, wall) = pass(url, requests.clone(), 10, true).await?;
        let errors = outcomes.iter().filter(|x| x.result.is_none()).count();
        eprintln!(
            "check pass {name}: {} requests in {wall:.2} s, {errors} errors",
            outcomes.len()
        );
        check_errors.push(json!({"server": name, "errors": errors}));
        answers.push(outcomes);
    }
    let mut mismatches = Vec::new();
    for i in 0..requests.len() {
        let kind = requests[i].kind;
        let first = answers[0][i].result.as_ref().map(|v| canonical(kind, v));
        for (s, a) in answers.iter().enumerate().skip(1) {
            let other = a[i].result.as_ref().map(|v| canonical(kind, v));
            if other != first {
                if mismatches.len() < 5 {
                    eprintln!(
                        "MISMATCH {} {} {}: {} says {}, {} says {}",
                        i,
                        requests[i].method,
                        requests[i].params,
                        o.servers[0].0,
                        first
                            .as_ref()
                            .map(|v| v.to_string())
                            .unwrap_or("an error".into())
                            .chars()
                            .take(300)
                            .collect::<String>(),
                        o.servers[s].0,
                        other
                            .as_ref()
                            .map(|v| v.to_string())
                            .unwrap_or("an error".into())
                            .chars()
                            .take(300)
                            .collect::<String>()
                    );
                }
                mismatches.push(json!({"request": i, "server": o.servers[s].0}));
            }
        }
    }
    eprintln!(
        "answers compared: {} requests, {} mismatches",
        requests.len(),
        mismatches.len()
    );
    drop(answers);

    // Timed runs, the servers interleaved.
    let mut samples = Vec::new();
    for &clients in &o.clients {
        for run in 1..=o.runs {
            for (name, url) in &o.servers {
                let (outcomes, wall) = pass(url, requests.clone(), clients, false).await?;
                let mut lat: Vec<f64> = outcomes.iter().map(|x| x.seconds).collect();
                lat.sort_by(f64::total_cmp);
                let errors = outcomes.iter().filter(|x| x.result.is_none()).count();
                let mut per_kind = serde_json::Map::new();
                for (kind, _) in MIX {
                    let mut l: Vec<f64> = outcomes
                        .iter()
                        .zip(requests.iter())
                        .filter(|(_, r)| r.kind == *kind)
                        .map(|(x, _)| x.seconds)
                        .collect();
                    l.sort_by(f64::total_cmp);
                    per_kind.insert(kind.to_string(), json!({"n": l.len(), "p50_ms": percentile(&l, 0.5) * 1e3, "p99_ms": percentile(&l, 0.99) * 1e3}));
                }
                let sample = json!({
                    "server": name, "clients": clients, "run": run, "wall_s": wall,
                    "throughput_rps": outcomes.len() as f64 / wall,
                    "p50_ms": percentile(&lat, 0.5) * 1e3, "p99_ms": percentile(&lat, 0.99) * 1e3,
                    "errors": errors, "per_kind": per_kind,
                });
                eprintln!("clients {clients} run {run} {name}: {:.0} req/s, p50 {:.3} ms, p99 {:.3} ms, {errors} errors",
                    sample["throughput_rps"].as_f64().unwrap_or(0.0), sample["p50_ms"].as_f64().unwrap_or(0.0), sample["p99_ms"].as_f64().unwrap_or(0.0));
                samples.push(sample);
            }
        }
    }

    // Medians per (server, clients) and the ratios against the first server.
    let med = |server: &str, clients: usize, field: &str| {
        let v: Vec<f64> = samples
            .iter()
            .filter(|s| s["server"] == server && s["clients"] == clients)
            .filter_map(|s| s[field].as_f64())
            .collect();
        median(&v)
    };
    let base = &o.servers[0].0;
    let mut summary = Vec::new();
    println!(
        "{} requests per run ({}), {} runs, medians; chain {} blocks, {} txs",
        o.requests,
        MIX.iter()
            .map(|(k, p)| format!("{k} {p}%"))
            .collect::<Vec<_>>()
            .join(", "),
        o.runs,
        facts.blocks,
        facts.txs
    );
    println!();
    for (other, _) in o.servers.iter().skip(1) {
        println!("| clients | p50 {base} | p50 {other} | ratio | p99 {base} | p99 {other} | ratio | req/s {base} | req/s {other} | ratio |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for &c in &o.clients {
            let (a50, b50) = (med(base, c, "p50_ms"), med(other, c, "p50_ms"));
            let (a99, b99) = (med(base, c, "p99_ms"), med(other, c, "p99_ms"));
            let (at, bt) = (
                med(base, c, "throughput_rps"),
                med(other, c, "throughput_rps"),
            );
            println!("| {c} | {a50:.3} ms | {b50:.3} ms | {:.2}x | {a99:.2} ms | {b99:.2} ms | {:.2}x | {at:.0} | {bt:.0} | {:.2}x |", b50 / a50, b99 / a99, bt / at);
            summary.push(json!({"clients": c, "baseline": base, "other": other,
                "p50_ms": [a50, b50], "p99_ms": [a99, b99], "throughput_rps": [at, bt],
                "p50_ratio": b50 / a50, "p99_ratio": b99 / a99, "throughput_ratio": bt / at}));
        }
        println!();
        // Per kind at each client count: where the time goes.
        for &c in &o.clients {
            println!(
                "| request ({c} client{}) | p50 {base} | p50 {other} | ratio | p99 {base} | p99 {other} | ratio |",
                if c == 1 { "" } else { "s" }
            );
            println!("|---|---|---|---|---|---|---|");
            for (kind, _) in MIX {
                let pk = |server: &str, field: &str| {
                    let v: Vec<f64> = samples
                        .iter()
                        .filter(|s| s["server"] == server && s["clients"] == c)
                        .filter_map(|s| s["per_kind"][*kind][field].as_f64())
                        .collect();
                    median(&v)
                };
                let (a, b) = (pk(base, "p50_ms"), pk(other, "p50_ms"));
                let (a99, b99) = (pk(base, "p99_ms"), pk(other, "p99_ms"));
                println!(
                    "| {kind} | {a:.3} ms | {b:.3} ms | {:.2}x | {a99:.2} ms | {b99:.2} ms | {:.2}x |",
                    b / a,
                    b99 / a99
                );
            }
            println!();
        }
    }
    println!(
        "answers compared before timing: {} requests, {} mismatches; commit {}; machine {}",
        requests.len(),
        mismatches.len(),
        commit(),
        machine()
    );
    if let Some(path) = &o.json {
        let doc = json!({
            "benchmark": "queries", "commit": commit(), "machine": machine(), "command": o.command,
            "chain": {"dir": o.chain, "blocks": facts.blocks, "txs": facts.txs, "scripts": facts.scripts.len(), "buckets": bucket_info},
            "servers": o.servers.iter().map(|(n, u)| json!({"name": n, "url": u})).collect::<Vec<_>>(),
            "mix_percent": MIX.iter().map(|(k, p)| json!({"kind": k, "percent": p})).collect::<Vec<_>>(),
            "requests_per_run": o.requests, "seed": o.seed,
            "check": {"mismatches": mismatches, "errors": check_errors},
            "samples": samples, "summary": summary,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
        eprintln!("samples written to {}", path.display());
    }
    Ok(())
}

//! Issue 25, findings 1 to 3: one host must never deny service to the others. Each test runs a
//! real `cairn run` (synced from a regtest bitcoind) over loopback and attacks it as the issue
//! did: the attackers are bound to 127.0.0.2, .4, .5 …, the honest client to 127.0.0.3, so the
//! default exemption (127.0.0.1 and ::1 only) cannot hide a bug. Linux routes all of 127/8 over
//! `lo`, so a socket bound to any of them reaches the listeners on 127.0.0.1.
//!
//! Each test prints what it measured (run with `--nocapture` to see it).

use crate::common;

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::anyone;
use crate::common::lines::Lines;
use crate::common::peer::connect_from_with_rcvbuf;
use crate::common::probe::{self, admitted_within, answered_within, metric_when, Honest, RssPeak};
use crate::common::{free_addr, start_cairn_from, Bitcoind, Cairn};
use serde_json::{json, Value};

/// `--electrum-max-connections-per-ip`'s default.
const PER_IP: usize = 12;
/// `--electrum-max-connections-per-subnet`'s default.
const PER_SUBNET: usize = 48;
/// How long each answer of the honest client may take.
const HONEST_WITHIN: Duration = Duration::from_secs(5);

/// The gauge of open plain-TCP Electrum connections.
const TCP_OPEN: &str = "cairn_electrum_connections{transport=\"tcp\"}";

/// The counter of connections closed at accept for `reason` (`ip`, `subnet`, `limit`).
fn refused(reason: &str) -> String {
    format!("cairn_electrum_connections_refused_total{{reason=\"{reason}\"}}")
}

/// The counter of sessions ended for `reason` (`idle`, `write_stalled`, `not_reading`, …).
fn disconnects(reason: &str) -> String {
    format!("cairn_electrum_disconnects_total{{reason=\"{reason}\"}}")
}

/// A regtest bitcoind (101 blocks, a wallet) and a cairn synced from it, serving Electrum over
/// TCP, WebSocket and TLS (its self-signed certificate) and `/metrics`, all on 127.0.0.1.
struct Served {
    // Declared first, so dropped (killed) first.
    cairn: Cairn,
    node: Bitcoind,
    electrum: SocketAddr,
    ws: SocketAddr,
    tls: SocketAddr,
    metrics: SocketAddr,
    /// An address of bitcoind's wallet, to mine to.
    mine: String,
    _tmp: tempfile::TempDir,
}

impl Served {
    /// Starts both with `limits` (more `cairn run` flags) and waits until cairn is at
    /// bitcoind's tip and answers on its TCP listener, with no connection left open.
    fn start(limits: &[&str]) -> Served {
        let tmp = tempfile::tempdir().unwrap();
        let (node, mine) = Bitcoind::with_wallet(&tmp.path().join("bitcoind"), 101);
        let (electrum, ws, tls, metrics) = (free_addr(), free_addr(), free_addr(), free_addr());
        let mut args = vec![
            format!("--electrum-addr={electrum}"),
            format!("--electrum-ws-addr={ws}"),
            format!("--electrum-tls-addr={tls}"),
            format!("--metrics-addr={metrics}"),
        ];
        args.extend(limits.iter().map(|a| a.to_string()));
        let cairn = start_cairn_from(&tmp.path().join("cairn"), &node, &args);
        cairn.wait_for(&node.rpc(&["getbestblockhash"]), "initial sync");
        // The listener is up (asked from the exempt 127.0.0.1, which no limit counts)…
        if let Err(e) = admitted_within(electrum, "127.0.0.1", Duration::from_secs(30)) {
            panic!("cairn's Electrum listener never answered: {e}");
        }
        let served = Served {
            cairn,
            node,
            electrum,
            ws,
            tls,
            metrics,
            mine,
            _tmp: tmp,
        };
        // …and that probe's session has ended, so every place is free.
        served.wait_open(0, "the start-up probe's session to end");
        served
    }

    /// [`Served::start`] with HTTP on a free port and its cost limits low
    /// (`--http-cost-soft-limit=1000 --http-cost-hard-limit=1500`: the defaults, 10,000 and
    /// 100,000, take minutes to reach); the HTTP address.
    fn with_low_http_cost_limits() -> (Served, SocketAddr) {
        let http = free_addr();
        let flag = format!("--http-addr={http}");
        let limits = ["--http-cost-soft-limit=1000", "--http-cost-hard-limit=1500"];
        (Served::start(&[&flag, limits[0], limits[1]]), http)
    }

    /// An honest Electrum client from 127.0.0.3, visiting every 500 ms, each visit to be
    /// answered within [`HONEST_WITHIN`].
    fn honest_electrum(&self) -> Honest {
        Honest::start(
            self.electrum,
            "127.0.0.3",
            Duration::from_millis(500),
            HONEST_WITHIN,
        )
    }

    /// Mines [`BUSY_BLOCKS`] to the wallet's address and waits for cairn to index them: the
    /// address then has that many transactions (and unspent outputs) more. Returns it.
    fn make_busy(&self) -> String {
        let busy = self.mine.clone();
        let blocks = BUSY_BLOCKS.to_string();
        self.node.rpc(&["generatetoaddress", &blocks, &busy]);
        let tip = self.node.rpc(&["getbestblockhash"]);
        self.cairn.wait_for(&tip, "the busy blocks");
        busy
    }

    /// The sample `key` of `/metrics` now (0 when absent).
    fn metric(&self, key: &str) -> f64 {
        probe::metric(self.metrics, key)
    }

    /// Waits (5 s at most) until exactly `n` plain-TCP sessions are open.
    fn wait_open(&self, n: usize, what: &str) {
        let held = metric_when(self.metrics, TCP_OPEN, Duration::from_secs(5), |v| {
            v == n as f64
        });
        if let Err(v) = held {
            panic!("waiting for {what}: {v} TCP sessions open, not {n}");
        }
    }
}

/// `count` sockets from `from`, each connected (and its handshake done by the kernel) but silent.
fn silent(from: &str, to: SocketAddr, count: usize) -> Vec<TcpStream> {
    (0..count)
        .map(|i| {
            connect_from_with_rcvbuf(from, to, None)
                .unwrap_or_else(|e| panic!("socket {i} from {from}: {e}"))
        })
        .collect()
}

/// Attack: **Tor's address took every place.** Exempt connections (127.0.0.1, where a local Tor
/// onion service's clients all arrive) counted toward `electrum_max_connections` only. With
/// `--electrum-max-connections=100`, 150 silent connections from 127.0.0.1. Asserted: at most
/// 50 stay open (the exempt connections' half); a client from 127.0.0.3 is answered; an honest
/// wallet from 127.0.0.1 gets in (the youngest silent one gives its place up), subscribes, and
/// keeps its place while 30 more silent ones arrive after it, each taking the place of a silent
/// one (as Core's eviction protects the peers that relay, a subscription protects a wallet).
///
/// *Fails before the fix* (1712e6d): the 150 held all 100 places and 127.0.0.3 was refused.
#[test]
fn tors_address_holds_half_the_places_and_its_own_make_room() {
    let served = Served::start(&["--electrum-max-connections=100"]);
    let e = served.electrum;
    let flood = silent("127.0.0.1", e, 150);
    std::thread::sleep(Duration::from_secs(1));
    let open = served.metric(TCP_OPEN);
    println!("150 silent connections from 127.0.0.1: {open} open");
    assert!(open <= 50.0, "{open} exempt connections hold places");
    let other = answered_within(e, "127.0.0.3", HONEST_WITHIN)
        .unwrap_or_else(|err| panic!("127.0.0.3 beside the exempt flood: {err}"));
    let mut tor_wallet = Lines::connect_from("127.0.0.1", e, "1.4");
    let script_hash = "9f8c2a04a4e8d2b7e3a3b3b43c1e6a2f5d1a0c9b8e7f6a5b4c3d2e1f0a9b8c7d";
    let subscribed = tor_wallet.call("blockchain.scripthash.subscribe", json!([script_hash]));
    assert!(subscribed.get("result").is_some(), "{subscribed}");
    let more = silent("127.0.0.1", e, 30);
    std::thread::sleep(Duration::from_secs(1));
    let answer = tor_wallet.try_call("server.ping", json!([]));
    println!("127.0.0.3 answered in {other:?}; the Tor wallet after 30 more: {answer:?}");
    assert!(
        answer.is_some_and(|a| a.get("result").is_some()),
        "the honest Tor wallet lost its place"
    );
    drop((flood, more));
}

// ---- Finding 1: answers nobody reads ----

/// The write timeout test 1 sets (`--electrum-write-timeout-secs`).
const WRITE_TIMEOUT: Duration = Duration::from_secs(3);
/// Hex characters each hog's pings ask back (protocol 1.7's `pong_len`).
const PONG_LEN: usize = 1_000_000;
/// Pings in each hog's batch: an answer of 9 MB, more than the kernel buffers between the two
/// ends of a loopback connection (server send buffer at most `tcp_wmem`'s 4 MiB by default,
/// and the hog's 4 KiB receive buffer), so the server's write stalls.
const PINGS: usize = 9;

/// A hog: connects from `from` with a 4 KiB receive buffer, negotiates 1.7 and sends one batch
/// of [`PINGS`] `server.ping [PONG_LEN]`, then never reads a byte.
fn hog(from: &str, to: SocketAddr) -> TcpStream {
    let mut s = connect_from_with_rcvbuf(from, to, Some(4096))
        .unwrap_or_else(|e| panic!("a hog from {from}: {e}"));
    let version = json!({"jsonrpc": "2.0", "id": 0, "method": "server.version",
                         "params": ["hog", ["1.4", "1.7"]]});
    let pings: Vec<Value> = (1..=PINGS)
        .map(
            |id| json!({"jsonrpc": "2.0", "id": id, "method": "server.ping", "params": [PONG_LEN]}),
        )
        .collect();
    s.write_all(format!("{version}\n{}\n", Value::Array(pings)).as_bytes())
        .unwrap();
    s
}

/// Finding 1 (issue 25): **unread answers held their connection's place and bytes for ever.**
///
/// With `--electrum-max-connections=10`, ten hogs over TCP (five from 127.0.0.2, five from
/// 127.0.0.4: under the per-IP limit of 12, so only the global limit is at stake) each ask for
/// 9 MB of pongs and never read. The server's write to each stalls once the kernel buffers are
/// full. The fix: a write that makes no progress for `--electrum-write-timeout-secs` (3 s here)
/// ends the session, its writer is aborted, and its permit and queued bytes are freed. Asserted:
/// an honest client from 127.0.0.3 meanwhile is served, a hog of the busiest host giving its
/// place up (`cairn_connections_evicted_total`); within the write timeout + 10 s,
/// `cairn_electrum_disconnects_total{reason="write_stalled"}` counts the other hogs and no TCP
/// session is left; each hog got less than its answer, then EOF; an honest
/// client from 127.0.0.3 is then answered within 5 s; resident memory grew by less than 256 MiB.
///
/// *Fails before the fix:* the writer has no timeout, and a session that ends awaits its writer
/// instead of aborting it (`connection.rs:127`), so the ten permits never come back: no
/// `write_stalled` disconnect is ever counted and the honest client is refused at accept.
#[test]
fn unread_answers_are_cut_and_free_their_places() {
    let served = Served::start(&[
        "--electrum-max-connections=10",
        "--electrum-write-timeout-secs=3",
    ]);
    let wmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").unwrap_or_default();
    println!(
        "tcp_wmem (min default max): {}; each hog asks for {} bytes",
        wmem.trim(),
        PINGS * PONG_LEN
    );
    let rss = RssPeak::start(served.cairn.pid());
    let stalled_before = served.metric(&disconnects("write_stalled"));

    let mut hogs = Vec::new();
    for from in ["127.0.0.2", "127.0.0.4"] {
        for _ in 0..5 {
            hogs.push(hog(from, served.electrum));
        }
    }
    let sent = Instant::now();

    // The attack took every place: ten sessions open at once (they last at least the write
    // timeout, since their writes only start to stall once the buffers are full)…
    let all_in = metric_when(served.metrics, TCP_OPEN, Duration::from_secs(2), |v| {
        v >= 10.0
    });
    match all_in {
        Ok((_, after)) => println!("10 hogs held every place {after:?} after their requests"),
        Err(v) => panic!("the ten hogs were not all admitted: {v} TCP sessions open"),
    }
    // …so that a new client takes the place of the busiest host's longest idle hog.
    let during = answered_within(served.electrum, "127.0.0.3", Duration::from_secs(1));
    let evicted = served.metric("cairn_connections_evicted_total{server=\"electrum\"}");
    println!("honest client while the hogs hold every place: {during:?}; {evicted} hogs evicted");
    assert!(during.is_ok(), "the honest client was refused: {during:?}");

    // Every other stalled writer ends its session within the write timeout (plus slack).
    let bound = WRITE_TIMEOUT + Duration::from_secs(10);
    let stalled = metric_when(
        served.metrics,
        &disconnects("write_stalled"),
        bound.saturating_sub(sent.elapsed()),
        |v| v - stalled_before + evicted >= 10.0,
    );
    match stalled {
        Ok(_) => println!(
            "10 write_stalled disconnects {:?} after the hogs' requests (write timeout {:?})",
            sent.elapsed(),
            WRITE_TIMEOUT
        ),
        Err(v) => panic!(
            "{} of 10 hogs cut for a stalled write within {bound:?} (the rest hold their \
             place and their answer for ever); disconnects: write_stalled {v}, not_reading {}, \
             idle {}; TCP sessions open {}",
            v - stalled_before,
            served.metric(&disconnects("not_reading")),
            served.metric(&disconnects("idle")),
            served.metric(TCP_OPEN),
        ),
    }
    served.wait_open(0, "the hogs' sessions to be gone");

    // The honest client gets its place back (tried again for a moment: a permit is given back
    // just after the session's gauge falls), then is answered at once.
    let admitted = admitted_within(served.electrum, "127.0.0.3", HONEST_WITHIN)
        .unwrap_or_else(|e| panic!("the honest client after the hogs were cut: {e}"));
    let answered = answered_within(served.electrum, "127.0.0.3", HONEST_WITHIN)
        .unwrap_or_else(|e| panic!("the honest client, a second time: {e}"));
    println!("honest client admitted after {admitted:?}, then answered in {answered:?}");

    // Each hog's connection is closed: what the kernel held of its answer, then EOF (or a
    // reset), and less than the whole answer.
    let mut received = Vec::new();
    for (i, mut s) in hogs.into_iter().enumerate() {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0;
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    panic!("hog {i}: still open after {got} bytes")
                }
                Err(_) => break,
            }
        }
        assert!(
            got < PINGS * PONG_LEN,
            "hog {i} got its whole answer ({got} bytes): its write never stalled"
        );
        received.push(got);
    }
    println!("bytes each hog received before its connection closed: {received:?}");

    let growth = rss.growth_mib();
    println!(
        "cairn RSS: {} MiB before, {} MiB at the peak (+{growth} MiB)",
        rss.before_kib() / 1024,
        rss.peak_kib() / 1024
    );
    assert!(growth < 256, "RSS grew by {growth} MiB under ten hogs");
}

// ---- Finding 3, part 1: one host holding every connection ----

/// Finding 3 (issue 25): **one host could hold every connection.**
///
/// With `--electrum-max-connections=200`:
/// - (a) 400 silent sockets from 127.0.0.2: exactly 12 (the per-IP default) stay open, the
///   other 388 are closed by the server within a few seconds, and
///   `cairn_electrum_connections_refused_total{reason="ip"}` counts them; a 13th socket from
///   127.0.0.2 to the TLS and to the WebSocket listener is closed at once too, before any
///   handshake (one table for every listener). Meanwhile an honest client from 127.0.0.3 visits
///   every 500 ms and is always answered, then 20 more times in a row.
/// - (b) 12 sockets each from 127.0.0.4 to .7: with the 12 of .2 that is 60 in 127.0.0.0/24,
///   over the /24's limit of 48, so at least 12 are refused with `reason="subnet"`. A client
///   from 127.0.1.3 (another /24) is answered; one from 127.0.0.3 is refused (its /24 is full:
///   the price of the subnet rule, documented).
/// - (c) Closing the 12 of 127.0.0.2 gives their places back: 12 new ones from .2 are served.
/// - (d) 30 sockets from 127.0.0.1 (exempt by default) are all served.
///
/// *Fails before the fix:* there is no per-host count, so 200 of the 400 stay open (every
/// place) and the honest client is reset on connect (the issue: 20 tries in a row).
#[test]
fn one_host_can_not_hold_every_connection() {
    let served = Served::start(&["--electrum-max-connections=200"]);
    let e = served.electrum;

    // (a) One address, 400 sockets.
    let honest = served.honest_electrum();
    let started = Instant::now();
    let flood = silent("127.0.0.2", e, 400);
    println!(
        "400 sockets from 127.0.0.2 connected in {:?}",
        started.elapsed()
    );
    let open_flood = probe::open_after_refusals(&flood, PER_IP, Duration::from_secs(5));
    println!(
        "{open_flood} of them open {:?} after the first connected",
        started.elapsed()
    );
    assert_eq!(
        open_flood, PER_IP,
        "one address holds {open_flood} connections, not the per-IP limit {PER_IP}"
    );
    let by_ip = metric_when(
        served.metrics,
        &refused("ip"),
        Duration::from_secs(5),
        |v| v >= 388.0,
    );
    match by_ip {
        Ok((v, _)) => println!("refused for their address: {v}"),
        Err(v) => panic!("refused for their address: {v}, not at least 388"),
    }
    // The TLS and WebSocket listeners share the count, and refuse before their handshake (a
    // silent socket they admitted would only be cut by the 10 s handshake timeout).
    for (name, to) in [("TLS", served.tls), ("WebSocket", served.ws)] {
        let mut s = connect_from_with_rcvbuf("127.0.0.2", to, None).unwrap();
        let asked = Instant::now();
        assert!(
            probe::closed_within(&mut s, Duration::from_secs(2)),
            "a 13th connection from 127.0.0.2 to the {name} listener was not closed at accept"
        );
        println!(
            "{name}: the 13th from 127.0.0.2 closed in {:?}",
            asked.elapsed()
        );
    }
    // The honest client is answered, 20 new connections in a row.
    let mut worst = Duration::ZERO;
    for i in 1..=20 {
        let took = answered_within(e, "127.0.0.3", HONEST_WITHIN)
            .unwrap_or_else(|err| panic!("honest client, try {i} of 20: {err}"));
        worst = worst.max(took);
    }
    let report = honest.stop();
    println!(
        "honest client: 20 in a row answered (slowest {worst:?}); during the flood {} visits, \
         slowest {:?}, {} failed",
        report.tries,
        report.worst,
        report.failures.len()
    );
    assert!(
        report.failures.is_empty(),
        "the honest client failed during the flood: {:#?}",
        report.failures
    );

    // (b) The subnet: 127.0.0.4 to .7, 12 each, beside the 12 of .2 (60 > 48 in the /24).
    served.wait_open(PER_IP, "the honest client's sessions to end");
    std::thread::sleep(Duration::from_millis(200));
    let by_subnet_before = served.metric(&refused("subnet"));
    let mut neighbours = Vec::new();
    for last in 4..=7 {
        neighbours.extend(silent(&format!("127.0.0.{last}"), e, PER_IP));
    }
    let room = PER_SUBNET - PER_IP;
    let open_near = probe::open_after_refusals(&neighbours, room, Duration::from_secs(5));
    assert!(
        open_near <= room,
        "{open_near} of 48 sockets from 127.0.0.4-7 open beside the 12 of 127.0.0.2: the /24 holds \
         more than {PER_SUBNET}"
    );
    let by_subnet = metric_when(
        served.metrics,
        &refused("subnet"),
        Duration::from_secs(5),
        |v| v - by_subnet_before >= 12.0,
    );
    match by_subnet {
        Ok((v, _)) => println!(
            "127.0.0.4-7: {open_near} of 48 open, {} refused for their subnet",
            v - by_subnet_before
        ),
        Err(v) => panic!(
            "refused for their subnet: {}, not at least 12 ({open_near} of 48 open)",
            v - by_subnet_before
        ),
    }
    let other = answered_within(e, "127.0.1.3", HONEST_WITHIN)
        .unwrap_or_else(|err| panic!("a client from another /24 (127.0.1.3): {err}"));
    println!("127.0.1.3 (another /24) answered in {other:?}");
    let same = answered_within(e, "127.0.0.3", Duration::from_secs(3));
    assert!(
        same.is_err(),
        "127.0.0.3 was answered though its /24 holds {PER_SUBNET} connections already"
    );
    println!("127.0.0.3 (the full /24): refused, as documented ({same:?})");

    // (c) Closing the 12 of .2 gives their places back.
    drop(flood);
    served.wait_open(open_near, "the sessions of 127.0.0.2 to end");
    std::thread::sleep(Duration::from_millis(500));
    let again = silent("127.0.0.2", e, PER_IP);
    for (i, s) in again.iter().enumerate() {
        if let Err(err) = probe::served(s, HONEST_WITHIN) {
            panic!("new socket {i} from 127.0.0.2 after its 12 closed: {err}");
        }
    }
    println!("after the 12 of 127.0.0.2 closed: 12 new ones from it served");

    // (d) 127.0.0.1 is exempt: 30 at once, all served.
    let local = silent("127.0.0.1", e, 30);
    for (i, s) in local.iter().enumerate() {
        if let Err(err) = probe::served(s, HONEST_WITHIN) {
            panic!("socket {i} of 30 from the exempt 127.0.0.1: {err}");
        }
    }
    println!(
        "30 from 127.0.0.1 served; refused in all: ip {}, subnet {}, limit {}; TCP sessions \
         open {}",
        served.metric(&refused("ip")),
        served.metric(&refused("subnet")),
        served.metric(&refused("limit")),
        served.metric(TCP_OPEN)
    );
}

// ---- Finding 3, part 2: idle means no request ----

/// The idle timeout test 3 sets (`--electrum-idle-timeout-secs`).
const IDLE: Duration = Duration::from_secs(4);
/// By when a client that made no request must be closed, from its last request.
const IDLE_BOUND: Duration = Duration::from_secs(4 + 5);
/// How long each client watches its connection (past the bound, to say when it did close).
const WATCH: Duration = Duration::from_secs(4 + 5 + 3);

/// What one idle client saw after its last request.
struct Watched {
    what: &'static str,
    /// Whether it subscribed to headers (so notifications were owed to it).
    subscribed: bool,
    /// `blockchain.headers.subscribe` notifications it got.
    notes: usize,
    /// When the server closed it, from its last request (or from its handshake, without one).
    closed_after: Option<Duration>,
}

fn header_notes(notes: &[Value]) -> usize {
    notes
        .iter()
        .filter(|n| n["method"] == "blockchain.headers.subscribe")
        .count()
}

/// Over TCP: `server.version`, `blockchain.headers.subscribe`, then nothing.
fn tcp_subscriber(addr: SocketAddr) -> Watched {
    let mut c = Lines::connect_from("127.0.0.2", addr, "1.4");
    let tip = c.call("blockchain.headers.subscribe", json!([]));
    assert!(tip["result"]["height"].is_u64(), "{tip}");
    // The answer to the last request is in: the idle time counts from here.
    let (notes, closed_after) = c.watch(WATCH);
    Watched {
        what: "TCP",
        subscribed: true,
        notes: header_notes(&notes),
        closed_after,
    }
}

/// Over TLS: the same two requests, then nothing.
fn tls_subscriber(addr: SocketAddr) -> Watched {
    let mut r = BufReader::new(probe::tls_from("127.0.0.2", addr));
    probe::call(&mut r, 1, "server.version", json!(["idle", ["1.4", "1.4"]])).unwrap();
    probe::call(&mut r, 2, "blockchain.headers.subscribe", json!([])).unwrap();
    let start = Instant::now();
    r.get_ref()
        .sock
        .set_read_timeout(Some(Duration::from_millis(250)))
        .unwrap();
    let (notes, closed) = probe::watch(&mut r, start + WATCH);
    Watched {
        what: "TLS",
        subscribed: true,
        notes: header_notes(&notes),
        closed_after: closed.map(|at| at - start),
    }
}

/// Over TLS, silent once its handshake is done: not a single request.
fn tls_silent(addr: SocketAddr) -> Watched {
    let tls = probe::tls_from("127.0.0.2", addr);
    let start = Instant::now();
    tls.sock
        .set_read_timeout(Some(Duration::from_millis(250)))
        .unwrap();
    let mut r = BufReader::new(tls);
    let (notes, closed) = probe::watch(&mut r, start + WATCH);
    Watched {
        what: "TLS, silent after its handshake",
        subscribed: false,
        notes: header_notes(&notes),
        closed_after: closed.map(|at| at - start),
    }
}

/// Over WebSocket: the same two requests, then only WebSocket pings (every second), which are
/// not requests.
fn ws_subscriber(addr: SocketAddr) -> Watched {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let tcp = socket.connect(addr).await.unwrap();
        let (mut ws, _) = tokio_tungstenite::client_async(format!("ws://{addr}"), tcp)
            .await
            .unwrap();
        let requests = [
            (1, "server.version", json!(["idle", ["1.4", "1.4"]])),
            (2, "blockchain.headers.subscribe", json!([])),
        ];
        for (id, method, params) in requests {
            let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            ws.send(Message::text(request.to_string())).await.unwrap();
            loop {
                match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
                    Ok(Some(Ok(Message::Text(text)))) => {
                        let answer: Value = serde_json::from_str(text.as_str()).unwrap();
                        if answer["id"] == id {
                            assert!(answer.get("result").is_some(), "{method}: {answer}");
                            break;
                        }
                    }
                    Ok(Some(Ok(_))) => {}
                    other => panic!("WebSocket {method}: no answer: {other:?}"),
                }
            }
        }
        let start = Instant::now();
        let until = tokio::time::Instant::now() + WATCH;
        let mut pings = tokio::time::interval(Duration::from_secs(1));
        let mut notes = Vec::new();
        let closed_after = loop {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => break None,
                _ = pings.tick() => {
                    if ws.send(Message::Ping(Default::default())).await.is_err() {
                        break Some(start.elapsed());
                    }
                }
                next = ws.next() => match next {
                    Some(Ok(Message::Text(text))) => {
                        if let Ok(note) = serde_json::from_str::<Value>(text.as_str()) {
                            notes.push(note);
                        }
                    }
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                        break Some(start.elapsed())
                    }
                    Some(Ok(_)) => {}
                },
            }
        };
        Watched {
            what: "WebSocket, sending only pings",
            subscribed: true,
            notes: header_notes(&notes),
            closed_after,
        }
    })
}

/// Finding 3 (issue 25): **the idle timer restarted on every notification**, so on a live
/// network (a block or a transaction every few seconds) a silent subscribed socket was never
/// closed.
///
/// With `--electrum-idle-timeout-secs=4`, clients from 127.0.0.2 send `server.version` and
/// `blockchain.headers.subscribe`, then no request (over TCP, over TLS, and over WebSocket
/// sending only WebSocket pings), while the test mines a block every second, so header
/// notifications keep coming. A fourth client completes a TLS handshake and says nothing.
/// Asserted: each subscribed client got at least one notification, and every client is closed
/// between 3 s and 4 + 5 s after its last request (or its handshake).
///
/// *Fails before the fix:* `timeout(idle, incoming.recv())` is rebuilt on every loop turn,
/// notification turns included (`connection.rs:219-221, 248-258`), so the subscribed clients
/// stay open as long as blocks come. (The silent TLS client passes before the fix too: nothing
/// is sent to it; it checks that TLS sessions are held to the same rule.)
#[test]
fn idle_counts_from_the_last_request() {
    let served = Served::start(&["--electrum-idle-timeout-secs=4"]);
    let mining = AtomicBool::new(true);
    let mined = AtomicU64::new(0);
    let watched: Vec<Watched> = std::thread::scope(|scope| {
        let miner = scope.spawn(|| {
            // A minute at most, whatever happens to the clients.
            let start = Instant::now();
            while mining.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(60) {
                served.node.rpc(&["generatetoaddress", "1", &served.mine]);
                mined.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        let clients = [
            scope.spawn(|| tcp_subscriber(served.electrum)),
            scope.spawn(|| tls_subscriber(served.tls)),
            scope.spawn(|| tls_silent(served.tls)),
            scope.spawn(|| ws_subscriber(served.ws)),
        ];
        let outcomes: Vec<_> = clients.into_iter().map(|c| c.join()).collect();
        mining.store(false, Ordering::SeqCst);
        miner.join().expect("the miner");
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    println!(
        "{} blocks mined, one a second; idle timeout {IDLE:?}; idle disconnects counted: {}",
        mined.load(Ordering::SeqCst),
        served.metric(&disconnects("idle"))
    );
    for w in &watched {
        println!(
            "{}: {} header notifications, closed {:?} after its last request",
            w.what, w.notes, w.closed_after
        );
    }
    for w in &watched {
        if w.subscribed {
            assert!(
                w.notes >= 1,
                "{}: no notification came, so the test proves nothing",
                w.what
            );
        }
        let Some(after) = w.closed_after else {
            panic!(
                "{}: still open {WATCH:?} after its last request, with {} notifications since \
                 (idle timeout {IDLE:?})",
                w.what, w.notes
            );
        };
        assert!(
            after <= IDLE_BOUND,
            "{}: closed {after:?} after its last request, over {IDLE_BOUND:?}",
            w.what
        );
        assert!(
            after >= IDLE - Duration::from_secs(1),
            "{}: closed {after:?} after its last request, before the idle timeout {IDLE:?}",
            w.what
        );
    }
}

// ---- Finding 4: HTTP held shut ----

/// One HTTP/1.1 request from `from` on a connection of its own: the status code, or why there
/// was none within `within`.
fn http_from(from: &str, to: SocketAddr, path: &str, within: Duration) -> Result<u16, String> {
    let mut s = connect_from_with_rcvbuf(from, to, None).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(within)).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: cairn\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head)
        .map_err(|e| format!("{path}: no answer within {within:?}: {e}"))?;
    let text = String::from_utf8_lossy(&head);
    text.get(9..12)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("{path}: not an HTTP answer: {text:?}"))
}

/// A connection from `from` that asks for the status page (9 KB) `n` times in one go,
/// pipelined, with a 4 KiB receive buffer, and never reads.
fn http_hog(from: &str, to: SocketAddr, n: usize) -> TcpStream {
    let mut s = connect_from_with_rcvbuf(from, to, Some(4096)).unwrap();
    let one = "GET / HTTP/1.1\r\nHost: cairn\r\n\r\n";
    s.write_all(one.repeat(n).as_bytes()).unwrap();
    s
}

/// Finding 4 (issue 25): **HTTP could be held shut.**
///
/// With `--http-max-connections=40` and `--http-max-connections-per-ip=40` (a load balancer's
/// address, through which every client comes): 40 connections from 127.0.0.2 each ask for the
/// status page 1,000 times, pipelined (9 MB of answers), and never read; 20 more from there try
/// to take the places held back for health checks (two are theirs, for 2 s). Asserted:
/// meanwhile `/health` from 127.0.0.2 is answered within 3 s (a place held back for health
/// checks), and any other path from there gets 503 at once rather than waiting; a client of
/// another address (127.0.0.3) takes a hog's place and is answered; every hog is cut once its
/// write has taken nothing for the write timeout (20 s), after which `/blocks/tip/height` is
/// answered from 127.0.0.2 again.
///
/// *Fails before the fix:* the hogs hold every place for ever (no write timeout), so the
/// health check is reset at accept, and a load balancer marks the node down.
#[test]
fn http_is_never_held_shut() {
    let http = free_addr();
    let flag = format!("--http-addr={http}");
    // The cost limits off: what is tested is the write timeout. With them on, a hog's requests
    // wait up to 2.5 s each once its host is over the soft limit, writing nothing meanwhile, so
    // its place is held until its cost reaches the hard limit instead (minutes here); its
    // host's share of places bounds that, as it bounds connections that idle.
    let _served = Served::start(&[
        &flag,
        "--http-max-connections=40",
        "--http-max-connections-per-ip=40",
        "--http-cost-soft-limit=0",
        "--http-cost-hard-limit=0",
    ]);
    assert_eq!(
        http_from("127.0.0.2", http, "/health", HONEST_WITHIN),
        Ok(200)
    );
    let mut hogs: Vec<TcpStream> = (0..40).map(|_| http_hog("127.0.0.2", http, 1000)).collect();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(500));

    // Every place is taken, by the balancer's own address. Connecting on and on from there gets
    // one of the places held for health checks per address, each held 2 s at most (silent
    // here).
    let squatters: Vec<TcpStream> = (0..20)
        .map(|_| connect_from_with_rcvbuf("127.0.0.2", http, None).unwrap())
        .collect();
    let squatting = probe::open_after_refusals(&squatters, 1, Duration::from_secs(3));
    println!(
        "20 more from 127.0.0.2 with every place held: {squatting} kept (a health check's place)"
    );
    assert!(
        squatting <= 1,
        "one address holds {squatting} health checks' places"
    );
    // The health check still gets through; others are told to go.
    for i in 0..5 {
        let asked = Instant::now();
        let health = http_from("127.0.0.2", http, "/health", Duration::from_secs(3));
        assert_eq!(
            health,
            Ok(200),
            "/health, try {i}, while the hogs hold every place"
        );
        println!(
            "/health answered in {:?} while every place is held",
            asked.elapsed()
        );
    }
    let other = http_from(
        "127.0.0.2",
        http,
        "/blocks/tip/height",
        Duration::from_secs(3),
    );
    println!("/blocks/tip/height from the hogs' address while every place is held: {other:?}");
    assert_eq!(other, Ok(503), "a request on a health check's place");
    // Another address takes the place of the hogs' youngest.
    let honest = http_from(
        "127.0.0.3",
        http,
        "/blocks/tip/height",
        Duration::from_secs(3),
    );
    println!("/blocks/tip/height from 127.0.0.3 meanwhile: {honest:?}");
    assert_eq!(honest, Ok(200), "a newcomer of another address");

    // The write timeout frees every place; then everything is answered again.
    let freed = loop {
        match http_from(
            "127.0.0.2",
            http,
            "/blocks/tip/height",
            Duration::from_secs(3),
        ) {
            Ok(200) => break started.elapsed(),
            _ if started.elapsed() > Duration::from_secs(40) => {
                panic!("/blocks/tip/height not answered 40 s into the attack")
            }
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    };
    println!("/blocks/tip/height answered again {freed:?} into the attack");
    // A hog's own requests wait for its address's turn in the query pool (40 hogs, 2 jobs at
    // a time), so the last ones start to stall, and their write timeout to count, seconds
    // after the first (tens of seconds on a loaded machine).
    let mut closed = 0;
    for s in hogs.iter_mut() {
        let left = Duration::from_secs(90).saturating_sub(started.elapsed());
        closed += usize::from(probe::closed_within(s, left.max(Duration::from_secs(1))));
    }
    assert_eq!(
        closed,
        hogs.len(),
        "hogs still open after the write timeout"
    );
}

/// Issue 49: **a full HTTP listener refused everyone else.** Two /24s of attackers
/// (127.0.1.0/24 and 127.0.2.0/24, 20 connections from each of two addresses of each, under
/// every per-address and per-subnet limit) hold all 80 places of `--http-max-connections=80`
/// with keep-alive connections that send nothing. Asserted: an honest client from 127.0.0.3
/// is answered, five times over (the first time a connection of the group holding the most
/// gives its place up, `cairn_connections_evicted_total{server="HTTP"}`, and is closed; the
/// honest one's place, given back as it closes, serves the next).
///
/// *Fails before the fix:* the honest client is closed at accept for as long as they stay
/// (every place taken; the server-wide count took nothing back).
#[test]
fn a_full_http_listener_takes_places_back_from_the_subnet_holding_most() {
    let http = free_addr();
    let flag = format!("--http-addr={http}");
    let served = Served::start(&[&flag, "--http-max-connections=80"]);
    let mut held = Vec::new();
    for from in ["127.0.1.1", "127.0.1.2", "127.0.2.1", "127.0.2.2"] {
        held.extend((0..20).map(|_| connect_from_with_rcvbuf(from, http, None).unwrap()));
    }
    let open = probe::open_after_refusals(&held, 80, Duration::from_secs(3));
    println!("{open} attackers' connections held");
    assert_eq!(open, 80, "the attackers hold every place");
    for i in 0..5 {
        let honest = http_from("127.0.0.3", http, "/blocks/tip/height", HONEST_WITHIN);
        assert_eq!(honest, Ok(200), "the honest client, try {i}");
    }
    let evicted = served.metric("cairn_connections_evicted_total{server=\"HTTP\"}");
    println!("{evicted} attackers' connections gave their places up");
    assert!(evicted >= 1.0, "evicted: {evicted}");
    // The places came from the attackers' connections, which were closed.
    let left = probe::open_after_refusals(&held, 79, Duration::from_secs(5));
    println!("{left} attackers' connections left");
    assert!(left <= 79, "{left} attackers' connections still open");
}

/// Finding 1, slowly (issue 25): **readers that take a trickle held the budget.**
///
/// With `--electrum-answer-budget-mb=128` (a quarter, 32 MiB, per connection and per host):
/// ten clients from 127.0.0.2 (under the per-IP limit of 12) each ask for 18 MB of pongs and
/// read 4 KiB a second, fast enough for the write timeout. Asserted: an honest client from
/// 127.0.0.3 gets a 100,000-character pong within 5 s, and most of the slow readers are cut for
/// holding their host's share.
///
/// *Fails before the fix:* each connection had its own quarter and nothing counted per host,
/// so the ten held the whole budget (150 MB asked) and every other client's answer waited 60 s.
#[test]
fn slow_readers_of_one_host_hold_a_quarter_of_the_budget_at_most() {
    // The cost limits off: what is tested is the budget's share per host (with them on, the
    // host's cost, 3,600 units for each reader's 18 MB, refuses the later answers first).
    let served = Served::start(&[
        "--electrum-answer-budget-mb=128",
        "--electrum-cost-soft-limit=0",
        "--electrum-cost-hard-limit=0",
    ]);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..10 {
        let mut s = connect_from_with_rcvbuf("127.0.0.2", served.electrum, Some(4096)).unwrap();
        let version = json!({"jsonrpc": "2.0", "id": 0, "method": "server.version",
                             "params": ["slow", ["1.4", "1.7"]]});
        let pings: Vec<Value> = (1..=9)
            .map(|id| json!({"jsonrpc": "2.0", "id": id, "method": "server.ping", "params": [2_000_000]}))
            .collect();
        s.write_all(format!("{version}\n{}\n", Value::Array(pings)).as_bytes())
            .unwrap();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            s.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut buf = [0u8; 4096];
            while !stop.load(Ordering::SeqCst) {
                match s.read(&mut buf) {
                    Ok(0) => return true,
                    Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => return true,
                    _ => std::thread::sleep(Duration::from_secs(1)),
                }
            }
            false
        }));
    }
    std::thread::sleep(Duration::from_secs(2));
    let mut honest = Lines::connect_from("127.0.0.3", served.electrum, "1.7");
    let asked = Instant::now();
    let pong = honest.call("server.ping", json!([100_000]));
    let took = asked.elapsed();
    println!("honest 100,000-character pong beside ten slow readers: {took:?}");
    assert_eq!(
        pong["result"]["data"].as_str().map(str::len),
        Some(100_000),
        "{pong}"
    );
    assert!(took < HONEST_WITHIN, "the honest pong took {took:?}");
    // The readers' answers are built two at a time (their address's share of the query pool),
    // so the last ones are cut a few seconds in on a loaded machine (a clean-clone CI once saw
    // 4 of 10 at 15 s; the wait ends as soon as 7 are cut).
    let counted = metric_when(
        served.metrics,
        &disconnects("not_reading"),
        Duration::from_secs(45),
        |v| v >= 7.0,
    );
    println!("cuts counted by the server: {counted:?}");
    // A reader sees its cut at its next read, up to 1.5 s later (a CI run once stopped them
    // first and counted 6 of 10): wait for 7 of them to see it, 10 s at most.
    let seen_by = Instant::now() + Duration::from_secs(10);
    while readers.iter().filter(|r| r.is_finished()).count() < 7 && Instant::now() < seen_by {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::SeqCst);
    let cut = readers
        .into_iter()
        .map(|r| r.join().unwrap())
        .filter(|closed| *closed)
        .count();
    println!("slow readers cut for their host's share: {cut} of 10");
    assert!(cut >= 7, "only {cut} of 10 slow readers were cut");
}

/// Finding 2 (issue 25): **answers were built before the budget was asked.**
///
/// With `--electrum-answer-budget-mb=64` (16 MiB per connection and per host): 30 clients,
/// ten each from 127.0.0.2, .4 and .5, each send a batch of nine `server.ping [1000000]` (9 MB
/// of answers) and never read. Asserted: cairn's resident memory grows by less than 160 MiB
/// (the budget and a working margin), and an honest client from 127.0.0.3 is answered within
/// 5 s. Each pong's bytes are asked of the budget before it is built, so what is built and
/// waiting never passes the budget.
///
/// *Fails before the fix:* every batch was built whole first (each pong as a JSON value, then
/// its text, then the batch's growing line), 30 at once on blocking threads, and only then
/// asked of the budget: several hundred MiB for a 64 MiB budget.
#[test]
fn answers_are_reserved_before_they_are_built() {
    let served = Served::start(&["--electrum-answer-budget-mb=64"]);
    let rss = RssPeak::start(served.cairn.pid());
    let mut hogs = Vec::new();
    for from in ["127.0.0.2", "127.0.0.4", "127.0.0.5"] {
        for _ in 0..10 {
            hogs.push(hog(from, served.electrum));
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    let answered = answered_within(served.electrum, "127.0.0.3", HONEST_WITHIN);
    println!("honest client beside 30 builders of 9 MB: {answered:?}");
    std::thread::sleep(Duration::from_secs(1));
    let growth = rss.growth_mib();
    println!(
        "cairn RSS: {} MiB before, {} MiB at the peak (+{growth} MiB) for a 64 MiB budget",
        rss.before_kib() / 1024,
        rss.peak_kib() / 1024
    );
    assert!(answered.is_ok(), "the honest client: {answered:?}");
    assert!(growth < 160, "RSS grew by {growth} MiB");
    drop(hogs);
}

// ---- Finding 6: subscriptions ----

/// Subscribes `c` to `n` script hashes made from `tag` (no history: status `null`), in batches
/// of 500; returns how many were accepted and the first refusal's message.
fn subscribe_many(c: &mut Lines, tag: u32, n: u32) -> (usize, Option<String>) {
    let mut accepted = 0;
    let mut refusal = None;
    for start in (0..n).step_by(500) {
        let batch: Vec<Value> = (start..n.min(start + 500))
            .map(|i| {
                let sh = format!("{tag:08x}{i:056x}");
                json!({"jsonrpc": "2.0", "id": i, "method": "blockchain.scripthash.subscribe", "params": [sh]})
            })
            .collect();
        let line = format!("{}\n", Value::Array(batch));
        for answer in c.raw_batch(&line) {
            match answer.get("error") {
                None => accepted += 1,
                Some(e) => {
                    refusal.get_or_insert_with(|| e["message"].as_str().unwrap_or("").to_string());
                }
            }
        }
    }
    (accepted, refusal)
}

/// Finding 6 (issue 25): **subscriptions had no cap beside the per-connection one.**
///
/// With `--electrum-max-subscriptions-per-ip=1000 --electrum-max-subscriptions-total=1500`:
/// four connections from 127.0.0.2 each ask for 400 subscriptions, and only 1,000 are taken in
/// all (Fulcrum's `max_subs_per_ip`); 127.0.0.4 then gets the 500 left of the server's 1,500
/// (`max_subs`), and 127.0.0.3 none; once 127.0.0.2 leaves, its 1,000 are free again. Then, with
/// the defaults, 50,000 subscriptions on one connection from 127.0.0.1 measure what one costs.
///
/// *Fails before the fix:* each connection was held to its own 50,000 only, so one host could
/// hold any number of them through more connections.
#[test]
fn one_host_can_not_hold_every_subscription() {
    let served = Served::start(&[
        "--electrum-max-subscriptions-per-ip=1000",
        "--electrum-max-subscriptions-total=1500",
    ]);
    let e = served.electrum;
    let mut from_two: Vec<Lines> = (0..4)
        .map(|_| Lines::connect_from("127.0.0.2", e, "1.4"))
        .collect();
    let mut taken = 0;
    let mut refusal = None;
    for (i, c) in from_two.iter_mut().enumerate() {
        let (n, why) = subscribe_many(c, i as u32, 400);
        taken += n;
        refusal = refusal.or(why);
    }
    println!("127.0.0.2: {taken} of 1600 subscriptions taken; refused with {refusal:?}");
    assert_eq!(taken, 1000, "one address's subscriptions");
    assert!(refusal.is_some_and(|m| m.contains("from this address")));
    let mut four = Lines::connect_from("127.0.0.4", e, "1.4");
    let (n, why) = subscribe_many(&mut four, 10, 600);
    println!("127.0.0.4: {n} of 600 taken; refused with {why:?}");
    assert_eq!(n, 500, "what the server's limit left");
    assert!(why.is_some_and(|m| m.contains("on this server")));
    let mut three = Lines::connect_from("127.0.0.3", e, "1.4");
    assert_eq!(
        subscribe_many(&mut three, 20, 1).0,
        0,
        "the server holds its limit"
    );
    drop(from_two);
    let freed = Instant::now();
    loop {
        if subscribe_many(&mut three, 21, 1).0 == 1 {
            break;
        }
        assert!(
            freed.elapsed() < HONEST_WITHIN,
            "127.0.0.2's subscriptions never came back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "127.0.0.3 subscribed once 127.0.0.2 left, {:?} later",
        freed.elapsed()
    );
    drop((four, three));

    // What one subscription costs, on a cairn with the defaults (but for the cost limits: 50,000
    // subscriptions on one connection cost 4,500 units, and waiting is not what is measured).
    let plain = Served::start(&["--electrum-cost-soft-limit=0"]);
    let mut local = Lines::connect_from("127.0.0.1", plain.electrum, "1.4");
    let before = probe::rss_kib(plain.cairn.pid());
    let (n, why) = subscribe_many(&mut local, 30, 50_000);
    assert_eq!((n, why), (50_000, None));
    std::thread::sleep(Duration::from_millis(500));
    let after = probe::rss_kib(plain.cairn.pid());
    let each = (after.saturating_sub(before) * 1024) as f64 / 50_000.0;
    println!(
        "50,000 subscriptions on one connection: RSS +{} KiB, about {each:.0} bytes each",
        after - before
    );
}

/// Finding 2, from more hosts (issue 25), a guard rather than a fix's proof: 50 clients, ten
/// each from five addresses (each address may hold 16 MiB of `--electrum-answer-budget-mb=64`,
/// so together they could fill it), each send a batch of nine `server.ping [1000000]` and never
/// read. Asserted: the honest client from 127.0.0.3 is answered within 5 s throughout, and RSS
/// grows by less than 160 MiB. (It passes on the code before the builders stopped waiting for
/// the budget on their blocking thread too: the kernel's socket buffers take 2.8 MB of each
/// connection's answers, so 50 do not fill the budget here. What the change prevents, a few
/// hundred sessions parked on the blocking pool holding part of the budget, needs more
/// connections than a test opens.)
#[test]
fn a_full_budget_delays_small_answers_and_refuses_large_ones() {
    let served = Served::start(&["--electrum-answer-budget-mb=64"]);
    let rss = RssPeak::start(served.cairn.pid());
    let honest = Honest::start(
        served.electrum,
        "127.0.0.3",
        Duration::from_millis(300),
        HONEST_WITHIN,
    );
    let mut hogs = Vec::new();
    for from in [
        "127.0.0.2",
        "127.0.0.4",
        "127.0.0.5",
        "127.0.0.6",
        "127.0.0.7",
    ] {
        for _ in 0..10 {
            hogs.push(hog(from, served.electrum));
        }
    }
    std::thread::sleep(Duration::from_secs(6));
    let report = honest.stop();
    let growth = rss.growth_mib();
    println!(
        "honest client beside 50 builders from 5 addresses: {} visits, slowest {:?}, {} failed; \
         RSS +{growth} MiB for a 64 MiB budget",
        report.tries,
        report.worst,
        report.failures.len()
    );
    assert!(report.failures.is_empty(), "{:#?}", report.failures);
    assert!(growth < 160, "RSS grew by {growth} MiB");
    drop(hogs);
}

// ---- Finding 5: work nobody waits for ----

/// Blocks mined to the wallet's address on top of the 101 for finding 5: its history (one
/// coinbase a block) makes `/address/:a` read every one of its transactions.
const BUSY_BLOCKS: u32 = 1_500;

/// Finding 5 (issue 25): **work went on after its client hung up, on unbounded threads.**
///
/// The wallet's address gets 1,601 transactions (a coinbase each), so `/address/:a` reads them
/// all. Eight attacking threads from 127.0.0.2 then ask for it for 10 s, each hanging up as
/// soon as its request is sent, over and over. Asserted, meanwhile: an honest HTTP client from
/// 127.0.0.3 gets `/blocks/tip/height` within 5 s, every time, and an honest Electrum client
/// from there `server.ping` and `blockchain.headers.subscribe`; cairn's threads stay under its
/// count before plus 48 (the pool's 4, streams and tokio's spares); and SIGTERM just after the
/// attack ends the process within 5 s.
///
/// *Fails before the fix:* every request ran to its end on a thread of tokio's blocking pool
/// (`spawn_blocking`, up to 512), its client long gone; the work queued behind them is minutes
/// long: the threads reached 533 (from 64), and the runtime's shutdown waited 11 s for the
/// work (minutes, with more of it queued).
#[test]
fn work_ends_with_its_client_and_runs_on_bounded_threads() {
    let http = free_addr();
    let flag = format!("--http-addr={http}");
    let mut served = Served::start(&[&flag]);
    let busy = served.make_busy();
    let path = format!("/address/{busy}");
    let asked = Instant::now();
    assert_eq!(
        http_from("127.0.0.3", http, &path, Duration::from_secs(30)),
        Ok(200)
    );
    println!("{path} alone: {:?}", asked.elapsed());

    let pid = served.cairn.pid();
    let threads = probe::Peak::start(pid, probe::threads);
    let honest_http = Honest::visiting(Duration::from_millis(250), move || {
        match http_from("127.0.0.3", http, "/blocks/tip/height", HONEST_WITHIN) {
            Ok(200) => Ok(()),
            other => Err(format!("/blocks/tip/height: {other:?}")),
        }
    });
    let honest = served.honest_electrum();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let sent = std::sync::Arc::new(AtomicU64::new(0));
    let attackers: Vec<_> = (0..8)
        .map(|_| {
            let (stop, sent, path) = (stop.clone(), sent.clone(), path.clone());
            std::thread::spawn(move || {
                let request = format!("GET {path} HTTP/1.1\r\nHost: cairn\r\n\r\n");
                while !stop.load(Ordering::SeqCst) {
                    if let Ok(mut s) = connect_from_with_rcvbuf("127.0.0.2", http, None) {
                        if s.write_all(request.as_bytes()).is_ok() {
                            sent.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(10));
    stop.store(true, Ordering::SeqCst);
    for a in attackers {
        a.join().unwrap();
    }
    let (web, electrum) = (honest_http.stop(), honest.stop());
    let (before, peak) = (threads.before(), threads.peak());
    drop(threads);
    println!(
        "{} requests sent and hung up on; honest /blocks/tip/height: {} tries, worst {:?}; \
         Electrum: {} tries, worst {:?}; threads {before} before, {peak} at most",
        sent.load(Ordering::SeqCst),
        web.tries,
        web.worst,
        electrum.tries,
        electrum.worst
    );
    let stopped = served.cairn.terminate_within(Duration::from_secs(5));
    println!("SIGTERM right after the attack: stopped in {stopped:?}");
    assert!(
        web.failures.is_empty(),
        "honest HTTP client: {:#?}",
        web.failures
    );
    assert!(
        electrum.failures.is_empty(),
        "honest Electrum client: {:#?}",
        electrum.failures
    );
    assert!(
        peak <= before + 48,
        "threads: {before} before the attack, {peak} during it"
    );
    assert!(stopped.is_some(), "cairn still running 5 s after SIGTERM");
}

// ---- Finding 7: requests with small answers and a large cost ----

/// Electrum's script hash of `address` (its script's SHA-256, reversed, in hex), asked of
/// bitcoind.
fn electrum_script_hash(node: &Bitcoind, address: &str) -> String {
    use bitcoin::hashes::{sha256, Hash};
    let info = node.rpc_json(&["getaddressinfo", address]);
    let script = info["scriptPubKey"].as_str().expect("a scriptPubKey");
    let bytes: Vec<u8> = (0..script.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&script[i..i + 2], 16).unwrap())
        .collect();
    let mut hash = sha256::Hash::hash(&bytes).to_byte_array();
    hash.reverse();
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// The honest client's visits all succeeded, none slower than `within`.
fn assert_served_within(report: &probe::HonestReport, within: Duration) {
    assert!(
        report.failures.is_empty(),
        "honest client: {:#?}",
        report.failures
    );
    assert!(
        report.worst < within,
        "honest client waited {:?}",
        report.worst
    );
}

/// What one cost attacker saw: answers, and the "excessive resource usage" errors it was closed
/// with.
#[derive(Default)]
struct Charged {
    answers: u64,
    closed_for_cost: u64,
}

/// Asks `blockchain.scripthash.get_balance [sh]` from `from` on one connection after another,
/// each answer read before the next request, until `stop`.
fn balance_flood(from: &str, to: SocketAddr, sh: &str, stop: &AtomicBool) -> Charged {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "blockchain.scripthash.get_balance",
                         "params": [sh]});
    flood(from, to, "1.4", &request, stop)
}

/// A flooder's next connection from `from`, with a reader over a clone of it; `None` after a
/// 50 ms back-off when the server refused it.
fn reconnect(from: &str, to: SocketAddr) -> Option<(TcpStream, BufReader<TcpStream>)> {
    let Ok(s) = connect_from_with_rcvbuf(from, to, None) else {
        std::thread::sleep(Duration::from_millis(50));
        return None;
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let reader = BufReader::new(s.try_clone().unwrap());
    Some((s, reader))
}

/// Sends `request` from `from` on one connection after another (each opened with
/// `server.version` for protocol `version`), each answer read before the next request, until
/// `stop`.
fn flood(from: &str, to: SocketAddr, version: &str, request: &Value, stop: &AtomicBool) -> Charged {
    let mut seen = Charged::default();
    let request = request.to_string() + "\n";
    while !stop.load(Ordering::SeqCst) {
        let Some((mut s, mut reader)) = reconnect(from, to) else {
            continue;
        };
        let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "server.version",
                           "params": ["attacker", version]});
        let mut line = String::new();
        let greeted = s.write_all(format!("{hello}\n").as_bytes()).is_ok()
            && std::io::BufRead::read_line(&mut reader, &mut line).is_ok_and(|n| n > 0);
        if !greeted || line.contains("excessive resource usage") {
            seen.closed_for_cost += u64::from(greeted);
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        while !stop.load(Ordering::SeqCst) {
            if s.write_all(request.as_bytes()).is_err() {
                break;
            }
            let mut line = String::new();
            match std::io::BufRead::read_line(&mut reader, &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if line.contains("excessive resource usage") => {
                    seen.closed_for_cost += 1;
                    break;
                }
                Ok(_) if line.contains("\"result\"") => seen.answers += 1,
                Ok(_) => panic!("an attacker's answer: {line}"),
            }
        }
    }
    seen
}

/// Finding 7 (issue 25): **requests with tiny answers and a large cost were not charged.**
///
/// The wallet's address gets 1,601 unspent outputs (a coinbase a block), so each
/// `get_balance` of it reads 1,601 rows for a 60-byte answer. Four connections from 127.0.0.2
/// ask for it, each answer read before the next request, for 10 s, reconnecting when closed.
/// cairn runs with the default soft limit (1,000 units) and `--electrum-cost-hard-limit=1500`
/// (the default 10,000 takes minutes to reach, the waits growing on the way). Asserted: the attackers are throttled
/// (`cairn_electrum_throttled_total`), then closed with "excessive resource usage"
/// (`cairn_electrum_disconnects_total{reason="cost"}`), their new connections are closed at
/// accept (`cairn_electrum_connections_refused_total{reason="cost"}`: the cost outlives the
/// connections, and each connection costs 1) and get a few answers at most; they get fewer
/// than 1,000 answers in all; an honest client from 127.0.0.3 meanwhile gets `server.ping` and the tip
/// within 2 s each time, and the same `get_balance` once at the end within 2 s.
///
/// *Fails before the fix:* nothing was charged: the attackers got 31,911 answers in the 10 s
/// (51 million rows read; run without the flag, which the old code does not know), now about 50.
#[test]
fn costly_requests_are_charged_to_their_host() {
    let served = Served::start(&["--electrum-cost-hard-limit=1500"]);
    let busy = served.make_busy();
    let sh = electrum_script_hash(&served.node, &busy);

    let honest = served.honest_electrum();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let attackers: Vec<_> = (0..4)
        .map(|_| {
            let (stop, sh, to) = (stop.clone(), sh.clone(), served.electrum);
            std::thread::spawn(move || balance_flood("127.0.0.2", to, &sh, &stop))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(10));
    stop.store(true, Ordering::SeqCst);
    let seen: Vec<Charged> = attackers.into_iter().map(|a| a.join().unwrap()).collect();
    let report = honest.stop();
    let answers: u64 = seen.iter().map(|s| s.answers).sum();
    let closed: u64 = seen.iter().map(|s| s.closed_for_cost).sum();
    let (throttled, cut) = (
        served.metric("cairn_electrum_throttled_total"),
        served.metric(&disconnects("cost")),
    );
    println!(
        "attackers: {answers} answers, closed {closed} times for their cost; {throttled} requests \
         throttled, {cut} sessions cut; honest: {} visits, worst {:?}",
        report.tries, report.worst
    );
    // A new connection of theirs: closed at its first request.
    let again = AtomicBool::new(false);
    let once = std::thread::scope(|scope| {
        let flood = scope.spawn(|| balance_flood("127.0.0.2", served.electrum, &sh, &again));
        std::thread::sleep(Duration::from_secs(2));
        again.store(true, Ordering::SeqCst);
        flood.join().unwrap()
    });
    println!(
        "reconnected: {} answers, closed {} times",
        once.answers, once.closed_for_cost
    );
    let mut c = Lines::connect_from("127.0.0.3", served.electrum, "1.4");
    let asked = Instant::now();
    let balance = c.call("blockchain.scripthash.get_balance", json!([sh]));
    let honest_balance = asked.elapsed();
    println!("the honest client's get_balance: {honest_balance:?}: {balance}");

    assert!(answers < 1_000, "the attackers got {answers} answers");
    assert!(throttled > 0.0, "nothing throttled");
    assert!(closed > 0 && cut > 0.0, "no session closed for its cost");
    // Its cost decays by 10 a second meanwhile: a few answers may come before it is back at
    // the hard limit.
    assert!(
        once.answers <= 5,
        "a reconnected attacker got {} answers",
        once.answers
    );
    let at_accept = served.metric(&refused("cost"));
    println!("connections refused at accept for their host's cost: {at_accept}");
    assert!(at_accept > 0.0, "no connection refused for its host's cost");
    assert_served_within(&report, Duration::from_secs(2));
    assert!(
        balance.get("result").is_some(),
        "honest get_balance: {balance}"
    );
    assert!(honest_balance < Duration::from_secs(2));
}

/// **Answers built on the connection's task take one of the runtime's two workers at most.**
///
/// Eight connections from 127.0.0.2 ask for a header (answered from memory, so tried inline)
/// as fast as they read the answers, for 6 s, with the cost limits off so that only the inline
/// place and the pool's shares stand between them and the workers. Asserted: they are answered
/// (inline, and in the pool when the one inline place is taken: `skipped`), and an honest client
/// from 127.0.0.3 gets `server.ping` and the tip within 2 s each visit meanwhile.
#[test]
fn answers_from_memory_leave_a_worker_to_everyone_else() {
    let served = Served::start(&[
        "--electrum-cost-soft-limit=0",
        "--electrum-cost-hard-limit=0",
    ]);
    let honest = served.honest_electrum();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let attackers: Vec<_> = (0..8)
        .map(|i| {
            let (stop, to) = (stop.clone(), served.electrum);
            let request = json!({"jsonrpc": "2.0", "id": 1, "method": "blockchain.block.header",
                                 "params": [i]});
            std::thread::spawn(move || flood("127.0.0.2", to, "1.4", &request, &stop))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(6));
    stop.store(true, Ordering::SeqCst);
    let answers: u64 = attackers
        .into_iter()
        .map(|a| a.join().unwrap().answers)
        .sum();
    let report = honest.stop();
    let inline = |outcome: &str| {
        served.metric(&format!(
            "cairn_inline_answers_total{{outcome=\"{outcome}\",server=\"electrum\"}}"
        ))
    };
    let (answered, skipped) = (inline("answered"), inline("skipped"));
    println!(
        "attackers: {answers} answers ({answered} inline, {skipped} skipped to the pool); \
         honest: {} visits, worst {:?}",
        report.tries, report.worst
    );
    assert!(
        answers > 1_000,
        "the attackers were answered {answers} times"
    );
    assert!(
        answered > 0.0 && skipped > 0.0,
        "inline {answered}, skipped {skipped}"
    );
    assert_served_within(&report, Duration::from_secs(2));
}

/// What one HTTP cost attacker saw: answers, 429s, and connections closed with no answer (at
/// accept, for its host's cost).
#[derive(Default)]
struct HttpCharged {
    answers: u64,
    too_many: u64,
    closed: u64,
}

/// Reads one HTTP/1.1 answer (its head, then a body of its `Content-Length`): its status and
/// whether it says when to try again (`Retry-After`), or `None` when the connection ends first.
fn http_answer(reader: &mut BufReader<TcpStream>) -> Option<(u16, bool)> {
    let (mut status, mut length, mut retry_after) = (None, 0usize, false);
    loop {
        let mut line = String::new();
        match std::io::BufRead::read_line(reader, &mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) if line == "\r\n" => break,
            Ok(_) if status.is_none() => status = line.split_whitespace().nth(1)?.parse().ok(),
            Ok(_) => {
                let (name, value) = line.split_once(':')?;
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().ok()?;
                }
                retry_after |= name.eq_ignore_ascii_case("retry-after");
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    Some((status?, retry_after))
}

/// Asks `GET path` from `from` on one keep-alive connection after another, each answer read
/// before the next request, until `stop`.
fn http_flood(from: &str, to: SocketAddr, path: &str, stop: &AtomicBool) -> HttpCharged {
    let mut seen = HttpCharged::default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: cairn\r\n\r\n");
    while !stop.load(Ordering::SeqCst) {
        let Some((mut s, mut reader)) = reconnect(from, to) else {
            continue;
        };
        let mut answered = false;
        while !stop.load(Ordering::SeqCst) {
            let sent = s.write_all(request.as_bytes()).is_ok();
            match http_answer(&mut reader).filter(|_| sent) {
                Some((200, _)) => seen.answers += 1,
                Some((429, retry_after)) => {
                    assert!(retry_after, "a 429 without Retry-After");
                    seen.too_many += 1;
                    break;
                }
                Some((other, _)) => panic!("an attacker's answer: {other}"),
                None => {
                    seen.closed += u64::from(!answered);
                    std::thread::sleep(Duration::from_millis(50));
                    break;
                }
            }
            answered = true;
        }
    }
    seen
}

/// Issue 28: **HTTP requests were charged to nobody.** The Electrum server charges every
/// request to its host's cost (ElectrumX's rules); the HTTP server, which serves the same
/// reads (Esplora's address, block and transaction pages, silent-payment tweaks, a broadcast's
/// checks), kept no account: a host could keep half the query pool reading for ever.
///
/// The wallet's address gets 1,601 transactions, so each `GET /address/{it}` reads 1,601 rows
/// and as many transactions from the block files for a 200-byte answer. Four keep-alive
/// connections from 127.0.0.2 ask for it, each answer read before the next request, for 10 s,
/// reconnecting when closed; cairn runs with `--http-cost-soft-limit=1000
/// --http-cost-hard-limit=1500` (the defaults, 10,000 and 100,000, take minutes to reach).
/// Asserted: the attackers are throttled
/// (`cairn_http_throttled_total`), then answered 429 with `Retry-After`, and their new
/// connections are closed at accept (`cairn_http_connections_refused_total{reason="cost"}`);
/// they get fewer than 100 answers; an honest client from 127.0.0.3 meanwhile gets
/// `/blocks/tip/height` within 2 s each time, and the same address page within 2 s at the end.
///
/// *Fails before the fix:* nothing was charged: the attackers got 338 answers in the 10 s
/// (about 54,000 units' worth; measured with the limits off, `--http-cost-soft-limit=0
/// --http-cost-hard-limit=0`, which is the code before the fix: no verdict, no refusal), now 9,
/// with 737 connections closed at accept.
#[test]
fn costly_http_requests_are_charged_to_their_host() {
    let (served, http) = Served::with_low_http_cost_limits();
    let busy = served.make_busy();
    http_cost_attack(
        &served,
        http,
        &format!("/address/{busy}"),
        ("/blocks/tip/height", 200),
    );
}

/// Four connections from 127.0.0.2 ask for `path` as fast as they are answered for 10 s, while
/// an honest client from 127.0.0.3 asks for `honest` (the status it expects) every 250 ms.
/// Asserted: the attackers get fewer than 100 answers, are throttled, answered 429 and refused
/// at accept; the honest client is answered within 2 s throughout, and `path` itself within 2 s
/// after.
fn http_cost_attack(served: &Served, http: SocketAddr, path: &str, honest: (&'static str, u16)) {
    let (honest_path, honest_status) = honest;
    let honest = Honest::visiting(Duration::from_millis(250), move || {
        match http_from("127.0.0.3", http, honest_path, HONEST_WITHIN) {
            Ok(status) if status == honest_status => Ok(()),
            other => Err(format!("{honest_path}: {other:?}")),
        }
    });
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let attackers: Vec<_> = (0..4)
        .map(|_| {
            let (stop, path) = (stop.clone(), path.to_string());
            std::thread::spawn(move || http_flood("127.0.0.2", http, &path, &stop))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(10));
    stop.store(true, Ordering::SeqCst);
    let seen: Vec<HttpCharged> = attackers.into_iter().map(|a| a.join().unwrap()).collect();
    let report = honest.stop();
    let sum = |f: fn(&HttpCharged) -> u64| seen.iter().map(f).sum::<u64>();
    let (answers, too_many, closed) = (sum(|s| s.answers), sum(|s| s.too_many), sum(|s| s.closed));
    let throttled = served.metric("cairn_http_throttled_total");
    let at_accept =
        served.metric("cairn_http_connections_refused_total{listener=\"HTTP\",reason=\"cost\"}");
    println!(
        "attackers: {answers} answers, {too_many} answered 429, {closed} closed unanswered; \
         {throttled} requests throttled, {at_accept} connections refused at accept; honest: {} \
         visits, worst {:?}",
        report.tries, report.worst
    );
    let (status, head, _) = common::http::get(http, "/blocks/tip/height");
    assert_eq!(status, 200, "from the exempt 127.0.0.1: {head}");
    let asked = Instant::now();
    let page = http_from("127.0.0.3", http, path, Duration::from_secs(2));
    let honest_page = asked.elapsed();
    println!("the honest client's {path}: {page:?} in {honest_page:?}");

    assert!(answers < 100, "the attackers got {answers} answers");
    assert!(throttled > 0.0, "nothing throttled");
    assert!(too_many > 0, "no request answered 429");
    assert!(at_accept > 0.0, "no connection refused for its host's cost");
    assert_served_within(&report, Duration::from_secs(2));
    assert_eq!(page, Ok(200));
    assert!(honest_page < Duration::from_secs(2));
}

/// A signed transaction of bitcoind's wallet paying 1 BTC to itself, not broadcast.
fn unsent_payment(node: &Bitcoind) -> String {
    let to = node.rpc(&["getnewaddress"]);
    let outputs = json!({ to: 1.0 }).to_string();
    let raw = node.rpc(&["createrawtransaction", "[]", &outputs]);
    let funded = node.rpc_json(&["fundrawtransaction", &raw]);
    let signed = node.rpc_json(&[
        "signrawtransactionwithwallet",
        funded["hex"].as_str().unwrap(),
    ]);
    assert_eq!(signed["complete"], true);
    signed["hex"].as_str().unwrap().to_string()
}

/// Issue 27: **a flood of dry runs was nearly free.** `testmempoolaccept` (Electrum 1.7) runs
/// every check of a broadcast, the signatures included, and keeps nothing, so it can be asked
/// again and again with one valid transaction.
///
/// Four connections from 127.0.0.2 ask for the dry run of one valid, signed wallet payment for
/// 10 s, each answer read before the next request, reconnecting when closed; cairn runs with
/// `--electrum-cost-hard-limit=1500` as in the test above. Asserted: the attackers get fewer
/// than 1,000 dry runs and are throttled (or closed) for their cost, and an honest client from
/// 127.0.0.3
/// meanwhile gets `server.ping` within 2 s each time, then the same dry run (allowed) and a
/// broadcast of that payment within 2 s each.
///
/// *Fails before the fix* (d461d85, where an allowed dry run was charged as an accepted
/// broadcast, its bytes only, about 0.2 units): the attackers got 3,736 dry runs in the 10 s;
/// now 144 (each costs a refused broadcast's 10 units more).
#[test]
fn dry_runs_are_charged_to_their_host() {
    let served = Served::start(&["--electrum-cost-hard-limit=1500"]);
    let payment = unsent_payment(&served.node);
    let request = json!({"jsonrpc": "2.0", "id": 1,
                         "method": "blockchain.transaction.testmempoolaccept",
                         "params": [[payment]]});

    let honest = served.honest_electrum();
    let stop = AtomicBool::new(false);
    let seen: Vec<Charged> = std::thread::scope(|scope| {
        let attackers: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| flood("127.0.0.2", served.electrum, "1.7", &request, &stop)))
            .collect();
        std::thread::sleep(Duration::from_secs(10));
        stop.store(true, Ordering::SeqCst);
        attackers.into_iter().map(|a| a.join().unwrap()).collect()
    });
    let report = honest.stop();
    let answers: u64 = seen.iter().map(|s| s.answers).sum();
    let closed: u64 = seen.iter().map(|s| s.closed_for_cost).sum();
    println!(
        "attackers: {answers} dry runs, closed {closed} times for their cost; honest: {} visits, \
         worst {:?}",
        report.tries, report.worst
    );
    let mut c = Lines::connect_from("127.0.0.3", served.electrum, "1.7");
    let asked = Instant::now();
    let tried = c.call(
        "blockchain.transaction.testmempoolaccept",
        json!([[payment]]),
    );
    let tried_in = asked.elapsed();
    let asked = Instant::now();
    let sent = c.call("blockchain.transaction.broadcast", json!([payment]));
    let sent_in = asked.elapsed();
    println!("the honest client's dry run: {tried_in:?}: {tried}; broadcast {sent_in:?}: {sent}");

    let throttled = served.metric("cairn_electrum_throttled_total");
    println!("requests throttled: {throttled}");
    assert!(answers < 1_000, "the attackers got {answers} dry runs");
    assert!(
        throttled > 0.0 || closed > 0,
        "the attackers were neither slowed nor closed"
    );
    assert_served_within(&report, Duration::from_secs(2));
    assert_eq!(tried["result"][0]["allowed"], true, "{tried}");
    assert!(sent["result"].is_string(), "{sent}");
    assert!(tried_in < Duration::from_secs(2) && sent_in < Duration::from_secs(2));
}

/// Clusters in the replacement attack, as many as one replacement may conflict with.
const CLUSTERS: usize = 100;
/// Transactions in each, Core 31's cluster limit.
const CLUSTER_SIZE: usize = 64;
/// Each cluster's coin.
const CLUSTER_COIN: u64 = 2_000_000;
/// What each cluster's first transaction pays: 5,200 sat/vB, well above what follows it.
const ROOT_FEE: u64 = 500_000;
/// What each of the 63 after it pays: about 0.5 sat/vB.
const CHAIN_FEE: u64 = 50;

/// An output of `btc` the wallet pays to [`anyone`] (unconfirmed).
fn anyone_funded(served: &Served, btc: &str) -> bitcoin::OutPoint {
    let funding = served.node.rpc(&["sendtoaddress", &anyone::address(), btc]);
    let funding_tx = served
        .node
        .rpc_json(&["getrawtransaction", &funding, "true"]);
    let vout = funding_tx["vout"]
        .as_array()
        .unwrap()
        .iter()
        .position(|o| o["scriptPubKey"]["address"] == anyone::address().as_str())
        .unwrap() as u32;
    bitcoin::OutPoint::new(bitcoin::Txid::from_str(&funding).unwrap(), vout)
}

/// The coins of the attack: `CLUSTERS` coins of `CLUSTER_COIN` and the attacker's of 3 BTC,
/// confirmed, all spendable by [`anyone`]; cairn has indexed them.
fn anyone_coins(served: &Served) -> (Vec<bitcoin::OutPoint>, bitcoin::OutPoint, u64) {
    use bitcoin::OutPoint;
    let funded = anyone_funded(served, "5");
    let attacker_sat = 500_000_000 - CLUSTERS as u64 * CLUSTER_COIN - 10_000;
    let mut outputs: Vec<_> = (0..CLUSTERS).map(|_| anyone::out(CLUSTER_COIN)).collect();
    outputs.push(anyone::out(attacker_sat));
    let split = anyone::spend(&[funded], outputs);
    served
        .node
        .rpc(&["sendrawtransaction", &anyone::hex(&split)]);
    served.node.rpc(&["generatetoaddress", "1", &served.mine]);
    served
        .cairn
        .wait_for(&served.node.rpc(&["getbestblockhash"]), "the split");
    let txid = split.compute_txid();
    let coins = (0..CLUSTERS as u32)
        .map(|i| OutPoint::new(txid, i))
        .collect();
    (coins, OutPoint::new(txid, CLUSTERS as u32), attacker_sat)
}

/// A chain of [`CLUSTER_SIZE`] transactions from `coin` into cairn's mempool: a first that pays
/// [`ROOT_FEE`], then each spending the one before for [`CHAIN_FEE`]. Broadcast from 127.0.0.1
/// on a connection of its own (an exempt connection's cost is its own).
fn chain_into_mempool(served: &Served, coin: bitcoin::OutPoint) {
    let mut c = Lines::connect_from("127.0.0.1", served.electrum, "1.4");
    let mut from = (coin, CLUSTER_COIN - ROOT_FEE);
    let mut first = true;
    for _ in 0..CLUSTER_SIZE {
        let fee = if first { 0 } else { CHAIN_FEE };
        first = false;
        let tx = anyone::spend(&[from.0], vec![anyone::out(from.1 - fee)]);
        let sent = c.call(
            "blockchain.transaction.broadcast",
            json!([anyone::hex(&tx)]),
        );
        assert!(sent["result"].is_string(), "{sent}");
        from = (bitcoin::OutPoint::new(tx.compute_txid(), 0), from.1 - fee);
    }
}

/// Inputs of the transaction built for signature checks: 150 P2SH 1-of-15 multisig inputs
/// (each about 630 bytes: the transaction stays under 100 kvB).
const MULTISIG_INPUTS: usize = 150;
/// Variants of it (other signatures, the same checks).
const VARIANTS: usize = 12;

/// A standard transaction that makes as many signature checks as a wallet may: `MULTISIG_INPUTS`
/// confirmed P2SH 1-of-15 outputs, each spent with a signature by the fifteenth key, so that
/// `OP_CHECKMULTISIG` tries all fifteen (2,250 checks a run); and an anyone-can-spend coin for
/// the honest client. Returns [`VARIANTS`] such transactions (each paying a satoshi more in
/// fees), and the honest coin with its value.
fn multisig_checks_tx(served: &Served) -> (Vec<String>, (bitcoin::OutPoint, u64)) {
    use bitcoin::secp256k1::{Message, Secp256k1, SecretKey};
    use bitcoin::sighash::{EcdsaSighashType, SighashCache};
    use bitcoin::{Amount, OutPoint, ScriptBuf, TxOut};
    let secp = Secp256k1::new();
    let keys: Vec<SecretKey> = (1..=15u8)
        .map(|i| SecretKey::from_slice(&[i; 32]).unwrap())
        .collect();
    let mut redeem = bitcoin::script::Builder::new().push_int(1);
    for key in &keys {
        redeem = redeem.push_slice(key.public_key(&secp).serialize());
    }
    let redeem = redeem
        .push_int(15)
        .push_opcode(bitcoin::opcodes::all::OP_CHECKMULTISIG)
        .into_script();
    let p2sh = ScriptBuf::new_p2sh(&redeem.script_hash());
    let funded = anyone_funded(served, "2");
    // The 2 BTC split into as many coins, 0.001 BTC to the miners.
    let coin = (200_000_000 - 100_000) / (MULTISIG_INPUTS as u64 + 1);
    let mut outputs: Vec<TxOut> = (0..MULTISIG_INPUTS)
        .map(|_| TxOut {
            value: Amount::from_sat(coin),
            script_pubkey: p2sh.clone(),
        })
        .collect();
    outputs.push(anyone::out(coin));
    let split = anyone::spend(&[funded], outputs);
    served
        .node
        .rpc(&["sendrawtransaction", &anyone::hex(&split)]);
    served.node.rpc(&["generatetoaddress", "1", &served.mine]);
    served.cairn.wait_for(
        &served.node.rpc(&["getbestblockhash"]),
        "the multisig coins",
    );
    let txid = split.compute_txid();
    let coins: Vec<OutPoint> = (0..MULTISIG_INPUTS as u32)
        .map(|i| OutPoint::new(txid, i))
        .collect();
    // Each variant pays a satoshi more in fees: other signatures, the same checks.
    let variants = (0..VARIANTS as u64)
        .map(|extra| {
            let paid = coin * MULTISIG_INPUTS as u64 - 300_000 - extra;
            let mut tx = anyone::spend(&coins, vec![anyone::out(paid)]);
            let cache = SighashCache::new(tx.clone());
            let script_sigs: Vec<ScriptBuf> = (0..tx.input.len())
                .map(|i| {
                    let hash = cache
                        .legacy_signature_hash(i, &redeem, EcdsaSighashType::All.to_u32())
                        .unwrap();
                    let msg = Message::from_digest(bitcoin::hashes::Hash::to_byte_array(hash));
                    let mut sig = secp.sign_ecdsa(&msg, &keys[14]).serialize_der().to_vec();
                    sig.push(EcdsaSighashType::All as u8);
                    let sig = <&bitcoin::script::PushBytes>::try_from(sig.as_slice()).unwrap();
                    let redeem =
                        <&bitcoin::script::PushBytes>::try_from(redeem.as_bytes()).unwrap();
                    bitcoin::script::Builder::new()
                        .push_int(0)
                        .push_slice(sig)
                        .push_slice(redeem)
                        .into_script()
                })
                .collect();
            for (input, script_sig) in tx.input.iter_mut().zip(script_sigs) {
                input.script_sig = script_sig;
                input.witness = bitcoin::Witness::new();
            }
            anyone::hex(&tx)
        })
        .collect();
    let honest = OutPoint::new(txid, MULTISIG_INPUTS as u32);
    (variants, (honest, coin))
}

/// Attack: **a dry run of a transaction built for signature checks, again and again.**
/// `testmempoolaccept` was charged after its checks (a row per 20 bytes and the legacy
/// hashing, no signature checks), and ran them again for every repeat. The transaction: 150
/// P2SH 1-of-15 inputs signed by the fifteenth key (Core 31.99 allows it: the oracle is asked
/// first). From 127.0.1.2 and 127.0.2.2, 40 dry runs of it each (a host closed for its cost
/// reconnects); beside them an honest broadcast from 127.0.0.3. Asserted: every answer that
/// comes is Core's (`allowed`); cairn spends at most 0.4 s of CPU on the 80; the honest broadcast
/// is taken within 2 s. Then 12 variants (other signatures) from 127.0.3.2, under a hard limit
/// of 5,000 (each is estimated at about 615 units): some are refused
/// before they run (`cairn_electrum_refused_ahead_total`), the session then closed. What holds:
/// the dry run's verdict is kept while the mempool and the tip stay (as Core's script cache),
/// and a repeat costs a refusal's 10 units and its bytes, its checks not run; what a dry run is
/// estimated to cost, 5 rows for each signature check included, is charged before it runs.
///
/// *Fails before the fix* (1712e6d): every repeat ran its checks again (cairn's CPU 0.47 s for
/// 24 of them, each host closed for its cost after 12; now 0.06 s for all 80), and no variant
/// was refused before it ran.
#[test]
fn repeated_dry_runs_of_a_signature_heavy_transaction_run_once() {
    let served = Served::start(&[
        "--electrum-cost-soft-limit=4000",
        "--electrum-cost-hard-limit=5000",
    ]);
    let (variants, honest_coin) = multisig_checks_tx(&served);
    let hex = variants[0].clone();
    // The oracle: Core 31.99 following the wallet's node (Knots counts the redeem scripts as
    // data and refuses the transaction).
    let (_core_dir, core) = core_following(&served);
    let oracle = core.rpc_json_stdin("testmempoolaccept", &[&json!([hex]).to_string()]);
    assert_eq!(oracle[0]["allowed"], true, "Core 31.99: {oracle}");
    let method = "blockchain.transaction.testmempoolaccept";
    let cpu_before = served.cairn.cpu_seconds();
    let started = Instant::now();
    let attackers: Vec<std::thread::JoinHandle<(usize, usize)>> = ["127.0.1.2", "127.0.2.2"]
        .into_iter()
        .map(|from| {
            let (e, hex) = (served.electrum, hex.clone());
            std::thread::spawn(move || {
                let (mut answered, mut refused) = (0, 0);
                let mut c = Lines::connect_from(from, e, "1.7");
                for _ in 0..40 {
                    match c.try_call(method, json!([[hex]])) {
                        Some(a) if a["result"][0]["allowed"] == true => answered += 1,
                        Some(a) => {
                            assert_eq!(a["error"]["code"], -101, "{a}");
                            refused += 1;
                        }
                        None => {
                            match std::panic::catch_unwind(|| Lines::connect_from(from, e, "1.7")) {
                                Ok(again) => c = again,
                                Err(_) => break,
                            }
                        }
                    }
                }
                (answered, refused)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let (honest_coin, honest_sat) = honest_coin;
    let honest_tx = anyone::spend(&[honest_coin], vec![anyone::out(honest_sat - 1_000)]);
    let mut honest = Lines::connect_from("127.0.0.3", served.electrum, "1.4");
    let asked = Instant::now();
    let sent = honest.call(
        "blockchain.transaction.broadcast",
        json!([anyone::hex(&honest_tx)]),
    );
    let honest_took = asked.elapsed();
    let results: Vec<(usize, usize)> = attackers.into_iter().map(|t| t.join().unwrap()).collect();
    let cpu = served.cairn.cpu_seconds() - cpu_before;
    println!(
        "80 dry runs of {} inputs from two hosts: {results:?} (answered, refused) in {:?}, \
         cairn's CPU {cpu:.2} s; the honest broadcast taken in {honest_took:?}",
        MULTISIG_INPUTS,
        started.elapsed()
    );
    assert!(sent["result"].is_string(), "{sent}");
    assert!(honest_took < Duration::from_secs(2), "{honest_took:?}");
    assert!(cpu < 0.4, "cairn spent {cpu:.2} s of CPU on the dry runs");

    // Variants, each its own dry run, from a host of another /24: each is charged its estimate
    // before it runs, and once that takes the host to the hard limit it is refused unrun and
    // the session closed.
    let method_refused = "cairn_electrum_refused_ahead_total";
    let before = served.metric(method_refused);
    let cpu_before = served.cairn.cpu_seconds();
    let mut c = Lines::connect_from("127.0.3.2", served.electrum, "1.7");
    let (mut ran, mut refused) = (0, 0);
    for hex in &variants {
        match c.try_call(method, json!([[hex]])) {
            Some(a) if a["result"][0]["allowed"] == true => ran += 1,
            Some(a) if a["error"]["code"] == -101 => refused += 1,
            // Closed for its cost after the refusal.
            None => break,
            Some(other) => panic!("{other}"),
        }
    }
    let cpu = served.cairn.cpu_seconds() - cpu_before;
    let refused_ahead = served.metric(method_refused) - before;
    println!(
        "{VARIANTS} variants from one host: {ran} run, {refused} refused ({refused_ahead} before \
         running), cairn's CPU {cpu:.2} s"
    );
    assert!(refused_ahead >= 1.0, "no variant was refused before it ran");
    assert!(ran < VARIANTS, "every variant ran");
}

/// Bitcoin Core 31.99, the policy oracle, following `served`'s node (Knots) to its tip; with
/// the folder it keeps its data in.
fn core_following(served: &Served) -> (tempfile::TempDir, Bitcoind) {
    let core_dir = tempfile::tempdir().unwrap();
    let core = Bitcoind::start_core(
        core_dir.path(),
        &[format!("-connect=127.0.0.1:{}", served.node.p2p_port)],
    );
    let tip = served.node.rpc(&["getbestblockhash"]);
    let synced = Instant::now();
    while core.rpc(&["getbestblockhash"]) != tip {
        assert!(
            synced.elapsed() < Duration::from_secs(60),
            "Core never synced"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    (core_dir, core)
}

/// [`multisig_checks_tx`]'s transaction with its last input's signature broken (`flip` XORed
/// into a byte of its `r`): every other input's fifteen checks run before it is refused.
fn with_last_signature_broken(hex: &str, flip: u8) -> String {
    use bitcoin::hex::FromHex;
    use bitcoin::script::{Builder, Instruction, PushBytesBuf};
    let mut tx: bitcoin::Transaction =
        bitcoin::consensus::deserialize(&Vec::<u8>::from_hex(hex).unwrap()).unwrap();
    let last = tx.input.last_mut().unwrap();
    let pushes: Vec<Vec<u8>> = last
        .script_sig
        .instructions()
        .map(|i| match i.unwrap() {
            Instruction::PushBytes(bytes) => bytes.as_bytes().to_vec(),
            Instruction::Op(_) => Vec::new(),
        })
        .collect();
    let mut sig = pushes[1].clone();
    sig[6] ^= flip;
    last.script_sig = Builder::new()
        .push_int(0)
        .push_slice(PushBytesBuf::try_from(sig).unwrap())
        .push_slice(PushBytesBuf::try_from(pushes[2].clone()).unwrap())
        .into_script();
    anyone::hex(&tx)
}

/// Attack: **a refused broadcast over HTTP, again and again.** `POST /tx` was charged after its
/// checks and ran them again for every repeat. The transaction: [`MULTISIG_INPUTS`] P2SH
/// 1-of-15 inputs signed by the fifteenth key, the last input's signature broken, so every
/// other input's checks run before the refusal (Core 31.99 refuses it too: the oracle is asked
/// first). From 127.0.1.2 and 127.0.2.2, 40 posts of it each; beside them an honest broadcast
/// from 127.0.0.3. Asserted: every post is answered with Core's reason, none refused for its
/// host's cost; cairn spends at most 0.4 s of CPU on the 80; the honest broadcast is taken
/// within 2 s. Then 30 other broken transactions
/// (another byte flipped in each) from 127.0.3.2, under a hard limit of 12,000 (each is
/// estimated at about 615 units): the one that would cross it is refused before it runs
/// (`cairn_http_refused_ahead_total`, 429), later ones closed at accept.
///
/// *Fails before the fix* (457f01b): every repeat ran its checks again, charged about 615 units,
/// so each host reached the hard limit after 19 (the other 21 refused for cost; cairn's CPU
/// 0.41 s for the 38 that ran, 0.05 s now for all 80), and nothing was refused before it ran.
#[test]
fn repeated_refused_broadcasts_over_http_run_once() {
    let http = free_addr();
    let flag = format!("--http-addr={http}");
    let served = Served::start(&[
        &flag,
        "--http-cost-soft-limit=0",
        "--http-cost-hard-limit=12000",
    ]);
    let (variants, (honest_coin, honest_sat)) = multisig_checks_tx(&served);
    let broken = with_last_signature_broken(&variants[0], 1);
    let (_core_dir, core) = core_following(&served);
    let oracle = core.rpc_json_stdin("testmempoolaccept", &[&json!([broken]).to_string()]);
    assert_eq!(oracle[0]["allowed"], false, "Core 31.99: {oracle}");
    let reason = oracle[0]["reject-reason"].as_str().unwrap().to_string();
    let reason = reason.split(" (").next().unwrap().to_string();
    let cpu_before = served.cairn.cpu_seconds();
    let attackers: Vec<std::thread::JoinHandle<(usize, usize)>> = ["127.0.1.2", "127.0.2.2"]
        .into_iter()
        .map(|from| {
            let (broken, reason) = (broken.clone(), reason.clone());
            std::thread::spawn(move || {
                let (mut refused, mut over_cost) = (0, 0);
                for _ in 0..40 {
                    let (status, _, body) = common::http::post_from(from, http, "/tx", &broken);
                    match status {
                        400 => {
                            assert!(body.contains(&reason), "{body}, Core: {reason}");
                            refused += 1;
                        }
                        // Answered 429, or closed at accept: at the hard limit.
                        429 | 0 => over_cost += 1,
                        other => panic!("{other} {body}"),
                    }
                }
                (refused, over_cost)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let honest_tx = anyone::spend(&[honest_coin], vec![anyone::out(honest_sat - 1_000)]);
    let asked = Instant::now();
    let (status, _, body) =
        common::http::post_from("127.0.0.3", http, "/tx", &anyone::hex(&honest_tx));
    let honest_took = asked.elapsed();
    let results: Vec<(usize, usize)> = attackers.into_iter().map(|t| t.join().unwrap()).collect();
    let cpu = served.cairn.cpu_seconds() - cpu_before;
    println!(
        "80 posts of a refused transaction of {MULTISIG_INPUTS} inputs from two hosts: \
         {results:?} (refused, over cost), cairn's CPU {cpu:.2} s; the honest broadcast \
         taken in {honest_took:?}"
    );
    assert_eq!(status, 200, "{body}");
    assert!(honest_took < Duration::from_secs(2), "{honest_took:?}");
    // Checked once, a repeat costs a refusal's 10 units: 40 stay far under the hard limit.
    assert_eq!(
        results,
        [(40, 0), (40, 0)],
        "posts answered, refused for cost"
    );
    assert!(cpu < 0.4, "cairn spent {cpu:.2} s of CPU on the posts");

    // Other broken transactions, each checked: each pays its estimate before it runs, and once
    // that takes the host to the hard limit it is refused unrun.
    let ahead = "cairn_http_refused_ahead_total";
    let before = served.metric(ahead);
    let (mut ran, mut refused) = (0, 0);
    for flip in 2..32u8 {
        let hex = with_last_signature_broken(&variants[0], flip);
        match common::http::post_from("127.0.3.2", http, "/tx", &hex) {
            (400, _, _) => ran += 1,
            (429, _, _) => refused += 1,
            // Closed at accept: the host is at the hard limit.
            (0, _, _) => refused += 1,
            (status, _, body) => panic!("{status} {body}"),
        }
    }
    let refused_ahead = served.metric(ahead) - before;
    println!("30 broken transactions from 127.0.3.2: {ran} checked, {refused} refused ({refused_ahead} before they ran)");
    assert!(refused_ahead >= 1.0, "none refused before it ran");
    assert!(ran <= 20, "{ran} checked under a hard limit of 12,000");
}

/// Issue 48: **a replacement cycle makes the cluster mempool linearize what it conflicts
/// with**, refused or not: Core 31 judges a replacement by the fee-rate diagram of every
/// cluster it changes, before and after, and a refused one pays nothing.
///
/// cairn's mempool holds 100 clusters of 64 (each a chain whose first transaction pays 5,200
/// sat/vB and the rest about 0.5). From 127.0.0.2, the attacker sends on one connection, again
/// and again (each with other data), a transaction of 24 kvB that spends the coins of all 100
/// and pays more than all 6,400 together, at 2,100 sat/vB: below the chains' first
/// transactions, so it worsens the diagram and is refused (`replacement-failed`) after both
/// diagrams are drawn, 200 clusters linearized. cairn runs with a hard cost limit of 1,000
/// units (soft 990, 1 a second forgiven). Asserted: every attempt is refused for its diagram,
/// the connection is closed for its cost after at most 20 (each costs about 64 units: 24 for
/// its checks, 10 for its bytes on the wire, 10 for the refusal and 20 for the 200 clusters
/// linearized); an honest client from 127.0.0.3 is
/// served within 2 s meanwhile, and its own replacement of one chain, which improves the
/// diagram, is taken within 2 s.
///
/// *Fails before the fix* (before 791dd20, where a broadcast was charged its bytes and the refusal,
/// not the linearization it caused): the attacker got 23 attempts before it was closed; now 16.
#[test]
fn replacement_cycles_pay_for_the_clusters_they_linearize() {
    let served = Served::start(&[
        "--electrum-cost-soft-limit=990",
        "--electrum-cost-hard-limit=1000",
        "--electrum-cost-decay-per-sec=1",
    ]);
    let (coins, attacker_coin, attacker_sat) = anyone_coins(&served);
    let filled = Instant::now();
    for &coin in &coins {
        chain_into_mempool(&served, coin);
    }
    println!(
        "100 chains of 64 in cairn's mempool in {:?}",
        filled.elapsed()
    );

    let old_fees = CLUSTERS as u64 * (ROOT_FEE + (CLUSTER_SIZE as u64 - 1) * CHAIN_FEE);
    let fee = old_fees + 1_000_000;
    let mut spent: Vec<_> = coins.clone();
    spent.push(attacker_coin);
    let kept = CLUSTERS as u64 * CLUSTER_COIN + attacker_sat - fee;
    let attempt = |n: u32| {
        let mut data = vec![0x6a, 0x4d, 0x20, 0x4e]; // OP_RETURN, a push of 20,000 bytes
        data.extend(std::iter::repeat_n(0u8, 19_996));
        data.extend(n.to_le_bytes());
        let carrier = bitcoin::TxOut {
            value: bitcoin::Amount::ZERO,
            script_pubkey: bitcoin::ScriptBuf::from_bytes(data),
        };
        anyone::hex(&anyone::spend(&spent, vec![anyone::out(kept), carrier]))
    };

    let honest = served.honest_electrum();
    let cpu = served.cairn.cpu_seconds();
    let began = Instant::now();
    let mut attacker = Lines::connect_from("127.0.0.2", served.electrum, "1.4");
    let mut refused = 0;
    let closed = loop {
        let answer = attacker.try_call(
            "blockchain.transaction.broadcast",
            json!([attempt(refused)]),
        );
        match answer {
            Some(a) if a.to_string().contains("replacement-failed") => refused += 1,
            Some(a) if a.to_string().contains("excessive resource usage") => break true,
            Some(a) => panic!("the attacker's replacement: {a}"),
            None => break true,
        }
        if refused > 200 {
            break false;
        }
    };
    let spent_cpu = served.cairn.cpu_seconds() - cpu;
    let report = honest.stop();
    println!(
        "attacker: {refused} replacements refused in {:?}, then closed: {closed}; cairn's CPU \
         {spent_cpu:.2} s; honest: {} visits, worst {:?}",
        began.elapsed(),
        report.tries,
        report.worst
    );

    let mut c = Lines::connect_from("127.0.0.3", served.electrum, "1.4");
    let better = anyone::spend(&[coins[0]], vec![anyone::out(CLUSTER_COIN - 600_000)]);
    let asked = Instant::now();
    let sent = c.call(
        "blockchain.transaction.broadcast",
        json!([anyone::hex(&better)]),
    );
    let sent_in = asked.elapsed();
    println!("the honest replacement: {sent_in:?}: {sent}");

    assert!(closed, "the attacker was never closed");
    assert!(refused > 0, "no replacement reached its diagram");
    assert!(
        refused <= 20,
        "the attacker had {refused} replacements judged"
    );
    assert_served_within(&report, Duration::from_secs(2));
    assert_eq!(sent["result"], better.compute_txid().to_string(), "{sent}");
    assert!(sent_in < Duration::from_secs(2));
}

/// A taproot script-path spend of `coin` (worth `value` sat) back to `to`, whose leaf is
/// `leaf` (its control block made up: no check reaches it before the data count).
fn leaf_spend(coin: &Value, to: &str, leaf: Vec<u8>) -> String {
    use bitcoin::hex::{DisplayHex, FromHex};
    let value = (coin["amount"].as_f64().unwrap() * 1e8).round() as u64;
    let script = Vec::<u8>::from_hex(coin["scriptPubKey"].as_str().unwrap()).unwrap();
    assert!(bitcoin::Script::from_bytes(&script).is_p2tr(), "{coin}");
    let to = bitcoin::Address::from_str(to).unwrap().assume_checked();
    let tx = bitcoin::Transaction {
        version: bitcoin::transaction::Version::TWO,
        lock_time: bitcoin::absolute::LockTime::ZERO,
        input: vec![bitcoin::TxIn {
            previous_output: bitcoin::OutPoint::new(
                coin["txid"].as_str().unwrap().parse().unwrap(),
                coin["vout"].as_u64().unwrap() as u32,
            ),
            script_sig: bitcoin::ScriptBuf::new(),
            sequence: bitcoin::Sequence::ENABLE_RBF_NO_LOCKTIME,
            witness: bitcoin::Witness::from_slice(&[leaf, [vec![0xc0], vec![0x02; 32]].concat()]),
        }],
        output: vec![bitcoin::TxOut {
            value: bitcoin::Amount::from_sat(value - 50_000),
            script_pubkey: to.script_pubkey(),
        }],
    };
    bitcoin::consensus::serialize(&tx).to_lower_hex_string()
}

/// Issue 27 review: **a script read again and again cost its size each time.** Knots's
/// constant propagation (`FindDeadParts`, run on the script an input spends before any size
/// limit of the witness) tells whether OP_IFDUP copies its argument by reading it whole, and a
/// false one stays on the stack: a 200 kB push followed by 180,000 OP_IFDUPs is 3.6e10 bytes
/// read. Anyone can send it, spending any taproot coin with a made-up leaf; it is refused, but
/// only after the count.
///
/// From 127.0.0.2, three such spends of a wallet's taproot coin are broadcast one after the
/// other. Asserted: each is refused, cairn spends under 0.5 s of CPU on the three together,
/// and an honest client from 127.0.0.3 gets `server.ping` within 2 s throughout.
///
/// *Fails before the fix* (8f28208, the truth of a value read from its bytes each time): 58.9 s
/// of CPU for the three spends, about 20 s each (now 0.05 s for the three). Knots 29.4.3's
/// `FindDeadParts` reads values the same way.
#[test]
fn a_value_read_again_and_again_costs_its_size_once() {
    let served = Served::start(&[]);
    let address = served.node.rpc(&["getnewaddress", "", "bech32m"]);
    served.node.rpc(&["sendtoaddress", &address, "1.0"]);
    served.node.rpc(&["generatetoaddress", "1", &served.mine]);
    served
        .cairn
        .wait_for(&served.node.rpc(&["getbestblockhash"]), "the taproot coin");
    // The wallet hears of the block after `generatetoaddress` returns (bitcoind's validation
    // queue): asked until its coin shows, for up to 10 s.
    let waited = Instant::now();
    let coins = loop {
        let listed =
            served
                .node
                .rpc_json(&["listunspent", "1", "9999999", &json!([address]).to_string()]);
        if listed[0].is_object() || waited.elapsed() > Duration::from_secs(10) {
            break listed;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let coin = &coins[0];
    // PUSHDATA4 of 200,000 zero bytes, then OP_IFDUP 180,000 times.
    let mut leaf = vec![0x4e];
    leaf.extend(200_000u32.to_le_bytes());
    leaf.extend(vec![0u8; 200_000]);
    leaf.extend(vec![0x73; 180_000]);
    let raw = leaf_spend(coin, &served.node.rpc(&["getnewaddress"]), leaf);

    let honest = served.honest_electrum();
    let mut attacker = Lines::connect_from("127.0.0.2", served.electrum, "1.7");
    let before = served.cairn.cpu_seconds();
    let started = Instant::now();
    let mut refusals = Vec::new();
    for _ in 0..3 {
        let answer = attacker.call("blockchain.transaction.broadcast", json!([raw]));
        refusals.push(
            answer["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    let (cpu, took) = (served.cairn.cpu_seconds() - before, started.elapsed());
    let report = honest.stop();
    println!(
        "3 spends: {cpu:.2} s of CPU in {took:?}, refused with {refusals:?}; honest: {} visits, \
         worst {:?}",
        report.tries, report.worst
    );
    assert!(refusals.iter().all(|r| !r.is_empty()), "{refusals:?}");
    assert!(cpu < 0.5, "{cpu:.2} s of CPU for three refused spends");
    assert_served_within(&report, Duration::from_secs(2));
}

/// Issue 27, the policy interpreter: **nested branches asked of at every opcode.** The
/// interpreter that holds spends to Core's standard flags first kept its open OP_IF branches
/// as a list of flags and asked at every opcode whether all were true: a tapscript of 100,000
/// nested `OP_1 OP_IF` (300 kB, standard under Core's policy, where tapscripts have no size or
/// opcode limit) made that 1.5e10 steps, after the kernel, which keeps Core's
/// `ConditionStack`, had passed it at once. Now the interpreter keeps Core's
/// `ConditionStack` too: the depth and the first false branch.
///
/// With Core's policy (`--knots-data-rules=false`; Knots's default refuses OP_IF in tapscript
/// first), 127.0.0.2 broadcasts one spend of a taproot coin whose leaf is that script.
/// Asserted: the spend is taken (it is valid and standard), cairn spends under 0.5 s of CPU
/// on it, and an honest client from 127.0.0.3 gets `server.ping` within 2 s throughout.
///
/// *Fails before the fix* (305e742, the list of flags): 8.83 s of CPU for the one spend (now
/// 0.01 s, the kernel included).
#[test]
fn nested_branches_cost_a_step_each() {
    use bitcoin::hex::{DisplayHex, FromHex};
    let served = Served::start(&["--knots-data-rules=false"]);
    let levels = 100_000;
    let mut leaf = Vec::with_capacity(3 * levels + 1);
    for _ in 0..levels {
        leaf.extend([0x51, 0x63]);
    }
    leaf.push(0x51);
    leaf.extend(std::iter::repeat_n(0x68, levels));
    let secp = bitcoin::secp256k1::Secp256k1::new();
    let internal = bitcoin::secp256k1::SecretKey::from_slice(&[5; 32])
        .unwrap()
        .x_only_public_key(&secp)
        .0;
    let script = bitcoin::ScriptBuf::from_bytes(leaf.clone());
    let tapscript = bitcoin::taproot::LeafVersion::TapScript;
    let info = bitcoin::taproot::TaprootBuilder::new()
        .add_leaf(0, script.clone())
        .unwrap()
        .finalize(&secp, internal)
        .unwrap();
    let control = info
        .control_block(&(script, tapscript))
        .unwrap()
        .serialize();
    let output = bitcoin::ScriptBuf::new_p2tr_tweaked(info.output_key());
    let address = bitcoin::Address::from_script(&output, bitcoin::Network::Regtest).unwrap();
    let funding = served
        .node
        .rpc(&["sendtoaddress", &address.to_string(), "1.0"]);
    served.node.rpc(&["generatetoaddress", "1", &served.mine]);
    served
        .cairn
        .wait_for(&served.node.rpc(&["getbestblockhash"]), "the coin");
    let wallet_tx = served.node.rpc_json(&["gettransaction", &funding]);
    let raw = Vec::<u8>::from_hex(wallet_tx["hex"].as_str().unwrap()).unwrap();
    let funding: bitcoin::Transaction = bitcoin::consensus::deserialize(&raw).unwrap();
    let vout = funding
        .output
        .iter()
        .position(|o| o.script_pubkey == output)
        .unwrap();
    let to = served.node.rpc(&["getnewaddress", "", "bech32"]);
    let to = bitcoin::Address::from_str(&to).unwrap().assume_checked();
    let spend = bitcoin::Transaction {
        version: bitcoin::transaction::Version::TWO,
        lock_time: bitcoin::absolute::LockTime::ZERO,
        input: vec![bitcoin::TxIn {
            previous_output: bitcoin::OutPoint::new(funding.compute_txid(), vout as u32),
            script_sig: bitcoin::ScriptBuf::new(),
            sequence: bitcoin::Sequence::ENABLE_RBF_NO_LOCKTIME,
            witness: bitcoin::Witness::from_slice(&[leaf, control]),
        }],
        output: vec![bitcoin::TxOut {
            value: bitcoin::Amount::from_sat(100_000_000 - 200_000),
            script_pubkey: to.script_pubkey(),
        }],
    };
    let raw = bitcoin::consensus::serialize(&spend).to_lower_hex_string();

    let honest = served.honest_electrum();
    let mut attacker = Lines::connect_from("127.0.0.2", served.electrum, "1.7");
    let before = served.cairn.cpu_seconds();
    let started = Instant::now();
    let answer = attacker.call("blockchain.transaction.broadcast", json!([raw]));
    let (cpu, took) = (served.cairn.cpu_seconds() - before, started.elapsed());
    let report = honest.stop();
    println!(
        "a spend of {levels} nested branches: {cpu:.2} s of CPU in {took:?}, answered {answer}; \
         honest: {} visits, worst {:?}",
        report.tries, report.worst
    );
    assert_eq!(
        answer["result"],
        json!(spend.compute_txid().to_string()),
        "{answer}"
    );
    assert!(cpu < 0.5, "{cpu:.2} s of CPU for one spend");
    assert_served_within(&report, Duration::from_secs(2));
}

// ---- Issue 28: tweak streams nobody reads ----

/// A tweak hog: connects from `from` with a 4 KiB receive buffer and sends `n` pipelined
/// `blockchain.tweaks.subscribe [0, 1000, true]` (each a stream of a notification per height
/// and its end), then never reads a byte.
fn tweak_hog(from: &str, to: SocketAddr, n: usize) -> TcpStream {
    let mut s = connect_from_with_rcvbuf(from, to, Some(4096))
        .unwrap_or_else(|e| panic!("a tweak hog from {from}: {e}"));
    let mut lines = String::new();
    for id in 1..=n {
        let ask = json!({"jsonrpc": "2.0", "id": id, "method": "blockchain.tweaks.subscribe",
                         "params": [0, 1000, true]});
        lines.push_str(&format!("{ask}\n"));
    }
    // The server reads requests only as it answers them: the rest may not fit its buffers.
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = s.write_all(lines.as_bytes());
    s
}

/// Issue 28: **a tweak stream is a long answer, and a host that asks for many and reads none
/// must hold only its own share.** Six hogs from 127.0.0.2 each pipeline 1,500 streams of the
/// whole chain (about 12 MB of notifications each) and never read; meanwhile an honest client
/// from 127.0.0.3 asks for the same stream (cut-through) every 500 ms for 10 s. Asserted: every
/// honest stream is whole (every height, then `done` as notification and result) and comes
/// within [`HONEST_WITHIN`]; the hogs' host pays for its streams (`cairn_electrum_throttled_total`
/// rises: its requests wait while its cost is over the soft limit); resident memory grows by
/// less than 256 MiB; when the hogs hang up, every one of their sessions (mid-stream, or waiting
/// for a stream place, a slot or its turn) is gone within 10 s. What holds: a host streams two
/// answers at once (`STREAMS_PER_HOST`), a stream gives its query slot back while its client
/// takes a notification, each height is charged to the host as it is sent, and unread
/// notifications are held against the host's answer budget and the write timeout as any answer.
#[test]
fn unread_tweak_streams_hold_their_host_only() {
    let served = Served::start(&["--silent-payments", "--electrum-write-timeout-secs=3"]);
    let throttled_before = served.metric("cairn_electrum_throttled_total");
    let rss = RssPeak::start(served.cairn.pid());
    let tip: usize = served.node.rpc(&["getblockcount"]).parse().unwrap();
    let hogs: Vec<TcpStream> = (0..6)
        .map(|_| tweak_hog("127.0.0.2", served.electrum, 1500))
        .collect();
    let started = Instant::now();
    let mut honest = Lines::connect_from("127.0.0.3", served.electrum, "1.4");
    let (mut streams, mut worst) = (0, Duration::ZERO);
    while started.elapsed() < Duration::from_secs(10) {
        let asked = Instant::now();
        let answer = honest.call("blockchain.tweaks.subscribe", json!([0, 1000, false]));
        let took = asked.elapsed();
        let notes: Vec<Value> = honest.notes.drain(..).collect();
        assert_eq!(answer["result"]["params"][0]["message"], "done", "{answer}");
        assert_eq!(notes.len(), tip + 2, "every height and done");
        assert!(took < HONEST_WITHIN, "an honest stream took {took:?}");
        (streams, worst) = (streams + 1, worst.max(took));
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(honest);
    let throttled = served.metric("cairn_electrum_throttled_total") - throttled_before;
    let asked =
        served.metric("cairn_electrum_requests_total{method=\"blockchain.tweaks.subscribe\"}");
    println!(
        "honest: {streams} whole streams, the slowest {worst:?}; {asked} streams answered, \
         the hogs' host throttled {throttled} times"
    );
    assert!(throttled > 0.0, "the hogs' host never paid for its streams");
    let grown = rss.growth_mib();
    assert!(grown < 256, "resident memory grew by {grown} MiB");
    drop(hogs);
    let hung_up = Instant::now();
    let gone = metric_when(served.metrics, TCP_OPEN, Duration::from_secs(10), |v| {
        v == 0.0
    });
    println!(
        "hog sessions gone {:?} after they hung up",
        hung_up.elapsed()
    );
    assert!(gone.is_ok(), "hog sessions left open: {gone:?}");
}

/// Mines 100 blocks, then 15 blocks of 40 wallet payments to taproot addresses each: 600
/// BIP352-eligible transactions for scans to read.
fn taproot_payments(served: &Served) {
    let node = &served.node;
    node.rpc(&["generatetoaddress", "100", &served.mine]);
    for _ in 0..15 {
        for _ in 0..40 {
            let to = node.rpc(&["getnewaddress", "", "bech32m"]);
            node.rpc(&["sendtoaddress", &to, "0.001"]);
        }
        node.rpc(&["generatetoaddress", "1", &served.mine]);
    }
}

/// A connection from `from` that pipelines `n` silent-payment subscriptions of wallets no block
/// pays (each with 10 labels) from height 0 and never reads.
fn scan_hog(from: &str, to: SocketAddr, seed: u8, n: usize) -> TcpStream {
    let mut s = connect_from_with_rcvbuf(from, to, Some(4096))
        .unwrap_or_else(|e| panic!("a scan hog from {from}: {e}"));
    // The generator point: a valid spend key nobody's outputs are made from.
    let spend = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";
    let mut lines = String::new();
    for id in 1..=n {
        let mut scan = [seed; 32];
        scan[..8].copy_from_slice(&(id as u64).to_be_bytes());
        let scan: String = scan.iter().map(|b| format!("{b:02x}")).collect();
        let ask = json!({"jsonrpc": "2.0", "id": id, "method": "blockchain.silentpayments.subscribe",
                         "params": [scan, spend, 0, (1..=10).collect::<Vec<u32>>()]});
        lines.push_str(&format!("{ask}\n"));
    }
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = s.write_all(lines.as_bytes());
    s
}

/// Issue 28: **a remote scan costs the server CPU for every eligible transaction of the range,
/// and one host that asks for a thousand must wait for its own.** On a chain with 600
/// BIP352-eligible transactions (bitcoind's wallet paying its taproot addresses), twelve
/// connections from 127.0.0.2 each pipeline 100 subscriptions of the whole chain with ten labels
/// and never read; meanwhile an honest client from 127.0.0.3 subscribes a wallet every 500 ms for
/// 10 s. Asserted: each honest scan ends (its notification at progress 1.0) within
/// [`HONEST_WITHIN`]; when the hogs hang up, their sessions are gone within 10 s. What holds: a
/// scan takes its host's turn (one of `SCANS_PER_HOST`) before it queues for one of the server's
/// `SCANS` places, so the hogs' scans (200 of the 1,200 taken, `SILENT_PER_HOST`) wait in their
/// host's line, not before another host's (with the two waits the other way round, one queue for
/// all, the honest scan waited over 30 s).
#[test]
fn one_hosts_silent_payment_scans_wait_their_own_turn() {
    let served = Served::start(&["--silent-payments", "--electrum-write-timeout-secs=3"]);
    let node = &served.node;
    taproot_payments(&served);
    served
        .cairn
        .wait_for(&node.rpc(&["getbestblockhash"]), "the taproot payments");
    let hogs: Vec<TcpStream> = (0..PER_IP as u8)
        .map(|i| scan_hog("127.0.0.2", served.electrum, i + 1, 100))
        .collect();
    let method = "blockchain.silentpayments.subscribe";
    let spend = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";
    let started = Instant::now();
    let mut honest = Lines::connect_from("127.0.0.3", served.electrum, "1.4");
    let (mut scans, mut worst) = (0u8, Duration::ZERO);
    while started.elapsed() < Duration::from_secs(10) {
        let asked = Instant::now();
        let scan: String = [0xa0 + scans; 32]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let answer = honest.call(method, json!([scan, spend]));
        assert!(answer["result"]["address"].is_string(), "{answer}");
        loop {
            let note = honest.note(method);
            if note["params"][0] == answer["result"] && note["params"][1] == 1.0 {
                break;
            }
        }
        let took = asked.elapsed();
        assert!(took < HONEST_WITHIN, "an honest scan took {took:?}");
        (scans, worst) = (scans + 1, worst.max(took));
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(honest);
    let asked = served
        .metric("cairn_electrum_requests_total{method=\"blockchain.silentpayments.subscribe\"}");
    println!("honest: {scans} whole scans, the slowest {worst:?}; {asked} subscriptions answered");
    drop(hogs);
    let hung_up = Instant::now();
    let gone = metric_when(served.metrics, TCP_OPEN, Duration::from_secs(10), |v| {
        v == 0.0
    });
    println!(
        "hog sessions gone {:?} after they hung up",
        hung_up.elapsed()
    );
    assert!(gone.is_ok(), "hog sessions left open: {gone:?}");
}

/// Issue 28: **long scans must not hold a wallet's next scan back.** A whole-chain scan holds
/// its place as long as it runs (mainnet: hours), and a host over its soft cost limit sleeps in
/// its scans while it holds theirs. Sixteen hosts (127.0.1.2 to 127.0.16.2) each pipeline
/// 30 whole-chain scans with ten labels on a server whose soft cost limit (3 units, never
/// forgiven, no hard limit) they soon pass, so every one of the server's `SCANS` places is held
/// by a scan sleeping 2.5 s a step and as many hosts wait for one. The honest client
/// (127.0.0.3) subscribes wallets from the tip, as Sparrow does for a new wallet: a short scan.
/// Asserted: each of its scans ends within 2 s. What holds: short scans (a subscription's
/// follow-ups for new blocks, or first scans of fewer than `QUICK_SCAN_BLOCKS` with at most
/// `QUICK_SCAN_MEMPOOL` mempool transactions) have a lane of
/// their own (`QUICK_SCANS` places); with every scan in the long lane, an honest scan waited
/// 9.8 s for a hog's place and the test failed.
#[test]
fn short_scans_pass_hosts_whose_long_scans_hold_every_place() {
    let served = Served::start(&[
        "--silent-payments",
        "--electrum-cost-soft-limit=3",
        "--electrum-cost-hard-limit=0",
        "--electrum-cost-decay-per-sec=0",
    ]);
    let node = &served.node;
    taproot_payments(&served);
    let tip_hash = node.rpc(&["getbestblockhash"]);
    served.cairn.wait_for(&tip_hash, "the taproot payments");
    let tip: u64 = node.rpc(&["getblockcount"]).parse().unwrap();
    let hogs = sixteen_scan_hogs(&served, 0x40);
    let took = honest_scans(served.electrum, 0xc0, tip);
    let worst = took.iter().max().copied().unwrap_or_default();
    for took in &took {
        assert!(
            *took < Duration::from_secs(2),
            "an honest short scan took {took:?}"
        );
    }
    println!("honest short scans: the slowest {worst:?}");
    drop(hogs);
}

/// Issue 28: **a scan that waits must not hold a place while it waits.** A scan of a host over
/// its soft cost limit sleeps before each step, and a scan whose client does not read waits up
/// to 20 s for room for its notification; both held one of the server's `SCANS` places while
/// they waited, so hosts whose scans do nothing but wait kept a new wallet's whole-chain scan
/// (the long lane: a restore from height 0) out. Sixteen hosts (127.0.1.2 to 127.0.16.2)
/// each pipeline 30 whole-chain scans and never read, on a server whose soft cost limit (3
/// units, never forgiven, no hard limit) they soon pass. The honest client (127.0.0.3)
/// subscribes wallets from height 0. Asserted: each of its scans ends within 2 s. What holds:
/// a waiting scan steps aside from its place (`StreamPlace::step_aside`), keeping only its host's
/// turn, and takes a place again after the wait.
///
/// *Fails before the fix* (fcf77f7, the place held through the waits): the slowest honest
/// scan took 7.4 s (now 1.0 s).
#[test]
fn scans_that_wait_hold_no_place() {
    let served = Served::start(&[
        "--silent-payments",
        "--electrum-cost-soft-limit=3",
        "--electrum-cost-hard-limit=0",
        "--electrum-cost-decay-per-sec=0",
    ]);
    taproot_payments(&served);
    let node = &served.node;
    served
        .cairn
        .wait_for(&node.rpc(&["getbestblockhash"]), "the taproot payments");
    let hogs = sixteen_scan_hogs(&served, 0x60);
    let worst = honest_scans(served.electrum, 0xd0, 0)
        .into_iter()
        .max()
        .unwrap_or_default();
    println!("honest whole-chain scans: the slowest {worst:?}");
    assert!(
        worst < Duration::from_secs(2),
        "an honest whole-chain scan took {worst:?}"
    );
    drop(hogs);
}

/// Attack: **sixteen scanners of one /24 held every long scan place.** Scan places and cost
/// were bounded per host only. On a generated chain of 24,319 BIP352-eligible transactions
/// (a whole-chain scan with ten labels takes about a second), sixteen addresses of
/// 127.0.1.0/24 each pipeline 30 whole-chain scans with ten labels. The honest wallet
/// (127.0.0.3) restores five wallets from height 0, first alone, then beside them. Asserted: its
/// slowest whole-chain scan beside the subnet takes at most twice its slowest alone (in the
/// better of two tries of five when the first is over: other tests share the cores). What
/// holds: a subnet's hosts run `SCANS_PER_GROUP` (one) long scan together, and the scan
/// threads give each batch to the group that used them least lately, so the subnet, scanning
/// for ten seconds before, gives way to the wallet batch by batch.
///
/// *Fails before the fix* (1712e6d): the subnet's scans held all eight long places; the slowest
/// honest scan took 24.3 s beside them, 0.92 s alone; with one long scan per subnet and no
/// turns (f390459), 2.1 to 2.7 times as long as alone (sharing the cores evenly with the
/// subnet's scan); now 0.91 s beside them, 0.77 s alone.
#[test]
fn sixteen_scanners_of_one_subnet_leave_a_whole_chain_scan_its_pace() {
    let tmp = tempfile::tempdir().unwrap();
    let cairn = |args: &[&str]| {
        let mut c = common::cairn_command();
        c.args(args);
        c
    };
    let chain = tmp.path().join("chain");
    let generated = cairn(&["generate", "--blocks", "250", "--txs-per-block", "500"])
        .args(["--seed", "49", "--silent-payments-per-mille", "10", "--out"])
        .arg(&chain)
        .output()
        .unwrap();
    assert!(generated.status.success(), "{generated:?}");
    let datadir = tmp.path().join("cairn");
    let imported = cairn(&[
        "--silent-payments",
        "--admin-addr",
        "127.0.0.1:0",
        "--datadir",
    ])
    .arg(&datadir)
    .args(["import", "--quiet", "--blocks-file"])
    .arg(chain.join("blocks.hex"))
    .output()
    .unwrap();
    assert!(imported.status.success(), "{imported:?}");
    let electrum = free_addr();
    let args = [
        "--silent-payments".to_string(),
        "--no-listen".to_string(),
        format!("--electrum-addr={electrum}"),
    ];
    let _served = common::start_cairn(&datadir, &args);

    let slowest = |took: &[Duration]| took.iter().max().copied().unwrap_or_default();
    let alone = slowest(&honest_scans(electrum, 0xa0, 0));
    let hogs = scan_hogs((2..18).map(|i| format!("127.0.1.{i}")), electrum, 0x70);
    let mut beside = slowest(&honest_scans(electrum, 0xa8, 0));
    if beside > alone * 2 {
        // The harness runs other tests beside this one: a moment's load from them shows in one
        // try, the subnet's hold in every try. (Seen once in CI: 2.6 s beside, 1.26 s alone;
        // with this test run by itself on that machine: 1.3 to 1.4 s beside, 1.1 s alone.)
        beside = beside.min(slowest(&honest_scans(electrum, 0xb0, 0)));
    }
    println!(
        "honest whole-chain scans: the slowest {alone:?} alone, {beside:?} beside 16 scanners \
         of one /24"
    );
    assert!(
        beside <= alone * 2,
        "the slowest honest scan took {beside:?} beside the subnet, {alone:?} alone"
    );
    drop(hogs);
}

/// Sixteen hosts, each of a /24 of its own (127.0.1.2 to 127.0.16.2: twice the long places,
/// and no subnet holding more than a host's), each a scan hog of 30 whole-chain scans (`seed`
/// and on), given 10 s to take every place.
fn sixteen_scan_hogs(served: &Served, seed: u8) -> Vec<TcpStream> {
    let hosts = (1..=16).map(|net| format!("127.0.{net}.2"));
    scan_hogs(hosts, served.electrum, seed)
}

/// A scan hog of 30 whole-chain scans (`seed` and on) from each of `hosts`, given 10 s.
fn scan_hogs(hosts: impl Iterator<Item = String>, to: SocketAddr, seed: u8) -> Vec<TcpStream> {
    let hogs = hosts
        .enumerate()
        .map(|(i, from)| scan_hog(&from, to, seed + i as u8, 30))
        .collect();
    std::thread::sleep(Duration::from_secs(10));
    hogs
}

/// Five honest wallets (scan keys from `tag`) subscribed from 127.0.0.3 from height `start`,
/// one after the other: how long each took to its notification at progress 1.0.
fn honest_scans(electrum: SocketAddr, tag: u8, start: u64) -> Vec<Duration> {
    let method = "blockchain.silentpayments.subscribe";
    let spend = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";
    let mut honest = Lines::connect_from("127.0.0.3", electrum, "1.4");
    let mut took = Vec::new();
    for i in 0..5u8 {
        let asked = Instant::now();
        let scan: String = [tag + i; 32].iter().map(|b| format!("{b:02x}")).collect();
        let answer = honest.call(method, json!([scan, spend, start]));
        assert!(answer["result"]["address"].is_string(), "{answer}");
        loop {
            let note = honest.note(method);
            if note["params"][0] == answer["result"] && note["params"][1] == 1.0 {
                break;
            }
        }
        took.push(asked.elapsed());
        std::thread::sleep(Duration::from_millis(300));
    }
    took
}

/// A hex scan key of `tag`'s, the `i`-th.
fn scan_key(tag: [u8; 2], i: u32) -> String {
    let mut key = [tag[0]; 32];
    key[1] = tag[1];
    key[2..6].copy_from_slice(&i.to_be_bytes());
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// Issue 28: **a silent-payment subscription is scanned again for every new block and mempool
/// transaction for as long as it lasts, so one host must not hold them without bound.** Frigate
/// limits a connection to 100; a host opens as many connections as it may. Three connections
/// from 127.0.0.2 each subscribe 100 wallets (from the tip, so their first scans are short).
/// Asserted: 200 are taken (`SILENT_PER_HOST`, two connections' worth) and the other 100 are
/// refused "from this address"; an honest client on 127.0.0.3 still subscribes; when one of the
/// hog's connections goes, its subscriptions are given back and the host subscribes again. On
/// the code before the limit all 300 were taken.
#[test]
fn one_host_can_not_hold_every_silent_payment_subscription() {
    let served = Served::start(&["--silent-payments"]);
    let tip: u64 = served.node.rpc(&["getblockcount"]).parse().unwrap();
    let method = "blockchain.silentpayments.subscribe";
    let spend = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";
    let mut hog: Vec<Lines> = (0..3)
        .map(|_| Lines::connect_from("127.0.0.2", served.electrum, "1.4"))
        .collect();
    let (mut taken, mut refused) = (0, 0);
    for (c, conn) in hog.iter_mut().enumerate() {
        for i in 0..100 {
            let answer = conn.call(method, json!([scan_key([0x21, c as u8], i), spend, tip]));
            if answer["result"]["address"].is_string() {
                taken += 1;
                continue;
            }
            let said = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(said.contains("from this address"), "{answer}");
            refused += 1;
        }
    }
    assert_eq!((taken, refused), (200, 100), "the host's subscriptions");
    let mut honest = Lines::connect_from("127.0.0.3", served.electrum, "1.4");
    let answer = honest.call(method, json!([scan_key([0x33, 0], 0), spend, tip]));
    assert!(answer["result"]["address"].is_string(), "{answer}");
    // One connection gone, its hundred are the host's again.
    drop(hog.remove(0));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut i = 0;
    loop {
        let answer = hog[1].call(method, json!([scan_key([0x22, 9], i), spend, tip]));
        if answer["result"]["address"].is_string() {
            break;
        }
        assert!(Instant::now() < deadline, "still refused: {answer}");
        std::thread::sleep(Duration::from_millis(100));
        i += 1;
    }
}

/// Attack: **one /24 took every silent-payment subscription the server holds.** From 11
/// addresses of 127.0.1.0/24, 21 connections each subscribe 100 wallets (Frigate's dialect,
/// from the tip). Asserted: the subnet holds 400 (`SILENT_PER_GROUP`), the rest refused "from
/// this network", and an honest wallet on 127.0.0.3 subscribes. Then four more /24s
/// (127.0.2-5.0/24) take 400 each, until the server holds its 2,000: the honest wallet's next
/// subscription is still taken, a connection of the subnets holding the most ending for it
/// (`cairn_connections_evicted_total`), and the honest wallet's connection stays.
///
/// *Fails before the fix* (1712e6d): the one /24 took all 2,000 places (200 per address, no
/// per-subnet cap) and the honest wallet was refused "on this server".
#[test]
fn one_subnet_can_not_hold_every_silent_payment_subscription() {
    let served = Served::start(&["--silent-payments"]);
    let tip: u64 = served.node.rpc(&["getblockcount"]).parse().unwrap();
    let method = "blockchain.silentpayments.subscribe";
    let spend = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";
    // Subscribes 100 wallets on each connection: how many were taken.
    let subscribe_all = |conns: &mut [Lines], tag: u8| {
        let mut taken = 0;
        for (c, conn) in conns.iter_mut().enumerate() {
            for i in 0..100 {
                let answer = conn.call(method, json!([scan_key([tag, c as u8], i), spend, tip]));
                if answer["result"]["address"].is_string() {
                    taken += 1;
                    continue;
                }
                let said = answer["error"]["message"].as_str().unwrap_or_default();
                assert!(said.contains("silent-payment subscriptions"), "{answer}");
            }
        }
        taken
    };
    let subnet = |net: u8, conns: usize| -> Vec<Lines> {
        (0..conns)
            .map(|c| {
                let from = format!("127.0.{net}.{}", 1 + c / 2);
                Lines::connect_from(&from, served.electrum, "1.4")
            })
            .collect()
    };
    let mut first = subnet(1, 21);
    let taken = subscribe_all(&mut first, 0x41);
    println!("one /24 of 11 addresses took {taken} subscriptions");
    assert_eq!(taken, 400, "the subnet's subscriptions");
    let mut honest = Lines::connect_from("127.0.0.3", served.electrum, "1.4");
    let answer = honest.call(method, json!([scan_key([0x4f, 0], 0), spend, tip]));
    assert!(answer["result"]["address"].is_string(), "{answer}");

    let mut others: Vec<Vec<Lines>> = (2..=5).map(|net| subnet(net, 4)).collect();
    let mut total = taken + 1;
    for (n, conns) in others.iter_mut().enumerate() {
        total += subscribe_all(conns, 0x42 + n as u8);
    }
    println!("five /24s and the honest wallet hold {total}");
    assert!(total >= 1_999, "the server's subscriptions: {total}");
    let evicted_before = served.metric("cairn_connections_evicted_total{server=\"electrum\"}");
    for i in 1..=3 {
        let answer = honest.call(method, json!([scan_key([0x4f, 0], i), spend, tip]));
        assert!(answer["result"]["address"].is_string(), "{answer}");
    }
    let evicted = served.metric("cairn_connections_evicted_total{server=\"electrum\"}");
    println!("{} connections evicted", evicted - evicted_before);
    assert!(
        evicted > evicted_before,
        "nothing evicted for the honest wallet"
    );
    let answer = honest.call("server.ping", json!([]));
    assert!(answer.get("result").is_some(), "{answer}");
}

/// Issue 49: **a block cost every silent-payment subscription the whole mempool.** A block's
/// transactions were published as "added" like mempool arrivals, more than 256 pending made a
/// subscription scan the whole mempool, and each scan computed every mempool transaction's tweak
/// again: 30 subscriptions and a block of 3,001 transactions beside 6,496 taproot mempool
/// transactions cost 22.7 s of CPU.
///
/// bitcoind's wallet pays 300 taproot addresses, each from a confirmed coin of its own, and
/// cairn's mempool takes them; ten subscriptions from 127.0.0.3, from the tip, end their first
/// scans (the 300 once each); then a block confirms 260 of them (`generateblock`: over the 256
/// that made a whole-mempool scan). Asserted: the subscriptions scan the block's 260 (each once)
/// and not one mempool transaction after it (`cairn_silent_payments_scanned_total`).
///
/// *Fails before the fix* (f6191de, where the block's txids were pending mempool work): the
/// block made the ten scan the 40 left in the mempool again, 400 mempool scans; now none.
/// Broadcasts to cairn (over Electrum, from the exempt 127.0.0.1) each of `txids` (of bitcoind's
/// mempool) that cairn does not have.
fn broadcast_missing(served: &Served, txids: &[String]) {
    let mut c = Lines::connect(served.electrum, "1.4");
    let mut sent = 0;
    for txid in txids {
        if c.call("blockchain.transaction.get", json!([txid]))
            .get("result")
            .is_some()
        {
            continue;
        }
        let hex = served.node.rpc(&["getrawtransaction", txid]);
        let answer = c.call("blockchain.transaction.broadcast", json!([hex]));
        assert_eq!(answer["result"], json!(txid), "{answer}");
        sent += 1;
    }
    println!("{sent} transactions relay had not brought handed to cairn");
}

#[test]
fn a_block_costs_subscriptions_the_block_only() {
    let served = Served::start(&["--silent-payments"]);
    let node = &served.node;
    node.rpc(&["generatetoaddress", "300", &served.mine]);
    let paid: Vec<String> = (0..300)
        .map(|_| {
            let to = node.rpc(&["getnewaddress", "", "bech32m"]);
            node.rpc(&["sendtoaddress", &to, "0.001"])
        })
        .collect();
    served
        .cairn
        .wait_for(&node.rpc(&["getbestblockhash"]), "the coins");
    // A transaction whose request went unanswered is asked again after 60 s, as Core does
    // (`GETDATA_TX_INTERVAL`): seen in CI under load, 296 of the 300 at 60 s, and 297 at 150 s
    // once. What relay did not bring is handed over as a wallet would (this test is about what
    // a block costs the subscriptions, not about relay).
    let relayed = metric_when(
        served.metrics,
        "cairn_mempool_transactions",
        Duration::from_secs(90),
        |v| v >= 300.0,
    );
    if relayed.is_err() {
        broadcast_missing(&served, &paid);
    }
    let pooled = metric_when(
        served.metrics,
        "cairn_mempool_transactions",
        Duration::from_secs(30),
        |v| v >= 300.0,
    );
    let theirs = node.rpc(&["getmempoolinfo"]);
    assert!(
        pooled.is_ok(),
        "cairn's mempool: {pooled:?}; bitcoind's: {theirs}"
    );
    let height: u64 = node.rpc(&["getblockcount"]).parse().unwrap();
    let method = "blockchain.silentpayments.subscribe";
    let spend = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";
    let mut wallet = Lines::connect_from("127.0.0.3", served.electrum, "1.4");
    let subscriptions: Vec<Value> = (0..10u8)
        .map(|i| {
            let scan: String = [0xb0 + i; 32].iter().map(|b| format!("{b:02x}")).collect();
            let answer = wallet.call(method, json!([scan, spend, height]));
            assert!(answer["result"]["address"].is_string(), "{answer}");
            answer["result"].clone()
        })
        .collect();
    let mut done = 0;
    while done < subscriptions.len() {
        let note = wallet.note(method);
        done += usize::from(note["params"][1] == 1.0);
    }
    let scanned = |source: &str| {
        served.metric(&format!(
            "cairn_silent_payments_scanned_total{{source=\"{source}\"}}"
        ))
    };
    let (mempool_before, block_before) = (scanned("mempool"), scanned("block"));
    println!("first scans: {mempool_before} mempool transactions scanned");

    let confirmed = serde_json::to_string(&paid[..260]).unwrap();
    node.rpc(&["generateblock", &served.mine, &confirmed]);
    served
        .cairn
        .wait_for(&node.rpc(&["getbestblockhash"]), "the block of 260");
    let block_scans = metric_when(
        served.metrics,
        "cairn_silent_payments_scanned_total{source=\"block\"}",
        Duration::from_secs(30),
        |v| v >= block_before + 2_600.0,
    );
    std::thread::sleep(Duration::from_secs(2));
    let mempool_after = scanned("mempool") - mempool_before;
    println!(
        "after the block: {:?} block transactions scanned, {mempool_after} mempool ones",
        block_scans.map(|(v, _)| v - block_before)
    );
    assert!(
        block_scans.is_ok(),
        "the block was not scanned by every subscription"
    );
    assert_eq!(
        mempool_after, 0.0,
        "the block made subscriptions scan the mempool"
    );
    drop(subscriptions);
}

/// **WebSocket pings from a client that never reads.** Each ping is answered with a pong that
/// tungstenite buffers until the socket takes it, without bound; pings are no requests (the
/// idle timeout of 10 minutes runs on) and cost nothing, so one connection grew cairn by what it
/// sent.
///
/// A client from 127.0.0.2 (its receive buffer 4 KiB) opens a WebSocket session and sends
/// 300,000 pings of 125 bytes (39 MB) without reading. Asserted: it is closed before it sent
/// them all (the `pings` disconnect), cairn grows by less than 16 MiB meanwhile, and a WebSocket
/// client from 127.0.0.3 pinging once a second, then asking for the tip, gets its pongs and its
/// answer.
///
/// *Fails before the fix:* every ping is read and answered, none closes the session, and cairn
/// grows by the pongs the client does not read (about 38 MB).
#[test]
fn pings_from_a_client_that_does_not_read_are_cut() {
    use tokio_tungstenite::tungstenite::{self, Message};
    let served = Served::start(&[]);
    let rss = RssPeak::start(served.cairn.pid());
    let url = format!("ws://{}", served.ws);
    let stream = connect_from_with_rcvbuf("127.0.0.2", served.ws, Some(4096)).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (mut attacker, _) = tungstenite::client(url.as_str(), stream).unwrap();
    let sent = (0..300_000u32)
        .take_while(|i| {
            let ping = Message::Ping(vec![7u8; 125].into());
            match i % 1_000 {
                999 => attacker.send(ping).is_ok(),
                _ => attacker.write(ping).is_ok(),
            }
        })
        .count();
    let closed = metric_when(
        served.metrics,
        &disconnects("pings"),
        Duration::from_secs(10),
        |v| v == 1.0,
    );

    // An honest WebSocket client: five pings a second apart, each answered, then a request.
    let stream = connect_from_with_rcvbuf("127.0.0.3", served.ws, None).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (mut honest, _) = tungstenite::client(url.as_str(), stream).unwrap();
    for n in 0..5u8 {
        honest.send(Message::Ping(vec![n].into())).unwrap();
        let pong = honest.read().unwrap();
        assert_eq!(pong, Message::Pong(vec![n].into()));
        std::thread::sleep(Duration::from_secs(1));
    }
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "blockchain.headers.subscribe",
                         "params": []});
    honest.send(Message::text(request.to_string())).unwrap();
    let answer: Value = serde_json::from_str(honest.read().unwrap().to_text().unwrap()).unwrap();
    println!(
        "attacker: {sent} pings sent before its session ended; cairn grew {} MiB",
        rss.growth_mib()
    );
    assert!(closed.is_ok(), "the pinger was not cut: {closed:?}");
    assert!(sent < 300_000, "all {sent} pings were taken");
    assert!(rss.growth_mib() < 16, "cairn grew {} MiB", rss.growth_mib());
    assert_eq!(answer["result"]["height"], 101, "{answer}");
}

/// **The explorer's pages are charged to their host like any HTTP request.** An address page
/// reads 25 transactions of its history with what their inputs spent, and the blocks' undo
/// data: a host asking for it in a loop must pay for it.
///
/// Against `--http-cost-soft-limit=1000 --http-cost-hard-limit=1500`, [`http_cost_attack`] with
/// the page of an address with 1,500 transactions, the honest visitor asking for a block by
/// its height (a redirect, 303) meanwhile.
///
/// *Fails before the explorer was charged as any request*: every page would be answered.
#[test]
fn explorer_pages_are_charged_to_their_host() {
    let (served, http) = Served::with_low_http_cost_limits();
    let busy = served.make_busy();
    let path = format!("/explorer/address/{busy}");
    http_cost_attack(&served, http, &path, ("/explorer/block-height/1", 303));
}

//! Probes for the attack tests (`tests/attacks.rs`): an honest Electrum client that must keep
//! being answered, checks of whether the server closed a socket, `/metrics` samples, a resident
//! memory sampler and a TLS client from a chosen address.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};
use serde_json::{json, Value};

use super::peer::connect_from_with_rcvbuf;

// ---- Electrum requests over any stream ----

/// Sends one request and reads lines until its answer (notifications before it are skipped).
/// An error answer, a close or a read timeout is an `Err` naming the method.
pub fn call<S: Read + Write>(
    stream: &mut BufReader<S>,
    id: u64,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let out = stream.get_mut();
    out.write_all(format!("{request}\n").as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| format!("{method}: writing: {e}"))?;
    loop {
        let mut line = String::new();
        match stream.read_line(&mut line) {
            Ok(0) => return Err(format!("{method}: closed before an answer")),
            Ok(_) => {}
            Err(e) => return Err(format!("{method}: no answer: {e}")),
        }
        let answer: Value = serde_json::from_str(&line)
            .map_err(|e| format!("{method}: not JSON ({e}): {line:?}"))?;
        match answer.get("id") {
            None | Some(Value::Null) => continue,
            Some(got) if *got != id => {
                return Err(format!("{method}: an answer to another id: {answer}"))
            }
            Some(_) if answer.get("result").is_none() => {
                return Err(format!("{method}: an error: {answer}"))
            }
            Some(_) => return Ok(answer),
        }
    }
}

/// Reads lines from `reader` until the server closes the stream or `until` passes: the lines
/// read (as JSON; a line that is not is skipped) and when the stream closed (`None`: still open
/// at `until`). The stream's read timeout must be short (a few hundred ms), so that `until` is
/// noticed; a timeout is not a close, an EOF or any other error is.
pub fn watch<R: Read>(reader: &mut BufReader<R>, until: Instant) -> (Vec<Value>, Option<Instant>) {
    let mut read = Vec::new();
    // Kept across timeouts: a read that times out mid-line leaves what it read here.
    let mut line = String::new();
    while Instant::now() < until {
        match reader.read_line(&mut line) {
            Ok(0) => return (read, Some(Instant::now())),
            Ok(_) => {
                if line.ends_with('\n') {
                    if let Ok(v) = serde_json::from_str::<Value>(&line) {
                        read.push(v);
                    }
                    line.clear();
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (read, Some(Instant::now())),
        }
    }
    (read, None)
}

// ---- The honest client ----

/// One honest client's visit, from `from_ip` on a new connection: `server.version` (1.7),
/// `blockchain.headers.subscribe` and `server.ping [16]`, every answer in. `Ok` with the time the
/// three took when that is within `within`; `Err` saying what failed (refused, closed, an error
/// answer, too slow).
pub fn answered_within(
    addr: SocketAddr,
    from_ip: &str,
    within: Duration,
) -> Result<Duration, String> {
    let start = Instant::now();
    let s = connect_from_with_rcvbuf(from_ip, addr, None)
        .map_err(|e| format!("connecting from {from_ip}: {e}"))?;
    s.set_read_timeout(Some(within))
        .and_then(|()| s.set_write_timeout(Some(within)))
        .map_err(|e| e.to_string())?;
    let mut stream = BufReader::new(s);
    let version = call(
        &mut stream,
        1,
        "server.version",
        json!(["honest", ["1.4", "1.7"]]),
    )?;
    if version["result"][1] != "1.7" {
        return Err(format!("server.version: not 1.7: {version}"));
    }
    let tip = call(&mut stream, 2, "blockchain.headers.subscribe", json!([]))?;
    if !tip["result"]["height"].is_u64() {
        return Err(format!("blockchain.headers.subscribe: no height: {tip}"));
    }
    call(&mut stream, 3, "server.ping", json!([16]))?;
    let took = start.elapsed();
    match took <= within {
        true => Ok(took),
        false => Err(format!("answered after {took:?}, over {within:?}")),
    }
}

/// [`answered_within`] tried again (every 100 ms) until it succeeds: how long until the first
/// success, or the last failure once `within` has passed. For a place that is given back
/// asynchronously (a closed session's), where the first try may come a moment too early.
pub fn admitted_within(
    addr: SocketAddr,
    from_ip: &str,
    within: Duration,
) -> Result<Duration, String> {
    let start = Instant::now();
    loop {
        let left = within.saturating_sub(start.elapsed());
        match answered_within(addr, from_ip, left.max(Duration::from_millis(500))) {
            Ok(_) => return Ok(start.elapsed()),
            Err(e) if start.elapsed() >= within => {
                return Err(format!("not answered within {within:?}: {e}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// `server.version` on an already open connection, answered within `within`: whether the
/// server admitted (and serves) it.
pub fn served(stream: &TcpStream, within: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    let s = stream.try_clone().map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(within))
        .map_err(|e| e.to_string())?;
    let mut stream = BufReader::new(s);
    call(
        &mut stream,
        1,
        "server.version",
        json!(["probe", ["1.4", "1.7"]]),
    )?;
    Ok(start.elapsed())
}

/// An honest client in a thread: an [`answered_within`] visit from its address every `every`,
/// each to be answered within `within`, until stopped.
pub struct Honest {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<HonestReport>>,
}

/// What the honest client saw.
#[derive(Debug, Default)]
pub struct HonestReport {
    /// Visits made.
    pub tries: usize,
    /// The slowest visit, failed ones included (a failure's time is until it failed).
    pub worst: Duration,
    /// What went wrong, one line per failed visit (when, since the start, and why).
    pub failures: Vec<String>,
}

impl Honest {
    /// Starts visiting `addr` from `from_ip`.
    pub fn start(addr: SocketAddr, from_ip: &str, every: Duration, within: Duration) -> Honest {
        let from_ip = from_ip.to_string();
        Honest::visiting(every, move || {
            answered_within(addr, &from_ip, within).map(drop)
        })
    }

    /// Starts making `visit` every `every`.
    pub fn visiting(
        every: Duration,
        visit: impl Fn() -> Result<(), String> + Send + 'static,
    ) -> Honest {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let mut report = HonestReport::default();
                while !stop.load(Ordering::SeqCst) {
                    let began = Instant::now();
                    report.tries += 1;
                    let visited = visit();
                    report.worst = report.worst.max(began.elapsed());
                    if let Err(e) = visited {
                        report.failures.push(format!(
                            "visit {} at {:?}: {e}",
                            report.tries,
                            began - started
                        ));
                    }
                    std::thread::sleep(every.saturating_sub(began.elapsed()));
                }
                report
            })
        };
        Honest {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops visiting (after the visit under way) and says what it saw.
    pub fn stop(mut self) -> HonestReport {
        self.stop.store(true, Ordering::SeqCst);
        let thread = self.thread.take().expect("stopped once");
        thread.join().expect("the honest client's thread")
    }
}

impl Drop for Honest {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

// ---- Whether the server closed a socket ----

/// Whether the server has closed `stream` (EOF or a reset), looking without waiting. Bytes
/// waiting to be read mean open.
pub fn closed_now(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let closed = match stream.peek(&mut byte) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

/// How many of `streams` the server has not closed.
pub fn open_count(streams: &[TcpStream]) -> usize {
    streams.iter().filter(|s| !closed_now(s)).count()
}

/// Waits until at most `at_most` of `streams` are open, or `within` passes; the number open
/// then. (The server closes refused sockets one after another as it accepts them, and the
/// admitted ones stay open, so the count falls to the number admitted and stays there.)
pub fn open_after_refusals(streams: &[TcpStream], at_most: usize, within: Duration) -> usize {
    let start = Instant::now();
    loop {
        let open = open_count(streams);
        if open <= at_most || start.elapsed() >= within {
            return open;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the server closes `stream` within `within` (EOF or a reset; bytes it sends first,
/// a TLS alert say, are read past). As in `tests/tls.rs`.
pub fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    while start.elapsed() < within {
        let left = within.saturating_sub(start.elapsed());
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
    false
}

// ---- /metrics ----

/// One scrape of `/metrics` at `addr` (head and body); empty if the server is not up.
pub fn scrape(addr: SocketAddr) -> String {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// The value of the sample `key` (name and labels, as printed), if present.
pub fn sample(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// The sample `key` now; 0 when absent (a labelled counter appears only once counted).
pub fn metric(addr: SocketAddr, key: &str) -> f64 {
    sample(&scrape(addr), key).unwrap_or(0.0)
}

/// Scrapes every 100 ms until the sample `key` passes `ok`: its value and how long that took,
/// or its last value once `within` has passed.
pub fn metric_when(
    addr: SocketAddr,
    key: &str,
    within: Duration,
    ok: impl Fn(f64) -> bool,
) -> Result<(f64, Duration), f64> {
    let start = Instant::now();
    loop {
        let value = metric(addr, key);
        if ok(value) {
            return Ok((value, start.elapsed()));
        }
        if start.elapsed() >= within {
            return Err(value);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---- Resident memory ----

/// A process's resident memory now, KiB (`VmRSS`); 0 if it is gone.
pub fn rss_kib(pid: u32) -> u64 {
    status_field(pid, "VmRSS:")
}

/// The threads of process `pid` now.
pub fn threads(pid: u32) -> u64 {
    status_field(pid, "Threads:")
}

/// A number field of `/proc/<pid>/status` (0 when absent), its unit left out.
fn status_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The peak of one of a process's figures (`sample`), sampled every 50 ms in a thread until
/// dropped.
pub struct Peak {
    before: u64,
    peak: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Peak {
    /// Starts sampling `pid` with `sample`.
    pub fn start(pid: u32, sample: fn(u32) -> u64) -> Peak {
        let before = sample(pid);
        let peak = Arc::new(AtomicU64::new(before));
        let done = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, done) = (peak.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    peak.fetch_max(sample(pid), Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        };
        Peak {
            before,
            peak,
            done,
            thread: Some(thread),
        }
    }

    /// The figure when sampling started.
    pub fn before(&self) -> u64 {
        self.before
    }

    /// The highest sample so far.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::SeqCst)
    }
}

impl Drop for Peak {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The peak of a process's resident memory (the sampler of `tests/flood.rs`).
pub struct RssPeak(Peak);

impl RssPeak {
    /// Starts sampling `pid`.
    pub fn start(pid: u32) -> RssPeak {
        RssPeak(Peak::start(pid, rss_kib))
    }

    /// Resident memory when sampling started, KiB.
    pub fn before_kib(&self) -> u64 {
        self.0.before()
    }

    /// The highest sample so far, KiB.
    pub fn peak_kib(&self) -> u64 {
        self.0.peak()
    }

    /// How far the peak is above the start, MiB.
    pub fn growth_mib(&self) -> u64 {
        self.peak_kib().saturating_sub(self.before_kib()) / 1024
    }
}

// ---- TLS ----

/// Accepts any certificate (cairn's self-signed one; `tests/tls.rs` compares its fingerprint
/// itself) but checks the handshake's signatures with the provider's algorithms.
#[derive(Debug)]
pub struct AnyCertificate(pub Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A TLS client stream over a blocking socket.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// A TLS connection from `from_ip` to `to` with its handshake finished (any TLS version, any
/// certificate). The socket's read timeout is 30 s.
pub fn tls_from(from_ip: &str, to: SocketAddr) -> TlsStream {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    let conn = ClientConnection::new(Arc::new(config), ServerName::try_from("localhost").unwrap())
        .unwrap();
    let sock = connect_from_with_rcvbuf(from_ip, to, None)
        .unwrap_or_else(|e| panic!("connecting from {from_ip} to {to}: {e}"));
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut tls = StreamOwned::new(conn, sock);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .unwrap_or_else(|e| panic!("TLS handshake from {from_ip}: {e}"));
    }
    tls
}

//! One client connection's transports: newline-delimited JSON (TCP or TLS) with a line size
//! limit, or WebSocket messages, both read on the session's own task (`source.rs`); the
//! session's loop (`serving.rs`); the writer, its timeout and the session's own writes
//! (`writer.rs`); and how a session ends.
//! Backpressure on a client that does not read (its queue and the answer budget) is in
//! `outbox.rs`. The [`Session`] it serves answers the requests and owes the notifications.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use super::backend::Backend;
use super::counted::excessive;
use super::frigate_scan::{ScanEvent, ScanJob};
pub use super::outbox::Shares;
use super::outbox::{BudgetRoom, Held, Outbox, Queued};
use super::rpc::Piece;
use super::rpc::{error_value, RpcError};
use super::session::Session;
use super::session::{Answer, StreamJob};
use crate::notify::TipUpdate;
use crate::work::{HostShares, WorkPool};
use serving::serve;
use source::{Lines, Messages, ReadAhead};
use writer::{write_lines, write_messages, WriteSide, Written};

/// Lines waiting to be written to a client before the session stops reading from it (the bytes
/// they hold are bounded apart, by the answer budget). A pipelining client's answers go out 32
/// at a time in one write: with 8, the session and the writer took turns every 8 answers, and
/// `blockchain.block.tweaks` pipelined for every height took 1.3x as long (128: 5% less again).
const OUTBOX: usize = 32;
/// The bytes a WebSocket connection reads at once (and holds for it).
const WS_READ_BUFFER: usize = 8 << 10;
/// How long an ending session's last lines may take to go out before its writer is aborted.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// A client's byte stream: a TCP connection, or TLS over one.
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Stream for S {}

/// Serves one client of newline-delimited JSON until it disconnects, times out, or misbehaves.
pub async fn run(
    stream: impl Stream,
    peer: SocketAddr,
    transport: &'static str,
    backend: Arc<Backend>,
    updates: broadcast::Receiver<TipUpdate>,
    budget: Shares,
) {
    let (read_half, write_half) = tokio::io::split(stream);
    let limit = backend.config.max_line_bytes;
    let requests = Lines::new(read_half, limit, peer);
    let (out_tx, out_rx) = mpsc::channel::<Queued>(OUTBOX);
    let stall = backend.config.write_timeout;
    let side = WriteSide::new(write_half);
    let writer = tokio::spawn(write_lines(side.clone(), out_rx, stall));
    let out = Outbox::new(out_tx, side, budget, transport);
    let end = serve(peer, backend, updates, requests, out, true).await;
    finish(peer, end, writer).await;
}

/// Why a session ended (`cairn_electrum_disconnects_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The client closed the connection.
    Left,
    /// No request within the idle timeout.
    Idle,
    /// A request over the size limit.
    TooLong,
    /// The client held more than its share of the budget unread, or an answer waited too long
    /// for room.
    NotReading,
    /// A write made no progress within the write timeout.
    WriteStalled,
    /// Its host's cost reached the hard limit.
    Cost,
    /// A WebSocket client pinged faster than it may.
    Pings,
}

impl End {
    fn label(self) -> &'static str {
        match self {
            End::Left => "left",
            End::Idle => "idle",
            End::TooLong => "too_long",
            End::NotReading => "not_reading",
            End::WriteStalled => "write_stalled",
            End::Cost => "cost",
            End::Pings => "pings",
        }
    }
}

/// Ends a session's writer: at once for a client that does not read, within [`CLOSE_GRACE`]
/// otherwise (so a last error line, a TLS close or a WebSocket close frame can get out), as ElectrumX's
/// `close(force_after=1.0)`. Everything queued, with its share of the budget, is freed before
/// this returns, and with it the connection's places.
async fn finish(peer: SocketAddr, end: End, mut writer: tokio::task::JoinHandle<Written>) {
    if matches!(end, End::NotReading | End::Pings) {
        writer.abort();
    }
    let written = match tokio::time::timeout(CLOSE_GRACE, &mut writer).await {
        Ok(done) => done.ok(),
        Err(_) => {
            writer.abort();
            let _ = writer.await;
            None
        }
    };
    // A stalled write is why the session ended, whatever the session saw of it.
    let end = match written {
        Some(Written::Stalled) => End::WriteStalled,
        _ => end,
    };
    tracing::debug!("electrum client {peer} disconnected ({})", end.label());
    crate::metrics::metrics()
        .electrum_disconnects
        .with_label_values(&[end.label()])
        .inc();
}

/// Serves one WebSocket client (one JSON-RPC request, batch or answer per text message) until
/// it disconnects, times out, or misbehaves.
pub async fn run_websocket(
    stream: impl Stream,
    peer: SocketAddr,
    transport: &'static str,
    backend: Arc<Backend>,
    updates: broadcast::Receiver<TipUpdate>,
    budget: Shares,
) {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
    let limit = backend.config.max_line_bytes;
    // Reads of 8 KiB, not tungstenite's 128 KiB: that buffer is zeroed before every read (a
    // twentieth of the CPU of answering small requests) and held by every connection.
    let config = WebSocketConfig::default()
        .read_buffer_size(WS_READ_BUFFER)
        .max_message_size(Some(limit))
        .max_frame_size(Some(limit));
    let handshake = tokio_tungstenite::accept_async_with_config(stream, Some(config));
    let ws = match tokio::time::timeout(std::time::Duration::from_secs(10), handshake).await {
        Ok(Ok(ws)) => ws,
        Ok(Err(e)) => {
            tracing::debug!("electrum websocket client {peer}: handshake failed: {e}");
            return;
        }
        Err(_) => {
            tracing::debug!("electrum websocket client {peer}: handshake timed out");
            return;
        }
    };
    let (sink, source) = ws.split();
    let (out_tx, out_rx) = mpsc::channel::<Queued>(OUTBOX);
    let stall = backend.config.write_timeout;
    let side = WriteSide::new(writer::Messages(sink));
    let writer = tokio::spawn(write_messages(side.clone(), out_rx, stall));
    let out = Outbox::new(out_tx, side, budget, transport);
    // Read on the session's task, and read ahead while it is busy: pings answered and a close
    // seen meanwhile, no hand-off between tasks for a request.
    let requests = ReadAhead::new(Messages::new(source));
    let end = serve(peer, backend, updates, requests, out, false).await;
    finish(peer, end, writer).await;
}

/// Builds the answer to one request line in a query pool's slot (the host's turn, then a
/// slot), its bytes asked of the budget before and as it is built: on this task when `inline`
/// (no writer to wait for), an inline place and a slot are free now and memory holds the answer
/// ([`WorkPool::run_inline`]), else, waiting for the host's turn, on a thread that may block.
/// `None` when the pool closed.
async fn answer_line(
    session: &mut Session,
    request: &[u8],
    pool: &WorkPool,
    host: &HostShares,
    out: &Outbox,
    inline: bool,
) -> Option<(Option<Answer>, Option<Held>)> {
    let build = || {
        let mut room = BudgetRoom::new(out);
        let answer = session.handle_line(request, &mut room);
        (answer, room.held.take())
    };
    if let Some(built) = pool.try_answer_inline("electrum", host, inline, build) {
        // A client pipelining answers from memory yields its worker as any task does.
        tokio::task::coop::consume_budget().await;
        return Some(built);
    }
    let slot = pool.slot(host).await.ok()?;
    let mut room = BudgetRoom::new(out);
    let answer = pool.run_here(slot, || session.handle_line(request, &mut room));
    Some((answer, room.held.take()))
}

/// Starts `jobs` (a session's silent-payment scans), each once it has a place
/// ([`WorkPool::scan_place`]), telling `events` what it finds and when it ends; a scan ends
/// with its session (the set dropped), its reads stopped at their next row.
fn start_scans(
    scans: &mut tokio::task::JoinSet<()>,
    jobs: Vec<ScanJob>,
    events: &mpsc::Sender<ScanEvent>,
    pool: &Arc<WorkPool>,
    host: &Arc<HostShares>,
) {
    for job in jobs {
        let (events, pool, host) = (events.clone(), pool.clone(), host.clone());
        scans.spawn(async move {
            let Ok(place) = pool.scan_place(&host, job.is_quick()).await else {
                return;
            };
            let on_panic = job.panicked();
            let scan = std::panic::AssertUnwindSafe(job.run(events.clone(), pool, host, place));
            if futures_util::FutureExt::catch_unwind(scan).await.is_err() {
                let _ = events.send(on_panic).await;
            }
        });
    }
}

/// Tells a client whose host's cost is at the hard limit so, and ends its session.
async fn over_cost(peer: SocketAddr, out: &Outbox) -> End {
    out.send(error_value(Value::Null, &excessive()).to_string())
        .await;
    crate::outsider_log!(
        info,
        "electrum client {peer}: its host's cost is at the hard limit; disconnecting"
    );
    End::Cost
}

/// `now + wait`, or a year from now when that is further than the clock can count.
fn far_or(now: tokio::time::Instant, wait: Duration) -> tokio::time::Instant {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    now.checked_add(wait.min(YEAR)).unwrap_or(now)
}

/// A session's share of the Electrum gauges: its connection, and its subscriptions as they
/// change; both taken back when the session ends.
struct SessionGauges {
    transport: &'static str,
    subscriptions: i64,
}

impl SessionGauges {
    fn open(transport: &'static str) -> Self {
        let m = crate::metrics::metrics();
        m.electrum_connections_accepted
            .with_label_values(&[transport])
            .inc();
        m.electrum_connections.with_label_values(&[transport]).inc();
        SessionGauges {
            transport,
            subscriptions: 0,
        }
    }

    /// The session now holds `now` subscriptions.
    fn subscriptions(&mut self, now: usize) {
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        if now != self.subscriptions {
            let gauge = crate::metrics::metrics()
                .electrum_subscriptions
                .with_label_values(&[self.transport]);
            gauge.add(now - self.subscriptions);
            self.subscriptions = now;
        }
    }
}

impl Drop for SessionGauges {
    fn drop(&mut self) {
        self.subscriptions(0);
        crate::metrics::metrics()
            .electrum_connections
            .with_label_values(&[self.transport])
            .dec();
    }
}

/// Writes a streamed answer (a long history, a tweak stream) as its pieces are made (on a
/// thread of its own, one of [`crate::work::STREAMS`], two pieces ahead at most, reading in
/// the query pool's slots), each held against the answer budget like a line; `false` if the
/// client does not take them or the job stopped in the middle of a line (the answer cannot be
/// finished).
async fn stream(job: StreamJob, out: &Outbox, pool: &Arc<WorkPool>) -> bool {
    let (id, method, started) = job.request();
    let place = match pool.stream_place(&out.budget.host).await {
        Ok(place) => place,
        Err(refused) => {
            let err = RpcError::bad_request(format!("{refused}: no place to stream the answer"));
            let line = error_value(id.clone(), &err).to_string();
            crate::metrics::metrics().electrum_request(method, started.elapsed(), true);
            return out.send(line).await;
        }
    };
    let (tx, mut rx) = mpsc::channel::<Piece>(2);
    let (pool, host) = (pool.clone(), out.budget.host.clone());
    let reader = tokio::task::spawn_blocking(move || {
        let _place = place;
        job.run(tx, &pool, &host)
    });
    // Whether the last piece ended a line: a job ends its answer with one.
    let mut finished = false;
    while let Some((text, last)) = rx.recv().await {
        if !out.send_piece(text, last).await {
            finished = false;
            break;
        }
        finished = last;
    }
    drop(rx);
    let _ = reader.await;
    crate::metrics::metrics().electrum_request(method, started.elapsed(), !finished);
    finished
}

mod serving;
mod source;
#[cfg(test)]
mod tests;
mod writer;

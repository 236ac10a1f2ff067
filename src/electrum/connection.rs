//! One client connection's transports: newline-delimited JSON (TCP or TLS) with a line size
//! limit, or WebSocket messages, both read on the session's own task (`source.rs`); the
//! session's loop (`serving.rs`); the writer and its timeout; and how a session ends.
//! Backpressure on a client that does not read (its queue and the answer budget) is in
//! `outbox.rs`. The [`Session`] it serves answers the requests and owes the notifications.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::sync::{broadcast, mpsc};

use super::backend::Backend;
use super::counted::excessive;
use super::frigate_scan::{ScanEvent, ScanJob};
pub use super::outbox::Shares;
use super::outbox::{BudgetRoom, Held, Outbox, Queued, WRITE_CHUNK};
use super::rpc::Piece;
use super::rpc::{error_value, RpcError};
use super::session::Session;
use super::session::{Answer, StreamJob};
use crate::notify::TipUpdate;
use crate::work::{HostShares, WorkPool};
use serving::serve;
use source::{Lines, Messages, ReadAhead};

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
    let writer = tokio::spawn(write_lines(write_half, out_rx, stall));
    let out = Outbox::new(out_tx, budget, transport);
    let end = serve(peer, backend, updates, requests, out, true).await;
    finish(peer, end, writer).await;
}

/// Writes each queued line (each line's share of the budget goes back once it is written, when
/// its [`Queued`] drops), in pieces of [`WRITE_CHUNK`] bytes, each of which must go out within
/// `stall`: a client that stops reading is cut after `stall` however long its answer. Lines
/// already queued together (pipelined answers, a burst of notifications) go out in one write
/// while they fit a piece, each with its newline: one system call, not two a line.
async fn write_lines<W: tokio::io::AsyncWrite + Unpin>(
    mut out: W,
    mut queue: mpsc::Receiver<Queued>,
    stall: Duration,
) -> Written {
    let mut next = None;
    loop {
        let first = match next.take() {
            Some(queued) => queued,
            None => match queue.recv().await {
                Some(queued) => queued,
                None => break,
            },
        };
        if first.line.len() >= WRITE_CHUNK {
            if let Err(written) = write_long(&mut out, first, stall).await {
                return written;
            }
            continue;
        }
        // Small lines queued now, while they fit one piece; the first that does not waits.
        let mut batch = vec![first];
        let mut bytes = batch[0].line.len() + 1;
        while let Ok(queued) = queue.try_recv() {
            if bytes + queued.line.len() + 1 > WRITE_CHUNK {
                next = Some(queued);
                break;
            }
            bytes += queued.line.len() + 1;
            batch.push(queued);
        }
        if let Err(written) = write_batch(&mut out, &batch, bytes, stall).await {
            return written;
        }
        // What the kernel took is no longer held: a slow reader holds what it has not read.
        for mut queued in batch {
            queued.held.release(queued.line.len());
        }
    }
    let _ = tokio::time::timeout(stall, out.shutdown()).await;
    Written::All
}

/// Writes `batch` (`bytes` in all), each line with its newline, as one piece within `stall`:
/// gathered from the lines themselves where the stream takes vectored writes (one system call,
/// nothing copied), else copied into one buffer first.
async fn write_batch<W: tokio::io::AsyncWrite + Unpin>(
    out: &mut W,
    batch: &[Queued],
    bytes: usize,
    stall: Duration,
) -> Result<(), Written> {
    if !out.is_write_vectored() {
        // Built for this write and freed after it: an idle connection holds no buffer.
        let mut piece = Vec::with_capacity(bytes);
        for queued in batch {
            piece.extend_from_slice(queued.line.as_bytes());
            if queued.ends_line {
                piece.push(b'\n');
            }
        }
        return write_within(out, &piece, stall).await;
    }
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(2 * batch.len());
    for queued in batch {
        slices.push(IoSlice::new(queued.line.as_bytes()));
        if queued.ends_line {
            slices.push(IoSlice::new(b"\n"));
        }
    }
    slices.retain(|slice| !slice.is_empty());
    let write_all = async {
        let mut rest: &mut [IoSlice<'_>] = &mut slices;
        while !rest.is_empty() {
            match out.write_vectored(rest).await {
                Ok(0) | Err(_) => return Err(Written::Failed),
                Ok(n) => IoSlice::advance_slices(&mut rest, n),
            }
        }
        // As `write_within`: what TLS took goes out now.
        out.flush().await.map_err(|_| Written::Failed)
    };
    // The whole piece within `stall`, as `write_within`: a client taking a byte now and then
    // does not keep its writer waiting longer.
    tokio::time::timeout(stall, write_all)
        .await
        .unwrap_or(Err(Written::Stalled))
}

/// Writes one line of [`WRITE_CHUNK`] bytes or more in pieces, each within `stall`, giving
/// back its share of the budget as they go.
async fn write_long<W: tokio::io::AsyncWrite + Unpin>(
    out: &mut W,
    mut queued: Queued,
    stall: Duration,
) -> Result<(), Written> {
    let newline: &[u8] = if queued.ends_line { b"\n" } else { b"" };
    let chunks = queued.line.as_bytes().chunks(WRITE_CHUNK);
    for chunk in chunks.chain(std::iter::once(newline)) {
        write_within(out, chunk, stall).await?;
        queued.held.release(chunk.len());
    }
    Ok(())
}

/// Writes `bytes`, which must go out within `stall`.
async fn write_within<W: tokio::io::AsyncWrite + Unpin>(
    out: &mut W,
    bytes: &[u8],
    stall: Duration,
) -> Result<(), Written> {
    // Flushed too: TLS may hold the tail of what it took until told to send it.
    let write_all = async {
        out.write_all(bytes).await?;
        out.flush().await
    };
    match tokio::time::timeout(stall, write_all).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(Written::Failed),
        Err(_) => Err(Written::Stalled),
    }
}

/// How a client's writer task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// Everything queued was written, and the queue closed.
    All,
    /// The connection failed.
    Failed,
    /// A write made no progress within the write timeout.
    Stalled,
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
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::{protocol::WebSocketConfig, Message};
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
    let (mut sink, source) = ws.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Queued>(OUTBOX);
    let stall = backend.config.write_timeout;
    let writer = tokio::spawn(async move {
        while let Some(queued) = out_rx.recv().await {
            let Queued { line, held, .. } = queued;
            // A message goes out whole: the write timeout for each 64 KiB of it, as the TCP
            // writer's pieces.
            let pieces = u32::try_from(line.len().div_ceil(WRITE_CHUNK).max(1)).unwrap_or(u32::MAX);
            let within = stall.saturating_mul(pieces);
            match tokio::time::timeout(within, sink.send(Message::text(line))).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Written::Failed,
                Err(_) => return Written::Stalled,
            }
            drop(held);
        }
        let _ = tokio::time::timeout(stall, sink.close()).await;
        Written::All
    });
    let out = Outbox::new(out_tx, budget, transport);
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

//! One client connection's transports: newline-delimited JSON (TCP or TLS) with a line size
//! limit, or WebSocket messages; the idle timeout; and backpressure on a client that does not
//! read (a queue per client and one answer budget for all). The [`Session`] it serves answers
//! the requests and owes the notifications.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{broadcast, mpsc};

use super::backend::Backend;
use super::history::{HistoryJob, Piece};
use super::rpc::{error_value, RpcError};
use super::session::{Answer, Room, Session, SubscriptionShares, Taken};
use crate::listen::HostShares;
use crate::notify::TipUpdate;

/// Lines waiting to be written to a client before the session stops reading from it.
const OUTBOX: usize = 8;
/// How long an answer may wait for a client that does not read before it is dropped.
const SEND_TIMEOUT: Duration = Duration::from_secs(60);
/// The piece of a line written at once; each must go out within the write timeout.
const WRITE_CHUNK: usize = 64 << 10;
/// Answers up to this size are never refused for a full budget: they wait for room when they
/// are queued.
const SMALL_ANSWER: usize = 64 << 10;
/// How long an ending session's last lines may take to go out before its writer is aborted.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// What a transport hands the session: one request text (a line, or a WebSocket message).
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A request or a batch, as received.
    Request(Vec<u8>),
    /// A request over the size limit: answered with an error, then the client is dropped.
    TooLong,
}

async fn read_line_limited<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<LineRead> {
    buf.clear();
    let n = (&mut *reader)
        .take(limit as u64 + 1)
        .read_until(b'\n', buf)
        .await?;
    if n == 0 {
        return Ok(LineRead::Eof);
    }
    if buf.last() != Some(&b'\n') && buf.len() > limit {
        return Ok(LineRead::TooLong);
    }
    Ok(LineRead::Line)
}

enum LineRead {
    Line,
    TooLong,
    Eof,
}

/// Hands what a transport read to the session; `false` when reading should stop (the session
/// is gone, or the request was too long).
async fn forward(tx: &mpsc::Sender<Incoming>, incoming: Incoming) -> bool {
    let more = !matches!(incoming, Incoming::TooLong);
    tx.send(incoming).await.is_ok() && more
}

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
    let (in_tx, in_rx) = mpsc::channel::<Incoming>(1);
    // Reading happens in its own task so that a line arriving slowly is never cut by a
    // notification being sent meanwhile.
    let reader = tokio::spawn(async move {
        let mut reader = BufReader::with_capacity(64 * 1024, read_half);
        let mut buf = Vec::with_capacity(4096);
        loop {
            let incoming = match read_line_limited(&mut reader, &mut buf, limit).await {
                Ok(LineRead::Line) => {
                    let line = buf.trim_ascii();
                    if line.is_empty() {
                        continue;
                    }
                    Incoming::Request(line.to_vec())
                }
                Ok(LineRead::TooLong) => Incoming::TooLong,
                Ok(LineRead::Eof) | Err(_) => break,
            };
            if !forward(&in_tx, incoming).await {
                break;
            }
        }
    });
    let (out_tx, out_rx) = mpsc::channel::<Queued>(OUTBOX);
    let stall = backend.config.write_timeout;
    let writer = tokio::spawn(write_lines(write_half, out_rx, stall));
    let end = serve(
        peer,
        backend,
        updates,
        in_rx,
        Outbox::new(out_tx, budget, transport),
        true,
    )
    .await;
    reader.abort();
    finish(peer, end, writer).await;
}

/// Writes each queued line (each line's share of the budget goes back once it is written, when
/// its [`Queued`] drops), in pieces of [`WRITE_CHUNK`] bytes, each of which must go out within
/// `stall`: a client that stops reading is cut after `stall` however long its answer.
async fn write_lines<W: tokio::io::AsyncWrite + Unpin>(
    mut out: W,
    mut queue: mpsc::Receiver<Queued>,
    stall: Duration,
) -> Written {
    while let Some(mut queued) = queue.recv().await {
        let newline: &[u8] = if queued.ends_line { b"\n" } else { b"" };
        let chunks = queued.line.as_bytes().chunks(WRITE_CHUNK);
        for chunk in chunks.chain(std::iter::once(newline)) {
            match tokio::time::timeout(stall, out.write_all(chunk)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Written::Failed,
                Err(_) => return Written::Stalled,
            }
            // What the kernel took is no longer held: a slow reader holds what it has not read.
            queued.held.release(chunk.len());
        }
    }
    let _ = tokio::time::timeout(stall, out.shutdown()).await;
    Written::All
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
}

impl End {
    fn label(self) -> &'static str {
        match self {
            End::Left => "left",
            End::Idle => "idle",
            End::TooLong => "too_long",
            End::NotReading => "not_reading",
            End::WriteStalled => "write_stalled",
        }
    }
}

/// Ends a session's writer: at once for a client that does not read, within [`CLOSE_GRACE`]
/// otherwise (so a last error line, a TLS close or a WebSocket close frame can get out), as ElectrumX's
/// `close(force_after=1.0)`. Everything queued, with its share of the budget, is freed before
/// this returns, and with it the connection's places.
async fn finish(peer: SocketAddr, end: End, mut writer: tokio::task::JoinHandle<Written>) {
    if end == End::NotReading {
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
    use tokio_tungstenite::tungstenite::{protocol::WebSocketConfig, Error as WsError, Message};
    let limit = backend.config.max_line_bytes;
    let config = WebSocketConfig::default()
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
    let (mut sink, mut source) = ws.split();
    let (in_tx, in_rx) = mpsc::channel::<Incoming>(1);
    let reader = tokio::spawn(async move {
        while let Some(message) = source.next().await {
            let incoming = match message {
                Ok(Message::Text(text)) => Incoming::Request(text.as_bytes().to_vec()),
                Ok(Message::Binary(bytes)) => Incoming::Request(bytes.to_vec()),
                Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => continue,
                Ok(Message::Close(_)) => break,
                Err(WsError::Capacity(_)) => Incoming::TooLong,
                Err(_) => break,
            };
            if !forward(&in_tx, incoming).await {
                break;
            }
        }
    });
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
    let end = serve(
        peer,
        backend,
        updates,
        in_rx,
        Outbox::new(out_tx, budget, transport),
        false,
    )
    .await;
    reader.abort();
    finish(peer, end, writer).await;
}

/// The transport-independent part of a session: answers requests from `incoming` and sends
/// answers and notifications to `out_tx`, until the client leaves, idles, sends an oversized
/// request or does not read what it is sent. `streams`: whether the transport takes a long
/// answer in pieces.
async fn serve(
    peer: SocketAddr,
    backend: Arc<Backend>,
    mut updates: broadcast::Receiver<TipUpdate>,
    mut incoming: mpsc::Receiver<Incoming>,
    mut out: Outbox,
    streams: bool,
) -> End {
    tracing::debug!("electrum client {peer} connected");
    let mut gauges = SessionGauges::open(out.transport);
    let idle = backend.config.idle_timeout;
    let limit = backend.config.max_line_bytes;
    out.timeout = SEND_TIMEOUT.min(idle);
    let subscriptions =
        SubscriptionShares::new(out.budget.host.clone(), out.budget.subscriptions.clone());
    let mut session = Session::new(backend, streams, subscriptions);
    // Idle counts from the client's last request: notifications sent meanwhile do not count
    // (ElectrumX's `last_recv`, Fulcrum's `lastGood`).
    let idle_at = tokio::time::sleep_until(far_or(tokio::time::Instant::now(), idle));
    tokio::pin!(idle_at);
    loop {
        tokio::select! {
            () = &mut idle_at => {
                tracing::debug!("electrum client {peer}: idle timeout");
                return End::Idle;
            }
            // The writer stopped (a write stalled, or the connection failed): nothing more can
            // reach the client.
            () = out.tx.closed() => return End::Left,
            read = incoming.recv() => {
                let request = match read {
                    None => return End::Left,
                    Some(Incoming::TooLong) => {
                        let err = RpcError::bad_request(format!("request line longer than {limit} bytes"));
                        out.send(error_value(Value::Null, &err).to_string()).await;
                        tracing::info!("electrum client {peer}: request over {limit} bytes, disconnecting");
                        return End::TooLong;
                    }
                    Some(Incoming::Request(request)) => request,
                };
                // The answer's bytes are asked of the budget before and as it is built.
                let mut room = BudgetRoom::new(&out);
                let answer = tokio::task::block_in_place(|| session.handle_line(&request, &mut room));
                let held = room.held.take();
                gauges.subscriptions(session.subscription_count());
                let sent = match answer {
                    None => true,
                    Some(Answer::Line(text)) => out.send_held(text, held).await,
                    Some(Answer::Batch(parts)) => out.send_batch(parts, held).await,
                    Some(Answer::History(job)) => stream(job, &out).await,
                    Some(Answer::NoRoom) => false,
                };
                if !sent {
                    tracing::info!("electrum client {peer} does not read its answers; disconnecting");
                    return End::NotReading;
                }
                idle_at.as_mut().reset(far_or(tokio::time::Instant::now(), idle));
            }
            update = updates.recv() => {
                let notes = match update {
                    Ok(u) => tokio::task::block_in_place(|| session.on_update(Some(&u))),
                    Err(broadcast::error::RecvError::Lagged(_)) => tokio::task::block_in_place(|| session.on_update(None)),
                    Err(broadcast::error::RecvError::Closed) => return End::Left,
                };
                if !out.send_all(notes).await {
                    tracing::info!("electrum client {peer} does not read its notifications; disconnecting");
                    return End::NotReading;
                }
            }
        }
    }
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

/// Writes a long history answer as its pieces are read (on a blocking thread, two pieces
/// ahead at most), each held against the answer budget like a line; `false` if the client
/// does not take them or the read failed midway (the answer cannot be finished).
async fn stream(job: HistoryJob, out: &Outbox) -> bool {
    let (method, started) = (job.method, job.started);
    let (tx, mut rx) = mpsc::channel::<Piece>(2);
    let reader = tokio::task::spawn_blocking(move || job.run(tx));
    let mut finished = false;
    while let Some((text, last)) = rx.recv().await {
        if !out.send_piece(text, last).await {
            break;
        }
        if last {
            finished = true;
            break;
        }
    }
    drop(rx);
    let _ = reader.await;
    crate::metrics::metrics().electrum_request(method, started.elapsed(), !finished);
    finished
}

/// What the clients of one Electrum server share: the bytes of answers queued and not yet
/// written, at most `electrum_answer_budget_mb` (one connection, and all the connections of one
/// host together, may hold a quarter of it each), and the count of subscriptions.
#[derive(Clone)]
pub struct Shares {
    bytes: Arc<tokio::sync::Semaphore>,
    share: usize,
    /// What the host of the connection this copy is for holds (shared by its connections).
    host: Arc<HostShares>,
    /// Every session's subscriptions.
    subscriptions: Arc<AtomicUsize>,
}

impl Shares {
    /// An answer budget of `total` bytes, and no subscriptions yet.
    pub fn new(total: usize) -> Self {
        let total = total.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        Shares {
            bytes: Arc::new(tokio::sync::Semaphore::new(total)),
            share: (total / 4).max(1),
            host: Arc::default(),
            subscriptions: Arc::default(),
        }
    }

    /// These shares for a connection of the host whose holdings `host` counts.
    pub fn for_host(&self, host: Arc<HostShares>) -> Self {
        Shares {
            host,
            ..self.clone()
        }
    }
}

/// One line, or a piece of one, queued for a client's writer, holding its bytes of the budget
/// until they are written.
struct Queued {
    line: String,
    /// Whether a newline follows (the line's last piece).
    ends_line: bool,
    held: Held,
}

/// Bytes of the budget held for a line, counted against its connection's and its host's
/// shares; given back as they are written ([`Held::release`]) or when dropped.
struct Held {
    permit: tokio::sync::OwnedSemaphorePermit,
    /// The connection's count.
    mine: Arc<AtomicUsize>,
    /// The host's.
    host: Arc<HostShares>,
    bytes: usize,
}

impl Held {
    /// Gives back `n` of the bytes held (written: the kernel has them).
    fn release(&mut self, n: usize) {
        let n = n.min(self.bytes);
        if n == 0 {
            return;
        }
        drop(self.permit.split(n));
        self.count(|c| c.fetch_sub(n, Ordering::SeqCst));
        self.bytes -= n;
    }
}

impl Held {
    /// `n` of these bytes (at most all) as a hold of their own (`None` only if the permit
    /// holds fewer than it counts, which it never does).
    fn split_off(&mut self, n: usize) -> Option<Held> {
        let n = n.min(self.bytes);
        let permit = self.permit.split(n)?;
        self.bytes -= n;
        Some(Held {
            permit,
            mine: self.mine.clone(),
            host: self.host.clone(),
            bytes: n,
        })
    }

    /// Takes over `more`'s bytes (held for the same client).
    fn absorb(&mut self, mut more: Held) {
        if let Some(permits) = more.permit.split(more.permit.num_permits()) {
            self.permit.merge(permits);
        }
        self.bytes += std::mem::take(&mut more.bytes);
    }
}

/// A session's room in the budget while it builds an answer on a blocking thread: each
/// [`Room::take`] takes what the budget has free now and never waits (waiting there would hold
/// a thread of the blocking pool, and part of the budget, for other clients' writes).
struct BudgetRoom<'a> {
    out: &'a Outbox,
    held: Option<Held>,
}

impl<'a> BudgetRoom<'a> {
    fn new(out: &'a Outbox) -> Self {
        BudgetRoom { out, held: None }
    }
}

impl Room for BudgetRoom<'_> {
    fn take(&mut self, n: usize) -> Taken {
        if n == 0 {
            return Taken::Yes;
        }
        let more = match self.out.try_reserve(n) {
            Ok(more) => more,
            // A small answer is built anyway and waits for its bytes when it is queued (not on
            // this thread): a full budget delays it, as before, rather than refusing it.
            Err(Taken::Busy) if n <= SMALL_ANSWER => return Taken::Yes,
            Err(short) => return short,
        };
        match &mut self.held {
            Some(held) => held.absorb(more),
            None => self.held = Some(more),
        }
        Taken::Yes
    }

    fn most(&self) -> usize {
        self.out.budget.share
    }

    fn held(&self) -> usize {
        self.held.as_ref().map_or(0, |h| h.bytes)
    }
}

impl Held {
    /// Applies `f` to the connection's and the host's counts.
    fn count(&self, f: impl Fn(&AtomicUsize) -> usize) {
        f(&self.mine);
        f(&self.host.bytes);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let n = self.bytes;
        self.count(|c| c.fetch_sub(n, Ordering::SeqCst));
    }
}

/// The queue to a client's writer task, with how long a line may wait for room in it.
struct Outbox {
    tx: mpsc::Sender<Queued>,
    timeout: std::time::Duration,
    budget: Shares,
    /// What this connection holds of the budget.
    mine: Arc<AtomicUsize>,
    /// The transport's label, for the metrics.
    transport: &'static str,
    /// Bytes queued to this client (`cairn_electrum_sent_bytes_total`).
    sent: prometheus::IntCounter,
}

impl Outbox {
    fn new(tx: mpsc::Sender<Queued>, budget: Shares, transport: &'static str) -> Self {
        let sent = crate::metrics::metrics()
            .electrum_sent_bytes
            .with_label_values(&[transport]);
        Outbox {
            tx,
            timeout: SEND_TIMEOUT,
            budget,
            mine: Arc::default(),
            transport,
            sent,
        }
    }

    /// Queues one line; `false` if the client (or its host) holds more than its share of the
    /// budget unwritten, the budget or its queue did not make room in time, or it is gone.
    async fn send(&self, line: String) -> bool {
        self.send_piece(line, true).await
    }

    /// Queues a piece of a line (`last`: the piece that ends it), as [`Outbox::send`].
    async fn send_piece(&self, line: String, last: bool) -> bool {
        let Some(held) = self.reserve(line.len().max(1)).await else {
            return false;
        };
        self.queue(line, last, held).await
    }

    /// Queues a whole line whose bytes (some or all) are held already.
    async fn send_held(&self, line: String, held: Option<Held>) -> bool {
        match self.fit(held, line.len().max(1)).await {
            Some(held) => self.queue(line, true, held).await,
            None => false,
        }
    }

    /// Queues a batch's answers as one line `[a,b,...]`, with the bytes held for them, in
    /// pieces of about [`WRITE_CHUNK`] (small answers gathered, large ones on their own, never
    /// copied).
    async fn send_batch(&self, parts: Vec<String>, held: Option<Held>) -> bool {
        let n = parts.len();
        let size = parts.iter().map(String::len).sum::<usize>() + n + 1;
        let Some(mut held) = self.fit(held, size).await else {
            return false;
        };
        let mut gathered = String::from("[");
        for (i, mut part) in parts.into_iter().enumerate() {
            let last = i + 1 == n;
            let end = if last { ']' } else { ',' };
            if gathered.len() + part.len() >= WRITE_CHUNK && !gathered.is_empty() {
                let piece = std::mem::take(&mut gathered);
                if !self.queue_part(&mut held, piece, false).await {
                    return false;
                }
            }
            if part.len() >= WRITE_CHUNK {
                part.push(end);
                if !self.queue_part(&mut held, part, last).await {
                    return false;
                }
            } else {
                gathered.push_str(&part);
                gathered.push(end);
            }
        }
        gathered.is_empty() || self.queue_part(&mut held, gathered, true).await
    }

    /// Queues `piece` with its bytes taken from `held`.
    async fn queue_part(&self, held: &mut Held, piece: String, last: bool) -> bool {
        match held.split_off(piece.len()) {
            Some(bytes) => self.queue(piece, last, bytes).await,
            None => false,
        }
    }

    /// `held` grown or cut to exactly `size` bytes (reserved whole when there is none).
    async fn fit(&self, held: Option<Held>, size: usize) -> Option<Held> {
        let Some(mut held) = held else {
            return self.reserve(size).await;
        };
        match held.bytes.cmp(&size) {
            std::cmp::Ordering::Less => held.absorb(self.reserve(size - held.bytes).await?),
            std::cmp::Ordering::Greater => held.release(held.bytes - size),
            std::cmp::Ordering::Equal => {}
        }
        Some(held)
    }

    /// Holds `n` bytes of the budget for this client: `None` if the client or its host would
    /// hold more than its share, or the budget did not make room in time, or the writer is gone.
    async fn reserve(&self, n: usize) -> Option<Held> {
        if self.over_share(n) {
            return None;
        }
        let permits = u32::try_from(n).ok()?;
        let acquire = self.budget.bytes.clone().acquire_many_owned(permits);
        // No waiting for room once the writer is gone (the client stalled or left).
        let permit = tokio::select! {
            () = self.tx.closed() => return None,
            held = tokio::time::timeout(self.timeout, acquire) => held,
        };
        self.hold(permit.ok()?.ok()?, n)
    }

    /// As [`Outbox::reserve`], with what the budget has free now, without waiting.
    fn try_reserve(&self, n: usize) -> Result<Held, Taken> {
        if self.over_share(n) {
            return Err(Taken::OverShare);
        }
        let permits = u32::try_from(n).map_err(|_| Taken::OverShare)?;
        let permit = self
            .budget
            .bytes
            .clone()
            .try_acquire_many_owned(permits)
            .map_err(|_| Taken::Busy)?;
        self.hold(permit, n).ok_or(Taken::OverShare)
    }

    /// Whether `n` more bytes would put this client or its host over its share.
    fn over_share(&self, n: usize) -> bool {
        let over = |count: &AtomicUsize| count.load(Ordering::SeqCst) + n > self.budget.share;
        over(&self.mine) || over(&self.budget.host.bytes)
    }

    /// Counts `permit`'s `n` bytes for this client and its host; `None` (and the permit given
    /// back) if another connection of the host took its share meanwhile.
    fn hold(&self, permit: tokio::sync::OwnedSemaphorePermit, n: usize) -> Option<Held> {
        let held = Held {
            permit,
            mine: self.mine.clone(),
            host: self.budget.host.clone(),
            bytes: n,
        };
        held.count(|c| c.fetch_add(n, Ordering::SeqCst));
        let over = |count: &AtomicUsize| count.load(Ordering::SeqCst) > self.budget.share;
        if over(&self.mine) || over(&self.budget.host.bytes) {
            return None;
        }
        Some(held)
    }

    /// Hands a line, with its bytes held, to the writer.
    async fn queue(&self, line: String, last: bool, held: Held) -> bool {
        self.sent.inc_by(held.bytes as u64);
        let queued = Queued {
            line,
            ends_line: last,
            held,
        };
        matches!(
            tokio::time::timeout(self.timeout, self.tx.send(queued)).await,
            Ok(Ok(()))
        )
    }

    /// Queues every line, in order; `false` as soon as one cannot be.
    async fn send_all(&self, lines: impl IntoIterator<Item = String>) -> bool {
        for line in lines {
            if !self.send(line).await {
                return false;
            }
        }
        true
    }
}

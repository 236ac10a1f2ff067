//! A client's writer: the task that writes the lines queued for it, and the write side it
//! shares with the session ([`WriteSide`]). The session writes a line itself when nothing queued
//! is ahead of it and the connection takes the line at once ([`WriteNow`]): no wake-up of the
//! writer task for it. What the connection does not take at once (a client that does not read,
//! a full socket buffer) is handed to the writer task, which waits for the client within the
//! write timeout; the session never waits on a write itself (only, as before, for room in the
//! queue or the answer budget).

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_util::stream::SplitSink;
use futures_util::{Sink, SinkExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::Stream;
use crate::electrum::outbox::{Held, Queued, WriteNow, WRITE_CHUNK};

/// A client's write side (a byte stream's write half, or a WebSocket's sink), shared by its
/// writer task and its session, and the count of lines handed to the writer task and not yet
/// written: the session writes itself only while that count is 0 (nothing ahead of its line)
/// and the writer task is not writing (it holds `out` only while it writes).
pub(crate) struct WriteSide<T> {
    pub(super) out: tokio::sync::Mutex<T>,
    handed: AtomicUsize,
}

impl<T> WriteSide<T> {
    /// `out`, nothing handed to the writer task yet.
    pub(super) fn new(out: T) -> Arc<Self> {
        Arc::new(WriteSide {
            out: tokio::sync::Mutex::new(out),
            handed: AtomicUsize::new(0),
        })
    }

    /// The write side for the session's own write: only while nothing handed to the writer
    /// task is unwritten and the writer is not writing.
    fn free_now(&self) -> Option<tokio::sync::MutexGuard<'_, T>> {
        if self.handed.load(Ordering::SeqCst) != 0 {
            return None;
        }
        self.out.try_lock().ok()
    }

    /// A line is being handed to the writer task.
    fn hand_one(&self) {
        self.handed.fetch_add(1, Ordering::SeqCst);
    }

    /// The writer task wrote `n` of the lines handed to it.
    fn written(&self, n: usize) {
        self.handed.fetch_sub(n, Ordering::SeqCst);
    }

    /// Lines handed to the writer task and not yet written.
    #[cfg(test)]
    pub(super) fn handed(&self) -> usize {
        self.handed.load(Ordering::SeqCst)
    }
}

/// One poll that must not wait: a context whose waker does nothing (whoever waits later polls
/// again with its own).
fn without_waiting() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

impl<W: AsyncWrite + Unpin + Send> WriteNow for WriteSide<W> {
    fn write_now(&self, mut queued: Queued) -> Option<Queued> {
        let Some(mut out) = self.free_now() else {
            return Some(queued);
        };
        // The newline joins the line: one write.
        if queued.ends_line {
            queued.line.push('\n');
            queued.ends_line = false;
        }
        let mut cx = without_waiting();
        while !queued.rest().is_empty() {
            match Pin::new(&mut *out).poll_write(&mut cx, queued.rest()) {
                Poll::Ready(Ok(n)) if n > 0 => {
                    queued.skip += n;
                    queued.held.release(n);
                }
                // The rest waits in the writer task (which meets any error itself).
                _ => return Some(queued),
            }
        }
        match Pin::new(&mut *out).poll_flush(&mut cx) {
            Poll::Ready(Ok(())) => None,
            _ => Some(queued),
        }
    }

    fn handing(&self) {
        self.hand_one();
    }
}

/// Writes each line handed to it (each line's share of the budget goes back once it is
/// written, when its [`Queued`] drops), in pieces of [`WRITE_CHUNK`] bytes, each of which must
/// go out within `stall`: a client that stops reading is cut after `stall` however long its
/// answer. Lines already queued together (pipelined answers, a burst of notifications) go out
/// in one write while they fit a piece, each with its newline: one system call, not two a line.
pub(super) async fn write_lines<W: AsyncWrite + Unpin>(
    side: Arc<WriteSide<W>>,
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
        let mut out = side.out.lock().await;
        if first.rest().len() >= WRITE_CHUNK {
            if let Err(written) = write_long(&mut *out, first, stall).await {
                return written;
            }
            side.written(1);
            continue;
        }
        // Small lines queued now, while they fit one piece; the first that does not waits.
        let mut bytes = first.rest().len() + 1;
        let mut batch = vec![first];
        while let Ok(queued) = queue.try_recv() {
            if bytes + queued.rest().len() + 1 > WRITE_CHUNK {
                next = Some(queued);
                break;
            }
            bytes += queued.rest().len() + 1;
            batch.push(queued);
        }
        if let Err(written) = write_batch(&mut *out, &batch, bytes, stall).await {
            return written;
        }
        side.written(batch.len());
        // What the kernel took is no longer held: a slow reader holds what it has not read.
        for mut queued in batch {
            queued.held.release(queued.line.len());
        }
    }
    let mut out = side.out.lock().await;
    let _ = tokio::time::timeout(stall, out.shutdown()).await;
    Written::All
}

/// Writes `batch` (`bytes` in all), each line with its newline, as one piece within `stall`:
/// gathered from the lines themselves where the stream takes vectored writes (one system call,
/// nothing copied), else copied into one buffer first.
async fn write_batch<W: AsyncWrite + Unpin>(
    out: &mut W,
    batch: &[Queued],
    bytes: usize,
    stall: Duration,
) -> Result<(), Written> {
    if !out.is_write_vectored() {
        // Built for this write and freed after it: an idle connection holds no buffer.
        let mut piece = Vec::with_capacity(bytes);
        for queued in batch {
            piece.extend_from_slice(queued.rest());
            if queued.ends_line {
                piece.push(b'\n');
            }
        }
        return write_within(out, &piece, stall).await;
    }
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(2 * batch.len());
    for queued in batch {
        slices.push(IoSlice::new(queued.rest()));
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
async fn write_long<W: AsyncWrite + Unpin>(
    out: &mut W,
    mut queued: Queued,
    stall: Duration,
) -> Result<(), Written> {
    let newline: &[u8] = if queued.ends_line { b"\n" } else { b"" };
    let line = std::mem::take(&mut queued.line);
    let chunks = line.as_bytes()[queued.skip.min(line.len())..].chunks(WRITE_CHUNK);
    for chunk in chunks.chain(std::iter::once(newline)) {
        write_within(out, chunk, stall).await?;
        queued.held.release(chunk.len());
    }
    Ok(())
}

/// Writes `bytes`, which must go out within `stall`.
async fn write_within<W: AsyncWrite + Unpin>(
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

/// A WebSocket connection's sink: one message a line.
pub(crate) struct Messages<S>(pub(super) SplitSink<WebSocketStream<S>, Message>);

impl<S: Stream> WriteNow for WriteSide<Messages<S>> {
    fn write_now(&self, mut queued: Queued) -> Option<Queued> {
        // A line in pieces is joined into one message by the writer task.
        if !queued.ends_line || queued.skip != 0 {
            return Some(queued);
        }
        let Some(mut sink) = self.free_now() else {
            return Some(queued);
        };
        let mut cx = without_waiting();
        let mut sink = Pin::new(&mut sink.0);
        if !matches!(sink.as_mut().poll_ready(&mut cx), Poll::Ready(Ok(()))) {
            return Some(queued);
        }
        let line = std::mem::take(&mut queued.line);
        // Taken: from here on what is left for the writer task is to flush it. (A flush that
        // fails here may not fail there, when the client has sent its close: that client does
        // not get the line, and its session ends on the close.)
        queued.ends_line = false;
        if sink.as_mut().start_send(Message::text(line)).is_err() {
            return Some(queued);
        }
        match sink.poll_flush(&mut cx) {
            Poll::Ready(Ok(())) => None,
            _ => Some(queued),
        }
    }

    fn handing(&self) {
        self.hand_one();
    }
}

/// Sends each line handed to it as one text message (the pieces of a long line joined first,
/// their bytes held until it is sent), within the write timeout for each 64 KiB of it, as the
/// byte stream's pieces; an empty rest that ends no line flushes what the session's own send
/// left in the sink.
pub(super) async fn write_messages<S: Stream>(
    side: Arc<WriteSide<Messages<S>>>,
    mut queue: mpsc::Receiver<Queued>,
    stall: Duration,
) -> Written {
    let mut message = String::new();
    // The pieces joined into `message`, with their bytes: counted as handed until it is sent,
    // so the session sends nothing of its own before it.
    let mut holding: Vec<Held> = Vec::new();
    while let Some(queued) = queue.recv().await {
        let Queued {
            line,
            ends_line,
            skip,
            held,
        } = queued;
        let mut sink = side.out.lock().await;
        let rest = line.get(skip..).unwrap_or_default();
        if rest.is_empty() && !ends_line && message.is_empty() {
            match tokio::time::timeout(stall, sink.0.flush()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Written::Failed,
                Err(_) => return Written::Stalled,
            }
            side.written(1);
            continue;
        }
        message.push_str(rest);
        holding.push(held);
        if !ends_line {
            continue;
        }
        let text = std::mem::take(&mut message);
        let pieces = text.len().div_ceil(WRITE_CHUNK).max(1);
        let within = stall.saturating_mul(u32::try_from(pieces).unwrap_or(u32::MAX));
        match tokio::time::timeout(within, sink.0.send(Message::text(text))).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Written::Failed,
            Err(_) => return Written::Stalled,
        }
        side.written(holding.len());
        holding.clear();
    }
    let mut sink = side.out.lock().await;
    let _ = tokio::time::timeout(stall, sink.0.close()).await;
    Written::All
}

/// How a client's writer task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Written {
    /// Everything queued was written, and the queue closed.
    All,
    /// The connection failed.
    Failed,
    /// A write made no progress within the write timeout.
    Stalled,
}

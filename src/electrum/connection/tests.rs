//! The writer task driven directly: what it writes, in how many writes, what it gives back to
//! the answer budget, and when it gives up on a client that does not read.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};

use super::{write_lines, Written};
use crate::electrum::outbox::{Held, Queued, WRITE_CHUNK};
use crate::work::HostShares;

/// A client socket that records each write the writer makes, and takes nothing more once it
/// has taken `room` bytes (a client that stopped reading). With `vectored`, it takes vectored
/// writes (as TCP and TLS streams do), at most `most` bytes a write, ending mid-slice.
#[derive(Clone)]
struct Recorder {
    writes: Arc<Mutex<Vec<Vec<u8>>>>,
    room: usize,
    vectored: bool,
    most: usize,
}

impl Recorder {
    fn new(room: usize) -> Self {
        Recorder {
            writes: Arc::default(),
            room,
            vectored: false,
            most: usize::MAX,
        }
    }

    fn vectored(room: usize, most: usize) -> Self {
        Recorder {
            vectored: true,
            most,
            ..Recorder::new(room)
        }
    }

    /// Records what a write of `bufs` takes; `Pending` when the client reads no more.
    fn take(&self, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        let free = (self.room - self.taken()).min(self.most);
        if free == 0 {
            return Poll::Pending; // never woken: the client reads no more
        }
        let mut took = Vec::new();
        for buf in bufs {
            let n = buf.len().min(free - took.len());
            took.extend_from_slice(&buf[..n]);
        }
        let n = took.len();
        self.writes.lock().unwrap().push(took);
        Poll::Ready(Ok(n))
    }

    fn taken(&self) -> usize {
        self.writes.lock().unwrap().iter().map(Vec::len).sum()
    }

    fn bytes(&self) -> Vec<u8> {
        self.writes.lock().unwrap().concat()
    }
}

impl tokio::io::AsyncWrite for Recorder {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.take(&[std::io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.vectored {
            true => self.take(bufs),
            false => self.take(&bufs[..bufs.len().min(1)]),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.vectored
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A budget of `total` bytes, the connection's count and the host's.
struct Budget {
    bytes: Arc<Semaphore>,
    mine: Arc<AtomicUsize>,
    host: Arc<HostShares>,
    total: usize,
}

impl Budget {
    fn new(total: usize) -> Self {
        Budget {
            bytes: Arc::new(Semaphore::new(total)),
            mine: Arc::default(),
            host: Arc::default(),
            total,
        }
    }

    /// `line` queued as a session queues it: its bytes held from the budget and counted.
    fn queued(&self, line: &str, ends_line: bool) -> Queued {
        let permit = self
            .bytes
            .clone()
            .try_acquire_many_owned(line.len() as u32)
            .unwrap();
        self.mine.fetch_add(line.len(), Ordering::SeqCst);
        self.host.bytes.fetch_add(line.len(), Ordering::SeqCst);
        Queued {
            line: line.to_string(),
            ends_line,
            held: Held {
                permit,
                mine: self.mine.clone(),
                host: self.host.clone(),
                bytes: line.len(),
            },
        }
    }

    /// Bytes still held: by the semaphore, the connection's count and the host's.
    fn held(&self) -> [usize; 3] {
        [
            self.total - self.bytes.available_permits(),
            self.mine.load(Ordering::SeqCst),
            self.host.bytes.load(Ordering::SeqCst),
        ]
    }
}

/// Lines queued together go out in one write while they fit a piece, in order, each with its
/// newline (a piece of a longer line without one); a line of a piece or more goes alone, in
/// pieces; nothing of the budget is held once all is written.
#[tokio::test]
async fn queued_lines_go_out_in_order_together_and_give_their_budget_back() {
    // Copied into one buffer, gathered by vectored writes, and gathered by writes the client
    // takes five bytes at a time (each ending mid-line).
    for (out, sizes_known) in [
        (Recorder::new(usize::MAX), true),
        (Recorder::vectored(usize::MAX, usize::MAX), true),
        (Recorder::vectored(usize::MAX, 5), false),
    ] {
        lines_go_out_together(out, sizes_known).await;
    }
}

async fn lines_go_out_together(out: Recorder, sizes_known: bool) {
    let budget = Budget::new(1 << 20);
    let long = "L".repeat(WRITE_CHUNK + 10);
    let filler = "f".repeat(WRITE_CHUNK - 4); // with d, one byte short of a piece
    let lines = [
        ("a", true),
        ("bb", false),
        ("cc", true),
        (long.as_str(), true),
        ("d", true),
        (filler.as_str(), true),
        ("e", true),
    ];
    let (tx, rx) = mpsc::channel(16);
    for (line, ends) in lines {
        tx.send(budget.queued(line, ends)).await.unwrap();
    }
    drop(tx);
    let written = write_lines(out.clone(), rx, Duration::from_secs(5)).await;
    assert_eq!(written, Written::All);
    let want: String = lines
        .iter()
        .map(|(l, ends)| format!("{l}{}", if *ends { "\n" } else { "" }))
        .collect();
    assert_eq!(out.bytes(), want.as_bytes());
    let sizes: Vec<usize> = out.writes.lock().unwrap().iter().map(Vec::len).collect();
    let filler_and_d = 2 + filler.len() + 1;
    if sizes_known {
        assert_eq!(
            sizes,
            [2 + 2 + 3, WRITE_CHUNK, 10, 1, filler_and_d, 2],
            "a, bb and cc together; the long line in pieces, its newline alone; d and the \
             filler together; e, one byte over the piece beside them, next"
        );
    }
    assert_eq!(budget.held(), [0, 0, 0], "every byte given back once");
}

/// A client that stops reading is cut after the write timeout, and what was not written is
/// given back when the writer ends (the lines drop); what was written was given back before.
#[tokio::test]
async fn a_client_that_stops_reading_is_cut_and_frees_what_it_held() {
    for out in [Recorder::new(6 + 3), Recorder::vectored(6 + 3, 2)] {
        stalled_client_is_cut(out).await;
    }
}

async fn stalled_client_is_cut(out: Recorder) {
    let budget = Budget::new(1 << 20);
    let (tx, rx) = mpsc::channel(16);
    tx.send(budget.queued("first", true)).await.unwrap();
    let writer = tokio::spawn(write_lines(out.clone(), rx, Duration::from_millis(200)));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(budget.held(), [0, 0, 0], "the first line was taken whole");
    tx.send(budget.queued("second", true)).await.unwrap();
    tx.send(budget.queued("third", true)).await.unwrap();
    let started = std::time::Instant::now();
    let written = tokio::time::timeout(Duration::from_secs(5), writer).await;
    assert_eq!(written.unwrap().unwrap(), Written::Stalled);
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.bytes(), b"first\nsec");
    assert_eq!(
        budget.held(),
        [0, 0, 0],
        "nothing held by a writer that ended"
    );
    drop(tx);
}

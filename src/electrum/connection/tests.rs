//! The writer task driven directly: what it writes, in how many writes, what it gives back to
//! the answer budget, and when it gives up on a client that does not read.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};

use super::writer::Messages;
use super::{write_lines, write_messages, WriteSide, Written};
use crate::electrum::outbox::{Held, Queued, WRITE_CHUNK};
use crate::electrum::outbox::{Outbox, Shares, WriteNow};
use crate::work::HostShares;

/// A client socket that records each write the writer makes, and takes nothing more once it
/// has taken `room` bytes (a client that stopped reading) until given more
/// ([`Recorder::more_room`]). With `vectored`, it takes vectored writes (as TCP and TLS streams
/// do), at most `most` bytes a write, ending mid-slice.
#[derive(Clone)]
struct Recorder {
    writes: Arc<Mutex<Vec<Vec<u8>>>>,
    room: Arc<Mutex<(usize, Option<std::task::Waker>)>>,
    vectored: bool,
    most: usize,
    /// Flushes still to answer `Pending` (as TLS may, with records it could not send yet),
    /// and the flushes answered `Ready`.
    refused_flushes: Arc<AtomicUsize>,
    flushes: Arc<AtomicUsize>,
}

impl Recorder {
    fn new(room: usize) -> Self {
        Recorder {
            writes: Arc::default(),
            room: Arc::new(Mutex::new((room, None))),
            vectored: false,
            most: usize::MAX,
            refused_flushes: Arc::default(),
            flushes: Arc::default(),
        }
    }

    /// The client reads `n` more bytes: a writer waiting for room is woken.
    fn more_room(&self, n: usize) {
        let mut room = self.room.lock().unwrap();
        room.0 += n;
        if let Some(waker) = room.1.take() {
            waker.wake();
        }
    }

    fn vectored(room: usize, most: usize) -> Self {
        Recorder {
            vectored: true,
            most,
            ..Recorder::new(room)
        }
    }

    /// Records what a write of `bufs` takes; `Pending` when the client reads no more (woken
    /// when it is given more room).
    fn take(
        &self,
        cx: &Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let mut room = self.room.lock().unwrap();
        let free = (room.0 - self.taken()).min(self.most);
        if free == 0 {
            room.1 = Some(cx.waker().clone());
            return Poll::Pending;
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
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.take(cx, &[std::io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.vectored {
            true => self.take(cx, bufs),
            false => self.take(cx, &bufs[..bufs.len().min(1)]),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.vectored
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let refused = self.refused_flushes.load(Ordering::SeqCst);
        if refused > 0 {
            self.refused_flushes.store(refused - 1, Ordering::SeqCst);
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.flushes.fetch_add(1, Ordering::SeqCst);
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
            skip: 0,
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
    let written = write_lines(WriteSide::new(out.clone()), rx, Duration::from_secs(5)).await;
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
    let writer = tokio::spawn(write_lines(
        WriteSide::new(out.clone()),
        rx,
        Duration::from_millis(200),
    ));
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

/// The session writes a line itself only while nothing handed to the writer task is ahead of
/// it and the writer is not writing; a line the client takes in part is finished by the writer
/// task, before anything handed after it, and nothing of the budget stays held.
#[tokio::test]
async fn the_session_writes_itself_only_with_nothing_ahead_and_the_writer_finishes_its_rest() {
    let budget = Budget::new(1 << 20);
    let out = Recorder::new(2 + 5);
    let side = WriteSide::new(out.clone());
    // Taken whole at once: written, nothing for the writer task.
    assert!(side.write_now(budget.queued("a", true)).is_none());
    assert_eq!(out.bytes(), b"a\n");
    // While the writer writes (holds the write side), the line is left to it, untouched.
    let writing = side.out.try_lock().unwrap();
    let left = side.write_now(budget.queued("b", true)).unwrap();
    assert_eq!((left.rest(), left.ends_line), (&b"b"[..], true));
    drop(writing);
    // Taken in part (the client has room for 5 more bytes): the rest, with its newline, is
    // what the writer task must write, and what was taken is no longer held.
    let rest = side.write_now(budget.queued("hello!", true)).unwrap();
    assert_eq!((rest.rest(), rest.ends_line), (&b"!\n"[..], false));
    assert_eq!(budget.held(), [2, 2, 2], "b, and the rest of hello!");
    let (tx, rx) = mpsc::channel(16);
    let writer = tokio::spawn(write_lines(side.clone(), rx, Duration::from_secs(5)));
    side.handing();
    tx.send(rest).await.unwrap();
    // With the rest handed over and not written, a later line is not written directly.
    let later = side.write_now(budget.queued("c", true)).unwrap();
    assert_eq!(later.rest(), b"c");
    side.handing();
    tx.send(later).await.unwrap();
    drop(left);
    out.more_room(1 << 10);
    drop(tx);
    assert_eq!(writer.await.unwrap(), Written::All);
    assert_eq!(out.bytes(), b"a\nhello!\nc\n");
    assert_eq!(budget.held(), [0, 0, 0], "every byte given back once");
    // Everything handed over is written: the session may write itself again.
    assert!(side.write_now(budget.queued("d", true)).is_none());
    assert_eq!(out.bytes(), b"a\nhello!\nc\nd\n");
}

/// Over WebSocket, a line handed over in pieces (a batch's answers past 64 KiB) goes out as
/// one message, and a message the session sent itself comes before lines handed after it.
#[tokio::test]
async fn websocket_pieces_go_out_as_one_message_in_order() {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::WebSocketStream;
    let budget = Budget::new(1 << 20);
    let (server, client) = tokio::io::duplex(1 << 20);
    let server = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
    let mut client = WebSocketStream::from_raw_socket(client, Role::Client, None).await;
    let (sink, _source) = server.split();
    let side = WriteSide::new(Messages(sink));
    assert!(
        side.write_now(budget.queued("[1", true)).is_none(),
        "sent at once"
    );
    let (tx, rx) = mpsc::channel(16);
    let writer = tokio::spawn(write_messages(side.clone(), rx, Duration::from_secs(5)));
    for (piece, ends) in [("[2,", false), ("3,", false), ("4]", true)] {
        let piece = budget.queued(piece, ends);
        side.handing();
        tx.send(piece).await.unwrap();
    }
    until_taken(&tx).await;
    assert_eq!(side.handed(), 0, "[2,3,4] sent");
    // A piece is never sent by the session itself, nor a line while pieces before it wait in
    // the writer for their last.
    let piece = side.write_now(budget.queued("[5,", false)).unwrap();
    side.handing();
    tx.send(piece).await.unwrap();
    until_taken(&tx).await;
    assert_eq!(
        side.handed(),
        1,
        "the piece waits in the writer for the rest of its line"
    );
    let last = side.write_now(budget.queued("6]", true));
    let last = last.expect("left to the writer, behind its first piece");
    side.handing();
    tx.send(last).await.unwrap();
    drop(tx);
    assert_eq!(writer.await.unwrap(), Written::All);
    let mut texts = Vec::new();
    use tokio_tungstenite::tungstenite::Message;
    let wait = Duration::from_secs(5);
    while let Ok(Some(Ok(message))) = tokio::time::timeout(wait, client.next()).await {
        match message {
            Message::Text(text) => texts.push(text.to_string()),
            _ => break, // the writer's close, once all was sent
        }
    }
    assert_eq!(texts, ["[1", "[2,3,4]", "[5,6]"]);
    assert_eq!(budget.held(), [0, 0, 0]);
}

/// Yields until the writer task has taken everything queued to it.
async fn until_taken(tx: &mpsc::Sender<Queued>) {
    while tx.capacity() < tx.max_capacity() {
        tokio::task::yield_now().await;
    }
}

/// A line the connection takes but does not send at once (TLS, whose flush may wait): the
/// session hands the writer task an empty rest, which it flushes; nothing is written twice, and
/// nothing after it is written by the session before that flush.
#[tokio::test]
async fn a_line_taken_but_not_flushed_is_flushed_by_the_writer() {
    let budget = Budget::new(1 << 20);
    let out = Recorder::new(usize::MAX);
    out.refused_flushes.store(1, Ordering::SeqCst);
    let side = WriteSide::new(out.clone());
    let rest = side.write_now(budget.queued("x", true)).unwrap();
    assert_eq!((rest.rest(), rest.ends_line), (&b""[..], false));
    assert_eq!(out.bytes(), b"x\n");
    let (tx, rx) = mpsc::channel(16);
    side.handing();
    tx.send(rest).await.unwrap();
    let after = side.write_now(budget.queued("y", true));
    let after = after.expect("not before the writer's flush");
    let writer = tokio::spawn(write_lines(side.clone(), rx, Duration::from_secs(5)));
    side.handing();
    tx.send(after).await.unwrap();
    drop(tx);
    assert_eq!(writer.await.unwrap(), Written::All);
    assert_eq!(out.bytes(), b"x\ny\n");
    assert!(out.flushes.load(Ordering::SeqCst) >= 1);
    assert_eq!(budget.held(), [0, 0, 0]);
}

/// The session's queue writes a line itself only when the session lets it (a client with no
/// further request waiting) and nothing is handed over ahead of it; several notifications at
/// once go to the writer task together.
#[tokio::test]
async fn the_outbox_writes_directly_only_when_let_and_nothing_is_ahead() {
    let out = Recorder::new(usize::MAX);
    let side = WriteSide::new(out.clone());
    let (tx, rx) = mpsc::channel(16);
    let outbox = Outbox::new(tx.clone(), side.clone(), Shares::new(1 << 20), "tcp");
    let writer = tokio::spawn(write_lines(side.clone(), rx, Duration::from_secs(5)));
    // Not let (a pipelining client): handed over, not written yet.
    assert!(outbox.send("a".into()).await);
    assert_eq!((side.handed(), out.bytes()), (1, Vec::new()));
    outbox.write_directly(true);
    // Let, but "a" is ahead of it: handed over too.
    assert!(outbox.send("b".into()).await);
    assert_eq!((side.handed(), out.bytes()), (2, Vec::new()));
    until_taken(&tx).await;
    while side.handed() > 0 {
        tokio::task::yield_now().await;
    }
    // Let, nothing ahead: written before `send` returns, the writer task never woken.
    assert!(outbox.send("c".into()).await);
    assert_eq!((side.handed(), out.bytes()), (0, b"a\nb\nc\n".to_vec()));
    // Two at once: to the writer, together.
    assert!(outbox.send_all(vec!["d".into(), "e".into()]).await);
    assert_eq!(side.handed(), 2);
    drop((outbox, tx));
    assert_eq!(writer.await.unwrap(), Written::All);
    assert_eq!(out.bytes(), b"a\nb\nc\nd\ne\n");
    assert_eq!(out.writes.lock().unwrap().last().unwrap(), b"d\ne\n");
}

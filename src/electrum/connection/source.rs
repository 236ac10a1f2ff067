//! What a session reads its requests from: the lines of a TCP or TLS stream ([`Lines`]), or
//! WebSocket messages ([`Messages`]), both read on the session's own task. Each
//! [`Source::next`] is cancel-safe (what was read stays in the source), so the session waits
//! for a request beside its notifications and its scans; a request costs no hand-off between
//! tasks on its way in. A WebSocket's pings must be answered, and its close seen, while the
//! session is busy with a long answer or waits for the pool: it is read ahead meanwhile
//! ([`ReadAhead`]), one message at most.

use std::future::Future;
use std::net::SocketAddr;

use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

/// What a transport hands the session: one request text (a line, or a WebSocket message).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Incoming {
    /// A request or a batch, as received.
    Request(Vec<u8>),
    /// A request over the size limit: answered with an error, then the client is dropped.
    TooLong,
    /// A WebSocket client pinging faster than its allowance: dropped.
    PingFlood,
}

/// Where a session's requests come from.
pub(crate) trait Source {
    /// The next request; `None` once the client closed the connection, it failed, or it must
    /// not be answered. Cancel-safe: dropped before it is ready, it loses nothing.
    fn next(&mut self) -> impl Future<Output = Option<Incoming>> + Send;

    /// Runs `work`, what the session does with what it read, to its end. A source that must
    /// go on reading meanwhile ([`ReadAhead`]) reads then; a byte stream's lines wait.
    fn alongside<F: Future + Send>(&mut self, work: F) -> impl Future<Output = F::Output> + Send {
        work
    }

    /// Whether more of the client's requests are already read and waiting (a client
    /// pipelining them), as far as the source can tell.
    fn has_more(&self) -> bool {
        false
    }
}

/// Bytes asked of the socket at once: a line buffer holds at most the line limit and one read.
const READ_CHUNK: usize = 8 << 10;
/// A line buffer emptied with more room than this gives it back.
const KEPT_ROOM: usize = 64 << 10;

/// Newline-delimited requests of a byte stream, each at most `limit` bytes.
pub(crate) struct Lines<R> {
    reader: R,
    /// Bytes read and not yet taken: the unread part starts at `start`; no newline before
    /// `scanned`.
    buf: Vec<u8>,
    start: usize,
    scanned: usize,
    limit: usize,
    /// The stream ended (or failed): what is left is the last line.
    ended: bool,
    /// The connection's first bytes, until they tell whether it opened with a PROXY header.
    opening: Option<Vec<u8>>,
    peer: SocketAddr,
}

impl<R: AsyncRead + Unpin + Send> Lines<R> {
    /// The requests of `reader`, lines of at most `limit` bytes, from the client at `peer`.
    pub(crate) fn new(reader: R, limit: usize, peer: SocketAddr) -> Self {
        Lines {
            reader,
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            limit,
            ended: false,
            opening: Some(Vec::new()),
            peer,
        }
    }

    /// The next whole line read (without its newline, and whether it had one: the last line of
    /// a stream that ended may not), or `Err(())` for one over the limit; `Ok(None)` when more
    /// must be read.
    fn take_line(&mut self) -> Result<Option<(Vec<u8>, bool)>, ()> {
        let unread = &self.buf[self.start..];
        match unread[self.scanned..].iter().position(|&b| b == b'\n') {
            Some(at) => {
                let end = self.scanned + at;
                if end > self.limit {
                    return Err(());
                }
                let line = unread[..end].to_vec();
                self.start += end + 1;
                self.scanned = 0;
                Ok(Some((line, true)))
            }
            None if unread.len() > self.limit => Err(()),
            None if self.ended && !unread.is_empty() => {
                let line = unread.to_vec();
                self.start = self.buf.len();
                self.scanned = 0;
                Ok(Some((line, false)))
            }
            None => {
                self.scanned = unread.len();
                Ok(None)
            }
        }
    }

    /// A line as the session gets it: `None` for a blank one, and for the connection's opening
    /// until its first bytes tell it is no PROXY header (a balancer's is read before the session
    /// starts: one from a client no balancer vouches for is closed, never answered as a
    /// request). `Err(())` when the connection must close.
    fn request(&mut self, line: &[u8], newline: bool) -> Result<Option<Incoming>, ()> {
        if let Some(first) = self.opening.as_mut() {
            let more = 12 - first.len().min(12);
            let end: &[u8] = if newline { b"\n" } else { b"" };
            first.extend(line.iter().chain(end).take(more));
            match crate::listen::proxy::opens_with_header(first) {
                Some(true) => {
                    let peer = self.peer;
                    tracing::debug!("electrum client {peer}: a PROXY header, not from a balancer");
                    return Err(());
                }
                Some(false) => self.opening = None,
                // Blank lines and a NUL so far: nothing to answer yet.
                None => return Ok(None),
            }
        }
        let line = line.trim_ascii();
        Ok((!line.is_empty()).then(|| Incoming::Request(line.to_vec())))
    }

    /// Reads at most [`READ_CHUNK`] more bytes of the stream (cancel-safe: `read` reads
    /// nothing unless it returns). A failed stream drops what it left unfinished; one that
    /// ended keeps its last line.
    async fn fill(&mut self) {
        if self.start == self.buf.len() && self.buf.capacity() > KEPT_ROOM {
            self.buf = Vec::new();
            self.start = 0;
        } else if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let mut chunk = [0u8; READ_CHUNK];
        match self.reader.read(&mut chunk).await {
            Ok(0) => self.ended = true,
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(_) => {
                self.start = self.buf.len();
                self.scanned = 0;
                self.ended = true;
            }
        }
    }
}

impl<R: AsyncRead + Unpin + Send> Source for Lines<R> {
    async fn next(&mut self) -> Option<Incoming> {
        loop {
            match self.take_line() {
                Err(()) => return Some(Incoming::TooLong),
                Ok(Some((line, newline))) => match self.request(&line, newline) {
                    Err(()) => return None,
                    Ok(Some(request)) => return Some(request),
                    Ok(None) => continue,
                },
                Ok(None) if self.ended => return None,
                Ok(None) => self.fill().await,
            }
        }
    }

    fn has_more(&self) -> bool {
        self.start < self.buf.len()
    }
}

/// A source read on the session's task that goes on reading while the session is busy with
/// what it read (an answer waiting for the pool or for room, notifications being sent): one
/// request is read ahead and kept, and reading stops there until the session takes it. Reading
/// is what answers a WebSocket's pings and sees its close; with a reader task of its own each
/// request cost a hand-off between tasks (a wake-up of the other worker at one client).
pub(crate) struct ReadAhead<S> {
    source: S,
    /// What was read while the session was busy: a request, or the end.
    ahead: Option<Option<Incoming>>,
}

impl<S: Source + Send> ReadAhead<S> {
    /// Reads `source` on the session's task, ahead while it is busy.
    pub(crate) fn new(source: S) -> Self {
        ReadAhead {
            source,
            ahead: None,
        }
    }
}

impl<S: Source + Send> Source for ReadAhead<S> {
    async fn next(&mut self) -> Option<Incoming> {
        match self.ahead.take() {
            Some(read) => read,
            None => self.source.next().await,
        }
    }

    async fn alongside<F: Future + Send>(&mut self, work: F) -> F::Output {
        tokio::pin!(work);
        loop {
            tokio::select! {
                biased;
                done = &mut work => return done,
                read = self.source.next(), if self.ahead.is_none() => self.ahead = Some(read),
            }
        }
    }

    fn has_more(&self) -> bool {
        self.ahead.is_some() || self.source.has_more()
    }
}

/// Pings a WebSocket client may send at once; then one a second. Each ping is answered with a
/// pong that tungstenite buffers until the socket takes it, without bound: a client that pings
/// without reading grew the server by what it sent, for as long as its idle timeout (pings are
/// not requests). Browsers send none (they answer a server's), nor do Electrum wallets; a
/// client's keep-alive every few seconds stays well within it.
const PING_BURST: u32 = 10;

/// Requests of a WebSocket connection: one request or batch per text (or binary) message.
pub(crate) struct Messages<S> {
    stream: S,
    pings: PingAllowance,
}

impl<S> Messages<S> {
    /// The messages of `stream`, its pings allowed [`PING_BURST`] at once, then one a second.
    pub(crate) fn new(stream: S) -> Self {
        Messages {
            stream,
            pings: PingAllowance::new(std::time::Instant::now()),
        }
    }
}

impl<S> Source for Messages<S>
where
    S: futures_util::Stream<Item = Result<Message, WsError>> + Unpin + Send,
{
    async fn next(&mut self) -> Option<Incoming> {
        loop {
            return match self.stream.next().await? {
                Ok(Message::Text(text)) => Some(Incoming::Request(text.as_bytes().to_vec())),
                Ok(Message::Binary(bytes)) => Some(Incoming::Request(bytes.to_vec())),
                Ok(Message::Ping(_)) if !self.pings.take(std::time::Instant::now()) => {
                    Some(Incoming::PingFlood)
                }
                Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => continue,
                Ok(Message::Close(_)) => None,
                Err(WsError::Capacity(_)) => Some(Incoming::TooLong),
                Err(_) => None,
            };
        }
    }
}

/// A token bucket of pings: [`PING_BURST`] at most, one more each second.
struct PingAllowance {
    left: u32,
    /// When the last whole second was credited.
    credited: std::time::Instant,
}

impl PingAllowance {
    fn new(now: std::time::Instant) -> Self {
        PingAllowance {
            left: PING_BURST,
            credited: now,
        }
    }

    /// Whether a ping at `now` is allowed (and takes its token).
    fn take(&mut self, now: std::time::Instant) -> bool {
        let seconds = now.saturating_duration_since(self.credited).as_secs();
        if seconds > 0 {
            let earned = u32::try_from(seconds).unwrap_or(u32::MAX);
            self.left = self.left.saturating_add(earned).min(PING_BURST);
            self.credited += std::time::Duration::from_secs(seconds);
        }
        match self.left {
            0 => false,
            _ => {
                self.left -= 1;
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        "127.0.0.1:1".parse().unwrap()
    }

    /// Every request `input` gives, read in pieces of `piece` bytes.
    async fn requests(input: &[u8], piece: usize, limit: usize) -> Vec<Incoming> {
        let (mut client, server) = tokio::io::duplex(piece);
        let input = input.to_vec();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for chunk in input.chunks(piece) {
                client.write_all(chunk).await.unwrap();
            }
        });
        let mut lines = Lines::new(server, limit, peer());
        let mut out = Vec::new();
        while let Some(incoming) = lines.next().await {
            let too_long = incoming == Incoming::TooLong;
            out.push(incoming);
            if too_long {
                break;
            }
        }
        writer.abort();
        out
    }

    fn request(text: &str) -> Incoming {
        Incoming::Request(text.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn lines_in_any_pieces_are_the_same_requests() {
        let input = b"\n{\"a\":1}\r\n  \n{\"b\":2}\n{\"c\":3}";
        for piece in [1, 2, 5, 64] {
            let got = requests(input, piece, 100).await;
            let want = vec![
                request("{\"a\":1}"),
                request("{\"b\":2}"),
                request("{\"c\":3}"),
            ];
            assert_eq!(got, want, "in pieces of {piece}");
        }
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_too_long_with_or_without_its_newline() {
        let exact = format!("{}\n{}\n", "x".repeat(10), "y".repeat(11));
        for piece in [1, 3, 64] {
            let got = requests(exact.as_bytes(), piece, 10).await;
            assert_eq!(got, vec![request(&"x".repeat(10)), Incoming::TooLong]);
            let endless = "z".repeat(50);
            let got = requests(endless.as_bytes(), piece, 10).await;
            assert_eq!(got, vec![Incoming::TooLong], "in pieces of {piece}");
        }
    }

    #[tokio::test]
    async fn a_proxy_header_from_a_client_closes_it_unanswered() {
        for opening in [
            &b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n{}\n"[..],
            b"\r\n\r\n\0\r\nQUIT\n{}\n",
        ] {
            assert_eq!(requests(opening, 4, 100).await, vec![], "{opening:?}");
        }
        assert_eq!(requests(b"\n\n{}\n", 4, 100).await, vec![request("{}")]);
    }

    #[tokio::test]
    async fn a_long_line_leaves_no_room_held_once_taken() {
        use tokio::io::AsyncWriteExt;
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let mut lines = Lines::new(server, 200_000, peer());
        let long = "x".repeat(150_000);
        client
            .write_all(format!("{long}\n").as_bytes())
            .await
            .unwrap();
        assert_eq!(lines.next().await, Some(request(&long)));
        assert!(lines.buf.capacity() >= 150_000);
        let idle = tokio::time::timeout(std::time::Duration::from_millis(20), lines.next()).await;
        assert!(idle.is_err(), "nothing more to read");
        assert_eq!(lines.buf.capacity(), 0, "the emptied buffer is given back");
    }

    #[tokio::test]
    async fn a_last_line_without_newline_is_read_and_checked_as_it_came() {
        assert_eq!(
            requests(b"{}\n{\"last\":1}", 3, 100).await,
            vec![request("{}"), request("{\"last\":1}")]
        );
        // Eleven bytes of a PROXY v2 signature, then the end: never answered (the rest of a
        // header could have followed), as when the stream goes on.
        let cut = b"\r\n\r\n\0\r\nQUI";
        assert_eq!(requests(cut, 4, 100).await, vec![]);
    }

    #[tokio::test]
    async fn read_ahead_keeps_one_request_while_busy_and_loses_none() {
        use tokio::io::AsyncWriteExt;
        let (mut client, server) = tokio::io::duplex(64);
        let mut source = ReadAhead::new(Lines::new(server, 100, peer()));
        client.write_all(b"{\"a\":1}\n{\"b\":2}\n").await.unwrap();
        let busy = tokio::time::sleep(std::time::Duration::from_millis(20));
        source.alongside(busy).await;
        assert_eq!(
            source.ahead,
            Some(Some(request("{\"a\":1}"))),
            "one read ahead"
        );
        // Busy again with one kept: nothing more is read.
        let busy = tokio::time::sleep(std::time::Duration::from_millis(20));
        source.alongside(busy).await;
        assert_eq!(source.ahead, Some(Some(request("{\"a\":1}"))));
        client.write_all(b"{\"c\":3}\n").await.unwrap();
        drop(client);
        let mut got = Vec::new();
        while let Some(incoming) = source.next().await {
            got.push(incoming);
        }
        let want = ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"].map(request);
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn work_done_at_once_reads_nothing_ahead() {
        use tokio::io::AsyncWriteExt;
        let (mut client, server) = tokio::io::duplex(64);
        let mut source = ReadAhead::new(Lines::new(server, 100, peer()));
        client.write_all(b"{\"a\":1}\n").await.unwrap();
        assert_eq!(source.alongside(async { 7 }).await, 7);
        assert_eq!(source.ahead, None);
        assert_eq!(source.next().await, Some(request("{\"a\":1}")));
    }

    #[tokio::test]
    async fn a_websocket_ping_is_answered_and_its_close_seen_while_the_session_is_busy() {
        use futures_util::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::protocol::Role;
        use tokio_tungstenite::WebSocketStream;
        let (client, server) = tokio::io::duplex(1 << 16);
        let server = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
        let mut client = WebSocketStream::from_raw_socket(client, Role::Client, None).await;
        let (_sink, stream) = server.split();
        let mut source = ReadAhead::new(Messages::new(stream));
        let (ponged, heard) = tokio::sync::oneshot::channel();
        let pinger = tokio::spawn(async move {
            client
                .send(Message::Ping(b"hi".to_vec().into()))
                .await
                .unwrap();
            let pong = client.next().await;
            let _ = ponged.send(pong.map(|m| m.map(|m| m.into_data().to_vec())));
            client.close(None).await.unwrap();
        });
        // The session's work ends only once the client had its pong.
        let within = std::time::Duration::from_secs(5);
        let pong = tokio::time::timeout(within, source.alongside(heard)).await;
        assert_eq!(
            pong.expect("a pong while busy").unwrap().unwrap().unwrap(),
            b"hi"
        );
        // Busy a while after the client closed (its pinger done before the session runs again).
        let busy = async {
            pinger.await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        tokio::time::timeout(within, source.alongside(busy))
            .await
            .unwrap();
        assert_eq!(source.ahead, Some(None), "the close seen while busy");
        assert_eq!(source.next().await, None);
    }

    #[test]
    fn pings_are_allowed_ten_at_once_then_one_a_second() {
        let start = std::time::Instant::now();
        let mut pings = PingAllowance::new(start);
        let at = |ms: u64| start + std::time::Duration::from_millis(ms);
        assert!((0..PING_BURST).all(|_| pings.take(at(0))));
        assert!(!pings.take(at(999)), "the eleventh within the first second");
        assert!(pings.take(at(1_000)));
        assert!(!pings.take(at(1_500)));
        // Idle a minute: the burst again, no more.
        assert!((0..PING_BURST).all(|_| pings.take(at(61_000))));
        assert!(!pings.take(at(61_000)));
        // One a second goes on for ever; a clock going back earns nothing.
        assert!((62..200).all(|s| pings.take(at(s * 1_000))));
        assert!(!pings.take(at(150_000)));
    }

    #[tokio::test]
    async fn a_read_dropped_midway_loses_nothing() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut lines = Lines::new(server, 100, peer());
        use tokio::io::AsyncWriteExt;
        client.write_all(b"{\"half\":").await.unwrap();
        let waited = tokio::time::timeout(std::time::Duration::from_millis(20), lines.next()).await;
        assert!(waited.is_err(), "no whole line yet");
        client.write_all(b"1}\n").await.unwrap();
        assert_eq!(lines.next().await, Some(request("{\"half\":1}")));
        drop(client);
        assert_eq!(lines.next().await, None);
    }
}

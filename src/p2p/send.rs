//! The messages queued for one peer, counted in bytes as Core counts a peer's send buffer
//! (`CNode::nSendSize`). Past [`MAX_SEND_BUFFER`] the session pauses (Core's `fPauseSend`):
//! it reads no more of the peer's messages and serves no more of what it asked for until the
//! peer has read enough; a peer that reads nothing of what is queued for the P2P timeout
//! (`p2p_timeout`, 2 minutes) is disconnected (Core's "socket sending timeout" in
//! `CConnman::InactivityCheck`, after 20 minutes there: cairn drops a peer that sends nothing
//! after the same 2 minutes, and one that reads nothing while it is owed data is as idle).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bitcoin::p2p::message::NetworkMessage;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::codec::Outgoing;
use super::error::PeerError;
use super::wire::WriteWire;

/// Queued bytes past which a peer's requests wait (Core's `DEFAULT_MAXSENDBUFFER`, 1,000 kB).
pub const MAX_SEND_BUFFER: usize = 1_000_000;
/// Queued bytes at which the peer is dropped at once. Data (blocks, transactions, filters) is
/// queued only below [`MAX_SEND_BUFFER`], so only the small messages cairn sends unasked
/// (announcements, pings, `getheaders`) can push a queue this far, and only for a peer that
/// stopped reading: the buffer, a largest block (4 MB) and as much again.
const MAX_QUEUED: usize = 2 * MAX_SEND_BUFFER + 4_000_000;

/// The session's end of a peer's send queue.
pub struct SendQueue {
    tx: mpsc::UnboundedSender<(Outgoing, usize)>,
    counts: Arc<Counts>,
    /// The connection's count of bytes written to its socket.
    sent: Arc<AtomicU64>,
}

/// What the session and the writer task share.
#[derive(Default)]
struct Counts {
    /// Bytes queued and not yet handed to the socket.
    queued: AtomicUsize,
    /// Woken after each message the writer hands over.
    written: Notify,
}

impl SendQueue {
    /// Queues a message; refused when the writer is gone or the peer stopped reading long ago.
    pub fn push(&self, item: Outgoing) -> Result<(), PeerError> {
        let size = wire_size(&item);
        let queued = self.counts.queued.fetch_add(size, Ordering::SeqCst) + size;
        if queued > MAX_QUEUED {
            return Err(PeerError::NotReading(format!(
                "{queued} bytes queued for it, unread"
            )));
        }
        self.tx
            .send((item, size))
            .map_err(|_| PeerError::WriterGone)
    }

    /// Whether the queue is past [`MAX_SEND_BUFFER`] (Core's `fPauseSend`).
    pub fn paused(&self) -> bool {
        self.queued() > MAX_SEND_BUFFER
    }

    /// Whether the writer task has ended (its socket failed).
    pub fn writer_gone(&self) -> bool {
        self.tx.is_closed()
    }

    /// Bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.counts.queued.load(Ordering::SeqCst)
    }

    /// Returns once the writer has handed over another message (at once if it has since the
    /// last call).
    pub async fn written(&self) {
        self.counts.written.notified().await
    }

    /// A watch on whether the peer reads what is queued within `timeout`.
    pub fn watch(&self, timeout: Duration) -> SendWatch {
        SendWatch::new(self.sent.clone(), timeout)
    }
}

/// Starts a connection's writer task: the session never stops reading because the peer is
/// slow to read (two nodes each waiting for the other to read would deadlock). Queued messages
/// are written together, then flushed once.
pub fn spawn_writer(mut writer: WriteWire) -> (JoinHandle<()>, SendQueue) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Outgoing, usize)>();
    let counts = Arc::new(Counts::default());
    let sent = writer.sent();
    let shared = counts.clone();
    let task = tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut next = Some(first);
            while let Some((item, size)) = next.take() {
                let written = writer.send(item).await;
                shared.queued.fetch_sub(size, Ordering::SeqCst);
                shared.written.notify_one();
                if written.is_err() {
                    return;
                }
                next = rx.try_recv().ok();
            }
            if writer.flush().await.is_err() {
                return;
            }
        }
    });
    (task, SendQueue { tx, counts, sent })
}

/// Watches whether a peer reads what is queued for it: stalled once bytes have waited its
/// timeout with the connection's sent count unchanged.
pub struct SendWatch {
    sent: Arc<AtomicU64>,
    timeout: Duration,
    last_sent: u64,
    since: Instant,
}

impl SendWatch {
    /// Watches the connection whose sent count is `sent`.
    pub fn new(sent: Arc<AtomicU64>, timeout: Duration) -> Self {
        SendWatch {
            timeout,
            last_sent: sent.load(Ordering::Relaxed),
            sent,
            since: Instant::now(),
        }
    }

    /// Whether the peer has read anything since the last look (which [`SendWatch::stalled`]
    /// takes too).
    pub fn advanced(&self) -> bool {
        self.sent.load(Ordering::Relaxed) != self.last_sent
    }

    /// Whether the peer has read nothing for its timeout while `queued` bytes wait.
    pub fn stalled(&mut self, queued: usize, now: Instant) -> bool {
        let sent = self.sent.load(Ordering::Relaxed);
        if queued == 0 || sent != self.last_sent {
            self.last_sent = sent;
            self.since = now;
            return false;
        }
        now.duration_since(self.since) > self.timeout
    }
}

/// A message's size on the wire (v1 framing), within a few bytes: exact for what can be large.
fn wire_size(item: &Outgoing) -> usize {
    const HEADER: usize = 24;
    const VARINT: usize = 5;
    let payload = match item {
        Outgoing::Block(bytes) => bytes.len(),
        Outgoing::Message(m) => match m {
            NetworkMessage::Tx(tx) => tx.total_size(),
            NetworkMessage::Block(b) => b.total_size(),
            NetworkMessage::Headers(h) => VARINT + h.len() * 81,
            NetworkMessage::Inv(v) | NetworkMessage::GetData(v) | NetworkMessage::NotFound(v) => {
                VARINT + v.len() * 36
            }
            NetworkMessage::Addr(v) => VARINT + v.len() * 30,
            NetworkMessage::AddrV2(v) => VARINT + v.len() * (4 + 9 + 1 + 1 + 16 + 2),
            NetworkMessage::CFilter(f) => 1 + 32 + VARINT + f.filter.len(),
            NetworkMessage::CFHeaders(h) => 1 + 32 + 32 + VARINT + h.filter_hashes.len() * 32,
            NetworkMessage::CFCheckpt(c) => 1 + 32 + VARINT + c.filter_headers.len() * 32,
            NetworkMessage::GetHeaders(g) => 4 + VARINT + g.locator_hashes.len() * 32 + 32,
            _ => 64,
        },
    };
    HEADER + payload
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_stalls_only_while_bytes_wait_unread() {
        let sent = Arc::new(AtomicU64::new(0));
        let mut watch = SendWatch::new(sent.clone(), Duration::from_secs(120));
        let start = Instant::now();
        let later = |secs| start + Duration::from_secs(secs);
        // Nothing queued: never stalled, however long.
        assert!(!watch.stalled(0, later(1_000)));
        // Queued and unread: stalled only past the timeout.
        assert!(!watch.stalled(10, later(1_000 + 120)));
        assert!(watch.stalled(10, later(1_000 + 121)));
        // A byte read restarts the clock.
        sent.store(1, Ordering::Relaxed);
        assert!(!watch.stalled(10, later(1_000 + 122)));
        assert!(!watch.stalled(10, later(1_000 + 242)));
        assert!(watch.stalled(10, later(1_000 + 243)));
    }

    #[test]
    fn sizes_count_what_is_large() {
        let block = Outgoing::Block(vec![0; 1_000_000]);
        assert_eq!(wire_size(&block), 1_000_024);
        let inv = NetworkMessage::Inv(vec![
            bitcoin::p2p::message_blockdata::Inventory::Error;
            1000
        ]);
        assert_eq!(wire_size(&Outgoing::Message(inv)), 24 + 5 + 36_000);
    }
}

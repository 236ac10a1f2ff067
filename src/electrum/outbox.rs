//! What a client's answers wait in before they are written: its queue to the writer, and the
//! answer budget all clients share ([`Shares`]), counted per connection and per host, asked
//! before an answer is built where its size is known ([`BudgetRoom`]) and given back as the
//! kernel takes the bytes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::counted::{Room, Taken};
use crate::listen::Seat;
use crate::work::HostShares;

/// How long an answer may wait for a client that does not read before it is dropped.
pub(super) const SEND_TIMEOUT: Duration = Duration::from_secs(60);
/// The piece of a line written at once; each must go out within the write timeout.
pub(super) const WRITE_CHUNK: usize = 64 << 10;
/// Answers up to this size are never refused for a full budget: they wait for room when they
/// are queued.
pub(super) const SMALL_ANSWER: usize = 64 << 10;

/// What the clients of one Electrum server share: the bytes of answers queued and not yet
/// written, at most `electrum_answer_budget_mb` (one connection, and all the connections of one
/// host together, may hold a quarter of it each), and the count of subscriptions.
#[derive(Clone)]
pub struct Shares {
    pub(super) bytes: Arc<tokio::sync::Semaphore>,
    pub(super) share: usize,
    /// What the host of the connection this copy is for holds (shared by its connections).
    pub(super) host: Arc<HostShares>,
    /// The connection's seat in its server's table (its silent-payment subscriptions counted
    /// there).
    pub(super) seat: Arc<Seat>,
    /// Every session's subscriptions.
    pub(super) subscriptions: Arc<AtomicUsize>,
}

impl Shares {
    /// An answer budget of `total` bytes, and no subscriptions yet.
    pub fn new(total: usize) -> Self {
        let total = total.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        Shares {
            bytes: Arc::new(tokio::sync::Semaphore::new(total)),
            share: (total / 4).max(1),
            host: Arc::default(),
            seat: Seat::detached(),
            subscriptions: Arc::default(),
        }
    }

    /// These shares for the connection seated at `seat`.
    pub fn for_seat(&self, seat: Arc<Seat>) -> Self {
        Shares {
            host: seat.host.clone(),
            seat,
            ..self.clone()
        }
    }
}

/// One line, or a piece of one, queued for a client's writer, holding its bytes of the budget
/// until they are written.
pub(super) struct Queued {
    pub(super) line: String,
    /// Whether a newline follows (the line's last piece).
    pub(super) ends_line: bool,
    /// The bytes of `line` already written (by the session, before it handed the rest over).
    pub(super) skip: usize,
    pub(super) held: Held,
}

impl Queued {
    /// The bytes of the line not yet written.
    pub(super) fn rest(&self) -> &[u8] {
        self.line.as_bytes().get(self.skip..).unwrap_or_default()
    }
}

/// Bytes of the budget held for a line, counted against its connection's and its host's
/// shares; given back as they are written ([`Held::release`]) or when dropped.
pub(super) struct Held {
    pub(super) permit: tokio::sync::OwnedSemaphorePermit,
    /// The connection's count.
    pub(super) mine: Arc<AtomicUsize>,
    /// The host's.
    pub(super) host: Arc<HostShares>,
    pub(super) bytes: usize,
}

impl Held {
    /// Gives back `n` of the bytes held (written: the kernel has them).
    pub(super) fn release(&mut self, n: usize) {
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
    pub(super) fn split_off(&mut self, n: usize) -> Option<Held> {
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
    pub(super) fn absorb(&mut self, mut more: Held) {
        if let Some(permits) = more.permit.split(more.permit.num_permits()) {
            self.permit.merge(permits);
        }
        self.bytes += std::mem::take(&mut more.bytes);
    }
}

/// A session's room in the budget while it builds an answer on a blocking thread: each
/// [`Room::take`] takes what the budget has free now and never waits (waiting there would hold
/// a thread of the blocking pool, and part of the budget, for other clients' writes).
pub(super) struct BudgetRoom<'a> {
    pub(super) out: &'a Outbox,
    pub(super) held: Option<Held>,
}

impl<'a> BudgetRoom<'a> {
    pub(super) fn new(out: &'a Outbox) -> Self {
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
    pub(super) fn count(&self, f: impl Fn(&AtomicUsize) -> usize) {
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

/// A write side the session may write to without waiting.
pub(super) trait WriteNow: Send + Sync {
    /// Writes `queued` now if nothing handed to the writer task is ahead of it and the
    /// connection takes it whole without waiting: `None` then; else what is left of it to hand
    /// to the writer task (all of it when nothing was written; an empty rest that is not a line
    /// asks the writer to flush what the connection took).
    fn write_now(&self, queued: Queued) -> Option<Queued>;

    /// A line is being handed to the writer task.
    fn handing(&self);
}

/// The queue to a client's writer task, with how long a line may wait for room in it, and the
/// write side the session writes a line to itself when nothing is queued ahead of it.
pub(super) struct Outbox {
    pub(super) tx: mpsc::Sender<Queued>,
    pub(super) side: Arc<dyn WriteNow>,
    /// Whether the session may write its lines itself now: not while the client has more
    /// requests waiting (pipelined answers are gathered into one write by the writer task).
    pub(super) direct: AtomicBool,
    pub(super) timeout: std::time::Duration,
    pub(super) budget: Shares,
    /// What this connection holds of the budget.
    pub(super) mine: Arc<AtomicUsize>,
    /// The transport's label, for the metrics.
    pub(super) transport: &'static str,
    /// Bytes queued to this client (`cairn_electrum_sent_bytes_total`).
    pub(super) sent: prometheus::IntCounter,
}

impl Outbox {
    pub(super) fn new(
        tx: mpsc::Sender<Queued>,
        side: Arc<dyn WriteNow>,
        budget: Shares,
        transport: &'static str,
    ) -> Self {
        let sent = crate::metrics::metrics()
            .electrum_sent_bytes
            .with_label_values(&[transport]);
        Outbox {
            tx,
            side,
            direct: AtomicBool::new(false),
            timeout: SEND_TIMEOUT,
            budget,
            mine: Arc::default(),
            transport,
            sent,
        }
    }

    /// Queues one line; `false` if the client (or its host) holds more than its share of the
    /// budget unwritten, the budget or its queue did not make room in time, or it is gone.
    pub(super) async fn send(&self, line: String) -> bool {
        self.send_piece(line, true).await
    }

    /// Queues a piece of a line (`last`: the piece that ends it), as [`Outbox::send`].
    pub(super) async fn send_piece(&self, line: String, last: bool) -> bool {
        let Some(held) = self.reserve(line.len().max(1)).await else {
            return false;
        };
        self.queue(line, last, held).await
    }

    /// Queues a whole line whose bytes (some or all) are held already.
    pub(super) async fn send_held(&self, line: String, held: Option<Held>) -> bool {
        match self.fit(held, line.len().max(1)).await {
            Some(held) => self.queue(line, true, held).await,
            None => false,
        }
    }

    /// Queues a batch's answers as one line `[a,b,...]`, with the bytes held for them, in
    /// pieces of about [`WRITE_CHUNK`] (small answers gathered, large ones on their own, never
    /// copied).
    pub(super) async fn send_batch(&self, parts: Vec<String>, held: Option<Held>) -> bool {
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
    pub(super) async fn queue_part(&self, held: &mut Held, piece: String, last: bool) -> bool {
        match held.split_off(piece.len()) {
            Some(bytes) => self.queue(piece, last, bytes).await,
            None => false,
        }
    }

    /// `held` grown or cut to exactly `size` bytes (reserved whole when there is none).
    pub(super) async fn fit(&self, held: Option<Held>, size: usize) -> Option<Held> {
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
    pub(super) async fn reserve(&self, n: usize) -> Option<Held> {
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
    pub(super) fn try_reserve(&self, n: usize) -> Result<Held, Taken> {
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
    pub(super) fn over_share(&self, n: usize) -> bool {
        let over = |count: &AtomicUsize| count.load(Ordering::SeqCst) + n > self.budget.share;
        over(&self.mine) || over(&self.budget.host.bytes)
    }

    /// Counts `permit`'s `n` bytes for this client and its host; `None` (and the permit given
    /// back) if another connection of the host took its share meanwhile.
    pub(super) fn hold(&self, permit: tokio::sync::OwnedSemaphorePermit, n: usize) -> Option<Held> {
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

    /// Lets the session write its lines itself from now on (`yes`), or hands them all to the
    /// writer task.
    pub(super) fn write_directly(&self, yes: bool) {
        self.direct.store(yes, Ordering::Relaxed);
    }

    /// Writes a line, with its bytes held, on this task when it may and the connection takes it
    /// at once; else hands it (or what is left of it) to the writer.
    pub(super) async fn queue(&self, line: String, last: bool, held: Held) -> bool {
        self.sent.inc_by(held.bytes as u64);
        let mut queued = Queued {
            line,
            ends_line: last,
            skip: 0,
            held,
        };
        if self.direct.load(Ordering::Relaxed) && queued.line.len() < WRITE_CHUNK {
            match self.side.write_now(queued) {
                None => return true,
                Some(rest) => queued = rest,
            }
        }
        self.side.handing();
        matches!(
            tokio::time::timeout(self.timeout, self.tx.send(queued)).await,
            Ok(Ok(()))
        )
    }

    /// Queues every line, in order; `false` as soon as one cannot be. More than one go to the
    /// writer task, which writes them together.
    pub(super) async fn send_all(&self, lines: Vec<String>) -> bool {
        if lines.len() > 1 {
            self.write_directly(false);
        }
        for line in lines {
            if !self.send(line).await {
                return false;
            }
        }
        true
    }
}

//! The pool the servers' query work runs in: at most `threads` jobs at once over every server,
//! at most half of them for one host, in the order they came (tokio's semaphore is fair). HTTP
//! work waits in a queue of bounded length and is refused when it is full, as Bitcoin Core's
//! `-rpcthreads` and `-rpcworkqueue` (`httpserver.cpp`, "work queue depth exceeded"); a job
//! whose client went is dropped from the queue, or stops at its next read when it runs
//! ([`crate::types::abandoned`]). Long Electrum histories are streamed by threads of their own,
//! [`STREAMS`] at most, each taking a place in the pool only while it reads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::HostShares;
use crate::types::{run_marked, Abandon};

/// Histories streamed at once, over every Electrum connection: each holds a thread while its
/// client reads, so they are bounded apart from the pool (and far below tokio's 512 blocking
/// threads).
pub const STREAMS: usize = 64;

/// The query work pool of a node, shared by its servers.
pub struct WorkPool {
    slots: Arc<Semaphore>,
    threads: usize,
    queue: usize,
    waiting: AtomicUsize,
    streams: Arc<Semaphore>,
    closed: Abandon,
}

/// A place to run one job in the pool, given back when dropped.
pub struct Slot {
    _slot: OwnedSemaphorePermit,
    _host: OwnedSemaphorePermit,
}

/// A place for one streamed history, given back when dropped.
pub struct StreamPlace {
    _place: OwnedSemaphorePermit,
}

/// Why a job was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The queue holds its limit of waiting jobs already.
    #[error("the server's work queue is full; try again")]
    QueueFull,
    /// The server is stopping.
    #[error("the server is stopping")]
    Closed,
}

impl Refused {
    /// The reason as metrics label it.
    pub fn label(self) -> &'static str {
        match self {
            Refused::QueueFull => "queue_full",
            Refused::Closed => "closed",
        }
    }
}

/// Leaves the queue when dropped (the job got its slot, or its client went).
struct InQueue<'a>(&'a AtomicUsize);

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Raises a job's flag when dropped unless disarmed: a job whose future is dropped is abandoned.
struct AbandonOnDrop(Option<Abandon>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = self.0.take() {
            flag.raise();
        }
    }
}

impl WorkPool {
    /// A pool running `threads` jobs at once (at least one), with at most `queue` HTTP jobs
    /// waiting.
    pub fn new(threads: usize, queue: usize) -> Arc<Self> {
        let threads = threads.max(1);
        Arc::new(WorkPool {
            slots: Arc::new(Semaphore::new(threads)),
            threads,
            queue,
            waiting: AtomicUsize::new(0),
            streams: Arc::new(Semaphore::new(STREAMS)),
            closed: Abandon::default(),
        })
    }

    /// Jobs one host may run at once: half the pool (at least one), so that one host never
    /// holds every thread.
    pub fn per_host(&self) -> usize {
        (self.threads / 2).max(1)
    }

    /// The semaphore of `host`'s share of the pool, made on its first job.
    fn host_share(&self, host: &HostShares) -> Arc<Semaphore> {
        static_share(&host.work, self.per_host())
    }

    /// Waits for `host`'s turn (at most [`WorkPool::per_host`] of its jobs run at once), then for
    /// a slot. For work that a connection asks one at a time (Electrum), so what waits is
    /// bounded by the connections.
    pub async fn slot(&self, host: &HostShares) -> Result<Slot, Refused> {
        let host = self.host_share(host).acquire_owned().await;
        let slot = self.slots.clone().acquire_owned().await;
        match (host, slot, self.closed.is_raised()) {
            (Ok(host), Ok(slot), false) => Ok(Slot {
                _slot: slot,
                _host: host,
            }),
            _ => Err(Refused::Closed),
        }
    }

    /// As [`WorkPool::slot`], but refused at once when `queue` jobs already wait for a slot:
    /// for HTTP, whose clients may send many requests at once.
    pub async fn queued_slot(&self, host: &HostShares) -> Result<Slot, Refused> {
        let host = self
            .host_share(host)
            .acquire_owned()
            .await
            .map_err(|_| Refused::Closed)?;
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.queue {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(Refused::QueueFull);
        }
        let in_queue = InQueue(&self.waiting);
        let slot = self.slots.clone().acquire_owned().await;
        drop(in_queue);
        match (slot, self.closed.is_raised()) {
            (Ok(slot), false) => Ok(Slot {
                _slot: slot,
                _host: host,
            }),
            _ => Err(Refused::Closed),
        }
    }

    /// Runs `f` in `slot` on a blocking thread. When the returned future is dropped (its client
    /// went) or the pool closes, `f`'s next index or kernel read fails, and it ends.
    pub async fn run<T: Send + 'static>(
        &self,
        slot: Slot,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Refused> {
        let job = Abandon::default();
        let mut abandon = AbandonOnDrop(Some(job.clone()));
        let closed = self.closed.clone();
        let ran = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            run_marked(&[&closed, &job], f)
        })
        .await;
        abandon.0 = None;
        ran.map_err(|_| Refused::Closed)
    }

    /// Runs `f` in `slot` on this thread (for a job that borrows its connection's state, as an
    /// Electrum session's answer); its reads fail once the pool closes.
    pub fn run_here<T>(&self, slot: Slot, f: impl FnOnce() -> T) -> T {
        let _slot = slot;
        tokio::task::block_in_place(|| run_marked(&[&self.closed], f))
    }

    /// Waits for a place for one streamed history.
    pub async fn stream_place(&self) -> Result<StreamPlace, Refused> {
        match self.streams.clone().acquire_owned().await {
            Ok(place) if !self.closed.is_raised() => Ok(StreamPlace { _place: place }),
            _ => Err(Refused::Closed),
        }
    }

    /// The flag raised when the pool closes, for a streaming thread to mark its reads with.
    pub fn closing(&self) -> &Abandon {
        &self.closed
    }

    /// Closes the pool: waiting jobs are refused, running ones stop at their next read.
    pub fn close(&self) {
        self.closed.raise();
        self.slots.close();
        self.streams.close();
    }

    /// Jobs running now.
    pub fn running(&self) -> usize {
        self.threads - self.slots.available_permits()
    }

    /// HTTP jobs waiting for a slot now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }
}

/// The semaphore in `cell`, made with `permits` the first time.
fn static_share(cell: &OnceLock<Arc<Semaphore>>, permits: usize) -> Arc<Semaphore> {
    cell.get_or_init(|| Arc::new(Semaphore::new(permits)))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_host_holds_half_the_pool_and_the_queue_is_bounded() {
        let pool = WorkPool::new(4, 1);
        let (greedy, other) = (HostShares::default(), HostShares::default());
        let a = pool.slot(&greedy).await.unwrap();
        let b = pool.slot(&greedy).await.unwrap();
        let third = tokio::time::timeout(Duration::from_millis(50), pool.slot(&greedy)).await;
        assert!(third.is_err(), "a host's third job waits for its turn");
        let c = pool.slot(&other).await.unwrap();
        let d = pool.slot(&other).await.unwrap();
        assert_eq!(pool.running(), 4);
        let third = HostShares::default();
        // The pool is full: one HTTP job may wait, the next is refused at once.
        let pool2 = pool.clone();
        let queued = tokio::spawn(async move { pool2.queued_slot(&third).await.map(drop) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(pool.waiting(), 1);
        let fourth = HostShares::default();
        assert_eq!(
            pool.queued_slot(&fourth).await.err(),
            Some(Refused::QueueFull)
        );
        drop((a, b, c, d));
        assert_eq!(queued.await.unwrap(), Ok(()));
        assert_eq!(pool.waiting(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_job_is_abandoned_and_a_closed_pool_refuses() {
        let pool = WorkPool::new(2, 8);
        let host = HostShares::default();
        let slot = pool.slot(&host).await.unwrap();
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        let job = pool.run(slot, move || {
            let started = std::time::Instant::now();
            while !crate::types::abandoned() && started.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = seen_tx.send(crate::types::abandoned());
        });
        // The client goes before the job ends.
        assert!(tokio::time::timeout(Duration::from_millis(100), job)
            .await
            .is_err());
        let seen =
            tokio::task::spawn_blocking(move || seen_rx.recv_timeout(Duration::from_secs(5)));
        assert_eq!(
            seen.await.unwrap(),
            Ok(true),
            "the job saw it was abandoned"
        );
        pool.close();
        assert_eq!(pool.slot(&host).await.err(), Some(Refused::Closed));
        assert_eq!(pool.queued_slot(&host).await.err(), Some(Refused::Closed));
    }
}

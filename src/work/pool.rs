//! The pool the servers' query work runs in: at most `threads` jobs at once over every server,
//! at most half of them for one host, in the order they came (tokio's semaphore is fair). HTTP
//! work waits in a queue of bounded length and is refused when it is full, as Bitcoin Core's
//! `-rpcthreads` and `-rpcworkqueue` (`httpserver.cpp`, "work queue depth exceeded"); a job
//! whose client went is dropped from the queue, or stops at its next read when it runs
//! ([`crate::types::abandoned`]). Long Electrum histories are streamed by threads of their own,
//! [`STREAMS`] at most ([`STREAMS_PER_HOST`] for one host), each taking a place in the pool
//! only while it reads. A host's share is one over every server, and so is its group's (IPv4
//! /24, IPv6 /48, every exempt connection together): a job takes its host's turn, then its
//! group's, then the server's place, so the addresses of one subnet hold no more of the pool
//! than [`GROUP_SHARE`] says.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::shares::{GroupKey, GroupShares, HostShares, HostWork};
use crate::types::{run_marked, try_inline, Abandon, Subnet};

/// Histories streamed at once, over every Electrum connection: each holds a thread while its
/// client reads, so they are bounded apart from the pool (and far below tokio's 512 blocking
/// threads).
pub const STREAMS: usize = 64;
/// Histories one host may stream at once.
pub const STREAMS_PER_HOST: usize = 2;
/// Silent-payment scans run at once, over every connection: each holds a thread while it reads
/// and hands its arithmetic to the scan threads, so the rest wait their turn (Frigate: "multiple
/// clients conducting simultaneous scans slows each scan linearly").
pub const SCANS: usize = 8;
/// Scans one host runs at once: its others wait.
pub const SCANS_PER_HOST: usize = 1;
/// Short scans (a subscription's follow-up for a new block, or a first scan from a recent
/// height; fewer than [`QUICK_SCAN_BLOCKS`] blocks and at most [`QUICK_SCAN_MEMPOOL`] mempool
/// transactions) run at once beside the long ones, over every connection: hours-long
/// whole-chain scans holding every place in [`SCANS`] never hold a wallet's next block back.
pub const QUICK_SCANS: usize = 4;
/// A scan of fewer blocks than this (an hour's: on mainnet some 4,000 eligible transactions,
/// 153.7 million from Taproot's activation to height 950,000 as Frigate counts them, about a
/// third of a second of one core here) may be a short one.
pub const QUICK_SCAN_BLOCKS: u32 = 6;
/// A scan of more mempool transactions than this (as a first scan of a full mempool) is a
/// long one, whatever its blocks.
pub const QUICK_SCAN_MEMPOOL: usize = 10_000;
/// The scans of every exempt connection together (127.0.0.1, where a Tor onion service's
/// clients arrive, each connection otherwise a host of its own): half of each lane's places.
pub const EXEMPT_SCANS: usize = SCANS / 2;
/// What one group (a subnet's hosts, or every exempt connection) may hold at once, as a part of
/// the server's: jobs, streamed histories, long scans and short scans each at most half.
pub const GROUP_SHARE: f64 = 0.5;
/// Long (and short) scans one subnet's hosts run at once: one host's worth. Scans are CPU, and
/// a subnet of scanners then shares the cores with any other wallet's scan as one host would
/// (two wallets behind one NAT restoring at once take turns).
pub const SCANS_PER_GROUP: usize = 1;
/// Jobs run inline at once over the server ([`WorkPool::run_inline`]): one of the runtime's two
/// workers, so that the other is always free for every connection's reads and writes, whatever
/// an inline job meets (a lock a writer holds for a moment: the index's while a block's batch is
/// synced, the mempool's).
pub const INLINE_AT_ONCE: usize = 1;
/// Rows an answer built on its connection's task may read, all from memory
/// ([`WorkPool::run_inline`]): a few hundred microseconds of one core at most, as long as one
/// task should run between two waits. A small history or unspent list reads a few dozen.
pub const INLINE_ROWS: u64 = 256;
/// How long an HTTP request may wait for its slot, and a history for a place to stream from,
/// before it is answered "busy".
pub const MOST_WAIT: Duration = Duration::from_secs(20);

/// The query work pool of a node, shared by its servers.
pub struct WorkPool {
    slots: Arc<Semaphore>,
    threads: usize,
    queue: usize,
    waiting: AtomicUsize,
    streams: Arc<Semaphore>,
    scans: Arc<Semaphore>,
    quick_scans: Arc<Semaphore>,
    /// The turns every exempt connection shares.
    exempt: Arc<HostWork>,
    closed: Abandon,
    /// Each host's share, by its key, while any of its connections or jobs holds it: every
    /// server's connections of one host share one.
    hosts: Mutex<HashMap<Subnet, Weak<HostWork>>>,
    /// Each group's, by its key, likewise.
    groups: Mutex<HashMap<GroupKey, Weak<HostWork>>>,
    /// The places of jobs run inline ([`INLINE_AT_ONCE`]).
    inline_places: Arc<Semaphore>,
    /// Jobs run inline ([`WorkPool::run_inline`]): answered there, and refused.
    inline: [AtomicUsize; 2],
}

/// A slot for a job run on the caller's task ([`WorkPool::run_inline`]): a pool's slot with its
/// turns, and one of the [`INLINE_AT_ONCE`] places.
pub struct InlineSlot {
    _slot: Slot,
    _place: OwnedSemaphorePermit,
}

/// What became of the jobs tried inline ([`WorkPool::run_inline`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InlineCounts {
    /// Answered on the caller's thread from memory.
    pub answered: usize,
    /// Refused there (a read needed the disk, or more rows): run again in the pool.
    pub refused: usize,
}

/// A host's and its group's turns, and the shares they come from.
struct Turns {
    _host: OwnedSemaphorePermit,
    _group: OwnedSemaphorePermit,
    _shares: [Arc<HostWork>; 2],
}

/// A place to run one job in the pool, given back when dropped.
pub struct Slot {
    _slot: OwnedSemaphorePermit,
    _turns: Turns,
}

/// A place for one streamed history (or one silent-payment scan), given back when dropped.
pub struct StreamPlace {
    /// The server's place, `None` while stepped aside ([`StreamPlace::step_aside`]).
    place: Option<OwnedSemaphorePermit>,
    /// Where the server's place comes from.
    lane: Arc<Semaphore>,
    _turns: Turns,
}

impl StreamPlace {
    /// Gives the server's place back for a wait that needs none (a client reading slowly, a
    /// host's cost pause), keeping the host's turn; [`StreamPlace::step_back`] takes one again.
    /// So a job that waits on its client or its cost never holds a place another host's job
    /// could use.
    pub fn step_aside(&mut self) {
        self.place = None;
    }

    /// Takes a server's place again after [`StreamPlace::step_aside`] (at once if it holds
    /// one); refused when the pool closes.
    pub async fn step_back(&mut self) -> Result<(), Refused> {
        if self.place.is_none() {
            let place = self.lane.clone().acquire_owned().await;
            self.place = Some(place.map_err(|_| Refused::Closed)?);
        }
        Ok(())
    }
}

/// Why a job was not run, or did not finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The queue holds its limit of waiting jobs already.
    #[error("the server's work queue is full; try again")]
    QueueFull,
    /// It waited [`MOST_WAIT`] for its turn.
    #[error("the server is busy; try again")]
    Busy,
    /// The server is stopping.
    #[error("the server is stopping")]
    Closed,
    /// The job panicked.
    #[error("the request failed inside the server")]
    Failed,
}

impl Refused {
    /// The reason as metrics label it.
    pub fn label(self) -> &'static str {
        match self {
            Refused::QueueFull => "queue_full",
            Refused::Busy => "busy",
            Refused::Closed => "closed",
            Refused::Failed => "failed",
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
            scans: Arc::new(Semaphore::new(SCANS)),
            quick_scans: Arc::new(Semaphore::new(QUICK_SCANS)),
            exempt: Arc::new(Self::group_work(threads, [EXEMPT_SCANS, QUICK_SCANS / 2])),
            closed: Abandon::default(),
            hosts: Mutex::new(HashMap::new()),
            groups: Mutex::new(HashMap::new()),
            inline_places: Arc::new(Semaphore::new(INLINE_AT_ONCE)),
            inline: Default::default(),
        })
    }

    /// A group's share of a pool of `threads`: [`GROUP_SHARE`] of its jobs and streams (at
    /// least one), and `scans` long and short.
    fn group_work(threads: usize, scans: [usize; 2]) -> HostWork {
        let part = |n: usize| ((n as f64 * GROUP_SHARE) as usize).max(1);
        HostWork::new(part(threads), part(STREAMS), scans)
    }

    /// A subnet's share: [`SCANS_PER_GROUP`] of each lane.
    fn subnet_work(&self) -> HostWork {
        Self::group_work(self.threads, [SCANS_PER_GROUP; 2])
    }

    /// A host's share: [`WorkPool::per_host`] jobs, [`STREAMS_PER_HOST`], [`SCANS_PER_HOST`].
    fn host_work(&self) -> HostWork {
        HostWork::new(self.per_host(), STREAMS_PER_HOST, [SCANS_PER_HOST; 2])
    }

    /// Jobs one host may run at once: half the pool (at least one), so that one host never
    /// holds every thread.
    pub fn per_host(&self) -> usize {
        (self.threads / 2).max(1)
    }

    /// `host`'s share of the pool and its group's: the ones their keys have (made now if none
    /// has), or ones of their own for what no key counts (an exempt host's connection).
    fn shares(&self, host: &HostShares) -> [Arc<HostWork>; 2] {
        let own = host.work.get_or_init(|| match host.key {
            None => Arc::new(self.host_work()),
            Some(key) => shared(&self.hosts, key, || self.host_work()),
        });
        let group = host
            .group
            .work
            .get_or_init(|| self.group_share(&host.group));
        [own.clone(), group.clone()]
    }

    fn group_share(&self, group: &GroupShares) -> Arc<HostWork> {
        match group.key {
            Some(GroupKey::Exempt) => self.exempt.clone(),
            Some(key) => shared(&self.groups, key, || self.subnet_work()),
            None => Arc::new(self.subnet_work()),
        }
    }

    /// Takes `host`'s turn and its group's from `lane` of each.
    async fn turns(
        &self,
        host: &HostShares,
        lane: impl Fn(&HostWork) -> &Arc<Semaphore>,
    ) -> Result<Turns, Refused> {
        let shares = self.shares(host);
        let own = lane(&shares[0]).clone().acquire_owned().await;
        let group = lane(&shares[1]).clone().acquire_owned().await;
        match (own, group) {
            (Ok(own), Ok(group)) => Ok(Turns {
                _host: own,
                _group: group,
                _shares: shares,
            }),
            _ => Err(Refused::Closed),
        }
    }

    /// Waits for `host`'s turn (at most [`WorkPool::per_host`] of its jobs run at once) and its
    /// group's, then for a slot. For work that a connection asks one at a time (Electrum), so
    /// what waits is bounded by the connections.
    pub async fn slot(&self, host: &HostShares) -> Result<Slot, Refused> {
        let turns = self.turns(host, |w| &w.jobs).await?;
        let slot = self.slots.clone().acquire_owned().await;
        match (slot, self.closed.is_raised()) {
            (Ok(slot), false) => Ok(Slot {
                _slot: slot,
                _turns: turns,
            }),
            _ => Err(Refused::Closed),
        }
    }

    /// A slot to run a job inline ([`WorkPool::run_inline`]) if one of the [`INLINE_AT_ONCE`]
    /// places, `host`'s turn, its group's and a slot are all free now.
    pub fn try_inline_slot(&self, host: &HostShares) -> Option<InlineSlot> {
        let place = self.inline_places.clone().try_acquire_owned().ok()?;
        Some(InlineSlot {
            _slot: self.try_slot(host)?,
            _place: place,
        })
    }

    /// [`WorkPool::slot`] if `host`'s turn, its group's and a slot are free now; `None`
    /// otherwise (the job then waits in [`WorkPool::slot`]).
    pub fn try_slot(&self, host: &HostShares) -> Option<Slot> {
        let shares = self.shares(host);
        let own = shares[0].jobs.clone().try_acquire_owned().ok()?;
        let group = shares[1].jobs.clone().try_acquire_owned().ok()?;
        let slot = self.slots.clone().try_acquire_owned().ok()?;
        (!self.closed.is_raised()).then_some(Slot {
            _slot: slot,
            _turns: Turns {
                _host: own,
                _group: group,
                _shares: shares,
            },
        })
    }

    /// As [`WorkPool::slot`], for HTTP, whose clients may send many requests at once: refused at
    /// once when `queue` jobs already wait for a slot (a host's jobs waiting for its own turn
    /// are not counted: its connections bound them), and after [`MOST_WAIT`].
    pub async fn queued_slot(&self, host: &HostShares) -> Result<Slot, Refused> {
        match tokio::time::timeout(MOST_WAIT, self.queue_for_slot(host)).await {
            Ok(taken) => taken,
            Err(_) => Err(Refused::Busy),
        }
    }

    async fn queue_for_slot(&self, host: &HostShares) -> Result<Slot, Refused> {
        let turns = self.turns(host, |w| &w.jobs).await?;
        let queued = self
            .waiting
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.queue).then_some(n + 1)
            });
        if queued.is_err() {
            return Err(Refused::QueueFull);
        }
        let in_queue = InQueue(&self.waiting);
        let slot = self.slots.clone().acquire_owned().await;
        drop(in_queue);
        match (slot, self.closed.is_raised()) {
            (Ok(slot), false) => Ok(Slot {
                _slot: slot,
                _turns: turns,
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
        ran.map_err(|e| match e.is_panic() {
            true => {
                crate::outsider_log!(error, "a query job panicked: {e}");
                Refused::Failed
            }
            false => Refused::Closed,
        })
    }

    /// Runs `f` in `slot` on this thread (for a job that borrows its connection's state, as an
    /// Electrum session's answer); its reads fail once the pool closes.
    pub fn run_here<T>(&self, slot: Slot, f: impl FnOnce() -> T) -> T {
        let _slot = slot;
        tokio::task::block_in_place(|| run_marked(&[&self.closed], f))
    }

    /// Runs `f` in `slot` on this thread without leaving the runtime's hands: as an inline job
    /// ([`crate::types::try_inline`]) allowed [`INLINE_ROWS`] rows from memory. `None` when it
    /// needed more (its result is dropped; it is then run with [`WorkPool::run_here`]).
    pub fn run_inline<T>(&self, slot: InlineSlot, f: impl FnOnce() -> T) -> Option<T> {
        let _slot = slot;
        let out = run_marked(&[&self.closed], || try_inline(INLINE_ROWS, f));
        self.inline[usize::from(out.is_none())].fetch_add(1, Ordering::Relaxed);
        out
    }

    /// Runs `f` inline ([`WorkPool::run_inline`]) when `quiet` (no writer to wait for) and an
    /// inline slot is free at once, counting the outcome for `server` in
    /// `cairn_inline_answers_total`: `None` when it was skipped or refused, and the caller then
    /// builds the answer in the pool.
    pub fn try_answer_inline<T>(
        &self,
        server: &'static str,
        host: &HostShares,
        quiet: bool,
        f: impl FnOnce() -> T,
    ) -> Option<T> {
        let outcome = &crate::metrics::metrics().inline_answers;
        let count = |what: &str| outcome.with_label_values(&[server, what]).inc();
        let Some(slot) = quiet.then(|| self.try_inline_slot(host)).flatten() else {
            count("skipped");
            return None;
        };
        let answer = self.run_inline(slot, f);
        count(if answer.is_some() {
            "answered"
        } else {
            "refused"
        });
        answer
    }

    /// The jobs tried inline so far, answered and refused.
    pub fn inline_counts(&self) -> InlineCounts {
        InlineCounts {
            answered: self.inline[0].load(Ordering::Relaxed),
            refused: self.inline[1].load(Ordering::Relaxed),
        }
    }

    /// Waits ([`MOST_WAIT`] at most) for a place for one streamed history of `host`'s, one of
    /// [`STREAMS_PER_HOST`].
    pub async fn stream_place(&self, host: &HostShares) -> Result<StreamPlace, Refused> {
        let places = async {
            let turns = self.turns(host, |w| &w.streams).await;
            (turns, self.streams.clone().acquire_owned().await)
        };
        match tokio::time::timeout(MOST_WAIT, places).await {
            Err(_) => Err(Refused::Busy),
            Ok((Ok(turns), Ok(place))) if !self.closed.is_raised() => Ok(StreamPlace {
                place: Some(place),
                lane: self.streams.clone(),
                _turns: turns,
            }),
            Ok(_) => Err(Refused::Closed),
        }
    }

    /// Waits, as long as it takes, for a place for one silent-payment scan of `host`'s: a
    /// `quick` one (see [`QUICK_SCANS`]) one of its host's [`SCANS_PER_HOST`] short ones, of its
    /// group's ([`SCANS_PER_GROUP`]; every exempt connection together [`EXEMPT_SCANS`]) and of
    /// [`QUICK_SCANS`], a long one likewise of [`SCANS`]. A scan is a subscription's work, which
    /// its session drops (and with it this wait) when it ends.
    pub async fn scan_place(&self, host: &HostShares, quick: bool) -> Result<StreamPlace, Refused> {
        let turns = match quick {
            true => self.turns(host, |w| &w.quick_scans).await,
            false => self.turns(host, |w| &w.scans).await,
        };
        let places = match quick {
            true => &self.quick_scans,
            false => &self.scans,
        };
        let place = places.clone().acquire_owned().await;
        match (turns, place, self.closed.is_raised()) {
            (Ok(turns), Ok(place), false) => Ok(StreamPlace {
                place: Some(place),
                lane: places.clone(),
                _turns: turns,
            }),
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
        self.scans.close();
        self.quick_scans.close();
    }

    /// Jobs running now.
    pub fn running(&self) -> usize {
        self.threads - self.slots.available_permits()
    }

    /// HTTP jobs waiting for a slot now (not those waiting for their host's turn).
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }
}

/// The share `key` has in `map` (made with `make` if none has); shares nobody holds any more
/// are dropped as the map doubles.
fn shared<K: Copy + Eq + std::hash::Hash>(
    map: &Mutex<HashMap<K, Weak<HostWork>>>,
    key: K,
    make: impl FnOnce() -> HostWork,
) -> Arc<HostWork> {
    let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(share) = map.get(&key).and_then(Weak::upgrade) {
        return share;
    }
    if map.len() >= 64 && map.len().is_power_of_two() {
        map.retain(|_, share| share.strong_count() > 0);
    }
    let share = Arc::new(make());
    map.insert(key, Arc::downgrade(&share));
    share
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
    async fn a_slot_taken_at_once_keeps_the_turns_and_never_jumps_the_queue() {
        let pool = WorkPool::new(4, 8);
        let group = Arc::new(GroupShares {
            key: Some(GroupKey::of("203.0.113.1".parse().unwrap())),
            ..GroupShares::default()
        });
        let subnet = |i: usize| HostShares {
            key: Some(format!("203.0.113.{i}/32").parse().unwrap()),
            group: group.clone(),
            ..HostShares::default()
        };
        let (greedy, neighbour, other) = (subnet(1), subnet(2), HostShares::default());
        let a = pool.try_slot(&greedy).expect("a free slot");
        let b = pool.try_slot(&greedy).expect("the host's second");
        assert!(
            pool.try_slot(&greedy).is_none(),
            "the host's turns are taken"
        );
        // Its /24 holds half the pool (two jobs): a neighbour in it waits too.
        assert!(
            pool.try_slot(&neighbour).is_none(),
            "the group's turns are taken"
        );
        let c = pool.slot(&other).await.unwrap();
        let d = pool.try_slot(&other).expect("the last slot");
        assert!(
            pool.try_slot(&HostShares::default()).is_none(),
            "no slot left"
        );
        // A job waiting for a slot gets the next one freed, before any taken at once.
        let late = HostShares::default();
        let mut queued = Box::pin(pool.slot(&late));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let polled = std::future::Future::poll(queued.as_mut(), &mut cx);
        assert!(polled.is_pending(), "it waits in the queue");
        drop(c);
        assert!(
            pool.try_slot(&HostShares::default()).is_none(),
            "the waiter's slot"
        );
        drop(queued.await.unwrap());
        drop((a, b, d));
        let e = pool.try_slot(&greedy).expect("given back");
        pool.close();
        drop(e);
        assert!(pool.try_slot(&other).is_none(), "a closed pool gives none");
    }

    #[test]
    fn a_job_run_inline_is_counted_and_refused_past_its_rows() {
        let pool = WorkPool::new(2, 8);
        let host = HostShares::default();
        let read = |rows: u64| move || crate::types::inline_rows(rows);
        let slot = pool.try_inline_slot(&host).unwrap();
        let second = HostShares::default();
        assert!(
            pool.try_inline_slot(&second).is_none(),
            "one inline job at a time"
        );
        assert_eq!(pool.run_inline(slot, read(INLINE_ROWS)), Some(true));
        let slot = pool.try_inline_slot(&second).unwrap();
        assert_eq!(pool.run_inline(slot, read(INLINE_ROWS + 1)), None);
        let slot = pool.try_slot(&host).unwrap();
        let outside = pool.run_here(slot, read(u64::MAX));
        assert!(outside, "no limit in the pool");
        let counts = InlineCounts {
            answered: 1,
            refused: 1,
        };
        assert_eq!(pool.inline_counts(), counts);
        assert_eq!(pool.running(), 0, "every slot given back");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hosts_connections_to_every_server_share_one_share() {
        let pool = WorkPool::new(4, 8);
        let key: Subnet = "203.0.113.7/32".parse().unwrap();
        let of_host = || HostShares {
            key: Some(key),
            ..HostShares::default()
        };
        let (electrum, http) = (of_host(), of_host());
        let a = pool.slot(&electrum).await.unwrap();
        let b = pool.slot(&http).await.unwrap();
        let wait = Duration::from_millis(50);
        assert!(tokio::time::timeout(wait, pool.slot(&electrum))
            .await
            .is_err());
        // Its connections gone, the host comes back: the jobs still running count.
        drop((electrum, http));
        let again = of_host();
        assert!(tokio::time::timeout(wait, pool.slot(&again)).await.is_err());
        drop((a, b));
        assert!(pool.slot(&again).await.is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_place_stepped_aside_from_serves_another_host_meanwhile() {
        let pool = WorkPool::new(4, 8);
        let host = |i: usize| HostShares {
            key: Some(format!("203.0.113.{i}/32").parse().unwrap()),
            ..HostShares::default()
        };
        let hosts: Vec<HostShares> = (0..SCANS).map(host).collect();
        let mut long = Vec::new();
        for h in &hosts {
            long.push(pool.scan_place(h, false).await.unwrap());
        }
        let waiting = pool.clone();
        let ninth = host(SCANS);
        let other = tokio::spawn(async move { waiting.scan_place(&ninth, false).await });
        let mut first = long.remove(0);
        // While the first scan waits aside, the ninth host's scan gets its place; the first
        // takes one again only once that is given back.
        first.step_aside();
        let ninth_place = tokio::time::timeout(Duration::from_secs(5), other).await;
        let ninth_place = ninth_place
            .expect("a place while the first waits")
            .unwrap()
            .unwrap();
        let back = tokio::spawn(async move {
            let got = first.step_back().await;
            (first, got)
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !back.is_finished(),
            "the first took a place the ninth holds"
        );
        drop(ninth_place);
        let (_first, got) = back.await.unwrap();
        assert!(got.is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn long_scans_leave_short_ones_a_lane_and_exempt_connections_share_one() {
        let pool = WorkPool::new(4, 8);
        let wait = Duration::from_millis(50);
        let host = |i: usize| HostShares {
            key: Some(format!("203.0.113.{i}/32").parse().unwrap()),
            ..HostShares::default()
        };
        let hosts: Vec<HostShares> = (0..=SCANS).map(host).collect();
        let mut long = Vec::new();
        for h in &hosts[..SCANS] {
            long.push(pool.scan_place(h, false).await.unwrap());
        }
        let ninth = tokio::time::timeout(wait, pool.scan_place(&hosts[SCANS], false)).await;
        assert!(ninth.is_err(), "every long place is held");
        // A short scan still runs at once, even one of a host whose long scan runs.
        let quick = tokio::time::timeout(wait, pool.scan_place(&hosts[0], true)).await;
        assert!(quick.is_ok_and(|q| q.is_ok()));
        drop(long);
        // Every exempt connection (no host key, the exempt group) together: half the long
        // places.
        let exempt_group = Arc::new(GroupShares {
            key: Some(GroupKey::Exempt),
            ..GroupShares::default()
        });
        let of_exempt = || HostShares {
            group: exempt_group.clone(),
            ..HostShares::default()
        };
        let exempt: Vec<HostShares> = (0..=EXEMPT_SCANS).map(|_| of_exempt()).collect();
        let mut held = Vec::new();
        for e in &exempt[..EXEMPT_SCANS] {
            held.push(pool.scan_place(e, false).await.unwrap());
        }
        let more = tokio::time::timeout(wait, pool.scan_place(&exempt[EXEMPT_SCANS], false)).await;
        assert!(more.is_err(), "the exempt connections' places are all held");
        let keyed = tokio::time::timeout(wait, pool.scan_place(&hosts[SCANS], false)).await;
        assert!(
            keyed.is_ok_and(|p| p.is_ok()),
            "another host still gets one"
        );
        drop(held);
        // One exempt connection holds one long and one short place, not the exempt ones all.
        let one = of_exempt();
        let _long = pool.scan_place(&one, false).await.unwrap();
        let second = tokio::time::timeout(wait, pool.scan_place(&one, false)).await;
        assert!(
            second.is_err(),
            "an exempt connection's second long scan waits"
        );
        let _quick = pool.scan_place(&one, true).await.unwrap();
        let second = tokio::time::timeout(wait, pool.scan_place(&one, true)).await;
        assert!(
            second.is_err(),
            "an exempt connection's second short scan waits"
        );
        let other = tokio::time::timeout(wait, pool.scan_place(&exempt[0], false)).await;
        assert!(
            other.is_ok_and(|p| p.is_ok()),
            "another exempt one still runs"
        );
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

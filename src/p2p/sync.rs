//! Block download shared by all peers: which blocks to ask whom for, a moving window over the
//! best header chain, stall detection, and handing blocks to the kernel in height order.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bitcoin::BlockHash;

use crate::datadir::space::SpaceWatch;
use crate::kernel::{Accepted, KernelError, Validator};

/// Blocks ahead of the next one to validate that may be requested or held.
pub const WINDOW: usize = 1024;
/// Blocks one peer may have in flight.
pub const PER_PEER: usize = 16;
/// How long a download plan is used before it is read from the kernel again.
const PLAN_AGE: Duration = Duration::from_secs(1);
/// How far above the next block to validate an unrequested block may be and still be kept
/// (Core's `MIN_BLOCKS_TO_KEEP`, the bound of its `fTooFarAhead`).
const MIN_BLOCKS_TO_KEEP: i64 = 288;
/// Blocks handed to the validating thread and not yet validated, at most; the rest wait in the
/// buffer (within the window).
const FEED_QUEUE: usize = 64;
/// A request older than this may go to another peer too (the first delivery is taken); its
/// peer is stalling if it delivered nothing since it was asked.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Core's `BLOCK_STALLING_TIMEOUT_DEFAULT`: how long the peer holding the block the download
/// window waits on may keep it once no other peer has anything left to ask for.
pub const BLOCK_STALLING_TIMEOUT_DEFAULT: Duration = Duration::from_secs(2);
/// Core's `BLOCK_STALLING_TIMEOUT_MAX`: the stalling timeout doubles at each stall
/// disconnection up to this (so that cairn's own slow link does not cost it every peer).
pub const BLOCK_STALLING_TIMEOUT_MAX: Duration = Duration::from_secs(64);

/// An id for a connected peer.
pub type PeerId = u64;

/// What the scheduler needs of the validator: the best header chain, and the blocks handed
/// over to be validated. The kernel's [`Validator`] in production; a unit test's fake chain.
pub trait BlockValidator: Send + Sync {
    /// The height of the active chain's tip.
    fn tip_height(&self) -> i64;

    /// Up to `max` blocks to download, lowest first, with their heights
    /// ([`Validator::blocks_to_download`]).
    fn blocks_to_download(&self, max: usize) -> Vec<(i64, BlockHash)>;

    /// The height of a known header, in the active chain or not.
    fn header_height(&self, hash: &BlockHash) -> Option<i64>;

    /// The height of a block of the active chain.
    fn active_height(&self, hash: &BlockHash) -> Option<i64>;

    /// Validates a block and connects it if it extends the best chain.
    fn submit_block(&self, raw: &[u8]) -> Result<Accepted, KernelError>;
}

impl BlockValidator for Validator {
    fn tip_height(&self) -> i64 {
        self.tip().height
    }

    fn blocks_to_download(&self, max: usize) -> Vec<(i64, BlockHash)> {
        Validator::blocks_to_download(self, max)
    }

    fn header_height(&self, hash: &BlockHash) -> Option<i64> {
        Validator::header_height(self, hash)
    }

    fn active_height(&self, hash: &BlockHash) -> Option<i64> {
        Validator::active_height(self, hash)
    }

    fn submit_block(&self, raw: &[u8]) -> Result<Accepted, KernelError> {
        Validator::submit_block(self, raw)
    }
}

#[derive(Default)]
struct Inner {
    /// Requested blocks: who was asked, when, and the block's height.
    requested: HashMap<BlockHash, (PeerId, Instant, i64)>,
    /// The blocks to download as last read from the kernel, and when. Reading it walks up to
    /// WINDOW headers in the kernel, under the lock the validating thread holds while it
    /// connects a block, so it is read again only when headers arrived, nothing in it is left
    /// to ask for, or it is older than PLAN_AGE; not for every block received.
    plan: Vec<(i64, BlockHash)>,
    plan_at: Option<Instant>,
    /// Received blocks waiting for their turn, by height, with the peer that sent each.
    buffer: BTreeMap<i64, (BlockHash, Vec<u8>, PeerId)>,
    /// The lowest height not yet handed to the kernel.
    next_to_feed: i64,
    /// When each peer last delivered a block it was asked for.
    delivered_at: HashMap<PeerId, Instant>,
    /// Peers whose request went to another peer after [`REQUEST_TIMEOUT`] with nothing
    /// delivered meanwhile, or that held up a full window for the stalling timeout, until their
    /// sessions drop them (Core's stalling disconnect).
    stalling: HashSet<PeerId>,
    /// Since when each peer has held up a full window (Core's `m_stalling_since`).
    stalling_since: HashMap<PeerId, Instant>,
    /// Core's `m_block_stalling_timeout`: 2 s, doubled at each stall, back by 15% a block.
    stall_timeout: Duration,
}

impl Inner {
    /// Whether the block at `height` should be asked for now: not yet handed to the kernel, not
    /// held, and not asked of a peer within [`REQUEST_TIMEOUT`] (or the stalling timeout, once
    /// stalls have made it longer).
    fn askable(&self, height: i64, hash: &BlockHash, now: Instant) -> bool {
        let timeout = REQUEST_TIMEOUT.max(self.stall_timeout);
        height >= self.next_to_feed
            && !self.buffer.contains_key(&height)
            && self
                .requested
                .get(hash)
                .is_none_or(|r| now.duration_since(r.1) >= timeout)
    }

    /// Core's stall check (`FindNextBlocksToDownload` naming the staller, `SendMessages`
    /// disconnecting it): a peer that has blocks beyond the window found nothing to ask for in
    /// it, so the window waits on the lowest block not held. Its holder has the stalling
    /// timeout to deliver; then it is stalling, its request is free, and the timeout doubles.
    fn check_stall(&mut self, peer: PeerId, has: i64, now: Instant) {
        if self.plan.len() < WINDOW || self.plan.last().is_none_or(|(h, _)| *h >= has) {
            return;
        }
        let blocking = self
            .plan
            .iter()
            .find(|(height, _)| *height >= self.next_to_feed && !self.buffer.contains_key(height));
        let Some((_, hash)) = blocking.copied() else {
            return;
        };
        let Some((staller, _, _)) = self.requested.get(&hash).copied() else {
            return;
        };
        if staller == peer {
            return;
        }
        let since = *self.stalling_since.entry(staller).or_insert(now);
        if now.duration_since(since) > self.stall_timeout {
            tracing::info!(
                "peer {staller} is stalling block download (window held {}s)",
                self.stall_timeout.as_secs()
            );
            self.stalling.insert(staller);
            self.stalling_since.remove(&staller);
            self.requested.remove(&hash);
            self.stall_timeout = (self.stall_timeout * 2).min(BLOCK_STALLING_TIMEOUT_MAX);
        }
    }

    /// A block was connected: the stalling timeout shrinks by 15%, in whole seconds, towards
    /// its default (Core's `BlockConnected`: 64 s is back to 2 s after 16 blocks).
    fn block_connected(&mut self) {
        let shrunk = Duration::from_secs(self.stall_timeout.mul_f64(0.85).as_secs());
        self.stall_timeout = shrunk.max(BLOCK_STALLING_TIMEOUT_DEFAULT);
    }
}

/// What a peer's block turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub enum Delivered {
    /// Taken: buffered or handed to the kernel.
    Taken,
    /// Not asked for and not needed (already have it, or unknown header).
    Unwanted,
}

/// A block handed to the validating thread: height, hash, bytes and the peer that sent it.
type ToValidate = (i64, BlockHash, Vec<u8>, PeerId);

/// The download scheduler, shared by every peer task.
pub struct Downloader {
    validator: Arc<dyn BlockValidator>,
    inner: Mutex<Inner>,
    feeder: mpsc::SyncSender<ToValidate>,
    queued: Arc<AtomicUsize>,
    space: Option<SpaceWatch>,
}

impl Downloader {
    /// A scheduler feeding `validator` from a dedicated thread; it asks for no blocks while
    /// `space` says the disk is low. `on_invalid` hears of blocks the kernel rejected, with the
    /// peer that sent each.
    pub fn new(
        validator: Arc<impl BlockValidator + 'static>,
        space: Option<SpaceWatch>,
        on_invalid: impl Fn(BlockHash, PeerId, KernelError) + Send + 'static,
    ) -> std::io::Result<Arc<Self>> {
        let validator: Arc<dyn BlockValidator> = validator;
        let (tx, rx) = mpsc::sync_channel::<ToValidate>(FEED_QUEUE);
        let next = validator.tip_height() + 1;
        let downloader = Arc::new(Downloader {
            validator: validator.clone(),
            inner: Mutex::new(Inner {
                next_to_feed: next,
                stall_timeout: BLOCK_STALLING_TIMEOUT_DEFAULT,
                ..Default::default()
            }),
            feeder: tx,
            queued: Arc::new(AtomicUsize::new(0)),
            space,
        });
        let (v, q, weak) = (
            validator,
            downloader.queued.clone(),
            Arc::downgrade(&downloader),
        );
        std::thread::Builder::new()
            .name("block-feeder".into())
            .spawn(move || {
                for (height, hash, bytes, from) in rx {
                    let _span = tracing::debug_span!("validate", height).entered();
                    let connected = match v.submit_block(&bytes) {
                        Ok(outcome) => {
                            tracing::trace!("block {hash} at height {height}: {outcome:?}");
                            outcome == Accepted::Connected
                        }
                        Err(e) => {
                            tracing::warn!(
                                "block {hash} at height {height} from peer {from} rejected: {e}"
                            );
                            on_invalid(hash, from, e);
                            false
                        }
                    };
                    q.fetch_sub(1, Ordering::SeqCst);
                    // Room in the queue: move up what waited for it.
                    if let Some(dl) = weak.upgrade() {
                        let mut inner = dl.lock();
                        if connected {
                            inner.block_connected();
                        }
                        dl.feed_ready(&mut inner);
                    }
                }
            })?;
        Ok(downloader)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The blocks `peer` should request now: it has `in_flight` outstanding and is known to have
    /// the chain up to height `has` (Core asks a peer only for blocks up to its
    /// `pindexBestKnownBlock`; a peer asked for a block it lacks stalls the download).
    pub fn assign(&self, peer: PeerId, in_flight: usize, has: i64) -> Vec<BlockHash> {
        self.assign_at(peer, in_flight, has, Instant::now)
    }

    /// The stalling timeout now (Core's `m_block_stalling_timeout`).
    pub fn stall_timeout(&self) -> Duration {
        self.lock().stall_timeout
    }

    /// [`Downloader::assign`], the time read from `clock` (a unit test's clock runs ahead).
    fn assign_at(
        &self,
        peer: PeerId,
        in_flight: usize,
        has: i64,
        clock: impl Fn() -> Instant,
    ) -> Vec<BlockHash> {
        // A full disk would make the kernel stop for good; what is in flight still fits.
        if self.space.as_ref().is_some_and(SpaceWatch::is_low) {
            return Vec::new();
        }
        // Under the lock nothing new is handed to the kernel, so when its queue is empty the
        // list read now matches what it has connected.
        let mut inner = self.lock();
        // Read before the list: if the kernel's queue is empty now, it stays empty while we hold
        // the lock, so the list reflects every block handed over.
        let idle = self.queued.load(Ordering::SeqCst) == 0;
        let now = clock();
        let fresh = inner
            .plan_at
            .is_some_and(|at| now.duration_since(at) < PLAN_AGE);
        if !fresh
            || !inner
                .plan
                .iter()
                .any(|(height, hash)| inner.askable(*height, hash, now))
        {
            inner.plan = self.validator.blocks_to_download(WINDOW);
            inner.plan_at = Some(now);
            // Requests for blocks another peer delivered first are owed no more.
            let next = inner.next_to_feed;
            inner.requested.retain(|_, (_, _, height)| *height >= next);
            // When nothing waits in the kernel's queue, realign with the kernel (after a reorg
            // the next block to feed can be lower than before).
            if idle {
                if let Some((first, _)) = inner.plan.first().copied() {
                    if first < inner.next_to_feed && inner.buffer.is_empty() {
                        inner.next_to_feed = first;
                    }
                }
            }
        }
        let mut out = Vec::new();
        let room = PER_PEER.saturating_sub(in_flight);
        tracing::trace!(
            "assign to peer {peer}: {} planned from {:?}, next to feed {}, {} buffered, {} requested, {in_flight} in flight",
            inner.plan.len(),
            inner.plan.first().map(|w| w.0),
            inner.next_to_feed,
            inner.buffer.len(),
            inner.requested.len()
        );
        for i in 0..inner.plan.len() {
            if out.len() >= room {
                break;
            }
            let (height, hash) = inner.plan[i];
            if height > has {
                break;
            }
            if !inner.askable(height, &hash, now) {
                continue;
            }
            if let Some((who, at, _)) = inner.requested.get(&hash).copied() {
                tracing::debug!("block {hash} stalled at peer {who}; asking peer {peer}");
                let idle = inner.delivered_at.get(&who).is_none_or(|d| *d < at);
                if who != peer && idle {
                    inner.stalling.insert(who);
                }
            }
            inner.requested.insert(hash, (peer, now, height));
            out.push(hash);
        }
        if out.is_empty() && room > 0 {
            inner.check_stall(peer, has, now);
        }
        out
    }

    /// Takes a block peer `from` sent; hands every block that is next in line to the kernel.
    pub fn deliver(&self, bytes: Vec<u8>, from: PeerId) -> Delivered {
        let Ok((header, _)) =
            bitcoin::consensus::deserialize_partial::<bitcoin::block::Header>(&bytes)
        else {
            return Delivered::Unwanted;
        };
        let hash = header.block_hash();
        // A requested block's height is known; only an unrequested one is looked up in the
        // kernel (whose lock the validating thread holds while it connects a block). The
        // request is cleared only when the peer asked delivers (Core's `RemoveBlockRequest`
        // with the sender): a block from another does not excuse it.
        let (asked, own) = {
            let mut inner = self.lock();
            match inner.requested.get(&hash).copied() {
                Some((who, _, height)) if who == from => {
                    inner.requested.remove(&hash);
                    inner.delivered_at.insert(from, Instant::now());
                    inner.stalling_since.remove(&from);
                    (Some(height), true)
                }
                Some((_, _, height)) => (Some(height), false),
                None => (None, false),
            }
        };
        let height = match asked {
            Some(height) => Some(height),
            None => self
                .validator
                .header_height(&hash)
                .filter(|_| self.validator.active_height(&hash).is_none()),
        };
        let mut inner = self.lock();
        let Some(height) = height else {
            tracing::debug!("block {hash}: unknown header or already connected");
            return Delivered::Unwanted;
        };
        if height < inner.next_to_feed {
            tracing::debug!(
                "block {hash} at {height}: already handed to the kernel (next {})",
                inner.next_to_feed
            );
            return Delivered::Unwanted;
        }
        // Core's AcceptBlock ignores an unrequested block more than MIN_BLOCKS_TO_KEEP (288)
        // above the tip: held here it would only take memory.
        if asked.is_none() && height > inner.next_to_feed.saturating_add(MIN_BLOCKS_TO_KEEP) {
            tracing::debug!(
                "block {hash} at {height}: not asked for and too far ahead (next {})",
                inner.next_to_feed
            );
            return Delivered::Unwanted;
        }
        // One block a height: another for the same height (a competing block, or the same one
        // again) does not replace what is held, unless it is the one asked for of its sender.
        if let Some((held, _, _)) = inner.buffer.get(&height) {
            if *held == hash || !own {
                return Delivered::Unwanted;
            }
        }
        inner.buffer.insert(height, (hash, bytes, from));
        self.feed_ready(&mut inner);
        Delivered::Taken
    }

    /// Hands the blocks next in line to the validating thread while its queue has room. It
    /// never waits (the lock is held): a block that does not fit stays in the buffer, and the
    /// validating thread calls this again when it has taken one.
    fn feed_ready(&self, inner: &mut Inner) {
        loop {
            let next = inner.next_to_feed;
            let Some((hash, bytes, sender)) = inner.buffer.remove(&next) else {
                break;
            };
            self.queued.fetch_add(1, Ordering::SeqCst);
            match self.feeder.try_send((next, hash, bytes, sender)) {
                Ok(()) => inner.next_to_feed += 1,
                Err(mpsc::TrySendError::Full((_, hash, bytes, sender))) => {
                    self.queued.fetch_sub(1, Ordering::SeqCst);
                    inner.buffer.insert(next, (hash, bytes, sender));
                    break;
                }
                Err(mpsc::TrySendError::Disconnected(_)) => {
                    self.queued.fetch_sub(1, Ordering::SeqCst);
                    break;
                }
            }
        }
    }

    /// Says new headers were accepted: the next assignment reads the plan from the kernel.
    pub fn headers_changed(&self) {
        self.lock().plan_at = None;
    }

    /// Forgets what a departed peer was asked for, so others get it.
    pub fn forget_peer(&self, peer: PeerId) {
        let mut inner = self.lock();
        inner.requested.retain(|_, (who, _, _)| *who != peer);
        inner.delivered_at.remove(&peer);
        inner.stalling.remove(&peer);
        inner.stalling_since.remove(&peer);
    }

    /// Whether `peer` was found stalling the download (taken out: its session drops it).
    pub fn take_stalling(&self, peer: PeerId) -> bool {
        self.lock().stalling.remove(&peer)
    }

    /// Blocks requested from `peer` and not yet received.
    pub fn in_flight(&self, peer: PeerId) -> usize {
        self.lock()
            .requested
            .values()
            .filter(|(who, _, _)| *who == peer)
            .count()
    }
}

#[cfg(test)]
mod tests;

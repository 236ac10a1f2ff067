//! Frigate's remote scanner, as its README (sparrowwallet/frigate, "Electrum Protocol") and
//! Sparrow's client have it: `blockchain.silentpayments.subscribe(scan_private_key,
//! spend_public_key, start?, labels?)` answers `{"address", "labels", "start_height"}` (the
//! wallet's address without a label, the labels scanned, change's 0 always among them, and the
//! first height scanned), then scans the chain's tweaks from there with the wallet's keys and
//! tells what it finds in notifications `[subscription, progress, history]`, `history` a list of
//! `{"height", "tx_hash", "tweak_key"}` in chain order: pages of at most [`PAGE`] and a
//! heartbeat every [`HEARTBEAT`] with `progress` below 1 while the first scan runs, then always
//! one at 1.0 with the rest. Each new block is scanned as it comes (told only when something is
//! found); after a reorg the blocks from the fork on are scanned again. `start` is a height, a
//! time (above 500,000,000: the last block at or before it) or `"FROM-TO"` (those heights, then
//! only new blocks). `blockchain.silentpayments.unsubscribe` stops it.
//!
//! Mempool transactions are scanned too (their tweaks computed from the outputs their inputs
//! spend, which the mempool holds): all of them with the first scan, told with height 0 in its
//! last notification, then each as it enters; one told from the mempool is not told again when
//! it confirms (Frigate's rule: the wallet follows it by its script's subscription).
//!
//! Unlike Frigate, which tests the 8-byte prefix of `k = 0`'s key and leaves the check to the
//! wallet, a transaction is told only when BIP352's whole scan finds an output of the wallet in
//! it.
//!
//! The keys stay in the session's memory (never logged: [`ScanKeys`] does not print its secret)
//! and go with it. A session holds at most [`MAX_SUBSCRIPTIONS`] with at most [`MAX_LABELS`]
//! labels each (Frigate's limits); scans run one per host and [`crate::work::SCANS`] at once,
//! their arithmetic on the scan threads (one per core), their reads in the query pool's slots in
//! the host's turn, their work charged to the host ([`SCANNED_PER_UNIT`]).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use bitcoin::hex::DisplayHex;
use bitcoin::{BlockHash, Txid};
use rayon::prelude::*;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::backend::Backend;
use super::rpc::RpcError;
use crate::index::silent_payments::scan::ScanKeys;
use crate::index::silent_payments::TxTweak as PoolTweak;
use crate::view::{ChainView, TxTweak};
use crate::work::cost::{self, Verdict};
use crate::work::{
    GroupKey, HostShares, StreamPlace, WorkPool, WorkRefused, QUICK_SCAN_BLOCKS, QUICK_SCAN_MEMPOOL,
};

/// The method's name, in its notifications too.
pub const METHOD: &str = "blockchain.silentpayments.subscribe";
/// Subscriptions one session may hold (Frigate's `maxSubscriptions`).
pub const MAX_SUBSCRIPTIONS: usize = 100;
/// Labels one subscription may ask for besides change (Frigate's `maxLabels`).
pub const MAX_LABELS: usize = 10;
/// Most transactions one notification lists (Frigate's suggested page).
pub const PAGE: usize = 100;
/// Eligible transactions scanned worth one unit of cost: about 0.15 s of one core's work
/// (`cargo bench --bench sp_scan`: 12,900 a second), so a host's cost decays (10 units a
/// second) only while it scans with less than about one and a half cores; beyond, its scans and
/// requests wait, and at the hard limit its scans stop and its sessions close.
pub const SCANNED_PER_UNIT: f64 = 2_000.0;
/// The longest a scan waits for its session to take a notification before it stops (the
/// session is then not reading, and its write timeout ends it).
const NOTE_WAIT: Duration = Duration::from_secs(20);
/// How long a notification waits for room before its scan steps aside from its place for the
/// rest of [`NOTE_WAIT`].
const NOTE_WAIT_IN_PLACE: Duration = Duration::from_millis(250);
/// Most eligible transactions read before they are scanned (a chunk's memory and a
/// notification's delay).
const CHUNK_TXS: usize = 20_000;
/// A first scan tells its progress at least this often, found or not.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// Scanned blocks remembered by hash, to find a reorg's fork (a deeper reorg scans them all
/// again, then what follows).
const RECENT: usize = 24;
/// How long a first scan's first notification waits after the answer: a Sparrow from before
/// its fix drops a notification that comes before it has recorded the answer.
const FIRST_NOTE_AFTER: Duration = Duration::from_millis(200);
/// Mempool updates whose transactions a subscription's next scan names (more: it scans the
/// whole mempool). Each is the update's own set, shared by every subscription, so a burst of
/// arrivals costs each subscription those transactions, not the whole mempool.
const MAX_PENDING: usize = 64;
/// Mempool transactions a subscription remembers having told (more: it forgets them all, and
/// may tell one again when it confirms).
const MAX_TOLD: usize = 1_000;
/// A `start` above this is a time (seconds since the epoch), not a height.
const START_IS_TIME: u32 = 500_000_000;

/// The scan threads: one per core, apart from the indexer's and the query pool's.
static SCAN_THREADS: LazyLock<Option<rayon::ThreadPool>> = LazyLock::new(|| {
    rayon::ThreadPoolBuilder::new()
        .num_threads(scan_threads())
        .thread_name(|i| format!("sp-scan-{i}"))
        .build()
        .ok()
});

/// How many scan threads there are: one per core.
fn scan_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// The wallet's address (BIP352 version 0, no label) on `network`.
pub fn address(keys: &ScanKeys, network: bitcoin::Network) -> String {
    let network = match network {
        bitcoin::Network::Bitcoin => silentpayments::Network::Mainnet,
        bitcoin::Network::Regtest => silentpayments::Network::Regtest,
        _ => silentpayments::Network::Testnet,
    };
    silentpayments::SilentPaymentCode::new(
        silentpayments::SpVersion::ZERO,
        keys.scan_public(),
        keys.spend_public(),
        network,
    )
    .to_string()
}

/// A transaction a scan found: its height, id and tweak data.
type Hit = (u32, Txid, [u8; 33]);

/// Whose turns on the scan threads come next.
static TURNS: LazyLock<ScanTurns> = LazyLock::new(|| ScanTurns::new(scan_threads()));

/// The items of `txs` that `pays` says pay the wallet, in their order: in batches of
/// [`turns::BATCH`], each in a turn of `group`'s on the scan threads, spread over them; none
/// more once `cancel` is raised (the scan's subscription or session gone: its hits are then
/// never told).
fn scanned<T: Sync>(
    txs: &[T],
    group: Option<GroupKey>,
    cancel: &AtomicBool,
    pays: impl Fn(&T) -> Option<Hit> + Sync,
) -> Vec<Hit> {
    let mut hits = Vec::new();
    for batch in txs.chunks(turns::BATCH) {
        if cancel.load(Ordering::SeqCst) {
            break;
        }
        hits.extend(TURNS.run(group, || match &*SCAN_THREADS {
            Some(threads) => threads.install(|| {
                batch
                    .par_iter()
                    .with_min_len(16)
                    .filter_map(&pays)
                    .collect()
            }),
            None => batch.iter().filter_map(&pays).collect::<Vec<_>>(),
        }));
    }
    hits
}

/// The transactions of `txs` that pay `keys`, in their order, with their heights; scanned in
/// `group`'s turns until `cancel` is raised.
fn find(
    keys: &ScanKeys,
    txs: &[(u32, TxTweak)],
    group: Option<GroupKey>,
    cancel: &AtomicBool,
) -> Vec<Hit> {
    scanned(txs, group, cancel, |(height, tx)| {
        let outputs: Vec<[u8; 32]> = tx.outputs.iter().map(|o| o.1).collect();
        (!keys.scan(&tx.tweak, &outputs).is_empty()).then_some((*height, tx.txid, tx.tweak))
    })
}

/// The mempool transactions of `txs` (with their tweak data, computed as each entered) that pay
/// `keys`, at height 0; scanned in `group`'s turns until `cancel` is raised.
fn find_in_mempool(
    keys: &ScanKeys,
    txs: &[(bitcoin::Txid, PoolTweak)],
    group: Option<GroupKey>,
    cancel: &AtomicBool,
) -> Vec<Hit> {
    scanned(txs, group, cancel, |(txid, tweak)| {
        let outputs: Vec<[u8; 32]> = tweak.outputs.iter().map(|o| o.key).collect();
        (!keys.scan(&tweak.tweak, &outputs).is_empty()).then_some((0, *txid, tweak.tweak))
    })
}

/// Counts `n` eligible transactions from `source` (`block`, `mempool`) scanned.
fn count_scanned(source: &str, n: usize) {
    let metric = &crate::metrics::metrics().silent_payments_scanned;
    metric.with_label_values(&[source]).inc_by(n as u64);
}

/// Which mempool transactions a scan looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum MempoolScan {
    /// None.
    #[default]
    Nothing,
    /// Every one.
    All,
    /// Those of these updates' sets (shared with every subscription they were published to),
    /// if they are still there.
    These(Vec<Arc<HashSet<Txid>>>),
}

impl MempoolScan {
    /// This and `more` together (every one, past [`MAX_PENDING`] updates named).
    fn and(self, more: MempoolScan) -> MempoolScan {
        match (self, more) {
            (MempoolScan::Nothing, more) => more,
            (this, MempoolScan::Nothing) => this,
            (MempoolScan::These(mut a), MempoolScan::These(b))
                if a.len() + b.len() <= MAX_PENDING =>
            {
                a.extend(b);
                MempoolScan::These(a)
            }
            _ => MempoolScan::All,
        }
    }

    /// The transactions it names, each once (`None`: every one).
    fn txids(&self) -> Option<Vec<Txid>> {
        match self {
            MempoolScan::Nothing => Some(Vec::new()),
            MempoolScan::All => None,
            MempoolScan::These(sets) if sets.len() == 1 => Some(sets[0].iter().copied().collect()),
            MempoolScan::These(sets) => {
                let all: HashSet<Txid> = sets.iter().flat_map(|s| s.iter().copied()).collect();
                Some(all.into_iter().collect())
            }
        }
    }

    /// How many transactions it names at most (`None`: every one).
    fn named(&self) -> Option<usize> {
        match self {
            MempoolScan::All => None,
            MempoolScan::Nothing => Some(0),
            MempoolScan::These(sets) => Some(sets.iter().map(|s| s.len()).sum()),
        }
    }
}

/// The last height whose block's time is at most `time` (0 when none is), found by halving as
/// Frigate does (headers' times need not rise, so this is as close as they allow).
fn height_at_time(view: &ChainView, time: u32) -> u32 {
    let Some((tip, _)) = view.tip() else { return 0 };
    let (mut low, mut high) = (0, tip);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        match view.header(mid).is_some_and(|h| h.time <= time) {
            true => low = mid,
            false => high = mid - 1,
        }
    }
    low
}

/// Where a subscription's first scan starts and ends (`None`: the tip).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// From a height.
    Height(u32),
    /// From the last block at or before a time.
    Time(u32),
    /// `"FROM-TO"`: those heights only.
    Range(u32, u32),
}

impl Start {
    /// `start` as Frigate reads it: a height, a time above 500,000,000, or `"FROM-TO"`.
    pub fn parse(start: &Value) -> Result<Option<Start>, RpcError> {
        let bad = || RpcError::invalid_params("start must be an integer or a 'FROM-TO' string");
        match start {
            Value::Null => Ok(None),
            Value::Number(n) => {
                let n = n
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(bad)?;
                Ok(Some(match n > START_IS_TIME {
                    true => Start::Time(n),
                    false => Start::Height(n),
                }))
            }
            Value::String(text) => {
                let (from, to) = text.split_once('-').ok_or_else(bad)?;
                let (from, to) = (
                    from.parse().map_err(|_| bad())?,
                    to.parse().map_err(|_| bad())?,
                );
                match from <= to {
                    true => Ok(Some(Start::Range(from, to))),
                    false => Err(RpcError::invalid_params(
                        "start range must satisfy 0 <= from <= to",
                    )),
                }
            }
            _ => Err(bad()),
        }
    }
}

/// One subscription's scan of a range of heights, run on a thread of its own.
pub(crate) struct ScanJob {
    backend: Arc<Backend>,
    keys: Arc<ScanKeys>,
    address: Arc<str>,
    /// The subscription's answer, in each notification.
    subscription: Arc<Value>,
    /// The first height to scan.
    from: u32,
    /// The last height the first scan covers (`None`: the tip it starts at).
    to: Option<u32>,
    /// The subscription's first scan: its progress told, and ended with 1.0.
    first: bool,
    generation: u64,
    cancel: Arc<AtomicBool>,
    /// When it was queued (as its subscription was answered).
    queued: Instant,
    /// The mempool transactions to scan.
    mempool: MempoolScan,
    /// Mempool transactions told before: not told again, confirmed or not.
    told: HashSet<Txid>,
}

/// What a scan tells its session.
pub(crate) enum ScanEvent {
    /// A notification to send, if the scan is still its subscription's (a subscribe again or an
    /// unsubscribe drops what a replaced scan had on its way).
    Note {
        address: Arc<str>,
        generation: u64,
        line: String,
    },
    /// The scan ended, having scanned up to these blocks (the last [`RECENT`]).
    Ended {
        address: Arc<str>,
        generation: u64,
        scanned: Vec<(u32, BlockHash)>,
        /// The mempool transactions it told.
        told: Vec<Txid>,
        /// Why it stopped short, if it did for a reason the session must end for (its
        /// subscription cannot be told it is complete).
        failed: Option<ScanFailed>,
    },
}

/// Why a scan stopped short of its end, for the session to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScanFailed {
    /// Its host's cost reached the hard limit.
    Cost,
    /// A read failed, or the scan panicked.
    Broken,
}

/// Why a scan stopped short.
enum Stop {
    /// The client went, the subscription was dropped, or the server is closing.
    Gone,
    /// Its host's cost is at the hard limit.
    Cost,
    /// A read failed.
    Read(String),
}

/// A scan at work: its job, its session's channel, the pool and host it reads and pays in, and
/// its place.
struct Scanning {
    job: Arc<ScanJob>,
    tx: mpsc::Sender<ScanEvent>,
    pool: Arc<WorkPool>,
    host: Arc<HostShares>,
    place: StreamPlace,
}

impl ScanJob {
    /// Scans, then tells the session it ended (whether it got to the tip or not). Its reads
    /// run in query slots of its host's turn and its arithmetic on a blocking thread, both while
    /// it holds its `place`; its waits (its host's cost pause, its session taking a
    /// notification) hold no thread and no place: it steps aside ([`StreamPlace::step_aside`])
    /// and takes a place again after, unless it is over by then. So a scan of a client that
    /// does not read, or of a host over its cost, holds only its host's turn.
    pub(crate) async fn run(
        self,
        tx: mpsc::Sender<ScanEvent>,
        pool: Arc<WorkPool>,
        host: Arc<HostShares>,
        place: StreamPlace,
    ) {
        let job = Arc::new(self);
        let span = tracing::debug_span!("sp_scan", from = job.from);
        let mut scanning = Scanning {
            job: job.clone(),
            tx,
            pool,
            host,
            place,
        };
        let mut scanned = Vec::new();
        let ended = scanning.scan(&mut scanned).instrument(span).await;
        let Scanning { tx, place, .. } = scanning;
        drop(place);
        let (told, failed) = match ended {
            Ok(told) => (told, None),
            Err(Stop::Gone) => (Vec::new(), None),
            Err(Stop::Cost) => {
                crate::outsider_log!(info, "a silent-payment scan stopped: its host's cost");
                (Vec::new(), Some(ScanFailed::Cost))
            }
            Err(Stop::Read(e)) => {
                crate::outsider_log!(warn, "a silent-payment scan stopped: {e}");
                (Vec::new(), Some(ScanFailed::Broken))
            }
        };
        let start = scanned.len().saturating_sub(RECENT);
        let ended = ScanEvent::Ended {
            address: job.address.clone(),
            generation: job.generation,
            scanned: scanned.split_off(start),
            told,
            failed,
        };
        let _ = tx.send_timeout(ended, NOTE_WAIT).await;
    }

    /// What tells the session this scan ended without a word: it panicked.
    pub(crate) fn panicked(&self) -> ScanEvent {
        ScanEvent::Ended {
            address: self.address.clone(),
            generation: self.generation,
            scanned: Vec::new(),
            told: Vec::new(),
            failed: Some(ScanFailed::Broken),
        }
    }

    /// A notification of `history` at `progress`: positional, as Frigate sends it.
    fn note(&self, progress: f64, history: &[Hit]) -> String {
        let history: Vec<Value> = history
            .iter()
            .map(|(height, txid, tweak)| {
                json!({"height": height, "tx_hash": txid.to_string(),
                       "tweak_key": tweak.to_lower_hex_string()})
            })
            .collect();
        json!({"jsonrpc": "2.0", "method": METHOD,
               "params": [&*self.subscription, progress, history]})
        .to_string()
    }

    /// Whether this is a short scan, which takes a place in the short lane
    /// ([`WorkPool::scan_place`]): fewer than [`QUICK_SCAN_BLOCKS`] to the tip or its range's
    /// end (a subscription's follow-up for a new block, or a first scan of a recent start) and
    /// at most [`QUICK_SCAN_MEMPOOL`] mempool transactions to look at. Decided as it is queued;
    /// the tip it then scans to moves only by mined blocks.
    pub(crate) fn is_quick(&self) -> bool {
        let tip = self.backend.model.view().tip().map_or(0, |(h, _)| h);
        let end = self.to.map_or(tip, |to| to.min(tip));
        let mempool = match &self.mempool {
            MempoolScan::Nothing => 0,
            MempoolScan::These(_) => self.mempool.named().unwrap_or(usize::MAX),
            MempoolScan::All => self.backend.model.mempool().map_or(0, |m| m.size().0),
        };
        end.saturating_sub(self.from) < QUICK_SCAN_BLOCKS && mempool <= QUICK_SCAN_MEMPOOL
    }

    /// The eligible transactions of the heights from `next` on, [`CHUNK_TXS`] or so, read
    /// through one view (their blocks' hashes noted in `scanned`); `None` when `next` is past
    /// the tip (a first scan's `target`, the tip it started at, until it has got there).
    fn read_chunk(
        &self,
        next: &mut u32,
        target: &mut Option<u32>,
        scanned: &mut Vec<(u32, BlockHash)>,
    ) -> Result<Option<Vec<(u32, TxTweak)>>, Stop> {
        let view = self.backend.model.view();
        let Some((tip, _)) = view.tip() else {
            return Ok(None);
        };
        let end = match self.first {
            true => *target.get_or_insert(self.to.map_or(tip, |to| to.min(tip))),
            false => tip,
        };
        if *next > end {
            return Ok(None);
        }
        let mut chunk = Vec::new();
        while *next <= end && chunk.len() < CHUNK_TXS {
            let read = view
                .block_tweaks(*next)
                .map_err(|e| Stop::Read(e.to_string()))?;
            let (Some(block), Some(hash)) = (read, view.block_hash(*next)) else {
                // The chain got shorter (a reorg): what is left is scanned after it.
                *next = end + 1;
                break;
            };
            chunk.extend(block.into_iter().map(|t| (*next, t)));
            scanned.push((*next, hash));
            if scanned.len() > 2 * RECENT {
                scanned.drain(..RECENT);
            }
            *next += 1;
        }
        Ok(Some(chunk))
    }
}

impl Scanning {
    /// Reads the tweaks of heights from `from` in chunks, scans each on the scan threads, then
    /// the mempool's transactions it is to, and tells what it found: a first scan up to the tip
    /// it started at (or its range's end), a later one up to the tip. Returns the mempool
    /// transactions it told.
    async fn scan(&mut self, scanned: &mut Vec<(u32, BlockHash)>) -> Result<Vec<Txid>, Stop> {
        let job = self.job.clone();
        let (mut next, mut target) = (job.from, None);
        let mut found: Vec<Hit> = Vec::new();
        let mut told = Instant::now();
        loop {
            if job.cancel.load(Ordering::SeqCst) {
                return Err(Stop::Gone);
            }
            let seen = std::mem::take(scanned);
            let (chunk, read_to, end, seen) = self
                .read(move |job| {
                    let (mut next, mut target, mut seen) = (next, target, seen);
                    let chunk = job.read_chunk(&mut next, &mut target, &mut seen)?;
                    Ok((chunk, next, target, seen))
                })
                .await?;
            (*scanned, next, target) = (seen, read_to, end);
            let Some(chunk) = chunk else { break };
            let (keys, len) = (job.keys.clone(), chunk.len());
            self.pay_ahead(len).await?;
            let (group, cancel) = (self.host.group.key, job.cancel.clone());
            found.extend(compute(move || find(&keys, &chunk, group, &cancel)).await?);
            count_scanned("block", len);
            let progress = match (job.first, target) {
                (true, Some(target)) if target >= job.from => {
                    (f64::from(next - job.from) / f64::from(target + 1 - job.from)).min(0.9999)
                }
                _ => 1.0,
            };
            // A first scan's pages while more may follow, and its heartbeat.
            while job.first && (found.len() > PAGE || told.elapsed() >= HEARTBEAT) {
                let page: Vec<_> = found.drain(..found.len().min(PAGE)).collect();
                self.send(job.note(progress, &page)).await?;
                told = Instant::now();
            }
        }
        // Confirmed, what was told from the mempool is not told again.
        found.retain(|(_, txid, _)| !job.told.contains(txid));
        let in_mempool = self.scan_mempool().await?;
        let told: Vec<Txid> = in_mempool.iter().map(|hit| hit.1).collect();
        found.extend(in_mempool);
        // The rest at 1.0 (not paged, as Frigate's last): always after a first scan, which it
        // ends; after a later one, only when something was found.
        if job.first || !found.is_empty() {
            self.send(job.note(1.0, &found)).await?;
        }
        Ok(told)
    }

    /// The mempool transactions to scan that pay the wallet and were not told before, read in
    /// chunks of [`CHUNK_TXS`] (in a slot of the pool each) and scanned on the scan threads.
    async fn scan_mempool(&mut self) -> Result<Vec<Hit>, Stop> {
        let job = self.job.clone();
        let Some(mempool) = job.backend.model.mempool() else {
            return Ok(Vec::new());
        };
        if job.mempool == MempoolScan::Nothing {
            return Ok(Vec::new());
        }
        let txids = job.mempool.txids().unwrap_or_else(|| mempool.txids());
        let mut hits = Vec::new();
        for chunk in txids.chunks(CHUNK_TXS) {
            if job.cancel.load(Ordering::SeqCst) {
                return Err(Stop::Gone);
            }
            let chunk = chunk.to_vec();
            let txs = self
                .read(move |job| {
                    let mempool = job.backend.model.mempool();
                    Ok(mempool.map_or_else(Vec::new, |m| m.tweaks(&chunk)))
                })
                .await?;
            let (keys, len) = (job.keys.clone(), txs.len());
            self.pay_ahead(len).await?;
            let (group, cancel) = (self.host.group.key, job.cancel.clone());
            hits.extend(compute(move || find_in_mempool(&keys, &txs, group, &cancel)).await?);
            count_scanned("mempool", len);
        }
        hits.retain(|(_, txid, _)| !job.told.contains(txid));
        Ok(hits)
    }

    /// Runs `read` in a query slot of the host's turn, on a blocking thread; the pool's
    /// closing or the scan's end (this future dropped) stops its next read.
    async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&ScanJob) -> Result<T, Stop> + Send + 'static,
    ) -> Result<T, Stop> {
        let slot = self.pool.slot(&self.host).await.map_err(|_| Stop::Gone)?;
        let job = self.job.clone();
        match self.pool.run(slot, move || read(&job)).await {
            Ok(read) => read,
            Err(WorkRefused::Failed) => Err(Stop::Read("a read panicked".into())),
            Err(_) => Err(Stop::Gone),
        }
    }

    /// Charges the bytes of a notification sent to the host; over its soft limit, the pause is
    /// slept with the place given back.
    async fn pay(&mut self, bytes: usize) -> Result<(), Stop> {
        let limits = self.job.backend.config.cost;
        let verdict = self
            .host
            .cost
            .charge(bytes as f64 / cost::BANDWIDTH_UNIT, &limits);
        self.heed(verdict).await
    }

    /// Pays for `txs` transactions before they are scanned, as a broadcast pays for its checks:
    /// when that takes the host to its hard limit they are not scanned (the scan stops for its
    /// host's cost); over its soft limit, or its group's, the pause is slept with the place
    /// given back. A group's cost only makes a scan wait, never stops it (an exempt
    /// connection's group is every Tor wallet's).
    async fn pay_ahead(&mut self, txs: usize) -> Result<(), Stop> {
        let limits = self.job.backend.config.cost;
        let units = txs as f64 / SCANNED_PER_UNIT;
        if !self.host.cost.pay_ahead_own(units, &limits) {
            return Err(Stop::Cost);
        }
        let verdict = self.host.cost.verdict(&limits);
        self.heed(verdict).await
    }

    /// Goes on, stops for the host's cost, or sleeps the pause with the place given back.
    async fn heed(&mut self, verdict: Verdict) -> Result<(), Stop> {
        match verdict {
            Verdict::Go => Ok(()),
            Verdict::Close => Err(Stop::Cost),
            Verdict::Wait(pause) => {
                self.place.step_aside();
                tokio::time::sleep(pause).await;
                self.come_back().await
            }
        }
    }

    /// Hands a notification to the session: [`NOTE_WAIT_IN_PLACE`] in its place (a session
    /// busy writing takes it by then), then the rest of [`NOTE_WAIT`] stepped aside.
    async fn deliver(&mut self, event: ScanEvent) -> Result<(), Stop> {
        let event = match self.tx.send_timeout(event, NOTE_WAIT_IN_PLACE).await {
            Ok(()) => return Ok(()),
            Err(mpsc::error::SendTimeoutError::Closed(_)) => return Err(Stop::Gone),
            Err(mpsc::error::SendTimeoutError::Timeout(event)) => event,
        };
        self.place.step_aside();
        match self
            .tx
            .send_timeout(event, NOTE_WAIT - NOTE_WAIT_IN_PLACE)
            .await
        {
            Ok(()) => self.come_back().await,
            Err(_) => Err(Stop::Gone),
        }
    }

    /// Takes a place again after a wait, unless the scan is over meanwhile (its subscription
    /// dropped or replaced, its session gone, the pool closing).
    async fn come_back(&mut self) -> Result<(), Stop> {
        if self.job.cancel.load(Ordering::SeqCst) {
            return Err(Stop::Gone);
        }
        tokio::select! {
            back = self.place.step_back() => back.map_err(|_| Stop::Gone),
            () = self.tx.closed() => Err(Stop::Gone),
        }
    }

    /// A notification's line, paid for and handed over; a first scan's first not before
    /// [`FIRST_NOTE_AFTER`] from its answer. That wait keeps the place: given back, the scan
    /// would queue for it again behind every scan waiting (a long lane's for hours), and a
    /// subnet's first scans hold one place of each lane at once, for 200 ms at most.
    async fn send(&mut self, line: String) -> Result<(), Stop> {
        if self.job.first {
            tokio::time::sleep(FIRST_NOTE_AFTER.saturating_sub(self.job.queued.elapsed())).await;
        }
        self.pay(line.len()).await?;
        let note = ScanEvent::Note {
            address: self.job.address.clone(),
            generation: self.job.generation,
            line,
        };
        self.deliver(note).await
    }
}

/// Runs a scan's arithmetic on a blocking thread (the scan threads' pool inside).
async fn compute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Stop> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Stop::Read(format!("a scan's arithmetic failed: {e}")))
}

mod subscriptions;
mod turns;
pub(crate) use subscriptions::Subscriptions;
use turns::ScanTurns;

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::hashes::Hash;

    fn set(from: u8, n: u8) -> Arc<HashSet<Txid>> {
        Arc::new(
            (from..from + n)
                .map(|i| Txid::from_byte_array([i; 32]))
                .collect(),
        )
    }

    #[test]
    fn a_burst_of_arrivals_is_scanned_as_itself_and_sets_are_shared() {
        let burst = set(0, 200);
        let pending =
            MempoolScan::These(vec![burst.clone()]).and(MempoolScan::These(vec![set(100, 150)]));
        assert_eq!(
            Arc::strong_count(&burst),
            2,
            "the update's set is shared, not copied"
        );
        assert_eq!(pending.named(), Some(350));
        let mut txids = pending.txids().unwrap();
        txids.sort();
        txids.dedup();
        assert_eq!(txids.len(), 250, "each once");
        // Past MAX_PENDING updates: the whole mempool.
        let many = (0..=MAX_PENDING as u8).fold(MempoolScan::Nothing, |p, i| {
            p.and(MempoolScan::These(vec![set(i, 1)]))
        });
        assert_eq!(many, MempoolScan::All);
    }
}

//! The indexer thread: follows the kernel's events, keeps the index at the kernel's tip, brings
//! the mempool in line with each new tip, and tells the servers what changed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::durability::FlushWatch;
use crate::index::{Index, IndexError, SyncStats};
use crate::kernel::{KernelEvent, Validator};
use crate::mempool::Mempool;
use crate::notify::{Changes, Notifier};
use crate::store::schema::{cf, meta};
use crate::store::Store;

/// A running indexer thread.
pub struct IndexRunner {
    stop: Arc<AtomicBool>,
    failure: Arc<Mutex<Option<String>>>,
    handle: JoinHandle<Result<Receiver<KernelEvent>, IndexError>>,
}

impl IndexRunner {
    /// Starts the thread; it syncs at once (then loads the mempool saved at `saved_mempool`, if
    /// given), then syncs on every kernel event (and every 250 ms). `bulk` says while the
    /// index's writes skip RocksDB's log.
    pub fn spawn(
        index: Arc<Index>,
        validator: Arc<Validator>,
        mempool: Option<(Arc<Mempool>, Option<PathBuf>)>,
        events: Receiver<KernelEvent>,
        notifier: Notifier,
        bulk: BulkLoad,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let failure = Arc::new(Mutex::new(None));
        let (stop2, failure2) = (stop.clone(), failure.clone());
        let handle = std::thread::Builder::new()
            .name("indexer".into())
            .spawn(move || {
                let result = (|| {
                    let (pool, saved) = mempool.unzip();
                    let mut bulk = BulkLoadState::start(bulk, &index, &validator)?;
                    let first = index.sync(&validator)?;
                    bulk.after_sync(&validator)?;
                    if first.connected > 0 || first.disconnected > 0 {
                        notifier.publish(&index, Changes::of_blocks(first.touched, first.txids));
                    }
                    if let (Some(pool), Some(path)) = (&pool, saved.flatten()) {
                        load_mempool(pool, &index, &path, &notifier);
                    }
                    let catch_up = CatchUp {
                        bulk,
                        settle: SettleCompaction::new(&index, first.connected)?,
                    };
                    run(
                        &index,
                        &validator,
                        pool.as_deref(),
                        events,
                        &notifier,
                        &stop2,
                        catch_up,
                    )
                })();
                if let Err(e) = &result {
                    *failure2.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.to_string());
                }
                result
            })?;
        Ok(IndexRunner {
            stop,
            failure,
            handle,
        })
    }

    /// The error the thread ended with, if it ended with one.
    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Asks the thread to finish: it syncs once more to the kernel's tip, then hands the
    /// kernel's event channel back (for a later runner).
    pub fn finish(self) -> Result<Receiver<KernelEvent>, IndexError> {
        self.stop.store(true, Ordering::SeqCst);
        match self.handle.join() {
            Ok(result) => result,
            Err(_) => Err(IndexError::Inconsistent(
                "the indexer thread panicked".into(),
            )),
        }
    }

    /// Whether the thread has ended (it ends early only on an error).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

fn run(
    index: &Index,
    validator: &Validator,
    mempool: Option<&Mempool>,
    events: Receiver<KernelEvent>,
    notifier: &Notifier,
    stop: &AtomicBool,
    mut catch_up: CatchUp,
) -> Result<Receiver<KernelEvent>, IndexError> {
    let mut pruner = UndoPruner::default();
    let mut kernel_stopped = false;
    loop {
        // After a stop request or the kernel's fatal error, one more sync: the index ends at the
        // kernel's last tip.
        let stopping = stop.load(Ordering::SeqCst) || kernel_stopped;
        let stats = index.sync(validator)?;
        pruner.after_sync(index, validator, stats.lowest_undone)?;
        catch_up.after_sync(index, validator, stats.connected, stopping)?;
        if stats.connected > 0 || stats.disconnected > 0 {
            let changes = match mempool {
                Some(pool) => follow_tip(pool, index, stats),
                None => Changes::of_blocks(stats.touched, stats.txids),
            };
            notifier.publish(index, changes);
        }
        if stopping {
            return Ok(events);
        }
        kernel_stopped |= wait_for_events(&events);
    }
}

/// Waits for the kernel's next event (at most 250 ms), then takes every event already queued:
/// one sync for a burst. True if one was the kernel's fatal error.
fn wait_for_events(events: &Receiver<KernelEvent>) -> bool {
    let mut fatal = match events.recv_timeout(Duration::from_millis(250)) {
        Ok(event) => note_fatal(event),
        Err(RecvTimeoutError::Timeout) => false,
        Err(RecvTimeoutError::Disconnected) => {
            std::thread::sleep(Duration::from_millis(250));
            false
        }
    };
    while let Ok(event) = events.try_recv() {
        fatal |= note_fatal(event);
    }
    fatal
}

/// Logs the kernel's fatal error; true if the event is one.
fn note_fatal(event: KernelEvent) -> bool {
    let KernelEvent::Fatal(message) = event else {
        return false;
    };
    tracing::error!("indexer stops: the kernel hit a fatal error: {message}");
    true
}

/// While the index's writes skip RocksDB's write-ahead log ([`crate::store::Store::set_bulk_load`]):
/// a catch-up then writes each row once instead of twice and never waits for a sync, and a
/// crash costs only the batches since the last flush, which the next start indexes again from
/// the kernel's blocks (as electrs does during its initial sync, and as Core keeps its coins
/// cache unflushed during its initial download). Only the indexer thread writes the index, so
/// no logged write can come between the unlogged ones and the flush that ends them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkLoad {
    /// While the kernel is in its initial download (`cairn run`); logged and synced after.
    WhileDownloading,
    /// Until the runner finishes (`cairn import`, `cairn demo`: a catch-up without clients).
    UntilFinished,
}

/// What changes once the initial catch-up is over: writes logged again, then one compaction.
struct CatchUp {
    bulk: BulkLoadState,
    settle: SettleCompaction,
}

impl CatchUp {
    fn after_sync(
        &mut self,
        index: &Index,
        validator: &Validator,
        connected: u32,
        stopping: bool,
    ) -> Result<(), IndexError> {
        if stopping {
            self.bulk.finish()?;
        } else {
            self.bulk.after_sync(validator)?;
        }
        let hold = self.bulk.on || stopping;
        self.settle.after_sync(index, validator, connected, hold)
    }
}

/// Bulk loading as the runner drives it; ended (flushed) when dropped, also when the thread
/// ends on an error.
struct BulkLoadState {
    when: BulkLoad,
    store: Arc<Store>,
    /// Whether it is on now.
    on: bool,
}

impl BulkLoadState {
    /// Turns bulk loading on if `when` says so now.
    fn start(when: BulkLoad, index: &Index, validator: &Validator) -> Result<Self, IndexError> {
        let on = match when {
            BulkLoad::UntilFinished => true,
            BulkLoad::WhileDownloading => validator.initial_download().is_some(),
        };
        let store = index.store().clone();
        if on {
            store.set_bulk_load(true)?;
            tracing::info!("index writes skip the write-ahead log until the initial sync ends");
        }
        Ok(BulkLoadState { when, store, on })
    }

    /// Ends bulk loading (flushing what it wrote) once the initial download is over.
    fn after_sync(&mut self, validator: &Validator) -> Result<(), IndexError> {
        if self.on
            && self.when == BulkLoad::WhileDownloading
            && validator.initial_download().is_none()
        {
            self.finish()?;
        }
        Ok(())
    }

    /// Ends bulk loading now: everything written is flushed, durable once this returns.
    fn finish(&mut self) -> Result<(), IndexError> {
        if std::mem::take(&mut self.on) {
            self.store.set_bulk_load(false)?;
            tracing::info!("index writes are logged again: the initial sync is flushed");
        }
        Ok(())
    }
}

impl Drop for BulkLoadState {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::warn!("the index's bulk-loaded writes were not flushed: {e}");
        }
    }
}

/// Loads a saved mempool (once the index is at the kernel's tip, which its checks need); a
/// damaged file costs what it held, never the start.
fn load_mempool(pool: &Mempool, index: &Index, path: &std::path::Path, notifier: &Notifier) {
    match pool.load(index, path, |accepted| notifier.accepted(index, accepted)) {
        Ok(None) => {}
        Ok(Some(s)) => tracing::info!(
            "loaded the saved mempool: {} accepted, {} failed, {} expired, {} already there",
            s.accepted,
            s.failed,
            s.expired,
            s.already_there
        ),
        Err(e) => tracing::warn!("the saved mempool was not (fully) loaded: {e}"),
    }
}

/// Blocks indexed in one catch-up after which the whole index is compacted once it is done.
pub const SETTLE_AFTER_BLOCKS: u64 = 1_000;

/// Compacts the whole index, in a thread of its own, once the node has left its initial
/// download after indexing [`SETTLE_AFTER_BLOCKS`] or more blocks (once per process, as electrs
/// does after its initial sync): rows deleted or rewritten during the catch-up (spent outputs,
/// undo rows) then leave the files, and every file gets the last level's compression. Until
/// then RocksDB compacts as it sees fit. A catch-up that ends before its compaction (an import,
/// a stop) leaves `meta/unsettled`, and the next run compacts once out of the initial download.
struct SettleCompaction {
    indexed: u64,
    /// `meta/unsettled` is in the store.
    marked: bool,
    /// Set by the compaction's thread when it is done (the mark is deleted here, on the
    /// indexer thread, the index's only writer).
    done: Option<Arc<AtomicBool>>,
}

impl SettleCompaction {
    /// Counts `connected` blocks already indexed (the first sync's), and whether an earlier
    /// catch-up left its compaction due.
    fn new(index: &Index, connected: u32) -> Result<Self, IndexError> {
        Ok(SettleCompaction {
            indexed: u64::from(connected),
            marked: index.store().get(cf::META, meta::UNSETTLED)?.is_some(),
            done: None,
        })
    }

    /// Starts the compaction once it is due; never while bulk loading or stopping (`hold`): a
    /// catch-up still going on, or nothing after it to compact for. A due one is marked first,
    /// and unmarked once done.
    fn after_sync(
        &mut self,
        index: &Index,
        validator: &Validator,
        connected: u32,
        hold: bool,
    ) -> Result<(), IndexError> {
        self.indexed = self.indexed.saturating_add(u64::from(connected));
        if let Some(done) = &self.done {
            if self.marked && done.load(Ordering::SeqCst) {
                set_unsettled(index.store(), false)?;
                self.marked = false;
            }
            return Ok(());
        }
        if !(self.marked || self.indexed >= SETTLE_AFTER_BLOCKS) {
            return Ok(());
        }
        if !self.marked {
            set_unsettled(index.store(), true)?;
            self.marked = true;
        }
        if hold || validator.initial_download().is_some() {
            return Ok(());
        }
        let done = Arc::new(AtomicBool::new(false));
        self.done = Some(done.clone());
        let store = index.store().clone();
        let compaction = std::thread::Builder::new()
            .name("compaction".into())
            .spawn(move || {
                let started = Instant::now();
                let before: u64 = store.disk_bytes().iter().map(|(_, b)| b).sum();
                store.compact();
                let after: u64 = store.disk_bytes().iter().map(|(_, b)| b).sum();
                done.store(true, Ordering::SeqCst);
                tracing::info!(
                    "index compacted after the initial sync: {before} to {after} bytes in {:.1} s",
                    started.elapsed().as_secs_f64()
                );
            });
        if let Err(e) = compaction {
            tracing::warn!("the index's compaction did not start: {e}");
        }
        Ok(())
    }
}

/// Writes or deletes `meta/unsettled` (the whole-index compaction after a catch-up is due): on
/// the index's writing thread only.
pub fn set_unsettled(store: &Store, due: bool) -> Result<(), crate::store::StoreError> {
    let mut batch = rocksdb::WriteBatch::default();
    if due {
        batch.put_cf(store.cf(cf::META), meta::UNSETTLED, []);
    } else {
        batch.delete_cf(store.cf(cf::META), meta::UNSETTLED);
    }
    store.write(batch)
}

/// Deletes the index's `undo` rows of blocks the kernel certainly has on disk: at start, up to
/// the tip it loaded; then as [`FlushWatch`] infers its writes.
#[derive(Default)]
struct UndoPruner {
    watch: FlushWatch,
    pruned_through: Option<u32>,
}

impl UndoPruner {
    fn after_sync(
        &mut self,
        index: &Index,
        validator: &Validator,
        lowest_undone: Option<u32>,
    ) -> Result<(), IndexError> {
        let tip = validator.tip();
        self.watch.look(
            Instant::now(),
            (tip.height, tip.hash),
            lowest_undone.map(i64::from),
        );
        let Some((index_height, index_hash)) = index.tip() else {
            return Ok(());
        };
        // Only while the index is on the kernel's chain: its rows at those heights are then the
        // kernel's blocks.
        if validator.hash_at(i64::from(index_height)) != Some(index_hash) {
            return Ok(());
        }
        let loaded = validator
            .on_disk_at_open()
            .filter(|t| validator.hash_at(t.height) == Some(t.hash));
        let on_disk = self.watch.on_disk().max(loaded.map(|t| t.height));
        let Some(through) = on_disk
            .and_then(|h| u32::try_from(h).ok())
            .map(|h| h.min(index_height))
        else {
            return Ok(());
        };
        if self.pruned_through.is_some_and(|p| p >= through) {
            return Ok(());
        }
        index.prune_undo_through(through)?;
        tracing::debug!(
            "undo rows through height {through} deleted: the kernel has those blocks on disk"
        );
        self.pruned_through = Some(through);
        Ok(())
    }
}

/// Brings the mempool in line with a new index tip: drops what the new blocks confirmed or
/// conflicted with, then puts back what undone blocks had (when still valid). Returns the
/// script hashes touched and the transactions added by the blocks and by the mempool's changes.
fn follow_tip(pool: &Mempool, index: &Index, stats: SyncStats) -> Changes {
    let mut changes = Changes::of_blocks(stats.touched, stats.txids);
    let dropped = pool.revalidate(index);
    changes.extend(Changes::touching(dropped));
    for raw in &stats.undone_txs {
        if let Ok(a) = pool.accept(raw, index) {
            changes.extend(Changes::accepted(&a));
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::hashes::Hash;

    fn connected(height: i64) -> KernelEvent {
        KernelEvent::BlockConnected {
            hash: bitcoin::BlockHash::all_zeros(),
            height,
        }
    }

    #[test]
    fn a_fatal_error_within_a_burst_of_events_is_seen() {
        let (tx, rx) = std::sync::mpsc::channel();
        for event in [
            connected(1),
            KernelEvent::Fatal("disk".into()),
            connected(2),
        ] {
            tx.send(event).unwrap();
        }
        assert!(wait_for_events(&rx));
        assert!(rx.try_recv().is_err(), "the whole burst is taken");
        tx.send(connected(3)).unwrap();
        assert!(!wait_for_events(&rx));
    }

    #[test]
    fn waiting_without_events_ends_after_a_quarter_second() {
        let (_tx, rx) = std::sync::mpsc::channel::<KernelEvent>();
        let started = Instant::now();
        assert!(!wait_for_events(&rx));
        assert!(started.elapsed() >= Duration::from_millis(250));
    }
}

//! The indexer thread: follows the kernel's events, keeps the index at the kernel's tip, and
//! tells the servers what changed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::broadcast;

use std::collections::HashSet;

use super::schema::ScriptHash;
use super::{Index, IndexError};
use crate::mempool::Mempool;
use crate::electrum::TipUpdate;
use crate::kernel::{KernelEvent, Validator};

/// A running indexer thread.
pub struct IndexRunner {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<Receiver<KernelEvent>, IndexError>>,
}

impl IndexRunner {
    /// Starts the thread; it syncs at once, then on every kernel event (and every second).
    pub fn spawn(
        index: Arc<Index>,
        validator: Arc<Validator>,
        mempool: Option<Arc<Mempool>>,
        events: Receiver<KernelEvent>,
        updates: broadcast::Sender<TipUpdate>,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("indexer".into())
            .spawn(move || run(&index, &validator, mempool.as_deref(), events, &updates, &stop2))?;
        Ok(IndexRunner { stop, handle })
    }

    /// Asks the thread to finish: it syncs once more to the kernel's tip, then hands the
    /// kernel's event channel back (for a later runner).
    pub fn finish(self) -> Result<Receiver<KernelEvent>, IndexError> {
        self.stop.store(true, Ordering::SeqCst);
        match self.handle.join() {
            Ok(result) => result,
            Err(_) => Err(IndexError::Inconsistent("the indexer thread panicked".into())),
        }
    }

    /// Whether the thread has ended (it ends early only on an error).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

/// Tells the servers that the tip or these script hashes changed (`None`: any may have).
pub fn publish(index: &Index, updates: &broadcast::Sender<TipUpdate>, touched: Option<HashSet<ScriptHash>>) {
    let tip = index.with_chain(|c| c.tip().and_then(|(h, _)| c.header(h).map(|hd| (h, *hd))));
    if let Some((height, header)) = tip {
        let _ = updates.send(TipUpdate {
            height,
            header,
            touched: touched.map(Arc::new),
        });
    }
}

fn run(
    index: &Index,
    validator: &Validator,
    mempool: Option<&Mempool>,
    events: Receiver<KernelEvent>,
    updates: &broadcast::Sender<TipUpdate>,
    stop: &AtomicBool,
) -> Result<Receiver<KernelEvent>, IndexError> {
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let stats = index.sync(validator)?;
        if stats.connected > 0 || stats.disconnected > 0 {
            let mut touched = stats.touched;
            if let Some(pool) = mempool {
                // Drop what the new blocks confirmed or conflicted with, then put back what the
                // undone blocks had (when still valid).
                let dropped = pool.revalidate(index);
                let mut readded = HashSet::new();
                for raw in &stats.undone_txs {
                    if let Ok(a) = pool.accept(raw, index) {
                        readded.extend(a.touched);
                    }
                }
                if let Some(t) = touched.as_mut() {
                    t.extend(dropped);
                    t.extend(readded);
                }
            }
            publish(index, updates, touched);
        }
        if stopping {
            return Ok(events);
        }
        match events.recv_timeout(Duration::from_millis(250)) {
            Ok(KernelEvent::Fatal(message)) => {
                tracing::error!("indexer stops: the kernel hit a fatal error: {message}");
                return Ok(events);
            }
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_millis(250)),
        }
        // Coalesce a burst of events into one sync.
        while events.try_recv().is_ok() {}
    }
}

//! A session's silent-payment subscriptions: what each has scanned and told, and the scans
//! they need run (after a subscribe, a new block, a reorg, new mempool transactions).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bitcoin::{BlockHash, Txid};
use serde_json::{json, Value};

use super::{
    address, height_at_time, MempoolScan, ScanJob, Start, MAX_SUBSCRIPTIONS, MAX_TOLD, RECENT,
};
use crate::electrum::backend::Backend;
use crate::electrum::rpc::RpcError;
use crate::index::silent_payments::scan::ScanKeys;

/// Scans one session may have queued and not ended: a client that subscribes again and again
/// (each replacing the last, whose scan still waits for a place to find it was replaced) is
/// refused past it.
const MAX_UNFINISHED: usize = 2 * MAX_SUBSCRIPTIONS;

/// One subscription of a session.
struct Subscription {
    keys: Arc<ScanKeys>,
    /// The answer to the subscribe, in each notification.
    subscription: Arc<Value>,
    start_height: u32,
    /// The first height new blocks are scanned from (past a `"FROM-TO"` range's tip).
    live_from: u32,
    /// The last blocks scanned, by height and hash, oldest first.
    scanned: Vec<(u32, BlockHash)>,
    /// The scan running now, by its generation, with the flag that stops it.
    running: Option<(u64, Arc<AtomicBool>)>,
    /// Whether the tip moved while a scan ran.
    behind: bool,
    /// Mempool transactions to scan once the running scan ends.
    pending: MempoolScan,
    /// Mempool transactions told (at most [`MAX_TOLD`]).
    told: HashSet<Txid>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some((_, cancel)) = &self.running {
            cancel.store(true, Ordering::SeqCst);
        }
    }
}

/// A session's silent-payment subscriptions, and the scans they need run.
#[derive(Default)]
pub(crate) struct Subscriptions {
    /// Scans queued and not ended (replaced ones included): at most [`MAX_UNFINISHED`].
    unfinished: usize,
    subs: HashMap<Arc<str>, Subscription>,
    jobs: Vec<ScanJob>,
    generation: u64,
}

impl Subscriptions {
    /// How many the session holds.
    pub(crate) fn len(&self) -> usize {
        self.subs.len()
    }

    /// Subscribes `keys` (with change's label and the others) from `start` (the first height
    /// with tweaks when absent; never above what the connection's subscription of the same keys
    /// covers already): the answer, the first scan queued. The same keys again start over; new
    /// ones are refused when `room` (the host's and the server's) refuses, asked only once the
    /// request is otherwise valid.
    pub(crate) fn subscribe(
        &mut self,
        backend: &Arc<Backend>,
        keys: ScanKeys,
        start: Option<Start>,
        room: impl FnOnce() -> Result<(), RpcError>,
    ) -> Result<Value, RpcError> {
        if self.unfinished >= MAX_UNFINISHED {
            return Err(RpcError::invalid_params(
                "too many silent-payment scans waiting on this connection; try again later",
            ));
        }
        let view = backend.model.view();
        let address: Arc<str> = address(&keys, view.network()).into();
        let existing = self.subs.get(&address).map(|s| s.start_height);
        if existing.is_none() && self.subs.len() >= MAX_SUBSCRIPTIONS {
            return Err(RpcError::invalid_params(format!(
                "at most {MAX_SUBSCRIPTIONS} silent-payment subscriptions per connection"
            )));
        }
        let tip = view.tip().map_or(0, |(h, _)| h);
        let first = backend.model.index().tweaks_from().unwrap_or(0);
        let (from, to) = match start {
            None => (0, None),
            Some(Start::Height(h)) => (h, None),
            Some(Start::Time(t)) => (height_at_time(&view, t), None),
            Some(Start::Range(_, to)) if to > tip => {
                return Err(RpcError::invalid_params(format!(
                    "start range 'to' ({to}) exceeds tip ({tip})"
                )))
            }
            Some(Start::Range(from, to)) => (from, Some(to)),
        };
        drop(view);
        // Last, once the request is known to be kept: a place taken here may be another
        // connection's, given up for it.
        if existing.is_none() {
            room()?;
        }
        let start_height = existing.map_or(from, |e| e.min(from)).max(first);
        let mut labels: Vec<u32> = keys.labels().collect();
        labels.sort_unstable();
        let subscription =
            Arc::new(json!({"address": &*address, "labels": labels, "start_height": start_height}));
        let sub = Subscription {
            keys: Arc::new(keys),
            subscription: subscription.clone(),
            start_height,
            live_from: to.map_or(0, |_| tip + 1),
            scanned: Vec::new(),
            running: None,
            behind: false,
            pending: MempoolScan::Nothing,
            told: HashSet::new(),
        };
        self.subs.insert(address.clone(), sub);
        self.queue(backend, &address, start_height, Some(to), MempoolScan::All);
        Ok((*subscription).clone())
    }

    /// Drops the subscription of `keys`, if there is one: the address either way (Frigate's).
    pub(crate) fn unsubscribe(&mut self, backend: &Backend, keys: &ScanKeys) -> Value {
        let address = address(keys, backend.model.view().network());
        self.subs.remove(address.as_str());
        json!(address)
    }

    /// Queues a scan of `address`'s subscription from `from`: a first scan (`first`: to the
    /// height it holds, or the tip) or a later one.
    fn queue(
        &mut self,
        backend: &Arc<Backend>,
        address: &Arc<str>,
        from: u32,
        first: Option<Option<u32>>,
        mempool: MempoolScan,
    ) {
        let Some(sub) = self.subs.get_mut(address) else {
            return;
        };
        self.generation += 1;
        self.unfinished += 1;
        let cancel = Arc::new(AtomicBool::new(false));
        if let Some((_, old)) = sub.running.replace((self.generation, cancel.clone())) {
            old.store(true, Ordering::SeqCst);
        }
        sub.behind = false;
        self.jobs.push(ScanJob {
            backend: backend.clone(),
            keys: sub.keys.clone(),
            address: address.clone(),
            subscription: sub.subscription.clone(),
            from,
            to: first.flatten(),
            first: first.is_some(),
            generation: self.generation,
            cancel,
            queued: Instant::now(),
            mempool,
            told: sub.told.clone(),
        });
    }

    /// Whether scan `generation` is `address`'s subscription's running one.
    pub(crate) fn is_current(&self, address: &str, generation: u64) -> bool {
        self.subs
            .get(address)
            .and_then(|sub| sub.running.as_ref())
            .is_some_and(|(running, _)| *running == generation)
    }

    /// The scans to start now.
    pub(crate) fn take_jobs(&mut self) -> Vec<ScanJob> {
        std::mem::take(&mut self.jobs)
    }

    /// A scan ended, having scanned `scanned`: what the subscription knows, and the next scan
    /// if the tip moved meanwhile.
    pub(crate) fn ended(
        &mut self,
        backend: &Arc<Backend>,
        address: &Arc<str>,
        generation: u64,
        scanned: Vec<(u32, BlockHash)>,
        told: Vec<Txid>,
    ) {
        self.unfinished = self.unfinished.saturating_sub(1);
        let Some(sub) = self.subs.get_mut(address) else {
            return;
        };
        if sub.told.len() + told.len() > MAX_TOLD {
            sub.told.clear();
        }
        sub.told.extend(told);
        if sub.running.as_ref().map(|r| r.0) != Some(generation) {
            return; // A scan replaced by a newer one.
        }
        sub.running = None;
        if let Some(&(from, _)) = scanned.first() {
            sub.scanned.retain(|(h, _)| *h < from);
            sub.scanned.extend(scanned);
            let start = sub.scanned.len().saturating_sub(RECENT);
            sub.scanned.drain(..start);
        }
        if sub.behind || sub.pending != MempoolScan::Nothing {
            self.follow(backend, address);
        }
    }

    /// A new tip, a reorg or new mempool transactions (`added`; `None`: any may be): each
    /// subscription's blocks from the first it has not scanned on the chain now, and the new
    /// mempool transactions, are queued (after the running scan, if one runs).
    pub(crate) fn on_update(&mut self, backend: &Arc<Backend>, added: Option<&Arc<HashSet<Txid>>>) {
        let addresses: Vec<Arc<str>> = self.subs.keys().cloned().collect();
        for address in addresses {
            let Some(sub) = self.subs.get_mut(&address) else {
                continue;
            };
            let more = match added {
                None => MempoolScan::All,
                Some(added) if added.is_empty() => MempoolScan::Nothing,
                Some(added) => MempoolScan::These(vec![added.clone()]),
            };
            sub.pending = std::mem::take(&mut sub.pending).and(more);
            match sub.running.is_some() {
                true => sub.behind = true,
                false => self.follow(backend, &address),
            }
        }
    }

    /// Queues the scan of `address`'s blocks after the last one it scanned that the chain
    /// still has (all it remembers again after a reorg deeper than that), if the tip is past.
    fn follow(&mut self, backend: &Arc<Backend>, address: &Arc<str>) {
        let Some(sub) = self.subs.get_mut(address) else {
            return;
        };
        let mempool = std::mem::take(&mut sub.pending);
        let view = backend.model.view();
        let Some((tip, _)) = view.tip() else { return };
        let kept = sub
            .scanned
            .iter()
            .rev()
            .find(|(h, hash)| view.block_hash(*h) == Some(*hash));
        let from = match (kept, sub.scanned.first()) {
            (Some((h, _)), _) => h + 1,
            (None, Some((oldest, _))) => *oldest,
            (None, None) => sub.start_height,
        }
        .max(sub.live_from);
        drop(view);
        if from <= tip || mempool != MempoolScan::Nothing {
            self.queue(backend, address, from, None, mempool);
        }
    }
}

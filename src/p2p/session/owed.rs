//! Answers a peer is owed: the items of its `getdata` and the filters of its `getcfilters`,
//! served only while its send buffer is below [`MAX_SEND_BUFFER`]. As Core: a peer's getdata
//! waits in `m_getdata_requests`, `ProcessGetData` stops serving it at `fPauseSend`, and while
//! any of it is owed the peer's next messages wait, which keeps the answers in order and what
//! is owed to one message's worth.
//!
//! [`MAX_SEND_BUFFER`]: super::super::send::MAX_SEND_BUFFER

use std::collections::VecDeque;

use bitcoin::p2p::message::NetworkMessage;
use bitcoin::p2p::message_blockdata::Inventory;
use bitcoin::BlockHash;

use super::super::codec::Outgoing;
use super::super::error::PeerError;
use super::super::filters;
use super::Session;

/// Filters read per look at the send buffer.
const FILTERS_AT_ONCE: u32 = 50;

/// What a peer asked for and has not been sent yet.
#[derive(Default)]
pub(super) struct Owed {
    /// Items of its last `getdata`, in its order.
    items: VecDeque<Inventory>,
    /// Items of it cairn does not have, told in one `notfound` once the rest is sent.
    missing: Vec<Inventory>,
    /// The rest of its last `getcfilters`.
    filters: Option<FilterRun>,
}

/// The part of a `getcfilters` still to send.
struct FilterRun {
    next: u32,
    stop: u32,
    stop_hash: BlockHash,
}

impl Owed {
    /// Whether nothing is owed.
    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty() && self.missing.is_empty() && self.filters.is_none()
    }

    /// Owes the items of a `getdata`.
    pub(super) fn items(&mut self, items: Vec<Inventory>) {
        self.items.extend(items);
    }

    /// Owes the filters of a `getcfilters` for `from..=stop`.
    pub(super) fn filters(&mut self, (from, stop): (u32, u32), stop_hash: BlockHash) {
        self.filters = Some(FilterRun {
            next: from,
            stop,
            stop_hash,
        });
    }
}

impl Session<'_> {
    /// Sends what is owed until it is all sent or the send buffer is full.
    pub(super) fn serve_owed(&mut self) -> Result<(), PeerError> {
        while !self.out.paused() {
            if let Some(item) = self.owed.items.pop_front() {
                match self.find(&item) {
                    Some(found) => self.out.push(found)?,
                    None => self.owed.missing.push(item),
                }
            } else if !self.owed.missing.is_empty() {
                let missing = std::mem::take(&mut self.owed.missing);
                self.queue(NetworkMessage::NotFound(missing))?;
            } else if let Some(run) = self.owed.filters.take() {
                self.serve_filters(run)?;
            } else {
                break;
            }
        }
        Ok(())
    }

    /// Sends the next few filters of a run, and owes the rest.
    fn serve_filters(&mut self, run: FilterRun) -> Result<(), PeerError> {
        let Some(index) = self.ctx.filter_index.as_deref() else {
            return Ok(());
        };
        let to = run.stop.min(run.next.saturating_add(FILTERS_AT_ONCE - 1));
        let stop = (run.stop, run.stop_hash);
        let read = tokio::task::block_in_place(|| filters::cfilters(index, (run.next, to), stop))?;
        let Some(messages) = read else {
            tracing::debug!("peer {}: filters up to {} left off", self.id, run.stop_hash);
            return Ok(());
        };
        for m in messages {
            self.queue(m)?;
        }
        if to < run.stop {
            self.owed.filters = Some(FilterRun {
                next: to + 1,
                ..run
            });
        }
        Ok(())
    }

    /// What a getdata item names: a mempool transaction or a block of the active chain.
    fn find(&self, item: &Inventory) -> Option<Outgoing> {
        match item {
            Inventory::Transaction(_) | Inventory::WitnessTransaction(_) | Inventory::WTx(_)
                if self.ctx.mempool.is_some() =>
            {
                self.pool_tx(item)
                    .map(|tx| Outgoing::Message(NetworkMessage::Tx(tx)))
            }
            Inventory::Block(h) | Inventory::WitnessBlock(h) => {
                self.active_block(h).map(Outgoing::Block)
            }
            _ => None,
        }
    }
}

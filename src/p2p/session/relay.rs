//! Transaction announcements, trickled as Core's `SendMessages` sends them: what the mempool
//! accepts is queued per peer and sent on a Poisson timer, 2 s on average to an outbound peer
//! and 5 s to inbound ones (`OUTBOUND_INVENTORY_BROADCAST_INTERVAL`,
//! `INBOUND_INVENTORY_BROADCAST_INTERVAL`), all inbound peers on one shared timer
//! (`NextInvToInbounds`), so a spy that connects many times learns no earlier where a
//! transaction appeared; nothing a peer announced or sent is announced back to it (its
//! `m_tx_inventory_known_filter`), and at most 1,000 go in one `inv`
//! (`INVENTORY_BROADCAST_MAX`).

use std::collections::VecDeque;
use std::time::Duration;

use bitcoin::hashes::Hash;
use bitcoin::p2p::message::NetworkMessage;
use bitcoin::p2p::message_blockdata::Inventory;
use bitcoin::{Transaction, Txid};
use tokio::time::Instant;

use super::super::announce_timer::poisson;
use super::super::error::PeerError;
use super::super::rolling::RollingBloom;
use super::Session;

/// Average wait between announcements to an outbound peer.
const OUTBOUND_INTERVAL: Duration = Duration::from_secs(2);
/// Most transactions in one announcement (Core's `INVENTORY_BROADCAST_MAX`).
const MAX_PER_INV: usize = 1000;
/// Most transactions waiting to be announced to one peer; the oldest go first past it.
const MAX_QUEUED: usize = 50_000;
/// Transactions a peer is known to have (Core's known-inventory filter).
const KNOWN: usize = 50_000;

/// One peer's announcements to come.
pub(super) struct Trickle {
    queue: VecDeque<Txid>,
    known: RollingBloom,
    next: Instant,
}

impl Trickle {
    pub(super) fn new() -> Self {
        Trickle {
            queue: VecDeque::new(),
            known: RollingBloom::new(KNOWN, 0.000_001),
            next: Instant::now(),
        }
    }
}

impl Session<'_> {
    /// Notes that the peer has a transaction (it announced or sent it).
    pub(super) fn knows_tx(&mut self, key: &[u8; 32]) {
        self.trickle.known.insert(key);
    }

    /// Queues a transaction the mempool accepted for the next announcement.
    pub(super) fn announce(&mut self, txid: Txid) {
        if self.trickle.known.contains(&txid.to_byte_array()) {
            return;
        }
        if self.trickle.queue.len() >= MAX_QUEUED {
            self.trickle.queue.pop_front();
        }
        self.trickle.queue.push_back(txid);
    }

    /// Sends what is queued once the peer's timer is up, and draws the next time.
    pub(super) fn trickle_due(&mut self) -> Result<(), PeerError> {
        let now = Instant::now();
        if now < self.trickle.next {
            return Ok(());
        }
        self.trickle.next = if self.inbound {
            self.ctx.inbound_announcement.next(now)
        } else {
            now + poisson(OUTBOUND_INTERVAL)
        };
        let Some(m) = &self.ctx.mempool else {
            self.trickle.queue.clear();
            return Ok(());
        };
        let mut items = Vec::new();
        while items.len() < MAX_PER_INV {
            let Some(txid) = self.trickle.queue.pop_front() else {
                break;
            };
            // Gone from the mempool meanwhile (mined, replaced): not announced.
            let Some(raw) = m.mempool.raw(&txid) else {
                continue;
            };
            let item = if self.traits.wtxid_relay {
                match bitcoin::consensus::deserialize::<Transaction>(&raw) {
                    Ok(tx) => Inventory::WTx(tx.compute_wtxid()),
                    Err(_) => continue,
                }
            } else {
                Inventory::Transaction(txid)
            };
            self.trickle.known.insert(&txid.to_byte_array());
            items.push(item);
        }
        if items.is_empty() {
            return Ok(());
        }
        self.queue(NetworkMessage::Inv(items))
    }
}

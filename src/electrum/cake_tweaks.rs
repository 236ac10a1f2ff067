//! Cake Wallet's silent-payment tweak stream, `blockchain.tweaks.subscribe(height, count,
//! historical)`, as cake-tech/blockstream-electrs (branch cake-update-v1, `tweaks_subscribe` in
//! `src/electrum/server.rs`) serves it: one notification per height
//! `{"<height>": {"<txid>": {"tweak": hex, "output_pubkeys": {"<vout>": [x-only key, amount
//! (, spend)]}}}}`, then the notification `{"message": "done"}`, then the result, which is that
//! last notification again. Heights below the first with tweaks start at it; at most
//! [`MAX_HEIGHTS`] heights, never past the tip.
//!
//! Unlike that server, every height of the range is told (an empty object for a block with no
//! eligible transaction: the wallet's progress), each under its own height (that server tells
//! the last block's transactions under the range's last height), and the cut-through leaves
//! out only outputs spent in the chain (a mempool spend can still be replaced).

use std::sync::Arc;

use bitcoin::hex::DisplayHex;
use bitcoin::OutPoint;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::backend::Backend;
use super::counted::excessive;
use super::history::Piece;
use super::methods::view_err;
use super::rpc::{error_value, RpcError};
use crate::listen::{cost, HostShares, Slot, WorkPool};
use crate::types::run_marked;
use crate::view::{ChainView, Cost, CostMeter, TxTweak, ViewError};

/// The most heights one call streams, as Cake's server (`count` above is cut to it).
pub const MAX_HEIGHTS: u32 = 1000;

/// The method's name, in every notification it sends.
const METHOD: &str = "blockchain.tweaks.subscribe";

/// One `blockchain.tweaks.subscribe` call, to stream.
pub struct TweaksJob {
    pub(crate) backend: Arc<Backend>,
    pub(crate) id: Value,
    /// The first height asked for.
    pub(crate) height: u32,
    /// How many heights were asked for.
    pub(crate) count: u32,
    /// Whether spent outputs are told too (with what spends them) rather than left out.
    pub(crate) historical: bool,
    /// The method's metrics label, and when its request came.
    pub(crate) method: &'static str,
    pub(crate) started: std::time::Instant,
}

/// The notification that ends a stream, which is also the call's result.
fn done_note() -> Value {
    json!({"jsonrpc": "2.0", "method": METHOD, "params": [{"message": "done"}]})
}

impl TweaksJob {
    /// Streams the heights as [`super::history::HistoryJob::run`] streams a history: on a
    /// blocking thread, each height read in a slot of `pool` taken in `host`'s turn and given
    /// back while the client takes the notification, each charged to the host as it is sent.
    /// Every notification is a whole line; the answer to the call ends the stream (an error
    /// answer when it stopped short). Returns what it read.
    pub fn run(self, tx: mpsc::Sender<Piece>, pool: &WorkPool, host: &HostShares) -> Cost {
        let rt = tokio::runtime::Handle::current();
        let slot = || rt.block_on(pool.slot(host)).ok();
        let meter = CostMeter::default();
        let pay = |read: Cost, bytes: usize| {
            let limits = self.backend.config.cost;
            host.cost.charge(cost::units(0, read, bytes), &limits) != cost::Verdict::Close
        };
        let ended = run_marked(&[pool.closing()], || self.notes(&meter, &tx, slot, pay));
        let last = match ended {
            Ok(()) => json!({"jsonrpc": "2.0", "id": self.id, "result": done_note()}),
            Err(e) => error_value(self.id.clone(), &e),
        };
        let _ = tx.blocking_send((last.to_string(), true));
        let read = meter.take();
        crate::metrics::metrics().electrum_read(self.method, read.rows, read.bytes);
        read
    }

    /// Sends a notification for each height of the range, then the `done` one. `Err`: why it
    /// stopped short (the client going is not an error: nothing more is sent then).
    fn notes(
        &self,
        meter: &CostMeter,
        tx: &mpsc::Sender<Piece>,
        slot: impl Fn() -> Option<Slot>,
        pay: impl Fn(Cost, usize) -> bool,
    ) -> Result<(), RpcError> {
        let stopped = || RpcError::bad_request("the tweak stream was stopped (server closing)");
        let mut held = Some(slot().ok_or_else(stopped)?);
        let chain = self.backend.model.metered_view(meter);
        let Some((tip, _)) = chain.tip() else {
            return Err(RpcError::bad_request("no blocks indexed yet"));
        };
        let first = self.backend.model.index().tweaks_from().unwrap_or(0);
        let start = self.height.max(first);
        let end = start
            .saturating_add(self.count.min(MAX_HEIGHTS))
            .min(tip.saturating_add(1));
        let dust = self.backend.config.sp_min_dust;
        let mut paid = Cost::default();
        for height in start..end {
            let note = height_note(&chain, height, dust, self.historical).map_err(view_err)?;
            let read = chain.cost();
            let fresh = Cost {
                rows: read.rows - paid.rows,
                bytes: read.bytes - paid.bytes,
            };
            paid = read;
            if !pay(fresh, note.len()) {
                return Err(excessive());
            }
            drop(held.take());
            if tx.blocking_send((note, true)).is_err() {
                return Ok(()); // The client went.
            }
            held = Some(slot().ok_or_else(stopped)?);
        }
        drop(held);
        let _ = tx.blocking_send((done_note().to_string(), true));
        Ok(())
    }
}

/// The notification for `height`: its eligible transactions with a told output of at least
/// `dust` satoshis (all when `historical`, else only those the chain has not spent), each with
/// those outputs; smaller ones are left out, as Cake's server never lists them (it drops them as
/// it indexes).
pub fn height_note(
    chain: &ChainView<'_>,
    height: u32,
    dust: u64,
    historical: bool,
) -> Result<String, ViewError> {
    let txs = chain.block_tweaks(height)?.unwrap_or_default();
    let mut block = Map::new();
    for tx in &txs {
        let outputs = told_outputs(chain, tx, dust, historical)?;
        if outputs.is_empty() {
            continue;
        }
        let mut pubkeys = Map::new();
        for (vout, value, spend) in outputs {
            let key = tx
                .outputs
                .iter()
                .find(|o| o.0 == vout)
                .map(|o| o.1.to_lower_hex_string());
            let mut item = vec![json!(key), json!(value)];
            item.extend(spend);
            pubkeys.insert(vout.to_string(), Value::Array(item));
        }
        let entry = json!({"tweak": tx.tweak.to_lower_hex_string(), "output_pubkeys": pubkeys});
        block.insert(tx.txid.to_string(), entry);
    }
    let mut params = Map::new();
    params.insert(height.to_string(), Value::Object(block));
    Ok(json!({"jsonrpc": "2.0", "method": METHOD, "params": [params]}).to_string())
}

/// `tx`'s taproot outputs of at least `dust` satoshis that are told: output index, amount,
/// and (historical) what spends it as Cake's server writes a spend, `{"txid", "vin",
/// "confirmed": {"height", "hash", "time"} or null}`. Without `historical`, outputs the chain
/// has spent are left out.
fn told_outputs(
    chain: &ChainView<'_>,
    tx: &TxTweak,
    dust: u64,
    historical: bool,
) -> Result<Vec<(u32, u64, Option<Value>)>, ViewError> {
    let mut told = Vec::with_capacity(tx.outputs.len());
    for (vout, _, value) in tx.outputs.iter().filter(|(_, _, v)| *v >= dust) {
        if !historical {
            if !chain.tweak_output_spent(tx, *vout)? {
                told.push((*vout, *value, None));
            }
            continue;
        }
        let spender = chain.spender(&OutPoint::new(tx.txid, *vout))?;
        let spend = spender.map(|s| {
            let confirmed = s.height.and_then(|h| {
                let header = chain.header(h)?;
                Some(json!({"height": h, "hash": header.block_hash().to_string(), "time": header.time}))
            });
            json!({"txid": s.txid.to_string(), "vin": s.vin, "confirmed": confirmed})
        });
        told.push((*vout, *value, spend));
    }
    Ok(told)
}

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
use super::context::{view_err, Ctx};
use super::counted::excessive;
use super::rpc::{error_value, Piece, Reply, RpcError};
use crate::types::run_marked;
use crate::view::{ChainView, Cost, CostMeter, TweakState, TxTweak, ViewError};
use crate::work::{cost, HostShares, Slot, WorkPool};

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
    /// Streams the heights as [`super::scripthash::HistoryJob::run`] streams a history: on a
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

/// `Ok` when silent-payment tweaks can be served from `view`, else why not.
fn tweaks_ready_in(view: &ChainView<'_>) -> Result<(), RpcError> {
    match view.tweak_state().map_err(view_err)? {
        TweakState::Off => Err(RpcError::bad_request(
            "silent-payment tweaks are not indexed here (silent_payments = false)",
        )),
        TweakState::Building => Err(RpcError::bad_request(
            "silent-payment tweaks of indexed blocks are still being built",
        )),
        TweakState::Ready => Ok(()),
    }
}

impl Ctx<'_> {
    /// `Ok` when silent-payment tweaks can be served, else why not.
    pub(crate) fn tweaks_ready(&self) -> Result<(), RpcError> {
        tweaks_ready_in(&self.view())
    }

    /// `blockchain.block.tweaks(height)`, Cake Wallet's silent-payment dialect: the tweak data
    /// of the block's eligible transactions with a taproot output of at least `sp_min_dust`, in
    /// block order, each a compressed point in hex (none below the first height with tweaks:
    /// taproot's activation).
    pub(crate) fn block_tweaks(&self, height: u32) -> Result<Reply, RpcError> {
        let view = self.view();
        tweaks_ready_in(&view)?;
        // As Cake's server: only transactions with a taproot output of at least the dust limit.
        let tweaks = view
            .block_tweak_list(height, self.backend.config.sp_min_dust)
            .map_err(view_err)?
            .ok_or_else(|| RpcError::bad_request(format!("height {height} out of range")))?;
        Ok(Reply::Text(tweak_list_text(&tweaks)))
    }

    /// `blockchain.tweaks.subscribe(height, count, historical)`, Cake Wallet's tweak stream
    /// (`super::cake_tweaks`): checked here, streamed by the session. Over TCP and TLS only, alone:
    /// a stream of notifications cannot sit in a batch or be built whole.
    pub(crate) fn tweaks_subscribe(
        &self,
        height: u32,
        count: u32,
        historical: bool,
    ) -> Result<Reply, RpcError> {
        tweaks_ready_in(&self.view())?;
        if !self.streams_answers() {
            return Err(RpcError::bad_request(
                "blockchain.tweaks.subscribe streams notifications: ask for it alone (not in a batch), over TCP or TLS",
            ));
        }
        Ok(Reply::Tweaks {
            height,
            count,
            historical,
        })
    }
}

/// A JSON array of tweaks as lowercase hex strings, written as text (hex needs no escaping):
/// no `Value` per tweak, one allocation for the whole answer.
fn tweak_list_text(tweaks: &[[u8; 33]]) -> String {
    // Room for the answer's envelope too, which is put in front of it.
    let mut text = String::with_capacity(128 + 69 * tweaks.len());
    let mut hex = [0u8; 66];
    text.push('[');
    for (i, tweak) in tweaks.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        // The lengths match, so it cannot fail; the hex digits are ASCII.
        if hex::encode_to_slice(tweak, &mut hex).is_ok() {
            text.push('"');
            text.push_str(std::str::from_utf8(&hex).unwrap_or_default());
            text.push('"');
        }
    }
    text.push(']');
    text
}

#[cfg(test)]
mod tweak_list_tests {
    use super::*;

    #[test]
    fn the_text_is_the_json_of_the_hex_strings() {
        let tweaks = [[0u8; 33], [0xab; 33], [0x0f; 33]];
        for n in 0..=tweaks.len() {
            let text = tweak_list_text(&tweaks[..n]);
            let want: Vec<String> = tweaks[..n]
                .iter()
                .map(|t| t[..].to_lower_hex_string())
                .collect();
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!(want));
        }
    }
}

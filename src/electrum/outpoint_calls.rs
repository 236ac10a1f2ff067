//! The `blockchain.outpoint.*` methods (protocol 1.7) and their notifications: an output's
//! status read from the index (transaction positions, spent-by rows) and the mempool.

use bitcoin::hex::FromHex;
use bitcoin::OutPoint;
use serde_json::{json, Value};

use super::methods::{view_err, Session};
use super::outpoint::{status_json, OutpointSub};
use super::params::{txid_param, u32_param};
use super::rpc::RpcError;
use crate::notify::TipUpdate;
use crate::types::ScriptHash;
use crate::view::OutpointStatus;

/// Parameters `tx_hash, txout_idx` (and the optional `spk_hint`, checked to be hex and not
/// needed: the index finds every output from its transaction).
fn outpoint_params(params: &[Value], hint: bool) -> Result<OutPoint, RpcError> {
    let txid = txid_param(params, 0)?;
    let vout = u32_param(params, 1, "txout_idx", None)?;
    if hint {
        match params.get(2) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if Vec::<u8>::from_hex(s).is_ok() => {}
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "spk_hint must be a hex script, not {other}"
                )))
            }
        }
    }
    Ok(OutPoint::new(txid, vout))
}

impl Session {
    /// The status of `op` now, and the script hash of its output when the output exists.
    pub(crate) fn outpoint_status(
        &self,
        op: &OutPoint,
    ) -> Result<(OutpointStatus, Option<ScriptHash>), RpcError> {
        self.backend
            .model
            .view()
            .outpoint_status(op)
            .map_err(view_err)
    }

    /// `blockchain.outpoint.get_status(tx_hash, txout_idx, spk_hint=None)`.
    pub(crate) fn outpoint_get_status(&self, params: &[Value]) -> Result<Value, RpcError> {
        let op = outpoint_params(params, true)?;
        Ok(status_json(&self.outpoint_status(&op)?.0))
    }

    /// `blockchain.outpoint.subscribe(tx_hash, txout_idx, spk_hint=None)`: kept even when the
    /// output does not exist yet, as the protocol asks. Counts against the connection's
    /// subscription limit together with script subscriptions.
    pub(crate) fn outpoint_subscribe(&mut self, params: &[Value]) -> Result<Value, RpcError> {
        let op = outpoint_params(params, true)?;
        if !self.outpoints.contains_key(&op) {
            self.check_subscription_room()?;
        }
        let (status, script) = self.outpoint_status(&op)?;
        let answer = status_json(&status);
        self.outpoints.insert(op, OutpointSub { script, status });
        Ok(answer)
    }

    /// `blockchain.outpoint.unsubscribe(tx_hash, txout_idx)`: whether it was subscribed.
    pub(crate) fn outpoint_unsubscribe(&mut self, params: &[Value]) -> Result<Value, RpcError> {
        let op = outpoint_params(params, false)?;
        Ok(json!(self.outpoints.remove(&op).is_some()))
    }

    /// Notifications for the subscribed outpoints whose status `update` changed.
    pub(crate) fn outpoint_notes(
        &mut self,
        update: Option<&TipUpdate>,
        new_block: bool,
    ) -> Vec<String> {
        let stale: Vec<OutPoint> = self
            .outpoints
            .iter()
            .filter(|(op, sub)| sub.may_change(op, update, new_block))
            .map(|(op, _)| *op)
            .collect();
        let mut out = Vec::new();
        for op in stale {
            let Ok((status, script)) = self.outpoint_status(&op) else {
                continue;
            };
            let Some(sub) = self.outpoints.get_mut(&op) else {
                continue;
            };
            sub.script = script;
            if sub.status != status {
                out.push(
                    json!({"jsonrpc": "2.0", "method": "blockchain.outpoint.subscribe",
                           "params": [[op.txid.to_string(), op.vout], status_json(&status)]})
                    .to_string(),
                );
                sub.status = status;
            }
        }
        out
    }
}

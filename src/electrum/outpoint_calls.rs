//! The `blockchain.outpoint.*` methods (protocol 1.7) and their notifications: an output's
//! status read from the index (transaction positions, spent-by rows) and the mempool.

use std::collections::HashMap;

use bitcoin::OutPoint;
use serde_json::{json, Value};

use super::methods::{view_err, Ctx};
use super::outpoint::{status_json, OutpointSub};
use super::rpc::RpcError;
use crate::notify::TipUpdate;
use crate::types::ScriptHash;
use crate::view::OutpointStatus;

impl Ctx<'_> {
    /// The status of `op` now, and the script hash of its output when the output exists.
    pub(crate) fn outpoint_status(
        &self,
        op: &OutPoint,
    ) -> Result<(OutpointStatus, Option<ScriptHash>), RpcError> {
        self.view().outpoint_status(op).map_err(view_err)
    }

    /// `blockchain.outpoint.get_status(tx_hash, txout_idx, spk_hint=None)`.
    pub(crate) fn outpoint_get_status(&self, op: OutPoint) -> Result<Value, RpcError> {
        Ok(status_json(&self.outpoint_status(&op)?.0))
    }
}

/// Notifications for the subscribed `outpoints` whose status `update` changed (their status
/// kept as sent).
pub(crate) fn outpoint_notes(
    ctx: &Ctx<'_>,
    outpoints: &mut HashMap<OutPoint, OutpointSub>,
    update: Option<&TipUpdate>,
    new_block: bool,
) -> Vec<String> {
    let stale: Vec<OutPoint> = outpoints
        .iter()
        .filter(|(op, sub)| sub.may_change(op, update, new_block))
        .map(|(op, _)| *op)
        .collect();
    let mut out = Vec::new();
    for op in stale {
        let Ok((status, script)) = ctx.outpoint_status(&op) else {
            continue;
        };
        let Some(sub) = outpoints.get_mut(&op) else {
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

//! The `blockchain.outpoint.*` methods (protocol 1.7) and their notifications: an output's
//! status read from the index (transaction positions, spent-by rows) and the mempool.

use std::collections::HashMap;

use bitcoin::OutPoint;
use serde_json::{json, Value};

use super::methods::{backend_err, Ctx};
use super::outpoint::{OutpointStatus, OutpointSub};
use super::rpc::{RpcError, BACKEND_ERROR};
use crate::notify::TipUpdate;
use crate::types::ScriptHash;

impl Ctx<'_> {
    /// The status of `op` now, and the script hash of its output when the output exists.
    pub(crate) fn outpoint_status(
        &self,
        op: &OutPoint,
    ) -> Result<(OutpointStatus, Option<ScriptHash>), RpcError> {
        let pool = self.backend.mempool.as_deref();
        if let Some((bytes, height)) = self.confirmed_raw_tx(&op.txid)? {
            let tx: bitcoin::Transaction =
                bitcoin::consensus::deserialize(&bytes).map_err(|e| {
                    RpcError::new(
                        BACKEND_ERROR,
                        format!("stored transaction {} does not decode: {e}", op.txid),
                    )
                })?;
            let Some(out) = usize::try_from(op.vout).ok().and_then(|i| tx.output.get(i)) else {
                return Ok((OutpointStatus::default(), None));
            };
            let confirmed = self
                .backend
                .index
                .spender(&op.txid, op.vout)
                .map_err(backend_err)?;
            let spender = match confirmed {
                Some((txid, _, height)) => Some((txid, i64::from(height))),
                None => pool.and_then(|p| p.spender(op)),
            };
            let status = OutpointStatus {
                height: Some(i64::from(height)),
                spender,
            };
            return Ok((status, Some(ScriptHash::of(&out.script_pubkey))));
        }
        match pool.and_then(|p| p.output(op)) {
            Some((Some(out), height)) => {
                let spender = pool.and_then(|p| p.spender(op));
                Ok((
                    OutpointStatus {
                        height: Some(height),
                        spender,
                    },
                    Some(ScriptHash::of(&out.script_pubkey)),
                ))
            }
            _ => Ok((OutpointStatus::default(), None)),
        }
    }

    /// `blockchain.outpoint.get_status(tx_hash, txout_idx, spk_hint=None)`.
    pub(crate) fn outpoint_get_status(&self, op: OutPoint) -> Result<Value, RpcError> {
        Ok(self.outpoint_status(&op)?.0.to_json())
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
                           "params": [[op.txid.to_string(), op.vout], status.to_json()]})
                .to_string(),
            );
            sub.status = status;
        }
    }
    out
}

//! Outpoint subscriptions (protocol 1.7, `blockchain.outpoint.*`): the status of one output, its
//! funding and spending transactions, read from the index (transaction positions, spent-by rows)
//! and the mempool, and the notifications owed when it changes.

use bitcoin::hex::FromHex;
use bitcoin::{OutPoint, Txid};
use serde_json::{json, Value};

use super::methods::{backend_err, Session};
use super::params::{txid_param, u32_param};
use super::rpc::{RpcError, BACKEND_ERROR};
use crate::notify::TipUpdate;
use crate::store::schema::ScriptHash;

/// An output's status as the protocol defines it: which transactions fund and spend it, and
/// where they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutpointStatus {
    /// The funding transaction's height: a block's, or 0 or -1 in the mempool (-1 when it
    /// spends another mempool transaction). `None`: no such output, in the chain or the mempool.
    pub height: Option<i64>,
    /// The spending transaction and its height, counted the same way.
    pub spender: Option<(Txid, i64)>,
}

impl OutpointStatus {
    /// The status object: no key, `height`, or `height` with `spender_txhash` and
    /// `spender_height`.
    pub fn to_json(&self) -> Value {
        match (self.height, self.spender) {
            (None, _) => json!({}),
            (Some(height), None) => json!({"height": height}),
            (Some(height), Some((txid, spender_height))) => {
                json!({"height": height, "spender_txhash": txid.to_string(), "spender_height": spender_height})
            }
        }
    }

    /// Whether a transaction of it is in the mempool: a block that confirms its parents changes
    /// its height from -1 to 0 without touching its script.
    fn unconfirmed(&self) -> bool {
        self.height.is_some_and(|h| h <= 0) || self.spender.is_some_and(|(_, h)| h <= 0)
    }
}

/// A subscribed outpoint: the script hash of its output once the funding transaction is known,
/// and the status last sent.
#[derive(Debug, Clone)]
pub(crate) struct OutpointSub {
    script: Option<ScriptHash>,
    status: OutpointStatus,
}

impl OutpointSub {
    /// Whether `update` may have changed the status (`None`: anything may have). A change to a
    /// known output touches its script hash (funded, spent, unspent by a reorg, replaced or
    /// evicted from the mempool); an unknown one can only appear with its own transaction.
    fn may_change(&self, op: &OutPoint, update: Option<&TipUpdate>, new_block: bool) -> bool {
        let Some(update) = update else { return true };
        if new_block && self.status.unconfirmed() {
            return true;
        }
        match &self.script {
            Some(sh) => update.touched.as_ref().is_none_or(|t| t.contains(sh)),
            None => update.added.as_ref().is_none_or(|a| a.contains(&op.txid)),
        }
    }
}

/// Parameters `tx_hash, txout_idx` (and the optional `spk_hint`, checked to be hex and not
/// needed: the index finds every output from its transaction).
fn outpoint_params(params: &[Value], hint: bool) -> Result<OutPoint, RpcError> {
    let txid = txid_param(params, 0)?;
    let vout = u32_param(params, 1, "txout_idx", None)?;
    if hint {
        match params.get(2) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if Vec::<u8>::from_hex(s).is_ok() => {}
            Some(other) => return Err(RpcError::invalid_params(format!("spk_hint must be a hex script, not {other}"))),
        }
    }
    Ok(OutPoint::new(txid, vout))
}

impl Session {
    /// The status of `op` now, and the script hash of its output when the output exists.
    pub(crate) fn outpoint_status(&self, op: &OutPoint) -> Result<(OutpointStatus, Option<ScriptHash>), RpcError> {
        let pool = self.backend.mempool.as_deref();
        if self.backend.index.tx_position(&op.txid).map_err(backend_err)?.is_some() {
            let (bytes, height) = self.raw_tx(&op.txid)?;
            let tx: bitcoin::Transaction = bitcoin::consensus::deserialize(&bytes)
                .map_err(|e| RpcError::new(BACKEND_ERROR, format!("stored transaction {} does not decode: {e}", op.txid)))?;
            let Some(out) = usize::try_from(op.vout).ok().and_then(|i| tx.output.get(i)) else {
                return Ok((OutpointStatus::default(), None));
            };
            let confirmed = self.backend.index.spender(&op.txid, op.vout).map_err(backend_err)?;
            let spender = match confirmed {
                Some((txid, _, height)) => Some((txid, i64::from(height))),
                None => pool.and_then(|p| p.spender(op)),
            };
            let status = OutpointStatus { height: Some(i64::from(height)), spender };
            return Ok((status, Some(ScriptHash::of(&out.script_pubkey))));
        }
        match pool.and_then(|p| p.output(op)) {
            Some((Some(out), height)) => {
                let spender = pool.and_then(|p| p.spender(op));
                Ok((OutpointStatus { height: Some(height), spender }, Some(ScriptHash::of(&out.script_pubkey))))
            }
            _ => Ok((OutpointStatus::default(), None)),
        }
    }

    /// `blockchain.outpoint.get_status(tx_hash, txout_idx, spk_hint=None)`.
    pub(crate) fn outpoint_get_status(&self, params: &[Value]) -> Result<Value, RpcError> {
        let op = outpoint_params(params, true)?;
        Ok(self.outpoint_status(&op)?.0.to_json())
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
        let answer = status.to_json();
        self.outpoints.insert(op, OutpointSub { script, status });
        Ok(answer)
    }

    /// `blockchain.outpoint.unsubscribe(tx_hash, txout_idx)`: whether it was subscribed.
    pub(crate) fn outpoint_unsubscribe(&mut self, params: &[Value]) -> Result<Value, RpcError> {
        let op = outpoint_params(params, false)?;
        Ok(json!(self.outpoints.remove(&op).is_some()))
    }

    /// Notifications for the subscribed outpoints whose status `update` changed.
    pub(crate) fn outpoint_notes(&mut self, update: Option<&TipUpdate>, new_block: bool) -> Vec<String> {
        let stale: Vec<OutPoint> = self
            .outpoints
            .iter()
            .filter(|(op, sub)| sub.may_change(op, update, new_block))
            .map(|(op, _)| *op)
            .collect();
        let mut out = Vec::new();
        for op in stale {
            let Ok((status, script)) = self.outpoint_status(&op) else { continue };
            let Some(sub) = self.outpoints.get_mut(&op) else { continue };
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::str::FromStr;
    use std::sync::Arc;

    #[test]
    fn status_objects_have_the_keys_the_spec_lists() {
        let t = Txid::from_str("4a19a360f71814c566977114c49ccfeb8a7e4719eda26cee27fa504f3f02ca09").unwrap();
        assert_eq!(OutpointStatus::default().to_json(), json!({}));
        assert_eq!(OutpointStatus { height: Some(1866594), spender: None }.to_json(), json!({"height": 1866594}));
        let spent = OutpointStatus { height: Some(1866594), spender: Some((t, 0)) };
        assert_eq!(
            spent.to_json(),
            json!({"height": 1866594, "spender_txhash": t.to_string(), "spender_height": 0})
        );
        assert!(spent.unconfirmed());
        assert!(!OutpointStatus { height: Some(5), spender: Some((t, 6)) }.unconfirmed());
        assert!(OutpointStatus { height: Some(-1), spender: None }.unconfirmed());
    }

    #[test]
    fn a_subscription_is_rechecked_only_when_an_update_can_touch_it() {
        let t = Txid::from_str("1872b27abc497492a775fe335abfe368af575733144a7ecd4b249d8fd885b3cf").unwrap();
        let other = Txid::from_str("4a19a360f71814c566977114c49ccfeb8a7e4719eda26cee27fa504f3f02ca09").unwrap();
        let op = OutPoint::new(t, 1);
        let sh = ScriptHash::of(bitcoin::Script::from_bytes(&[0x51]));
        let update = |scripts: Option<HashSet<ScriptHash>>, added: Option<HashSet<Txid>>| TipUpdate {
            height: 7,
            header: bitcoin::constants::genesis_block(bitcoin::Network::Regtest).header,
            touched: scripts.map(Arc::new),
            added: added.map(Arc::new),
        };
        let known = OutpointSub { script: Some(sh), status: OutpointStatus { height: Some(5), spender: None } };
        assert!(known.may_change(&op, Some(&update(Some(HashSet::from([sh])), Some(HashSet::new()))), false));
        assert!(!known.may_change(&op, Some(&update(Some(HashSet::new()), Some(HashSet::from([t])))), true));
        assert!(known.may_change(&op, Some(&update(None, Some(HashSet::new()))), false), "any script may have changed");
        assert!(known.may_change(&op, None, false), "a lagging session rechecks everything");
        let unknown = OutpointSub { script: None, status: OutpointStatus::default() };
        assert!(unknown.may_change(&op, Some(&update(Some(HashSet::new()), Some(HashSet::from([t])))), false));
        assert!(!unknown.may_change(&op, Some(&update(Some(HashSet::from([sh])), Some(HashSet::from([other])))), true));
        let in_mempool = OutpointSub { script: Some(sh), status: OutpointStatus { height: Some(-1), spender: None } };
        assert!(in_mempool.may_change(&op, Some(&update(Some(HashSet::new()), Some(HashSet::new()))), true));
        assert!(!in_mempool.may_change(&op, Some(&update(Some(HashSet::new()), Some(HashSet::new()))), false));
    }
}

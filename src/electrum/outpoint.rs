//! The `blockchain.outpoint.*` namespace (protocol 1.7): its methods, the subscriptions they
//! hold (the status of one output: its funding and spending transactions and their heights) and
//! when an update may change one, and their notifications. The status itself is the view's
//! ([`OutpointStatus`]), read from the index (transaction positions, spent-by rows) and the
//! mempool.

use std::collections::HashMap;

use bitcoin::OutPoint;
use serde_json::{json, Value};

use super::context::{view_err, Ctx};
use super::rpc::RpcError;
use crate::notify::TipUpdate;
use crate::types::ScriptHash;
use crate::view::OutpointStatus;

/// The status object of an output: no key, `height`, or `height` with `spender_txhash` and
/// `spender_height`.
pub(crate) fn status_json(status: &OutpointStatus) -> Value {
    match (status.height, status.spender) {
        (None, _) => json!({}),
        (Some(height), None) => json!({"height": height.electrum()}),
        (Some(height), Some((txid, spender))) => json!({
            "height": height.electrum(),
            "spender_txhash": txid.to_string(),
            "spender_height": spender.electrum(),
        }),
    }
}

/// A subscribed outpoint: the script hash of its output once the funding transaction is known,
/// and the status last sent.
#[derive(Debug, Clone)]
pub(crate) struct OutpointSub {
    /// The output's script hash, once its funding transaction is known.
    pub(crate) script: Option<ScriptHash>,
    /// The status last sent.
    pub(crate) status: OutpointStatus,
}

impl OutpointSub {
    /// Whether `update` may have changed the status (`None`: anything may have). A change to a
    /// known output touches its script hash (funded, spent, unspent by a reorg, replaced or
    /// evicted from the mempool); an unknown one can only appear with its own transaction.
    pub(crate) fn may_change(
        &self,
        op: &OutPoint,
        update: Option<&TipUpdate>,
        new_block: bool,
    ) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Height;
    use bitcoin::Txid;
    use std::collections::HashSet;
    use std::str::FromStr;
    use std::sync::Arc;

    #[test]
    fn status_objects_have_the_keys_the_spec_lists() {
        let t = Txid::from_str("4a19a360f71814c566977114c49ccfeb8a7e4719eda26cee27fa504f3f02ca09")
            .unwrap();
        assert_eq!(status_json(&OutpointStatus::default()), json!({}));
        assert_eq!(
            status_json(&OutpointStatus {
                height: Some(Height::Confirmed(1866594)),
                spender: None
            }),
            json!({"height": 1866594})
        );
        let spent = OutpointStatus {
            height: Some(Height::Confirmed(1866594)),
            spender: Some((t, Height::Unconfirmed)),
        };
        assert_eq!(
            status_json(&spent),
            json!({"height": 1866594, "spender_txhash": t.to_string(), "spender_height": 0})
        );
        assert!(spent.unconfirmed());
        assert!(!OutpointStatus {
            height: Some(Height::Confirmed(5)),
            spender: Some((t, Height::Confirmed(6)))
        }
        .unconfirmed());
        assert!(OutpointStatus {
            height: Some(Height::UnconfirmedParents),
            spender: None
        }
        .unconfirmed());
    }

    #[test]
    fn a_subscription_is_rechecked_only_when_an_update_can_touch_it() {
        let t = Txid::from_str("1872b27abc497492a775fe335abfe368af575733144a7ecd4b249d8fd885b3cf")
            .unwrap();
        let other =
            Txid::from_str("4a19a360f71814c566977114c49ccfeb8a7e4719eda26cee27fa504f3f02ca09")
                .unwrap();
        let op = OutPoint::new(t, 1);
        let sh = ScriptHash::of(bitcoin::Script::from_bytes(&[0x51]));
        let update =
            |scripts: Option<HashSet<ScriptHash>>, added: Option<HashSet<Txid>>| TipUpdate {
                height: 7,
                header: bitcoin::constants::genesis_block(bitcoin::Network::Regtest).header,
                touched: scripts.map(Arc::new),
                added: added.map(Arc::new),
                entered_mempool: Some(Arc::default()),
            };
        let known = OutpointSub {
            script: Some(sh),
            status: OutpointStatus {
                height: Some(Height::Confirmed(5)),
                spender: None,
            },
        };
        assert!(known.may_change(
            &op,
            Some(&update(Some(HashSet::from([sh])), Some(HashSet::new()))),
            false
        ));
        assert!(!known.may_change(
            &op,
            Some(&update(Some(HashSet::new()), Some(HashSet::from([t])))),
            true
        ));
        assert!(
            known.may_change(&op, Some(&update(None, Some(HashSet::new()))), false),
            "any script may have changed"
        );
        assert!(
            known.may_change(&op, None, false),
            "a lagging session rechecks everything"
        );
        let unknown = OutpointSub {
            script: None,
            status: OutpointStatus::default(),
        };
        assert!(unknown.may_change(
            &op,
            Some(&update(Some(HashSet::new()), Some(HashSet::from([t])))),
            false
        ));
        assert!(!unknown.may_change(
            &op,
            Some(&update(
                Some(HashSet::from([sh])),
                Some(HashSet::from([other]))
            )),
            true
        ));
        let in_mempool = OutpointSub {
            script: Some(sh),
            status: OutpointStatus {
                height: Some(Height::UnconfirmedParents),
                spender: None,
            },
        };
        assert!(in_mempool.may_change(
            &op,
            Some(&update(Some(HashSet::new()), Some(HashSet::new()))),
            true
        ));
        assert!(!in_mempool.may_change(
            &op,
            Some(&update(Some(HashSet::new()), Some(HashSet::new()))),
            false
        ));
    }
}

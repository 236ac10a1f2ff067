//! The `/address/:address` and `/scripthash/:hash` endpoints: a script's statistics, its
//! transactions newest first in pages, and its unspent outputs.

use std::collections::HashSet;
use std::str::FromStr;

use bitcoin::hex::FromHex;
use bitcoin::Txid;
use serde::Serialize;

use super::api::{json, txid, unknown, Failure, Reply, TxStatus, MEMPOOL_TXS, TXS_PER_PAGE};
use super::tx::TxValue;
use crate::http::context::Query;
use crate::index::query::QueryError;
use crate::types::ScriptHash;
use crate::view::ViewError;

/// Most history entries `/address/:address` reads for its statistics (each is a transaction
/// read): a larger history gets 400, as Esplora's "too many history entries".
pub const STATS_MAX_HISTORY: usize = 20_000;
/// Most unspent outputs `/address/:address/utxo` lists (Esplora's `--utxos-limit`).
pub const MAX_UTXOS: usize = 5_000;

/// Routes `/address/:address/...` and `/scripthash/:hash/...`.
pub fn route(ctx: &Query, kind: &str, script: &str, rest: &[&str], path: &str) -> Reply {
    let sh = match kind {
        "address" => address_script_hash(ctx, script)?,
        _ => script_hash(script)?,
    };
    match rest {
        [] => stats(ctx, kind, script, &sh),
        ["txs"] => history(ctx, &sh, true, None),
        ["txs", "chain"] => history(ctx, &sh, false, None),
        ["txs", "chain", last_seen] => history(ctx, &sh, false, Some(txid(last_seen)?)),
        ["txs", "mempool"] => json(
            &mempool_txs(ctx, &sh)
                .into_iter()
                .map(|(_, value)| value)
                .collect::<Vec<_>>(),
        ),
        ["utxo"] => utxos(ctx, &sh),
        _ => Err(unknown(path)),
    }
}

/// The script hash of an address of this server's network.
fn address_script_hash(ctx: &Query, text: &str) -> Result<ScriptHash, Failure> {
    let address = bitcoin::Address::from_str(text).map_err(|e| Failure::bad(e.to_string()))?;
    let network = ctx.model.validator().network().to_bitcoin();
    let address = address
        .require_network(network)
        .map_err(|_| Failure::bad("Address on invalid network"))?;
    Ok(ScriptHash::of(&address.script_pubkey()))
}

/// Esplora's script hash: SHA-256 of the script in hex, in byte order (not reversed, unlike
/// Electrum's).
fn script_hash(text: &str) -> Result<ScriptHash, Failure> {
    <[u8; 32]>::from_hex(text)
        .map(ScriptHash)
        .map_err(|_| Failure::bad("Invalid scripthash"))
}

/// `GET /address/:address` and `/scripthash/:hash`.
fn stats(ctx: &Query, kind: &str, script: &str, sh: &ScriptHash) -> Reply {
    let view = ctx.view();
    let chain = view.script_stats(sh, STATS_MAX_HISTORY)?;
    let mempool = view.mempool_stats(sh);
    let mut answer = serde_json::Map::new();
    answer.insert(kind.to_string(), serde_json::json!(script));
    answer.insert(
        "chain_stats".into(),
        serde_json::to_value(chain).map_err(Failure::internal)?,
    );
    answer.insert(
        "mempool_stats".into(),
        serde_json::to_value(mempool).map_err(Failure::internal)?,
    );
    json(&answer)
}

/// Up to 50 of the script's mempool transactions, newest first.
fn mempool_txs(ctx: &Query, sh: &ScriptHash) -> Vec<(Txid, TxValue)> {
    let view = ctx.view();
    let network = view.network();
    view.mempool_transactions(sh, MEMPOOL_TXS)
        .iter()
        .map(|found| (found.tx.compute_txid(), TxValue::found(found, network)))
        .collect()
}

/// `GET .../txs` (`with_mempool`: up to 50 mempool transactions, then the 25 newest confirmed)
/// and `.../txs/chain[/:last_seen_txid]` (25 confirmed, older than `last_seen`).
fn history(ctx: &Query, sh: &ScriptHash, with_mempool: bool, last_seen: Option<Txid>) -> Reply {
    // The mempool first: a transaction confirmed between the two reads shows up confirmed.
    let unconfirmed = if with_mempool {
        mempool_txs(ctx, sh)
    } else {
        Vec::new()
    };
    let view = ctx.view();
    // As Esplora: a last seen transaction that is not in the history ends it.
    let Some(entries) = view.confirmed_page(sh, last_seen.as_ref(), TXS_PER_PAGE)? else {
        return json(&Vec::<TxValue>::new());
    };
    let confirmed: HashSet<Txid> = entries.iter().map(|e| e.txid).collect();
    let mut page: Vec<TxValue> = unconfirmed
        .into_iter()
        .filter(|(txid, _)| !confirmed.contains(txid))
        .map(|(_, value)| value)
        .collect();
    let network = view.network();
    page.extend(
        view.history_transactions(&entries)?
            .iter()
            .map(|found| TxValue::found(found, network)),
    );
    json(&page)
}

/// One of `/utxo`'s outputs.
#[derive(Debug, Serialize)]
struct Utxo {
    txid: Txid,
    vout: u32,
    status: TxStatus,
    value: u64,
}

/// `GET .../utxo`: the confirmed unspent outputs nothing in the mempool spends, then the
/// mempool's unspent outputs paying the script; at most [`MAX_UTXOS`].
fn utxos(ctx: &Query, sh: &ScriptHash) -> Reply {
    let view = ctx.view();
    let unspent = view.unspent(sh, MAX_UTXOS).map_err(|e| match e {
        ViewError::Query(QueryError::TooLarge { limit }) => {
            Failure::bad(format!("too many unspent outputs: more than {limit}"))
        }
        other => other.into(),
    })?;
    let answer: Vec<Utxo> = unspent
        .iter()
        .map(|u| Utxo {
            txid: u.txid,
            vout: u.vout,
            status: TxStatus::of(u.height.and_then(|h| view.confirmation(h))),
            value: u.value.to_sat(),
        })
        .collect();
    json(&answer)
}

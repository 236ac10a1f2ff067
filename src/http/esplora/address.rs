//! The `/address/:address` and `/scripthash/:hash` endpoints: a script's statistics, its
//! transactions newest first in pages, and its unspent outputs.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use bitcoin::hex::FromHex;
use bitcoin::{OutPoint, Transaction, Txid};
use serde::Serialize;

use super::tx::{decode, spent_outputs, undo_of, TxValue};
use super::{json, txid, unknown, Failure, Reply, TxStatus, MEMPOOL_TXS, TXS_PER_PAGE};
use crate::http::HttpContext;
use crate::index::query::HistoryEntry;
use crate::kernel::BlockUndo;
use crate::types::ScriptHash;

/// Most history entries `/address/:address` reads for its statistics (each is a transaction
/// read): a larger history gets 400, as Esplora's "too many history entries".
pub const STATS_MAX_HISTORY: usize = 20_000;
/// Most unspent outputs `/address/:address/utxo` lists (Esplora's `--utxos-limit`).
pub const MAX_UTXOS: usize = 5_000;

/// Routes `/address/:address/...` and `/scripthash/:hash/...`.
pub fn route(ctx: &HttpContext, kind: &str, script: &str, rest: &[&str], path: &str) -> Reply {
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
            &mempool_txs(ctx, &sh)?
                .into_iter()
                .map(|(_, value)| value)
                .collect::<Vec<_>>(),
        ),
        ["utxo"] => utxos(ctx, &sh),
        _ => Err(unknown(path)),
    }
}

/// The script hash of an address of this server's network.
fn address_script_hash(ctx: &HttpContext, text: &str) -> Result<ScriptHash, Failure> {
    let address = bitcoin::Address::from_str(text).map_err(|e| Failure::bad(e.to_string()))?;
    let network = ctx.validator.network().to_bitcoin();
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

/// `chain_stats` and `mempool_stats`.
#[derive(Debug, Default, Serialize)]
struct TxoStats {
    funded_txo_count: u64,
    funded_txo_sum: u64,
    spent_txo_count: u64,
    spent_txo_sum: u64,
    tx_count: u64,
}

/// `GET /address/:address` and `/scripthash/:hash`.
fn stats(ctx: &HttpContext, kind: &str, script: &str, sh: &ScriptHash) -> Reply {
    let chain = chain_stats(ctx, sh)?;
    let activity = ctx
        .mempool
        .as_ref()
        .map(|p| p.script_activity(sh))
        .unwrap_or_default();
    let mempool = TxoStats {
        funded_txo_count: activity.funded,
        funded_txo_sum: activity.funded_sum,
        spent_txo_count: activity.spent,
        spent_txo_sum: activity.spent_sum,
        tx_count: activity.txs,
    };
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

/// The outputs every confirmed transaction of the history pays the script, and which of them
/// the chain spends.
fn chain_stats(ctx: &HttpContext, sh: &ScriptHash) -> Result<TxoStats, Failure> {
    let history = ctx.index.history(sh, STATS_MAX_HISTORY)?;
    let mut stats = TxoStats {
        tx_count: history.len() as u64,
        ..TxoStats::default()
    };
    for entry in &history {
        let (tx, _) = confirmed_tx(ctx, &entry.txid)?;
        let spent: HashSet<u32> = match tx
            .output
            .iter()
            .any(|o| ScriptHash::of(&o.script_pubkey) == *sh)
        {
            true => ctx
                .index
                .spenders(&entry.txid)?
                .unwrap_or_default()
                .iter()
                .map(|s| s.vout)
                .collect(),
            false => HashSet::new(),
        };
        for (vout, out) in tx.output.iter().enumerate() {
            if out.script_pubkey.is_op_return() || ScriptHash::of(&out.script_pubkey) != *sh {
                continue;
            }
            let value = out.value.to_sat();
            stats.funded_txo_count += 1;
            stats.funded_txo_sum = stats.funded_txo_sum.saturating_add(value);
            if spent.contains(&(vout as u32)) {
                stats.spent_txo_count += 1;
                stats.spent_txo_sum = stats.spent_txo_sum.saturating_add(value);
            }
        }
    }
    Ok(stats)
}

/// A confirmed transaction of a history just read, with where it is; the chain may have
/// changed since (a reorg), which asks the client to try again.
fn confirmed_tx(
    ctx: &HttpContext,
    txid: &Txid,
) -> Result<(Transaction, crate::index::query::TxPosition), Failure> {
    let (raw, pos) = ctx
        .index
        .confirmed_tx_bytes(&ctx.validator, txid)?
        .ok_or_else(|| {
            Failure(
                hyper::StatusCode::SERVICE_UNAVAILABLE,
                "the chain changed during the request; try again".into(),
            )
        })?;
    Ok((decode(&raw)?, pos))
}

/// Confirmed history entries as Esplora transactions, each block's undo data read once.
fn confirmed_values(ctx: &HttpContext, entries: &[HistoryEntry]) -> Result<Vec<TxValue>, Failure> {
    let network = ctx.validator.network().to_bitcoin();
    let mut undos: HashMap<u32, BlockUndo> = HashMap::new();
    let mut values = Vec::with_capacity(entries.len());
    for entry in entries {
        let (tx, pos) = confirmed_tx(ctx, &entry.txid)?;
        let status = TxStatus::at(ctx, pos.height);
        let undo = match (undos.get(&pos.height), status.block_hash) {
            (Some(undo), _) => undo,
            (None, Some(hash)) => undos.entry(pos.height).or_insert(undo_of(ctx, &hash)?),
            (None, None) => {
                return Err(Failure(
                    hyper::StatusCode::SERVICE_UNAVAILABLE,
                    "the chain changed during the request; try again".into(),
                ))
            }
        };
        values.push(TxValue::new(
            &tx,
            &spent_outputs(undo, pos.pos, &tx)?,
            status,
            network,
        ));
    }
    Ok(values)
}

/// Up to 50 of the script's mempool transactions, newest first.
fn mempool_txs(ctx: &HttpContext, sh: &ScriptHash) -> Result<Vec<(Txid, TxValue)>, Failure> {
    let network = ctx.validator.network().to_bitcoin();
    let entries = ctx
        .mempool
        .as_ref()
        .map(|p| p.newest_of_script(sh, MEMPOOL_TXS))
        .unwrap_or_default();
    Ok(entries
        .into_iter()
        .map(|e| {
            let prevouts: Vec<_> = e.prevouts.iter().cloned().map(Some).collect();
            (
                e.txid,
                TxValue::new(&e.tx, &prevouts, TxStatus::UNCONFIRMED, network),
            )
        })
        .collect())
}

/// `GET .../txs` (`with_mempool`: up to 50 mempool transactions, then the 25 newest confirmed)
/// and `.../txs/chain[/:last_seen_txid]` (25 confirmed, older than `last_seen`).
fn history(
    ctx: &HttpContext,
    sh: &ScriptHash,
    with_mempool: bool,
    last_seen: Option<Txid>,
) -> Reply {
    // The mempool first: a transaction confirmed between the two reads shows up confirmed.
    let unconfirmed = if with_mempool {
        mempool_txs(ctx, sh)?
    } else {
        Vec::new()
    };
    let view = ctx.index.reader();
    let below = match last_seen {
        Some(txid) => match view.history_txnum(sh, &txid)? {
            Some(txnum) => Some(txnum),
            // As Esplora: a last seen transaction that is not in the history ends it.
            None => return json(&Vec::<TxValue>::new()),
        },
        None => None,
    };
    let entries = view.history_newest(sh, below, TXS_PER_PAGE)?;
    drop(view);
    let confirmed: HashSet<Txid> = entries.iter().map(|e| e.txid).collect();
    let mut page: Vec<TxValue> = unconfirmed
        .into_iter()
        .filter(|(txid, _)| !confirmed.contains(txid))
        .map(|(_, value)| value)
        .collect();
    page.extend(confirmed_values(ctx, &entries)?);
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
/// mempool's unspent outputs paying the script.
fn utxos(ctx: &HttpContext, sh: &ScriptHash) -> Reply {
    let confirmed = ctx.index.unspent(sh, MAX_UTXOS)?;
    let pool = ctx.mempool.as_ref();
    let mut answer: Vec<Utxo> = confirmed
        .iter()
        .filter(|u| !pool.is_some_and(|p| p.is_spent(&OutPoint::new(u.txid, u.vout))))
        .map(|u| Utxo {
            txid: u.txid,
            vout: u.vout,
            status: TxStatus::at(ctx, u.height),
            value: u.value,
        })
        .collect();
    for (txid, vout, value) in pool.map(|p| p.unspent(sh)).unwrap_or_default() {
        if answer.len() >= MAX_UTXOS {
            return Err(Failure::bad(format!(
                "too many unspent outputs: more than {MAX_UTXOS}"
            )));
        }
        answer.push(Utxo {
            txid,
            vout,
            status: TxStatus::UNCONFIRMED,
            value,
        });
    }
    json(&answer)
}

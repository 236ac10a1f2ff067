//! The `/mempool` and `/fee-estimates` endpoints. A cairn without a mempool answers as an
//! empty one would.

use serde::Serialize;

use super::api::{json, Reply};
use crate::http::context::Query;
use crate::mempool::MIN_RELAY_PER_KVB;

/// Transactions in `/mempool/recent` (Esplora's `RECENT_TXS_SIZE`).
const RECENT_TXS: usize = 10;

/// Confirmation targets of `/fee-estimates`: each block up to 25, then a day, half a week, a
/// week (bitcoind's `estimatesmartfee` targets as Esplora asks them).
const FEE_TARGETS: [u32; 28] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 144,
    504, 1008,
];

/// `/mempool`'s answer.
#[derive(Debug, Serialize)]
struct Backlog {
    count: usize,
    vsize: u64,
    total_fee: u64,
    fee_histogram: Vec<(f64, u64)>,
}

/// `GET /mempool`: size, fees and the fee-rate histogram (Electrum's `get_fee_histogram`).
pub fn stats(ctx: &Query) -> Reply {
    let backlog = match ctx.model.mempool() {
        Some(pool) => {
            let (count, vsize, total_fee) = pool.info();
            Backlog {
                count,
                vsize,
                total_fee,
                fee_histogram: pool.fee_histogram(),
            }
        }
        None => Backlog {
            count: 0,
            vsize: 0,
            total_fee: 0,
            fee_histogram: Vec::new(),
        },
    };
    json(&backlog)
}

/// `GET /mempool/txids`.
pub fn txids(ctx: &Query) -> Reply {
    json(&ctx.model.mempool().map(|p| p.txids()).unwrap_or_default())
}

/// One of `/mempool/recent`'s transactions.
#[derive(Debug, Serialize)]
struct Recent {
    txid: bitcoin::Txid,
    fee: u64,
    vsize: u64,
    value: u64,
}

/// `GET /mempool/recent`: the last ten transactions to enter, newest first.
pub fn recent(ctx: &Query) -> Reply {
    let entries = ctx
        .model
        .mempool()
        .map(|p| p.recent(RECENT_TXS))
        .unwrap_or_default();
    let recent: Vec<Recent> = entries
        .iter()
        .map(|e| Recent {
            txid: e.txid,
            fee: e.fee,
            vsize: e.vsize,
            value: e.value,
        })
        .collect();
    json(&recent)
}

/// `GET /fee-estimates`: sat/vB per confirmation target, from the projected blocks as
/// Electrum's `estimatefee` (the lowest package rate the target's block takes, at least the
/// least fee rate that enters, which it is where the mempool would clear sooner).
pub fn fee_estimates(ctx: &Query) -> Reply {
    let mut estimates = serde_json::Map::new();
    let pool = ctx.model.mempool();
    let rates = pool.map(|p| p.fee_rates());
    // The least fee rate that enters now (the rolling minimum fee after evictions), sat/vB.
    let floor = pool.map_or(MIN_RELAY_PER_KVB, |p| p.entry_fee_per_kvb()) as f64 / 1000.0;
    for target in FEE_TARGETS {
        let btc_per_kvb = rates.as_ref().and_then(|r| r.estimate(target));
        // BTC/kvB to sat/vB: 1e8 sat per BTC, 1000 vB per kvB.
        let sat_per_vb = btc_per_kvb.map_or(floor, |rate| (rate * 100_000.0).max(floor));
        estimates.insert(target.to_string(), serde_json::json!(sat_per_vb));
    }
    json(&estimates)
}

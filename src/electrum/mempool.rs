//! The fee and mempool methods: `blockchain.estimatefee`, `blockchain.relayfee` and the
//! `mempool.*` namespace (`get_fee_histogram`, `get_info`, `recent`), all from cairn's own
//! mempool.

use serde_json::{json, Value};

use super::context::Ctx;
use super::rpc::RpcError;

/// How many transactions `mempool.recent` lists (ElectrumX's `count=10`).
const RECENT_TXS: usize = 10;

/// The minimum relay fee in BTC per 1000 vbytes, as Electrum wants fee rates.
/// Satoshis per 1,000 vbytes in BTC/kvB.
pub(crate) fn btc_per_kvb(sat_per_kvb: u64) -> f64 {
    bitcoin::Amount::from_sat(sat_per_kvb).to_btc()
}

impl Ctx<'_> {
    pub(crate) fn estimatefee(&self, blocks: u32) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        // ElectrumX's `bump_cost(2.0)`.
        self.charge_units(2);
        // Where the mempool would clear within `blocks` blocks, the least fee that enters
        // confirms in time; no estimate is below it.
        let floor = btc_per_kvb(pool.entry_fee_per_kvb());
        Ok(json!(pool
            .estimate_fee(blocks)
            .map_or(floor, |e| e.max(floor))))
    }

    /// `mempool.get_info`: bitcoind's `getmempoolinfo` fee rates in BTC/kvB; `mempoolminfee`
    /// rises above the relay fee after evictions (the rolling minimum fee).
    pub(crate) fn mempool_info(&self) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        Ok(json!({
            "mempoolminfee": btc_per_kvb(pool.entry_fee_per_kvb()),
            "minrelaytxfee": btc_per_kvb(pool.min_relay_per_kvb()),
            "incrementalrelayfee": btc_per_kvb(pool.min_relay_per_kvb()),
        }))
    }

    pub(crate) fn fee_histogram(&self) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        self.charge_units(1);
        Ok(Value::Array(
            pool.fee_histogram()
                .iter()
                .map(|(rate, vsize)| json!([rate, vsize]))
                .collect(),
        ))
    }

    /// `mempool.recent()`: the last 10 transactions to enter, newest first, as ElectrumX's
    /// `{txid, fee, vsize}` (read from the mempool's index by entry time).
    pub(crate) fn mempool_recent(&self) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        self.charge_units(1); // ElectrumX's `bump_cost(1.0)`.
        Ok(Value::Array(
            pool.recent(RECENT_TXS)
                .iter()
                .map(|e| json!({"txid": e.txid.to_string(), "fee": e.fee, "vsize": e.vsize}))
                .collect(),
        ))
    }
}

impl Ctx<'_> {
    /// `blockchain.relayfee`: the least fee rate relayed, in BTC/kvB.
    pub(crate) fn relayfee(&self) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        Ok(json!(btc_per_kvb(pool.min_relay_per_kvb())))
    }
}

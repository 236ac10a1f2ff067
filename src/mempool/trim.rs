//! A full pool trimmed to its size (Core's `TrimToSize`): Core's profile evicts the worst chunk
//! of any cluster ([`super::chunk_index`]), Knots's the lowest descendant score
//! ([`super::evict`]); either raises the rolling minimum fee ([`super::rolling`]).

use std::collections::HashSet;

use bitcoin::Txid;

use super::{evict, persist, Inner, Mempool, Rejection};
use crate::types::ScriptHash;

impl Mempool {
    /// Evicts while the mempool takes more memory than its limit (as Core counts it:
    /// [`super::memory`]), raising the rolling minimum fee to
    /// each evicted package's rate (Core's `TrimToSize`): Core's profile the worst chunk of any
    /// cluster, Knots's the lowest descendant score with its descendants (the first of either
    /// index, no scan). Refuses `txids` if one of them left.
    pub(super) fn evict_over_limit(
        &self,
        inner: &mut Inner,
        txids: &[Txid],
        touched: &mut HashSet<ScriptHash>,
    ) -> Result<(), Rejection> {
        loop {
            inner.refresh_chunks();
            if inner.usage() <= self.config.max_bytes {
                break;
            }
            let Some(evicted) = inner.evict_once(touched) else {
                break;
            };
            self.rolling_fee()
                .evicted(evicted.fee, evicted.vsize, persist::now());
        }
        // As Core's `LimitMempoolSize`: the pool is trimmed to fit even once a newcomer left
        // (what it grew, such as the random-order vector, stays), then the newcomer is refused.
        match txids.iter().all(|t| inner.txs.contains_key(t)) {
            true => Ok(()),
            false => Err(Rejection::MempoolFull),
        }
    }
}

impl Inner {
    /// Evicts one package by the profile's order; its fee and virtual size (a chunk's
    /// sigop-adjusted weight in vbytes, rounded up, as Core's `ToFeePerVSize`).
    fn evict_once(&mut self, touched: &mut HashSet<ScriptHash>) -> Option<evict::Totals> {
        if !self.clusters {
            let (worst, package) = self.lowest_score()?;
            self.remove_with_descendants(&worst, touched);
            return Some(package);
        }
        let chunk = self.worst_chunk()?;
        for txid in &chunk.txids {
            self.remove_with_descendants(txid, touched);
        }
        Some(evict::Totals {
            fee: chunk.feerate.fee,
            vsize: chunk.feerate.size.div_ceil(4),
        })
    }
}

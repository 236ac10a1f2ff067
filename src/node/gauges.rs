//! The gauges a scrape of `/metrics` reads from the running node: tips, mempool, peers, the
//! index store and free disk space. The counters are recorded where the work happens.

use crate::http::metrics::Refresh;
use crate::metrics::{catch_up, metrics};
use crate::p2p::P2p;

use super::Node;

/// What sets the node's gauges before each scrape.
pub(super) fn refresh(node: &Node, p2p: Option<&P2p>) -> Refresh {
    let validator = node.validator.clone();
    let index = node.index.clone();
    let mempool = node.mempool.clone();
    let peers = p2p.map(|p| p.status_source());
    let space = node.space.clone();
    Box::new(move || {
        let m = metrics();
        m.kernel_tip_height.set(validator.tip().height);
        m.best_header_height.set(validator.best_header().height);
        if let Some(index) = &index {
            m.index_tip_height
                .set(index.tip().map_or(-1, |(height, _)| i64::from(height)));
            let store = index.store();
            let sst: u64 = store.disk_bytes().iter().map(|(_, bytes)| bytes).sum();
            m.rocksdb_size.set(saturating_i64(sst));
            let cache = store.cache_stats();
            m.rocksdb_block_cache_usage.set(saturating_i64(cache.usage));
            catch_up(&m.rocksdb_block_cache_hits, cache.hits);
            catch_up(&m.rocksdb_block_cache_misses, cache.misses);
        }
        if let Some(mempool) = &mempool {
            let (count, vsize) = mempool.size();
            m.mempool_transactions.set(saturating_i64(count as u64));
            m.mempool_vsize.set(saturating_i64(vsize));
            m.mempool_usage
                .set(saturating_i64(mempool.memory_usage().0));
        }
        if let Some(peers) = &peers {
            let list = peers().peers;
            let inbound = list.iter().filter(|p| p.inbound).count() as u64;
            m.p2p_peers
                .with_label_values(&["inbound"])
                .set(saturating_i64(inbound));
            m.p2p_peers
                .with_label_values(&["outbound"])
                .set(saturating_i64(list.len() as u64 - inbound));
        }
        m.disk_free.set(saturating_i64(space.least_free()));
    })
}

fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

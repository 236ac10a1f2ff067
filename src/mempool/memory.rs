//! The memory the pool is taken to use, as Core 31 counts it against `-maxmempool`
//! (txmempool.cpp's `CTxMemPool::DynamicMemoryUsage`): each entry's allocation (an estimate of
//! boost's multi-index node), its transaction's heap (core_memusage.h's `RecursiveDynamicUsage`
//! through its shared pointer), a node of `mapNextTx` per input, the vector of wtxids kept for
//! random order (`txns_randomized`, its capacity simulated as libstdc++ grows and Core shrinks
//! it), and the cluster graph (txgraph.cpp's `GetMainMemoryUsage`: an `Entry` per transaction,
//! each cluster's allocation and vectors, a node of the chunk index per chunk). Allocations are
//! rounded as `memusage::MallocUsage` rounds them on 64-bit glibc. The sizes of Core's types are
//! those of the 64-bit build of the vendored source (`sizeof`, g++ 12).
//!
//! cairn's own structures are not what is counted: the limit means what it means in Core, so a
//! pool of cairn's and one of Core's of the same `maxmempool` hold the same transactions and
//! evict at the same moment.

use bitcoin::Transaction;

/// What glibc's malloc takes for `alloc` bytes on a 64-bit build (`memusage::MallocUsage`).
pub const fn malloc_usage(alloc: u64) -> u64 {
    match alloc {
        0 => 0,
        n => ((n + 31) >> 4) << 4,
    }
}

/// `sizeof(CTxMemPoolEntry)`.
const MEMPOOL_ENTRY: u64 = 136;
/// `sizeof(CTransaction)`.
const TRANSACTION: u64 = 128;
/// `sizeof(memusage::stl_shared_counter)`.
const SHARED_COUNTER: u64 = 24;
/// `sizeof(CTxIn)`.
const TX_IN: u64 = 112;
/// `sizeof(CTxOut)`.
const TX_OUT: u64 = 48;
/// `sizeof(std::vector<unsigned char>)`: a witness stack's item.
const BYTE_VECTOR: u64 = 24;
/// Bytes a script holds inline (`CScriptBase = prevector<36, uint8_t>` since Core 30: P2WSH,
/// P2TR and P2PK scripts fit).
const SCRIPT_INLINE: usize = 36;
/// A red-black tree node's header (`memusage::stl_tree_node`: colour and three pointers).
const TREE_NODE: u64 = 32;
/// `sizeof(TxGraphImpl::Entry)`: a transaction's place in the cluster graph.
pub const GRAPH_ENTRY: u64 = 80;
/// `sizeof(SingletonClusterImpl)`.
const SINGLETON_CLUSTER: u64 = 48;
/// `sizeof(GenericClusterImpl)`.
const GENERIC_CLUSTER: u64 = 104;
/// `sizeof(std::unique_ptr<Cluster>)`: a cluster's place in its cluster set.
const CLUSTER_POINTER: u64 = 8;
/// `sizeof(DepGraph<SetType>::Entry)`: a fee rate and two 64-bit sets.
const DEP_GRAPH_ENTRY: u64 = 32;
/// `sizeof(GraphIndex)` and `sizeof(DepGraphIndex)`.
const INDEX: u64 = 4;
/// `sizeof(std::pair<Wtxid, txiter>)`: an element of `txns_randomized`.
const RANDOMIZED_ITEM: u64 = 40;

/// A script's heap: nothing while it fits inline.
fn script_usage(len: usize) -> u64 {
    match len > SCRIPT_INLINE {
        true => malloc_usage(len as u64),
        false => 0,
    }
}

/// What one transaction costs the pool whatever its cluster: the entry (with boost's nine
/// pointers), the transaction behind its shared pointer with every vector and script it owns,
/// and a `mapNextTx` node per input. (Knots's pool, Core 29's, is counted the same way, with
/// [`LINK_USAGE`] for its links instead of the cluster graph.)
pub fn transaction_usage(tx: &Transaction) -> u64 {
    let inputs: u64 = (tx.input.iter())
        .map(|input| {
            let stack = malloc_usage(input.witness.len() as u64 * BYTE_VECTOR);
            let items: u64 = input
                .witness
                .iter()
                .map(|i| malloc_usage(i.len() as u64))
                .sum();
            script_usage(input.script_sig.len()) + stack + items
        })
        .sum();
    let outputs: u64 = (tx.output.iter())
        .map(|output| script_usage(output.script_pubkey.len()))
        .sum();
    let spends = malloc_usage(TREE_NODE + 16) * tx.input.len() as u64;
    malloc_usage(MEMPOOL_ENTRY + 9 * 8)
        + malloc_usage(TRANSACTION)
        + malloc_usage(SHARED_COUNTER)
        + malloc_usage(tx.input.len() as u64 * TX_IN)
        + malloc_usage(tx.output.len() as u64 * TX_OUT)
        + inputs
        + outputs
        + spends
}

/// A cluster of `n` transactions in the graph (`Cluster::TotalMemoryUsage`): a lone one is a
/// singleton; a larger one holds a dependency graph and two index vectors of its size.
pub fn cluster_usage(n: usize) -> u64 {
    let n = n as u64;
    match n {
        0 => 0,
        1 => malloc_usage(SINGLETON_CLUSTER) + CLUSTER_POINTER,
        _ => {
            malloc_usage(GENERIC_CLUSTER)
                + CLUSTER_POINTER
                + 2 * malloc_usage(n * INDEX)
                + malloc_usage(n * DEP_GRAPH_ENTRY)
        }
    }
}

/// A chunk's node in the graph's chunk index (a `std::set` of one `GraphIndex` and a count).
pub const CHUNK_USAGE: u64 = malloc_usage(TREE_NODE + 8);

/// Knots's pool (Core 29's entries) keeps each link between a parent and a child in both
/// entries' sets (`memusage::IncrementalDynamicUsage` of a `std::set` of references).
pub const LINK_USAGE: u64 = 2 * malloc_usage(TREE_NODE + 8);

/// The capacity of Core's `txns_randomized` as the pool grows and shrinks: libstdc++ doubles a
/// full vector (at least to 1), and Core shrinks it to fit when it is less than half full; a
/// last element is cleared, the capacity kept.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomizedCapacity {
    len: u64,
    capacity: u64,
}

impl RandomizedCapacity {
    /// A transaction entered.
    pub fn entered(&mut self) {
        if self.len == self.capacity {
            self.capacity = self.len + self.len.max(1);
        }
        self.len += 1;
    }

    /// A transaction left.
    pub fn left(&mut self) {
        if self.len > 1 {
            self.len -= 1;
            if self.len * 2 < self.capacity {
                self.capacity = self.len;
            }
        } else {
            self.len = 0;
        }
    }

    /// Its heap.
    pub fn usage(&self) -> u64 {
        malloc_usage(self.capacity * RANDOMIZED_ITEM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_round_as_glibc() {
        assert_eq!(malloc_usage(0), 0);
        assert_eq!(malloc_usage(1), 32);
        assert_eq!(malloc_usage(24), 48);
        assert_eq!(malloc_usage(208), 224);
        assert_eq!(CHUNK_USAGE, 64);
    }

    #[test]
    fn the_randomized_vector_doubles_and_shrinks_as_cores() {
        let mut v = RandomizedCapacity::default();
        let caps: Vec<u64> = (0..5)
            .map(|_| {
                v.entered();
                v.capacity
            })
            .collect();
        assert_eq!(caps, [1, 2, 4, 4, 8]);
        v.left(); // 4 of 8: not less than half
        assert_eq!(v.capacity, 8);
        v.left(); // 3 of 8
        assert_eq!(v.capacity, 3);
        v.left(); // 2 of 3
        assert_eq!(v.capacity, 3);
        v.left(); // 1 of 3
        assert_eq!(v.capacity, 1);
        v.left();
        assert_eq!(
            (v.len, v.capacity),
            (0, 1),
            "the last one cleared, capacity kept"
        );
    }
}

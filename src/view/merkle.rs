//! Merkle branches: a transaction's proof against its block's merkle root, and a header's proof
//! against the root of all block hashes up to a checkpoint.

use std::collections::HashMap;
use std::sync::Mutex;

use bitcoin::hashes::{sha256d, Hash};

/// The branch of the leaf at `pos` (deepest pairing first) and the root. An odd last node is
/// paired with itself, as Bitcoin's merkle tree does.
pub fn branch_and_root(leaves: &[[u8; 32]], pos: usize) -> (Vec<[u8; 32]>, [u8; 32]) {
    let tree = MerkleTree::new(leaves.to_vec());
    (tree.branch(pos).unwrap_or_default(), tree.root())
}

/// A merkle tree kept whole, its leaves and every level above them, so that a leaf's branch is
/// read out instead of hashed again: a block's tree is cached for `get_merkle`, as Fulcrum keeps
/// recent blocks' txids for it (its `txhash_cache`).
pub struct MerkleTree {
    /// The leaves first, then each level up to the root's (never empty).
    levels: Vec<Vec<[u8; 32]>>,
}

impl MerkleTree {
    /// The tree over `leaves`. An odd last node is paired with itself, as Bitcoin's merkle tree
    /// does.
    pub fn new(leaves: Vec<[u8; 32]>) -> Self {
        let mut levels = vec![leaves];
        while let Some(level) = levels.last().filter(|level| level.len() > 1) {
            let up = level
                .chunks(2)
                .map(|pair| hash_pair(&pair[0], pair.get(1).unwrap_or(&pair[0])))
                .collect();
            levels.push(up);
        }
        MerkleTree { levels }
    }

    /// The leaves, in order.
    pub fn leaves(&self) -> &[[u8; 32]] {
        self.levels.first().map_or(&[], Vec::as_slice)
    }

    /// The branch of the leaf at `pos`, deepest pairing first; `None` past the last leaf.
    pub fn branch(&self, mut pos: usize) -> Option<Vec<[u8; 32]>> {
        if pos >= self.leaves().len() {
            return None;
        }
        let below_root = &self.levels[..self.levels.len() - 1];
        let mut branch = Vec::with_capacity(below_root.len());
        for level in below_root {
            branch.push(*level.get(pos ^ 1).unwrap_or(&level[pos]));
            pos /= 2;
        }
        Some(branch)
    }

    /// The root (all zeros for a tree without leaves).
    pub fn root(&self) -> [u8; 32] {
        self.levels
            .last()
            .and_then(|level| level.first())
            .copied()
            .unwrap_or([0u8; 32])
    }

    /// The bytes its hashes take.
    pub fn bytes(&self) -> usize {
        self.levels.iter().map(|level| level.len() * 32).sum()
    }
}

/// Log2 of the headers one cached subtree covers (1,024): a checkpoint proof hashes at most one
/// such subtree and the cached roots above it, not every header up to the checkpoint.
pub const CHUNK_LEVELS: u32 = 10;

/// Roots of complete 1,024-header subtrees of the header tree, as ElectrumX's `MerkleCache`
/// keeps levels: keyed by the subtree's index and its last block hash, which commits to every
/// header in it (each block hash commits to its parent), so a reorg can never serve a stale root.
#[derive(Default)]
pub struct HeaderRoots(Mutex<HashMap<Subtree, [u8; 32]>>);

/// A complete subtree of the header tree: its index and its last block hash.
type Subtree = (u32, [u8; 32]);

/// Most subtree roots kept: more than a chain of 100 million headers needs; a full cache is
/// emptied (its entries of stale branches go with it).
const MAX_ROOTS: usize = 100_000;

impl HeaderRoots {
    /// The branch of leaf `pos` among the `n` leaves that `leaf(i)` gives (deepest pairing
    /// first) and the root: the same as [`branch_and_root`] over all of them, with the subtrees of
    /// `1 << levels` leaves that hold neither `pos` nor the last leaf taken from the cache.
    pub fn branch_and_root(
        &self,
        n: usize,
        pos: usize,
        levels: u32,
        leaf: impl Fn(usize) -> [u8; 32],
    ) -> (Vec<[u8; 32]>, [u8; 32]) {
        let size = 1usize << levels;
        if n <= size {
            let leaves: Vec<[u8; 32]> = (0..n).map(&leaf).collect();
            return branch_and_root(&leaves, pos);
        }
        let chunks = n.div_ceil(size);
        let chunk_leaves = |c: usize| -> Vec<[u8; 32]> {
            (c * size..((c + 1) * size).min(n)).map(&leaf).collect()
        };
        let roots: Vec<[u8; 32]> = (0..chunks)
            .map(|c| {
                let complete = (c + 1) * size <= n;
                if !complete {
                    return subtree(&chunk_leaves(c), 0, levels).1;
                }
                let key = (c as u32, leaf((c + 1) * size - 1));
                if let Some(root) = self.lock().get(&key) {
                    return *root;
                }
                let root = subtree(&chunk_leaves(c), 0, levels).1;
                let mut cache = self.lock();
                if cache.len() >= MAX_ROOTS {
                    cache.clear();
                }
                cache.insert(key, root);
                root
            })
            .collect();
        let (mut branch, _) = subtree(&chunk_leaves(pos / size), pos % size, levels);
        let (upper, root) = branch_and_root(&roots, pos / size);
        branch.extend(upper);
        (branch, root)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Subtree, [u8; 32]>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The branch of `pos` up `levels` levels and the node reached: a subtree of the header tree
/// whose first leaf sits at a multiple of `1 << levels`. Its last node, once alone at a level
/// below the top, is paired with itself, as it is in the whole tree when a later subtree exists.
fn subtree(leaves: &[[u8; 32]], mut pos: usize, levels: u32) -> (Vec<[u8; 32]>, [u8; 32]) {
    let mut level = leaves.to_vec();
    let mut branch = Vec::with_capacity(levels as usize);
    for _ in 0..levels {
        if level.len() % 2 == 1 {
            if let Some(last) = level.last().copied() {
                level.push(last);
            }
        }
        branch.push(level[pos ^ 1]);
        level = level
            .chunks(2)
            .map(|pair| hash_pair(&pair[0], &pair[1]))
            .collect();
        pos /= 2;
    }
    (branch, level.first().copied().unwrap_or([0u8; 32]))
}

fn hash_pair(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let mut data = [0u8; 64];
    data[..32].copy_from_slice(left);
    data[32..].copy_from_slice(right);
    sha256d::Hash::hash(&data).to_byte_array()
}

/// Hex of a hash in RPC (reversed) byte order, as Electrum shows hashes.
pub fn rpc_hex(hash: &[u8; 32]) -> String {
    let mut b = *hash;
    b.reverse();
    // The `hex` crate's loop: formatting through `bitcoin`'s hex goes a character at a time.
    hex::encode(b)
}

/// Folds a branch back into a root (for tests and clients' checks).
pub fn root_from_branch(leaf: [u8; 32], branch: &[[u8; 32]], mut pos: usize) -> [u8; 32] {
    let mut acc = leaf;
    for sibling in branch {
        let mut data = [0u8; 64];
        if pos.is_multiple_of(2) {
            data[..32].copy_from_slice(&acc);
            data[32..].copy_from_slice(sibling);
        } else {
            data[..32].copy_from_slice(sibling);
            data[32..].copy_from_slice(&acc);
        }
        acc = sha256d::Hash::hash(&data).to_byte_array();
        pos /= 2;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::hex::FromHex;

    #[test]
    fn cached_subtrees_give_the_whole_trees_branch_and_root() {
        let leaf = |i: usize| {
            let mut b = [0u8; 32];
            b[..8].copy_from_slice(&(i as u64).to_le_bytes());
            sha256d::Hash::hash(&b).to_byte_array()
        };
        let roots = HeaderRoots::default();
        for levels in [1u32, 2, 3] {
            for n in 1..70usize {
                let leaves: Vec<[u8; 32]> = (0..n).map(leaf).collect();
                for pos in 0..n {
                    let want = branch_and_root(&leaves, pos);
                    assert_eq!(
                        roots.branch_and_root(n, pos, levels, leaf),
                        want,
                        "n {n}, pos {pos}, levels {levels}"
                    );
                    assert_eq!(root_from_branch(leaves[pos], &want.0, pos), want.1);
                }
            }
        }
        assert!(!roots.lock().is_empty(), "complete subtrees were cached");
        // The production size, past two complete subtrees.
        let leaves: Vec<[u8; 32]> = (0..2_500).map(leaf).collect();
        for pos in [0, 1, 1_023, 1_024, 2_047, 2_048, 2_499] {
            let want = branch_and_root(&leaves, pos);
            assert_eq!(
                roots.branch_and_root(2_500, pos, CHUNK_LEVELS, leaf),
                want,
                "pos {pos}"
            );
        }
    }

    #[test]
    fn a_kept_tree_gives_every_leafs_branch_to_bitcoins_root() {
        for n in 1..70u8 {
            let leaves: Vec<[u8; 32]> = (0..n).map(|i| [i; 32]).collect();
            let tree = MerkleTree::new(leaves.clone());
            let txids = leaves.iter().map(|l| bitcoin::Txid::from_byte_array(*l));
            let want = bitcoin::merkle_tree::calculate_root(txids).map(|r| r.to_byte_array());
            assert_eq!(Some(tree.root()), want, "n {n}");
            for (pos, leaf) in leaves.iter().enumerate() {
                let branch = tree.branch(pos).unwrap();
                assert_eq!(root_from_branch(*leaf, &branch, pos), tree.root());
                assert_eq!(
                    branch.len(),
                    (n as usize).next_power_of_two().trailing_zeros() as usize
                );
            }
            assert_eq!(tree.branch(n as usize), None, "no leaf past the last");
        }
        assert_eq!(MerkleTree::new(Vec::new()).root(), [0u8; 32]);
        assert_eq!(MerkleTree::new(Vec::new()).branch(0), None);
        assert_eq!(MerkleTree::new(vec![[1; 32]; 3]).bytes(), (3 + 2 + 1) * 32);
    }

    #[test]
    fn root_matches_the_blocks_merkle_root() {
        let text = include_str!("../../tests/data/mainnet-block-951658.json");
        let json: serde_json::Value = serde_json::from_str(text).unwrap();
        let txids: Vec<[u8; 32]> = json["tx"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let mut b: [u8; 32] = Vec::<u8>::from_hex(t.as_str().unwrap())
                    .unwrap()
                    .try_into()
                    .unwrap();
                b.reverse();
                b
            })
            .collect();
        for pos in [0, 1, txids.len() / 2, txids.len() - 1] {
            let (branch, root) = branch_and_root(&txids, pos);
            assert_eq!(rpc_hex(&root), json["merkleroot"].as_str().unwrap());
            assert_eq!(root_from_branch(txids[pos], &branch, pos), root);
        }
    }
}

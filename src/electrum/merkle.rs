//! Merkle branches: a transaction's proof against its block's merkle root, and a header's proof
//! against the root of all block hashes up to a checkpoint.

use bitcoin::hex::DisplayHex;
use bitcoin::hashes::{sha256d, Hash};

/// The branch of the leaf at `pos` (deepest pairing first) and the root. An odd last node is
/// paired with itself, as Bitcoin's merkle tree does.
pub fn branch_and_root(leaves: &[[u8; 32]], mut pos: usize) -> (Vec<[u8; 32]>, [u8; 32]) {
    let mut level: Vec<[u8; 32]> = leaves.to_vec();
    let mut branch = Vec::new();
    if level.is_empty() {
        return (branch, [0u8; 32]);
    }
    while level.len() > 1 {
        if level.len() % 2 == 1 {
            if let Some(last) = level.last().copied() {
                level.push(last);
            }
        }
        branch.push(level[pos ^ 1]);
        level = level
            .chunks(2)
            .map(|pair| {
                let mut data = [0u8; 64];
                data[..32].copy_from_slice(&pair[0]);
                data[32..].copy_from_slice(&pair[1]);
                sha256d::Hash::hash(&data).to_byte_array()
            })
            .collect();
        pos /= 2;
    }
    (branch, level[0])
}

/// Hex of a hash in RPC (reversed) byte order, as Electrum shows hashes.
pub fn rpc_hex(hash: &[u8; 32]) -> String {
    let mut b = *hash;
    b.reverse();
    b.to_lower_hex_string()
}

/// Folds a branch back into a root (for tests and clients' checks).
pub fn root_from_branch(leaf: [u8; 32], branch: &[[u8; 32]], mut pos: usize) -> [u8; 32] {
    let mut acc = leaf;
    for sibling in branch {
        let mut data = [0u8; 64];
        if pos % 2 == 0 {
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
    use bitcoin::hex::FromHex;
    use super::*;

    #[test]
    fn root_matches_the_blocks_merkle_root() {
        let text = include_str!("../../tests/data/mainnet-block-951658.json");
        let json: serde_json::Value = serde_json::from_str(text).unwrap();
        let txids: Vec<[u8; 32]> = json["tx"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let mut b: [u8; 32] = Vec::<u8>::from_hex(t.as_str().unwrap()).unwrap().try_into().unwrap();
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

//! The chain generator's promises, checked from the blocks it writes: determinism, every script
//! kind spent, chains of spends inside a block, OP_RETURN outputs and heavy-tailed reuse.

mod common;

use std::collections::HashMap;

use bitcoin::{OutPoint, TxOut};

use common::chain;

#[test]
fn same_seed_same_chain_other_seed_other_chain() {
    let a = chain(110, 10, 42);
    let b = chain(110, 10, 42);
    let c = chain(110, 10, 43);
    assert_eq!(a.last().unwrap().block_hash(), b.last().unwrap().block_hash());
    assert_ne!(a.last().unwrap().block_hash(), c.last().unwrap().block_hash());
}

#[test]
fn realistic_mix_of_spends_and_reuse() {
    let blocks = chain(400, 60, 2);
    let mut utxo: HashMap<OutPoint, (TxOut, u32)> = HashMap::new();
    let mut spent_kinds: HashMap<&'static str, usize> = HashMap::new();
    let mut uses: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut in_block_chains = 0usize;
    let mut op_returns = 0usize;
    let mut txs = 0usize;
    for (i, block) in blocks.iter().enumerate() {
        let height = i as u32 + 1;
        // BIP34: the coinbase starts with the height.
        let cb = &block.txdata[0];
        let bip34 = bitcoin::script::Builder::new().push_int(height.into()).into_script();
        assert!(cb.input[0].script_sig.as_bytes().starts_with(bip34.as_bytes()), "height {height}");
        assert!(block.check_witness_commitment(), "witness commitment at {height}");
        assert!(block.check_merkle_root());
        txs += block.txdata.len();
        for tx in &block.txdata {
            for input in &tx.input {
                if input.previous_output.is_null() {
                    continue;
                }
                let (prev, created) = utxo.remove(&input.previous_output).expect("spends a known unspent output");
                if prev.script_pubkey.is_p2pkh() {
                    *spent_kinds.entry("p2pkh").or_default() += 1;
                } else if prev.script_pubkey.is_p2sh() {
                    assert_eq!(input.witness.len(), 2);
                    *spent_kinds.entry("p2sh-p2wpkh").or_default() += 1;
                } else if prev.script_pubkey.is_p2wpkh() {
                    *spent_kinds.entry("p2wpkh").or_default() += 1;
                } else if prev.script_pubkey.is_p2tr() {
                    assert_eq!(input.witness.len(), 1);
                    *spent_kinds.entry("p2tr").or_default() += 1;
                } else if prev.script_pubkey.is_p2wsh() {
                    assert_eq!(input.witness.len(), 4);
                    *spent_kinds.entry("p2wsh").or_default() += 1;
                }
                if created == height {
                    in_block_chains += 1;
                }
                *uses.entry(prev.script_pubkey.to_bytes()).or_default() += 1;
            }
            let txid = tx.compute_txid();
            for (vout, out) in tx.output.iter().enumerate() {
                if out.script_pubkey.is_op_return() {
                    op_returns += 1;
                    continue;
                }
                *uses.entry(out.script_pubkey.to_bytes()).or_default() += 1;
                utxo.insert(OutPoint::new(txid, vout as u32), (out.clone(), height));
            }
        }
    }
    assert!(txs > 15_000, "{txs}");
    for kind in ["p2pkh", "p2sh-p2wpkh", "p2wpkh", "p2tr", "p2wsh"] {
        assert!(spent_kinds.get(kind).copied().unwrap_or(0) > 100, "{kind}: {spent_kinds:?}");
    }
    assert!(in_block_chains > 1000, "{in_block_chains}");
    assert!(op_returns > 100, "{op_returns}");
    // Heavy tail: most scripts appear once or twice, the hottest thousands of times.
    let mut counts: Vec<usize> = uses.values().copied().collect();
    counts.sort_unstable();
    let median = counts[counts.len() / 2];
    let max = *counts.last().unwrap();
    let once_or_twice = counts.iter().filter(|&&c| c <= 2).count();
    assert!(median <= 2, "median {median}");
    assert!(once_or_twice * 10 >= counts.len() * 7, "{once_or_twice} of {}", counts.len());
    assert!(max > 2_000, "max {max}");
}

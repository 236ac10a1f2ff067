//! The index against expectations this test computes itself from the raw blocks, across a
//! reorg, and against a fresh index of the same chain.

mod common;

use std::path::Path;
use std::sync::Arc;

use bitcoin::consensus::serialize;
use bitcoin::{Block, Txid};
use cairn::config::Network;
use cairn::generate::{ChainGenerator, GenerateOptions};
use cairn::index::Index;
use cairn::kernel::Validator;
use cairn::store::Store;

fn open(dir: &Path) -> (Validator, Index) {
    let validator = common::open_validator(dir).0;
    let store = Arc::new(Store::open(&dir.join("index")).unwrap());
    let files = cairn::kernel::blockfiles::KernelBlockFiles::new(&dir.join("kernel/blocks"), Network::Regtest.magic());
    (validator, Index::open(store, Some(files)).unwrap())
}

fn submit(v: &Validator, blocks: &[Block]) {
    for b in blocks {
        v.submit_block(&serialize(b)).unwrap();
    }
}

fn check(index: &Index, blocks: &[Block]) {
    let e = common::expected(blocks);
    for (sh, hist) in &e.history {
        let got: Vec<(Txid, u32)> = index
            .history(sh, usize::MAX)
            .unwrap()
            .iter()
            .map(|h| (h.txid, h.height))
            .collect();
        assert_eq!(&got, hist, "history of {}", sh.to_electrum_hex());
        let want: Vec<_> = e.unspent.get(sh).map(|m| m.iter().collect()).unwrap_or_default();
        let got = index.unspent(sh, usize::MAX).unwrap();
        assert_eq!(got.len(), want.len(), "unspent of {}", sh.to_electrum_hex());
        for (u, ((h, _, vout), (txid, value))) in got.iter().zip(want) {
            assert_eq!((u.txid, u.vout, u.height, u.value), (*txid, *vout, *h, *value));
        }
        let balance: u64 = e.unspent.get(sh).map(|m| m.values().map(|v| v.1).sum()).unwrap_or(0);
        assert_eq!(index.balance(sh).unwrap(), balance);
    }
    for (txid, (height, pos)) in &e.positions {
        let p = index.tx_position(txid).unwrap().unwrap();
        assert_eq!((p.height, p.pos), (*height, *pos));
        let raw = serialize(&blocks[*height as usize - 1]);
        let tx: bitcoin::Transaction = bitcoin::consensus::deserialize(
            &raw[p.offset as usize..(p.offset + p.len) as usize],
        )
        .unwrap();
        assert_eq!(tx.compute_txid(), *txid);
        // The same bytes straight from the kernel's block files.
        let (bytes, _) = index.raw_tx(txid).unwrap().expect("mapped in the block files");
        assert_eq!(bytes, raw[p.offset as usize..(p.offset + p.len) as usize]);
    }
    for (op, (txid, vin, height)) in &e.spent_by {
        assert_eq!(index.spender(&op.txid, op.vout).unwrap(), Some((*txid, *vin, *height)));
    }
    for (i, block) in blocks.iter().enumerate() {
        let txids: Vec<Txid> = block.txdata.iter().map(|t| t.compute_txid()).collect();
        assert_eq!(index.block_txids(i as u32 + 1).unwrap().unwrap(), txids);
    }
}

fn generated(gen: &mut ChainGenerator, n: u32) -> Vec<Block> {
    (0..n).map(|_| gen.next_block().unwrap()).collect()
}

#[test]
fn index_matches_the_blocks_and_survives_a_reorg() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, index) = open(tmp.path());
    let mut gen = ChainGenerator::new(GenerateOptions { blocks: 0, txs_per_block: 30, seed: 8 });
    let common = generated(&mut gen, 200);
    let mut fork = gen.fork(1);
    let branch_a = generated(&mut gen, 40);
    let branch_b = generated(&mut fork, 45);

    submit(&v, &common);
    submit(&v, &branch_a);
    // Index half, then the rest: two syncs.
    let stats = index.sync(&v).unwrap();
    assert_eq!(stats.connected, 241);
    let chain_a: Vec<Block> = common.iter().chain(&branch_a).cloned().collect();
    check(&index, &chain_a);

    // The competing branch has more work: the kernel reorganizes and the index follows.
    submit(&v, &branch_b);
    assert_eq!(v.tip().height, 245);
    let stats = index.sync(&v).unwrap();
    assert_eq!(stats.disconnected, 40);
    assert_eq!(stats.connected, 45);
    let chain_b: Vec<Block> = common.iter().chain(&branch_b).cloned().collect();
    check(&index, &chain_b);
    // Transactions only branch A had are gone.
    let only_a = branch_a[5].txdata[1].compute_txid();
    if !chain_b.iter().any(|b| b.txdata.iter().any(|t| t.compute_txid() == only_a)) {
        assert_eq!(index.tx_position(&only_a).unwrap(), None);
    }

    // Byte for byte what a fresh index of branch B holds.
    let fresh_dir = tempfile::tempdir().unwrap();
    let (v2, fresh) = open(fresh_dir.path());
    submit(&v2, &chain_b);
    fresh.sync(&v2).unwrap();
    assert_eq!(index.dump().unwrap(), fresh.dump().unwrap());
}

#[test]
fn reopened_index_continues_where_it_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let mut gen = ChainGenerator::new(GenerateOptions { blocks: 0, txs_per_block: 20, seed: 9 });
    let blocks = generated(&mut gen, 150);
    {
        let (v, index) = open(tmp.path());
        submit(&v, &blocks[..120]);
        index.sync(&v).unwrap();
        assert_eq!(index.tip().unwrap().0, 120);
    }
    let (v, index) = open(tmp.path());
    assert_eq!(index.tip().unwrap().0, 120);
    submit(&v, &blocks[120..]);
    let stats = index.sync(&v).unwrap();
    assert_eq!(stats.connected, 30);
    check(&index, &blocks);
}

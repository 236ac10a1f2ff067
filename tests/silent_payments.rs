//! Issue 28: the silent-payment tweak index. Every generated block's eligible transactions have
//! their tweak rows, computed from prevouts the generator made (not the kernel's undo data),
//! through a reorg; turning tweaks on over an indexed chain, or upgrading a schema-3 store,
//! builds them and ends row for row where an index built with tweaks from the start is.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use bitcoin::consensus::serialize;
use bitcoin::{Block, OutPoint, TxOut};

use cairn::generate::{ChainGenerator, GenerateOptions};
use cairn::index::silent_payments::tx_tweak;
use cairn::index::{Index, IndexOptions};
use cairn::kernel::Validator;
use cairn::store::schema::{cf, meta};
use cairn::store::Store;
use cairn::types::Network;

fn open(dir: &Path, tweaks: bool) -> (Validator, Index) {
    let validator = common::open_validator(dir).0;
    let store = Arc::new(Store::open(&dir.join("index")).unwrap());
    let files = cairn::kernel::blockfiles::KernelBlockFiles::new(
        &dir.join("kernel/blocks"),
        Network::Regtest.magic(),
    );
    let options = IndexOptions {
        filters: true,
        tweaks_from: tweaks.then_some(0),
    };
    let index = Index::open_with_options(store, Some(files), options).unwrap();
    (validator, index)
}

fn chain(blocks: usize, seed: u64) -> (ChainGenerator, Vec<Block>) {
    let mut gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 20,
        seed,
    });
    let blocks = (0..blocks).map(|_| gen.next_block().unwrap()).collect();
    (gen, blocks)
}

/// The tweak rows `blocks` (from height 1) should have, their prevouts from the blocks
/// themselves: per height, txid, tweak and taproot outputs.
fn expected(blocks: &[&Block]) -> Vec<Vec<(bitcoin::Txid, [u8; 33], usize)>> {
    let mut outputs: HashMap<OutPoint, TxOut> = HashMap::new();
    let mut out = Vec::new();
    for block in blocks {
        let mut rows = Vec::new();
        for tx in &block.txdata {
            let txid = tx.compute_txid();
            if !tx.is_coinbase() {
                let prevouts: Vec<TxOut> = tx
                    .input
                    .iter()
                    .map(|i| outputs[&i.previous_output].clone())
                    .collect();
                if let Some(t) = tx_tweak(tx, &prevouts) {
                    rows.push((txid, t.tweak, t.outputs.len()));
                }
            }
            for (vout, o) in tx.output.iter().enumerate() {
                outputs.insert(OutPoint::new(txid, vout as u32), o.clone());
            }
        }
        out.push(rows);
    }
    out
}

/// The tweak rows the index serves for heights 1..=n.
fn served(index: &Index, n: u32) -> Vec<Vec<(bitcoin::Txid, [u8; 33], usize)>> {
    let view = index.reader();
    (1..=n)
        .map(|h| {
            view.tweaks_at(h)
                .unwrap()
                .unwrap_or_else(|| panic!("no tweaks served at {h}"))
                .into_iter()
                .map(|(txid, row)| (txid, row.tweak, row.outputs.len()))
                .collect()
        })
        .collect()
}

#[test]
fn every_eligible_transaction_has_its_tweak_through_a_reorg() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, index) = open(tmp.path(), true);
    let (mut gen, common) = chain(120, 52);
    let mut fork = gen.fork(5);
    let a: Vec<Block> = (0..5).map(|_| gen.next_block().unwrap()).collect();
    let b: Vec<Block> = (0..7).map(|_| fork.next_block().unwrap()).collect();
    for blk in common.iter().chain(&a) {
        v.submit_block(&serialize(blk)).unwrap();
    }
    index.sync(&v).unwrap();
    let on_a: Vec<&Block> = common.iter().chain(&a).collect();
    let want = expected(&on_a);
    let eligible: usize = want.iter().map(Vec::len).sum();
    assert!(
        eligible > 50,
        "the chain has eligible transactions: {eligible}"
    );
    assert_eq!(served(&index, 125), want);
    for blk in &b {
        v.submit_block(&serialize(blk)).unwrap();
    }
    index.sync(&v).unwrap();
    let on_b: Vec<&Block> = common.iter().chain(&b).collect();
    assert_eq!(served(&index, 127), expected(&on_b));
    assert_eq!(index.reader().tweaks_at(128).unwrap(), None);
    // Nothing of branch A is left: the rows are a fresh index's of the same chain.
    let fresh_dir = tempfile::tempdir().unwrap();
    let (fv, fresh) = open(fresh_dir.path(), true);
    for blk in &on_b {
        fv.submit_block(&serialize(*blk)).unwrap();
    }
    fresh.sync(&fv).unwrap();
    assert_eq!(index.dump().unwrap(), fresh.dump().unwrap());
}

#[test]
fn tweaks_turned_on_later_or_after_an_upgrade_are_built_as_from_the_start() {
    let (_, blocks) = chain(110, 53);
    let build = |dir: &Path, tweaks: bool| {
        let (v, index) = open(dir, tweaks);
        for blk in &blocks {
            v.submit_block(&serialize(blk)).unwrap();
        }
        index.sync(&v).unwrap();
    };
    let reference_dir = tempfile::tempdir().unwrap();
    build(reference_dir.path(), true);
    let (_rv, reference) = open(reference_dir.path(), true);
    let reference_rows = reference.dump().unwrap();

    // Indexed without tweaks, then opened with them: none served until the backfill ran.
    let later = tempfile::tempdir().unwrap();
    build(later.path(), false);
    let (v, index) = open(later.path(), true);
    assert!(!index.tweaks_ready().unwrap());
    assert_eq!(index.reader().tweaks_at(5).unwrap(), None);
    let stats = index.sync(&v).unwrap();
    assert_eq!(stats.connected, 0);
    assert!(index.tweaks_ready().unwrap());
    assert_eq!(index.dump().unwrap(), reference_rows);

    // A schema-3 store (no tweaks, no marker) is upgraded, marked, and built the same way.
    let upgraded = tempfile::tempdir().unwrap();
    build(upgraded.path(), true);
    {
        let (_v, index) = open(upgraded.path(), true);
        let store = index.store();
        let mut batch = rocksdb::WriteBatch::default();
        batch.delete_range_cf(store.cf(cf::TWEAKS), [0u8; 5], [0xffu8; 5]);
        batch.put_cf(store.cf(cf::META), meta::VERSION, 3u32.to_le_bytes());
        store.write(batch).unwrap();
    }
    let (v, index) = open(upgraded.path(), true);
    assert!(!index.tweaks_ready().unwrap());
    index.sync(&v).unwrap();
    assert_eq!(index.dump().unwrap(), reference_rows);
    // Turned off, the store says so and its rows are gone; turned on again, all are built.
    drop((v, index));
    {
        let (_v, off) = open(upgraded.path(), false);
        let store = off.store();
        assert!(store.get(cf::META, meta::TWEAKS_OFF).unwrap().is_some());
        assert_eq!(store.scan_prefix(None, cf::TWEAKS, &[]).count(), 0);
    }
    let (v, index) = open(upgraded.path(), true);
    index.sync(&v).unwrap();
    assert!(index.tweaks_ready().unwrap());
    assert_eq!(index.dump().unwrap(), reference_rows);
}

//! The index against expectations this test computes itself from the raw blocks, across a
//! reorg, and against a fresh index of the same chain.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use bitcoin::consensus::serialize;
use bitcoin::{Block, Txid};

use cairn::generate::{ChainGenerator, GenerateOptions};
use cairn::index::Index;
use cairn::kernel::Validator;
use cairn::store::Store;
use cairn::types::Network;

fn open(dir: &Path) -> (Validator, Index) {
    let (validator, index, _) = common::open_index(dir);
    (validator, index)
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
        let want: Vec<_> = e
            .unspent
            .get(sh)
            .map(|m| m.iter().collect())
            .unwrap_or_default();
        let got = index.unspent(sh, usize::MAX).unwrap();
        assert_eq!(got.len(), want.len(), "unspent of {}", sh.to_electrum_hex());
        for (u, ((h, _, vout), (txid, value))) in got.iter().zip(want) {
            assert_eq!(
                (u.txid, u.vout, u.height, u.value),
                (*txid, *vout, *h, *value)
            );
        }
        let balance: u64 = e
            .unspent
            .get(sh)
            .map(|m| m.values().map(|v| v.1).sum())
            .unwrap_or(0);
        assert_eq!(index.balance(sh).unwrap(), balance);
    }
    for (txid, (height, pos)) in &e.positions {
        let p = index.tx_position(txid).unwrap().unwrap();
        assert_eq!((p.height, p.pos), (*height, *pos));
        let raw = serialize(&blocks[*height as usize - 1]);
        let tx: bitcoin::Transaction =
            bitcoin::consensus::deserialize(&raw[p.offset as usize..(p.offset + p.len) as usize])
                .unwrap();
        assert_eq!(tx.compute_txid(), *txid);
        // The same bytes straight from the kernel's block files.
        let bytes = index
            .reader()
            .raw_tx(txid)
            .unwrap()
            .expect("mapped in the block files")
            .bytes;
        assert_eq!(bytes, raw[p.offset as usize..(p.offset + p.len) as usize]);
    }
    for (op, (txid, vin, height)) in &e.spent_by {
        assert_eq!(
            index
                .spender(&op.txid, op.vout)
                .unwrap()
                .map(|s| (s.txid, s.vin, s.height)),
            Some((*txid, *vin, *height))
        );
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
    let mut gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 30,
        seed: 8,
    });
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
    if !chain_b
        .iter()
        .any(|b| b.txdata.iter().any(|t| t.compute_txid() == only_a))
    {
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
    let mut gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 20,
        seed: 9,
    });
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

/// Issue 12, part 3: a query holds no lock while it reads, so a commit never waits for one, and
/// every answer is the index's state after some whole commit: during a reorg a reader never sees
/// a block half undone or half written.
#[test]
fn readers_see_whole_commits_during_a_reorg_and_never_hold_up_the_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, index) = open(tmp.path());
    let mut gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 30,
        seed: 31,
    });
    let common = generated(&mut gen, 150);
    let mut fork = gen.fork(1);
    let branch_a = generated(&mut gen, 20);
    let branch_b = generated(&mut fork, 25);
    submit(&v, &common);
    submit(&v, &branch_a);
    index.sync(&v).unwrap();

    // Holding a view (what a query does while it scans) does not stop a commit.
    let index = Arc::new(index);
    let v = Arc::new(v);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let (i2, v2, branch) = (index.clone(), v.clone(), branch_b.clone());
    std::thread::spawn(move || {
        let view = i2.view();
        submit(&v2, &branch[..1]);
        let _ = done_tx.send(i2.sync(&v2).map(|s| s.connected));
        drop(view);
    });
    let synced = done_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the commit waited for a reader");
    assert_eq!(
        synced.unwrap(),
        0,
        "one block of B has less work than A: nothing to do yet"
    );

    // Every state the reorg may pass through: the common chain plus a prefix of either branch.
    let mut states: Vec<Vec<Block>> = Vec::new();
    for k in 0..=branch_a.len() {
        states.push(common.iter().chain(&branch_a[..k]).cloned().collect());
    }
    for k in 1..=branch_b.len() {
        states.push(common.iter().chain(&branch_b[..k]).cloned().collect());
    }
    let expected: Vec<_> = states.iter().map(|s| common::expected(s)).collect();
    let mut watched: Vec<_> = expected.last().unwrap().history.keys().copied().collect();
    watched.sort_by_key(|sh| sh.to_electrum_hex());
    watched.truncate(40);
    // Each answer on its own must be that of some state.
    let allowed = |sh: &cairn::types::ScriptHash, got: &[(Txid, u32)], balance: u64| {
        let history_of_a_state = expected
            .iter()
            .any(|e| e.history.get(sh).map(Vec::as_slice).unwrap_or_default() == got);
        let balance_of_a_state = expected.iter().any(|e| {
            e.unspent
                .get(sh)
                .map(|m| m.values().map(|v| v.1).sum())
                .unwrap_or(0)
                == balance
        });
        history_of_a_state && balance_of_a_state
    };

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (index, stop, watched) = (index.clone(), stop.clone(), watched.clone());
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    for sh in &watched {
                        let got = index.history(sh, usize::MAX).unwrap();
                        let balance = index.balance(sh).unwrap();
                        seen.push((
                            *sh,
                            got.iter().map(|h| (h.txid, h.height)).collect::<Vec<_>>(),
                            balance,
                        ));
                    }
                }
                seen
            })
        })
        .collect();
    submit(&v, &branch_b[1..]);
    let stats = index.sync(&v).unwrap();
    assert_eq!((stats.disconnected, stats.connected), (20, 25));
    std::thread::sleep(std::time::Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut observed = 0;
    for r in readers {
        for (sh, got, balance) in r.join().unwrap() {
            assert!(
                allowed(&sh, &got, balance),
                "a reader saw a state no commit left: {} with {} entries, balance {balance}",
                sh.to_electrum_hex(),
                got.len()
            );
            observed += 1;
        }
    }
    assert!(observed > 0);
    check(&index, &states.last().unwrap()[..]);
}

/// After a crash a block record can hold other bytes than its header names: Core preallocates
/// its files with zeros, so a record's head can reach the disk before its body, and Core may
/// write over a record it lost. Such a record of the tip block, written where the next one
/// goes (the index maps it, as it would after a restart), is never served: the bytes are read
/// through the kernel instead (the output of one too), never the zeros.
#[test]
fn a_torn_record_of_a_block_is_never_served_as_its_transactions() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, index) = open(tmp.path());
    let mut gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 5,
        seed: 3,
    });
    let blocks = generated(&mut gen, 110);
    submit(&v, &blocks);
    index.sync(&v).unwrap();
    let tip = blocks.last().unwrap();
    let tx = &tip.txdata[1];
    let txid = tx.compute_txid();
    let good = serialize(tx);
    assert_eq!(index.reader().raw_tx(&txid).unwrap().unwrap().bytes, good);
    let spent_in_tip: Vec<bitcoin::OutPoint> = tip
        .txdata
        .iter()
        .flat_map(|t| t.input.iter().map(|i| i.previous_output))
        .collect();
    let op = tip.txdata[1..]
        .iter()
        .flat_map(|t| {
            let txid = t.compute_txid();
            (0..t.output.len() as u32).map(move |vout| bitcoin::OutPoint { txid, vout })
        })
        .find(|op| !spent_in_tip.contains(op))
        .expect("an output the tip block leaves unspent");
    assert!(index.confirmed_unspent(&op).unwrap().is_some());

    tear_record_after_the_last(&tmp.path().join("kernel/blocks"), tip);
    index.sync(&v).unwrap(); // maps the torn record: the later of two with the same hash

    assert!(
        index.reader().raw_tx(&txid).unwrap().is_none(),
        "zeros served as the transaction"
    );
    let bytes = index
        .reader()
        .confirmed_tx(&v, &txid)
        .unwrap()
        .expect("read through the kernel")
        .bytes;
    assert_eq!(bytes, good);
    // Without a kernel to read through, an error; with one, the output.
    let err = index.confirmed_unspent(&op).unwrap_err().to_string();
    assert!(err.contains("not readable from the block files"), "{err}");
    let v = Arc::new(v);
    index.read_through(&v);
    let want = tip
        .txdata
        .iter()
        .find(|t| t.compute_txid() == op.txid)
        .map(|t| t.output[op.vout as usize].clone());
    let got = index
        .confirmed_unspent(&op)
        .unwrap()
        .map(|coin| coin.output);
    assert_eq!(got, want);
}

/// The indexer reads blocks from the kernel's block files where the scan found them. Records
/// of the next two blocks that are not them (one torn: its head and zeros; one whose last
/// transaction pays a satoshi more than the header commits to), mapped
/// before those blocks are indexed, are read through the kernel instead: the index equals one
/// that read every block through the kernel.
#[test]
fn blocks_whose_records_are_not_them_are_indexed_from_the_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, index, store) = common::open_index(tmp.path());
    let mut gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 5,
        seed: 4,
    });
    let blocks = generated(&mut gen, 112);
    submit(&v, &blocks[..110]);
    index.sync(&v).unwrap();
    submit(&v, &blocks[110..]);
    let dir = tmp.path().join("kernel/blocks");
    tear_record_after_the_last(&dir, &blocks[110]);
    let mut other = blocks[111].clone();
    if let Some(last) = other.txdata.last_mut() {
        last.output[0].value += bitcoin::Amount::from_sat(1);
    }
    write_record_after_the_last(&dir, &serialize(&other));
    index.sync(&v).unwrap(); // maps both records, then indexes the two blocks
    assert_eq!(index.tip().map(|(h, _)| h), Some(112));
    // Both records were read and found not to be their blocks: unmapped (the block before
    // them keeps its place).
    let mapped = |b: &Block| {
        let key = cairn::store::schema::BlockPosRow::key(&b.block_hash());
        let row = store.get(cairn::store::schema::cf::BLOCKPOS, &key).unwrap();
        row.is_some()
    };
    assert!(mapped(&blocks[109]));
    assert!(!mapped(&blocks[110]) && !mapped(&blocks[111]));

    let store = Arc::new(Store::open(&tmp.path().join("through-kernel")).unwrap());
    let through_kernel = Index::open(store, None).unwrap();
    through_kernel.sync(&v).unwrap();
    assert!(index.dump().unwrap() == through_kernel.dump().unwrap());
}

/// Writes `block`'s head (magic, size, header) and zeros for its body where the kernel's next
/// record would go: a record torn by a crash.
fn tear_record_after_the_last(dir: &Path, block: &Block) {
    let raw = serialize(block);
    let mut torn = raw[..80].to_vec();
    torn.resize(raw.len(), 0);
    write_record_after_the_last(dir, &torn);
}

/// Writes a record of `raw` (magic, size, bytes) where the kernel's next record would go.
fn write_record_after_the_last(dir: &Path, raw: &[u8]) {
    use cairn::kernel::blockfiles::{read_xor_key, xor_in_place, FilePos, KernelBlockFiles};
    use std::os::unix::fs::FileExt;

    let (_, next) = KernelBlockFiles::new(dir, Network::Regtest.magic())
        .scan_from(FilePos::default())
        .unwrap();
    let mut record = Network::Regtest.magic().to_vec();
    record.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    record.extend_from_slice(raw);
    xor_in_place(&read_xor_key(dir).unwrap(), &mut record, next.offset);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(format!("blk{:05}.dat", next.file)))
        .unwrap();
    file.write_all_at(&record, next.offset).unwrap();
}

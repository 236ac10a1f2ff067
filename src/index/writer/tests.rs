//! The rows [`connect`] and [`disconnect`] write, for a block built here, against the layout of
//! `migrations/schema.md` spelled out byte by byte: no store.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bitcoin::absolute::LockTime;
use bitcoin::bip158::{BlockFilter, FilterHeader};
use bitcoin::block::{Header, Version};
use bitcoin::hashes::{sha256, Hash};
use bitcoin::transaction::Version as TxVersion;
use bitcoin::{
    Amount, Block, BlockHash, CompactTarget, OutPoint, ScriptBuf, Sequence, Transaction, TxIn,
    TxMerkleNode, TxOut, Txid, Witness,
};

use super::*;
use crate::index::rows::{prepare, prepare_from_files, Extras, PrepareError, PreparedBlock};
use crate::kernel::{BlockUndo, SpentOutput};

impl StoredTxNums for HashMap<Txid, TxNum> {
    fn stored_txnum(&self, txid: &Txid) -> Result<Option<TxNum>, IndexError> {
        Ok(self.get(txid).copied())
    }
}

/// Rows by column family and key: what a store holds.
type State = BTreeMap<(&'static str, Vec<u8>), Vec<u8>>;

/// Applies a batch's rows in the order they were added (as RocksDB does, sorted and stable).
fn apply(state: &mut State, batch: &SortedBatch) {
    for (cf, key, value) in batch.rows() {
        match value {
            Some(value) => state.insert((cf, key), value),
            None => state.remove(&(cf, key)),
        };
    }
}

/// The keys a batch deletes, per column family.
fn deleted(batch: &SortedBatch) -> BTreeSet<(&'static str, Vec<u8>)> {
    batch
        .rows()
        .into_iter()
        .filter(|(_, _, value)| value.is_none())
        .map(|(cf, key, _)| (cf, key))
        .collect()
}

// The layout, written out as schema.md gives it.

fn txnum(n: u64) -> Vec<u8> {
    n.to_be_bytes()[3..].to_vec()
}

fn sh(script: &ScriptBuf) -> Vec<u8> {
    sha256::Hash::hash(script.as_bytes()).to_byte_array()[..12].to_vec()
}

fn outpoint(n: u64, vout: u32) -> Vec<u8> {
    [txnum(n), vout.to_be_bytes().to_vec()].concat()
}

fn history(script: &ScriptBuf, n: u64) -> (&'static str, Vec<u8>) {
    ("history", [sh(script), txnum(n)].concat())
}

fn utxo(script: &ScriptBuf, n: u64, vout: u32) -> (&'static str, Vec<u8>) {
    ("utxo", [sh(script), outpoint(n, vout)].concat())
}

/// A P2WPKH script, one per `n`.
fn script(n: u8) -> ScriptBuf {
    ScriptBuf::new_p2wpkh(&bitcoin::WPubkeyHash::from_byte_array([n; 20]))
}

fn op_return() -> ScriptBuf {
    ScriptBuf::from_bytes([vec![0x6a, 0x24], vec![0xaa; 36]].concat())
}

/// An output script too large to be spent: history, but no UTXO.
fn oversized() -> ScriptBuf {
    ScriptBuf::from_bytes(vec![0x51; 10_001])
}

fn pay(script: ScriptBuf, sats: u64) -> TxOut {
    TxOut {
        value: Amount::from_sat(sats),
        script_pubkey: script,
    }
}

fn tx(inputs: &[OutPoint], outputs: Vec<TxOut>) -> Transaction {
    Transaction {
        version: TxVersion::TWO,
        lock_time: LockTime::ZERO,
        input: inputs
            .iter()
            .map(|op| TxIn {
                previous_output: *op,
                script_sig: ScriptBuf::from_bytes(vec![0x55, 0x55]),
                sequence: Sequence::MAX,
                witness: Witness::new(),
            })
            .collect(),
        output: outputs,
    }
}

fn spent(out: TxOut, height: u32, coinbase: bool) -> SpentOutput {
    SpentOutput {
        txout: out,
        height,
        coinbase,
    }
}

/// Already indexed: P (TxNum 42) whose output 1 pays script 2, Q (TxNum 7) whose output 0
/// pays script 4.
fn stored_txids() -> (Txid, Txid) {
    (
        Txid::from_byte_array([0x11; 32]),
        Txid::from_byte_array([0x22; 32]),
    )
}

/// The store before the block: the two outputs it spends are unspent.
fn state_before() -> State {
    let mut state = State::new();
    state.insert(utxo(&script(2), 42, 1), 1000u64.to_le_bytes().to_vec());
    state.insert(utxo(&script(4), 7, 0), 5000u64.to_le_bytes().to_vec());
    state
}

/// The block at height 5: a coinbase (script 1 and an OP_RETURN); tx 1 spends P:1 (script 2)
/// into script 3 and back to script 2; tx 2 spends tx 1's first output and Q:0 into script 5
/// and an oversized script.
fn block() -> (Block, BlockUndo) {
    let (p, q) = stored_txids();
    let coinbase = tx(
        &[OutPoint::null()],
        vec![pay(script(1), 50_000), pay(op_return(), 0)],
    );
    let tx1 = tx(
        &[OutPoint::new(p, 1)],
        vec![pay(script(3), 600), pay(script(2), 300)],
    );
    let tx2 = tx(
        &[OutPoint::new(tx1.compute_txid(), 0), OutPoint::new(q, 0)],
        vec![pay(script(5), 5000), pay(oversized(), 100)],
    );
    let header = Header {
        version: Version::ONE,
        prev_blockhash: BlockHash::from_byte_array([9; 32]),
        merkle_root: TxMerkleNode::all_zeros(),
        time: 1,
        bits: CompactTarget::from_consensus(0x207f_ffff),
        nonce: 5,
    };
    let undo = BlockUndo {
        txs: vec![
            vec![spent(pay(script(2), 1000), 3, false)],
            vec![
                spent(pay(script(3), 600), 5, false),
                spent(pay(script(4), 5000), 2, true),
            ],
        ],
    };
    let block = Block {
        header,
        txdata: vec![coinbase, tx1, tx2],
    };
    (block, undo)
}

fn prepared() -> (Block, PreparedBlock) {
    let (block, undo) = block();
    let prepared = prepare(
        5,
        &bitcoin::consensus::serialize(&block),
        &undo,
        Extras {
            filter: true,
            tweaks: false,
        },
    )
    .unwrap();
    (block, prepared)
}

fn stored_lookup() -> HashMap<Txid, TxNum> {
    let (p, q) = stored_txids();
    HashMap::from([(p, TxNum(42)), (q, TxNum(7))])
}

/// The rows of the block connected with its coinbase at TxNum 100.
fn connected(prev_filter: Option<FilterHeader>) -> (SortedBatch, Option<FilterHeader>) {
    let (_, block) = prepared();
    let stored = stored_lookup();
    let mut lookup = TxNumLookup::over(&stored);
    let mut batch = SortedBatch::default();
    let header = connect(&mut batch, &mut lookup, &block, TxNum(100), prev_filter).unwrap();
    (batch, header)
}

#[test]
fn connect_writes_every_row_of_a_block() {
    let (block, prepared) = prepared();
    let (batch, _) = connected(None);
    let mut state = state_before();
    apply(&mut state, &batch);
    let mut want = State::new();
    // blocks: header, first TxNum, transaction count.
    let header = bitcoin::consensus::serialize(&block.header);
    let count = 3u32.to_le_bytes().to_vec();
    want.insert(
        ("blocks", 5u32.to_be_bytes().to_vec()),
        [header, txnum(100), count].concat(),
    );
    // txs and txid: each transaction's id, offset in the block and length.
    let mut offset: u32 = 80 + 1;
    for (i, t) in block.txdata.iter().enumerate() {
        let n = 100 + i as u64;
        let txid = t.compute_txid().to_byte_array();
        let len = bitcoin::consensus::serialize(t).len() as u32;
        let value = [
            txid.to_vec(),
            offset.to_le_bytes().to_vec(),
            len.to_le_bytes().to_vec(),
        ];
        want.insert(("txs", txnum(n)), value.concat());
        want.insert(("txid", [txid[..8].to_vec(), txnum(n)].concat()), vec![]);
        offset += len;
    }
    // history: outputs but the OP_RETURN, and spent outputs; script 2 both spent and paid by
    // tx 1 is one row.
    for (script, n) in [
        (script(1), 100),
        (script(2), 101),
        (script(3), 101),
        (script(3), 102),
        (script(4), 102),
        (script(5), 102),
        (oversized(), 102),
    ] {
        want.insert(history(&script, n), vec![]);
    }
    // utxo: the spendable new outputs that stay unspent (tx 1's first is spent by tx 2; the
    // spent P:1 and Q:0 are gone).
    want.insert(utxo(&script(1), 100, 0), 50_000u64.to_le_bytes().to_vec());
    want.insert(utxo(&script(2), 101, 1), 300u64.to_le_bytes().to_vec());
    want.insert(utxo(&script(5), 102, 0), 5000u64.to_le_bytes().to_vec());
    // spent: the spent outpoint to the spending TxNum and input index (LE).
    let by = |n: u64, vin: u32| [txnum(n), vin.to_le_bytes().to_vec()].concat();
    want.insert(("spent", outpoint(42, 1)), by(101, 0));
    want.insert(("spent", outpoint(101, 0)), by(102, 0));
    want.insert(("spent", outpoint(7, 0)), by(102, 1));
    // undo: checked on its own below.
    let undo_key = ("undo", 5u32.to_be_bytes().to_vec());
    let undo = state.remove(&undo_key).expect("an undo row");
    assert_eq!(state, want);
    assert_eq!(UndoRow::decode(&undo).unwrap(), expected_undo());
    // The only deletions: the outputs spent, the one created in the block after its put.
    let deletes = BTreeSet::from([
        utxo(&script(2), 42, 1),
        utxo(&script(3), 101, 0),
        utxo(&script(4), 7, 0),
    ]);
    assert_eq!(deleted(&batch), deletes);
    let utxo_rows: Vec<_> = batch.rows().into_iter().filter(|r| r.0 == "utxo").collect();
    let created = utxo(&script(3), 101, 0).1;
    let at = |deleting: bool| {
        utxo_rows
            .iter()
            .position(|(_, key, value)| *key == created && value.is_none() == deleting)
            .unwrap()
    };
    assert!(at(false) < at(true));
    assert_eq!(prepared.txs.len(), 3);
}

/// The undo row of the block, as schema.md lists it: per transaction its outputs' script hash
/// prefixes and what each input spent.
fn expected_undo() -> UndoRow {
    let prefix = |s: &ScriptBuf| -> [u8; 12] { sh(s).try_into().unwrap() };
    let input = |n: u64, vout: u32, s: &ScriptBuf, value: u64| UndoInput {
        spent: OutPointNum {
            txnum: TxNum(n),
            vout,
        },
        scripthash: prefix(s),
        value,
        spendable: true,
    };
    UndoRow {
        txs: vec![
            UndoTx {
                outputs: vec![prefix(&script(1)), prefix(&op_return())],
                inputs: vec![],
            },
            UndoTx {
                outputs: vec![prefix(&script(3)), prefix(&script(2))],
                inputs: vec![input(42, 1, &script(2), 1000)],
            },
            UndoTx {
                outputs: vec![prefix(&script(5)), prefix(&oversized())],
                inputs: vec![
                    input(101, 0, &script(3), 600),
                    input(7, 0, &script(4), 5000),
                ],
            },
        ],
    }
}

#[test]
fn undo_row_of_an_indexed_block_is_the_one_connect_wrote() {
    let (block, prepared) = prepared();
    let mut stored = stored_lookup();
    for (i, t) in block.txdata.iter().enumerate() {
        stored.insert(t.compute_txid(), TxNum(100 + i as u64));
    }
    let undo = undo_row_from(&TxNumLookup::over(&stored), &prepared).unwrap();
    assert_eq!(undo, expected_undo());
}

#[test]
fn connect_writes_the_filter_chained_on_its_parents() {
    let prev = FilterHeader::from_byte_array([3; 32]);
    let (_, prepared) = prepared();
    let (batch, header) = connected(Some(prev));
    let want = BlockFilter::new(&prepared.filter).filter_header(&prev);
    assert_eq!(header, Some(want));
    let rows: Vec<_> = batch
        .rows()
        .into_iter()
        .filter(|r| r.0 == "filters")
        .collect();
    let value = [want.to_byte_array().to_vec(), prepared.filter.clone()].concat();
    assert_eq!(
        rows,
        vec![("filters", 5u32.to_be_bytes().to_vec(), Some(value))]
    );
    assert!(!prepared.filter.is_empty());
    let (without, none) = connected(None);
    assert_eq!(none, None);
    assert!(without.rows().iter().all(|r| r.0 != "filters"));
}

#[test]
fn the_txnums_of_a_batchs_earlier_transactions_come_from_the_batch() {
    let (block, prepared) = prepared();
    let stored = stored_lookup();
    let mut lookup = TxNumLookup::over(&stored);
    let mut batch = SortedBatch::default();
    connect(&mut batch, &mut lookup, &prepared, TxNum(100), None).unwrap();
    let ids: Vec<Txid> = block.txdata.iter().map(|t| t.compute_txid()).collect();
    assert_eq!(lookup.get(&ids[2]).unwrap(), Some(TxNum(102)));
    assert_eq!(lookup.get(&stored_txids().0).unwrap(), Some(TxNum(42)));
    assert_eq!(
        lookup.get(&Txid::from_byte_array([0x33; 32])).unwrap(),
        None
    );
}

#[test]
fn a_spent_output_the_index_lacks_is_an_error() {
    let (_, prepared) = prepared();
    let (p, _) = stored_txids();
    let stored = HashMap::from([(stored_txids().1, TxNum(7))]);
    let mut batch = SortedBatch::default();
    let result = connect(
        &mut batch,
        &mut TxNumLookup::over(&stored),
        &prepared,
        TxNum(100),
        None,
    );
    let tx1 = prepared.txs[1].txid;
    assert!(
        matches!(result, Err(IndexError::MissingPrevout { txid, prev, height: 5 }) if txid == tx1 && prev == p),
        "{result:?}"
    );
}

#[test]
fn disconnect_undoes_what_connect_wrote() {
    let (block, _) = prepared();
    let (batch, _) = connected(Some(FilterHeader::all_zeros()));
    let mut state = state_before();
    apply(&mut state, &batch);
    let undo = UndoRow::decode(&state[&("undo", 5u32.to_be_bytes().to_vec())]).unwrap();
    let txids: Vec<Txid> = block.txdata.iter().map(|t| t.compute_txid()).collect();
    let parent = TipRow {
        height: 4,
        hash: block.header.prev_blockhash,
    };
    let mut undoing = SortedBatch::default();
    disconnect(&mut undoing, 5, &txids, &undo, TxNum(100), parent).unwrap();
    apply(&mut state, &undoing);
    let mut want = state_before();
    want.insert(("meta", b"tip".to_vec()), parent.encode().to_vec());
    assert_eq!(state, want);
    let short = disconnect(
        &mut SortedBatch::default(),
        5,
        &txids[..2],
        &undo,
        TxNum(100),
        parent,
    );
    assert!(matches!(short, Err(IndexError::Inconsistent(_))));
}

#[test]
fn genesis_outputs_are_in_the_history_but_not_unspent() {
    let coinbase = tx(&[OutPoint::null()], vec![pay(script(1), 50_000)]);
    let (mut block, _) = block();
    block.txdata = vec![coinbase];
    let raw = bitcoin::consensus::serialize(&block);
    let prepared = prepare(0, &raw, &BlockUndo::default(), Extras::default()).unwrap();
    let stored = HashMap::new();
    let mut batch = SortedBatch::default();
    connect(
        &mut batch,
        &mut TxNumLookup::over(&stored),
        &prepared,
        TxNum(0),
        None,
    )
    .unwrap();
    let families: BTreeSet<&str> = batch.rows().iter().map(|r| r.0).collect();
    assert_eq!(
        families,
        BTreeSet::from(["blocks", "txs", "txid", "history", "undo"])
    );
    let mut state = State::new();
    apply(&mut state, &batch);
    assert!(state.contains_key(&history(&script(1), 0)));
}

/// The store's lookup for a batch: a txid alone with its 8-byte prefix is found without its
/// `txs` row; ids sharing a prefix are told apart by those rows, a repeated id gives the newest;
/// the cursor sees the store as it was when it was made.
#[test]
fn store_lookups_tell_ids_sharing_a_prefix_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    let id = |first: u8, last: u8| {
        let mut bytes = [first; 32];
        bytes[31] = last;
        Txid::from_byte_array(bytes)
    };
    let (alone, twin_a, twin_b) = (id(1, 0), id(2, 0), id(2, 1));
    let rows = [(alone, 5), (twin_a, 6), (twin_b, 7), (twin_a, 9)];
    let mut batch = SortedBatch::default();
    for (txid, n) in rows {
        let t = TxNum(n);
        // The only id with its prefix gets no `txs` row: it must be found without reading one.
        if txid != alone {
            let row = TxRow {
                txid,
                offset: 0,
                len: 1,
            };
            batch.put(cf::TXS, TxRow::key(t), row.encode());
        }
        batch.put(cf::TXID, TxidKey::encode(&txid, t), []);
    }
    store.write(batch.into_write_batch(&store)).unwrap();
    let lookup = StoreTxNums::new(&store);
    assert_eq!(lookup.stored_txnum(&alone).unwrap(), Some(TxNum(5)));
    assert_eq!(lookup.stored_txnum(&twin_b).unwrap(), Some(TxNum(7)));
    assert_eq!(
        lookup.stored_txnum(&twin_a).unwrap(),
        Some(TxNum(9)),
        "the newest"
    );
    assert_eq!(
        lookup.stored_txnum(&id(2, 2)).unwrap(),
        None,
        "a prefix shared, no id"
    );
    assert_eq!(lookup.stored_txnum(&id(3, 0)).unwrap(), None);
    let mut later = SortedBatch::default();
    later.put(cf::TXID, TxidKey::encode(&id(3, 0), TxNum(10)), []);
    store.write(later.into_write_batch(&store)).unwrap();
    assert_eq!(
        lookup.stored_txnum(&id(3, 0)).unwrap(),
        None,
        "written after the cursor"
    );
    assert_eq!(
        StoreTxNums::new(&store).stored_txnum(&id(3, 0)).unwrap(),
        Some(TxNum(10))
    );
}

/// `block()` with a witness on transaction 1 and the coinbase's commitment to it, its merkle
/// root filled in.
fn committed_block() -> (Block, BlockUndo) {
    let (mut block, undo) = block();
    block.txdata[1].input[0].witness = Witness::from_slice(&[vec![7u8; 33]]);
    block.txdata[0].input[0].witness = Witness::from_slice(&[[0u8; 32]]);
    let root = block.witness_root().expect("a coinbase");
    let commitment = Block::compute_witness_commitment(&root, &[0u8; 32]);
    let mut script = vec![0x6a, 0x24, 0xaa, 0x21, 0xa9, 0xed];
    script.extend_from_slice(commitment.as_ref());
    block.txdata[0]
        .output
        .push(pay(ScriptBuf::from_bytes(script), 0));
    block.header.merkle_root = block.compute_merkle_root().expect("transactions");
    (block, undo)
}

/// Bytes read from the kernel's block files (which a crash can leave torn or written over)
/// are taken for a block only if they are it: its header, to their last byte, its
/// transactions (the merkle root) and, when tweaks are built from witnesses, its witnesses
/// (the commitment).
#[test]
fn bytes_from_the_block_files_are_taken_only_if_they_are_the_block() {
    let (block, undo) = committed_block();
    let hash = block.block_hash();
    let read = |block: &Block, tail: &[u8], tweaks: bool, hash: &BlockHash| {
        let mut raw = bitcoin::consensus::serialize(block);
        raw.extend_from_slice(tail);
        let extras = Extras {
            filter: true,
            tweaks,
        };
        prepare_from_files(5, &raw, &undo, extras, hash)
    };
    let refused =
        |r: Result<PreparedBlock, PrepareError>| matches!(r, Err(PrepareError::NotTheBlock { .. }));
    let prepared = read(&block, &[], true, &hash).expect("the block");
    let want = prepare(
        5,
        &bitcoin::consensus::serialize(&block),
        &undo,
        Extras {
            filter: true,
            tweaks: true,
        },
    )
    .unwrap();
    assert_eq!(prepared.txs.len(), want.txs.len());
    assert_eq!(prepared.filter, want.filter);
    assert!(refused(read(
        &block,
        &[],
        false,
        &BlockHash::from_byte_array([3; 32])
    )));
    assert!(refused(read(&block, &[0], false, &hash)), "a byte more");
    let mut paid_more = block.clone();
    paid_more.txdata[2].output[0].value += Amount::from_sat(1);
    assert!(refused(read(&paid_more, &[], false, &hash)));
    let mut witness = block.clone();
    witness.txdata[1].input[0].witness = Witness::from_slice(&[vec![8u8; 33]]);
    assert!(refused(read(&witness, &[], true, &hash)));
    assert!(
        read(&witness, &[], false, &hash).is_ok(),
        "no row but tweaks reads witnesses"
    );
}

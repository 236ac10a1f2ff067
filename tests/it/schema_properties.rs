//! Properties of the store's key and row encodings (`src/store/schema.rs`), checked with
//! proptest: every row decodes to what was encoded, keys sort in the order the queries scan them
//! (script hash prefix, then chain order), and no byte string, however damaged, makes a decoder
//! panic: it is a value or an error.

use bitcoin::hashes::Hash;
use bitcoin::{BlockHash, Txid};
use cairn::store::schema::{
    scripthash_prefix, BlockRow, FilterRow, HistoryKey, OutPointNum, SpentRow, TipRow, TxRow,
    TxidKey, UtxoKey,
};
use cairn::store::undo::{UndoInput, UndoRow, UndoTx};
use cairn::types::{ScriptHash, TxNum};
use proptest::prelude::*;

/// A TxNum a key can hold: 5 bytes, 2^40 transactions.
fn txnum() -> impl Strategy<Value = TxNum> {
    (0u64..1 << 40).prop_map(TxNum)
}

fn scripthash() -> impl Strategy<Value = ScriptHash> {
    any::<[u8; 32]>().prop_map(ScriptHash)
}

fn outpoint() -> impl Strategy<Value = OutPointNum> {
    (txnum(), any::<u32>()).prop_map(|(txnum, vout)| OutPointNum { txnum, vout })
}

proptest! {
    // A failing case is printed, shrunk, with its seed; it is then written here as a test of
    // its own (integration tests have no source-relative place for proptest's regression files).
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn txnum_round_trips_and_sorts_as_numbers(a in txnum(), b in txnum()) {
        prop_assert_eq!(TxNum::decode(&a.encode()), Some(a));
        prop_assert_eq!(a.encode().cmp(&b.encode()), a.cmp(&b));
    }

    #[test]
    fn history_keys_sort_by_script_then_chain_order(sh_a in scripthash(), sh_b in scripthash(), a in txnum(), b in txnum()) {
        let (ka, kb) = (HistoryKey::encode(&sh_a, a), HistoryKey::encode(&sh_b, b));
        prop_assert_eq!(HistoryKey::decode(&ka).unwrap(), a);
        prop_assert!(ka.starts_with(&scripthash_prefix(&sh_a)));
        prop_assert_eq!(ka.cmp(&kb), (scripthash_prefix(&sh_a), a).cmp(&(scripthash_prefix(&sh_b), b)));
    }

    #[test]
    fn utxo_keys_round_trip_and_sort_by_script_then_outpoint(sh_a in scripthash(), sh_b in scripthash(), a in outpoint(), b in outpoint(), value in any::<u64>()) {
        let (ka, kb) = (UtxoKey::encode(&sh_a, a), UtxoKey::encode(&sh_b, b));
        prop_assert_eq!(UtxoKey::decode(&ka).unwrap(), a);
        prop_assert_eq!(ka.cmp(&kb), (scripthash_prefix(&sh_a), a).cmp(&(scripthash_prefix(&sh_b), b)));
        prop_assert_eq!(UtxoKey::decode_value(&value.to_le_bytes()).unwrap(), value);
    }

    #[test]
    fn outpoints_round_trip_and_sort_as_outpoints(a in outpoint(), b in outpoint()) {
        prop_assert_eq!(OutPointNum::decode(&a.encode(), "spent").unwrap(), a);
        prop_assert_eq!(a.encode().cmp(&b.encode()), a.cmp(&b));
    }

    #[test]
    fn txid_keys_lead_with_the_txid_prefix(bytes in any::<[u8; 32]>(), n in txnum()) {
        let txid = Txid::from_byte_array(bytes);
        let key = TxidKey::encode(&txid, n);
        prop_assert!(key.starts_with(&TxidKey::prefix(&txid)));
        prop_assert_eq!(TxidKey::decode(&key).unwrap(), n);
    }

    #[test]
    fn rows_round_trip(n in txnum(), vin in any::<u32>(), height in any::<u32>(), hash in any::<[u8; 32]>(),
                       offset in any::<u32>(), len in any::<u32>(), count in any::<u32>(),
                       // A serialized filter has at least its element count (one byte for none).
                       filter in proptest::collection::vec(any::<u8>(), 1..300)) {
        let spent = SpentRow { txnum: n, vin };
        prop_assert_eq!(SpentRow::decode(&spent.encode()).unwrap(), spent);
        let tip = TipRow { height, hash: BlockHash::from_byte_array(hash) };
        prop_assert_eq!(TipRow::decode(&tip.encode()).unwrap(), tip);
        let tx = TxRow { txid: Txid::from_byte_array(hash), offset, len };
        prop_assert_eq!(TxRow::decode(&tx.encode()).unwrap(), tx);
        let header = bitcoin::constants::genesis_block(bitcoin::Network::Regtest).header;
        let block = BlockRow { header, first_txnum: n, tx_count: count };
        prop_assert_eq!(BlockRow::decode(&block.encode()).unwrap(), block);
        prop_assert_eq!(BlockRow::decode_key(&BlockRow::key(height)).unwrap(), height);
        let row = FilterRow { header: bitcoin::bip158::FilterHeader::from_byte_array(hash), filter };
        prop_assert_eq!(FilterRow::decode(&row.encode()).unwrap(), row.clone());
        prop_assert_eq!(FilterRow::decode_header(&row.encode()).unwrap(), row.header);
    }

    /// Damaged or foreign bytes: every decoder answers, none panics.
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let _ = TxNum::decode(&bytes);
        let _ = HistoryKey::decode(&bytes);
        let _ = UtxoKey::decode(&bytes);
        let _ = UtxoKey::decode_value(&bytes);
        let _ = OutPointNum::decode(&bytes, "spent");
        let _ = TxidKey::decode(&bytes);
        let _ = SpentRow::decode(&bytes);
        let _ = TipRow::decode(&bytes);
        let _ = TxRow::decode(&bytes);
        let _ = BlockRow::decode(&bytes);
        let _ = BlockRow::decode_key(&bytes);
        let _ = FilterRow::decode(&bytes);
        let _ = FilterRow::decode_header(&bytes);
        let _ = cairn::store::schema::ScanPosRow::decode(&bytes);
        let _ = cairn::store::schema::BlockPosRow::decode(&bytes);
        let _ = UndoRow::decode(&bytes);
    }

    /// `undo` rows of any shape round-trip, and every cut-short value is an error.
    #[test]
    fn undo_rows_round_trip(row in undo_row()) {
        let bytes = row.encode();
        prop_assert_eq!(UndoRow::decode(&bytes).unwrap(), row);
        prop_assert!(UndoRow::decode(&bytes[..bytes.len() - 1]).is_err());
    }
}

fn undo_row() -> impl Strategy<Value = UndoRow> {
    let input = (outpoint(), any::<[u8; 12]>(), any::<u64>(), any::<bool>()).prop_map(
        |(spent, scripthash, value, spendable)| UndoInput {
            spent,
            scripthash,
            value,
            spendable,
        },
    );
    let tx = (
        proptest::collection::vec(any::<[u8; 12]>(), 0..4),
        proptest::collection::vec(input, 0..4),
    )
        .prop_map(|(outputs, inputs)| UndoTx { outputs, inputs });
    proptest::collection::vec(tx, 0..5).prop_map(|txs| UndoRow { txs })
}

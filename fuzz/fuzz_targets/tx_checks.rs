//! The mempool's transaction checks: `decode` (Core's `UnserializeTransaction`),
//! `check_transaction` (`CheckTransaction`) and `check_tx_inputs` (`CheckTxInputs`) on a fuzzed
//! transaction and fuzzed spent amounts, then the whole `Mempool::accept` against an empty index.
//!
//! Input: one byte `k`, then the transaction, then the last `8 * k` bytes as the spent amounts
//! (little-endian u64s, one per input, missing ones 0).
#![no_main]

use std::sync::{Arc, OnceLock};

use bitcoin::{Amount, ScriptBuf, TxOut};
use cairn::config::MempoolConfig;
use cairn::index::Index;
use cairn::policy::consensus::{check_transaction, check_tx_inputs, decode};
use cairn::mempool::Mempool;
use cairn::store::Store;
use libfuzzer_sys::fuzz_target;

fn empty_index() -> &'static (Index, tempfile::TempDir) {
    static INDEX: OnceLock<(Index, tempfile::TempDir)> = OnceLock::new();
    INDEX.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(Store::open(&dir.path().join("index")).expect("store"));
        (Index::open(store, None).expect("index"), dir)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let split = rest.len().saturating_sub(8 * usize::from(k));
    let (raw, tail) = rest.split_at(split);
    let amounts: Vec<u64> = tail
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();

    let (index, _) = empty_index();
    let mempool = Mempool::new(MempoolConfig::default());
    let accepted = mempool.accept(raw, index);

    let Ok(tx) = decode(raw) else {
        assert!(accepted.is_err());
        return;
    };
    // What cairn hashes for the txid is what it re-encodes: it must be the bytes it was sent.
    assert_eq!(bitcoin::consensus::serialize(&tx), raw);
    if check_transaction(&tx).is_err() {
        assert!(accepted.is_err());
        return;
    }
    let outputs: u128 = tx.output.iter().map(|o| u128::from(o.value.to_sat())).sum();
    assert!(outputs <= u128::from(Amount::MAX_MONEY.to_sat()));
    // Nothing is confirmed in an empty index: no input can be found.
    assert!(accepted.is_err());

    let prevouts: Vec<TxOut> = (0..tx.input.len())
        .map(|i| TxOut {
            value: Amount::from_sat(amounts.get(i).copied().unwrap_or(0)),
            script_pubkey: ScriptBuf::new(),
        })
        .collect();
    let inputs: u128 = prevouts.iter().map(|p| u128::from(p.value.to_sat())).sum();
    match check_tx_inputs(&tx, &prevouts) {
        Ok(fee) => {
            assert!(inputs <= u128::from(Amount::MAX_MONEY.to_sat()));
            assert_eq!(u128::from(fee) + outputs, inputs);
        }
        Err(_) => assert!(
            inputs < outputs
                || inputs > u128::from(Amount::MAX_MONEY.to_sat())
                || prevouts.iter().any(|p| p.value > Amount::MAX_MONEY)
        ),
    }
});

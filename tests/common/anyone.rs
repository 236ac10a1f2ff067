//! Coins anyone can spend: pay-to-witness-script-hash of `OP_TRUE`, spent with that script as
//! the only witness item (standard under both profiles), so an attack test builds thousands of
//! transactions without signing one.

use bitcoin::{
    absolute::LockTime, transaction::Version, Amount, OutPoint, ScriptBuf, Sequence, Transaction,
    TxIn, TxOut, Witness,
};

/// The witness script: `OP_TRUE`.
fn script() -> ScriptBuf {
    ScriptBuf::from_bytes(vec![0x51])
}

/// The output script paying to it.
pub fn output_script() -> ScriptBuf {
    ScriptBuf::new_p2wsh(&script().wscript_hash())
}

/// Its regtest address.
pub fn address() -> String {
    bitcoin::Address::from_script(&output_script(), bitcoin::Network::Regtest)
        .unwrap()
        .to_string()
}

/// An output of `sat` to it.
pub fn out(sat: u64) -> TxOut {
    TxOut {
        value: Amount::from_sat(sat),
        script_pubkey: output_script(),
    }
}

/// A version 2 transaction spending `coins` (all paying to it) to `outputs`.
pub fn spend(coins: &[OutPoint], outputs: Vec<TxOut>) -> Transaction {
    let input = coins
        .iter()
        .map(|&previous_output| TxIn {
            previous_output,
            script_sig: ScriptBuf::new(),
            sequence: Sequence::ENABLE_RBF_NO_LOCKTIME,
            witness: Witness::from_slice(&[script().as_bytes()]),
        })
        .collect();
    Transaction {
        version: Version::TWO,
        lock_time: LockTime::ZERO,
        input,
        output: outputs,
    }
}

/// The transaction's hex.
pub fn hex(tx: &Transaction) -> String {
    bitcoin::consensus::encode::serialize_hex(tx)
}

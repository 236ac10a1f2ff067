//! `blockchain.transaction.get` with `verbose=true`: the shape of bitcoind's
//! `getrawtransaction <txid> true`.

use bitcoin::hex::DisplayHex;
use bitcoin::{Address, BlockHash, Network, Script, Transaction};
use serde_json::{json, Value};

/// Core's name for an output script's type.
fn script_type(script: &Script) -> &'static str {
    if script.is_p2pkh() {
        "pubkeyhash"
    } else if script.is_p2sh() {
        "scripthash"
    } else if script.is_p2wpkh() {
        "witness_v0_keyhash"
    } else if script.is_p2wsh() {
        "witness_v0_scripthash"
    } else if script.is_p2tr() {
        "witness_v1_taproot"
    } else if script.is_op_return() {
        "nulldata"
    } else if script.is_p2pk() {
        "pubkey"
    } else if script.is_multisig() {
        "multisig"
    } else if script.is_witness_program() {
        "witness_unknown"
    } else {
        "nonstandard"
    }
}

/// The verbose form of a mempool transaction (no block fields, as bitcoind).
pub fn unconfirmed(tx: &Transaction, bytes: &[u8], network: Network) -> Value {
    let mut v = base(tx, bytes, network);
    if let Some(obj) = v.as_object_mut() {
        obj.retain(|k, _| {
            !["blockhash", "confirmations", "time", "blocktime"].contains(&k.as_str())
        });
    }
    v
}

/// The verbose form of a confirmed transaction.
pub fn transaction(
    tx: &Transaction,
    bytes: &[u8],
    network: Network,
    blockhash: &BlockHash,
    blocktime: u32,
    confirmations: u32,
) -> Value {
    let mut v = base(tx, bytes, network);
    v["blockhash"] = json!(blockhash.to_string());
    v["confirmations"] = json!(confirmations);
    v["time"] = json!(blocktime);
    v["blocktime"] = json!(blocktime);
    v
}

fn base(tx: &Transaction, bytes: &[u8], network: Network) -> Value {
    let vin: Vec<Value> = tx
        .input
        .iter()
        .map(|input| {
            let mut v = if tx.is_coinbase() {
                json!({"coinbase": input.script_sig.as_bytes().to_lower_hex_string()})
            } else {
                json!({
                    "txid": input.previous_output.txid.to_string(),
                    "vout": input.previous_output.vout,
                    "scriptSig": {
                        "asm": input.script_sig.to_asm_string(),
                        "hex": input.script_sig.as_bytes().to_lower_hex_string(),
                    },
                })
            };
            if !input.witness.is_empty() {
                v["txinwitness"] = Value::Array(
                    input
                        .witness
                        .iter()
                        .map(|w| json!(w.to_lower_hex_string()))
                        .collect(),
                );
            }
            v["sequence"] = json!(input.sequence.0);
            v
        })
        .collect();
    let vout: Vec<Value> = tx
        .output
        .iter()
        .enumerate()
        .map(|(n, out)| {
            let script = &out.script_pubkey;
            let mut spk = json!({
                "asm": script.to_asm_string(),
                "hex": script.as_bytes().to_lower_hex_string(),
                "type": script_type(script),
            });
            if let Ok(address) = Address::from_script(script, network) {
                spk["address"] = json!(address.to_string());
            }
            json!({"value": out.value.to_btc(), "n": n, "scriptPubKey": spk})
        })
        .collect();
    json!({
        "txid": tx.compute_txid().to_string(),
        "hash": tx.compute_wtxid().to_string(),
        "version": tx.version.0,
        "size": bytes.len(),
        "vsize": tx.vsize(),
        "weight": tx.weight().to_wu(),
        "locktime": tx.lock_time.to_consensus_u32(),
        "vin": vin,
        "vout": vout,
        "hex": bytes.to_lower_hex_string(),
    })
}

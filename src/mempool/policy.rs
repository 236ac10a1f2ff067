//! Core's simple standardness rules and script verification through the kernel.

use bitcoin::{Transaction, TxOut};

use super::Rejection;

/// Minimum relay fee rate, sat/vB (Core's -minrelaytxfee default, 1000 sat/kvB).
pub const MIN_RELAY_FEERATE: u64 = 1;
/// Largest standard transaction weight (Core's MAX_STANDARD_TX_WEIGHT).
pub const MAX_STANDARD_TX_WEIGHT: u64 = 400_000;
/// Largest OP_RETURN output script (Core's default -datacarriersize plus the opcodes).
pub const MAX_OP_RETURN_RELAY: usize = 83;

fn non_standard(reason: &str) -> Rejection {
    Rejection::NonStandard(reason.to_string())
}

/// Size, version, output script and dust rules.
pub fn check_standard(tx: &Transaction) -> Result<(), Rejection> {
    if tx.input.is_empty() {
        return Err(non_standard("bad-txns-vin-empty"));
    }
    if tx.output.is_empty() {
        return Err(non_standard("bad-txns-vout-empty"));
    }
    if !(1..=3).contains(&tx.version.0) {
        return Err(non_standard("version"));
    }
    if tx.weight().to_wu() > MAX_STANDARD_TX_WEIGHT {
        return Err(non_standard("tx-size"));
    }
    let mut data_outputs = 0;
    for out in &tx.output {
        let script = &out.script_pubkey;
        if script.is_op_return() {
            data_outputs += 1;
            if script.len() > MAX_OP_RETURN_RELAY {
                return Err(non_standard("scriptpubkey"));
            }
            continue;
        }
        let standard = script.is_p2pkh()
            || script.is_p2sh()
            || script.is_p2wpkh()
            || script.is_p2wsh()
            || script.is_p2tr()
            || script.is_p2pk()
            || script.is_multisig()
            || script.is_witness_program();
        if !standard {
            return Err(non_standard("scriptpubkey"));
        }
        if out.value < script.minimal_non_dust() {
            return Err(non_standard("dust"));
        }
    }
    if data_outputs > 1 {
        return Err(non_standard("multi-op-return"));
    }
    for input in &tx.input {
        if input.script_sig.len() > 1650 {
            return Err(non_standard("scriptsig-size"));
        }
        if !input.script_sig.is_push_only() {
            return Err(non_standard("scriptsig-not-pushonly"));
        }
    }
    Ok(())
}

/// Verifies every input's script with the kernel, given all spent outputs (taproot needs them).
pub fn verify_scripts(raw: &[u8], prevouts: &[TxOut]) -> Result<(), Rejection> {
    let kernel_tx = bitcoinkernel::Transaction::new(raw).map_err(|e| Rejection::Decode(e.to_string()))?;
    let mut scripts = Vec::with_capacity(prevouts.len());
    for p in prevouts {
        scripts.push(
            bitcoinkernel::ScriptPubkey::new(p.script_pubkey.as_bytes())
                .map_err(|e| Rejection::Decode(e.to_string()))?,
        );
    }
    let outs: Vec<bitcoinkernel::TxOut> = scripts
        .iter()
        .zip(prevouts)
        .map(|(s, p)| bitcoinkernel::TxOut::new(s, p.value.to_sat() as i64))
        .collect();
    let precomputed = bitcoinkernel::PrecomputedTransactionData::new(&kernel_tx, &outs)
        .map_err(|e| Rejection::Decode(e.to_string()))?;
    for (i, (script, p)) in scripts.iter().zip(prevouts).enumerate() {
        bitcoinkernel::verify(
            script,
            Some(p.value.to_sat() as i64),
            &kernel_tx,
            i,
            Some(bitcoinkernel::VERIFY_ALL),
            &precomputed,
        )
        .map_err(|e| Rejection::Script {
            input: i,
            message: e.to_string(),
        })?;
    }
    Ok(())
}

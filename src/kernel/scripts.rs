//! Script verification by the kernel under the consensus flags: the one place outside this
//! folder's validator that asks `bitcoinkernel` about scripts.

use bitcoin::TxOut;

/// Why the kernel refused a transaction's scripts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptFailure {
    /// The kernel could not read the transaction or a spent output.
    #[error("{0}")]
    Decode(String),
    /// An input's script failed, or the kernel could not judge it.
    #[error("input {input}: {message}")]
    Input {
        /// The failing input.
        input: usize,
        /// The kernel's message.
        message: String,
        /// Whether the kernel found the script invalid (not an error of the call).
        invalid: bool,
    },
}

/// Verifies every input's script with the kernel, given all spent outputs (taproot needs them).
pub fn verify_scripts(raw: &[u8], prevouts: &[TxOut]) -> Result<(), ScriptFailure> {
    let kernel_tx =
        bitcoinkernel::Transaction::new(raw).map_err(|e| ScriptFailure::Decode(e.to_string()))?;
    let mut scripts = Vec::with_capacity(prevouts.len());
    for p in prevouts {
        scripts.push(
            bitcoinkernel::ScriptPubkey::new(p.script_pubkey.as_bytes())
                .map_err(|e| ScriptFailure::Decode(e.to_string()))?,
        );
    }
    let outs: Vec<bitcoinkernel::TxOut> = scripts
        .iter()
        .zip(prevouts)
        .map(|(s, p)| bitcoinkernel::TxOut::new(s, p.value.to_sat() as i64))
        .collect();
    let precomputed = bitcoinkernel::PrecomputedTransactionData::new(&kernel_tx, &outs)
        .map_err(|e| ScriptFailure::Decode(e.to_string()))?;
    for (i, (script, p)) in scripts.iter().zip(prevouts).enumerate() {
        bitcoinkernel::verify(
            script,
            Some(p.value.to_sat() as i64),
            &kernel_tx,
            i,
            Some(bitcoinkernel::VERIFY_ALL),
            &precomputed,
        )
        .map_err(|e| ScriptFailure::Input {
            input: i,
            message: e.to_string(),
            invalid: matches!(
                e,
                bitcoinkernel::KernelError::ScriptVerify(bitcoinkernel::ScriptVerifyError::Invalid)
            ),
        })?;
    }
    Ok(())
}

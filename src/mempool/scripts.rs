//! A transaction's scripts in Core's order: the policy interpreter under the standard flags, then
//! the kernel under the consensus ones.

use bitcoin::{Transaction, TxOut};

use super::Rejection;
use crate::policy::interpreter;

/// Verifies a transaction's scripts in Core's order (validation.cpp's `PolicyScriptChecks`,
/// then `ConsensusScriptChecks`): every input under the standard flags, which the kernel does
/// not take, by the policy [`interpreter`], the first that fails refused as
/// `mempool-script-verify-flag-failed` whatever flag it breaks, consensus or policy (Core 31's
/// `CheckInputScripts` over `STANDARD_SCRIPT_VERIFY_FLAGS`, which Knots 29.4 shares); then the
/// kernel's consensus verification, which refuses (as `mandatory-script-verify-flag-failed`) only
/// where the interpreter passed what consensus fails: a disagreement Core reports as a bug.
/// `core_31` picks the profile's wording of a few script errors.
pub(super) fn scripts_in_cores_order(
    tx: &Transaction,
    raw: &[u8],
    prevouts: &[TxOut],
    core_31: bool,
) -> Result<(), Rejection> {
    if let Some((input, error)) = first_standard_failure(tx, prevouts) {
        return Err(Rejection::PolicyScript {
            input,
            message: error.words(core_31),
        });
    }
    crate::kernel::scripts::verify_scripts(raw, prevouts).map_err(|e| {
        tracing::warn!(txid = %tx.compute_txid(), %e,
            "the kernel fails a spend the policy interpreter passes under the standard flags");
        Rejection::from(e)
    })
}

/// The first input of `tx` the policy interpreter fails under Core's standard flags, with its
/// error.
fn first_standard_failure(
    tx: &Transaction,
    prevouts: &[TxOut],
) -> Option<(usize, interpreter::ScriptError)> {
    use interpreter::{verify_input, Flags, TxData};
    let data = TxData::new(tx, prevouts);
    (0..tx.input.len()).find_map(|input| {
        let error = verify_input(&data, input, Flags::STANDARD).err()?;
        Some((input, error))
    })
}

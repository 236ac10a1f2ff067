//! Core's standardness rules on a transaction alone (`IsStandardTx`, policy/policy.cpp), with the
//! knobs of the profile, and ephemeral dust's fee rule (policy/ephemeral_policy.cpp).

use bitcoin::{Transaction, TxOut};

use super::data_rules;
use super::rejection::Rejection;
use super::solver::{solve, OutputKind};
use crate::config::{MempoolConfig, PolicyProfile, TrucPolicy};

/// The default minimum relay fee rate, sat per 1,000 vbytes (Core 30's and 31's
/// `DEFAULT_MIN_RELAY_TX_FEE`; `mempool_min_relay_fee` changes it).
pub const MIN_RELAY_PER_KVB: u64 = 100;
/// Largest standard transaction weight (Core's MAX_STANDARD_TX_WEIGHT).
pub const MAX_STANDARD_TX_WEIGHT: u64 = 400_000;
/// Smallest standard size without witness (Core's `MIN_STANDARD_TX_NONWITNESS_SIZE`): a
/// 64-byte transaction could pass for an inner node of a block's merkle tree.
pub const MIN_STANDARD_TX_NONWITNESS_SIZE: usize = 65;

fn non_standard(reason: &str) -> Rejection {
    Rejection::NonStandard(reason.to_string())
}

/// Size, version, script sig, output script and dust rules (after
/// [`super::consensus::check_transaction`], which refuses a transaction without inputs or
/// outputs), as `IsStandardTx` (policy/policy.cpp) with the knobs of `policy` (Knots's
/// `bare-pubkey`, `bare-datacarrier`, `-mempooltruc=reject` and its data rules), in the order
/// of the policy's profile; then `tx-size-small`.
pub fn check_standard(tx: &Transaction, policy: &MempoolConfig) -> Result<(), Rejection> {
    let newest = match policy.truc {
        TrucPolicy::Reject => 2,
        TrucPolicy::Accept | TrucPolicy::Enforce => 3,
    };
    if !(1..=newest).contains(&tx.version.0) {
        return Err(non_standard("version"));
    }
    if tx.weight().to_wu() > MAX_STANDARD_TX_WEIGHT {
        return Err(non_standard("tx-size"));
    }
    if policy.knots_data_rules {
        data_rules::check_parasite(tx)?;
    }
    // Core and Knots read the inputs' script sigs before the outputs.
    for input in &tx.input {
        if input.script_sig.len() > 1650 {
            return Err(non_standard("scriptsig-size"));
        }
        if !input.script_sig.is_push_only() {
            return Err(non_standard("scriptsig-not-pushonly"));
        }
    }
    let mut counts = OutputCounts::default();
    // Knots walks the outputs from the last, Core from the first: which reason a transaction
    // breaking two rules gets depends on it.
    let knots = policy.profile == PolicyProfile::Knots;
    let mut outputs: Vec<(usize, &TxOut)> = tx.output.iter().enumerate().collect();
    if knots {
        outputs.reverse();
    }
    for (i, out) in outputs {
        check_output(tx, i, out, policy, &mut counts)?;
    }
    if counts.data_outputs > 1 && !policy.permit_multiple_datacarrier {
        return Err(non_standard("multi-op-return"));
    }
    if counts.data_bytes > policy.datacarrier_size {
        return Err(non_standard("datacarrier"));
    }
    // Core: one dust output at most, and only in a transaction without fee (ephemeral dust,
    // `MAX_DUST_OUTPUTS_PER_TX`; the fee is checked by [`check_ephemeral_fee`]).
    if counts.dust > MAX_DUST_OUTPUTS_PER_TX {
        return Err(non_standard("dust"));
    }
    // Knots: OP_RETURN outputs must ride beside a payment.
    if counts.monetary == 0 && counts.data_outputs > 0 && !policy.permit_bare_datacarrier {
        return Err(non_standard("bare-datacarrier"));
    }
    // After `IsStandardTx`, as in Core's `PreChecks`.
    if tx.base_size() < MIN_STANDARD_TX_NONWITNESS_SIZE {
        return Err(non_standard("tx-size-small"));
    }
    Ok(())
}

/// Most dust outputs of a standard transaction (Core's `MAX_DUST_OUTPUTS_PER_TX`), which must
/// then pay no fee and be spent by a child in the same package or the pool (ephemeral dust).
pub const MAX_DUST_OUTPUTS_PER_TX: usize = 1;

/// Core's `PreCheckEphemeralTx` (policy/ephemeral_policy.cpp): a transaction with a dust output
/// pays no fee, so it is never worth mining alone.
pub fn check_ephemeral_fee(tx: &Transaction, fee: u64) -> Result<(), Rejection> {
    if fee != 0 && tx.output.iter().any(is_dust) {
        return Err(non_standard("dust, tx with dust output must be 0-fee"));
    }
    Ok(())
}

/// Whether an output is dust at Core's dust relay fee (3 sat/vB, `IsDust`).
pub fn is_dust(out: &TxOut) -> bool {
    out.value < out.script_pubkey.minimal_non_dust()
}

/// What the output loop counts for the whole-transaction rules.
#[derive(Default)]
struct OutputCounts {
    data_outputs: usize,
    data_bytes: usize,
    monetary: usize,
    dust: usize,
}

/// One output (the `i`th of `tx`) in the profile's order: its size, its kind, the data carrier
/// (Core: the bytes left of it, at this output), dust (Knots: at once; Core: counted), then the
/// rules of its kind.
fn check_output(
    tx: &Transaction,
    i: usize,
    out: &TxOut,
    policy: &MempoolConfig,
    counts: &mut OutputCounts,
) -> Result<(), Rejection> {
    let script = &out.script_pubkey;
    if policy.knots_data_rules {
        data_rules::check_output_size(script)?;
    }
    let kind = solve(script);
    // Core's `IsStandard`: a kind it knows, multisig of 1 to 3 keys, and (Knots and Core 29)
    // each OP_RETURN output within the size; Core 30 limits their sum instead.
    let oversized_data = kind == OutputKind::NullData
        && !policy.permit_multiple_datacarrier
        && script.len() > policy.datacarrier_size;
    if kind == OutputKind::NonStandard
        || matches!(kind, OutputKind::Multisig { n, .. } if n > 3)
        || oversized_data
    {
        return Err(non_standard("scriptpubkey"));
    }
    let core = policy.profile == PolicyProfile::Core;
    if kind == OutputKind::NullData && core {
        counts.data_bytes = counts.data_bytes.saturating_add(script.len());
        if counts.data_bytes > policy.datacarrier_size {
            return Err(non_standard("datacarrier"));
        }
    }
    if is_dust(out) {
        match core {
            true => counts.dust += 1,
            false => return Err(non_standard("dust")),
        }
    }
    match kind {
        OutputKind::NullData => {
            counts.data_outputs += 1;
            if !core {
                counts.data_bytes = counts.data_bytes.saturating_add(script.len());
            }
            if policy.knots_data_rules {
                data_rules::check_null_data(script)?;
                data_rules::check_counterparty(tx, script)?;
            }
        }
        OutputKind::PubKey if !policy.permit_bare_pubkey => {
            return Err(non_standard("bare-pubkey"))
        }
        OutputKind::Multisig { .. } if !policy.permit_bare_multisig => {
            return Err(non_standard("bare-multisig"))
        }
        OutputKind::WitnessV0ScriptHash if policy.knots_data_rules => {
            data_rules::check_p2wsh(script, tx.output.len() - i)?;
            counts.monetary += 1;
        }
        OutputKind::Anchor => {}
        _ => counts.monetary += 1,
    }
    Ok(())
}

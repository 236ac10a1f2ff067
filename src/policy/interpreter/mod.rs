//! A script interpreter for policy: Core's `VerifyScript` and `EvalScript`
//! (script/interpreter.cpp) with every script verification flag, so the mempool can hold
//! spends to Core's `STANDARD_SCRIPT_VERIFY_FLAGS` (the kernel's C API takes the consensus flags
//! only). The mempool runs it first, in Core's order, and the kernel after it, which decides
//! consensus (`scripts_in_cores_order` in the mempool). Checked against Core's own
//! `script_tests.json` and, under the consensus flags, against the kernel.

mod checker;
mod error;
mod eval;
mod num;
#[cfg(test)]
mod props;
mod script;
#[cfg(test)]
mod tests;

use bitcoin::consensus::Encodable;
use bitcoin::hashes::{sha256, Hash, HashEngine};
use bitcoin::secp256k1::{Parity, Scalar, Secp256k1, VerifyOnly, XOnlyPublicKey};
use bitcoin::taproot::{TapLeafHash, TapNodeHash, TapTweakHash};
use bitcoin::{Script, VarInt};
use std::sync::LazyLock;

pub use checker::{Checker, TxData};
pub use error::ScriptError;
use eval::{eval_script, ExecData, Stack, MAX_ELEMENT_SIZE, MAX_STACK_SIZE};

static SECP: LazyLock<Secp256k1<VerifyOnly>> = LazyLock::new(Secp256k1::verification_only);

/// Script verification flags (`SCRIPT_VERIFY_...`, script/interpreter.h), as a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(u32);

#[allow(missing_docs)] // each is Core's flag of the same name
impl Flags {
    pub const NONE: Flags = Flags(0);
    pub const P2SH: Flags = Flags(1 << 0);
    pub const STRICTENC: Flags = Flags(1 << 1);
    pub const DERSIG: Flags = Flags(1 << 2);
    pub const LOW_S: Flags = Flags(1 << 3);
    pub const NULLDUMMY: Flags = Flags(1 << 4);
    pub const SIGPUSHONLY: Flags = Flags(1 << 5);
    pub const MINIMALDATA: Flags = Flags(1 << 6);
    pub const DISCOURAGE_UPGRADABLE_NOPS: Flags = Flags(1 << 7);
    pub const CLEANSTACK: Flags = Flags(1 << 8);
    pub const CHECKLOCKTIMEVERIFY: Flags = Flags(1 << 9);
    pub const CHECKSEQUENCEVERIFY: Flags = Flags(1 << 10);
    pub const WITNESS: Flags = Flags(1 << 11);
    pub const DISCOURAGE_UPGRADABLE_WITNESS_PROGRAM: Flags = Flags(1 << 12);
    pub const MINIMALIF: Flags = Flags(1 << 13);
    pub const NULLFAIL: Flags = Flags(1 << 14);
    pub const WITNESS_PUBKEYTYPE: Flags = Flags(1 << 15);
    pub const CONST_SCRIPTCODE: Flags = Flags(1 << 16);
    pub const TAPROOT: Flags = Flags(1 << 17);
    pub const DISCOURAGE_UPGRADABLE_TAPROOT_VERSION: Flags = Flags(1 << 18);
    pub const DISCOURAGE_OP_SUCCESS: Flags = Flags(1 << 19);
    pub const DISCOURAGE_UPGRADABLE_PUBKEYTYPE: Flags = Flags(1 << 20);

    /// Core's `MANDATORY_SCRIPT_VERIFY_FLAGS`: what a block's scripts are held to.
    pub const MANDATORY: Flags = Flags(
        Self::P2SH.0
            | Self::DERSIG.0
            | Self::NULLDUMMY.0
            | Self::CHECKLOCKTIMEVERIFY.0
            | Self::CHECKSEQUENCEVERIFY.0
            | Self::WITNESS.0
            | Self::TAPROOT.0,
    );

    /// Core's `STANDARD_SCRIPT_VERIFY_FLAGS` (policy/policy.h): what the mempool holds to.
    pub const STANDARD: Flags = Flags(
        Self::MANDATORY.0
            | Self::STRICTENC.0
            | Self::MINIMALDATA.0
            | Self::DISCOURAGE_UPGRADABLE_NOPS.0
            | Self::CLEANSTACK.0
            | Self::MINIMALIF.0
            | Self::NULLFAIL.0
            | Self::LOW_S.0
            | Self::DISCOURAGE_UPGRADABLE_WITNESS_PROGRAM.0
            | Self::WITNESS_PUBKEYTYPE.0
            | Self::CONST_SCRIPTCODE.0
            | Self::DISCOURAGE_UPGRADABLE_TAPROOT_VERSION.0
            | Self::DISCOURAGE_OP_SUCCESS.0
            | Self::DISCOURAGE_UPGRADABLE_PUBKEYTYPE.0,
    );

    /// Whether every flag of `other` is set.
    pub fn has(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag of `other` is set.
    pub fn any(self, other: Flags) -> bool {
        self.0 & other.0 != 0
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
}

/// Which rules a script runs under (Core's `SigVersion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigVersion {
    /// Legacy scripts, P2SH redeem scripts included.
    Base,
    /// BIP143's segwit v0 scripts.
    WitnessV0,
    /// BIP341's key-path spend.
    Taproot,
    /// BIP342's tapscript.
    Tapscript,
}

/// Verifies input `input` of the transaction of `data` under `flags`: Core's `VerifyScript`
/// with its first error.
pub fn verify_input(data: &TxData<'_>, input: usize, flags: Flags) -> Result<(), ScriptError> {
    let txin = data
        .tx()
        .input
        .get(input)
        .ok_or(ScriptError::UnknownError)?;
    let spent = data
        .prevouts()
        .get(input)
        .ok_or(ScriptError::UnknownError)?;
    let mut checker = Checker::new(data, input);
    let script_sig = txin.script_sig.as_bytes();
    let script_pubkey = spent.script_pubkey.as_bytes();
    let witness = Witness {
        stack: txin.witness.iter().map(<[u8]>::to_vec).collect(),
    };
    verify_script(script_sig, script_pubkey, &witness, flags, &mut checker)
}

/// An input's witness stack.
struct Witness {
    stack: Vec<Vec<u8>>,
}

fn verify_script(
    script_sig: &[u8],
    script_pubkey: &[u8],
    witness: &Witness,
    flags: Flags,
    checker: &mut Checker<'_, '_>,
) -> Result<(), ScriptError> {
    if flags.has(Flags::SIGPUSHONLY) && !script::is_push_only(script_sig) {
        return Err(ScriptError::SigPushOnly);
    }
    let mut exec = ExecData::default();
    let mut stack: Stack = Vec::new();
    eval_script(
        &mut stack,
        script_sig,
        flags,
        checker,
        SigVersion::Base,
        &mut exec,
    )?;
    let after_sig = flags.has(Flags::P2SH).then(|| stack.clone());
    eval_script(
        &mut stack,
        script_pubkey,
        flags,
        checker,
        SigVersion::Base,
        &mut exec,
    )?;
    require_true(&stack)?;
    let mut had_witness = false;
    if flags.has(Flags::WITNESS) {
        if let Some((version, program)) = witness_program(script_pubkey) {
            had_witness = true;
            if !script_sig.is_empty() {
                return Err(ScriptError::WitnessMalleated);
            }
            verify_witness_program(witness, version, program, flags, checker, false)?;
            stack.truncate(1);
        }
    }
    if let Some(mut p2sh_stack) = after_sig.filter(|_| Script::from_bytes(script_pubkey).is_p2sh())
    {
        if !script::is_push_only(script_sig) {
            return Err(ScriptError::SigPushOnly);
        }
        let redeem = p2sh_stack.pop().ok_or(ScriptError::EvalFalse)?;
        eval_script(
            &mut p2sh_stack,
            &redeem,
            flags,
            checker,
            SigVersion::Base,
            &mut exec,
        )?;
        require_true(&p2sh_stack)?;
        if flags.has(Flags::WITNESS) {
            if let Some((version, program)) = witness_program(&redeem) {
                had_witness = true;
                if script_sig != script::push_of(&redeem).as_slice() {
                    return Err(ScriptError::WitnessMalleatedP2sh);
                }
                verify_witness_program(witness, version, program, flags, checker, true)?;
                p2sh_stack.truncate(1);
            }
        }
        stack = p2sh_stack;
    }
    if flags.has(Flags::CLEANSTACK) && stack.len() != 1 {
        return Err(ScriptError::CleanStack);
    }
    if flags.has(Flags::WITNESS) && !had_witness && !witness.stack.is_empty() {
        return Err(ScriptError::WitnessUnexpected);
    }
    Ok(())
}

/// A true top of the stack, or EVAL_FALSE.
fn require_true(stack: &Stack) -> Result<(), ScriptError> {
    match stack.last() {
        Some(top) if num::cast_to_bool(top) => Ok(()),
        _ => Err(ScriptError::EvalFalse),
    }
}

/// Core's `IsWitnessProgram`: a version opcode and one push of 2 to 40 bytes, 4 to 42 in all.
fn witness_program(script: &[u8]) -> Option<(u8, &[u8])> {
    if !(4..=42).contains(&script.len()) || usize::from(script[1]) + 2 != script.len() {
        return None;
    }
    match script[0] {
        0x00 => Some((0, &script[2..])),
        v @ 0x51..=0x60 => Some((v - 0x50, &script[2..])),
        _ => None,
    }
}

/// Core's `VerifyWitnessProgram`: P2WPKH, P2WSH, taproot's key and script paths, and versions
/// with no meaning yet.
fn verify_witness_program(
    witness: &Witness,
    version: u8,
    program: &[u8],
    flags: Flags,
    checker: &mut Checker<'_, '_>,
    in_p2sh: bool,
) -> Result<(), ScriptError> {
    let mut stack = witness.stack.clone();
    match (version, program.len()) {
        (0, 32) => {
            let script = stack.pop().ok_or(ScriptError::WitnessProgramWitnessEmpty)?;
            if sha256::Hash::hash(&script).as_byte_array() != program {
                return Err(ScriptError::WitnessProgramMismatch);
            }
            execute_v0(stack, &script, flags, checker)
        }
        (0, 20) => {
            if stack.len() != 2 {
                return Err(ScriptError::WitnessProgramMismatch);
            }
            let mut script = vec![0x76, 0xa9, 0x14];
            script.extend_from_slice(program);
            script.extend([0x88, 0xac]);
            execute_v0(stack, &script, flags, checker)
        }
        (0, _) => Err(ScriptError::WitnessProgramWrongLength),
        (1, 32) if !in_p2sh => {
            if !flags.has(Flags::TAPROOT) {
                return Ok(());
            }
            verify_taproot(stack, program, flags, checker, witness_size(&witness.stack))
        }
        // Pay-to-anchor (Core 28's `IsPayToAnchor`): anyone spends it.
        (1, 2) if !in_p2sh && program == [0x4e, 0x73] => Ok(()),
        _ if flags.has(Flags::DISCOURAGE_UPGRADABLE_WITNESS_PROGRAM) => {
            Err(ScriptError::DiscourageUpgradableWitnessProgram)
        }
        _ => Ok(()),
    }
}

/// A segwit v0 script (P2WSH's, or P2WPKH's implied one) run on the witness stack.
fn execute_v0(
    stack: Stack,
    script: &[u8],
    flags: Flags,
    checker: &mut Checker<'_, '_>,
) -> Result<(), ScriptError> {
    let mut exec = ExecData::default();
    execute_witness_script(
        stack,
        script,
        flags,
        SigVersion::WitnessV0,
        checker,
        &mut exec,
    )
}

/// BIP341's spend of a taproot output: a key path by one signature, or a script path by a
/// leaf its control block commits to.
fn verify_taproot(
    mut stack: Stack,
    program: &[u8],
    flags: Flags,
    checker: &mut Checker<'_, '_>,
    witness_size: usize,
) -> Result<(), ScriptError> {
    if stack.is_empty() {
        return Err(ScriptError::WitnessProgramWitnessEmpty);
    }
    let mut exec = ExecData::default();
    if stack.len() >= 2 && stack.last().is_some_and(|last| last.first() == Some(&0x50)) {
        exec.taproot.annex = stack.pop();
    }
    if stack.len() == 1 {
        return checker.check_schnorr(&stack[0], program, &exec.taproot);
    }
    let control = stack.pop().ok_or(ScriptError::WitnessProgramWitnessEmpty)?;
    let script = stack.pop().ok_or(ScriptError::WitnessProgramWitnessEmpty)?;
    if control.len() < 33 || control.len() > 33 + 32 * 128 || (control.len() - 33) % 32 != 0 {
        return Err(ScriptError::TaprootWrongControlSize);
    }
    let leaf_version = control[0] & 0xfe;
    let leaf_hash = tap_leaf_hash(leaf_version, &script);
    if !commits_to(&control, program, leaf_hash) {
        return Err(ScriptError::WitnessProgramMismatch);
    }
    if leaf_version != 0xc0 {
        if flags.has(Flags::DISCOURAGE_UPGRADABLE_TAPROOT_VERSION) {
            return Err(ScriptError::DiscourageUpgradableTaprootVersion);
        }
        return Ok(());
    }
    exec.taproot.leaf_hash = Some(leaf_hash);
    exec.validation_weight_left = witness_size as i64 + 50;
    execute_witness_script(
        stack,
        &script,
        flags,
        SigVersion::Tapscript,
        checker,
        &mut exec,
    )
}

/// BIP341's leaf hash of `script` under any leaf version byte (Core's `ComputeTapleafHash`;
/// the `bitcoin` crate's leaf versions leave out 0x50, which Core hashes all the same).
fn tap_leaf_hash(version: u8, script: &[u8]) -> TapLeafHash {
    let mut engine = TapLeafHash::engine();
    engine.input(&[version]);
    let mut size = Vec::with_capacity(9);
    let _ = VarInt(script.len() as u64).consensus_encode(&mut size);
    engine.input(&size);
    engine.input(script);
    TapLeafHash::from_engine(engine)
}

/// Core's `VerifyTaprootCommitment`: the output key `program` is the control block's internal
/// key tweaked by the Merkle root of `leaf` and the path, with the control block's parity.
fn commits_to(control: &[u8], program: &[u8], leaf: TapLeafHash) -> bool {
    let Ok(internal) = XOnlyPublicKey::from_slice(&control[1..33]) else {
        return false;
    };
    let Ok(output) = XOnlyPublicKey::from_slice(program) else {
        return false;
    };
    let mut node = TapNodeHash::from(leaf);
    for sibling in control[33..].chunks_exact(32) {
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(sibling);
        node = TapNodeHash::from_node_hashes(node, TapNodeHash::from_byte_array(bytes));
    }
    let tweak = TapTweakHash::from_key_and_tweak(internal, Some(node));
    let Ok(tweak) = Scalar::from_be_bytes(tweak.to_byte_array()) else {
        return false;
    };
    let parity = if control[0] & 1 == 1 {
        Parity::Odd
    } else {
        Parity::Even
    };
    internal.tweak_add_check(&SECP, &output, parity, tweak)
}

/// The witness stack's serialized size (Core's `GetSerializeSize(witness.stack)`).
fn witness_size(stack: &[Vec<u8>]) -> usize {
    let compact = |n: usize| VarInt(n as u64).size();
    compact(stack.len())
        + stack
            .iter()
            .map(|item| compact(item.len()) + item.len())
            .sum::<usize>()
}

/// Core's `ExecuteWitnessScript`: OP_SUCCESSx first in tapscript, the element size limit on
/// the witness, then the script, which must leave exactly one true element.
fn execute_witness_script(
    mut stack: Stack,
    script: &[u8],
    flags: Flags,
    version: SigVersion,
    checker: &mut Checker<'_, '_>,
    exec: &mut ExecData,
) -> Result<(), ScriptError> {
    if version == SigVersion::Tapscript {
        let mut pc = 0;
        while pc < script.len() {
            let op = script::next_op(script, &mut pc).ok_or(ScriptError::BadOpcode)?;
            if script::is_op_success(op.opcode) {
                if flags.has(Flags::DISCOURAGE_OP_SUCCESS) {
                    return Err(ScriptError::DiscourageOpSuccess);
                }
                return Ok(());
            }
        }
        if stack.len() > MAX_STACK_SIZE {
            return Err(ScriptError::StackSize);
        }
    }
    if stack.iter().any(|item| item.len() > MAX_ELEMENT_SIZE) {
        return Err(ScriptError::PushSize);
    }
    eval_script(&mut stack, script, flags, checker, version, exec)?;
    if stack.len() != 1 {
        return Err(ScriptError::CleanStack);
    }
    require_true(&stack)
}

//! Core's standard script verification flags (`STANDARD_SCRIPT_VERIFY_FLAGS`, policy/policy.h)
//! that the kernel's C API does not take: it verifies with the consensus flags only. These
//! checks run beside it, after it passed an input, on what can be read without running a
//! script: the signatures and keys of the standard templates (P2PKH, P2PK, multisig bare, in
//! P2SH and in P2WSH, a single key in P2WSH, P2WPKH bare and in P2SH), the pushes of every script
//! sig, the versions of witness programs and tapscript leaves, and the opcodes of scripts without
//! branches. What stays unchecked is listed in the README's mempool row.

use bitcoin::opcodes::all::{OP_CHECKSIG, OP_CODESEPARATOR, OP_NOP1, OP_NOP10, OP_NOP4};
use bitcoin::opcodes::all::{OP_ELSE, OP_ENDIF, OP_IF, OP_NOTIF};
use bitcoin::script::{Error as ScriptError, Instruction, Script};
use bitcoin::{TxIn, Witness};

/// A standard flag a spend breaks, with Core's message for it (`ScriptErrorString`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// `SCRIPT_VERIFY_LOW_S`: an ECDSA signature's S above half the group order (anyone can
    /// turn S into n - S and so change the txid of a legacy spend).
    #[error("Non-canonical signature: S value is unnecessarily high")]
    HighS,
    /// `SCRIPT_VERIFY_STRICTENC`: a hash type other than ALL, NONE or SINGLE, with or without
    /// ANYONECANPAY.
    #[error("Signature hash type missing or not understood")]
    HashType,
    /// `SCRIPT_VERIFY_STRICTENC`: a key neither 33 bytes from 02 or 03 nor 65 bytes from 04.
    #[error("Public key is neither compressed or uncompressed")]
    PubkeyType,
    /// `SCRIPT_VERIFY_WITNESS_PUBKEYTYPE`: an uncompressed key in a segwit v0 spend.
    #[error("Using non-compressed keys in segwit")]
    WitnessPubkeyType,
    /// `SCRIPT_VERIFY_MINIMALDATA`: a push not in its shortest form.
    #[error("Data push larger than necessary")]
    MinimalData,
    /// `SCRIPT_VERIFY_CLEANSTACK`: a legacy spend leaving more than its result on the stack.
    #[error("Stack size must be exactly one after execution")]
    CleanStack,
    /// `SCRIPT_VERIFY_DISCOURAGE_UPGRADABLE_WITNESS_PROGRAM`: a witness version or program size
    /// with no meaning yet (and taproot inside P2SH).
    #[error("Witness version reserved for soft-fork upgrades")]
    UpgradableWitnessProgram,
    /// `SCRIPT_VERIFY_DISCOURAGE_UPGRADABLE_TAPROOT_VERSION`: a leaf version other than 0xc0.
    #[error("Taproot version reserved for soft-fork upgrades")]
    UpgradableTaprootVersion,
    /// `SCRIPT_VERIFY_DISCOURAGE_OP_SUCCESS`: an OP_SUCCESSx in a tapscript.
    #[error("OP_SUCCESSx reserved for soft-fork upgrades")]
    OpSuccess,
    /// `SCRIPT_VERIFY_DISCOURAGE_UPGRADABLE_NOPS`: OP_NOP1 or OP_NOP4 to OP_NOP10 run.
    #[error("NOPx reserved for soft-fork upgrades")]
    UpgradableNops,
    /// `SCRIPT_VERIFY_CONST_SCRIPTCODE`: OP_CODESEPARATOR run in a legacy script.
    #[error("Using OP_CODESEPARATOR in non-witness script")]
    CodeSeparator,
}

/// Half the order of secp256k1's group: a low S is at most this (Core's `CPubKey::CheckLowS`).
const HALF_ORDER: [u8; 32] = [
    0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x5d, 0x57, 0x6e, 0x73, 0x57, 0xa4, 0x50, 0x1d, 0xdf, 0xe9, 0x2f, 0x46, 0x68, 0x1b, 0x20, 0xa0,
];

/// The tapscript leaf version of BIP342 (`TAPROOT_LEAF_TAPSCRIPT`).
const TAPSCRIPT_LEAF: u8 = 0xc0;

/// How the script around a signature is run: legacy or segwit v0 (keys must be compressed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SigVersion {
    Base,
    WitnessV0,
    /// BIP342's: OP_CODESEPARATOR allowed, keys not ECDSA's.
    Tapscript,
}

/// Checks one input that the kernel verified under the consensus flags against the standard
/// flags readable without running it; `spent` is the output script it spends.
pub fn check_input(input: &TxIn, spent: &Script) -> Result<(), Violation> {
    // The script sig runs under every flag: MINIMALDATA holds for its pushes.
    let pushes = stack_of(&input.script_sig)?;
    if spent.is_p2sh() {
        let Some((redeem, args)) = pushes.split_last() else {
            return Ok(());
        };
        let redeem = Script::from_bytes(redeem);
        if redeem.is_witness_program() {
            return check_witness(redeem, &input.witness, true);
        }
        return check_legacy(redeem, args);
    }
    if spent.is_witness_program() {
        return check_witness(spent, &input.witness, false);
    }
    check_legacy(spent, &pushes)
}

/// The stack a push-only script leaves, each push checked minimal (`CheckMinimalPush`); a script
/// that is not push-only gives what it pushed before its first other opcode (IsStandardTx
/// refuses such a script sig before this runs).
fn stack_of(script: &Script) -> Result<Vec<Vec<u8>>, Violation> {
    let mut stack = Vec::new();
    for instruction in script.instructions_minimal() {
        match instruction.map(pushed_value) {
            Ok(Some(value)) => stack.push(value),
            Ok(None) => break,
            Err(ScriptError::NonMinimalPush) => return Err(Violation::MinimalData),
            Err(_) => break,
        }
    }
    Ok(stack)
}

/// What a push-only instruction puts on the stack (OP_1NEGATE and OP_1 to OP_16 as numbers);
/// `None` for any other opcode.
pub(super) fn pushed_value(instruction: Instruction) -> Option<Vec<u8>> {
    match instruction {
        Instruction::PushBytes(bytes) => Some(bytes.as_bytes().to_vec()),
        Instruction::Op(op) => match op.to_u8() {
            0x4f => Some(vec![0x81]),
            n @ 0x51..=0x60 => Some(vec![n - 0x50]),
            _ => None,
        },
    }
}

/// The last push of a script sig, as Core reads a redeem script (`EvalScript` without flags:
/// the stack's top); `None` if the script sig pushes nothing.
pub(super) fn last_push(script_sig: &Script) -> Option<Vec<u8>> {
    let mut top = None;
    for instruction in script_sig.instructions() {
        top = Some(pushed_value(instruction.ok()?)?);
    }
    top
}

/// Whether a taproot witness ends in an annex (BIP341: two items or more, the last from 0x50).
pub(super) fn has_annex(items: &[&[u8]]) -> bool {
    items.len() >= 2 && items.last().and_then(|a| a.first()) == Some(&0x50)
}

/// A legacy (base) script `script` run on the stack `args`: the standard templates' signatures,
/// keys and clean stack; other scripts' opcodes when they have no branches.
fn check_legacy(script: &Script, args: &[Vec<u8>]) -> Result<(), Violation> {
    let bytes = script.as_bytes();
    if script.is_p2pkh() {
        let [.., sig, key] = args else { return Ok(()) };
        check_signature(sig)?;
        check_pubkey(key, SigVersion::Base)?;
        return clean_stack(args.len(), 2);
    }
    if let Some(key) = p2pk_key(bytes) {
        let [.., sig] = args else { return Ok(()) };
        check_signature(sig)?;
        check_pubkey(key, SigVersion::Base)?;
        return clean_stack(args.len(), 1);
    }
    if let Some((m, keys)) = multisig(bytes) {
        check_multisig(m, &keys, args, SigVersion::Base)?;
        // The dummy element and the m signatures.
        return clean_stack(args.len(), usize::from(m) + 1);
    }
    check_opcodes(script, SigVersion::Base)
}

/// A witness program spent with `witness` (`wrapped` when inside P2SH), as Core's
/// `VerifyWitnessProgram` with the standard flags.
fn check_witness(program: &Script, witness: &Witness, wrapped: bool) -> Result<(), Violation> {
    let bytes = program.as_bytes();
    let (version, program_len) = (bytes[0], bytes.len() - 2);
    match (version, program_len) {
        (0x00, 20) => {
            let [sig, key] = [witness.nth(0), witness.nth(1)];
            if let (Some(sig), Some(key), 2) = (sig, key, witness.len()) {
                check_signature(sig)?;
                check_pubkey(key, SigVersion::WitnessV0)?;
            }
            Ok(())
        }
        (0x00, 32) => check_witness_script(witness),
        // Taproot (BIP341) outside P2SH.
        (0x51, 32) if !wrapped => check_taproot(witness),
        // Pay-to-anchor outside P2SH spends with an empty witness and is standard.
        (0x51, 2) if !wrapped && super::solver::is_anchor(program) => Ok(()),
        // Segwit v0 of another size fails by consensus; every other version, size or wrapping
        // is left for soft forks.
        (0x00, _) => Ok(()),
        _ => Err(Violation::UpgradableWitnessProgram),
    }
}

/// A P2WSH spend: the witness script's templates, or its opcodes when it has no branches.
fn check_witness_script(witness: &Witness) -> Result<(), Violation> {
    let Some(script) = witness.last() else {
        return Ok(());
    };
    let args: Vec<Vec<u8>> = witness
        .iter()
        .take(witness.len() - 1)
        .map(<[u8]>::to_vec)
        .collect();
    if let Some(key) = p2pk_key(script) {
        if let [.., sig] = &args[..] {
            check_signature(sig)?;
            check_pubkey(key, SigVersion::WitnessV0)?;
        }
        return Ok(());
    }
    if let Some((m, keys)) = multisig(script) {
        return check_multisig(m, &keys, &args, SigVersion::WitnessV0);
    }
    check_opcodes(Script::from_bytes(script), SigVersion::WitnessV0)
}

/// A taproot spend: the leaf version and, for tapscript, OP_SUCCESSx (Core's
/// `ExecuteWitnessScript` looks for them before running anything).
fn check_taproot(witness: &Witness) -> Result<(), Violation> {
    let mut items: Vec<&[u8]> = witness.iter().collect();
    if has_annex(&items) {
        items.pop(); // The annex (IsWitnessStandard refuses it before this).
    }
    let [.., script, control] = &items[..] else {
        return Ok(()); // A key path spend: no flag applies.
    };
    let Some(leaf) = control.first().map(|c| c & 0xfe) else {
        return Ok(());
    };
    if leaf != TAPSCRIPT_LEAF {
        return Err(Violation::UpgradableTaprootVersion);
    }
    for instruction in Script::from_bytes(script).instructions() {
        match instruction {
            Ok(Instruction::Op(op)) if is_op_success(op.to_u8()) => {
                return Err(Violation::OpSuccess)
            }
            Ok(_) => {}
            // Unparseable: the kernel already failed it.
            Err(_) => return Ok(()),
        }
    }
    check_opcodes(Script::from_bytes(script), SigVersion::Tapscript)
}

/// BIP342's OP_SUCCESSx opcodes (Core's `IsOpSuccess`).
fn is_op_success(op: u8) -> bool {
    matches!(op, 80 | 98 | 126..=129 | 131..=134 | 137..=138 | 141..=142 | 149..=153 | 187..=254)
}

/// What the standard flags forbid of a script's opcodes, read from its bytes. In a legacy
/// script OP_CODESEPARATOR is refused even where it does not run (CONST_SCRIPTCODE, as Core's
/// `EvalScript`). A script without branches runs every opcode (the kernel passed it), so there
/// non-minimal pushes (MINIMALDATA) and OP_NOP1 and OP_NOP4 to OP_NOP10
/// (DISCOURAGE_UPGRADABLE_NOPS) are refused too; a script with branches is not read for those.
fn check_opcodes(script: &Script, version: SigVersion) -> Result<(), Violation> {
    let opcodes = || script.instructions().map_while(Result::ok);
    let separator = Instruction::Op(OP_CODESEPARATOR);
    if version == SigVersion::Base && opcodes().any(|i| i == separator) {
        return Err(Violation::CodeSeparator);
    }
    let branches = [OP_IF, OP_NOTIF, OP_ELSE, OP_ENDIF];
    if opcodes().any(|i| matches!(i, Instruction::Op(op) if branches.contains(&op))) {
        return Ok(());
    }
    for instruction in script.instructions_minimal() {
        let op = match instruction {
            Ok(Instruction::Op(op)) => op.to_u8(),
            Ok(Instruction::PushBytes(_)) => continue,
            Err(ScriptError::NonMinimalPush) => return Err(Violation::MinimalData),
            Err(_) => return Ok(()),
        };
        let nop = op == OP_NOP1.to_u8() || (OP_NOP4.to_u8()..=OP_NOP10.to_u8()).contains(&op);
        if nop {
            return Err(Violation::UpgradableNops);
        }
    }
    Ok(())
}

/// `m`-of-n multisig run on `args` (the dummy element, then the signatures in key order): every
/// signature is checked, as the kernel found each one's key. Core's `OP_CHECKMULTISIG` loop walks
/// the keys from the last down and stops at the key that matched the first signature, so only
/// the last m keys are surely examined: those are checked, the others not.
fn check_multisig(
    m: u8,
    keys: &[&[u8]],
    args: &[Vec<u8>],
    version: SigVersion,
) -> Result<(), Violation> {
    let sigs = args.len().saturating_sub(usize::from(m));
    for sig in &args[sigs..] {
        check_signature(sig)?;
    }
    let examined = keys.len().saturating_sub(usize::from(m));
    for key in &keys[examined..] {
        check_pubkey(key, version)?;
    }
    Ok(())
}

/// CLEANSTACK: a legacy spend's script sig may push exactly what its script takes.
fn clean_stack(pushed: usize, taken: usize) -> Result<(), Violation> {
    if pushed > taken {
        return Err(Violation::CleanStack);
    }
    Ok(())
}

/// Core's `CheckSignatureEncoding` with the standard flags, for a signature the kernel accepted
/// (so strictly DER-encoded: DERSIG is consensus): an empty one passes; else a low S
/// (`IsLowDERSignature`) and a defined hash type (`IsDefinedHashtypeSignature`).
fn check_signature(sig: &[u8]) -> Result<(), Violation> {
    let Some((&hash_type, der)) = sig.split_last() else {
        return Ok(());
    };
    if der_s(der).is_some_and(|s| !is_low(s)) {
        return Err(Violation::HighS);
    }
    if !matches!(hash_type & !0x80, 1..=3) {
        return Err(Violation::HashType);
    }
    Ok(())
}

/// The S integer of a DER signature `30 len 02 rlen r 02 slen s`, `None` if it is not one.
fn der_s(der: &[u8]) -> Option<&[u8]> {
    let r_len = usize::from(*der.get(3)?);
    let s_at = 4 + r_len;
    let s_len = usize::from(*der.get(s_at + 1)?);
    (der.first() == Some(&0x30) && der.get(s_at) == Some(&0x02))
        .then(|| der.get(s_at + 2..s_at + 2 + s_len))
        .flatten()
}

/// Whether a big-endian integer is at most half the group order.
fn is_low(s: &[u8]) -> bool {
    let start = s.iter().position(|&b| b != 0).unwrap_or(s.len());
    let s = &s[start..];
    match s.len() {
        0..=31 => true,
        32 => s <= &HALF_ORDER[..],
        _ => false,
    }
}

/// Core's `CheckPubKeyEncoding` with STRICTENC and WITNESS_PUBKEYTYPE.
fn check_pubkey(key: &[u8], version: SigVersion) -> Result<(), Violation> {
    let compressed = key.len() == 33 && matches!(key[0], 0x02 | 0x03);
    let uncompressed = key.len() == 65 && key[0] == 0x04;
    if !compressed && !uncompressed {
        return Err(Violation::PubkeyType);
    }
    if version == SigVersion::WitnessV0 && !compressed {
        return Err(Violation::WitnessPubkeyType);
    }
    Ok(())
}

/// The key of `<key> OP_CHECKSIG` with a push of 33 or 65 bytes.
fn p2pk_key(script: &[u8]) -> Option<&[u8]> {
    let (&last, rest) = script.split_last()?;
    let (&len, key) = rest.split_first()?;
    (last == OP_CHECKSIG.to_u8() && matches!(len, 33 | 65) && key.len() == usize::from(len))
        .then_some(key)
}

/// `OP_m <key>... OP_n OP_CHECKMULTISIG` with n keys: m and the keys.
pub(super) fn multisig(script: &[u8]) -> Option<(u8, Vec<&[u8]>)> {
    let small = |b: u8| (0x51..=0x60).contains(&b).then(|| b - 0x50);
    let (&first, rest) = script.split_first()?;
    let m = small(first)?;
    let (&check, rest) = rest.split_last()?;
    let (&n_op, mut rest) = rest.split_last()?;
    let n = small(n_op)?;
    if check != 0xae {
        return None;
    }
    let mut keys = Vec::new();
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len);
        if !matches!(len, 33 | 65) || tail.len() < len {
            return None;
        }
        keys.push(&tail[..len]);
        rest = &tail[len..];
    }
    (keys.len() == usize::from(n) && m <= n).then_some((m, keys))
}

#[cfg(test)]
mod tests;

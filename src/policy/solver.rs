//! Output script kinds exactly as Core's `Solver` (`script/solver.cpp`) tells them, for the
//! standardness of outputs (`IsStandard`) and their dust threshold: stricter than rust-bitcoin's
//! shape tests, which take an OP_RETURN followed by anything, a version 0 witness program of
//! any length and keys of any header.

use bitcoin::opcodes::all::{OP_CHECKMULTISIG, OP_PUSHNUM_1, OP_PUSHNUM_16, OP_RETURN};
use bitcoin::script::Instruction;
use bitcoin::Script;

/// Most keys of a multisig script (Core's `MAX_PUBKEYS_PER_MULTISIG`).
const MAX_PUBKEYS_PER_MULTISIG: usize = 20;

/// Core's `TxoutType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// Anything else.
    NonStandard,
    /// Pay-to-anchor (`OP_1 <0x4e73>`).
    Anchor,
    /// A key and OP_CHECKSIG.
    PubKey,
    /// P2PKH.
    PubKeyHash,
    /// P2SH.
    ScriptHash,
    /// Bare `m`-of-`n` multisig.
    Multisig {
        /// Signatures required.
        m: usize,
        /// Keys given.
        n: usize,
    },
    /// OP_RETURN followed by pushes only.
    NullData,
    /// P2WPKH.
    WitnessV0KeyHash,
    /// P2WSH.
    WitnessV0ScriptHash,
    /// P2TR.
    WitnessV1Taproot,
    /// A witness program of version 1 to 16 of another kind.
    WitnessUnknown,
}

/// Core's pay-to-anchor output (`OP_1 <0x4e73>`, `IsPayToAnchor`), which pays nobody.
pub(super) fn is_anchor(script: &Script) -> bool {
    script.as_bytes() == [0x51, 0x02, 0x4e, 0x73]
}

/// The kind of `script`, in Core's order: P2SH, witness programs, null data, P2PK, P2PKH,
/// multisig.
pub fn solve(script: &Script) -> OutputKind {
    let bytes = script.as_bytes();
    if script.is_p2sh() {
        return OutputKind::ScriptHash;
    }
    if let Some((version, program)) = witness_program(bytes) {
        return match (version, program.len()) {
            (0, 20) => OutputKind::WitnessV0KeyHash,
            (0, 32) => OutputKind::WitnessV0ScriptHash,
            (1, 32) => OutputKind::WitnessV1Taproot,
            _ if is_anchor(script) => OutputKind::Anchor,
            (0, _) => OutputKind::NonStandard,
            _ => OutputKind::WitnessUnknown,
        };
    }
    if bytes.first() == Some(&OP_RETURN.to_u8()) && push_only(&bytes[1..]) {
        return OutputKind::NullData;
    }
    if is_pay_to_pubkey(bytes) {
        return OutputKind::PubKey;
    }
    if script.is_p2pkh() {
        return OutputKind::PubKeyHash;
    }
    match multisig(script) {
        Some((m, n)) => OutputKind::Multisig { m, n },
        None => OutputKind::NonStandard,
    }
}

/// Core's `IsWitnessProgram`: 4 to 42 bytes, a version opcode, one direct push of the rest.
fn witness_program(bytes: &[u8]) -> Option<(u8, &[u8])> {
    if !(4..=42).contains(&bytes.len()) || usize::from(bytes[1]) + 2 != bytes.len() {
        return None;
    }
    let version = match bytes[0] {
        0 => 0,
        op @ 0x51..=0x60 => op - 0x50,
        _ => return None,
    };
    Some((version, &bytes[2..]))
}

/// Core's `IsPushOnly`: every opcode parses and is a push or a number up to OP_16
/// (OP_RESERVED included, as Core).
fn push_only(bytes: &[u8]) -> bool {
    Script::from_bytes(bytes).instructions().all(|i| match i {
        Ok(Instruction::PushBytes(_)) => true,
        Ok(Instruction::Op(op)) => op.to_u8() <= OP_PUSHNUM_16.to_u8(),
        Err(_) => false,
    })
}

/// Core's `CPubKey::ValidSize`: 33 bytes after 0x02 or 0x03, 65 after 0x04, 0x06 or 0x07.
fn valid_key_size(key: &[u8]) -> bool {
    match key.first() {
        Some(2 | 3) => key.len() == 33,
        Some(4 | 6 | 7) => key.len() == 65,
        _ => false,
    }
}

/// Core's `MatchPayToPubkey`: a direct push of 65 or 33 bytes of a valid key size, then
/// OP_CHECKSIG.
fn is_pay_to_pubkey(bytes: &[u8]) -> bool {
    let checksig = bitcoin::opcodes::all::OP_CHECKSIG.to_u8();
    match bytes {
        [len @ (33 | 65), key @ .., last]
            if *last == checksig && key.len() == usize::from(*len) =>
        {
            valid_key_size(key)
        }
        _ => false,
    }
}

/// Core's `GetScriptNumber` for a multisig count in `min..=max`: OP_1 to OP_16, or a minimal
/// push (opcode `0x01`, `opcode` here) of a minimally encoded number (17 to 127: a smaller one
/// has an opcode of its own).
fn script_number(instruction: &Instruction, opcode: u8, min: usize, max: usize) -> Option<usize> {
    let count = match instruction {
        Instruction::Op(op)
            if (OP_PUSHNUM_1.to_u8()..=OP_PUSHNUM_16.to_u8()).contains(&op.to_u8()) =>
        {
            usize::from(op.to_u8() - 0x50)
        }
        Instruction::PushBytes(data) => match (opcode, data.as_bytes()) {
            (0x01, &[n]) if (17..=0x7f).contains(&n) => usize::from(n),
            _ => return None,
        },
        Instruction::Op(_) => return None,
    };
    (min..=max).contains(&count).then_some(count)
}

/// Core's `MatchMultisig`: m, keys of valid sizes (pushed any way), n (the number of keys),
/// OP_CHECKMULTISIG as the last byte and nothing between.
fn multisig(script: &Script) -> Option<(usize, usize)> {
    let bytes = script.as_bytes();
    if bytes.last() != Some(&OP_CHECKMULTISIG.to_u8()) {
        return None;
    }
    let mut instructions = script.instruction_indices();
    let (at, first) = instructions.next()?.ok()?;
    let m = script_number(&first, bytes[at], 1, MAX_PUBKEYS_PER_MULTISIG)?;
    let mut keys = 0usize;
    let (at, last) = loop {
        let (at, instruction) = instructions.next()?.ok()?;
        match instruction {
            Instruction::PushBytes(key) if valid_key_size(key.as_bytes()) => keys += 1,
            other => break (at, other),
        }
    };
    let n = script_number(&last, bytes[at], m, MAX_PUBKEYS_PER_MULTISIG)?;
    let rest_is_checkmultisig = matches!(
        (instructions.next(), instructions.next()),
        (Some(Ok((_, Instruction::Op(op)))), None) if op == OP_CHECKMULTISIG
    );
    (keys == n && rest_is_checkmultisig).then_some((m, n))
}

#[cfg(test)]
mod tests {
    use bitcoin::ScriptBuf;

    use super::*;

    const KEY: &str = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";

    fn hex(s: &str) -> ScriptBuf {
        ScriptBuf::from_hex(s).unwrap()
    }

    #[test]
    fn kinds_follow_cores_solver() {
        let cases = [
            (
                "a914".to_owned() + &"11".repeat(20) + "87",
                OutputKind::ScriptHash,
            ),
            (
                "0014".to_owned() + &"11".repeat(20),
                OutputKind::WitnessV0KeyHash,
            ),
            (
                "0020".to_owned() + &"11".repeat(32),
                OutputKind::WitnessV0ScriptHash,
            ),
            (
                "5120".to_owned() + &"11".repeat(32),
                OutputKind::WitnessV1Taproot,
            ),
            ("51024e73".to_owned(), OutputKind::Anchor),
            ("5202cafe".to_owned(), OutputKind::WitnessUnknown),
            ("5102cafe".to_owned(), OutputKind::WitnessUnknown),
            // Version 0 of another length: not a kind Core knows.
            (
                "0019".to_owned() + &"11".repeat(25),
                OutputKind::NonStandard,
            ),
            ("6a".to_owned(), OutputKind::NullData),
            ("6a02cafe51".to_owned(), OutputKind::NullData),
            // OP_RETURN then a non-push, or a push cut short.
            ("6aac".to_owned(), OutputKind::NonStandard),
            ("6a0501".to_owned(), OutputKind::NonStandard),
            (format!("21{KEY}ac"), OutputKind::PubKey),
            // A 33-byte key with an uncompressed header.
            (format!("2104{}ac", &KEY[2..]), OutputKind::NonStandard),
            (
                "76a914".to_owned() + &"11".repeat(20) + "88ac",
                OutputKind::PubKeyHash,
            ),
            (
                format!("5121{KEY}21{KEY}52ae"),
                OutputKind::Multisig { m: 1, n: 2 },
            ),
            // n not the number of keys; m above n; a key of a bad header; a push for m.
            (format!("5121{KEY}52ae"), OutputKind::NonStandard),
            (format!("5221{KEY}51ae"), OutputKind::NonStandard),
            (
                format!("5121{KEY}2105{}51ae", &KEY[2..]),
                OutputKind::NonStandard,
            ),
            (format!("010121{KEY}51ae"), OutputKind::NonStandard),
            ("".to_owned(), OutputKind::NonStandard),
            // Counts over 16 are pushed, with opcode 0x01 only (Core's CheckMinimalPush).
            (
                format!("0111{}0111ae", format!("21{KEY}").repeat(17)),
                OutputKind::Multisig { m: 17, n: 17 },
            ),
            (
                format!("4c0111{}0111ae", format!("21{KEY}").repeat(17)),
                OutputKind::NonStandard,
            ),
        ];
        for (script, kind) in cases {
            assert_eq!(solve(&hex(&script)), kind, "{script}");
        }
    }
}

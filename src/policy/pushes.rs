//! What a script sig's pushes leave on the stack, read without running it, and taproot's
//! annex: shared by the standardness rules on inputs and Knots's data rules.

use bitcoin::script::Instruction;
use bitcoin::Script;

/// The value a script sig's push leaves on the stack (OP_0 to OP_16 and OP_1NEGATE included).
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

/// The last value a push-only script sig leaves (a P2SH redeem script), if it is push-only.
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

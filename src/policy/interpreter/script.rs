//! Reading a script opcode by opcode (Core's `GetScriptOp`), and the opcodes the interpreter
//! names.

/// One opcode read from a script, with the bytes it pushes (empty for any other opcode).
#[derive(Debug, Clone, Copy)]
pub struct Op<'a> {
    /// The opcode byte.
    pub opcode: u8,
    /// What a push opcode pushes.
    pub data: &'a [u8],
}

pub const OP_PUSHDATA1: u8 = 0x4c;
pub const OP_PUSHDATA2: u8 = 0x4d;
pub const OP_PUSHDATA4: u8 = 0x4e;
pub const OP_1NEGATE: u8 = 0x4f;
pub const OP_1: u8 = 0x51;
pub const OP_16: u8 = 0x60;
pub const OP_IF: u8 = 0x63;
pub const OP_ENDIF: u8 = 0x68;
pub const OP_CODESEPARATOR: u8 = 0xab;
pub const OP_CHECKSIGADD: u8 = 0xba;

/// Reads the opcode at `*pc` and moves past it; `None` at the end or for a push cut short
/// (Core's `GetOp` returning false).
pub fn next_op<'a>(script: &'a [u8], pc: &mut usize) -> Option<Op<'a>> {
    let opcode = *script.get(*pc)?;
    let mut at = *pc + 1;
    let len = match opcode {
        0x01..=0x4b => usize::from(opcode),
        OP_PUSHDATA1 => usize::from(*script.get(at)?),
        OP_PUSHDATA2 => usize::from(u16::from_le_bytes(script.get(at..at + 2)?.try_into().ok()?)),
        OP_PUSHDATA4 => {
            usize::try_from(u32::from_le_bytes(script.get(at..at + 4)?.try_into().ok()?)).ok()?
        }
        _ => 0,
    };
    at += match opcode {
        OP_PUSHDATA1 => 1,
        OP_PUSHDATA2 => 2,
        OP_PUSHDATA4 => 4,
        _ => 0,
    };
    let data = script.get(at..at.checked_add(len)?)?;
    *pc = at + len;
    Some(Op { opcode, data })
}

/// Whether every opcode is a push (OP_0 to OP_16 and OP_1NEGATE; OP_RESERVED counts, as in
/// Core's `IsPushOnly`), reading to the end.
pub fn is_push_only(script: &[u8]) -> bool {
    let mut pc = 0;
    while pc < script.len() {
        match next_op(script, &mut pc) {
            Some(op) if op.opcode <= OP_16 => {}
            _ => return false,
        }
    }
    true
}

/// BIP342's OP_SUCCESSx opcodes (Core's `IsOpSuccess`).
pub fn is_op_success(opcode: u8) -> bool {
    matches!(opcode, 80 | 98 | 126..=129 | 131..=134 | 137..=138 | 141..=142 | 149..=153 | 187..=254)
}

/// Core's `CScript() << data`: `data` as one push in its shortest push opcode.
pub fn push_of(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 5);
    match data.len() {
        n @ 0..=0x4b => out.push(n as u8),
        n @ 0x4c..=0xff => out.extend([OP_PUSHDATA1, n as u8]),
        n @ 0x100..=0xffff => {
            out.push(OP_PUSHDATA2);
            out.extend((n as u16).to_le_bytes());
        }
        n => {
            out.push(OP_PUSHDATA4);
            out.extend((n as u32).to_le_bytes());
        }
    }
    out.extend_from_slice(data);
    out
}

/// Core's `FindAndDelete`: removes every copy of `pattern` that starts at an opcode boundary
/// (copies right after each other included); returns how many.
pub fn find_and_delete(script: &mut Vec<u8>, pattern: &[u8]) -> usize {
    if pattern.is_empty() {
        return 0;
    }
    let mut found = 0;
    let mut kept = Vec::with_capacity(script.len());
    let (mut pc, mut copied_to) = (0, 0);
    loop {
        kept.extend_from_slice(&script[copied_to..pc]);
        while script.len() - pc >= pattern.len() && script[pc..].starts_with(pattern) {
            pc += pattern.len();
            found += 1;
        }
        copied_to = pc;
        if next_op(script, &mut pc).is_none() {
            break;
        }
    }
    if found > 0 {
        kept.extend_from_slice(&script[copied_to..]);
        *script = kept;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_are_read_with_their_data_and_cut_pushes_end_the_script() {
        let script = [
            0x02,
            0xaa,
            0xbb,
            OP_PUSHDATA1,
            0x01,
            0xcc,
            0x76,
            OP_PUSHDATA2,
            0x05,
            0x00,
            0x01,
        ];
        let mut pc = 0;
        let first = next_op(&script, &mut pc).map(|op| (op.opcode, op.data.to_vec()));
        assert_eq!(first, Some((0x02, vec![0xaa, 0xbb])));
        assert_eq!(
            next_op(&script, &mut pc).map(|op| op.data.to_vec()),
            Some(vec![0xcc])
        );
        assert_eq!(next_op(&script, &mut pc).map(|op| op.opcode), Some(0x76));
        assert!(next_op(&script, &mut pc).is_none());
    }

    #[test]
    fn find_and_delete_removes_copies_at_opcode_boundaries_only() {
        // Cases of Core's script_FindAndDelete test.
        let mut s = vec![0x03, 0x02, 0xff, 0x03, 0x03, 0x02, 0xff, 0x03];
        assert_eq!(find_and_delete(&mut s, &[0x03, 0x02, 0xff, 0x03]), 2);
        assert!(s.is_empty());
        let mut s = vec![0x03, 0x02, 0xff, 0x03, 0x03, 0x02, 0xff, 0x03];
        assert_eq!(
            find_and_delete(&mut s, &[0x02]),
            0,
            "not at an opcode boundary"
        );
        let mut s = vec![0x00, 0x03, 0xfe, 0xed];
        assert_eq!(find_and_delete(&mut s, &[0x03, 0xfe, 0xed]), 1);
        assert_eq!(s, vec![0x00]);
        let mut s = vec![0x00, 0x03, 0xfe, 0xed];
        assert_eq!(find_and_delete(&mut s, &[0x00]), 1);
        assert_eq!(s, vec![0x03, 0xfe, 0xed]);
    }
}

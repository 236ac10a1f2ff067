//! Script numbers and truth (Core's `CScriptNum` and `CastToBool`, script/script.h and
//! script/interpreter.cpp), and the shortest-push rule (`CheckMinimalPush`).

use super::ScriptError;

/// The longest number arithmetic opcodes read (`CScriptNum`'s default `nMaxNumSize`).
pub const DEFAULT_NUM_SIZE: usize = 4;

/// Reads a script number of at most `max_size` bytes; with `require_minimal`, refuses one
/// with a needless zero byte (Core's `scriptnum_error`).
pub fn read(bytes: &[u8], require_minimal: bool, max_size: usize) -> Result<i64, ScriptError> {
    if bytes.len() > max_size {
        return Err(ScriptError::ScriptNum);
    }
    if require_minimal {
        if let Some(&last) = bytes.last() {
            // The last byte may be 0x00 or 0x80 only to hold the sign of a byte above it.
            let sign_needed = bytes.len() > 1 && bytes[bytes.len() - 2] & 0x80 != 0;
            if last & 0x7f == 0 && !sign_needed {
                return Err(ScriptError::ScriptNum);
            }
        }
    }
    let Some(&last) = bytes.last() else {
        return Ok(0);
    };
    let mut value: i64 = 0;
    for (i, byte) in bytes.iter().enumerate() {
        value |= i64::from(*byte) << (8 * i);
    }
    if last & 0x80 != 0 {
        // Clear the sign bit and negate (at most 5 bytes here, so no overflow).
        let magnitude = value & !(0x80_i64 << (8 * (bytes.len() - 1)));
        return Ok(-magnitude);
    }
    Ok(value)
}

/// Serializes a number as the stack holds it: little endian magnitude, sign in the top bit.
pub fn write(value: i64) -> Vec<u8> {
    if value == 0 {
        return Vec::new();
    }
    let negative = value < 0;
    let mut magnitude = value.unsigned_abs();
    let mut out = Vec::with_capacity(9);
    while magnitude > 0 {
        out.push((magnitude & 0xff) as u8);
        magnitude >>= 8;
    }
    match out.last_mut() {
        Some(top) if *top & 0x80 != 0 => out.push(if negative { 0x80 } else { 0 }),
        Some(top) if negative => *top |= 0x80,
        _ => {}
    }
    out
}

/// Core's `CScriptNum::getint`: the value clamped to a 32-bit int.
pub fn clamp_to_int(value: i64) -> i64 {
    value.clamp(i64::from(i32::MIN), i64::from(i32::MAX))
}

/// Core's `CastToBool`: any non-zero byte, except a lone sign bit at the end (negative zero).
pub fn cast_to_bool(bytes: &[u8]) -> bool {
    for (i, byte) in bytes.iter().enumerate() {
        if *byte != 0 {
            return !(i == bytes.len() - 1 && *byte == 0x80);
        }
    }
    false
}

/// Core's `CheckMinimalPush`: `data` pushed by `opcode` in the shortest form there is.
pub fn is_minimal_push(data: &[u8], opcode: u8) -> bool {
    match data.len() {
        0 => opcode == 0x00,
        1 if (1..=16).contains(&data[0]) => false, // OP_1 to OP_16
        1 if data[0] == 0x81 => false,             // OP_1NEGATE
        n @ 1..=75 => usize::from(opcode) == n,
        76..=255 => opcode == 0x4c,
        256..=65535 => opcode == 0x4d,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_and_write_as_core_serializes_them() {
        for value in [
            0,
            1,
            -1,
            127,
            128,
            -128,
            255,
            256,
            32767,
            -32768,
            2147483647,
            -2147483647,
        ] {
            let bytes = write(value);
            assert_eq!(read(&bytes, true, 5), Ok(value), "{value}");
        }
        assert_eq!(write(128), vec![0x80, 0x00]);
        assert_eq!(write(-1), vec![0x81]);
        assert_eq!(read(&[0x00], false, 4), Ok(0));
        assert_eq!(read(&[0x80], false, 4), Ok(0));
        assert_eq!(read(&[0x00], true, 4), Err(ScriptError::ScriptNum));
        assert_eq!(read(&[0x01, 0x00], true, 4), Err(ScriptError::ScriptNum));
        assert_eq!(read(&[0xff, 0x00], true, 4), Ok(255));
        assert_eq!(
            read(&[1, 2, 3, 4, 5], false, 4),
            Err(ScriptError::ScriptNum)
        );
    }

    #[test]
    fn truth_is_any_non_zero_byte_but_negative_zero() {
        assert!(!cast_to_bool(&[]));
        assert!(!cast_to_bool(&[0, 0, 0x80]));
        assert!(cast_to_bool(&[0, 0x80, 0]));
        assert!(cast_to_bool(&[0x81]));
    }
}

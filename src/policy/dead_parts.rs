//! Knots's `FindDeadParts` (`-rejectdeadbranches`, on in Knots 29.4): follows a script as far
//! as constants decide it and finds the conditional parts that can never run, whose pushes are
//! then data (`OP_1 OP_NOTIF <data> OP_ENDIF`). A value read from the witness, a hash, a
//! signature check or an opcode not modelled is unknown, and an unknown condition marks
//! nothing, so a part a spend can reach is never read as dead.

use std::cell::OnceCell;
use std::ops::Range;

use bitcoin::hashes::{sha256, Hash};
use bitcoin::opcodes::all::*;
use bitcoin::script::{read_scriptint, write_scriptint, Instruction, Script};

/// One opcode of a script: where it starts, its byte, and where its pushed data lies (an
/// empty range at its end for an opcode that pushes no data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// Offset of the opcode's byte.
    pub at: usize,
    /// The opcode's byte.
    pub code: u8,
    /// The bytes it pushes; `data.end` is where the next opcode starts.
    pub data: Range<usize>,
}

/// A script's opcodes as Core's `GetOp` reads them, up to the first that does not parse (a
/// push running past the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedOps {
    /// The opcodes read, in order.
    pub ops: Vec<Op>,
    /// Whether they reach the script's end (`false`: reading stopped at a push cut short).
    pub complete: bool,
}

/// Reads `script`'s opcodes as Core's `GetOp` does, as far as they parse.
pub fn parse_ops(script: &[u8]) -> ParsedOps {
    let mut ops = Vec::new();
    for item in Script::from_bytes(script).instruction_indices() {
        let Ok((at, instruction)) = item else {
            return ParsedOps {
                ops,
                complete: false,
            };
        };
        let code = script[at];
        let data = match instruction {
            Instruction::PushBytes(pushed) => {
                let header = match code {
                    0x4c => 2,
                    0x4d => 3,
                    0x4e => 5,
                    _ => 1,
                };
                at + header..at + header + pushed.len()
            }
            Instruction::Op(_) => at + 1..at + 1,
        };
        ops.push(Op { at, code, data });
    }
    ParsedOps {
        ops,
        complete: true,
    }
}

/// The conditionals a constant guard makes unreachable, by the offset of their opcode: the
/// OP_IF/OP_NOTIF whose first part never runs, and the OP_ELSE whose part never runs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DeadParts {
    /// Offsets of OP_IF/OP_NOTIF whose first part is dead, ascending.
    pub at_if: Vec<usize>,
    /// Offsets of OP_ELSE whose part is dead, ascending.
    pub at_else: Vec<usize>,
}

impl DeadParts {
    /// Whether the conditional at `offset` opens a dead first part.
    pub fn if_at(&self, offset: usize) -> bool {
        self.at_if.binary_search(&offset).is_ok()
    }

    /// Whether the OP_ELSE at `offset` opens a dead part.
    pub fn else_at(&self, offset: usize) -> bool {
        self.at_else.binary_search(&offset).is_ok()
    }
}

/// A value constants decide, as an index into [`Values`]; [`UNKNOWN`] otherwise.
type Known = usize;
const UNKNOWN: Known = 0;
/// Core's `MAX_STACK_SIZE`: past it the script fails, and what is known is forgotten.
const MAX_STACK_SIZE: usize = 1_000;
const MAX_PUBKEYS_PER_MULTISIG: i64 = 20;

/// A value seen, with what the opcodes ask of it worked out once: read again and again
/// (`OP_IFDUP`, `OP_EQUAL` on a copy), a large push must not cost its size each time.
struct Value {
    bytes: Vec<u8>,
    truthy: bool,
    /// Its SHA-256, computed the first time two values of its length are compared.
    digest: OnceCell<[u8; 32]>,
}

/// The values seen; stacks hold their indexes, so a copy costs nothing.
struct Values(Vec<Value>);

impl Values {
    fn new() -> Self {
        // Index 0 is UNKNOWN's place.
        let mut values = Values(Vec::new());
        values.add(Vec::new());
        values
    }

    fn add(&mut self, bytes: Vec<u8>) -> Known {
        let truthy = cast_to_bool(&bytes);
        self.0.push(Value {
            bytes,
            truthy,
            digest: OnceCell::new(),
        });
        self.0.len() - 1
    }

    fn add_num(&mut self, n: i64) -> Known {
        let mut buf = [0u8; 8];
        let len = write_scriptint(&mut buf, n);
        self.add(buf[..len].to_vec())
    }

    fn add_bool(&mut self, b: bool) -> Known {
        self.add_num(i64::from(b))
    }

    fn len(&self, v: Known) -> usize {
        self.0[v].bytes.len()
    }

    fn truthy(&self, v: Known) -> bool {
        self.0[v].truthy
    }

    /// Whether two known values hold the same bytes: a copy by its index, others by length
    /// and then by SHA-256, each value hashed at most once.
    fn equal(&self, a: Known, b: Known) -> bool {
        let digest = |v: Known| {
            *self.0[v]
                .digest
                .get_or_init(|| sha256::Hash::hash(&self.0[v].bytes).to_byte_array())
        };
        a == b || (self.len(a) == self.len(b) && digest(a) == digest(b))
    }

    /// The value as a minimal script number of at most 4 bytes, if known.
    fn num(&self, v: Known) -> Option<i64> {
        (v != UNKNOWN)
            .then(|| read_scriptint(&self.0[v].bytes).ok())
            .flatten()
    }
}

/// The interpreter's `CastToBool`: any non-zero byte but a lone sign bit at the end.
fn cast_to_bool(value: &[u8]) -> bool {
    match value.iter().position(|&b| b != 0) {
        Some(i) => !(i == value.len() - 1 && value[i] == 0x80),
        None => false,
    }
}

/// The top of the stack as far as constants decide it; below it nothing is known.
#[derive(Default)]
struct Stack(Vec<Known>);

impl Stack {
    fn push(&mut self, v: Known) {
        self.0.push(v);
        if self.0.len() > MAX_STACK_SIZE {
            self.0.clear();
        }
    }

    fn pop(&mut self) -> Known {
        self.0.pop().unwrap_or(UNKNOWN)
    }

    fn peek(&self, depth: usize) -> Known {
        self.0.iter().rev().nth(depth).copied().unwrap_or(UNKNOWN)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn forget(&mut self) {
        self.0.clear();
    }

    /// Moves the item `depth` deep to the top (`depth < len`).
    fn roll(&mut self, depth: usize) {
        let v = self.0.remove(self.0.len() - 1 - depth);
        self.0.push(v);
    }
}

/// An open conditional: whether constants decide it, and whether its current part runs.
struct Frame {
    known: bool,
    running: bool,
}

/// Knots's `FindDeadParts` over a parsed script.
pub fn find_dead_parts(script: &[u8], ops: &[Op]) -> DeadParts {
    let mut dead = DeadParts::default();
    let mut frames: Vec<Frame> = Vec::new();
    let mut not_running = 0usize;
    let mut values = Values::new();
    let (mut stack, mut alt) = (Stack::default(), Stack::default());
    for op in ops {
        let code = op.code;
        if code == OP_IF.to_u8() || code == OP_NOTIF.to_u8() {
            if not_running > 0 {
                frames.push(Frame {
                    known: true,
                    running: false,
                });
                not_running += 1;
                continue;
            }
            let cond = stack.pop();
            if cond == UNKNOWN {
                frames.push(Frame {
                    known: false,
                    running: true,
                });
                continue;
            }
            let runs = values.truthy(cond) == (code == OP_IF.to_u8());
            if !runs {
                dead.at_if.push(op.at);
                not_running += 1;
            }
            frames.push(Frame {
                known: true,
                running: runs,
            });
            continue;
        }
        if code == OP_ELSE.to_u8() || code == OP_ENDIF.to_u8() {
            let Some(frame) = frames.last_mut() else {
                break; // unbalanced: the script cannot run
            };
            let outer_running = not_running == usize::from(!frame.running);
            if code == OP_ELSE.to_u8() {
                if frame.known && outer_running {
                    frame.running = !frame.running;
                    if frame.running {
                        not_running -= 1;
                    } else {
                        not_running += 1;
                        dead.at_else.push(op.at);
                    }
                } else if !frame.known {
                    // The else part starts from the stack before the OP_IF, which is not kept.
                    stack.forget();
                    alt.forget();
                }
            } else {
                if !frame.running {
                    not_running -= 1;
                }
                if !frame.known && not_running == 0 {
                    stack.forget();
                    alt.forget();
                }
                frames.pop();
            }
            continue;
        }
        if not_running > 0 {
            continue;
        }
        if code == OP_RETURN.to_u8() {
            break; // the script fails here
        }
        step(
            code,
            &script[op.data.clone()],
            &mut values,
            &mut stack,
            &mut alt,
        );
    }
    dead
}

/// One opcode outside the conditionals, on the known stacks.
fn step(code: u8, data: &[u8], values: &mut Values, stack: &mut Stack, alt: &mut Stack) {
    let op = bitcoin::opcodes::Opcode::from(code);
    match code {
        0x00..=0x4e => stack.push(values.add(data.to_vec())),
        0x4f => stack.push(values.add_num(-1)),
        0x51..=0x60 => stack.push(values.add_num(i64::from(code - 0x50))),
        _ => match op {
            OP_NOP | OP_NOP1 | OP_CLTV | OP_CSV | OP_NOP4 | OP_NOP5 | OP_NOP6 | OP_NOP7
            | OP_NOP8 | OP_NOP9 | OP_NOP10 | OP_CODESEPARATOR => {}
            OP_VERIFY | OP_DROP => {
                stack.pop();
            }
            OP_2DROP => {
                stack.pop();
                stack.pop();
            }
            OP_TOALTSTACK => alt.push(stack.pop()),
            OP_FROMALTSTACK => stack.push(alt.pop()),
            OP_DUP | OP_OVER | OP_2DUP | OP_3DUP | OP_2OVER => copy_items(op, stack),
            OP_IFDUP => {
                let top = stack.peek(0);
                if top == UNKNOWN {
                    stack.forget(); // whether it copies is not known, so neither is the depth
                } else if values.truthy(top) {
                    stack.push(top);
                }
            }
            OP_SIZE => {
                let top = stack.peek(0);
                let size = match top {
                    UNKNOWN => UNKNOWN,
                    _ => values.add_num(values.len(top) as i64),
                };
                stack.push(size);
            }
            OP_DEPTH => stack.push(UNKNOWN),
            OP_NIP | OP_SWAP | OP_TUCK | OP_ROT | OP_2SWAP | OP_2ROT => move_items(op, stack),
            OP_PICK | OP_ROLL => pick(op == OP_ROLL, values, stack),
            OP_EQUAL | OP_EQUALVERIFY => {
                let (b, a) = (stack.pop(), stack.pop());
                if op == OP_EQUAL {
                    let equal = match a == UNKNOWN || b == UNKNOWN {
                        true => UNKNOWN,
                        false => values.add_bool(values.equal(a, b)),
                    };
                    stack.push(equal);
                }
            }
            OP_1ADD | OP_1SUB | OP_NEGATE | OP_ABS | OP_NOT | OP_0NOTEQUAL => {
                let result = values.num(stack.pop()).map(|a| match op {
                    OP_1ADD => a + 1,
                    OP_1SUB => a - 1,
                    OP_NEGATE => -a,
                    OP_ABS => a.abs(),
                    OP_NOT => i64::from(a == 0),
                    _ => i64::from(a != 0),
                });
                let known = result.map_or(UNKNOWN, |r| values.add_num(r));
                stack.push(known);
            }
            OP_ADD
            | OP_SUB
            | OP_BOOLAND
            | OP_BOOLOR
            | OP_NUMEQUAL
            | OP_NUMEQUALVERIFY
            | OP_NUMNOTEQUAL
            | OP_LESSTHAN
            | OP_GREATERTHAN
            | OP_LESSTHANOREQUAL
            | OP_GREATERTHANOREQUAL
            | OP_MIN
            | OP_MAX => binary(op, values, stack),
            OP_WITHIN => {
                let (hi, lo, x) = (stack.pop(), stack.pop(), stack.pop());
                let within = match (values.num(hi), values.num(lo), values.num(x)) {
                    (Some(hi), Some(lo), Some(x)) => values.add_bool(lo <= x && x < hi),
                    _ => UNKNOWN,
                };
                stack.push(within);
            }
            OP_RIPEMD160 | OP_SHA1 | OP_SHA256 | OP_HASH160 | OP_HASH256 => {
                stack.pop();
                stack.push(UNKNOWN);
            }
            OP_CHECKSIG | OP_CHECKSIGVERIFY | OP_CHECKSIGADD => {
                let taken = if op == OP_CHECKSIGADD { 3 } else { 2 };
                (0..taken).for_each(|_| {
                    stack.pop();
                });
                if op != OP_CHECKSIGVERIFY {
                    stack.push(UNKNOWN);
                }
            }
            OP_CHECKMULTISIG | OP_CHECKMULTISIGVERIFY => {
                multisig(values, stack);
                if op == OP_CHECKMULTISIG {
                    stack.push(UNKNOWN);
                }
            }
            // Not modelled: forget what is known rather than guess.
            _ => {
                stack.forget();
                alt.forget();
            }
        },
    }
}

/// OP_DUP, OP_OVER, OP_2DUP, OP_3DUP and OP_2OVER: copies of items (unknown below the known).
fn copy_items(op: bitcoin::opcodes::Opcode, stack: &mut Stack) {
    let depths: &[usize] = match op {
        OP_DUP => &[0],
        OP_OVER => &[1],
        OP_2DUP => &[1, 0],
        OP_3DUP => &[2, 1, 0],
        _ => &[3, 2],
    };
    let copies: Vec<Known> = depths.iter().map(|&d| stack.peek(d)).collect();
    copies.into_iter().for_each(|v| stack.push(v));
}

/// OP_NIP, OP_SWAP, OP_TUCK, OP_ROT, OP_2SWAP and OP_2ROT; with fewer known items than they
/// take, nothing is known after them.
fn move_items(op: bitcoin::opcodes::Opcode, stack: &mut Stack) {
    let need = match op {
        OP_2ROT => 6,
        OP_2SWAP => 4,
        OP_ROT => 3,
        _ => 2,
    };
    if stack.len() < need {
        stack.forget();
        return;
    }
    match op {
        OP_NIP => {
            let top = stack.pop();
            stack.pop();
            stack.push(top);
        }
        OP_SWAP => stack.roll(1),
        OP_TUCK => {
            let (top, second) = (stack.pop(), stack.pop());
            [top, second, top].into_iter().for_each(|v| stack.push(v));
        }
        OP_ROT => stack.roll(2),
        OP_2SWAP => {
            stack.roll(3);
            stack.roll(3);
        }
        _ => {
            stack.roll(5);
            stack.roll(5);
        }
    }
}

/// OP_PICK and OP_ROLL: a known depth within the known items moves or copies that item;
/// otherwise the result is unknown, and after OP_ROLL (or an unknown depth) so is the rest.
fn pick(roll: bool, values: &Values, stack: &mut Stack) {
    let depth = values.num(stack.pop());
    match depth {
        Some(n) if n >= 0 && (n as usize) < stack.len() => {
            let n = n as usize;
            if roll {
                stack.roll(n);
            } else {
                stack.push(stack.peek(n));
            }
        }
        _ => {
            if roll || depth.is_none() {
                stack.forget();
            }
            stack.push(UNKNOWN);
        }
    }
}

/// The two-operand arithmetic and comparisons on known script numbers.
fn binary(op: bitcoin::opcodes::Opcode, values: &mut Values, stack: &mut Stack) {
    let b = values.num(stack.pop());
    let a = values.num(stack.pop());
    if op == OP_NUMEQUALVERIFY {
        return;
    }
    let (Some(a), Some(b)) = (a, b) else {
        stack.push(UNKNOWN);
        return;
    };
    let r = match op {
        OP_ADD => a + b,
        OP_SUB => a - b,
        OP_BOOLAND => i64::from(a != 0 && b != 0),
        OP_BOOLOR => i64::from(a != 0 || b != 0),
        OP_NUMEQUAL => i64::from(a == b),
        OP_NUMNOTEQUAL => i64::from(a != b),
        OP_LESSTHAN => i64::from(a < b),
        OP_GREATERTHAN => i64::from(a > b),
        OP_LESSTHANOREQUAL => i64::from(a <= b),
        OP_GREATERTHANOREQUAL => i64::from(a >= b),
        OP_MIN => a.min(b),
        _ => a.max(b),
    };
    let known = values.add_num(r);
    stack.push(known);
}

/// OP_CHECKMULTISIG(VERIFY)'s operands: with known counts they are taken, else nothing is
/// known after it.
fn multisig(values: &Values, stack: &mut Stack) {
    let keys = values
        .num(stack.pop())
        .filter(|k| (0..=MAX_PUBKEYS_PER_MULTISIG).contains(k));
    let Some(keys) = keys else {
        stack.forget();
        return;
    };
    (0..keys).for_each(|_| {
        stack.pop();
    });
    match values.num(stack.pop()).filter(|s| (0..=keys).contains(s)) {
        // The signatures and the dummy.
        Some(sigs) => (0..=sigs).for_each(|_| {
            stack.pop();
        }),
        None => stack.forget(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dead(hex: &str) -> DeadParts {
        let script = bitcoin::ScriptBuf::from_hex(hex).unwrap().to_bytes();
        find_dead_parts(&script, &parse_ops(&script).ops)
    }

    #[test]
    fn constant_guards_mark_what_never_runs() {
        // OP_1 OP_NOTIF <1B> OP_ENDIF: the NOTIF part is dead.
        assert_eq!(dead("516401ab68").at_if, vec![1]);
        // OP_1 OP_IF OP_1 OP_ELSE <1B> OP_ENDIF: the ELSE part is dead.
        let parts = dead("5163516701ab68");
        assert!(parts.at_if.is_empty());
        assert_eq!(parts.at_else, vec![3]);
        // OP_2 OP_3 OP_ADD OP_5 OP_NUMEQUAL OP_NOTIF …: arithmetic decides it.
        assert_eq!(dead("5253935587640068").at_if, vec![5]);
        // OP_0 OP_1 OP_SWAP OP_IF: after the swap the top is 0.
        assert_eq!(dead("00517c630068").at_if, vec![3]);
    }

    #[test]
    fn what_a_spend_decides_is_never_dead() {
        // A witness value: OP_IF with nothing known.
        assert_eq!(dead("630068"), DeadParts::default());
        // A hash of a constant is not computed.
        assert_eq!(dead("01aba9630068"), DeadParts::default());
        // An unmodelled opcode forgets the constant under it.
        assert_eq!(dead("00b0630068").at_if, vec![2], "OP_NOP1 is modelled");
        assert_eq!(
            dead("0050630068"),
            DeadParts::default(),
            "OP_RESERVED is not"
        );
        // A ROLL deeper than what is known: the depth past it is unknown too.
        assert_eq!(dead("00517a630068"), DeadParts::default());
    }

    #[test]
    fn ops_carry_their_data() {
        let script = [0x02, 0xaa, 0xbb, 0x4c, 0x01, 0xcc, 0x75];
        let parsed = parse_ops(&script);
        assert!(parsed.complete);
        let data: Vec<&[u8]> = parsed.ops.iter().map(|o| &script[o.data.clone()]).collect();
        assert_eq!(data, vec![&[0xaa, 0xbb][..], &[0xcc][..], &[][..]]);
        assert_eq!(parsed.ops[2].data, 7..7);
        // OP_RETURN, then a push cut short: the OP_RETURN is read, then reading stops.
        let cut = parse_ops(&[0x6a, 0x4c, 0x05, 0x00]);
        assert!(!cut.complete);
        assert_eq!(cut.ops.len(), 1);
    }
}

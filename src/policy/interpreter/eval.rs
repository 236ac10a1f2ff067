//! Core's `EvalScript` (script/interpreter.cpp): one script run over a stack, opcode by
//! opcode, under the given flags, with the same limits and the same first error.

use bitcoin::hashes::{hash160, ripemd160, sha1, sha256, sha256d, Hash};

use super::checker::{check_pubkey_encoding, check_signature_encoding, Checker, TaprootInput};
use super::num::{self, cast_to_bool, is_minimal_push, DEFAULT_NUM_SIZE};
use super::script::{self, next_op, OP_1, OP_16, OP_1NEGATE, OP_ENDIF, OP_IF, OP_PUSHDATA4};
use super::{Flags, ScriptError, SigVersion};

/// The largest script legacy and segwit v0 run (`MAX_SCRIPT_SIZE`).
const MAX_SCRIPT_SIZE: usize = 10_000;
/// The largest stack element (`MAX_SCRIPT_ELEMENT_SIZE`).
pub const MAX_ELEMENT_SIZE: usize = 520;
/// The most non-push opcodes a legacy or segwit v0 script runs (`MAX_OPS_PER_SCRIPT`).
const MAX_OPS: usize = 201;
/// The most keys in a CHECKMULTISIG (`MAX_PUBKEYS_PER_MULTISIG`).
const MAX_MULTISIG_KEYS: i64 = 20;
/// The most elements on the stack and altstack together (`MAX_STACK_SIZE`).
pub const MAX_STACK_SIZE: usize = 1000;
/// What each signature checked in a tapscript takes from its budget (BIP342).
const VALIDATION_WEIGHT_PER_SIGOP: i64 = 50;

/// A stack of byte strings.
pub type Stack = Vec<Vec<u8>>;

/// What one run of tapscript carries beside the stack (Core's `ScriptExecutionData`).
#[derive(Debug, Default)]
pub struct ExecData {
    /// The annex, the leaf and the last OP_CODESEPARATOR, for BIP341's hash.
    pub taproot: TaprootInput,
    /// BIP342's signature budget left.
    pub validation_weight_left: i64,
}

/// The open OP_IF branches, as Core's `ConditionStack`: their count and where the first false
/// one is, so each opcode asks "is every branch true" in constant time (a list of flags asked
/// at every opcode made 100,000 nested OP_IFs in a tapscript cost 10^10 steps).
#[derive(Debug, Default)]
struct Conditions {
    depth: usize,
    first_false: Option<usize>,
}

impl Conditions {
    fn all_true(&self) -> bool {
        self.first_false.is_none()
    }

    fn is_empty(&self) -> bool {
        self.depth == 0
    }

    fn push(&mut self, value: bool) {
        if !value && self.first_false.is_none() {
            self.first_false = Some(self.depth);
        }
        self.depth += 1;
    }

    fn pop(&mut self) -> Result<(), ScriptError> {
        self.depth = self
            .depth
            .checked_sub(1)
            .ok_or(ScriptError::UnbalancedConditional)?;
        if self.first_false == Some(self.depth) {
            self.first_false = None;
        }
        Ok(())
    }

    /// OP_ELSE: the innermost branch flips (a false one outside it keeps everything off).
    fn toggle_top(&mut self) -> Result<(), ScriptError> {
        let top = self
            .depth
            .checked_sub(1)
            .ok_or(ScriptError::UnbalancedConditional)?;
        match self.first_false {
            None => self.first_false = Some(top),
            Some(at) if at == top => self.first_false = None,
            Some(_) => {}
        }
        Ok(())
    }
}

/// One run's state: its flags, its checker and where it is.
struct Run<'c, 'd, 'a> {
    flags: Flags,
    version: SigVersion,
    checker: &'c mut Checker<'d, 'a>,
    exec: &'c mut ExecData,
    require_minimal: bool,
    /// Where the script code of a signature starts (after the last OP_CODESEPARATOR run).
    code_start: usize,
}

/// Runs `code` on `stack` (Core's `EvalScript`).
pub fn eval_script(
    stack: &mut Stack,
    code: &[u8],
    flags: Flags,
    checker: &mut Checker<'_, '_>,
    version: SigVersion,
    exec: &mut ExecData,
) -> Result<(), ScriptError> {
    let legacy_limits = matches!(version, SigVersion::Base | SigVersion::WitnessV0);
    if legacy_limits && code.len() > MAX_SCRIPT_SIZE {
        return Err(ScriptError::ScriptSize);
    }
    let mut run = Run {
        flags,
        version,
        checker,
        exec,
        require_minimal: flags.has(Flags::MINIMALDATA),
        code_start: 0,
    };
    run.exec.taproot.code_separator = u32::MAX;
    let mut conditions = Conditions::default();
    let mut altstack: Stack = Vec::new();
    let mut op_count = 0usize;
    let mut pc = 0usize;
    let mut position: u32 = 0;
    while pc < code.len() {
        let executing = conditions.all_true();
        let op = next_op(code, &mut pc).ok_or(ScriptError::BadOpcode)?;
        if op.data.len() > MAX_ELEMENT_SIZE {
            return Err(ScriptError::PushSize);
        }
        if legacy_limits && op.opcode > OP_16 {
            op_count += 1;
            if op_count > MAX_OPS {
                return Err(ScriptError::OpCount);
            }
        }
        if is_disabled(op.opcode) {
            return Err(ScriptError::DisabledOpcode);
        }
        if op.opcode == script::OP_CODESEPARATOR
            && version == SigVersion::Base
            && flags.has(Flags::CONST_SCRIPTCODE)
        {
            return Err(ScriptError::OpCodeSeparator);
        }
        if executing && op.opcode <= OP_PUSHDATA4 {
            if run.require_minimal && !is_minimal_push(op.data, op.opcode) {
                return Err(ScriptError::MinimalData);
            }
            stack.push(op.data.to_vec());
        } else if executing || (OP_IF..=OP_ENDIF).contains(&op.opcode) {
            let step = Step {
                opcode: op.opcode,
                pc,
                position,
                executing,
            };
            run.step(
                step,
                code,
                stack,
                &mut altstack,
                &mut conditions,
                &mut op_count,
            )?;
        }
        if stack.len() + altstack.len() > MAX_STACK_SIZE {
            return Err(ScriptError::StackSize);
        }
        position = position.wrapping_add(1);
    }
    if !conditions.is_empty() {
        return Err(ScriptError::UnbalancedConditional);
    }
    Ok(())
}

/// Opcodes disabled since 2010, refused even where they do not run.
fn is_disabled(opcode: u8) -> bool {
    matches!(opcode, 0x7e..=0x81 | 0x83..=0x86 | 0x8d | 0x8e | 0x95..=0x99)
}

/// The opcode being run and where.
#[derive(Clone, Copy)]
struct Step {
    opcode: u8,
    /// Just past the opcode.
    pc: usize,
    /// Its index among the script's opcodes (BIP342's code separator position).
    position: u32,
    executing: bool,
}

fn top(stack: &Stack, depth: usize) -> Result<&Vec<u8>, ScriptError> {
    stack
        .len()
        .checked_sub(depth)
        .and_then(|i| stack.get(i))
        .ok_or(ScriptError::InvalidStackOperation)
}

fn need(stack: &Stack, n: usize) -> Result<(), ScriptError> {
    if stack.len() < n {
        return Err(ScriptError::InvalidStackOperation);
    }
    Ok(())
}

fn pop(stack: &mut Stack) -> Result<Vec<u8>, ScriptError> {
    stack.pop().ok_or(ScriptError::InvalidStackOperation)
}

fn push_bool(stack: &mut Stack, value: bool) {
    stack.push(if value { vec![1] } else { Vec::new() });
}

impl Run<'_, '_, '_> {
    fn number(&self, bytes: &[u8]) -> Result<i64, ScriptError> {
        num::read(bytes, self.require_minimal, DEFAULT_NUM_SIZE)
    }

    fn step(
        &mut self,
        step: Step,
        code: &[u8],
        stack: &mut Stack,
        altstack: &mut Stack,
        conditions: &mut Conditions,
        op_count: &mut usize,
    ) -> Result<(), ScriptError> {
        let opcode = step.opcode;
        match opcode {
            OP_1NEGATE | OP_1..=OP_16 => {
                stack.push(num::write(i64::from(opcode) - i64::from(OP_1 - 1)));
            }
            0x61 => {} // OP_NOP
            0xb1 => self.check_lock_time_verify(stack)?,
            0xb2 => self.check_sequence_verify(stack)?,
            0xb0 | 0xb3..=0xb9 => {
                if self.flags.has(Flags::DISCOURAGE_UPGRADABLE_NOPS) {
                    return Err(ScriptError::DiscourageUpgradableNops);
                }
            }
            0x63 | 0x64 => self.begin_if(opcode == 0x64, step.executing, stack, conditions)?,
            0x67 => conditions.toggle_top()?,
            0x68 => conditions.pop()?,
            0x69 => {
                if !cast_to_bool(top(stack, 1)?) {
                    return Err(ScriptError::Verify);
                }
                stack.pop();
            }
            0x6a => return Err(ScriptError::OpReturn),
            0x6b..=0x82 => stack_op(opcode, stack, altstack, self.require_minimal)?,
            0x87 | 0x88 => {
                need(stack, 2)?;
                let equal = pop(stack)? == pop(stack)?;
                push_bool(stack, equal);
                if opcode == 0x88 {
                    if !equal {
                        return Err(ScriptError::EqualVerify);
                    }
                    stack.pop();
                }
            }
            0x8b..=0x92 => {
                let value = self.number(top(stack, 1)?)?;
                let result = match opcode {
                    0x8b => value + 1,
                    0x8c => value - 1,
                    0x8f => -value,
                    0x90 => value.abs(),
                    0x91 => i64::from(value == 0),
                    _ => i64::from(value != 0),
                };
                stack.pop();
                stack.push(num::write(result));
            }
            0x93 | 0x94 | 0x9a..=0xa4 => self.binary(opcode, stack)?,
            0xa5 => {
                need(stack, 3)?;
                let x = self.number(top(stack, 3)?)?;
                let min = self.number(top(stack, 2)?)?;
                let max = self.number(top(stack, 1)?)?;
                stack.truncate(stack.len() - 3);
                push_bool(stack, min <= x && x < max);
            }
            0xa6..=0xaa => {
                let value = pop(stack)?;
                stack.push(hash(opcode, &value));
            }
            script::OP_CODESEPARATOR => {
                self.code_start = step.pc;
                self.exec.taproot.code_separator = step.position;
            }
            0xac | 0xad => {
                need(stack, 2)?;
                let sig = top(stack, 2)?.clone();
                let key = top(stack, 1)?.clone();
                let success = self.check_sig(&sig, &key, code)?;
                stack.truncate(stack.len() - 2);
                push_bool(stack, success);
                if opcode == 0xad {
                    if !success {
                        return Err(ScriptError::CheckSigVerify);
                    }
                    stack.pop();
                }
            }
            script::OP_CHECKSIGADD if self.version == SigVersion::Tapscript => {
                need(stack, 3)?;
                let sig = top(stack, 3)?.clone();
                let n = self.number(top(stack, 2)?)?;
                let key = top(stack, 1)?.clone();
                let success = self.check_sig_tapscript(&sig, &key)?;
                stack.truncate(stack.len() - 3);
                stack.push(num::write(n + i64::from(success)));
            }
            0xae | 0xaf => self.check_multisig(opcode == 0xaf, stack, code, op_count)?,
            _ => return Err(ScriptError::BadOpcode),
        }
        Ok(())
    }

    fn begin_if(
        &mut self,
        not_if: bool,
        executing: bool,
        stack: &mut Stack,
        conditions: &mut Conditions,
    ) -> Result<(), ScriptError> {
        let mut value = false;
        if executing {
            let arg = stack.last().ok_or(ScriptError::IfOnEmptyStack)?;
            let minimal = arg.is_empty() || arg.as_slice() == [1];
            if self.version == SigVersion::Tapscript && !minimal {
                return Err(ScriptError::TapscriptMinimalIf);
            }
            if self.version == SigVersion::WitnessV0 && self.flags.has(Flags::MINIMALIF) && !minimal
            {
                return Err(ScriptError::MinimalIf);
            }
            value = cast_to_bool(arg) != not_if;
            stack.pop();
        }
        conditions.push(value);
        Ok(())
    }

    fn check_lock_time_verify(&mut self, stack: &Stack) -> Result<(), ScriptError> {
        if !self.flags.has(Flags::CHECKLOCKTIMEVERIFY) {
            return Ok(());
        }
        if !self.checker.check_lock_time(self.lock_argument(stack)?) {
            return Err(ScriptError::UnsatisfiedLocktime);
        }
        Ok(())
    }

    fn check_sequence_verify(&mut self, stack: &Stack) -> Result<(), ScriptError> {
        if !self.flags.has(Flags::CHECKSEQUENCEVERIFY) {
            return Ok(());
        }
        let sequence = self.lock_argument(stack)?;
        if sequence & (1 << 31) != 0 {
            return Ok(()); // BIP112: the disable flag makes it a NOP
        }
        if !self.checker.check_sequence(sequence) {
            return Err(ScriptError::UnsatisfiedLocktime);
        }
        Ok(())
    }

    /// CHECKLOCKTIMEVERIFY's and CHECKSEQUENCEVERIFY's argument: a number of up to 5 bytes,
    /// not negative.
    fn lock_argument(&self, stack: &Stack) -> Result<i64, ScriptError> {
        let value = num::read(top(stack, 1)?, self.require_minimal, 5)?;
        if value < 0 {
            return Err(ScriptError::NegativeLocktime);
        }
        Ok(value)
    }

    fn binary(&self, opcode: u8, stack: &mut Stack) -> Result<(), ScriptError> {
        need(stack, 2)?;
        let a = self.number(top(stack, 2)?)?;
        let b = self.number(top(stack, 1)?)?;
        let result = match opcode {
            0x93 => a + b,
            0x94 => a - b,
            0x9a => i64::from(a != 0 && b != 0),
            0x9b => i64::from(a != 0 || b != 0),
            0x9c | 0x9d => i64::from(a == b),
            0x9e => i64::from(a != b),
            0x9f => i64::from(a < b),
            0xa0 => i64::from(a > b),
            0xa1 => i64::from(a <= b),
            0xa2 => i64::from(a >= b),
            0xa3 => a.min(b),
            _ => a.max(b),
        };
        stack.truncate(stack.len() - 2);
        stack.push(num::write(result));
        if opcode == 0x9d {
            if !cast_to_bool(top(stack, 1)?) {
                return Err(ScriptError::NumEqualVerify);
            }
            stack.pop();
        }
        Ok(())
    }

    /// The script code a legacy or segwit v0 signature signs: from the last OP_CODESEPARATOR
    /// run to the end.
    fn script_code(&self, code: &[u8]) -> Vec<u8> {
        code[self.code_start.min(code.len())..].to_vec()
    }

    /// Core's `EvalChecksig`: the result of CHECKSIG(VERIFY), or the error that ends the run.
    fn check_sig(&mut self, sig: &[u8], key: &[u8], code: &[u8]) -> Result<bool, ScriptError> {
        match self.version {
            SigVersion::Base | SigVersion::WitnessV0 => self.check_sig_ecdsa(sig, key, code),
            SigVersion::Tapscript => self.check_sig_tapscript(sig, key),
            // Key-path spends run no script.
            SigVersion::Taproot => Err(ScriptError::UnknownError),
        }
    }

    fn check_sig_ecdsa(
        &mut self,
        sig: &[u8],
        key: &[u8],
        code: &[u8],
    ) -> Result<bool, ScriptError> {
        let mut script_code = self.script_code(code);
        if self.version == SigVersion::Base
            && script::find_and_delete(&mut script_code, &script::push_of(sig)) > 0
            && self.flags.has(Flags::CONST_SCRIPTCODE)
        {
            return Err(ScriptError::SigFindAndDelete);
        }
        check_signature_encoding(sig, self.flags)?;
        check_pubkey_encoding(key, self.flags, self.version)?;
        let success = self
            .checker
            .check_ecdsa(sig, key, &script_code, self.version);
        if !success && self.flags.has(Flags::NULLFAIL) && !sig.is_empty() {
            return Err(ScriptError::SigNullFail);
        }
        Ok(success)
    }

    /// Core's `EvalChecksigTapscript`: an empty signature is a failed check; any other must be
    /// valid, and takes 50 from the budget.
    fn check_sig_tapscript(&mut self, sig: &[u8], key: &[u8]) -> Result<bool, ScriptError> {
        let success = !sig.is_empty();
        if success {
            self.exec.validation_weight_left -= VALIDATION_WEIGHT_PER_SIGOP;
            if self.exec.validation_weight_left < 0 {
                return Err(ScriptError::TapscriptValidationWeight);
            }
        }
        match key.len() {
            0 => return Err(ScriptError::TapscriptEmptyPubkey),
            32 if success => self.checker.check_schnorr(sig, key, &self.exec.taproot)?,
            32 => {}
            _ if self.flags.has(Flags::DISCOURAGE_UPGRADABLE_PUBKEYTYPE) => {
                return Err(ScriptError::DiscourageUpgradablePubkeyType)
            }
            _ => {}
        }
        Ok(success)
    }

    /// Core's CHECKMULTISIG(VERIFY): keys and signatures walked from the first, each signature
    /// against the keys left, with the dummy element and NULLFAIL's clean-up.
    fn check_multisig(
        &mut self,
        verify: bool,
        stack: &mut Stack,
        code: &[u8],
        op_count: &mut usize,
    ) -> Result<(), ScriptError> {
        if self.version == SigVersion::Tapscript {
            return Err(ScriptError::TapscriptCheckMultisig);
        }
        let mut i = 1usize;
        let mut keys = num::clamp_to_int(self.number(top(stack, i)?)?);
        if !(0..=MAX_MULTISIG_KEYS).contains(&keys) {
            return Err(ScriptError::PubkeyCount);
        }
        *op_count += keys as usize;
        if *op_count > MAX_OPS {
            return Err(ScriptError::OpCount);
        }
        i += 1;
        let mut key_at = i;
        // How many elements from the top NULLFAIL spares: the key count and the keys.
        let mut spared = keys as usize + 2;
        i += keys as usize;
        let mut sigs = num::clamp_to_int(self.number(top(stack, i)?)?);
        if sigs < 0 || sigs > keys {
            return Err(ScriptError::SigCount);
        }
        i += 1;
        let mut sig_at = i;
        i += sigs as usize;
        need(stack, i)?;
        let mut script_code = self.script_code(code);
        for k in 0..sigs as usize {
            let sig = top(stack, sig_at + k)?;
            if self.version == SigVersion::Base
                && script::find_and_delete(&mut script_code, &script::push_of(sig)) > 0
                && self.flags.has(Flags::CONST_SCRIPTCODE)
            {
                return Err(ScriptError::SigFindAndDelete);
            }
        }
        let mut success = true;
        while success && sigs > 0 {
            let sig = top(stack, sig_at)?.clone();
            let key = top(stack, key_at)?.clone();
            check_signature_encoding(&sig, self.flags)?;
            check_pubkey_encoding(&key, self.flags, self.version)?;
            if self
                .checker
                .check_ecdsa(&sig, &key, &script_code, self.version)
            {
                sig_at += 1;
                sigs -= 1;
            }
            key_at += 1;
            keys -= 1;
            if sigs > keys {
                success = false;
            }
        }
        // Pop the arguments; a failed check must leave every signature empty under NULLFAIL.
        while i > 1 {
            i -= 1;
            let element = pop(stack)?;
            if !success && self.flags.has(Flags::NULLFAIL) && spared == 0 && !element.is_empty() {
                return Err(ScriptError::SigNullFail);
            }
            spared = spared.saturating_sub(1);
        }
        // The extra element CHECKMULTISIG takes (its off-by-one), empty under NULLDUMMY.
        let dummy = pop(stack)?;
        if self.flags.has(Flags::NULLDUMMY) && !dummy.is_empty() {
            return Err(ScriptError::SigNullDummy);
        }
        push_bool(stack, success);
        if verify {
            if !success {
                return Err(ScriptError::CheckMultisigVerify);
            }
            stack.pop();
        }
        Ok(())
    }
}

/// OP_RIPEMD160, OP_SHA1, OP_SHA256, OP_HASH160 and OP_HASH256.
fn hash(opcode: u8, value: &[u8]) -> Vec<u8> {
    match opcode {
        0xa6 => ripemd160::Hash::hash(value).to_byte_array().to_vec(),
        0xa7 => sha1::Hash::hash(value).to_byte_array().to_vec(),
        0xa8 => sha256::Hash::hash(value).to_byte_array().to_vec(),
        0xa9 => hash160::Hash::hash(value).to_byte_array().to_vec(),
        _ => sha256d::Hash::hash(value).to_byte_array().to_vec(),
    }
}

/// The stack opcodes, OP_TOALTSTACK to OP_SIZE.
fn stack_op(
    opcode: u8,
    stack: &mut Stack,
    altstack: &mut Stack,
    minimal: bool,
) -> Result<(), ScriptError> {
    let len = stack.len();
    match opcode {
        0x6b => altstack.push(pop(stack)?),
        0x6c => stack.push(
            altstack
                .pop()
                .ok_or(ScriptError::InvalidAltstackOperation)?,
        ),
        0x6d => {
            need(stack, 2)?;
            stack.truncate(len - 2);
        }
        0x6e..=0x70 => {
            // 2DUP, 3DUP, 2OVER: copy n elements from depth d.
            let (n, depth) = match opcode {
                0x6e => (2, 2),
                0x6f => (3, 3),
                _ => (2, 4),
            };
            need(stack, depth)?;
            for k in 0..n {
                stack.push(stack[len - depth + k].clone());
            }
        }
        0x71 => {
            need(stack, 6)?;
            let moved: Vec<_> = stack.drain(len - 6..len - 4).collect();
            stack.extend(moved);
        }
        0x72 => {
            need(stack, 4)?;
            stack.swap(len - 4, len - 2);
            stack.swap(len - 3, len - 1);
        }
        0x73 => {
            let value = top(stack, 1)?;
            if cast_to_bool(value) {
                stack.push(value.clone());
            }
        }
        0x74 => stack.push(num::write(len as i64)),
        0x75 => {
            pop(stack)?;
        }
        0x76 => stack.push(top(stack, 1)?.clone()),
        0x77 => {
            need(stack, 2)?;
            stack.remove(len - 2);
        }
        0x78 => stack.push(top(stack, 2)?.clone()),
        0x79 | 0x7a => {
            need(stack, 2)?;
            let n = num::clamp_to_int(num::read(top(stack, 1)?, minimal, DEFAULT_NUM_SIZE)?);
            stack.pop();
            if n < 0 || n as usize >= stack.len() {
                return Err(ScriptError::InvalidStackOperation);
            }
            let at = stack.len() - 1 - n as usize;
            let value = if opcode == 0x7a {
                stack.remove(at)
            } else {
                stack[at].clone()
            };
            stack.push(value);
        }
        0x7b => {
            need(stack, 3)?;
            stack.swap(len - 3, len - 2);
            stack.swap(len - 2, len - 1);
        }
        0x7c => {
            need(stack, 2)?;
            stack.swap(len - 2, len - 1);
        }
        0x7d => {
            let value = top(stack, 1)?.clone();
            need(stack, 2)?;
            stack.insert(len - 2, value);
        }
        0x82 => {
            let size = top(stack, 1)?.len();
            stack.push(num::write(size as i64));
        }
        _ => return Err(ScriptError::BadOpcode),
    }
    Ok(())
}

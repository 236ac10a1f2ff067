//! Knots 29.4's rules against data in transactions, the reference bitcoind's defaults
//! (`knots_data_rules`, on by default; off, Core's policy): `-rejectparasites`, the Runes part
//! of `-rejecttokens`, `-maxscriptsize`, data in input scripts under
//! `-acceptnonstddatacarrier=0`, and the reduced-data rules (BIP-110) Knots applies as policy.
//! Each function is one place of Knots's `PreChecks` order; the reasons are Knots's.

use bitcoin::opcodes::all::{
    OP_2DROP, OP_DROP, OP_ENDIF, OP_IF, OP_NOTIF, OP_PUSHBYTES_0, OP_PUSHNUM_13, OP_RETURN,
};
use bitcoin::script::Instruction;
use bitcoin::{Script, Transaction, TxIn, TxOut};

use super::rejection::Rejection;
use super::script_flags::{has_annex, last_push};

/// Knots's `-maxscriptsize`: output scripts, spent output scripts, redeem scripts and whole
/// witnesses (serialized) larger are refused.
pub const MAX_SCRIPT_SIZE: usize = 1_650;
/// Most bytes of an output script other than OP_RETURN, and of an OP_RETURN one (BIP-110's
/// output size limits).
const MAX_OUTPUT_SCRIPT_SIZE: usize = 34;
const MAX_NULL_DATA_SIZE: usize = 83;
/// Most bytes a script may push (BIP-110; 520 in consensus).
const MAX_PUSH_SIZE: usize = 256;
/// Largest taproot control block (BIP-110: a tree 7 deep).
const MAX_CONTROL_BLOCK_SIZE: usize = 257;
/// The lock time CAT-21 marks its transactions with.
const CAT21_LOCK_TIME: u32 = 21;

fn refuse(reason: &str) -> Rejection {
    Rejection::NonStandard(reason.to_string())
}

/// In `IsStandardTx`, after `tx-size`: CAT-21's lock time (`-rejectparasites`).
pub fn check_parasite(tx: &Transaction) -> Result<(), Rejection> {
    match tx.lock_time.to_consensus_u32() {
        CAT21_LOCK_TIME => Err(refuse("parasite-cat21")),
        _ => Ok(()),
    }
}

/// In `IsStandardTx`'s output loop, before the output's kind: the size limit.
pub fn check_output_size(script: &Script) -> Result<(), Rejection> {
    match script.len() > MAX_SCRIPT_SIZE {
        true => Err(refuse("scriptpubkey-size")),
        false => Ok(()),
    }
}

/// In `IsStandardTx`'s output loop, for a standard OP_RETURN output: Runes (OP_RETURN OP_13
/// …, `-rejecttokens`).
pub fn check_null_data(script: &Script) -> Result<(), Rejection> {
    let bytes = script.as_bytes();
    match bytes.len() > 2 && bytes[1] == OP_PUSHNUM_13.to_u8() {
        true => Err(refuse("tokens-runes")),
        false => Ok(()),
    }
}

/// In `IsStandardTx`'s output loop, for a P2WSH output with `remaining` outputs from it to the
/// last (itself included): the first of an OLGA ("stamp:") run (`-rejecttokens`; Knots's
/// `IsOLGA`: the program's first two bytes give the payload's size, which fills that many
/// 32-byte programs and one more, then "stamp:" in any case).
pub fn check_p2wsh(script: &Script, remaining: usize) -> Result<(), Rejection> {
    let bytes = script.as_bytes();
    if !script.is_p2wsh() {
        return Ok(());
    }
    let payload = usize::from(bytes[2]) << 8 | usize::from(bytes[3]);
    let outputs = (payload + 1) / 32 + 1;
    let stamp = bytes[4..9]
        .iter()
        .zip(b"stamp")
        .all(|(b, s)| b | 0x20 == *s)
        && bytes[9] == b':';
    match remaining >= outputs && stamp {
        true => Err(refuse("tokens-olga")),
        false => Ok(()),
    }
}

/// Knots's `CheckTxInputs` with its output size limit (after the inputs are found): no output
/// script over 34 bytes, or 83 for OP_RETURN (which only Core 30's `datacarrier_size` reaches).
pub fn check_output_sizes(tx: &Transaction) -> Result<(), Rejection> {
    let too_large = tx.output.iter().any(|o| {
        let limit = match o.script_pubkey.is_op_return() {
            true => MAX_NULL_DATA_SIZE,
            false => MAX_OUTPUT_SCRIPT_SIZE,
        };
        o.script_pubkey.len() > limit
    });
    match too_large {
        true => Err(refuse("bad-txns-vout-script-toolarge")),
        false => Ok(()),
    }
}

/// In `AreInputsStandard`, per input: the spent output script's size, then the redeem
/// script's.
pub fn check_input_sizes(input: &TxIn, spent: &Script) -> Result<(), Rejection> {
    if spent.len() > MAX_SCRIPT_SIZE {
        return Err(refuse("bad-txns-input-script-size"));
    }
    let redeem = spent
        .is_p2sh()
        .then(|| last_push(&input.script_sig))
        .flatten();
    if redeem.is_some_and(|r| r.len() > MAX_SCRIPT_SIZE) {
        return Err(refuse("bad-txns-input-scriptcheck-size"));
    }
    Ok(())
}

/// In `IsWitnessStandard`, for an input with a witness: the whole serialized witness.
pub fn check_witness_size(input: &TxIn) -> Result<(), Rejection> {
    match input.witness.size() > MAX_SCRIPT_SIZE {
        true => Err(refuse("bad-witness-witness-size")),
        false => Ok(()),
    }
}

/// After `AreInputsStandard`: data in the script an input runs (its redeem, witness or leaf
/// script), which Knots refuses whatever its size under `-acceptnonstddatacarrier=0`.
pub fn check_data_in_inputs(tx: &Transaction, prevouts: &[TxOut]) -> Result<(), Rejection> {
    for (input, prev) in tx.input.iter().zip(prevouts) {
        let script = script_run_by(input, &prev.script_pubkey);
        if data_bytes(&script) > 0 {
            return Err(refuse("txn-datacarrier-nonstandard"));
        }
    }
    Ok(())
}

/// The script Knots scans for data in an input (its `GetScriptForTransactionInput`): a P2SH
/// redeem script, a P2WSH witness script (also in P2SH), a tapscript, else the script sig.
fn script_run_by(input: &TxIn, spent: &Script) -> Vec<u8> {
    let mut program = spent.to_bytes();
    let p2sh = spent.is_p2sh();
    if p2sh {
        match last_push(&input.script_sig) {
            Some(redeem) => program = redeem,
            None => return Vec::new(),
        }
    }
    let program = Script::from_bytes(&program);
    if !program.is_witness_program() {
        return match p2sh {
            true => program.to_bytes(),
            false => input.script_sig.to_bytes(),
        };
    }
    let stack: Vec<&[u8]> = input.witness.iter().collect();
    if program.is_p2wsh() {
        return stack.last().map_or_else(Vec::new, |s| s.to_vec());
    }
    if program.is_p2tr() && !p2sh {
        let items = if has_annex(&stack) {
            &stack[..stack.len() - 1]
        } else {
            &stack[..]
        };
        if items.len() >= 2 {
            return items[items.len() - 2].to_vec();
        }
    }
    Vec::new()
}

/// Knots's `CScript::DatacarrierBytes`, the non-standard part, for its default counting (the
/// `OP_FALSE OP_IF … OP_ENDIF` envelope and runs of pushes ended by OP_DROP or OP_2DROP; a
/// script that does not parse counts whole; one with an unconditional OP_RETURN is output
/// data, 0 here). Not counted yet: branches a constant makes dead (`-rejectdeadbranches`),
/// OLGA outputs and OPNet leaves.
pub fn data_bytes(script: &[u8]) -> usize {
    let Some(ops) = opcodes_with_ends(script) else {
        return script.len();
    };
    let is_push = |op: u8| op <= 0x60 && op != 0x50;
    let (mut counted, mut conditional, mut envelope) = (0usize, 0u32, 0u32);
    let (mut last, mut began) = (0xffu8, 0usize);
    for &(at, op, end) in &ops {
        if op == OP_IF.to_u8() || op == OP_NOTIF.to_u8() {
            conditional += 1;
        } else if op == OP_ENDIF.to_u8() {
            let Some(fewer) = conditional.checked_sub(1) else {
                return script.len();
            };
            conditional = fewer;
        } else if op == OP_RETURN.to_u8() && conditional == 0 {
            return 0;
        }
        let opens_envelope = op == OP_IF.to_u8() && last == OP_PUSHBYTES_0.to_u8();
        if envelope > 0 {
            if op == OP_IF.to_u8() || op == OP_NOTIF.to_u8() {
                envelope += 1;
            } else if op == OP_ENDIF.to_u8() {
                envelope -= 1;
                if envelope == 0 {
                    // From the OP_FALSE (one byte before the OP_IF) through the OP_ENDIF.
                    counted += end - began + 1;
                }
            }
        } else if opens_envelope {
            envelope = 1;
            began = at;
        } else if is_push(op) {
            if !is_push(last) {
                began = at;
            }
        } else if (op == OP_DROP.to_u8() || op == OP_2DROP.to_u8()) && is_push(last) {
            counted += end - began;
        }
        last = op;
    }
    counted
}

/// Each opcode of `script` with its offset and the offset after it; `None` if it does not
/// parse.
fn opcodes_with_ends(script: &[u8]) -> Option<Vec<(usize, u8, usize)>> {
    let starts: Vec<usize> = Script::from_bytes(script)
        .instruction_indices()
        .map(|i| i.ok().map(|(at, _)| at))
        .collect::<Option<_>>()?;
    Some(
        starts
            .iter()
            .enumerate()
            .map(|(n, &at)| {
                (
                    at,
                    script[at],
                    starts.get(n + 1).copied().unwrap_or(script.len()),
                )
            })
            .collect(),
    )
}

/// With the scripts (BIP-110's rules as Knots's standard flags): no push over 256 bytes in a
/// script that runs (the P2SH redeem script's own push aside), no control block over 257
/// bytes, no OP_IF or OP_NOTIF in a tapscript. The error is the input and Core's words.
pub fn check_scripts(tx: &Transaction, prevouts: &[TxOut]) -> Result<(), (usize, &'static str)> {
    for (i, (input, prev)) in tx.input.iter().zip(prevouts).enumerate() {
        check_input_scripts(input, &prev.script_pubkey).map_err(|why| (i, why))?;
    }
    Ok(())
}

fn check_input_scripts(input: &TxIn, spent: &Script) -> Result<(), &'static str> {
    const PUSH_SIZE: &str = "Push value size limit exceeded";
    let sig_pushes: Vec<usize> = pushes(input.script_sig.as_bytes());
    let p2sh = spent.is_p2sh();
    let checked = if p2sh {
        sig_pushes.len().saturating_sub(1)
    } else {
        sig_pushes.len()
    };
    if sig_pushes[..checked].iter().any(|&len| len > MAX_PUSH_SIZE) {
        return Err(PUSH_SIZE);
    }
    let redeem = p2sh.then(|| last_push(&input.script_sig)).flatten();
    let program = redeem.clone().unwrap_or_else(|| spent.to_bytes());
    let program = Script::from_bytes(&program);
    if let Some(redeem) = &redeem {
        if !program.is_witness_program() && pushes(redeem).iter().any(|&l| l > MAX_PUSH_SIZE) {
            return Err(PUSH_SIZE);
        }
    }
    let stack: Vec<&[u8]> = input.witness.iter().collect();
    if program.is_p2wsh() {
        let script = stack.last().copied().unwrap_or_default();
        if pushes(script).iter().any(|&l| l > MAX_PUSH_SIZE) {
            return Err(PUSH_SIZE);
        }
    }
    if program.is_p2tr() && !p2sh {
        let items = if has_annex(&stack) {
            &stack[..stack.len() - 1]
        } else {
            &stack[..]
        };
        if let [.., script, control] = items {
            if control.len() > MAX_CONTROL_BLOCK_SIZE {
                return Err("Invalid Taproot control block size");
            }
            if control.first().is_some_and(|c| c & 0xfe == 0xc0) {
                return tapscript_rules(script);
            }
        }
    }
    Ok(())
}

/// A tapscript's pushes and conditionals, in order: the first that breaks a rule says which.
fn tapscript_rules(script: &[u8]) -> Result<(), &'static str> {
    for instruction in Script::from_bytes(script).instructions() {
        match instruction {
            Ok(Instruction::PushBytes(data)) if data.len() > MAX_PUSH_SIZE => {
                return Err("Push value size limit exceeded")
            }
            Ok(Instruction::Op(op)) if op == OP_IF || op == OP_NOTIF => {
                return Err("OP_IF/NOTIF argument must be minimal in tapscript")
            }
            // A script that does not parse fails by consensus.
            _ => {}
        }
    }
    Ok(())
}

/// The sizes of a script's pushes (up to where it stops parsing).
fn pushes(script: &[u8]) -> Vec<usize> {
    Script::from_bytes(script)
        .instructions()
        .map_while(Result::ok)
        .filter_map(|i| match i {
            Instruction::PushBytes(data) => Some(data.len()),
            Instruction::Op(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        bitcoin::ScriptBuf::from_hex(s).unwrap().to_bytes()
    }

    #[test]
    fn data_is_counted_as_knots_counts_it() {
        // Knots 29.4.3's counts, measured by hand on the reference bitcoind.
        assert_eq!(data_bytes(&hex("01ab7551")), 3, "<1B> OP_DROP OP_TRUE");
        assert_eq!(data_bytes(&hex("517551")), 2, "OP_1 OP_DROP");
        assert_eq!(data_bytes(&hex("02aaaa02bbbb6d51")), 7, "<2B><2B> OP_2DROP");
        let envelope = format!("00630a{}6851", "cc".repeat(10));
        assert_eq!(data_bytes(&hex(&envelope)), 14, "OP_0 OP_IF <10B> OP_ENDIF");
        assert_eq!(data_bytes(&hex("006368")), 3, "the empty envelope");
        // Nothing in ordinary scripts: a CSV drop follows an opcode, not a push.
        let csv = "21".to_owned() + &"02".repeat(33) + "ad56b275";
        assert_eq!(data_bytes(&hex(&csv)), 0);
        assert_eq!(
            data_bytes(&hex("5221aa")),
            3,
            "a script that does not parse"
        );
        assert_eq!(data_bytes(&hex("6a01ab7551")), 0, "OP_RETURN: output data");
        assert_eq!(data_bytes(&hex("68")), 1, "an OP_ENDIF without OP_IF");
    }

    #[test]
    fn an_olga_run_is_found_from_its_first_output() {
        use bitcoin::hashes::Hash;
        let stamp = |program_start: &[u8]| {
            let mut program = program_start.to_vec();
            program.resize(32, 0x11);
            bitcoin::ScriptBuf::new_p2wsh(&bitcoin::WScriptHash::from_byte_array(
                program.try_into().unwrap(),
            ))
        };
        // 40 bytes of payload: two outputs.
        let first = stamp(b"\x00\x28STAMP:");
        assert!(check_p2wsh(&first, 2).is_err());
        assert!(
            check_p2wsh(&first, 1).is_ok(),
            "the run needs its second output"
        );
        assert!(check_p2wsh(&stamp(b"\x00\x28stamp;"), 2).is_ok());
        assert!(check_p2wsh(&stamp(b"\x00\x28stamp:"), 2).is_err());
    }

    #[test]
    fn tapscripts_may_not_branch_or_push_over_256_bytes() {
        assert!(tapscript_rules(&hex("51")).is_ok());
        assert!(tapscript_rules(&hex("516351685168")).is_err());
        let push = format!("4d0101{}7551", "00".repeat(257));
        assert_eq!(
            tapscript_rules(&hex(&push)),
            Err("Push value size limit exceeded")
        );
        let push = format!("4d0001{}7551", "00".repeat(256));
        assert!(tapscript_rules(&hex(&push)).is_ok());
    }
}

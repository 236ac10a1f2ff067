//! Knots 29.4's rules against data in transactions, the reference bitcoind's defaults
//! (`knots_data_rules`, on by default; off, Core's policy): `-rejectparasites`, the Runes part
//! of `-rejecttokens`, `-maxscriptsize`, data in input scripts under
//! `-acceptnonstddatacarrier=0`, and the reduced-data rules (BIP-110) Knots applies as policy.
//! Each function is one place of Knots's `PreChecks` order; the reasons are Knots's.

use bitcoin::hashes::Hash;
use bitcoin::opcodes::all::{
    OP_2DROP, OP_CHECKSIGVERIFY, OP_DROP, OP_ELSE, OP_ENDIF, OP_IF, OP_NOTIF, OP_PUSHBYTES_0,
    OP_PUSHBYTES_32, OP_PUSHNUM_13, OP_PUSHNUM_16, OP_RESERVED, OP_RETURN,
};
use bitcoin::script::Instruction;
use bitcoin::{Script, Transaction, TxIn, TxOut, Witness};

use super::dead_parts::{find_dead_parts, parse_ops};
use super::pushes::{has_annex, last_push};
use super::rejection::Rejection;

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

/// Counterparty's marker, at the start of its enciphered messages.
const COUNTERPARTY_PREFIX: &[u8; 8] = b"CNTRPRTY";

/// In `IsStandardTx`'s output loop, for a standard OP_RETURN output of `tx`: a Counterparty
/// message (`-rejecttokens`), whose first push, RC4-enciphered with the first input's spent
/// txid (in RPC byte order) as key, begins "CNTRPRTY".
pub fn check_counterparty(tx: &Transaction, script: &Script) -> Result<(), Rejection> {
    use rc4::{consts::U32, Key, KeyInit, Rc4, StreamCipher};
    let Some(first) = tx.input.first() else {
        return Ok(());
    };
    let Some(Ok(Instruction::PushBytes(data))) = script.instructions().nth(1) else {
        return Ok(());
    };
    let Some(enciphered) = data.as_bytes().get(..COUNTERPARTY_PREFIX.len()) else {
        return Ok(());
    };
    let mut key = first.previous_output.txid.to_byte_array();
    key.reverse();
    let mut prefix = [0u8; 8];
    prefix.copy_from_slice(enciphered);
    Rc4::<U32>::new(Key::<U32>::from_slice(&key)).apply_keystream(&mut prefix);
    match &prefix == COUNTERPARTY_PREFIX {
        true => Err(refuse("tokens-counterparty")),
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

/// After `AreInputsStandard` (Knots's `DatacarrierBytes` over the transaction): data in the
/// script an input runs (its redeem, witness or leaf script), which Knots refuses whatever its
/// size under `-acceptnonstddatacarrier=0`; then all data, OP_RETURN outputs' included, over
/// `datacarrier_size` (`-datacarrierfullcount`).
pub fn check_data_carried(
    tx: &Transaction,
    prevouts: &[TxOut],
    datacarrier_size: usize,
) -> Result<(), Rejection> {
    let mut total = DataBytes::default();
    for (input, prev) in tx.input.iter().zip(prevouts) {
        let script = script_run_by(input, &prev.script_pubkey);
        total.add(datacarrier_bytes(&script, Some(&input.witness)));
    }
    // OLGA outputs, which Knots also counts here, were refused before as tokens-olga.
    for output in tx.output.iter().rev() {
        total.add(datacarrier_bytes(output.script_pubkey.as_bytes(), None));
    }
    if total.nonstandard > 0 {
        return Err(refuse("txn-datacarrier-nonstandard"));
    }
    match total.standard.saturating_add(total.nonstandard) > datacarrier_size {
        true => Err(refuse("txn-datacarrier-exceeded")),
        false => Ok(()),
    }
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

/// Data bytes as Knots counts them: `standard` is an OP_RETURN script's (any script with an
/// OP_RETURN outside conditionals), `nonstandard` data anywhere else.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DataBytes {
    /// Bytes of scripts with an OP_RETURN outside conditionals.
    pub standard: usize,
    /// Bytes of data carried where a script runs or could run.
    pub nonstandard: usize,
}

impl DataBytes {
    fn add(&mut self, other: DataBytes) {
        self.standard = self.standard.saturating_add(other.standard);
        self.nonstandard = self.nonstandard.saturating_add(other.nonstandard);
    }

    fn nonstandard(bytes: usize) -> Self {
        DataBytes {
            standard: 0,
            nonstandard: bytes,
        }
    }
}

/// Knots 29.4.3's `CScript::DatacarrierBytes` with its defaults (`-rejectdeadbranches`, bare
/// envelopes), for a script that is not an OLGA output; `witness` is the spending input's. Read
/// opcode by opcode: an unconditional OP_RETURN makes the script standard data whole, an
/// OP_ENDIF without its OP_IF or a push cut short (whichever comes first) non-standard data
/// whole; otherwise counted are: an OPNet leaf's spend, runs of pushes ended by OP_DROP or
/// OP_2DROP (from the run's first push through the drop), the `OP_FALSE OP_IF … OP_ENDIF`
/// envelope, and every conditional part a constant makes dead (with its guard's first byte).
pub fn datacarrier_bytes(script: &[u8], witness: Option<&Witness>) -> DataBytes {
    if let Some(bytes) = witness.map(opnet_witness_size).filter(|&b| b > 0) {
        return DataBytes::nonstandard(bytes);
    }
    // Read as Knots reads it, opcode by opcode: what decides before a push cut short decides.
    let parsed = parse_ops(script);
    let ops = &parsed.ops;
    let dead = find_dead_parts(script, ops);
    let is_push = |op: u8| op <= OP_PUSHNUM_16.to_u8() && op != OP_RESERVED.to_u8();
    let is_if = |op: u8| op == OP_IF.to_u8() || op == OP_NOTIF.to_u8();
    let (mut counted, mut conditional, mut noop) = (0usize, 0u32, 0u32);
    let (mut last, mut began, mut span_guard) = (0xffu8, 0usize, 1usize);
    for op in ops {
        let (at, code, end) = (op.at, op.code, op.data.end);
        if is_if(code) {
            conditional += 1;
        } else if code == OP_ENDIF.to_u8() {
            let Some(fewer) = conditional.checked_sub(1) else {
                return DataBytes::nonstandard(script.len());
            };
            conditional = fewer;
        } else if code == OP_RETURN.to_u8() && conditional == 0 {
            return DataBytes {
                standard: script.len(),
                nonstandard: 0,
            };
        }
        let dead_guard = (code == OP_IF.to_u8() && last == OP_PUSHBYTES_0.to_u8())
            || (is_if(code) && dead.if_at(at));
        if noop == 0 && code == OP_ELSE.to_u8() && dead.else_at(at) {
            // A dead OP_ELSE part: from the OP_ELSE, without a guard.
            (noop, began, span_guard, last) = (1, at, 0, code);
            continue;
        }
        if dead_guard && noop == 0 {
            span_guard = 1;
        }
        if noop > 0 {
            if is_if(code) {
                noop += 1;
            } else if code == OP_ELSE.to_u8() && noop == 1 {
                counted += at - began + span_guard;
                noop = 0;
            } else if code == OP_ENDIF.to_u8() {
                noop -= 1;
                if noop == 0 {
                    counted += end - began + span_guard;
                }
            }
        } else if dead_guard {
            (noop, began) = (1, at);
        } else if is_push(code) {
            if !is_push(last) {
                began = at;
            }
        } else if (code == OP_DROP.to_u8() || code == OP_2DROP.to_u8()) && is_push(last) {
            counted += end - began;
        }
        last = code;
    }
    match parsed.complete {
        true => DataBytes::nonstandard(counted),
        // A script that does not parse is all data.
        false => DataBytes::nonstandard(script.len()),
    }
}

/// Knots's `OPNetWitnessSize`: a script-path spend of five items with a one-node control block
/// whose leaf pushes "op" counts its first item and its leaf, less 34 bytes for each 32-byte
/// key an OP_CHECKSIGVERIFY takes; 0 for any other witness.
fn opnet_witness_size(witness: &Witness) -> usize {
    let stack: Vec<&[u8]> = witness.iter().collect();
    let [first, _, _, leaf, control] = stack[..] else {
        return 0;
    };
    if control.len() != 65 {
        return 0;
    }
    // Knots reads the leaf as far as it parses.
    let (mut found, mut deduct, mut last) = (false, 0usize, 0xffu8);
    for op in parse_ops(leaf).ops {
        found |= op.code <= 0x4e && &leaf[op.data.clone()] == b"op";
        if op.code == OP_CHECKSIGVERIFY.to_u8() && last == OP_PUSHBYTES_32.to_u8() {
            deduct += 34;
        }
        last = op.code;
    }
    match found {
        true => (first.len() + leaf.len()).saturating_sub(deduct),
        false => 0,
    }
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

    fn counted(script: &str) -> usize {
        datacarrier_bytes(&hex(script), None).nonstandard
    }

    #[test]
    fn data_is_counted_as_knots_counts_it() {
        // Knots 29.4.3's counts, measured on the reference bitcoind (its -datacarriercost=25
        // node's extra weight gives the bytes counted).
        assert_eq!(counted("01ab7551"), 3, "<1B> OP_DROP OP_TRUE");
        assert_eq!(counted("517551"), 2, "OP_1 OP_DROP");
        assert_eq!(counted("02aaaa02bbbb6d51"), 7, "<2B><2B> OP_2DROP");
        let two_drops = format!("05{0}05{0}757551", "dd".repeat(5));
        assert_eq!(counted(&two_drops), 13, "the run and the first drop");
        assert_eq!(counted("5101ab75"), 4, "OP_TRUE joins the run");
        let envelope = format!("00630a{}6851", "cc".repeat(10));
        assert_eq!(counted(&envelope), 14, "OP_0 OP_IF <10B> OP_ENDIF");
        assert_eq!(counted("006368"), 3, "the empty envelope");
        let dead_notif = format!("51640a{}6851", "cc".repeat(10));
        assert_eq!(counted(&dead_notif), 14, "OP_1 OP_NOTIF <10B> OP_ENDIF");
        let dead_else = format!("516351670a{}68", "cc".repeat(10));
        assert_eq!(counted(&dead_else), 13, "a dead OP_ELSE part, no guard");
        let witness_if = format!("630a{}756851", "cc".repeat(10));
        assert_eq!(counted(&witness_if), 12, "a drop inside a live branch");
        let size = format!("0a{}82777551", "cc".repeat(10));
        assert_eq!(counted(&size), 0, "<10B> OP_SIZE OP_NIP OP_DROP");
        let hashed = format!("0a{}a97551", "cc".repeat(10));
        assert_eq!(counted(&hashed), 0, "<10B> OP_HASH160 OP_DROP");
        // Nothing in ordinary scripts: a CSV drop follows an opcode, not a push.
        let csv = "21".to_owned() + &"02".repeat(33) + "ad56b275";
        assert_eq!(counted(&csv), 0);
        assert_eq!(counted("5221aa"), 3, "a script that does not parse");
        assert_eq!(counted("68"), 1, "an OP_ENDIF without OP_IF");
        let op_return = format!("6a4c50{}", "ee".repeat(80));
        let whole = datacarrier_bytes(&hex(&op_return), None);
        assert_eq!((whole.standard, whole.nonstandard), (83, 0));
        assert_eq!(datacarrier_bytes(&hex("6a01ab7551"), None).standard, 5);
        let op_return_first = datacarrier_bytes(&[0x6a, 0x4c], None);
        assert_eq!(
            op_return_first.standard, 2,
            "OP_RETURN before the cut push decides"
        );
    }

    #[test]
    fn an_opnet_leaf_counts_its_first_item_and_its_script() {
        let key = format!("20{}ad", "11".repeat(32));
        let leaf = |tag: &str| hex(&format!("{key}02{tag}7551"));
        let spend = |leaf: Vec<u8>, control: usize| {
            Witness::from_slice(&[vec![0xaa; 3], vec![], vec![], leaf, vec![0xc0; control]])
        };
        let opnet = spend(leaf("6f70"), 65);
        // 3 bytes of the first item, 39 of the leaf, less 34 for the key's check.
        assert_eq!(datacarrier_bytes(&[], Some(&opnet)).nonstandard, 8);
        assert_eq!(
            datacarrier_bytes(&[], Some(&spend(leaf("6f71"), 65))).nonstandard,
            0
        );
        assert_eq!(
            datacarrier_bytes(&[], Some(&spend(leaf("6f70"), 33))).nonstandard,
            0
        );
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

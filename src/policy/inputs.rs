//! Core's standardness rules on what a transaction spends (policy/policy.cpp): `AreInputsStandard`,
//! `IsWitnessStandard` and the sigop cost limit, and the virtual size that counts sigops
//! (`GetVirtualTransactionSize`). They run once the spent outputs are known, before any script.

use bitcoin::script::Instruction;
use bitcoin::{Script, Transaction, TxOut};

use super::data_rules;
use super::pushes::{has_annex, last_push};
use super::rejection::Rejection;
use super::solver::{is_anchor, solve, OutputKind};
use crate::config::{MempoolConfig, PolicyProfile};

/// Most sigops a redeem script may have (Core's `MAX_P2SH_SIGOPS`).
pub const MAX_P2SH_SIGOPS: usize = 15;
/// Most sigop cost of a standard transaction (Core's `MAX_STANDARD_TX_SIGOPS_COST`, a fifth of
/// the block's 80,000).
pub const MAX_STANDARD_TX_SIGOPS_COST: usize = 16_000;
/// Largest standard P2WSH witness script (Core's `MAX_STANDARD_P2WSH_SCRIPT_SIZE`).
pub const MAX_STANDARD_P2WSH_SCRIPT_SIZE: usize = 3_600;
/// Most stack items of a standard P2WSH spend, the script apart (`MAX_STANDARD_P2WSH_STACK_ITEMS`).
pub const MAX_STANDARD_P2WSH_STACK_ITEMS: usize = 100;
/// Largest stack item of a standard P2WSH spend (`MAX_STANDARD_P2WSH_STACK_ITEM_SIZE`).
pub const MAX_STANDARD_P2WSH_STACK_ITEM_SIZE: usize = 80;
/// Largest stack item of a standard tapscript spend (`MAX_STANDARD_TAPSCRIPT_STACK_ITEM_SIZE`).
pub const MAX_STANDARD_TAPSCRIPT_STACK_ITEM_SIZE: usize = 80;
/// Most legacy sigops a standard transaction may run (Core 30's `MAX_TX_LEGACY_SIGOPS`, BIP54).
pub const MAX_TX_LEGACY_SIGOPS: usize = 2_500;
/// Weight units a sigop counts for in the virtual size (Core's `-bytespersigop` 20, times 4).
const WEIGHT_PER_SIGOP: u64 = 20;

fn refuse(reason: &str, detail: String) -> Rejection {
    Rejection::NonStandard(format!("{reason}: {detail}"))
}

/// Core's `ValidateInputsStandardness` (policy/policy.cpp): under Core's profile first BIP54's
/// limit on legacy sigops ([`check_legacy_sigops`]); then every spent output of a type Core's
/// `Solver` knows (not `NONSTANDARD`, not `WITNESS_UNKNOWN`), and a P2SH redeem script of at
/// most 15 sigops; with Knots's data rules, first Knots's size limits on both scripts.
pub fn check_inputs_standard(
    tx: &Transaction,
    prevouts: &[TxOut],
    policy: &MempoolConfig,
) -> Result<(), Rejection> {
    if policy.profile == PolicyProfile::Core {
        check_legacy_sigops(tx, prevouts)?;
    }
    for (i, (input, prev)) in tx.input.iter().zip(prevouts).enumerate() {
        let spent = &prev.script_pubkey;
        if policy.knots_data_rules {
            data_rules::check_input_sizes(input, spent)?;
        }
        if !is_known_type(spent) {
            let detail = format!("input {i} spends a non-standard output");
            return Err(refuse("bad-txns-nonstandard-inputs", detail));
        }
        if spent.is_p2sh() {
            let Some(redeem) = last_push(&input.script_sig) else {
                let detail = format!("input {i} has no redeem script");
                return Err(refuse("bad-txns-nonstandard-inputs", detail));
            };
            let sigops = sigop_count(Script::from_bytes(&redeem), true);
            if sigops > MAX_P2SH_SIGOPS {
                let detail = format!("input {i}: redeem script of {sigops} sigops");
                return Err(refuse("bad-txns-nonstandard-inputs", detail));
            }
        }
    }
    Ok(())
}

/// Core's `IsWitnessStandard`: no witness on an input whose spent output (or redeem script) is
/// not a witness program, nor on a pay-to-anchor; P2WSH scripts, stack items and their sizes
/// within bounds; no annex, and tapscript stack items within bounds; with Knots's data rules,
/// first no witness over Knots's `-maxscriptsize`.
pub fn check_witness_standard(
    tx: &Transaction,
    prevouts: &[TxOut],
    policy: &MempoolConfig,
) -> Result<(), Rejection> {
    for (i, (input, prev)) in tx.input.iter().zip(prevouts).enumerate() {
        if input.witness.is_empty() {
            continue;
        }
        if policy.knots_data_rules {
            data_rules::check_witness_size(input)?;
        }
        witness_standard(input, &prev.script_pubkey)
            .map_err(|why| refuse("bad-witness-nonstandard", format!("input {i}: {why}")))?;
    }
    Ok(())
}

/// One input of [`check_witness_standard`]; the error says which rule it breaks.
fn witness_standard(input: &bitcoin::TxIn, spent: &Script) -> Result<(), &'static str> {
    if is_anchor(spent) {
        return Err("witness on a pay-to-anchor");
    }
    let redeem;
    let (program, wrapped) = if spent.is_p2sh() {
        redeem = last_push(&input.script_sig).ok_or("no redeem script")?;
        (Script::from_bytes(&redeem), true)
    } else {
        (spent, false)
    };
    if !program.is_witness_program() {
        return Err("witness on a non-witness output");
    }
    let witness = &input.witness;
    if program.is_p2wsh() {
        let script = witness.last().map_or(0, <[u8]>::len);
        if script > MAX_STANDARD_P2WSH_SCRIPT_SIZE {
            return Err("witness script over 3,600 bytes");
        }
        let items = witness.len() - 1;
        if items > MAX_STANDARD_P2WSH_STACK_ITEMS {
            return Err("over 100 stack items");
        }
        if witness
            .iter()
            .take(items)
            .any(|item| item.len() > MAX_STANDARD_P2WSH_STACK_ITEM_SIZE)
        {
            return Err("a stack item over 80 bytes");
        }
    }
    if program.is_p2tr() && !wrapped {
        let mut items: Vec<&[u8]> = witness.iter().collect();
        if has_annex(&items) {
            return Err("an annex");
        }
        if items.len() >= 2 {
            let control = items.pop().unwrap_or_default();
            items.pop(); // The script.
            if control.is_empty() {
                return Err("an empty control block");
            }
            let tapscript = control[0] & 0xfe == 0xc0;
            if tapscript
                && items
                    .iter()
                    .any(|item| item.len() > MAX_STANDARD_TAPSCRIPT_STACK_ITEM_SIZE)
            {
                return Err("a tapscript stack item over 80 bytes");
            }
        }
    }
    Ok(())
}

/// Refuses a sigop cost (Core's `GetTransactionSigOpCost`, [`sigop_cost`]) above 16,000
/// (`bad-txns-too-many-sigops`).
pub fn check_sigop_cost(cost: usize) -> Result<(), Rejection> {
    if cost > MAX_STANDARD_TX_SIGOPS_COST {
        return Err(refuse("bad-txns-too-many-sigops", cost.to_string()));
    }
    Ok(())
}

/// BIP54's limit on a transaction's legacy sigops, as Core 30's `CheckSigopsBIP54`
/// (policy/policy.cpp): each input's script sig counted accurately, and the output it spends
/// (for P2SH, the redeem script its script sig pushes last, none if the script sig is not
/// push-only), at most 2,500 in all (`bad-txns-nonstandard-inputs`). The output scripts the
/// transaction creates do not count: they run only where they are spent.
pub fn check_legacy_sigops(tx: &Transaction, prevouts: &[TxOut]) -> Result<(), Rejection> {
    let mut sigops = 0usize;
    for (input, prev) in tx.input.iter().zip(prevouts) {
        sigops = sigops.saturating_add(sigop_count(&input.script_sig, true));
        let spent = &prev.script_pubkey;
        sigops = sigops.saturating_add(match spent.is_p2sh() {
            true => last_push(&input.script_sig)
                .map_or(0, |redeem| sigop_count(Script::from_bytes(&redeem), true)),
            false => sigop_count(spent, true),
        });
        if sigops > MAX_TX_LEGACY_SIGOPS {
            let detail = "non-witness sigops exceed bip54 limit".to_string();
            return Err(refuse("bad-txns-nonstandard-inputs", detail));
        }
    }
    Ok(())
}

/// Core's `GetTransactionSigOpCost` with every spent output known: legacy sigops of every script
/// sig and output script and the sigops of redeem scripts, four each, and witness sigops.
pub fn sigop_cost(tx: &Transaction, prevouts: &[TxOut]) -> usize {
    let legacy = tx.input.iter().map(|i| sigop_count(&i.script_sig, false));
    let outputs = tx
        .output
        .iter()
        .map(|o| sigop_count(&o.script_pubkey, false));
    let mut cost = legacy.chain(outputs).sum::<usize>().saturating_mul(4);
    for (input, prev) in tx.input.iter().zip(prevouts) {
        let spent = &prev.script_pubkey;
        let redeem = spent
            .is_p2sh()
            .then(|| last_push(&input.script_sig))
            .flatten();
        if let Some(redeem) = &redeem {
            let sigops = sigop_count(Script::from_bytes(redeem), true);
            cost = cost.saturating_add(sigops.saturating_mul(4));
        }
        // `CountWitnessSigOps`: the program is the output script or, inside P2SH, the redeem
        // script.
        let program = match &redeem {
            Some(redeem) => Script::from_bytes(redeem),
            None => spent.as_script(),
        };
        if program.is_p2wpkh() {
            cost = cost.saturating_add(1);
        } else if program.is_p2wsh() {
            let script = input.witness.last().map(Script::from_bytes);
            cost = cost.saturating_add(script.map_or(0, |s| sigop_count(s, true)));
        }
    }
    cost
}

/// Core's `CScript::GetSigOpCount`: CHECKSIG counts one, CHECKMULTISIG 20, or (`accurate`) the
/// key count of an OP_1 to OP_16 just before it; counting stops where the script stops parsing.
fn sigop_count(script: &Script, accurate: bool) -> usize {
    let mut count = 0usize;
    let mut last: Option<u8> = None;
    for instruction in script.instructions() {
        let op = match instruction {
            Ok(Instruction::Op(op)) => op.to_u8(),
            // A push is an opcode in Core's count too: it is not an OP_1 to OP_16.
            Ok(Instruction::PushBytes(_)) => 0,
            Err(_) => break,
        };
        match op {
            0xac | 0xad => count += 1,
            0xae | 0xaf => {
                count += match last {
                    Some(n @ 0x51..=0x60) if accurate => usize::from(n - 0x50),
                    _ => 20,
                }
            }
            _ => {}
        }
        last = Some(op);
    }
    count
}

/// Core's `GetVirtualTransactionSize`: the weight, or 20 bytes a sigop if more, in vbytes.
pub fn virtual_size(tx: &Transaction, sigop_cost: usize) -> u64 {
    adjusted_weight(tx.weight().to_wu(), sigop_cost).div_ceil(4)
}

/// Core's `GetSigOpsAdjustedWeight`: `weight`, or 20 bytes a sigop if more, in weight units.
pub fn adjusted_weight(weight: u64, sigop_cost: usize) -> u64 {
    weight.max((sigop_cost as u64).saturating_mul(WEIGHT_PER_SIGOP))
}

/// Whether Core's `Solver` gives a type other than `NONSTANDARD` or `WITNESS_UNKNOWN`: P2PK,
/// P2PKH, P2SH, multisig of 1 to 20 keys, OP_RETURN data, witness v0 keys and scripts, taproot,
/// pay-to-anchor.
fn is_known_type(script: &Script) -> bool {
    !matches!(
        solve(script),
        OutputKind::NonStandard | OutputKind::WitnessUnknown
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::{ScriptBuf, TxIn, Witness};

    fn spend_with(witness: Vec<Vec<u8>>, script_sig: ScriptBuf) -> TxIn {
        TxIn {
            script_sig,
            witness: Witness::from_slice(&witness),
            ..Default::default()
        }
    }

    #[test]
    fn p2wsh_limits_are_cores() {
        let p2wsh = ScriptBuf::new_p2wsh(&bitcoin::WScriptHash::from_byte_array([1; 32]));
        let ok = spend_with(vec![vec![1; 80], vec![0x51; 3_600]], ScriptBuf::new());
        assert!(witness_standard(&ok, &p2wsh).is_ok());
        let long_script = spend_with(vec![vec![0x51; 3_601]], ScriptBuf::new());
        assert!(witness_standard(&long_script, &p2wsh).is_err());
        let big_item = spend_with(vec![vec![1; 81], vec![0x51]], ScriptBuf::new());
        assert!(witness_standard(&big_item, &p2wsh).is_err());
        let mut many = vec![vec![]; 101];
        many.push(vec![0x51]);
        assert!(witness_standard(&spend_with(many, ScriptBuf::new()), &p2wsh).is_err());
    }

    #[test]
    fn taproot_annexes_and_big_tapscript_items_are_refused() {
        let p2tr = ScriptBuf::from_bytes([&[0x51, 0x20][..], &[7; 32]].concat());
        let key_path = spend_with(vec![vec![1; 64]], ScriptBuf::new());
        assert!(witness_standard(&key_path, &p2tr).is_ok());
        let annex = spend_with(vec![vec![1; 64], vec![0x50, 1]], ScriptBuf::new());
        assert_eq!(witness_standard(&annex, &p2tr), Err("an annex"));
        let control = [&[0xc0][..], &[2; 32]].concat();
        let big = spend_with(
            vec![vec![1; 81], vec![0x51], control.clone()],
            ScriptBuf::new(),
        );
        assert!(witness_standard(&big, &p2tr).is_err());
        // Another leaf version: its items are not tapscript's.
        let other = [&[0xc2][..], &[2; 32]].concat();
        let unknown_leaf = spend_with(vec![vec![1; 81], vec![0x51], other], ScriptBuf::new());
        assert!(witness_standard(&unknown_leaf, &p2tr).is_ok());
    }

    #[test]
    fn witness_where_none_belongs_is_refused() {
        let p2pkh = ScriptBuf::new_p2pkh(&bitcoin::PubkeyHash::from_byte_array([1; 20]));
        let stuffed = spend_with(vec![vec![1]], ScriptBuf::new());
        assert!(witness_standard(&stuffed, &p2pkh).is_err());
        let anchor = ScriptBuf::from_bytes(vec![0x51, 0x02, 0x4e, 0x73]);
        assert!(witness_standard(&stuffed, &anchor).is_err());
        assert!(is_known_type(&anchor));
        assert!(!is_known_type(&ScriptBuf::from_bytes(vec![
            0x52, 0x02, 1, 2
        ])));
        assert!(!is_known_type(&ScriptBuf::from_bytes(vec![0x51])));
    }

    use bitcoin::hashes::Hash;

    #[test]
    fn sigops_are_counted_as_core_counts_them() {
        // OP_1 CHECKMULTISIG CHECKMULTISIG: the second one follows an opcode, not an OP_1.
        let script = ScriptBuf::from_bytes(vec![0x51, 0xae, 0xae]);
        assert_eq!(sigop_count(&script, true), 21);
        assert_eq!(sigop_count(&script, false), 40);
        let two_of_three = ScriptBuf::from_bytes(vec![0x52, 0x53, 0xae, 0xac]);
        assert_eq!(sigop_count(&two_of_three, true), 4);
    }

    #[test]
    fn multisig_outputs_are_cores_solver_types() {
        let key = |b: u8| {
            let mut k = vec![b];
            k.extend([5; 32]);
            k
        };
        let mut one_of_one = vec![0x51, 33];
        one_of_one.extend(key(2));
        one_of_one.extend([0x51, 0xae]);
        assert!(is_known_type(Script::from_bytes(&one_of_one)));
        // Keys pushed with OP_PUSHDATA1 are keys all the same.
        let mut pushdata = vec![0x51, 0x4c, 33];
        pushdata.extend(key(3));
        pushdata.extend([0x51, 0xae]);
        assert!(is_known_type(Script::from_bytes(&pushdata)));
        let zero_of_one = [&[0x00][..], &one_of_one[1..]].concat();
        assert!(!is_known_type(Script::from_bytes(&zero_of_one)));
        let wrong_count = [&one_of_one[..35], &[0x52, 0xae][..]].concat();
        assert!(!is_known_type(Script::from_bytes(&wrong_count)));
    }

    #[test]
    fn sigops_count_in_the_virtual_size() {
        let tx = Transaction {
            version: bitcoin::transaction::Version::TWO,
            lock_time: bitcoin::absolute::LockTime::ZERO,
            input: vec![TxIn::default()],
            output: vec![],
        };
        let weight = tx.weight().to_wu();
        assert_eq!(virtual_size(&tx, 0), weight.div_ceil(4));
        assert_eq!(virtual_size(&tx, 1_000), 5_000);
    }
}

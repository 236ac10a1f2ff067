//! The interpreter against Bitcoin Core's own script tests (`src/test/data/script_tests.json`,
//! copied into `tests/data/`): every row's verdict and first error, and, as Core's
//! `script_json_test` does, the verdict kept when flags are taken from a passing row or added
//! to a failing one.

use bitcoin::absolute::LockTime;
use bitcoin::hashes::Hash;
use bitcoin::secp256k1::{Secp256k1, SecretKey};
use bitcoin::taproot::{LeafVersion, TaprootBuilder};
use bitcoin::transaction::Version;
use bitcoin::{Amount, OutPoint, ScriptBuf, Sequence, Transaction, TxIn, TxOut, Txid, Witness};

use super::script::push_of;
use super::{num, verify_input, Flags, TxData};

const SCRIPT_TESTS: &str = include_str!("../../../tests/data/script_tests.json");

/// Core's opcode names from OP_NOP up (`GetOpName`), each also read without `OP_`.
const NAMES: [(&str, u8); 91] = [
    ("RESERVED", 0x50),
    ("NOP", 0x61),
    ("VER", 0x62),
    ("IF", 0x63),
    ("NOTIF", 0x64),
    ("VERIF", 0x65),
    ("VERNOTIF", 0x66),
    ("ELSE", 0x67),
    ("ENDIF", 0x68),
    ("VERIFY", 0x69),
    ("RETURN", 0x6a),
    ("TOALTSTACK", 0x6b),
    ("FROMALTSTACK", 0x6c),
    ("2DROP", 0x6d),
    ("2DUP", 0x6e),
    ("3DUP", 0x6f),
    ("2OVER", 0x70),
    ("2ROT", 0x71),
    ("2SWAP", 0x72),
    ("IFDUP", 0x73),
    ("DEPTH", 0x74),
    ("DROP", 0x75),
    ("DUP", 0x76),
    ("NIP", 0x77),
    ("OVER", 0x78),
    ("PICK", 0x79),
    ("ROLL", 0x7a),
    ("ROT", 0x7b),
    ("SWAP", 0x7c),
    ("TUCK", 0x7d),
    ("CAT", 0x7e),
    ("SUBSTR", 0x7f),
    ("LEFT", 0x80),
    ("RIGHT", 0x81),
    ("SIZE", 0x82),
    ("INVERT", 0x83),
    ("AND", 0x84),
    ("OR", 0x85),
    ("XOR", 0x86),
    ("EQUAL", 0x87),
    ("EQUALVERIFY", 0x88),
    ("RESERVED1", 0x89),
    ("RESERVED2", 0x8a),
    ("1ADD", 0x8b),
    ("1SUB", 0x8c),
    ("2MUL", 0x8d),
    ("2DIV", 0x8e),
    ("NEGATE", 0x8f),
    ("ABS", 0x90),
    ("NOT", 0x91),
    ("0NOTEQUAL", 0x92),
    ("ADD", 0x93),
    ("SUB", 0x94),
    ("MUL", 0x95),
    ("DIV", 0x96),
    ("MOD", 0x97),
    ("LSHIFT", 0x98),
    ("RSHIFT", 0x99),
    ("BOOLAND", 0x9a),
    ("BOOLOR", 0x9b),
    ("NUMEQUAL", 0x9c),
    ("NUMEQUALVERIFY", 0x9d),
    ("NUMNOTEQUAL", 0x9e),
    ("LESSTHAN", 0x9f),
    ("GREATERTHAN", 0xa0),
    ("LESSTHANOREQUAL", 0xa1),
    ("GREATERTHANOREQUAL", 0xa2),
    ("MIN", 0xa3),
    ("MAX", 0xa4),
    ("WITHIN", 0xa5),
    ("RIPEMD160", 0xa6),
    ("SHA1", 0xa7),
    ("SHA256", 0xa8),
    ("HASH160", 0xa9),
    ("HASH256", 0xaa),
    ("CODESEPARATOR", 0xab),
    ("CHECKSIG", 0xac),
    ("CHECKSIGVERIFY", 0xad),
    ("CHECKMULTISIG", 0xae),
    ("CHECKMULTISIGVERIFY", 0xaf),
    ("NOP1", 0xb0),
    ("CHECKLOCKTIMEVERIFY", 0xb1),
    ("CHECKSEQUENCEVERIFY", 0xb2),
    ("NOP4", 0xb3),
    ("NOP5", 0xb4),
    ("NOP6", 0xb5),
    ("NOP7", 0xb6),
    ("NOP8", 0xb7),
    ("NOP9", 0xb8),
    ("NOP10", 0xb9),
    ("CHECKSIGADD", 0xba),
];

/// The flag names Core's tests use (`ParseScriptFlags`).
const FLAG_NAMES: [(&str, Flags); 21] = [
    ("P2SH", Flags::P2SH),
    ("STRICTENC", Flags::STRICTENC),
    ("DERSIG", Flags::DERSIG),
    ("LOW_S", Flags::LOW_S),
    ("SIGPUSHONLY", Flags::SIGPUSHONLY),
    ("MINIMALDATA", Flags::MINIMALDATA),
    ("NULLDUMMY", Flags::NULLDUMMY),
    (
        "DISCOURAGE_UPGRADABLE_NOPS",
        Flags::DISCOURAGE_UPGRADABLE_NOPS,
    ),
    ("CLEANSTACK", Flags::CLEANSTACK),
    ("MINIMALIF", Flags::MINIMALIF),
    ("NULLFAIL", Flags::NULLFAIL),
    ("CHECKLOCKTIMEVERIFY", Flags::CHECKLOCKTIMEVERIFY),
    ("CHECKSEQUENCEVERIFY", Flags::CHECKSEQUENCEVERIFY),
    ("WITNESS", Flags::WITNESS),
    (
        "DISCOURAGE_UPGRADABLE_WITNESS_PROGRAM",
        Flags::DISCOURAGE_UPGRADABLE_WITNESS_PROGRAM,
    ),
    ("WITNESS_PUBKEYTYPE", Flags::WITNESS_PUBKEYTYPE),
    ("CONST_SCRIPTCODE", Flags::CONST_SCRIPTCODE),
    ("TAPROOT", Flags::TAPROOT),
    (
        "DISCOURAGE_UPGRADABLE_PUBKEYTYPE",
        Flags::DISCOURAGE_UPGRADABLE_PUBKEYTYPE,
    ),
    ("DISCOURAGE_OP_SUCCESS", Flags::DISCOURAGE_OP_SUCCESS),
    (
        "DISCOURAGE_UPGRADABLE_TAPROOT_VERSION",
        Flags::DISCOURAGE_UPGRADABLE_TAPROOT_VERSION,
    ),
];

/// Core's `ParseScript` (core_read.cpp): numbers pushed as script numbers, `0x..` inserted raw,
/// `'..'` pushed, opcode names with or without `OP_`.
fn parse_script(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for word in text.split([' ', '\t', '\n']).filter(|w| !w.is_empty()) {
        let digits = word.strip_prefix('-').unwrap_or(word);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            let n: i64 = word.parse().expect("number in range");
            match n {
                0 => out.push(0x00),
                -1 | 1..=16 => out.push((n + 0x50) as u8),
                _ => out.extend(push_of(&num::write(n))),
            }
        } else if let Some(hex) = word
            .strip_prefix("0x")
            .filter(|h| !h.is_empty() && h.len() % 2 == 0)
        {
            out.extend(hex_bytes(hex));
        } else if word.len() >= 2 && word.starts_with('\'') && word.ends_with('\'') {
            out.extend(push_of(&word.as_bytes()[1..word.len() - 1]));
        } else {
            let name = word.strip_prefix("OP_").unwrap_or(word);
            let code = NAMES.iter().find(|(n, _)| *n == name).map(|(_, c)| *c);
            out.push(code.unwrap_or_else(|| panic!("unknown opcode {word}")));
        }
    }
    out
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

fn parse_flags(text: &str) -> Flags {
    text.split(',')
        .filter(|f| !f.is_empty() && *f != "NONE")
        .fold(Flags::NONE, |all, name| {
            let flag = FLAG_NAMES.iter().find(|(n, _)| *n == name);
            all | flag.unwrap_or_else(|| panic!("unknown flag {name}")).1
        })
}

/// One row: the spending input's script sig and witness, the spent output, flags, expected.
struct Row {
    script_sig: Vec<u8>,
    witness: Vec<Vec<u8>>,
    script_pubkey: Vec<u8>,
    amount: Amount,
    flags: Flags,
    expected: String,
    text: String,
}

/// Reads a row as Core's `script_json_test` does, `#SCRIPT#`, `#CONTROLBLOCK#` and
/// `#TAPROOTOUTPUT#` included (one tapscript leaf under the key of secret 1).
fn read_row(row: &[serde_json::Value]) -> Option<Row> {
    let mut at = 0;
    let mut witness = Vec::new();
    let mut amount = Amount::ZERO;
    let mut taproot_output = None;
    if let Some(items) = row.first().and_then(|v| v.as_array()) {
        let (value, elements) = items.split_last()?;
        for element in elements {
            let element = element.as_str()?;
            if let Some(script) = element.strip_prefix("#SCRIPT#") {
                witness.push(parse_script(script));
            } else if element == "#CONTROLBLOCK#" {
                let (control, output) = tapscript_spend(witness.last()?);
                witness.push(control);
                taproot_output = Some(output);
            } else {
                witness.push(hex_bytes(element));
            }
        }
        amount = Amount::from_btc(value.as_f64()?).ok()?;
        at = 1;
    }
    if row.len() < at + 4 {
        return None;
    }
    let text = |i: usize| row[at + i].as_str().map(str::to_owned);
    let script_pubkey = match text(1)?.as_str() {
        "0x51 0x20 #TAPROOTOUTPUT#" => {
            let mut script = vec![0x51, 0x20];
            script.extend(taproot_output?);
            script
        }
        other => parse_script(other),
    };
    Some(Row {
        script_sig: parse_script(&text(0)?),
        witness,
        script_pubkey,
        amount,
        flags: parse_flags(&text(2)?),
        expected: text(3)?,
        text: serde_json::to_string(row).ok()?,
    })
}

/// The control block and output key of a tree of the one tapscript leaf `script`.
fn tapscript_spend(script: &[u8]) -> (Vec<u8>, [u8; 32]) {
    let secp = Secp256k1::new();
    let mut one = [0u8; 32];
    one[31] = 1;
    let internal = SecretKey::from_slice(&one)
        .expect("key")
        .x_only_public_key(&secp)
        .0;
    let script = ScriptBuf::from_bytes(script.to_vec());
    let info = TaprootBuilder::new()
        .add_leaf(0, script.clone())
        .expect("leaf")
        .finalize(&secp, internal)
        .expect("tree");
    let control = info
        .control_block(&(script, LeafVersion::TapScript))
        .expect("control");
    (
        control.serialize(),
        info.output_key().to_x_only_public_key().serialize(),
    )
}

/// Core's `BuildCreditingTransaction` and `BuildSpendingTransaction`.
fn spend_of(row: &Row) -> (Transaction, TxOut) {
    let spent = TxOut {
        value: row.amount,
        script_pubkey: ScriptBuf::from_bytes(row.script_pubkey.clone()),
    };
    let credit = Transaction {
        version: Version::ONE,
        lock_time: LockTime::ZERO,
        input: vec![TxIn {
            previous_output: OutPoint {
                txid: Txid::all_zeros(),
                vout: u32::MAX,
            },
            script_sig: ScriptBuf::from_bytes(vec![0x00, 0x00]),
            sequence: Sequence::MAX,
            witness: Witness::new(),
        }],
        output: vec![spent.clone()],
    };
    let spend = Transaction {
        version: Version::ONE,
        lock_time: LockTime::ZERO,
        input: vec![TxIn {
            previous_output: OutPoint {
                txid: credit.compute_txid(),
                vout: 0,
            },
            script_sig: ScriptBuf::from_bytes(row.script_sig.clone()),
            sequence: Sequence::MAX,
            witness: Witness::from_slice(&row.witness),
        }],
        output: vec![TxOut {
            value: row.amount,
            script_pubkey: ScriptBuf::new(),
        }],
    };
    (spend, spent)
}

fn run(row: &Row, flags: Flags) -> String {
    let (spend, spent) = spend_of(row);
    let prevouts = [spent];
    match verify_input(&TxData::new(&spend, &prevouts), 0, flags) {
        Ok(()) => "OK".to_owned(),
        Err(e) => e.core_name().to_owned(),
    }
}

/// Core's `DoTest`: CLEANSTACK comes with P2SH and WITNESS.
fn effective(flags: Flags) -> Flags {
    if flags.has(Flags::CLEANSTACK) {
        flags | Flags::P2SH | Flags::WITNESS
    } else {
        flags
    }
}

#[test]
fn every_row_of_cores_script_tests_gets_cores_verdict_and_first_error() {
    let rows: Vec<Vec<serde_json::Value>> = serde_json::from_str(SCRIPT_TESTS).expect("json");
    let mut failures = Vec::new();
    let mut checked = 0;
    for row in rows.iter().filter_map(|r| read_row(r)) {
        checked += 1;
        let got = run(&row, effective(row.flags));
        if got != row.expected {
            failures.push(format!("got {got}: {}", row.text));
        }
    }
    // Every test row of the file (its comment rows aside) is read, the witness ones included.
    assert_eq!(checked, 1222, "rows read");
    assert!(
        failures.is_empty(),
        "{} of {checked} rows differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn fewer_flags_keep_a_pass_and_more_flags_keep_a_failure() {
    let rows: Vec<Vec<serde_json::Value>> = serde_json::from_str(SCRIPT_TESTS).expect("json");
    let mut failures = Vec::new();
    let mut seed: u32 = 0x9e37_79b9;
    for row in rows.iter().filter_map(|r| read_row(r)) {
        let pass = row.expected == "OK";
        for _ in 0..4 {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let extra = Flags(seed & 0xffff);
            let flags = if pass {
                Flags(row.flags.0 & !extra.0)
            } else {
                row.flags | extra
            };
            // Core's weeding: CLEANSTACK needs P2SH and WITNESS, WITNESS needs P2SH.
            let cleanstack_alone =
                flags.has(Flags::CLEANSTACK) && !flags.has(Flags::P2SH | Flags::WITNESS);
            if cleanstack_alone || (flags.has(Flags::WITNESS) && !flags.has(Flags::P2SH)) {
                continue;
            }
            if (run(&row, flags) == "OK") != pass {
                failures.push(format!("flags {:x}: {}", flags.0, row.text));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A spend of `spk` with an empty script sig and `witness`, judged under `flags`.
fn judge(spk: Vec<u8>, witness: Vec<Vec<u8>>, flags: Flags) -> String {
    let row = Row {
        script_sig: vec![],
        witness,
        script_pubkey: spk,
        amount: Amount::from_sat(1_000),
        flags,
        expected: String::new(),
        text: String::new(),
    };
    run(&row, flags)
}

#[test]
fn pay_to_anchor_is_spent_by_anyone_and_only_bare() {
    // Core 28's IsPayToAnchor: OP_1 <0x4e73>, not discouraged as a version 1 program.
    assert_eq!(
        judge(vec![0x51, 0x02, 0x4e, 0x73], vec![], Flags::STANDARD),
        "OK"
    );
    // Another 2-byte version 1 program stays an upgradable one.
    let other = judge(vec![0x51, 0x02, 0x4e, 0x74], vec![], Flags::STANDARD);
    assert_eq!(other, "DISCOURAGE_UPGRADABLE_WITNESS_PROGRAM");
}

#[test]
fn a_leaf_of_version_0x50_is_committed_to_and_discouraged() {
    let secp = Secp256k1::new();
    let script = vec![0x51];
    let leaf = super::tap_leaf_hash(0x50, &script);
    // An internal key whose tweaked output key is odd: the control block starts 0x51, which
    // is not an annex (0x50 would be taken for one).
    let (internal, output) = (1u8..)
        .find_map(|seed| {
            let internal = SecretKey::from_slice(&[seed; 32])
                .ok()?
                .x_only_public_key(&secp)
                .0;
            let tweak = bitcoin::taproot::TapTweakHash::from_key_and_tweak(
                internal,
                Some(bitcoin::taproot::TapNodeHash::from(leaf)),
            );
            let (output, parity) = internal.add_tweak(&secp, &tweak.to_scalar()).ok()?;
            (parity == bitcoin::secp256k1::Parity::Odd).then_some((internal, output))
        })
        .expect("an odd key");
    let mut spk = vec![0x51, 0x20];
    spk.extend(output.serialize());
    let mut control = vec![0x51];
    control.extend(internal.serialize());
    let witness = vec![script, control];
    assert_eq!(judge(spk.clone(), witness.clone(), Flags::MANDATORY), "OK");
    assert_eq!(
        judge(spk, witness, Flags::STANDARD),
        "DISCOURAGE_UPGRADABLE_TAPROOT_VERSION"
    );
}

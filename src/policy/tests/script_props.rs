//! Properties of the parsers of untrusted scripts: Core's `Solver` (`solver::solve`) and
//! Knots's data counting (`data_rules::datacarrier_bytes`, `dead_parts`), on any bytes and on
//! scripts built to a known shape.

use bitcoin::hashes::Hash;
use bitcoin::script::{Builder, PushBytesBuf};
use bitcoin::ScriptBuf;
use proptest::prelude::*;

use crate::policy::data_rules::datacarrier_bytes;
use crate::policy::dead_parts::{find_dead_parts, parse_ops};
use crate::policy::solver::{solve, OutputKind};

/// Opcodes that neither push nor branch nor end a script.
const PLAIN_OPCODES: [u8; 8] = [0x76, 0xa9, 0x87, 0x88, 0xac, 0xad, 0x82, 0x93];

fn pushes_of(items: &[Vec<u8>]) -> Builder {
    items.iter().fold(Builder::new(), |b, item| {
        b.push_slice(PushBytesBuf::try_from(item.clone()).unwrap())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any bytes: all standard data or none; a script that stops parsing counts whole, one way
    /// or the other; otherwise the count stays within the script and one byte per conditional
    /// (a dead part counts its guard's byte even when a drop counted it already, as Knots's),
    /// and dead parts fall only on conditionals.
    #[test]
    fn any_bytes_count_within_the_script(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let counted = datacarrier_bytes(&bytes, None);
        prop_assert!(counted.standard == 0 || counted.standard == bytes.len());
        prop_assert!(counted.standard == 0 || counted.nonstandard == 0);
        let parsed = parse_ops(&bytes);
        let mut at = 0;
        for op in &parsed.ops {
            prop_assert_eq!(op.at, at);
            at = op.data.end;
        }
        if !parsed.complete {
            prop_assert_eq!(counted.standard + counted.nonstandard, bytes.len());
            return Ok(());
        }
        prop_assert_eq!(at, bytes.len());
        let conditionals = parsed.ops.iter().filter(|o| matches!(o.code, 0x63 | 0x64)).count();
        prop_assert!(counted.nonstandard <= bytes.len() + conditionals);
        let dead = find_dead_parts(&bytes, &parsed.ops);
        for at in dead.at_if {
            prop_assert!(bytes[at] == 0x63 || bytes[at] == 0x64);
        }
        for at in dead.at_else {
            prop_assert_eq!(bytes[at], 0x67);
        }
        let _ = solve(bitcoin::Script::from_bytes(&bytes));
    }

    /// Pushes ended by a drop count whole, through the drop; the OP_TRUE after them does not.
    #[test]
    fn a_dropped_run_of_pushes_counts_whole(
        items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..90), 1..6),
        two in any::<bool>(),
    ) {
        let drop = if two { bitcoin::opcodes::all::OP_2DROP } else { bitcoin::opcodes::all::OP_DROP };
        let script = pushes_of(&items).push_opcode(drop).push_opcode(bitcoin::opcodes::OP_TRUE).into_script();
        let counted = datacarrier_bytes(script.as_bytes(), None);
        prop_assert_eq!(counted.nonstandard, script.len() - 1);
    }

    /// Pushes consumed by opcodes that do not drop them carry nothing.
    #[test]
    fn pushes_taken_by_other_opcodes_count_nothing(
        steps in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 1..40), 0..PLAIN_OPCODES.len()), 1..8),
    ) {
        let mut builder = Builder::new();
        for (item, op) in &steps {
            builder = builder
                .push_slice(PushBytesBuf::try_from(item.clone()).unwrap())
                .push_opcode(PLAIN_OPCODES[*op].into());
        }
        let script = builder.into_script();
        prop_assert_eq!(datacarrier_bytes(script.as_bytes(), None).nonstandard, 0);
    }

    /// An OP_RETURN before any conditional makes the whole script standard data.
    #[test]
    fn an_unconditional_op_return_is_output_data(
        items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..4),
    ) {
        let script = [vec![0x6a], pushes_of(&items).into_script().to_bytes()].concat();
        let counted = datacarrier_bytes(&script, None);
        prop_assert_eq!((counted.standard, counted.nonstandard), (script.len(), 0));
    }

    /// The solver agrees with rust-bitcoin's exact templates wherever one matches.
    #[test]
    fn templates_solve_as_their_kind(program in proptest::collection::vec(any::<u8>(), 32), kind in 0..5u8) {
        let script = match kind {
            0 => ScriptBuf::new_p2pkh(&bitcoin::PubkeyHash::from_byte_array(program[..20].try_into().unwrap())),
            1 => ScriptBuf::new_p2sh(&bitcoin::ScriptHash::from_byte_array(program[..20].try_into().unwrap())),
            2 => ScriptBuf::new_p2wpkh(&bitcoin::WPubkeyHash::from_byte_array(program[..20].try_into().unwrap())),
            3 => ScriptBuf::new_p2wsh(&bitcoin::WScriptHash::from_byte_array(program[..].try_into().unwrap())),
            _ => ScriptBuf::new_op_return(<&bitcoin::script::PushBytes>::try_from(&program[..]).unwrap()),
        };
        let expected = [
            OutputKind::PubKeyHash,
            OutputKind::ScriptHash,
            OutputKind::WitnessV0KeyHash,
            OutputKind::WitnessV0ScriptHash,
            OutputKind::NullData,
        ];
        prop_assert_eq!(solve(&script), expected[usize::from(kind)]);
    }

    /// A witness program's kind follows its version and length, whatever it holds.
    #[test]
    fn witness_programs_solve_by_version_and_length(version in 0..17u8, program in proptest::collection::vec(any::<u8>(), 2..41)) {
        let op = if version == 0 { 0 } else { 0x50 + version };
        let script = ScriptBuf::from_bytes([vec![op, program.len() as u8], program.clone()].concat());
        let kind = solve(&script);
        let expected = match (version, program.len()) {
            (0, 20) => OutputKind::WitnessV0KeyHash,
            (0, 32) => OutputKind::WitnessV0ScriptHash,
            (1, 32) => OutputKind::WitnessV1Taproot,
            (1, 2) if program == [0x4e, 0x73] => OutputKind::Anchor,
            (0, _) => OutputKind::NonStandard,
            _ => OutputKind::WitnessUnknown,
        };
        prop_assert_eq!(kind, expected);
    }
}

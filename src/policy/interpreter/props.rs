//! The interpreter against the kernel (Core's own interpreter behind its C API) on random
//! spends: bare scripts, P2SH, P2WSH, P2SH-P2WSH, tapscript leaves and unknown witness versions,
//! built from pushes of every form, numbers and the opcodes that matter. Under the consensus
//! flags both give the same verdict; a pass under the standard flags is a pass under the
//! consensus flags; and the run is the same twice.

use bitcoin::absolute::LockTime;
use bitcoin::hashes::Hash;
use bitcoin::secp256k1::{Secp256k1, SecretKey};
use bitcoin::taproot::{LeafVersion, TaprootBuilder};
use bitcoin::transaction::Version;
use bitcoin::{Amount, OutPoint, ScriptBuf, Sequence, Transaction, TxIn, TxOut, Txid, Witness};
use proptest::prelude::*;

use super::script::push_of;
use super::{num, verify_input, Flags, TxData};

/// Opcodes worth drawing: flow, stack, arithmetic, hashes, checks, lock times, NOPs, disabled,
/// reserved and OP_SUCCESS ones.
const OPCODES: [u8; 48] = [
    0x61, 0x63, 0x64, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x71, 0x73, 0x74, 0x75,
    0x76, 0x77, 0x79, 0x7a, 0x7b, 0x7c, 0x7d, 0x82, 0x87, 0x88, 0x8b, 0x91, 0x93, 0x9a, 0x9c, 0x9d,
    0xa5, 0xa8, 0xa9, 0xab, 0xac, 0xad, 0xae, 0xaf, 0xb1, 0xb2, 0xb3, 0xba, 0x50, 0x62, 0x7e, 0xbb,
];

/// One piece of a script: a number, a push in any form, or an opcode.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => (-1i64..=16).prop_map(|n| vec![if n == 0 { 0 } else { (n + 0x50) as u8 }]),
        2 => any::<i32>().prop_map(|n| push_of(&num::write(i64::from(n) >> (n & 31)))),
        2 => proptest::collection::vec(any::<u8>(), 0..5).prop_map(|b| push_of(&b)),
        1 => (proptest::collection::vec(any::<u8>(), 0..3), 0u8..3).prop_map(|(b, form)| {
            let len = b.len();
            let mut out = match form {
                0 => vec![0x4c, len as u8],
                1 => vec![0x4d, len as u8, 0],
                _ => vec![0x4e, len as u8, 0, 0, 0],
            };
            out.extend(b);
            out
        }),
        6 => proptest::sample::select(&OPCODES[..]).prop_map(|op| vec![op]),
    ]
}

fn script() -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(piece(), 0..14), any::<bool>()).prop_map(|(pieces, cut)| {
        let mut bytes = pieces.concat();
        // Now and then a push cut short at the end.
        if cut && bytes.last().is_some_and(|b| *b > 1 && *b <= 0x4b) {
            bytes.push(0xaa);
        }
        bytes
    })
}

/// Witness items: numbers' bytes, short strings and empties.
fn items() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let item = prop_oneof![
        Just(vec![]),
        Just(vec![1]),
        Just(vec![2]),
        Just(vec![0x80]),
        Just(vec![1, 0]),
        proptest::collection::vec(any::<u8>(), 0..4),
    ];
    proptest::collection::vec(item, 0..4)
}

/// How the spent output holds the random script.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Bare,
    P2sh,
    P2wsh,
    P2shP2wsh,
    Tapscript,
    Unknown(u8),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Bare),
        Just(Kind::P2sh),
        Just(Kind::P2wsh),
        Just(Kind::P2shP2wsh),
        Just(Kind::Tapscript),
        (2u8..=16).prop_map(Kind::Unknown),
    ]
}

/// The spent output script, script sig and witness of a spend of `script` as `kind`.
fn spend_parts(
    kind: Kind,
    script: Vec<u8>,
    args: &[Vec<u8>],
    sig: Vec<u8>,
) -> (Vec<u8>, Vec<u8>, Vec<Vec<u8>>) {
    let code = ScriptBuf::from_bytes(script.clone());
    let arg_pushes: Vec<u8> = args.iter().flat_map(|a| push_of(a)).collect();
    let with = |last: &[u8]| [args.to_vec(), vec![last.to_vec()]].concat();
    match kind {
        Kind::Bare => (script, sig, args.to_vec()),
        Kind::P2sh => {
            let spk = ScriptBuf::new_p2sh(&code.script_hash()).into_bytes();
            (spk, [arg_pushes, push_of(&script)].concat(), vec![])
        }
        Kind::P2wsh => (
            ScriptBuf::new_p2wsh(&code.wscript_hash()).into_bytes(),
            vec![],
            with(&script),
        ),
        Kind::P2shP2wsh => {
            let program = ScriptBuf::new_p2wsh(&code.wscript_hash());
            let spk = ScriptBuf::new_p2sh(&program.script_hash()).into_bytes();
            (spk, push_of(program.as_bytes()), with(&script))
        }
        Kind::Tapscript => {
            let secp = Secp256k1::new();
            let internal = SecretKey::from_slice(&[3; 32])
                .expect("key")
                .x_only_public_key(&secp)
                .0;
            let info = TaprootBuilder::new()
                .add_leaf(0, code.clone())
                .expect("leaf")
                .finalize(&secp, internal)
                .expect("tree");
            let control = info
                .control_block(&(code, LeafVersion::TapScript))
                .expect("control");
            let spk = ScriptBuf::new_p2tr_tweaked(info.output_key()).into_bytes();
            (
                spk,
                vec![],
                [with(&script), vec![control.serialize()]].concat(),
            )
        }
        Kind::Unknown(version) => {
            let mut spk = vec![0x50 + version, 2, 0xab, 0xcd];
            spk.truncate(4);
            (spk, vec![], args.to_vec())
        }
    }
}

/// A one-input transaction spending `spent` with `script_sig` and `witness`.
fn spend(
    spent: &TxOut,
    script_sig: Vec<u8>,
    witness: &[Vec<u8>],
    version: i32,
    lock: u32,
    sequence: u32,
) -> Transaction {
    Transaction {
        version: Version(version),
        lock_time: LockTime::from_consensus(lock),
        input: vec![TxIn {
            previous_output: OutPoint {
                txid: Txid::all_zeros(),
                vout: 1,
            },
            script_sig: ScriptBuf::from_bytes(script_sig),
            sequence: Sequence(sequence),
            witness: Witness::from_slice(witness),
        }],
        output: vec![TxOut {
            value: spent.value,
            script_pubkey: ScriptBuf::new(),
        }],
    }
}

/// The kernel's verdict under its consensus flags: `None` when it does not judge the input.
fn kernel_verdict(tx: &Transaction, spent: &TxOut) -> Option<bool> {
    use crate::kernel::scripts::{verify_scripts, ScriptFailure};
    let raw = bitcoin::consensus::serialize(tx);
    match verify_scripts(&raw, std::slice::from_ref(spent)) {
        Ok(()) => Some(true),
        Err(ScriptFailure::Input { invalid: true, .. }) => Some(false),
        Err(_) => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_kernel_and_the_interpreter_agree_under_the_consensus_flags(
        kind in kind(),
        script in script(),
        args in items(),
        sig in script(),
        version in prop_oneof![Just(1), Just(2)],
        lock in prop_oneof![Just(0u32), Just(5), Just(600_000_000)],
        sequence in prop_oneof![Just(u32::MAX), Just(0), Just(5), Just((1 << 22) | 5), Just(0xffff_fffe)],
        sats in 0u64..10_000,
    ) {
        let (spk, script_sig, witness) = spend_parts(kind, script, &args, sig);
        let spent = TxOut { value: Amount::from_sat(sats), script_pubkey: ScriptBuf::from_bytes(spk) };
        let tx = spend(&spent, script_sig, &witness, version, lock, sequence);
        let prevouts = [spent.clone()];
        let data = TxData::new(&tx, &prevouts);
        let consensus = verify_input(&data, 0, Flags::MANDATORY);
        // Every case is one the kernel judges (an error other than a failed script would
        // leave the property checking nothing).
        let kernel = kernel_verdict(&tx, &spent);
        prop_assert!(kernel.is_some(), "the kernel did not judge it");
        prop_assert_eq!(kernel, Some(consensus.is_ok()), "interpreter {:?}", consensus);

        let standard = verify_input(&data, 0, Flags::STANDARD);
        prop_assert!(standard.is_err() || consensus.is_ok(), "{:?} {:?}", standard, consensus);
        prop_assert_eq!(standard, verify_input(&data, 0, Flags::STANDARD));
    }
}

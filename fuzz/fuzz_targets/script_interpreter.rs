//! The mempool's policy interpreter (`cairn::policy::interpreter`) on fuzzed spends, against
//! the kernel: under the consensus flags it must give the kernel's verdict; a pass under the
//! standard flags must be a pass under the consensus flags; nothing may panic or overflow.
//!
//! Input: a mode byte, the script sig's length, a quarter of the script's length, the script sig,
//! the script, then witness items each led by its length. The mode's low three bits say how the output
//! holds the script: bare, P2SH, P2WSH, P2SH-P2WSH, a tapscript leaf (its control block
//! computed), or as the output script itself with the witness as given; bit 3 picks version 2
//! and a relative lock in the sequence, bit 4 a lock time.
#![no_main]

use bitcoin::hashes::Hash;
use bitcoin::secp256k1::{Secp256k1, SecretKey};
use bitcoin::taproot::{LeafVersion, TaprootBuilder};
use bitcoin::{
    absolute, transaction, Amount, OutPoint, ScriptBuf, Sequence, Transaction, TxIn, TxOut, Txid,
    Witness,
};
use cairn::policy::interpreter::{verify_input, Flags, TxData};
use cairn::kernel::scripts::verify_scripts;
use libfuzzer_sys::fuzz_target;

fn push(data: &[u8]) -> Vec<u8> {
    let mut out = match data.len() {
        n @ 0..=75 => vec![n as u8],
        n @ 76..=255 => vec![0x4c, n as u8],
        n => vec![0x4d, n as u8, (n >> 8) as u8],
    };
    out.extend_from_slice(data);
    out
}

fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (head, tail) = data.split_at(n.min(data.len()));
    *data = tail;
    head
}

fuzz_target!(|input: &[u8]| {
    let mut data = input;
    let [mode, sig_len, script_len] = match take(&mut data, 3) {
        [a, b, c] => [*a, *b, *c],
        _ => return,
    };
    let script_sig = take(&mut data, usize::from(sig_len)).to_vec();
    let script = take(&mut data, usize::from(script_len) * 4).to_vec();
    let mut witness: Vec<Vec<u8>> = Vec::new();
    while let Some((&len, rest)) = data.split_first() {
        data = rest;
        witness.push(take(&mut data, usize::from(len)).to_vec());
    }
    let code = ScriptBuf::from_bytes(script.clone());
    let (spk, script_sig, witness) = match mode & 7 {
        0 => (script, script_sig, witness),
        1 => (
            ScriptBuf::new_p2sh(&code.script_hash()).into_bytes(),
            [script_sig, push(&script)].concat(),
            witness,
        ),
        2 => (
            ScriptBuf::new_p2wsh(&code.wscript_hash()).into_bytes(),
            script_sig,
            [witness, vec![script]].concat(),
        ),
        3 => {
            let program = ScriptBuf::new_p2wsh(&code.wscript_hash());
            let spk = ScriptBuf::new_p2sh(&program.script_hash()).into_bytes();
            (
                spk,
                push(program.as_bytes()),
                [witness, vec![script]].concat(),
            )
        }
        4 => {
            let secp = Secp256k1::new();
            let internal = SecretKey::from_slice(&[3; 32])
                .expect("key")
                .x_only_public_key(&secp)
                .0;
            let Ok(builder) = TaprootBuilder::new().add_leaf(0, code.clone()) else {
                return;
            };
            let Ok(info) = builder.finalize(&secp, internal) else {
                return;
            };
            let Some(control) = info.control_block(&(code, LeafVersion::TapScript)) else {
                return;
            };
            let spk = ScriptBuf::new_p2tr_tweaked(info.output_key()).into_bytes();
            (
                spk,
                script_sig,
                [witness, vec![script, control.serialize()]].concat(),
            )
        }
        _ => (script, script_sig, witness),
    };
    let spent = TxOut {
        value: Amount::from_sat(5_000),
        script_pubkey: ScriptBuf::from_bytes(spk),
    };
    let tx = Transaction {
        version: if mode & 8 != 0 {
            transaction::Version::TWO
        } else {
            transaction::Version::ONE
        },
        lock_time: absolute::LockTime::from_consensus(if mode & 16 != 0 { 100 } else { 0 }),
        input: vec![TxIn {
            previous_output: OutPoint {
                txid: Txid::all_zeros(),
                vout: 1,
            },
            script_sig: ScriptBuf::from_bytes(script_sig),
            sequence: if mode & 8 != 0 {
                Sequence(10)
            } else {
                Sequence::MAX
            },
            witness: Witness::from_slice(&witness),
        }],
        output: vec![TxOut {
            value: Amount::from_sat(4_000),
            script_pubkey: ScriptBuf::new(),
        }],
    };
    let prevouts = [spent];
    let data = TxData::new(&tx, &prevouts);
    let consensus = verify_input(&data, 0, Flags::MANDATORY);
    let standard = verify_input(&data, 0, Flags::STANDARD);
    assert!(
        standard.is_err() || consensus.is_ok(),
        "{standard:?} {consensus:?}"
    );
    let raw = bitcoin::consensus::serialize(&tx);
    match verify_scripts(&raw, &prevouts) {
        Ok(()) => assert!(
            consensus.is_ok(),
            "the kernel passes, the interpreter says {consensus:?}"
        ),
        Err(cairn::kernel::scripts::ScriptFailure::Input { invalid: true, .. }) => {
            assert!(
                consensus.is_err(),
                "the kernel fails, the interpreter passes"
            )
        }
        Err(_) => {}
    }
});

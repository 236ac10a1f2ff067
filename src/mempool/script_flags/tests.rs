use bitcoin::script::{Builder, PushBytesBuf};
use bitcoin::{ScriptBuf, TxIn, Witness};

use super::*;

/// A strict DER signature with the given S (32 bytes) and hash type; r is 1.
fn sig(s: [u8; 32], hash_type: u8) -> Vec<u8> {
    let mut s = s.to_vec();
    if s[0] & 0x80 != 0 {
        s.insert(0, 0);
    }
    let mut der = vec![
        0x30,
        (4 + 1 + s.len()) as u8,
        0x02,
        0x01,
        0x01,
        0x02,
        s.len() as u8,
    ];
    der.extend(s);
    der.push(hash_type);
    der
}

const LOW: [u8; 32] = [0x11; 32];
const HIGH: [u8; 32] = [0xee; 32];

fn compressed() -> Vec<u8> {
    let mut k = vec![0x02];
    k.extend([5; 32]);
    k
}

fn uncompressed() -> Vec<u8> {
    let mut k = vec![0x04];
    k.extend([5; 64]);
    k
}

fn script_sig(pushes: &[Vec<u8>]) -> ScriptBuf {
    pushes
        .iter()
        .fold(Builder::new(), |b, p| {
            b.push_slice(PushBytesBuf::try_from(p.clone()).unwrap())
        })
        .into_script()
}

fn input(script_sig: ScriptBuf, witness: &[Vec<u8>]) -> TxIn {
    TxIn {
        script_sig,
        witness: Witness::from_slice(witness),
        ..Default::default()
    }
}

fn p2pkh() -> ScriptBuf {
    ScriptBuf::new_p2pkh(&bitcoin::PubkeyHash::from_byte_array([1; 20]))
}

fn p2wpkh() -> ScriptBuf {
    ScriptBuf::new_p2wpkh(&bitcoin::WPubkeyHash::from_byte_array([1; 20]))
}

fn p2wsh() -> ScriptBuf {
    ScriptBuf::new_p2wsh(&bitcoin::WScriptHash::from_byte_array([1; 32]))
}

use bitcoin::hashes::Hash;

#[test]
fn legacy_signatures_need_a_low_s_a_defined_hash_type_and_a_clean_stack() {
    let ok = input(script_sig(&[sig(LOW, 1), compressed()]), &[]);
    assert_eq!(check_input(&ok, &p2pkh()), Ok(()));
    let anyone_can_pay = input(script_sig(&[sig(LOW, 0x83), uncompressed()]), &[]);
    assert_eq!(check_input(&anyone_can_pay, &p2pkh()), Ok(()));
    let high = input(script_sig(&[sig(HIGH, 1), compressed()]), &[]);
    assert_eq!(check_input(&high, &p2pkh()), Err(Violation::HighS));
    let mut above = HALF_ORDER;
    above[31] += 1;
    let half = input(script_sig(&[sig(above, 1), compressed()]), &[]);
    assert_eq!(check_input(&half, &p2pkh()), Err(Violation::HighS));
    let at_half = input(script_sig(&[sig(HALF_ORDER, 1), compressed()]), &[]);
    assert_eq!(check_input(&at_half, &p2pkh()), Ok(()));
    let hash_type = input(script_sig(&[sig(LOW, 4), compressed()]), &[]);
    assert_eq!(check_input(&hash_type, &p2pkh()), Err(Violation::HashType));
    let mut hybrid = uncompressed();
    hybrid[0] = 0x06;
    let hybrid = input(script_sig(&[sig(LOW, 1), hybrid]), &[]);
    assert_eq!(check_input(&hybrid, &p2pkh()), Err(Violation::PubkeyType));
    let extra = input(script_sig(&[vec![7, 7], sig(LOW, 1), compressed()]), &[]);
    assert_eq!(check_input(&extra, &p2pkh()), Err(Violation::CleanStack));
}

#[test]
fn script_sig_pushes_must_be_minimal() {
    // A 1-byte push of 5 where OP_5 says it.
    let mut bytes = vec![0x01, 0x05];
    bytes.extend(script_sig(&[sig(LOW, 1), compressed()]).into_bytes());
    let non_minimal = input(ScriptBuf::from_bytes(bytes), &[]);
    assert_eq!(
        check_input(&non_minimal, &p2pkh()),
        Err(Violation::MinimalData)
    );
    // OP_PUSHDATA1 of 72 bytes where a direct push says it.
    let s = sig(LOW, 1);
    let mut bytes = vec![0x4c, s.len() as u8];
    bytes.extend(&s);
    bytes.extend(script_sig(&[compressed()]).into_bytes());
    let pushdata = input(ScriptBuf::from_bytes(bytes), &[]);
    assert_eq!(
        check_input(&pushdata, &p2pkh()),
        Err(Violation::MinimalData)
    );
}

#[test]
fn segwit_v0_keys_must_be_compressed() {
    let ok = input(ScriptBuf::new(), &[sig(LOW, 1), compressed()]);
    assert_eq!(check_input(&ok, &p2wpkh()), Ok(()));
    let long = input(ScriptBuf::new(), &[sig(LOW, 1), uncompressed()]);
    assert_eq!(
        check_input(&long, &p2wpkh()),
        Err(Violation::WitnessPubkeyType)
    );
    let high = input(ScriptBuf::new(), &[sig(HIGH, 1), compressed()]);
    assert_eq!(check_input(&high, &p2wpkh()), Err(Violation::HighS));
    // 1-of-2 in P2WSH with the uncompressed key first: Core's loop may never reach it.
    let mut first = vec![0x51, 65];
    first.extend(uncompressed());
    first.push(33);
    first.extend(compressed());
    first.extend([0x52, 0xae]);
    let unreached = input(ScriptBuf::new(), &[vec![], sig(LOW, 1), first]);
    assert_eq!(check_input(&unreached, &p2wsh()), Ok(()));
    // 2-of-2 in P2WSH with one uncompressed key.
    let mut ms = vec![0x52, 33];
    ms.extend(compressed());
    ms.push(65);
    ms.extend(uncompressed());
    ms.extend([0x52, 0xae]);
    let multi = input(
        ScriptBuf::new(),
        &[vec![], sig(LOW, 1), sig(LOW, 1), ms.clone()],
    );
    assert_eq!(
        check_input(&multi, &p2wsh()),
        Err(Violation::WitnessPubkeyType)
    );
    // The same in P2SH: uncompressed keys are allowed, high S is not.
    let p2sh = ScriptBuf::new_p2sh(&bitcoin::ScriptHash::from_byte_array([1; 20]));
    let legacy = input(
        script_sig(&[vec![], sig(LOW, 1), sig(LOW, 1), ms.clone()]),
        &[],
    );
    assert_eq!(check_input(&legacy, &p2sh), Ok(()));
    let high = input(script_sig(&[vec![], sig(LOW, 1), sig(HIGH, 1), ms]), &[]);
    assert_eq!(check_input(&high, &p2sh), Err(Violation::HighS));
}

#[test]
fn upgradable_programs_leaves_and_op_success_are_discouraged() {
    let v2 = ScriptBuf::from_bytes(vec![0x52, 0x02, 1, 2]);
    let p2sh = ScriptBuf::new_p2sh(&bitcoin::ScriptHash::from_byte_array([1; 20]));
    let wrapped_v2 = input(script_sig(&[v2.to_bytes()]), &[]);
    assert_eq!(
        check_input(&wrapped_v2, &p2sh),
        Err(Violation::UpgradableWitnessProgram)
    );
    let mut taproot = vec![0x51, 0x20];
    taproot.extend([9; 32]);
    let wrapped_taproot = input(script_sig(&[taproot.clone()]), &[vec![1; 64]]);
    assert_eq!(
        check_input(&wrapped_taproot, &p2sh),
        Err(Violation::UpgradableWitnessProgram)
    );
    let taproot = ScriptBuf::from_bytes(taproot);
    let key_path = input(ScriptBuf::new(), &[vec![1; 64]]);
    assert_eq!(check_input(&key_path, &taproot), Ok(()));
    let control = |leaf: u8| [&[leaf][..], &[2; 32]].concat();
    let success = input(ScriptBuf::new(), &[vec![0x50], control(0xc0)]);
    assert_eq!(check_input(&success, &taproot), Err(Violation::OpSuccess));
    // 0x50 as pushed data is no opcode.
    let pushed = input(
        ScriptBuf::new(),
        &[vec![0x01, 0x50, 0x75, 0x51], control(0xc1)],
    );
    assert_eq!(check_input(&pushed, &taproot), Ok(()));
    let leaf = input(ScriptBuf::new(), &[vec![0x51], control(0xc2)]);
    assert_eq!(
        check_input(&leaf, &taproot),
        Err(Violation::UpgradableTaprootVersion)
    );
    let anchor = ScriptBuf::from_bytes(vec![0x51, 0x02, 0x4e, 0x73]);
    assert_eq!(check_input(&input(ScriptBuf::new(), &[]), &anchor), Ok(()));
}

#[test]
fn scripts_without_branches_are_read_for_nops_and_codeseparators() {
    let p2sh = ScriptBuf::new_p2sh(&bitcoin::ScriptHash::from_byte_array([1; 20]));
    // OP_NOP4 OP_1 as a redeem script, and OP_NOP2 (CLTV) OP_DROP OP_1, which is allowed.
    let nop = input(script_sig(&[vec![0xb3, 0x51]]), &[]);
    assert_eq!(check_input(&nop, &p2sh), Err(Violation::UpgradableNops));
    let cltv = input(script_sig(&[vec![0x00, 0xb1, 0x75, 0x51]]), &[]);
    assert_eq!(check_input(&cltv, &p2sh), Ok(()));
    let separator = input(script_sig(&[vec![0xab, 0x51]]), &[]);
    assert_eq!(
        check_input(&separator, &p2sh),
        Err(Violation::CodeSeparator)
    );
    // Segwit v0 allows OP_CODESEPARATOR; a branch leaves the script unread.
    let in_witness = input(ScriptBuf::new(), &[vec![0xab, 0x51]]);
    assert_eq!(check_input(&in_witness, &p2wsh()), Ok(()));
    let branch = input(script_sig(&[vec![0x51], vec![0x63, 0xb3, 0x68, 0x51]]), &[]);
    assert_eq!(check_input(&branch, &p2sh), Ok(()));
    // OP_CODESEPARATOR is refused in a legacy script even in a branch that does not run.
    let unrun = input(script_sig(&[vec![0x00, 0x63, 0xab, 0x68, 0x51]]), &[]);
    assert_eq!(check_input(&unrun, &p2sh), Err(Violation::CodeSeparator));
    // Tapscript: NOPs are discouraged, OP_CODESEPARATOR is allowed.
    let mut taproot = vec![0x51, 0x20];
    taproot.extend([9; 32]);
    let taproot = ScriptBuf::from_bytes(taproot);
    let control = [&[0xc0][..], &[2; 32]].concat();
    let tap_nop = input(ScriptBuf::new(), &[vec![0xb3, 0x51], control.clone()]);
    assert_eq!(
        check_input(&tap_nop, &taproot),
        Err(Violation::UpgradableNops)
    );
    let tap_separator = input(ScriptBuf::new(), &[vec![0xab, 0x51], control]);
    assert_eq!(check_input(&tap_separator, &taproot), Ok(()));
    // A non-minimal push inside the witness script.
    let pushed = input(ScriptBuf::new(), &[vec![0x01, 0x05, 0x75, 0x51]]);
    assert_eq!(check_input(&pushed, &p2wsh()), Err(Violation::MinimalData));
}

#[test]
fn multisig_templates_are_read() {
    let mut ms = vec![0x51, 33];
    ms.extend(compressed());
    ms.extend([0x51, 0xae]);
    assert_eq!(multisig(&ms).map(|(m, k)| (m, k.len())), Some((1, 1)));
    assert_eq!(multisig(&[0x51, 0x51, 0xae]), None);
    assert_eq!(multisig(&[0x52, 0x51, 0xae]), None);
}

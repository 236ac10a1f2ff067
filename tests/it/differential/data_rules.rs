//! Issue 27: Knots 29.4's rules against data (`knots_data_rules`, on in the Knots profile as in
//! Knots), each case a transaction that breaks one beside neighbours that pass, judged by
//! Bitcoin Knots 29.4's `testmempoolaccept` ([`Pair::start_knots`]) and by cairn with the Knots
//! profile: the same verdict and rule, and for a script rule the same words.

use bitcoin::hashes::Hash;
use bitcoin::secp256k1::{Secp256k1, SecretKey};
use bitcoin::taproot::{LeafVersion, TaprootBuilder};
use bitcoin::ScriptBuf;

use super::policy::{disagreements, p2wsh, spend_with, tap_leaf, FEE};
use super::*;

/// Knots 29.4's rules against data, on by default in Knots and in the Knots profile
/// (`knots_data_rules`): each case breaks one, beside neighbours that pass; the same verdict and
/// rule from Knots and cairn, and for a script rule the same words.
#[test]
fn knots_data_rules_agree_with_bitcoind() {
    let pair = Pair::start_knots();
    let push = |n: usize| {
        let mut s = vec![0x4d, n as u8, (n >> 8) as u8];
        s.extend(vec![0x5a; n]);
        s
    };
    // <n bytes> OP_SHA256 <their hash> OP_EQUAL: a push that is not dropped.
    let hashed = |n: usize| {
        let mut s = push(n);
        s.push(0xa8);
        s.push(32);
        s.extend(bitcoin::hashes::sha256::Hash::hash(&vec![0x5a; n]).to_byte_array());
        s.push(0x87);
        s
    };
    let dropped = p2wsh(vec![0x01, 0xab, 0x75, 0x51]);
    let mut envelope_script = vec![0x00, 0x63, 0x0a];
    envelope_script.extend([0xcc; 10]);
    envelope_script.extend([0x68, 0x51]);
    let envelope = p2wsh(envelope_script);
    let mut drops = vec![0x6d; 12];
    drops.extend([0x75, 0x51]);
    let wide = p2wsh(drops);
    let mut fewer_drops = vec![0x6d; 10];
    fewer_drops.push(0x51);
    let narrow = p2wsh(fewer_drops);
    let (push257, push256) = (p2wsh(hashed(257)), p2wsh(hashed(256)));
    let branch = tap_leaf(vec![0x51, 0x63, 0x51, 0x68], 0xc0);
    let plain_leaf = tap_leaf(vec![0x51], 0xc0);
    let scripts = [
        dropped.0.clone(),
        envelope.0.clone(),
        wide.0.clone(),
        push257.0.clone(),
        push256.0.clone(),
        branch.0.clone(),
        plain_leaf.0.clone(),
        narrow.0.clone(),
    ];
    let coins = pair.fund(&scripts);
    let items = |n: usize, script: &[u8]| {
        let mut w = vec![vec![0x77; 80]; n];
        w.push(script.to_vec());
        w
    };
    let with_output = |mut tx: Transaction, script: ScriptBuf| {
        tx.output.push(TxOut {
            value: Amount::from_sat(if script.is_op_return() { 0 } else { 1_000 }),
            script_pubkey: script,
        });
        tx.output[0].value -= Amount::from_sat(1_000);
        tx
    };
    let wallet = |lock: u32| {
        let mut tx = spend_with(&pair, pair.coins[1].0, ScriptBuf::new(), vec![]);
        tx.output[0].value = Amount::from_sat(pair.coins[1].1 - FEE);
        tx.lock_time = bitcoin::absolute::LockTime::from_consensus(lock);
        tx.input[0].sequence = bitcoin::Sequence::ENABLE_LOCKTIME_NO_RBF;
        tx
    };
    // Two P2WSH outputs whose first program starts with a payload size of 40 and "stamp:".
    let olga = |mark: u8| {
        let mut tx = wallet(0);
        let mut first = vec![0x00, 0x28, b's', b't', b'a', b'm', b'p', mark];
        first.resize(32, 0x11);
        for program in [first, vec![0x22; 32]] {
            let hash = bitcoin::WScriptHash::from_byte_array(program.try_into().unwrap());
            tx.output.push(TxOut {
                value: Amount::from_sat(1_000),
                script_pubkey: ScriptBuf::new_p2wsh(&hash),
            });
            tx.output[0].value -= Amount::from_sat(1_000);
        }
        pair.sign(&tx)
    };
    let program = |len: usize| {
        let mut s = vec![0x51, len as u8];
        s.extend(vec![0x11; len]);
        ScriptBuf::from_bytes(s)
    };
    let cases: Vec<(&str, Transaction)> = vec![
        ("lock time 21 (CAT-21)", pair.sign(&wallet(21))),
        ("lock time 22", pair.sign(&wallet(22))),
        (
            "a Runes OP_RETURN",
            pair.sign(&with_output(
                wallet(0),
                ScriptBuf::from_bytes(vec![0x6a, 0x5d, 0x01, 0x00]),
            )),
        ),
        ("an OLGA run of two P2WSH outputs", olga(b':')),
        ("two P2WSH outputs that are not OLGA", olga(b';')),
        (
            "a 35-byte witness program output",
            pair.sign(&with_output(wallet(0), program(33))),
        ),
        (
            "a 34-byte witness program output",
            pair.sign(&with_output(wallet(0), program(32))),
        ),
        (
            "<1 byte> OP_DROP in a witness script",
            spend_with(&pair, coins[0].0, ScriptBuf::new(), vec![dropped.1.clone()]),
        ),
        (
            "an OP_FALSE OP_IF envelope in a witness script",
            spend_with(
                &pair,
                coins[1].0,
                ScriptBuf::new(),
                vec![envelope.1.clone()],
            ),
        ),
        (
            "a witness of 25 items of 80 bytes (over 1,650 bytes)",
            spend_with(&pair, coins[2].0, ScriptBuf::new(), items(25, &wide.1)),
        ),
        (
            "a witness of 20 items of 80 bytes",
            spend_with(&pair, coins[7].0, ScriptBuf::new(), items(20, &narrow.1)),
        ),
        (
            "a push of 257 bytes in a witness script",
            spend_with(&pair, coins[3].0, ScriptBuf::new(), vec![push257.1.clone()]),
        ),
        (
            "a push of 256 bytes in a witness script",
            spend_with(&pair, coins[4].0, ScriptBuf::new(), vec![push256.1.clone()]),
        ),
        (
            "OP_IF in a tapscript",
            spend_with(
                &pair,
                coins[5].0,
                ScriptBuf::new(),
                vec![branch.1.clone(), branch.2.clone()],
            ),
        ),
        (
            "a tapscript without branches",
            spend_with(
                &pair,
                coins[6].0,
                ScriptBuf::new(),
                vec![plain_leaf.1.clone(), plain_leaf.2.clone()],
            ),
        ),
    ];
    let disagreed = disagreements(&pair, &cases);
    assert!(disagreed.is_empty(), "{disagreed:#?}");
    // The cases are what they say: the oracle refuses each rule's case and takes its neighbour.
    let core = |name: &str| pair.core(&cases.iter().find(|(n, _)| *n == name).unwrap().1);
    let refused = [
        ("lock time 21 (CAT-21)", "parasite-cat21"),
        ("a Runes OP_RETURN", "tokens-runes"),
        ("an OLGA run of two P2WSH outputs", "tokens-olga"),
        (
            "a 35-byte witness program output",
            "bad-txns-vout-script-toolarge",
        ),
        (
            "<1 byte> OP_DROP in a witness script",
            "txn-datacarrier-nonstandard",
        ),
        (
            "an OP_FALSE OP_IF envelope in a witness script",
            "txn-datacarrier-nonstandard",
        ),
        (
            "a witness of 25 items of 80 bytes (over 1,650 bytes)",
            "bad-witness-witness-size",
        ),
        (
            "a push of 257 bytes in a witness script",
            "mempool-script-verify-flag-failed (Push",
        ),
        (
            "OP_IF in a tapscript",
            "mempool-script-verify-flag-failed (OP_IF",
        ),
    ];
    for (name, reason) in refused {
        let said = core(name).unwrap_or_default();
        assert!(said.starts_with(reason), "{name}: bitcoind said {said:?}");
    }
    assert_eq!(core("lock time 22"), None);
    assert_eq!(core("two P2WSH outputs that are not OLGA"), None);
    assert_eq!(core("a 34-byte witness program output"), None);
    assert_eq!(core("a push of 256 bytes in a witness script"), None);
    assert_eq!(core("a tapscript without branches"), None);
    assert_eq!(core("a witness of 20 items of 80 bytes"), None);
}

/// A taproot output with two leaves, `script` and `OP_TRUE`: the output script, and the leaf
/// and the 65-byte control block (one merkle node) that spend it by `script`.
fn tap_pair(script: Vec<u8>) -> (ScriptBuf, Vec<u8>, Vec<u8>) {
    let secp = Secp256k1::new();
    let internal = SecretKey::from_slice(&[5; 32])
        .unwrap()
        .x_only_public_key(&secp)
        .0;
    let leaf = ScriptBuf::from_bytes(script.clone());
    let info = TaprootBuilder::new()
        .add_leaf(1, leaf.clone())
        .unwrap()
        .add_leaf(1, ScriptBuf::from_bytes(vec![0x51]))
        .unwrap()
        .finalize(&secp, internal)
        .unwrap();
    let control = info
        .control_block(&(leaf, LeafVersion::TapScript))
        .unwrap()
        .serialize();
    let output = ScriptBuf::new_p2tr_tweaked(info.output_key());
    (output, script, control)
}

/// `message` RC4-enciphered with `key` (Counterparty's OP_RETURN encoding).
fn rc4(key: [u8; 32], message: &[u8]) -> Vec<u8> {
    use rc4::{consts::U32, Key, KeyInit, Rc4, StreamCipher};
    let mut out = message.to_vec();
    Rc4::<U32>::new(Key::<U32>::from_slice(&key)).apply_keystream(&mut out);
    out
}

/// Knots's `-rejectdeadbranches` (constant guards: `FindDeadParts`), OPNet's leaf spends,
/// Counterparty's OP_RETURN messages (`-rejecttokens`) and the order Knots walks outputs in
/// (from the last), each beside a neighbour that passes or gets the other reason.
#[test]
fn knots_dead_branches_opnet_and_counterparty_agree_with_bitcoind() {
    let pair = Pair::start_knots();
    let ten = [0xcc; 10];
    let with_ten = |head: &[u8], tail: &[u8]| [head, &[0x0a], &ten, tail].concat();
    // OP_1 OP_NOTIF <10B> OP_ENDIF OP_TRUE: the NOTIF part never runs.
    let dead_notif = p2wsh(with_ten(&[0x51, 0x64], &[0x68, 0x51]));
    // OP_1 OP_IF OP_1 OP_ELSE <10B> OP_ENDIF: the ELSE part never runs.
    let dead_else = p2wsh(with_ten(&[0x51, 0x63, 0x51, 0x67], &[0x68]));
    // OP_2 OP_3 OP_ADD OP_5 OP_NUMEQUAL OP_NOTIF <10B> OP_ENDIF OP_TRUE: arithmetic decides.
    let dead_sum = p2wsh(with_ten(
        &[0x52, 0x53, 0x93, 0x55, 0x9c, 0x64],
        &[0x68, 0x51],
    ));
    // OP_DEPTH OP_NOTIF <10B> OP_ENDIF: the witness decides, so the part is live.
    let live_depth = p2wsh(with_ten(&[0x74, 0x64], &[0x68]));
    // <"op"> OP_EQUALVERIFY OP_2DROP OP_TRUE, spent with five witness items.
    let opnet_leaf = |tag: &[u8; 2]| [&[0x02][..], tag, &[0x88, 0x6d, 0x51]].concat();
    let (opnet, not_opnet) = (tap_pair(opnet_leaf(b"op")), tap_pair(opnet_leaf(b"oq")));
    let scripts = [
        dead_notif.0.clone(),
        dead_else.0.clone(),
        dead_sum.0.clone(),
        live_depth.0.clone(),
        opnet.0.clone(),
        not_opnet.0.clone(),
    ];
    let coins = pair.fund(&scripts);
    let witness_spend = |coin: usize, items: Vec<Vec<u8>>| {
        spend_with(&pair, coins[coin].0, ScriptBuf::new(), items)
    };
    let leaf_spend = |coin: usize, (_, leaf, control): &(ScriptBuf, Vec<u8>, Vec<u8>), tag| {
        let items = vec![
            vec![0x11; 3],
            vec![0x22; 3],
            tag,
            leaf.clone(),
            control.clone(),
        ];
        witness_spend(coin, items)
    };
    let wallet = || {
        let mut tx = spend_with(&pair, pair.coins[1].0, ScriptBuf::new(), vec![]);
        tx.output[0].value = Amount::from_sat(pair.coins[1].1 - FEE);
        tx
    };
    let with_outputs = |outputs: Vec<(u64, ScriptBuf)>| {
        let mut tx = wallet();
        for (value, script) in outputs {
            tx.output[0].value -= Amount::from_sat(value);
            tx.output.push(TxOut {
                value: Amount::from_sat(value),
                script_pubkey: script,
            });
        }
        pair.sign(&tx)
    };
    let counterparty = |key: [u8; 32]| {
        let payload = rc4(key, b"CNTRPRTY\x00\x00\x00\x14 a message");
        let script = ScriptBuf::new_op_return(
            <&bitcoin::script::PushBytes>::try_from(&payload[..]).unwrap(),
        );
        with_outputs(vec![(0, script)])
    };
    let mut spent_txid = pair.coins[1].0.txid.to_byte_array();
    spent_txid.reverse();
    let key = SecretKey::from_slice(&[9; 32]).unwrap();
    let bare_key = ScriptBuf::new_p2pk(&bitcoin::PublicKey::new(key.public_key(&Secp256k1::new())));
    let dust = ScriptBuf::new_p2wpkh(&bitcoin::WPubkeyHash::from_byte_array([0x44; 20]));
    let cases: Vec<(&str, Transaction)> = vec![
        (
            "a dead OP_NOTIF part",
            witness_spend(0, vec![dead_notif.1.clone()]),
        ),
        (
            "a dead OP_ELSE part",
            witness_spend(1, vec![dead_else.1.clone()]),
        ),
        (
            "a part a sum makes dead",
            witness_spend(2, vec![dead_sum.1.clone()]),
        ),
        (
            "a part the witness decides",
            witness_spend(3, vec![vec![1], live_depth.1.clone()]),
        ),
        ("an OPNet leaf", leaf_spend(4, &opnet, b"op".to_vec())),
        (
            "a leaf that is not OPNet",
            leaf_spend(5, &not_opnet, b"oq".to_vec()),
        ),
        ("a Counterparty message", counterparty(spent_txid)),
        ("a message under another key", counterparty([0x42; 32])),
        (
            "a bare key, then dust",
            with_outputs(vec![(1_000, bare_key.clone()), (293, dust.clone())]),
        ),
        (
            "dust, then a bare key",
            with_outputs(vec![(293, dust), (1_000, bare_key)]),
        ),
    ];
    let disagreed = disagreements(&pair, &cases);
    assert!(disagreed.is_empty(), "{disagreed:#?}");
    let core = |name: &str| pair.core(&cases.iter().find(|(n, _)| *n == name).unwrap().1);
    let refused = [
        ("a dead OP_NOTIF part", "txn-datacarrier-nonstandard"),
        ("a dead OP_ELSE part", "txn-datacarrier-nonstandard"),
        ("a part a sum makes dead", "txn-datacarrier-nonstandard"),
        ("an OPNet leaf", "txn-datacarrier-nonstandard"),
        ("a Counterparty message", "tokens-counterparty"),
        ("a bare key, then dust", "dust-nonanchor"),
        ("dust, then a bare key", "bare-pubkey"),
    ];
    for (name, reason) in refused {
        let said = core(name).unwrap_or_default();
        assert!(said.starts_with(reason), "{name}: bitcoind said {said:?}");
    }
    for name in [
        "a part the witness decides",
        "a leaf that is not OPNet",
        "a message under another key",
    ] {
        assert_eq!(core(name), None, "{name}");
    }
}

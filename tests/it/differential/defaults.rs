//! What a new user meets at cairn's default settings, judged by Bitcoin Core 31.99's
//! `testmempoolaccept` on the same coins: data carriers, the relay fee, bare outputs, an
//! envelope in a P2WSH spend, a chain of 30 from one coin, TRUC, and the ordinary payments
//! around them. Every case is valid in a block, so only policy decides. The 42 verdicts must
//! agree, and Core's must be what Core 31 is known to say (so an oracle that refused
//! everything could not pass it).

use super::policy::{p2wsh, spend_with};
use super::*;

/// One verdict: the case, Core's and cairn's.
struct Verdict {
    case: String,
    core: Option<String>,
    cairn: Option<String>,
}

/// Judges `tx` by both on their current mempools (cairn's `mempool`); if `enter` and both take
/// it, it enters both.
fn judge(pair: &Pair, mempool: &Mempool, case: &str, tx: &Transaction, enter: bool) -> Verdict {
    let raw = bitcoin::consensus::serialize(tx);
    let core = pair.core(tx);
    let cairn = match enter {
        true => mempool.accept(&raw, &pair.index).err(),
        false => mempool
            .test_accept(std::slice::from_ref(&raw), &pair.index)
            .ok()
            .and_then(|mut r| r.remove(0).verdict)
            .and_then(|v| v.err()),
    }
    .map(|e| e.to_string());
    if enter && core.is_none() {
        pair.node
            .rpc(&["sendrawtransaction", &raw.to_lower_hex_string()]);
    }
    eprintln!("{case}: bitcoind {core:?}, cairn {cairn:?}");
    Verdict {
        case: case.to_string(),
        core,
        cairn,
    }
}

/// An OP_RETURN output script of `size` bytes in all.
fn data(size: usize) -> TxOut {
    let mut script = vec![0x6a, 0x4c, (size - 3) as u8];
    script.resize(size, 0xda);
    TxOut {
        value: Amount::ZERO,
        script_pubkey: bitcoin::ScriptBuf::from_bytes(script),
    }
}

#[test]
fn a_new_users_cases_agree_with_bitcoind_at_cairns_defaults() {
    let pair = Pair::start();
    let mempool = pair.mempool();
    let back = |coin: usize, paid: u64, fee: u64| TxOut {
        value: Amount::from_sat(pair.coins[coin].1 - paid - fee),
        script_pubkey: pair.coins[coin].2.clone(),
    };
    let paying = |value: u64, script: bitcoin::ScriptBuf| TxOut {
        value: Amount::from_sat(value),
        script_pubkey: script,
    };
    let mut verdicts = Vec::new();
    let mut single = |case: &str, tx: Transaction| {
        verdicts.push(judge(&pair, &mempool, case, &tx, false));
    };
    single(
        "a 200-byte OP_RETURN output",
        spend(&pair, 0, vec![data(200), back(0, 0, 2_000)], 0, 0xffff_fffd),
    );
    single(
        "two OP_RETURN outputs of 40 bytes",
        spend(
            &pair,
            1,
            vec![data(40), data(40), back(1, 0, 2_000)],
            0,
            0xffff_fffd,
        ),
    );
    // 0.5 sat/vB: signed once to learn its size, then again with that fee.
    let probe = spend(&pair, 2, vec![back(2, 0, 100)], 0, 0xffff_fffd);
    let half = (probe.vsize() as u64).div_ceil(2);
    let cheap = spend(&pair, 2, vec![back(2, 0, half)], 0, 0xffff_fffd);
    assert!(cheap.vsize() as u64 >= 2 * half - 2 && 10 * half < 10 * cheap.vsize() as u64);
    single("0.5 sat/vB", cheap);
    single(
        "a bare 1-of-2 multisig output",
        spend(
            &pair,
            3,
            vec![paying(10_000, bare_multisig(1, 2)), back(3, 10_000, 2_000)],
            0,
            0xffff_fffd,
        ),
    );
    single(
        "a P2PK output",
        spend(
            &pair,
            4,
            vec![paying(10_000, bare_pubkey()), back(4, 10_000, 2_000)],
            0,
            0xffff_fffd,
        ),
    );
    // OP_FALSE OP_IF <300 bytes> OP_ENDIF OP_TRUE: an inscription-style envelope.
    let mut envelope = vec![0x00, 0x63, 0x4d, 0x2c, 0x01];
    envelope.extend([0xee; 300]);
    envelope.extend([0x68, 0x51]);
    let (output, script) = p2wsh(envelope);
    let funded = pair.fund(&[output]);
    single(
        "a P2WSH spend running OP_FALSE OP_IF <300 bytes> OP_ENDIF",
        spend_with(&pair, funded[0].0, bitcoin::ScriptBuf::new(), vec![script]),
    );

    let mut entering = |case: String, tx: &Transaction| {
        verdicts.push(judge(&pair, &mempool, &case, tx, true));
    };
    // Two ordinary payments.
    for coin in [5, 6] {
        let tx = spend(
            &pair,
            coin,
            vec![
                paying(100_000, pair.coins[coin].2.clone()),
                back(coin, 100_000, 2_000),
            ],
            0,
            0xffff_fffd,
        );
        entering(format!("an ordinary payment from coin {coin}"), &tx);
    }
    // A chain of 30 from one coin: Knots stops at 25, Core 31's clusters take 64.
    let (mut from, mut value) = (pair.coins[7].0, pair.coins[7].1);
    for n in 1..=30 {
        value -= 1_000;
        let link = spend_of(
            &pair,
            from,
            2,
            vec![paying(value, pair.coins[7].2.clone())],
            0,
            0xffff_fffd,
        );
        entering(format!("transaction {n} of a chain of 30"), &link);
        from = OutPoint::new(link.compute_txid(), 0);
    }
    // Two TRUC parents; a version 2 child of the first; a version 3 child of about 1,195 vbytes
    // of the second.
    let parent = |coin: usize| {
        spend_of(
            &pair,
            pair.coins[coin].0,
            3,
            vec![back(coin, 0, 2_000)],
            0,
            0xffff_fffd,
        )
    };
    let (first, second) = (parent(8), parent(9));
    entering("a TRUC parent".into(), &first);
    entering("another TRUC parent".into(), &second);
    let out_of = |tx: &Transaction| {
        (
            OutPoint::new(tx.compute_txid(), 0),
            tx.output[0].value.to_sat(),
        )
    };
    let (op, v) = out_of(&first);
    let v2_child = spend_of(
        &pair,
        op,
        2,
        vec![paying(v - 2_000, pair.coins[8].2.clone())],
        0,
        0xffff_fffd,
    );
    entering(
        "a version 2 child of an unconfirmed version 3 parent".into(),
        &v2_child,
    );
    let (op, v) = out_of(&second);
    let mut outputs: Vec<TxOut> = (0..36)
        .map(|_| paying(1_000, pair.coins[9].2.clone()))
        .collect();
    outputs.push(paying(v - 36_000 - 5_000, pair.coins[9].2.clone()));
    let big_child = spend_of(&pair, op, 3, outputs, 0, 0xffff_fffd);
    assert!(
        (1_100..1_300).contains(&big_child.vsize()),
        "{}",
        big_child.vsize()
    );
    entering(
        format!(
            "a version 3 child of {} vbytes of a version 3 parent",
            big_child.vsize()
        ),
        &big_child,
    );

    assert_eq!(verdicts.len(), 42);
    let refused: Vec<&str> = verdicts
        .iter()
        .filter(|v| v.core.is_some())
        .map(|v| v.case.as_str())
        .collect();
    assert_eq!(
        refused.len(),
        2,
        "Core 31 refuses only the two TRUC children: {refused:?}"
    );
    assert!(refused.iter().all(|c| c.contains("child")), "{refused:?}");
    let disagreed: Vec<String> = verdicts
        .iter()
        .filter(|v| v.core.as_deref().map(rule) != v.cairn.as_deref().map(rule))
        .map(|v| format!("{}: bitcoind {:?}, cairn {:?}", v.case, v.core, v.cairn))
        .collect();
    assert!(disagreed.is_empty(), "{disagreed:#?}");
}

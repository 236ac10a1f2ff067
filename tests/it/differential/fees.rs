//! Issue 27, fee estimates: cairn's projection of the next block against Bitcoin Core 31.99's
//! `getblocktemplate` on the same mempool, and its `estimatefee` against Core's
//! `estimatesmartfee` on the same traffic (cairn's default profile, Core's block assembly
//! defaults).

use bitcoin::hashes::{sha256, Hash};
use bitcoin::script::Builder;
use bitcoin::{ScriptBuf, Sequence, WScriptHash, Witness};

use super::*;

/// A coin anyone can spend (P2WSH of `OP_TRUE`): spends need no signature, so the tests
/// build as many as they like.
#[derive(Clone)]
struct Coin {
    outpoint: OutPoint,
    value: u64,
}

/// The witness script of every [`Coin`].
fn witness_script() -> ScriptBuf {
    Builder::new()
        .push_opcode(bitcoin::opcodes::OP_TRUE)
        .into_script()
}

fn anyone() -> ScriptBuf {
    let hash = sha256::Hash::hash(witness_script().as_bytes());
    ScriptBuf::new_p2wsh(&WScriptHash::from_byte_array(hash.to_byte_array()))
}

/// Pays `count` coins of `each` sat: one paid by the test's keys ([`Pair::pay`]), split by a
/// transaction of cairn's making, both mined (cairn's index follows).
fn fund(pair: &Pair, count: usize, each: u64) -> Vec<Coin> {
    let total = each * count as u64 + 1_000_000;
    let paid = pair.pay(vec![TxOut {
        value: Amount::from_sat(total),
        script_pubkey: anyone(),
    }]);
    let funded = Coin {
        outpoint: OutPoint::new(paid.compute_txid(), 0),
        value: total,
    };
    let (split, coins) = spend(&[funded], count, each, 2);
    let raw = bitcoin::consensus::serialize(&split);
    pair.node
        .rpc(&["sendrawtransaction", &raw.to_lower_hex_string()]);
    pair.mine(1);
    coins[1..].to_vec()
}

/// A transaction spending `coins` to a change coin and `outputs` coins of `each` sat, paying
/// exactly `sat_per_vb` of its virtual size; returns it and its coins, change first.
fn spend(coins: &[Coin], outputs: usize, each: u64, sat_per_vb: u64) -> (Transaction, Vec<Coin>) {
    let script = witness_script();
    let mut tx = Transaction {
        version: bitcoin::transaction::Version::TWO,
        lock_time: bitcoin::absolute::LockTime::ZERO,
        input: coins
            .iter()
            .map(|c| TxIn {
                previous_output: c.outpoint,
                script_sig: ScriptBuf::new(),
                sequence: Sequence::ENABLE_RBF_NO_LOCKTIME,
                witness: Witness::from_slice(&[script.as_bytes()]),
            })
            .collect(),
        output: vec![
            TxOut {
                value: Amount::from_sat(each),
                script_pubkey: anyone(),
            };
            outputs + 1
        ],
    };
    let fee = sat_per_vb * tx.vsize() as u64;
    let total: u64 = coins.iter().map(|c| c.value).sum();
    tx.output[0].value = Amount::from_sat(total - fee - each * outputs as u64);
    let txid = tx.compute_txid();
    let new_coins = tx
        .output
        .iter()
        .enumerate()
        .map(|(vout, out)| Coin {
            outpoint: OutPoint::new(txid, vout as u32),
            value: out.value.to_sat(),
        })
        .collect();
    (tx, new_coins)
}

/// cairn's first projected block and bitcoind's `getblocktemplate` take the same transactions
/// from the same 1.3 MvB mempool: packages by ancestor fee rate (children paying for parents,
/// a three-long chain, a sibling of a paid-for package), equal rates ordered by txid, packages
/// too big for the room left passed over for smaller ones.
#[test]
fn the_projected_next_block_is_bitcoinds_template() {
    let pair = Pair::start();
    let pool = pair.mempool();
    let mut coins = fund(&pair, 80, 25_000_000).into_iter();
    // 26 large transactions of 34 to 47 kvB at 2 to 40 sat/vB, some at equal rates.
    for i in 0..26u64 {
        let rate = [
            2, 5, 9, 12, 12, 15, 18, 20, 20, 20, 22, 25, 27, 30, 31, 33, 35, 36, 38, 40,
        ][i as usize % 20];
        let (tx, _) = spend(
            &[coins.next().unwrap()],
            1_080 - 10 * i as usize,
            1_000,
            rate,
        );
        pair.submit(&pool, &tx);
    }
    // Children paying for parents: a 1 sat/vB parent of 43 kvB with a child of about 230 vB
    // bringing the package to about 27 sat/vB, and one to about 9.
    for child_rate in [5_000, 1_500] {
        let (parent, outs) = spend(&[coins.next().unwrap()], 1_000, 1_000, 1);
        pair.submit(&pool, &parent);
        let (child, _) = spend(&outs[..1], 3, 1_000, child_rate);
        pair.submit(&pool, &child);
    }
    // A chain of three: 3, then 1, then 3,000 sat/vB (about 15 sat/vB together).
    let (first, outs) = spend(&[coins.next().unwrap()], 400, 1_000, 3);
    pair.submit(&pool, &first);
    let (second, outs) = spend(&outs[..1], 400, 1_000, 1);
    pair.submit(&pool, &second);
    let (third, _) = spend(&outs[..1], 2, 1_000, 3_000);
    pair.submit(&pool, &third);
    // A grandparent and a parent at 1 sat/vB, a child paying for both (about 24 sat/vB
    // together) and its sibling at 20 sat/vB, which then stands alone.
    let (grand, outs) = spend(&[coins.next().unwrap()], 600, 1_000, 1);
    pair.submit(&pool, &grand);
    let (parent, outs) = spend(&outs[..1], 1, 100_000, 1);
    pair.submit(&pool, &parent);
    let (paying, _) = spend(&outs[..1], 1, 1_000, 4_000);
    pair.submit(&pool, &paying);
    let (sibling, _) = spend(&outs[1..2], 1, 1_000, 20);
    pair.submit(&pool, &sibling);
    // Small ones at 1 to 20 sat/vB to fill what the large ones leave.
    for rate in (1..=20).chain(1..=20) {
        let (tx, _) = spend(&[coins.next().unwrap()], 1, 1_000, rate);
        pair.submit(&pool, &tx);
    }

    let template = pair
        .node
        .rpc_json(&["getblocktemplate", r#"{"rules":["segwit"]}"#]);
    let core: std::collections::BTreeSet<Txid> = template["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["txid"].as_str().unwrap().parse().unwrap())
        .collect();
    let rates = pool.fee_rates();
    let ours: std::collections::BTreeSet<Txid> = rates.blocks[0].txids.iter().copied().collect();
    let (count, _) = pool.size();
    let in_core_only: Vec<_> = core.difference(&ours).collect();
    let in_ours_only: Vec<_> = ours.difference(&core).collect();
    assert!(
        in_core_only.is_empty() && in_ours_only.is_empty(),
        "of {count}: bitcoind's template has {} ({} only there), cairn's {} ({} only there)",
        core.len(),
        in_core_only.len(),
        ours.len(),
        in_ours_only.len()
    );
    assert!(ours.len() < count, "the mempool is more than a block");
    let template_fees: u64 = template["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["fee"].as_u64().unwrap())
        .sum();
    assert_eq!(rates.blocks[0].fees, template_fees);
}

/// Rounds of steady traffic: 40 transactions of 37 kvB at 1 to 40 sat/vB arrive (1.5 blocks'
/// worth), bitcoind mines one block and cairn follows it. bitcoind's
/// `estimatesmartfee` learns from what confirmed; cairn reads its projection of the mempool.
/// Each round from the sixth, on the mempool bitcoind's next block will be built from, both
/// answer Electrum's `blockchain.estimatefee(1)`: they must agree within half again.
#[test]
fn estimatefee_is_close_to_bitcoinds_estimatesmartfee_on_the_same_traffic() {
    const ROUNDS: usize = 9;
    const PER_ROUND: usize = 40;
    let pair = Pair::start();
    let mut coins = fund(&pair, ROUNDS * PER_ROUND, 2_500_000).into_iter();
    let pool = pair.mempool();
    let mut rows = Vec::new();
    for round in 0..ROUNDS {
        // The rates in an order that changes every round, so neither arrival order nor txid
        // favours a rate.
        for k in 0..PER_ROUND {
            let rate = 1 + ((k * 7 + round * 13) % PER_ROUND) as u64;
            let (tx, _) = spend(&[coins.next().unwrap()], 860, 1_000, rate);
            pair.submit(&pool, &tx);
        }
        if round >= 5 {
            let core = pair.node.rpc_json(&["estimatesmartfee", "1"]);
            let core = core["feerate"].as_f64();
            let ours = pool.fee_rates().estimate(1);
            rows.push((round, core, ours));
        }
        pair.mine(1);
        pool.revalidate(&pair.index);
    }
    for (round, core, ours) in &rows {
        eprintln!("round {round}: bitcoind {core:?} BTC/kvB, cairn {ours:?} BTC/kvB");
    }
    for (round, core, ours) in rows {
        let (core, ours) = (
            core.expect("bitcoind has an estimate"),
            ours.expect("a backlog"),
        );
        let ratio = ours / core;
        assert!(
            (1.0 / 1.5..=1.5).contains(&ratio),
            "round {round}: cairn {ours} against bitcoind {core} BTC/kvB"
        );
    }
}

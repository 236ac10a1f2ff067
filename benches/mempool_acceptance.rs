//! The mempool's acceptance rate under Core 31's profile (clusters, chunk eviction) beside
//! Knots's (ancestor and descendant limits, descendant-score eviction: cairn's mempool before the
//! cluster mempool), on the same 10,000 signed P2WPKH transactions in mixed clusters: lone
//! payments, chains of 2 to 20, fan-outs of a parent and 8 children, two parents merged by a
//! child, and dense runs where each transaction spends the two before it. Every script is
//! verified (the policy interpreter, then the kernel), as in production.
//!
//! - `roomy`: a 300 MB pool; every transaction enters under both profiles.
//! - `full`: a pool of half their size, so the second half evicts as it enters.
//!
//! Read as the ratio of each profile's time for the same set (`cargo bench --profile ci --bench
//! mempool_acceptance`).

use std::collections::{HashMap, HashSet};
use std::hint::black_box;
use std::time::Duration;

use bitcoin::hashes::Hash;
use bitcoin::secp256k1::{Message, Secp256k1, SecretKey};
use bitcoin::sighash::{EcdsaSighashType, SighashCache};
use bitcoin::{
    absolute::LockTime, transaction::Version, Amount, BlockHash, CompressedPublicKey, OutPoint,
    ScriptBuf, Sequence, Transaction, TxIn, TxOut, Txid, Witness,
};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use rand::{Rng, SeedableRng};

use cairn::config::MempoolConfig;
use cairn::mempool::{CoinError, CoinSource, Mempool};
use cairn::types::Coin;

/// How many transactions each run offers.
const COUNT: usize = 10_000;
/// Each confirmed coin's value.
const COIN: u64 = 10_000_000;

/// The confirmed chain: coins at height 1, the tip at 1,000.
#[derive(Default)]
struct Chain {
    coins: HashMap<OutPoint, TxOut>,
    txids: HashSet<Txid>,
}

impl CoinSource for Chain {
    fn tip_height(&self) -> Option<u32> {
        Some(1_000)
    }

    fn median_time_past(&self, height: u32) -> Option<u32> {
        (height <= 1_000).then(|| 1_700_000_000 + height * 600)
    }

    fn block_hash(&self, height: u32) -> Option<BlockHash> {
        let mut bytes = [0u8; 32];
        bytes[..4].copy_from_slice(&height.to_le_bytes());
        (height <= 1_000).then(|| BlockHash::from_byte_array(bytes))
    }

    fn is_confirmed(&self, txid: &Txid) -> Result<bool, CoinError> {
        Ok(self.txids.contains(txid))
    }

    fn confirmed_unspent(&self, op: &OutPoint) -> Result<Option<Coin>, CoinError> {
        Ok(self.coins.get(op).map(|out| Coin {
            output: out.clone(),
            height: 1,
            coinbase: false,
        }))
    }

    fn is_confirmed_unspent(&self, op: &OutPoint) -> Result<bool, CoinError> {
        Ok(self.coins.contains_key(op))
    }
}

/// Makes and signs the transactions, and the coins they start from.
struct Maker {
    secp: Secp256k1<bitcoin::secp256k1::All>,
    key: SecretKey,
    script: ScriptBuf,
    chain: Chain,
    outputs: HashMap<OutPoint, TxOut>,
    txs: Vec<Vec<u8>>,
    rng: rand::rngs::StdRng,
}

impl Maker {
    fn new() -> Maker {
        let secp = Secp256k1::new();
        let key = SecretKey::from_slice(&[7; 32]).expect("a key");
        let public = CompressedPublicKey(key.public_key(&secp));
        Maker {
            script: ScriptBuf::new_p2wpkh(&public.wpubkey_hash()),
            secp,
            key,
            chain: Chain::default(),
            outputs: HashMap::new(),
            txs: Vec::new(),
            rng: rand::rngs::StdRng::seed_from_u64(48),
        }
    }

    /// A fresh confirmed coin.
    fn coin(&mut self) -> OutPoint {
        let n = self.chain.coins.len() as u64;
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        let op = OutPoint::new(Txid::from_byte_array(bytes), 0);
        let out = TxOut {
            value: Amount::from_sat(COIN),
            script_pubkey: self.script.clone(),
        };
        self.chain.coins.insert(op, out.clone());
        self.chain.txids.insert(op.txid);
        self.outputs.insert(op, out);
        op
    }

    /// Spends `inputs` into `outputs` equal outputs at 2 to 50 sat/vB; its outpoints.
    fn pay(&mut self, inputs: &[OutPoint], outputs: usize) -> Vec<OutPoint> {
        let value: u64 = inputs
            .iter()
            .map(|op| self.outputs[op].value.to_sat())
            .sum();
        let vsize = 11 + 68 * inputs.len() as u64 + 31 * outputs as u64;
        let fee = vsize * self.rng.gen_range(2..=50);
        let each = (value - fee) / outputs as u64;
        let mut tx = Transaction {
            version: Version::TWO,
            lock_time: LockTime::ZERO,
            input: (inputs.iter())
                .map(|op| TxIn {
                    previous_output: *op,
                    script_sig: ScriptBuf::new(),
                    sequence: Sequence::ENABLE_RBF_NO_LOCKTIME,
                    witness: Witness::new(),
                })
                .collect(),
            output: (0..outputs)
                .map(|_| TxOut {
                    value: Amount::from_sat(each),
                    script_pubkey: self.script.clone(),
                })
                .collect(),
        };
        self.sign(&mut tx);
        let txid = tx.compute_txid();
        let ops: Vec<OutPoint> = (0..outputs as u32)
            .map(|v| OutPoint::new(txid, v))
            .collect();
        for (op, out) in ops.iter().zip(&tx.output) {
            self.outputs.insert(*op, out.clone());
        }
        self.txs.push(bitcoin::consensus::serialize(&tx));
        ops
    }

    fn sign(&self, tx: &mut Transaction) {
        let public = CompressedPublicKey(self.key.public_key(&self.secp));
        let unsigned = tx.clone();
        let mut cache = SighashCache::new(&unsigned);
        for (i, input) in tx.input.iter_mut().enumerate() {
            let value = self.outputs[&input.previous_output].value;
            let hash = cache
                .p2wpkh_signature_hash(i, &self.script, value, EcdsaSighashType::All)
                .expect("a sighash");
            let message = Message::from_digest(hash.to_byte_array());
            let sig =
                bitcoin::ecdsa::Signature::sighash_all(self.secp.sign_ecdsa(&message, &self.key));
            input.witness = Witness::p2wpkh(&sig, &public.0);
        }
    }

    /// One cluster of the mix, by `kind`.
    fn cluster(&mut self, kind: usize) {
        match kind {
            0..=3 => {
                let coin = self.coin();
                self.pay(&[coin], 2);
            }
            4 | 5 => {
                let mut from = self.coin();
                for _ in 0..self.rng.gen_range(2..=20) {
                    from = self.pay(&[from], 1)[0];
                }
            }
            6 | 7 => {
                let coin = self.coin();
                for out in self.pay(&[coin], 8) {
                    self.pay(&[out], 1);
                }
            }
            8 => {
                let (a, b) = (self.coin(), self.coin());
                let left = self.pay(&[a], 1)[0];
                let right = self.pay(&[b], 1)[0];
                self.pay(&[left, right], 1);
            }
            _ => {
                let coin = self.coin();
                let mut before = self.pay(&[coin], 2);
                let mut last = self.pay(&[before[0]], 2);
                for _ in 0..8 {
                    let next = self.pay(&[before[1], last[0]], 2);
                    before = last;
                    last = next;
                }
            }
        }
    }
}

/// The transactions in the order they are offered, their virtual size, and the chain.
fn mix() -> (Vec<Vec<u8>>, u64, Chain) {
    let mut maker = Maker::new();
    let mut kind = 0;
    while maker.txs.len() < COUNT {
        maker.cluster(kind % 10);
        kind += 1;
    }
    maker.txs.truncate(COUNT);
    let vsize = (maker.txs.iter())
        .map(|raw| {
            let tx: Transaction = bitcoin::consensus::deserialize(raw).expect("a transaction");
            tx.vsize() as u64
        })
        .sum();
    (maker.txs, vsize, maker.chain)
}

/// Offers every transaction to a fresh pool; how many entered.
fn offer(config: &MempoolConfig, txs: &[Vec<u8>], chain: &Chain) -> usize {
    let pool = Mempool::new(*config);
    txs.iter()
        .filter(|raw| pool.accept_from(raw, chain).is_ok())
        .count()
}

fn acceptance(c: &mut Criterion) {
    let (txs, vsize, chain) = mix();
    let profiles = [
        ("core", MempoolConfig::default()),
        ("knots", MempoolConfig::knots()),
    ];
    let mut group = c.benchmark_group("mempool_acceptance");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    // Half the memory they take in a roomy pool (as Core counts it: `Mempool::memory_usage`).
    let usage = {
        let pool = Mempool::new(MempoolConfig {
            persist: false,
            ..MempoolConfig::default()
        });
        txs.iter()
            .for_each(|raw| drop(pool.accept_from(raw, &chain)));
        pool.memory_usage().0
    };
    for (pool, max_bytes) in [("roomy", 300_000_000), ("full", usage / 2)] {
        for (profile, base) in &profiles {
            let config = MempoolConfig {
                max_bytes,
                persist: false,
                ..*base
            };
            let entered = offer(&config, &txs, &chain);
            eprintln!("{pool}/{profile}: {entered} of {COUNT} entered ({vsize} vB offered)");
            if pool == "roomy" {
                assert_eq!(entered, COUNT, "every transaction enters a roomy pool");
            }
            group.bench_function(format!("{pool}/{profile}"), |b| {
                b.iter_batched(
                    || (),
                    |()| black_box(offer(&config, &txs, &chain)),
                    BatchSize::PerIteration,
                )
            });
        }
    }
    group.finish();
}

criterion_group!(benches, acceptance);
criterion_main!(benches);

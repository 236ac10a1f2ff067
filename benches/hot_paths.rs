//! The Electrum server's per-request hot paths, each beside a baseline in the same group:
//! - a 10,000-entry history's status hash, beside hashing the same bytes in one call (what the
//!   per-entry formatting costs);
//! - a merkle branch for one of 4,000 transactions, beside the `bitcoin` crate computing only
//!   the root of the same leaves;
//! - a 10,000-entry `get_history` answer as JSON text, beside writing the same entries by hand;
//! - history keys encoded and decoded, beside copying the same bytes;
//! - a `cp_height` proof at height 100,000 from cached subtree roots, beside the whole tree of
//!   100,000 header hashes (what it cost before the cache);
//! - the projected blocks of a 100,000-transaction mempool (Core's block assembler), and of one
//!   made of chains of 25 each spending all before it, beside sorting the same transactions by
//!   their own fee rate (what the estimates read before).

use std::hint::black_box;

use bitcoin::hashes::{sha256, sha256d, Hash};
use bitcoin::Txid;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use cairn::electrum::history_text;
use cairn::mempool::projection::{self, Node};
use cairn::store::schema::HistoryKey;
use cairn::types::{HistoryEntry, ScriptHash, TxNum};
use cairn::view::{merkle, status};

fn history(n: usize) -> Vec<HistoryEntry> {
    (0..n)
        .map(|i| {
            let txid = Txid::from_byte_array(sha256d::Hash::hash(&i.to_le_bytes()).to_byte_array());
            HistoryEntry::confirmed(txid, 100 + i as u32 / 3)
        })
        .collect()
}

fn status_hash(c: &mut Criterion) {
    let h = history(10_000);
    let joined: String = h
        .iter()
        .map(|e| format!("{}:{}:", e.txid, e.height.electrum()))
        .collect();
    let mut group = c.benchmark_group("status of a 10k-entry history");
    group.throughput(Throughput::Elements(10_000));
    group.bench_function("cairn status()", |b| {
        b.iter(|| {
            black_box(status::status(
                h.iter().map(|e| (&e.txid, e.height.electrum())),
            ))
        })
    });
    group.bench_function("baseline: sha256 of the preformatted string", |b| {
        b.iter(|| black_box(sha256::Hash::hash(joined.as_bytes())))
    });
    group.finish();
}

fn merkle_branch(c: &mut Criterion) {
    let leaves: Vec<[u8; 32]> = (0..4000u32)
        .map(|i| sha256d::Hash::hash(&i.to_le_bytes()).to_byte_array())
        .collect();
    let txids: Vec<Txid> = leaves.iter().map(|l| Txid::from_byte_array(*l)).collect();
    let mut group = c.benchmark_group("merkle, 4000 transactions");
    group.bench_function("cairn branch_and_root (branch for position 1234)", |b| {
        b.iter(|| black_box(merkle::branch_and_root(&leaves, 1234)))
    });
    group.bench_function("baseline: bitcoin crate, root only", |b| {
        b.iter(|| black_box(bitcoin::merkle_tree::calculate_root(txids.iter().copied())))
    });
    group.finish();
}

fn history_to_json(c: &mut Criterion) {
    let h = history(10_000);
    let mut group = c.benchmark_group("get_history answer, 10k entries");
    group.throughput(Throughput::Elements(10_000));
    group.bench_function("cairn history_text", |b| {
        b.iter(|| black_box(history_text(&h)))
    });
    group.bench_function("baseline: serde_json::Value tree, then to_string (cairn before)", |b| {
        b.iter(|| {
            let v = serde_json::Value::Array(
                h.iter()
                    .map(|e| serde_json::json!({"height": e.height.electrum(), "tx_hash": e.txid.to_string()}))
                    .collect(),
            );
            black_box(v.to_string())
        })
    });
    group.bench_function("baseline: format! per entry", |b| {
        b.iter(|| {
            let mut out = String::with_capacity(h.len() * 90);
            out.push('[');
            for (i, e) in h.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let (t, height) = (e.txid, e.height.electrum());
                out.push_str(&format!("{{\"height\":{height},\"tx_hash\":\"{t}\"}}"));
            }
            out.push(']');
            black_box(out)
        })
    });
    group.finish();
}

fn key_encoding(c: &mut Criterion) {
    let sh = ScriptHash::of(bitcoin::Script::from_bytes(&[0x51]));
    let mut group = c.benchmark_group("history keys, 100k");
    group.throughput(Throughput::Elements(100_000));
    group.bench_function("cairn HistoryKey encode + decode", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for i in 0..100_000u64 {
                let key = HistoryKey::encode(&sh, TxNum(i));
                sum = sum.wrapping_add(HistoryKey::decode(&key).map(|t| t.0).unwrap_or(0));
            }
            black_box(sum)
        })
    });
    group.bench_function("baseline: copy 17 bytes and read 5 back", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for i in 0..100_000u64 {
                let mut key = [0u8; 17];
                key[..12].copy_from_slice(&sh.0[..12]);
                key[12..].copy_from_slice(&i.to_be_bytes()[3..]);
                let mut n = [0u8; 8];
                n[3..].copy_from_slice(&key[12..]);
                sum = sum.wrapping_add(u64::from_be_bytes(black_box(n)));
            }
            black_box(sum)
        })
    });
    group.finish();
}

/// 100,000 transactions of 140 to 2,100 vB at 1 to 200 sat/vB, a third of them children of
/// one of the 20 transactions before them that has no parent (chains within the mempool's
/// limits, as a real one).
fn mempool_nodes() -> Vec<Node> {
    (0..100_000u32)
        .map(|i| {
            let mix = i.wrapping_mul(2_654_435_761);
            let vsize = 140 + u64::from(mix % 1_960);
            let rate = 1 + u64::from(mix >> 8) % 200;
            let parents = match (i % 3, i) {
                (0, 20..) => match i - 1 - (mix >> 16) % 20 {
                    p if p % 3 == 0 => vec![p - 1],
                    p => vec![p],
                },
                _ => Vec::new(),
            };
            Node {
                txid: Txid::from_byte_array(sha256d::Hash::hash(&i.to_le_bytes()).to_byte_array()),
                fee: rate * vsize,
                vsize,
                weight: vsize * 4,
                sigops: 4,
                parents,
            }
        })
        .collect()
}

/// 100,000 transactions in groups of 25, each spending every one before it in its group (the
/// most ancestors the mempool's limits allow, every one shared).
fn dense_chains() -> Vec<Node> {
    let mut nodes = mempool_nodes();
    for (i, node) in nodes.iter_mut().enumerate() {
        let first = i - i % 25;
        node.parents = (first as u32..i as u32).collect();
    }
    nodes
}

fn fee_projection(c: &mut Criterion) {
    let nodes = mempool_nodes();
    let dense = dense_chains();
    let mut group = c.benchmark_group("projected blocks of a 100k-transaction mempool");
    group.sample_size(10);
    group.bench_function("cairn projection::project, every block", |b| {
        b.iter(|| black_box(projection::project(&nodes, 1000, 1008)))
    });
    group.bench_function(
        "cairn projection::project, chains of 25 spending all before",
        |b| b.iter(|| black_box(projection::project(&dense, 1000, 1008))),
    );
    group.bench_function(
        "baseline: sort by own fee rate (the estimates before)",
        |b| {
            b.iter(|| {
                let mut rates: Vec<(f64, u64)> = nodes
                    .iter()
                    .map(|n| (n.fee as f64 / n.vsize as f64, n.vsize))
                    .collect();
                rates.sort_by(|a, b| b.0.total_cmp(&a.0));
                black_box(rates)
            })
        },
    );
    group.finish();
}

fn checkpoint_proof(c: &mut Criterion) {
    let n = 100_000usize;
    let leaves: Vec<[u8; 32]> = (0..n as u32)
        .map(|i| sha256d::Hash::hash(&i.to_le_bytes()).to_byte_array())
        .collect();
    let roots = merkle::HeaderRoots::default();
    let _warm = roots.branch_and_root(n, 0, merkle::CHUNK_LEVELS, |i| leaves[i]);
    let mut group = c.benchmark_group("cp_height proof over 100k headers");
    group.bench_function("cairn: cached 1,024-header subtree roots", |b| {
        b.iter(|| black_box(roots.branch_and_root(n, 61_234, merkle::CHUNK_LEVELS, |i| leaves[i])))
    });
    group.bench_function("baseline: the whole tree", |b| {
        b.iter(|| black_box(merkle::branch_and_root(&leaves, 61_234)))
    });
    group.finish();
}

criterion_group!(
    benches,
    status_hash,
    merkle_branch,
    history_to_json,
    key_encoding,
    checkpoint_proof,
    fee_projection
);
criterion_main!(benches);

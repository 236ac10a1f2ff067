//! BIP158 filter building against the rest of a block's index preparation: how much of the
//! indexer's per-block work (decode, script hashes, outputs and inputs, filter) the filter is.
//! Both run over the same 40 blocks of 53 transactions (generated, validated by the kernel,
//! read back with their undo data), side by side in one group.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use cairn::generate::{ChainGenerator, GenerateOptions};
use cairn::index::{filters, rows};
use cairn::kernel::{BlockUndo, Validator, ValidatorConfig};
use cairn::types::Network;

/// Blocks 101..=140 of a generated chain (the first 100 only mature coinbases), as the
/// indexer gets them: raw bytes, decoded block, undo data.
fn workload(dir: &std::path::Path) -> Vec<(u32, Vec<u8>, bitcoin::Block, BlockUndo)> {
    let config = ValidatorConfig {
        network: Network::Regtest,
        signet_challenge: None,
        kernel_dir: dir.join("kernel"),
        blocks_dir: dir.join("kernel/blocks"),
        script_threads: 0,
    };
    let (validator, _events) = Validator::open(&config).expect("validator");
    let mut gen = ChainGenerator::new(GenerateOptions {
        blocks: 140,
        txs_per_block: 53,
        seed: 6,
    });
    for _ in 0..140 {
        let block = gen.next_block().expect("block");
        validator
            .submit_block(&bitcoin::consensus::serialize(&block))
            .expect("valid block");
    }
    (101..=140)
        .map(|h| {
            let (raw, undo) = validator.read_block_with_undo(h).expect("read");
            let block = bitcoin::consensus::deserialize(&raw).expect("decode");
            (h as u32, raw, block, undo)
        })
        .collect()
}

fn filter_vs_prepare(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let blocks = workload(tmp.path());
    let txs: u64 = blocks.iter().map(|b| b.2.txdata.len() as u64).sum();
    let mut group = c.benchmark_group("index a block");
    group.throughput(Throughput::Elements(blocks.len() as u64));
    group.bench_function(
        format!("prepare: all rows and the filter, 40 blocks, {txs} txs (blocks/s)"),
        |b| {
            b.iter(|| {
                for (h, raw, _, undo) in &blocks {
                    let extras = rows::Extras {
                        filter: true,
                        tweaks: false,
                    };
                    std::hint::black_box(rows::prepare(*h, raw, undo, extras).expect("prepare"));
                }
            })
        },
    );
    group.bench_function("basic_filter alone, same blocks (blocks/s)", |b| {
        b.iter(|| {
            for (_, _, block, undo) in &blocks {
                std::hint::black_box(filters::basic_filter(block, undo).expect("filter"));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, filter_vs_prepare);
criterion_main!(benches);

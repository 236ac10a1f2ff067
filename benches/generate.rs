//! The chain generator and block-file scanning: the cost of producing and reading the workload
//! every other benchmark uses.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use cairn::generate::{ChainGenerator, GenerateOptions};
use cairn::import::BlkDir;
use cairn::types::Network;

fn generate_blocks(c: &mut Criterion) {
    let mut group = c.benchmark_group("generate");
    group.sample_size(10);
    // 120 blocks: 100 of coinbases only, then 20 with 50 signed transactions each.
    group.throughput(Throughput::Elements(20 * 50));
    group.bench_function("120 blocks, 50 txs per block (txs/s)", |b| {
        b.iter(|| {
            let mut gen = ChainGenerator::new(GenerateOptions {
                blocks: 120,
                txs_per_block: 50,
                seed: 3,
            });
            for _ in 0..120 {
                std::hint::black_box(gen.next_block().expect("block"));
            }
        })
    });
    group.finish();
}

fn scan_blk_files(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let summary = ChainGenerator::new(GenerateOptions {
        blocks: 300,
        txs_per_block: 50,
        seed: 4,
    })
    .write_to(tmp.path())
    .expect("generate");
    let dir = BlkDir::open(
        &tmp.path().join("blocks"),
        Network::Regtest.magic(),
        "regtest",
    )
    .expect("blk dir");
    let mut group = c.benchmark_group("blk");
    group.throughput(Throughput::Bytes(summary.bytes));
    group.bench_function("scan 300 generated blocks", |b| {
        b.iter(|| {
            let scan = dir.scan_file(0).expect("scan");
            std::hint::black_box((scan.data.len(), scan.blocks.len()))
        })
    });
    group.finish();
}

criterion_group!(benches, generate_blocks, scan_blk_files);
criterion_main!(benches);

//! What Core 31's cluster mempool adds to cairn's: linearizing a cluster and cutting it into
//! chunks (`cairn::mempool::linearize`), which every replacement's fee-rate diagram and every
//! projection of the next blocks pays per cluster, by cluster size up to Core's 64, for
//! - a chain (each transaction spends the one before): the cheapest shape;
//! - a dense cluster (each transaction spends up to four of the five before it): the dearest
//!   for an ancestor-set linearization;
//!
//! and comparing two diagrams of 100 such chunks (a replacement touching 100 clusters, Core's
//! most). Read as ratios: each size against the 2-transaction cluster of its shape.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};

use cairn::mempool::linearize::{chunks, compare_diagrams, linearize, FeeFrac, Node};

/// A cluster of `n` transactions: parents among the `reach` before each, fees varying.
fn cluster(n: usize, reach: usize) -> Vec<Node> {
    (0..n)
        .map(|i| Node {
            feerate: FeeFrac::new(
                1_000 + (i as u64 * 7_919) % 50_000,
                400 + (i as u64 * 31) % 4_000,
            ),
            parents: (i.saturating_sub(reach)..i).collect(),
        })
        .collect()
}

fn linearization(c: &mut Criterion) {
    let mut group = c.benchmark_group("linearize_and_chunk");
    for (shape, reach) in [("chain", 1), ("dense", 4)] {
        for n in [2, 8, 16, 32, 64] {
            let nodes = cluster(n, reach);
            group.bench_function(format!("{shape}/{n}"), |b| {
                b.iter(|| {
                    let order = linearize(black_box(&nodes));
                    chunks(&nodes, &order)
                })
            });
        }
    }
    group.finish();
}

fn diagrams(c: &mut Criterion) {
    let nodes = cluster(64, 4);
    let mut old: Vec<FeeFrac> = (0..100)
        .flat_map(|_| chunks(&nodes, &linearize(&nodes)))
        .collect();
    old.sort_by(|a, b| b.rate_cmp(a));
    let mut new = old.clone();
    new[0] = new[0].plus(FeeFrac::new(1, 0));
    c.bench_function("compare_diagrams/100_clusters_of_64", |b| {
        b.iter(|| compare_diagrams(black_box(&new), black_box(&old)))
    });
}

criterion_group!(benches, linearization, diagrams);
criterion_main!(benches);

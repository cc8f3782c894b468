//! Per-stage benchmarks of the CPU reference, throughput in voxels.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gpu_waterz_core::synthetic::{cell_affinities, cell_labels};
use gpu_waterz_core::{AffinityGraph, Arithmetic, ScoringFunction, WatershedParams};
use gpu_waterz_graph::{region_graph, DenseLabels};
use gpu_waterz_parhac::IterativeMerging;

fn cpu_reference(c: &mut Criterion) {
    let n = 64;
    let affs = cell_affinities(1, &cell_labels(1, (n, n, n), 64), 0.3);
    let graph_in = AffinityGraph::from_f32(affs.view()).unwrap();
    let params = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };
    let fragments = gpu_waterz_watershed::watershed(&graph_in, params);
    let labels = DenseLabels::new(fragments.labels.view());
    let rg = region_graph(&graph_in, fragments.labels.view(), labels.n_nodes());

    let mut group = c.benchmark_group("cpu-reference");
    group.sample_size(10);
    group.throughput(Throughput::Elements((n * n * n) as u64));
    group.bench_function("watershed/64^3", |b| b.iter(|| gpu_waterz_watershed::watershed(&graph_in, params)));
    group.bench_function("region-graph/64^3", |b| {
        b.iter(|| region_graph(&graph_in, fragments.labels.view(), labels.n_nodes()))
    });
    group.bench_function("merge-0.1-0.9/64^3", |b| {
        b.iter(|| {
            let mut m = IterativeMerging::new(&rg, ScoringFunction::MeanAffinity, Arithmetic::Waterz, 0).unwrap();
            for t in [0.1f32, 0.3, 0.5, 0.7, 0.9] {
                m.merge_until(t, None);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, cpu_reference);
criterion_main!(benches);

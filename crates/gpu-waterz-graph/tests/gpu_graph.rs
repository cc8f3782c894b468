//! The GPU region graph against the reference in exact arithmetic: the
//! same edges in the same order, the same integer statistics, every rerun.

use gpu_waterz_core::synthetic::{cell_affinities, cell_labels, quantized_affinities, random_affinities, SplitMix64};
use gpu_waterz_core::AffinityGraph;
use gpu_waterz_graph::{gpu, region_graph};
use gpu_waterz_runtime::testing::gpu_or_skip;
use gpu_waterz_runtime::{DeviceAffinities, Gpu};
use ndarray::{Array3, Array4};

fn check(g: &Gpu, affs: &Array4<f32>, labels: &Array3<u32>, what: &str) {
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let labels64 = labels.mapv(u64::from);
    let max_label = labels64.iter().copied().max().unwrap_or(0);
    let expected = region_graph(&graph, labels64.view(), max_label + 1);
    let device_affs = DeviceAffinities::upload_f32(g, affs.as_slice().unwrap(), graph.dims()).unwrap();
    let device_labels = g.upload(labels.as_slice().unwrap()).unwrap();
    let first = gpu::region_graph(g, &device_affs, &device_labels, max_label).unwrap().download(g).unwrap();
    assert_eq!(first.edges, expected.edges, "{what}: edges");
    assert_eq!(first.stats, expected.contact_stats(), "{what}: statistics");
    for _ in 0..4 {
        let again = gpu::region_graph(g, &device_affs, &device_labels, max_label).unwrap().download(g).unwrap();
        assert_eq!(again, first, "{what}: rerun");
    }
}

#[test]
fn random_labels_and_affinities() {
    let Some(g) = gpu_or_skip("random_labels_and_affinities") else {
        return;
    };
    for seed in 0..20u64 {
        let shape = (1 + (seed % 5) as usize, 1 + (seed * 3 % 9) as usize, 1 + (seed * 7 % 10) as usize);
        let mut rng = SplitMix64::new(seed);
        let n_labels = 1 + seed * 13;
        let labels = Array3::from_shape_simple_fn(shape, || rng.below(n_labels + 1) as u32);
        check(&g, &random_affinities(seed, shape), &labels, &format!("random seed {seed}"));
    }
}

#[test]
fn cells_with_many_and_large_labels() {
    let Some(g) = gpu_or_skip("cells_with_many_and_large_labels") else {
        return;
    };
    let labels = cell_labels(1, (32, 64, 64), 300);
    check(&g, &cell_affinities(1, &labels, 0.2), &labels, "cells");
    // Labels up to 2^31 exercise every digit of the sort.
    let big = labels.mapv(|l| l.wrapping_mul(7_158_269) % (1 << 31) + 1);
    check(&g, &quantized_affinities(2, (32, 64, 64), 255), &big, "large labels");
}

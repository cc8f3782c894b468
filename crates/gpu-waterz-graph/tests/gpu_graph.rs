//! The GPU region graph against the reference in exact arithmetic: the
//! same edges in the same order, the same integer statistics, every rerun;
//! and malformed edge lists rejected before anything reaches the device.

use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_core::synthetic::{cell_affinities, cell_labels, quantized_affinities, random_affinities, SplitMix64};
use gpu_waterz_core::{AffinityGraph, ContactStats};
use gpu_waterz_graph::gpu::DeviceEdges;
use gpu_waterz_graph::{gpu, region_graph, GraphError};
use gpu_waterz_runtime::testing::gpu;
use gpu_waterz_runtime::Gpu;
use gpu_waterz_watershed::gpu::{DeviceAffinities, DeviceFragments};
use ndarray::{Array3, Array4};

fn check(g: &Gpu, affs: &Array4<f32>, labels: &Array3<u32>, what: &str) {
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let labels64 = labels.mapv(u64::from);
    let max_label = labels64.iter().copied().max().unwrap_or(0);
    let expected = region_graph(&graph, labels64.view(), max_label + 1);
    let device_affs = DeviceAffinities::upload_f32(g, affs.as_slice().unwrap(), graph.dims()).unwrap();
    let device_labels = g.upload(labels.as_slice().unwrap()).unwrap();
    let fragments = DeviceFragments::from_labels(g, device_labels, graph.dims(), max_label).unwrap();
    let edges = gpu::region_graph(g, &device_affs, &fragments).unwrap();
    assert_eq!(edges.n_nodes(), max_label + 1, "{what}: nodes");
    let first = edges.download(g).unwrap();
    assert_eq!(first.edges, expected.edges, "{what}: edges");
    assert_eq!(first.stats, expected.contact_stats(), "{what}: statistics");
    for _ in 0..4 {
        let again = gpu::region_graph(g, &device_affs, &fragments).unwrap().download(g).unwrap();
        assert_eq!(again, first, "{what}: rerun");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn random_labels_and_affinities() {
    let g = gpu();
    for seed in 0..20u64 {
        let shape = (1 + (seed % 5) as usize, 1 + (seed * 3 % 9) as usize, 1 + (seed * 7 % 10) as usize);
        let mut rng = SplitMix64::new(seed);
        let n_labels = 1 + seed * 13;
        let labels = Array3::from_shape_simple_fn(shape, || rng.below(n_labels + 1) as u32);
        check(&g, &random_affinities(seed, shape), &labels, &format!("random seed {seed}"));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn cells_with_many_and_large_labels() {
    let g = gpu();
    let labels = cell_labels(1, (32, 64, 64), 300);
    check(&g, &cell_affinities(1, &labels, 0.2), &labels, "cells");
    // Labels up to 2^31 exercise every digit of the sort.
    let big = labels.mapv(|l| l.wrapping_mul(7_158_269) % (1 << 31) + 1);
    check(&g, &quantized_affinities(2, (32, 64, 64), 255), &big, "large labels");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn large_tile_sums_full_tables_and_a_second_launch() {
    let g = gpu();
    let shape = (16, 32, 64);
    let entries = |affs: &Array4<f32>, labels: &Array3<u32>| {
        let dims = gpu_waterz_abi::Dims3::new(shape.0 as u64, shape.1 as u64, shape.2 as u64);
        let device_affs = DeviceAffinities::upload_f32(&g, affs.as_slice().unwrap(), dims).unwrap();
        let max_label = labels.iter().copied().max().unwrap() as u64;
        let device_labels = g.upload(labels.as_slice().unwrap()).unwrap();
        let fragments = DeviceFragments::from_labels(&g, device_labels, dims, max_label).unwrap();
        gpu::region_graph(&g, &device_affs, &fragments).unwrap().n_entries()
    };
    // Labels 1 and 2 alternate, so every face is one pair, at affinity 1:
    // each tile's one table slot sums 12,288 faces, beyond the packed sum's
    // bits, and is split into entries whose sums fit.
    let alternating = Array3::from_shape_fn(shape, |(z, y, x)| 1 + ((z + y + x) % 2) as u32);
    let ones = Array4::from_elem((3, shape.0, shape.1, shape.2), 1.0f32);
    check(&g, &ones, &alternating, "alternating labels");
    let tiles = 8;
    assert!(entries(&ones, &alternating) > 10 * tiles, "the sums are split");
    // One label per voxel: each tile meets about 12,000 pairs, so its table
    // fills and the rest of its faces become entries of their own; they
    // are more than the first launch makes room for (n / 16 + 4,096).
    let distinct = Array3::from_shape_fn(shape, |(z, y, x)| (1 + (z * shape.1 + y) * shape.2 + x) as u32);
    let affs = random_affinities(5, shape);
    check(&g, &affs, &distinct, "one label per voxel");
    let n = (shape.0 * shape.1 * shape.2) as u64;
    assert!(entries(&affs, &distinct) > n / 16 + 4096, "a second launch");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn edge_lists_round_trip_and_malformed_ones_are_rejected() {
    let g = gpu();
    let stats = |n: usize| vec![ContactStats { contact_count: 2, affinity_sum: 3 << 31 }; n];
    let edges = [[1, 2], [1, 4], [3, 4]];
    let uploaded = DeviceEdges::upload(&g, &edges, &stats(3), 5).unwrap();
    assert_eq!((uploaded.n_edges(), uploaded.n_nodes()), (3, 5));
    let host = uploaded.download(&g).unwrap();
    assert_eq!((host.edges.as_slice(), host.stats.as_slice()), (&edges[..], &stats(3)[..]));
    let copy = uploaded.duplicate(&g).unwrap();
    assert_eq!(copy.download(&g).unwrap(), host);
    // Through the device: the same keys are accepted, for enough nodes.
    let (keys, counts, sums) = copy.into_buffers();
    let again = DeviceEdges::from_device(&g, keys, counts, sums, 3, 5).unwrap();
    assert_eq!(again.download(&g).unwrap(), host);
    let invalid = |r: Result<DeviceEdges, GraphError>| matches!(r, Err(GraphError::InvalidGraph(_)));
    // An endpoint at or above the node count, a self-loop, a repeated edge,
    // mismatched statistics.
    assert!(invalid(DeviceEdges::upload(&g, &edges, &stats(3), 4)));
    assert!(invalid(DeviceEdges::upload(&g, &[[2, 2]], &stats(1), 5)));
    assert!(invalid(DeviceEdges::upload(&g, &[[1, 2], [1, 2]], &stats(2), 5)));
    assert!(invalid(DeviceEdges::upload(&g, &edges, &stats(2), 5)));
    // Keys on the device are checked too: node 4 is not below 4 nodes, and
    // short buffers are refused.
    let (keys, counts, _) = uploaded.into_buffers();
    let short = g.upload(&[0u64]).unwrap();
    assert!(invalid(DeviceEdges::from_device(&g, keys, counts, short, 3, 5)));
    let keys = g.upload(&[EdgeKey::new(1, 2).bits(), EdgeKey::new(3, 4).bits()]).unwrap();
    let (counts, sums) = (g.upload(&[1u64, 1]).unwrap(), g.upload(&[0u64, 0]).unwrap());
    assert!(invalid(DeviceEdges::from_device(&g, keys, counts, sums, 2, 4)));
}

/// Parts of entries summed on the device equal their sum on the host (a
/// map from each edge to its added counts and sums), edge for edge, in
/// waterz's order: random parts of ascending keys over a few nodes (many
/// repeats across parts) and over many (few), large sums included, empty
/// parts and no parts; `None` where the parts' largest counts add up to
/// 2^32 or their largest sums to 2^64; malformed parts rejected before
/// anything reaches the device.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn summed_parts_equal_the_hosts_sum() {
    use gpu_waterz_graph::gpu::EdgeEntries;
    use std::collections::BTreeMap;
    let g = gpu();
    let mut rng = SplitMix64::new(41);
    for (n_nodes, n_parts, per_part) in
        [(2u64, 3usize, 1usize), (9, 40, 20), (1000, 64, 5_000), (3_000_000, 16, 200_000), (50, 0, 0)]
    {
        let mut want: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut columns: Vec<(Vec<u64>, Vec<u64>, Vec<u64>)> = Vec::new();
        for p in 0..n_parts {
            let mut keys: Vec<u64> = (0..if p % 7 == 3 { 0 } else { per_part })
                .map(|_| {
                    let u = rng.next_u64() % (n_nodes - 1);
                    let v = u + 1 + rng.next_u64() % (n_nodes - 1 - u);
                    EdgeKey::new(u, v).bits()
                })
                .collect();
            keys.sort_unstable();
            keys.dedup();
            let counts: Vec<u64> = keys.iter().map(|_| 1 + rng.next_u64() % 1000).collect();
            let sums: Vec<u64> = counts.iter().map(|&c| rng.next_u64() % (c << 32)).collect();
            for ((&k, &c), &s) in keys.iter().zip(&counts).zip(&sums) {
                let e = want.entry(k).or_default();
                *e = (e.0 + c, e.1 + s);
            }
            columns.push((keys, counts, sums));
        }
        let parts: Vec<EdgeEntries<'_>> =
            columns.iter().map(|(keys, counts, sums)| EdgeEntries { keys, counts, sums }).collect();
        let summed = DeviceEdges::sum_parts(&g, &parts, n_nodes).unwrap().expect("counts far below 2^32");
        assert_eq!((summed.n_edges(), summed.n_nodes()), (want.len() as u64, n_nodes));
        let host = summed.download(&g).unwrap();
        let edges: Vec<[u64; 2]> = want.keys().map(|&k| EdgeKey::from_bits(k).endpoints()).collect();
        let stats: Vec<ContactStats> =
            want.values().map(|&(contact_count, affinity_sum)| ContactStats { contact_count, affinity_sum }).collect();
        assert_eq!(host.edges, edges, "{n_parts} parts over {n_nodes} nodes");
        assert_eq!(host.stats, stats, "{n_parts} parts over {n_nodes} nodes");
    }
    let key = |u, v| EdgeKey::new(u, v).bits();
    let (keys, big) = ([key(1, 2), key(1, 3)], [1u64 << 31, 1]);
    let part = EdgeEntries { keys: &keys, counts: &big, sums: &[0, 0] };
    assert!(DeviceEdges::sum_parts(&g, &[part, part], 4).unwrap().is_none(), "2^31 + 2^31 faces may overflow");
    assert!(DeviceEdges::sum_parts(&g, &[part], 4).unwrap().is_some());
    let (few, half) = ([1u64, 1], [1u64 << 63, 5]);
    let heavy = EdgeEntries { keys: &keys, counts: &few, sums: &half };
    assert!(DeviceEdges::sum_parts(&g, &[heavy, heavy], 4).unwrap().is_none(), "2^63 + 2^63 would wrap");
    let invalid =
        |parts: &[EdgeEntries<'_>], n| matches!(DeviceEdges::sum_parts(&g, parts, n), Err(GraphError::InvalidGraph(_)));
    let ones = [1u64, 1];
    assert!(invalid(&[EdgeEntries { keys: &[key(1, 3), key(1, 2)], counts: &ones, sums: &ones }], 4), "descending");
    assert!(invalid(&[EdgeEntries { keys: &[key(1, 2), key(1, 2)], counts: &ones, sums: &ones }], 4), "repeated");
    assert!(invalid(&[EdgeEntries { keys: &[key(2, 2)], counts: &[1], sums: &[1] }], 4), "a self-loop");
    assert!(invalid(&[EdgeEntries { keys: &[key(1, 4)], counts: &[1], sums: &[1] }], 4), "node 4 of 4");
    assert!(invalid(&[EdgeEntries { keys: &keys, counts: &[1], sums: &ones }], 4), "a count short");
}

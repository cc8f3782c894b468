//! The GPU watershed against the reference: the same labels, not only the
//! same partition, on random, quantized (ties), plateau, cell-like and
//! above-`high` volumes; and byte-identical reruns.

use gpu_waterz_core::synthetic::{cell_affinities, cell_labels, quantized_affinities, random_affinities};
use gpu_waterz_core::{AffinityGraph, WatershedParams};
use gpu_waterz_runtime::testing::gpu_or_skip;
use gpu_waterz_runtime::{DeviceAffinities, Gpu};
use gpu_waterz_watershed::{gpu, reference};
use ndarray::Array4;

const PARAMS: WatershedParams = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };

fn check(gpu_ctx: &Gpu, affs: &Array4<f32>, params: WatershedParams, what: &str) {
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let expected = reference::watershed(&graph, params);
    let dims = graph.dims();
    let device = DeviceAffinities::upload_f32(gpu_ctx, affs.as_slice().unwrap(), dims).unwrap();
    let got = gpu::watershed(gpu_ctx, &device, params).unwrap();
    assert_eq!(got.n_fragments, expected.n_fragments, "{what}: fragment count");
    let labels = got.download(gpu_ctx).unwrap();
    if labels != expected.labels {
        let first = labels.iter().zip(expected.labels.iter()).position(|(a, b)| a != b).unwrap();
        panic!(
            "{what}: labels differ first at voxel {first}: gpu {} vs reference {}",
            labels.as_slice().unwrap()[first],
            expected.labels.as_slice().unwrap()[first]
        );
    }
}

#[test]
fn random_float_volumes() {
    let Some(g) = gpu_or_skip("random_float_volumes") else {
        return;
    };
    for seed in 0..40u64 {
        let shape = (1 + (seed % 7) as usize, 1 + (seed * 3 % 11) as usize, 1 + (seed * 5 % 13) as usize);
        check(&g, &random_affinities(seed, shape), PARAMS, &format!("random seed {seed} {shape:?}"));
    }
    check(&g, &random_affinities(99, (64, 64, 64)), PARAMS, "random 64^3");
}

#[test]
fn quantized_volumes_with_ties_and_plateaus() {
    let Some(g) = gpu_or_skip("quantized_volumes_with_ties_and_plateaus") else {
        return;
    };
    for seed in 0..40u64 {
        let levels = [1u32, 2, 3, 5, 255][seed as usize % 5];
        let shape = (1 + (seed % 6) as usize, 2 + (seed * 7 % 12) as usize, 2 + (seed * 3 % 14) as usize);
        check(
            &g,
            &quantized_affinities(seed, shape, levels),
            PARAMS,
            &format!("quantized {levels} seed {seed} {shape:?}"),
        );
    }
    for levels in [1u32, 2, 4, 255] {
        check(&g, &quantized_affinities(7, (32, 48, 48), levels), PARAMS, &format!("quantized {levels} 32x48x48"));
    }
}

#[test]
fn uint8_input_equals_its_float_meaning() {
    let Some(g) = gpu_or_skip("uint8_input_equals_its_float_meaning") else {
        return;
    };
    let q = quantized_affinities(11, (16, 32, 32), 255);
    let k: Vec<u8> = q.iter().map(|&v| (v * 255.0).round() as u8).collect();
    let as_f32 = Array4::from_shape_vec(q.dim(), k.iter().map(|&k| k as f32 / 255.0).collect()).unwrap();
    let graph = AffinityGraph::from_f32(as_f32.view()).unwrap();
    let expected = reference::watershed(&graph, PARAMS);
    let device = DeviceAffinities::upload_u8(&g, &k, graph.dims()).unwrap();
    let got = gpu::watershed(&g, &device, PARAMS).unwrap().download(&g).unwrap();
    assert_eq!(got, expected.labels);
}

#[test]
fn cell_like_and_above_high_volumes() {
    let Some(g) = gpu_or_skip("cell_like_and_above_high_volumes") else {
        return;
    };
    for seed in 0..6u64 {
        let labels = cell_labels(seed, (16, 48, 48), 20);
        check(&g, &cell_affinities(seed, &labels, 0.3), PARAMS, &format!("cells seed {seed}"));
    }
    let mut a = random_affinities(5, (12, 20, 20));
    a.slice_mut(ndarray::s![.., 2..6, 3..15, 3..15]).fill(1.0);
    a.slice_mut(ndarray::s![.., 7.., ..8, ..]).fill(0.99995);
    check(&g, &a, PARAMS, "above high");
    check(&g, &a, WatershedParams { aff_threshold_low: 0.3, aff_threshold_high: 0.6 }, "above high, low 0.3 high 0.6");
    check(&g, &Array4::zeros((3, 4, 5, 6)), PARAMS, "all zero");
    check(&g, &Array4::ones((3, 4, 5, 6)), PARAMS, "all one");
    check(&g, &Array4::ones((3, 1, 1, 1)), PARAMS, "1x1x1");
}

#[test]
fn components_that_span_many_tiles() {
    // The components stage joins tiles of 8 x 8 x 32 voxels in shared
    // memory, then along their faces: plateaus and cells that cross many
    // tiles, and extents that are not multiples of the tile.
    let Some(g) = gpu_or_skip("components_that_span_many_tiles") else {
        return;
    };
    check(&g, &Array4::ones((3, 19, 41, 100)), PARAMS, "one plateau across tiles");
    let labels = cell_labels(3, (17, 9, 130), 6);
    check(&g, &cell_affinities(3, &labels, 0.3), PARAMS, "few long cells 17x9x130");
    let labels = cell_labels(4, (40, 70, 70), 12);
    check(&g, &cell_affinities(4, &labels, 0.3), PARAMS, "large cells 40x70x70");
    for levels in [1u32, 2] {
        check(&g, &quantized_affinities(13, (33, 17, 65), levels), PARAMS, &format!("quantized {levels} 33x17x65"));
    }
}

#[test]
fn reruns_are_byte_identical() {
    let Some(g) = gpu_or_skip("reruns_are_byte_identical") else {
        return;
    };
    let a = quantized_affinities(3, (48, 64, 64), 4);
    let graph = AffinityGraph::from_f32(a.view()).unwrap();
    let device = DeviceAffinities::upload_f32(&g, a.as_slice().unwrap(), graph.dims()).unwrap();
    let first = g.download(&gpu::watershed(&g, &device, PARAMS).unwrap().labels).unwrap();
    for _ in 0..4 {
        assert_eq!(g.download(&gpu::watershed(&g, &device, PARAMS).unwrap().labels).unwrap(), first);
    }
}

//! The GPU watershed against the reference: the same labels, not only the
//! same partition, on random, quantized (ties), plateau, cell-like and
//! above-`high` volumes; and byte-identical reruns.

use gpu_waterz_core::synthetic::{cell_affinities, cell_labels, quantized_affinities, random_affinities};
use gpu_waterz_core::{AffinityGraph, WatershedParams};
use gpu_waterz_runtime::testing::gpu;
use gpu_waterz_runtime::Gpu;
use gpu_waterz_watershed::gpu::{DeviceAffinities, DeviceFragments};
use gpu_waterz_watershed::{gpu, reference};
use ndarray::Array4;

const PARAMS: WatershedParams = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };

fn check(gpu_ctx: &Gpu, affs: &Array4<f32>, params: WatershedParams, what: &str) {
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let expected = reference::watershed(&graph, params);
    let dims = graph.dims();
    let device = DeviceAffinities::upload_f32(gpu_ctx, affs.as_slice().unwrap(), dims).unwrap();
    let got = gpu::watershed(gpu_ctx, &device, params).unwrap();
    assert_eq!(got.n_fragments(), expected.n_fragments, "{what}: fragment count");
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
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn random_float_volumes() {
    let g = gpu();
    for seed in 0..40u64 {
        let shape = (1 + (seed % 7) as usize, 1 + (seed * 3 % 11) as usize, 1 + (seed * 5 % 13) as usize);
        check(&g, &random_affinities(seed, shape), PARAMS, &format!("random seed {seed} {shape:?}"));
    }
    check(&g, &random_affinities(99, (64, 64, 64)), PARAMS, "random 64^3");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn quantized_volumes_with_ties_and_plateaus() {
    let g = gpu();
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
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn uint8_input_equals_its_float_meaning() {
    let g = gpu();
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
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn cell_like_and_above_high_volumes() {
    let g = gpu();
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
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn components_that_span_many_tiles() {
    // The components stage joins tiles of 8 x 8 x 32 voxels in shared
    // memory, then along their faces: plateaus and cells that cross many
    // tiles, and extents that are not multiples of the tile.
    let g = gpu();
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
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn reruns_are_byte_identical() {
    let g = gpu();
    let a = quantized_affinities(3, (48, 64, 64), 4);
    let graph = AffinityGraph::from_f32(a.view()).unwrap();
    let device = DeviceAffinities::upload_f32(&g, a.as_slice().unwrap(), graph.dims()).unwrap();
    let first = g.download(gpu::watershed(&g, &device, PARAMS).unwrap().labels()).unwrap();
    for _ in 0..4 {
        assert_eq!(g.download(gpu::watershed(&g, &device, PARAMS).unwrap().labels()).unwrap(), first);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn thresholds_that_mark_outside_faces_are_rejected() {
    // With low >= high, faces outside the volume (which count as low) would
    // be marked and followed out of the volume.
    let g = gpu();
    let a = random_affinities(2, (4, 5, 6));
    let graph = AffinityGraph::from_f32(a.view()).unwrap();
    let device = DeviceAffinities::upload_f32(&g, a.as_slice().unwrap(), graph.dims()).unwrap();
    for (low, high) in [(0.5, 0.5), (0.6, 0.4), (0.0, -1.0)] {
        let params = WatershedParams { aff_threshold_low: low, aff_threshold_high: high };
        let e = gpu::watershed(&g, &device, params).unwrap_err().to_string();
        assert!(e.contains("aff_threshold_low must be smaller"), "{e}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn nan_affinities_never_give_labels_above_the_fragment_count() {
    // A NaN first face makes a voxel background while its neighbours may
    // still point at it; the labels of such components must stay in range.
    let g = gpu();
    let mut a = quantized_affinities(21, (12, 20, 40), 3);
    for (k, v) in a.iter_mut().enumerate() {
        if k % 7 == 0 {
            *v = f32::NAN;
        }
    }
    let graph_dims = gpu_waterz_core::Dims3::new(12, 20, 40);
    let device = DeviceAffinities::upload_f32(&g, a.as_slice().unwrap(), graph_dims).unwrap();
    let fragments = gpu::watershed(&g, &device, PARAMS).unwrap();
    let labels = g.download(fragments.labels()).unwrap();
    let max = labels.iter().copied().max().unwrap() as u64;
    assert!(max <= fragments.n_fragments(), "label {max} above {} fragments", fragments.n_fragments());
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn fragments_from_user_labels_are_checked() {
    let g = gpu();
    let dims = gpu_waterz_core::Dims3::new(2, 3, 4);
    let labels: Vec<u32> = (0..24).map(|i| i % 5).collect();
    let ok = DeviceFragments::from_labels(&g, g.upload(&labels).unwrap(), dims, 4).unwrap();
    assert_eq!((ok.n_fragments(), ok.dims(), ok.plateau_levels()), (4, dims, 0));
    assert_eq!(g.download(&ok.into_labels()).unwrap(), labels);
    let e = DeviceFragments::from_labels(&g, g.upload(&labels).unwrap(), dims, 3).unwrap_err().to_string();
    assert!(e.contains("label 4"), "{e}");
    let e = DeviceFragments::from_labels(&g, g.upload(&labels[..23]).unwrap(), dims, 4).unwrap_err().to_string();
    assert!(e.contains("23 labels"), "{e}");
    // The same fragments as runs: written out per voxel on the device.
    let (starts, run_labels) = ([0u32, 3, 4, 10, 23], [2u32, 0, 4, 1, 3]);
    let want: Vec<u32> = (0..24u32).map(|i| run_labels[starts.partition_point(|&s| s <= i) - 1]).collect();
    let runs = DeviceFragments::from_runs(&g, &starts, &run_labels, dims, 4).unwrap();
    assert_eq!((runs.n_fragments(), runs.dims(), runs.plateau_levels()), (4, dims, 0));
    assert_eq!(g.download(&runs.into_labels()).unwrap(), want);
    let e = DeviceFragments::from_runs(&g, &starts, &run_labels, dims, 3).unwrap_err().to_string();
    assert!(e.contains("run 2 has label 4"), "{e}");
    for (bad_starts, what) in
        [([1u32, 3, 4, 10, 23], "from 1"), ([0, 3, 3, 10, 23], "repeated"), ([0, 3, 4, 10, 24], "past the end")]
    {
        let e = DeviceFragments::from_runs(&g, &bad_starts, &run_labels, dims, 4).unwrap_err().to_string();
        assert!(e.contains("run starts"), "{what}: {e}");
    }
    assert!(DeviceFragments::from_runs(&g, &starts[..4], &run_labels, dims, 4).is_err(), "lists of different lengths");
}

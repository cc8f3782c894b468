//! The GPU contingency table and metrics against the CPU evaluation: the
//! same table entry for entry and the same metrics bit for bit, for small
//! and large (renumbered) ground-truth labels, mapped segment ids, one
//! chunk or many, counted by hash table or (when it overflows) sorted; bad
//! input refused. GPU tests: ignored without
//! `--include-ignored`.

use gpu_waterz_core::synthetic::SplitMix64;
use gpu_waterz_eval::gpu::{contingency_on_gpu, evaluate_on_gpu, DeviceGroundTruth, DEFAULT_CHUNK_VOXELS};
use gpu_waterz_eval::{contingency, metrics_from_table, EvalError};
use gpu_waterz_runtime::testing::gpu;

/// Segment ids below `bound` and ground-truth labels (a third of them 0),
/// from `labels` labels, each shifted by `offset`.
fn volume(seed: u64, n: usize, bound: u64, labels: u64, offset: u64) -> (Vec<u32>, Vec<u64>) {
    let mut rng = SplitMix64::new(seed);
    let seg = (0..n).map(|_| rng.below(bound) as u32).collect();
    let gt = (0..n).map(|_| if rng.below(3) == 0 { 0 } else { offset + 1 + rng.below(labels) }).collect();
    (seg, gt)
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn the_gpu_table_and_metrics_equal_the_cpu_evaluation() {
    let g = gpu();
    let id = |s: u32| 1000 + 7 * s as u64;
    for (seed, n, bound, labels, offset) in [
        (1u64, 1000usize, 5u64, 3u64, 0u64),
        (2, 200_000, 3000, 40, 0),
        (3, 300_000, 70_000, 5000, 1 << 40),
        (4, 1 << 20, 1 << 20, 1 << 16, u32::MAX as u64 - 10),
        // More distinct pairs than the hash tables hold: the sort path.
        (5, 100_000, 10, 1_000_000, 0),
    ] {
        let (seg, gt) = volume(seed, n, bound, labels, offset);
        let mapped: Vec<u64> = seg.iter().map(|&s| id(s)).collect();
        let expected = contingency(&mapped, &gt);
        let device_seg = g.upload(&seg).unwrap();
        let device_gt = DeviceGroundTruth::upload(&g, &gt).unwrap();
        for chunk in [DEFAULT_CHUNK_VOXELS, 4096, 999] {
            let table = contingency_on_gpu(&g, &device_seg, bound, &id, &device_gt, chunk).unwrap();
            assert_eq!(table, expected, "seed {seed}, chunk {chunk}: table");
        }
        let got = evaluate_on_gpu(&g, &device_seg, bound, &id, &device_gt).unwrap();
        let want = metrics_from_table(&expected).unwrap();
        for (a, b) in [
            (got.voi_split, want.voi_split),
            (got.voi_merge, want.voi_merge),
            (got.rand_split, want.rand_split),
            (got.rand_merge, want.rand_merge),
        ] {
            assert_eq!(a.to_bits(), b.to_bits(), "seed {seed}: metrics {got:?} vs {want:?}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn bad_input_is_refused() {
    let g = gpu();
    let id = |s: u32| s as u64;
    let gt = DeviceGroundTruth::upload(&g, &[1, 2, 3, 4]).unwrap();
    // A segmentation shorter than the ground truth.
    let short = g.upload(&[1u32, 2, 3]).unwrap();
    assert!(matches!(evaluate_on_gpu(&g, &short, 10, &id, &gt), Err(EvalError::Gpu(_))));
    // An id outside the bound.
    let wild = g.upload(&[1u32, 2, 3, 40]).unwrap();
    assert!(matches!(evaluate_on_gpu(&g, &wild, 10, &id, &gt), Err(EvalError::Gpu(_))));
    // No labelled voxel.
    let zeros = DeviceGroundTruth::upload(&g, &[0, 0, 0, 0]).unwrap();
    let seg = g.upload(&[1u32, 2, 3, 4]).unwrap();
    assert!(matches!(evaluate_on_gpu(&g, &seg, 10, &id, &zeros), Err(EvalError::NoGroundTruth)));
}

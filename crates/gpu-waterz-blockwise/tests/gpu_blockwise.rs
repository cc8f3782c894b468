//! The steps on the GPU ([`GpuSteps`]) against the CPU's: step 1 block for
//! block (directions, open voxels and their masks), step 3 (components,
//! faces, sizes); and the whole decode against the whole-volume GPU decode
//! (the same fragments and, merged by the same ParHAC, the same
//! segmentations, label for label), on volumes with plateaus that span
//! many blocks, ties, cells and random values.

use gpu_waterz_blockwise::{
    decode, decode_with, settle_open_plateaus, BlockGrid, CpuSteps, DecodeSteps, GpuSteps, OpenVoxels,
};
use gpu_waterz_core::synthetic::{cell_affinities, cell_labels, quantized_affinities, random_affinities};
use gpu_waterz_core::{AffinityGraph, WatershedParams};
use gpu_waterz_runtime::testing::gpu;
use ndarray::{Array4, Slice};

const PARAMS: WatershedParams = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };
const THRESHOLDS: [f64; 3] = [0.1, 0.4, 0.7];

/// Steps 1 to 3 of every block on both, compared; then the whole decode.
fn check(steps: &GpuSteps, affs: &Array4<f32>, block_shape: [u64; 3], what: &str) {
    let s = affs.shape();
    let dims = [s[1] as u64, s[2] as u64, s[3] as u64];
    let grid = BlockGrid::new(dims, block_shape).unwrap();
    let region_of = |steps: &dyn Fn(gpu_waterz_blockwise::Block) -> gpu_waterz_blockwise::Block, b| {
        let r = steps(b);
        affs.slice_each_axis(|axis| match axis.axis.index() {
            0 => Slice::from(..),
            a => Slice::from(r.lo[a - 1] as usize..r.hi[a - 1] as usize),
        })
        .to_owned()
    };
    let mut cpu_plateaus = Vec::new();
    let mut gpu_plateaus = Vec::new();
    for b in 0..grid.len() {
        let block = grid.block(b);
        let cpu_affs = region_of(&|b| CpuSteps.plateau_region(dims, b), block);
        let gpu_affs = region_of(&|b| steps.plateau_region(dims, b), block);
        let want = CpuSteps.local_plateaus(dims, block, cpu_affs.view(), PARAMS).unwrap();
        let got = steps.local_plateaus(dims, block, gpu_affs.view(), PARAMS).unwrap();
        assert_eq!(got.open, want.open, "{what}: block {b} {block:?}: open voxels");
        assert_eq!(got.bits, want.bits, "{what}: block {b} {block:?}: directions");
        cpu_plateaus.push(want);
        gpu_plateaus.push(got);
    }
    let open: Vec<&OpenVoxels> = cpu_plateaus.iter().map(|p| &p.open).collect();
    let settled = settle_open_plateaus(dims, &open).unwrap();
    for (b, (p, settled)) in gpu_plateaus.into_iter().zip(&settled).enumerate() {
        let block = grid.block(b);
        let want = CpuSteps.local_basins(dims, block, p.bits.clone(), &p.open, settled).unwrap();
        let got = steps.local_basins(dims, block, p.bits, &p.open, settled).unwrap();
        assert_eq!(got, want, "{what}: block {b} {block:?}: basins");
    }
    let want = decode(affs.view(), block_shape, PARAMS, &THRESHOLDS).unwrap();
    let got = decode_with(affs.view(), block_shape, PARAMS, &THRESHOLDS, steps).unwrap();
    assert_eq!(got.fragments, want.fragments, "{what}: fragments");
    assert_eq!(got.open_voxels, want.open_voxels, "{what}: open voxels");
    let (fragments, segmentations) = in_core(affs);
    assert_eq!(got.fragments, fragments, "{what}: fragments against the whole-volume GPU decode");
    for (k, (got, want)) in got.segmentations.iter().zip(&segmentations).enumerate() {
        assert_eq!(got, want, "{what}: threshold {} against the whole-volume GPU decode", THRESHOLDS[k]);
    }
}

/// The whole-volume GPU decode: fragments and segmentations.
fn in_core(affs: &Array4<f32>) -> (ndarray::Array3<u64>, Vec<ndarray::Array3<u64>>) {
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let config = gpu_waterz::Config::new(&THRESHOLDS).backend(gpu_waterz::Backend::Gpu(gpu()));
    let mut run = gpu_waterz::Agglomeration::new(&graph, config).unwrap();
    let fragments = run.fragments().unwrap();
    let mut segmentations = Vec::new();
    while let Some(result) = run.next_threshold().unwrap() {
        segmentations.push(result.segmentation);
    }
    (fragments, segmentations)
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn plateaus_across_blocks_on_the_gpu_equal_the_cpu() {
    let steps = GpuSteps::new(gpu()).unwrap();
    for seed in 0..12u64 {
        let levels = 1 + seed as u32 % 3;
        let shape = (2 + (seed % 7) as usize, 3 + (seed * 5 % 11) as usize, 2 + (seed * 3 % 13) as usize);
        let affs = quantized_affinities(seed, shape, levels);
        for block in [[3, 3, 3], [2, 5, 4], [8, 1, 2], [1, 1, 10], [1, 1, 1], [64, 64, 64]] {
            check(&steps, &affs, block, &format!("quantized {levels} seed {seed} {shape:?} blocks {block:?}"));
        }
    }
    // One plateau over the whole volume.
    let affs = Array4::from_elem((3, 7, 9, 8), 0.5f32);
    check(&steps, &affs, [2, 3, 2], "one plateau");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn random_and_cell_volumes_on_the_gpu_equal_the_cpu() {
    let steps = GpuSteps::new(gpu()).unwrap();
    for seed in 0..6u64 {
        let affs = random_affinities(seed, (9, 10, 11));
        for block in [[9, 10, 11], [4, 4, 4], [2, 3, 5], [5, 7, 3]] {
            check(&steps, &affs, block, &format!("random seed {seed} blocks {block:?}"));
        }
        let labels = cell_labels(seed, (12, 20, 16), 12);
        let affs = cell_affinities(seed, &labels, 0.2);
        for block in [[4, 8, 8], [12, 5, 3], [5, 20, 16]] {
            check(&steps, &affs, block, &format!("cells seed {seed} blocks {block:?}"));
        }
    }
    // Larger blocks than the components tiles (8 x 8 x 32), with plateaus.
    for levels in [2u32, 255] {
        let affs = quantized_affinities(5, (40, 70, 90), levels);
        check(&steps, &affs, [17, 33, 64], &format!("quantized {levels} 40x70x90"));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn more_large_blocks_than_threads_take_the_gpu_in_turn() {
    // 27 blocks, more than the host's threads, each region large enough
    // (about 11.6 MB of affinities) to be uploaded through the staging
    // buffers, whose parallel copy lets rayon run other blocks' tasks on a
    // thread that waits: the decode must neither wait forever nor differ.
    let steps = GpuSteps::new(gpu()).unwrap();
    let cells = gpu_waterz_core::generate::ImplicitCells { seed: 3, cell: (16, 24, 24) };
    let params = gpu_waterz_core::generate::GeneratorParams { weak_spots: 0, false_walls: 0, ..Default::default() };
    let shape = (96, 480, 480);
    let (affs, _) = cells.block(&params, shape, (0, 0, 0), shape).unwrap();
    let got = decode_with(affs.view(), [32, 160, 160], PARAMS, &THRESHOLDS, &steps).unwrap();
    let (fragments, segmentations) = in_core(&affs);
    assert_eq!(got.fragments, fragments);
    assert_eq!(got.segmentations, segmentations);
    assert!(steps.peak_device_bytes().is_some_and(|b| b > 0));
}

//! The steps on the GPU ([`GpuSteps`]) against the CPU's: step 1 block for
//! block (directions, open voxels and their masks), step 3 (components,
//! faces, sizes); and the whole decode against the whole-volume GPU decode
//! (the same fragments and, merged by the same ParHAC, the same
//! segmentations, label for label), on volumes with plateaus that span
//! many blocks, ties, cells and random values.

use gpu_waterz_blockwise::{
    decode, decode_blocks_with, decode_with, fragment_ids, lower_layers, settle_open_plateaus, AffinitySource, Block,
    BlockGrid, BlockSink, ComponentRuns, CpuSteps, DecodeSteps, GpuSteps, ImplicitSource, LocalBasinRuns, OpenVoxels,
};
use gpu_waterz_core::generate::{GeneratorParams, ImplicitCells};
use gpu_waterz_core::synthetic::{cell_affinities, cell_labels, quantized_affinities, random_affinities};
use gpu_waterz_core::{AffinityGraph, WatershedParams};
use gpu_waterz_runtime::testing::gpu;
use gpu_waterz_runtime::Gpu;
use gpu_waterz_watershed::gpu::{AffinityBuffer, DeviceAffinities};
use ndarray::{Array3, Array4, ArrayView3, Slice};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

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
        // The runs the GPU encodes (what the driver holds) and the
        // components it downloads whole.
        let runs = steps.local_basin_runs(dims, block, p.bits.clone(), &p.open, settled).unwrap();
        assert_eq!(runs, LocalBasinRuns::from(want.clone()), "{what}: block {b} {block:?}: basins as runs");
        let got = steps.local_basins(dims, block, p.bits, &p.open, settled).unwrap();
        assert_eq!(got, want, "{what}: block {b} {block:?}: basins");
    }
    check_step5(steps, &affs.view(), block_shape, what);
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

/// Step 5 of every block on the CPU and on `steps` (the faces inside
/// counted by the GPU's region graph, those across the lower faces on the
/// host), from the CPU's steps 1 to 4 over `source`: the same pairs.
fn check_step5(steps: &GpuSteps, source: &dyn AffinitySource, block_shape: [u64; 3], what: &str) {
    let dims = source.dims();
    let grid = BlockGrid::new(dims, block_shape).unwrap();
    let plateaus: Vec<_> =
        (0..grid.len()).map(|b| CpuSteps.local_plateaus_from(source, dims, grid.block(b), PARAMS).unwrap()).collect();
    let open: Vec<&OpenVoxels> = plateaus.iter().map(|p| &p.open).collect();
    let settled = settle_open_plateaus(dims, &open).unwrap();
    let basins: Vec<_> = plateaus
        .iter()
        .zip(&settled)
        .enumerate()
        .map(|(b, (p, s))| CpuSteps.local_basins(dims, grid.block(b), p.bits.clone(), &p.open, s).unwrap())
        .collect();
    let summaries: Vec<_> = basins.iter().map(|b| b.summary()).collect();
    let fragments = fragment_ids(&grid, &summaries).unwrap();
    for (b, (basins, ids)) in basins.iter().zip(&fragments.ids).enumerate() {
        let lower = lower_layers(&grid, b, &summaries, &fragments);
        let lower: [Option<&[u64]>; 3] = std::array::from_fn(|a| lower[a].as_deref());
        let block = grid.block(b);
        let components = basins.components.view();
        let want = CpuSteps.block_edges_from(source, dims, block, components, ids, lower).unwrap();
        let got = steps.block_edges_from(source, dims, block, components, ids, lower).unwrap();
        assert_eq!(got, want, "{what}: block {b} {block:?}: region-graph pairs");
        let runs = ComponentRuns::of(components);
        let got = steps.block_edge_runs_from(source, dims, block, &runs, ids, lower).unwrap();
        assert_eq!(got, want, "{what}: block {b} {block:?}: region-graph pairs from runs");
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

/// A generated volume ([`ImplicitSource`], the CLI's `--implicit`) whose
/// reads on the host are counted.
struct Generated {
    source: ImplicitSource,
    host_reads: AtomicUsize,
}

impl AffinitySource for Generated {
    fn dims(&self) -> [u64; 3] {
        self.source.dims()
    }

    fn read(&self, region: Block) -> gpu_waterz_blockwise::Result<Array4<f32>> {
        self.host_reads.fetch_add(1, Ordering::Relaxed);
        self.source.read(region)
    }

    fn makes_on_gpu(&self) -> bool {
        self.source.makes_on_gpu()
    }

    fn read_on_gpu(&self, gpu: &Gpu, region: Block) -> gpu_waterz_blockwise::Result<Option<DeviceAffinities>> {
        self.source.read_on_gpu(gpu, region)
    }
}

/// A block's fragments and segmentations, as written.
type Written = (Block, Array3<u64>, Vec<Array3<u64>>);

/// Every block's arrays, as written.
#[derive(Default)]
struct Collected(Mutex<Vec<Written>>);

impl BlockSink for Collected {
    fn write(
        &self,
        block: Block,
        fragments: ArrayView3<'_, u64>,
        segmentations: &[Array3<u64>],
    ) -> gpu_waterz_blockwise::Result<()> {
        self.0.lock().unwrap().push((block, fragments.to_owned(), segmentations.to_vec()));
        Ok(())
    }
}

fn download(gpu: &Gpu, affs: &DeviceAffinities) -> Vec<f32> {
    match affs.data() {
        AffinityBuffer::F32(values) => gpu.download(values).unwrap(),
        _ => panic!("the generator makes float32"),
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn generated_volumes_made_on_the_gpu_equal_the_hosts() {
    let gpu = gpu();
    let plain = GeneratorParams { weak_spots: 0, false_walls: 0, ..Default::default() };
    let wide = GeneratorParams { seed: 7, membrane_half_width: 3, blur_passes: 2, noise: 0.8, ..plain.clone() };
    for (cells, params, volume) in [
        (ImplicitCells { seed: 4, cell: (12, 6, 6) }, plain.clone(), (30, 25, 27)),
        (ImplicitCells { seed: 5, cell: (5, 9, 7) }, wide, (23, 31, 40)),
        (ImplicitCells::new(2), plain.clone(), (70, 90, 110)),
    ] {
        let dims = [volume.0 as u64, volume.1 as u64, volume.2 as u64];
        let grid = BlockGrid::new(dims, [11, 13, 17]).unwrap();
        let whole = Block { lo: [0; 3], hi: dims };
        let mut blocks: Vec<Block> = (0..grid.len()).map(|b| grid.block(b)).collect();
        blocks.extend([
            whole,
            Block { lo: [1, 2, 3], hi: [2, 3, 4] },
            Block { lo: [3, 0, 5], hi: [dims[0], 7, dims[2]] },
        ]);
        let source = ImplicitSource::new(cells, params.clone(), dims).unwrap();
        for block in blocks {
            let made = source.read_on_gpu(&gpu, block).unwrap().expect("made on the GPU");
            let [z, y, x] = block.lo.map(|v| v as usize);
            let [sz, sy, sx] = block.shape().map(|v| v as usize);
            let (want, _) = cells.block(&params, volume, (z, y, x), (sz, sy, sx)).unwrap();
            assert_eq!(made.dims(), gpu_waterz_abi::Dims3::new(sz as u64, sy as u64, sx as u64));
            let got = download(&gpu, &made);
            // Bit for bit: the same float32 values, not merely close ones.
            let differing = got.iter().zip(want.iter()).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(got.len(), want.len());
            assert_eq!(differing, 0, "{cells:?} {volume:?}: block {block:?}");
        }
    }
    let bait = GeneratorParams::default();
    let e = ImplicitSource::new(ImplicitCells::new(1), bait, [8, 8, 8]);
    assert!(e.unwrap_err().to_string().contains("bait"));

    // The decode of a generated source with the GPU steps makes it on the
    // GPU (never on the host) and equals the decode of the same volume in
    // memory.
    let volume = (48, 72, 80);
    let cells = ImplicitCells { seed: 6, cell: (16, 12, 12) };
    let (affs, _) = cells.block(&plain, volume, (0, 0, 0), volume).unwrap();
    let source = Generated {
        source: ImplicitSource::new(cells, plain, [volume.0 as u64, volume.1 as u64, volume.2 as u64]).unwrap(),
        host_reads: 0.into(),
    };
    let steps = GpuSteps::new(gpu).unwrap();
    let sink = Collected::default();
    let summary = decode_blocks_with(&source, [16, 32, 32], PARAMS, &THRESHOLDS, &sink, &steps).unwrap();
    assert_eq!(source.host_reads.load(Ordering::Relaxed), 0, "every block made on the GPU");
    // Step 5 with the blocks made on the GPU against the CPU's count.
    check_step5(&steps, &source, [16, 32, 32], "generated");
    let want = decode_with(affs.view(), [16, 32, 32], PARAMS, &THRESHOLDS, &steps).unwrap();
    assert_eq!(summary.n_fragments, want.n_fragments);
    assert_written(sink, &want, BlockGrid::new(source.dims(), [16, 32, 32]).unwrap().len(), "generated");
}

/// Every block of the grid written once, each the same part of `want`'s
/// fragments and segmentations.
fn assert_written(sink: Collected, want: &gpu_waterz_blockwise::Decoded, blocks: usize, what: &str) {
    let written = sink.0.into_inner().unwrap();
    assert_eq!(written.len(), blocks, "{what}");
    for (block, fragments, segmentations) in written {
        let cut = |a: &Array3<u64>| {
            a.slice_each_axis(|axis| {
                let i = axis.axis.index();
                Slice::from(block.lo[i] as usize..block.hi[i] as usize)
            })
            .to_owned()
        };
        assert_eq!(fragments, cut(&want.fragments), "{what}: block {block:?}");
        for (got, whole) in segmentations.iter().zip(&want.segmentations) {
            assert_eq!(got, &cut(whole), "{what}: block {block:?}");
        }
    }
}

/// uint8 affinities in memory ([`AffinitySource::read_codes`], as the
/// CLI's uint8 files), with their float32 reads counted.
struct Codes {
    codes: Array4<u8>,
    float_reads: AtomicUsize,
}

impl AffinitySource for Codes {
    fn dims(&self) -> [u64; 3] {
        let s = self.codes.shape();
        [s[1] as u64, s[2] as u64, s[3] as u64]
    }

    fn read(&self, region: Block) -> gpu_waterz_blockwise::Result<Array4<f32>> {
        self.float_reads.fetch_add(1, Ordering::Relaxed);
        Ok(self.read_codes(region)?.expect("codes").mapv(gpu_waterz_core::affinities::u8_affinity))
    }

    fn read_codes(&self, region: Block) -> gpu_waterz_blockwise::Result<Option<Array4<u8>>> {
        let codes = self.codes.slice_each_axis(|axis| match axis.axis.index() {
            0 => Slice::from(..),
            a => Slice::from(region.lo[a - 1] as usize..region.hi[a - 1] as usize),
        });
        Ok(Some(codes.to_owned()))
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn uint8_codes_go_up_as_codes_and_decode_as_their_float32_values() {
    let steps = GpuSteps::new(gpu()).unwrap();
    let cells = ImplicitCells { seed: 9, cell: (10, 14, 12) };
    let plain = GeneratorParams { weak_spots: 0, false_walls: 0, ..Default::default() };
    let volume = (36, 50, 44);
    let (cell_affs, _) = cells.block(&plain, volume, (0, 0, 0), volume).unwrap();
    // Cells, and few levels (plateaus across many blocks).
    let volumes = [
        cell_affs.mapv(|a| (a * 255.0).round() as u8),
        quantized_affinities(3, (20, 26, 30), 3).mapv(|a| (a * 255.0).round() as u8),
    ];
    for (k, codes) in volumes.into_iter().enumerate() {
        let affs = codes.mapv(gpu_waterz_core::affinities::u8_affinity);
        let source = Codes { codes, float_reads: 0.into() };
        for block in [[12, 16, 16], [7, 9, 11]] {
            let what = format!("volume {k}, blocks {block:?}");
            source.float_reads.store(0, Ordering::Relaxed);
            let sink = Collected::default();
            let summary = decode_blocks_with(&source, block, PARAMS, &THRESHOLDS, &sink, &steps).unwrap();
            assert_eq!(source.float_reads.load(Ordering::Relaxed), 0, "{what}: every block read as codes");
            let want = decode_with(affs.view(), block, PARAMS, &THRESHOLDS, &steps).unwrap();
            assert_eq!(summary.n_fragments, want.n_fragments, "{what}");
            assert_written(sink, &want, BlockGrid::new(source.dims(), block).unwrap().len(), &what);
            // Step 5 from the runs (codes) against the CPU's count.
            check_step5(&steps, &source, block, &what);
        }
    }
}

/// A sink that asks for the fragments' frames of whole blocks (those of
/// `chunk`'s shape), keeps them and writes like [`Collected`].
struct Frames {
    chunk: [u64; 3],
    frames: Mutex<Vec<(Block, Vec<u8>)>>,
    written: Collected,
}

impl BlockSink for Frames {
    fn takes_label_frame(&self, block: Block) -> bool {
        block.shape() == self.chunk
    }

    fn prepare_frame(&self, block: Block, frame: Vec<u8>) -> gpu_waterz_blockwise::Result<bool> {
        assert!(self.takes_label_frame(block), "a frame for {block:?}");
        self.frames.lock().unwrap().push((block, frame));
        // Nothing kept: step 7 writes the runs, which the frame is checked
        // against.
        Ok(false)
    }

    fn write(
        &self,
        block: Block,
        fragments: ArrayView3<'_, u64>,
        segmentations: &[Array3<u64>],
    ) -> gpu_waterz_blockwise::Result<()> {
        self.written.write(block, fragments, segmentations)
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn label_frames_made_on_the_gpu_equal_the_hosts() {
    use gpu_waterz_blockwise::{label_frame, label_frame_on_gpu};
    let gpu = gpu();
    // Cell-like labels with repeated rows and planes, constant chunks,
    // random values, and shapes whose repeats fall outside the window.
    for (shape, kind) in [
        ([40u64, 96, 112], 0),
        ([3, 7, 5], 1),
        ([1, 1, 1], 2),
        ([64, 64, 64], 2),
        ([2, 5, 40_000], 0),
        ([2, 6000, 6000], 3),
        ([17, 33, 65], 1),
    ] {
        let n = (shape[0] * shape[1] * shape[2]) as usize;
        let labels: Vec<u32> = match kind {
            0 => {
                cell_labels(9, (shape[0] as usize, shape[1] as usize, shape[2] as usize), 30).iter().copied().collect()
            }
            1 => (0..n).map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 59) as u32).collect(),
            2 => vec![12345; n],
            // Runs along x that change from row to row: the plane above
            // lies outside the window.
            _ => (0..n).map(|i| ((i / 7 + i / 60_000) % 23) as u32).collect(),
        };
        let on_host = label_frame(&labels, shape).unwrap();
        let on_device = label_frame_on_gpu(&gpu, &gpu.upload(&labels).unwrap(), shape).unwrap();
        assert!(on_host == on_device, "{shape:?}: {} and {} bytes", on_host.len(), on_device.len());
        let decoded = zstd::stream::decode_all(&on_device[..]).unwrap();
        assert!(decoded.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).eq(labels.iter().copied()));
    }
    assert!(label_frame_on_gpu(&gpu, &gpu.upload(&[1u32, 2]).unwrap(), [1, 1, 3]).is_err());

    // Step 5 makes the frames of whole blocks in its turn: each decodes to
    // the block's fragments; the decode equals the one without frames.
    let volume = (48, 72, 80);
    let dims = [volume.0 as u64, volume.1 as u64, volume.2 as u64];
    let cells = ImplicitCells { seed: 6, cell: (16, 12, 12) };
    let plain = GeneratorParams { weak_spots: 0, false_walls: 0, ..Default::default() };
    let source = ImplicitSource::new(cells, plain, dims).unwrap();
    let steps = GpuSteps::new(gpu).unwrap();
    let chunk = [16, 32, 32];
    let sink = Frames { chunk, frames: Mutex::new(Vec::new()), written: Collected::default() };
    decode_blocks_with(&source, chunk, PARAMS, &THRESHOLDS, &sink, &steps).unwrap();
    let plain_sink = Collected::default();
    decode_blocks_with(&source, chunk, PARAMS, &THRESHOLDS, &plain_sink, &steps).unwrap();
    let mut written = sink.written.0.into_inner().unwrap();
    let mut without = plain_sink.0.into_inner().unwrap();
    written.sort_by_key(|w| w.0.lo);
    without.sort_by_key(|w| w.0.lo);
    assert!(written == without, "the frames change nothing else");
    let frames = sink.frames.into_inner().unwrap();
    let whole_blocks = written.iter().filter(|w| w.0.shape() == chunk).count();
    assert_eq!(frames.len(), whole_blocks);
    assert!(whole_blocks > 0 && whole_blocks < written.len(), "whole and edge blocks");
    for (block, frame) in frames {
        let fragments = &written.iter().find(|w| w.0 == block).unwrap().1;
        let decoded = zstd::stream::decode_all(&frame[..]).unwrap();
        let values: Vec<u64> =
            decoded.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as u64).collect();
        assert!(values.iter().eq(fragments.iter()), "block {block:?}");
        let host = label_frame(&values.iter().map(|&v| v as u32).collect::<Vec<_>>(), block.shape()).unwrap();
        assert!(host == frame, "block {block:?}: the host's frame");
    }
}

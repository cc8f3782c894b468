//! The blockwise decode against the whole-volume watershed and merging.

use gpu_waterz_blockwise::{
    decode, decode_blocks, AffinitySource, Block, BlockGrid, BlockSink, Decoded, ErrorKind, Result as BlockwiseResult,
};
use gpu_waterz_core::synthetic::{cell_affinities, cell_labels, quantized_affinities, random_affinities};
use gpu_waterz_core::{AffinityGraph, WatershedParams};
use gpu_waterz_parhac::IterativeMerging;
use ndarray::{Array3, Array4, ArrayView3, ArrayView4};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

const PARAMS: WatershedParams = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };
const THRESHOLDS: [f64; 3] = [0.1, 0.4, 0.7];

/// The whole-volume result: waterz's watershed (the reference), its region
/// graph's exact statistics and waterz's serial merging of them in exact
/// arithmetic.
fn whole_volume(affs: &Array4<f32>) -> (Array3<u64>, u64, Vec<Array3<u64>>) {
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let fragments = gpu_waterz_watershed::reference::watershed(&graph, PARAMS);
    let region_graph = gpu_waterz_graph::region_graph(&graph, fragments.labels.view(), fragments.n_fragments + 1);
    let stats = region_graph.contact_stats();
    let mut merging =
        IterativeMerging::from_contact_stats(fragments.n_fragments + 1, region_graph.edges.clone(), stats);
    let segmentations = THRESHOLDS
        .iter()
        .map(|&t| {
            merging.merge_until(t as f32, None);
            fragments.labels.mapv(|f| merging.region_of(f))
        })
        .collect();
    (fragments.labels, fragments.n_fragments, segmentations)
}

fn check(affs: &Array4<f32>, block: [u64; 3]) -> Decoded {
    let (labels, n, segmentations) = whole_volume(affs);
    let decoded = decode(affs.view(), block, PARAMS, &THRESHOLDS).unwrap();
    let context = format!("shape {:?}, blocks of {block:?}", affs.shape());
    assert_eq!(decoded.n_fragments, n, "{context}: fragments");
    assert_eq!(decoded.fragments, labels, "{context}: labels");
    for (k, (got, want)) in decoded.segmentations.iter().zip(&segmentations).enumerate() {
        assert_eq!(got, want, "{context}: threshold {}", THRESHOLDS[k]);
    }
    decoded
}

#[test]
fn random_affinities_in_blocks_of_every_shape_equal_the_whole_volume() {
    let affs = random_affinities(3, (9, 10, 11));
    for block in
        [[9, 10, 11], [4, 4, 4], [1, 10, 11], [9, 1, 11], [9, 10, 1], [2, 3, 5], [1, 1, 1], [5, 7, 3], [64, 64, 64]]
    {
        check(&affs, block);
    }
}

#[test]
fn plateaus_that_span_many_blocks_are_divided_as_in_the_whole_volume() {
    // Two levels: affinities 0 or 1, so nearly every face is part of a
    // plateau (1 is above `high`, marked by both sides) and ties decide.
    for seed in 0..4 {
        let affs = quantized_affinities(seed, (8, 12, 10), 1 + seed as u32 % 3);
        for block in [[3, 3, 3], [2, 5, 4], [8, 1, 2], [1, 1, 10]] {
            let decoded = check(&affs, block);
            assert!(decoded.open_voxels > 0, "seed {seed}, blocks {block:?}: no plateau crossed a face");
        }
    }
    // One plateau over the whole volume: every face at the same value
    // below `high`, so the voxels on the border are its corners.
    let affs = Array4::from_elem((3, 7, 9, 8), 0.5f32);
    let decoded = check(&affs, [2, 3, 2]);
    assert!(decoded.open_voxels as usize >= 7 * 9 * 8 / 2);
}

#[test]
fn cell_like_volumes_in_blocks_equal_the_whole_volume() {
    for seed in 0..3 {
        let labels = cell_labels(seed, (12, 20, 16), 12);
        let affs = cell_affinities(seed, &labels, 0.2);
        for block in [[4, 8, 8], [12, 5, 3], [5, 20, 16]] {
            check(&affs, block);
        }
    }
}

fn volume() -> impl Strategy<Value = (Array4<f32>, [u64; 3])> {
    (1usize..7, 1usize..8, 1usize..8, 1u32..4).prop_flat_map(|(z, y, x, levels)| {
        (proptest::collection::vec(0..=levels, 3 * z * y * x), 1u64..=z as u64, 1u64..=y as u64, 1u64..=x as u64)
            .prop_map(move |(v, bz, by, bx)| {
                let affs =
                    Array4::from_shape_vec((3, z, y, x), v.into_iter().map(|k| k as f32 / levels as f32).collect())
                        .unwrap();
                (affs, [bz, by, bx])
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Any volume of quantized affinities (plateaus and ties everywhere) in
    /// blocks of any shape: the labels and segmentations of the whole
    /// volume.
    #[test]
    fn any_volume_in_any_blocks_equals_the_whole_volume((affs, block) in volume()) {
        check(&affs, block);
    }
}

#[test]
fn bad_grids_and_inputs_are_errors() {
    assert_eq!(BlockGrid::new([0, 4, 4], [2, 2, 2]).unwrap_err().kind(), ErrorKind::Invalid);
    assert_eq!(BlockGrid::new([4, 4, 4], [2, 0, 2]).unwrap_err().kind(), ErrorKind::Invalid);
    assert_eq!(BlockGrid::new([u64::MAX / 2, 4, 4], [2, 2, 2]).unwrap_err().kind(), ErrorKind::Invalid);
    let affs = random_affinities(1, (4, 4, 4));
    assert_eq!(decode(affs.view(), [0, 2, 2], PARAMS, &THRESHOLDS).unwrap_err().kind(), ErrorKind::Invalid);
    assert_eq!(decode(affs.view(), [2, 2, 2], PARAMS, &[0.5, 0.1]).unwrap_err().kind(), ErrorKind::Input);
    assert_eq!(decode(affs.view(), [2, 2, 2], PARAMS, &[f64::NAN]).unwrap_err().kind(), ErrorKind::Input);
    // waterz's watershed thresholds: low < high, both in [0, 1].
    let swapped = WatershedParams { aff_threshold_low: 0.9, aff_threshold_high: 0.1 };
    assert_eq!(decode(affs.view(), [2, 2, 2], swapped, &THRESHOLDS).unwrap_err().kind(), ErrorKind::Input);
    // Affinities must be finite, as for the whole volume.
    let mut nan = affs.clone();
    nan[[1, 3, 2, 1]] = f32::NAN;
    let err = decode(nan.view(), [2, 2, 2], PARAMS, &THRESHOLDS).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Input);
    assert!(err.to_string().contains("z=3, y=2, x=1"), "{err}");
    let two = Array4::<f32>::zeros((2, 4, 4, 4));
    assert_eq!(decode(two.view(), [2, 2, 2], PARAMS, &THRESHOLDS).unwrap_err().kind(), ErrorKind::Invalid);
    // A block whose affinities do not cover its halo.
    let grid = BlockGrid::new([4, 4, 4], [2, 2, 2]).unwrap();
    let block = grid.block(0);
    let short = Array4::<f32>::zeros((3, 2, 2, 2));
    let err = gpu_waterz_blockwise::local_plateaus([4, 4, 4], block, short.view(), PARAMS).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Invalid);
}

/// Malformed summaries are errors, not panics or wrong answers; a
/// Fortran-ordered direction array gives what a C-ordered one gives.
#[test]
fn malformed_steps_are_errors_and_layouts_do_not_matter() {
    use gpu_waterz_blockwise::{
        fragment_ids, local_basins, local_plateaus, merge, settle_open_plateaus, EdgeList, OpenVoxels,
    };
    let dims = [6u64, 7, 5];
    let affs = quantized_affinities(9, (6, 7, 5), 2);
    let grid = BlockGrid::new(dims, [3, 4, 5]).unwrap();
    let block = grid.block(1);
    let halo = block.halo(dims);
    let region = affs.slice_each_axis(|axis| match axis.axis.index() {
        0 => ndarray::Slice::from(..),
        a => ndarray::Slice::from(halo.lo[a - 1] as usize..halo.hi[a - 1] as usize),
    });
    let plateaus = local_plateaus(dims, block, region, PARAMS).unwrap();
    let settled = settle_open_plateaus(dims, &[&plateaus.open]).unwrap().remove(0);
    let c_order = local_basins(dims, block, plateaus.bits.clone(), &plateaus.open, &settled).unwrap();
    let mut fortran = ndarray::Array3::<u8>::zeros(ndarray::ShapeBuilder::f(plateaus.bits.raw_dim()));
    fortran.assign(&plateaus.bits);
    let f_order = local_basins(dims, block, fortran, &plateaus.open, &settled).unwrap();
    assert_eq!(c_order.components, f_order.components);
    assert_eq!(c_order.faces, f_order.faces);
    // Settled directions with other bits, masks with the queued flag.
    let bad_settled = vec![0x80u8; settled.len()];
    if !settled.is_empty() {
        let err = local_basins(dims, block, plateaus.bits.clone(), &plateaus.open, &bad_settled).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid);
    }
    let bad_open = OpenVoxels { index: vec![3], mask: vec![0x40] };
    assert_eq!(settle_open_plateaus(dims, &[&bad_open]).unwrap_err().kind(), ErrorKind::Invalid);
    let duplicated = OpenVoxels { index: vec![3, 3], mask: vec![1, 1] };
    assert_eq!(settle_open_plateaus(dims, &[&duplicated]).unwrap_err().kind(), ErrorKind::Invalid);
    // Summaries that do not count the block's voxels.
    let summaries: Vec<_> = (0..grid.len()).map(|_| c_order.summary()).collect();
    assert_eq!(fragment_ids(&grid, &summaries).unwrap_err().kind(), ErrorKind::Invalid);
    // Too many fragments, overflowing statistics, edges outside the fragments.
    assert_eq!(merge(1 << 40, &[], &THRESHOLDS).unwrap_err().kind(), ErrorKind::Invalid);
    let huge = EdgeList { u: vec![1, 1], v: vec![2, 2], count: vec![u64::MAX, 1], sum: vec![1, 1] };
    assert_eq!(merge(2, &[&huge], &THRESHOLDS).unwrap_err().kind(), ErrorKind::Invalid);
    let outside = EdgeList { u: vec![1], v: vec![3], count: vec![1], sum: vec![1] };
    assert_eq!(merge(2, &[&outside], &THRESHOLDS).unwrap_err().kind(), ErrorKind::Invalid);
    // Volumes too large for the indices.
    assert_eq!(BlockGrid::new([1 << 41, 1, 1], [1, 1, 1]).unwrap_err().kind(), ErrorKind::Invalid);
}

/// An array read through [`AffinitySource`], counting the regions and
/// values read; `wrong` gives one region a plane too few.
struct Counted<'a> {
    affs: ArrayView4<'a, f32>,
    regions: AtomicU64,
    values: AtomicU64,
    wrong: bool,
}

impl AffinitySource for Counted<'_> {
    fn dims(&self) -> [u64; 3] {
        self.affs.dims()
    }

    fn read(&self, region: Block) -> BlockwiseResult<Array4<f32>> {
        let values = self.affs.read(region)?;
        self.regions.fetch_add(1, Ordering::Relaxed);
        self.values.fetch_add(values.len() as u64, Ordering::Relaxed);
        if self.wrong && region.lo == [0, 0, 0] {
            return Ok(values.slice_move(ndarray::s![.., 1.., .., ..]));
        }
        Ok(values)
    }
}

/// A block's fragments and segmentations.
type BlockResult = (Array3<u64>, Vec<Array3<u64>>);

/// Each block's result, kept by block; `fail_at` refuses one block.
#[derive(Default)]
struct Kept {
    blocks: Mutex<HashMap<[u64; 3], BlockResult>>,
    fail_at: Option<[u64; 3]>,
}

impl BlockSink for Kept {
    fn write(
        &self,
        block: Block,
        fragments: ArrayView3<'_, u64>,
        segmentations: &[Array3<u64>],
    ) -> BlockwiseResult<()> {
        if self.fail_at == Some(block.lo) {
            return Err(gpu_waterz_blockwise::BlockwiseError::Invalid("the sink refused a block".into()));
        }
        let previous = self.blocks.lock().unwrap().insert(block.lo, (fragments.to_owned(), segmentations.to_vec()));
        assert!(previous.is_none(), "block {block:?} written twice");
        Ok(())
    }
}

#[test]
fn streaming_reads_each_block_twice_and_writes_each_block_once() {
    let affs = quantized_affinities(5, (9, 14, 11), 3);
    let block = [4, 5, 6];
    let want = decode(affs.view(), block, PARAMS, &THRESHOLDS).unwrap();
    let source = Counted { affs: affs.view(), regions: AtomicU64::new(0), values: AtomicU64::new(0), wrong: false };
    let sink = Kept::default();
    let summary = decode_blocks(&source, block, PARAMS, &THRESHOLDS, &sink).unwrap();
    let grid = BlockGrid::new([9, 14, 11], block).unwrap();
    assert_eq!(summary.n_fragments, want.n_fragments);
    assert_eq!(summary.open_voxels, want.open_voxels);
    assert_eq!(summary.n_edges, want.n_edges);
    assert_eq!(summary.thresholds, THRESHOLDS.to_vec());
    // Each block read twice (with its halo, then alone); no more values
    // than twice the halos.
    assert_eq!(source.regions.load(Ordering::Relaxed), 2 * grid.len() as u64);
    let halos: u64 = (0..grid.len()).map(|b| grid.block(b).halo([9, 14, 11]).len() * 3).sum();
    assert!(source.values.load(Ordering::Relaxed) <= 2 * halos);
    let blocks = sink.blocks.into_inner().unwrap();
    assert_eq!(blocks.len(), grid.len());
    for b in 0..grid.len() {
        let block = grid.block(b);
        let (fragments, segmentations) = &blocks[&block.lo];
        let range = |a: usize| block.lo[a] as usize..block.hi[a] as usize;
        let part = |whole: &Array3<u64>| whole.slice(ndarray::s![range(0), range(1), range(2)]).to_owned();
        assert_eq!(fragments, &part(&want.fragments), "block {block:?}: fragments");
        for (k, seg) in segmentations.iter().enumerate() {
            assert_eq!(seg, &part(&want.segmentations[k]), "block {block:?}: threshold {}", THRESHOLDS[k]);
        }
    }
}

#[test]
fn a_source_of_the_wrong_shape_or_a_failing_sink_is_an_error() {
    let affs = random_affinities(2, (6, 6, 6));
    let wrong = Counted { affs: affs.view(), regions: AtomicU64::new(0), values: AtomicU64::new(0), wrong: true };
    let err = decode_blocks(&wrong, [3, 3, 3], PARAMS, &THRESHOLDS, &Kept::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Invalid);
    assert!(err.to_string().contains("the source gave"), "{err}");
    let source = Counted { affs: affs.view(), regions: AtomicU64::new(0), values: AtomicU64::new(0), wrong: false };
    let sink = Kept { fail_at: Some([3, 0, 3]), ..Kept::default() };
    let err = decode_blocks(&source, [3, 3, 3], PARAMS, &THRESHOLDS, &sink).unwrap_err();
    assert!(err.to_string().contains("the sink refused a block"), "{err}");
}

//! `gpu-waterz blockwise`: a volume decoded block by block
//! ([`gpu_waterz_blockwise::decode_blocks_with`]: steps 1, 3 and 5 of
//! each block and the merge on the GPU when one is usable, the rest on the
//! CPU), read from a zarr
//! array, a `.npy` file or a chunked HDF5 dataset by regions, or generated per block, written into a zarr group one chunk per
//! block: the whole volume's fragments and segmentations without holding
//! its affinities.

use super::containers::{Container, ContainerWriter, LabelType};
use super::input::sizes_zyx;
use super::outputs::OutputFolder;
use super::segment::Backend;
use anyhow::{bail, Context, Result};
use gpu_waterz_blockwise::{
    component_labels, decode_blocks_with, AffinitySource, Block, BlockSink, BlockwiseError, ComponentRuns, CpuSteps,
    GpuSteps, ImplicitSource,
};
use gpu_waterz_cli::generate::{GeneratorParams, ImplicitCells};
use gpu_waterz_cli::io::{
    ChunkedDataset, ElementType, LabelFrame, NpyFile, StagingStore, ValueRuns, VolumeSource, ZarrArray,
};
use gpu_waterz_core::WatershedParams;
use gpu_waterz_runtime::Gpu;
use gpu_waterz_watershed::gpu::DeviceAffinities;
use ndarray::{Array3, Array4, ArrayView3};
use serde_json::{json, Map};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;
use zarrs::array::Array;

/// The arguments of `gpu-waterz blockwise`.
#[derive(clap::Args)]
pub struct BlockwiseArgs {
    /// Affinities (channels, z, y, x), the first 3 channels used: a zarr
    /// array dir.zarr/array, a .npy file or a chunked HDF5 dataset
    /// FILE.h5:DATASET, float32 or uint8 (k/255), read block by block (each
    /// block twice, with its halo).
    #[arg(long, required_unless_present = "implicit", conflicts_with = "implicit")]
    affinities: Option<String>,
    /// Generate the affinities block by block instead, from the implicit
    /// cell field (as `gpu-waterz generate --implicit`): the volume's shape
    /// z,y,x.
    #[arg(long, value_delimiter = ',')]
    implicit: Option<Vec<usize>>,
    /// The implicit field's cell size z,y,x in voxels.
    #[arg(long, value_delimiter = ',', default_value = "48,24,24", requires = "implicit")]
    cell: Vec<usize>,
    /// The implicit field's seed.
    #[arg(long, default_value_t = 1, requires = "implicit")]
    seed: u64,
    /// Block shape z,y,x (also the output's chunks).
    #[arg(long, value_delimiter = ',', required = true)]
    block: Vec<usize>,
    /// Merge thresholds, comma-separated, strictly ascending.
    #[arg(long, value_delimiter = ',', required = true, allow_hyphen_values = true)]
    thresholds: Vec<f64>,
    /// Output zarr v3 group (PATH.zarr): one `segmentation_<i>` per
    /// threshold and, with `--write-fragments`, `fragments` (see
    /// --label-type), one chunk per block;
    /// written whole or not at all (a run writes beside it, then renames).
    #[arg(long)]
    out: PathBuf,
    /// Element type of the outputs: auto (uint32 when every label fits,
    /// else uint64), uint32 or uint64 (waterz's).
    #[arg(long, value_enum, default_value = "auto")]
    label_type: LabelType,
    /// Also write the `fragments` array (the watershed's labels), as
    /// `segment --write-fragments` does; without it only the segmentations
    /// are relabelled and written (a third less work and output for two
    /// thresholds).
    #[arg(long)]
    write_fragments: bool,
    /// Encode each segmentation's chunks from its own runs after the merge
    /// (the chunks are smaller: 1.6–2.5 times on generated cells), instead
    /// of relabelling the fragments' chunks, encoded while the region graph
    /// is counted, through the merge's tables (the default: the last step
    /// then only copies and relabels the frames' raw values).
    #[arg(long)]
    compact_chunks: bool,
    /// Replace an existing --out (only once the new result is complete).
    #[arg(long)]
    overwrite: bool,
    /// Flush the result to the disk before moving it into place.
    #[arg(long)]
    fsync: bool,
    /// Where steps 1, 3 and 5 of each block (the watershed's masks,
    /// plateaus and basins, and the region-graph faces inside it; a
    /// generated volume is made there too) and the merge run: on the GPU
    /// (`gpu`), on the CPU (`cpu`), or on the GPU when one is usable
    /// (`auto`). The fragments are the same; the merges agree on tie-free
    /// graphs (the GPU's ParHAC, the CPU's serial merging).
    #[arg(long, value_enum, default_value = "auto")]
    backend: Backend,
    /// Threads that work on blocks (reading, the CPU's steps, relabelling
    /// and encoding the chunks); 0: one per core (or RAYON_NUM_THREADS).
    /// With the GPU, the host's work inside its turns (the copies through
    /// pinned memory) keeps its own thread per core, and the block threads
    /// run at a lower priority (nice +10) so that it gets the cores first.
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Watershed: affinities at or below this never connect voxels.
    #[arg(long, default_value_t = 0.0001)]
    aff_threshold_low: f64,
    /// Watershed: affinities at or above this always connect voxels.
    #[arg(long, default_value_t = 0.9999)]
    aff_threshold_high: f64,
}

/// Where the affinities come from.
enum Source {
    /// A zarr array, `(c, z, y, x)` with `c >= 3`.
    Zarr(ZarrArray),
    /// A `.npy` file of the same.
    Npy(NpyFile),
    /// A chunked HDF5 dataset of the same.
    Hdf5(ChunkedDataset),
    /// The implicit cell field, generated per region (on the GPU when the
    /// steps run there).
    Implicit(ImplicitSource),
}

impl AffinitySource for Source {
    fn dims(&self) -> [u64; 3] {
        match self {
            Source::Zarr(array) => std::array::from_fn(|a| array.shape()[a + 1] as u64),
            Source::Npy(file) => std::array::from_fn(|a| file.shape()[a + 1] as u64),
            Source::Hdf5(dataset) => std::array::from_fn(|a| dataset.shape()[a + 1] as u64),
            Source::Implicit(generated) => generated.dims(),
        }
    }

    fn read(&self, region: Block) -> gpu_waterz_blockwise::Result<Array4<f32>> {
        match self {
            Source::Zarr(array) => channels_of(region, |lo, hi| array.read_region_f32(lo, hi)),
            Source::Npy(file) => channels_of(region, |lo, hi| file.read_region_f32(lo, hi)),
            Source::Hdf5(dataset) => channels_of(region, |lo, hi| dataset.read_region_f32(lo, hi)),
            Source::Implicit(generated) => generated.read(region),
        }
    }

    fn makes_on_gpu(&self) -> bool {
        matches!(self, Source::Implicit(_))
    }

    /// A generated volume is made on the GPU when the steps run there.
    fn read_on_gpu(&self, gpu: &Gpu, region: Block) -> gpu_waterz_blockwise::Result<Option<DeviceAffinities>> {
        match self {
            Source::Implicit(generated) => generated.read_on_gpu(gpu, region),
            _ => Ok(None),
        }
    }

    /// uint8 files give their codes as stored (the GPU's steps upload them
    /// so: a quarter of float32's bytes, and no conversion here).
    fn read_codes(&self, region: Block) -> gpu_waterz_blockwise::Result<Option<Array4<u8>>> {
        let codes = match self {
            Source::Zarr(array) if array.dtype() == ElementType::U8 => {
                channels_of(region, |lo, hi| array.read_region_u8(lo, hi))
            }
            Source::Npy(file) if file.dtype() == ElementType::U8 => {
                channels_of(region, |lo, hi| file.read_region_u8(lo, hi))
            }
            Source::Hdf5(dataset) if dataset.dtype() == ElementType::U8 => {
                channels_of(region, |lo, hi| dataset.read_region_u8(lo, hi))
            }
            _ => return Ok(None),
        };
        codes.map(Some)
    }
}

/// The first three channels of `region`, `(3, z, y, x)`, from `read` of a
/// file's box `lo..hi` in `(c, z, y, x)`.
fn channels_of<T>(
    region: Block,
    read: impl FnOnce([usize; 4], [usize; 4]) -> Result<Vec<T>, gpu_waterz_cli::io::IoError>,
) -> gpu_waterz_blockwise::Result<Array4<T>> {
    let [z, y, x] = region.shape().map(|n| n as usize);
    let [lz, ly, lx] = region.lo.map(|n| n as usize);
    let values = read([0, lz, ly, lx], [3, lz + z, ly + y, lx + x]).map_err(|e| BlockwiseError::Io(e.to_string()))?;
    Array4::from_shape_vec((3, z, y, x), values).map_err(|e| BlockwiseError::Io(e.to_string()))
}

/// The output arrays, made once the number of fragments is known
/// ([`BlockSink::begin`]: uint32 when every label fits and the label type
/// allows it); each block is one chunk of each (blocks write apart, and
/// the blocks in flight keep the cores busy compressing). The chunks are
/// encoded from runs of labels straight into zstd frames
/// ([`LabelFrame::encode`]): no label buffer per block, no pass of a general
/// compressor over every voxel. Unless `compact`, each block's fragments
/// are encoded in step 5 ([`BlockSink::prepare_runs`]), while the GPU
/// counts the region graph, and each segmentation's chunk in step 7 is
/// that frame relabelled ([`LabelFrame::relabelled`]): a copy of a few
/// megabytes instead of a walk over the runs per threshold.
struct ZarrSink<'w> {
    writer: &'w ContainerWriter,
    /// The writer's store, where the chunks go.
    store: Arc<StagingStore>,
    dims: [u64; 3],
    chunks: [u64; 3],
    thresholds: &'w [f64],
    write_fragments: bool,
    /// Each segmentation encoded from its own runs in step 7.
    compact: bool,
    outputs: OnceLock<Outputs>,
    /// The fragments' frame of each block prepared in step 5, by the
    /// block's low corner, until step 7 relabels it.
    prepared: Mutex<HashMap<[u64; 3], LabelFrame>>,
}

/// The arrays of a [`ZarrSink`].
struct Outputs {
    /// None without `--write-fragments`.
    fragments: Option<Array<StagingStore>>,
    segmentations: Vec<Array<StagingStore>>,
    /// Whether they are uint32.
    narrow: bool,
}

/// The runs of labels of a chunk of shape `chunk` whose low corner holds
/// a block of shape `block`, given by its runs `(label, count)` in C order
/// (the rest of the chunk, past the volume's edge, is the fill value 0),
/// into `out` (cleared first: a block's arrays reuse one). Fails when the
/// runs do not fill the block.
fn chunk_runs(
    block: [u64; 3],
    chunk: [u64; 3],
    runs: impl IntoIterator<Item = (u64, u64)>,
    out: &mut ValueRuns,
) -> gpu_waterz_blockwise::Result<()> {
    out.clear();
    let [bz, by, bx] = block;
    let [cz, cy, cx] = chunk;
    let (mut in_row, mut rows, mut planes) = (0, 0, 0);
    for (label, count) in runs {
        let mut left = count;
        while left > 0 {
            if planes == bz {
                return Err(BlockwiseError::Io(format!("runs of more voxels than a block of {block:?}")));
            }
            let here = left.min(bx - in_row);
            out.push(label, here);
            (in_row, left) = (in_row + here, left - here);
            if in_row == bx {
                out.push(0, cx - bx);
                (in_row, rows) = (0, rows + 1);
                if rows == by {
                    out.push(0, (cy - by) * cx);
                    (rows, planes) = (0, planes + 1);
                }
            }
        }
    }
    if planes != bz {
        return Err(BlockwiseError::Io(format!("runs of fewer voxels than a block of {block:?}")));
    }
    out.push(0, (cz - bz) * cy * cx);
    Ok(())
}

impl ZarrSink<'_> {
    fn outputs(&self) -> gpu_waterz_blockwise::Result<&Outputs> {
        self.outputs.get().ok_or_else(|| BlockwiseError::Io("a block came before the output arrays were made".into()))
    }

    fn arrays(outputs: &Outputs) -> Vec<&Array<StagingStore>> {
        outputs.fragments.iter().chain(&outputs.segmentations).collect()
    }

    /// The frame of `block`'s chunk from the block's runs of labels in C
    /// order, made in `buffer`.
    fn encode_chunk(
        &self,
        narrow: bool,
        block: Block,
        runs: impl IntoIterator<Item = (u64, u64)>,
        buffer: &mut ValueRuns,
    ) -> gpu_waterz_blockwise::Result<LabelFrame> {
        chunk_runs(block.shape(), self.chunks, runs, buffer)?;
        let width = if narrow { 4 } else { 8 };
        // The row and the plane above repeat most of a label chunk.
        let [_, y, x] = self.chunks;
        LabelFrame::encode(width, &[x, y * x], buffer)
            .map_err(|e| BlockwiseError::Io(format!("writing {block:?}: {e}")))
    }

    /// Writes `frame` as `block`'s chunk of `array`.
    fn store_chunk(&self, array: &Array<StagingStore>, block: Block, frame: &[u8]) -> gpu_waterz_blockwise::Result<()> {
        let indices: [u64; 3] = std::array::from_fn(|a| block.lo[a] / self.chunks[a]);
        self.store
            .write(&array.chunk_key(&indices), frame)
            .map_err(|e| BlockwiseError::Io(format!("writing {block:?}: {e}")))
    }

    /// Writes `block` of `array` (its chunk) from the block's runs of
    /// labels in C order, made in `buffer`.
    fn store_runs(
        &self,
        array: &Array<StagingStore>,
        narrow: bool,
        block: Block,
        runs: impl IntoIterator<Item = (u64, u64)>,
        buffer: &mut ValueRuns,
    ) -> gpu_waterz_blockwise::Result<()> {
        let frame = self.encode_chunk(narrow, block, runs, buffer)?;
        self.store_chunk(array, block, frame.bytes())
    }

    /// Writes the fragments' `frame` of `block` where the fragments are an
    /// output, and keeps it for step 7 where there are segmentations.
    fn keep_frame(&self, outputs: &Outputs, block: Block, frame: LabelFrame) -> gpu_waterz_blockwise::Result<()> {
        if let Some(array) = &outputs.fragments {
            self.store_chunk(array, block, frame.bytes())?;
        }
        if !outputs.segmentations.is_empty() {
            let mut prepared = self.prepared.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if prepared.insert(block.lo, frame).is_some() {
                return Err(BlockwiseError::Io(format!("block {block:?} was prepared twice")));
            }
        }
        Ok(())
    }

    /// Checks that `runs` fill `block` with components that `ids` names.
    fn check_runs(block: Block, runs: &ComponentRuns, ids: &[u64]) -> gpu_waterz_blockwise::Result<()> {
        if runs.shape().map(|n| n as u64) != block.shape() {
            return Err(BlockwiseError::Io(format!("runs of shape {:?} for block {block:?}", runs.shape())));
        }
        if runs.runs().iter().any(|r| r[0] as usize >= ids.len()) {
            return Err(BlockwiseError::Io(format!("block {block:?}: a component has no fragment id")));
        }
        Ok(())
    }
}

impl BlockSink for ZarrSink<'_> {
    fn begin(&self, n_fragments: u64) -> gpu_waterz_blockwise::Result<()> {
        let made = (|| -> Result<Outputs> {
            let (dims, chunks) = (self.dims, self.chunks);
            let narrow = self.writer.narrow_for(n_fragments)?;
            let fragments = if self.write_fragments {
                Some(self.writer.zarr_labels("fragments", dims, chunks, narrow, Map::new())?)
            } else {
                None
            };
            let segmentations = self
                .thresholds
                .iter()
                .enumerate()
                .map(|(i, &t)| {
                    let mut attributes = Map::new();
                    attributes.insert("threshold".into(), t.into());
                    self.writer.zarr_labels(&format!("segmentation_{i}"), dims, chunks, narrow, attributes)
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Outputs { fragments, segmentations, narrow })
        })()
        .map_err(|e| BlockwiseError::Io(format!("{e:#}")))?;
        self.outputs.set(made).map_err(|_| BlockwiseError::Io("the output arrays were made twice".into()))
    }

    fn write_components(
        &self,
        block: Block,
        components: ArrayView3<'_, u32>,
        ids: &[u64],
        tables: &[Vec<u64>],
    ) -> gpu_waterz_blockwise::Result<()> {
        // `write_runs` checks every component against `ids`.
        self.write_runs(block, &ComponentRuns::of(components), ids, tables)
    }

    /// Each array's chunk encoded from the runs, their components mapped
    /// to the array's labels.
    fn write_runs(
        &self,
        block: Block,
        runs: &ComponentRuns,
        ids: &[u64],
        tables: &[Vec<u64>],
    ) -> gpu_waterz_blockwise::Result<()> {
        let outputs = self.outputs()?;
        Self::check_runs(block, runs, ids)?;
        let segments = tables.iter().map(|table| component_labels(ids, table)).collect::<Result<Vec<_>, _>>()?;
        let fragments = outputs.fragments.is_some().then_some(ids);
        let labels_of = fragments.into_iter().chain(segments.iter().map(Vec::as_slice));
        let start = Instant::now();
        // One buffer of label runs for the block's arrays: at most one run
        // per component run, one more where a run crosses a row's end, and
        // the padding's after each row and plane.
        let rows = runs.shape()[0] * runs.shape()[1];
        let mut buffer = ValueRuns::with_capacity(runs.runs().len() + 3 * rows + 1);
        for (array, label_of) in Self::arrays(outputs).into_iter().zip(labels_of) {
            let labels = runs.runs().iter().map(|&[c, n]| (label_of[c as usize], u64::from(n)));
            self.store_runs(array, outputs.narrow, block, labels, &mut buffer)?;
        }
        tracing::debug!(?block, seconds = start.elapsed().as_secs_f64(), "block encoded from runs and stored");
        Ok(())
    }

    /// The fragments' frame, written now when the fragments are an output
    /// and kept for step 7 when there are segmentations.
    fn prepare_runs(&self, block: Block, runs: &ComponentRuns, ids: &[u64]) -> gpu_waterz_blockwise::Result<bool> {
        if self.compact {
            return Ok(false);
        }
        let outputs = self.outputs()?;
        Self::check_runs(block, runs, ids)?;
        let start = Instant::now();
        let rows = runs.shape()[0] * runs.shape()[1];
        let mut buffer = ValueRuns::with_capacity(runs.runs().len() + 3 * rows + 1);
        let labels = runs.runs().iter().map(|&[c, n]| (ids[c as usize], u64::from(n)));
        let frame = self.encode_chunk(outputs.narrow, block, labels, &mut buffer)?;
        drop(buffer);
        self.keep_frame(outputs, block, frame)?;
        tracing::debug!(?block, seconds = start.elapsed().as_secs_f64(), "block's fragments encoded");
        Ok(true)
    }

    /// Frames made by the steps (on the GPU) are taken for whole chunks of
    /// uint32 labels, unless the chunks are encoded per segmentation.
    fn takes_label_frame(&self, block: Block) -> bool {
        !self.compact && self.outputs().is_ok_and(|o| o.narrow) && block.shape() == self.chunks
    }

    /// The fragments' frame made by the steps, its values found by walking
    /// it ([`LabelFrame::from_frame`]), then as [`BlockSink::prepare_runs`].
    fn prepare_frame(&self, block: Block, frame: Vec<u8>) -> gpu_waterz_blockwise::Result<bool> {
        let outputs = self.outputs()?;
        if !self.takes_label_frame(block) {
            return Err(BlockwiseError::Io(format!("block {block:?}: a frame this sink did not ask for")));
        }
        let start = Instant::now();
        let frame = LabelFrame::from_frame(frame, 4)
            .map_err(|e| BlockwiseError::Io(format!("block {block:?}'s frame: {e}")))?;
        self.keep_frame(outputs, block, frame)?;
        tracing::debug!(?block, seconds = start.elapsed().as_secs_f64(), "block's fragments frame taken");
        Ok(true)
    }

    /// Each segmentation's chunk: the fragments' frame relabelled by the
    /// threshold's table (whose background, fragment 0, stays 0: the
    /// chunk's padding past the volume's edge is 0 as well, and may share
    /// the frame's runs and repeats with it).
    fn write_prepared(&self, block: Block, tables: &[Vec<u64>]) -> gpu_waterz_blockwise::Result<()> {
        let outputs = self.outputs()?;
        if tables.len() != outputs.segmentations.len() {
            return Err(BlockwiseError::Io(format!(
                "{} tables for {} segmentations",
                tables.len(),
                outputs.segmentations.len()
            )));
        }
        if tables.iter().any(|table| table.first().is_some_and(|&t| t != 0)) {
            return Err(BlockwiseError::Io("a merge's table gives the background a label".into()));
        }
        if tables.is_empty() {
            return Ok(());
        }
        let frame = self
            .prepared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&block.lo)
            .ok_or_else(|| BlockwiseError::Io(format!("block {block:?} was not prepared")))?;
        let start = Instant::now();
        for (array, table) in outputs.segmentations.iter().zip(tables) {
            let relabelled = frame
                .relabelled(|f| table.get(f as usize).copied())
                .map_err(|e| BlockwiseError::Io(format!("relabelling {block:?}: {e}")))?;
            self.store_chunk(array, block, &relabelled)?;
        }
        tracing::debug!(?block, seconds = start.elapsed().as_secs_f64(), "block relabelled and stored");
        Ok(())
    }

    fn write(
        &self,
        block: Block,
        fragments: ArrayView3<'_, u64>,
        segmentations: &[Array3<u64>],
    ) -> gpu_waterz_blockwise::Result<()> {
        let outputs = self.outputs()?;
        let mut views: Vec<ArrayView3<'_, u64>> = Vec::with_capacity(segmentations.len() + 1);
        if outputs.fragments.is_some() {
            views.push(fragments.view());
        }
        views.extend(segmentations.iter().map(|s| s.view()));
        let mut buffer = ValueRuns::default();
        for (array, values) in Self::arrays(outputs).into_iter().zip(views) {
            if values.shape().iter().map(|&n| n as u64).ne(block.shape()) {
                return Err(BlockwiseError::Io(format!("labels of shape {:?} for block {block:?}", values.shape())));
            }
            let values = values.as_standard_layout();
            let values = values.as_slice().expect("a standard layout");
            let runs = values.chunk_by(|a, b| a == b).map(|run| (run[0], run.len() as u64));
            self.store_runs(array, outputs.narrow, block, runs, &mut buffer)?;
        }
        Ok(())
    }
}

pub fn run(args: &BlockwiseArgs) -> Result<()> {
    let start = Instant::now();
    let (z, y, x) = sizes_zyx("--block", &args.block)?;
    let block = [z as u64, y as u64, x as u64];
    if Container::of(&args.out) != Container::Zarr {
        bail!("--out must be a zarr group (PATH.zarr), not {}", args.out.display());
    }
    // Checked per block, as the whole-volume watershed checks them (in
    // float32, the affinities' type).
    let params = WatershedParams {
        aff_threshold_low: args.aff_threshold_low as f32,
        aff_threshold_high: args.aff_threshold_high as f32,
    };
    let source = match (&args.affinities, &args.implicit) {
        (Some(spec), _) => {
            let wrong =
                || anyhow::anyhow!("--affinities {spec} must be a float32 or uint8 (channels >= 3, z, y, x) array");
            match VolumeSource::parse(spec) {
                VolumeSource::Zarr { root, array } => {
                    match ZarrArray::open(&root, &array).with_context(|| format!("opening {spec}"))? {
                        Some(a) if a.shape()[0] >= 3 => Source::Zarr(a),
                        _ => return Err(wrong()),
                    }
                }
                VolumeSource::Npy(path) => {
                    let file = NpyFile::open(&path).with_context(|| format!("opening {spec}"))?;
                    let fits = matches!(file.dtype(), ElementType::F32 | ElementType::U8);
                    if !fits || file.shape().len() != 4 || file.shape()[0] < 3 || file.shape().contains(&0) {
                        return Err(wrong());
                    }
                    Source::Npy(file)
                }
                VolumeSource::Hdf5 { file, dataset } => {
                    if !file.is_file() {
                        bail!("--affinities {spec}: no file {}", file.display());
                    }
                    let opened = ChunkedDataset::open(&file, &dataset).with_context(|| format!("opening {spec}"))?;
                    let Some(d) = opened else {
                        bail!(
                            "--affinities {spec}: blockwise reads HDF5 datasets by regions when they are chunked \
                             (deflate or shuffle filters, every chunk written); rewrite it chunked, or as zarr"
                        )
                    };
                    let fits = matches!(d.dtype(), ElementType::F32 | ElementType::U8);
                    if !fits || d.shape().len() != 4 || d.shape()[0] < 3 {
                        return Err(wrong());
                    }
                    Source::Hdf5(d)
                }
                _ => {
                    bail!(
                        "--affinities {spec}: blockwise reads zarr arrays (dir.zarr/array), .npy files and \
                         chunked HDF5 datasets (FILE.h5:DATASET) by regions"
                    )
                }
            }
        }
        (None, Some(shape)) => {
            let shape = sizes_zyx("--implicit", shape)?;
            let field = ImplicitCells { seed: args.seed, cell: sizes_zyx("--cell", &args.cell)? };
            let params = GeneratorParams { seed: args.seed, weak_spots: 0, false_walls: 0, ..Default::default() };
            Source::Implicit(ImplicitSource::new(field, params, [shape.0 as u64, shape.1 as u64, shape.2 as u64])?)
        }
        (None, None) => bail!("give --affinities or --implicit"),
    };
    let dims = source.dims();
    // Refuse bad settings before the output is touched.
    gpu_waterz_blockwise::BlockGrid::new(dims, block)?;
    gpu_waterz_core::Thresholds::new(&args.thresholds)?;
    let gpu = match args.backend {
        Backend::Cpu => None,
        Backend::Gpu => Some(gpu_waterz::Gpu::new(0).context("--backend gpu needs a CUDA GPU")?),
        Backend::Auto => gpu_waterz::Agglomeration::gpu_for(&gpu_waterz::Config::new(&args.thresholds))?,
    };
    let folder = OutputFolder::begin(&args.out, args.overwrite, false)?;
    let writer = ContainerWriter::new(Container::Zarr, folder.path(), args.label_type, Map::new(), 3)?;
    let store = writer.zstd_zarr_store().context("the blockwise output is a zarr v3 group")?;
    let sink = ZarrSink {
        writer: &writer,
        store,
        dims,
        chunks: block,
        thresholds: &args.thresholds,
        write_fragments: args.write_fragments,
        compact: args.compact_chunks,
        outputs: OnceLock::new(),
        prepared: Mutex::new(HashMap::new()),
    };
    let on_gpu = gpu.is_some();
    let blocks_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .thread_name(|i| format!("gpu-waterz-blocks-{i}"))
        .start_handler(move |_| {
            if on_gpu {
                gpu_waterz_runtime::lower_thread_priority(BLOCK_THREAD_NICE);
            }
        })
        .build()
        .context("starting the blocks' threads")?;
    // The GPU's turn threads are started here, at the process's priority
    // (threads inherit their starter's), not from a block thread.
    let gpu_steps = gpu.as_ref().map(|gpu| GpuSteps::new(gpu.clone())).transpose()?;
    let (summary, peak_device_bytes, gpu_busy) = blocks_pool.install(|| -> Result<_> {
        Ok(match &gpu_steps {
            Some(steps) => {
                let summary = decode_blocks_with(&source, block, params, &args.thresholds, &sink, steps)?;
                let busy: Map<String, serde_json::Value> =
                    steps.busy_seconds().into_iter().map(|(step, s)| (step.to_string(), s.into())).collect();
                (summary, steps.peak_device_bytes(), Some(busy))
            }
            None => (decode_blocks_with(&source, block, params, &args.thresholds, &sink, &CpuSteps)?, None, None),
        })
    })?;
    let mut report = json!({
        "backend": if gpu.is_some() { "gpu" } else { "cpu" },
        "peak_device_bytes": peak_device_bytes,
        "gpu_busy_seconds": gpu_busy,
        "shape": dims,
        "block": block,
        "n_fragments": summary.n_fragments,
        "thresholds": summary.thresholds,
        "open_voxels": summary.open_voxels,
        "n_edges": summary.n_edges,
        "seconds": start.elapsed().as_secs_f64(),
        "step_seconds": step_seconds(&summary.seconds),
    });
    let narrow = sink.outputs.get().is_some_and(|o| o.narrow);
    drop(sink);
    report["dtype"] = (if narrow { "uint32" } else { "uint64" }).into();
    writer.finish(&report)?;
    folder.commit(args.fsync)?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// How much lower the blocks' threads run than the GPU's turn threads
/// with the GPU (a nice value added to the process's): when every core is
/// busy with blocks, the host's share of a GPU turn (its copies through
/// pinned memory) still gets the cores at once; the GPU waits on it, and
/// every block waits on the GPU. (The thread that hands a block to the turn
/// is started by the block's thread and runs at its priority, so the
/// hand-over between turns may still wait for a core.)
const BLOCK_THREAD_NICE: i32 = 10;

/// The blockwise steps' seconds as a JSON object, in the steps' order.
pub fn step_seconds(s: &gpu_waterz_blockwise::StepSeconds) -> serde_json::Value {
    json!({
        "local_plateaus": s.local_plateaus,
        "settle_open_plateaus": s.settle_open_plateaus,
        "local_basins": s.local_basins,
        "fragment_ids": s.fragment_ids,
        "block_edges": s.block_edges,
        "merge": s.merge,
        "relabel_and_write": s.relabel_and_write,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The labels of `runs`, one per voxel.
    fn expand(runs: &ValueRuns) -> Vec<u64> {
        runs.runs().flat_map(|(label, n)| std::iter::repeat_n(label, n as usize)).collect()
    }

    fn pairs(runs: &ValueRuns) -> Vec<(u64, u64)> {
        runs.runs().collect()
    }

    /// [`chunk_runs`] into a new buffer.
    fn chunk_runs(
        block: [u64; 3],
        chunk: [u64; 3],
        runs: impl IntoIterator<Item = (u64, u64)>,
    ) -> gpu_waterz_blockwise::Result<ValueRuns> {
        // Something there already, which the call clears.
        let mut out = ValueRuns::default();
        out.push(9, 3);
        super::chunk_runs(block, chunk, runs, &mut out)?;
        Ok(out)
    }

    /// uint8 files (npy, zarr, HDF5) give their codes, which read as their
    /// float32 values; float32 files give none.
    #[test]
    fn uint8_sources_give_codes_that_read_as_their_values() {
        let dir = std::env::temp_dir().join(format!("gpu-waterz-blockwise-codes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let shape = [3usize, 9, 10, 11];
        let codes = ndarray::Array4::from_shape_fn(shape, |(c, z, y, x)| ((c * 97 + z * 31 + y * 7 + x) % 256) as u8);
        let flat: Vec<u8> = codes.iter().copied().collect();
        let floats = codes.mapv(gpu_waterz_core::affinities::u8_affinity);
        let npy = dir.join("u.npy");
        gpu_waterz_cli::io::write_npy(&npy, &codes.view()).unwrap();
        let npy_f32 = dir.join("f.npy");
        gpu_waterz_cli::io::write_npy(&npy_f32, &floats.view()).unwrap();
        let root = dir.join("u.zarr");
        let store = Arc::new(zarrs::filesystem::FilesystemStore::new(&root).unwrap());
        let array = zarrs::array::ArrayBuilder::new(
            shape.iter().map(|&n| n as u64).collect::<Vec<_>>(),
            vec![2, 4, 3, 5],
            zarrs::array::data_type::uint8(),
            zarrs::array::FillValue::from(0u8),
        )
        .build(store, "/affs")
        .unwrap();
        array.store_metadata().unwrap();
        array.store_array_subset(&array.subset_all(), &flat[..]).unwrap();
        let h5 = dir.join("u.h5");
        let mut builder = hdf5_pure::FileBuilder::new();
        builder.create_dataset("u").with_u8_data(&flat).with_shape(&[3, 9, 10, 11]).with_chunks(&[3, 4, 4, 4]);
        builder.write(&h5).unwrap();
        let sources = [
            Source::Npy(NpyFile::open(&npy).unwrap()),
            Source::Zarr(ZarrArray::open(&root, "/affs").unwrap().expect("an array")),
            Source::Hdf5(ChunkedDataset::open(&h5, "u").unwrap().expect("a chunked dataset")),
        ];
        let regions = [
            Block { lo: [0; 3], hi: [9, 10, 11] },
            Block { lo: [2, 3, 4], hi: [7, 8, 9] },
            Block { lo: [8, 0, 10], hi: [9, 10, 11] },
        ];
        for source in &sources {
            for region in regions {
                let got = source.read_codes(region).unwrap().expect("codes of a uint8 source");
                let want = source.read(region).unwrap();
                assert_eq!(got.shape(), want.shape(), "{region:?}");
                assert_eq!(got.mapv(gpu_waterz_core::affinities::u8_affinity), want, "{region:?}");
            }
        }
        let float_source = Source::Npy(NpyFile::open(&npy_f32).unwrap());
        assert!(float_source.read_codes(regions[1]).unwrap().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn chunk_runs_pad_a_block_at_the_volumes_edge() {
        // A block of 2 x 2 x 3 (labels 1..=12) in a chunk of 3 x 3 x 4.
        let block: Vec<(u64, u64)> = (1..=12).map(|v| (v, 1)).collect();
        let runs = chunk_runs([2, 2, 3], [3, 3, 4], block).unwrap();
        let mut want = vec![0u64; 36];
        for (i, v) in (1..=12u64).enumerate() {
            let (z, y, x) = (i / 6, i / 3 % 2, i % 3);
            want[z * 12 + y * 4 + x] = v;
        }
        assert_eq!(expand(&runs), want);
        // Neighbouring runs of one label are joined, across rows too.
        let runs = chunk_runs([2, 2, 3], [2, 2, 3], [(5, 4), (5, 2), (6, 6)]).unwrap();
        assert_eq!(pairs(&runs), vec![(5, 6), (6, 6)]);
        // A block of one label in a larger chunk: the padding splits it.
        let runs = chunk_runs([1, 2, 2], [1, 2, 3], [(7, 4)]).unwrap();
        assert_eq!(pairs(&runs), vec![(7, 2), (0, 1), (7, 2), (0, 1)]);
    }

    #[test]
    fn chunk_runs_that_do_not_fill_the_block_are_errors() {
        assert!(chunk_runs([2, 2, 2], [2, 2, 2], [(1, 7)]).is_err());
        assert!(chunk_runs([2, 2, 2], [2, 2, 2], [(1, 9)]).is_err());
        assert!(chunk_runs([2, 2, 2], [2, 2, 2], [(1, 8)]).is_ok());
        // The same in a chunk that pads the block.
        assert!(chunk_runs([2, 2, 2], [3, 2, 3], [(1, 7)]).is_err());
        assert!(chunk_runs([2, 2, 2], [3, 2, 3], [(1, 9)]).is_err());
        assert_eq!(
            pairs(&chunk_runs([2, 2, 2], [3, 2, 3], [(1, 8)]).unwrap()),
            vec![(1, 2), (0, 1), (1, 2), (0, 1), (1, 2), (0, 1), (1, 2), (0, 7)]
        );
    }
}

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
use gpu_waterz_cli::io::{ChunkedDataset, ElementType, NpyFile, StagingStore, VolumeSource, ZarrArray};
use gpu_waterz_core::WatershedParams;
use gpu_waterz_runtime::Gpu;
use gpu_waterz_watershed::gpu::DeviceAffinities;
use ndarray::{Array3, Array4, ArrayView3};
use serde_json::{json, Map};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;
use zarrs::array::{Array, ArraySubset, CodecOptions};

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
        let [z, y, x] = region.shape().map(|n| n as usize);
        let [lz, ly, lx] = region.lo.map(|n| n as usize);
        let (lo, hi) = ([0, lz, ly, lx], [3, lz + z, ly + y, lx + x]);
        let values = match self {
            Source::Zarr(array) => array.read_region_f32(lo, hi),
            Source::Npy(file) => file.read_region_f32(lo, hi),
            Source::Hdf5(dataset) => dataset.read_region_f32(lo, hi),
            Source::Implicit(generated) => return generated.read(region),
        };
        let values = values.map_err(|e| BlockwiseError::Io(e.to_string()))?;
        Array4::from_shape_vec((3, z, y, x), values).map_err(|e| BlockwiseError::Io(e.to_string()))
    }

    /// A generated volume is made on the GPU when the steps run there.
    fn read_on_gpu(&self, gpu: &Gpu, region: Block) -> gpu_waterz_blockwise::Result<Option<DeviceAffinities>> {
        match self {
            Source::Implicit(generated) => generated.read_on_gpu(gpu, region),
            _ => Ok(None),
        }
    }
}

/// The output arrays, made once the number of fragments is known
/// ([`BlockSink::begin`]: uint32 when every label fits and the label type
/// allows it); each block is one chunk of each (blocks write apart, and
/// the blocks in flight keep the cores busy compressing).
struct ZarrSink<'w> {
    writer: &'w ContainerWriter,
    dims: [u64; 3],
    chunks: [u64; 3],
    thresholds: &'w [f64],
    write_fragments: bool,
    outputs: OnceLock<Outputs>,
    /// Label buffers that blocks relabel into, taken and given back from
    /// block to block: pages written once cost less than fresh ones (the
    /// kernel clears each new page), which cost more than the relabelling.
    wide: Mutex<Vec<Vec<u64>>>,
    narrow: Mutex<Vec<Vec<u32>>>,
}

/// The arrays of a [`ZarrSink`].
struct Outputs {
    /// None without `--write-fragments`.
    fragments: Option<Array<StagingStore>>,
    segmentations: Vec<Array<StagingStore>>,
    /// Whether they are uint32.
    narrow: bool,
}

/// Stores `values` as `block` of `array` (a plain file write per chunk:
/// [`StagingStore`]); a chunk of fill values is written too (zarr's
/// readers take either; not writing it would cost a pass over every chunk
/// to find out).
fn store<T: zarrs::array::Element>(
    array: &Array<StagingStore>,
    block: Block,
    values: &[T],
) -> gpu_waterz_blockwise::Result<()> {
    let subset = ArraySubset::new_with_ranges(&std::array::from_fn::<_, 3, _>(|a| block.lo[a]..block.hi[a]));
    let options = CodecOptions::default().with_store_empty_chunks(true);
    array
        .store_array_subset_opt(&subset, values, &options)
        .map_err(|e| BlockwiseError::Io(format!("writing {block:?}: {e}")))
}

/// Fills a buffer of `pool` with each of `labels_of` over `runs` and
/// stores it in the matching array, one array at a time.
fn fill_and_store<T: zarrs::array::Element + Copy + Default + Send + Sync>(
    pool: &Mutex<Vec<Vec<T>>>,
    block: Block,
    runs: &ComponentRuns,
    arrays: &[&Array<StagingStore>],
    labels_of: &[Vec<T>],
) -> gpu_waterz_blockwise::Result<()> {
    let taken = pool.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop();
    let mut buffer = taken.unwrap_or_default();
    buffer.resize(runs.shape().iter().product(), T::default());
    let (mut filling, mut storing) = (0.0, 0.0);
    let written = arrays.iter().zip(labels_of).try_for_each(|(array, label_of)| {
        let start = std::time::Instant::now();
        runs.fill_labels(label_of, &mut buffer)?;
        filling += start.elapsed().as_secs_f64();
        let start = std::time::Instant::now();
        let stored = store(array, block, &buffer);
        storing += start.elapsed().as_secs_f64();
        stored
    });
    tracing::debug!(?block, filling, storing, "block filled from runs and stored");
    pool.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(buffer);
    written
}

impl ZarrSink<'_> {
    fn outputs(&self) -> gpu_waterz_blockwise::Result<&Outputs> {
        self.outputs.get().ok_or_else(|| BlockwiseError::Io("a block came before the output arrays were made".into()))
    }

    fn arrays(outputs: &Outputs) -> Vec<&Array<StagingStore>> {
        outputs.fragments.iter().chain(&outputs.segmentations).collect()
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

    /// Relabels into a reused buffer, one array at a time, each stored as
    /// soon as it is made.
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

    /// Each array's labels filled from the runs straight into a pooled
    /// buffer (no components array in between: step 7 is bound by the
    /// host's memory traffic).
    fn write_runs(
        &self,
        block: Block,
        runs: &ComponentRuns,
        ids: &[u64],
        tables: &[Vec<u64>],
    ) -> gpu_waterz_blockwise::Result<()> {
        let outputs = self.outputs()?;
        if runs.shape().map(|n| n as u64) != block.shape() {
            return Err(BlockwiseError::Io(format!("runs of shape {:?} for block {block:?}", runs.shape())));
        }
        let mut labels_of = Vec::with_capacity(tables.len() + 1);
        if outputs.fragments.is_some() {
            labels_of.push(ids.to_vec());
        }
        for table in tables {
            labels_of.push(component_labels(ids, table)?);
        }
        let arrays = Self::arrays(outputs);
        if outputs.narrow {
            // Every label is at most the number of fragments (`begin`).
            let labels_of: Vec<Vec<u32>> = labels_of.iter().map(|l| l.iter().map(|&v| v as u32).collect()).collect();
            fill_and_store(&self.narrow, block, runs, &arrays, &labels_of)
        } else {
            fill_and_store(&self.wide, block, runs, &arrays, &labels_of)
        }
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
        for (array, values) in Self::arrays(outputs).into_iter().zip(views) {
            let values = values.as_standard_layout();
            let values = values.as_slice().expect("a standard layout");
            if outputs.narrow {
                let narrow = values
                    .iter()
                    .map(|&v| u32::try_from(v))
                    .collect::<Result<Vec<u32>, _>>()
                    .map_err(|_| BlockwiseError::Io(format!("block {block:?}: a label does not fit uint32")))?;
                store(array, block, &narrow)?;
            } else {
                store(array, block, values)?;
            }
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
    let sink = ZarrSink {
        writer: &writer,
        dims,
        chunks: block,
        thresholds: &args.thresholds,
        write_fragments: args.write_fragments,
        outputs: OnceLock::new(),
        wide: Mutex::new(Vec::new()),
        narrow: Mutex::new(Vec::new()),
    };
    let (summary, peak_device_bytes, gpu_busy) = match &gpu {
        Some(gpu) => {
            let steps = GpuSteps::new(gpu.clone())?;
            let summary = decode_blocks_with(&source, block, params, &args.thresholds, &sink, &steps)?;
            let busy: Map<String, serde_json::Value> =
                steps.busy_seconds().into_iter().map(|(step, s)| (step.to_string(), s.into())).collect();
            (summary, steps.peak_device_bytes(), Some(busy))
        }
        None => (decode_blocks_with(&source, block, params, &args.thresholds, &sink, &CpuSteps)?, None, None),
    };
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

//! `gpu_waterz.blockwise`'s native side: each step of
//! `gpu_waterz_blockwise` over numpy arrays, so that Python can run the
//! per-block steps as tasks anywhere (Dask workers) and the global ones
//! once. Every call releases the GIL while it computes.

use gpu_waterz_blockwise::{
    decode, decode_with, fragment_ids, region_graph, settle_open_plateaus, AffinitySource, BasinFaces, BasinSummary,
    Block, BlockGrid, BlockwiseError, ComponentRuns, CpuSteps, DecodeSteps, EdgeList, ErrorKind, GpuSteps,
    ImplicitSource, OpenVoxels, PackedRuns,
};
use gpu_waterz_core::WatershedParams;
use ndarray::{Array4, ArrayView2, ArrayView4, Slice};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArray3, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3, PyReadonlyArray4,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

fn err(e: BlockwiseError) -> PyErr {
    match e.kind() {
        ErrorKind::Invalid | ErrorKind::Input => PyValueError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

fn block(lo: [u64; 3], hi: [u64; 3]) -> Block {
    Block { lo, hi }
}

type Array1<'py, T> = Bound<'py, PyArray1<T>>;

/// One block's plateaus: directions, open voxels' indices and masks.
type Plateaus<'py> = (Bound<'py, PyArray3<u8>>, Array1<'py, u64>, Array1<'py, u8>);

/// One block's edges as Python passes them back.
type EdgeColumns<'py> =
    (PyReadonlyArray1<'py, u64>, PyReadonlyArray1<'py, u64>, PyReadonlyArray1<'py, u64>, PyReadonlyArray1<'py, u64>);

/// A block's `(3, z, y, x)` affinities as Python passes them: float32, or
/// uint8 codes meaning `k / 255`, which the GPU's steps upload as they are
/// (a quarter of the bytes) and the CPU's read as float32.
#[derive(FromPyObject)]
pub(crate) enum Affinities<'py> {
    F32(PyReadonlyArray4<'py, f32>),
    U8(PyReadonlyArray4<'py, u8>),
}

impl Affinities<'_> {
    fn view(&self) -> AffinityView<'_> {
        match self {
            Affinities::F32(values) => AffinityView::F32(values.as_array()),
            Affinities::U8(codes) => AffinityView::U8(codes.as_array()),
        }
    }
}

/// [`Affinities`] borrowed.
#[derive(Clone, Copy)]
enum AffinityView<'a> {
    F32(ArrayView4<'a, f32>),
    U8(ArrayView4<'a, u8>),
}

impl AffinityView<'_> {
    fn shape(&self) -> &[usize] {
        match self {
            AffinityView::F32(values) => values.shape(),
            AffinityView::U8(codes) => codes.shape(),
        }
    }
}

/// Step 1 for the block `lo..hi` of a volume of `dims`: `affinities` are
/// the `(3, z, y, x)` affinities (float32, or uint8 codes `k / 255`) of
/// its halo as the backend reads it (one voxel below on the CPU, two on
/// the GPU; two above; clipped). Returns the
/// directions (uint8, the block's shape), the open voxels' indices (uint64)
/// and masks (uint8).
#[pyfunction]
#[pyo3(signature = (affinities, dims, lo, hi, aff_threshold_low, aff_threshold_high, backend="cpu", ordinal=0))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn blockwise_local_plateaus<'py>(
    py: Python<'py>,
    affinities: Affinities<'py>,
    dims: [u64; 3],
    lo: [u64; 3],
    hi: [u64; 3],
    aff_threshold_low: f32,
    aff_threshold_high: f32,
    backend: &str,
    ordinal: usize,
) -> PyResult<Plateaus<'py>> {
    let view = affinities.view();
    let params = WatershedParams { aff_threshold_low, aff_threshold_high };
    let steps = Steps::new(backend, ordinal)?;
    let out = py
        .detach(|| {
            let (steps, b) = (steps.get(), block(lo, hi));
            match view {
                AffinityView::F32(values) => steps.local_plateaus(dims, b, values, params),
                AffinityView::U8(codes) => steps.local_plateaus_codes(dims, b, codes, params),
            }
        })
        .map_err(err)?;
    Ok((out.bits.into_pyarray(py), out.open.index.into_pyarray(py), out.open.mask.into_pyarray(py)))
}

/// The generated volume `ImplicitCells(dims, seed, cell)` (no bait) as a
/// source.
fn implicit_source(seed: u64, cell: [usize; 3], dims: [u64; 3]) -> PyResult<ImplicitSource> {
    use gpu_waterz_core::generate::{GeneratorParams, ImplicitCells};
    let field = ImplicitCells { seed, cell: (cell[0], cell[1], cell[2]) };
    let params = GeneratorParams { seed, weak_spots: 0, false_walls: 0, ..GeneratorParams::default() };
    ImplicitSource::new(field, params, dims).map_err(err)
}

/// Step 1 for the block `lo..hi` of the generated volume
/// `ImplicitCells(dims, seed, cell)`: its affinities made here, on the GPU
/// when the steps run there (`backend="gpu"`, CUDA device `ordinal`), else
/// on the host. Returns what `blockwise_local_plateaus` returns.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (seed, cell, dims, lo, hi, aff_threshold_low, aff_threshold_high, backend="cpu", ordinal=0))]
pub(crate) fn blockwise_local_plateaus_implicit<'py>(
    py: Python<'py>,
    seed: u64,
    cell: [usize; 3],
    dims: [u64; 3],
    lo: [u64; 3],
    hi: [u64; 3],
    aff_threshold_low: f32,
    aff_threshold_high: f32,
    backend: &str,
    ordinal: usize,
) -> PyResult<Plateaus<'py>> {
    let source = implicit_source(seed, cell, dims)?;
    let params = WatershedParams { aff_threshold_low, aff_threshold_high };
    let steps = Steps::new(backend, ordinal)?;
    let out = py.detach(|| steps.get().local_plateaus_from(&source, dims, block(lo, hi), params)).map_err(err)?;
    Ok((out.bits.into_pyarray(py), out.open.index.into_pyarray(py), out.open.mask.into_pyarray(py)))
}

/// Step 2: the open voxels of every block (`indices[b]`, `masks[b]`) of a
/// volume of `dims`; returns each block's settled directions.
#[pyfunction]
pub(crate) fn blockwise_settle<'py>(
    py: Python<'py>,
    dims: [u64; 3],
    indices: Vec<PyReadonlyArray1<'py, u64>>,
    masks: Vec<PyReadonlyArray1<'py, u8>>,
) -> PyResult<Vec<Array1<'py, u8>>> {
    if indices.len() != masks.len() {
        return Err(PyValueError::new_err("one mask array per index array is needed"));
    }
    let open: Vec<OpenVoxels> = indices
        .iter()
        .zip(&masks)
        .map(|(i, m)| Ok(OpenVoxels { index: i.as_slice()?.to_vec(), mask: m.as_slice()?.to_vec() }))
        .collect::<PyResult<_>>()?;
    let refs: Vec<&OpenVoxels> = open.iter().collect();
    let settled = py.detach(|| settle_open_plateaus(dims, &refs)).map_err(err)?;
    Ok(settled.into_iter().map(|s| s.into_pyarray(py)).collect())
}

/// The basins of one block with the components packed
/// ([`PackedRuns`]'s bytes, about a twentieth of four bytes per voxel).
type PackedBasins<'py> =
    (Bound<'py, PyBytes>, Array1<'py, u64>, Array1<'py, u64>, u64, Vec<Array1<'py, u32>>, Vec<Array1<'py, u8>>);

/// Step 3 for the block `lo..hi`: its directions and open voxels from
/// step 1 and their settled directions from step 2. Returns the components
/// packed (their runs, `DecodeSteps::local_basin_runs`, on the GPU
/// run-length encoded there, through zstd: bytes that
/// `blockwise_edges_packed`, `blockwise_edges_implicit_packed` and
/// `blockwise_labels_packed` take back with the block's `lo` and `hi`),
/// their smallest voxel indices and sizes, the background count, and the
/// six faces' components and directions.
#[pyfunction]
#[pyo3(signature = (dims, lo, hi, bits, open_index, open_mask, settled, backend="cpu", ordinal=0))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn blockwise_basins_packed<'py>(
    py: Python<'py>,
    dims: [u64; 3],
    lo: [u64; 3],
    hi: [u64; 3],
    bits: PyReadonlyArray3<'py, u8>,
    open_index: PyReadonlyArray1<'py, u64>,
    open_mask: PyReadonlyArray1<'py, u8>,
    settled: PyReadonlyArray1<'py, u8>,
    backend: &str,
    ordinal: usize,
) -> PyResult<PackedBasins<'py>> {
    let bits = bits.as_array().to_owned();
    let open = OpenVoxels { index: open_index.as_slice()?.to_vec(), mask: open_mask.as_slice()?.to_vec() };
    let settled = settled.as_slice()?;
    let steps = Steps::new(backend, ordinal)?;
    let (packed, out) = py
        .detach(|| {
            let out = steps.get().local_basin_runs(dims, block(lo, hi), bits, &open, settled)?;
            Ok::<_, BlockwiseError>((PackedRuns::pack(&out.components)?, out))
        })
        .map_err(err)?;
    let BasinFaces { components, bits } = out.faces;
    Ok((
        PyBytes::new(py, packed.bytes()),
        out.component_min.into_pyarray(py),
        out.component_sizes.into_pyarray(py),
        out.background,
        components.into_iter().map(|c| c.into_pyarray(py)).collect(),
        bits.into_iter().map(|b| b.into_pyarray(py)).collect(),
    ))
}

/// The runs of the block `lo..hi` from [`blockwise_basins_packed`]'s bytes.
fn unpack(lo: [u64; 3], hi: [u64; 3], packed: &[u8]) -> Result<ComponentRuns, BlockwiseError> {
    let b = block(lo, hi);
    if (0..3).any(|a| lo[a] > hi[a]) {
        return Err(BlockwiseError::Invalid(format!("block {lo:?}..{hi:?} is reversed")));
    }
    let s = b.shape();
    PackedRuns::from_bytes([s[0] as usize, s[1] as usize, s[2] as usize], packed.to_vec()).runs()
}

/// A block's own `(3, z, y, x)` affinities as the source of step 5 (the
/// block's regions only); uint8 codes are given as codes.
struct BlockValues<'a> {
    dims: [u64; 3],
    block: Block,
    values: AffinityView<'a>,
}

impl BlockValues<'_> {
    /// `array`'s part that holds `region`, which must lie inside the block
    /// (`array` is the block's, as the caller checked).
    fn part<T: Clone>(&self, array: ArrayView4<'_, T>, region: Block) -> gpu_waterz_blockwise::Result<Array4<T>> {
        let inside = (0..3).all(|a| self.block.lo[a] <= region.lo[a] && region.hi[a] <= self.block.hi[a]);
        if !inside {
            return Err(BlockwiseError::Invalid(format!(
                "region {region:?} lies outside the block {:?} whose affinities were given",
                self.block
            )));
        }
        Ok(array
            .slice_each_axis(|axis| match axis.axis.index() {
                0 => Slice::from(..),
                a => Slice::from(
                    (region.lo[a - 1] - self.block.lo[a - 1]) as usize
                        ..(region.hi[a - 1] - self.block.lo[a - 1]) as usize,
                ),
            })
            .to_owned())
    }
}

impl AffinitySource for BlockValues<'_> {
    fn dims(&self) -> [u64; 3] {
        self.dims
    }

    fn read(&self, region: Block) -> gpu_waterz_blockwise::Result<Array4<f32>> {
        match self.values {
            AffinityView::F32(values) => self.part(values, region),
            AffinityView::U8(codes) => Ok(self.part(codes, region)?.mapv(gpu_waterz_core::affinities::u8_affinity)),
        }
    }

    fn read_codes(&self, region: Block) -> gpu_waterz_blockwise::Result<Option<Array4<u8>>> {
        match self.values {
            AffinityView::F32(_) => Ok(None),
            AffinityView::U8(codes) => self.part(codes, region).map(Some),
        }
    }
}

/// Step 5 for the block `lo..hi`: its packed components
/// ([`blockwise_basins_packed`]) and table from steps 3 and 4, the
/// fragments of the layer before it along each axis (None at the volume's
/// start), and its own `(3, z, y, x)` affinities (float32, or uint8 codes
/// `k / 255`, uploaded as codes on the GPU); the faces inside the
/// block counted on the CPU (`backend="cpu"`) or on the GPU (`"gpu"`, CUDA
/// device `ordinal`; `DecodeSteps::block_edge_runs_from`), the same pairs.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (dims, lo, hi, packed, ids, lower, affinities, backend="cpu", ordinal=0))]
pub(crate) fn blockwise_edges_packed<'py>(
    py: Python<'py>,
    dims: [u64; 3],
    lo: [u64; 3],
    hi: [u64; 3],
    packed: &[u8],
    ids: PyReadonlyArray1<'py, u64>,
    lower: [Option<PyReadonlyArray1<'py, u64>>; 3],
    affinities: Affinities<'py>,
    backend: &str,
    ordinal: usize,
) -> PyResult<Edges<'py>> {
    let ids = ids.as_slice()?;
    let lower = layers(&lower)?;
    let (b, values) = (block(lo, hi), affinities.view());
    let s = b.shape();
    if values.shape() != [3, s[0] as usize, s[1] as usize, s[2] as usize] {
        return Err(PyValueError::new_err(format!(
            "affinities {:?} must be 3 channels of the block's {s:?}",
            values.shape()
        )));
    }
    let steps = Steps::new(backend, ordinal)?;
    let out = py
        .detach(|| {
            let runs = unpack(lo, hi, packed)?;
            let source = BlockValues { dims, block: b, values };
            steps.get().block_edge_runs_from(&source, dims, b, &runs, ids, lower)
        })
        .map_err(err)?;
    Ok((out.u.into_pyarray(py), out.v.into_pyarray(py), out.count.into_pyarray(py), out.sum.into_pyarray(py)))
}

/// Step 5 for the block `lo..hi` of the generated volume
/// `ImplicitCells(dims, seed, cell)`, its affinities made here (on the GPU
/// with `backend="gpu"`); otherwise as [`blockwise_edges_packed`].
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (seed, cell, dims, lo, hi, packed, ids, lower, backend="cpu", ordinal=0))]
pub(crate) fn blockwise_edges_implicit_packed<'py>(
    py: Python<'py>,
    seed: u64,
    cell: [usize; 3],
    dims: [u64; 3],
    lo: [u64; 3],
    hi: [u64; 3],
    packed: &[u8],
    ids: PyReadonlyArray1<'py, u64>,
    lower: [Option<PyReadonlyArray1<'py, u64>>; 3],
    backend: &str,
    ordinal: usize,
) -> PyResult<Edges<'py>> {
    let source = implicit_source(seed, cell, dims)?;
    let ids = ids.as_slice()?;
    let lower = layers(&lower)?;
    let steps = Steps::new(backend, ordinal)?;
    let out = py
        .detach(|| {
            let runs = unpack(lo, hi, packed)?;
            steps.get().block_edge_runs_from(&source, dims, block(lo, hi), &runs, ids, lower)
        })
        .map_err(err)?;
    Ok((out.u.into_pyarray(py), out.v.into_pyarray(py), out.count.into_pyarray(py), out.sum.into_pyarray(py)))
}

/// The labels of the block `lo..hi` from [`blockwise_basins_packed`]'s
/// bytes, for each row `t` of `tables` (`(k, components)`):
/// `tables[t, component]` per voxel, as `(k, z, y, x)`. The runs are
/// unpacked once for every table.
fn labels_packed<T: Copy + Default + Send + Sync>(
    lo: [u64; 3],
    hi: [u64; 3],
    packed: &[u8],
    tables: ArrayView2<'_, T>,
) -> Result<Array4<T>, BlockwiseError> {
    let runs = unpack(lo, hi, packed)?;
    let [z, y, x] = runs.shape();
    let n = z * y * x;
    let mut out = vec![T::default(); tables.nrows() * n];
    for (table, labels) in tables.outer_iter().zip(out.chunks_mut(n.max(1))) {
        let table = table.as_standard_layout();
        runs.fill_labels(table.as_slice().expect("a standard layout is contiguous"), labels)?;
    }
    Ok(Array4::from_shape_vec((tables.nrows(), z, y, x), out).expect("one label per voxel and table"))
}

/// Tables from component to label, one per row, as Python passes them
/// (the output's element type).
#[derive(FromPyObject)]
pub(crate) enum LabelTables<'py> {
    Narrow(PyReadonlyArray2<'py, u32>),
    Wide(PyReadonlyArray2<'py, u64>),
}

/// Step 7's labels of the block `lo..hi` from [`blockwise_basins_packed`]'s
/// bytes, for every row of `tables` (`(k, components)`, uint32 or uint64):
/// `tables[t, component]` per voxel, filled from the runs (unpacked once),
/// as a `(k, z, y, x)` array of the tables' type.
#[pyfunction]
pub(crate) fn blockwise_labels_packed<'py>(
    py: Python<'py>,
    lo: [u64; 3],
    hi: [u64; 3],
    packed: &[u8],
    tables: LabelTables<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match tables {
        LabelTables::Narrow(tables) => {
            let tables = tables.as_array();
            py.detach(|| labels_packed(lo, hi, packed, tables)).map_err(err)?.into_pyarray(py).into_any()
        }
        LabelTables::Wide(tables) => {
            let tables = tables.as_array();
            py.detach(|| labels_packed(lo, hi, packed, tables)).map_err(err)?.into_pyarray(py).into_any()
        }
    })
}

/// One block's summary as [`blockwise_basins_packed`] returns it (less
/// the components).
type Summary<'py> = (
    PyReadonlyArray1<'py, u64>,
    PyReadonlyArray1<'py, u64>,
    u64,
    Vec<PyReadonlyArray1<'py, u32>>,
    Vec<PyReadonlyArray1<'py, u8>>,
);

/// Step 4 over the blocks of `block_shape` of a volume of `dims`
/// (`summaries` in block order). Returns the number of fragments, each
/// block's table from component to fragment, and the fragment sizes.
#[pyfunction]
pub(crate) fn blockwise_fragment_ids<'py>(
    py: Python<'py>,
    dims: [u64; 3],
    block_shape: [u64; 3],
    summaries: Vec<Summary<'py>>,
) -> PyResult<(u64, Vec<Array1<'py, u64>>, Array1<'py, u64>)> {
    let grid = BlockGrid::new(dims, block_shape).map_err(err)?;
    let mut owned = Vec::with_capacity(summaries.len());
    for (minima, sizes, background, faces, bits) in &summaries {
        if faces.len() != 6 || bits.len() != 6 {
            return Err(PyValueError::new_err("each block has six faces"));
        }
        let mut face_components: [Vec<u32>; 6] = Default::default();
        let mut face_bits: [Vec<u8>; 6] = Default::default();
        for d in 0..6 {
            face_components[d] = faces[d].as_slice()?.to_vec();
            face_bits[d] = bits[d].as_slice()?.to_vec();
        }
        let faces = BasinFaces { components: face_components, bits: face_bits };
        owned.push((minima.as_slice()?.to_vec(), sizes.as_slice()?.to_vec(), *background, faces));
    }
    let views: Vec<BasinSummary<'_>> = owned
        .iter()
        .map(|(m, s, b, f)| BasinSummary { component_min: m, component_sizes: s, background: *b, faces: f })
        .collect();
    let out = py.detach(|| fragment_ids(&grid, &views)).map_err(err)?;
    Ok((out.n_fragments, out.ids.into_iter().map(|i| i.into_pyarray(py)).collect(), out.sizes.into_pyarray(py)))
}

/// One block's region-graph part: pairs `u < v`, face counts and
/// fixed-point sums.
type Edges<'py> = (Array1<'py, u64>, Array1<'py, u64>, Array1<'py, u64>, Array1<'py, u64>);

/// Step 6: every block's edges merged up to each threshold (ascending),
/// by waterz's serial merging in exact arithmetic (`backend="cpu"`) or by
/// the GPU's ParHAC (`"gpu"`, on CUDA device `ordinal`), as the
/// whole-volume decode on that backend merges. Returns a `(thresholds,
/// n_fragments + 1)` uint64 table: the segment of each fragment per
/// threshold.
#[pyfunction]
#[pyo3(signature = (n_fragments, edges, thresholds, backend="cpu", ordinal=0))]
pub(crate) fn blockwise_merge<'py>(
    py: Python<'py>,
    n_fragments: u64,
    edges: Vec<EdgeColumns<'py>>,
    thresholds: Vec<f64>,
    backend: &str,
    ordinal: usize,
) -> PyResult<Bound<'py, PyArray2<u64>>> {
    let lists: Vec<EdgeList> = edges
        .iter()
        .map(|(u, v, c, s)| {
            Ok(EdgeList {
                u: u.as_slice()?.to_vec(),
                v: v.as_slice()?.to_vec(),
                count: c.as_slice()?.to_vec(),
                sum: s.as_slice()?.to_vec(),
            })
        })
        .collect::<PyResult<_>>()?;
    let refs: Vec<&EdgeList> = lists.iter().collect();
    let steps = Steps::new(backend, ordinal)?;
    let (_, tables) = py
        .detach(|| {
            let (graph, stats) = region_graph(n_fragments, &refs)?;
            steps.get().merge(n_fragments, graph, stats, &thresholds)
        })
        .map_err(err)?;
    let width = n_fragments as usize + 1;
    let flat: Vec<u64> = tables.into_iter().flatten().collect();
    let table = ndarray::Array2::from_shape_vec((thresholds.len(), width), flat)
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(table.into_pyarray(py))
}

/// What [`blockwise_decode`] gives: the fragments, one segmentation per
/// threshold, the number of fragments, the open voxels and the region
/// graph's pairs.
type DecodedVolume<'py> = (Bound<'py, PyArray3<u64>>, Vec<Bound<'py, PyArray3<u64>>>, u64, u64, u64);

/// The GPU that `backend` (`"cpu"`, `"gpu"`, `"auto"`) names for the
/// blocks' steps: none for the CPU, CUDA device `ordinal` for the GPU (an
/// error without one), and for `"auto"` the GPU the whole-volume decode
/// would choose, if any.
fn steps_gpu(backend: &str, ordinal: usize, thresholds: &[f64]) -> PyResult<Option<gpu_waterz::Gpu>> {
    let gpu_err = |e: gpu_waterz::Error| crate::to_py_err(e);
    match backend {
        "cpu" => Ok(None),
        "gpu" => Ok(Some(gpu_waterz::Gpu::new(ordinal).map_err(|e| gpu_err(e.into()))?)),
        "auto" => gpu_waterz::Agglomeration::gpu_for(&gpu_waterz::Config::new(thresholds)).map_err(gpu_err),
        other => Err(PyValueError::new_err(format!("backend must be 'auto', 'cpu' or 'gpu', not {other:?}"))),
    }
}

/// The steps of one call: the CPU's, or the GPU's on a device.
enum Steps {
    Cpu,
    Gpu(std::sync::Arc<GpuSteps>),
}

impl Steps {
    /// The steps `backend` names (`"cpu"`, `"gpu"`, `"auto"`) on this
    /// machine ([`steps_gpu`]).
    fn new(backend: &str, ordinal: usize) -> PyResult<Self> {
        Ok(match steps_gpu(backend, ordinal, &[])? {
            Some(gpu) => Steps::Gpu(shared_gpu_steps(gpu).map_err(err)?),
            None => Steps::Cpu,
        })
    }

    fn get(&self) -> &dyn DecodeSteps {
        match self {
            Steps::Cpu => &CpuSteps,
            Steps::Gpu(gpu) => gpu.as_ref(),
        }
    }
}

/// The process's GPU steps on `gpu`'s device, made on first use: the
/// blocks that Python's threads (a Dask worker's, the local runner's, and
/// `agglomerate`'s decodes under `max_gpu_bytes`) hand to one device take
/// their turns on it one at a time, as the CLI's do, so
/// that one block's arrays are on the device at a time (what
/// `max_gpu_bytes` sizes the blocks for), and the threads that run a turn's
/// host work are started once, not per call.
fn shared_gpu_steps(gpu: gpu_waterz::Gpu) -> gpu_waterz_blockwise::Result<std::sync::Arc<GpuSteps>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static STEPS: OnceLock<Mutex<HashMap<usize, Arc<GpuSteps>>>> = OnceLock::new();
    let mut steps = STEPS.get_or_init(Default::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(shared) = steps.get(&gpu.ordinal()) {
        return Ok(shared.clone());
    }
    let ordinal = gpu.ordinal();
    let shared = Arc::new(GpuSteps::new(gpu)?);
    steps.insert(ordinal, shared.clone());
    Ok(shared)
}

/// The layers before a block's lower faces, as Python passes them.
fn layers<'a>(lower: &'a [Option<PyReadonlyArray1<'_, u64>>; 3]) -> PyResult<[Option<&'a [u64]>; 3]> {
    Ok([
        lower[0].as_ref().map(|l| l.as_slice()).transpose()?,
        lower[1].as_ref().map(|l| l.as_slice()).transpose()?,
        lower[2].as_ref().map(|l| l.as_slice()).transpose()?,
    ])
}

/// Where `backend` (`"cpu"`, `"gpu"`, `"auto"`) runs the blockwise steps on
/// this machine: `"cpu"` or `"gpu"` (CUDA device `ordinal`; `"gpu"`
/// without one is an error). Workers ask before reading a block, since the
/// GPU's step 1 reads a larger region.
#[pyfunction]
#[pyo3(signature = (backend, ordinal=0))]
pub(crate) fn blockwise_steps(backend: &str, ordinal: usize) -> PyResult<&'static str> {
    Ok(if steps_gpu(backend, ordinal, &[])?.is_some() { "gpu" } else { "cpu" })
}

/// Every step in this process (`gpu_waterz_blockwise::decode_with`): the
/// `(3, z, y, x)` float32 `affinities` decoded in blocks of `block_shape`
/// at the `thresholds` (strictly ascending), for `agglomerate`'s
/// `max_gpu_bytes`; steps 1, 3 and 5 of each block and the merge on the GPU that `backend`
/// and `ordinal` name ([`steps_gpu`]). Returns also whether they ran there.
#[pyfunction]
#[pyo3(signature = (affinities, block_shape, thresholds, aff_threshold_low, aff_threshold_high, backend="cpu", ordinal=0))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn blockwise_decode<'py>(
    py: Python<'py>,
    affinities: PyReadonlyArray4<'py, f32>,
    block_shape: [u64; 3],
    thresholds: Vec<f64>,
    aff_threshold_low: f32,
    aff_threshold_high: f32,
    backend: &str,
    ordinal: usize,
) -> PyResult<(DecodedVolume<'py>, bool)> {
    let view = affinities.as_array();
    let params = WatershedParams { aff_threshold_low, aff_threshold_high };
    let gpu = steps_gpu(backend, ordinal, &thresholds)?;
    let on_gpu = gpu.is_some();
    let out = py
        .detach(|| match gpu {
            Some(gpu) => decode_with(view, block_shape, params, &thresholds, shared_gpu_steps(gpu)?.as_ref()),
            None => decode(view, block_shape, params, &thresholds),
        })
        .map_err(err)?;
    let segmentations = out.segmentations.into_iter().map(|s| s.into_pyarray(py)).collect();
    Ok(((out.fragments.into_pyarray(py), segmentations, out.n_fragments, out.open_voxels, out.n_edges), on_gpu))
}

/// The device bytes a decode of a volume of `dims` needs with affinities
/// of `affinity_bytes_per_voxel` (`gpu_waterz::bytes_needed`), and the
/// block shape whose decode fits `max_bytes`
/// (`gpu_waterz::block_shape_within`; None when none does).
#[pyfunction]
pub(crate) fn decode_bytes(dims: [u64; 3], affinity_bytes_per_voxel: u64, max_bytes: u64) -> (u64, Option<[u64; 3]>) {
    let n: u64 = dims.iter().product();
    let needed = gpu_waterz::bytes_needed(n, n.saturating_mul(affinity_bytes_per_voxel));
    (needed, gpu_waterz::block_shape_within(dims, max_bytes, affinity_bytes_per_voxel))
}

/// Affinities of voxels `lo..hi` of the implicit cell volume of `dims`
/// (`gpu_waterz_core::generate::ImplicitCells`, grid cells of `cell`
/// voxels): the same values as the same voxels of the whole generated
/// volume, computed from the block alone.
#[pyfunction]
pub(crate) fn implicit_cell_affinities<'py>(
    py: Python<'py>,
    seed: u64,
    cell: [usize; 3],
    dims: [usize; 3],
    lo: [usize; 3],
    hi: [usize; 3],
) -> PyResult<Bound<'py, numpy::PyArray4<f32>>> {
    use gpu_waterz_core::generate::{GeneratorParams, ImplicitCells};
    if (0..3).any(|a| lo[a] >= hi[a]) {
        return Err(PyValueError::new_err(format!("the block {lo:?}..{hi:?} is empty")));
    }
    let cells = ImplicitCells { seed, cell: (cell[0], cell[1], cell[2]) };
    let params = GeneratorParams { seed, weak_spots: 0, false_walls: 0, ..GeneratorParams::default() };
    let shape = (hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]);
    let (affs, _) = py
        .detach(|| cells.block(&params, (dims[0], dims[1], dims[2]), (lo[0], lo[1], lo[2]), shape))
        .map_err(PyValueError::new_err)?;
    Ok(affs.into_pyarray(py))
}

/// Checks `agglomerate`'s parameters before any work, with the rules every
/// step applies: merge thresholds finite and strictly ascending (also in
/// float32), watershed thresholds finite, in [0, 1], low < high.
#[pyfunction]
pub(crate) fn blockwise_check_parameters(thresholds: Vec<f64>, low: f64, high: f64) -> PyResult<()> {
    gpu_waterz_core::Thresholds::new(&thresholds).map_err(|e| {
        PyValueError::new_err(format!("thresholds must be finite and strictly ascending (also in float32): {e}"))
    })?;
    gpu_waterz_core::params::check_watershed_thresholds(low, high).map_err(|e| {
        PyValueError::new_err(format!(
            "aff_threshold_low and aff_threshold_high must be finite, in [0, 1], low < high: {e}"
        ))
    })?;
    Ok(())
}

//! Steps 1, 3 and 5 of each block and the merge on the GPU
//! ([`GpuSteps`]): the watershed's masks, the division of the plateaus
//! inside the block and the block's basins run by the GPU watershed's
//! kernels (`gpu_waterz_watershed::gpu::{block_plateaus_on_device, block_basins}`),
//! the faces inside the block by the GPU's region graph, the host keeping
//! the bookkeeping (open voxels, components' smallest voxels and sizes,
//! faces, the faces across the block's lower faces); the whole region
//! graph merged by the GPU's ParHAC. A source that makes its affinities on
//! the GPU ([`AffinitySource::read_on_gpu`]) is read there.

use crate::plateaus::{check_plateau_input, check_plateau_shape};
use crate::stages::{
    apply_settled, basins_from_components, basins_from_runs, check_block_edge_runs, check_block_edges,
    check_edge_lists, lower_faces, read_region, read_region_codes, sum_and_merge, PairStats, RunCursor,
};
use crate::{
    invalid, voxel_index, AffinitySource, Block, ComponentRuns, DecodeSteps, EdgeList, LocalBasinRuns, LocalBasins,
    LocalPlateaus, OpenVoxels, Result,
};
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_core::{ContactStats, Thresholds};
use gpu_waterz_core::{Dims3, WatershedParams};
use gpu_waterz_graph::gpu::{DeviceEdges, EdgeEntries, HostRegionGraph};
use gpu_waterz_parhac::gpu::GpuParhac;
use gpu_waterz_runtime::{DeviceElement, Gpu, PinnedBuffer, StageTimer};
use gpu_waterz_watershed::gpu::{
    block_basins, block_basins_on_device, block_plateaus_on_device, AffinityBuffer, BlockInRegion, DeviceAffinities,
    DeviceFragments, FragmentRuns, CORNER, OPEN,
};
use gpu_waterz_watershed::WatershedError;
use ndarray::{Array3, Array4, ArrayView3, ArrayView4, CowArray, Ix3};
use rayon::prelude::*;
use std::sync::Mutex;

const _: () = assert!(CORNER == crate::CORNER_FLAG, "the GPU's corner flag is the open voxels' corner flag");

/// Steps 1, 3 and 5 of each block on one GPU, one block at a time (the
/// blocks' reading and bookkeeping overlap on the host's threads), equal
/// to [`crate::CpuSteps`]'s; and step 6 by the GPU's ParHAC at ε = 0, so
/// that the segmentations equal the whole-volume GPU decode's (and the
/// CPU's serial merging on tie-free graphs).
///
/// Step 1 reads each block grown by two voxels along every axis (one more
/// below than the CPU's halo): the region's masks are then the volume's on
/// the block and one voxel around it, which is all the block's plateau
/// division reads. Device memory per block is about that of the
/// whole-volume watershed of the grown block.
pub struct GpuSteps {
    gpu: Gpu,
    /// The threads that run the GPU's work (the host's share of it inside a
    /// turn, such as the copies through pinned memory and the generator's
    /// tables, runs on all of them), one block at a time: see [`in_turn`].
    turn: rayon::ThreadPool,
    /// Held by the thread that waits for a block's turn while the turn runs.
    gate: Mutex<()>,
    /// The most device memory a block's step has held, when the device
    /// reports it.
    peak: Mutex<Option<u64>>,
    /// Seconds the GPU's thread has spent on blocks' work (transfers and
    /// kernels, and the host work inside the turn).
    busy: Mutex<Vec<(&'static str, f64)>>,
    /// Page-locked buffers that blocks fill before their turn and read
    /// after it, so that the turn's copies run at the bus's speed with no
    /// host copy (about one set per block thread, made on first need).
    pinned: Mutex<Vec<PinnedSet>>,
    /// Page-locked room for the blocks' region graphs (step 5, down).
    graphs: Mutex<Vec<GraphParts>>,
}

/// One block's page-locked buffers: its directions (step 3, up) and two
/// arrays of runs (step 3's runs down, step 5's fragment runs up).
#[derive(Default)]
struct PinnedSet {
    bytes: Option<PinnedBuffer<u8>>,
    first: Option<PinnedBuffer<u32>>,
    second: Option<PinnedBuffer<u32>>,
}

/// One block's page-locked room for its region graph's three arrays,
/// downloaded in the block's turn and read after it.
#[derive(Default)]
struct GraphParts {
    keys: Option<PinnedBuffer<u64>>,
    counts: Option<PinnedBuffer<u64>>,
    sums: Option<PinnedBuffer<u64>>,
    /// The block's fragments' frame, where one was asked for, and its
    /// bytes.
    frame: Option<PinnedBuffer<u8>>,
    frame_len: Option<usize>,
}

impl GraphParts {
    /// Downloads `graph` (inside the turn), the buffers made or made larger
    /// where they hold too few values; gives its number of edges.
    fn download(&mut self, gpu: &Gpu, graph: &DeviceEdges) -> Result<usize> {
        let n = graph.n_edges() as usize;
        let room = n + n / 4;
        let keys = pinned_prefix(gpu, &mut self.keys, n, room)?;
        let counts = pinned_prefix(gpu, &mut self.counts, n, room)?;
        let sums = pinned_prefix(gpu, &mut self.sums, n, room)?;
        graph.download_parts_into(gpu, keys, counts, sums)?;
        Ok(n)
    }

    /// Downloads `frame` (inside the turn) into page-locked room, made or
    /// made larger where it is too small.
    fn download_frame(&mut self, gpu: &Gpu, frame: &crate::frames::DeviceFrame) -> Result<()> {
        let n = frame.len();
        frame.download_to_slice(gpu, pinned_prefix(gpu, &mut self.frame, n, n + n / 4)?)?;
        self.frame_len = Some(n);
        Ok(())
    }

    /// The frame that [`GraphParts::download_frame`] wrote, if any (after
    /// the turn; taken, so that the next block's turn starts without one).
    fn take_frame(&mut self) -> Option<Frame> {
        let n = self.frame_len.take()?;
        Some(self.frame.as_deref().unwrap_or_default()[..n].to_vec())
    }

    /// The graph of `n` edges that [`GraphParts::download`] wrote (after the
    /// turn).
    fn graph(&self, n: usize) -> Result<HostRegionGraph> {
        fn part(buffer: &Option<PinnedBuffer<u64>>, n: usize) -> Result<&[u64]> {
            buffer.as_deref().unwrap_or_default().get(..n).ok_or_else(|| invalid(format!("no room for {n} edges")))
        }
        Ok(HostRegionGraph::from_parts(part(&self.keys, n)?, part(&self.counts, n)?, part(&self.sums, n)?)?)
    }
}

/// The first `len` values of `slot`'s buffer, made (or made larger, to at
/// least `room` values) where it holds fewer.
fn pinned_prefix<'a, T: DeviceElement>(
    gpu: &Gpu,
    slot: &'a mut Option<PinnedBuffer<T>>,
    len: usize,
    room: usize,
) -> Result<&'a mut [T]> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        // The old buffer goes first: both at once may not fit.
        *slot = None;
        *slot = Some(PinnedBuffer::zeroed(gpu, len.max(room)).map_err(WatershedError::from)?);
    }
    Ok(&mut slot.as_mut().expect("made above")[..len])
}

impl GpuSteps {
    /// The steps on `gpu`; fails only when the threads that take the GPU's
    /// work cannot be started. They are as many as rayon's default pool's.
    pub fn new(gpu: Gpu) -> Result<Self> {
        let turn = rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("gpu-waterz-blockwise-gpu-{i}"))
            .build()
            .map_err(|e| invalid(format!("starting the GPU's threads: {e}")))?;
        Ok(Self {
            gpu,
            turn,
            gate: Mutex::new(()),
            peak: Mutex::new(None),
            busy: Mutex::new(Vec::new()),
            pinned: Mutex::new(Vec::new()),
            graphs: Mutex::new(Vec::new()),
        })
    }

    /// A set of page-locked buffers for one block (given back with
    /// [`GpuSteps::give_back_pinned`]).
    fn take_pinned(&self) -> PinnedSet {
        self.pinned.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop().unwrap_or_default()
    }

    fn give_back_pinned(&self, set: PinnedSet) {
        self.pinned.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(set);
    }

    /// Room for one block's region graph (given back with
    /// [`GpuSteps::give_back_graph_parts`]).
    fn take_graph_parts(&self) -> GraphParts {
        self.graphs.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop().unwrap_or_default()
    }

    fn give_back_graph_parts(&self, parts: GraphParts) {
        self.graphs.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(parts);
    }

    /// Runs `turn` (a block's step 5 in its turn, which downloads the
    /// block's region graph into the room it is given and says how many
    /// edges it holds, with whatever else it gives) and makes the graph
    /// after the turn.
    fn with_graph_parts<T>(
        &self,
        turn: impl FnOnce(&mut GraphParts) -> Result<Option<(usize, T)>>,
    ) -> Result<Option<(HostRegionGraph, T, Option<Frame>)>> {
        let mut parts = self.take_graph_parts();
        parts.frame_len = None;
        let out = turn(&mut parts).and_then(|made| match made {
            Some((n, other)) => Ok(Some((parts.graph(n)?, other, parts.take_frame()))),
            None => Ok(None),
        });
        self.give_back_graph_parts(parts);
        out
    }

    /// The most device memory (of the stream-ordered allocator, which
    /// every buffer of the steps comes from) held during one block's step
    /// so far, memory held before the step included; `None` before any
    /// step, or where the device has no memory pools.
    pub fn peak_device_bytes(&self) -> Option<u64> {
        *self.peak.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Seconds spent on the GPU's thread so far (each block's turn: its
    /// transfers, kernels and the host work between them). Against a
    /// step's wall time it says whether the GPU's turns or the host's work
    /// around them bound the step.
    /// Per step (`local_plateaus`, `local_basins`, `block_edges`,
    /// `read_affinities`, `merge`), in the order they first ran.
    pub fn busy_seconds(&self) -> Vec<(&'static str, f64)> {
        self.busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Runs `work` on the GPU alone (on the GPU's thread), and notes its
    /// peak device memory and time.
    fn exclusive<T: Send>(&self, step: &'static str, work: impl FnOnce(&Gpu) -> Result<T> + Send) -> Result<T> {
        let gpu = &self.gpu;
        let asked = std::time::Instant::now();
        let (out, bytes, seconds) = in_turn(&self.turn, &self.gate, || -> Result<(T, Option<u64>, f64)> {
            let start = std::time::Instant::now();
            gpu.reset_peak_pool_bytes().map_err(gpu_waterz_watershed::WatershedError::from)?;
            let out = work(gpu)?;
            let bytes = gpu.peak_pool_bytes().map_err(gpu_waterz_watershed::WatershedError::from)?;
            let seconds = start.elapsed().as_secs_f64();
            // What a block's thread spends on its turn: waiting for it, then
            // the turn itself (`benches/turn_gaps.py` sets them against the
            // block's whole step).
            let waited = (start - asked).as_secs_f64();
            tracing::debug!(step, waited_ms = waited * 1e3, turn_ms = seconds * 1e3, "GPU turn");
            Ok((out, bytes, seconds))
        })??;
        let mut busy = self.busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match busy.iter_mut().find(|(name, _)| *name == step) {
            Some((_, total)) => *total += seconds,
            None => busy.push((step, seconds)),
        }
        if let Some(bytes) = bytes {
            let mut peak = self.peak.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            *peak = Some(peak.map_or(bytes, |p| p.max(bytes)));
        }
        Ok(out)
    }
}

/// Runs `work` on `turn`'s threads, one call at a time (those waiting
/// hold `gate` in turn), and waits for it without taking other work
/// meanwhile. A rayon worker that called `turn.install` itself would,
/// while it waits, start other tasks of its own pool: other blocks, which
/// then wait for the GPU in turn, one on top of the other, each holding
/// its block's arrays, and a block whose turn is over resumes only once
/// the blocks above it on its thread have. On a large volume every block
/// was in flight at once (the host's memory ran out at 16 Gvoxel). Here
/// the wait is a plain thread's (a scoped thread takes `gate`, calls
/// `install` and the caller joins it), so waiting for the GPU takes up
/// nothing else (the driver's blocks are not rayon tasks either, so a
/// block's other nested rayon calls take up no other block); `work` runs
/// on one of `turn`'s threads, and the rayon calls inside it on all of
/// them (`turn` had one thread before, and the host work inside a turn,
/// such as the copies through pinned memory, ran serially: a fifth to a
/// half of each turn). A lock held by the
/// asking rayon worker would not do: while it waits for `install`, that
/// worker may run another block's task that waits for the same lock.
/// `work` must not ask for the turn again: it would wait for itself.
/// Fails only when the waiting thread cannot be started.
fn in_turn<T: Send>(turn: &rayon::ThreadPool, gate: &Mutex<()>, work: impl FnOnce() -> T + Send) -> Result<T> {
    std::thread::scope(|scope| {
        let waiting = std::thread::Builder::new()
            .name("gpu-waterz-blockwise-wait".into())
            .spawn_scoped(scope, || {
                let _turn = gate.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                turn.install(work)
            })
            .map_err(|e| invalid(format!("starting a thread to wait for the GPU: {e}")))?;
        match waiting.join() {
            Ok(out) => Ok(out),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

fn dims3(shape: [u64; 3]) -> Dims3 {
    Dims3::new(shape[0], shape[1], shape[2])
}

/// Where `block` lies in `region`.
fn block_in_region(block: Block, region: Block) -> BlockInRegion {
    BlockInRegion { offset: dims3(std::array::from_fn(|a| block.lo[a] - region.lo[a])), block: dims3(block.shape()) }
}

/// Room for one value per voxel of `block`, every page touched here (on
/// the block's thread, not by a download inside the GPU's turn: `resize`
/// writes every value, where `vec![0; n]` would map untouched zero pages).
fn touched<T: Copy + Default>(block: Block) -> Vec<T> {
    let n = block.shape().iter().product::<u64>() as usize;
    #[allow(clippy::slow_vector_initialization)]
    let mut values = Vec::with_capacity(n);
    values.resize(n, T::default());
    values
}

/// Page-locked room for `len` runs' two arrays (first voxels and values):
/// the two halves of the set's directions room (`bytes`, which steps 1 and
/// 3 fill and whose step-3 contents are on the device by then) where they
/// fit (cell-like blocks have about one run per ten voxels, the halves one
/// per eight), else the set's two arrays of their own, made (or made
/// larger, to `room` values) where needed. The same `len` finds the same
/// room again while nothing is made larger.
fn runs_room_of<'a>(
    gpu: &Gpu,
    set: &'a mut PinnedSet,
    len: usize,
    room: usize,
) -> Result<(&'a mut [u32], &'a mut [u32])> {
    let fits = set.bytes.as_ref().is_some_and(|b| b.view::<u32>().len() / 2 >= len);
    if fits {
        let words = set.bytes.as_mut().expect("checked above").view_mut::<u32>();
        let half = words.len() / 2;
        let (first, second) = words.split_at_mut(half);
        return Ok((&mut first[..len], &mut second[..len]));
    }
    let first = pinned_prefix(gpu, &mut set.first, len, room)?;
    let second = pinned_prefix(gpu, &mut set.second, len, room)?;
    Ok((first, second))
}

/// Step 1's result from the bytes of `block_plateaus_on_device`: each block voxel's
/// directions, or, for the voxels of open plateaus, its mask (with the
/// corner flag) gathered with its voxel index. The simple form of
/// [`plateaus_from_staged`], which the tests compare it with.
#[cfg(test)]
fn plateaus_from_bytes(dims: [u64; 3], block: Block, mut bytes: Vec<u8>) -> LocalPlateaus {
    let bs = block.shape();
    let mut open = OpenVoxels::default();
    for (i, b) in bytes.iter_mut().enumerate() {
        if *b & OPEN != 0 {
            open.index.push(voxel_index(dims, block.global(crate::voxel_at(bs, i as u64))));
            open.mask.push(*b & !OPEN);
            *b &= 0x3f;
        }
    }
    let bits = Array3::from_shape_vec((bs[0] as usize, bs[1] as usize, bs[2] as usize), bytes)
        .expect("one byte per block voxel");
    LocalPlateaus { bits, open }
}

/// [`plateaus_from_bytes`] of a copy of `staged` (the bytes
/// `block_plateaus_on_device` wrote into page-locked memory, one per block voxel),
/// made in one pass: each row is copied out, and its open voxels are
/// looked for eight bytes at a time (about 3 % of a cell-like block's
/// voxels are open), their volume indices counted from the row's first.
fn plateaus_from_staged(dims: [u64; 3], block: Block, staged: &[u8]) -> LocalPlateaus {
    const WORD: usize = 8;
    let any_open = u64::from_ne_bytes([OPEN; WORD]);
    let bs = block.shape();
    let row = bs[2] as usize;
    let mut bytes: Vec<u8> = Vec::with_capacity(staged.len());
    let mut open = OpenVoxels::default();
    for (r, src) in staged.chunks_exact(row).enumerate() {
        let start = bytes.len();
        bytes.extend_from_slice(src);
        let copied = &mut bytes[start..];
        let first = voxel_index(dims, block.global([r as u64 / bs[1], r as u64 % bs[1], 0]));
        let mut gather = |x: usize, b: &mut u8| {
            if *b & OPEN != 0 {
                open.index.push(first + x as u64);
                open.mask.push(*b & !OPEN);
                *b &= 0x3f;
            }
        };
        let whole = row - row % WORD;
        for (w, word) in copied[..whole].chunks_exact_mut(WORD).enumerate() {
            let value = u64::from_ne_bytes(word.try_into().expect("a word of eight bytes"));
            if value & any_open != 0 {
                word.iter_mut().enumerate().for_each(|(k, b)| gather(w * WORD + k, b));
            }
        }
        copied[whole..].iter_mut().enumerate().for_each(|(k, b)| gather(whole + k, b));
    }
    let bits = Array3::from_shape_vec((bs[0] as usize, bs[1] as usize, bs[2] as usize), bytes)
        .expect("one byte per block voxel");
    LocalPlateaus { bits, open }
}

/// The region graph of the faces inside a block (the GPU's, over the
/// fragments that `fragments` puts on the device), downloaded into
/// `parts`, and where `frame` gives the block's shape the zstd frame of
/// the fragments ([`crate::label_frame_on_gpu`]'s) too; gives the graph's
/// number of edges. At the debug level, the stages' times
/// (each ended by a synchronisation, so that the affinities' kernels,
/// which `timer` started with, count as theirs) are logged.
fn count_inside(
    gpu: &Gpu,
    affs: DeviceAffinities,
    fragments: impl FnOnce(&Gpu) -> Result<DeviceFragments>,
    mut timer: StageTimer,
    parts: &mut GraphParts,
    frame: Option<[u64; 3]>,
) -> Result<usize> {
    let timed = |timer: &mut StageTimer, stage| timer.mark(stage).map_err(WatershedError::from);
    timed(&mut timer, "affinities")?;
    let fragments = fragments(gpu)?;
    timed(&mut timer, "labels up")?;
    let graph = gpu_waterz_graph::gpu::region_graph(gpu, &affs, &fragments)?;
    drop(affs);
    timed(&mut timer, "region graph")?;
    let n = parts.download(gpu, &graph)?;
    timed(&mut timer, "graph down")?;
    drop(graph);
    if let Some(shape) = frame {
        parts.download_frame(gpu, &crate::frames::DeviceFrame::new(gpu, fragments.labels(), shape)?)?;
        timed(&mut timer, "frame")?;
    }
    tracing::debug!(stages_ms = ?timer.stages(), pairs = n, "GPU block edges");
    Ok(n)
}

/// The pairs of the faces inside a block (`graph`) and of those across its
/// lower faces, counted here: `component_at(i)` is the block's component
/// at voxel `i` (asked in ascending order per face), `affinity(axis, i)`
/// channel `axis` there.
fn block_pairs(
    shape: [usize; 3],
    component_at: impl FnMut(usize) -> u32,
    ids: &[u64],
    lower: [Option<&[u64]>; 3],
    graph: HostRegionGraph,
    affinity: impl Fn(usize, usize) -> f32,
) -> EdgeList {
    let mut pairs = PairStats::default();
    lower_faces(shape, component_at, ids, lower, &mut pairs, affinity);
    pairs.into_edges_with_sorted(&graph.edges, &graph.stats)
}

/// The affinities across `block`'s lower faces (where `lower` has a
/// layer): channel `axis` on the block's first layer along `axis`, taken
/// from the block's float32 affinities on the device (`affs`), else made
/// again by `source` as one-voxel slabs and downloaded.
fn lower_slabs(
    gpu: &Gpu,
    source: &dyn AffinitySource,
    block: Block,
    affs: &DeviceAffinities,
    lower: [Option<&[u64]>; 3],
) -> Result<LowerSlabs> {
    let mut timer = turn_timer(gpu)?;
    let mut slabs: LowerSlabs = [None, None, None];
    let [z, y, x] = block.shape();
    let n = z * y * x;
    for axis in 0..3 {
        if lower[axis].is_none() {
            continue;
        }
        let face = match affs.data() {
            // Rows and the values in them: the face's two axes in C order.
            AffinityBuffer::F32(values) => {
                let (rows, row_len) = match axis {
                    0 => ([y, x], [x, 1]),
                    1 => ([z, y * x], [x, 1]),
                    _ => ([z * y, x], [1, 1]),
                };
                let face = gpu_waterz_runtime::primitives::gather_rows_f32(gpu, values, axis as u64 * n, rows, row_len)
                    .map_err(WatershedError::from)?;
                gpu.download(&face).map_err(WatershedError::from)?
            }
            _ => {
                let mut slab = block;
                slab.hi[axis] = slab.lo[axis] + 1;
                let made = made_on_gpu(gpu, source, slab)?
                    .ok_or_else(|| invalid("the source made the block's affinities on the GPU, not a slab's"))?;
                made.index_axis(ndarray::Axis(0), axis).iter().copied().collect()
            }
        };
        slabs[axis] = Some(face);
    }
    timer.mark("lower slabs").map_err(WatershedError::from)?;
    tracing::debug!(stages_ms = ?timer.stages(), "GPU block lower slabs");
    Ok(slabs)
}

/// The affinity of channel `axis` at voxel `i` of a block of `shape` on its
/// lower face along `axis`, from [`lower_slabs`]'s faces.
fn slab_affinity(slabs: &LowerSlabs, shape: [usize; 3], axis: usize, i: usize) -> f32 {
    // Voxel `i` lies on the lower face along `axis` (its coordinate there
    // is 0); its place in the face is that of its two other coordinates.
    let face = slabs[axis].as_ref().expect("a face for every lower layer");
    let at = match axis {
        0 => i,
        1 => (i / (shape[1] * shape[2])) * shape[2] + i % shape[2],
        _ => i / shape[2],
    };
    face[at]
}

/// A block's runs as the GPU's fragments take them, written into `starts`
/// and `labels` (one per run): each run's first voxel and its fragment
/// (`ids` of its component, checked by the caller); gives the largest
/// fragment id (fewer than 2^32).
fn fragment_runs(
    block: Block,
    components: &ComponentRuns,
    ids: &[u64],
    starts: &mut [u32],
    labels: &mut [u32],
) -> Result<u64> {
    let n_fragments = ids.iter().copied().max().unwrap_or(0);
    if n_fragments >= u32::MAX as u64 || block.len() > u32::MAX as u64 {
        return Err(invalid(format!(
            "block {:?}..{:?}: fragment ids up to {n_fragments} in {} voxels: fewer than 2^32 are taken",
            block.lo,
            block.hi,
            block.len()
        )));
    }
    let runs = components.runs();
    if starts.len() != runs.len() || labels.len() != runs.len() {
        return Err(invalid(format!("room for {} and {} of {} runs", starts.len(), labels.len(), runs.len())));
    }
    let mut next = 0u64;
    for ((&[c, length], start), label) in runs.iter().zip(starts).zip(labels) {
        *start = next as u32;
        *label = ids[c as usize] as u32;
        next += length as u64;
    }
    Ok(n_fragments)
}

/// The affinities of `region` made on the GPU by `source` and downloaded
/// (within the caller's turn), or `None` where the source does not make
/// them there.
fn made_on_gpu(gpu: &Gpu, source: &dyn AffinitySource, region: Block) -> Result<Option<Array4<f32>>> {
    let values: Vec<f32> = match source.read_on_gpu(gpu, region)? {
        Some(affs) => match affs.data() {
            AffinityBuffer::F32(values) => gpu.download(values).map_err(WatershedError::from)?,
            AffinityBuffer::U8(codes) => {
                let codes = gpu.download(codes).map_err(WatershedError::from)?;
                codes.into_iter().map(gpu_waterz_core::affinities::u8_affinity).collect()
            }
            _ => return Err(invalid("the source made affinities of a type that step 5 does not read")),
        },
        None => return Ok(None),
    };
    let (s, len) = (region.shape(), values.len());
    Array4::from_shape_vec((3, s[0] as usize, s[1] as usize, s[2] as usize), values)
        .map(Some)
        .map_err(|_| invalid(format!("the source made {len} values on the GPU for a region of {s:?}")))
}

/// A block's fragments as a zstd frame ([`crate::label_frame`]'s bytes).
type Frame = Vec<u8>;

/// Step 5's turn on a block whose affinities the GPU made: the region
/// graph inside, the lower faces' affinities and the frame asked for.
type GraphMadeOnGpu = (HostRegionGraph, LowerSlabs, Option<Frame>);

/// How a block's fragments reach the device in step 5's turn.
#[derive(Clone, Copy)]
enum FragmentsUp<'a> {
    /// Checked runs in page-locked memory: they go up beside the making of
    /// the affinities and are written out per voxel on the device.
    Runs(&'a FragmentRuns<'a>),
    /// Put on the device by the function, after the affinities.
    Made(&'a (dyn Fn(&Gpu) -> Result<DeviceFragments> + Sync)),
}

/// Per axis where there is a block below, the affinities across the
/// block's lower face (channel `axis` on the face, its two other axes in C
/// order).
type LowerSlabs = [Option<Vec<f32>>; 3];

/// Puts a block's affinities on the device (inside its turn).
type Upload<'u> = &'u (dyn Fn(&Gpu) -> gpu_waterz_runtime::Result<DeviceAffinities> + Sync);

/// A timer of a turn's stages, recording at the debug level.
fn turn_timer(gpu: &Gpu) -> Result<StageTimer> {
    StageTimer::new(gpu, tracing::enabled!(tracing::Level::DEBUG)).map_err(|e| WatershedError::from(e).into())
}

/// A checked block's components in C order and its fragment labels, for
/// step 5 on the GPU.
struct BlockLabels<'a> {
    shape: [usize; 3],
    dims: Dims3,
    /// C order (a copy only where the given view is not).
    components: CowArray<'a, u32, Ix3>,
    labels: Vec<u32>,
    n_fragments: u64,
}

impl<'a> BlockLabels<'a> {
    fn new(
        dims: [u64; 3],
        block: Block,
        components: ArrayView3<'a, u32>,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
    ) -> Result<Self> {
        let shape = check_block_edges(dims, block, components, ids, lower)?;
        let n_fragments = ids.iter().copied().max().unwrap_or(0);
        if n_fragments >= u32::MAX as u64 {
            return Err(invalid(format!(
                "block {:?}..{:?}: fragment ids up to {n_fragments}: fewer than 2^32 are taken",
                block.lo, block.hi
            )));
        }
        let components: CowArray<'a, u32, Ix3> = if components.is_standard_layout() {
            components.into()
        } else {
            components.as_standard_layout().into_owned().into()
        };
        let comps = components.as_slice().expect("a standard layout is contiguous");
        let labels = comps.par_iter().map(|&c| ids[c as usize] as u32).collect();
        Ok(Self { shape, dims: dims3(block.shape()), components, labels, n_fragments })
    }

    /// The pairs of the faces inside (`graph`) and of those across the
    /// lower faces, counted here: `affinity(axis, i)` is channel `axis` at
    /// block voxel `i` on them.
    fn pairs(
        &self,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
        graph: HostRegionGraph,
        affinity: impl Fn(usize, usize) -> f32,
    ) -> EdgeList {
        let comps = self.components.as_slice().expect("a standard layout is contiguous");
        block_pairs(self.shape, |i| comps[i], ids, lower, graph, affinity)
    }

    /// Uploads the labels as the block's fragments.
    fn upload(&self, gpu: &Gpu) -> Result<DeviceFragments> {
        Ok(DeviceFragments::upload(gpu, &self.labels, self.dims, self.n_fragments)?)
    }
}

impl GpuSteps {
    /// Step 1 of `block` in one turn over the affinities of its
    /// [`DecodeSteps::plateau_region`] that `upload` puts on the device.
    fn plateaus_uploaded(
        &self,
        dims: [u64; 3],
        block: Block,
        params: WatershedParams,
        upload: Upload<'_>,
    ) -> Result<LocalPlateaus> {
        let made =
            self.plateaus_in_turn(dims, block, params, |gpu| Ok(Some(upload(gpu).map_err(WatershedError::from)?)));
        made?.ok_or_else(|| invalid("the block's affinities were not put on the device"))
    }

    /// Step 1 of `block` in one turn over the affinities of its
    /// [`DecodeSteps::plateau_region`] that `affinities` puts on the device
    /// (`None`: it puts none there, and the step is not run). The
    /// directions come down into page-locked memory on the device's copy
    /// stream ([`Gpu::download_behind`]): the turn ends once the download
    /// is queued, and the next block's turn runs while it copies; this
    /// block's thread waits for it and reads the directions out of that
    /// memory after the turn.
    fn plateaus_in_turn(
        &self,
        dims: [u64; 3],
        block: Block,
        params: WatershedParams,
        affinities: impl FnOnce(&Gpu) -> Result<Option<DeviceAffinities>> + Send,
    ) -> Result<Option<LocalPlateaus>> {
        let at = block_in_region(block, self.plateau_region(dims, block));
        let n = block.len() as usize;
        let mut pinned = self.take_pinned();
        let made = pinned_prefix(&self.gpu, &mut pinned.bytes, n, n).map(|_| ()).and_then(|()| {
            let room = pinned.bytes.take().expect("made above");
            let pending = self.exclusive("local_plateaus", |gpu| {
                let Some(affs) = affinities(gpu)? else { return Ok(Err(room)) };
                let directions = block_plateaus_on_device(gpu, affs, at, params)?;
                Ok(Ok(gpu.download_behind(directions, n, room).map_err(WatershedError::from)?))
            })?;
            match pending {
                Err(room) => {
                    pinned.bytes = Some(room);
                    Ok(None)
                }
                Ok(pending) => {
                    let staged = pending.wait().map_err(WatershedError::from)?;
                    let plateaus = plateaus_from_staged(dims, block, &staged[..n]);
                    pinned.bytes = Some(staged);
                    Ok(Some(plateaus))
                }
            }
        });
        self.give_back_pinned(pinned);
        made
    }

    /// Step 5 of a block whose source makes its affinities on the GPU: the
    /// faces inside counted over the block's fragments, and the one-voxel
    /// slabs of its lower faces, in one turn (each turn is a wait for the
    /// GPU). Fragments given as runs go up on the copy stream while the
    /// affinities are made ([`DeviceFragments::from_checked_runs_beside`]).
    /// `None` where the source makes none.
    fn graph_made_on_gpu(
        &self,
        source: &dyn AffinitySource,
        block: Block,
        lower: [Option<&[u64]>; 3],
        fragments: FragmentsUp<'_>,
        frame: Option<[u64; 3]>,
    ) -> Result<Option<GraphMadeOnGpu>> {
        if !source.makes_on_gpu() {
            return Ok(None);
        }
        self.with_graph_parts(|parts| {
            self.exclusive("block_edges", |gpu| {
                let timer = turn_timer(gpu)?;
                let (made, affs) = match fragments {
                    FragmentsUp::Runs(runs) => {
                        let (made, affs) =
                            DeviceFragments::from_checked_runs_beside(gpu, runs, |gpu| source.read_on_gpu(gpu, block))?;
                        (Some(made), affs?)
                    }
                    FragmentsUp::Made(_) => (None, source.read_on_gpu(gpu, block)?),
                };
                let Some(affs) = affs else { return Ok(None) };
                let fragments = |gpu: &Gpu| match (made, fragments) {
                    (Some(made), _) => Ok(made),
                    (None, FragmentsUp::Made(make)) => make(gpu),
                    (None, FragmentsUp::Runs(runs)) => Ok(DeviceFragments::from_checked_runs(gpu, runs)?),
                };
                // The lower faces' affinities first: the count frees the
                // block's affinities before the frame is made.
                let slabs = lower_slabs(gpu, source, block, &affs, lower)?;
                Ok(Some((count_inside(gpu, affs, fragments, timer, parts, frame)?, slabs)))
            })
        })
    }

    /// Step 5's faces inside a block, counted in one turn over the
    /// fragments that `fragments` and the affinities that `upload` put on
    /// the device.
    fn graph_uploaded(
        &self,
        fragments: impl FnOnce(&Gpu) -> Result<DeviceFragments> + Send,
        upload: Upload<'_>,
        frame: Option<[u64; 3]>,
    ) -> Result<(HostRegionGraph, Option<Frame>)> {
        let made = self.with_graph_parts(|parts| {
            self.exclusive("block_edges", |gpu| {
                let timer = turn_timer(gpu)?;
                let affs = upload(gpu).map_err(WatershedError::from)?;
                Ok(Some((count_inside(gpu, affs, fragments, timer, parts, frame)?, ())))
            })
        })?;
        made.map(|(graph, (), frame)| (graph, frame)).ok_or_else(|| invalid("the GPU's turn gave no region graph"))
    }

    /// Step 5 of a block whose affinities are on the host: uploaded and
    /// counted inside on the GPU, the lower faces counted here.
    fn edges_of_host_values(
        &self,
        labels: &BlockLabels<'_>,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
        affinities: ArrayView4<'_, f32>,
    ) -> Result<EdgeList> {
        let s = labels.shape;
        if affinities.shape() != [3, s[0], s[1], s[2]] {
            return Err(invalid(format!("affinities {:?} must be 3 channels of {s:?}", affinities.shape())));
        }
        let values = affinities.as_standard_layout();
        let values = values.as_slice().expect("a standard layout is contiguous");
        let (graph, _) = self.graph_uploaded(
            |gpu| labels.upload(gpu),
            &|gpu| DeviceAffinities::upload_f32(gpu, values, labels.dims),
            None,
        )?;
        let n = values.len() / 3;
        Ok(labels.pairs(ids, lower, graph, |axis, i| values[axis * n + i]))
    }

    /// [`DecodeSteps::block_edge_runs_and_frame`] once the fragments' runs
    /// are ready (checked, in page-locked memory): they go up in the turn.
    #[allow(clippy::too_many_arguments)]
    fn block_edge_runs_with(
        &self,
        source: &dyn AffinitySource,
        block: Block,
        shape: [usize; 3],
        components: &ComponentRuns,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
        runs: &FragmentRuns<'_>,
        frame: Option<[u64; 3]>,
    ) -> Result<(EdgeList, Option<Vec<u8>>)> {
        let block_dims = dims3(block.shape());
        let fragments = |gpu: &Gpu| Ok(DeviceFragments::from_checked_runs(gpu, runs)?);
        let made = self.graph_made_on_gpu(source, block, lower, FragmentsUp::Runs(runs), frame)?;
        let mut cursor = RunCursor::new(components);
        if let Some((graph, slabs, frame)) = made {
            let pairs = block_pairs(
                shape,
                |i| cursor.at(i),
                ids,
                lower,
                graph,
                |axis, i| slab_affinity(&slabs, shape, axis, i),
            );
            return Ok((pairs, frame));
        }
        if let Some(codes) = read_region_codes(source, block)? {
            // Codes stored as uint8 go up as they are; the lower faces read
            // them as the GPU does (`k / 255`).
            let codes = codes.as_standard_layout();
            let flat = codes.as_slice().expect("a standard layout is contiguous");
            let (graph, frame) =
                self.graph_uploaded(fragments, &|gpu| DeviceAffinities::upload_u8(gpu, flat, block_dims), frame)?;
            let n = flat.len() / 3;
            let affinity = |axis: usize, i: usize| gpu_waterz_core::affinities::u8_affinity(flat[axis * n + i]);
            return Ok((block_pairs(shape, |i| cursor.at(i), ids, lower, graph, affinity), frame));
        }
        let affinities = read_region(source, block)?;
        if affinities.shape() != [3, shape[0], shape[1], shape[2]] {
            return Err(invalid(format!("affinities {:?} must be 3 channels of {shape:?}", affinities.shape())));
        }
        let values = affinities.as_standard_layout();
        let values = values.as_slice().expect("a standard layout is contiguous");
        let (graph, frame) =
            self.graph_uploaded(fragments, &|gpu| DeviceAffinities::upload_f32(gpu, values, block_dims), frame)?;
        let n = values.len() / 3;
        Ok((block_pairs(shape, |i| cursor.at(i), ids, lower, graph, |axis, i| values[axis * n + i]), frame))
    }
}

impl DecodeSteps for GpuSteps {
    fn plateau_region(&self, dims: [u64; 3], block: Block) -> Block {
        block.grown(dims, 2, 2)
    }

    fn local_plateaus(
        &self,
        dims: [u64; 3],
        block: Block,
        affinities: ArrayView4<'_, f32>,
        params: WatershedParams,
    ) -> Result<LocalPlateaus> {
        let region = self.plateau_region(dims, block);
        check_plateau_input(dims, block, region, affinities, params)?;
        let values = affinities.as_standard_layout();
        let values = values.as_slice().expect("a standard layout is contiguous");
        let dims_of_region = dims3(region.shape());
        self.plateaus_uploaded(dims, block, params, &|gpu| DeviceAffinities::upload_f32(gpu, values, dims_of_region))
    }

    /// Step 1 from codes: uploaded as they are (a quarter of float32's
    /// bytes), read by the kernels as `k / 255`.
    fn local_plateaus_codes(
        &self,
        dims: [u64; 3],
        block: Block,
        codes: ArrayView4<'_, u8>,
        params: WatershedParams,
    ) -> Result<LocalPlateaus> {
        let region = self.plateau_region(dims, block);
        check_plateau_shape(dims, block, region, codes.shape(), params)?;
        let codes = codes.as_standard_layout();
        let flat = codes.as_slice().expect("a standard layout is contiguous");
        let dims_of_region = dims3(region.shape());
        self.plateaus_uploaded(dims, block, params, &|gpu| DeviceAffinities::upload_u8(gpu, flat, dims_of_region))
    }

    /// Step 1 on affinities the source makes on the GPU
    /// ([`AffinitySource::read_on_gpu`]), else read on the host (as codes
    /// where it stores uint8) and uploaded.
    fn local_plateaus_from(
        &self,
        source: &dyn AffinitySource,
        dims: [u64; 3],
        block: Block,
        params: WatershedParams,
    ) -> Result<LocalPlateaus> {
        let region = self.plateau_region(dims, block);
        if source.makes_on_gpu() {
            let made = self.plateaus_in_turn(dims, block, params, |gpu| {
                let mut timer = turn_timer(gpu)?;
                let Some(affs) = source.read_on_gpu(gpu, region)? else { return Ok(None) };
                timer.mark("affinities").map_err(WatershedError::from)?;
                tracing::debug!(stages_ms = ?timer.stages(), "GPU block affinities");
                Ok(Some(affs))
            })?;
            if let Some(plateaus) = made {
                return Ok(plateaus);
            }
        }
        match read_region_codes(source, region)? {
            Some(codes) => self.local_plateaus_codes(dims, block, codes.view(), params),
            None => self.local_plateaus(dims, block, read_region(source, region)?.view(), params),
        }
    }

    /// Step 5 with the faces inside the block counted by the GPU's region
    /// graph (`gpu_waterz_graph::gpu::region_graph`) over the block's
    /// fragments: the faces between a voxel and the one before it inside
    /// the block, exactly [`crate::block_edges`]'s, in the same integer
    /// statistics. The faces across the block's lower faces (against the
    /// layers of the blocks before) are counted on the host.
    fn block_edges(
        &self,
        dims: [u64; 3],
        block: Block,
        components: ArrayView3<'_, u32>,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
        affinities: ArrayView4<'_, f32>,
    ) -> Result<EdgeList> {
        let labels = BlockLabels::new(dims, block, components, ids, lower)?;
        self.edges_of_host_values(&labels, ids, lower, affinities)
    }

    /// Step 5 on affinities the source makes on the GPU
    /// ([`AffinitySource::read_on_gpu`]), the lower faces' from one-voxel
    /// slabs of them made by the source; else read on the host and
    /// uploaded.
    fn block_edges_from(
        &self,
        source: &dyn AffinitySource,
        dims: [u64; 3],
        block: Block,
        components: ArrayView3<'_, u32>,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
    ) -> Result<EdgeList> {
        let labels = BlockLabels::new(dims, block, components, ids, lower)?;
        let made = self.graph_made_on_gpu(source, block, lower, FragmentsUp::Made(&|gpu| labels.upload(gpu)), None)?;
        let Some((graph, slabs, _)) = made else {
            return self.edges_of_host_values(&labels, ids, lower, read_region(source, block)?.view());
        };
        let s = labels.shape;
        Ok(labels.pairs(ids, lower, graph, |axis, i| slab_affinity(&slabs, s, axis, i)))
    }

    /// Step 5 from the block's runs: each run's first voxel and fragment go
    /// to the GPU (a few bytes per run, not four per voxel), which writes
    /// the fragments out per voxel and counts the faces inside the block;
    /// the faces across its lower faces are counted here from the runs.
    /// The affinities are made on the GPU where the source makes them
    /// there, else read on the host and uploaded.
    fn block_edge_runs_from(
        &self,
        source: &dyn AffinitySource,
        dims: [u64; 3],
        block: Block,
        components: &ComponentRuns,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
    ) -> Result<EdgeList> {
        Ok(self.block_edge_runs_and_frame(source, dims, block, components, ids, lower, false)?.0)
    }

    /// [`DecodeSteps::block_edge_runs_from`], and where `frame` asks for it
    /// the fragments' zstd frame, made in the same turn from the labels the
    /// GPU wrote out of the runs ([`crate::label_frame_on_gpu`]).
    fn block_edge_runs_and_frame(
        &self,
        source: &dyn AffinitySource,
        dims: [u64; 3],
        block: Block,
        components: &ComponentRuns,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
        frame: bool,
    ) -> Result<(EdgeList, Option<Vec<u8>>)> {
        let shape = check_block_edge_runs(dims, block, components, ids, lower)?;
        // The runs go up from page-locked memory, filled here before the
        // turn: the directions' room of steps 1 and 3 where they fit.
        let mut pinned = self.take_pinned();
        let n_runs = components.runs().len();
        let (starts, labels) = runs_room_of(&self.gpu, &mut pinned, n_runs, n_runs + n_runs / 4)?;
        let n_fragments = fragment_runs(block, components, ids, starts, labels)?;
        // Checked here, before the turn, which the other blocks wait for.
        let runs = FragmentRuns::new(starts, labels, dims3(block.shape()), n_fragments)?;
        let frame = frame.then(|| block.shape());
        let edges = self.block_edge_runs_with(source, block, shape, components, ids, lower, &runs, frame);
        self.give_back_pinned(pinned);
        edges
    }

    /// Step 5's affinities made on the GPU and downloaded, where the source
    /// makes them there; else read on the host.
    fn read_affinities(&self, source: &dyn AffinitySource, region: Block) -> Result<Array4<f32>> {
        if !source.makes_on_gpu() {
            return read_region(source, region);
        }
        match self.exclusive("read_affinities", |gpu| made_on_gpu(gpu, source, region))? {
            Some(values) => Ok(values),
            None => read_region(source, region),
        }
    }

    fn local_basins(
        &self,
        dims: [u64; 3],
        block: Block,
        mut bits: Array3<u8>,
        open: &OpenVoxels,
        settled: &[u8],
    ) -> Result<LocalBasins> {
        apply_settled(dims, block, &mut bits, open, settled)?;
        let standard = bits.as_standard_layout();
        let flat = standard.as_slice().expect("a standard layout is contiguous");
        let mut components = touched::<u32>(block);
        self.exclusive("local_basins", |gpu| Ok(block_basins(gpu, flat, dims3(block.shape()), &mut components)?))?;
        drop(standard);
        basins_from_components(dims, block, components, bits)
    }

    /// Step 3 with the components run-length encoded on the GPU: only the
    /// runs' first voxels and components come down (about a tenth of the
    /// four bytes per voxel on cell-like data). The directions go up from,
    /// and the runs come down into, page-locked buffers that this block's
    /// thread fills before the turn and reads after it: the turn's copies
    /// run at the bus's speed, with no host copy inside it.
    fn local_basin_runs(
        &self,
        dims: [u64; 3],
        block: Block,
        mut bits: Array3<u8>,
        open: &OpenVoxels,
        settled: &[u8],
    ) -> Result<LocalBasinRuns> {
        let started = std::time::Instant::now();
        apply_settled(dims, block, &mut bits, open, settled)?;
        let n = block.len() as usize;
        let mut pinned = self.take_pinned();
        let staged = pinned_prefix(&self.gpu, &mut pinned.bytes, n, n)?;
        match bits.as_slice() {
            Some(flat) => staged.copy_from_slice(flat),
            None => staged.iter_mut().zip(bits.iter()).for_each(|(s, &b)| *s = b),
        }
        let prepared = started.elapsed();
        let turn = self.exclusive("local_basins", |gpu| {
            // `block_basins_on_device` logs its own stages; these are the runs'.
            let staged = &pinned.bytes.as_ref().expect("made above")[..n];
            // The directions are on the device once it returns (the upload
            // is waited for): their room takes the runs where they fit.
            let (labels, n_components) = block_basins_on_device(gpu, staged, dims3(block.shape()))?;
            let mut timer = turn_timer(gpu)?;
            let timed = |timer: &mut StageTimer, stage| timer.mark(stage).map_err(WatershedError::from);
            let (starts, values, count) =
                gpu_waterz_runtime::primitives::value_runs_u32(gpu, &labels, n as u64).map_err(WatershedError::from)?;
            drop(labels);
            timed(&mut timer, "runs")?;
            let count = count as usize;
            let (starts_room, values_room) = runs_room_of(gpu, &mut pinned, count, count + count / 4)?;
            gpu.download_to_slice(&starts, starts_room).map_err(WatershedError::from)?;
            gpu.download_to_slice(&values, values_room).map_err(WatershedError::from)?;
            timed(&mut timer, "runs down")?;
            tracing::debug!(stages_ms = ?timer.stages(), runs = count, "GPU block runs");
            Ok((count, n_components))
        });
        let turned = std::time::Instant::now();
        let runs = turn.and_then(|(count, n_components)| {
            let (starts, values) = runs_room_of(&self.gpu, &mut pinned, count, count)?;
            let (starts, values) = (&*starts, &*values);
            // Components are numbered 1..=n: the runs hold the largest
            // (checked here, after the turn, which the other blocks wait for).
            let largest = values.par_iter().copied().max();
            if largest.map_or(0, u64::from) != n_components {
                return Err(invalid(format!(
                    "block {:?}..{:?}: runs of components up to {largest:?} for {n_components} components",
                    block.lo, block.hi
                )));
            }
            let bs = block.shape();
            ComponentRuns::from_starts([bs[0] as usize, bs[1] as usize, bs[2] as usize], values, starts)
        });
        self.give_back_pinned(pinned);
        let basins = basins_from_runs(dims, block, runs?, bits);
        // The host's share of the block's step 3, before and after the turn.
        tracing::debug!(
            prepare_ms = prepared.as_secs_f64() * 1e3,
            summarise_ms = turned.elapsed().as_secs_f64() * 1e3,
            "block's basins summarised"
        );
        basins
    }

    /// The GPU's ParHAC at ε = 0, as the whole-volume GPU decode merges
    /// (the same region graph gives the same segments, labelled by each
    /// region's smallest fragment).
    fn merge(
        &self,
        n_fragments: u64,
        edges: Vec<[u64; 2]>,
        stats: Vec<ContactStats>,
        thresholds: &[f64],
    ) -> Result<(Vec<f64>, Vec<Vec<u64>>)> {
        Thresholds::new(thresholds)?;
        self.exclusive("merge", |gpu| {
            let started = std::time::Instant::now();
            let device = DeviceEdges::upload(gpu, &edges, &stats, n_fragments + 1)?;
            tracing::debug!(edges = edges.len(), seconds = started.elapsed().as_secs_f64(), "region graph uploaded");
            parhac_tables(gpu, device, thresholds)
        })
    }

    /// Step 6 with the region graph summed on the GPU
    /// ([`DeviceEdges::sum_parts`]: each block's pairs one part, sorted and
    /// reduced by key on the device, the same edges and integer sums as
    /// [`crate::region_graph`]'s) and merged there by ParHAC at ε = 0 in the
    /// same turn: the whole graph is neither summed on the host nor
    /// uploaded again. Where the sums could overflow 64 bits (`sum_parts`
    /// gives `None`), summed on the host as by default.
    fn merge_lists(
        &self,
        n_fragments: u64,
        lists: &[&EdgeList],
        thresholds: &[f64],
    ) -> Result<(Vec<f64>, Vec<Vec<u64>>, u64)> {
        Thresholds::new(thresholds)?;
        check_edge_lists(n_fragments, lists)?;
        let started = std::time::Instant::now();
        // Fragment ids fit 32 bits (checked): each pair is one key.
        let keys: Vec<Vec<u64>> = lists
            .par_iter()
            .map(|list| list.u.par_iter().zip(&list.v).map(|(&u, &v)| EdgeKey::new(u, v).bits()).collect())
            .collect();
        let parts: Vec<EdgeEntries<'_>> = lists
            .iter()
            .zip(&keys)
            .map(|(list, keys)| EdgeEntries { keys, counts: &list.count, sums: &list.sum })
            .collect();
        let keyed = started.elapsed().as_secs_f64();
        let merged = self.exclusive("merge", |gpu| {
            let summing = std::time::Instant::now();
            let Some(device) = DeviceEdges::sum_parts(gpu, &parts, n_fragments + 1)? else { return Ok(None) };
            let n_edges = device.n_edges();
            tracing::debug!(
                block_edges = device.n_entries(),
                n_edges,
                keyed_s = keyed,
                summed_s = summing.elapsed().as_secs_f64(),
                "region graph summed on the GPU"
            );
            Ok(Some((parhac_tables(gpu, device, thresholds)?, n_edges)))
        })?;
        match merged {
            Some(((thresholds, tables), n_edges)) => Ok((thresholds, tables, n_edges)),
            None => sum_and_merge(self, n_fragments, lists, thresholds),
        }
    }
}

/// ParHAC at ε = 0 over `edges` up to each of `thresholds` (ascending):
/// each threshold's table, the segment (its smallest fragment) of every
/// fragment.
fn parhac_tables(gpu: &Gpu, edges: DeviceEdges, thresholds: &[f64]) -> Result<(Vec<f64>, Vec<Vec<u64>>)> {
    let mut parhac = GpuParhac::new(gpu, edges, 0.0, false)?;
    let mut tables = Vec::with_capacity(thresholds.len());
    for &t in thresholds {
        parhac.merge_until(t as f32)?;
        let roots = gpu.download(&parhac.roots()?).map_err(gpu_waterz_parhac::ParhacError::from)?;
        tables.push(roots.into_par_iter().map(u64::from).collect());
    }
    Ok((thresholds.to_vec(), tables))
}

#[cfg(test)]
mod tests {
    use super::{in_turn, plateaus_from_bytes, plateaus_from_staged};
    use crate::Block;
    use gpu_waterz_watershed::gpu::{CORNER, OPEN};
    use proptest::prelude::*;
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    proptest! {
        /// The one-pass copy and gather of step 1's bytes equals the simple
        /// scan: the same bits (flags cleared only on open voxels) and the
        /// same open voxels, indices and masks, in the same order, for rows
        /// of any length (whole words and a tail) and blocks anywhere in
        /// the volume.
        #[test]
        fn staged_plateaus_equal_the_simple_scan(
            shape in (1u64..5, 1u64..6, 1u64..21),
            at in (0u64..4, 0u64..4, 0u64..4),
            seed in any::<u64>(),
            open_share in 0u64..4,
        ) {
            let lo = [at.0, at.1, at.2];
            let hi = [lo[0] + shape.0, lo[1] + shape.1, lo[2] + shape.2];
            let dims = [hi[0] + 2, hi[1] + 1, hi[2] + 3];
            let block = Block { lo, hi };
            let n = block.len() as usize;
            let mut state = seed;
            let bytes: Vec<u8> = (0..n)
                .map(|_| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let r = (state >> 33) as u8;
                    let flags = if u64::from(r % 4) < open_share { OPEN } else { 0 } | (r & CORNER);
                    (r & 0x3f) | flags
                })
                .collect();
            prop_assert_eq!(plateaus_from_staged(dims, block, &bytes), plateaus_from_bytes(dims, block, bytes));
        }
    }

    /// Blocks that wait for the GPU's turn do not start other blocks: at
    /// most one block per worker is in flight, and nested rayon work inside
    /// the turn still runs.
    #[test]
    fn waiting_for_the_turn_starts_no_other_block() {
        let workers = 4;
        let pool = rayon::ThreadPoolBuilder::new().num_threads(workers).build().unwrap();
        let turn = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let gate = std::sync::Mutex::new(());
        let (in_flight, in_turn_now, most_in_turn) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
        let most = AtomicUsize::new(0);
        let sums: Vec<u64> = pool.install(|| {
            (0..64u64)
                .into_par_iter()
                .map(|b| {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let sum = in_turn(&turn, &gate, || {
                        let now = in_turn_now.fetch_add(1, Ordering::SeqCst) + 1;
                        most_in_turn.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        let sum = (0..1000u64).into_par_iter().map(|i| i * b).sum::<u64>();
                        in_turn_now.fetch_sub(1, Ordering::SeqCst);
                        sum
                    })
                    .unwrap();
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    sum
                })
                .collect()
        });
        assert_eq!(sums, (0..64u64).map(|b| b * 499_500).collect::<Vec<_>>());
        let most = most.load(Ordering::SeqCst);
        assert!(most <= workers, "{most} blocks in flight on {workers} workers");
        assert_eq!(most_in_turn.load(Ordering::SeqCst), 1, "one block at a time in the turn, of three threads");
    }

    /// A panic inside the turn reaches the caller.
    #[test]
    fn a_panic_in_the_turn_reaches_the_caller() {
        let turn = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let gate = std::sync::Mutex::new(());
        let caught =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| in_turn(&turn, &gate, || panic!("inside"))));
        assert!(caught.is_err());
        assert_eq!(in_turn(&turn, &gate, || 7).unwrap(), 7, "the turn's thread survives a panic");
    }
}

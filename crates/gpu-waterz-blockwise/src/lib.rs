//! Exact blockwise decoding: waterz's watershed, region graph and merging
//! computed block by block, equal to the whole-volume result.
//!
//! A volume is cut into blocks ([`BlockGrid`]). Each stage below is either
//! *per block* (it reads one block, its affinities with a small halo, and
//! what the global steps handed it; blocks run in any order, on any
//! machine) or *global* (it reads small summaries of every block):
//!
//! 1. [`local_plateaus`] (per block): the steepest-ascent mask, the plateau
//!    corners and the division of every plateau that lies inside the block,
//!    exactly as the whole-volume watershed divides it. A plateau (voxels
//!    joined by faces both mark) that reaches another block is *open*: its
//!    voxels go to step 2 with their masks and corner flags.
//! 2. [`settle_open_plateaus`] (global): the plateau division of every
//!    open plateau, over the open voxels of all blocks at once (a sparse
//!    set, hashed by voxel index). The division depends on the queue order
//!    of the whole volume, which restricted to one plateau is that
//!    plateau's own breadth-first order from its corners in scan order: so
//!    each plateau is divided alone, and equal to the whole volume's.
//! 3. [`local_basins`] (per block): the basins inside the block (voxels
//!    joined by the direction each kept), numbered in scan order, with
//!    their smallest voxel index and size, and the components and
//!    directions on the block's six faces.
//! 4. [`fragment_ids`] (global): the basins joined across block faces
//!    (union-find over the face pairs a direction crosses) and numbered by
//!    their smallest voxel index: waterz's labels, not only its partition.
//! 5. [`block_edges`] (per block): the region graph's faces inside the
//!    block and across its three lower faces, as exact integer statistics
//!    ([`gpu_waterz_core::ContactStats`]) per fragment pair.
//! 6. [`merge`] (global): the statistics summed per pair over the blocks
//!    (order-free: integers), then waterz's serial merging in exact
//!    arithmetic ([`gpu_waterz_parhac::IterativeMerging`], which the GPU's
//!    ParHAC equals at ε = 0 on tie-free input) up to each threshold: a
//!    table from fragment to segment per threshold.
//! 7. [`relabel`] (per block): the segmentation of a block from its
//!    components and the tables.
//!
//! [`decode_blocks`] runs every stage in this process, the blocks in
//! parallel, reading each block's affinities from an [`AffinitySource`]
//! when its steps need them and handing each block's result to a
//! [`BlockSink`]: the affinities are never held whole. [`decode`] runs it
//! over an affinity array in memory: the reference that the distributed
//! driver (`gpu_waterz.blockwise` on Dask) is tested against, and that is
//! tested here against the whole-volume watershed and merging.
//!
//! What crosses between stages is small against the volume except the per
//! block arrays that stay with their block (one byte per voxel after step
//! 1, four after step 3, which [`decode_blocks`] holds compressed: about a
//! fifth of a byte on basins): the open voxels (9 bytes each), one entry per
//! basin per block (16 bytes), the faces (5 bytes per face voxel), the
//! region graph (32 bytes per fragment pair per block that holds it) and
//! the tables (8 bytes per fragment per threshold).

// The exceptions: the kernels' launches, in `generate::launch` (the
// generated volume) and `frames::launch` (the label frames).
#![deny(unsafe_code)]
// Axis and direction indices are the algorithm's vocabulary (offsets,
// faces, opposites), as in the whole-volume watershed.
#![allow(clippy::needless_range_loop)]

mod frames;
mod generate;
mod gpu;
mod plateaus;
mod stages;

pub use frames::{label_frame, label_frame_on_gpu};
pub use generate::ImplicitSource;
pub use gpu::GpuSteps;
pub use plateaus::{local_plateaus, settle_open_plateaus, LocalPlateaus, OpenVoxels, CORNER_FLAG};
pub use stages::{
    basins_from_runs, block_edges, check_components, component_labels, decode, decode_blocks, decode_blocks_with,
    decode_with, fragment_ids, local_basins, lower_layers, merge, region_graph, relabel, AffinitySource, BasinFaces,
    BasinSummary, BlockSink, BlockwiseSummary, ComponentRuns, CpuSteps, DecodeSteps, Decoded, EdgeList, FragmentIds,
    LocalBasinRuns, LocalBasins, PackedRuns, StepSeconds,
};

/// Errors of the blockwise decode.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlockwiseError {
    /// A grid, block or array that does not fit the volume.
    #[error("blockwise decode: {0}")]
    Invalid(String),
    /// Bad input (thresholds, affinities).
    #[error(transparent)]
    Input(#[from] gpu_waterz_core::CoreError),
    /// The merging failed.
    #[error(transparent)]
    Merge(#[from] gpu_waterz_parhac::ParhacError),
    /// An [`AffinitySource`] could not read, or a [`BlockSink`] could not
    /// write.
    #[error("blockwise decode: {0}")]
    Io(String),
    /// A per-block step on the GPU failed ([`GpuSteps`]).
    #[error("blockwise decode on the GPU: {0}")]
    Gpu(#[from] gpu_waterz_watershed::WatershedError),
    /// The region graph could not go to the GPU for the merge ([`GpuSteps`]).
    #[error("blockwise decode on the GPU: {0}")]
    GpuGraph(#[from] gpu_waterz_graph::GraphError),
}

/// The kind of a [`BlockwiseError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Shapes, blocks or summaries that do not fit together.
    Invalid,
    /// Bad input values.
    Input,
    /// The merging refused its graph.
    Merge,
    /// Reading the affinities or writing the results failed.
    Io,
    /// The GPU failed, or a block does not fit its limits.
    Gpu,
}

impl BlockwiseError {
    /// What went wrong, in one word.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Invalid(_) => ErrorKind::Invalid,
            Self::Input(_) => ErrorKind::Input,
            Self::Merge(_) => ErrorKind::Merge,
            Self::Io(_) => ErrorKind::Io,
            Self::Gpu(_) | Self::GpuGraph(_) => ErrorKind::Gpu,
        }
    }
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, BlockwiseError>;

pub(crate) fn invalid(message: impl Into<String>) -> BlockwiseError {
    BlockwiseError::Invalid(message.into())
}

/// One block: the voxels `lo..hi` along `(z, y, x)` of a volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Block {
    /// The first voxel.
    pub lo: [u64; 3],
    /// One past the last voxel.
    pub hi: [u64; 3],
}

impl Block {
    /// The block's extents.
    pub fn shape(&self) -> [u64; 3] {
        [self.hi[0] - self.lo[0], self.hi[1] - self.lo[1], self.hi[2] - self.lo[2]]
    }

    /// Its number of voxels.
    pub fn len(&self) -> u64 {
        self.shape().iter().product()
    }

    /// Whether it holds no voxel.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks that the block is a non-empty part of a volume of `dims`
    /// (itself a volume [`BlockGrid::new`] takes), of fewer than 2^32
    /// voxels.
    pub fn check(&self, dims: [u64; 3]) -> Result<()> {
        check_dims(dims)?;
        if self.len() >= u32::MAX as u64 {
            return Err(invalid(format!("blocks of {} voxels: fewer than 2^32 are taken", self.len())));
        }
        if (0..3).any(|a| self.lo[a] >= self.hi[a] || self.hi[a] > dims[a]) {
            return Err(invalid(format!(
                "block {:?}..{:?} is not a non-empty part of a volume of {dims:?}",
                self.lo, self.hi
            )));
        }
        Ok(())
    }

    /// The voxel of the volume at `local`, a position in the block.
    pub(crate) fn global(&self, local: [u64; 3]) -> [u64; 3] {
        [self.lo[0] + local[0], self.lo[1] + local[1], self.lo[2] + local[2]]
    }

    /// Whether voxel `at` of the volume lies in the block.
    pub(crate) fn contains(&self, at: [u64; 3]) -> bool {
        (0..3).all(|a| at[a] >= self.lo[a] && at[a] < self.hi[a])
    }

    /// The region whose affinities [`local_plateaus`] reads: the block
    /// grown by one voxel below and two above along each axis, clipped
    /// to the volume.
    pub fn halo(&self, dims: [u64; 3]) -> Block {
        self.grown(dims, 1, 2)
    }

    /// The block grown by `below` voxels below and `above` voxels above
    /// along each axis, clipped to a volume of `dims`.
    pub fn grown(&self, dims: [u64; 3], below: u64, above: u64) -> Block {
        let mut grown = *self;
        for a in 0..3 {
            grown.lo[a] = self.lo[a].saturating_sub(below);
            grown.hi[a] = self.hi[a].saturating_add(above).min(dims[a]);
        }
        grown
    }
}

/// A volume of `dims` voxels cut into blocks of `block` voxels (the last
/// along each axis shorter when the extent is not a multiple), numbered in
/// C order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockGrid {
    dims: [u64; 3],
    block: [u64; 3],
    counts: [u64; 3],
}

impl BlockGrid {
    /// The grid of `dims` in blocks of `block`; both must be positive along
    /// every axis.
    pub fn new(dims: [u64; 3], block: [u64; 3]) -> Result<Self> {
        check_dims(dims)?;
        if block.contains(&0) {
            return Err(invalid(format!("a volume of {dims:?} cannot be cut into blocks of {block:?}")));
        }
        let counts = [dims[0].div_ceil(block[0]), dims[1].div_ceil(block[1]), dims[2].div_ceil(block[2])];
        Ok(Self { dims, block, counts })
    }

    /// The volume's extents.
    pub fn dims(&self) -> [u64; 3] {
        self.dims
    }

    /// The extents of a (full) block.
    pub fn block_shape(&self) -> [u64; 3] {
        self.block
    }

    /// The number of blocks along each axis.
    pub fn counts(&self) -> [u64; 3] {
        self.counts
    }

    /// The number of blocks.
    pub fn len(&self) -> usize {
        self.counts.iter().product::<u64>() as usize
    }

    /// Whether there are none (never: a grid covers a non-empty volume).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The block at grid position `at`.
    pub fn block_at(&self, at: [u64; 3]) -> Block {
        let mut block = Block { lo: [0; 3], hi: [0; 3] };
        for a in 0..3 {
            block.lo[a] = at[a] * self.block[a];
            block.hi[a] = (block.lo[a] + self.block[a]).min(self.dims[a]);
        }
        block
    }

    /// The grid position of block number `index`.
    pub fn position(&self, index: usize) -> [u64; 3] {
        let i = index as u64;
        [i / (self.counts[1] * self.counts[2]), (i / self.counts[2]) % self.counts[1], i % self.counts[2]]
    }

    /// Block number `index`.
    pub fn block(&self, index: usize) -> Block {
        self.block_at(self.position(index))
    }

    /// The number of the block at grid position `at`.
    pub fn index(&self, at: [u64; 3]) -> usize {
        ((at[0] * self.counts[1] + at[1]) * self.counts[2] + at[2]) as usize
    }
}

/// Checks a volume's extents: positive, and few enough voxels that
/// indices, a voxel's neighbours and halos stay far from overflowing.
pub(crate) fn check_dims(dims: [u64; 3]) -> Result<()> {
    if dims.contains(&0) || dims.iter().any(|&d| d >= 1 << 40) {
        return Err(invalid(format!("a volume of {dims:?}: each extent must be in 1..2^40")));
    }
    if dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).is_none_or(|n| n >= u64::MAX / 8) {
        return Err(invalid(format!("a volume of {dims:?} is too large")));
    }
    Ok(())
}

/// The linear index of voxel `at` = `(z, y, x)` in an array of `shape`
/// (C order).
pub(crate) fn voxel_index(shape: [u64; 3], at: [u64; 3]) -> u64 {
    (at[0] * shape[1] + at[1]) * shape[2] + at[2]
}

/// The voxel `(z, y, x)` at linear index `i` of an array of `shape`: the
/// inverse of [`voxel_index`].
pub(crate) fn voxel_at(shape: [u64; 3], i: u64) -> [u64; 3] {
    [i / (shape[1] * shape[2]), (i / shape[2]) % shape[1], i % shape[2]]
}

/// The linear offset of the neighbour in each direction (waterz's order
/// `-z, -y, -x, +z, +y, +x`) in an array of `shape`.
pub(crate) fn neighbour_offsets(shape: [u64; 3]) -> [i64; 6] {
    let (sz, sy) = ((shape[1] * shape[2]) as i64, shape[2] as i64);
    [-sz, -sy, -1, sz, sy, 1]
}

/// Whether the neighbour of `at` in direction `d` lies inside `0..shape`.
pub(crate) fn neighbour_inside(at: [u64; 3], d: usize, shape: [u64; 3]) -> bool {
    let axis = d % 3;
    if d < 3 {
        at[axis] > 0
    } else {
        at[axis] + 1 < shape[axis]
    }
}

/// The root of `i` in the union-find forest `parent` (halving the path).
pub(crate) fn find(parent: &mut [u32], mut i: u32) -> u32 {
    while parent[i as usize] != i {
        let p = parent[i as usize];
        parent[i as usize] = parent[p as usize];
        i = p;
    }
    i
}

/// Joins the trees of `a` and `b`; the smaller root stays a root, so a
/// root is always the smallest member of its tree.
pub(crate) fn union(parent: &mut [u32], a: u32, b: u32) {
    let (r, q) = (find(parent, a), find(parent, b));
    if r != q {
        parent[r.max(q) as usize] = r.min(q);
    }
}

//! Steps 3 to 7: basins, fragment ids, the region graph, merging and
//! relabelling; and [`decode_blocks`] (and [`decode`] on it), every step in
//! this process.

use crate::plateaus::{local_plateaus, settle_open_plateaus, LocalPlateaus, OpenVoxels};
use crate::{
    find, invalid, neighbour_inside, neighbour_offsets, union, voxel_at, voxel_index, Block, BlockGrid, Result,
};
use gpu_waterz_abi::watershed::DIRECTION_BITS;
use gpu_waterz_core::{ContactStats, Thresholds, WatershedParams};
use gpu_waterz_parhac::IterativeMerging;
use gpu_waterz_runtime::Gpu;
use gpu_waterz_watershed::gpu::DeviceAffinities;
use ndarray::{Array3, Array4, ArrayView3, ArrayView4, ArrayViewMut3, Axis, Slice};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::sync::Mutex;
use std::time::Instant;

/// The components and directions on a block's six faces, in direction
/// order (`-z, -y, -x, +z, +y, +x`): face `d` is the layer of the block
/// whose voxels lead out of it in direction `d`, its two other axes in C
/// order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BasinFaces {
    /// The component of each face voxel (0: background).
    pub components: [Vec<u32>; 6],
    /// Its directions.
    pub bits: [Vec<u8>; 6],
}

/// What [`local_basins`] gives for one block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalBasins {
    /// Each voxel's component inside the block, `1..=n` in scan order of
    /// their first voxel; 0 for background.
    pub components: Array3<u32>,
    /// The smallest voxel index (in the volume) of each component,
    /// component `c` at `c - 1`.
    pub component_min: Vec<u64>,
    /// The voxels of each component, likewise.
    pub component_sizes: Vec<u64>,
    /// The number of background voxels in the block.
    pub background: u64,
    /// The faces.
    pub faces: BasinFaces,
}

/// [`LocalBasins`] with the components as runs ([`ComponentRuns`]): what
/// [`DecodeSteps::local_basin_runs`] gives, and what the driver holds
/// (packed) between the steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalBasinRuns {
    /// [`LocalBasins::components`] as runs along the flattened block.
    pub components: ComponentRuns,
    /// [`LocalBasins::component_min`].
    pub component_min: Vec<u64>,
    /// [`LocalBasins::component_sizes`].
    pub component_sizes: Vec<u64>,
    /// [`LocalBasins::background`].
    pub background: u64,
    /// [`LocalBasins::faces`].
    pub faces: BasinFaces,
}

impl From<LocalBasins> for LocalBasinRuns {
    fn from(basins: LocalBasins) -> Self {
        let LocalBasins { components, component_min, component_sizes, background, faces } = basins;
        Self { components: ComponentRuns::of(components.view()), component_min, component_sizes, background, faces }
    }
}

/// The layer of `shape` that face `d` is, as `(axis, index along it)`.
fn face_layer(shape: [u64; 3], d: usize) -> (usize, u64) {
    let axis = d % 3;
    (axis, if d < 3 { 0 } else { shape[axis] - 1 })
}

/// The values of `array` on face `d`, in the face's order.
fn face_values<T: Copy>(array: &ArrayView3<'_, T>, d: usize) -> Vec<T> {
    let shape = array.shape();
    let (axis, at) = face_layer([shape[0] as u64, shape[1] as u64, shape[2] as u64], d);
    let at = at as usize;
    array.index_axis(Axis(axis), at).iter().copied().collect()
}

/// Step 3 for `block` of a volume of `dims`: `bits` and `open` are its
/// [`crate::LocalPlateaus`], `settled` its open voxels' directions from
/// [`settle_open_plateaus`].
pub fn local_basins(
    dims: [u64; 3],
    block: Block,
    mut bits: Array3<u8>,
    open: &OpenVoxels,
    settled: &[u8],
) -> Result<LocalBasins> {
    let component = basin_components(dims, block, &mut bits, open, settled)?;
    basins_from_components(dims, block, component, bits)
}

/// [`local_basins`] with the components as runs ([`CpuSteps`]'s step 3 in
/// the driver, which holds runs).
fn local_basin_runs(
    dims: [u64; 3],
    block: Block,
    mut bits: Array3<u8>,
    open: &OpenVoxels,
    settled: &[u8],
) -> Result<LocalBasinRuns> {
    let component = basin_components(dims, block, &mut bits, open, settled)?;
    let (z, y, x) = bits.dim();
    let runs = ComponentRuns::of(ArrayView3::from_shape((z, y, x), &component).expect("one component per voxel"));
    drop(component);
    basins_from_runs(dims, block, runs, bits)
}

/// Step 3's components: `bits` with the settled directions written in,
/// each voxel's component (C order) `1..=n` in scan order of its first
/// voxel, 0 for background.
fn basin_components(
    dims: [u64; 3],
    block: Block,
    bits: &mut Array3<u8>,
    open: &OpenVoxels,
    settled: &[u8],
) -> Result<Vec<u32>> {
    apply_settled(dims, block, bits, open, settled)?;
    let bs = block.shape();
    let n = block.len() as usize;
    // In C order whatever the array's layout (a copy only when it is not).
    let standard = bits.as_standard_layout();
    let flat = standard.as_slice().expect("a standard layout is contiguous");
    let step = neighbour_offsets(bs);
    let mut parent: Vec<u32> = (0..n as u32).collect();
    for (i, &b) in flat.iter().enumerate() {
        if b == 0 {
            continue;
        }
        let at = voxel_at(bs, i as u64);
        for (d, &bit) in DIRECTION_BITS.iter().enumerate() {
            if b & bit != 0 && neighbour_inside(at, d, bs) {
                union(&mut parent, i as u32, (i as i64 + step[d]) as u32);
            }
        }
    }
    // Components in scan order of their first voxel: a root is the
    // smallest voxel of its component (unions keep the smaller root).
    let mut component = vec![0u32; n];
    let mut n_components = 0u32;
    for i in 0..n {
        if flat[i] == 0 {
            continue;
        }
        let root = find(&mut parent, i as u32) as usize;
        if root == i {
            n_components += 1;
            component[i] = n_components;
        } else {
            component[i] = component[root];
        }
    }
    Ok(component)
}

/// Checks step 3's input for `block` (its directions `bits`, its open
/// voxels and their settled directions) and writes the settled directions
/// into `bits`.
pub(crate) fn apply_settled(
    dims: [u64; 3],
    block: Block,
    bits: &mut Array3<u8>,
    open: &OpenVoxels,
    settled: &[u8],
) -> Result<()> {
    block.check(dims)?;
    let bs = block.shape();
    let shape = (bs[0] as usize, bs[1] as usize, bs[2] as usize);
    if bits.dim() != shape || open.index.len() != settled.len() {
        return Err(invalid(format!(
            "block {:?}..{:?}: directions of shape {:?} with {} open voxels and {} settled",
            block.lo,
            block.hi,
            bits.dim(),
            open.index.len(),
            settled.len()
        )));
    }
    if settled.iter().any(|&b| b & !0x3f != 0) {
        return Err(invalid("settled directions hold bits other than the six directions"));
    }
    // The volume's row of each open voxel is found by a division only where
    // it leaves the last one's row (open voxels ascend: most follow one in
    // the same row), not for every voxel.
    let (mut row_start, mut row_end, mut row_at) = (0u64, 0u64, [0u64; 2]);
    for (&v, &b) in open.index.iter().zip(settled) {
        if !(row_start..row_end).contains(&v) {
            let row = v / dims[2];
            row_start = row * dims[2];
            row_end = row_start.saturating_add(dims[2]);
            row_at = [row / dims[1], row % dims[1]];
        }
        let at = [row_at[0], row_at[1], v - row_start];
        if !block.contains(at) {
            return Err(invalid(format!("open voxel {v} is not in block {:?}..{:?}", block.lo, block.hi)));
        }
        bits[[(at[0] - block.lo[0]) as usize, (at[1] - block.lo[1]) as usize, (at[2] - block.lo[2]) as usize]] = b;
    }
    Ok(())
}

/// Step 3's result from the block's components (`component`, one per
/// voxel in C order: `1..=n` in scan order of their first voxel, 0 for
/// background) and its directions: each component's smallest voxel and
/// size, the background count and the faces.
pub(crate) fn basins_from_components(
    dims: [u64; 3],
    block: Block,
    component: Vec<u32>,
    bits: Array3<u8>,
) -> Result<LocalBasins> {
    let bs = block.shape();
    let shape = (bs[0] as usize, bs[1] as usize, bs[2] as usize);
    if component.len() != block.len() as usize || bits.dim() != shape {
        return Err(invalid(format!(
            "block {:?}..{:?}: {} components for its voxels",
            block.lo,
            block.hi,
            component.len()
        )));
    }
    let mut component_min = Vec::new();
    let mut component_sizes: Vec<u64> = Vec::new();
    let mut background = 0;
    for (i, &c) in component.iter().enumerate() {
        if c == 0 {
            background += 1;
            continue;
        }
        let c = c as usize;
        if c == component_min.len() + 1 {
            component_min.push(voxel_index(dims, block.global(voxel_at(bs, i as u64))));
            component_sizes.push(0);
        } else if c > component_min.len() {
            return Err(invalid(format!("component {c} appears before component {}", component_min.len() + 1)));
        }
        component_sizes[c - 1] += 1;
    }
    let components = Array3::from_shape_vec(shape, component).expect("the block's shape holds its voxels");
    let faces = BasinFaces {
        components: std::array::from_fn(|d| face_values(&components.view(), d)),
        bits: std::array::from_fn(|d| face_values(&bits.view(), d)),
    };
    Ok(LocalBasins { components, component_min, component_sizes, background, faces })
}

/// Step 3's summary of `block` (of a volume of `dims`) from its
/// components as runs and its directions `bits`: each component's smallest
/// voxel and size, the background's size, the components and directions on
/// the block's faces. What a [`DecodeSteps`] whose step 3 finds components
/// as runs (the GPU's, which downloads runs, not a component per voxel)
/// gives the driver; equal to [`local_basins`]'s summary of the same
/// components. Fails unless the components are numbered `1..` in the
/// order they first appear (0 is the background) and the runs and `bits`
/// have the block's shape.
pub fn basins_from_runs(
    dims: [u64; 3],
    block: Block,
    components: ComponentRuns,
    bits: Array3<u8>,
) -> Result<LocalBasinRuns> {
    let bs = block.shape();
    let shape = [bs[0] as usize, bs[1] as usize, bs[2] as usize];
    if components.shape() != shape || bits.dim() != (shape[0], shape[1], shape[2]) {
        return Err(invalid(format!(
            "block {:?}..{:?}: components of shape {:?} and directions of {:?} for its voxels",
            block.lo,
            block.hi,
            components.shape(),
            bits.dim()
        )));
    }
    let mut component_min = Vec::new();
    let mut component_sizes: Vec<u64> = Vec::new();
    let mut background = 0;
    let mut start = 0u64;
    for &[c, length] in components.runs() {
        let c = c as usize;
        if c == 0 {
            background += length as u64;
        } else {
            if c == component_min.len() + 1 {
                component_min.push(voxel_index(dims, block.global(voxel_at(bs, start))));
                component_sizes.push(0);
            } else if c > component_min.len() {
                return Err(invalid(format!("component {c} appears before component {}", component_min.len() + 1)));
            }
            component_sizes[c - 1] += length as u64;
        }
        start += length as u64;
    }
    let mut cursor = RunCursor::new(&components);
    let faces = BasinFaces {
        components: std::array::from_fn(|d| face_positions(bs, d).map(|i| cursor.at(i)).collect()),
        bits: std::array::from_fn(|d| face_values(&bits.view(), d)),
    };
    Ok(LocalBasinRuns { components, component_min, component_sizes, background, faces })
}

/// The flat (C order) positions of face `d` of a block of `shape`, in the
/// face's order (its two other axes in C order): ascending.
fn face_positions(shape: [u64; 3], d: usize) -> impl Iterator<Item = usize> {
    let (axis, at) = face_layer(shape, d);
    let strides = [shape[1] * shape[2], shape[2], 1];
    let (p, q) = match axis {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    };
    let (np, nq) = (shape[p], shape[q]);
    (0..np).flat_map(move |a| (0..nq).map(move |b| (at * strides[axis] + a * strides[p] + b * strides[q]) as usize))
}

/// Looks up the component of block voxels (flat, C order) in a block's
/// runs, through a table of the run that holds each row's first voxel:
/// from the last lookup's run where the voxel lies at or after it in its
/// row (lookups that ascend along a row, or step to the next run), else
/// from the nearer end of the voxel's row (a row's first or last voxel in
/// one step). No table of every run's start is made (it cost as much as
/// the runs), and no lookup searches more than half a row's runs.
pub(crate) struct RunCursor<'a> {
    runs: &'a [[u32; 2]],
    /// Voxels per row (the block's extent along x).
    row: u64,
    /// For each row, and one past the last: the run that holds the row's
    /// first voxel and that run's first voxel (past the last row: the
    /// number of runs and of voxels).
    rows: Vec<(usize, u64)>,
    /// The run of the last lookup and its first voxel.
    at: usize,
    at_start: u64,
}

impl<'a> RunCursor<'a> {
    pub(crate) fn new(runs: &'a ComponentRuns) -> Self {
        let [z, y, x] = runs.shape();
        let (row, n_rows) = (x as u64, z * y);
        let mut rows = Vec::with_capacity(n_rows + 1);
        let (mut start, mut next_row) = (0u64, 0u64);
        for (k, &[_, length]) in runs.runs().iter().enumerate() {
            let end = start + length as u64;
            // A run may hold the first voxels of several rows.
            while next_row < end && rows.len() < n_rows {
                rows.push((k, start));
                next_row += row;
            }
            start = end;
        }
        rows.push((runs.runs().len(), start));
        Self { runs: runs.runs(), row, rows, at: 0, at_start: 0 }
    }

    /// The component at voxel `i` (inside the block: the runs fill it;
    /// past its end, the last voxel's).
    pub(crate) fn at(&mut self, i: usize) -> u32 {
        let voxels = self.rows.last().map_or(0, |&(_, n)| n);
        let i = (i as u64).min(voxels.saturating_sub(1));
        let length = |k: usize| self.runs[k][1] as u64;
        if self.at_start <= i && i < self.at_start + length(self.at) {
            return self.runs[self.at][0];
        }
        let r = (i / self.row) as usize;
        let (first, first_start) = self.rows[r];
        let (mut k, mut s) = if self.at_start <= i && self.at_start >= first_start {
            (self.at, self.at_start)
        } else if (i - r as u64 * self.row) * 2 < self.row {
            (first, first_start)
        } else {
            // Back from the run that holds the next row's first voxel (or
            // from past the last run): it starts after `i`.
            let (mut k, mut s) = self.rows[r + 1];
            while s > i {
                k -= 1;
                s -= length(k);
            }
            (k, s)
        };
        while s + length(k) <= i {
            s += length(k);
            k += 1;
        }
        (self.at, self.at_start) = (k, s);
        self.runs[k][0]
    }
}

/// A block's part of [`local_basins`] that [`fragment_ids`] reads.
#[derive(Clone, Copy, Debug)]
pub struct BasinSummary<'a> {
    /// [`LocalBasins::component_min`].
    pub component_min: &'a [u64],
    /// [`LocalBasins::component_sizes`].
    pub component_sizes: &'a [u64],
    /// [`LocalBasins::background`].
    pub background: u64,
    /// [`LocalBasins::faces`].
    pub faces: &'a BasinFaces,
}

impl LocalBasins {
    /// The part that [`fragment_ids`] reads.
    pub fn summary(&self) -> BasinSummary<'_> {
        BasinSummary {
            component_min: &self.component_min,
            component_sizes: &self.component_sizes,
            background: self.background,
            faces: &self.faces,
        }
    }
}

/// What [`fragment_ids`] gives: waterz's fragment labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragmentIds {
    /// The number of fragments: labels are `1..=n_fragments`.
    pub n_fragments: u64,
    /// For each block, the fragment of each component (index 0: 0).
    pub ids: Vec<Vec<u64>>,
    /// Voxels per fragment, index 0 for background (waterz's `counts`).
    pub sizes: Vec<u64>,
}

/// Step 4: the components of every block (`basins[b]` for block `b` of
/// `grid`) joined across the faces that a direction crosses, and numbered
/// `1..=n` by their smallest voxel, as waterz numbers its basins.
pub fn fragment_ids(grid: &BlockGrid, basins: &[BasinSummary<'_>]) -> Result<FragmentIds> {
    let started = Instant::now();
    if basins.len() != grid.len() {
        return Err(invalid(format!("{} block summaries for a grid of {} blocks", basins.len(), grid.len())));
    }
    basins.par_iter().enumerate().try_for_each(|(b, basin)| {
        let shape = grid.block(b).shape();
        if basin.component_min.len() != basin.component_sizes.len() {
            return Err(invalid(format!("block {b}: component minima and sizes differ in number")));
        }
        // Every voxel of the block is counted once, and each component's
        // smallest voxel lies in the block.
        let counted = basin.component_sizes.iter().try_fold(basin.background, |n, &s| n.checked_add(s));
        let block = grid.block(b);
        let inside = |v: u64| block.contains(voxel_at(grid.dims(), v));
        if counted != Some(block.len()) || !basin.component_min.iter().all(|&v| inside(v)) {
            return Err(invalid(format!("block {b}: its components do not count its voxels or lie outside it")));
        }
        for d in 0..6 {
            let axis = d % 3;
            let area = (shape[(axis + 1) % 3] * shape[(axis + 2) % 3]) as usize;
            let (c, bits) = (&basin.faces.components[d], &basin.faces.bits[d]);
            if c.len() != area || bits.len() != area || c.iter().any(|&c| c as usize > basin.component_min.len()) {
                return Err(invalid(format!("block {b}: face {d} does not fit the block")));
            }
        }
        Ok(())
    })?;
    let mut first = Vec::with_capacity(basins.len() + 1);
    let mut total = 0usize;
    for basin in basins {
        first.push(total);
        total += basin.component_min.len();
    }
    if total >= u32::MAX as usize {
        return Err(invalid(format!("{total} components: fewer than 2^32 are taken")));
    }
    // The component pairs that a direction joins across each face between
    // blocks, gathered face by face in parallel (a run of face voxels with
    // the same pair gives it once), then joined here.
    let counts = grid.counts();
    let faces: Vec<(usize, usize)> = (0..basins.len())
        .flat_map(|b| (0..3).map(move |axis| (b, axis)))
        .filter(|&(b, axis)| grid.position(b)[axis] + 1 < counts[axis])
        .collect();
    let pairs: Vec<Vec<(u32, u32)>> = faces
        .par_iter()
        .map(|&(b, axis)| {
            let mut next_at = grid.position(b);
            next_at[axis] += 1;
            let next = grid.index(next_at);
            let (mine, theirs) = (3 + axis, axis);
            let (my_faces, their_faces) = (basins[b].faces, basins[next].faces);
            let mut pairs: Vec<(u32, u32)> = Vec::new();
            for k in 0..my_faces.components[mine].len() {
                let crosses = my_faces.bits[mine][k] & DIRECTION_BITS[mine] != 0
                    || their_faces.bits[theirs][k] & DIRECTION_BITS[theirs] != 0;
                if !crosses {
                    continue;
                }
                let (c, e) = (my_faces.components[mine][k], their_faces.components[theirs][k]);
                if c == 0 || e == 0 {
                    return Err(invalid(format!("blocks {b} and {next}: a direction leads to background")));
                }
                let pair = ((first[b] + c as usize - 1) as u32, (first[next] + e as usize - 1) as u32);
                if pairs.last() != Some(&pair) {
                    pairs.push(pair);
                }
            }
            Ok(pairs)
        })
        .collect::<Result<_>>()?;
    let gathered = Instant::now();
    let mut parent: Vec<u32> = (0..total as u32).collect();
    for &(p, q) in pairs.iter().flatten() {
        union(&mut parent, p, q);
    }
    // Every node pointed at its root: parents are smaller than their
    // children, so in increasing order each parent already points at its
    // root.
    for p in 0..total {
        parent[p] = parent[parent[p] as usize];
    }
    let joined = Instant::now();
    // Each fragment's smallest voxel and size, at its root: every
    // component's own, written block by block in parallel, then each other
    // member's folded into its root (members are only read, roots only
    // written, through atomics, on every thread).
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let mut least: Vec<AtomicU64> = (0..total).into_par_iter().map(|_| AtomicU64::new(0)).collect();
    let mut size: Vec<AtomicU64> = (0..total).into_par_iter().map(|_| AtomicU64::new(0)).collect();
    {
        let mut least_parts = Vec::with_capacity(basins.len());
        let mut size_parts = Vec::with_capacity(basins.len());
        let (mut least_rest, mut size_rest) = (&mut least[..], &mut size[..]);
        for basin in basins {
            let n = basin.component_min.len();
            let (l, lr) = std::mem::take(&mut least_rest).split_at_mut(n);
            let (z, zr) = std::mem::take(&mut size_rest).split_at_mut(n);
            least_parts.push(l);
            size_parts.push(z);
            (least_rest, size_rest) = (lr, zr);
        }
        least_parts.into_par_iter().zip(size_parts).zip(basins).for_each(|((l, z), basin)| {
            for (slot, &v) in l.iter_mut().zip(basin.component_min) {
                *slot.get_mut() = v;
            }
            for (slot, &v) in z.iter_mut().zip(basin.component_sizes) {
                *slot.get_mut() = v;
            }
        });
    }
    (0..total).into_par_iter().for_each(|p| {
        let root = parent[p] as usize;
        if root != p {
            least[root].fetch_min(least[p].load(Relaxed), Relaxed);
            size[root].fetch_add(size[p].load(Relaxed), Relaxed);
        }
    });
    let folded = Instant::now();
    // The fragments numbered by their smallest voxels (distinct voxels:
    // the fragments are disjoint), sorted on every thread with the keys
    // beside the roots; each root's number written in parallel.
    let mut roots: Vec<(u64, u32)> = (0..total as u32)
        .into_par_iter()
        .filter(|&r| parent[r as usize] == r)
        .map(|r| (least[r as usize].load(Relaxed), r))
        .collect();
    roots.par_sort_unstable();
    let label: Vec<AtomicU64> = (0..total).into_par_iter().map(|_| AtomicU64::new(0)).collect();
    roots.par_iter().enumerate().for_each(|(k, &(_, r))| label[r as usize].store(k as u64 + 1, Relaxed));
    let numbered = Instant::now();
    let mut sizes = Vec::with_capacity(roots.len() + 1);
    sizes.push(basins.iter().map(|b| b.background).sum());
    sizes.par_extend(roots.par_iter().map(|&(_, r)| size[r as usize].load(Relaxed)));
    let ids = basins
        .par_iter()
        .enumerate()
        .map(|(b, basin)| {
            let members = &parent[first[b]..first[b] + basin.component_min.len()];
            std::iter::once(0).chain(members.iter().map(|&root| label[root as usize].load(Relaxed))).collect()
        })
        .collect();
    // At the debug level, where step 4's time goes.
    tracing::debug!(
        components = total,
        pairs = pairs.iter().map(Vec::len).sum::<usize>(),
        fragments = roots.len(),
        checked_and_gathered_s = (gathered - started).as_secs_f64(),
        joined_s = (joined - gathered).as_secs_f64(),
        folded_s = (folded - joined).as_secs_f64(),
        numbered_s = (numbered - folded).as_secs_f64(),
        ids_s = numbered.elapsed().as_secs_f64(),
        "fragments numbered"
    );
    Ok(FragmentIds { n_fragments: roots.len() as u64, ids, sizes })
}

/// The fragments of the layer just before block `b` of `grid` along each
/// axis (the `+axis` face of the block before it, in face order), `None`
/// where the block starts the volume: step 5's `lower` ([`block_edges`]),
/// from every block's step 3 ([`LocalBasins::summary`]) and step 4.
pub fn lower_layers(
    grid: &BlockGrid,
    b: usize,
    basins: &[BasinSummary<'_>],
    fragments: &FragmentIds,
) -> [Option<Vec<u64>>; 3] {
    let at = grid.position(b);
    std::array::from_fn(|axis| {
        (at[axis] > 0).then(|| {
            let mut before = at;
            before[axis] -= 1;
            let before = grid.index(before);
            let ids = &fragments.ids[before];
            basins[before].faces.components[3 + axis].iter().map(|&c| ids[c as usize]).collect()
        })
    })
}

/// A block's part of the region graph: fragment pairs `u < v` (`u > 0`),
/// sorted, with the exact statistics of their faces in the block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EdgeList {
    /// Smaller endpoints.
    pub u: Vec<u64>,
    /// Larger endpoints.
    pub v: Vec<u64>,
    /// Faces per pair.
    pub count: Vec<u64>,
    /// Fixed-point affinity sums per pair ([`ContactStats::affinity_sum`]).
    pub sum: Vec<u64>,
}

/// Step 5 for `block` of a volume of `dims`: the faces between each voxel
/// and the one before it along z, y and x, as the whole-volume region
/// graph takes them. `components` and `ids` label the block (its
/// [`LocalBasins::components`] and [`FragmentIds::ids`]); `lower[axis]`
/// holds the fragments of the layer just before the block along `axis`
/// (the `+axis` face of the block before it, in face order), `None` where
/// the block starts the volume; `affinities` are the block's own
/// `(3, z, y, x)` affinities.
pub fn block_edges(
    dims: [u64; 3],
    block: Block,
    components: ArrayView3<'_, u32>,
    ids: &[u64],
    lower: [Option<&[u64]>; 3],
    affinities: ArrayView4<'_, f32>,
) -> Result<EdgeList> {
    let shape = check_block_edges(dims, block, components, ids, lower)?;
    if affinities.shape() != [3, shape[0], shape[1], shape[2]] {
        return Err(invalid(format!(
            "block {:?}..{:?}: affinities {:?} must be 3 channels of {shape:?}",
            block.lo,
            block.hi,
            affinities.shape()
        )));
    }
    // In C order whatever the arrays' layouts (copies only when they are not).
    let components = components.as_standard_layout();
    let comps = components.as_slice().expect("a standard layout is contiguous");
    let affinities = affinities.as_standard_layout();
    let affs = affinities.as_slice().expect("a standard layout is contiguous");
    let n = comps.len();
    let (sy, sz) = (shape[2], shape[1] * shape[2]);
    let mut pairs = PairStats::default();
    // The faces inside the block: between a voxel and the one before it
    // along each axis (channel `axis` at the voxel). Voxels of one
    // component are one fragment, so only differing components are looked
    // up.
    for (axis, step) in [(0usize, sz), (1, sy), (2, 1)] {
        let channel = &affs[axis * n..(axis + 1) * n];
        let first = |a: usize| usize::from(a == axis);
        for z in first(0)..shape[0] {
            for y in first(1)..shape[1] {
                let row = z * sz + y * sy;
                for i in row + first(2)..row + shape[2] {
                    let (c, b) = (comps[i], comps[i - step]);
                    if c != b {
                        pairs.add(ids[c as usize], ids[b as usize], ContactStats::of_face(channel[i]));
                    }
                }
            }
        }
    }
    lower_faces(shape, |i| comps[i], ids, lower, &mut pairs, |axis, i| affs[axis * n + i]);
    Ok(pairs.into_edges())
}

/// Checks step 5's inputs for `block` of a volume of `dims` (the block,
/// the components' extent and ids, the layers before its lower faces);
/// returns the block's extent.
pub(crate) fn check_block_edges(
    dims: [u64; 3],
    block: Block,
    components: ArrayView3<'_, u32>,
    ids: &[u64],
    lower: [Option<&[u64]>; 3],
) -> Result<[usize; 3]> {
    let without_id = || components.iter().any(|&c| c as usize >= ids.len());
    check_edge_parts(dims, block, components.shape(), without_id, lower)
}

/// [`check_block_edges`] for the components as runs.
pub(crate) fn check_block_edge_runs(
    dims: [u64; 3],
    block: Block,
    components: &ComponentRuns,
    ids: &[u64],
    lower: [Option<&[u64]>; 3],
) -> Result<[usize; 3]> {
    let without_id = || components.runs().par_iter().any(|&[c, _]| c as usize >= ids.len());
    check_edge_parts(dims, block, &components.shape(), without_id, lower)
}

/// Step 5's checks: the block in the volume, components of its shape
/// (`without_id`: whether one has no fragment id) and a layer before each
/// lower face that has a block before it.
fn check_edge_parts(
    dims: [u64; 3],
    block: Block,
    components: &[usize],
    without_id: impl FnOnce() -> bool,
    lower: [Option<&[u64]>; 3],
) -> Result<[usize; 3]> {
    block.check(dims)?;
    let bs = block.shape();
    let shape = [bs[0] as usize, bs[1] as usize, bs[2] as usize];
    if components != shape {
        return Err(invalid(format!(
            "block {:?}..{:?}: components {components:?} must be {shape:?}",
            block.lo, block.hi,
        )));
    }
    if without_id() {
        return Err(invalid("a component has no fragment id"));
    }
    for (axis, layer) in lower.iter().enumerate() {
        let area = shape[(axis + 1) % 3] * shape[(axis + 2) % 3];
        match layer {
            Some(l) if block.lo[axis] > 0 && l.len() == area => {}
            None if block.lo[axis] == 0 => {}
            _ => {
                return Err(invalid(format!(
                    "block {:?}..{:?}: the layer before it along axis {axis} is missing or of the wrong size",
                    block.lo, block.hi
                )))
            }
        }
    }
    Ok(shape)
}

/// Fragment pairs `u < v` (`u > 0`) with their summed statistics.
#[derive(Default)]
pub(crate) struct PairStats(FxHashMap<(u64, u64), ContactStats>);

impl PairStats {
    /// Adds `faces` between fragments `f` and `g` (nothing when they are
    /// one fragment or one is background).
    pub(crate) fn add(&mut self, f: u64, g: u64, faces: ContactStats) {
        if f != g {
            let (u, v) = (f.min(g), f.max(g));
            if u != 0 {
                let entry = self.0.entry((u, v)).or_default();
                *entry = entry.merged(faces);
            }
        }
    }

    /// The pairs, sorted.
    pub(crate) fn into_edges(self) -> EdgeList {
        self.into_edges_with_sorted(&[], &[])
    }

    /// The pairs with `edges` and their `stats` added, sorted: as adding
    /// each of them first, but where `edges` ascend strictly with `u < v`
    /// in each (a region graph's list, such as the GPU's), merged in one
    /// pass with these pairs sorted, not put through the table one by one
    /// (a block's graph holds hundreds of thousands of pairs, its lower
    /// faces far fewer).
    pub(crate) fn into_edges_with_sorted(mut self, edges: &[[u64; 2]], stats: &[ContactStats]) -> EdgeList {
        let listed_in_order =
            edges.iter().all(|&[u, v]| u < v) && edges.windows(2).all(|w| w[0] < w[1]) && edges.len() == stats.len();
        if !listed_in_order {
            for (&[u, v], &s) in edges.iter().zip(stats) {
                self.add(u, v, s);
            }
            return self.into_edges_with_sorted(&[], &[]);
        }
        let mut mine: Vec<((u64, u64), ContactStats)> = self.0.into_iter().collect();
        mine.sort_unstable_by_key(|&(k, _)| k);
        let mut edge_list = EdgeList::default();
        let capacity = mine.len() + edges.len();
        for column in [&mut edge_list.u, &mut edge_list.v, &mut edge_list.count, &mut edge_list.sum] {
            column.reserve(capacity);
        }
        let mut push = |(u, v): (u64, u64), s: ContactStats| {
            edge_list.u.push(u);
            edge_list.v.push(v);
            edge_list.count.push(s.contact_count);
            edge_list.sum.push(s.affinity_sum);
        };
        let mut mine = mine.into_iter().peekable();
        // The listed pairs as `add` takes them: none with the background.
        for (&[u, v], &s) in edges.iter().zip(stats).filter(|(&[u, _], _)| u != 0) {
            while let Some(&(k, t)) = mine.peek() {
                if k >= (u, v) {
                    break;
                }
                push(k, t);
                mine.next();
            }
            match mine.peek() {
                Some(&(k, t)) if k == (u, v) => {
                    push(k, t.merged(s));
                    mine.next();
                }
                _ => push((u, v), s),
            }
        }
        mine.for_each(|(k, t)| push(k, t));
        edge_list
    }
}

/// The faces across a block's lower faces, between each voxel on the face
/// and the layer before it (`lower[axis]`, in face order), added to
/// `pairs`; `affinity(axis, i)` is channel `axis` at block voxel `i` (C
/// order). `component_at(i)` is the block's component at voxel `i` (C
/// order, `shape`); each face's voxels are asked in ascending order.
pub(crate) fn lower_faces(
    shape: [usize; 3],
    mut component_at: impl FnMut(usize) -> u32,
    ids: &[u64],
    lower: [Option<&[u64]>; 3],
    pairs: &mut PairStats,
    affinity: impl Fn(usize, usize) -> f32,
) {
    let strides = [shape[1] * shape[2], shape[2], 1];
    for (axis, layer) in lower.iter().enumerate() {
        let Some(layer) = layer else { continue };
        let (p, q) = ((axis + 1) % 3, (axis + 2) % 3);
        let (p, q) = (p.min(q), p.max(q));
        for a in 0..shape[p] {
            for b in 0..shape[q] {
                let i = a * strides[p] + b * strides[q];
                pairs.add(
                    ids[component_at(i) as usize],
                    layer[a * shape[q] + b],
                    ContactStats::of_face(affinity(axis, i)),
                );
            }
        }
    }
}

/// The whole region graph from every block's pairs: the statistics summed
/// per pair (order-free: integers), in waterz's edge order (sorted by
/// endpoints); checks the pairs and that fragment ids fit u32. Lists in
/// ascending order without repeats (as step 5 gives them) are merged by
/// ranges of pairs on all threads, each range's slices of every list
/// merged and summed on its own; others are sorted whole first.
pub fn region_graph(n_fragments: u64, edges: &[&EdgeList]) -> Result<(Vec<[u64; 2]>, Vec<ContactStats>)> {
    check_edge_lists(n_fragments, edges)?;
    let ascending = |list: &&EdgeList| {
        (1..list.u.len()).into_par_iter().all(|k| (list.u[k - 1], list.v[k - 1]) < (list.u[k], list.v[k]))
    };
    let parts = if edges.par_iter().all(ascending) {
        let splitters = range_splitters(edges, rayon::current_num_threads() * RANGES_PER_THREAD);
        (0..=splitters.len())
            .into_par_iter()
            .map(|r| {
                let (lo, hi) = (r.checked_sub(1).map(|s| splitters[s]), splitters.get(r).copied());
                let spans: Vec<(usize, usize)> = edges
                    .iter()
                    .map(|list| {
                        let start = lo.map_or(0, |lo| first_not_below(list, lo));
                        (start, hi.map_or(list.u.len(), |hi| first_not_below(list, hi)))
                    })
                    .collect();
                let mut pairs = Vec::with_capacity(spans.iter().map(|(start, end)| end - start).sum());
                for (list, &(start, end)) in edges.iter().zip(&spans) {
                    pairs.extend((start..end).map(|k| listed_pair(list, k)));
                }
                // A stable sort merges the lists' ascending runs.
                pairs.sort_by_key(|&(e, _)| e);
                sum_runs(pairs)
            })
            .collect::<Result<Vec<_>>>()?
    } else {
        let mut pairs: Vec<([u64; 2], ContactStats)> =
            edges.iter().flat_map(|list| (0..list.u.len()).map(|k| listed_pair(list, k))).collect();
        pairs.par_sort_unstable_by_key(|&(e, _)| e);
        vec![sum_runs(pairs)?]
    };
    let (graphs, stats): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
    Ok((concatenated(graphs), concatenated(stats)))
}

/// Fails unless fragment ids fit u32, each list's columns are of equal
/// length and every pair is `(u, v)` with `1 <= u < v <= n_fragments`.
pub(crate) fn check_edge_lists(n_fragments: u64, edges: &[&EdgeList]) -> Result<()> {
    if n_fragments >= u32::MAX as u64 {
        return Err(invalid(format!("{n_fragments} fragments: fewer than 2^32 are taken")));
    }
    for list in edges {
        let n = list.u.len();
        if list.v.len() != n || list.count.len() != n || list.sum.len() != n {
            return Err(invalid("an edge list's columns differ in length"));
        }
    }
    for list in edges {
        let bad = |k: usize| list.u[k] == 0 || list.u[k] >= list.v[k] || list.v[k] > n_fragments;
        if let Some(k) = gpu_waterz_core::parallel::first_index(list.u.len(), bad) {
            let (u, v) = (list.u[k], list.v[k]);
            return Err(invalid(format!("edge ({u}, {v}) is not a pair of fragments 1..={n_fragments}")));
        }
    }
    Ok(())
}

/// `parts` one after the other, copied on all threads (a parallel
/// `collect` of them would gather pieces and append them on one thread);
/// a single part as it is.
fn concatenated<T: Copy + Default + Send + Sync>(mut parts: Vec<Vec<T>>) -> Vec<T> {
    if parts.len() == 1 {
        return parts.pop().expect("one part");
    }
    let total = parts.iter().map(|p| p.len()).sum();
    let mut out = Vec::with_capacity(total);
    out.par_extend(rayon::iter::repeat_n(T::default(), total));
    let mut rest = out.as_mut_slice();
    let mut pieces = Vec::with_capacity(parts.len());
    for part in &parts {
        let (piece, tail) = rest.split_at_mut(part.len());
        pieces.push(piece);
        rest = tail;
    }
    pieces.into_par_iter().zip(&parts).for_each(|(piece, part)| {
        piece.par_chunks_mut(1 << 16).zip(part.par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s));
    });
    out
}

/// Ranges of pairs per thread in [`region_graph`]'s merge (a few, so that
/// uneven ranges even out).
const RANGES_PER_THREAD: usize = 4;
/// Pairs sampled from each list to place [`region_graph`]'s ranges.
const SAMPLES_PER_LIST: usize = 64;

/// Pair `k` of `list` with its statistics.
fn listed_pair(list: &EdgeList, k: usize) -> ([u64; 2], ContactStats) {
    ([list.u[k], list.v[k]], ContactStats { contact_count: list.count[k], affinity_sum: list.sum[k] })
}

/// The first position of ascending `list` whose pair is not below `pair`:
/// the run of `pair`'s first endpoint, then the place of its second in it.
fn first_not_below(list: &EdgeList, [u, v]: [u64; 2]) -> usize {
    let (start, end) = (list.u.partition_point(|&x| x < u), list.u.partition_point(|&x| x <= u));
    start + list.v[start..end].partition_point(|&x| x < v)
}

/// Up to `ranges - 1` ascending distinct pairs that cut ascending `edges`
/// into ranges of about equal size: quantiles of pairs sampled evenly
/// from each list.
fn range_splitters(edges: &[&EdgeList], ranges: usize) -> Vec<[u64; 2]> {
    let mut samples: Vec<[u64; 2]> = edges
        .iter()
        .flat_map(|list| {
            let n = list.u.len();
            (0..SAMPLES_PER_LIST.min(n)).map(move |s| {
                let k = s * n / SAMPLES_PER_LIST.min(n);
                [list.u[k], list.v[k]]
            })
        })
        .collect();
    samples.sort_unstable();
    let mut splitters: Vec<[u64; 2]> =
        (1..ranges).filter_map(|r| samples.get(r * samples.len() / ranges).copied()).collect();
    splitters.dedup();
    splitters
}

/// The statistics of sorted `pairs` summed per pair (an error where a sum
/// overflows).
fn sum_runs(pairs: Vec<([u64; 2], ContactStats)>) -> Result<(Vec<[u64; 2]>, Vec<ContactStats>)> {
    let mut graph: Vec<[u64; 2]> = Vec::with_capacity(pairs.len());
    let mut stats: Vec<ContactStats> = Vec::with_capacity(pairs.len());
    for (e, s) in pairs {
        if graph.last() == Some(&e) {
            let last = stats.last_mut().expect("one statistic per edge");
            match (last.contact_count.checked_add(s.contact_count), last.affinity_sum.checked_add(s.affinity_sum)) {
                (Some(contact_count), Some(affinity_sum)) => *last = ContactStats { contact_count, affinity_sum },
                _ => return Err(invalid(format!("the statistics of edge ({}, {}) overflow", e[0], e[1]))),
            }
        } else {
            graph.push(e);
            stats.push(s);
        }
    }
    Ok((graph, stats))
}

/// Step 6: the region graph of `n_fragments` fragments, the sum of every
/// block's [`EdgeList`], merged in waterz's serial order in exact
/// arithmetic ([`IterativeMerging::from_contact_stats`], the reference the
/// GPU's ParHAC equals at ε = 0 on tie-free input) up to each of
/// `thresholds` (strictly ascending; compared in float32 as waterz).
/// Returns the thresholds and, for each, the segment of every fragment
/// (index 0, background, is 0; a segment is named by its smallest
/// fragment, as waterz merges into the smaller id).
pub fn merge(n_fragments: u64, edges: &[&EdgeList], thresholds: &[f64]) -> Result<(Vec<f64>, Vec<Vec<u64>>)> {
    // Finite, strictly ascending (also in float32), at least one.
    Thresholds::new(thresholds)?;
    let sorted = thresholds.to_vec();
    let (edges, stats) = region_graph(n_fragments, edges)?;
    merge_graph(n_fragments, edges, stats, &sorted)
}

/// Step 6 on the summed region graph ([`region_graph`]): waterz's serial
/// merging in exact arithmetic up to each of `thresholds` (checked
/// ascending by the caller); a table from fragment to segment per
/// threshold.
fn merge_graph(
    n_fragments: u64,
    edges: Vec<[u64; 2]>,
    stats: Vec<ContactStats>,
    sorted: &[f64],
) -> Result<(Vec<f64>, Vec<Vec<u64>>)> {
    let mut merging = IterativeMerging::from_contact_stats(n_fragments + 1, edges, stats);
    let mut tables = Vec::with_capacity(sorted.len());
    for &t in sorted {
        merging.merge_until(t as f32, None);
        tables.push((0..=n_fragments).map(|f| merging.region_of(f)).collect());
    }
    Ok((sorted.to_vec(), tables))
}

/// Step 7: a block's segmentation: `table[ids[component]]` per voxel.
pub fn relabel(components: ArrayView3<'_, u32>, ids: &[u64], table: &[u64]) -> Result<Array3<u64>> {
    check_components(components, ids)?;
    let label_of = component_labels(ids, table)?;
    Ok(components.mapv(|c| label_of[c as usize]))
}

/// Fails unless every component of `components` has an id in `ids` (so
/// that lists indexed by component can then be indexed without failing).
pub fn check_components(components: ArrayView3<'_, u32>, ids: &[u64]) -> Result<()> {
    if components.iter().any(|&c| c as usize >= ids.len()) {
        return Err(invalid("a component has no fragment id"));
    }
    Ok(())
}

/// Each component's label in `table` (`table[ids[component]]`), looked up
/// once per component rather than per voxel.
pub fn component_labels(ids: &[u64], table: &[u64]) -> Result<Vec<u64>> {
    ids.iter()
        .map(|&f| table.get(f as usize).copied().ok_or_else(|| invalid(format!("fragment {f} is not in the table"))))
        .collect()
}

/// Everything [`decode`] gives.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// The fragments, `(z, y, x)`, waterz's labels.
    pub fragments: Array3<u64>,
    /// Their number.
    pub n_fragments: u64,
    /// The thresholds, as given (ascending).
    pub thresholds: Vec<f64>,
    /// One segmentation per threshold.
    pub segmentations: Vec<Array3<u64>>,
    /// Voxels of plateaus that crossed a block face (settled globally).
    pub open_voxels: u64,
    /// Fragment pairs of the region graph.
    pub n_edges: u64,
    /// Seconds per step.
    pub seconds: StepSeconds,
}

/// Where [`decode_blocks`] reads the affinities: any region of the volume
/// (a block, or a block grown by its halo), as `(3, z, y, x)` float32.
/// Regions are read from several threads at once, each block's twice
/// (steps 1 and 5).
pub trait AffinitySource: Sync {
    /// The volume's extent `(z, y, x)`.
    fn dims(&self) -> [u64; 3];
    /// The affinities of `region` (inside the volume), `(3, z, y, x)`.
    fn read(&self, region: Block) -> Result<Array4<f32>>;
    /// Whether the source makes its affinities on the GPU
    /// ([`AffinitySource::read_on_gpu`] gives them). A GPU step asks
    /// `read_on_gpu` inside its turn only then: the default, `false`, spares
    /// a source that reads on the host a wait for a turn that would only
    /// learn so. A source that makes them there says `true` (else it is
    /// read on the host, with the same values, more slowly).
    fn makes_on_gpu(&self) -> bool {
        false
    }

    /// The affinities of `region` made on `gpu`, by a source that makes
    /// them there (a generated volume, [`crate::ImplicitSource`]):
    /// the same values as [`AffinitySource::read`]. `None`, the default:
    /// the source reads on the host, and [`crate::GpuSteps`] uploads.
    fn read_on_gpu(&self, gpu: &Gpu, region: Block) -> Result<Option<DeviceAffinities>> {
        let _ = (gpu, region);
        Ok(None)
    }

    /// The affinities of `region` as uint8 codes, `(3, z, y, x)`, where the
    /// source stores them so: code `k` means `k / 255`
    /// ([`gpu_waterz_core::affinities::u8_affinity`]), exactly what
    /// [`AffinitySource::read`] gives. [`crate::GpuSteps`] uploads the codes
    /// (a quarter of float32's bytes, read by the kernels as they are) and
    /// reads the lower faces' affinities from them; the CPU's steps read
    /// float32. `None`, the default: the source gives float32 only.
    fn read_codes(&self, region: Block) -> Result<Option<Array4<u8>>> {
        let _ = region;
        Ok(None)
    }
}

/// `source`'s affinities of `region`, checked to be `(3, region)`.
pub(crate) fn read_region(source: &dyn AffinitySource, region: Block) -> Result<Array4<f32>> {
    let values = source.read(region)?;
    let s = region.shape();
    let want = [3, s[0] as usize, s[1] as usize, s[2] as usize];
    if values.shape() != want {
        return Err(invalid(format!("the source gave {:?} values for a region of {want:?}", values.shape())));
    }
    Ok(values)
}

/// `source`'s uint8 codes of `region` where it gives them
/// ([`AffinitySource::read_codes`]), checked to be `(3, region)`.
pub(crate) fn read_region_codes(source: &dyn AffinitySource, region: Block) -> Result<Option<Array4<u8>>> {
    let Some(codes) = source.read_codes(region)? else { return Ok(None) };
    let s = region.shape();
    let want = [3, s[0] as usize, s[1] as usize, s[2] as usize];
    if codes.shape() != want {
        return Err(invalid(format!("the source gave {:?} codes for a region of {want:?}", codes.shape())));
    }
    Ok(Some(codes))
}

/// A `(3, z, y, x)` array in memory as an [`AffinitySource`].
impl AffinitySource for ArrayView4<'_, f32> {
    fn dims(&self) -> [u64; 3] {
        let s = self.shape();
        [s[1] as u64, s[2] as u64, s[3] as u64]
    }

    fn read(&self, region: Block) -> Result<Array4<f32>> {
        region.check(self.dims())?;
        Ok(self
            .slice_each_axis(|axis| match axis.axis.index() {
                0 => Slice::from(..),
                a => Slice::from(region.lo[a - 1] as usize..region.hi[a - 1] as usize),
            })
            .to_owned())
    }
}

/// Where [`decode_blocks`] writes each block's result, from several
/// threads at once, each block once.
pub trait BlockSink: Sync {
    /// Called once before the first block is written or prepared (once
    /// the fragments are numbered, before the region graph's step), with
    /// the number of fragments (every label written is at most that): a
    /// sink may pick its element type by it. The default does nothing.
    fn begin(&self, n_fragments: u64) -> Result<()> {
        let _ = n_fragments;
        Ok(())
    }

    /// Called in step 5 for each block, once its fragments are known and
    /// while the region graph is counted (on the GPU, the host's threads
    /// mostly wait there), with its components as runs and their fragment
    /// ids: a sink may write what depends on the fragments alone and keep
    /// what the merge's tables only relabel, so that step 7 has less to do.
    /// Returns whether it kept what [`BlockSink::write_prepared`] needs
    /// for this block (then step 7 calls that, not
    /// [`BlockSink::write_runs`], and the driver drops the block's runs
    /// after step 5). The default keeps nothing.
    fn prepare_runs(&self, block: Block, runs: &ComponentRuns, ids: &[u64]) -> Result<bool> {
        let _ = (block, runs, ids);
        Ok(false)
    }

    /// Whether the sink takes `block`'s fragments as a zstd frame of its
    /// uint32 labels, C order ([`crate::label_frame`]'s), in step 5
    /// instead of [`BlockSink::prepare_runs`]: steps that make such frames
    /// where the fragments already are (the GPU's) then hand it to
    /// [`BlockSink::prepare_frame`]. The default takes none.
    fn takes_label_frame(&self, block: Block) -> bool {
        let _ = block;
        false
    }

    /// Step 5's frame of `block`'s fragments ([`crate::label_frame`]'s
    /// bytes) where [`BlockSink::takes_label_frame`] asked for it, in
    /// place of [`BlockSink::prepare_runs`], with the same result: whether
    /// the sink kept what [`BlockSink::write_prepared`] needs. The default
    /// keeps nothing.
    fn prepare_frame(&self, block: Block, frame: Vec<u8>) -> Result<bool> {
        let _ = (block, frame);
        Ok(false)
    }

    /// Step 7 of a block that [`BlockSink::prepare_runs`] kept: its
    /// segmentations, fragment `f`'s label at threshold `t` being
    /// `tables[t][f]`. The default fails (a sink that keeps blocks writes
    /// them).
    fn write_prepared(&self, block: Block, tables: &[Vec<u64>]) -> Result<()> {
        let _ = tables;
        Err(invalid(format!("block {:?}..{:?} was not prepared by this sink", block.lo, block.hi)))
    }

    /// The fragments of `block` (waterz's labels) and its segmentation at
    /// each threshold (ascending), each `block.shape()`.
    fn write(&self, block: Block, fragments: ArrayView3<'_, u64>, segmentations: &[Array3<u64>]) -> Result<()>;

    /// The same from the block's components: voxel `v`'s fragment is
    /// `ids[components[v]]`, its segment at threshold `t` `tables[t]` of
    /// that. The default relabels into new arrays and calls
    /// [`BlockSink::write`]; a sink that holds the arrays can relabel into
    /// them.
    fn write_components(
        &self,
        block: Block,
        components: ArrayView3<'_, u32>,
        ids: &[u64],
        tables: &[Vec<u64>],
    ) -> Result<()> {
        check_components(components, ids)?;
        let fragments = components.mapv(|c| ids[c as usize]);
        let segmentations = tables
            .iter()
            .map(|t| component_labels(ids, t).map(|label_of| components.mapv(|c| label_of[c as usize])))
            .collect::<Result<Vec<_>>>()?;
        self.write(block, fragments.view(), &segmentations)
    }

    /// The same from the block's components as runs (what the driver
    /// holds between the steps). The default expands them and calls
    /// [`BlockSink::write_components`]; a sink can fill its labels from
    /// the runs ([`ComponentRuns::fill_labels`]) and spare the host the
    /// components' four bytes per voxel, written and read again.
    fn write_runs(&self, block: Block, runs: &ComponentRuns, ids: &[u64], tables: &[Vec<u64>]) -> Result<()> {
        self.write_components(block, runs.expand().view(), ids, tables)
    }
}

/// A block's components as runs along the flattened block (C order): each
/// run is a component and the number of consecutive voxels that hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentRuns {
    shape: [usize; 3],
    /// `[component, length]`, every length at least 1.
    runs: Vec<[u32; 2]>,
}

impl ComponentRuns {
    /// Runs per piece filled by one task.
    const PIECE: usize = 1 << 14;

    /// The runs of `components` (C order); a run longer than 2^32 - 1
    /// voxels goes as several.
    pub fn of(components: ArrayView3<'_, u32>) -> Self {
        let (z, y, x) = components.dim();
        let components = components.as_standard_layout();
        let mut rest = components.as_slice().expect("a standard layout is contiguous");
        let mut runs: Vec<[u32; 2]> = Vec::new();
        while let Some(&value) = rest.first() {
            let length = rest.iter().position(|&v| v != value).unwrap_or(rest.len()).min(u32::MAX as usize);
            runs.push([value, length as u32]);
            rest = &rest[length..];
        }
        Self { shape: [z, y, x], runs }
    }

    /// Runs `[component, length]` that fill a block of `shape` in C order;
    /// fails when a length is 0 or the lengths do not add up to the block's
    /// voxels.
    pub fn new(shape: [usize; 3], runs: Vec<[u32; 2]>) -> Result<Self> {
        let n: usize = shape.iter().product();
        if runs.iter().any(|r| r[1] == 0) {
            return Err(invalid("a run of no voxels"));
        }
        let total: usize = runs.par_iter().map(|r| r[1] as usize).sum();
        if total != n {
            return Err(invalid(format!("runs of {total} voxels for a block of {n} ({shape:?})")));
        }
        Ok(Self { shape, runs })
    }

    /// Runs that fill a block of `shape` in C order given by their
    /// components (`values`) and first voxels (`starts`, ascending from
    /// 0, as a GPU's run-length encoding finds them): run `k` ends where
    /// run `k + 1` starts, the last at the block's end. Fails when the
    /// lists differ in length, the first start is not 0, the starts do not
    /// ascend strictly or one lies past the block.
    pub fn from_starts(shape: [usize; 3], values: &[u32], starts: &[u32]) -> Result<Self> {
        let n: usize = shape.iter().product();
        if values.len() != starts.len() {
            return Err(invalid(format!("{} run values for {} run starts", values.len(), starts.len())));
        }
        if starts.first().is_some_and(|&s| s != 0) || (starts.is_empty() && n > 0) {
            return Err(invalid("runs that do not start at the block's first voxel"));
        }
        let ends = starts.iter().skip(1).map(|&s| s as usize).chain([n]);
        // Made at its size at once (collecting into a `Result` grows the
        // vector step by step: most of the time of this function).
        let mut runs = Vec::with_capacity(values.len());
        for ((&value, &start), end) in values.iter().zip(starts).zip(ends) {
            match end.checked_sub(start as usize) {
                Some(length) if length > 0 && length <= u32::MAX as usize => runs.push([value, length as u32]),
                _ => return Err(invalid(format!("a run from voxel {start} to {end} in a block of {n}"))),
            }
        }
        Ok(Self { shape, runs })
    }

    /// The block's shape `(z, y, x)`.
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// The runs, `[component, length]`.
    pub fn runs(&self) -> &[[u32; 2]] {
        &self.runs
    }

    /// The components, one per voxel.
    pub fn expand(&self) -> Array3<u32> {
        let n: usize = self.shape.iter().product();
        let mut values = vec![0u32; n];
        self.fill(&mut values, |c| c);
        Array3::from_shape_vec((self.shape[0], self.shape[1], self.shape[2]), values)
            .expect("the runs fill the shape (checked when made)")
    }

    /// Writes `label_of[component]` of each voxel into `out` (one per
    /// voxel, C order), in parallel pieces; fails when `out` is not the
    /// block's size or a component has no label.
    pub fn fill_labels<T: Copy + Send + Sync>(&self, label_of: &[T], out: &mut [T]) -> Result<()> {
        let n: usize = self.shape.iter().product();
        if out.len() != n {
            return Err(invalid(format!("room for {} labels for a block of {n} voxels", out.len())));
        }
        if self.runs.par_iter().any(|r| r[0] as usize >= label_of.len()) {
            return Err(invalid("a component has no fragment id"));
        }
        self.fill(out, |c| label_of[c as usize]);
        Ok(())
    }

    /// Fills `out` (the block's size) with `value(component)` run by run,
    /// pieces of runs in parallel.
    fn fill<T: Copy + Send + Sync>(&self, out: &mut [T], value: impl Fn(u32) -> T + Sync) {
        let pieces: Vec<&[[u32; 2]]> = self.runs.chunks(Self::PIECE).collect();
        let mut targets: Vec<&mut [T]> = Vec::with_capacity(pieces.len());
        let mut rest = out;
        for piece in &pieces {
            let len: usize = piece.iter().map(|r| r[1] as usize).sum();
            let (target, after) = rest.split_at_mut(len);
            targets.push(target);
            rest = after;
        }
        pieces.into_par_iter().zip(targets).for_each(|(piece, target)| {
            let mut at = 0;
            for &[c, length] in piece {
                let length = length as usize;
                target[at..at + length].fill(value(c));
                at += length;
            }
        });
    }
}

/// What [`decode_blocks`] found, besides what it wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockwiseSummary {
    /// The number of fragments.
    pub n_fragments: u64,
    /// The thresholds, as given (ascending).
    pub thresholds: Vec<f64>,
    /// Voxels of plateaus that crossed a block face (settled globally).
    pub open_voxels: u64,
    /// Fragment pairs of the region graph.
    pub n_edges: u64,
    /// Seconds per step, in order.
    pub seconds: StepSeconds,
}

/// Wall seconds of [`decode_blocks`]'s steps (reading the affinities
/// included in the steps that read them).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepSeconds {
    /// Step 1 on every block: reading each block's halo, its masks and its
    /// plateaus.
    pub local_plateaus: f64,
    /// Step 2: the open plateaus divided together.
    pub settle_open_plateaus: f64,
    /// Step 3 on every block: its basins.
    pub local_basins: f64,
    /// Step 4: the basins joined and numbered.
    pub fragment_ids: f64,
    /// Step 5 on every block: reading it again, its region-graph pairs.
    pub block_edges: f64,
    /// Step 6: the whole graph merged, and its pairs counted.
    pub merge: f64,
    /// Step 7 on every block: relabelled and handed to the sink.
    pub relabel_and_write: f64,
}

/// The steps of the decode that run on the CPU ([`CpuSteps`]) or on the
/// GPU ([`crate::GpuSteps`]): the per-block watershed steps 1 and 3 and the
/// region-graph pairs of step 5 (both give the same results), and the
/// merge of step 6 (the CPU's serial
/// merging in exact arithmetic, or the GPU's ParHAC, which the GPU's
/// whole-volume decode runs; the two agree on tie-free graphs).
pub trait DecodeSteps: Sync {
    /// The region whose affinities step 1 reads for `block` of a volume of
    /// `dims` (the block and a margin, clipped to the volume).
    fn plateau_region(&self, dims: [u64; 3], block: Block) -> Block;

    /// Step 1 ([`local_plateaus`]): `affinities` are the `(3, z, y, x)`
    /// affinities of [`DecodeSteps::plateau_region`].
    fn local_plateaus(
        &self,
        dims: [u64; 3],
        block: Block,
        affinities: ArrayView4<'_, f32>,
        params: WatershedParams,
    ) -> Result<LocalPlateaus>;

    /// Step 1 from uint8 codes (`k / 255`,
    /// [`gpu_waterz_core::affinities::u8_affinity`]) of
    /// [`DecodeSteps::plateau_region`]: by default their float32 values
    /// handed to [`DecodeSteps::local_plateaus`]; the GPU uploads the codes
    /// as they are (a quarter of the bytes).
    fn local_plateaus_codes(
        &self,
        dims: [u64; 3],
        block: Block,
        codes: ArrayView4<'_, u8>,
        params: WatershedParams,
    ) -> Result<LocalPlateaus> {
        self.local_plateaus(dims, block, codes.mapv(gpu_waterz_core::affinities::u8_affinity).view(), params)
    }

    /// Step 1 on `block`, its affinities (of
    /// [`DecodeSteps::plateau_region`]) taken from `source`: by default
    /// read on the host and handed to [`DecodeSteps::local_plateaus`].
    fn local_plateaus_from(
        &self,
        source: &dyn AffinitySource,
        dims: [u64; 3],
        block: Block,
        params: WatershedParams,
    ) -> Result<LocalPlateaus> {
        let region = self.plateau_region(dims, block);
        self.local_plateaus(dims, block, read_region(source, region)?.view(), params)
    }

    /// The affinities of `region` on the host, for step 5: by default
    /// [`AffinitySource::read`].
    fn read_affinities(&self, source: &dyn AffinitySource, region: Block) -> Result<Array4<f32>> {
        read_region(source, region)
    }

    /// Step 5 ([`block_edges`]): `affinities` are the block's own
    /// `(3, z, y, x)` affinities.
    fn block_edges(
        &self,
        dims: [u64; 3],
        block: Block,
        components: ArrayView3<'_, u32>,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
        affinities: ArrayView4<'_, f32>,
    ) -> Result<EdgeList>;

    /// Step 5 on `block`, its affinities taken from `source`: by default
    /// read on the host ([`DecodeSteps::read_affinities`]) and handed to
    /// [`DecodeSteps::block_edges`].
    fn block_edges_from(
        &self,
        source: &dyn AffinitySource,
        dims: [u64; 3],
        block: Block,
        components: ArrayView3<'_, u32>,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
    ) -> Result<EdgeList> {
        let affinities = self.read_affinities(source, block)?;
        self.block_edges(dims, block, components, ids, lower, affinities.view())
    }

    /// Step 5 on `block` with its components as runs (what the driver
    /// holds): by default expanded and handed to
    /// [`DecodeSteps::block_edges_from`]; a backend that expands them
    /// where it counts (the GPU) spares the host the four bytes per voxel.
    fn block_edge_runs_from(
        &self,
        source: &dyn AffinitySource,
        dims: [u64; 3],
        block: Block,
        components: &ComponentRuns,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
    ) -> Result<EdgeList> {
        self.block_edges_from(source, dims, block, components.expand().view(), ids, lower)
    }

    /// [`DecodeSteps::block_edge_runs_from`], and where `frame` asks for
    /// it the zstd frame of the block's fragments ([`crate::label_frame`]'s
    /// bytes) when the steps make it where they count (`None`: the caller
    /// encodes the runs itself). The default makes none.
    #[allow(clippy::too_many_arguments)]
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
        let _ = frame;
        Ok((self.block_edge_runs_from(source, dims, block, components, ids, lower)?, None))
    }

    /// Step 3 with the components as runs, what the driver holds between
    /// the steps: by default [`DecodeSteps::local_basins`]'s, run-length
    /// encoded here; a backend that encodes them where it finds them (the
    /// GPU) moves the runs instead of four bytes per voxel.
    fn local_basin_runs(
        &self,
        dims: [u64; 3],
        block: Block,
        bits: Array3<u8>,
        open: &OpenVoxels,
        settled: &[u8],
    ) -> Result<LocalBasinRuns> {
        self.local_basins(dims, block, bits, open, settled).map(LocalBasinRuns::from)
    }

    /// Step 3 ([`local_basins`]).
    fn local_basins(
        &self,
        dims: [u64; 3],
        block: Block,
        bits: Array3<u8>,
        open: &OpenVoxels,
        settled: &[u8],
    ) -> Result<LocalBasins>;

    /// Step 6 from every block's pairs: the whole region graph summed
    /// ([`region_graph`]) and merged up to each threshold (ascending) by
    /// [`DecodeSteps::merge`]; gives the thresholds, each one's table and
    /// the graph's number of edges. By default summed on the host.
    fn merge_lists(
        &self,
        n_fragments: u64,
        lists: &[&EdgeList],
        thresholds: &[f64],
    ) -> Result<(Vec<f64>, Vec<Vec<u64>>, u64)> {
        sum_and_merge(self, n_fragments, lists, thresholds)
    }

    /// Step 6: the whole region graph ([`region_graph`]) merged up to
    /// each threshold (ascending); by default waterz's serial merging in
    /// exact arithmetic, as [`merge`].
    fn merge(
        &self,
        n_fragments: u64,
        edges: Vec<[u64; 2]>,
        stats: Vec<ContactStats>,
        thresholds: &[f64],
    ) -> Result<(Vec<f64>, Vec<Vec<u64>>)> {
        Thresholds::new(thresholds)?;
        merge_graph(n_fragments, edges, stats, thresholds)
    }
}

/// [`DecodeSteps::merge_lists`]'s default: the region graph summed on the
/// host ([`region_graph`]), then `steps`' [`DecodeSteps::merge`].
pub(crate) fn sum_and_merge<S: DecodeSteps + ?Sized>(
    steps: &S,
    n_fragments: u64,
    lists: &[&EdgeList],
    thresholds: &[f64],
) -> Result<(Vec<f64>, Vec<Vec<u64>>, u64)> {
    let summing = Instant::now();
    let block_edges: usize = lists.iter().map(|e| e.u.len()).sum();
    let (graph, stats) = region_graph(n_fragments, lists)?;
    let n_edges = graph.len() as u64;
    tracing::debug!(block_edges, n_edges, seconds = summing.elapsed().as_secs_f64(), "region graph summed");
    let (thresholds, tables) = steps.merge(n_fragments, graph, stats, thresholds)?;
    Ok((thresholds, tables, n_edges))
}

/// Steps 1, 3, 5 and 6 on the CPU: [`local_plateaus`], [`local_basins`],
/// [`block_edges`] and [`merge`].
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuSteps;

impl DecodeSteps for CpuSteps {
    fn plateau_region(&self, dims: [u64; 3], block: Block) -> Block {
        block.halo(dims)
    }

    fn local_plateaus(
        &self,
        dims: [u64; 3],
        block: Block,
        affinities: ArrayView4<'_, f32>,
        params: WatershedParams,
    ) -> Result<LocalPlateaus> {
        local_plateaus(dims, block, affinities, params)
    }

    fn local_basins(
        &self,
        dims: [u64; 3],
        block: Block,
        bits: Array3<u8>,
        open: &OpenVoxels,
        settled: &[u8],
    ) -> Result<LocalBasins> {
        local_basins(dims, block, bits, open, settled)
    }

    /// The components found as in [`local_basins`], their runs taken
    /// from them.
    fn local_basin_runs(
        &self,
        dims: [u64; 3],
        block: Block,
        bits: Array3<u8>,
        open: &OpenVoxels,
        settled: &[u8],
    ) -> Result<LocalBasinRuns> {
        local_basin_runs(dims, block, bits, open, settled)
    }

    fn block_edges(
        &self,
        dims: [u64; 3],
        block: Block,
        components: ArrayView3<'_, u32>,
        ids: &[u64],
        lower: [Option<&[u64]>; 3],
        affinities: ArrayView4<'_, f32>,
    ) -> Result<EdgeList> {
        block_edges(dims, block, components, ids, lower, affinities)
    }
}

/// Every step in this process, blocks in parallel, streaming: the
/// affinities of `source` decoded in blocks of `block_shape`, each block
/// read from `source` when its steps need it (twice) and written to `sink`
/// once the tables are known. Between the steps each block keeps its
/// plateau directions (1 byte per voxel, until step 3) and its components
/// (4 bytes per voxel); the affinities (12 bytes per voxel) are never held
/// whole. Equal to the whole-volume watershed (labels) and to the exact
/// serial merging of the whole-volume region graph (segmentations).
pub fn decode_blocks(
    source: &impl AffinitySource,
    block_shape: [u64; 3],
    params: WatershedParams,
    thresholds: &[f64],
    sink: &impl BlockSink,
) -> Result<BlockwiseSummary> {
    decode_blocks_with(source, block_shape, params, thresholds, sink, &CpuSteps)
}

/// [`decode_blocks`] with steps 1, 3 and 5 of each block and the merge
/// run by `steps`.
pub fn decode_blocks_with(
    source: &impl AffinitySource,
    block_shape: [u64; 3],
    params: WatershedParams,
    thresholds: &[f64],
    sink: &impl BlockSink,
    steps: &impl DecodeSteps,
) -> Result<BlockwiseSummary> {
    decode_blocks_held(source, block_shape, params, thresholds, sink, steps, unpacked_runs_budget())
}

/// The bytes of blocks' runs that [`decode_blocks_with`] holds unpacked
/// between steps 3 and 7 (each block's runs go through zstd once the held
/// ones would pass it): `GPU_WATERZ_BLOCKWISE_UNPACKED_BYTES` where set,
/// else a quarter of the memory available when the decode starts (Linux's
/// `MemAvailable`), else 0 (every block packed). Packing costs each block
/// about a third of a second of one core (two thirds compressing in step 3,
/// a third decompressing in step 5) for a fifth of the bytes.
fn unpacked_runs_budget() -> u64 {
    if let Some(bytes) = std::env::var("GPU_WATERZ_BLOCKWISE_UNPACKED_BYTES").ok().and_then(|v| v.trim().parse().ok()) {
        return bytes;
    }
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|info| {
        let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib.saturating_mul(1024))
    });
    available.unwrap_or(0) / 4
}

/// [`decode_blocks_with`] holding at most `unpacked` bytes of blocks' runs
/// unpacked.
fn decode_blocks_held(
    source: &impl AffinitySource,
    block_shape: [u64; 3],
    params: WatershedParams,
    thresholds: &[f64],
    sink: &impl BlockSink,
    steps: &impl DecodeSteps,
    unpacked: u64,
) -> Result<BlockwiseSummary> {
    let dims = source.dims();
    let grid = BlockGrid::new(dims, block_shape)?;
    // Before any work: the thresholds (the watershed's are checked per block).
    Thresholds::new(thresholds)?;
    let source: &dyn AffinitySource = source;
    let blocks: Vec<Block> = (0..grid.len()).map(|b| grid.block(b)).collect();
    let mut seconds = StepSeconds::default();
    let mut clock = Instant::now();
    let mut lap = |name: &str, step: &mut f64| {
        *step = clock.elapsed().as_secs_f64();
        clock = Instant::now();
        tracing::info!(step = name, seconds = *step, "blockwise step done");
    };
    let plateaus = pulled(blocks.iter(), |&b| {
        timed_block("local_plateaus", || steps.local_plateaus_from(source, dims, b, params))
    })?;
    lap("local_plateaus", &mut seconds.local_plateaus);
    let open: Vec<&OpenVoxels> = plateaus.iter().map(|p| &p.open).collect();
    let open_voxels = open.iter().map(|o| o.index.len() as u64).sum();
    let settled = settle_open_plateaus(dims, &open)?;
    lap("settle_open_plateaus", &mut seconds.settle_open_plateaus);
    // Each block's components are held as runs (four bytes per voxel of
    // the whole volume would not fit), packed once `unpacked` bytes of
    // them are held.
    let held = std::sync::atomic::AtomicU64::new(0);
    let mut basins = pulled(plateaus.into_iter().zip(settled).zip(&blocks), |((p, settled), &b)| {
        timed_block("local_basins", || {
            let basins = steps.local_basin_runs(dims, b, p.bits, &p.open, &settled)?;
            HeldBasins::hold(basins, &held, unpacked)
        })
    })?;
    lap("local_basins", &mut seconds.local_basins);
    let summaries: Vec<BasinSummary<'_>> = basins.iter().map(HeldBasins::summary).collect();
    let fragments = fragment_ids(&grid, &summaries)?;
    let layering = Instant::now();
    let lower_layers: Vec<[Option<Vec<u64>>; 3]> =
        (0..grid.len()).into_par_iter().map(|b| lower_layers(&grid, b, &summaries, &fragments)).collect();
    drop(summaries);
    let beginning = Instant::now();
    sink.begin(fragments.n_fragments)?;
    tracing::debug!(
        lower_layers_s = (beginning - layering).as_secs_f64(),
        begin_s = beginning.elapsed().as_secs_f64(),
        "step 4's layers and the sink's arrays made"
    );
    lap("fragment_ids", &mut seconds.fragment_ids);
    let (edges, prepared): (Vec<EdgeList>, Vec<bool>) = pulled(0..grid.len(), |b| {
        timed_block("block_edges", || {
            let lower = std::array::from_fn(|a| lower_layers[b][a].as_deref());
            let components = basins[b].runs()?;
            let ids = &fragments.ids[b];
            let wants_frame = sink.takes_label_frame(blocks[b]);
            let (edges, frame) =
                steps.block_edge_runs_and_frame(source, dims, blocks[b], &components, ids, lower, wants_frame)?;
            let kept = match frame {
                Some(frame) if wants_frame => sink.prepare_frame(blocks[b], frame)?,
                _ => sink.prepare_runs(blocks[b], &components, ids)?,
            };
            Ok((edges, kept))
        })
    })?
    .into_iter()
    .unzip();
    drop(lower_layers);
    // The runs of the blocks the sink kept are not read again.
    for (held, _) in basins.iter_mut().zip(&prepared).filter(|(_, &kept)| kept) {
        held.components = HeldRuns::Dropped;
    }
    lap("block_edges", &mut seconds.block_edges);
    let edge_refs: Vec<&EdgeList> = edges.iter().collect();
    let (thresholds, tables, n_edges) = steps.merge_lists(fragments.n_fragments, &edge_refs, thresholds)?;
    drop(edge_refs);
    drop(edges);
    lap("merge", &mut seconds.merge);
    pulled(0..grid.len(), |b| {
        if prepared[b] {
            return sink.write_prepared(blocks[b], &tables);
        }
        sink.write_runs(blocks[b], &*basins[b].runs()?, &fragments.ids[b], &tables)
    })?;
    lap("relabel_and_write", &mut seconds.relabel_and_write);
    Ok(BlockwiseSummary { n_fragments: fragments.n_fragments, thresholds, open_voxels, n_edges, seconds })
}

/// `work` for one block of `step`, its seconds logged at the debug level
/// (against the GPU's turn in it, logged by the GPU's steps, they say how
/// long the block's thread works on the host).
fn timed_block<T>(step: &'static str, work: impl FnOnce() -> Result<T>) -> Result<T> {
    let start = Instant::now();
    let out = work();
    tracing::debug!(step, seconds = start.elapsed().as_secs_f64(), "block's work in its step");
    out
}

/// `work` on every item, in parallel, the results in order. Each of the
/// pool's threads runs one loop ([`rayon::broadcast`]) that takes the next
/// item as soon as it is done with one, so no thread waits for the others
/// between items (as it did at the end of each wave of blocks before). The
/// items are not rayon tasks: a worker that waits inside a block's nested
/// rayon call (the GPU's steps wait for their turn on a plain thread, but
/// relabelling and counting split their loops) takes up pieces of those
/// calls meanwhile, never another block, so at most one block per thread is
/// in flight, whatever the nesting. After an error no item is started; the
/// error of the first failed item is returned. A panic in `work` stops the
/// loops too, and reaches the caller.
fn pulled<I: Send, T: Send>(
    items: impl IntoIterator<Item = I, IntoIter: Send>,
    work: impl Fn(I) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    let items = Mutex::new(items.into_iter().enumerate());
    let stop = AtomicBool::new(false);
    let done: Vec<Vec<(usize, Result<T>)>> = rayon::broadcast(|_| {
        let mut done = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let next = items.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).next();
            let Some((k, item)) = next else { break };
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(item))).unwrap_or_else(|panic| {
                    stop.store(true, Ordering::Relaxed);
                    std::panic::resume_unwind(panic)
                });
            if result.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            done.push((k, result));
        }
        done
    });
    let mut done: Vec<(usize, Result<T>)> = done.into_iter().flatten().collect();
    done.sort_unstable_by_key(|&(k, _)| k);
    done.into_iter().map(|(_, result)| result).collect()
}

/// A block's components as [`decode_blocks_with`] holds them between steps.
enum HeldRuns {
    /// As they came.
    Unpacked(ComponentRuns),
    /// Through zstd.
    Packed(PackedRuns),
    /// Dropped: the sink kept what it writes of the block.
    Dropped,
}

/// A block's [`LocalBasins`] as [`decode_blocks_with`] holds them between
/// steps.
struct HeldBasins {
    components: HeldRuns,
    component_min: Vec<u64>,
    component_sizes: Vec<u64>,
    background: u64,
    faces: BasinFaces,
}

impl HeldBasins {
    /// `basins` held, their runs unpacked while `held` (the bytes of runs
    /// held unpacked, counted here) stays within `unpacked`, else packed.
    fn hold(basins: LocalBasinRuns, held: &std::sync::atomic::AtomicU64, unpacked: u64) -> Result<Self> {
        use std::sync::atomic::Ordering;
        let LocalBasinRuns { components, component_min, component_sizes, background, faces } = basins;
        let bytes = std::mem::size_of_val(components.runs()) as u64;
        let fits = held.fetch_add(bytes, Ordering::Relaxed).saturating_add(bytes) <= unpacked;
        let components = if fits {
            HeldRuns::Unpacked(components)
        } else {
            held.fetch_sub(bytes, Ordering::Relaxed);
            HeldRuns::Packed(PackedRuns::pack(&components)?)
        };
        Ok(Self { components, component_min, component_sizes, background, faces })
    }

    /// The components' runs.
    fn runs(&self) -> Result<std::borrow::Cow<'_, ComponentRuns>> {
        match &self.components {
            HeldRuns::Unpacked(runs) => Ok(std::borrow::Cow::Borrowed(runs)),
            HeldRuns::Packed(packed) => Ok(std::borrow::Cow::Owned(packed.runs()?)),
            HeldRuns::Dropped => Err(invalid("a block's components were dropped before their last use")),
        }
    }

    fn summary(&self) -> BasinSummary<'_> {
        BasinSummary {
            component_min: &self.component_min,
            component_sizes: &self.component_sizes,
            background: self.background,
            faces: &self.faces,
        }
    }
}

/// A block's components compressed: their runs in C order (equal
/// neighbours along the flattened block), each as its value and length
/// (little-endian u32s), through zstd at level 1. Basins come out about 20
/// times smaller; the runs (about ten voxels each) leave zstd a fifth of
/// the bytes, and are quick to find and to fill. What the driver holds
/// between the steps, and what `gpu_waterz.blockwise` keeps (and Dask
/// moves) instead of four bytes per voxel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedRuns {
    shape: [usize; 3],
    bytes: Vec<u8>,
}

impl PackedRuns {
    /// Runs per piece that goes through the (de)compressor.
    const PIECE: usize = 1 << 13;

    /// The runs compressed.
    pub fn pack(runs: &ComponentRuns) -> Result<Self> {
        use std::io::Write;
        let shape = runs.shape();
        let failed = |e: std::io::Error| invalid(format!("packing a block's components: {e}"));
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), 1).map_err(failed)?;
        // The frame says its size, so that unpacking allocates the runs once.
        encoder.set_pledged_src_size(Some(8 * runs.runs().len() as u64)).map_err(failed)?;
        let mut piece: Vec<u8> = Vec::with_capacity(8 * Self::PIECE);
        for runs in runs.runs().chunks(Self::PIECE) {
            piece.clear();
            for &[value, length] in runs {
                piece.extend(value.to_le_bytes());
                piece.extend(length.to_le_bytes());
            }
            encoder.write_all(&piece).map_err(failed)?;
        }
        Ok(Self { shape, bytes: encoder.finish().map_err(failed)? })
    }

    /// Packed runs of a block of `shape` from their bytes (as
    /// [`PackedRuns::bytes`] gave them); checked when unpacked.
    pub fn from_bytes(shape: [usize; 3], bytes: Vec<u8>) -> Self {
        Self { shape, bytes }
    }

    /// The block's shape `(z, y, x)`.
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// The compressed bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The runs, unpacked; fails when the bytes are not a whole stream of
    /// runs that fill the block.
    pub fn runs(&self) -> Result<ComponentRuns> {
        use std::io::Read;
        let [z, y, x] = self.shape;
        let failed = |e: std::io::Error| invalid(format!("unpacking a block's components: {e}"));
        let mut decoder = zstd::stream::Decoder::new(self.bytes.as_slice()).map_err(failed)?;
        // Room for the runs the frame says it holds (at most one per voxel:
        // the bytes may come from elsewhere), else grown as they come.
        let said = zstd::zstd_safe::get_frame_content_size(&self.bytes).ok().flatten().unwrap_or(0) / 8;
        let voxels = z
            .checked_mul(y)
            .and_then(|n| n.checked_mul(x))
            .ok_or_else(|| invalid(format!("a block of shape {:?} has too many voxels", self.shape)))?;
        let mut runs: Vec<[u32; 2]> = Vec::new();
        // Only room: a frame that says more than it holds fails below, and
        // room that cannot be had is grown as the runs come instead.
        let _ = runs.try_reserve_exact(said.min(voxels as u64) as usize);
        let mut piece = vec![0u8; 8 * Self::PIECE];
        loop {
            // Fill the piece (or what is left of the stream) with whole runs.
            let mut filled = 0;
            while filled < piece.len() {
                let read = decoder.read(&mut piece[filled..]).map_err(failed)?;
                if read == 0 {
                    break;
                }
                filled += read;
            }
            if filled % 8 != 0 {
                return Err(invalid("a block's packed components end inside a run"));
            }
            for run in piece[..filled].chunks_exact(8) {
                let value = u32::from_le_bytes([run[0], run[1], run[2], run[3]]);
                let length = u32::from_le_bytes([run[4], run[5], run[6], run[7]]);
                runs.push([value, length]);
            }
            if filled < piece.len() {
                break;
            }
        }
        // The lengths must add up to the block's voxels.
        ComponentRuns::new([z, y, x], runs)
    }
}

/// The [`BlockSink`] of [`decode`]: each block's parts of the whole
/// arrays (its fragments, then its segmentations), cut up front, so that
/// blocks are written at once, each under its own lock.
struct Assembled<'a> {
    grid: BlockGrid,
    parts: Vec<Mutex<Vec<ArrayViewMut3<'a, u64>>>>,
}

/// `view` cut along `axis` into pieces of `step` (the last one shorter).
fn cut<'a>(view: ArrayViewMut3<'a, u64>, axis: usize, step: usize) -> Vec<ArrayViewMut3<'a, u64>> {
    let mut pieces = Vec::new();
    let mut rest = view;
    while rest.len_of(Axis(axis)) > step {
        let (piece, tail) = rest.split_at(Axis(axis), step);
        pieces.push(piece);
        rest = tail;
    }
    pieces.push(rest);
    pieces
}

impl<'a> Assembled<'a> {
    /// The blocks of `grid` over `arrays` (each of the grid's extent).
    fn new(grid: BlockGrid, arrays: impl Iterator<Item = ArrayViewMut3<'a, u64>>) -> Self {
        let step = grid.block_shape().map(|n| n as usize);
        let mut parts: Vec<Vec<ArrayViewMut3<'a, u64>>> = (0..grid.len()).map(|_| Vec::new()).collect();
        for array in arrays {
            // Slabs along z, rows along y, blocks along x: the grid's order.
            let blocks = cut(array, 0, step[0])
                .into_iter()
                .flat_map(|slab| cut(slab, 1, step[1]))
                .flat_map(|row| cut(row, 2, step[2]));
            for (b, block) in blocks.enumerate() {
                parts[b].push(block);
            }
        }
        Self { grid, parts: parts.into_iter().map(Mutex::new).collect() }
    }
}

impl<'a> Assembled<'a> {
    /// The parts of `block`, locked.
    fn parts_of(&self, block: Block) -> std::sync::MutexGuard<'_, Vec<ArrayViewMut3<'a, u64>>> {
        let at = std::array::from_fn(|a| block.lo[a] / self.grid.block_shape()[a]);
        self.parts[self.grid.index(at)].lock().expect("no writer panicked")
    }
}

impl BlockSink for Assembled<'_> {
    fn write(&self, block: Block, fragments: ArrayView3<'_, u64>, segmentations: &[Array3<u64>]) -> Result<()> {
        let mut parts = self.parts_of(block);
        let (first, rest) = parts.split_first_mut().expect("the fragments' part");
        first.assign(&fragments);
        for (part, values) in rest.iter_mut().zip(segmentations) {
            part.assign(values);
        }
        Ok(())
    }

    /// Relabels straight into the whole arrays' parts (no array per block).
    fn write_components(
        &self,
        block: Block,
        components: ArrayView3<'_, u32>,
        ids: &[u64],
        tables: &[Vec<u64>],
    ) -> Result<()> {
        check_components(components, ids)?;
        let mut parts = self.parts_of(block);
        let (first, rest) = parts.split_first_mut().expect("the fragments' part");
        first.zip_mut_with(&components, |out, &c| *out = ids[c as usize]);
        for (part, table) in rest.iter_mut().zip(tables) {
            let label_of = component_labels(ids, table)?;
            part.zip_mut_with(&components, |out, &c| *out = label_of[c as usize]);
        }
        Ok(())
    }
}

/// Every step in this process, blocks in parallel: the `(3, z, y, x)`
/// `affinities` decoded in blocks of `block_shape` ([`decode_blocks`] over
/// the array, the results assembled in memory). Equal to the whole-volume
/// watershed (labels) and to the exact serial merging of the whole-volume
/// region graph (segmentations).
pub fn decode(
    affinities: ArrayView4<'_, f32>,
    block_shape: [u64; 3],
    params: WatershedParams,
    thresholds: &[f64],
) -> Result<Decoded> {
    decode_with(affinities, block_shape, params, thresholds, &CpuSteps)
}

/// [`decode`] with steps 1, 3 and 5 of each block and the merge run by
/// `steps`.
pub fn decode_with(
    affinities: ArrayView4<'_, f32>,
    block_shape: [u64; 3],
    params: WatershedParams,
    thresholds: &[f64],
    steps: &impl DecodeSteps,
) -> Result<Decoded> {
    decode_held(affinities, block_shape, params, thresholds, steps, unpacked_runs_budget())
}

/// [`decode_with`] holding at most `unpacked` bytes of blocks' runs
/// unpacked ([`decode_blocks_held`]).
fn decode_held(
    affinities: ArrayView4<'_, f32>,
    block_shape: [u64; 3],
    params: WatershedParams,
    thresholds: &[f64],
    steps: &impl DecodeSteps,
    unpacked: u64,
) -> Result<Decoded> {
    let s = affinities.shape();
    if s[0] != 3 {
        return Err(invalid(format!("affinities must be (3, z, y, x), not {s:?}")));
    }
    let shape = (s[1], s[2], s[3]);
    let grid = BlockGrid::new([s[1] as u64, s[2] as u64, s[3] as u64], block_shape)?;
    let mut fragments = Array3::zeros(shape);
    let mut segmentations = vec![Array3::zeros(shape); thresholds.len()];
    let summary = {
        let arrays = std::iter::once(fragments.view_mut()).chain(segmentations.iter_mut().map(|s| s.view_mut()));
        let sink = Assembled::new(grid, arrays);
        decode_blocks_held(&affinities, block_shape, params, thresholds, &sink, steps, unpacked)?
    };
    Ok(Decoded {
        fragments,
        n_fragments: summary.n_fragments,
        segmentations,
        thresholds: summary.thresholds,
        open_voxels: summary.open_voxels,
        n_edges: summary.n_edges,
        seconds: summary.seconds,
    })
}

#[cfg(test)]
mod tests {
    /// The decode holds blocks' runs unpacked, packed, or some of each,
    /// with the same result.
    #[test]
    fn runs_held_packed_or_not_decode_alike() {
        use gpu_waterz_core::synthetic::{cell_affinities, cell_labels};
        let params = gpu_waterz_core::WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };
        let labels = cell_labels(5, (12, 20, 16), 14);
        let affs = cell_affinities(5, &labels, 0.2);
        let decoded = |unpacked: u64| {
            let mut d =
                super::decode_held(affs.view(), [4, 7, 5], params, &[0.2, 0.6], &super::CpuSteps, unpacked).unwrap();
            d.seconds = Default::default();
            d
        };
        let packed = decoded(0);
        assert!(packed.n_fragments > 10);
        // All unpacked; about half of the blocks' runs (each is some
        // hundreds of bytes).
        for unpacked in [u64::MAX, 4_000] {
            assert_eq!(decoded(unpacked), packed, "{unpacked} bytes unpacked");
        }
    }

    use super::{
        basins_from_components, basins_from_runs, invalid, lower_faces, region_graph, Block, ComponentRuns, EdgeList,
        LocalBasinRuns, PackedRuns, PairStats, RunCursor,
    };
    use gpu_waterz_core::ContactStats;

    /// A list of pairs of fragments `1..=n_fragments` drawn from `raw`,
    /// ascending without repeats (as step 5 gives them) or, `reversed`,
    /// descending.
    fn edge_list(n_fragments: u64, raw: &[(u64, u64)], reversed: bool) -> EdgeList {
        let mut pairs: Vec<[u64; 2]> = raw
            .iter()
            .map(|&(a, b)| {
                let u = 1 + a % (n_fragments - 1);
                [u, u + 1 + b % (n_fragments - u)]
            })
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        if reversed {
            pairs.reverse();
        }
        EdgeList {
            u: pairs.iter().map(|p| p[0]).collect(),
            v: pairs.iter().map(|p| p[1]).collect(),
            count: pairs.iter().map(|p| 1 + p[0] % 5).collect(),
            sum: pairs.iter().map(|p| p[1] * 3).collect(),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(40))]
        /// Any pair lists, ascending without repeats or not, summed by
        /// `region_graph` as a map sums them: any number of lists and
        /// ranges, pairs shared by many lists, empty lists.
        #[test]
        fn the_region_graph_sums_every_lists_pairs(
            n_fragments in proptest::prop_oneof![2u64..7, 2u64..62, 2u64..3002, 2u64..1_000_002],
            raw in proptest::collection::vec(
                proptest::collection::vec((0u64..u64::MAX, 0u64..u64::MAX), 0..2000),
                1..70,
            ),
            reversed: bool,
        ) {
            let lists: Vec<EdgeList> = raw.iter().map(|r| edge_list(n_fragments, r, reversed)).collect();
            let mut want = std::collections::BTreeMap::<[u64; 2], ContactStats>::new();
            for list in &lists {
                for k in 0..list.u.len() {
                    let faces = ContactStats { contact_count: list.count[k], affinity_sum: list.sum[k] };
                    let entry = want.entry([list.u[k], list.v[k]]).or_default();
                    *entry = entry.merged(faces);
                }
            }
            let refs: Vec<&EdgeList> = lists.iter().collect();
            let (graph, stats) = region_graph(n_fragments, &refs).unwrap();
            proptest::prop_assert_eq!(graph, want.keys().copied().collect::<Vec<_>>());
            proptest::prop_assert_eq!(stats, want.values().copied().collect::<Vec<_>>());
        }
    }

    #[test]
    fn bad_or_overflowing_pairs_are_errors() {
        let bad = EdgeList { u: vec![1, 3], v: vec![2, 3], count: vec![1, 1], sum: vec![1, 1] };
        assert!(region_graph(9, &[&bad]).unwrap_err().to_string().contains("(3, 3)"));
        let huge = EdgeList { u: vec![1, 1], v: vec![2, 2], count: vec![u64::MAX, 1], sum: vec![1, 1] };
        assert!(region_graph(9, &[&huge]).unwrap_err().to_string().contains("overflow"));
        let (most, one) = (
            EdgeList { u: vec![1], v: vec![2], count: vec![u64::MAX], sum: vec![1] },
            EdgeList { u: vec![1], v: vec![2], count: vec![1], sum: vec![1] },
        );
        assert!(region_graph(9, &[&most, &one]).unwrap_err().to_string().contains("overflow"));
    }

    #[test]
    fn pulled_items_keep_the_order_and_stop_at_an_error() {
        let n = 10 * rayon::current_num_threads() + 3;
        let squares = super::pulled(0..n, |i| Ok(i * i)).unwrap();
        assert_eq!(squares, (0..n).map(|i| i * i).collect::<Vec<_>>());
        assert!(super::pulled(0..0, |i: usize| Ok(i)).unwrap().is_empty());
        let failed = super::pulled(0..n, |i| if i == n - 1 { Err(invalid("the last one")) } else { Ok(i) });
        assert!(failed.unwrap_err().to_string().contains("the last one"));
        // The first failed item's error; items after a failure are not
        // started (one thread: none after it).
        let started = std::sync::atomic::AtomicUsize::new(0);
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let failed = one.install(|| {
            super::pulled(0..n, |i| {
                started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= 4 {
                    Err(invalid(format!("item {i}")))
                } else {
                    Ok(i)
                }
            })
        });
        assert!(failed.unwrap_err().to_string().contains("item 4"));
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 5);
    }

    /// A block whose work waits for rayon work (here on another pool) takes
    /// up no other block meanwhile: at most one item per thread is in
    /// flight.
    #[test]
    fn pulled_items_in_flight_are_at_most_the_threads() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let other = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let (now, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let sums = pool.install(|| {
            super::pulled(0..40u64, |i| {
                most.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                // Work on another pool, as a GPU step's turn: a worker that
                // waits for it there keeps busy with this pool's work
                // meanwhile (`ThreadPool::install`).
                let sum = other.install(|| {
                    std::thread::sleep(std::time::Duration::from_micros(500));
                    2 * i
                });
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(sum)
            })
        });
        assert_eq!(sums.unwrap(), (0..40u64).map(|i| 2 * i).collect::<Vec<_>>());
        assert!(most.load(Ordering::SeqCst) <= 3, "{} items in flight on 3 threads", most.load(Ordering::SeqCst));
    }

    /// A panic in one item's work reaches the caller.
    #[test]
    fn a_panic_in_a_pulled_item_reaches_the_caller() {
        let caught =
            std::panic::catch_unwind(|| super::pulled(0..50, |i| if i == 7 { panic!("item seven") } else { Ok(i) }));
        assert!(caught.is_err());
    }
    use ndarray::{Array3, ShapeBuilder};

    #[test]
    fn packed_components_unpack_to_the_same_values() {
        // More values than one piece, and a layout that is not C order.
        let mut components = Array3::<u32>::zeros((7, 90, 53).f());
        for (i, c) in components.iter_mut().enumerate() {
            *c = (i as u32 / 13) ^ 0xdead_beef;
        }
        let packed = PackedRuns::pack(&ComponentRuns::of(components.view())).unwrap();
        assert!(packed.bytes.len() < 4 * components.len());
        assert_eq!(packed.runs().unwrap().expand(), components);
        // The frame says how many bytes of runs it holds.
        let n_runs = ComponentRuns::of(components.view()).runs().len() as u64;
        assert_eq!(zstd::zstd_safe::get_frame_content_size(packed.bytes()).unwrap(), Some(8 * n_runs));
        let empty = PackedRuns::pack(&ComponentRuns::of(Array3::zeros((0, 4, 5)).view())).unwrap();
        assert_eq!(empty.runs().unwrap().expand().dim(), (0, 4, 5));
    }

    #[test]
    fn component_runs_fill_the_block_as_the_components_do() {
        // Runs longer than one voxel, several pieces of runs, a layout that
        // is not C order.
        let mut components = Array3::<u32>::zeros((9, 70, 131).f());
        for (i, c) in components.iter_mut().enumerate() {
            *c = (i as u32 / 2) % 1000;
        }
        let runs = ComponentRuns::of(components.view());
        assert!(runs.runs().len() > 2 * ComponentRuns::PIECE, "several pieces");
        assert_eq!(runs.expand(), components);
        let packed = PackedRuns::pack(&runs).unwrap();
        assert_eq!(packed.runs().unwrap().expand(), components);
        let label_of: Vec<u64> = (0..1000u64).map(|c| c * 3 + 1).collect();
        let mut out = vec![0u64; components.len()];
        runs.fill_labels(&label_of, &mut out).unwrap();
        let standard = components.as_standard_layout();
        let want: Vec<u64> = standard.iter().map(|&c| label_of[c as usize]).collect();
        assert_eq!(out, want);
        assert!(runs.fill_labels(&label_of[..999], &mut out).is_err(), "a component without a label");
        assert!(runs.fill_labels(&label_of, &mut out[1..]).is_err(), "the wrong size");
        assert!(ComponentRuns::new([1, 2, 3], vec![[4, 5]]).is_err(), "5 voxels for 6");
        assert!(ComponentRuns::new([1, 2, 3], vec![[4, 6], [1, 0]]).is_err(), "a run of none");
        assert_eq!(
            ComponentRuns::new([1, 2, 3], vec![[4, 2], [1, 4]]).unwrap().expand().as_slice().unwrap(),
            [4, 4, 1, 1, 1, 1]
        );
    }

    #[test]
    fn damaged_packed_components_are_errors() {
        let components = Array3::from_shape_fn((4, 50, 50), |(z, y, x)| (z * 2500 + y * 50 + x) as u32);
        let packed = PackedRuns::pack(&ComponentRuns::of(components.view())).unwrap();
        let short = PackedRuns::from_bytes(packed.shape(), packed.bytes()[..packed.bytes().len() / 2].to_vec());
        assert!(short.runs().is_err(), "a cut stream");
        let longer = PackedRuns::from_bytes([4, 50, 49], packed.bytes().to_vec());
        assert!(longer.runs().is_err(), "more values than voxels");
        let more = PackedRuns::from_bytes([4, 50, 51], packed.bytes().to_vec());
        assert!(more.runs().is_err(), "fewer values than voxels");
        // A frame that says it holds far more than it does, for a huge
        // block, or a block whose voxels overflow: errors, not aborts.
        let mut header = packed.bytes().to_vec();
        header.truncate(18);
        let huge = PackedRuns::from_bytes([1 << 20, 1 << 20, 1 << 20], packed.bytes().to_vec());
        assert!(huge.runs().is_err(), "a huge block");
        let cut = PackedRuns::from_bytes([1 << 20, 1 << 20, 1 << 20], header);
        assert!(cut.runs().is_err(), "a header alone");
        let overflow = PackedRuns::from_bytes([1 << 40, 1 << 40, 1 << 40], packed.bytes().to_vec());
        assert!(overflow.runs().is_err(), "voxels that overflow");
    }

    /// Components `1..=n` in scan order of their first voxel (0:
    /// background) from any values: each value renamed by its first
    /// appearance, `background` values (below it) kept as 0.
    fn scan_ordered(shape: (usize, usize, usize), raw: &[u8], background: u8) -> Array3<u32> {
        let mut names = std::collections::HashMap::new();
        let values: Vec<u32> = (0..shape.0 * shape.1 * shape.2)
            .map(|i| {
                let v = raw[i % raw.len()];
                if v < background {
                    return 0;
                }
                let next = names.len() as u32 + 1;
                *names.entry(v).or_insert(next)
            })
            .collect();
        Array3::from_shape_vec(shape, values).unwrap()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(60))]
        /// Step 3's result from runs equals the one from the components
        /// per voxel: smallest voxels, sizes, background and faces, for any
        /// block shape and place, runs of any length; components out of
        /// scan order are an error both ways.
        #[test]
        fn basins_from_runs_equal_basins_from_components(
            shape in (1usize..9, 1usize..9, 1usize..9),
            lo in (0u64..5, 0u64..5, 0u64..5),
            raw in proptest::collection::vec(0u8..12, 1..40),
            stretch in 1usize..30,
            background in 0u8..4,
            bits_seed: u64,
            swap: bool,
        ) {
            let stretched: Vec<u8> = raw.iter().flat_map(|&v| std::iter::repeat_n(v, stretch)).collect();
            let mut components = scan_ordered(shape, &stretched, background);
            let block = Block { lo: [lo.0, lo.1, lo.2], hi: [lo.0 + shape.0 as u64, lo.1 + shape.1 as u64, lo.2 + shape.2 as u64] };
            let dims = [block.hi[0] + 2, block.hi[1] + 1, block.hi[2] + 3];
            let bits = Array3::from_shape_fn(shape, |(z, y, x)| {
                ((bits_seed >> ((z + 3 * y + 7 * x) % 57)) as u8) & 0x3f
            });
            let largest = components.iter().copied().max().unwrap();
            if swap && largest >= 2 {
                // Components 1 and 2 swapped: 2 then comes first.
                components.mapv_inplace(|c| match c { 1 => 2, 2 => 1, c => c });
            }
            let runs = ComponentRuns::of(components.view());
            let want = basins_from_components(dims, block, components.as_standard_layout().iter().copied().collect(), bits.clone());
            let got = basins_from_runs(dims, block, runs, bits);
            match (want, got) {
                (Ok(want), Ok(got)) => proptest::prop_assert_eq!(LocalBasinRuns::from(want), got),
                (Err(_), Err(_)) => proptest::prop_assert!(swap),
                (want, got) => proptest::prop_assert!(false, "{want:?} against {got:?}"),
            }
        }

        /// A sorted list of pairs merged with the table gives what adding
        /// each pair gives: lists in order or not, with pairs the table
        /// holds too, pairs given backwards, within one fragment or with
        /// the background.
        #[test]
        fn sorted_pairs_merge_as_added_ones(
            table in proptest::collection::vec((0u64..12, 0u64..12, 1u64..5), 0..40),
            listed in proptest::collection::vec((0u64..12, 0u64..12, 1u64..5), 0..60),
            sort in 0u8..3,
        ) {
            let stats = |k: u64| ContactStats { contact_count: k, affinity_sum: 1000 * k + 7 };
            let (mut want, mut got) = (PairStats::default(), PairStats::default());
            for &(f, g, k) in &table {
                want.add(f, g, stats(k));
                got.add(f, g, stats(k));
            }
            let mut listed = listed;
            if sort > 0 {
                // Strictly ascending, as a region graph lists its pairs;
                // with `sort == 2` each pair also put smaller first.
                if sort == 2 {
                    listed.iter_mut().for_each(|p| *p = (p.0.min(p.1), p.0.max(p.1), p.2));
                }
                listed.sort_unstable_by_key(|&(u, v, _)| (u, v));
                listed.dedup_by_key(|p| (p.0, p.1));
            }
            let edges: Vec<[u64; 2]> = listed.iter().map(|&(u, v, _)| [u, v]).collect();
            let values: Vec<ContactStats> = listed.iter().map(|&(_, _, k)| stats(k)).collect();
            for (&[u, v], &s) in edges.iter().zip(&values) {
                want.add(u, v, s);
            }
            proptest::prop_assert_eq!(got.into_edges_with_sorted(&edges, &values), want.into_edges());
        }

        /// Lookups in runs, in any order, give each voxel's component,
        /// and the lower faces counted through them equal those counted
        /// from the components per voxel.
        #[test]
        fn run_lookups_and_lower_faces_match_the_components(
            shape in (1usize..8, 1usize..8, 1usize..8),
            raw in proptest::collection::vec(0u32..6, 1..50),
            stretch in 1usize..20,
            lookups in proptest::collection::vec(0usize..1000, 0..200),
        ) {
            let n = shape.0 * shape.1 * shape.2;
            let comps: Vec<u32> = (0..n).map(|i| raw[(i / stretch) % raw.len()]).collect();
            let array = Array3::from_shape_vec(shape, comps.clone()).unwrap();
            let runs = ComponentRuns::of(array.view());
            let mut cursor = RunCursor::new(&runs);
            for i in lookups.into_iter().map(|i| i % n) {
                proptest::prop_assert_eq!(cursor.at(i), comps[i]);
            }
            let s = [shape.0, shape.1, shape.2];
            let ids: Vec<u64> = (0..6u64).map(|c| if c == 0 { 0 } else { 10 + c }).collect();
            let layers: Vec<Vec<u64>> = (0..3).map(|a| (0..s[(a + 1) % 3] * s[(a + 2) % 3]).map(|k| 1 + (k as u64 * 7) % 20).collect()).collect();
            let lower = [Some(layers[0].as_slice()), Some(layers[1].as_slice()), Some(layers[2].as_slice())];
            let affinity = |axis: usize, i: usize| (axis * 31 + i) as f32 / 997.0;
            let (mut want, mut got) = (PairStats::default(), PairStats::default());
            lower_faces(s, |i| comps[i], &ids, lower, &mut want, affinity);
            let mut cursor = RunCursor::new(&runs);
            lower_faces(s, |i| cursor.at(i), &ids, lower, &mut got, affinity);
            proptest::prop_assert_eq!(want.into_edges(), got.into_edges());
        }
    }

    #[test]
    fn runs_from_starts_fill_the_block_or_are_errors() {
        let runs = ComponentRuns::from_starts([1, 2, 3], &[4, 1, 4], &[0, 2, 5]).unwrap();
        assert_eq!(runs.expand().as_slice().unwrap(), [4, 4, 1, 1, 1, 4]);
        assert_eq!(runs, ComponentRuns::of(runs.expand().view()));
        assert!(ComponentRuns::from_starts([1, 2, 3], &[4, 1], &[0]).is_err(), "lists of different lengths");
        assert!(ComponentRuns::from_starts([1, 2, 3], &[4, 1], &[1, 3]).is_err(), "not from voxel 0");
        assert!(ComponentRuns::from_starts([1, 2, 3], &[4, 1], &[0, 0]).is_err(), "a run of none");
        assert!(ComponentRuns::from_starts([1, 2, 3], &[4, 1], &[0, 7]).is_err(), "a start past the block");
        assert!(ComponentRuns::from_starts([1, 2, 3], &[4, 1, 2], &[0, 4, 3]).is_err(), "descending starts");
        assert!(ComponentRuns::from_starts([1, 2, 3], &[], &[]).is_err(), "no runs for six voxels");
        assert_eq!(ComponentRuns::from_starts([0, 2, 3], &[], &[]).unwrap().runs(), &[] as &[[u32; 2]]);
    }
}

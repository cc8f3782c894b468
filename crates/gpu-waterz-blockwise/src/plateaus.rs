//! Steps 1 and 2: the watershed's mask and the division of its plateaus,
//! inside blocks and across them.

use crate::{find, invalid, neighbour_inside, neighbour_offsets, union, voxel_at, voxel_index, Block, Result};
use gpu_waterz_abi::watershed::{steepest_mask, DIRECTION_BITS, OPPOSITE};
use gpu_waterz_core::params::check_watershed_thresholds;
use gpu_waterz_core::{CoreError, WatershedParams};
use ndarray::{Array3, ArrayView4};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

/// Set in an open voxel's mask when it is a plateau corner (it marks a
/// face that its neighbour does not mark back).
pub const CORNER_FLAG: u8 = 0x80;

/// Set on a voxel once the division has queued it.
const VISITED: u8 = 0x40;

/// The six direction bits.
const DIRECTIONS: u8 = 0x3f;

/// The voxels of a block's open plateaus: their indices in the volume,
/// ascending, and their masks (direction bits, [`CORNER_FLAG`] on corners).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenVoxels {
    /// Voxel indices in the volume (C order), ascending.
    pub index: Vec<u64>,
    /// Each voxel's mask and corner flag.
    pub mask: Vec<u8>,
}

/// What [`local_plateaus`] gives for one block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalPlateaus {
    /// Each voxel's directions, `(z, y, x)` over the block: the one kept by
    /// the division for voxels of plateaus inside the block and for
    /// corners of none, the mask for voxels never queued (plateaus without
    /// a way down) and for open voxels (until [`settle_open_plateaus`]
    /// replaces them), 0 for background.
    pub bits: Array3<u8>,
    /// The voxels of plateaus that reach other blocks.
    pub open: OpenVoxels,
}

/// waterz's plateau division (the third pass of `basic_watershed.hpp`) of
/// the voxels reachable from `corners` (listed in scan order, their masks
/// in `bits`): a breadth-first search in queue order from the corners over
/// faces both voxels mark; each voxel queued keeps one direction, the last
/// in direction order that leads to a voxel which does not mark the face
/// back (a way down, or a voxel already divided). `neighbour(i, d)` is the
/// voxel across face `d` of `i` when it is in the set; one outside the set
/// is known not to mark the face back.
fn divide(bits: &mut [u8], corners: Vec<usize>, neighbour: impl Fn(usize, usize) -> Option<usize>) {
    let mut queue = corners;
    for &c in &queue {
        bits[c] |= VISITED;
    }
    let mut head = 0;
    while head < queue.len() {
        let i = queue[head];
        let mut keep = 0u8;
        for (d, &opposite) in OPPOSITE.iter().enumerate() {
            if bits[i] & DIRECTION_BITS[d] == 0 {
                continue;
            }
            match neighbour(i, d) {
                Some(j) if bits[j] & DIRECTION_BITS[opposite] != 0 => {
                    if bits[j] & VISITED == 0 {
                        bits[j] |= VISITED;
                        queue.push(j);
                    }
                }
                _ => keep = DIRECTION_BITS[d],
            }
        }
        bits[i] = keep | (bits[i] & !DIRECTIONS);
        head += 1;
    }
}

/// [`check_plateau_input`] but the values': `shape` must be that of the
/// `(3, z, y, x)` affinities of `region` (for uint8 codes, every value is
/// one), and the watershed's thresholds waterz's.
pub(crate) fn check_plateau_shape(
    dims: [u64; 3],
    block: Block,
    region: Block,
    shape: &[usize],
    params: WatershedParams,
) -> Result<()> {
    block.check(dims)?;
    let hs = region.shape();
    let expected = [3usize, hs[0] as usize, hs[1] as usize, hs[2] as usize];
    if shape != expected {
        return Err(invalid(format!(
            "the affinities of block {:?}..{:?} must cover the region {:?}..{:?}, shape {expected:?}, not {shape:?}",
            block.lo, block.hi, region.lo, region.hi
        )));
    }
    check_watershed_thresholds(params.aff_threshold_low as f64, params.aff_threshold_high as f64)?;
    Ok(())
}

/// Checks step 1's input for `block` of a volume of `dims`: `affinities`
/// must be the `(3, z, y, x)` affinities of `region`, finite, and the
/// watershed's thresholds waterz's (finite, in `[0, 1]`, low < high: no
/// marked face leaves the volume), as the whole-volume decode checks them.
pub(crate) fn check_plateau_input(
    dims: [u64; 3],
    block: Block,
    region: Block,
    affinities: ArrayView4<'_, f32>,
    params: WatershedParams,
) -> Result<()> {
    check_plateau_shape(dims, block, region, affinities.shape(), params)?;
    let hs = region.shape();
    // The first value that is not finite, in C order; on every thread where
    // the values lie in C order (some 2 * 10^8 values per block).
    let bad = |v: &f32| !v.is_finite();
    let first_bad = match affinities.as_slice() {
        Some(values) => gpu_waterz_core::parallel::first_position(values, bad).map(|k| (k, &values[k])),
        None => affinities.iter().enumerate().find(|(_, v)| bad(v)),
    };
    if let Some((k, &value)) = first_bad {
        let (c, rest) = (k / (hs[0] * hs[1] * hs[2]) as usize, k as u64 % (hs[0] * hs[1] * hs[2]));
        return Err(CoreError::AffinityValue {
            value,
            what: if value.is_nan() { "NaN" } else { "infinite" },
            channel: c,
            z: (region.lo[0] + rest / (hs[1] * hs[2])) as usize,
            y: (region.lo[1] + (rest / hs[2]) % hs[1]) as usize,
            x: (region.lo[2] + rest % hs[2]) as usize,
        }
        .into());
    }
    Ok(())
}

/// Step 1 for `block` of a volume of `dims`: `affinities` are the
/// `(3, z, y, x)` affinities of [`Block::halo`] (faces outside the volume
/// count as `low`, as in the whole-volume watershed).
pub fn local_plateaus(
    dims: [u64; 3],
    block: Block,
    affinities: ArrayView4<'_, f32>,
    params: WatershedParams,
) -> Result<LocalPlateaus> {
    let halo = block.halo(dims);
    check_plateau_input(dims, block, halo, affinities, params)?;
    let (low, high) = (params.aff_threshold_low, params.aff_threshold_high);
    // The masks of the block and one voxel around it (inside the volume).
    let mut ring = block;
    for a in 0..3 {
        ring.lo[a] = block.lo[a].saturating_sub(1);
        ring.hi[a] = (block.hi[a] + 1).min(dims[a]);
    }
    let rs = ring.shape();
    let mut masks = Array3::<u8>::zeros((rs[0] as usize, rs[1] as usize, rs[2] as usize));
    let aff = |channel: usize, at: [u64; 3]| {
        affinities
            [[channel, (at[0] - halo.lo[0]) as usize, (at[1] - halo.lo[1]) as usize, (at[2] - halo.lo[2]) as usize]]
    };
    for ((z, y, x), mask) in masks.indexed_iter_mut() {
        let at = [ring.lo[0] + z as u64, ring.lo[1] + y as u64, ring.lo[2] + x as u64];
        let mut faces = [low; 6];
        for a in 0..3 {
            if at[a] > 0 {
                faces[a] = aff(a, at);
            }
            if at[a] + 1 < dims[a] {
                let mut next = at;
                next[a] += 1;
                faces[a + 3] = aff(a, next);
            }
        }
        *mask = steepest_mask(faces, low, high);
    }
    let ring_offsets = neighbour_offsets(rs);
    let masks = masks.as_slice().expect("a new array is contiguous");
    let bs = block.shape();
    let n = block.len() as usize;
    let block_offsets = neighbour_offsets(bs);
    // Each block voxel's mask, corner flag, and plateau (union-find over
    // the faces both voxels mark, inside the block); a plateau is open when
    // one of its voxels shares such a face with a voxel outside.
    let mut bits = vec![0u8; n];
    let mut parent: Vec<u32> = (0..n as u32).collect();
    let mut touches_outside = vec![false; n];
    let mut i = 0usize;
    for z in 0..bs[0] {
        for y in 0..bs[1] {
            for x in 0..bs[2] {
                let local = [z, y, x];
                let r = voxel_index(
                    rs,
                    [z + block.lo[0] - ring.lo[0], y + block.lo[1] - ring.lo[1], x + block.lo[2] - ring.lo[2]],
                ) as usize;
                let mask = masks[r];
                let mut corner = false;
                for (d, &opposite) in OPPOSITE.iter().enumerate() {
                    if mask & DIRECTION_BITS[d] == 0 {
                        continue;
                    }
                    // A marked face leads inside the volume, so inside the ring.
                    let back = masks[(r as i64 + ring_offsets[d]) as usize] & DIRECTION_BITS[opposite] != 0;
                    if !back {
                        corner = true;
                    } else if neighbour_inside(local, d, bs) {
                        union(&mut parent, i as u32, (i as i64 + block_offsets[d]) as u32);
                    } else {
                        touches_outside[i] = true;
                    }
                }
                bits[i] = mask | if corner { crate::CORNER_FLAG } else { 0 };
                i += 1;
            }
        }
    }
    let mut open_root = vec![false; n];
    for i in 0..n {
        if touches_outside[i] {
            let root = find(&mut parent, i as u32) as usize;
            open_root[root] = true;
        }
    }
    let open: Vec<bool> = (0..n).map(|i| open_root[find(&mut parent, i as u32) as usize]).collect();
    drop(parent);
    let mut open_voxels = OpenVoxels::default();
    let corners: Vec<usize> = (0..n).filter(|&i| !open[i] && bits[i] & CORNER_FLAG != 0).collect();
    for i in (0..n).filter(|&i| open[i]) {
        open_voxels.index.push(voxel_index(dims, block.global(voxel_at(bs, i as u64))));
        open_voxels.mask.push(bits[i]);
    }
    // The plateaus inside the block, divided here. A face to a voxel
    // outside the block is never marked back (else the plateau would be
    // open); one to an open voxel inside is not either, and that voxel's
    // mask says so.
    divide(&mut bits, corners, |i, d| {
        neighbour_inside(voxel_at(bs, i as u64), d, bs).then(|| (i as i64 + block_offsets[d]) as usize)
    });
    for b in &mut bits {
        *b &= DIRECTIONS;
    }
    let bits = Array3::from_shape_vec((bs[0] as usize, bs[1] as usize, bs[2] as usize), bits)
        .expect("the block's shape holds its voxels");
    Ok(LocalPlateaus { bits, open: open_voxels })
}

/// Voxel index to slot (position in the sorted open voxels): the slots of
/// each row of the volume (a row is contiguous in the sorted voxels), from
/// a table of each row's first slot when the volume has few enough rows
/// for one (at most four per open voxel, or 2^20), else from a hash map.
enum SlotIndex<'a> {
    Rows { all: &'a [(u64, u32, u32)], row_length: u64, first: Vec<u32> },
    Hashed(FxHashMap<u64, u32>),
}

impl<'a> SlotIndex<'a> {
    /// The index of `all`'s voxels (sorted, distinct, fewer than 2^32) in
    /// a volume of `dims`.
    fn new(all: &'a [(u64, u32, u32)], dims: [u64; 3]) -> Self {
        let rows = dims[0] * dims[1];
        if rows <= (4 * all.len() as u64).max(1 << 20) {
            // first[r]: the slots before row r; row r is first[r]..first[r + 1].
            // Rows in pieces on every thread: each piece finds the slot of
            // its first row and walks its rows' slots.
            let row_length = dims[2];
            let mut first = vec![0u32; rows as usize + 1];
            let piece = (rows as usize).div_ceil(8 * rayon::current_num_threads()).max(1 << 12);
            first[1..].par_chunks_mut(piece).enumerate().for_each(|(c, ends)| {
                let r0 = (c * piece) as u64;
                let mut s = all.partition_point(|e| e.0 / row_length < r0);
                for (r, end) in (r0..).zip(ends.iter_mut()) {
                    while s < all.len() && all[s].0 / row_length == r {
                        s += 1;
                    }
                    *end = s as u32;
                }
            });
            Self::Rows { all, row_length, first }
        } else {
            Self::Hashed(all.iter().enumerate().map(|(s, &(v, _, _))| (v, s as u32)).collect())
        }
    }

    fn get(&self, v: u64) -> Option<usize> {
        match self {
            Self::Rows { all, row_length, first } => {
                let r = (v / row_length) as usize;
                let (start, end) = (first[r] as usize, first[r + 1] as usize);
                all[start..end].binary_search_by_key(&v, |e| e.0).ok().map(|k| start + k)
            }
            Self::Hashed(map) => map.get(&v).map(|&s| s as usize),
        }
    }
}

/// Every open voxel of `open` (each block's ascending, `total` in all)
/// once, in scan order: (voxel index, block, position). Each z-plane of
/// the volume is gathered from the blocks' runs in it apart, the planes in
/// parallel: a sort of the whole list would cost more and
/// run out of the caches. Each plane is a merge of the blocks' runs (each
/// already ascending), not a sort ([`merge_runs`]).
fn scan_order(dims: [u64; 3], open: &[&OpenVoxels], total: usize) -> Vec<(u64, u32, u32)> {
    let plane = dims[1] * dims[2];
    // Each block's run in each plane it holds voxels of: (z, block, run).
    let runs: Vec<(u64, u32, std::ops::Range<usize>)> = open
        .par_iter()
        .enumerate()
        .flat_map_iter(|(b, o)| {
            let mut runs = Vec::new();
            let mut start = 0;
            while start < o.index.len() {
                let z = o.index[start] / plane;
                let end = start + o.index[start..].partition_point(|&v| v < (z + 1) * plane);
                runs.push((z, b as u32, start..end));
                start = end;
            }
            runs.into_iter()
        })
        .collect();
    let mut by_plane: Vec<Vec<(u32, std::ops::Range<usize>)>> = vec![Vec::new(); dims[0] as usize];
    for (z, b, run) in runs {
        by_plane[z as usize].push((b, run));
    }
    let mut all = vec![(0u64, 0u32, 0u32); total];
    let mut planes: Vec<&mut [(u64, u32, u32)]> = Vec::with_capacity(by_plane.len());
    let mut rest = all.as_mut_slice();
    for runs in &by_plane {
        let (this, tail) = rest.split_at_mut(runs.iter().map(|(_, run)| run.len()).sum());
        planes.push(this);
        rest = tail;
    }
    planes.into_par_iter().zip(&by_plane).for_each(|(out, runs)| merge_runs(open, runs, out));
    all
}

/// Merges the blocks' `runs` in one plane (each ascending) into `out` in
/// scan order: the run with the smallest next voxel gives every voxel
/// below the other runs' next ones (a row's stretch of its block) at a
/// time, so the heap of runs is touched once per stretch, not per voxel.
/// (Gathering the runs and sorting the plane took most of step 2.) A voxel
/// in two runs comes out twice, side by side.
fn merge_runs(open: &[&OpenVoxels], runs: &[(u32, std::ops::Range<usize>)], out: &mut [(u64, u32, u32)]) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = runs
        .iter()
        .enumerate()
        .filter(|(_, (_, run))| !run.is_empty())
        .map(|(r, (b, run))| Reverse((open[*b as usize].index[run.start], r)))
        .collect();
    let mut next: Vec<usize> = runs.iter().map(|(_, run)| run.start).collect();
    let mut at = 0;
    while let Some(Reverse((_, r))) = heap.pop() {
        let (b, run) = &runs[r];
        let index = &open[*b as usize].index;
        let limit = heap.peek().map_or(u64::MAX, |Reverse((v, _))| *v);
        let mut k = next[r];
        // At least one voxel per turn, so that equal voxels of two runs
        // still come out.
        loop {
            out[at] = (index[k], *b, k as u32);
            at += 1;
            k += 1;
            if k == run.end || index[k] >= limit {
                break;
            }
        }
        next[r] = k;
        if k < run.end {
            heap.push(Reverse((index[k], r)));
        }
    }
}

/// Step 2: the division of the open plateaus of every block of a volume of
/// `dims`; `open[b]` is block `b`'s [`LocalPlateaus::open`]. Returns each
/// block's open voxels' directions, in the order given.
///
/// The open voxels are put in scan order (plane by plane, on every
/// thread) and divided by one breadth-first search from their corners in
/// scan order, each voxel's neighbours found in its row of the sorted
/// voxels (a table of each row's first slot) or, along x, next to it.
pub fn settle_open_plateaus(dims: [u64; 3], open: &[&OpenVoxels]) -> Result<Vec<Vec<u8>>> {
    crate::check_dims(dims)?;
    let started = std::time::Instant::now();
    let total: usize = open.iter().map(|o| o.index.len()).sum();
    if open.len() >= u32::MAX as usize || total >= u32::MAX as usize {
        return Err(invalid(format!("{total} open voxels of {} blocks: fewer than 2^32 are taken", open.len())));
    }
    let n_voxels: u64 = dims.iter().product();
    // The blocks in parallel; the first bad block's error.
    let check = |(b, o): (usize, &&OpenVoxels)| -> Result<()> {
        if o.index.len() != o.mask.len() {
            return Err(invalid(format!("block {b}: {} open voxels with {} masks", o.index.len(), o.mask.len())));
        }
        // A mask holds directions and the corner flag, nothing else; an
        // open voxel has a face its neighbour marks back, so some direction.
        if o.mask.iter().any(|&m| m & !(DIRECTIONS | CORNER_FLAG) != 0 || m & DIRECTIONS == 0) {
            return Err(invalid(format!("block {b}: an open voxel's mask is not one local_plateaus gives")));
        }
        if o.index.windows(2).any(|w| w[0] >= w[1]) || o.index.last().is_some_and(|&v| v >= n_voxels) {
            return Err(invalid(format!("block {b}: open voxels must be ascending voxels of the volume")));
        }
        Ok(())
    };
    let checked: Vec<Result<()>> = open.par_iter().enumerate().map(check).collect();
    checked.into_iter().collect::<Result<()>>()?;
    let all = scan_order(dims, open, total);
    if all.par_windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(invalid("open voxels must be distinct voxels of the volume"));
    }
    let index = SlotIndex::new(&all, dims);
    let mut bits: Vec<u8> = all.par_iter().map(|&(_, b, k)| open[b as usize].mask[k as usize]).collect();
    let volume_offsets = neighbour_offsets(dims);
    // The open voxel across face `d` of slot `s`, if any: along x the
    // next or previous slot (slots are in voxel order, so the voxel after
    // `v` is open exactly when it is the next slot), else looked up.
    let neighbour = |s: usize, d: usize| -> Option<usize> {
        let v = all[s].0;
        if !neighbour_inside(voxel_at(dims, v), d, dims) {
            return None;
        }
        let w = (v as i64 + volume_offsets[d]) as u64;
        match d {
            2 => (s > 0 && all[s - 1].0 == w).then(|| s - 1),
            5 => (s + 1 < all.len() && all[s + 1].0 == w).then_some(s + 1),
            _ => index.get(w),
        }
    };
    let corners: Vec<usize> = (0..all.len()).into_par_iter().filter(|&s| bits[s] & CORNER_FLAG != 0).collect();
    let indexed = std::time::Instant::now();
    divide(&mut bits, corners, neighbour);
    let divided = std::time::Instant::now();
    // Each block's directions written plane by plane, the planes on every
    // thread: a block's voxels in one plane are a stretch of its list, cut
    // out here, and each plane's slots (in scan order) fill their blocks'
    // stretches.
    let plane = dims[1] * dims[2];
    let mut out: Vec<Vec<u8>> = open.iter().map(|o| vec![0u8; o.index.len()]).collect();
    let mut stretches: Vec<Vec<(u32, usize, &mut [u8])>> = (0..dims[0]).map(|_| Vec::new()).collect();
    for (b, (o, values)) in open.iter().zip(out.iter_mut()).enumerate() {
        let mut rest: &mut [u8] = values;
        let mut start = 0;
        while start < o.index.len() {
            let z = o.index[start] / plane;
            let end = start + o.index[start..].partition_point(|&v| v < (z + 1) * plane);
            let (stretch, tail) = std::mem::take(&mut rest).split_at_mut(end - start);
            stretches[z as usize].push((b as u32, start, stretch));
            rest = tail;
            start = end;
        }
    }
    stretches.into_par_iter().enumerate().try_for_each(|(z, mut stretches)| -> Result<()> {
        let z = z as u64;
        let (lo, hi) = (all.partition_point(|e| e.0 < z * plane), all.partition_point(|e| e.0 < (z + 1) * plane));
        // Each block's stretch in this plane, by block.
        let mut stretch_of = vec![u32::MAX; open.len()];
        for (t, (b, _, _)) in stretches.iter().enumerate() {
            stretch_of[*b as usize] = t as u32;
        }
        for (s, &(_, b, k)) in all[lo..hi].iter().enumerate() {
            let (_, first, stretch) = stretches
                .get_mut(stretch_of[b as usize] as usize)
                .ok_or_else(|| invalid("an open voxel lost its block"))?;
            stretch[k as usize - *first] = bits[lo + s] & DIRECTIONS;
        }
        Ok(())
    })?;
    // At the debug level, where step 2's time goes.
    tracing::debug!(
        open_voxels = total,
        gathered_and_indexed_s = (indexed - started).as_secs_f64(),
        divided_s = (divided - indexed).as_secs_f64(),
        written_s = divided.elapsed().as_secs_f64(),
        "open plateaus settled"
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{scan_order, settle_open_plateaus, OpenVoxels, SlotIndex, CORNER_FLAG};

    /// Blocks' open voxels gathered plane by plane are all of them in scan
    /// order, as one sort gives.
    #[test]
    fn open_voxels_come_in_scan_order() {
        let dims = [9, 7, 11];
        let n: u64 = dims.iter().product();
        // Voxels dealt to five "blocks" by a hash, each block's ascending.
        let mut blocks: Vec<OpenVoxels> = vec![OpenVoxels::default(); 5];
        for v in (0..n).filter(|v| v % 3 != 1) {
            let b = ((v * 2_654_435_761) >> 7) as usize % 5;
            blocks[b].index.push(v);
            blocks[b].mask.push(1);
        }
        let open: Vec<&OpenVoxels> = blocks.iter().collect();
        let total = blocks.iter().map(|o| o.index.len()).sum();
        let mut want: Vec<(u64, u32, u32)> = Vec::new();
        for (b, o) in blocks.iter().enumerate() {
            want.extend(o.index.iter().enumerate().map(|(k, &v)| (v, b as u32, k as u32)));
        }
        want.sort_unstable();
        assert_eq!(scan_order(dims, &open, total), want);
    }

    #[test]
    fn open_voxels_out_of_order_twice_or_outside_are_errors() {
        let dims = [2, 3, 4];
        let open = |index: Vec<u64>| OpenVoxels { mask: vec![1 | CORNER_FLAG; index.len()], index };
        for (blocks, what) in [
            (vec![open(vec![5, 3])], "ascending"),
            (vec![open(vec![3, 3])], "ascending"),
            (vec![open(vec![24])], "ascending"),
            (vec![open(vec![1, 3]), open(vec![3])], "distinct"),
        ] {
            let refs: Vec<&OpenVoxels> = blocks.iter().collect();
            let error = settle_open_plateaus(dims, &refs).unwrap_err().to_string();
            assert!(error.contains(what), "{error}");
        }
    }

    /// The table of rows, made in pieces of rows on several threads, finds
    /// every slot, also of rows at the pieces' edges, and no other voxel.
    #[test]
    fn slots_are_found_by_rows_in_pieces() {
        let dims = [64u64, 512, 3];
        let rows = dims[0] * dims[1];
        // Voxels in some rows, none in others (runs of empty rows across
        // the pieces' edges), the last row's last voxel included.
        let voxels: Vec<u64> = (0..rows * dims[2])
            .filter(|&v| {
                let r = v / dims[2];
                (r % 4096 < 3 || r % 4096 > 4090 || (r * 2_654_435_761).is_multiple_of(7)) && v.is_multiple_of(2)
            })
            .chain([rows * dims[2] - 1])
            .collect();
        let all: Vec<(u64, u32, u32)> = voxels.iter().enumerate().map(|(k, &v)| (v, 0, k as u32)).collect();
        for threads in [1, 3, 8] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let index = pool.install(|| SlotIndex::new(&all, dims));
            assert!(matches!(index, SlotIndex::Rows { .. }));
            for (s, &(v, _, _)) in all.iter().enumerate() {
                assert_eq!(index.get(v), Some(s), "{threads} threads, voxel {v}");
            }
            for v in (1..rows * dims[2] - 1).step_by(2).take(50_000) {
                assert_eq!(index.get(v), None, "{threads} threads, voxel {v}");
            }
        }
    }

    #[test]
    fn slots_are_found_by_rows_or_by_hash() {
        // Rows: a table when the volume has few rows; a hash map when it has
        // more than four per voxel and 2^20.
        for dims in [[3, 4, 5], [1 << 11, 1 << 10, 1]] {
            let voxels = [0u64, 4, 5, 19, 20, 59, (1 << 20) + 7];
            let n: u64 = dims.iter().product();
            let all: Vec<(u64, u32, u32)> =
                voxels.iter().filter(|&&v| v < n).enumerate().map(|(k, &v)| (v, 0, k as u32)).collect();
            let index = SlotIndex::new(&all, dims);
            assert_eq!(matches!(index, SlotIndex::Rows { .. }), dims[2] == 5, "{dims:?}");
            for (s, &(v, _, _)) in all.iter().enumerate() {
                assert_eq!(index.get(v), Some(s), "{dims:?} {v}");
            }
            for v in [1u64, 3, 6, 18, 21, 58] {
                assert_eq!(index.get(v), None, "{dims:?} {v}");
            }
        }
    }
}

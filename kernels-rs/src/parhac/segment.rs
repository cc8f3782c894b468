//! Regions and segmentations: the roots of the merge forest, and every
//! voxel's fragment replaced by its region.

use crate::device::*;
use gpu_waterz_abi::parhac::{PhFindRootsArgs, PhSegmentArgs, PhSegmentU64Args};

kernel! {
    /// The region of every node: the root of its tree in the merge forest
    /// (the smallest node of the region: merges go into the smaller id).
    ///
    /// # Safety
    /// `parent` holds `n_nodes` u32s forming a forest (roots point to
    /// themselves); `roots` holds `n_nodes` u32s.
    ///
    /// # Parameters
    /// - `parent`, `n_nodes`: the forest; `roots`: output.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one node per iteration, following parents to the root.
    pub unsafe extern "ptx-kernel" fn ph_find_roots(
        parent: *const u32,
        n_nodes: u64,
        roots: *mut u32,
    ) as PhFindRootsArgs {
        grid_stride(n_nodes, |x| {
            // SAFETY: parents are node ids below `n_nodes`.
            unsafe {
                let mut r = x as u32;
                loop {
                    let p = *parent.add(r as usize);
                    if p == r {
                        break;
                    }
                    r = p;
                }
                *roots.add(x as usize) = r;
            }
        });
    }
}

kernel! {
    /// A segmentation: every voxel's fragment replaced by its region
    /// (`roots[0] = 0` keeps the background). A label at or above `n_roots`
    /// becomes 0 and is counted in `n_bad`, which the host checks.
    ///
    /// # Safety
    /// `labels` and `out` hold `n` u32s; `roots` holds `n_roots`; `n_bad` is
    /// one zeroed u32.
    ///
    /// # Parameters
    /// - `labels`, `n`: fragments; `roots`, `n_roots`: region per fragment;
    ///   `out`: the segmentation; `n_bad`: labels outside `roots`.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration.
    pub unsafe extern "ptx-kernel" fn ph_segment(
        labels: *const u32,
        n: u64,
        roots: *const u32,
        n_roots: u64,
        out: *mut u32,
        n_bad: *mut u32,
    ) as PhSegmentArgs {
        grid_stride(n, |i| {
            // SAFETY: `i < n`; the label is checked against `n_roots`.
            unsafe {
                let label = *labels.add(i as usize);
                let region = if (label as u64) < n_roots {
                    *roots.add(label as usize)
                } else {
                    atomic_add_u32(n_bad, 1);
                    0
                };
                *out.add(i as usize) = region;
            }
        });
    }
}

kernel! {
    /// A segmentation in waterz's uint64 ids: every voxel's fragment `k`
    /// replaced by `table[k]` (the id of its region). A fragment at or above
    /// `n_table` becomes 0 and is counted in `n_bad`, which the host checks.
    ///
    /// # Safety
    /// `labels` holds `n` u32s, `out` `n` u64s; `table` holds `n_table` u64s;
    /// `n_bad` is one zeroed u32.
    ///
    /// # Parameters
    /// - `labels`, `n`: fragments; `table`, `n_table`: id per fragment; `out`:
    ///   the segmentation; `n_bad`: labels outside the table.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration.
    pub unsafe extern "ptx-kernel" fn ph_segment_u64(
        labels: *const u32,
        n: u64,
        table: *const u64,
        n_table: u64,
        out: *mut u64,
        n_bad: *mut u32,
    ) as PhSegmentU64Args {
        grid_stride(n, |i| {
            // SAFETY: `i < n`; the label is checked against `n_table`.
            unsafe {
                let label = *labels.add(i as usize);
                let id = if (label as u64) < n_table {
                    *table.add(label as usize)
                } else {
                    atomic_add_u32(n_bad, 1);
                    0
                };
                *out.add(i as usize) = id;
            }
        });
    }
}

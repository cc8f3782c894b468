//! The region graph on the GPU: every boundary face becomes a
//! `(key = u << 32 | v, fixed-point affinity)` pair; a stable radix sort and
//! a reduce-by-key (integer sums) give one edge per fragment pair, sorted,
//! with exact contact statistics.

use crate::device::*;
use gpu_waterz_abi::stats::affinity_to_fixed;
use gpu_waterz_abi::Dims3;

#[inline(always)]
fn axis_positions(i: u64, dims: Dims3) -> [u64; 3] {
    let yx = dims.y * dims.x;
    [i / yx, (i % yx) / dims.x, i % dims.x]
}

/// Counts each voxel's boundary faces to its predecessors (0 to 3).
///
/// # Safety
/// `labels` and `counts` hold one entry per voxel of `dims`.
///
/// # Parameters
/// - `labels`, `dims`: fragments (0 = background); `counts`: output.
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rg_count_faces(labels: *const u32, dims: Dims3, counts: *mut u32) {
    let n = dims.z * dims.y * dims.x;
    let strides = dims.strides();
    grid_stride(n, |i| {
        let p = axis_positions(i, dims);
        // SAFETY: indices in bounds.
        unsafe {
            let l1 = *labels.add(i as usize);
            let mut c = 0u32;
            for d in 0..3 {
                if p[d] > 0 {
                    let l2 = *labels.add((i - strides[d]) as usize);
                    if l1 != l2 && l1 != 0 && l2 != 0 {
                        c += 1;
                    }
                }
            }
            *counts.add(i as usize) = c;
        }
    });
}

#[inline(always)]
unsafe fn emit(labels: *const u32, dims: Dims3, offsets: *const u64, keys: *mut u64, values: *mut u64, i: u64, load: impl Fn(u64) -> f32) {
    let p = axis_positions(i, dims);
    let strides = dims.strides();
    // SAFETY: indices in bounds; the offsets leave room for this voxel's faces.
    unsafe {
        let l1 = *labels.add(i as usize);
        let mut slot = *offsets.add(i as usize);
        for d in 0..3 {
            if p[d] > 0 {
                let l2 = *labels.add((i - strides[d]) as usize);
                if l1 != l2 && l1 != 0 && l2 != 0 {
                    let (u, v) = if l1 < l2 { (l1, l2) } else { (l2, l1) };
                    *keys.add(slot as usize) = ((u as u64) << 32) | v as u64;
                    *values.add(slot as usize) = affinity_to_fixed(load(d as u64));
                    slot += 1;
                }
            }
        }
    }
}

/// Writes each boundary face's key and fixed-point affinity (float32 input).
///
/// # Safety
/// `labels` holds one u32 per voxel of `dims`, `affs` `3 n` f32s, `offsets`
/// the exclusive scan of [`rg_count_faces`], `keys`/`values` one u64 per face.
///
/// # Parameters
/// - `labels`, `affs`, `dims`, `offsets`; outputs `keys`, `values`.
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rg_emit_faces_f32(
    labels: *const u32,
    affs: *const f32,
    dims: Dims3,
    offsets: *const u64,
    keys: *mut u64,
    values: *mut u64,
) {
    let n = dims.z * dims.y * dims.x;
    // SAFETY: as documented.
    grid_stride(n, |i| unsafe { emit(labels, dims, offsets, keys, values, i, |c| *affs.add((c * n + i) as usize)) });
}

/// As [`rg_emit_faces_f32`], for uint8 affinities (`k / 255`).
///
/// # Safety
/// As [`rg_emit_faces_f32`], with `3 n` u8s.
///
/// # Parameters
/// As [`rg_emit_faces_f32`].
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rg_emit_faces_u8(
    labels: *const u32,
    affs: *const u8,
    dims: Dims3,
    offsets: *const u64,
    keys: *mut u64,
    values: *mut u64,
) {
    let n = dims.z * dims.y * dims.x;
    // SAFETY: as documented.
    grid_stride(n, |i| unsafe {
        emit(labels, dims, offsets, keys, values, i, |c| *affs.add((c * n + i) as usize) as f32 / 255.0)
    });
}

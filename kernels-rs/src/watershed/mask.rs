//! Step 1: each voxel's edge mask, from float32 or uint8 affinities.

use super::coords;
use crate::device::*;
use gpu_waterz_abi::watershed::{face_affinities_with, steepest_mask, WsMaskF32Args, WsMaskU8Args};

kernel! {
    /// Edge masks from float32 affinities.
    ///
    /// # Safety
    /// `affs` holds `3 * n` f32s (`(3, z, y, x)`, C order) with
    /// `n = dims.z * dims.y * dims.x < 2^32`; `bits` holds `n` u8s.
    ///
    /// # Parameters
    /// - `affs`, `dims`: the affinity graph; `params`: waterz's thresholds;
    ///   `bits`: each voxel's mask.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration.
    pub unsafe extern "ptx-kernel" fn ws_mask_f32(
        affs: *const f32,
        dims: gpu_waterz_abi::Dims3,
        params: gpu_waterz_abi::watershed::WatershedParams,
        bits: *mut u8,
    ) as WsMaskF32Args {
        let n = dims.z * dims.y * dims.x;
        grid_stride(n, |i| {
            let (z, y, x) = coords(i, dims);
            // SAFETY: indices below `3 * n`.
            let faces = face_affinities_with(dims, z, y, x, params.aff_threshold_low, |c, j| unsafe {
                *affs.add((c * n + j) as usize)
            });
            let mask = steepest_mask(faces, params.aff_threshold_low, params.aff_threshold_high);
            // SAFETY: `i < n`.
            unsafe { *bits.add(i as usize) = mask };
        });
    }
}

kernel! {
    /// Edge masks from uint8 affinities (`k / 255`).
    ///
    /// # Safety
    /// As [`ws_mask_f32`], with `3 * n` u8s in `affs`.
    ///
    /// # Parameters
    /// As [`ws_mask_f32`].
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration.
    pub unsafe extern "ptx-kernel" fn ws_mask_u8(
        affs: *const u8,
        dims: gpu_waterz_abi::Dims3,
        params: gpu_waterz_abi::watershed::WatershedParams,
        bits: *mut u8,
    ) as WsMaskU8Args {
        let n = dims.z * dims.y * dims.x;
        grid_stride(n, |i| {
            let (z, y, x) = coords(i, dims);
            // SAFETY: indices below `3 * n`.
            let faces = face_affinities_with(dims, z, y, x, params.aff_threshold_low, |c, j| unsafe {
                *affs.add((c * n + j) as usize) as f32 / 255.0
            });
            let mask = steepest_mask(faces, params.aff_threshold_low, params.aff_threshold_high);
            // SAFETY: `i < n`.
            unsafe { *bits.add(i as usize) = mask };
        });
    }
}

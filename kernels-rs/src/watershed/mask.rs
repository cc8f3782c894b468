//! Step 1: each voxel's edge mask, from float32 or uint8 affinities.

use super::coords;
use crate::device::*;
use gpu_waterz_abi::watershed::{face_affinities_with, steepest_mask, WsCheckF32Args, WsMaskF32Args, WsMaskU8Args};

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

kernel! {
    /// Counts the float32 affinities that are NaN or infinite (and finds
    /// the first one) and the finite ones outside `[0, 1]`: the checks the
    /// host makes of host affinities, for affinities already on the device.
    ///
    /// # Safety
    /// `affs` holds `n_values` f32s; `counts` two zeroed u64s;
    /// `first_non_finite` one u64 set to `u64::MAX`. Launched with a block
    /// size that is a multiple of 32.
    ///
    /// # Parameters
    /// - `affs`, `n_values`: the values; `counts`: the two counts;
    ///   `first_non_finite`: the smallest index of a value not finite.
    ///
    /// # Thread mapping
    /// Warp-uniform grid-stride loop, one value per lane; one atomic per
    /// warp and count, only where a lane counts.
    pub unsafe extern "ptx-kernel" fn ws_check_f32(
        affs: *const f32,
        n_values: u64,
        counts: *mut u64,
        first_non_finite: *mut u64,
    ) as WsCheckF32Args {
        warp_uniform_stride(n_values, |i, valid| {
            // SAFETY: valid lanes read below `n_values`.
            let value = if valid { unsafe { *affs.add(i as usize) } } else { 0.0 };
            let non_finite = !value.is_finite();
            let outside = value.is_finite() && !(0.0..=1.0).contains(&value);
            // SAFETY: every lane of the warp takes part in every call of
            // the loop's body; `counts` holds two u64s.
            unsafe {
                warp_count(counts, non_finite);
                warp_count(counts.add(1), outside);
            }
            if non_finite {
                // SAFETY: `first_non_finite` is a valid u64.
                unsafe { atomic_min_u64(first_non_finite, i) };
            }
        });
    }
}

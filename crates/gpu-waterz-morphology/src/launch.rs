//! The distance transform's launches (`kernels-rs/src/distance.rs`): the
//! only `unsafe` code of this crate. The function checks the lengths its
//! kernel reads and writes.

use gpu_waterz_abi::distance::EdtPassArgs;
use gpu_waterz_abi::Dims3;
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu, Result};

/// The three passes of the distance transform of `mask` (one byte per
/// element of `dims`, 0: background) into `out` (distances), with
/// `spacing` per `(z, y, x)` axis; `scratch` holds the middle pass and
/// `background` (one word, zeroed by the caller) is set if any element is
/// background.
pub(crate) fn edt_passes(
    gpu: &Gpu,
    dims: Dims3,
    spacing: [f64; 3],
    mask: &DeviceBuffer<u8>,
    out: &mut DeviceBuffer<f64>,
    scratch: &mut DeviceBuffer<f64>,
    background: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "edt_pass";
    let n = dims.z * dims.y * dims.x;
    gpu.check_device(mask, "the mask")?;
    gpu.check_device(out, "the output")?;
    gpu.check_device(scratch, "the scratch")?;
    gpu.check_device(background, "the flag")?;
    check_len(K, "mask", mask, n)?;
    check_len(K, "output", out, n)?;
    check_len(K, "scratch", scratch, n)?;
    check_len(K, "background", background, 1)?;
    for axis in 0..3u32 {
        // Passes alternate: z into out, y into scratch, x into out.
        let (input, output) = match axis {
            0 => (std::ptr::null(), out.as_mut_ptr()),
            1 => (out.as_ptr(), scratch.as_mut_ptr()),
            _ => (scratch.as_ptr(), out.as_mut_ptr()),
        };
        let args = EdtPassArgs {
            dims,
            axis,
            first: (axis == 0) as u32,
            last: (axis == 2) as u32,
            sampling: spacing[axis as usize],
            mask: mask.as_ptr(),
            input,
            output,
            background: background.as_mut_ptr(),
        };
        // SAFETY: mask, out and scratch hold n elements and the flag one
        // (checked); each pass reads one array and writes another.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    Ok(())
}

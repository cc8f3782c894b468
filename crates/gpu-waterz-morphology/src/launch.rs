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

/// The integer passes (unit spacing) of the distance transform of `mask`
/// into `out`, through the squared distances in `first` and `second`; each
/// axis's lines in shared memory. Returns `false` without launching when a
/// line is too long for the shared memory (the caller takes the float64
/// passes then).
pub(crate) fn edt_line_passes(
    gpu: &Gpu,
    dims: Dims3,
    mask: &DeviceBuffer<u8>,
    out: &mut DeviceBuffer<f64>,
    first: &mut DeviceBuffer<u32>,
    second: &mut DeviceBuffer<u32>,
    background: &mut DeviceBuffer<u32>,
) -> Result<bool> {
    use gpu_waterz_abi::distance::{edt_lines_per_block, EdtLinesArgs, EDT_LINE_THREADS};
    const K: &str = "edt_lines";
    let n = dims.z * dims.y * dims.x;
    let extents = [dims.z, dims.y, dims.x];
    // Squared distances stay below 3 * 12288^2 < 2^32 for lines that fit.
    let per_axis: Vec<u32> = (0..3).map(|a| edt_lines_per_block(extents[a], a == 2)).collect();
    if per_axis.contains(&0) {
        return Ok(false);
    }
    for (what, len) in [("mask", mask.len()), ("output", out.len()), ("first", first.len()), ("second", second.len())] {
        if (len as u64) < n {
            return Err(gpu_waterz_runtime::RuntimeError::InvalidLaunch {
                kernel: K,
                reason: format!("{what} holds {len} elements, not {n}"),
            });
        }
    }
    gpu.check_device(mask, "the mask")?;
    gpu.check_device(out, "the output")?;
    gpu.check_device(first, "the first scratch")?;
    gpu.check_device(second, "the second scratch")?;
    gpu.check_device(background, "the flag")?;
    check_len(K, "background", background, 1)?;
    for axis in 0..3u32 {
        let a = axis as usize;
        let lines = n / extents[a].max(1);
        let per = per_axis[a];
        let groups = lines.div_ceil(per as u64);
        let config = gpu_waterz_runtime::LaunchConfig {
            blocks: groups.min(gpu.multiprocessor_count() as u64 * 16).max(1) as u32,
            threads: EDT_LINE_THREADS,
            shared_bytes: (per as u64 * extents[a] * 4) as u32,
        };
        // Passes: z mask -> first, y first -> second, x second -> out.
        let (input, output, distances) = match axis {
            0 => (std::ptr::null(), first.as_mut_ptr(), std::ptr::null_mut()),
            1 => (first.as_ptr(), second.as_mut_ptr(), std::ptr::null_mut()),
            _ => (second.as_ptr(), std::ptr::null_mut(), out.as_mut_ptr()),
        };
        let args = EdtLinesArgs {
            dims,
            axis,
            first: (axis == 0) as u32,
            last: (axis == 2) as u32,
            lines_per_block: per,
            mask: mask.as_ptr(),
            input,
            output,
            distances,
            background: background.as_mut_ptr(),
        };
        // SAFETY: every buffer holds n elements and the flag one (checked);
        // each pass reads one buffer and writes another; the shared memory
        // holds the group's lines (per * length words, at most
        // EDT_LINE_SHARED_BYTES).
        unsafe { gpu.launch(config, args) }?;
    }
    Ok(true)
}

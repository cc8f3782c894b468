//! The distance transform on the GPU: one pass per axis of a volume of up
//! to three axes (`kernels-rs/src/distance.rs`; the launches are in the
//! private `launch` module), exact with unit sampling as
//! [`crate::distance`] is.

use crate::distance::{check_sampling, no_background};
use crate::{check_input, invalid, Result};
use gpu_waterz_abi::Dims3;
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu};
use ndarray::{ArrayD, ArrayViewD};

/// The `(z, y, x)` extent of a shape of rank 1 to 3 (leading axes of 1).
fn dims_of(shape: &[usize]) -> Result<Dims3> {
    check_input(shape)?;
    let mut d = [1u64; 3];
    if shape.len() > 3 {
        return Err(invalid(format!("the GPU distance transform takes rank 1 to 3, not {}", shape.len())));
    }
    for (slot, &s) in d[3 - shape.len()..].iter_mut().zip(shape) {
        *slot = s as u64;
    }
    Ok(Dims3::new(d[0], d[1], d[2]))
}

/// The distances of `mask` (one byte per element of `shape`, C order; 0:
/// background) into `out` (one float64 per element).
pub fn distance_transform_edt(
    gpu: &Gpu,
    mask: &DeviceBuffer<u8>,
    shape: &[usize],
    sampling: Option<&[f64]>,
    out: &mut DeviceBuffer<f64>,
) -> Result<()> {
    let dims = dims_of(shape)?;
    let sampling = check_sampling(sampling, shape.len())?;
    let n = dims.z * dims.y * dims.x;
    gpu.check_device(mask, "the mask")?;
    gpu.check_device(out, "the output")?;
    check_len("edt_pass", "mask", mask, n)?;
    check_len("edt_pass", "output", out, n)?;
    if n == 0 {
        return Ok(());
    }
    // Spacing per (z, y, x) axis; padded axes have one element, any spacing.
    let mut spacing = [1.0f64; 3];
    spacing[3 - shape.len()..].copy_from_slice(&sampling);
    let mut background = gpu.zeros::<u32>(1)?;
    // Unit spacing: integer passes with each line in shared memory (exact);
    // else, or for lines too long to hold, the float64 passes.
    let mut done = false;
    if spacing == [1.0; 3] {
        let mut first = gpu.uninit::<u32>(n as usize)?;
        let mut second = gpu.uninit::<u32>(n as usize)?;
        done = crate::launch::edt_line_passes(gpu, dims, mask, out, &mut first, &mut second, &mut background)?;
    }
    if !done {
        let mut scratch = gpu.uninit::<f64>(n as usize)?;
        crate::launch::edt_passes(gpu, dims, spacing, mask, out, &mut scratch, &mut background)?;
    }
    if gpu.download_element(&background, 0)? == 0 {
        let host = no_background(shape, &sampling);
        gpu.upload_into(out, 0, host.as_slice().expect("a new array is contiguous"))?;
    }
    Ok(())
}

/// The same for a host array of rank 1 to 3; distances back on the host.
pub fn distance_transform_edt_host(
    gpu: &Gpu,
    input: ArrayViewD<'_, bool>,
    sampling: Option<&[f64]>,
) -> Result<ArrayD<f64>> {
    let shape = input.shape().to_vec();
    dims_of(&shape)?;
    if input.is_empty() {
        return Ok(ArrayD::zeros(input.raw_dim()));
    }
    let bytes: Vec<u8> = input.iter().map(|&v| v as u8).collect();
    let mask = gpu.upload(&bytes)?;
    let mut out = gpu.uninit::<f64>(bytes.len())?;
    distance_transform_edt(gpu, &mask, &shape, sampling, &mut out)?;
    let values = gpu.download(&out)?;
    Ok(ArrayD::from_shape_vec(shape, values).expect("one distance per element"))
}

//! The exact Euclidean distance transform: one pass per axis
//! (`gpu_waterz_abi::distance` has the search each element runs).

use crate::device::*;
use gpu_waterz_abi::distance::*;
use gpu_waterz_abi::Dims3;

kernel! {
    /// One pass of the distance transform along `axis`: each element's
    /// least `value(q) + (s (p - q))²` over its line.
    ///
    /// # Safety
    /// `mask` (first pass) or `input` (others) and `output` hold one value
    /// per element of `dims` and do not overlap; `background` is one word.
    ///
    /// # Parameters
    /// See [`EdtPassArgs`].
    ///
    /// # Thread mapping
    /// Grid-stride over the elements; adjacent threads take adjacent
    /// elements along x, so their reads along any axis are coalesced.
    pub unsafe extern "ptx-kernel" fn edt_pass(
        dims: Dims3,
        axis: u32,
        first: u32,
        last: u32,
        sampling: f64,
        mask: *const u8,
        input: *const f64,
        output: *mut f64,
        background: *mut u32,
    ) as EdtPassArgs {
        let n = dims.z * dims.y * dims.x;
        let (extent, stride) = match axis {
            0 => (dims.z, dims.y * dims.x),
            1 => (dims.y, dims.x),
            _ => (dims.x, 1),
        };
        grid_stride(n, |i| {
            let p = (i / stride) % extent;
            // SAFETY: every index read is i + k * stride with 0 <= p + k < extent: an element.
            let value = |k: i64| unsafe {
                let q = (i as i64 + k * stride as i64) as usize;
                if first != 0 {
                    if *mask.add(q) == 0 { 0.0 } else { f64::INFINITY }
                } else {
                    *input.add(q)
                }
            };
            let best = line_minimum(p, extent, sampling, value);
            // SAFETY: i is an element; background is one word.
            unsafe {
                if first != 0 && *mask.add(i as usize) == 0 {
                    *background = 1;
                }
                *output.add(i as usize) = if last != 0 { sqrt_f64(best) } else { best };
            }
        });
    }
}

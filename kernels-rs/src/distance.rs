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

/// Line `line` of the pass along `axis`: its first element and the stride
/// between its elements; also the number of lines and their length.
#[inline(always)]
fn line_geometry(dims: Dims3, axis: u32) -> (u64, u64, u64) {
    // (lines, length, stride)
    match axis {
        0 => (dims.y * dims.x, dims.z, dims.y * dims.x),
        1 => (dims.z * dims.x, dims.y, dims.x),
        _ => (dims.z * dims.y, dims.x, 1),
    }
}

/// The first element of line `line` of the pass along `axis`.
#[inline(always)]
fn line_base(dims: Dims3, axis: u32, line: u64) -> u64 {
    match axis {
        0 => line,
        1 => (line / dims.x) * dims.y * dims.x + line % dims.x,
        _ => line * dims.x,
    }
}

kernel! {
    /// One integer pass of the distance transform along `axis` (unit
    /// spacing, exact): each block holds `lines_per_block` neighbouring
    /// lines in shared memory (element `j` of line `l` at `j * L + l`, so
    /// that the loads of neighbouring lines are coalesced) and each element
    /// searches its line there (`line_minimum_u32`).
    ///
    /// # Safety
    /// `mask` (first pass) or `input` (others), and `output` (passes but
    /// the last) or `distances` (the last) hold one value per element of
    /// `dims`; `background` is one word; launched with
    /// [`EDT_LINE_THREADS`] threads and `lines_per_block * length * 4`
    /// bytes of shared memory, `lines_per_block >= 1`.
    ///
    /// # Parameters
    /// See [`EdtLinesArgs`].
    ///
    /// # Thread mapping
    /// Blocks stride over groups of `lines_per_block` lines; threads stride
    /// over the group's elements, line index fastest.
    pub unsafe extern "ptx-kernel" fn edt_lines(
        dims: Dims3,
        axis: u32,
        first: u32,
        last: u32,
        lines_per_block: u32,
        mask: *const u8,
        input: *const u32,
        output: *mut u32,
        distances: *mut f64,
        background: *mut u32,
    ) as EdtLinesArgs {
        let (lines, length, stride) = line_geometry(dims, axis);
        let per = lines_per_block.max(1) as u64;
        let groups = lines.div_ceil(per);
        let shared = dynamic_shared::<u32>();
        let cells = per * length;
        let tid = thread_idx_x() as u64;
        let threads = block_dim_x() as u64;
        let mut group = block_idx_x() as u64;
        while group < groups {
            let mut idx = tid;
            while idx < cells {
                let (l, j) = (idx % per, idx / per);
                let line = group * per + l;
                // SAFETY: element j of a line of the volume; idx < cells,
                // the shared words launched.
                unsafe {
                    let v = if line < lines {
                        let g = (line_base(dims, axis, line) + j * stride) as usize;
                        if first != 0 {
                            if *mask.add(g) == 0 {
                                *background = 1;
                                0
                            } else {
                                EDT_INFINITE
                            }
                        } else {
                            *input.add(g)
                        }
                    } else {
                        EDT_INFINITE
                    };
                    *shared.add((j * per + l) as usize) = v;
                }
                idx += threads;
            }
            // SAFETY: every thread reaches it (the group loop is block-uniform).
            unsafe { sync_threads() };
            let mut idx = tid;
            while idx < cells {
                let (l, p) = (idx % per, idx / per);
                let line = group * per + l;
                if line < lines {
                    // SAFETY: q < length, so q * per + l < cells.
                    let value = |q: u32| unsafe { *shared.add((q as u64 * per + l) as usize) };
                    let best = line_minimum_u32(p as u32, length as u32, value);
                    let g = (line_base(dims, axis, line) + p * stride) as usize;
                    // SAFETY: g is an element of the volume.
                    unsafe {
                        if last != 0 {
                            *distances.add(g) = sqrt_f64(best as f64);
                        } else {
                            *output.add(g) = best;
                        }
                    }
                }
                idx += threads;
            }
            // SAFETY: every thread reaches it; the next group reuses the shared memory.
            unsafe { sync_threads() };
            group += grid_dim_x() as u64;
        }
    }
}

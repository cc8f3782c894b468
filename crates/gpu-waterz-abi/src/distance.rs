//! The exact Euclidean distance transform's pass along one axis: the
//! argument struct of `edt_pass` and the per-element search it runs.

/// The least `value(q) + (s (p - q))²` over the positions `q` of a line
/// of `n` elements, for the element at `p`; `value(k)` is the value at
/// `p + k` (the caller keeps `0 <= p + k < n`). The search walks outward
/// from `p` and stops once `(s k)²` alone reaches the best value found, so
/// the result is the exact minimum of the float64 sums it compares.
#[inline(always)]
pub fn line_minimum(p: u64, n: u64, s: f64, value: impl Fn(i64) -> f64) -> f64 {
    let mut best = value(0);
    let mut k: u64 = 1;
    while k < n {
        let d = k as f64 * s;
        let d2 = d * d;
        if d2 >= best {
            break;
        }
        let below = k <= p;
        let above = p + k < n;
        if !below && !above {
            break;
        }
        if below {
            let v = value(-(k as i64)) + d2;
            if v < best {
                best = v;
            }
        }
        if above {
            let v = value(k as i64) + d2;
            if v < best {
                best = v;
            }
        }
        k += 1;
    }
    best
}

/// Arguments of `edt_pass`: one pass of the distance transform along
/// `axis` of a `(z, y, x)` volume.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EdtPassArgs {
    /// The volume.
    pub dims: crate::Dims3,
    /// The axis (0: z, 1: y, 2: x).
    pub axis: u32,
    /// The first pass reads `mask` (0: background, distance 0; else
    /// infinite) instead of `input`, and sets `background` if it sees a 0.
    pub first: u32,
    /// The last pass writes square roots.
    pub last: u32,
    /// The spacing along `axis`.
    pub sampling: f64,
    /// The mask (first pass).
    pub mask: *const u8,
    /// Squared distances so far (other passes).
    pub input: *const f64,
    /// Out: squared distances (or distances, last pass).
    pub output: *mut f64,
    /// Set to 1 by the first pass if any element is background.
    pub background: *mut u32,
}

/// Threads per block of `edt_lines`.
pub const EDT_LINE_THREADS: u32 = 256;
/// Bytes of shared memory `edt_lines` may take per block (the lines it
/// holds, 4 bytes per element).
pub const EDT_LINE_SHARED_BYTES: u32 = 48 * 1024;
/// An unreached squared distance in the integer passes.
pub const EDT_INFINITE: u32 = u32::MAX;

/// Lines per block of `edt_lines` for lines of `n` elements: one when the
/// lines are `contiguous` (rows), else the most, up to 32 and a power of
/// two, whose elements fit [`EDT_LINE_SHARED_BYTES`]; 0 when one line does
/// not fit.
pub const fn edt_lines_per_block(n: u64, contiguous: bool) -> u32 {
    let fit = EDT_LINE_SHARED_BYTES as u64 / (4 * if n == 0 { 1 } else { n });
    if fit == 0 {
        return 0;
    }
    if contiguous {
        return 1;
    }
    let mut lines = 32;
    while lines as u64 > fit {
        lines /= 2;
    }
    lines
}

/// The integer form of [`line_minimum`] for unit spacing: the least
/// `value(q) + (p - q)²` with [`EDT_INFINITE`] for no value; exact.
#[inline(always)]
pub fn line_minimum_u32(p: u32, n: u32, value: impl Fn(u32) -> u32) -> u32 {
    let mut best = value(p);
    let mut k: u32 = 1;
    while k < n {
        let d2 = k * k;
        if d2 >= best {
            break;
        }
        let below = k <= p;
        let above = p + k < n;
        if !below && !above {
            break;
        }
        if below {
            let v = value(p - k);
            if v != EDT_INFINITE && v + d2 < best {
                best = v + d2;
            }
        }
        if above {
            let v = value(p + k);
            if v != EDT_INFINITE && v + d2 < best {
                best = v + d2;
            }
        }
        k += 1;
    }
    best
}

/// Arguments of `edt_lines`: one integer pass (unit spacing) of the
/// distance transform along `axis`, a group of lines per block held in
/// shared memory.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EdtLinesArgs {
    /// The volume.
    pub dims: crate::Dims3,
    /// The axis (0: z, 1: y, 2: x).
    pub axis: u32,
    /// The first pass reads `mask` (0: background) and sets `background`.
    pub first: u32,
    /// The last pass writes float64 distances to `distances`.
    pub last: u32,
    /// Lines per block ([`edt_lines_per_block`]).
    pub lines_per_block: u32,
    /// The mask (first pass).
    pub mask: *const u8,
    /// Squared distances so far (other passes).
    pub input: *const u32,
    /// Out: squared distances (passes but the last).
    pub output: *mut u32,
    /// Out: distances (the last pass).
    pub distances: *mut f64,
    /// Set to 1 by the first pass if any element is background.
    pub background: *mut u32,
}

impl_kernel_args!(
    EdtPassArgs => EdtPass { dims, axis, first, last, sampling, mask, input, output, background },
    EdtLinesArgs => EdtLines { dims, axis, first, last, lines_per_block, mask, input, output, distances, background },
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_minimum_is_the_minimum() {
        let f = [f64::INFINITY, 4.0, f64::INFINITY, 0.0, f64::INFINITY, f64::INFINITY, 9.0];
        for p in 0..f.len() {
            let want = (0..f.len()).map(|q| f[q] + ((p as f64 - q as f64) * 1.5).powi(2)).fold(f64::INFINITY, f64::min);
            let got = line_minimum(p as u64, f.len() as u64, 1.5, |k| f[(p as i64 + k) as usize]);
            assert_eq!(got, want, "p = {p}");
        }
        assert_eq!(line_minimum(0, 3, 1.0, |_| f64::INFINITY), f64::INFINITY);
        let g = [EDT_INFINITE, 4, EDT_INFINITE, 0, EDT_INFINITE, EDT_INFINITE, 9];
        for p in 0..g.len() as u32 {
            let want = (0..g.len() as u32)
                .filter(|&q| g[q as usize] != EDT_INFINITE)
                .map(|q| g[q as usize] + (p as i64 - q as i64).pow(2) as u32)
                .min()
                .unwrap();
            assert_eq!(line_minimum_u32(p, g.len() as u32, |q| g[q as usize]), want, "p = {p}");
        }
        assert_eq!(edt_lines_per_block(512, true), 1);
        assert_eq!(edt_lines_per_block(512, false), 16);
        assert_eq!(edt_lines_per_block(100_000, false), 0);
    }
}

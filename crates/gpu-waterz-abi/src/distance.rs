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

impl_kernel_args!(EdtPassArgs => EdtPass { dims, axis, first, last, sampling, mask, input, output, background });

#[cfg(test)]
mod tests {
    use super::line_minimum;

    #[test]
    fn line_minimum_is_the_minimum() {
        let f = [f64::INFINITY, 4.0, f64::INFINITY, 0.0, f64::INFINITY, f64::INFINITY, 9.0];
        for p in 0..f.len() {
            let want = (0..f.len()).map(|q| f[q] + ((p as f64 - q as f64) * 1.5).powi(2)).fold(f64::INFINITY, f64::min);
            let got = line_minimum(p as u64, f.len() as u64, 1.5, |k| f[(p as i64 + k) as usize]);
            assert_eq!(got, want, "p = {p}");
        }
        assert_eq!(line_minimum(0, 3, 1.0, |_| f64::INFINITY), f64::INFINITY);
    }
}

//! The exact Euclidean distance transform, `scipy.ndimage.distance_transform_edt`'s
//! distances: for every non-zero element, the distance to the nearest zero
//! element, with `sampling` (the spacing along each axis).
//!
//! Separable (Saito and Toriwaki; Felzenszwalb and Huttenlocher's lower
//! envelope of parabolas along each axis, linear per line): the squared
//! distance along the first axis, then along each further axis the least
//! `g(q) + (s (p - q))²` over the line. With unit sampling every value is
//! an integer below 2^53 until the square root, so the distances are exact;
//! with other spacings they carry float64 rounding. An array without a zero
//! gets scipy's answer: the distance to the point `(-1, 0, ..., 0)`.

use crate::{check_input, invalid, Result};
use ndarray::{ArrayD, ArrayViewD, Axis, Dimension, Zip};
use rayon::prelude::*;

/// Checks `sampling` against a rank; one spacing per axis, each finite and
/// positive. `None` is unit spacing.
pub fn check_sampling(sampling: Option<&[f64]>, rank: usize) -> Result<Vec<f64>> {
    match sampling {
        None => Ok(vec![1.0; rank]),
        Some(s) if s.len() == 1 && rank != 1 => check_sampling(Some(&vec![s[0]; rank]), rank),
        Some(s) if s.len() != rank => {
            Err(invalid(format!("sampling has {} values for an array of rank {rank}", s.len())))
        }
        Some(s) => {
            if let Some(bad) = s.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
                return Err(invalid(format!("sampling values must be finite and positive, not {bad}")));
            }
            Ok(s.to_vec())
        }
    }
}

/// The distance transform of `input` (true: foreground, measured; false:
/// background, 0).
pub fn distance_transform_edt(input: ArrayViewD<'_, bool>, sampling: Option<&[f64]>) -> Result<ArrayD<f64>> {
    check_input(input.shape())?;
    let sampling = check_sampling(sampling, input.ndim())?;
    if input.is_empty() {
        return Ok(ArrayD::zeros(input.raw_dim()));
    }
    if input.iter().all(|&v| v) {
        return Ok(no_background(input.shape(), &sampling));
    }
    let mut squared: ArrayD<f64> =
        Zip::from(&input).par_map_collect(|&foreground| if foreground { f64::INFINITY } else { 0.0 });
    for (axis, &s) in sampling.iter().enumerate() {
        let weight = s * s;
        squared.lanes_mut(Axis(axis)).into_iter().par_bridge().for_each_init(Envelope::default, |env, mut lane| {
            let values: Vec<f64> = lane.iter().copied().collect();
            env.transform(&values, weight);
            for (out, v) in lane.iter_mut().zip(&env.out) {
                *out = *v;
            }
        });
    }
    squared.par_mapv_inplace(f64::sqrt);
    Ok(squared)
}

/// scipy's distances when no element is background: to `(-1, 0, ..., 0)`.
pub fn no_background(shape: &[usize], sampling: &[f64]) -> ArrayD<f64> {
    ArrayD::from_shape_fn(shape, |index| {
        let mut sum = 0.0f64;
        for (axis, (&i, &s)) in index.slice().iter().zip(sampling).enumerate() {
            let d = (i as f64 + if axis == 0 { 1.0 } else { 0.0 }) * s;
            sum += d * d;
        }
        sum.sqrt()
    })
}

/// The lower envelope of the parabolas `f(q) + w (p - q)²` of one line,
/// with its buffers (reused from line to line).
#[derive(Default)]
struct Envelope {
    /// The parabolas' apexes on the envelope, left to right.
    apex: Vec<usize>,
    /// Where each of them starts to be the lowest.
    start: Vec<f64>,
    /// The result: the least value at each position.
    out: Vec<f64>,
}

impl Envelope {
    fn transform(&mut self, f: &[f64], w: f64) {
        let n = f.len();
        self.apex.clear();
        self.start.clear();
        self.out.clear();
        for q in 0..n {
            if f[q].is_infinite() {
                continue;
            }
            let mut from = f64::NEG_INFINITY;
            while let Some(&v) = self.apex.last() {
                // Where the parabola of q gets below that of v.
                let (qf, vf) = (q as f64, v as f64);
                let s = ((f[q] + w * qf * qf) - (f[v] + w * vf * vf)) / (2.0 * w * (qf - vf));
                if s <= *self.start.last().expect("one start per apex") {
                    self.apex.pop();
                    self.start.pop();
                } else {
                    from = s;
                    break;
                }
            }
            self.apex.push(q);
            self.start.push(from);
        }
        if self.apex.is_empty() {
            self.out.resize(n, f64::INFINITY);
            return;
        }
        let mut j = 0;
        for p in 0..n {
            while j + 1 < self.apex.len() && self.start[j + 1] < p as f64 {
                j += 1;
            }
            let d = p as f64 - self.apex[j] as f64;
            self.out.push(f[self.apex[j]] + w * d * d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;
    use rand::{Rng, SeedableRng};

    /// The distance by brute force: every background element.
    fn brute_force(input: &ArrayD<bool>, sampling: &[f64]) -> ArrayD<f64> {
        let background: Vec<Vec<usize>> =
            input.indexed_iter().filter(|(_, &v)| !v).map(|(i, _)| i.slice().to_vec()).collect();
        ArrayD::from_shape_fn(input.raw_dim(), |i| {
            background
                .iter()
                .map(|b| {
                    b.iter()
                        .zip(i.slice())
                        .zip(sampling)
                        .map(|((&b, &p), &s)| ((b as f64 - p as f64) * s).powi(2))
                        .sum::<f64>()
                })
                .fold(f64::INFINITY, f64::min)
                .sqrt()
        })
    }

    #[test]
    fn equals_brute_force_on_random_arrays() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for case in 0..200 {
            let rank = 1 + case % 3;
            let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..12)).collect();
            let density = [0.02, 0.2, 0.6][case % 3];
            let input = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen::<f64>() > density);
            if input.iter().all(|&v| v) {
                continue;
            }
            let unit = vec![1.0; rank];
            let got = distance_transform_edt(input.view(), None).unwrap();
            assert_eq!(got, brute_force(&input, &unit), "case {case}: unit sampling is exact");
            let sampling: Vec<f64> = (0..rank).map(|_| rng.gen_range(0.3..3.0)).collect();
            let got = distance_transform_edt(input.view(), Some(&sampling)).unwrap();
            let want = brute_force(&input, &sampling);
            for (g, w) in got.iter().zip(want.iter()) {
                assert!((g - w).abs() <= 1e-12 * w.max(1.0), "case {case}: {g} vs {w}");
            }
        }
    }

    #[test]
    fn scipy_special_cases() {
        let ones = ArrayD::from_elem(IxDyn(&[3, 4]), true);
        let d = distance_transform_edt(ones.view(), None).unwrap();
        assert_eq!(d[[0, 0]], 1.0);
        assert_eq!(d[[2, 3]], 18f64.sqrt());
        let line = ndarray::arr2(&[[true, true, false, true]]).into_dyn();
        let d = distance_transform_edt(line.view(), Some(&[2.0, 3.0])).unwrap();
        assert_eq!(d.as_slice().unwrap(), &[6.0, 3.0, 0.0, 3.0]);
        assert!(distance_transform_edt(line.view(), Some(&[1.0, -1.0])).is_err());
        assert!(distance_transform_edt(line.view(), Some(&[1.0, 1.0, 1.0])).is_err());
        let empty = ArrayD::from_elem(IxDyn(&[0, 3]), true);
        assert_eq!(distance_transform_edt(empty.view(), None).unwrap().shape(), &[0, 3]);
    }
}

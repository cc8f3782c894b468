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
use ndarray::{ArrayD, ArrayViewD, ArrayViewMut1, Axis, Dimension, Zip};
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
    Ok(match Start::new(input.view(), sampling)? {
        Start::Empty => ArrayD::zeros(input.raw_dim()),
        Start::NoBackground(sampling) => no_background(input.shape(), &sampling),
        Start::Squared(mut squared, sampling) => {
            separable_passes(&mut squared, &sampling, None);
            squared.mapv_into(f64::sqrt)
        }
    })
}

/// How a transform starts: nothing to do, scipy's answer without
/// background, or the squared distances along no axis yet (0 at the
/// background, infinite elsewhere), with the checked spacing.
enum Start {
    Empty,
    NoBackground(Vec<f64>),
    Squared(ArrayD<f64>, Vec<f64>),
}

impl Start {
    fn new(input: ArrayViewD<'_, bool>, sampling: Option<&[f64]>) -> Result<Self> {
        check_input(input.shape())?;
        let sampling = check_sampling(sampling, input.ndim())?;
        if input.is_empty() {
            return Ok(Start::Empty);
        }
        if input.iter().all(|&v| v) {
            return Ok(Start::NoBackground(sampling));
        }
        let squared = Zip::from(&input).par_map_collect(|&foreground| if foreground { f64::INFINITY } else { 0.0 });
        Ok(Start::Squared(squared, sampling))
    }
}

/// The passes of the separable transform: along each axis in turn, every
/// line's lower envelope; with `features`, each element's flat index of its
/// nearest background element follows the parabola it takes its value from.
fn separable_passes(squared: &mut ArrayD<f64>, sampling: &[f64], mut features: Option<&mut ArrayD<usize>>) {
    for (axis, &s) in sampling.iter().enumerate() {
        let weight = s * s;
        match features.as_deref_mut() {
            None => squared
                .lanes_mut(Axis(axis))
                .into_iter()
                .par_bridge()
                .for_each_init(Envelope::default, |env, mut lane| env.apply(&mut lane, None, weight)),
            Some(nearest) => Zip::from(squared.lanes_mut(Axis(axis)))
                .and(nearest.lanes_mut(Axis(axis)))
                .par_for_each(|mut lane, mut feature| Envelope::default().apply(&mut lane, Some(&mut feature), weight)),
        }
    }
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
    /// The apex each position takes its value from (empty when no value is
    /// finite).
    chosen: Vec<usize>,
}

impl Envelope {
    /// Replaces `lane` by its transform; `features`, when given, by the
    /// features of the apexes each position takes its value from.
    fn apply(&mut self, lane: &mut ArrayViewMut1<'_, f64>, features: Option<&mut ArrayViewMut1<'_, usize>>, w: f64) {
        let values: Vec<f64> = lane.iter().copied().collect();
        self.transform(&values, w);
        for (out, v) in lane.iter_mut().zip(&self.out) {
            *out = *v;
        }
        if let Some(features) = features {
            let from: Vec<usize> = features.iter().copied().collect();
            for (feature, &q) in features.iter_mut().zip(&self.chosen) {
                *feature = from[q];
            }
        }
    }

    fn transform(&mut self, f: &[f64], w: f64) {
        let n = f.len();
        self.apex.clear();
        self.start.clear();
        self.out.clear();
        self.chosen.clear();
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
            self.chosen.push(self.apex[j]);
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

    /// The separable and chamfer transforms against the brute-force one,
    /// distances and the distance to the element each index names.
    #[test]
    fn brute_force_is_the_oracle_of_the_others() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        for case in 0..60 {
            let rank = 1 + case % 3;
            let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..10)).collect();
            let input = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen::<f64>() > [0.05, 0.3][case % 2]);
            if input.iter().all(|&v| v) {
                continue;
            }
            let (Distances::F64(bf), _) = distance_transform_bf(input.view(), Metric::Euclidean, None).unwrap() else {
                panic!("Euclidean distances are float64")
            };
            let (edt, indices) = distance_transform_edt_with_indices(input.view(), None).unwrap();
            assert_eq!(edt, bf, "case {case}");
            // Each index names a background element at the distance.
            for (flat, (&d, p)) in edt.iter().zip(input.indexed_iter()).enumerate() {
                let mut squared = 0.0;
                for a in 0..rank {
                    let q = indices.as_slice().unwrap()[a * input.len() + flat];
                    squared += ((q - p.0[a] as i32) as f64).powi(2);
                }
                assert_eq!(squared.sqrt(), d, "case {case}: element {flat}");
            }
            for metric in [Metric::Taxicab, Metric::Chessboard] {
                let (Distances::U32(bf), _) = distance_transform_bf(input.view(), metric, None).unwrap() else {
                    panic!("{metric:?} distances are uint32")
                };
                let (cdt, _) = distance_transform_cdt(input.view(), metric).unwrap();
                assert_eq!(cdt.mapv(|v| v as u32), bf, "case {case}, {metric:?}");
            }
        }
    }

    /// The separable chamfer transform against the breadth-first search:
    /// equal distances (and -1 without background), indices that name a
    /// background element at the distance (an unreached element's own),
    /// on ranks 1 to 4.
    #[test]
    fn chamfer_passes_equal_the_search() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
        for case in 0..120 {
            let rank = 1 + case % 4;
            let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..9)).collect();
            let density = [0.0, 0.01, 0.1, 0.5][case % 4];
            let input = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen::<f64>() >= density);
            for metric in [Metric::Taxicab, Metric::Chessboard] {
                let (want, want_indices) = cdt_by_search(input.view(), metric).unwrap();
                let (got, indices) = distance_transform_cdt(input.view(), metric).unwrap();
                assert_eq!(got, want, "case {case}, {metric:?}");
                assert_eq!(distance_transform_cdt_distances(input.view(), metric).unwrap(), want);
                let n = input.len();
                let flat = indices.as_slice().unwrap();
                for (i, ((p, _), &d)) in input.indexed_iter().zip(got.iter()).enumerate() {
                    let steps: Vec<u32> = (0..rank).map(|a| flat[a * n + i].abs_diff(p[a] as i32)).collect();
                    let reached = match metric {
                        Metric::Chessboard => steps.iter().copied().max().unwrap(),
                        _ => steps.iter().sum(),
                    };
                    if d < 0 {
                        assert_eq!(indices, want_indices, "case {case}: unreached elements name themselves");
                    } else {
                        assert_eq!(reached, d as u32, "case {case}, {metric:?}, element {i}");
                    }
                }
            }
        }
        let line = ndarray::arr1(&[true, true]).into_dyn();
        assert!(distance_transform_cdt(line.view(), Metric::Euclidean).is_err());
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

/// The metric of [`distance_transform_bf`] and [`distance_transform_cdt`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// The Euclidean distance (with sampling).
    Euclidean,
    /// The sum of absolute coordinate differences (city block, Manhattan).
    Taxicab,
    /// The largest absolute coordinate difference.
    Chessboard,
}

impl std::str::FromStr for Metric {
    type Err = crate::MorphologyError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "euclidean" => Ok(Metric::Euclidean),
            "taxicab" | "cityblock" | "manhattan" => Ok(Metric::Taxicab),
            "chessboard" => Ok(Metric::Chessboard),
            other => Err(invalid(format!("distance metric not supported: {other:?}"))),
        }
    }
}

/// Distances as scipy returns them: float64 (Euclidean) or uint32.
#[derive(Clone, Debug, PartialEq)]
pub enum Distances {
    /// Euclidean distances.
    F64(ArrayD<f64>),
    /// Taxicab or chessboard distances.
    U32(ArrayD<u32>),
}

/// The coordinates of flat index `i` of `shape` (C order).
fn coordinates(mut i: usize, shape: &[usize], out: &mut [i32]) {
    for a in (0..shape.len()).rev() {
        out[a] = (i % shape[a]) as i32;
        i /= shape[a];
    }
}

/// The feature transform as scipy returns it: for every element, the
/// coordinates of its nearest background element, one array per axis
/// (`(rank,) + shape`, int32), from flat indices.
fn index_arrays(nearest: &[usize], shape: &[usize]) -> ArrayD<i32> {
    let rank = shape.len();
    let n = nearest.len();
    let mut out = vec![0i32; rank * n];
    let mut coords = vec![0i32; rank];
    for (i, &f) in nearest.iter().enumerate() {
        coordinates(f, shape, &mut coords);
        for a in 0..rank {
            out[a * n + i] = coords[a];
        }
    }
    let mut full = vec![rank];
    full.extend_from_slice(shape);
    ArrayD::from_shape_vec(full, out).expect("rank values per element")
}

/// The brute-force distance transform (`scipy.ndimage.distance_transform_bf`),
/// the exactness oracle of the others: for every foreground element, the
/// least distance to every background element in `metric` (`sampling` is
/// used by the Euclidean metric only, as in scipy), and the coordinates of
/// one nearest background element. Without background: scipy's values
/// (`sqrt(f64::MAX)` or `u32::MAX`, indices 0). Quadratic: for small arrays.
pub fn distance_transform_bf(
    input: ArrayViewD<'_, bool>,
    metric: Metric,
    sampling: Option<&[f64]>,
) -> Result<(Distances, ArrayD<i32>)> {
    check_input(input.shape())?;
    let sampling = check_sampling(sampling, input.ndim())?;
    let shape = input.shape().to_vec();
    let rank = shape.len();
    let flat: Vec<bool> = input.iter().copied().collect();
    let background: Vec<usize> = (0..flat.len()).filter(|&i| !flat[i]).collect();
    let coords = |i: usize| {
        let mut c = vec![0i32; rank];
        coordinates(i, &shape, &mut c);
        c
    };
    let background_coords: Vec<Vec<i32>> = background.iter().map(|&b| coords(b)).collect();
    let best: Vec<(f64, usize)> = (0..flat.len())
        .into_par_iter()
        .map(|i| {
            if !flat[i] {
                return (0.0, i);
            }
            let p = coords(i);
            let mut best = (f64::INFINITY, usize::MAX);
            for (b, q) in background.iter().zip(&background_coords) {
                let d = match metric {
                    Metric::Euclidean => {
                        p.iter().zip(q).zip(&sampling).map(|((&x, &y), &s)| ((x - y) as f64 * s).powi(2)).sum::<f64>()
                    }
                    Metric::Taxicab => p.iter().zip(q).map(|(&x, &y)| (x - y).unsigned_abs() as f64).sum(),
                    Metric::Chessboard => {
                        p.iter().zip(q).map(|(&x, &y)| (x - y).unsigned_abs()).max().unwrap_or(0) as f64
                    }
                };
                if d < best.0 {
                    best = (d, *b);
                }
            }
            best
        })
        .collect();
    // Without background scipy leaves index 0 (coordinates all 0).
    let nearest: Vec<usize> = best.iter().map(|b| if b.1 == usize::MAX { 0 } else { b.1 }).collect();
    let distances = match metric {
        Metric::Euclidean => Distances::F64(
            ArrayD::from_shape_vec(shape.clone(), best.iter().map(|b| b.0.min(f64::MAX).sqrt()).collect())
                .expect("one distance per element"),
        ),
        _ => Distances::U32(
            ArrayD::from_shape_vec(shape.clone(), best.iter().map(|b| b.0.min(u32::MAX as f64) as u32).collect())
                .expect("one distance per element"),
        ),
    };
    Ok((distances, index_arrays(&nearest, &shape)))
}

/// The chamfer distance transform (`scipy.ndimage.distance_transform_cdt`)
/// for the taxicab and chessboard metrics, which it computes exactly:
/// int32 distances, -1 where no background is reached (an array without
/// background), and the coordinates of one nearest background element (an
/// unreached element's own, as scipy's). Separable, as the Euclidean
/// transform: along each axis in turn, each line's least combined cost
/// (`gpu_waterz_abi::distance::chamfer_line`, a sweep each way, linear in
/// the line's length; the GPU's passes run it too), lines in parallel.
pub fn distance_transform_cdt(input: ArrayViewD<'_, bool>, metric: Metric) -> Result<(ArrayD<i32>, ArrayD<i32>)> {
    let (costs, features) = chamfer_passes(input.view(), metric, true)?;
    let shape = input.shape().to_vec();
    let nearest = features.expect("asked for");
    // Unreached elements keep their own coordinates, as scipy's do.
    let nearest: Vec<usize> = nearest.iter().enumerate().map(|(i, &f)| if f == usize::MAX { i } else { f }).collect();
    Ok((costs, index_arrays(&nearest, &shape)))
}

/// [`distance_transform_cdt`]'s distances alone.
pub fn distance_transform_cdt_distances(input: ArrayViewD<'_, bool>, metric: Metric) -> Result<ArrayD<i32>> {
    Ok(chamfer_passes(input, metric, false)?.0)
}

/// The separable passes of the chamfer transform: int32 distances (-1 for
/// none) and, with `features`, each element's flat index of a nearest
/// background element (`usize::MAX` for none).
fn chamfer_passes(
    input: ArrayViewD<'_, bool>,
    metric: Metric,
    features: bool,
) -> Result<(ArrayD<i32>, Option<Vec<usize>>)> {
    use gpu_waterz_abi::distance::{chamfer_line, EDT_INFINITE, METRIC_CHESSBOARD, METRIC_TAXICAB};
    check_input(input.shape())?;
    let code = match metric {
        Metric::Taxicab => METRIC_TAXICAB,
        Metric::Chessboard => METRIC_CHESSBOARD,
        Metric::Euclidean => return Err(invalid("the chamfer transform takes the taxicab or chessboard metric")),
    };
    // Costs stay below the sum of the extents, which fits u32 below
    // EDT_INFINITE for any array that fits memory.
    if input.shape().iter().map(|&e| e as u128).sum::<u128>() >= EDT_INFINITE as u128 {
        return Err(invalid("the chamfer transform takes arrays whose extents sum to less than 2^32 - 1"));
    }
    let mut costs = Zip::from(&input).par_map_collect(|&foreground| if foreground { EDT_INFINITE } else { 0 });
    let mut nearest = features.then(|| {
        let flat: Vec<bool> = input.iter().copied().collect();
        let nearest: Vec<usize> = flat.iter().enumerate().map(|(i, &f)| if f { usize::MAX } else { i }).collect();
        ArrayD::from_shape_vec(input.shape(), nearest).expect("one index per element")
    });
    // One line's pass: the least combined cost over the line for each
    // element, and the feature of the position that gives it; the
    // scratch is each worker's, reused from line to line.
    let pass = |scratch: &mut ChamferScratch,
                lane: &mut ArrayViewMut1<'_, u32>,
                feature: Option<&mut ArrayViewMut1<'_, usize>>| {
        let ChamferScratch { values, stack, forward, before } = scratch;
        values.clear();
        values.extend(lane.iter().copied());
        if values.iter().all(|&v| v == EDT_INFINITE) {
            return;
        }
        let n = values.len();
        stack.resize(n, 0);
        forward.resize(n, (0, 0));
        let mut feature = feature;
        if let Some(f) = feature.as_deref() {
            before.clear();
            before.extend(f.iter().copied());
        }
        let (stack, forward) = (std::cell::RefCell::new(stack), std::cell::RefCell::new(forward));
        chamfer_line(
            code,
            n as u32,
            |q| values[q as usize],
            |k| stack.borrow()[k as usize],
            |k, x| stack.borrow_mut()[k as usize] = x,
            |p, cost, q| forward.borrow_mut()[p as usize] = (cost, q),
            |p| forward.borrow()[p as usize],
            |p, best, at| {
                lane[p as usize] = best;
                if let Some(f) = feature.as_deref_mut() {
                    f[p as usize] = before[at as usize];
                }
            },
        );
    };
    for axis in 0..input.ndim() {
        match nearest.as_mut() {
            None => Zip::from(costs.lanes_mut(Axis(axis)))
                .into_par_iter()
                .for_each_init(ChamferScratch::default, |scratch, (mut lane,)| pass(scratch, &mut lane, None)),
            Some(nearest) => Zip::from(costs.lanes_mut(Axis(axis)))
                .and(nearest.lanes_mut(Axis(axis)))
                .into_par_iter()
                .for_each_init(ChamferScratch::default, |scratch, (mut lane, mut feature)| {
                    pass(scratch, &mut lane, Some(&mut feature))
                }),
        }
    }
    // EDT_INFINITE's bits are scipy's -1 for none.
    let distances = costs.mapv(|c| c as i32);
    Ok((distances, nearest.map(|n| n.iter().copied().collect())))
}

/// One worker's scratch for the chamfer passes' lines: the line's costs,
/// the chessboard sweep's stack, the forward sweep's costs and positions,
/// and the line's features before the pass.
#[derive(Default)]
struct ChamferScratch {
    values: Vec<u32>,
    stack: Vec<u32>,
    forward: Vec<(u32, u32)>,
    before: Vec<usize>,
}

/// The chamfer distance transform by a breadth-first search from every
/// background element over the face (taxicab) or full (chessboard)
/// neighbourhood: the simple reference of [`distance_transform_cdt`].
#[cfg(test)]
pub(crate) fn cdt_by_search(input: ArrayViewD<'_, bool>, metric: Metric) -> Result<(ArrayD<i32>, ArrayD<i32>)> {
    check_input(input.shape())?;
    if metric == Metric::Euclidean {
        return Err(invalid("the chamfer transform takes the taxicab or chessboard metric"));
    }
    let shape = input.shape().to_vec();
    let rank = shape.len();
    let n = input.len();
    let strides: Vec<usize> = (0..rank).map(|a| shape[a + 1..].iter().product()).collect();
    // Neighbour offsets: per axis -1/0/+1, at most one non-zero for taxicab.
    let offsets: Vec<Vec<i64>> = (0..3usize.pow(rank as u32))
        .map(|code| (0..rank).map(|a| (code / 3usize.pow((rank - 1 - a) as u32)) as i64 % 3 - 1).collect::<Vec<i64>>())
        .filter(|o: &Vec<i64>| {
            let nonzero = o.iter().filter(|&&v| v != 0).count();
            nonzero >= 1 && (metric == Metric::Chessboard || nonzero == 1)
        })
        .collect();
    let flat: Vec<bool> = input.iter().copied().collect();
    let mut distance = vec![-1i32; n];
    let mut nearest = vec![usize::MAX; n];
    let mut frontier: Vec<usize> = (0..n).filter(|&i| !flat[i]).collect();
    for &i in &frontier {
        distance[i] = 0;
        nearest[i] = i;
    }
    let mut coords = vec![0i32; rank];
    let mut level = 0;
    while !frontier.is_empty() {
        level += 1;
        let mut next = Vec::new();
        for &i in &frontier {
            coordinates(i, &shape, &mut coords);
            for o in &offsets {
                let inside = (0..rank).all(|a| {
                    let c = coords[a] as i64 + o[a];
                    c >= 0 && c < shape[a] as i64
                });
                if !inside {
                    continue;
                }
                let q = (0..rank).map(|a| ((coords[a] as i64 + o[a]) as usize) * strides[a]).sum::<usize>();
                if distance[q] < 0 {
                    distance[q] = level;
                    nearest[q] = nearest[i];
                    next.push(q);
                }
            }
        }
        frontier = next;
    }
    // Unreached elements keep their own coordinates, as scipy's do.
    let nearest: Vec<usize> = nearest.iter().enumerate().map(|(i, &f)| if f == usize::MAX { i } else { f }).collect();
    let distances = ArrayD::from_shape_vec(shape.clone(), distance).expect("one distance per element");
    Ok((distances, index_arrays(&nearest, &shape)))
}

/// [`distance_transform_edt`] with the feature transform: the distances and
/// the coordinates of one nearest background element of every element
/// (`(rank,) + shape`, int32). Without background: scipy's distances, and
/// its indices `(-1, 0, ..., 0)`.
pub fn distance_transform_edt_with_indices(
    input: ArrayViewD<'_, bool>,
    sampling: Option<&[f64]>,
) -> Result<(ArrayD<f64>, ArrayD<i32>)> {
    let shape = input.shape().to_vec();
    // scipy's indices without background: the point (-1, 0, ..., 0).
    let nowhere = || {
        let mut full = vec![shape.len()];
        full.extend_from_slice(&shape);
        ArrayD::from_shape_fn(full, |i| if i[0] == 0 { -1 } else { 0 })
    };
    Ok(match Start::new(input.view(), sampling)? {
        Start::Empty => (ArrayD::zeros(input.raw_dim()), nowhere()),
        Start::NoBackground(sampling) => (no_background(&shape, &sampling), nowhere()),
        Start::Squared(mut squared, sampling) => {
            let mut nearest =
                ArrayD::from_shape_vec(shape.clone(), (0..input.len()).collect()).expect("one index per element");
            separable_passes(&mut squared, &sampling, Some(&mut nearest));
            let nearest: Vec<usize> = nearest.iter().copied().collect();
            (squared.mapv_into(f64::sqrt), index_arrays(&nearest, &shape))
        }
    })
}

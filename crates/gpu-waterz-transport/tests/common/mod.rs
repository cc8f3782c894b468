//! What the transport test binaries share: random problems and the
//! closeness of costs.

use ndarray::Array2;
use rand::{Rng, SeedableRng};

/// `n` random histogram pairs of `d` bins (each summing to 1; a fraction
/// `zeros` of the bins empty) and a squared-distance cost on a line.
pub fn problem(seed: u64, n: usize, d: usize, zeros: f64) -> (Array2<f64>, Array2<f64>, Array2<f64>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut histograms = || {
        let mut h =
            Array2::from_shape_fn((n, d), |_| if rng.gen::<f64>() < zeros { 0.0 } else { rng.gen_range(0.05..1.0) });
        for mut row in h.rows_mut() {
            if row.sum() == 0.0 {
                row[0] = 1.0;
            }
            let s = row.sum();
            row.mapv_inplace(|x| x / s);
        }
        h
    };
    let (a, b) = (histograms(), histograms());
    let m = Array2::from_shape_fn((d, d), |(i, j)| {
        let x = (i as f64 - j as f64) / d.max(2) as f64;
        x * x
    });
    (a, b, m)
}

/// Relative closeness of two costs.
pub fn close(x: f64, y: f64, rel: f64) -> bool {
    (x - y).abs() <= rel * y.abs().max(1e-3)
}

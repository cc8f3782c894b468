//! What the transport test binaries share: random problems and the
//! closeness of costs.

#![allow(dead_code)] // Each test binary uses its own part.

use gpu_waterz_runtime::Gpu;
use gpu_waterz_transport::{gpu, solve_cpu, Config, Domain};
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

/// Solves random problems of each `(n, d)` in both domains for 60
/// iterations on the GPU, in float64 and float32, and checks every cost
/// against the CPU reference in float64 (1e-10 and 1e-4 relative).
pub fn check_sizes_against_the_reference(g: &Gpu, sizes: &[(usize, usize)]) {
    for &(n, d) in sizes {
        let (a, b, m) = problem(n as u64 * 13 + d as u64, n, d, 0.1);
        for domain in [Domain::Scaling, Domain::Log] {
            let config = Config::new(0.05).domain(domain).num_iter(60).tol(0.0);
            let want = solve_cpu(a.view(), b.view(), m.view(), &config).unwrap();
            let got = gpu::solve_host(g, a.view(), b.view(), m.view(), &config).unwrap();
            let (a32, b32, m32) = (a.mapv(|x| x as f32), b.mapv(|x| x as f32), m.mapv(|x| x as f32));
            let got32 = gpu::solve_host(g, a32.view(), b32.view(), m32.view(), &config).unwrap();
            for t in 0..n {
                assert!(
                    close(got.cost[t], want.cost[t], 1e-10),
                    "f64 {domain:?} n {n} d {d}: {} vs {}",
                    got.cost[t],
                    want.cost[t]
                );
                assert!(
                    close(got32.cost[t] as f64, want.cost[t], 1e-4),
                    "f32 {domain:?} n {n} d {d}: {} vs {}",
                    got32.cost[t],
                    want.cost[t]
                );
            }
        }
    }
}

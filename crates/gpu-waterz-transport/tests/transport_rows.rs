//! The row kernels on the pair counts they serve only when asked to (up to
//! 16 pairs; by default one): a test binary of its own, so that the limit
//! is set before the process first reads it.

use gpu_waterz_transport::{gpu, solve_cpu, Config, Domain};
use ndarray::Array2;

fn close(x: f64, y: f64, rel: f64) -> bool {
    (x - y).abs() <= rel * y.abs().max(1e-3)
}

/// Histograms with some zero bins and a squared-distance cost.
fn problem(n: usize, d: usize) -> (Array2<f64>, Array2<f64>, Array2<f64>) {
    let value = |t: usize, i: usize, salt: usize| {
        let h = (t * 7919 + i * 104_729 + salt * 1299) % 1000;
        if h < 100 {
            0.0
        } else {
            0.05 + h as f64 / 1000.0
        }
    };
    let normalise = |mut x: Array2<f64>| {
        for mut row in x.rows_mut() {
            let s: f64 = row.sum();
            row /= s;
        }
        x
    };
    let a = normalise(Array2::from_shape_fn((n, d), |(t, i)| value(t, i, 1)));
    let b = normalise(Array2::from_shape_fn((n, d), |(t, i)| value(t, i, 2)));
    let m = Array2::from_shape_fn((d, d), |(i, j)| ((i as f64 - j as f64) / d as f64).powi(2));
    (a, b, m)
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn the_row_kernels_equal_the_reference_for_up_to_sixteen_pairs() {
    // SAFETY of the environment: this binary's only test sets it before
    // anything reads it.
    std::env::set_var(gpu::ROWS_MAX_PAIRS_ENV, "16");
    let g = gpu_waterz_runtime::testing::gpu();
    for (n, d) in [(2, 300), (9, 129), (16, 200)] {
        let (a, b, m) = problem(n, d);
        for domain in [Domain::Scaling, Domain::Log] {
            let config = Config::new(0.05).domain(domain).num_iter(60).tol(0.0);
            let want = solve_cpu(a.view(), b.view(), m.view(), &config).unwrap();
            let got = gpu::solve_host(&g, a.view(), b.view(), m.view(), &config).unwrap();
            let (a32, b32, m32) = (a.mapv(|x| x as f32), b.mapv(|x| x as f32), m.mapv(|x| x as f32));
            let got32 = gpu::solve_host(&g, a32.view(), b32.view(), m32.view(), &config).unwrap();
            for t in 0..n {
                assert!(
                    close(got.cost[t], want.cost[t], 1e-10),
                    "f64 {domain:?} n {n}: {} vs {}",
                    got.cost[t],
                    want.cost[t]
                );
                assert!(close(got32.cost[t] as f64, want.cost[t], 1e-4), "f32 {domain:?} n {n}");
            }
        }
    }
}

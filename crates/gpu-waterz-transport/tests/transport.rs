//! The Sinkhorn solver: the CPU reference against the definition (plan
//! marginals, cost formula, both domains), bad input refused; the GPU
//! against the CPU reference (float32 and float64, both domains, many
//! shapes, zero bins, small regularisation, tolerances). GPU tests are
//! ignored without `--include-ignored`.

mod common;

use common::{close, problem};
use gpu_waterz_transport::{check_problem, gpu, solve_cpu, Config, CudaGraphs, Domain, ErrorKind, Solution};
use ndarray::{Array2, ArrayView2};

/// The plan of pair `t` from the potentials.
fn plan(s: &Solution<f64>, m: ArrayView2<'_, f64>, reg: f64, t: usize) -> Array2<f64> {
    let d = m.nrows();
    Array2::from_shape_fn((d, d), |(i, j)| {
        let (f, g) = (s.f[(t, i)], s.g[(t, j)]);
        if f == f64::NEG_INFINITY || g == f64::NEG_INFINITY {
            0.0
        } else {
            ((f + g - m[(i, j)]) / reg).exp()
        }
    })
}

#[test]
fn the_reference_converges_to_the_entropic_plan_in_both_domains() {
    let (a, b, m) = problem(1, 3, 12, 0.2);
    let reg = 0.05;
    let mut costs = Vec::new();
    for domain in [Domain::Scaling, Domain::Log] {
        let config = Config::new(reg).domain(domain).num_iter(5000).tol(1e-13);
        let s = solve_cpu(a.view(), b.view(), m.view(), &config).unwrap();
        assert!(s.iterations < 5000, "{domain:?} converged ({} iterations)", s.iterations);
        assert!(s.marginal_error.unwrap() < 1e-13);
        for t in 0..3 {
            let p = plan(&s, m.view(), reg, t);
            for i in 0..12 {
                assert!((p.row(i).sum() - a[(t, i)]).abs() < 1e-12, "{domain:?}: row marginal");
                assert!((p.column(i).sum() - b[(t, i)]).abs() < 1e-12, "{domain:?}: column marginal");
                // A zero bin has a -inf potential, never NaN.
                assert!(!s.f[(t, i)].is_nan() && !s.g[(t, i)].is_nan());
                assert_eq!(a[(t, i)] == 0.0, s.f[(t, i)] == f64::NEG_INFINITY);
            }
            let direct: f64 =
                p.iter().zip(m.iter()).filter(|(x, _)| **x > 0.0).map(|(x, c)| x * c + reg * x * x.ln()).sum();
            assert!(
                (s.cost[t] - direct).abs() < 1e-12 * direct.abs().max(1.0),
                "{domain:?}: cost {} vs {direct}",
                s.cost[t]
            );
        }
        costs.push(s.cost);
    }
    for (x, y) in costs[0].iter().zip(&costs[1]) {
        assert!((x - y).abs() < 1e-11, "the domains agree: {x} vs {y}");
    }
}

#[test]
fn bad_input_is_refused() {
    let (a, b, m) = problem(2, 2, 4, 0.0);
    let config = Config::new(0.1);
    let kind = |r: gpu_waterz_transport::Result<()>| r.unwrap_err().kind();
    assert_eq!(
        kind(check_problem(a.view(), b.slice(ndarray::s![.., ..3]), m.view(), &config)),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(check_problem(a.view(), b.view(), m.slice(ndarray::s![..3, ..]), &config)),
        ErrorKind::InvalidInput
    );
    let mut negative = a.clone();
    negative[(0, 0)] = -0.1;
    assert_eq!(kind(check_problem(negative.view(), b.view(), m.view(), &config)), ErrorKind::InvalidInput);
    let mut nan = m.clone();
    nan[(1, 1)] = f64::NAN;
    assert_eq!(kind(check_problem(a.view(), b.view(), nan.view(), &config)), ErrorKind::InvalidInput);
    for bad in [Config::new(0.0), Config::new(f64::NAN), Config::new(0.1).tol(-1.0), Config::new(0.1).check_every(0)] {
        assert_eq!(kind(check_problem(a.view(), b.view(), m.view(), &bad)), ErrorKind::InvalidInput);
    }
    let empty = Array2::<f64>::zeros((0, 4));
    assert!(solve_cpu(empty.view(), empty.view(), m.view(), &config).is_err());
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn the_gpu_equals_the_reference_in_float64_and_float32() {
    let g = gpu_waterz_runtime::testing::gpu();
    for &(n, d, zeros) in &[
        (1usize, 1usize, 0.0),
        (1, 2, 0.0),
        (3, 7, 0.3),
        (9, 129, 0.1),
        (17, 300, 0.0),
        (2, 1000, 0.05),
        (70, 200, 0.1),
        (130, 67, 0.0),
    ] {
        let (a, b, m) = problem(n as u64 * 31 + d as u64, n, d, zeros);
        for domain in [Domain::Scaling, Domain::Log] {
            let config = Config::new(0.05).domain(domain).num_iter(60).tol(0.0);
            let want = solve_cpu(a.view(), b.view(), m.view(), &config).unwrap();
            let got = gpu::solve_host(&g, a.view(), b.view(), m.view(), &config).unwrap();
            assert_eq!(got.iterations, want.iterations);
            for t in 0..n {
                assert!(
                    close(got.cost[t], want.cost[t], 1e-10),
                    "f64 {domain:?} n {n} d {d}: {} vs {}",
                    got.cost[t],
                    want.cost[t]
                );
            }
            for (x, y) in got.f.iter().zip(want.f.iter()).chain(got.g.iter().zip(want.g.iter())) {
                assert!(x == y || (x - y).abs() < 1e-9 * y.abs().max(1.0), "f64 {domain:?} potentials {x} vs {y}");
            }
            let (a32, b32, m32) = (a.mapv(|x| x as f32), b.mapv(|x| x as f32), m.mapv(|x| x as f32));
            let want32 = solve_cpu(a32.view(), b32.view(), m32.view(), &config).unwrap();
            let got32 = gpu::solve_host(&g, a32.view(), b32.view(), m32.view(), &config).unwrap();
            for t in 0..n {
                assert!(
                    close(got32.cost[t] as f64, want32.cost[t] as f64, 1e-4)
                        && close(got32.cost[t] as f64, want.cost[t], 1e-4),
                    "f32 {domain:?} n {n} d {d}: {} vs {} (f64 {})",
                    got32.cost[t],
                    want32.cost[t],
                    want.cost[t]
                );
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn tolerances_zero_bins_and_small_regularisation_on_the_gpu() {
    let g = gpu_waterz_runtime::testing::gpu();
    let (a, b, m) = problem(5, 6, 64, 0.25);
    // The same stopping iteration as the reference (float64).
    for domain in [Domain::Scaling, Domain::Log] {
        let config = Config::new(0.1).domain(domain).num_iter(2000).tol(1e-10);
        let want = solve_cpu(a.view(), b.view(), m.view(), &config).unwrap();
        let got = gpu::solve_host(&g, a.view(), b.view(), m.view(), &config).unwrap();
        assert_eq!(got.iterations, want.iterations, "{domain:?}");
        assert!(got.marginal_error.unwrap() < 1e-10);
        for t in 0..6 {
            assert!(close(got.cost[t], want.cost[t], 1e-10));
            for i in 0..64 {
                assert_eq!(a[(t, i)] == 0.0, got.f[(t, i)] == f64::NEG_INFINITY, "zero bins pin -inf");
                assert!(!got.f[(t, i)].is_nan() && !got.g[(t, i)].is_nan());
            }
        }
    }
    // A regularisation far below the costs: the log domain stays finite.
    let config = Config::new(1e-4).domain(Domain::Log).num_iter(300).tol(0.0);
    let (a32, b32, m32) = (a.mapv(|x| x as f32), b.mapv(|x| x as f32), m.mapv(|x| x as f32));
    let got = gpu::solve_host(&g, a32.view(), b32.view(), m32.view(), &config).unwrap();
    assert!(got.cost.iter().all(|c| c.is_finite()), "{:?}", got.cost);
    assert!(got.f.iter().all(|x| !x.is_nan()) && got.g.iter().all(|x| !x.is_nan()));
}

/// CUDA graphs replay the same kernels on the same buffers: the same bits
/// as launching every kernel, with and without checks between the runs.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn graphs_equal_plain_launches() {
    let g = gpu_waterz_runtime::testing::gpu();
    // Few pairs (the row kernels) and many (the tile kernels).
    for (n, d) in [(5, 300), (70, 130)] {
        let (a, b, m) = problem(11, n, d, 0.1);
        let (a32, b32, m32) = (a.mapv(|x| x as f32), b.mapv(|x| x as f32), m.mapv(|x| x as f32));
        for domain in [Domain::Scaling, Domain::Log] {
            for tol in [0.0, 1e-30] {
                let config = Config::new(0.05).domain(domain).num_iter(61).tol(tol);
                let plain =
                    gpu::solve_host(&g, a.view(), b.view(), m.view(), &config.clone().cuda_graphs(CudaGraphs::Off))
                        .unwrap();
                let graphs =
                    gpu::solve_host(&g, a.view(), b.view(), m.view(), &config.clone().cuda_graphs(CudaGraphs::On))
                        .unwrap();
                assert_eq!(plain.iterations, 61);
                assert_eq!(graphs.iterations, 61);
                assert_eq!(plain.cost, graphs.cost, "{domain:?} tol {tol}");
                assert_eq!(plain.f, graphs.f);
                assert_eq!(plain.g, graphs.g);
                assert_eq!(plain.marginal_error, graphs.marginal_error);
                let plain = gpu::solve_host(
                    &g,
                    a32.view(),
                    b32.view(),
                    m32.view(),
                    &config.clone().cuda_graphs(CudaGraphs::Off),
                )
                .unwrap();
                let graphs = gpu::solve_host(
                    &g,
                    a32.view(),
                    b32.view(),
                    m32.view(),
                    &config.clone().cuda_graphs(CudaGraphs::On),
                )
                .unwrap();
                assert_eq!(plain.cost, graphs.cost, "f32 {domain:?} tol {tol}");
                assert_eq!(plain.f, graphs.f);
            }
        }
    }
}

/// Everything on the device: the same costs and potentials as
/// `solve_into`, potentials centred on their finite values' mean (zero
/// bins stay -inf), and bad values refused by the device-side check.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn solving_on_the_device_checks_values_and_centres_potentials() {
    let g = gpu_waterz_runtime::testing::gpu();
    let (n, d) = (20, 90);
    let (a, b, m) = problem(3, n, d, 0.2);
    let config = Config::new(0.05).domain(Domain::Log).num_iter(40).tol(0.0);
    let want = gpu::solve_host(&g, a.view(), b.view(), m.view(), &config).unwrap();
    let up = |x: &Array2<f64>| g.upload(x.as_standard_layout().as_slice().unwrap()).unwrap();
    let (da, db, dm) = (up(&a), up(&b), up(&m));
    let mut bufs: Vec<_> = (0..4).map(|_| g.uninit::<f64>(n * d).unwrap()).collect();
    let mut cost = g.uninit::<f64>(n).unwrap();
    let (fg, centred) = bufs.split_at_mut(2);
    let (f, gg) = fg.split_at_mut(1);
    let (fc, gc) = centred.split_at_mut(1);
    let outputs =
        gpu::DeviceOutputs { f: &mut f[0], g: &mut gg[0], cost: &mut cost, centred: Some((&mut fc[0], &mut gc[0])) };
    let run = gpu::solve_on_device(&g, &da, &db, &dm, (n, d), &config, outputs).unwrap();
    assert_eq!(run.iterations, 40);
    let cost = g.download(&cost).unwrap();
    for (got, want) in cost.iter().zip(&want.cost) {
        assert!(close(*got, *want, 1e-12), "{got} vs {want}");
    }
    let (f, fc) = (g.download(&f[0]).unwrap(), g.download(&fc[0]).unwrap());
    for t in 0..n {
        let row = &f[t * d..(t + 1) * d];
        let finite: Vec<f64> = row.iter().copied().filter(|x| x.is_finite()).collect();
        let mean = finite.iter().sum::<f64>() / finite.len() as f64;
        for i in 0..d {
            let (x, y) = (fc[t * d + i], row[i] - mean);
            assert!(x == y || (x - y).abs() < 1e-9, "centred {x} vs {y}");
        }
    }
    // Bad values: a negative histogram value, a NaN cost.
    let mut bad_a = a.clone();
    bad_a[(3, 7)] = -1e-3;
    let mut bad_m = m.clone();
    bad_m[(5, 5)] = f64::NAN;
    for (x, y, what) in [(&bad_a, &m, "a must"), (&a, &bad_m, "M must")] {
        let (dx, dy) = (up(x), up(y));
        let mut bufs: Vec<_> = (0..2).map(|_| g.uninit::<f64>(n * d).unwrap()).collect();
        let mut cost = g.uninit::<f64>(n).unwrap();
        let (f, gg) = bufs.split_at_mut(1);
        let outputs = gpu::DeviceOutputs { f: &mut f[0], g: &mut gg[0], cost: &mut cost, centred: None };
        let e = gpu::solve_on_device(&g, &dx, &db, &dy, (n, d), &config, outputs).unwrap_err();
        assert!(e.to_string().contains(what), "{e}");
    }
}

/// A regularisation small enough that the log-domain tile's chunk bounds
/// often lie far above the largest term (so that outputs are taken again
/// exactly): the costs still equal the reference's, with many pairs (the
/// tile kernels) and few (the row kernels).
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn small_regularisation_keeps_the_log_domain_exact() {
    let g = gpu_waterz_runtime::testing::gpu();
    for (n, d) in [(70, 100), (5, 100)] {
        let (a, b, m) = problem(17, n, d, 0.1);
        let config = Config::new(2e-3).domain(Domain::Log).num_iter(50).tol(0.0);
        let want = solve_cpu(a.view(), b.view(), m.view(), &config).unwrap();
        let got = gpu::solve_host(&g, a.view(), b.view(), m.view(), &config).unwrap();
        let (a32, b32, m32) = (a.mapv(|x| x as f32), b.mapv(|x| x as f32), m.mapv(|x| x as f32));
        let got32 = gpu::solve_host(&g, a32.view(), b32.view(), m32.view(), &config).unwrap();
        for t in 0..n {
            assert!(close(got.cost[t], want.cost[t], 1e-9), "f64 n {n}: {} vs {}", got.cost[t], want.cost[t]);
            assert!(
                close(got32.cost[t] as f64, want.cost[t], 1e-4),
                "f32 n {n}: {} vs {}",
                got32.cost[t],
                want.cost[t]
            );
        }
    }
}

//! The row kernels on the pair counts they serve only when asked to (up to
//! 16 pairs; by default one): a test binary of its own, so that the limit
//! is set before the process first reads it.

mod common;

use common::{close, problem};
use gpu_waterz_transport::{gpu, solve_cpu, Config, Domain};

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn the_row_kernels_equal_the_reference_for_up_to_sixteen_pairs() {
    // SAFETY of the environment: this binary's only test sets it before
    // anything reads it.
    std::env::set_var(gpu::ROWS_MAX_PAIRS_ENV, "16");
    let g = gpu_waterz_runtime::testing::gpu();
    for (n, d) in [(2, 300), (9, 129), (16, 200)] {
        let (a, b, m) = problem(n as u64 * 13 + d as u64, n, d, 0.1);
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

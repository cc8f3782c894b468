//! Single launches and tensor-core half-steps in one solve: with the
//! persistent kernels serving up to 16 pairs and the tensor-core kernels
//! from two pairs (limits set only here), a solve with marginal checks runs
//! the iterations between checks in single launches and each checked
//! half-step on the tensor cores, which read the first scalings' planes
//! split again after every single launch. A test binary of its own, so that
//! the limits are set before the process first reads them.

mod common;

use common::{close, problem};
use gpu_waterz_transport::{gpu, solve_cpu, Config};

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn single_launches_and_tensor_core_half_steps_take_turns() {
    // SAFETY of the environment: this binary's only test sets it before
    // anything reads it.
    std::env::set_var(gpu::PERSISTENT_MAX_PAIRS_ENV, "16");
    std::env::set_var(gpu::RESIDENT_MAX_PAIRS_ENV, "0");
    std::env::set_var(gpu::WIDE_MIN_PAIRS_ENV, "2");
    let g = gpu_waterz_runtime::testing::gpu();
    for (n, d) in [(3, 300), (9, 129), (16, 1000)] {
        let (a, b, m) = problem(n as u64 * 31 + d as u64, n, d, 0.1);
        // A tolerance no solve reaches: every tenth iteration is checked,
        // all 60 run.
        let config = Config::new(0.05).num_iter(60).tol(1e-300);
        let want = solve_cpu(a.view(), b.view(), m.view(), &config).unwrap();
        let (a32, b32, m32) = (a.mapv(|x| x as f32), b.mapv(|x| x as f32), m.mapv(|x| x as f32));
        let got = gpu::solve_host(&g, a32.view(), b32.view(), m32.view(), &config).unwrap();
        assert_eq!(got.iterations, 60, "n {n} d {d}");
        for t in 0..n {
            assert!(close(got.cost[t] as f64, want.cost[t], 1e-4), "n {n} d {d}: {} vs {}", got.cost[t], want.cost[t]);
        }
    }
}

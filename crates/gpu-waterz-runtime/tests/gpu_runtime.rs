//! The runtime against a real GPU, and its clean failure without one.

use gpu_waterz_runtime::{ops, testing::gpu_or_skip, Gpu, RuntimeError};
use rand::{Rng, SeedableRng};

#[test]
fn gpu_new_returns_a_clear_error_without_a_gpu() {
    match Gpu::new(0) {
        Ok(gpu) => {
            // On a GPU machine there is no error to check; say so visibly.
            eprintln!("GPU present ({}): the no-GPU error path is checked on CPU-only machines", gpu.name().unwrap());
            let e = Gpu::new(1 << 20).unwrap_err();
            assert!(matches!(e, RuntimeError::NoDevice { .. }), "{e}");
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                matches!(e, RuntimeError::NoDriver { .. } | RuntimeError::NoDevice { .. }),
                "unexpected error kind: {msg}"
            );
            assert!(msg.contains("CUDA"), "the error should name CUDA: {msg}");
        }
    }
}

#[test]
fn sum_u32_matches_the_cpu_on_random_input() {
    let Some(gpu) = gpu_or_skip("sum_u32_matches_the_cpu_on_random_input") else {
        return;
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for &n in &[0usize, 1, 255, 256, 257, 1000, 65_537, 1 << 20, 16_777_259] {
        let host: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        let expected: u64 = host.iter().map(|&v| v as u64).sum();
        let buffer = gpu.upload(&host).unwrap();
        let got = ops::sum_u32(&gpu, &buffer).unwrap();
        assert_eq!(got, expected, "n = {n}");
    }
}

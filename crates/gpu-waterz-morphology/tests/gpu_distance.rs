//! The GPU distance transform against the CPU one (itself checked against
//! brute force): equal distances with unit sampling, within float64
//! rounding with other spacings; scipy's answer without background.

use gpu_waterz_morphology::{distance, gpu};
use gpu_waterz_runtime::testing::gpu as test_gpu;
use ndarray::{ArrayD, IxDyn};
use rand::{Rng, SeedableRng};

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_distances_equal_the_cpu() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
    for case in 0..60 {
        let rank = 1 + case % 3;
        let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..70)).collect();
        let density = [0.001, 0.05, 0.5][case % 3];
        let input = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen::<f64>() > density);
        let want = distance::distance_transform_edt(input.view(), None).unwrap();
        let got = gpu::distance_transform_edt_host(&g, input.view(), None).unwrap();
        assert_eq!(got, want, "case {case}, shape {shape:?}");
        let sampling: Vec<f64> = (0..rank).map(|_| rng.gen_range(0.3..3.0)).collect();
        let want = distance::distance_transform_edt(input.view(), Some(&sampling)).unwrap();
        let got = gpu::distance_transform_edt_host(&g, input.view(), Some(&sampling)).unwrap();
        for (a, b) in got.iter().zip(want.iter()) {
            assert!((a - b).abs() <= 1e-12 * b.max(1.0), "case {case}: {a} vs {b}");
        }
    }
    // Lines longer than the shared memory holds take the float64 passes;
    // shapes with one long axis and others short, the integer ones.
    for shape in [vec![13_000], vec![2, 3, 12_288], vec![700, 3, 2]] {
        let input = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen::<f64>() > 0.001);
        let want = distance::distance_transform_edt(input.view(), None).unwrap();
        let got = gpu::distance_transform_edt_host(&g, input.view(), None).unwrap();
        assert_eq!(got, want, "shape {shape:?}");
    }
    let ones = ArrayD::from_elem(IxDyn(&[4, 5, 6]), true);
    let got = gpu::distance_transform_edt_host(&g, ones.view(), None).unwrap();
    assert_eq!(got, distance::distance_transform_edt(ones.view(), None).unwrap());
    let four = ArrayD::from_elem(IxDyn(&[2, 2, 2, 2]), true);
    assert!(gpu::distance_transform_edt_host(&g, four.view(), None).is_err());
}

//! The GPU distance transform against the CPU one (itself checked against
//! brute force): equal distances with unit sampling, within float64
//! rounding with other spacings; scipy's answer without background.

use gpu_waterz_morphology::{distance, gpu};
use gpu_waterz_runtime::testing::gpu as test_gpu;
use ndarray::{ArrayD, Dimension, IxDyn};
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

/// Checks GPU indices against the input: each names a background element
/// whose distance (with `sampling`) is the element's distance.
fn check_indices(input: &ArrayD<bool>, sampling: &[f64], distances: &ArrayD<f64>, indices: &ArrayD<i32>, what: &str) {
    let rank = input.ndim();
    assert_eq!(indices.shape()[0], rank, "{what}: one plane per axis");
    assert_eq!(&indices.shape()[1..], input.shape(), "{what}: the input's shape");
    for (p, &d) in distances.indexed_iter() {
        let p = p.as_array_view().to_vec();
        let p = p.as_slice();
        let q: Vec<usize> = (0..rank)
            .map(|a| {
                let mut at = vec![a];
                at.extend_from_slice(p);
                let c = indices[IxDyn(&at)];
                assert!(c >= 0 && (c as usize) < input.shape()[a], "{what}: index {c} on axis {a} at {p:?}");
                c as usize
            })
            .collect();
        assert!(!input[IxDyn(&q)], "{what}: {p:?} points to {q:?}, which is not background");
        let to_it: f64 = (0..rank).map(|a| ((p[a] as f64 - q[a] as f64) * sampling[a]).powi(2)).sum::<f64>().sqrt();
        assert!((to_it - d).abs() <= 1e-12 * d.max(1.0), "{what}: {p:?} points to {q:?} at {to_it}, not {d}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_indices_point_to_a_nearest_background_element() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
    for case in 0..45 {
        let rank = 1 + case % 3;
        let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..60)).collect();
        let density = [0.002, 0.05, 0.5][case / 3 % 3];
        let input = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen::<f64>() > density);
        if input.iter().all(|&v| v) {
            continue;
        }
        let unit = vec![1.0; rank];
        let sampling: Vec<f64> = (0..rank).map(|_| rng.gen_range(0.3..3.0)).collect();
        for s in [&unit, &sampling] {
            let (want, _) = distance::distance_transform_edt_with_indices(input.view(), Some(s)).unwrap();
            let (got, indices) = gpu::distance_transform_edt_with_indices_host(&g, input.view(), Some(s)).unwrap();
            for (a, b) in got.iter().zip(want.iter()) {
                assert!((a - b).abs() <= 1e-12 * b.max(1.0), "case {case}, sampling {s:?}: {a} vs {b}");
            }
            check_indices(&input, s, &got, &indices, &format!("case {case}, shape {shape:?}, sampling {s:?}"));
        }
    }
    // Long rows with few background elements (the row pass's words), lines
    // too long for the shared memory (the float64 passes).
    for shape in [vec![5, 3000], vec![13_000], vec![2, 3, 12_289], vec![3, 40, 70]] {
        let input = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen::<f64>() > 0.0015);
        let unit = vec![1.0; shape.len()];
        let (got, indices) = gpu::distance_transform_edt_with_indices_host(&g, input.view(), None).unwrap();
        assert_eq!(got, distance::distance_transform_edt(input.view(), None).unwrap(), "shape {shape:?}");
        check_indices(&input, &unit, &got, &indices, &format!("shape {shape:?}"));
    }
    // No background: scipy's distances and its point (-1, 0, ..., 0).
    let ones = ArrayD::from_elem(IxDyn(&[4, 5, 6]), true);
    let (got, indices) = gpu::distance_transform_edt_with_indices_host(&g, ones.view(), None).unwrap();
    let (want, want_indices) = distance::distance_transform_edt_with_indices(ones.view(), None).unwrap();
    assert_eq!((got, indices), (want, want_indices));
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_mask_bytes_other_than_zero_are_measured() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(31);
    let shape = [9usize, 33, 70];
    let bytes: Vec<u8> =
        (0..shape.iter().product::<usize>()).map(|_| if rng.gen_bool(0.1) { 0 } else { rng.gen() }).collect();
    let input = ArrayD::from_shape_vec(IxDyn(&shape), bytes.iter().map(|&b| b != 0).collect()).unwrap();
    let mask = g.upload(&bytes).unwrap();
    let mut out = g.uninit::<f64>(bytes.len()).unwrap();
    gpu::distance_transform_edt(&g, &mask, &shape, None, &mut out).unwrap();
    let want = distance::distance_transform_edt(input.view(), None).unwrap();
    assert_eq!(g.download(&out).unwrap(), want.iter().copied().collect::<Vec<_>>());
}

//! The GPU distance transforms against the CPU ones (themselves checked
//! against brute force): equal distances with unit sampling, within
//! float64 rounding with other spacings; scipy's answer without
//! background; batches equal to their arrays one by one; the chamfer
//! transform equal, its indices naming a nearest background element.

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
        let got = gpu::distance_transform_edt_host(&g, input.view(), 0, None).unwrap();
        assert_eq!(got, want, "case {case}, shape {shape:?}");
        let sampling: Vec<f64> = (0..rank).map(|_| rng.gen_range(0.3..3.0)).collect();
        let want = distance::distance_transform_edt(input.view(), Some(&sampling)).unwrap();
        let got = gpu::distance_transform_edt_host(&g, input.view(), 0, Some(&sampling)).unwrap();
        for (a, b) in got.iter().zip(want.iter()) {
            assert!((a - b).abs() <= 1e-12 * b.max(1.0), "case {case}: {a} vs {b}");
        }
    }
    // Lines longer than the shared memory holds take the float64 passes;
    // shapes with one long axis and others short, the integer ones.
    for shape in [vec![13_000], vec![2, 3, 12_288], vec![700, 3, 2]] {
        let input = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen::<f64>() > 0.001);
        let want = distance::distance_transform_edt(input.view(), None).unwrap();
        let got = gpu::distance_transform_edt_host(&g, input.view(), 0, None).unwrap();
        assert_eq!(got, want, "shape {shape:?}");
    }
    let ones = ArrayD::from_elem(IxDyn(&[4, 5, 6]), true);
    let got = gpu::distance_transform_edt_host(&g, ones.view(), 0, None).unwrap();
    assert_eq!(got, distance::distance_transform_edt(ones.view(), None).unwrap());
    let four = ArrayD::from_elem(IxDyn(&[2, 2, 2, 2]), true);
    assert!(gpu::distance_transform_edt_host(&g, four.view(), 0, None).is_err());
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
            let (got, indices) = gpu::distance_transform_edt_with_indices_host(&g, input.view(), 0, Some(s)).unwrap();
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
        let (got, indices) = gpu::distance_transform_edt_with_indices_host(&g, input.view(), 0, None).unwrap();
        assert_eq!(got, distance::distance_transform_edt(input.view(), None).unwrap(), "shape {shape:?}");
        check_indices(&input, &unit, &got, &indices, &format!("shape {shape:?}"));
    }
    // No background: scipy's distances and its point (-1, 0, ..., 0).
    let ones = ArrayD::from_elem(IxDyn(&[4, 5, 6]), true);
    let (got, indices) = gpu::distance_transform_edt_with_indices_host(&g, ones.view(), 0, None).unwrap();
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
    gpu::distance_transform_edt(&g, &mask, gpu::Batch { items: 1, shape: &shape }, None, &mut out).unwrap();
    let want = distance::distance_transform_edt(input.view(), None).unwrap();
    assert_eq!(g.download(&out).unwrap(), want.iter().copied().collect::<Vec<_>>());
}

/// A batch of `items` arrays of `spatial` shape, some without background
/// and some all background, the rest of random density.
fn random_batch(rng: &mut rand_chacha::ChaCha8Rng, batch: &[usize], spatial: &[usize]) -> ArrayD<bool> {
    let mut shape = batch.to_vec();
    shape.extend_from_slice(spatial);
    let volume: usize = spatial.iter().product();
    let items: usize = batch.iter().product();
    let densities: Vec<f64> = (0..items).map(|i| [0.05, 0.003, 0.0, 0.5, 1.0][i % 5]).collect();
    let values: Vec<bool> = (0..items * volume).map(|i| rng.gen::<f64>() >= densities[i / volume]).collect();
    ArrayD::from_shape_vec(IxDyn(&shape), values).unwrap()
}

/// The arrays of a batch (the first `batch_dims` axes) one by one.
fn items_of(input: &ArrayD<bool>, batch_dims: usize) -> Vec<ArrayD<bool>> {
    let spatial = input.shape()[batch_dims..].to_vec();
    let mut flat = vec![input.shape()[..batch_dims].iter().product::<usize>()];
    flat.extend_from_slice(&spatial);
    let flat = input.to_shape(IxDyn(&flat)).unwrap().to_owned();
    flat.outer_iter().map(|a| a.to_owned()).collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_batches_equal_their_arrays_one_by_one() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(37);
    // Rows of a multiple of 32 go several to a warp (runs ending mid-volume
    // and a last run short of rows): 64 (8 a run), 32 (16), 96 (5), 256 (2);
    // rows of a multiple of 16 are loaded 16 bytes a lane (48: a row ends
    // mid-word), of 4 (40) 4 bytes, others a byte.
    let cases: [(&[usize], &[usize]); 12] = [
        (&[3], &[5, 48]),
        (&[9], &[5, 7, 64]),
        (&[3], &[11, 32]),
        (&[2, 3], &[3, 5, 96]),
        (&[7], &[256]),
        (&[5], &[17]),
        (&[3, 2], &[9, 40]),
        (&[7], &[6, 11, 13]),
        (&[2, 5], &[4, 9, 33]),
        (&[6], &[3, 2, 13_000]),
        (&[4], &[12_289, 2]),
        (&[1], &[20, 20, 20]),
    ];
    for (batch, spatial) in cases {
        let input = random_batch(&mut rng, batch, spatial);
        let batch_dims = batch.len();
        let items = items_of(&input, batch_dims);
        let rank = spatial.len();
        let sampling: Vec<f64> = (0..rank).map(|_| rng.gen_range(0.3..3.0)).collect();
        for s in [None, Some(sampling.as_slice())] {
            let got = gpu::distance_transform_edt_host(&g, input.view(), batch_dims, s).unwrap();
            let (got_d, got_i) =
                gpu::distance_transform_edt_with_indices_host(&g, input.view(), batch_dims, s).unwrap();
            assert_eq!(got, got_d, "{batch:?} {spatial:?}: with and without indices");
            let mut index_shape = batch.to_vec();
            index_shape.push(rank);
            index_shape.extend_from_slice(spatial);
            assert_eq!(got_i.shape(), index_shape.as_slice());
            let per_item = got_i.to_shape((items.len(), rank * items[0].len())).unwrap().to_owned();
            let distances = got.to_shape((items.len(), items[0].len())).unwrap().to_owned();
            for (i, item) in items.iter().enumerate() {
                let want = distance::distance_transform_edt(item.view(), s).unwrap();
                for (a, b) in distances.row(i).iter().zip(want.iter()) {
                    assert!((a - b).abs() <= 1e-12 * b.max(1.0), "{batch:?} {spatial:?} item {i}: {a} vs {b}");
                }
                let mut shape = vec![rank];
                shape.extend_from_slice(spatial);
                let indices = ArrayD::from_shape_vec(IxDyn(&shape), per_item.row(i).to_vec()).unwrap();
                let d = ArrayD::from_shape_vec(IxDyn(spatial), distances.row(i).to_vec()).unwrap();
                if item.iter().all(|&v| v) {
                    let (_, want_i) = distance::distance_transform_edt_with_indices(item.view(), s).unwrap();
                    assert_eq!(indices, want_i, "{batch:?} {spatial:?} item {i}: scipy's point");
                } else {
                    let unit = vec![1.0; rank];
                    let s = s.map_or(unit, |s| s.to_vec());
                    check_indices(item, &s, &d, &indices, &format!("{batch:?} {spatial:?} item {i}"));
                }
            }
        }
    }
    // More than three spatial axes, or none, are refused.
    let five = ArrayD::from_elem(IxDyn(&[2, 2, 2, 2, 2]), true);
    assert!(gpu::distance_transform_edt_host(&g, five.view(), 1, None).is_err());
    assert!(gpu::distance_transform_edt_host(&g, five.view(), 5, None).is_err());
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_chamfer_equals_the_cpu() {
    use distance::Metric;
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(41);
    let cases: [(&[usize], &[usize]); 10] = [
        (&[5], &[3, 7, 64]),
        (&[3], &[5, 32]),
        (&[], &[1]),
        (&[], &[70]),
        (&[], &[33, 65]),
        (&[], &[17, 9, 40]),
        (&[4], &[12, 30]),
        (&[2, 3], &[5, 7, 9]),
        (&[2], &[3, 12_288]),
        (&[1], &[40, 40, 40]),
    ];
    for (batch, spatial) in cases {
        let input = random_batch(&mut rng, batch, spatial);
        let batch_dims = batch.len();
        let items = items_of(&input, batch_dims);
        let rank = spatial.len();
        assert!(gpu::takes_chamfer(spatial));
        for metric in [Metric::Taxicab, Metric::Chessboard] {
            let (got, none) = gpu::distance_transform_cdt_host(&g, input.view(), batch_dims, metric, false).unwrap();
            assert!(none.is_none());
            let (got_d, got_i) = gpu::distance_transform_cdt_host(&g, input.view(), batch_dims, metric, true).unwrap();
            assert_eq!(got, got_d, "{spatial:?} {metric:?}: with and without indices");
            let got_i = got_i.unwrap();
            let volume = items[0].len();
            let distances = got.to_shape((items.len(), volume)).unwrap().to_owned();
            let per_item = got_i.to_shape((items.len(), rank * volume)).unwrap().to_owned();
            for (i, item) in items.iter().enumerate() {
                let (want, want_i) = distance::distance_transform_cdt(item.view(), metric).unwrap();
                assert_eq!(distances.row(i).to_vec(), want.iter().copied().collect::<Vec<_>>(), "{spatial:?} item {i}");
                let indices = per_item.row(i);
                if want.iter().all(|&d| d < 0) {
                    assert_eq!(indices.to_vec(), want_i.iter().copied().collect::<Vec<_>>(), "own coordinates");
                    continue;
                }
                for (e, ((p, _), &d)) in item.indexed_iter().zip(want.iter()).enumerate() {
                    let q: Vec<usize> = (0..rank).map(|a| indices[a * volume + e] as usize).collect();
                    assert!(!item[IxDyn(&q)], "{spatial:?} item {i}: {p:?} names {q:?}, not background");
                    let steps = (0..rank).map(|a| p[a].abs_diff(q[a]));
                    let reached = match metric {
                        Metric::Chessboard => steps.max().unwrap(),
                        _ => steps.sum(),
                    };
                    assert_eq!(reached as i32, d, "{spatial:?} item {i}: {p:?} names {q:?}");
                }
            }
        }
    }
    assert!(!gpu::takes_chamfer(&[12_289]));
    assert!(!gpu::takes_chamfer(&[2, 2, 2, 2]));
    let long = ArrayD::from_elem(IxDyn(&[12_289]), true);
    assert!(gpu::distance_transform_cdt_host(&g, long.view(), 0, Metric::Taxicab, false).is_err());
    assert!(gpu::distance_transform_cdt_host(&g, long.view(), 0, Metric::Euclidean, false).is_err());
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_envelopes_and_searches_equal_the_cpu() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(43);
    // Dense, sparse and single background elements; batches; long axes;
    // lines whose envelopes hold a hundred entries and more (half of the
    // 256 rows of each column background).
    let cases: [(usize, &[usize], f64); 9] = [
        (1, &[40, 50, 60], 0.3),
        (1, &[256, 48], 0.5),
        (1, &[40, 50, 60], 0.0005),
        (1, &[64, 64, 64], 0.0),
        (3, &[20, 30, 33], 0.01),
        (1, &[300, 700], 0.001),
        (2, &[5, 12_288], 0.0001),
        (1, &[12_288, 3], 0.0),
        (4, &[1000], 0.002),
    ];
    for (items, spatial, density) in cases {
        let mut shape = vec![items];
        shape.extend_from_slice(spatial);
        let n: usize = shape.iter().product();
        let mut values: Vec<bool> = (0..n).map(|_| rng.gen::<f64>() >= density).collect();
        // At least one background element per array.
        let volume = n / items;
        for item in 0..items {
            values[item * volume + rng.gen_range(0..volume)] = false;
        }
        let input = ArrayD::from_shape_vec(IxDyn(&shape), values).unwrap();
        let bytes: Vec<u8> = input.iter().map(|&v| v as u8).collect();
        let mask = g.upload(&bytes).unwrap();
        let batch = gpu::Batch { items, shape: spatial };
        let want: Vec<Vec<f64>> = items_of(&input, 1)
            .iter()
            .map(|item| distance::distance_transform_edt(item.view(), None).unwrap().iter().copied().collect())
            .collect();
        for passes in ways() {
            let mut out = g.uninit::<f64>(n).unwrap();
            let mut indices = g.uninit::<i32>(n * spatial.len()).unwrap();
            gpu::distance_transform_edt_with(&g, &mask, batch, None, &mut out, Some(&mut indices), passes).unwrap();
            let got = g.download(&out).unwrap();
            let ind = g.download(&indices).unwrap();
            for (item, item_input) in items_of(&input, 1).iter().enumerate() {
                let d = &got[item * volume..(item + 1) * volume];
                assert_eq!(d, want[item].as_slice(), "{passes:?} {spatial:?} item {item}");
                let rank = spatial.len();
                let planes = ind[item * volume * rank..(item + 1) * volume * rank].to_vec();
                let mut index_shape = vec![rank];
                index_shape.extend_from_slice(spatial);
                let planes = ArrayD::from_shape_vec(IxDyn(&index_shape), planes).unwrap();
                let d = ArrayD::from_shape_vec(IxDyn(spatial), d.to_vec()).unwrap();
                check_indices(item_input, &vec![1.0; rank], &d, &planes, &format!("{passes:?} {spatial:?} {item}"));
            }
            let mut plain = g.uninit::<f64>(n).unwrap();
            gpu::distance_transform_edt_with(&g, &mask, batch, None, &mut plain, None, passes).unwrap();
            assert_eq!(g.download(&plain).unwrap(), got, "{passes:?} {spatial:?}: with and without indices");
        }
    }
}

/// Every way of the integer passes: each kernel alone, and lines split
/// between them at mean radii that defer every line with a cost (0), some
/// (1, 3, 12) or none (`u32::MAX`).
fn ways() -> Vec<gpu::LinePasses> {
    let mut ways = vec![gpu::LinePasses::Envelope, gpu::LinePasses::Search, gpu::LinePasses::Auto];
    ways.extend([0, 1, 3, 12, u32::MAX].map(|mean_radius| gpu::LinePasses::Split { mean_radius }));
    ways
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_chamfer_sweeps_and_searches_equal_the_cpu() {
    use distance::Metric;
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(47);
    let cases: [(usize, &[usize], f64); 7] = [
        (1, &[40, 50, 60], 0.3),
        (1, &[40, 50, 60], 0.0005),
        (1, &[64, 64, 64], 0.0),
        (3, &[20, 30, 33], 0.01),
        (1, &[300, 700], 0.001),
        (2, &[5, 12_288], 0.0001),
        (4, &[1000], 0.002),
    ];
    for (items, spatial, density) in cases {
        let mut shape = vec![items];
        shape.extend_from_slice(spatial);
        let n: usize = shape.iter().product();
        let mut values: Vec<bool> = (0..n).map(|_| rng.gen::<f64>() >= density).collect();
        let volume = n / items;
        for item in 0..items.saturating_sub(1) {
            values[item * volume + rng.gen_range(0..volume)] = false;
        }
        // The last array keeps its chance of having no background.
        let input = ArrayD::from_shape_vec(IxDyn(&shape), values).unwrap();
        let bytes: Vec<u8> = input.iter().map(|&v| v as u8).collect();
        let mask = g.upload(&bytes).unwrap();
        let batch = gpu::Batch { items, shape: spatial };
        let rank = spatial.len();
        for metric in [Metric::Taxicab, Metric::Chessboard] {
            let want: Vec<(ArrayD<i32>, ArrayD<i32>)> = items_of(&input, 1)
                .iter()
                .map(|item| distance::distance_transform_cdt(item.view(), metric).unwrap())
                .collect();
            for passes in ways() {
                let mut out = g.uninit::<i32>(n).unwrap();
                let mut indices = g.uninit::<i32>(n * rank).unwrap();
                gpu::distance_transform_cdt_with(&g, &mask, batch, metric, &mut out, Some(&mut indices), passes)
                    .unwrap();
                let got = g.download(&out).unwrap();
                let ind = g.download(&indices).unwrap();
                for (item, item_input) in items_of(&input, 1).iter().enumerate() {
                    let (want_d, want_i) = &want[item];
                    let d = &got[item * volume..(item + 1) * volume];
                    assert_eq!(d, want_d.as_slice().unwrap(), "{passes:?} {metric:?} {spatial:?} item {item}");
                    let planes = &ind[item * volume * rank..(item + 1) * volume * rank];
                    if want_d.iter().all(|&v| v < 0) {
                        assert_eq!(planes, want_i.as_slice().unwrap(), "own coordinates");
                        continue;
                    }
                    for (e, ((p, _), &dist)) in item_input.indexed_iter().zip(want_d.iter()).enumerate() {
                        let q: Vec<usize> = (0..rank).map(|a| planes[a * volume + e] as usize).collect();
                        assert!(!item_input[IxDyn(&q)], "{passes:?} {spatial:?}: {p:?} names {q:?}");
                        let steps = (0..rank).map(|a| p[a].abs_diff(q[a]));
                        let reached = match metric {
                            Metric::Chessboard => steps.max().unwrap(),
                            _ => steps.sum(),
                        };
                        assert_eq!(reached as i32, dist, "{passes:?} {metric:?} {spatial:?}: {p:?} names {q:?}");
                    }
                }
                let mut plain = g.uninit::<i32>(n).unwrap();
                gpu::distance_transform_cdt_with(&g, &mask, batch, metric, &mut plain, None, passes).unwrap();
                assert_eq!(g.download(&plain).unwrap(), got, "{passes:?} {metric:?}: with and without indices");
            }
        }
    }
}

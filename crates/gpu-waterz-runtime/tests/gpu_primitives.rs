//! The device-wide primitives against CPU computations on random input.

use gpu_waterz_runtime::primitives::{
    compact_indices, digit_shifts, exclusive_scan, expand_runs_u32, gather_rows_f32, radix_sort_pairs, reduce_by_key,
    value_runs_u32,
};
use gpu_waterz_runtime::testing::gpu;
use rand::{Rng, SeedableRng};

const SIZES: &[usize] = &[1, 2, 255, 1024, 1025, 4097, 100_003, 1_048_577, 3_000_001];

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn exclusive_scan_matches_the_cpu() {
    let gpu = gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    for &n in SIZES {
        let host: Vec<u32> = (0..n).map(|_| rng.gen_range(0..1000)).collect();
        let buffer = gpu.upload(&host).unwrap();
        let (scanned, total) = exclusive_scan(&gpu, &buffer, n as u64).unwrap();
        let got = gpu.download(&scanned).unwrap();
        let mut acc = 0u64;
        for (i, &v) in host.iter().enumerate() {
            assert_eq!(got[i], acc, "n = {n}, i = {i}");
            acc += v as u64;
        }
        assert_eq!(total, acc, "n = {n}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn compaction_keeps_order() {
    let gpu = gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
    for &n in SIZES {
        // Any non-zero flag is set once, whatever its value (u32::MAX too).
        let flags: Vec<u32> = (0..n)
            .map(|_| match rng.gen_range(0..20) {
                0 => 1,
                1 => rng.gen_range(2..=u32::MAX),
                _ => 0,
            })
            .collect();
        let buffer = gpu.upload(&flags).unwrap();
        let (out, count) = compact_indices(&gpu, &buffer, n as u64).unwrap();
        let expected: Vec<u32> = (0..n as u32).filter(|&i| flags[i as usize] != 0).collect();
        assert_eq!(count as usize, expected.len());
        let got = gpu.download(&out).unwrap();
        assert_eq!(&got[..expected.len()], &expected[..], "n = {n}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn radix_sort_is_stable_and_sorted_for_64_and_32_bit_keys() {
    let gpu = gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    for &n in SIZES {
        for (low, high) in [(32u32, 32u32), (32, 0), (12, 12)] {
            let mask = |bits: u32| {
                if bits >= 32 {
                    u32::MAX as u64
                } else {
                    (1u64 << bits) - 1
                }
            };
            // Few distinct keys, so that stability matters.
            let keys: Vec<u64> = (0..n)
                .map(|_| {
                    let k: u64 = (rng.gen::<u64>() % 97 * 0x0101_0101_0101_0101) ^ rng.gen_range(0..4);
                    (k & mask(low)) | (((k >> 32) & mask(high)) << 32)
                })
                .collect();
            let values: Vec<u64> = (0..n as u64).collect();
            let (k, v) = radix_sort_pairs(
                &gpu,
                gpu.upload(&keys).unwrap(),
                gpu.upload(&values).unwrap(),
                n as u64,
                &digit_shifts(low, high),
            )
            .unwrap();
            let mut expected: Vec<(u64, u64)> = keys.iter().copied().zip(values.iter().copied()).collect();
            expected.sort_by_key(|p| p.0);
            let got: Vec<(u64, u64)> =
                gpu.download(&k).unwrap().into_iter().zip(gpu.download(&v).unwrap()).take(n).collect();
            assert_eq!(got, expected, "n = {n}, bits = ({low}, {high})");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn reduce_by_key_sums_runs_exactly() {
    let gpu = gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
    for &n in SIZES {
        let mut keys: Vec<u64> = (0..n).map(|_| rng.gen_range(0..(n as u64 / 3 + 2))).collect();
        keys.sort_unstable();
        let values: Vec<u64> = (0..n).map(|_| rng.gen_range(0..1u64 << 33)).collect();
        let runs = reduce_by_key(&gpu, &gpu.upload(&keys).unwrap(), &gpu.upload(&values).unwrap(), n as u64).unwrap();
        let mut expected: Vec<(u64, u64, u64)> = Vec::new();
        for (&k, &v) in keys.iter().zip(&values) {
            match expected.last_mut() {
                Some(last) if last.0 == k => {
                    last.1 += 1;
                    last.2 += v;
                }
                _ => expected.push((k, 1, v)),
            }
        }
        assert_eq!(runs.n_runs as usize, expected.len());
        let got_k = gpu.download(&runs.keys).unwrap();
        let got_c = gpu.download(&runs.counts).unwrap();
        let got_s = gpu.download(&runs.sums).unwrap();
        for (r, e) in expected.iter().enumerate() {
            assert_eq!((got_k[r], got_c[r], got_s[r]), *e, "n = {n}, run {r}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn counting_pairs_in_a_hash_table_equals_the_cpu_and_reports_a_full_table() {
    use gpu_waterz_runtime::primitives::count_u32_pairs;
    let gpu = gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    for &(n, highs, lows) in &[(0usize, 3u32, 3u32), (1, 3, 3), (1000, 4, 50), (300_000, 200, 3000), (70_001, 5, 2)] {
        // Runs of equal pairs, as labels along x give them, and zeros.
        let mut high = Vec::with_capacity(n);
        let mut low = Vec::with_capacity(n);
        while high.len() < n {
            let run = rng.gen_range(1..40).min(n - high.len());
            let (h, l) = (rng.gen_range(0..highs), rng.gen_range(0..lows));
            high.extend(std::iter::repeat_n(h, run));
            low.extend(std::iter::repeat_n(l, run));
        }
        let start = n / 7;
        let mut expected = std::collections::BTreeMap::new();
        for i in start..n {
            if high[i] != 0 {
                *expected.entry(((high[i] as u64) << 32) | low[i] as u64).or_insert(0u64) += 1;
            }
        }
        let (h, l) = (gpu.upload(&high).unwrap(), gpu.upload(&low).unwrap());
        let pairs = count_u32_pairs(&gpu, &h, &l, start as u64, (n - start) as u64, 2 * expected.len() as u64 + 1)
            .unwrap()
            .expect("room for every pair");
        let got: std::collections::BTreeMap<u64, u64> = pairs.into_iter().collect();
        assert_eq!(got, expected, "n = {n}");
        if expected.len() > 2 {
            let full = count_u32_pairs(&gpu, &h, &l, start as u64, (n - start) as u64, 2).unwrap();
            assert!(full.is_none(), "a table of 2 slots cannot hold {} pairs", expected.len());
        }
    }
    let h = gpu.upload(&[u32::MAX]).unwrap();
    assert!(count_u32_pairs(&gpu, &h, &h, 0, 1, 4).is_err(), "the reserved pair is refused");
    assert!(count_u32_pairs(&gpu, &h, &h, 0, 2, 4).is_err(), "pairs past the buffers are refused");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn value_runs_encode_and_expand_as_the_cpu() {
    let gpu = gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(6);
    for &n in SIZES {
        // Runs of 1 to about 40 items, runs longer than a scan tile, and
        // values equal to the run before's now and then not at all.
        let mut values: Vec<u32> = Vec::with_capacity(n);
        while values.len() < n {
            let length = match rng.gen_range(0..50) {
                0 => rng.gen_range(1000..5000),
                _ => rng.gen_range(1..40),
            };
            let value = (rng.gen_range(0..6u64) * 1_000_000_007 % u32::MAX as u64) as u32;
            values.extend(std::iter::repeat_n(value, length.min(n - values.len())));
        }
        let (mut starts, mut run_values) = (Vec::new(), Vec::new());
        for (i, &v) in values.iter().enumerate() {
            if i == 0 || v != values[i - 1] {
                starts.push(i as u32);
                run_values.push(v);
            }
        }
        let buffer = gpu.upload(&values).unwrap();
        let (got_starts, got_values, count) = value_runs_u32(&gpu, &buffer, n as u64).unwrap();
        assert_eq!(count as usize, starts.len(), "n = {n}");
        assert_eq!(gpu.download(&got_starts).unwrap(), starts, "n = {n}");
        assert_eq!(gpu.download(&got_values).unwrap(), run_values, "n = {n}");
        let expanded = expand_runs_u32(&gpu, &got_starts, &got_values, count, n as u64).unwrap();
        assert_eq!(gpu.download(&expanded).unwrap(), values, "n = {n}");
    }
    // Runs of one item each (every lane of a row in its own run), and runs
    // given directly, empty ones among them (a start repeated): each item
    // takes the last run starting at or before it, as the host's search.
    for n in [31usize, 32, 33, 1023, 1024, 1025, 70_001] {
        let values: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let starts: Vec<u32> = (0..n as u32).collect();
        let (starts_d, values_d) = (gpu.upload(&starts).unwrap(), gpu.upload(&values).unwrap());
        let expanded = expand_runs_u32(&gpu, &starts_d, &values_d, n as u64, n as u64).unwrap();
        assert_eq!(gpu.download(&expanded).unwrap(), values, "n = {n}");
    }
    let n = 5000u64;
    let starts: Vec<u32> = vec![0, 0, 3, 40, 40, 40, 1023, 1024, 1025, 2047, 4999];
    let run_values: Vec<u32> = (0..starts.len() as u32).map(|k| 100 + k).collect();
    let want: Vec<u32> = (0..n)
        .map(|i| {
            let k = gpu_waterz_abi::primitives::run_containing(starts.len() as u64, i, |k| starts[k as usize] as u64);
            run_values[k as usize]
        })
        .collect();
    let (starts_d, values_d) = (gpu.upload(&starts).unwrap(), gpu.upload(&run_values).unwrap());
    let expanded = expand_runs_u32(&gpu, &starts_d, &values_d, starts.len() as u64, n).unwrap();
    assert_eq!(gpu.download(&expanded).unwrap(), want);
    // No items: no runs, and no runs for items is an error.
    let empty = gpu.upload(&[7u32]).unwrap();
    assert_eq!(value_runs_u32(&gpu, &empty, 0).unwrap().2, 0);
    assert!(value_runs_u32(&gpu, &empty, 2).is_err(), "more items than the buffer holds");
    assert!(expand_runs_u32(&gpu, &empty, &empty, 0, 5).is_err());
    assert!(expand_runs_u32(&gpu, &empty, &empty, 2, 5).is_err(), "more runs than the buffers hold");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gathered_rows_are_the_strided_values() {
    let gpu = gpu();
    // The three faces of channel `axis` of a (3, 5, 6, 7) array, and their
    // bounds.
    let (z, y, x) = (5u64, 6u64, 7u64);
    let n = z * y * x;
    let values: Vec<f32> = (0..3 * n).map(|i| i as f32).collect();
    let input = gpu.upload(&values).unwrap();
    for (axis, rows, row_len) in [(0u64, [y, x], [x, 1]), (1, [z, y * x], [x, 1]), (2, [z * y, x], [1, 1])] {
        let got = gpu.download(&gather_rows_f32(&gpu, &input, axis * n, rows, row_len).unwrap()).unwrap();
        let want: Vec<f32> = (0..rows[0])
            .flat_map(|r| (0..row_len[0]).map(move |c| (axis * n + r * rows[1] + c * row_len[1]) as f32))
            .collect();
        assert_eq!(got, want, "axis {axis}");
    }
    assert!(gather_rows_f32(&gpu, &input, 3 * n - 1, [2, 1], [1, 1]).is_err());
    assert!(gather_rows_f32(&gpu, &input, 0, [0, 1], [1, 1]).is_err());
    assert!(gather_rows_f32(&gpu, &input, 0, [2, u64::MAX], [1, 1]).is_err());
    assert_eq!(
        gpu.download(&gather_rows_f32(&gpu, &input, 3 * n - 1, [1, 9], [1, 4]).unwrap()).unwrap(),
        [values[(3 * n - 1) as usize]]
    );
}

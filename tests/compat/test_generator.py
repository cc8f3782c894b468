"""The data generator (`gpu-waterz generate`): deterministic, and stock waterz
on its output scores in the range of real data."""

import numpy as np

from conftest import run_cli, run_waterz


def generate(tmp_path, name, *extra):
    affs, gt = tmp_path / f"{name}-affs.npy", tmp_path / f"{name}-gt.npy"
    run_cli("generate", "--shape", "32,128,128", "--out-affinities", affs, "--out-ground-truth", gt, *extra)
    return np.load(affs), np.load(gt)


def test_deterministic_and_uint8(tmp_path):
    a1, g1 = generate(tmp_path, "one", "--seed", "7")
    a2, g2 = generate(tmp_path, "two", "--seed", "7")
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(g1, g2)
    assert a1.dtype == np.float32 and a1.shape == (3, 32, 128, 128) and g1.dtype == np.uint64
    assert a1.min() >= 0 and a1.max() <= 1
    a3, _ = generate(tmp_path, "three", "--seed", "8")
    assert not np.array_equal(a1, a3)
    k, _ = generate(tmp_path, "four", "--seed", "7", "--uint8")
    assert k.dtype == np.uint8
    # round(a * 255), halves away from zero: within half a step everywhere.
    assert np.all(np.abs(k.astype(np.float64) - a1.astype(np.float64) * 255) <= 0.5 + 1e-5)


def test_stock_waterz_scores_like_real_data(tmp_path):
    affs, gt = generate(tmp_path, "default")
    results = run_waterz(affs, [0.3, 0.5], gt=gt.astype(np.uint32), history=False)
    total = [r["metrics"]["V_Info_split"] + r["metrics"]["V_Info_merge"] for r in results]
    assert 1.0 <= total[0] <= 3.0, total
    assert 0.5 <= total[1] <= 3.0, total

"""The Python package as a drop-in: the same script with `import waterz` and
`import gpu_waterz as waterz` (backend='cpu') gives the same segmentations,
metrics, merge histories and region graphs; bad input raises Python errors."""

import numpy as np
import pytest

from conftest import gpu_backend_error, require_data, run_waterz
from volumes import affinities_from_boundary, cnn_like, quantize, random_affs, voronoi_labels

gpu_waterz = pytest.importorskip("gpu_waterz")

THRESHOLDS = [0.1, 0.3, 0.5, 0.7, 0.9]


def run_ours(affs, thresholds, **kwargs):
    return run_waterz(affs, thresholds, module=gpu_waterz, backend="cpu", **kwargs)


def assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o["seg"], t["seg"])
        assert o["seg"].dtype == np.uint64
        for key in ("metrics", "history", "region_graph"):
            if key in t:
                assert o[key] == t[key], key


@pytest.mark.parametrize("seed", range(8))
def test_random_and_duplicate_thresholds(seed):
    rng = np.random.default_rng(seed)
    affs = random_affs(rng, (5, 12, 12))
    thresholds = [0.5, 0.1, 0.5, 0.3]
    gt = voronoi_labels(rng, (5, 12, 12), 4)
    assert_same(run_ours(affs, thresholds, gt=gt, region_graph=True),
                run_waterz(affs, thresholds, gt=gt, region_graph=True))


@pytest.mark.parametrize("seed", range(4))
def test_cnn_like_and_uint8(seed):
    rng = np.random.default_rng(50 + seed)
    gt = voronoi_labels(rng, (6, 20, 20), 8)
    affs = cnn_like(rng, gt)
    assert_same(run_ours(affs, THRESHOLDS, gt=gt), run_waterz(affs, THRESHOLDS, gt=gt))
    k, as_float = quantize(affs)
    assert_same(run_ours(k, THRESHOLDS, gt=gt), run_waterz(as_float, THRESHOLDS, gt=gt))


def test_fragments_scores_and_more_channels():
    rng = np.random.default_rng(9)
    gt = voronoi_labels(rng, (6, 16, 16), 6)
    affs = cnn_like(rng, gt)
    frags = voronoi_labels(rng, (6, 16, 16), 30).astype(np.uint64) * 7
    assert_same(run_ours(affs, THRESHOLDS, fragments=frags), run_waterz(affs, THRESHOLDS, fragments=frags))
    q = "OneMinus<HistogramQuantileAffinity<RegionGraphType, 50, ScoreValue, 256, false>>"
    assert_same(run_ours(affs, THRESHOLDS, scoring=q), run_waterz(affs, THRESHOLDS, scoring=q))
    # waterz uses the first three channels of a longer stack.
    extra = np.concatenate([affs, affs[:1]], axis=0)
    assert_same(run_ours(extra, THRESHOLDS), run_waterz(extra, THRESHOLDS))


def test_waterz_inputs_any_threshold_and_affinities_outside_0_1():
    """waterz's README thresholds [0, 100, 200], negative ones, and finite
    affinities outside [0, 1] (lossy-compressed HDF5 decodes 1.0000315):
    the CPU backend gives stock waterz's results, bit for bit."""
    rng = np.random.default_rng(11)
    gt = voronoi_labels(rng, (6, 16, 16), 6)
    affs = cnn_like(rng, gt)
    for thresholds in ([0, 100, 200], [-1.0, 0.5]):
        assert_same(run_ours(affs, thresholds, gt=gt), run_waterz(affs, thresholds, gt=gt))
    outside = affs.copy()
    outside[0, 2, 3, 3] = 1.0000315
    outside[1, 2, 3, 4] = 1.0001676
    outside[2, 3, 5, 5] = -0.01
    assert_same(run_ours(outside, THRESHOLDS, gt=gt, history=True), run_waterz(outside, THRESHOLDS, gt=gt, history=True))


def test_drop_in_defaults_and_version():
    """Unchanged waterz calls: the default backend is 'auto' (without a GPU
    the CPU reference, so stock waterz's results; with one the GPU
    backend's), and there is a __version__."""
    import waterz

    rng = np.random.default_rng(12)
    affs = cnn_like(rng, voronoi_labels(rng, (6, 16, 16), 6))
    ours = [s.copy() for s in gpu_waterz.agglomerate(affs, THRESHOLDS)]
    if gpu_backend_error() is None:
        expected = [s.copy() for s in gpu_waterz.agglomerate(affs, THRESHOLDS, backend="gpu")]
    else:
        expected = [s.copy() for s in waterz.agglomerate(affs, THRESHOLDS)]
    assert len(ours) == len(expected) == len(THRESHOLDS)
    for o, t in zip(ours, expected):
        np.testing.assert_array_equal(o, t)
    assert isinstance(gpu_waterz.__version__, str) and gpu_waterz.__version__.count(".") == 2


def test_real_gala():
    import h5py

    with h5py.File(require_data("gala-em-train.h5"), "r") as f:
        affs, gt = affinities_from_boundary(f["boundary_probability"][:]), f["gt"][:]
    assert_same(run_ours(affs, THRESHOLDS, gt=gt), run_waterz(affs, THRESHOLDS, gt=gt))


def test_evaluate_matches_waterz():
    import waterz

    rng = np.random.default_rng(3)
    seg = rng.integers(0, 6, size=(4, 9, 9)).astype(np.uint64)
    gt = rng.integers(0, 4, size=(4, 9, 9)).astype(np.uint64)
    ours, theirs = gpu_waterz.evaluate(seg, gt), waterz.evaluate(seg, gt)
    assert set(ours) == set(theirs)
    for k in ours:
        assert abs(ours[k] - theirs[k]) < 1e-12


def test_bad_input_raises_python_errors():
    affs = np.random.default_rng(0).random((3, 4, 5, 6), dtype=np.float32)
    cases = [
        (TypeError, "numpy array", dict(affs=[[1]])),
        (ValueError, "at least 3 channels", dict(affs=affs[:2])),
        (TypeError, "float32", dict(affs=affs.astype(np.float64))),
        (ValueError, "shape of the affinities", dict(gt=np.zeros((4, 5, 5), np.uint32))),
        (ValueError, "NaN", dict(affs=np.where(affs > 0.5, np.nan, affs).astype(np.float32))),
        (ValueError, "finite", dict(thresholds=[float("nan")])),
        (ValueError, "infinite", dict(affs=np.where(affs > 0.5, np.inf, affs).astype(np.float32))),
        (ValueError, "unsupported scoring function", dict(scoring_function="OneMinus<Foo>")),
        (ValueError, "backend", dict(backend="tpu")),
        (ValueError, "discretize_queue", dict(discretize_queue=70000)),
        (ValueError, "smaller", dict(aff_threshold_low=0.9, aff_threshold_high=0.1)),
        (ValueError, "epsilon", dict(epsilon=-1.0)),
    ]
    for error, needle, override in cases:
        kwargs = dict(affs=affs, thresholds=[0.5], backend="cpu")
        kwargs.update(override)
        with pytest.raises(error, match=needle.replace("[", r"\[").replace("]", r"\]")):
            list(gpu_waterz.agglomerate(**kwargs))
    with pytest.raises(TypeError):
        gpu_waterz.evaluate([1], np.zeros((1, 1, 1), np.uint64))
    with pytest.raises(ValueError, match="Shapes do not match"):
        gpu_waterz.evaluate(np.zeros((1, 1, 2), np.uint64), np.zeros((1, 2, 1), np.uint64))

"""Unchanged waterz user code, run twice: with `import waterz` and with
`import gpu_waterz as waterz` (default arguments, so `backend="auto"`).
Without a GPU, auto runs the CPU reference, and everything the scripts
return must be equal: segmentations, metrics, merge histories, region
graphs, `evaluate`. With a GPU (auto runs the GPU backend's exact
arithmetic), the segmentations must stay within 0.05 bits of VOI of stock
waterz's and the other outputs are not compared."""

import numpy as np
import pytest

from conftest import gpu_backend_error
from volumes import cnn_like, voronoi_labels

stock = pytest.importorskip("waterz")
gpu_waterz = pytest.importorskip("gpu_waterz")

THRESHOLDS = [0.1, 0.3, 0.5, 0.7, 0.9]


ON_GPU = gpu_backend_error() is None


def tutorial(waterz, affs, gt, fragments):
    # waterz's README: a generator of segmentations, one per threshold.
    return [seg.copy() for seg in waterz.agglomerate(affs, [0.1, 0.5, 0.9])]


def with_ground_truth(waterz, affs, gt, fragments):
    return [(seg.copy(), metrics) for seg, metrics in waterz.agglomerate(affs, THRESHOLDS, gt=gt)]


def lsd_style(waterz, affs, gt, fragments):
    # lsd/daisy blockwise agglomeration: given fragments, a histogram
    # quantile, the merge history and the region graph.
    scoring = "OneMinus<HistogramQuantileAffinity<RegionGraphType, 50, ScoreValue, 256, false>>"
    out = []
    for seg, history, graph in waterz.agglomerate(
        affs, [0.2, 0.4, 0.6], fragments=fragments.copy(), scoring_function=scoring,
        return_merge_history=True, return_region_graph=True,
    ):
        out.append((seg.copy(), list(history), list(graph)))
    return out


def bin_queue(waterz, affs, gt, fragments):
    return [(seg.copy(), metrics)
            for seg, metrics in waterz.agglomerate(affs, THRESHOLDS, gt=gt, discretize_queue=256)]


def repeated_and_unsorted_thresholds(waterz, affs, gt, fragments):
    return [seg.copy() for seg in waterz.agglomerate(affs, [0.5, 0.1, 0.5, 0.3])]


def evaluate(waterz, affs, gt, fragments):
    seg = next(iter(waterz.agglomerate(affs, [0.4]))).copy()
    return waterz.evaluate(seg.astype(np.uint64), gt.astype(np.uint64))


def one_array_for_every_threshold(waterz, affs, gt, fragments):
    # waterz yields one array, relabelled in place: a list of the results
    # holds the last segmentation as many times as there are thresholds.
    segs = list(waterz.agglomerate(affs, [0.1, 0.5, 0.9]))
    return [all(s is segs[0] for s in segs), segs[0].copy()]


def fragments_relabelled_in_place(waterz, affs, gt, fragments):
    # Given writable uint64 fragments, waterz writes each segmentation into
    # them and yields them.
    mine = fragments.copy()
    same = [seg is mine for seg in waterz.agglomerate(affs, [0.3, 0.6], fragments=mine)]
    return [same, mine]


SCRIPTS = [
    tutorial, with_ground_truth, lsd_style, bin_queue, repeated_and_unsorted_thresholds, evaluate,
    one_array_for_every_threshold, fragments_relabelled_in_place,
]


def _data():
    rng = np.random.default_rng(21)
    gt = voronoi_labels(rng, (8, 24, 24), 10)
    affs = np.ascontiguousarray(cnn_like(rng, gt), dtype=np.float32)
    fragments = voronoi_labels(rng, (8, 24, 24), 60).astype(np.uint64)
    return affs, gt.astype(np.uint32), fragments


def _segmentations(result):
    """The segmentations in a script's result, in order."""
    if isinstance(result, np.ndarray):
        return [result]
    if isinstance(result, (list, tuple)):
        return [s for item in result for s in _segmentations(item)]
    return []


def _assert_equal(ours, theirs, where):
    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), where
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        np.testing.assert_array_equal(ours, theirs, err_msg=where)
    elif isinstance(theirs, dict):
        assert set(ours) == set(theirs), where
        for key in theirs:
            _assert_equal(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_equal(a, b, f"{where}[{i}]")
    elif isinstance(theirs, float):
        assert abs(ours - theirs) <= 1e-12 * max(1.0, abs(theirs)), (where, ours, theirs)
    else:
        assert ours == theirs, (where, ours, theirs)


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.__name__ for s in SCRIPTS])
def test_unchanged_waterz_code(script):
    affs, gt, fragments = _data()
    theirs = script(stock, affs, gt, fragments)
    ours = script(gpu_waterz, affs, gt, fragments)
    if not ON_GPU:
        _assert_equal(ours, theirs, script.__name__)
        return
    for a, b in zip(_segmentations(ours), _segmentations(theirs)):
        m = stock.evaluate(a.astype(np.uint64), b.astype(np.uint64))
        assert m["voi_split"] + m["voi_merge"] < 0.05, (script.__name__, m)

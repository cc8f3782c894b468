"""The equivalence suite: stock waterz 0.10.1 against gpu-waterz's CPU reference.

Each case runs `waterz.agglomerate` and `gpu-waterz segment --backend cpu` on the
same volume and asserts the same labels at every threshold, the same metrics
(to 1e-9) and the same merge history (and region graph where asked).
"""

import numpy as np
import pytest

from conftest import assert_same, require_data, run_reference, run_waterz
from volumes import affinities_from_boundary, affinities_from_inside, cnn_like, quantize, random_affs, voronoi_labels

THRESHOLDS = [0.1, 0.3, 0.5, 0.7, 0.9]


def compare(tmp_path, affs, gt=None, thresholds=THRESHOLDS, label="", **kw):
    theirs = run_waterz(affs, thresholds, gt=gt, **{k: v for k, v in kw.items() if k in ("fragments", "region_graph")},
                        scoring=kw.get("waterz_scoring"))
    ours = run_reference(tmp_path, affs if kw.get("ours_affs") is None else kw["ours_affs"], thresholds, gt=gt,
                         fragments=kw.get("fragments"), scoring=kw.get("scoring", "mean"),
                         region_graph=kw.get("region_graph", False))
    assert_same(ours, theirs, label)
    return ours


@pytest.mark.parametrize("seed", range(20))
def test_random_affinities(tmp_path, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(2, 14, size=3))
    compare(tmp_path, random_affs(rng, shape), label=f"random {shape}", region_graph=seed % 4 == 0)


@pytest.mark.parametrize("seed", range(12))
def test_cnn_like(tmp_path, seed):
    rng = np.random.default_rng(100 + seed)
    shape = (8, 24, 24)
    gt = voronoi_labels(rng, shape, 12)
    compare(tmp_path, cnn_like(rng, gt), gt=gt, label=f"cnn-like seed {seed}")


@pytest.mark.parametrize("seed", range(12))
def test_uint8_quantized_ties(tmp_path, seed):
    rng = np.random.default_rng(200 + seed)
    shape = (6, 16, 16)
    gt = voronoi_labels(rng, shape, 8)
    k, as_float = quantize(cnn_like(rng, gt, noise=0.3))
    # waterz sees float32 k/255; the reference reads the uint8 file itself.
    compare(tmp_path, as_float, gt=gt, ours_affs=k, label=f"uint8 seed {seed}", region_graph=seed % 3 == 0)


@pytest.mark.parametrize("seed", range(6))
def test_coarse_plateaus(tmp_path, seed):
    # Very few levels: large plateaus and ties everywhere.
    rng = np.random.default_rng(300 + seed)
    affs = (rng.integers(0, 4, size=(3, 7, 9, 11)) / 3).astype(np.float32)
    compare(tmp_path, affs, label=f"plateaus seed {seed}")


@pytest.mark.parametrize("seed", range(4))
def test_regions_above_high(tmp_path, seed):
    rng = np.random.default_rng(400 + seed)
    affs = random_affs(rng, (6, 10, 10))
    affs[:, 1:4, 2:8, 2:8] = 1.0
    affs[:, 4:, :5, :] = np.float32(0.99995)
    compare(tmp_path, affs, label=f"above high seed {seed}")


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 1, 7), (1, 5, 6), (4, 1, 1), (3, 1, 5)])
def test_degenerate_shapes(tmp_path, shape):
    rng = np.random.default_rng(sum(shape))
    compare(tmp_path, random_affs(rng, shape), label=f"shape {shape}")


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_constant_volumes(tmp_path, value):
    compare(tmp_path, np.full((3, 4, 5, 6), value, dtype=np.float32), label=f"constant {value}")


@pytest.mark.parametrize("seed", range(3))
def test_user_fragments_with_sparse_ids(tmp_path, seed):
    rng = np.random.default_rng(500 + seed)
    shape = (6, 16, 16)
    gt = voronoi_labels(rng, shape, 10)
    affs = cnn_like(rng, gt)
    frags = voronoi_labels(rng, shape, 40).astype(np.uint64)
    frags[frags % 7 == 0] = 0
    frags = frags * 1000 + 3  # sparse, large ids
    frags[frags == 3] = 0
    compare(tmp_path, affs, gt=gt, fragments=frags, label=f"fragments seed {seed}")


@pytest.mark.parametrize(
    "ours,waterz_name",
    [
        ("quantile-50", "OneMinus<HistogramQuantileAffinity<RegionGraphType, 50, ScoreValue, 256, false>>"),
        ("OneMinus<HistogramQuantileAffinity<RegionGraphType, 75, ScoreValue, 256, true>>",
         "OneMinus<HistogramQuantileAffinity<RegionGraphType, 75, ScoreValue, 256, true>>"),
        ("max", "OneMinus<MaxAffinity<RegionGraphType, ScoreValue>>"),
        ("min", "OneMinus<MinAffinity<RegionGraphType, ScoreValue>>"),
        ("exact-quantile-50", "OneMinus<QuantileAffinity<RegionGraphType, 50, ScoreValue>>"),
        ("exact-quantile-25-noinit", "OneMinus<QuantileAffinity<RegionGraphType, 25, ScoreValue, false>>"),
        ("mean-max-4", "OneMinus<MeanMaxKAffinity<RegionGraphType, 4, ScoreValue>>"),
        ("OneMinus<MeanMaxKAffinity<RegionGraphType, 1, ScoreValue>>",
         "OneMinus<MeanMaxKAffinity<RegionGraphType, 1, ScoreValue>>"),
    ],
)
def test_other_scoring_functions(tmp_path, ours, waterz_name):
    if ours == "quantile-50":
        ours = "quantile-50-256-noinit"
    rng = np.random.default_rng(7)
    gt = voronoi_labels(rng, (6, 16, 16), 8)
    compare(tmp_path, cnn_like(rng, gt), gt=gt, scoring=ours, waterz_scoring=waterz_name, label=ours)


def _gala(name):
    import h5py

    with h5py.File(require_data(name), "r") as f:
        return affinities_from_boundary(f["boundary_probability"][:]), f["gt"][:]


@pytest.mark.parametrize("name", ["gala-em-train.h5", "gala-em-test.h5"])
def test_real_gala(tmp_path, name):
    affs, gt = _gala(name)
    compare(tmp_path, affs, gt=gt, label=name)


def test_real_snemi(tmp_path):
    import h5py

    with h5py.File(require_data("snemi-mini.h5"), "r") as f:
        affs, gt = affinities_from_inside(f["inside_probability"][:]), f["gt"][:]
    compare(tmp_path, affs, gt=gt, label="snemi-mini")


def test_real_piriform(tmp_path):
    import h5py

    with h5py.File(require_data("piriform-affinities.h5"), "r") as f:
        affs = f["affinities"][:]
    compare(tmp_path, affs, label="piriform", region_graph=True)


def test_real_pinky40_crop(tmp_path):
    import h5py

    with h5py.File(require_data("pinky40-labels-512.h5"), "r") as f:
        gt = f["labels"][100:132, 128:256, 128:256]
    rng = np.random.default_rng(40)
    compare(tmp_path, cnn_like(rng, gt), gt=gt, label="pinky40 crop")


def test_scores_match_the_data_readme(tmp_path):
    """The reference reproduces the stock-waterz VOIs recorded in ../shared/data/README.md."""
    affs, gt = _gala("gala-em-train.h5")
    ours = run_reference(tmp_path, affs, THRESHOLDS, gt=gt, history=False)
    split = [1.903, 1.492, 1.119, 0.693, 0.544]
    merge = [0.493, 0.495, 0.497, 0.499, 0.520]
    for r, s, m in zip(ours, split, merge):
        assert abs(r["metrics"]["voi_split"] - s) < 5e-4 and abs(r["metrics"]["voi_merge"] - m) < 5e-4


SIZE_CONTROL = ("Divide<Subtract<MaxSize<RegionGraphType>,MinSize<RegionGraphType>>,"
                "Add<MaxSize<RegionGraphType>,MinSize<RegionGraphType>>>")


@pytest.mark.parametrize(
    "expression,thresholds",
    [
        # Stock waterz's prebuilt size control (double scores in [0, 1)).
        (SIZE_CONTROL, [0.1, 0.3, 0.5, 0.7, 0.9]),
        # Region sizes with an affinity statistic: float32 * size_t.
        ("Multiply<OneMinus<MeanAffinity<RegionGraphType, ScoreValue>>, MinSize<RegionGraphType>>", [1, 5, 20, 100]),
        # ContactArea first in the provider chain: its merges stop the
        # mean's (waterz's short-circuit). (Stock waterz 0.10.1 crashes on
        # chains of three providers, e.g. Add<Step<ContactArea, MaxSize>,
        # OneMinus<MeanAffinity>>, so none is compared here.)
        ("Add<ContactArea<RegionGraphType>, OneMinus<MeanAffinity<RegionGraphType, ScoreValue>>>", [2, 5, 20]),
        ("Step<ContactArea<RegionGraphType>, MaxSize<RegionGraphType>>", [0.5, 1.5]),
        # The mean first: ContactArea never sees a merge.
        ("Divide<OneMinus<MeanAffinity<RegionGraphType, ScoreValue>>, ContactArea<RegionGraphType>>",
         [0.01, 0.05, 0.2]),
        # An integer score (stored and compared as a float, as every score).
        ("ContactArea<RegionGraphType>", [2.5, 7.9, 30]),
        ("Invert<Square<Add<MaxSize<RegionGraphType>, Constant<RegionGraphType, 1>>>>", [0.001, 0.01, 0.1]),
    ],
    ids=["size-control", "mean-times-min-size", "area-plus-mean", "step", "mean-over-area", "area",
         "inverse-square-size"],
)
def test_scoring_expressions(tmp_path, expression, thresholds):
    """waterz's statistics combined by its operators, as its C++ computes
    them: types, short-circuiting provider chains, region sizes."""
    rng = np.random.default_rng(11)
    gt = voronoi_labels(rng, (6, 16, 16), 8)
    compare(tmp_path, cnn_like(rng, gt), gt=gt, thresholds=thresholds, scoring=expression,
            waterz_scoring=expression, label=expression)

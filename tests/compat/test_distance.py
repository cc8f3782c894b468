"""gpu_waterz.ndimage.distance_transform_edt against
scipy.ndimage.distance_transform_edt: equal distances with unit sampling,
within float64 rounding with other spacings, on random arrays of rank 1 to
4 and both backends; the output argument; errors."""

import os

import numpy as np
import pytest

gpu_waterz = pytest.importorskip("gpu_waterz")
from gpu_waterz import ndimage as ours  # noqa: E402

ndi = pytest.importorskip("scipy.ndimage")

REQUIRE_GPU = os.environ.get("GPU_WATERZ_REQUIRE_GPU") == "1"


def backends():
    try:
        ours.distance_transform_edt(np.ones((2, 2)), backend="gpu")
        return ["cpu", "gpu"]
    except RuntimeError:
        if REQUIRE_GPU:
            raise
        return ["cpu"]


@pytest.mark.parametrize("seed", range(40))
def test_equal_to_scipy(seed):
    rng = np.random.default_rng(seed)
    rank = 1 + seed % 4
    shape = tuple(int(rng.integers(1, 30 if rank < 4 else 8)) for _ in range(rank))
    a = rng.random(shape) > [0.01, 0.1, 0.5][seed % 3]
    if a.all():
        a.flat[0] = False
    want = ndi.distance_transform_edt(a)
    sampling = rng.uniform(0.3, 3.0, size=rank)
    want_s = ndi.distance_transform_edt(a, sampling=sampling)
    for backend in backends():
        if backend == "gpu" and rank > 3:
            continue
        np.testing.assert_array_equal(ours.distance_transform_edt(a, backend=backend), want)
        np.testing.assert_allclose(ours.distance_transform_edt(a, sampling=sampling, backend=backend), want_s,
                                   rtol=1e-12, atol=0)


def test_no_background_and_output_argument():
    ones = np.ones((3, 4, 5))
    for backend in backends():
        np.testing.assert_array_equal(ours.distance_transform_edt(ones, backend=backend),
                                      ndi.distance_transform_edt(ones))
    a = np.array([[1, 1, 0, 1]])
    out = np.empty(a.shape)
    assert ours.distance_transform_edt(a, sampling=[2, 3], distances=out) is None
    np.testing.assert_array_equal(out, [[6.0, 3.0, 0.0, 3.0]])
    if "gpu" in backends():
        d, i = ours.distance_transform_edt(a, sampling=[2, 3], return_indices=True, backend="gpu")
        np.testing.assert_array_equal(d, [[6.0, 3.0, 0.0, 3.0]])
        np.testing.assert_array_equal(i, [[[0, 0, 0, 0]], [[2, 2, 2, 2]]])
        with pytest.raises((ValueError, RuntimeError)):
            ours.distance_transform_edt(np.ones((2, 2, 2, 2)), return_indices=True, backend="gpu")
    with pytest.raises(RuntimeError):
        ours.distance_transform_edt(a, sampling=[1, 2, 3])
    with pytest.raises(ValueError):
        ours.distance_transform_edt(a, sampling=[1, -2])


def test_torch_cuda_in_place():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or "gpu" not in backends():
        pytest.skip("needs CUDA")
    rng = np.random.default_rng(1)
    a = rng.random((20, 30, 40)) > 0.05
    got = ours.distance_transform_edt(torch.as_tensor(a, device="cuda"), sampling=(2.0, 1.0, 1.0))
    assert got.is_cuda and got.dtype == torch.float64
    np.testing.assert_allclose(got.cpu().numpy(), ndi.distance_transform_edt(a, sampling=(2.0, 1.0, 1.0)),
                               rtol=1e-12, atol=0)


def test_cuda_feature_transform_on_the_device():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or "gpu" not in backends():
        pytest.skip("needs CUDA")
    rng = np.random.default_rng(3)
    a = rng.random((17, 40, 70)) > 0.02
    want = ndi.distance_transform_edt(a)
    for dtype in (torch.bool, torch.uint8, torch.float32):
        x = torch.as_tensor(a, device="cuda").to(dtype)
        d, i = ours.distance_transform_edt(x, return_indices=True)
        assert d.is_cuda and i.is_cuda and i.dtype == torch.int32 and tuple(i.shape) == (3,) + a.shape
        np.testing.assert_array_equal(d.cpu().numpy(), want)
        np.testing.assert_allclose(nearest_distance(i.cpu().numpy(), np.ones(3)), want, rtol=1e-12, atol=0)
        assert not a[tuple(i.cpu().numpy())].any()
    # Given outputs are filled in place; indices alone; wrong outputs refused.
    x = torch.as_tensor(a, device="cuda")
    d = torch.empty(a.shape, dtype=torch.float64, device="cuda")
    i = torch.empty((3,) + a.shape, dtype=torch.int32, device="cuda")
    assert ours.distance_transform_edt(x, return_indices=True, distances=d, indices=i) is None
    np.testing.assert_array_equal(d.cpu().numpy(), want)
    only = ours.distance_transform_edt(x, sampling=(1.0, 2.0, 0.5), return_distances=False, return_indices=True)
    np.testing.assert_allclose(nearest_distance(only.cpu().numpy(), (1.0, 2.0, 0.5)),
                               ndi.distance_transform_edt(a, sampling=(1.0, 2.0, 0.5)), rtol=1e-12, atol=0)
    with pytest.raises(ValueError):
        ours.distance_transform_edt(x, return_indices=True, indices=i[:2])
    with pytest.raises(ValueError):
        ours.distance_transform_edt(x, return_indices=True, indices=i.to(torch.int64))
    ones = torch.ones((3, 4), dtype=torch.bool, device="cuda")
    d, i = ours.distance_transform_edt(ones, return_indices=True)
    want_d, want_i = ndi.distance_transform_edt(np.ones((3, 4)), return_indices=True)
    np.testing.assert_array_equal(d.cpu().numpy(), want_d)
    np.testing.assert_array_equal(i.cpu().numpy(), want_i)
    cp = pytest.importorskip("cupy")
    d, i = ours.distance_transform_edt(cp.asarray(a), return_indices=True)
    assert isinstance(i, cp.ndarray) and i.dtype == cp.int32
    np.testing.assert_array_equal(d.get(), want)
    np.testing.assert_allclose(nearest_distance(i.get(), np.ones(3)), want, rtol=1e-12, atol=0)


def nearest_distance(indices, sampling, metric="euclidean"):
    """The distance from every element to the element its indices name."""
    grid = np.indices(indices.shape[1:])
    diff = (indices - grid).astype(np.float64)
    if metric == "taxicab":
        return np.abs(diff).sum(axis=0)
    if metric == "chessboard":
        return np.abs(diff).max(axis=0)
    s = np.asarray(sampling, np.float64).reshape((-1,) + (1,) * (indices.ndim - 1))
    return np.sqrt(((diff * s) ** 2).sum(axis=0))


@pytest.mark.parametrize("seed", range(24))
def test_feature_transforms_point_to_a_nearest_background(seed):
    rng = np.random.default_rng(100 + seed)
    rank = 1 + seed % 3
    shape = tuple(int(rng.integers(1, 14)) for _ in range(rank))
    a = rng.random(shape) > [0.05, 0.3, 0.7][seed % 3]
    if a.all():
        a.flat[-1] = False
    sampling = rng.uniform(0.5, 2.0, size=rank)
    want = ndi.distance_transform_edt(a, sampling=sampling)
    for backend in backends():
        d, i = ours.distance_transform_edt(a, sampling=sampling, return_indices=True, backend=backend)
        np.testing.assert_allclose(d, want, rtol=1e-12, atol=0)
        assert i.dtype == np.int32 and i.shape == (rank,) + shape
        np.testing.assert_allclose(nearest_distance(i, sampling), want, rtol=1e-12, atol=1e-12)
        assert not a[tuple(i)].any(), f"{backend}: every index names a background element"
    for metric in ("euclidean", "taxicab", "chessboard"):
        d, i = ours.distance_transform_bf(a, metric=metric, return_indices=True)
        want = ndi.distance_transform_bf(a, metric=metric)
        assert d.dtype == want.dtype
        np.testing.assert_array_equal(d, want)
        np.testing.assert_allclose(nearest_distance(i, np.ones(rank), metric), want, rtol=1e-12, atol=0)
    for metric in ("taxicab", "chessboard"):
        d, i = ours.distance_transform_cdt(a, metric=metric, return_indices=True)
        want = ndi.distance_transform_cdt(a, metric=metric)
        assert d.dtype == want.dtype
        np.testing.assert_array_equal(d, want)
        np.testing.assert_array_equal(nearest_distance(i, None, metric), want)


@pytest.mark.parametrize("seed", range(12))
def test_propagation_and_fill_holes_equal_scipy(seed):
    rng = np.random.default_rng(200 + seed)
    rank = 2 + seed % 2
    shape = tuple(int(rng.integers(3, 16)) for _ in range(rank))
    a = rng.random(shape) > 0.45
    structure = ndi.generate_binary_structure(rank, 1 + seed % rank)
    np.testing.assert_array_equal(ours.binary_fill_holes(a), ndi.binary_fill_holes(a))
    np.testing.assert_array_equal(ours.binary_fill_holes(a, structure=structure),
                                  ndi.binary_fill_holes(a, structure=structure))
    seed_mask = np.zeros(shape, bool)
    seed_mask.flat[int(rng.integers(0, a.size))] = True
    np.testing.assert_array_equal(ours.binary_propagation(seed_mask, mask=a), ndi.binary_propagation(seed_mask, mask=a))
    out = np.zeros(shape, bool)
    assert ours.binary_fill_holes(a, output=out) is None
    np.testing.assert_array_equal(out, ndi.binary_fill_holes(a))


def test_distance_arguments_as_scipy():
    a = np.array([[1, 1, 0, 1], [1, 1, 1, 1]])
    d, i = np.empty(a.shape), np.empty((2,) + a.shape, np.int32)
    assert ours.distance_transform_edt(a, return_indices=True, distances=d, indices=i) is None
    np.testing.assert_array_equal(d, ndi.distance_transform_edt(a))
    only = ours.distance_transform_edt(a, return_distances=False, return_indices=True)
    assert only.shape == (2,) + a.shape
    np.testing.assert_array_equal(ours.distance_transform_cdt(np.ones((2, 3))), ndi.distance_transform_cdt(np.ones((2, 3))))
    np.testing.assert_array_equal(ours.distance_transform_bf(np.ones((2, 2)), metric="taxicab"),
                                  ndi.distance_transform_bf(np.ones((2, 2)), metric="taxicab"))
    with pytest.raises(ValueError):
        ours.distance_transform_cdt(a, metric="euclidean")
    with pytest.raises(ValueError):
        ours.distance_transform_cdt(a, metric=np.ones((3, 3)))
    with pytest.raises(RuntimeError):
        ours.distance_transform_edt(a, return_distances=False)


def test_no_background_indices_and_argument_checks_as_scipy():
    ones = np.ones((3, 4), bool)
    for ours_fn, theirs_fn, kwargs in (
        (ours.distance_transform_edt, ndi.distance_transform_edt, {}),
        (ours.distance_transform_bf, ndi.distance_transform_bf, {"metric": "taxicab"}),
        (ours.distance_transform_cdt, ndi.distance_transform_cdt, {"metric": "taxicab"}),
    ):
        d, i = ours_fn(ones, return_indices=True, **kwargs)
        want_d, want_i = theirs_fn(ones, return_indices=True, **kwargs)
        np.testing.assert_array_equal(d, want_d)
        np.testing.assert_array_equal(i, want_i)
        with pytest.raises(RuntimeError):
            ours_fn(ones, indices=np.zeros((2, 3, 4), np.int32), **kwargs)
    with pytest.raises(RuntimeError):
        ours.distance_transform_edt(ones, return_indices=True, indices=np.zeros((2, 3, 4), np.int64))
    with pytest.raises(RuntimeError):
        ours.distance_transform_bf(ones, metric="hamming")
    d = np.empty((1, 4), np.float32)
    with pytest.raises(RuntimeError):
        ours.distance_transform_edt(np.array([[1, 1, 0, 1]]), distances=d, backend="cpu", return_indices=True)


def test_empty_cache_at_any_time():
    """empty_cache before and after GPU calls; the calls after it still give
    scipy's answer."""
    gpu_waterz.empty_cache()
    a = np.array([[1, 1, 0, 1], [1, 1, 1, 1]])
    for backend in backends():
        np.testing.assert_array_equal(ours.distance_transform_edt(a, backend=backend), ndi.distance_transform_edt(a))
        gpu_waterz.empty_cache()
        np.testing.assert_array_equal(ours.distance_transform_edt(a, backend=backend), ndi.distance_transform_edt(a))

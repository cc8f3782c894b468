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


def _items(a, batch_dims):
    """The arrays of a batch one by one."""
    return a.reshape((-1,) + a.shape[batch_dims:])


@pytest.mark.parametrize("seed", range(12))
def test_batches_equal_their_arrays_one_by_one(seed):
    rng = np.random.default_rng(300 + seed)
    batch_dims = 1 + seed % 2
    rank = 1 + seed % 3
    batch = tuple(int(rng.integers(1, 4)) for _ in range(batch_dims))
    spatial = tuple(int(rng.integers(1, 12)) for _ in range(rank))
    a = rng.random(batch + spatial) > [0.05, 0.3, 0.7][seed % 3]
    flat = a.reshape((-1,) + spatial)
    flat[0] = True  # an array without background
    sampling = rng.uniform(0.5, 2.0, size=rank)
    for backend in backends():
        d = ours.distance_transform_edt(a, sampling=sampling, backend=backend, batch_dims=batch_dims)
        d2, i = ours.distance_transform_edt(a, return_indices=True, backend=backend, batch_dims=batch_dims)
        assert d.shape == a.shape and i.shape == batch + (rank,) + spatial and i.dtype == np.int32
        for item, got, got2, ind in zip(_items(a, batch_dims), _items(d, batch_dims), _items(d2, batch_dims),
                                        i.reshape((-1, rank) + spatial)):
            np.testing.assert_allclose(got, ndi.distance_transform_edt(item, sampling=sampling), rtol=1e-12, atol=0)
            want, want_i = ndi.distance_transform_edt(item, return_indices=True)
            np.testing.assert_array_equal(got2, want)
            if item.all():
                np.testing.assert_array_equal(ind, want_i)
            else:
                np.testing.assert_allclose(nearest_distance(ind, np.ones(rank)), want, rtol=1e-12, atol=0)
        for metric in ("taxicab", "chessboard"):
            d, i = ours.distance_transform_cdt(a, metric=metric, return_indices=True, backend=backend,
                                               batch_dims=batch_dims)
            assert d.dtype == np.int32 and i.shape == batch + (rank,) + spatial
            for item, got, ind in zip(_items(a, batch_dims), _items(d, batch_dims), i.reshape((-1, rank) + spatial)):
                want, want_i = ndi.distance_transform_cdt(item, metric=metric, return_indices=True)
                np.testing.assert_array_equal(got, want)
                if item.all():
                    np.testing.assert_array_equal(ind, want_i)
                else:
                    np.testing.assert_array_equal(nearest_distance(ind, None, metric), want)
    d, i = ours.distance_transform_bf(a, metric="taxicab", return_indices=True, batch_dims=batch_dims)
    for item, got in zip(_items(a, batch_dims), _items(d, batch_dims)):
        np.testing.assert_array_equal(got, ndi.distance_transform_bf(item, metric="taxicab"))
    assert i.shape == batch + (rank,) + spatial


def test_batch_dims_and_backend_checks():
    a = np.ones((2, 3, 4), bool)
    for bad in (1.5, "1"):
        with pytest.raises(TypeError):
            ours.distance_transform_edt(a, batch_dims=bad)
        with pytest.raises(TypeError):
            ours.distance_transform_cdt(a, batch_dims=bad)
    for bad in (-1, 3):
        with pytest.raises(ValueError):
            ours.distance_transform_edt(a, batch_dims=bad)
        with pytest.raises(ValueError):
            ours.distance_transform_cdt(a, batch_dims=bad)
    with pytest.raises(ValueError):
        ours.distance_transform_cdt(np.ones(12_289, bool), backend="gpu")
    with pytest.raises(ValueError):
        ours.distance_transform_cdt(a, metric="euclidean")
    with pytest.raises(ValueError):
        ours.distance_transform_cdt(a, backend="tpu")
    # Rank 0 is refused (np.ascontiguousarray would make it rank 1); a
    # batch of no arrays gives empty results of the right shapes.
    for f in (ours.distance_transform_cdt, ours.distance_transform_bf):
        with pytest.raises(RuntimeError):
            f(np.array(1))
    with pytest.raises(ValueError):
        ours.distance_transform_edt(np.array(1))
    for backend in backends():
        d, i = ours.distance_transform_cdt(np.ones((0, 3, 4), bool), return_indices=True, batch_dims=1,
                                           backend=backend)
        assert d.shape == (0, 3, 4) and i.shape == (0, 2, 3, 4)
        d, i = ours.distance_transform_edt(np.ones((0, 3, 4), bool), return_indices=True, batch_dims=1,
                                           backend=backend)
        assert d.shape == (0, 3, 4) and i.shape == (0, 2, 3, 4)
    # Longer axes take the CPU under 'auto'.
    long = np.ones(12_289, bool)
    long[5] = False
    np.testing.assert_array_equal(ours.distance_transform_cdt(long, metric="taxicab"),
                                  ndi.distance_transform_cdt(long, metric="taxicab"))


def test_cuda_batches_and_chamfer_on_the_device():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or "gpu" not in backends():
        pytest.skip("needs CUDA")
    rng = np.random.default_rng(7)
    a = rng.random((3, 2, 9, 20, 30)) > 0.03
    a[0, 1] = True
    x = torch.as_tensor(a, device="cuda")
    d, i = ours.distance_transform_edt(x, return_indices=True, batch_dims=2)
    assert d.is_cuda and i.is_cuda and tuple(i.shape) == (3, 2, 3, 9, 20, 30)
    want_d, want_i = ours.distance_transform_edt(a, return_indices=True, batch_dims=2, backend="cpu")
    np.testing.assert_array_equal(d.cpu().numpy(), want_d)
    for item, ind, want in zip(_items(a, 2), i.cpu().numpy().reshape((-1, 3, 9, 20, 30)), _items(want_d, 2)):
        if item.all():
            np.testing.assert_array_equal(ind, ndi.distance_transform_edt(item, return_indices=True)[1])
        else:
            np.testing.assert_allclose(nearest_distance(ind, np.ones(3)), want, rtol=1e-12, atol=0)
    for metric in ("taxicab", "chessboard"):
        for dtype in (torch.bool, torch.float32):
            d, i = ours.distance_transform_cdt(x.to(dtype), metric=metric, return_indices=True, batch_dims=2)
            assert d.is_cuda and d.dtype == torch.int32 and i.dtype == torch.int32
            for item, got, ind in zip(_items(a, 2), d.cpu().numpy().reshape((-1, 9, 20, 30)),
                                      i.cpu().numpy().reshape((-1, 3, 9, 20, 30))):
                want, want_i = ndi.distance_transform_cdt(item, metric=metric, return_indices=True)
                np.testing.assert_array_equal(got, want)
                if item.all():
                    np.testing.assert_array_equal(ind, want_i)
                else:
                    np.testing.assert_array_equal(nearest_distance(ind, None, metric), want)
        out = torch.empty(a.shape, dtype=torch.int32, device="cuda")
        assert ours.distance_transform_cdt(x, metric=metric, distances=out, batch_dims=2) is None
        np.testing.assert_array_equal(out.cpu().numpy(),
                                      ours.distance_transform_cdt(a, metric=metric, batch_dims=2, backend="cpu"))
        with pytest.raises(ValueError):
            ours.distance_transform_cdt(x, metric=metric, distances=out.to(torch.float64), batch_dims=2)
    # The brute force and a long chamfer axis: on the host, results back on the device.
    small = torch.as_tensor(a[0, 0, :3, :5, :6], device="cuda")
    d = ours.distance_transform_bf(small, metric="chessboard")
    assert d.is_cuda
    np.testing.assert_array_equal(d.cpu().numpy(), ndi.distance_transform_bf(small.cpu().numpy(), metric="chessboard"))
    long = np.ones((2, 12_289), bool)
    long[:, 7] = False
    d = ours.distance_transform_cdt(torch.as_tensor(long, device="cuda"), metric="taxicab", batch_dims=1)
    assert d.is_cuda
    np.testing.assert_array_equal(d.cpu().numpy()[1], ndi.distance_transform_cdt(long[1], metric="taxicab"))
    cp = pytest.importorskip("cupy")
    d, i = ours.distance_transform_cdt(cp.asarray(a), metric="taxicab", return_indices=True, batch_dims=2)
    assert isinstance(d, cp.ndarray) and d.dtype == cp.int32
    np.testing.assert_array_equal(d.get(), ours.distance_transform_cdt(a, metric="taxicab", batch_dims=2,
                                                                       backend="cpu"))


def test_the_cli_distance_transforms_equal_scipy(tmp_path):
    """`gpu-waterz ndimage --op distance-transform-edt/-cdt` on a file:
    scipy's float64 and int32 distances, on the CPU and (when one is
    usable) the GPU; a bad metric is refused with no output."""
    from conftest import BIN, run_cli

    if not BIN.exists():
        pytest.skip(f"SKIPPED: the CLI is not built at {BIN}")
    rng = np.random.default_rng(23)
    volume = (rng.random((11, 14, 37)) > 0.03).astype(np.uint8)
    source = tmp_path / "m.npy"
    np.save(source, volume)
    for backend in backends():
        out = tmp_path / f"edt_{backend}.npy"
        run_cli("ndimage", "--op", "distance-transform-edt", "--input", source, "--out", out, "--backend", backend)
        np.testing.assert_array_equal(np.load(out), ndi.distance_transform_edt(volume))
        for metric in ("taxicab", "chessboard"):
            out = tmp_path / f"cdt_{metric}_{backend}.npy"
            run_cli("ndimage", "--op", "distance-transform-cdt", "--metric", metric, "--input", source, "--out", out,
                    "--backend", backend)
            got, want = np.load(out), ndi.distance_transform_cdt(volume, metric=metric)
            assert got.dtype == want.dtype == np.int32
            np.testing.assert_array_equal(got, want, err_msg=f"{metric} on the {backend}")
    out = tmp_path / "bad.npy"
    proc = run_cli("ndimage", "--op", "distance-transform-cdt", "--metric", "euclidean", "--input", source, "--out",
                   out, check=False)
    assert proc.returncode == 1 and "--metric" in proc.stderr and not out.exists(), proc.stderr

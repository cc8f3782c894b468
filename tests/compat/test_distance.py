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
    with pytest.raises(NotImplementedError):
        ours.distance_transform_edt(a, return_indices=True)
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

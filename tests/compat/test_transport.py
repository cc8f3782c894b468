"""gpu_waterz.transport.sinkhorn against POT (ot.sinkhorn, ot.sinkhorn_log)
and against plain torch: entropic costs, zero-mass bins, small
regularisation, gradients (finite differences, autograd through a plain
torch Sinkhorn). Host arrays run on the GPU when one is usable ('auto'),
else on the CPU reference; the CUDA tests skip visibly without a GPU, and
fail with GPU_WATERZ_REQUIRE_GPU=1."""

import os

import numpy as np
import pytest

from conftest import gpu_backend_error

gpu_waterz = pytest.importorskip("gpu_waterz")
from gpu_waterz import transport  # noqa: E402

ot = pytest.importorskip("ot")

GPU_ERROR = gpu_backend_error()


def histograms(rng, n, d, zeros=0.0, dtype=np.float64):
    h = rng.uniform(0.05, 1.0, size=(n, d))
    h[rng.random((n, d)) < zeros] = 0.0
    h[h.sum(axis=1) == 0, 0] = 1.0
    return (h / h.sum(axis=1, keepdims=True)).astype(dtype)


def line_cost(d, dtype=np.float64):
    x = np.arange(d) / max(d, 2)
    return ((x[:, None] - x[None, :]) ** 2).astype(dtype)


def pot_cost(a, b, M, reg, log_domain):
    """POT's plan (ot.sinkhorn with method 'sinkhorn' or 'sinkhorn_log'),
    then the entropic cost <P, M> + reg sum P log P. Zero-mass bins are
    left out of POT's problem (the same problem: they carry no mass), since
    its scaling method divides by the histograms."""
    rows, cols = a > 0, b > 0
    # float32 histograms are renormalised in float64: unequal masses never
    # meet POT's tolerance.
    a, b = a[rows].astype(np.float64), b[cols].astype(np.float64)
    a, b, M = a / a.sum(), b / b.sum(), M[np.ix_(rows, cols)]
    P = ot.sinkhorn(a, b, M.astype(np.float64), reg,
                    method="sinkhorn_log" if log_domain else "sinkhorn", numItermax=20000, stopThr=1e-13)
    positive = P > 0
    return float((P * M).sum() + reg * (P[positive] * np.log(P[positive])).sum())


@pytest.mark.parametrize("log_domain", [False, True])
@pytest.mark.parametrize("dtype,rel", [(np.float64, 1e-10), (np.float32, 1e-5)])
def test_costs_equal_pots(log_domain, dtype, rel):
    rng = np.random.default_rng(1)
    for n, d, zeros in [(1, 2, 0.0), (4, 17, 0.0), (3, 64, 0.2), (2, 200, 0.0)]:
        a, b = histograms(rng, n, d, zeros, dtype), histograms(rng, n, d, zeros, dtype)
        M = line_cost(d, dtype)
        reg = 0.05
        got = transport.sinkhorn(a, b, M, reg, num_iter=20000 if dtype == np.float64 else 3000,
                                 tol=1e-12 if dtype == np.float64 else 1e-6,
                                 log_domain=log_domain)
        assert got.dtype == dtype and got.shape == (n,)
        for t in range(n):
            want = pot_cost(a[t], b[t], M, reg, log_domain)
            assert abs(got[t] - want) <= rel * max(abs(want), 1e-3), (n, d, zeros, t, got[t], want)


def test_single_pairs_plans_potentials_and_bad_input():
    rng = np.random.default_rng(2)
    a, b = histograms(rng, 1, 30)[0], histograms(rng, 1, 30)[0]
    M = line_cost(30)
    cost, info = transport.sinkhorn(a, b, M, 0.1, tol=1e-12, return_plan=True, return_potentials=True)
    assert np.ndim(cost) == 0
    P = info["plan"]
    np.testing.assert_allclose(P.sum(axis=1), a, atol=1e-10)
    np.testing.assert_allclose(P.sum(axis=0), b, atol=1e-10)
    np.testing.assert_allclose(P, ot.sinkhorn(a, b, M, 0.1, stopThr=1e-13, numItermax=20000), atol=1e-10)
    assert info["f"].shape == (30,) and info["g"].shape == (30,)
    with pytest.raises(ValueError, match="reg"):
        transport.sinkhorn(a, b, M, 0.0)
    with pytest.raises(ValueError, match="M must be"):
        transport.sinkhorn(a, b, M[:5, :5], 0.1)
    with pytest.raises(ValueError, match="histograms"):
        transport.sinkhorn(-a, b, M, 0.1)
    with pytest.raises(ValueError, match="same shape"):
        transport.sinkhorn(a, b[:10], M, 0.1)


def test_zero_mass_bins_and_a_small_regularisation_stay_finite():
    rng = np.random.default_rng(3)
    a, b = histograms(rng, 5, 50, zeros=0.4), histograms(rng, 5, 50, zeros=0.4)
    M = line_cost(50)
    cost, info = transport.sinkhorn(a, b, M, 1e-4, num_iter=500, tol=0, log_domain=True, return_potentials=True)
    assert np.isfinite(cost).all()
    assert not np.isnan(info["f"]).any() and not np.isnan(info["g"]).any()
    assert (np.isneginf(info["f"]) == (a == 0)).all(), "a zero bin's potential is -inf"
    cost32 = transport.sinkhorn(a.astype(np.float32), b.astype(np.float32), M.astype(np.float32), 1e-4,
                                num_iter=500, tol=0, log_domain=True)
    assert np.isfinite(cost32).all()


def torch_or_skip(cuda):
    torch = pytest.importorskip("torch")
    if cuda:
        if GPU_ERROR is not None or not torch.cuda.is_available():
            if os.environ.get("GPU_WATERZ_REQUIRE_GPU") == "1":
                pytest.fail(f"GPU_WATERZ_REQUIRE_GPU=1 but no CUDA: {GPU_ERROR}")
            pytest.skip(f"SKIPPED CUDA test: {GPU_ERROR or 'torch has no CUDA'}")
    return torch


def plain_torch_log_sinkhorn(torch, a, b, M, reg, iterations):
    """Sinkhorn in the log domain with torch.logsumexp (autograd flows
    through every iteration); returns the entropic cost."""
    f = torch.zeros_like(a)
    g = torch.zeros_like(b)
    for _ in range(iterations):
        g = reg * torch.log(b) - reg * torch.logsumexp((f[:, :, None] - M[None]) / reg, dim=1)
        f = reg * torch.log(a) - reg * torch.logsumexp((g[:, None, :] - M[None]) / reg, dim=2)
    P = torch.exp((f[:, :, None] + g[:, None, :] - M[None]) / reg)
    return (P * (f[:, :, None] + g[:, None, :])).sum(dim=(1, 2))


@pytest.mark.parametrize("cuda", [False, True])
def test_gradients_are_the_centred_potentials(cuda):
    torch = torch_or_skip(cuda)
    device = "cuda" if cuda else "cpu"
    rng = np.random.default_rng(4)
    n, d, reg = 3, 24, 0.1
    a = torch.tensor(histograms(rng, n, d), device=device, requires_grad=True)
    b = torch.tensor(histograms(rng, n, d), device=device, requires_grad=True)
    M = torch.tensor(line_cost(d), device=device)
    for log_domain in (False, True):
        cost = transport.sinkhorn(a, b, M, reg, num_iter=5000, tol=1e-13, log_domain=log_domain)
        assert cost.device.type == device and cost.shape == (n,)
        weights = torch.arange(1.0, n + 1, dtype=cost.dtype, device=device)
        (cost * weights).sum().backward()
        ga, gb = a.grad.clone(), b.grad.clone()
        a.grad = b.grad = None
        # Autograd through a plain torch Sinkhorn (converged), projected to
        # mass-preserving directions (its gradient's mean is arbitrary).
        a2, b2 = a.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
        (plain_torch_log_sinkhorn(torch, a2, b2, M, reg, 3000) * weights).sum().backward()
        centre = lambda x: x - x.mean(dim=1, keepdim=True)  # noqa: E731
        torch.testing.assert_close(centre(ga), centre(a2.grad), atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(centre(gb), centre(b2.grad), atol=1e-6, rtol=1e-5)
        # Finite differences along e_i - e_j (mass preserved).
        eps = 1e-6
        for i, j in [(0, 5), (7, 3), (20, 11)]:
            delta = torch.zeros_like(a)
            delta[:, i] += eps
            delta[:, j] -= eps
            with torch.no_grad():
                up = transport.sinkhorn(a + delta, b, M, reg, num_iter=5000, tol=1e-13, log_domain=log_domain)
                down = transport.sinkhorn(a - delta, b, M, reg, num_iter=5000, tol=1e-13, log_domain=log_domain)
            numeric = (up - down) / (2 * eps)
            # ga is the gradient of sum(cost * weights).
            analytic = (ga[:, i] - ga[:, j]) / weights
            torch.testing.assert_close(numeric, analytic, atol=1e-5, rtol=1e-4)


def test_cuda_tensors_in_float32_and_float64_equal_the_host_path():
    torch = torch_or_skip(True)
    rng = np.random.default_rng(5)
    for n, d in [(1, 4096), (4096, 16), (33, 257)]:
        a, b = histograms(rng, n, d), histograms(rng, n, d)
        M = line_cost(d)
        for dtype, rel in ((np.float64, 1e-10), (np.float32, 1e-5)):
            want = transport.sinkhorn(a.astype(dtype), b.astype(dtype), M.astype(dtype), 0.05, num_iter=50, tol=0,
                                      backend="cpu" if n * d * d <= 33 * 257 * 257 else "gpu")
            got = transport.sinkhorn(*(torch.tensor(x.astype(dtype), device="cuda") for x in (a, b, M)), 0.05,
                                     num_iter=50, tol=0)
            assert got.is_cuda and got.dtype == torch.from_numpy(np.zeros(1, dtype)).dtype
            np.testing.assert_allclose(got.cpu().numpy(), want, rtol=rel)

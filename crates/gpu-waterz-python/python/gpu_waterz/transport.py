"""Batched entropic optimal transport (Sinkhorn) on the GPU.

``sinkhorn(a, b, M, reg)`` solves, for each of ``n`` histogram pairs
``a[t]``, ``b[t]`` of ``d`` bins sharing the ``d x d`` cost matrix ``M``,
the entropic problem ``min <P, M> + reg * sum P log P`` over the plans ``P``
with marginals ``a[t]`` and ``b[t]``, and returns that cost per pair. It
takes numpy arrays (result on the host) and torch tensors, CUDA (read in
place, result on the same device) or CPU; with torch it is differentiable
with respect to ``a`` and ``b``: the gradients are the centred dual
potentials (envelope theorem), never a derivative through the iterations,
so it drops into a training loop as a loss.

Two formulations, as POT's ``ot.sinkhorn`` (``log_domain=False``: scalings
and the Gibbs kernel ``exp(-M / reg)``, fast) and ``ot.sinkhorn_log``
(``log_domain=True``: potentials and log-sum-exp, finite for any ``reg``).
A bin with zero mass has potential ``-inf`` (and that gradient), never NaN.
"""

import numpy as np

from . import _native

__all__ = ["sinkhorn"]

_BACKENDS = ("auto", "gpu", "cpu")


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


def _check_settings(reg, num_iter, tol, backend):
    if not (np.isfinite(reg) and reg > 0):
        raise ValueError(f"reg must be a finite number > 0, not {reg!r}")
    if int(num_iter) != num_iter or num_iter < 0:
        raise ValueError(f"num_iter must be an integer >= 0, not {num_iter!r}")
    if not (np.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol must be a finite number >= 0, not {tol!r}")
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, not {backend!r}")


def _batched(a, b, M):
    """The shapes: a and b (d,) or (n, d), M (d, d); returns (n, d, batched)."""
    if a.ndim not in (1, 2) or b.ndim != a.ndim:
        raise ValueError(f"a and b must both be (d,) or (n, d), not {tuple(a.shape)} and {tuple(b.shape)}")
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"a and b must have the same shape, not {tuple(a.shape)} and {tuple(b.shape)}")
    d = a.shape[-1]
    if tuple(M.shape) != (d, d):
        raise ValueError(f"M must be ({d}, {d}), the bins of a and b, not {tuple(M.shape)}")
    n = a.shape[0] if a.ndim == 2 else 1
    return n, d, a.ndim == 2


def _solve_numpy(a, b, M, reg, num_iter, tol, log_domain, backend):
    """(cost (n,), f (n, d), g (n, d), iterations, marginal error) of host arrays."""
    dtype = np.result_type(a.dtype, b.dtype, M.dtype, np.float32)
    if dtype not in (np.float32, np.float64):
        dtype = np.float64
    n, d, _ = _batched(a, b, M)
    a2 = np.ascontiguousarray(a, dtype=dtype).reshape(n, d)
    b2 = np.ascontiguousarray(b, dtype=dtype).reshape(n, d)
    M2 = np.ascontiguousarray(M, dtype=dtype)
    solve = _native.sinkhorn_f32 if dtype == np.float32 else _native.sinkhorn_f64
    cost, f, g, iterations, error, _ = solve(a2, b2, M2, float(reg), int(num_iter), float(tol), bool(log_domain),
                                             backend, 0)
    return cost, f, g, iterations, error


def _solve_cuda(a, b, M, reg, num_iter, tol, log_domain):
    """The same for CUDA torch tensors (read in place and checked on the
    device; f, g, the costs and the centred potentials allocated here), with
    the centred potentials last, as one (2, n, d) tensor."""
    import torch

    if not (a.device == b.device == M.device):
        raise ValueError(f"a, b and M must be on one device, not {a.device}, {b.device}, {M.device}")
    dtype = torch.promote_types(torch.promote_types(a.dtype, b.dtype), M.dtype)
    if dtype not in (torch.float32, torch.float64):
        dtype = torch.float64
    n, d, _ = _batched(a, b, M)
    a2 = a.detach().to(dtype).reshape(n, d).contiguous()
    b2 = b.detach().to(dtype).reshape(n, d).contiguous()
    M2 = M.detach().to(dtype).contiguous()
    block = torch.empty((4, n, d), dtype=dtype, device=a.device)
    f, g, f_centred, g_centred = block.unbind(0)
    cost = torch.empty((max(n, 1),), dtype=dtype, device=a.device)
    # The native side queues on the device's default stream: torch's work
    # on its current stream must be done first.
    torch.cuda.synchronize(a.device)
    pointers = [x.data_ptr() for x in (a2, b2, M2, f, g, cost, f_centred, g_centred)]
    iterations, error = _native.sinkhorn_cuda(
        pointers, n, d, "f4" if dtype == torch.float32 else "f8", a.device.index or 0, float(reg), int(num_iter),
        float(tol), bool(log_domain))
    return cost[:n], f, g, iterations, error, block[2:]


def _centred(p):
    """Potentials minus their mean over the finite bins of each pair."""
    import torch

    finite = torch.isfinite(p)
    count = finite.sum(dim=-1, keepdim=True).clamp(min=1)
    mean = torch.where(finite, p, torch.zeros_like(p)).sum(dim=-1, keepdim=True) / count
    return p - mean


def _function():
    import torch

    class SinkhornFunction(torch.autograd.Function):
        """The entropic cost, its gradients the centred dual potentials."""

        @staticmethod
        def forward(ctx, a, b, M, reg, num_iter, tol, log_domain, backend):
            if a.is_cuda:
                cost, f, g, iterations, error, centred = _solve_cuda(a, b, M, reg, num_iter, tol, log_domain)
            else:
                cost, f, g, iterations, error = _solve_numpy(
                    a.detach().numpy(), b.detach().numpy(), M.detach().numpy(), reg, num_iter, tol, log_domain,
                    backend)
                dtype = torch.promote_types(torch.promote_types(a.dtype, b.dtype), M.dtype)
                cost, f, g = (torch.from_numpy(np.asarray(x)).to(dtype) for x in (cost, f, g))
                centred = torch.stack((_centred(f), _centred(g)))
            ctx.save_for_backward(centred)
            ctx.mark_non_differentiable(f, g)
            # The potentials take no gradient: autograd need not fill zeros
            # for them (two (n, d) tensors per backward) before calling
            # backward, which then sees None for them.
            ctx.set_materialize_grads(False)
            ctx.info = (iterations, error)
            return cost, f, g

        @staticmethod
        def backward(ctx, grad_cost, _grad_f, _grad_g):
            if grad_cost is None:
                return None, None, None, None, None, None, None, None
            (centred,) = ctx.saved_tensors
            # Both gradients in one product (one kernel, not two).
            grads = grad_cost[None, :, None] * centred
            grad_a = grads[0] if ctx.needs_input_grad[0] else None
            grad_b = grads[1] if ctx.needs_input_grad[1] else None
            return grad_a, grad_b, None, None, None, None, None, None

    return SinkhornFunction


_FUNCTION = None


def sinkhorn(a, b, M, reg, num_iter=1000, tol=1e-9, log_domain=False, return_plan=False,
             return_potentials=False, backend="auto"):
    """The entropic optimal transport cost of each histogram pair.

    Parameters
    ----------
    a, b: (d,) or (n, d) arrays or tensors, float32 or float64 (others
        become float64), values >= 0: the histograms (each pair should have
        equal mass).
    M: (d, d): the cost matrix shared by all pairs, finite.
    reg: float > 0: the entropic regularisation.
    num_iter: the most iterations (each updates both sides), POT's
        numItermax.
    tol: stop once every pair's second-marginal L1 error is below it
        (checked every 10 iterations); 0 runs all iterations. POT's stopThr.
    log_domain: iterate potentials with log-sum-exp (``ot.sinkhorn_log``)
        instead of scalings (``ot.sinkhorn``); use it for small ``reg``.
    return_plan, return_potentials: also return the plans (n, d, d) and the
        potentials f, g (n, d), with the iterations run and the final
        marginal error, in a dict.
    backend: 'auto' (the GPU for CUDA tensors and when one is usable, else
        the CPU), 'gpu' or 'cpu', for host inputs; CUDA tensors always run
        on their device.

    Returns
    -------
    The costs ``<P, M> + reg * sum P log P`` (shape (n,), or a scalar for
    (d,) inputs), as numpy for numpy inputs and as a tensor on the inputs'
    device for torch; with ``return_plan`` or ``return_potentials``, the
    tuple ``(cost, info)``. With torch, the cost is differentiable with
    respect to ``a`` and ``b`` (not ``M``: a ``M`` that requires grad
    raises).
    """
    _check_settings(reg, num_iter, tol, backend)
    torch_in = [_is_torch(x) for x in (a, b, M)]
    if any(torch_in):
        import torch

        global _FUNCTION
        if _FUNCTION is None:
            _FUNCTION = _function()
        if not all(torch_in):
            raise TypeError("a, b and M must all be torch tensors, or none of them")
        if M.requires_grad:
            raise NotImplementedError("the gradient with respect to M is not provided; pass M.detach()")
        n, d, batched = _batched(a, b, M)
        a2 = a if batched else a.unsqueeze(0)
        b2 = b if batched else b.unsqueeze(0)
        if a2.is_cuda != b2.is_cuda or a2.is_cuda != M.is_cuda:
            raise ValueError("a, b and M must all be CUDA tensors, or all CPU tensors")
        cost, f, g = _FUNCTION.apply(a2, b2, M, float(reg), int(num_iter), float(tol), bool(log_domain), backend)
        plan = None
        if return_plan:
            plan = torch.exp((f[:, :, None] + g[:, None, :] - M.detach().to(f.dtype)[None]) / reg)
    else:
        a, b, M = np.asarray(a), np.asarray(b), np.asarray(M)
        n, d, batched = _batched(a, b, M)
        cost, f, g, iterations, error = _solve_numpy(a, b, M, reg, num_iter, tol, log_domain, backend)
        plan = None
        if return_plan:
            with np.errstate(under="ignore"):
                plan = np.exp((f[:, :, None] + g[:, None, :] - M.astype(f.dtype)[None]) / reg)
    if not batched:
        cost = cost[0]
    if not (return_plan or return_potentials):
        return cost
    info = {}
    if return_potentials:
        info["f"], info["g"] = (f, g) if batched else (f[0], g[0])
    if return_plan:
        info["plan"] = plan if batched else plan[0]
    return cost, info

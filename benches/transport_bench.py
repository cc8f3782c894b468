"""gpu_waterz.transport.sinkhorn against plain torch on the same GPU and the
same data, in the same run (the anchors of the transport issue).

Usage: python3 benches/transport_bench.py [--json OUT]

Each figure is the median of 15 timed calls after 3 warm-ups, with
torch.cuda.synchronize() around each call. The torch anchors:
scaling domain, two matrix products per iteration (v = b / (u K),
u = a / (v K^T)); log domain through torch.logsumexp. gpu_waterz is timed
as users call it (tensors in, costs out: the Gibbs kernel, the iterations,
the potentials and the costs). The backward is timed as a training loop
runs it (right after a forward and its synchronisation), beside torch's
own floor for it: a plain autograd function with the same backward after
a forward that keeps the GPU busy as long. Prints one JSON object.
"""

import argparse
import json
import statistics
import time

import numpy as np
import torch

from gpu_waterz import transport


def timed(fn, repeats=15, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def data(n, d, dtype=torch.float32, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.rand((n, d), generator=g, dtype=torch.float64) + 0.05
    b = torch.rand((n, d), generator=g, dtype=torch.float64) + 0.05
    a, b = a / a.sum(1, keepdim=True), b / b.sum(1, keepdim=True)
    x = torch.arange(d, dtype=torch.float64) / d
    M = (x[:, None] - x[None, :]) ** 2
    return (t.to(dtype).cuda() for t in (a, b, M))


def torch_scaling(a, b, M, reg, iterations):
    K = torch.exp(-M / reg)
    u = torch.full_like(a, 1.0 / a.shape[1])
    v = torch.full_like(b, 1.0 / b.shape[1])
    for _ in range(iterations):
        v = b / (u @ K)
        u = a / (v @ K.T)
    return u, v


def torch_log(a, b, M, reg, iterations):
    f = torch.zeros_like(a)
    g = torch.zeros_like(b)
    la, lb = torch.log(a), torch.log(b)
    for _ in range(iterations):
        g = reg * lb - reg * torch.logsumexp((f[:, :, None] - M[None]) / reg, dim=1)
        f = reg * la - reg * torch.logsumexp((g[:, None, :] - M[None]) / reg, dim=2)
    return f, g


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    report = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": []}
    reg = 0.05
    for n, d, iterations in [(1, 1024, 100), (4, 1024, 100), (16, 1024, 100), (256, 1024, 100), (1024, 1024, 100),
                             (2048, 1024, 100), (300, 4096, 100)]:
        a, b, M = data(n, d)
        ours = timed(lambda: transport.sinkhorn(a, b, M, reg, num_iter=iterations, tol=0))
        anchor = timed(lambda: torch_scaling(a, b, M, reg, iterations))
        report["rows"].append({"domain": "scaling", "dtype": "float32", "n": n, "d": d, "iterations": iterations,
                               "gpu_waterz_ms": ours * 1e3, "torch_ms": anchor * 1e3, "speedup": anchor / ours})
    for n, d, iterations in [(256, 512, 20), (16, 512, 20), (1024, 1024, 20)]:
        a, b, M = data(n, d)
        ours = timed(lambda: transport.sinkhorn(a, b, M, reg, num_iter=iterations, tol=0, log_domain=True))
        anchor = timed(lambda: torch_log(a, b, M, reg, iterations), repeats=5 if n >= 1024 else 15)
        report["rows"].append({"domain": "log", "dtype": "float32", "n": n, "d": d, "iterations": iterations,
                               "gpu_waterz_ms": ours * 1e3, "torch_ms": anchor * 1e3, "speedup": anchor / ours})
    # float64, and the agreement of the two implementations.
    a, b, M = data(256, 512, torch.float64)
    ours = timed(lambda: transport.sinkhorn(a, b, M, reg, num_iter=20, tol=0, log_domain=True))
    anchor = timed(lambda: torch_log(a, b, M, reg, 20))
    cost = transport.sinkhorn(a, b, M, reg, num_iter=20, tol=0, log_domain=True)
    f, g = torch_log(a, b, M, reg, 20)
    P = torch.exp((f[:, :, None] + g[:, None, :] - M[None]) / reg)
    torch_cost = (P * (f[:, :, None] + g[:, None, :])).sum(dim=(1, 2))
    report["rows"].append({"domain": "log", "dtype": "float64", "n": 256, "d": 512, "iterations": 20,
                           "gpu_waterz_ms": ours * 1e3, "torch_ms": anchor * 1e3, "speedup": anchor / ours,
                           "max_rel_cost_difference": float(((cost - torch_cost).abs() / torch_cost.abs()).max())})
    # Backward against forward (a loss in a training loop).
    a, b, M = data(256, 512)
    a.requires_grad_(True)
    b.requires_grad_(True)

    def forward():
        return transport.sinkhorn(a, b, M, reg, num_iter=100, tol=0, log_domain=True).sum()

    loss = forward()
    forward_s = timed(forward)

    def backward_after(make_loss):
        # As a training loop between steps (optimizer.zero_grad() sets the
        # gradients to None): each backward writes fresh gradients rather
        # than adding to the last step's.
        a.grad = None
        b.grad = None
        loss = make_loss()
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss.backward()
        torch.cuda.synchronize()
        return time.perf_counter() - start

    backward_s = statistics.median(backward_after(forward) for _ in range(15))

    # torch's own floor for the same backward: a plain autograd function
    # with the same saved tensor and the same one-product backward, whose
    # forward keeps the GPU busy as long as the solve (the host waits as
    # long before the backward starts, which costs the backward time of its
    # own: the autograd threads wake from a longer idle).
    class Plain(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(torch.stack((a, b)).detach())
            ctx.set_materialize_grads(False)
            return (a * b).sum(-1).detach()

        @staticmethod
        def backward(ctx, grad):
            (saved,) = ctx.saved_tensors
            grads = grad[None, :, None] * saved
            return grads[0], grads[1]

    # torch.cuda._sleep's cycles for the forward's time, calibrated.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    torch.cuda.synchronize()
    cycles = int(10_000_000 * forward_s * 1e3 / start.elapsed_time(end))

    def plain_forward():
        torch.cuda._sleep(cycles)
        return Plain.apply(a, b).sum()

    floor_s = statistics.median(backward_after(plain_forward) for _ in range(15))
    report["backward"] = {"n": 256, "d": 512, "iterations": 100, "forward_ms": forward_s * 1e3,
                          "backward_ms": backward_s * 1e3, "ratio": backward_s / forward_s,
                          "torch_floor_ms": floor_s * 1e3, "floor_ratio": floor_s / forward_s}
    del loss
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

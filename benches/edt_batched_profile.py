"""Where the batched distance transform spends its time: 64 masks of 64³ in
one call against one 256³ mask (the same number of voxels), with and without
indices, per kernel on the device (torch.profiler) and on the host clock.

Usage (on the GPU machine, with the wheel importable and torch):

    python3 benches/edt_batched_profile.py [--calls 21] [--profiled 10] [--json OUT.json]

Masks: smoothed noise above its median (`ndimage_bench.blob_mask`),
made on the GPU with torch, resident there (CUDA tensors in and out). The
host clock: medians of --calls calls of each, interleaved, each
synchronised. The device: each kernel's mean time per call over --profiled
calls under torch.profiler (the copies and fills the call makes included),
and their sum. Prints one JSON object per case (distances, indices): both
clocks' ratios batch / one, per voxel (the issue's target: at most 1).
"""

import argparse
import json
import statistics
import time

from ndimage_bench import blob_mask


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=21, help="calls per case on the host clock (median)")
    p.add_argument("--profiled", type=int, default=10, help="calls per case under the profiler (mean)")
    p.add_argument("--json")
    args = p.parse_args()
    if args.calls < 1 or args.profiled < 1:
        p.error("--calls and --profiled must be at least 1")

    import torch
    from torch.profiler import ProfilerActivity, profile

    import gpu_waterz.ndimage as gndi

    g = torch.Generator(device="cuda").manual_seed(7)
    batch = torch.stack([blob_mask(torch, g, (64, 64, 64)) for _ in range(64)])
    one = blob_mask(torch, g, (256, 256, 256))
    sync = torch.cuda.synchronize
    report = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    for indices in (False, True):
        calls = {
            "batch": lambda: gndi.distance_transform_edt(batch, return_indices=indices, batch_dims=1),
            "one": lambda: gndi.distance_transform_edt(one, return_indices=indices),
        }
        clock = {name: [] for name in calls}
        for call in calls.values():
            call()
        sync()
        for _ in range(args.calls):
            for name, call in calls.items():
                sync()
                t = time.perf_counter()
                call()
                sync()
                clock[name].append(time.perf_counter() - t)
        row = {f"{name}_host_ms": statistics.median(times) * 1e3 for name, times in clock.items()}
        row["host_ratio"] = row["batch_host_ms"] / row["one_host_ms"]
        for name, call in calls.items():
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(args.profiled):
                    call()
                sync()
            kernels = {}
            for event in prof.key_averages():
                total = getattr(event, "device_time_total", None)
                if total is None:
                    total = event.cuda_time_total
                if total > 0:
                    kernels[event.key] = total / args.profiled / 1e3
            row[f"{name}_kernels_ms"] = kernels
            row[f"{name}_device_ms"] = sum(kernels.values())
        row["device_ratio"] = row["batch_device_ms"] / row["one_device_ms"]
        case = "indices" if indices else "distances"
        report[case] = row
        print(case, json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()

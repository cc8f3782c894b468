"""The greyscale watershed (gpu_waterz.watershed) against
skimage.segmentation.watershed, in one run on the same images.

Usage (on the GPU machine, with the wheel, torch and scikit-image):

    python3 benches/greyscale_bench.py [--data DIR] [--sizes 256,512,928]
        [--skimage-3d 256] [--repeats 5] [--json OUT.json]

Images: white noise smoothed by a Gaussian (sigma 2, made on the GPU with
torch), float32: 2048² and the cubes of --sizes; markers from the regional
minima (markers=None), connectivity 1. Real images: gala's raw EM and
boundary map, snemi-mini's inside map (from --data). For each image:
- GPU, data resident (torch CUDA in, CUDA labels out): median wall time of
  the call after a warm-up, per schedule, with global steps per phase;
- GPU, numpy in/out; CPU tiles on every core (backend='cpu');
- scikit-image on the same image (the 2D image, the cube of --skimage-3d and
  the real images), and the adjusted Rand index between its labels and ours;
- cells where the block-asynchronous labels differ from the artifact-free ones.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np


def adjusted_rand(a, b):
    a = np.asarray(a).ravel().astype(np.int64)
    b = np.asarray(b).ravel().astype(np.int64)
    _, ai = np.unique(a, return_inverse=True)
    _, bi = np.unique(b, return_inverse=True)
    pairs = ai.astype(np.int64) * (int(bi.max()) + 1) + bi
    _, counts = np.unique(pairs, return_counts=True)

    def comb(x):
        x = x.astype(np.float64)
        return float((x * (x - 1) / 2).sum())

    index = comb(counts)
    sa, sb = comb(np.bincount(ai)), comb(np.bincount(bi))
    expected = sa * sb / comb(np.array([a.size]))
    return (index - expected) / (0.5 * (sa + sb) - expected)


def smoothed(torch, shape, seed, sigma=2.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.rand(shape, generator=g, device="cuda", dtype=torch.float32)
    radius = int(3 * sigma)
    t = torch.arange(-radius, radius + 1, device="cuda", dtype=torch.float32)
    kernel = torch.exp(-(t * t) / (2 * sigma * sigma))
    kernel = kernel / kernel.sum()
    for axis in range(len(shape)):
        x = x.movedim(axis, -1)
        moved_shape = x.shape
        flat = x.reshape(-1, 1, moved_shape[-1])
        flat = torch.nn.functional.pad(flat, (radius, radius), mode="reflect")
        flat = torch.nn.functional.conv1d(flat, kernel.view(1, 1, -1))
        x = flat.reshape(moved_shape).movedim(-1, axis)
    return x.contiguous()


def timed(fn, repeats, sync=None):
    fn()
    if sync:
        sync()
    times = []
    out = None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        if sync:
            sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, out


def bench_edt(torch, gpu_waterz, sizes, repeats):
    """The exact distance transform of a blob mask (smoothed noise above its
    median), resident on the GPU, against cupyx and (at 256³) scipy."""
    import scipy.ndimage as ndi

    try:
        import cupy
        import cupyx.scipy.ndimage as cndi
    except ImportError:
        cupy = None
    rows = []
    sync = torch.cuda.synchronize
    for s in sizes:
        mask = smoothed(torch, (s, s, s), 100 + s) > 0.5
        row = {"shape": [s, s, s], "inside_fraction": float(mask.float().mean())}
        med, runs, ours = timed(lambda: gpu_waterz.ndimage.distance_transform_edt(mask), repeats, sync)
        row["gpu_waterz_resident_s"], row["gpu_waterz_runs"] = med, runs
        if cupy is not None:
            cmask = cupy.asarray(mask)
            med, runs, theirs = timed(lambda: cndi.distance_transform_edt(cmask), repeats, cupy.cuda.runtime.deviceSynchronize)
            row["cupyx_s"], row["cupyx_runs"] = med, runs
            row["max_abs_difference_cupyx"] = float(abs(torch.as_tensor(theirs, device="cuda") - ours).max())
        if s <= 256:
            host = mask.cpu().numpy()
            start = time.perf_counter()
            want = ndi.distance_transform_edt(host)
            row["scipy_s"] = time.perf_counter() - start
            row["equal_to_scipy"] = bool(np.array_equal(ours.cpu().numpy(), want))
        print(f"EDT {s}^3: {row}", file=sys.stderr)
        rows.append(row)
        del mask, ours
        torch.cuda.empty_cache()
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--sizes", default="256,512,928")
    p.add_argument("--skimage-3d", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--edt", default="256,512", help="cube sizes for the distance-transform comparison ('' for none)")
    p.add_argument("--skip-watershed", action="store_true")
    p.add_argument("--json")
    args = p.parse_args()
    import torch
    import gpu_waterz
    import gpu_waterz.ndimage  # noqa: F401 (the distance transform)
    from skimage.segmentation import watershed as sk_watershed

    report = {"device": torch.cuda.get_device_name(0), "images": []}
    images = [("2048x2048 smoothed noise", smoothed(torch, (2048, 2048), 1))]
    images += [(f"{s}^3 smoothed noise", smoothed(torch, (s, s, s), 2 + s)) for s in map(int, args.sizes.split(","))]
    try:
        import h5py

        for name, key in (("gala-em-train.h5", "raw"), ("gala-em-train.h5", "boundary_probability"),
                          ("snemi-mini.h5", "inside_probability")):
            with h5py.File(os.path.join(args.data, name)) as f:
                images.append((f"{name}:{key} {f[key].shape}", torch.as_tensor(np.asarray(f[key]), device="cuda")))
    except (ImportError, OSError) as e:
        print(f"real images skipped: {e}", file=sys.stderr)
    sync = torch.cuda.synchronize
    if args.skip_watershed:
        images = []
    report["edt"] = bench_edt(torch, gpu_waterz, [int(v) for v in args.edt.split(",") if v], args.repeats)
    for name, image in images:
        row = {"image": name, "shape": list(image.shape), "voxels": image.numel(), "dtype": str(image.dtype)}
        big = image.numel() > 3e8
        for schedule in ("artifact-free", "block-asynchronous", "synchronous"):
            if schedule == "synchronous" and image.numel() > 3e7:
                continue
            reps = 3 if big else args.repeats
            med, times, (labels, info) = timed(
                lambda: gpu_waterz.watershed(image, schedule=schedule, return_info=True), reps, sync)
            row[schedule] = {"gpu_resident_s": med, "runs": times, "steps": {k: info[k] for k in
                             ("level", "distance", "minimum", "label", "total")}, "n_minima": info["n_minima"],
                             "stages": info.get("stages")}
            if schedule == "artifact-free":
                free = labels
            elif schedule == "block-asynchronous":
                differ = labels != free
                row[schedule]["cells_differing_from_artifact_free"] = int(differ.sum())
                # Where they are: on a basin boundary of the exact labels
                # (a face neighbour in another basin), and in how many basins.
                boundary = torch.zeros_like(differ)
                for axis in range(free.dim()):
                    a = free.narrow(axis, 0, free.shape[axis] - 1)
                    b = free.narrow(axis, 1, free.shape[axis] - 1)
                    edge = a != b
                    boundary.narrow(axis, 0, free.shape[axis] - 1).logical_or_(edge)
                    boundary.narrow(axis, 1, free.shape[axis] - 1).logical_or_(edge)
                row[schedule]["differing_on_basin_boundaries"] = int((differ & boundary).sum())
                row[schedule]["basins_with_differences"] = int(torch.unique(free[differ]).numel())
            else:
                row[schedule]["equal_to_artifact_free"] = bool(torch.equal(labels, free))
            print(f"{name}: {schedule}: {med * 1e3:.2f} ms (resident), steps {row[schedule]['steps']}", file=sys.stderr)
        host = None if big else image.cpu().numpy()
        if not big:
            med, times, _ = timed(lambda: gpu_waterz.watershed(host, backend="gpu"), args.repeats)
            row["gpu_numpy_s"] = med
            reps = 1 if image.numel() > 2e7 else 3
            med, times, cpu_labels = timed(lambda: gpu_waterz.watershed(host, backend="cpu"), reps)
            row["cpu_tiles_s"] = med
            row["cpu_equal_gpu"] = bool(np.array_equal(cpu_labels, free.cpu().numpy()))
            print(f"{name}: GPU numpy {row['gpu_numpy_s']:.3f} s, CPU tiles {med:.3f} s", file=sys.stderr)
        sk_ok = image.dim() == 2 or image.shape[0] <= args.skimage_3d
        if sk_ok and not big:
            start = time.perf_counter()
            theirs = sk_watershed(host, connectivity=1)
            row["skimage_s"] = time.perf_counter() - start
            ours = free.cpu().numpy()
            row["skimage_regions"] = int(theirs.max())
            row["adjusted_rand_vs_skimage"] = adjusted_rand(ours, theirs)
            row["speedup_resident_vs_skimage"] = row["skimage_s"] / row["artifact-free"]["gpu_resident_s"]
            row["speedup_numpy_vs_skimage"] = row["skimage_s"] / row["gpu_numpy_s"]
            print(f"{name}: skimage {row['skimage_s']:.2f} s, ARI {row['adjusted_rand_vs_skimage']:.5f}, "
                  f"{row['speedup_resident_vs_skimage']:.0f}x resident", file=sys.stderr)
        report["images"].append(row)
        del image
        torch.cuda.empty_cache()
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

"""The blockwise decode (`gpu_waterz.blockwise`) against the whole volume
decoded at once, on the same affinities in the same run.

Usage (with the wheel, zarr and dask.distributed; the CLI for the data):

    python3 benches/blockwise_bench.py --affinities AFFS.npy [--block 64,256,256]
        [--workers 2] [--repeats 3] [--dask] [--waterz] [--json OUT.json]
    python3 benches/blockwise_bench.py --implicit 128,512,512 ...

Rows: the whole volume by `gpu_waterz.agglomerate` (backend "cpu": stock
waterz's arithmetic) from a numpy array in memory; by stock waterz with
`--waterz`; blockwise from a zarr array on disk to a zarr output on disk,
on a thread pool in this process, and with `--dask` on a
`LocalCluster` of `--workers` single-threaded worker processes. Each
blockwise row gives its steps' seconds, the bytes the global steps read
from the tasks and sent with them per voxel, the bytes moved between
workers, the voxels of plateaus that crossed a block face
and the region-graph pairs per voxel; the fragments are checked equal to
the whole volume's and the segmentations to partition the volume as it
does. Medians of `--repeats` runs; peak RSS of this process (the
`LocalCluster` workers are separate processes).
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

THRESHOLDS = [0.1, 0.3, 0.5, 0.7]


def same_partition(a, b):
    pairs = np.unique(np.stack([a.ravel(), b.ravel()]), axis=1)
    return pairs.shape[1] == len(np.unique(a)) == len(np.unique(b))


def same_partitions_given_fragments(fragments, first, want, got):
    """Whether segmentations `want` and `got`, both unions of `fragments`
    (equal for both), cut the volume alike: compared at one voxel of each
    fragment (`first`), which is what decides it."""
    return same_partition(want.ravel()[first], got.ravel()[first])


def timed(fn, repeats):
    runs, result = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs), runs, result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--affinities", help="a (3, z, y, x) .npy file")
    p.add_argument("--implicit", help="z,y,x: the generated ImplicitCells volume instead")
    p.add_argument("--block", default="64,256,256")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dask", action="store_true")
    p.add_argument("--waterz", action="store_true")
    p.add_argument("--scratch", default=tempfile.gettempdir())
    p.add_argument("--json")
    args = p.parse_args()

    import zarr

    import gpu_waterz
    import gpu_waterz.blockwise as blockwise

    block = tuple(int(v) for v in args.block.split(","))
    if args.implicit:
        shape = tuple(int(v) for v in args.implicit.split(","))
        source = blockwise.ImplicitCells(shape)
        affs = source((0, 0, 0), shape)
        data = f"ImplicitCells{shape}"
    else:
        affs = np.load(args.affinities)
        data = args.affinities
    affs = np.ascontiguousarray(affs[:3])
    n = affs[0].size
    report = {"data": data, "shape": list(affs.shape), "block": list(block), "workers": args.workers,
              "thresholds": THRESHOLDS, "cpus": os.cpu_count(), "rows": []}
    print(f"{data}: {affs.shape}, {n / 1e6:.1f} Mvoxel, blocks of {block}", flush=True)

    scratch = tempfile.mkdtemp(dir=args.scratch, prefix="blockwise-bench-")
    try:
        store = os.path.join(scratch, "affs.zarr")
        z = zarr.open_array(store, mode="w", shape=affs.shape, chunks=(3,) + block, dtype=affs.dtype)
        z[...] = affs

        def whole():
            fragments = None
            segs = []
            for s in gpu_waterz.agglomerate(affs, [0.0] + THRESHOLDS, backend="cpu"):
                if fragments is None:
                    fragments = s.copy()
                else:
                    segs.append(s.copy())
            return fragments, segs

        med, runs, (fragments, segs) = timed(whole, args.repeats)
        # One voxel of each fragment: where segmentations that are unions of
        # the same fragments are compared.
        _, first = np.unique(fragments.ravel(), return_index=True)
        report["rows"].append({"run": "whole volume, gpu_waterz cpu", "median_s": med, "runs": runs,
                               "n_fragments": int(fragments.max())})
        print(f"whole volume (gpu_waterz, cpu): {med:.2f} s, {int(fragments.max())} fragments", flush=True)

        if args.waterz:
            import waterz

            med, runs, _ = timed(lambda: [s.copy() for s in waterz.agglomerate(affs.copy(), THRESHOLDS)], args.repeats)
            report["rows"].append({"run": "whole volume, stock waterz", "median_s": med, "runs": runs})
            print(f"whole volume (stock waterz): {med:.2f} s", flush=True)

        def blockwise_run(client, name):
            out = os.path.join(scratch, name)
            result = blockwise.agglomerate(store, out, THRESHOLDS, block, client=client, workers=args.workers,
                                           overwrite=True)
            return result

        variants = [("blockwise, thread pool", None)]
        cluster = client = None
        if args.dask:
            import distributed

            cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                               dashboard_address=None)
            client = distributed.Client(cluster)
            variants.append((f"blockwise, Dask LocalCluster of {args.workers} processes", client))
        for name, c in variants:
            med, runs, result = timed(lambda: blockwise_run(c, "out.zarr"), args.repeats)
            group = zarr.open_group(os.path.join(scratch, "out.zarr"), mode="r")
            got_fragments = group["fragments"][...]
            got = group["segmentation"][...]
            equal = bool(np.array_equal(got_fragments, fragments))
            row = {"run": name, "median_s": med, "runs": runs, "mvoxel_per_s": n / med / 1e6,
                   "seconds": result.seconds, "n_blocks": result.n_blocks, "n_fragments": result.n_fragments,
                   "open_voxels": result.open_voxels, "open_fraction": result.open_voxels / n,
                   "gathered_bytes_per_voxel": result.gathered_bytes / n,
                   "sent_bytes_per_voxel": result.sent_bytes / n,
                   "moved_bytes_between_workers": result.moved_bytes,
                   "edges_per_voxel": result.n_edges / n,
                   "fragments_equal": equal,
                   "segmentations_same_partition": [
                       bool(equal and same_partitions_given_fragments(fragments, first, segs[k], got[k]))
                       for k in range(len(THRESHOLDS))]}
            report["rows"].append(row)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
                              if k != "runs"}), flush=True)
        if client is not None:
            client.close()
            cluster.close()
        report["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
        print(f"peak RSS of this process: {report['peak_rss_gb']:.2f} GB", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

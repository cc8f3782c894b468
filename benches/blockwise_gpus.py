"""The blockwise decode (`gpu_waterz.blockwise.agglomerate`) of a generated
volume on a Dask cluster of one worker per GPU, against the same decode on
one worker, in the same run (issue "Run the blockwise decode on several
GPUs").

Usage (with the wheel, zarr and dask.distributed on the machine):

    python3 benches/blockwise_gpus.py --implicit 1024,4096,4096 --block 256,512,512
        --gpus 0,1 [--single] [--write-fragments] [--backend gpu] [--scratch DIR] [--json OUT.json]

The cluster is what dask-cuda's `LocalCUDACluster` starts, without needing
dask-cuda: a scheduler in this process and one single-threaded worker
process per listed GPU, each seeing only its GPU (`CUDA_VISIBLE_DEVICES`),
started as `python -m distributed.cli.dask_worker`. Each run decodes the
generated `ImplicitCells` volume (every task makes its block's affinities
on its worker) into a zarr group under `--scratch`, and reports its wall
time, Gvoxel/s, the seconds of each step, the bytes the global steps
gathered and sent and the bytes moved between workers. With `--single`
the same decode also runs on a cluster of the first GPU alone, and the two
outputs are compared chunk by chunk (the segmentations, and the fragments
with `--write-fragments`, equal label for label). Prints one JSON object.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

THRESHOLDS = [0.3, 0.5]


def start_cluster(gpus):
    """A scheduler here and one worker process per GPU; returns (cluster,
    client, worker processes)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=0, processes=True, dashboard_address=None)
    workers = []
    for gpu in gpus:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu))
        workers.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address, "--nworkers", "1",
             "--nthreads", "1", "--memory-limit", "0", "--no-dashboard", "--name", f"gpu{gpu}"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    client = Client(cluster)
    client.wait_for_workers(len(gpus), timeout=120)
    return cluster, client, workers


def stop_cluster(cluster, client, workers):
    client.close()
    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
    cluster.close()


def decode(gpus, shape, block, output, backend, write_fragments):
    from gpu_waterz import blockwise

    cluster, client, workers = start_cluster(gpus)
    try:
        started = time.perf_counter()
        result = blockwise.agglomerate(blockwise.ImplicitCells(shape), output, THRESHOLDS, block, client=client,
                                       backend=backend, write_fragments=write_fragments)
        wall = time.perf_counter() - started
    finally:
        stop_cluster(cluster, client, workers)
    voxels = int(np.prod(shape))
    return {
        "gpus": list(gpus), "wall_s": wall, "gvoxel_per_s": voxels / wall / 1e9,
        "seconds": {k: round(v, 3) for k, v in result["seconds"].items()},
        "n_blocks": result["n_blocks"], "n_fragments": result["n_fragments"],
        "open_voxels": result["open_voxels"], "n_edges": result["n_edges"],
        "gathered_bytes": result["gathered_bytes"], "sent_bytes": result["sent_bytes"],
        "moved_bytes": result["moved_bytes"], "merged_on": result["merged_on"],
    }


def same_outputs(first, second):
    """Whether two outputs hold equal arrays, compared chunk by chunk."""
    import zarr

    a, b = zarr.open_group(first, mode="r"), zarr.open_group(second, mode="r")
    names = [name for name in ("fragments", "segmentation") if name in a]
    if names != [name for name in ("fragments", "segmentation") if name in b] or not names:
        return False
    for name in names:
        x, y = a[name], b[name]
        if x.shape != y.shape:
            return False
        step = x.chunks
        for index in np.ndindex(*(-(-s // c) for s, c in zip(x.shape, step))):
            region = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(index, step, x.shape))
            if not np.array_equal(x[region], y[region]):
                return False
    return True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--implicit", required=True, help="z,y,x of the generated volume")
    p.add_argument("--block", required=True, help="z,y,x voxels per task")
    p.add_argument("--gpus", default="0,1", help="the GPUs, one worker each")
    p.add_argument("--single", action="store_true", help="also decode on the first GPU alone and compare")
    p.add_argument("--write-fragments", action="store_true", help="also write (and compare) the fragments")
    p.add_argument("--backend", default="gpu")
    p.add_argument("--scratch", default=tempfile.gettempdir())
    p.add_argument("--json")
    args = p.parse_args()
    shape = tuple(int(v) for v in args.implicit.split(","))
    block = tuple(int(v) for v in args.block.split(","))
    gpus = [int(g) for g in args.gpus.split(",")]
    work = tempfile.mkdtemp(prefix="blockwise-gpus.", dir=args.scratch)
    report = {"shape": shape, "block": block, "thresholds": THRESHOLDS, "backend": args.backend, "runs": []}
    try:
        many = os.path.join(work, "many.zarr")
        report["runs"].append(decode(gpus, shape, block, many, args.backend, args.write_fragments))
        if args.single:
            one = os.path.join(work, "one.zarr")
            report["runs"].append(decode(gpus[:1], shape, block, one, args.backend, args.write_fragments))
            report["equal_to_one_gpu"] = same_outputs(many, one)
            report["scaling_efficiency"] = report["runs"][1]["wall_s"] / (len(gpus) * report["runs"][0]["wall_s"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

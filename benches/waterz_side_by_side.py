"""Stock waterz on the benchmark's tile, for the side-by-side figure.

Usage: python3 waterz_side_by_side.py TILE.npy
Times `waterz.agglomerate(affs, [0.0])`: the watershed, the region graph and
the initial edge scores (no merge happens at threshold 0), i.e. the work the
GPU watershed + region graph stages do. Prints one JSON line.
"""

import json
import sys
import time

import numpy as np
import waterz

affs = np.load(sys.argv[1])
times = []
for _ in range(3):
    start = time.perf_counter()
    for seg in waterz.agglomerate(affs, [0.0]):
        n_fragments = int(seg.max())
    times.append(time.perf_counter() - start)
voxels = affs[0].size
best = min(times)
print(json.dumps({"waterz_version": waterz.__version__, "shape": list(affs.shape[1:]), "voxels": voxels,
                  "fragments": n_fragments, "seconds": times, "mvoxel_per_s": voxels / best / 1e6}))

"""Fragments from boundary maps (threshold, exact distance transform,
maxima as seeds, seeded watershed of the boundary map) against the
affinity watershed, both agglomerated by gpu_waterz.agglomerate on the real
volumes of ../shared/data: VOI per threshold, and the time of each step.

Usage: python3 benches/boundary_fragments.py [--data DIR] [--backend auto|gpu|cpu]
       [--boundary-threshold 0.5] [--min-seed-distance 0] [--json OUT]

Boundary maps: gala's `boundary_probability`; snemi-mini's
`1 - inside_probability`. Affinities from the boundary map as the data's
README says: aff[c][v] = 1 - max(p[v], p[v - e_c]).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

THRESHOLDS = [0.1, 0.3, 0.5, 0.7, 0.9]


def affinities(p):
    affs = np.zeros((3,) + p.shape, np.float32)
    affs[0, 1:] = 1 - np.maximum(p[1:], p[:-1])
    affs[1, :, 1:] = 1 - np.maximum(p[:, 1:], p[:, :-1])
    affs[2, :, :, 1:] = 1 - np.maximum(p[:, :, 1:], p[:, :, :-1])
    return affs


def voi(gpu_waterz, affs, gt, backend, fragments=None):
    out = []
    kwargs = {} if fragments is None else {"fragments": fragments}
    for seg, metrics in gpu_waterz.agglomerate(affs, THRESHOLDS, gt=gt, backend=backend, **kwargs):
        out.append(round(metrics["V_Info_split"] + metrics["V_Info_merge"], 4))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--backend", default="auto")
    p.add_argument("--boundary-threshold", type=float, default=0.5)
    p.add_argument("--min-seed-distance", type=float, default=0.0)
    p.add_argument("--json")
    args = p.parse_args()
    import h5py
    import gpu_waterz

    rows = []
    for name, key, invert in (("gala-em-train.h5", "boundary_probability", False),
                              ("gala-em-test.h5", "boundary_probability", False),
                              ("snemi-mini.h5", "inside_probability", True)):
        with h5py.File(os.path.join(args.data, name)) as f:
            boundary = np.asarray(f[key], np.float32)
            gt = np.asarray(f["gt"]).astype(np.uint64)
        if invert:
            boundary = 1 - boundary
        affs = affinities(boundary)
        agg_backend = "gpu" if args.backend == "gpu" else ("cpu" if args.backend == "cpu" else "auto")
        start = time.perf_counter()
        fragments = gpu_waterz.watershed.fragments_from_boundaries(
            boundary, args.boundary_threshold, min_seed_distance=args.min_seed_distance, backend=args.backend)
        fragment_s = time.perf_counter() - start
        row = {
            "volume": name,
            "shape": list(boundary.shape),
            "n_fragments_boundary": int(len(np.unique(fragments))),
            "fragments_s": fragment_s,
            "voi_boundary_fragments": voi(gpu_waterz, affs, gt, agg_backend, fragments),
            "voi_affinity_watershed": voi(gpu_waterz, affs, gt, agg_backend),
        }
        row["best_boundary"] = min(row["voi_boundary_fragments"])
        row["best_affinity"] = min(row["voi_affinity_watershed"])
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    text = json.dumps({"thresholds": THRESHOLDS, "rows": rows}, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

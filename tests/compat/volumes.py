"""Test volumes: random, CNN-like, quantized, degenerate."""

import numpy as np


def smooth(x, passes=2):
    for _ in range(passes):
        for axis in range(x.ndim):
            x = (np.roll(x, 1, axis) + x + np.roll(x, -1, axis)) / 3.0
    return x


def affinities_from_inside(q):
    """aff[c][v] = min(q[v], q[v - e_c]); faces at index 0 are 0."""
    affs = np.zeros((3,) + q.shape, dtype=np.float32)
    affs[0, 1:] = np.minimum(q[1:], q[:-1])
    affs[1, :, 1:] = np.minimum(q[:, 1:], q[:, :-1])
    affs[2, :, :, 1:] = np.minimum(q[:, :, 1:], q[:, :, :-1])
    return affs


def affinities_from_boundary(p):
    """aff[c][v] = 1 - max(p[v], p[v - e_c]); faces at index 0 are 0."""
    return affinities_from_inside(1.0 - p.astype(np.float32))


def voronoi_labels(rng, shape, n_seeds):
    seeds = np.stack([rng.uniform(0, s, n_seeds) for s in shape], axis=1)
    # z is anisotropic: cells are elongated along it.
    grid = np.stack(np.meshgrid(*[np.arange(s) for s in shape], indexing="ij"), axis=-1).astype(np.float32)
    scale = np.array([0.3, 1.0, 1.0], dtype=np.float32)
    d = (((grid[..., None, :] - seeds[None, None, None]) * scale) ** 2).sum(-1)
    return (d.argmin(-1) + 1).astype(np.uint32)


def membrane_of(labels):
    m = np.zeros(labels.shape, dtype=bool)
    for axis in range(3):
        diff = np.diff(labels, axis=axis) != 0
        sl_a = [slice(None)] * 3
        sl_b = [slice(None)] * 3
        sl_a[axis] = slice(1, None)
        sl_b[axis] = slice(None, -1)
        m[tuple(sl_a)] |= diff
        m[tuple(sl_b)] |= diff
    return m


def cnn_like(rng, labels, noise=0.15):
    """CNN-like affinities for ground-truth labels: membrane, blur, noise."""
    inside = 1.0 - membrane_of(labels).astype(np.float32)
    inside = smooth(inside, 1)
    inside = inside + noise * smooth(rng.standard_normal(labels.shape).astype(np.float32), 1)
    return affinities_from_inside(np.clip(inside, 0.0, 1.0).astype(np.float32))


def random_affs(rng, shape):
    return rng.random((3,) + shape, dtype=np.float32)


def quantize(affs):
    """uint8 quantization, as float32 k/255 (many ties and plateaus)."""
    k = np.round(affs * 255).astype(np.uint8)
    return k, k.astype(np.float32) / np.float32(255)

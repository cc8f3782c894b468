//! Inputs shared by the benchmarks.

use ndarray::Array4;

/// Deterministic CNN-like affinities of shape `(3, n, n, n)`: cells on a
/// jittered grid of period `cell`, walls of low affinity between them, and
/// a hash-based texture inside.
pub fn synthetic_affinities(n: usize, cell: usize) -> Array4<f32> {
    let hash = |z: usize, y: usize, x: usize| -> f32 {
        let mut h = (z as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (y as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
            ^ (x as u64).wrapping_mul(0x1656_67B1_9E37_79F9);
        h ^= h >> 29;
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 32;
        (h % 1000) as f32 / 1000.0
    };
    let cell_of = |v: usize| v / cell;
    Array4::from_shape_fn((3, n, n, n), |(c, z, y, x)| {
        let (pz, py, px) = match c {
            0 => (z.wrapping_sub(1), y, x),
            1 => (z, y.wrapping_sub(1), x),
            _ => (z, y, x.wrapping_sub(1)),
        };
        if pz >= n || py >= n || px >= n {
            return 0.0;
        }
        let same = cell_of(z) == cell_of(pz) && cell_of(y) == cell_of(py) && cell_of(x) == cell_of(px);
        let noise = hash(z, y, x) * 0.3;
        if same {
            0.7 + noise
        } else {
            noise
        }
    })
}

/// CNN-like affinities of about `target_voxels` voxels: a 64 × 256 × 256
/// block of cell-like affinities (`gpu_waterz_core::synthetic`), tiled.
/// Returns the C-ordered `(3, z, y, x)` values and the extent.
pub fn tiled_cell_affinities(target_voxels: u64) -> (Vec<f32>, gpu_waterz_core::Dims3) {
    use gpu_waterz_core::synthetic::{cell_affinities, cell_labels};
    let tile = (64usize, 256usize, 256usize);
    let labels = cell_labels(1, tile, 400);
    let block = cell_affinities(1, &labels, 0.3);
    let tile_voxels = (tile.0 * tile.1 * tile.2) as u64;
    let tiles = (target_voxels / tile_voxels).max(1);
    // Tile along y and x first (up to 4 x 4), then along z.
    let ty = (tiles as f64).sqrt().floor().clamp(1.0, 4.0) as usize;
    let tx = ty;
    let tz = (tiles as usize / (ty * tx)).max(1);
    let dims = gpu_waterz_core::Dims3::new((tile.0 * tz) as u64, (tile.1 * ty) as u64, (tile.2 * tx) as u64);
    let (zd, yd, xd) = (dims.z as usize, dims.y as usize, dims.x as usize);
    let n = zd * yd * xd;
    let mut out = vec![0f32; 3 * n];
    for c in 0..3 {
        for z in 0..zd {
            for y in 0..yd {
                let row = &mut out[c * n + (z * yd + y) * xd..][..xd];
                for (x, v) in row.iter_mut().enumerate() {
                    *v = block[[c, z % tile.0, y % tile.1, x % tile.2]];
                }
            }
        }
    }
    (out, dims)
}

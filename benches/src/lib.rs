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
        let same =
            cell_of(z) == cell_of(pz) && cell_of(y) == cell_of(py) && cell_of(x) == cell_of(px);
        let noise = hash(z, y, x) * 0.3;
        if same {
            0.7 + noise
        } else {
            noise
        }
    })
}

//! Inputs shared by the benchmarks.
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

//! The blockwise scale tests' generated volume (`ImplicitCells`) made on
//! the GPU, step by step as the host generator makes it
//! (`gpu_waterz_core::generate`), with the per-voxel arithmetic of
//! `gpu_waterz_abi::generate` that both share.

use crate::device::*;
use crate::watershed::coords;
use gpu_waterz_abi::generate::{
    cell_coordinate, cell_label, lattice_value, seed_distance, trilinear, GenAddNoiseArgs, GenAffinitiesArgs,
    GenBoundaryArgs, GenBoxBlurArgs, GenDilateArgs, GenImplicitLabelsArgs, GenInsideArgs, GenNoiseLatticeArgs,
    CELL_INSIDE, MEMBRANE_INSIDE, NOISE_SPACING,
};
use gpu_waterz_abi::Dims3;

/// The linear offsets of the face neighbours inside `dims` of voxel
/// `(z, y, x)` at `i`, in the order +z, +y, +x, -z, -y, -x (`None` where
/// the neighbour leaves the volume).
#[inline(always)]
fn face_neighbours(i: u64, (z, y, x): (u64, u64, u64), dims: Dims3) -> [Option<u64>; 6] {
    let [sz, sy, _] = dims.strides();
    [
        (z + 1 < dims.z).then_some(i + sz),
        (y + 1 < dims.y).then_some(i + sy),
        (x + 1 < dims.x).then_some(i + 1),
        (z > 0).then(|| i - sz),
        (y > 0).then(|| i - sy),
        (x > 0).then(|| i - 1),
    ]
}

kernel! {
    /// Each region voxel's label: the nearest seed (then the smallest
    /// label) among those of the 27 grid cells around the voxel's own.
    ///
    /// # Safety
    /// `seeds` holds three f32 per cell of `table`, which spans one cell
    /// before the region's first voxel's to one after its last voxel's
    /// along each axis and has fewer than 2^32 / 3 cells; `cell` is
    /// positive; the region has fewer than 2^32 voxels, and its last voxel's
    /// volume coordinate along each axis is below 2^32; `labels` holds one
    /// u32 per region voxel.
    ///
    /// # Parameters
    /// - `seeds`, `table`: the seeds' table; `cell`: the grid cell in
    ///   voxels; `origin`, `dims`: the region in the volume; `labels`: the
    ///   output, C order.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration. The coordinates and the
    /// table's indices are 32-bit (the Safety section bounds them): one
    /// 32-bit division per axis per voxel, and the 27 cells' slots stepped
    /// from the first one's by the table's strides.
    pub unsafe extern "ptx-kernel" fn gen_implicit_labels(
        seeds: *const f32,
        table: Dims3,
        cell: Dims3,
        origin: Dims3,
        dims: Dims3,
        labels: *mut u32,
    ) as GenImplicitLabelsArgs {
        let n = dims.z * dims.y * dims.x;
        let cells = [cell.z as u32, cell.y as u32, cell.x as u32];
        let o = [origin.z as u32, origin.y as u32, origin.x as u32];
        // The region's first voxel's cell; the table starts one before it.
        let first: [u32; 3] = core::array::from_fn(|a| o[a] / cells[a]);
        let (row, plane) = (table.x as u32, (table.y * table.x) as u32);
        grid_stride(n, |i| {
            let (z, y, x) = coords(i, dims);
            let g = [o[0] + z as u32, o[1] + y as u32, o[2] + x as u32];
            let p = [0, 1, 2].map(|a| cell_coordinate(g[a] as u64, cells[a] as u64));
            let own: [u32; 3] = core::array::from_fn(|a| g[a] / cells[a]);
            // The slot of the cell before the voxel's own along each axis:
            // the table's first cell is one before `first`, so that cell is
            // `own - first` cells in.
            let corner = (own[0] - first[0]) * plane + (own[1] - first[1]) * row + (own[2] - first[2]);
            // The cells are visited in increasing order of their labels
            // (`cell_label` grows with z, then y, then x), so a later cell
            // at the same distance is never `nearer`: the first nearest
            // wins, and only its label is made.
            let (mut best, mut at) = (f32::INFINITY, [0u32; 3]);
            for dz in 0..3u32 {
                for dy in 0..3u32 {
                    for dx in 0..3u32 {
                        let t = (corner + dz * plane + dy * row + dx) as usize;
                        // SAFETY: the cell is within one cell of a region
                        // voxel's own, so inside the table.
                        let s = unsafe { [*seeds.add(3 * t), *seeds.add(3 * t + 1), *seeds.add(3 * t + 2)] };
                        let d = seed_distance(p, s);
                        if d < best {
                            (best, at) = (d, [dz, dy, dx]);
                        }
                    }
                }
            }
            let c = [own[0] + at[0], own[1] + at[1], own[2] + at[2]].map(|v| v as i64 - 1);
            // SAFETY: `i` is a region voxel.
            unsafe { *labels.add(i as usize) = cell_label(c) };
        });
    }
}

kernel! {
    /// The boundary mask: 1 where a face neighbour inside the region has
    /// another label.
    ///
    /// # Safety
    /// `labels` and `mask` hold one element per voxel of `dims` (fewer than
    /// 2^32).
    ///
    /// # Parameters
    /// - `labels`, `dims`: the labels; `mask`: the output.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration.
    pub unsafe extern "ptx-kernel" fn gen_boundary(labels: *const u32, dims: Dims3, mask: *mut u8) as GenBoundaryArgs {
        let n = dims.z * dims.y * dims.x;
        grid_stride(n, |i| {
            // SAFETY: `i` and its neighbours inside the region are voxels.
            unsafe {
                let l = *labels.add(i as usize);
                let differs =
                    face_neighbours(i, coords(i, dims), dims).iter().flatten().any(|&j| *labels.add(j as usize) != l);
                *mask.add(i as usize) = differs as u8;
            }
        });
    }
}

kernel! {
    /// The mask dilated by one face: 1 where the voxel or a face neighbour
    /// inside the region is set.
    ///
    /// # Safety
    /// `mask` and `out` hold one u8 per voxel of `dims` (fewer than 2^32),
    /// and are not the same buffer.
    ///
    /// # Parameters
    /// - `mask`, `dims`: the mask; `out`: the dilated mask.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration.
    pub unsafe extern "ptx-kernel" fn gen_dilate(mask: *const u8, dims: Dims3, out: *mut u8) as GenDilateArgs {
        let n = dims.z * dims.y * dims.x;
        grid_stride(n, |i| {
            // SAFETY: `i` and its neighbours inside the region are voxels.
            unsafe {
                let set = *mask.add(i as usize) != 0
                    || face_neighbours(i, coords(i, dims), dims).iter().flatten().any(|&j| *mask.add(j as usize) != 0);
                *out.add(i as usize) = set as u8;
            }
        });
    }
}

kernel! {
    /// The inside map: `MEMBRANE_INSIDE` on the mask, `CELL_INSIDE` off it.
    ///
    /// # Safety
    /// `mask` and `q` hold `n` elements.
    ///
    /// # Parameters
    /// - `mask`, `n`: the membrane; `q`: the output.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration.
    pub unsafe extern "ptx-kernel" fn gen_inside(mask: *const u8, n: u64, q: *mut f32) as GenInsideArgs {
        grid_stride(n, |i| {
            // SAFETY: `i < n`.
            unsafe { *q.add(i as usize) = if *mask.add(i as usize) != 0 { MEMBRANE_INSIDE } else { CELL_INSIDE } };
        });
    }
}

kernel! {
    /// One box-blur pass along `axis`: the mean of the voxel and its
    /// neighbours along the axis inside the region, summed in the order
    /// -1, 0, +1 (the host generator's order).
    ///
    /// # Safety
    /// `q` and `out` hold one f32 per voxel of `dims` (fewer than 2^32) and
    /// are not the same buffer; `axis` is 0, 1 or 2.
    ///
    /// # Parameters
    /// - `q`, `dims`: the map; `axis`: z, y or x; `out`: the blurred map.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration.
    pub unsafe extern "ptx-kernel" fn gen_box_blur(q: *const f32, dims: Dims3, axis: u64, out: *mut f32) as GenBoxBlurArgs {
        let n = dims.z * dims.y * dims.x;
        // Picked by matches, not by indexing arrays (which the compiler put
        // in local memory).
        let (stride, len) = match axis {
            0 => (dims.y * dims.x, dims.z),
            1 => (dims.x, dims.y),
            _ => (1, dims.x),
        };
        grid_stride(n, |i| {
            let (z, y, x) = coords(i, dims);
            let p = match axis {
                0 => z,
                1 => y,
                _ => x,
            };
            // SAFETY: `i` is a voxel, and so are its neighbours along the
            // axis inside the region.
            unsafe {
                let mut sum = 0.0f32;
                let mut count = 0.0f32;
                if p > 0 {
                    sum += *q.add((i - stride) as usize);
                    count += 1.0;
                }
                sum += *q.add(i as usize);
                count += 1.0;
                if p + 1 < len {
                    sum += *q.add((i + stride) as usize);
                    count += 1.0;
                }
                *out.add(i as usize) = sum / count;
            }
        });
    }
}

kernel! {
    /// The smooth noise's values at the lattice points of a table:
    /// `values[t] = lattice_value(seed, first + point t)`.
    ///
    /// # Safety
    /// `values` holds one f32 per point of `table` (fewer than 2^32).
    ///
    /// # Parameters
    /// - `seed`: the noise's seed; `first`, `table`: the table's first
    ///   lattice point and extent; `values`: the table, C order.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one lattice point per iteration.
    pub unsafe extern "ptx-kernel" fn gen_noise_lattice(
        seed: u64,
        first: Dims3,
        table: Dims3,
        values: *mut f32,
    ) as GenNoiseLatticeArgs {
        let n = table.z * table.y * table.x;
        grid_stride(n, |t| {
            let (a, b, c) = coords(t, table);
            let value = lattice_value(seed, first.z + a, first.y + b, first.x + c);
            // SAFETY: `t` is a point of the table.
            unsafe { *values.add(t as usize) = value };
        });
    }
}

kernel! {
    /// Adds the smooth noise: `q = clamp(q + amplitude * (noise - 0.5), 0,
    /// 1)`, the noise interpolated at the volume's coordinates from the
    /// lattice table.
    ///
    /// # Safety
    /// `q` holds one f32 per voxel of `dims` (fewer than 2^32); `lattice`
    /// holds one f32 per point of `table`, whose first point `first` and
    /// extent cover every corner (`g / NOISE_SPACING` and one more along
    /// each axis) of the voxels `origin + (z, y, x)`.
    ///
    /// # Parameters
    /// - `q`, `dims`, `origin`: the map and where it lies in the volume;
    ///   `lattice`, `first`, `table`: the lattice's values; `amplitude`:
    ///   the noise's amplitude.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration.
    pub unsafe extern "ptx-kernel" fn gen_add_noise(
        q: *mut f32,
        dims: Dims3,
        origin: Dims3,
        lattice: *const f32,
        first: Dims3,
        table: Dims3,
        amplitude: f32,
    ) as GenAddNoiseArgs {
        let n = dims.z * dims.y * dims.x;
        grid_stride(n, |i| {
            let (z, y, x) = coords(i, dims);
            let g = [origin.z + z, origin.y + y, origin.x + x];
            let noise = trilinear(NOISE_SPACING, g, |a, b, c| {
                // SAFETY: every corner of the region's voxels is in the table.
                unsafe { *lattice.add(table.index(a - first.z, b - first.y, c - first.x) as usize) }
            });
            // SAFETY: `i` is a voxel.
            unsafe {
                let v = q.add(i as usize);
                *v = (*v + amplitude * (noise - 0.5)).clamp(0.0, 1.0);
            }
        });
    }
}

kernel! {
    /// The affinities of a block inside the region: channel `c` at voxel
    /// `v` is 0 where `v`'s volume coordinate along `c` is 0, else
    /// `min(q[v], q[v - e_c])`.
    ///
    /// # Safety
    /// `q` holds one f32 per voxel of `dims` (fewer than 2^32); the block
    /// (`offset + block`) lies in the region, at least one voxel from the
    /// region's lower faces along each axis where its volume coordinate is
    /// not 0; `affinities` holds `3 * block voxels` f32s.
    ///
    /// # Parameters
    /// - `q`, `dims`, `origin`: the inside map and where it lies in the
    ///   volume; `offset`, `block`: the block in the region;
    ///   `affinities`: the output, `(3, z, y, x)` over the block.
    ///
    /// # Thread mapping
    /// Grid-stride loop over the block's voxels, the three channels of a
    /// voxel by one thread (each channel's writes by a warp side by side).
    pub unsafe extern "ptx-kernel" fn gen_affinities(
        q: *const f32,
        dims: Dims3,
        origin: Dims3,
        offset: Dims3,
        block: Dims3,
        affinities: *mut f32,
    ) as GenAffinitiesArgs {
        let voxels = block.z * block.y * block.x;
        let o = [origin.z, origin.y, origin.x];
        let strides = dims.strides();
        grid_stride(voxels, |i| {
            let (z, y, x) = coords(i, block);
            let at = [z + offset.z, y + offset.y, x + offset.x];
            let h = dims.index(at[0], at[1], at[2]);
            // SAFETY: `h` is a region voxel.
            let here = unsafe { *q.add(h as usize) };
            for c in 0..3 {
                let value = if o[c] + at[c] == 0 {
                    0.0
                } else {
                    // SAFETY: the voxel before `h` along `c` is a region
                    // voxel (the block lies one voxel in from the region's
                    // lower face unless the volume starts there).
                    here.min(unsafe { *q.add((h - strides[c]) as usize) })
                };
                // SAFETY: `i < voxels` and `c < 3`.
                unsafe { *affinities.add((c as u64 * voxels + i) as usize) = value };
            }
        });
    }
}

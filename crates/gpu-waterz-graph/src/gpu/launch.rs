//! Every launch of the region-graph kernels (`kernels-rs/src/graph.rs`),
//! and the only `unsafe` code of this crate.
//!
//! The function here is safe: it checks what its kernels' `# Safety`
//! sections ask for. The labels come from a [`DeviceFragments`], whose
//! labels are at most its fragment count, and the affinities from a
//! [`DeviceAffinities`], which holds three values per voxel.

use gpu_waterz_abi::graph::{
    rg_tile_shape, AffinityKind, RgTileEntriesArgs, RG_TILE_SHARED_BYTES, RG_TILE_THREADS, RG_TILE_X,
};
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu, LaunchConfig, Result, RuntimeError};
use gpu_waterz_watershed::gpu::{AffinityBuffer, DeviceAffinities, DeviceFragments};

/// Blocks per multiprocessor of `rg_tile_entries` (each then walks tiles
/// in a grid-stride loop).
const BLOCKS_PER_MULTIPROCESSOR: u64 = 8;

/// The entries the first launch makes room for, per voxel: real fragments
/// give a few hundredths (pinky40 mirrored: about 0.01); a volume that
/// needs more gets a second launch with room for all of them.
const FIRST_ENTRIES_PER_VOXEL: u64 = 16;

/// The boundary faces of `fragments` aggregated per tile of voxels
/// (`rg_tile_entries`): at least one entry per fragment pair meeting in a
/// tile, its `EdgeKey` bits and the value `count << PACKED_SUM_BITS |
/// fixed-point sum`, in no particular order. Returns the keys, the values
/// and the number of entries.
pub(crate) fn aggregated_faces(
    gpu: &Gpu,
    fragments: &DeviceFragments,
    affs: &DeviceAffinities,
) -> Result<(DeviceBuffer<u64>, DeviceBuffer<u64>, u64)> {
    let dims = affs.dims();
    if fragments.dims() != dims {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "rg_tile_entries",
            reason: format!("fragments of {:?} with affinities of {dims:?}", fragments.dims()),
        });
    }
    let n = affs.n_voxels();
    let labels = fragments.labels();
    check_len("rg_tile_entries", "labels", labels, n)?;
    let (affs_ptr, kind) = match affs.data() {
        AffinityBuffer::F32(a) => {
            check_len("rg_tile_entries", "affinities", a, 3 * n)?;
            (a.as_ptr().cast::<u8>(), AffinityKind::F32)
        }
        AffinityBuffer::U8(a) => {
            check_len("rg_tile_entries", "affinities", a, 3 * n)?;
            (a.as_ptr(), AffinityKind::U8)
        }
        _ => {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "rg_tile_entries",
                reason: "the region graph reads float32 or uint8 affinities only".into(),
            })
        }
    };
    let tile = rg_tile_shape(dims);
    debug_assert!(tile.z.is_power_of_two() && tile.y.is_power_of_two() && tile.x == RG_TILE_X);
    let n_tiles = dims.z.div_ceil(tile.z) * dims.y.div_ceil(tile.y) * dims.x.div_ceil(tile.x);
    let blocks = n_tiles.clamp(1, gpu.multiprocessor_count() as u64 * BLOCKS_PER_MULTIPROCESSOR);
    let cfg = LaunchConfig { blocks: blocks as u32, threads: RG_TILE_THREADS, shared_bytes: RG_TILE_SHARED_BYTES };
    // A table slot becomes at most one entry per face (its sum is at most
    // 2^32 per face: `affinity_to_fixed` clamps), so `3 n` entries always
    // suffice and the loop ends; in practice the first launch fits.
    let mut capacity = (n / FIRST_ENTRIES_PER_VOXEL + 4096).min(3 * n).max(1);
    loop {
        let mut keys = gpu.uninit::<u64>(capacity as usize)?;
        let mut values = gpu.uninit::<u64>(capacity as usize)?;
        let mut counter = gpu.zeros::<u64>(1)?;
        let args = RgTileEntriesArgs {
            labels: labels.as_ptr(),
            affs: affs_ptr,
            kind,
            dims,
            tile,
            capacity,
            counter: counter.as_mut_ptr(),
            keys: keys.as_mut_ptr(),
            values: values.as_mut_ptr(),
        };
        // SAFETY: one u32 label per voxel, `3 n` affinities of `kind`
        // (checked above); `keys`, `values`: `capacity` u64s; `counter`: one
        // zeroed u64; `tile` = `rg_tile_shape(dims)`; RG_TILE_THREADS threads
        // with RG_TILE_SHARED_BYTES of shared memory.
        unsafe { gpu.launch(cfg, args) }?;
        let n_entries = gpu.download(&counter)?[0];
        if n_entries <= capacity {
            return Ok((keys, values, n_entries));
        }
        if capacity >= 3 * n {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "rg_tile_entries",
                reason: format!("{n_entries} entries for {n} voxels: more than one per face"),
            });
        }
        // A rerun makes the same entries except where a tile's table fills
        // (those faces become entries of their own, in a varying number):
        // leave room for more.
        capacity = (n_entries + n_entries / 8 + 4096).max(2 * capacity).min(3 * n);
    }
}

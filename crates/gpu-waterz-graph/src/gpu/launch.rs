//! Every launch of the region-graph kernels (`kernels-rs/src/graph.rs`),
//! and the only `unsafe` code of this crate.
//!
//! The function here is safe: it checks what its kernels' `# Safety`
//! sections ask for. The labels come from a [`DeviceFragments`], whose
//! labels are at most its fragment count, and the affinities from a
//! [`DeviceAffinities`], which holds three values per voxel.

use gpu_waterz_abi::graph::{AffinityKind, RgCountEntriesArgs, RgEmitEntriesArgs, RG_EMIT_SHARED_BYTES_PER_THREAD};
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu, Result, RuntimeError};
use gpu_waterz_watershed::gpu::{AffinityBuffer, DeviceAffinities, DeviceFragments};

/// The boundary faces of `fragments` aggregated per warp of 32 consecutive
/// voxels and per axis (`rg_count_entries`, then `rg_emit_entries`): one
/// entry per distinct fragment pair, its `EdgeKey` bits and the value
/// `count << PACKED_SUM_BITS | fixed-point sum`, in no particular order.
/// Returns the keys, the values and the number of entries.
pub(crate) fn aggregated_faces(
    gpu: &Gpu,
    fragments: &DeviceFragments,
    affs: &DeviceAffinities,
) -> Result<(DeviceBuffer<u64>, DeviceBuffer<u64>, u64)> {
    let dims = affs.dims();
    if fragments.dims() != dims {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "rg_count_entries",
            reason: format!("fragments of {:?} with affinities of {dims:?}", fragments.dims()),
        });
    }
    let n = affs.n_voxels();
    let labels = fragments.labels();
    check_len("rg_count_entries", "labels", labels, n)?;
    let cfg = gpu.grid_stride_config(n);
    if !cfg.threads.is_multiple_of(32) {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "rg_count_entries",
            reason: format!("blocks of {} threads are not whole warps", cfg.threads),
        });
    }
    let mut counter = gpu.zeros::<u64>(1)?;
    let args = RgCountEntriesArgs { labels: labels.as_ptr(), dims, counter: counter.as_mut_ptr() };
    // SAFETY: `labels` holds one u32 per voxel of `dims` (checked above),
    // `counter` is one zeroed u64, and the blocks are whole warps.
    unsafe { gpu.launch(cfg, args) }?;
    let n_entries = gpu.download(&counter)?[0];
    let mut keys = gpu.uninit::<u64>(n_entries.max(1) as usize)?;
    let mut values = gpu.uninit::<u64>(n_entries.max(1) as usize)?;
    let mut counter = gpu.zeros::<u64>(1)?;
    let (affs_ptr, kind) = match affs.data() {
        AffinityBuffer::F32(a) => {
            check_len("rg_emit_entries", "affinities", a, 3 * n)?;
            (a.as_ptr().cast::<u8>(), AffinityKind::F32)
        }
        AffinityBuffer::U8(a) => {
            check_len("rg_emit_entries", "affinities", a, 3 * n)?;
            (a.as_ptr(), AffinityKind::U8)
        }
        _ => {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "rg_emit_entries",
                reason: "the region graph reads float32 or uint8 affinities only".into(),
            })
        }
    };
    let emit_cfg = cfg.with_shared_bytes(cfg.threads * RG_EMIT_SHARED_BYTES_PER_THREAD);
    let args = RgEmitEntriesArgs {
        labels: labels.as_ptr(),
        affs: affs_ptr,
        kind,
        dims,
        counter: counter.as_mut_ptr(),
        keys: keys.as_mut_ptr(),
        values: values.as_mut_ptr(),
    };
    // The counter starts from zero again, so the entries reserved are the
    // ones `rg_count_entries` counted for the same labels.
    // SAFETY: as above; the affinities hold `3 n` values of type `kind`
    // (checked); `keys` and `values` hold the counted entries; the launch
    // has the shared memory of one u64 per thread.
    unsafe { gpu.launch(emit_cfg, args) }?;
    Ok((keys, values, n_entries))
}

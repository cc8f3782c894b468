//! The region-graph kernels (see `kernels-rs/src/graph.rs`).

use super::watershed::{check_dims, AffinityBuffer, DeviceAffinities};
use super::{check_len, grid_stride_config, launch};
use crate::gpu::{DeviceBuffer, Gpu, Param};
use crate::Result;

/// The boundary faces aggregated per warp of 32 consecutive voxels and per
/// axis: one entry per distinct fragment pair, key `u << 32 | v` and value
/// `count << 40 | fixed-point sum`, in no particular order. Returns the
/// number of entries too.
pub fn aggregated_faces(
    gpu: &Gpu,
    labels: &DeviceBuffer<u32>,
    affs: &DeviceAffinities,
) -> Result<(DeviceBuffer<u64>, DeviceBuffer<u64>, u64)> {
    let dims = affs.dims();
    let n = check_dims(dims)?;
    let p_dims = Param(dims);
    check_len("rg_count_entries", "labels", labels, n)?;
    let cfg = grid_stride_config(gpu, n)?;
    let counter = gpu.zeros::<u64>(1)?;
    // SAFETY: `labels` holds n u32s, `counter` one zeroed u64; the block
    // size is a multiple of 32.
    launch!(gpu, "rg_count_entries", cfg, &labels.inner, &p_dims, &counter.inner);
    let n_entries = gpu.download(&counter)?[0];
    let keys = gpu.uninit::<u64>(n_entries.max(1) as usize)?;
    let values = gpu.uninit::<u64>(n_entries.max(1) as usize)?;
    let counter = gpu.zeros::<u64>(1)?;
    let emit_cfg = cudarc::driver::LaunchConfig { shared_mem_bytes: cfg.block_dim.0 * 8, ..cfg };
    match affs.data() {
        // SAFETY: as above; the affinities hold 3 n f32s; `keys`/`values`
        // hold the counted entries; 8 bytes of shared memory per thread.
        AffinityBuffer::F32(a) => launch!(
            gpu,
            "rg_emit_entries",
            emit_cfg,
            &labels.inner,
            &a.inner,
            &0u32,
            &p_dims,
            &counter.inner,
            &keys.inner,
            &values.inner
        ),
        // SAFETY: as above, with 3 n u8s.
        AffinityBuffer::U8(a) => launch!(
            gpu,
            "rg_emit_entries",
            emit_cfg,
            &labels.inner,
            &a.inner,
            &1u32,
            &p_dims,
            &counter.inner,
            &keys.inner,
            &values.inner
        ),
    }
    Ok((keys, values, n_entries))
}

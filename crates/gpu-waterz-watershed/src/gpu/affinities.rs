//! Affinity graphs in device memory: uploaded, wrapped, or borrowed from
//! another library (the `unsafe` borrowing constructors are in the
//! `launch` module, with the crate's other `unsafe` code).

use gpu_waterz_abi::Dims3;
use gpu_waterz_runtime::{DeviceBuffer, Gpu, Result, RuntimeError};

pub use gpu_waterz_abi::watershed::MAX_VOXELS;

/// Affinity values in device memory.
#[derive(Debug)]
#[non_exhaustive]
pub enum AffinityBuffer {
    /// float32 in `[0, 1]`.
    F32(DeviceBuffer<f32>),
    /// uint8, meaning `k / 255`.
    U8(DeviceBuffer<u8>),
}

impl AffinityBuffer {
    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            AffinityBuffer::F32(b) => b.len(),
            AffinityBuffer::U8(b) => b.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ordinal of the device that holds the values.
    pub fn ordinal(&self) -> usize {
        match self {
            AffinityBuffer::F32(b) => b.ordinal(),
            AffinityBuffer::U8(b) => b.ordinal(),
        }
    }
}

/// An affinity graph `(3, z, y, x)` in device memory, owned or borrowed
/// from another library (see [`DeviceAffinities::borrow_f32`]).
///
/// The extent has between 1 and [`MAX_VOXELS`] voxels, and the buffer
/// holds exactly three values per voxel: kernels read it by voxel index.
/// Borrowed memory is never freed here (its buffer leaks its handle).
#[derive(Debug)]
pub struct DeviceAffinities {
    data: AffinityBuffer,
    dims: Dims3,
}

/// Checks `dims` against [`MAX_VOXELS`] before anything is allocated, and
/// returns the number of voxels.
pub fn check_dims(dims: Dims3) -> Result<u64> {
    let n = dims.checked_voxels().unwrap_or(u64::MAX);
    if n == 0 {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "watershed",
            reason: format!("the volume {dims:?} is empty"),
        });
    }
    if n > MAX_VOXELS {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "watershed",
            reason: format!(
                "the volume has {n} voxels; the GPU backend supports at most {MAX_VOXELS} (u32 indices) per volume"
            ),
        });
    }
    Ok(n)
}

impl DeviceAffinities {
    /// Uploads C-ordered float32 affinities of shape `(3, dims.z, dims.y, dims.x)`.
    pub fn upload_f32(gpu: &Gpu, host: &[f32], dims: Dims3) -> Result<Self> {
        let n = check_dims(dims)?;
        check_values(host.len(), n)?;
        Ok(Self { data: AffinityBuffer::F32(gpu.upload(host)?), dims })
    }

    /// Uploads C-ordered uint8 affinities (`k / 255`).
    pub fn upload_u8(gpu: &Gpu, host: &[u8], dims: Dims3) -> Result<Self> {
        let n = check_dims(dims)?;
        check_values(host.len(), n)?;
        Ok(Self { data: AffinityBuffer::U8(gpu.upload(host)?), dims })
    }

    /// Wraps affinities already on the device: `3 * z * y * x` values.
    pub fn from_buffer(data: AffinityBuffer, dims: Dims3) -> Result<Self> {
        let n = check_dims(dims)?;
        check_values(data.len(), n)?;
        Ok(Self { data, dims })
    }

    /// The volume's extent.
    pub fn dims(&self) -> Dims3 {
        self.dims
    }

    /// The number of voxels (at least 1, at most [`MAX_VOXELS`]).
    pub fn n_voxels(&self) -> u64 {
        self.dims.z * self.dims.y * self.dims.x
    }

    /// The values: exactly `3 * n_voxels()` of them.
    pub fn data(&self) -> &AffinityBuffer {
        &self.data
    }

    /// Fails unless the affinities live on `gpu`'s device.
    pub fn check_device(&self, gpu: &Gpu) -> Result<()> {
        if self.data.ordinal() != gpu.ordinal() {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "launch",
                reason: format!(
                    "the affinities are on device {}, the launch on device {}",
                    self.data.ordinal(),
                    gpu.ordinal()
                ),
            });
        }
        Ok(())
    }
}

/// Fails unless there are three affinity values per voxel.
fn check_values(len: usize, n: u64) -> Result<()> {
    if len as u64 != 3 * n {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "upload",
            reason: format!("affinities hold {len} values, 3 * {n} are needed"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_beyond_u32_indices_fail_before_any_allocation() {
        let e = check_dims(Dims3::new(2048, 2048, 1024)).unwrap_err().to_string();
        assert!(e.contains("4294967296 voxels") && e.contains("at most"), "{e}");
        let e = check_dims(Dims3::new(u64::MAX, 2, 2)).unwrap_err().to_string();
        assert!(e.contains("at most"), "{e}");
        assert!(check_dims(Dims3::new(0, 5, 5)).unwrap_err().to_string().contains("empty"));
        assert_eq!(check_dims(Dims3::new(1024, 1024, 1024)).unwrap(), 1 << 30);
        assert_eq!(check_dims(Dims3::new(1, 1, MAX_VOXELS)).unwrap(), MAX_VOXELS);
        assert!(check_dims(Dims3::new(1, 1, MAX_VOXELS + 1)).is_err());
    }

    #[test]
    fn three_values_per_voxel() {
        assert!(check_values(24, 8).is_ok());
        assert!(check_values(23, 8).unwrap_err().to_string().contains("3 * 8"));
        assert!(check_values(25, 8).is_err());
    }
}

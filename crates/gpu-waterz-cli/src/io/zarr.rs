//! zarr v2 and v3 arrays (`dir.zarr/array`), read with zarrs.

use super::{format_err, IoError, Volume};
use ndarray::{ArrayD, IxDyn};
use std::path::Path;

/// Reads array `array` (e.g. `/volumes/affs`) of the zarr v2 or v3
/// hierarchy at `root`.
pub fn read_zarr(root: &Path, array: &str) -> Result<Volume, IoError> {
    if !root.is_dir() {
        return Err(IoError::Read {
            path: root.to_path_buf(),
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no such zarr folder"),
        });
    }
    let bad = |reason: String| format_err(root, "zarr", reason);
    let store = std::sync::Arc::new(zarrs::filesystem::FilesystemStore::new(root).map_err(|e| bad(e.to_string()))?);
    let handle = zarrs::array::Array::open(store, array).map_err(|e| bad(format!("no array {array:?}: {e}")))?;
    let subset = handle.subset_all();
    let shape: Vec<usize> = handle.shape().iter().map(|&s| s as usize).collect();
    let dim = IxDyn(&shape);
    let mk = |e: ndarray::ShapeError| format_err(root, "zarr", e.to_string());
    // The element type decides which read succeeds; try the supported ones.
    if let Ok(v) = handle.retrieve_array_subset::<Vec<f32>>(&subset) {
        return Ok(Volume::F32(ArrayD::from_shape_vec(dim, v).map_err(mk)?));
    }
    if let Ok(v) = handle.retrieve_array_subset::<Vec<u8>>(&subset) {
        return Ok(Volume::U8(ArrayD::from_shape_vec(dim, v).map_err(mk)?));
    }
    if let Ok(v) = handle.retrieve_array_subset::<Vec<u32>>(&subset) {
        return Ok(Volume::U32(ArrayD::from_shape_vec(dim, v).map_err(mk)?));
    }
    match handle.retrieve_array_subset::<Vec<u64>>(&subset) {
        Ok(v) => Ok(Volume::U64(ArrayD::from_shape_vec(dim, v).map_err(mk)?)),
        Err(e) => Err(IoError::Dtype {
            path: format!("{}{array}", root.display()),
            dtype: format!("{} ({e})", handle.data_type()),
            expected: "float32, uint8, uint32 or uint64",
        }),
    }
}

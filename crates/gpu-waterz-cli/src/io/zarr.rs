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
    // Read as the element type the metadata declares; a failure is then a
    // chunk that does not decode, which is found and named.
    macro_rules! read_as {
        ($t:ty, $variant:ident) => {
            match handle.retrieve_array_subset::<Vec<$t>>(&subset) {
                Ok(v) => Ok(Volume::$variant(ArrayD::from_shape_vec(dim, v).map_err(mk)?)),
                Err(e) => {
                    let codecs: Vec<String> = handle
                        .codecs()
                        .create_metadatas(&zarrs::array::codec::api::CodecMetadataOptions::default())
                        .iter()
                        .map(|m| m.name().to_string())
                        .collect();
                    let mut failing = None;
                    for_each_chunk(handle.chunk_grid_shape(), &mut |indices| {
                        if failing.is_none() {
                            if let Err(e) = handle.retrieve_chunk::<Vec<$t>>(indices) {
                                failing = Some((indices.to_vec(), e.to_string()));
                            }
                        }
                    });
                    Err(match failing {
                        Some((indices, cause)) => bad(format!(
                            "array {array:?}: chunk {indices:?} (stored as {}) cannot be decoded by the codecs [{}]: {cause}",
                            handle.chunk_key(&indices),
                            codecs.join(", ")
                        )),
                        None => bad(format!("array {array:?}: {e}")),
                    })
                }
            }
        };
    }
    // The type's name (zarr v2 arrays add their numpy string: "float32 / <f4").
    let dtype = handle.data_type().to_string();
    match dtype.split_whitespace().next().unwrap_or_default() {
        "float32" => read_as!(f32, F32),
        "uint8" => read_as!(u8, U8),
        "uint32" => read_as!(u32, U32),
        "uint64" => read_as!(u64, U64),
        _ => Err(IoError::Dtype {
            path: format!("{}{array}", root.display()),
            dtype,
            expected: "float32, uint8, uint32 or uint64",
        }),
    }
}

/// Calls `visit` with the indices of every chunk of a grid of `shape`
/// chunks, in C order.
fn for_each_chunk(shape: &[u64], visit: &mut dyn FnMut(&[u64])) {
    if shape.contains(&0) {
        return;
    }
    let mut indices = vec![0u64; shape.len()];
    loop {
        visit(&indices);
        let mut axis = shape.len();
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            indices[axis] += 1;
            if indices[axis] < shape[axis] {
                break;
            }
            indices[axis] = 0;
        }
    }
}

/// The attributes of array `array` of the zarr hierarchy at `root` (empty
/// when it cannot be opened).
pub(super) fn attributes(root: &Path, array: &str) -> serde_json::Map<String, serde_json::Value> {
    let Ok(store) = zarrs::filesystem::FilesystemStore::new(root) else { return serde_json::Map::new() };
    match zarrs::array::Array::open(std::sync::Arc::new(store), array) {
        Ok(handle) => handle.attributes().clone(),
        Err(_) => serde_json::Map::new(),
    }
}

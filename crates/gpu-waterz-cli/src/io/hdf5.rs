//! HDF5 datasets (`file.h5:/dataset`), read with the pure-Rust hdf5-pure.

use super::{format_err, IoError, Volume};
use ndarray::{ArrayD, IxDyn};
use std::path::Path;

/// Reads dataset `dataset` of the HDF5 file `file`.
pub fn read_hdf5(file: &Path, dataset: &str) -> Result<Volume, IoError> {
    if !file.exists() {
        return Err(IoError::Read {
            path: file.to_path_buf(),
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        });
    }
    let bad = |reason: String| format_err(file, "HDF5", reason);
    let h5 = hdf5_pure::File::open(file).map_err(|e| bad(e.to_string()))?;
    let ds = h5.dataset(dataset).map_err(|e| bad(format!("no dataset {dataset:?}: {e}")))?;
    let shape: Vec<usize> = ds.shape().map_err(|e| bad(e.to_string()))?.into_iter().map(|s| s as usize).collect();
    let dim = IxDyn(&shape);
    let mk = |e: ndarray::ShapeError| bad(e.to_string());
    let read = |e: hdf5_pure::Error| bad(format!("reading {dataset:?}: {e}"));
    Ok(match ds.dtype().map_err(|e| bad(e.to_string()))? {
        hdf5_pure::DType::F32 => Volume::F32(ArrayD::from_shape_vec(dim, ds.read_f32().map_err(read)?).map_err(mk)?),
        hdf5_pure::DType::U8 => Volume::U8(ArrayD::from_shape_vec(dim, ds.read_u8().map_err(read)?).map_err(mk)?),
        hdf5_pure::DType::U32 => Volume::U32(ArrayD::from_shape_vec(dim, ds.read_u32().map_err(read)?).map_err(mk)?),
        hdf5_pure::DType::U64 => Volume::U64(ArrayD::from_shape_vec(dim, ds.read_u64().map_err(read)?).map_err(mk)?),
        other => {
            return Err(IoError::Dtype {
                path: format!("{}:/{dataset}", file.display()),
                dtype: other.to_string(),
                expected: "float32, uint8, uint32 or uint64",
            })
        }
    })
}

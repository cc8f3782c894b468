//! HDF5 datasets (`file.h5:/dataset`), read with the pure-Rust hdf5-pure;
//! the storage features it does not read (HDF5 2.0's newest data layout,
//! written by h5py with `libver='latest'`, and the version-2 B-tree chunk
//! index of datasets with several unlimited dimensions) are read with the
//! pure-Rust rust-hdf5 instead.

use super::{format_err, IoError, Volume};
use ndarray::{ArrayD, IxDyn};
use std::path::Path;

/// Reads dataset `dataset` of the HDF5 file `file`.
pub fn read_hdf5(file: &Path, dataset: &str) -> Result<Volume, IoError> {
    match read_with_hdf5_pure(file, dataset) {
        Err(IoError::Unsupported { path, reason }) => read_with_rust_hdf5(file, dataset).map_err(|second| {
            IoError::Unsupported { path, reason: format!("{reason}; the second reader failed too: {second}") }
        }),
        other => other,
    }
}

/// The fallback reader for the features hdf5-pure does not read.
fn read_with_rust_hdf5(file: &Path, dataset: &str) -> Result<Volume, String> {
    use rust_hdf5::DatatypeMessage as T;
    let h5 = rust_hdf5::H5File::open(file).map_err(|e| e.to_string())?;
    let ds = h5.dataset(dataset).map_err(|e| e.to_string())?;
    let dim = IxDyn(&ds.shape());
    let mk = |e: ndarray::ShapeError| e.to_string();
    let err = |e: rust_hdf5::Hdf5Error| e.to_string();
    Ok(match ds.datatype().map_err(err)? {
        T::FloatingPoint { size: 4, .. } => {
            Volume::F32(ArrayD::from_shape_vec(dim, ds.read_raw().map_err(err)?).map_err(mk)?)
        }
        T::FixedPoint { size: 1, signed: false, .. } => {
            Volume::U8(ArrayD::from_shape_vec(dim, ds.read_raw().map_err(err)?).map_err(mk)?)
        }
        T::FixedPoint { size: 4, signed: false, .. } => {
            Volume::U32(ArrayD::from_shape_vec(dim, ds.read_raw().map_err(err)?).map_err(mk)?)
        }
        T::FixedPoint { size: 8, signed: false, .. } => {
            Volume::U64(ArrayD::from_shape_vec(dim, ds.read_raw().map_err(err)?).map_err(mk)?)
        }
        other => return Err(format!("element type {other:?}; expected float32, uint8, uint32 or uint64")),
    })
}

fn read_with_hdf5_pure(file: &Path, dataset: &str) -> Result<Volume, IoError> {
    if !file.exists() {
        return Err(IoError::Read {
            path: file.to_path_buf(),
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        });
    }
    let bad = |reason: String| format_err(file, "HDF5", reason);
    let h5 = hdf5_pure::File::open(file).map_err(|e| bad(e.to_string()))?;
    let ds = h5.dataset(dataset).map_err(|e| {
        let hint = unsupported_hint(&e.to_string(), file);
        if hint.is_empty() {
            bad(format!("no dataset {dataset:?}: {e}"))
        } else {
            IoError::Unsupported { path: file.to_path_buf(), reason: format!("dataset {dataset:?}: {hint} ({e})") }
        }
    })?;
    let shape: Vec<usize> = ds.shape().map_err(|e| bad(e.to_string()))?.into_iter().map(|s| s as usize).collect();
    let dim = IxDyn(&shape);
    let mk = |e: ndarray::ShapeError| bad(e.to_string());
    let read = |e: hdf5_pure::Error| {
        let hint = unsupported_hint(&e.to_string(), file);
        if hint.is_empty() {
            bad(format!("reading {dataset:?}: {e}"))
        } else {
            IoError::Unsupported { path: file.to_path_buf(), reason: format!("dataset {dataset:?}: {hint} ({e})") }
        }
    };
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

/// Whether `path` names an HDF5 file (`.h5`, `.hdf5`, `.hdf`).
pub(super) fn is_hdf5_name(path: &Path) -> bool {
    path.extension().is_some_and(|e| ["h5", "hdf5", "hdf"].iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// The error for an HDF5 file named without a dataset: it lists the file's
/// datasets, so that the user can pick one.
pub(super) fn missing_dataset(file: &Path) -> IoError {
    if !file.exists() {
        return IoError::Read {
            path: file.to_path_buf(),
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        };
    }
    let mut found = Vec::new();
    if let Ok(h5) = hdf5_pure::File::open(file) {
        list_datasets(&h5.root(), "", &mut found, 0);
    }
    let listing = if found.is_empty() {
        "the file lists no datasets".to_string()
    } else {
        let shown: Vec<String> = found.iter().take(20).map(|d| format!("{}:{d}", file.display())).collect();
        format!("its datasets: {}", shown.join(", "))
    };
    format_err(file, "HDF5", format!("name a dataset as FILE:/DATASET; {listing}"))
}

/// Appends the paths of the datasets under `group` (prefix `prefix`), a
/// few levels deep.
fn list_datasets(group: &hdf5_pure::Group, prefix: &str, out: &mut Vec<String>, depth: usize) {
    if let Ok(names) = group.datasets() {
        out.extend(names.into_iter().map(|n| format!("{prefix}/{n}")));
    }
    if depth >= 4 {
        return;
    }
    if let Ok(groups) = group.groups() {
        for name in groups {
            if let Ok(child) = group.group(&name) {
                list_datasets(&child, &format!("{prefix}/{name}"), out, depth + 1);
            }
        }
    }
}

/// For an error from a storage feature the reader does not implement (the
/// data layout of HDF5 2.0 files written with `libver='latest'`, chunk
/// indexes of datasets with several unlimited dimensions), which feature it
/// is and how to convert the file; else nothing.
fn unsupported_hint(error: &str, file: &Path) -> String {
    let feature = if error.contains("data layout version") {
        "the data layout message of HDF5 2.0's newest format (h5py libver='latest')"
    } else if error.contains("B-tree chunk index") || error.contains("chunk index") {
        "the version 2 B-tree chunk index (chunked datasets with several unlimited dimensions, h5py libver >= 'v110')"
    } else {
        return String::new();
    };
    format!(
        "gpu-waterz's HDF5 reader does not read {feature}; rewrite the file in the HDF5 1.8 format, e.g. \
         `h5repack --low=0 --high=1 {f} converted.h5` (or in h5py: libver=('earliest', 'v108'), or maxshape=None), \
         or convert it to zarr",
        f = file.display()
    )
}

/// The attributes of dataset `dataset` of the HDF5 file `file` that are
/// numbers, strings or lists of them, as JSON (empty when unreadable).
pub(super) fn attributes(file: &Path, dataset: &str) -> serde_json::Map<String, serde_json::Value> {
    use hdf5_pure::AttrValue as A;
    use serde_json::Value;
    let mut out = serde_json::Map::new();
    let Ok(h5) = hdf5_pure::File::open(file) else { return out };
    let Ok(ds) = h5.dataset(dataset) else { return out };
    let Ok(attrs) = ds.attrs() else { return out };
    let numbers = |v: Vec<f64>| Value::Array(v.into_iter().map(Value::from).collect());
    for (name, value) in attrs {
        let json = match value {
            A::F64(x) => Value::from(x),
            A::F32(x) => Value::from(x as f64),
            A::I64(x) => Value::from(x),
            A::I32(x) => Value::from(x),
            A::U64(x) => Value::from(x),
            A::U32(x) => Value::from(x),
            A::F64Array(v) => numbers(v),
            A::F32Array(v) => numbers(v.into_iter().map(f64::from).collect()),
            A::I64Array(v) => numbers(v.into_iter().map(|x| x as f64).collect()),
            A::I32Array(v) => numbers(v.into_iter().map(f64::from).collect()),
            A::U64Array(v) => numbers(v.into_iter().map(|x| x as f64).collect()),
            A::U32Array(v) => numbers(v.into_iter().map(f64::from).collect()),
            A::String(s) | A::AsciiString(s) => Value::from(s),
            A::StringArray(v) => Value::Array(v.into_iter().map(Value::from).collect()),
            _ => continue,
        };
        out.insert(name, json);
    }
    out
}

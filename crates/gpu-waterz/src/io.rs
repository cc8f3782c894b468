//! Reading and writing volumes: `.npy`, HDF5 datasets as
//! `file.h5:/dataset`, and zarr (v2 or v3) arrays as `dir.zarr/array`
//! (`dir.zarr` alone for an array at the root). Outputs are written atomically (a temporary file in
//! the same folder, then a rename), so a failure leaves no partial file.

use ndarray::{ArrayD, IxDyn};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Errors of reading and writing volumes.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The file could not be opened or read. (The cause is part of the
    /// message, not a separate source, so that it is printed once.)
    #[error("cannot read {path}: {cause}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// The file could not be written.
    #[error("cannot write {path}: {cause}")]
    Write {
        /// The path.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// The file's content is not what its format promises.
    #[error("{path} is not a valid {format} file: {reason}")]
    Format {
        /// The path.
        path: PathBuf,
        /// `"npy"` or `"HDF5"`.
        format: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The element type is not one that gpu-waterz reads.
    #[error("{path}: unsupported element type {dtype}; expected {expected}")]
    Dtype {
        /// The path.
        path: String,
        /// The type found.
        dtype: String,
        /// The types accepted here.
        expected: &'static str,
    },
}

/// A volume of one of the element types gpu-waterz reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Volume {
    /// float32.
    F32(ArrayD<f32>),
    /// uint8.
    U8(ArrayD<u8>),
    /// uint32.
    U32(ArrayD<u32>),
    /// uint64.
    U64(ArrayD<u64>),
}

impl Volume {
    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            Volume::F32(a) => a.shape(),
            Volume::U8(a) => a.shape(),
            Volume::U32(a) => a.shape(),
            Volume::U64(a) => a.shape(),
        }
    }

    /// The element type's numpy name.
    pub fn dtype(&self) -> &'static str {
        match self {
            Volume::F32(_) => "float32",
            Volume::U8(_) => "uint8",
            Volume::U32(_) => "uint32",
            Volume::U64(_) => "uint64",
        }
    }

    /// Labels as u64 (from u32 or u64; u8 too), or a dtype error.
    pub fn into_labels(self, source: &str) -> Result<ArrayD<u64>, IoError> {
        match self {
            Volume::U64(a) => Ok(a),
            Volume::U32(a) => Ok(a.mapv(u64::from)),
            Volume::U8(a) => Ok(a.mapv(u64::from)),
            other => Err(IoError::Dtype {
                path: source.into(),
                dtype: other.dtype().into(),
                expected: "uint32 or uint64 labels",
            }),
        }
    }
}

/// Where a volume lives: a `.npy` file, or a dataset in an HDF5 file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VolumeSource {
    /// A `.npy` file.
    Npy(PathBuf),
    /// `file.h5:/dataset`.
    Hdf5 {
        /// The file.
        file: PathBuf,
        /// The dataset's path inside it.
        dataset: String,
    },
    /// `dir.zarr/array`: a zarr v2 or v3 hierarchy and an array in it.
    Zarr {
        /// The hierarchy's root folder.
        root: PathBuf,
        /// The array's path inside it (`/` for the root).
        array: String,
    },
}

impl VolumeSource {
    /// Parses `path.npy`, `file.h5:/dataset` (also `.hdf`, `.hdf5`) or
    /// `dir.zarr/array` (also `.zarr:/array`, or `.n5`-free `.zarr` alone).
    pub fn parse(spec: &str) -> Self {
        if let Some(pos) = spec.find(".zarr") {
            let (root, rest) = spec.split_at(pos + 5);
            let array = rest.trim_start_matches(':').trim_start_matches('/');
            return VolumeSource::Zarr { root: root.into(), array: format!("/{array}") };
        }
        for ext in [".h5:", ".hdf5:", ".hdf:"] {
            if let Some(pos) = spec.rfind(ext) {
                let (file, dataset) = spec.split_at(pos + ext.len() - 1);
                return VolumeSource::Hdf5 {
                    file: file.into(),
                    dataset: dataset[1..].trim_start_matches('/').to_string(),
                };
            }
        }
        VolumeSource::Npy(spec.into())
    }

    /// Reads the volume.
    pub fn read(&self) -> Result<Volume, IoError> {
        match self {
            VolumeSource::Npy(path) => read_npy(path),
            VolumeSource::Hdf5 { file, dataset } => read_hdf5(file, dataset),
            VolumeSource::Zarr { root, array } => read_zarr(root, array),
        }
    }
}

fn format_err(path: &Path, format: &'static str, reason: impl Into<String>) -> IoError {
    IoError::Format { path: path.to_path_buf(), format, reason: reason.into() }
}

/// Reads a `.npy` file of float32, uint8, uint32 or uint64 (little-endian,
/// C order).
pub fn read_npy(path: &Path) -> Result<Volume, IoError> {
    let read_err = |source| IoError::Read { path: path.to_path_buf(), cause: source };
    let mut file = std::fs::File::open(path).map_err(read_err)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(read_err)?;
    let bad = |reason: &str| format_err(path, "npy", reason);
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("missing the \\x93NUMPY magic"));
    }
    let major = bytes[6];
    let (header_len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(bad("truncated header"));
            }
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        v => return Err(bad(&format!("unknown format version {v}"))),
    };
    if bytes.len() < start + header_len {
        return Err(bad("truncated header"));
    }
    let header = std::str::from_utf8(&bytes[start..start + header_len]).map_err(|_| bad("header is not text"))?;
    let field = |key: &str| -> Result<&str, IoError> {
        let k = header.find(&format!("'{key}'")).ok_or_else(|| bad(&format!("header has no '{key}'")))?;
        let rest = &header[k + key.len() + 2..];
        let colon = rest.find(':').ok_or_else(|| bad("malformed header"))?;
        Ok(rest[colon + 1..].trim_start())
    };
    let descr = field("descr")?;
    let descr = descr.trim_start_matches('\'');
    let descr = &descr[..descr.find('\'').ok_or_else(|| bad("malformed descr"))?];
    if field("fortran_order")?.starts_with("True") {
        return Err(bad("Fortran-ordered arrays are not supported; save with np.ascontiguousarray"));
    }
    let shape_text = field("shape")?;
    let open = shape_text.find('(').ok_or_else(|| bad("malformed shape"))?;
    let close = shape_text.find(')').ok_or_else(|| bad("malformed shape"))?;
    let shape: Vec<usize> = shape_text[open + 1..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad("malformed shape")))
        .collect::<Result<_, _>>()?;
    let n: usize = shape.iter().try_fold(1usize, |a, &b| a.checked_mul(b)).ok_or_else(|| bad("shape overflows"))?;
    let data = &bytes[start + header_len..];
    let itemsize = match descr {
        "<f4" => 4,
        "|u1" | "<u1" => 1,
        "<u4" => 4,
        "<u8" => 8,
        other => {
            return Err(IoError::Dtype {
                path: path.display().to_string(),
                dtype: other.into(),
                expected: "float32 (<f4) or uint8 (|u1) affinities, uint32 (<u4) or uint64 (<u8) labels",
            })
        }
    };
    if data.len() < n * itemsize {
        return Err(bad(&format!("truncated data: {} bytes for {n} elements of {itemsize} bytes", data.len())));
    }
    let data = &data[..n * itemsize];
    let dim = IxDyn(&shape);
    let mk = |e: ndarray::ShapeError| bad(&e.to_string());
    Ok(match descr {
        "<f4" => Volume::F32(
            ArrayD::from_shape_vec(
                dim,
                data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
            )
            .map_err(mk)?,
        ),
        "<u4" => Volume::U32(
            ArrayD::from_shape_vec(
                dim,
                data.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect(),
            )
            .map_err(mk)?,
        ),
        "<u8" => Volume::U64(
            ArrayD::from_shape_vec(
                dim,
                data.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect(),
            )
            .map_err(mk)?,
        ),
        _ => Volume::U8(ArrayD::from_shape_vec(dim, data.to_vec()).map_err(mk)?),
    })
}

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

/// Writes `bytes` to `path` atomically: a temporary file beside it, then a
/// rename. On failure nothing is left at `path` or beside it.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let write_err = |source| IoError::Write { path: path.to_path_buf(), cause: source };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(write_err(e));
    }
    Ok(())
}

/// The header of a `.npy` file (format 1.0) for C-ordered data of numpy
/// type `descr` (e.g. `<u8`, `<f4`) and `shape`, padded so that the data
/// starts at a multiple of 64 bytes.
pub fn npy_header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let shape_text = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!("({})", shape.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// Element types written to `.npy` files.
pub trait NpyElement: Copy {
    /// numpy's type string.
    const DESCR: &'static str;
    /// Appends the little-endian bytes of `self`.
    fn extend_le(self, out: &mut Vec<u8>);
}

macro_rules! npy_element {
    ($t:ty, $descr:literal) => {
        impl NpyElement for $t {
            const DESCR: &'static str = $descr;
            fn extend_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}
npy_element!(u8, "|u1");
npy_element!(u32, "<u4");
npy_element!(u64, "<u8");
npy_element!(f32, "<f4");

/// The bytes of a `.npy` file holding `data` (C order) of `shape`.
pub fn npy_bytes<T: NpyElement>(shape: &[usize], data: impl IntoIterator<Item = T>) -> Vec<u8> {
    let mut out = npy_header(T::DESCR, shape);
    for v in data {
        v.extend_le(&mut out);
    }
    out
}

/// The bytes of a `.npy` file holding `data` as uint64.
pub fn npy_bytes_u64(shape: &[usize], data: &[u64]) -> Vec<u8> {
    npy_bytes(shape, data.iter().copied())
}

/// Writes `array` as a `.npy` of its element type, atomically.
pub fn write_npy<T: NpyElement, D: ndarray::Dimension>(
    path: &Path,
    array: &ndarray::ArrayView<'_, T, D>,
) -> Result<(), IoError> {
    write_atomically(path, &npy_bytes(array.shape(), array.iter().copied()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_roundtrip_and_truncation() {
        let dir = std::env::temp_dir().join(format!("gpu-waterz-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.npy");
        let a = ndarray::Array3::from_shape_fn((2, 3, 4), |(z, y, x)| (z * 100 + y * 10 + x) as u64);
        write_npy(&path, &a.view()).unwrap();
        let back = read_npy(&path).unwrap();
        assert_eq!(back, Volume::U64(a.clone().into_dyn()));
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let e = read_npy(&path).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
        std::fs::write(&path, b"hello").unwrap();
        assert!(read_npy(&path).unwrap_err().to_string().contains("magic"));
        let e = read_npy(&dir.join("missing.npy")).unwrap_err().to_string();
        assert!(e.contains("cannot read"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parses_sources() {
        assert_eq!(VolumeSource::parse("a/b.npy"), VolumeSource::Npy("a/b.npy".into()));
        assert_eq!(
            VolumeSource::parse("d/x.h5:/volumes/labels"),
            VolumeSource::Hdf5 { file: "d/x.h5".into(), dataset: "volumes/labels".into() }
        );
        assert_eq!(
            VolumeSource::parse("out/seg.zarr/volumes/affs"),
            VolumeSource::Zarr { root: "out/seg.zarr".into(), array: "/volumes/affs".into() }
        );
        assert_eq!(VolumeSource::parse("a.zarr"), VolumeSource::Zarr { root: "a.zarr".into(), array: "/".into() });
        assert_eq!(
            VolumeSource::parse("sample_A.hdf:volumes/raw"),
            VolumeSource::Hdf5 { file: "sample_A.hdf".into(), dataset: "volumes/raw".into() }
        );
    }
}

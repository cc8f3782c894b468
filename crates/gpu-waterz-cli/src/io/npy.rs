//! `.npy` files (format 1.0 to 3.0 read, 1.0 written): float32, uint8,
//! uint32 and uint64, little-endian, C order.

use super::{format_err, write_atomically, IoError, Volume};
use ndarray::{ArrayD, IxDyn};
use std::io::Read;
use std::path::Path;

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
}

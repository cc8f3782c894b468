//! `.npy` files (format 1.0 to 3.0 read, 1.0 written): float32, uint8,
//! uint32 and uint64, little-endian, C order.

use super::{format_err, write_parts_atomically, IoError, Volume};
use ndarray::{ArrayD, IxDyn};
use rayon::prelude::*;
use std::os::unix::fs::FileExt;

#[cfg(not(target_endian = "little"))]
compile_error!("npy data is read and written in place, which assumes a little-endian host");
use std::path::Path;

/// Bytes each thread reads or writes at a time.
const PIECE_BYTES: usize = 8 << 20;

/// Reads a `.npy` file of float32, uint8, uint32 or uint64 (little-endian,
/// C order). The data is read straight into the volume's memory, in large
/// pieces on all threads (no whole-file copy first).
pub fn read_npy(path: &Path) -> Result<Volume, IoError> {
    let read_err = |source| IoError::Read { path: path.to_path_buf(), cause: source };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let file_len = file.metadata().map_err(read_err)?.len();
    let bad = |reason: &str| format_err(path, "npy", reason);
    let mut prefix = [0u8; 12];
    let got = read_up_to(&file, &mut prefix, 0).map_err(read_err)?;
    if got < 10 || &prefix[..6] != b"\x93NUMPY" {
        return Err(bad("missing the \\x93NUMPY magic"));
    }
    let major = prefix[6];
    let (header_len, start) = match major {
        1 => (u16::from_le_bytes([prefix[8], prefix[9]]) as usize, 10),
        2 | 3 => {
            if got < 12 {
                return Err(bad("truncated header"));
            }
            (u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]) as usize, 12)
        }
        v => return Err(bad(&format!("unknown format version {v}"))),
    };
    if file_len < (start + header_len) as u64 {
        return Err(bad("truncated header"));
    }
    let mut header_bytes = vec![0u8; header_len];
    file.read_exact_at(&mut header_bytes, start as u64).map_err(read_err)?;
    let header = std::str::from_utf8(&header_bytes).map_err(|_| bad("header is not text"))?;
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
    let offset = (start + header_len) as u64;
    let available = file_len - offset;
    if (available as u128) < (n as u128) * (itemsize as u128) {
        return Err(bad(&format!("truncated data: {available} bytes for {n} elements of {itemsize} bytes")));
    }
    let dim = IxDyn(&shape);
    let mk = |e: ndarray::ShapeError| bad(&e.to_string());
    Ok(match descr {
        "<f4" => {
            Volume::F32(ArrayD::from_shape_vec(dim, read_values(&file, offset, n).map_err(read_err)?).map_err(mk)?)
        }
        "<u4" => {
            Volume::U32(ArrayD::from_shape_vec(dim, read_values(&file, offset, n).map_err(read_err)?).map_err(mk)?)
        }
        "<u8" => {
            Volume::U64(ArrayD::from_shape_vec(dim, read_values(&file, offset, n).map_err(read_err)?).map_err(mk)?)
        }
        _ => Volume::U8(ArrayD::from_shape_vec(dim, read_values(&file, offset, n).map_err(read_err)?).map_err(mk)?),
    })
}

/// Reads up to `buf.len()` bytes at `offset`; returns how many (fewer only
/// at the end of the file).
fn read_up_to(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(k) => done += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// `n` little-endian values of `T` at `offset`, read in pieces on all
/// threads straight into the vector's memory.
fn read_values<T: bytemuck::Pod + Send>(file: &std::fs::File, offset: u64, n: usize) -> std::io::Result<Vec<T>> {
    // A zeroed vector is fresh pages from the allocator: no pass over it.
    let mut values = vec![T::zeroed(); n];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut values);
    bytes
        .par_chunks_mut(PIECE_BYTES)
        .enumerate()
        .try_for_each(|(i, piece)| file.read_exact_at(piece, offset + (i * PIECE_BYTES) as u64))?;
    Ok(values)
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
pub trait NpyElement: bytemuck::Pod + Send + Sync {
    /// numpy's type string.
    const DESCR: &'static str;
}

impl NpyElement for u8 {
    const DESCR: &'static str = "|u1";
}
impl NpyElement for u32 {
    const DESCR: &'static str = "<u4";
}
impl NpyElement for u64 {
    const DESCR: &'static str = "<u8";
}
impl NpyElement for f32 {
    const DESCR: &'static str = "<f4";
}
impl NpyElement for f64 {
    const DESCR: &'static str = "<f8";
}

/// The bytes of a `.npy` file holding `data` (C order) of `shape`.
pub fn npy_bytes<T: NpyElement>(shape: &[usize], data: &[T]) -> Vec<u8> {
    let mut out = npy_header(T::DESCR, shape);
    out.extend_from_slice(bytemuck::cast_slice(data));
    out
}

/// The bytes of a `.npy` file holding `data` as uint64.
pub fn npy_bytes_u64(shape: &[usize], data: &[u64]) -> Vec<u8> {
    npy_bytes(shape, data)
}

/// Writes `array` as a `.npy` of its element type, atomically: the header
/// and the array's own memory (when it is in C order) are written in large
/// pieces on all threads, with no copy into a file image first.
pub fn write_npy<T: NpyElement, D: ndarray::Dimension>(
    path: &Path,
    array: &ndarray::ArrayView<'_, T, D>,
) -> Result<(), IoError> {
    let header = npy_header(T::DESCR, array.shape());
    let owned;
    let values: &[T] = match array.as_slice() {
        Some(values) => values,
        None => {
            owned = array.iter().copied().collect::<Vec<T>>();
            &owned
        }
    };
    write_parts_atomically(path, &[&header, bytemuck::cast_slice(values)], PIECE_BYTES)
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

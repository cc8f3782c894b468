//! `.npy` files (format 1.0 to 3.0 read, 1.0 written): float32, uint8,
//! uint32 and uint64, little-endian, C order.

use super::{format_err, read_ahead, write_parts_atomically, ElementType, IoError, PieceRanges, Volume};
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
    NpyFile::open(path)?.read()
}

/// A `.npy` file whose header was read and checked: its element type,
/// shape and data are known to be there (the file holds enough bytes).
#[derive(Debug)]
pub struct NpyFile {
    path: std::path::PathBuf,
    file: std::fs::File,
    dtype: ElementType,
    shape: Vec<usize>,
    /// Where the data starts.
    offset: u64,
    /// The number of elements.
    n: usize,
}

impl NpyFile {
    /// Opens `path` and reads its header (format 1.0 to 3.0).
    pub fn open(path: &Path) -> Result<Self, IoError> {
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
        let dtype = match descr {
            "<f4" => ElementType::F32,
            "|u1" | "<u1" => ElementType::U8,
            "<u4" => ElementType::U32,
            "<u8" => ElementType::U64,
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
        let itemsize = dtype.size();
        if (available as u128) < (n as u128) * (itemsize as u128) {
            return Err(bad(&format!("truncated data: {available} bytes for {n} elements of {itemsize} bytes")));
        }
        Ok(Self { path: path.to_path_buf(), file, dtype, shape, offset, n })
    }

    /// The element type.
    pub fn dtype(&self) -> ElementType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The values of the box `lo..hi` (per axis, `(c, z, y, x)`, inside a
    /// four-dimensional float32 or uint8 array) as float32 in C order:
    /// float32 values as they are, uint8 ones as `k / 255`
    /// ([`gpu_waterz_core::affinities::u8_affinity`]). One positioned read
    /// per row of the box, so that several threads may read at once.
    pub fn read_region_f32(&self, lo: [usize; 4], hi: [usize; 4]) -> Result<Vec<f32>, IoError> {
        let mut values = Vec::with_capacity((0..4).map(|a| hi[a].saturating_sub(lo[a])).product());
        let dtype = self.dtype;
        self.read_region_rows(lo, hi, |bytes| match dtype {
            ElementType::U8 => values.extend(bytes.iter().map(|&k| gpu_waterz_core::affinities::u8_affinity(k))),
            _ => values.extend(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        })?;
        Ok(values)
    }

    /// The uint8 values of the box `lo..hi` of a four-dimensional uint8
    /// array, as stored, in C order (what [`NpyFile::read_region_f32`] gives
    /// as `k / 255`, in a quarter of the bytes).
    pub fn read_region_u8(&self, lo: [usize; 4], hi: [usize; 4]) -> Result<Vec<u8>, IoError> {
        if self.dtype != ElementType::U8 {
            let reason = format!("uint8 regions are read from uint8 arrays, not {:?}", self.dtype);
            return Err(format_err(&self.path, "npy", reason));
        }
        let mut values = Vec::with_capacity((0..4).map(|a| hi[a].saturating_sub(lo[a])).product());
        self.read_region_rows(lo, hi, |bytes| values.extend_from_slice(bytes))?;
        Ok(values)
    }

    /// The box `lo..hi` of a four-dimensional float32 or uint8 array, row
    /// by row along x in C order, each row's bytes handed to `row`.
    fn read_region_rows(&self, lo: [usize; 4], hi: [usize; 4], mut row: impl FnMut(&[u8])) -> Result<(), IoError> {
        let bad = |reason: String| format_err(&self.path, "npy", reason);
        if self.shape.len() != 4 || !matches!(self.dtype, ElementType::F32 | ElementType::U8) {
            return Err(bad(format!(
                "regions are read from (c, z, y, x) float32 or uint8 arrays, not {:?}",
                self.shape
            )));
        }
        if (0..4).any(|a| lo[a] > hi[a] || hi[a] > self.shape[a]) {
            return Err(bad(format!("the box {lo:?}..{hi:?} is not inside {:?}", self.shape)));
        }
        let read_err = |source| IoError::Read { path: self.path.clone(), cause: source };
        let elem = self.dtype.size();
        let (run, [_, zd, yd, xd]) = (hi[3] - lo[3], [self.shape[0], self.shape[1], self.shape[2], self.shape[3]]);
        let mut bytes = vec![0u8; run * elem];
        for c in lo[0]..hi[0] {
            for z in lo[1]..hi[1] {
                for y in lo[2]..hi[2] {
                    let first = ((c * zd + z) * yd + y) * xd + lo[3];
                    self.file.read_exact_at(&mut bytes, self.offset + (first * elem) as u64).map_err(read_err)?;
                    row(&bytes);
                }
            }
        }
        Ok(())
    }

    /// Reads the whole array, in large pieces on all threads straight into
    /// its memory.
    pub fn read(self) -> Result<Volume, IoError> {
        let read_err = |source| IoError::Read { path: self.path.clone(), cause: source };
        let dim = IxDyn(&self.shape);
        let mk = |e: ndarray::ShapeError| format_err(&self.path, "npy", e.to_string());
        let (file, offset, n) = (&self.file, self.offset, self.n);
        Ok(match self.dtype {
            ElementType::F32 => {
                Volume::F32(ArrayD::from_shape_vec(dim, read_values(file, offset, n).map_err(read_err)?).map_err(mk)?)
            }
            ElementType::U32 => {
                Volume::U32(ArrayD::from_shape_vec(dim, read_values(file, offset, n).map_err(read_err)?).map_err(mk)?)
            }
            ElementType::U64 => {
                Volume::U64(ArrayD::from_shape_vec(dim, read_values(file, offset, n).map_err(read_err)?).map_err(mk)?)
            }
            ElementType::U8 => {
                Volume::U8(ArrayD::from_shape_vec(dim, read_values(file, offset, n).map_err(read_err)?).map_err(mk)?)
            }
        })
    }

    /// Reads the first `n_values` elements (at most all of them) in order,
    /// in pieces of `piece_values` elements, each read on all threads,
    /// and hands each piece to `consume` with the index of its first
    /// element. `consume` runs on a thread of its own, on one piece while
    /// the next is read, so a consumer such as an upload to a GPU overlaps
    /// the reading; two piece buffers are all the host memory this takes.
    /// `T` must be the file's element type (of its size); stops at the
    /// first error, of either side.
    pub fn read_in_pieces<T: bytemuck::Pod + Send, E: From<IoError> + Send>(
        &self,
        n_values: usize,
        piece_values: usize,
        consume: impl FnMut(usize, &[T]) -> Result<(), E> + Send,
    ) -> Result<(), E> {
        if std::mem::size_of::<T>() != self.dtype.size() {
            let reason = format!("read as {}-byte values, but it holds {:?}", std::mem::size_of::<T>(), self.dtype);
            return Err(E::from(format_err(&self.path, "npy", reason)));
        }
        let n_values = n_values.min(self.n);
        let piece_values = piece_values.max(1);
        let size = self.dtype.size();
        let mut first = 0;
        read_ahead(
            |piece: &mut Vec<T>| -> Result<Option<PieceRanges>, E> {
                if first >= n_values {
                    return Ok(None);
                }
                let count = (n_values - first).min(piece_values);
                piece.resize(count, T::zeroed());
                read_in_parallel(&self.file, bytemuck::cast_slice_mut(piece), self.offset + (first * size) as u64)
                    .map_err(|cause| E::from(IoError::Read { path: self.path.clone(), cause }))?;
                let ranges = vec![(first, 0..count)];
                first += count;
                Ok(Some(ranges))
            },
            consume,
        )
    }
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
    read_in_parallel(file, bytemuck::cast_slice_mut(&mut values), offset)?;
    Ok(values)
}

/// Fills `bytes` from `file` at `offset`, in pieces of [`PIECE_BYTES`] on
/// all threads.
fn read_in_parallel(file: &std::fs::File, bytes: &mut [u8], offset: u64) -> std::io::Result<()> {
    bytes
        .par_chunks_mut(PIECE_BYTES)
        .enumerate()
        .try_for_each(|(i, piece)| file.read_exact_at(piece, offset + (i * PIECE_BYTES) as u64))
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
impl NpyElement for i32 {
    const DESCR: &'static str = "<i4";
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

    #[test]
    fn pieces_arrive_in_order_and_errors_stop_the_read() {
        let dir = std::env::temp_dir().join(format!("gpu-waterz-pieces-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.npy");
        let a = ndarray::Array4::from_shape_fn((4, 3, 5, 7), |(c, z, y, x)| (c * 1000 + z * 100 + y * 10 + x) as f32);
        write_npy(&path, &a.view()).unwrap();
        let file = NpyFile::open(&path).unwrap();
        assert_eq!((file.dtype(), file.shape()), (ElementType::F32, &[4, 3, 5, 7][..]));
        let all = a.as_slice().unwrap();
        // The first three channels, in pieces of 17 values (the last short).
        for piece in [17, 1, 105, 1 << 20] {
            let mut got = Vec::new();
            file.read_in_pieces(3 * 105, piece, |first, values: &[f32]| -> Result<(), IoError> {
                assert_eq!(first, got.len());
                assert!(values.len() <= piece);
                got.extend_from_slice(values);
                Ok(())
            })
            .unwrap();
            assert_eq!(got, all[..3 * 105], "pieces of {piece}");
        }
        // The consumer's error ends the read, and is the result.
        let mut calls = 0;
        let e = file
            .read_in_pieces(all.len(), 10, |_, _: &[f32]| -> Result<(), IoError> {
                calls += 1;
                Err(format_err(&path, "npy", "consumer failed"))
            })
            .unwrap_err();
        assert!(e.to_string().contains("consumer failed") && calls == 1, "{e}");
        // Values of another size are refused.
        let e = file.read_in_pieces(10, 10, |_, _: &[u8]| -> Result<(), IoError> { Ok(()) }).unwrap_err();
        assert!(e.to_string().contains("1-byte values"), "{e}");
        assert_eq!(NpyFile::open(&path).unwrap().read().unwrap(), Volume::F32(a.into_dyn()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! HDF5 datasets (`file.h5:/dataset`), read with the pure-Rust hdf5-pure;
//! the storage features it does not read (HDF5 2.0's newest data layout,
//! written by h5py with `libver='latest'`, and the version-2 B-tree chunk
//! index of datasets with several unlimited dimensions) are read with the
//! pure-Rust rust-hdf5 instead.

use super::{format_err, read_ahead, ElementType, IoError, PieceRanges, Volume};
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

/// The element types read in parallel, from the HDF5 datatype (class, size
/// and byte order).
fn parallel_kind(ds: &hdf5_pure::Dataset) -> Option<ElementType> {
    use hdf5_pure::{Datatype as T, DatatypeByteOrder as B};
    let little_endian = match ds.datatype().ok()? {
        T::FixedPoint { byte_order, size, .. } | T::FloatingPoint { byte_order, size, .. } => {
            size == 1 || byte_order == B::LittleEndian
        }
        _ => false,
    };
    if !little_endian {
        return None;
    }
    Some(match ds.dtype().ok()? {
        hdf5_pure::DType::F32 => ElementType::F32,
        hdf5_pure::DType::U8 => ElementType::U8,
        hdf5_pure::DType::U32 => ElementType::U32,
        hdf5_pure::DType::U64 => ElementType::U64,
        _ => return None,
    })
}

/// A chunked dataset whose chunks are read at their file offsets and
/// inflated on every core (deflate and shuffle, the filters h5py writes;
/// little-endian float32, uint8, uint32 or uint64; every chunk of the grid
/// allocated): the whole of it at once ([`read_hdf5`] takes this path), or
/// in pieces ([`ChunkedDataset::read_in_pieces`]).
#[derive(Debug)]
pub struct ChunkedDataset {
    file: std::path::PathBuf,
    handle: std::fs::File,
    /// The file's length, which every chunk lies within.
    file_len: u64,
    dtype: ElementType,
    filters: Vec<hdf5_pure::Filter>,
    chunks: Vec<hdf5_pure::Chunk>,
    shape: Vec<usize>,
    chunk: Vec<usize>,
}

impl ChunkedDataset {
    /// Dataset `dataset` of `file` when the parallel reader takes it;
    /// `None` when it does not (or the file is one that only the other
    /// reader opens): [`read_hdf5`] then reads it.
    pub fn open(file: &Path, dataset: &str) -> Result<Option<Self>, IoError> {
        // Metadata only: `File::open` would read the whole file into memory,
        // which the chunks are then read from again.
        let Ok(h5) = hdf5_pure::File::open_streaming(file) else { return Ok(None) };
        let Ok(ds) = h5.dataset(dataset) else { return Ok(None) };
        Self::of(file, &ds).transpose()
    }

    /// The layout of `ds` when the parallel reader takes it.
    fn of(file: &Path, ds: &hdf5_pure::Dataset) -> Option<Result<Self, IoError>> {
        if !ds.is_chunked() {
            return None;
        }
        let dtype = parallel_kind(ds)?;
        let filters = ds.filter_pipeline();
        if filters.iter().any(|f| f.id != 1 && f.id != 2) {
            return None;
        }
        let shape: Vec<usize> = ds.shape().ok()?.into_iter().map(|s| s as usize).collect();
        let chunk: Vec<usize> = ds.chunk_shape().ok()??.into_iter().map(|s| s as usize).collect();
        if chunk.len() != shape.len() || shape.is_empty() || chunk.contains(&0) || shape.contains(&0) {
            return None;
        }
        // Sizes from the file: a dataset or chunk whose byte size overflows
        // is left to the other reader (which refuses it).
        let bytes = |extent: &[usize]| extent.iter().try_fold(dtype.size(), |n, &e| n.checked_mul(e));
        if bytes(&shape).is_none_or(|n| n > isize::MAX as usize) || bytes(&chunk).is_none() {
            return None;
        }
        let chunks = ds.chunks().ok()?;
        let expected: usize = shape.iter().zip(&chunk).map(|(s, c)| s.div_ceil(*c)).product();
        if chunks.len() != expected || chunks.iter().any(|c| c.offset.len() != shape.len()) {
            return None;
        }
        // Exactly the chunk grid: every offset aligned, inside, and once.
        let mut seen = std::collections::HashSet::with_capacity(chunks.len());
        let on_grid = chunks.iter().all(|c| {
            c.offset
                .iter()
                .zip(&shape)
                .zip(&chunk)
                .all(|((&o, &s), &k)| (o as usize) < s && (o as usize).is_multiple_of(k))
                && seen.insert(c.offset.clone())
        });
        if !on_grid {
            return None;
        }
        let opened = std::fs::File::open(file).and_then(|h| Ok((h.metadata()?.len(), h)));
        let (file_len, handle) = match opened {
            Ok(opened) => opened,
            Err(cause) => return Some(Err(IoError::Read { path: file.to_path_buf(), cause })),
        };
        Some(Ok(Self { file: file.to_path_buf(), handle, file_len, dtype, filters, chunks, shape, chunk }))
    }

    /// The element type.
    pub fn dtype(&self) -> ElementType {
        self.dtype
    }

    /// The dataset's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Reads and inflates one chunk (`elem` bytes per element): its
    /// filters undone in the reverse of their order.
    fn decode(&self, c: &hdf5_pure::Chunk, elem: usize) -> Result<Vec<u8>, IoError> {
        use std::io::Read;
        use std::os::unix::fs::FileExt;
        let bad = |reason: String| format_err(&self.file, "HDF5", format!("chunk at {:?}: {reason}", c.offset));
        let chunk_bytes = self.chunk.iter().product::<usize>() * elem;
        // A size from the file: checked against the file before allocating.
        if c.address.checked_add(c.storage_size).is_none_or(|end| end > self.file_len) {
            let (size, at, len) = (c.storage_size, c.address, self.file_len);
            return Err(bad(format!("{size} bytes at {at} lie beyond the file's {len}")));
        }
        let mut bytes = vec![0u8; c.storage_size as usize];
        self.handle
            .read_exact_at(&mut bytes, c.address)
            .map_err(|cause| IoError::Read { path: self.file.clone(), cause })?;
        for (i, f) in self.filters.iter().enumerate().rev() {
            if c.filter_mask & (1 << i) != 0 {
                continue;
            }
            bytes = if f.id == 1 {
                // At most one byte more than a chunk holds: more is an error
                // below, never an unbounded allocation.
                // (Capacity bounded by deflate's largest ratio, about 1032.)
                let mut out = Vec::with_capacity(chunk_bytes.min(bytes.len().saturating_mul(1032) + 64));
                flate2::read::ZlibDecoder::new(&bytes[..])
                    .take(chunk_bytes as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| bad(format!("deflate: {e}")))?;
                out
            } else {
                // Shuffle: byte k of every element was stored together.
                let count = bytes.len() / elem;
                let mut out = vec![0u8; bytes.len()];
                for k in 0..elem {
                    for (e, &b) in bytes[k * count..(k + 1) * count].iter().enumerate() {
                        out[e * elem + k] = b;
                    }
                }
                out
            };
        }
        if bytes.len() != chunk_bytes {
            return Err(bad(format!("{} bytes, not {chunk_bytes}", bytes.len())));
        }
        Ok(bytes)
    }

    /// Decodes `chunks` on every core and copies their parts inside the
    /// dataset into `dst`, which holds the box of the dataset at `origin`
    /// of extent `extent` (C order), `elem` bytes per element; every
    /// chunk's part lies inside the box.
    fn fill_box(
        &self,
        chunks: &[&hdf5_pure::Chunk],
        origin: &[usize],
        extent: &[usize],
        dst: &mut [u8],
        elem: usize,
    ) -> Result<(), IoError> {
        use rayon::prelude::*;
        let (shape, chunk) = (&self.shape, &self.chunk);
        let rank = shape.len();
        let box_strides: Vec<usize> = (0..rank).map(|a| extent[a + 1..].iter().product::<usize>()).collect();
        let chunk_strides: Vec<usize> = (0..rank).map(|a| chunk[a + 1..].iter().product::<usize>()).collect();
        let decoded: Vec<Vec<u8>> = chunks.par_iter().map(|c| self.decode(c, elem)).collect::<Result<_, _>>()?;
        for (c, bytes) in chunks.iter().zip(&decoded) {
            let offset: Vec<usize> = c.offset.iter().map(|&o| o as usize).collect();
            let inside: Vec<usize> = (0..rank).map(|a| chunk[a].min(shape[a] - offset[a])).collect();
            let rows: usize = inside[..rank - 1].iter().product();
            let row_bytes = inside[rank - 1] * elem;
            for r in 0..rows {
                // Row r of the chunk's part inside the dataset, axis by axis.
                let (mut rest, mut src) = (r, 0usize);
                let mut at = (offset[rank - 1] - origin[rank - 1]) * box_strides[rank - 1];
                for a in (0..rank - 1).rev() {
                    let i = rest % inside[a];
                    rest /= inside[a];
                    src += i * chunk_strides[a];
                    at += (offset[a] + i - origin[a]) * box_strides[a];
                }
                dst[at * elem..at * elem + row_bytes].copy_from_slice(&bytes[src * elem..src * elem + row_bytes]);
            }
        }
        Ok(())
    }

    /// Every chunk decoded on every core and copied into place, one slab
    /// of the first axis (one chunk thick) per task.
    fn read<T: bytemuck::Pod + Send + Sync>(&self) -> Result<ArrayD<T>, IoError> {
        use rayon::prelude::*;
        let elem = std::mem::size_of::<T>();
        let shape = &self.shape;
        let n: usize = shape.iter().product();
        let mut out = vec![T::zeroed(); n];
        let slab_len = (self.chunk[0] * shape[1..].iter().product::<usize>()).max(1);
        out.par_chunks_mut(slab_len).enumerate().try_for_each(|(slab, dst)| -> Result<(), IoError> {
            let start = slab * self.chunk[0];
            let mine: Vec<&hdf5_pure::Chunk> = self.chunks.iter().filter(|c| c.offset[0] as usize == start).collect();
            let mut origin = vec![0; shape.len()];
            origin[0] = start;
            let mut extent = shape.clone();
            extent[0] = self.chunk[0].min(shape[0] - start);
            self.fill_box(&mine, &origin, &extent, bytemuck::cast_slice_mut(dst), elem)
        })?;
        ArrayD::from_shape_vec(IxDyn(shape), out).map_err(|e| format_err(&self.file, "HDF5", e.to_string()))
    }

    /// The box `lo..hi` of a float32 or uint8 dataset of rank 4 as float32
    /// (uint8 as `k / 255`, [`gpu_waterz_core::affinities::u8_affinity`]), C
    /// order: the chunks it meets decoded on every core, each copied in part.
    pub fn read_region_f32(&self, lo: [usize; 4], hi: [usize; 4]) -> Result<Vec<f32>, IoError> {
        let u8_values = self.dtype == ElementType::U8;
        self.read_region_as(lo, hi, |target: &mut [f32], values: &[u8]| {
            if u8_values {
                for (t, &v) in target.iter_mut().zip(values) {
                    *t = gpu_waterz_core::affinities::u8_affinity(v);
                }
            } else {
                for (t, v) in target.iter_mut().zip(values.chunks_exact(4)) {
                    *t = f32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                }
            }
        })
    }

    /// The uint8 values of the box `lo..hi` of a uint8 dataset of rank 4, as
    /// stored, in C order (what [`ChunkedDataset::read_region_f32`] gives as
    /// `k / 255`, in a quarter of the bytes).
    pub fn read_region_u8(&self, lo: [usize; 4], hi: [usize; 4]) -> Result<Vec<u8>, IoError> {
        if self.dtype != ElementType::U8 {
            let reason = format!("uint8 regions are read from uint8 datasets, not {:?}", self.dtype);
            return Err(format_err(&self.file, "HDF5", reason));
        }
        self.read_region_as(lo, hi, |target: &mut [u8], values: &[u8]| target.copy_from_slice(values))
    }

    /// The box `lo..hi` of a float32 or uint8 dataset of rank 4 in C order,
    /// each row of a chunk inside it written by `convert` from the chunk's
    /// bytes (as many values as the row holds).
    fn read_region_as<T: Copy + Default>(
        &self,
        lo: [usize; 4],
        hi: [usize; 4],
        convert: impl Fn(&mut [T], &[u8]),
    ) -> Result<Vec<T>, IoError> {
        use rayon::prelude::*;
        let bad = |reason: String| format_err(&self.file, "HDF5", reason);
        if self.shape.len() != 4 || !matches!(self.dtype, ElementType::F32 | ElementType::U8) {
            return Err(bad(format!(
                "a region is read from float32 or uint8 of rank 4, not {:?} {:?}",
                self.dtype, self.shape
            )));
        }
        if (0..4).any(|a| lo[a] > hi[a] || hi[a] > self.shape[a]) {
            return Err(bad(format!("the box {lo:?}..{hi:?} is not inside {:?}", self.shape)));
        }
        let extent: [usize; 4] = std::array::from_fn(|a| hi[a] - lo[a]);
        let mut out = vec![T::default(); extent.iter().product()];
        if out.is_empty() {
            return Ok(out);
        }
        let elem = self.dtype.size();
        let chunk = &self.chunk;
        let meets = |c: &&hdf5_pure::Chunk| {
            (0..4).all(|a| (c.offset[a] as usize) < hi[a] && c.offset[a] as usize + chunk[a] > lo[a])
        };
        let met: Vec<&hdf5_pure::Chunk> = self.chunks.iter().filter(meets).collect();
        let decoded: Vec<Vec<u8>> = met.par_iter().map(|c| self.decode(c, elem)).collect::<Result<_, _>>()?;
        let out_strides: [usize; 4] = std::array::from_fn(|a| extent[a + 1..].iter().product());
        let chunk_strides: [usize; 4] = std::array::from_fn(|a| chunk[a + 1..].iter().product());
        for (c, bytes) in met.iter().zip(&decoded) {
            // The part of the chunk inside the box, row by row along x.
            let from: [usize; 4] = std::array::from_fn(|a| lo[a].max(c.offset[a] as usize));
            let to: [usize; 4] = std::array::from_fn(|a| hi[a].min(c.offset[a] as usize + chunk[a]));
            let row = to[3] - from[3];
            for i in from[0]..to[0] {
                for j in from[1]..to[1] {
                    for k in from[2]..to[2] {
                        let at = [i, j, k, from[3]];
                        let src: usize = (0..4).map(|a| (at[a] - c.offset[a] as usize) * chunk_strides[a]).sum();
                        let dst: usize = (0..4).map(|a| (at[a] - lo[a]) * out_strides[a]).sum();
                        convert(&mut out[dst..dst + row], &bytes[src * elem..(src + row) * elem]);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The whole dataset.
    fn read_volume(&self) -> Result<Volume, IoError> {
        Ok(match self.dtype {
            ElementType::F32 => Volume::F32(self.read::<f32>()?),
            ElementType::U8 => Volume::U8(self.read::<u8>()?),
            ElementType::U32 => Volume::U32(self.read::<u32>()?),
            ElementType::U64 => Volume::U64(self.read::<u64>()?),
        })
    }

    /// Reads the dataset in pieces, at least its first `n_values` elements,
    /// and hands `consume` each contiguous range of them with the index of
    /// its first element, while the next piece is decoded (see
    /// [`super::NpyFile::read_in_pieces`]). A piece is one chunk along
    /// every axis but the last and the whole of the last axis (for `(c, z,
    /// y, x)` affinities: a chunk of channels × a chunk of z × a chunk of
    /// rows), one range per index of its axes before the last chunked one
    /// (for affinities, per channel and z); the pieces come in the order of
    /// their offsets, and every element is handed on once. The last pieces
    /// may run past `n_values`. A dataset of rank 1 comes one chunk at a
    /// time. `T` must be the element type.
    pub fn read_in_pieces<T: bytemuck::Pod + Send, E: From<IoError> + Send>(
        &self,
        n_values: usize,
        consume: impl FnMut(usize, &[T]) -> Result<(), E> + Send,
    ) -> Result<(), E> {
        let elem = std::mem::size_of::<T>();
        if elem != self.dtype.size() {
            let reason = format!("read as {elem}-byte values, but it holds {:?}", self.dtype);
            return Err(E::from(format_err(&self.file, "HDF5", reason)));
        }
        let (shape, chunk) = (&self.shape, &self.chunk);
        let rank = shape.len();
        // A piece is one chunk along every axis but the last, whole along
        // the last one; each index of its axes but the last chunked one
        // starts a run that is contiguous in the dataset.
        let leading = (rank - 1).max(1);
        let strides: Vec<usize> = (0..rank).map(|a| shape[a + 1..].iter().product::<usize>()).collect();
        // The rows of chunks, grouped once, in C order of their offsets.
        let mut rows: std::collections::BTreeMap<Vec<usize>, Vec<&hdf5_pure::Chunk>> = Default::default();
        for c in &self.chunks {
            rows.entry(c.offset[..leading].iter().map(|&o| o as usize).collect()).or_default().push(c);
        }
        let mut rows =
            rows.into_iter().filter(|(row, _)| row.iter().zip(&strides).map(|(o, s)| o * s).sum::<usize>() < n_values);
        read_ahead(
            |piece: &mut Vec<T>| -> Result<Option<PieceRanges>, E> {
                let Some((row, mine)) = rows.next() else { return Ok(None) };
                let mut origin = vec![0; rank];
                origin[..leading].copy_from_slice(&row);
                let mut extent = shape.clone();
                for a in 0..leading {
                    extent[a] = chunk[a].min(shape[a] - origin[a]);
                }
                // Every element of the box is written below: the buffer's
                // old values need no zeroing.
                piece.resize(extent.iter().product(), T::zeroed());
                self.fill_box(&mine, &origin, &extent, bytemuck::cast_slice_mut(piece), elem).map_err(E::from)?;
                let run = extent[leading - 1..].iter().product::<usize>();
                let n_runs = extent[..leading - 1].iter().product::<usize>();
                let ranges = (0..n_runs)
                    .map(|r| {
                        // Run r's index along the axes before the last chunked one.
                        let (mut rest, mut first) = (r, origin[leading - 1] * strides[leading - 1]);
                        for a in (0..leading - 1).rev() {
                            first += (origin[a] + rest % extent[a]) * strides[a];
                            rest /= extent[a];
                        }
                        (first, r * run..(r + 1) * run)
                    })
                    .collect();
                Ok(Some(ranges))
            },
            consume,
        )
    }
}

/// The serial reader (hdf5-pure's own), for comparison in tests.
#[cfg(test)]
fn read_serially(file: &Path, dataset: &str) -> Volume {
    let h5 = hdf5_pure::File::open(file).unwrap();
    let ds = h5.dataset(dataset).unwrap();
    let dim = IxDyn(&ds.shape().unwrap().into_iter().map(|s| s as usize).collect::<Vec<_>>());
    match ds.dtype().unwrap() {
        hdf5_pure::DType::F32 => Volume::F32(ArrayD::from_shape_vec(dim, ds.read_f32().unwrap()).unwrap()),
        hdf5_pure::DType::U8 => Volume::U8(ArrayD::from_shape_vec(dim, ds.read_u8().unwrap()).unwrap()),
        hdf5_pure::DType::U32 => Volume::U32(ArrayD::from_shape_vec(dim, ds.read_u32().unwrap()).unwrap()),
        other => panic!("{other:?}"),
    }
}

fn read_with_hdf5_pure(file: &Path, dataset: &str) -> Result<Volume, IoError> {
    if !file.exists() {
        return Err(IoError::Read {
            path: file.to_path_buf(),
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        });
    }
    // A chunked dataset with its chunks decompressed on every core (deflate
    // and shuffle, the filters h5py writes), the file's metadata read
    // alone; other datasets (contiguous, other filters, big-endian or
    // other types, chunks not all allocated) go to the serial reader.
    if let Some(layout) = ChunkedDataset::open(file, dataset)? {
        return layout.read_volume();
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

#[cfg(test)]
mod parallel_tests {
    use super::*;

    /// The parallel chunk reader gives the serial reader's arrays on the
    /// real volumes (gzip, edge chunks, four element types and ranks 3-4).
    #[test]
    fn parallel_chunks_equal_the_serial_reader() {
        let data = std::env::var("GPU_WATERZ_DATA")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
        // A 1-D dataset of several chunks (written by hdf5-pure here).
        let dir = std::env::temp_dir().join(format!("gpu-waterz-h5-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let one_d = dir.join("line.h5");
        let values: Vec<u32> = (0..1000).map(|i| i * 7 + 1).collect();
        let mut builder = hdf5_pure::FileBuilder::new();
        builder.create_dataset("line").with_u32_data(&values).with_shape(&[1000]).with_chunks(&[64]).with_deflate(4);
        builder.write(&one_d).unwrap();
        let layout = ChunkedDataset::open(&one_d, "line").unwrap().expect("a deflate-chunked dataset");
        let parallel = layout.read_volume().unwrap();
        assert_eq!(pieces::<u32>(&layout, 1000), values, "a line in pieces");
        assert_eq!(parallel, Volume::U32(ArrayD::from_shape_vec(IxDyn(&[1000]), values).unwrap()));
        std::fs::remove_dir_all(&dir).unwrap();
        let cases = [
            ("gala-em-train.h5", "raw"),
            ("gala-em-train.h5", "boundary_probability"),
            ("gala-em-train.h5", "gt"),
            ("snemi-mini.h5", "inside_probability"),
            ("piriform-affinities.h5", "affinities"),
        ];
        for (name, dataset) in cases {
            let path = data.join(name);
            assert!(path.exists(), "{} is absent: the real-data tests need ../shared/data", path.display());
            let layout = ChunkedDataset::open(&path, dataset).unwrap().expect("a gzip-chunked dataset");
            let parallel = layout.read_volume().unwrap();
            assert_eq!(parallel, read_serially(&path, dataset), "{name}:{dataset}");
            // In pieces: every value once, in C order, at its index.
            let bytes = match (&parallel, layout.dtype()) {
                (Volume::F32(a), ElementType::F32) => {
                    pieces::<f32>(&layout, a.len()).iter().map(|v| v.to_bits()).eq(a.iter().map(|v| v.to_bits()))
                }
                (Volume::U8(a), ElementType::U8) => pieces::<u8>(&layout, a.len()).iter().eq(a.iter()),
                (Volume::U32(a), ElementType::U32) => pieces::<u32>(&layout, a.len()).iter().eq(a.iter()),
                (Volume::U64(a), ElementType::U64) => pieces::<u64>(&layout, a.len()).iter().eq(a.iter()),
                other => panic!("{name}:{dataset}: {:?}", other.1),
            };
            assert!(bytes, "{name}:{dataset} in pieces");
        }
    }

    /// The values `read_in_pieces` hands on, each put at its index (every
    /// element of the dataset at most once), up to the last one handed on.
    fn pieces<T: bytemuck::Pod + Send>(layout: &ChunkedDataset, n_values: usize) -> Vec<T> {
        let total: usize = layout.shape().iter().product();
        let mut out = vec![T::zeroed(); total];
        let mut seen = vec![false; total];
        let mut end = 0;
        layout
            .read_in_pieces(n_values, |first, values: &[T]| -> Result<(), IoError> {
                out[first..first + values.len()].copy_from_slice(values);
                for s in &mut seen[first..first + values.len()] {
                    assert!(!*s, "an element handed on twice");
                    *s = true;
                }
                end = end.max(first + values.len());
                Ok(())
            })
            .unwrap();
        assert!(seen[..end].iter().all(|&s| s) && end >= n_values, "every element up to {end}, at least {n_values}");
        out.truncate(end);
        out
    }

    /// Regions of chunked float32 and uint8 datasets (chunks that span
    /// channels and do not divide the extent) equal the same boxes of the
    /// values; boxes outside, and other ranks, are errors.
    #[test]
    fn regions_equal_the_boxes_of_the_dataset() {
        let dir = std::env::temp_dir().join(format!("gpu-waterz-h5-regions-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("affs.h5");
        let shape = [4usize, 9, 10, 11];
        let n: usize = shape.iter().product();
        let floats: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let bytes: Vec<u8> = (0..n).map(|i| (i * 31 % 256) as u8).collect();
        let mut builder = hdf5_pure::FileBuilder::new();
        builder
            .create_dataset("f")
            .with_f32_data(&floats)
            .with_shape(&[4, 9, 10, 11])
            .with_chunks(&[2, 4, 3, 5])
            .with_deflate(4);
        builder.create_dataset("u").with_u8_data(&bytes).with_shape(&[4, 9, 10, 11]).with_chunks(&[3, 2, 7, 4]);
        builder.create_dataset("line").with_f32_data(&floats[..10]).with_shape(&[10]).with_chunks(&[4]);
        builder.write(&path).unwrap();
        let index = |at: [usize; 4]| ((at[0] * 9 + at[1]) * 10 + at[2]) * 11 + at[3];
        let boxes = [
            ([0, 0, 0, 0], [3, 9, 10, 11]),
            ([1, 2, 3, 4], [4, 7, 8, 9]),
            ([2, 8, 9, 10], [3, 9, 10, 11]),
            ([0, 3, 0, 5], [3, 3, 10, 6]),
        ];
        for (name, u8s) in [("f", false), ("u", true)] {
            let layout = ChunkedDataset::open(&path, name).unwrap().expect("a chunked dataset");
            for (lo, hi) in boxes {
                let got = layout.read_region_f32(lo, hi).unwrap();
                let mut want = Vec::new();
                for i in lo[0]..hi[0] {
                    for j in lo[1]..hi[1] {
                        for k in lo[2]..hi[2] {
                            for l in lo[3]..hi[3] {
                                let at = index([i, j, k, l]);
                                want.push(if u8s {
                                    gpu_waterz_core::affinities::u8_affinity(bytes[at])
                                } else {
                                    floats[at]
                                });
                            }
                        }
                    }
                }
                assert_eq!(got, want, "{name} {lo:?}..{hi:?}");
                // The codes as stored, of uint8 datasets only.
                match layout.read_region_u8(lo, hi) {
                    Ok(codes) if u8s => {
                        let read: Vec<f32> = codes.into_iter().map(gpu_waterz_core::affinities::u8_affinity).collect();
                        assert_eq!(read, want, "{name} {lo:?}..{hi:?} as codes");
                    }
                    Err(e) if !u8s => assert!(e.to_string().contains("uint8"), "{e}"),
                    other => panic!("{name}: {other:?}"),
                }
            }
            let e = layout.read_region_f32([0, 0, 0, 0], [3, 10, 10, 11]).unwrap_err().to_string();
            assert!(e.contains("not inside"), "{e}");
        }
        let line = ChunkedDataset::open(&path, "line").unwrap().expect("a chunked dataset");
        assert!(line.read_region_f32([0; 4], [1; 4]).unwrap_err().to_string().contains("rank 4"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Affinities with a fourth channel, in chunks that span two channels
    /// and do not divide the extent: the first three channels arrive
    /// whole (the last piece may run past them), and a consumer's error
    /// ends the read.
    #[test]
    fn affinities_come_in_pieces_of_chunk_rows() {
        let dir = std::env::temp_dir().join(format!("gpu-waterz-h5-pieces-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("affs.h5");
        let shape = [4usize, 9, 10, 11];
        let values: Vec<f32> = (0..shape.iter().product::<usize>()).map(|i| i as f32 / 4000.0).collect();
        let mut builder = hdf5_pure::FileBuilder::new();
        builder
            .create_dataset("affs")
            .with_f32_data(&values)
            .with_shape(&[4, 9, 10, 11])
            .with_chunks(&[2, 4, 3, 5])
            .with_deflate(4);
        builder.write(&path).unwrap();
        let layout = ChunkedDataset::open(&path, "affs").unwrap().expect("a deflate-chunked dataset");
        assert_eq!((layout.dtype(), layout.shape()), (ElementType::F32, &shape[..]));
        let three = 3 * 9 * 10 * 11;
        let got = pieces::<f32>(&layout, three);
        assert!(got.len() >= three && got[..] == values[..got.len()]);
        let mut calls = 0;
        let e = layout
            .read_in_pieces(three, |_, _: &[f32]| -> Result<(), IoError> {
                calls += 1;
                Err(format_err(&path, "HDF5", "consumer failed"))
            })
            .unwrap_err();
        assert!(e.to_string().contains("consumer failed") && calls == 1, "{e}");
        let e = layout.read_in_pieces(10, |_, _: &[u8]| -> Result<(), IoError> { Ok(()) }).unwrap_err();
        assert!(e.to_string().contains("1-byte values"), "{e}");
        assert!(ChunkedDataset::open(&path, "missing").unwrap().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! zarr v2 and v3 arrays (`dir.zarr/array`), read with zarrs: the whole of
//! an array at once ([`read_zarr`]), or float32 and uint8 `(c, z, y, x)`
//! arrays in pieces ([`ZarrArray::read_in_pieces`]).

use super::{format_err, read_ahead, ElementType, IoError, PieceRanges, Volume};
use ndarray::{ArrayD, IxDyn};
use std::path::{Path, PathBuf};
use zarrs::array::{ArrayBytes, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrs::storage::byte_range::ByteRangeIterator;
use zarrs::storage::{
    store_set_partial_many, Bytes, ListableStorageTraits, MaybeBytesIterator, OffsetBytesIterator,
    ReadableStorageTraits, StorageError, StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix, WritableStorageTraits,
};

/// An array opened from the filesystem.
type Handle = zarrs::array::Array<FilesystemStore>;

/// Opens array `array` of the zarr hierarchy at `root`: a missing folder
/// is a read error, a missing or invalid array a format error.
fn open_handle(root: &Path, array: &str) -> Result<Handle, IoError> {
    if !root.is_dir() {
        return Err(IoError::Read {
            path: root.to_path_buf(),
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no such zarr folder"),
        });
    }
    let bad = |reason: String| format_err(root, "zarr", reason);
    let store = std::sync::Arc::new(FilesystemStore::new(root).map_err(|e| bad(e.to_string()))?);
    zarrs::array::Array::open(store, array).map_err(|e| bad(format!("no array {array:?}: {e}")))
}

/// The error for a read of array `array` that failed with `error`: the
/// first chunk of `chunks` (a box of chunk indices) that does not decode,
/// named with its store key and the array's codecs, or else `error` itself.
fn read_failure(root: &Path, array: &str, handle: &Handle, chunks: &ArraySubset, error: impl ToString) -> IoError {
    let bad = |reason: String| format_err(root, "zarr", reason);
    let failing = chunks.indices().into_iter().find_map(|indices| {
        handle.retrieve_chunk::<ArrayBytes<'static>>(&indices).err().map(|e| (indices.to_vec(), e.to_string()))
    });
    match failing {
        Some((indices, cause)) => {
            let codecs: Vec<String> = handle
                .codecs()
                .create_metadatas(&zarrs::array::codec::api::CodecMetadataOptions::default())
                .iter()
                .map(|m| m.name().to_string())
                .collect();
            bad(format!(
                "array {array:?}: chunk {indices:?} (stored as {}) cannot be decoded by the codecs [{}]: {cause}",
                handle.chunk_key(&indices),
                codecs.join(", ")
            ))
        }
        None => bad(format!("array {array:?}: {}", error.to_string())),
    }
}

/// The element type's name (zarr v2 arrays add their numpy string:
/// "float32 / <f4").
fn dtype_name(handle: &Handle) -> String {
    handle.data_type().to_string()
}

/// Reads array `array` (e.g. `/volumes/affs`) of the zarr v2 or v3
/// hierarchy at `root`.
pub fn read_zarr(root: &Path, array: &str) -> Result<Volume, IoError> {
    let handle = open_handle(root, array)?;
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
                    let grid = ArraySubset::new_with_shape(handle.chunk_grid_shape().to_vec());
                    Err(read_failure(root, array, &handle, &grid, e))
                }
            }
        };
    }
    let dtype = dtype_name(&handle);
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

/// Bytes of a piece of [`ZarrArray::read_in_pieces`] (a bound unless one
/// row of x alone is larger).
const PIECE_BYTES: usize = 128 << 20;

/// A float32 or uint8 `(c, z, y, x)` zarr array, read in pieces
/// ([`ZarrArray::read_in_pieces`]) so that each piece can be handed on
/// (uploaded to a GPU) while the next one is decoded.
#[derive(Debug)]
pub struct ZarrArray {
    root: PathBuf,
    array: String,
    /// (Boxed: the handle is large, and the reader is moved around.)
    handle: Box<Handle>,
    dtype: ElementType,
    shape: Vec<usize>,
    /// The shape of the chunk at the origin (of every chunk, in a regular
    /// grid): the pieces are laid out along it.
    chunk: Vec<usize>,
}

impl ZarrArray {
    /// Array `array` of the zarr hierarchy at `root` when it is one that
    /// is read in pieces (float32 or uint8, four dimensions, none empty);
    /// `None` when it is not: [`read_zarr`] then reads it (and reports
    /// what is wrong). A folder or array that does not open is the error
    /// [`read_zarr`] gives.
    pub fn open(root: &Path, array: &str) -> Result<Option<Self>, IoError> {
        let handle = open_handle(root, array)?;
        let dtype = match dtype_name(&handle).split_whitespace().next().unwrap_or_default() {
            "float32" => ElementType::F32,
            "uint8" => ElementType::U8,
            _ => return Ok(None),
        };
        let Ok(shape) = handle.shape().iter().map(|&s| usize::try_from(s)).collect::<Result<Vec<_>, _>>() else {
            return Ok(None);
        };
        if shape.len() != 4 || shape.contains(&0) {
            return Ok(None);
        }
        if shape.iter().try_fold(1usize, |n, &s| n.checked_mul(s)).is_none_or(|n| n > isize::MAX as usize) {
            let reason =
                format!("array {array:?}: its shape {shape:?} holds more values than this machine can address");
            return Err(format_err(root, "zarr", reason));
        }
        let Ok(chunk) = handle.chunk_shape(&[0; 4]) else { return Ok(None) };
        let chunk: Vec<usize> = chunk.iter().map(|c| usize::try_from(c.get()).unwrap_or(usize::MAX)).collect();
        Ok(Some(Self {
            root: root.to_path_buf(),
            array: array.to_string(),
            handle: Box::new(handle),
            dtype,
            shape,
            chunk,
        }))
    }

    /// The element type.
    pub fn dtype(&self) -> ElementType {
        self.dtype
    }

    /// The array's shape, `(c, z, y, x)`.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The values of the box `lo..hi` (per axis, `(c, z, y, x)`, inside the
    /// array) as float32 in C order: float32 values as they are, uint8 ones
    /// as `k / 255` ([`gpu_waterz_core::affinities::u8_affinity`]). Safe to
    /// call from several threads at once.
    pub fn read_region_f32(&self, lo: [usize; 4], hi: [usize; 4]) -> Result<Vec<f32>, IoError> {
        match self.dtype {
            ElementType::U8 => {
                Ok(self.read_region_u8(lo, hi)?.into_iter().map(gpu_waterz_core::affinities::u8_affinity).collect())
            }
            _ => self.read_region(lo, hi, 4),
        }
    }

    /// The uint8 values of the box `lo..hi` of a uint8 array of rank 4, as
    /// stored, in C order (what [`ZarrArray::read_region_f32`] gives as
    /// `k / 255`, in a quarter of the bytes). Safe to call from several
    /// threads at once.
    pub fn read_region_u8(&self, lo: [usize; 4], hi: [usize; 4]) -> Result<Vec<u8>, IoError> {
        if self.dtype != ElementType::U8 {
            let reason =
                format!("array {:?}: uint8 regions are read from uint8 arrays, not {:?}", self.array, self.dtype);
            return Err(format_err(&self.root, "zarr", reason));
        }
        self.read_region(lo, hi, 1)
    }

    /// The elements (`T`, `elem` bytes each: the array's type) of the box
    /// `lo..hi`, which must lie inside the array, in C order.
    fn read_region<T: bytemuck::Pod>(&self, lo: [usize; 4], hi: [usize; 4], elem: usize) -> Result<Vec<T>, IoError> {
        if (0..4).any(|a| lo[a] > hi[a] || hi[a] > self.shape[a]) {
            let reason = format!("array {:?}: the box {lo:?}..{hi:?} is not inside {:?}", self.array, self.shape);
            return Err(format_err(&self.root, "zarr", reason));
        }
        let subset = ArraySubset::new_with_ranges(&std::array::from_fn::<_, 4, _>(|a| lo[a] as u64..hi[a] as u64));
        let mut values = Vec::new();
        self.read_box(&subset, (0..4).map(|a| hi[a] - lo[a]).product(), elem, &mut values)?;
        Ok(values)
    }

    /// Reads the array in pieces, at least its first `n_values` elements,
    /// and hands `consume` each contiguous range of them with the index of
    /// its first element (C order), while the next piece is decoded (see
    /// [`super::NpyFile::read_in_pieces`]; zarrs decodes a piece's chunks
    /// on every core). A piece is one channel and all of x; along z and y
    /// it follows the chunks, so that a chunk is decoded once per channel
    /// it holds (a chunk of several channels is decoded for each of them):
    /// whole chunk-rows of z (all of y: one range per piece, the pieces in
    /// increasing order) when one chunk-row of a channel fits in 128 MiB,
    /// else one chunk-row of z and whole chunk-rows of y (one range per z),
    /// at least one chunk box (larger than 128 MiB where a chunk is: a
    /// smaller piece would decode its chunk again). The pieces come in the order of their first
    /// elements and every element is handed on once; the last pieces may
    /// run past `n_values`. `T` must be the element type. A chunk that does
    /// not decode is an error naming it, its file and the array's codecs.
    pub fn read_in_pieces<T: bytemuck::Pod + Send, E: From<IoError> + Send>(
        &self,
        n_values: usize,
        consume: impl FnMut(usize, &[T]) -> Result<(), E> + Send,
    ) -> Result<(), E> {
        self.read_in_pieces_of(n_values, PIECE_BYTES, consume)
    }

    /// [`ZarrArray::read_in_pieces`] with pieces of about `piece_bytes`.
    fn read_in_pieces_of<T: bytemuck::Pod + Send, E: From<IoError> + Send>(
        &self,
        n_values: usize,
        piece_bytes: usize,
        consume: impl FnMut(usize, &[T]) -> Result<(), E> + Send,
    ) -> Result<(), E> {
        let elem = std::mem::size_of::<T>();
        if elem != self.dtype.size() {
            let reason = format!("array {:?}: read as {elem}-byte values, but it holds {:?}", self.array, self.dtype);
            return Err(E::from(format_err(&self.root, "zarr", reason)));
        }
        let (channels, zd, yd, xd) = (self.shape[0], self.shape[1], self.shape[2], self.shape[3]);
        let plane = yd * xd;
        let (dz, dy) = self.piece_extent(elem, piece_bytes);
        // The boxes' origins, in C order, which is the order of their first
        // elements; those that start at or past `n_values` are not read.
        let first_of = move |(c, z0, y0): (usize, usize, usize)| (c * zd + z0) * plane + y0 * xd;
        let mut boxes = (0..channels)
            .flat_map(move |c| (0..zd).step_by(dz).flat_map(move |z0| (0..yd).step_by(dy).map(move |y0| (c, z0, y0))))
            .take_while(move |&origin| first_of(origin) < n_values);
        read_ahead(
            |piece: &mut Vec<T>| -> Result<Option<PieceRanges>, E> {
                let Some((c, z0, y0)) = boxes.next() else { return Ok(None) };
                let (z1, y1) = ((z0 + dz).min(zd), (y0 + dy).min(yd));
                let subset = ArraySubset::new_with_ranges(&[
                    c as u64..c as u64 + 1,
                    z0 as u64..z1 as u64,
                    y0 as u64..y1 as u64,
                    0..xd as u64,
                ]);
                let n = (z1 - z0) * (y1 - y0) * xd;
                self.read_box(&subset, n, elem, piece).map_err(E::from)?;
                let first = first_of((c, z0, y0));
                let ranges = if y1 - y0 == yd {
                    vec![(first, 0..n)]
                } else {
                    let run = (y1 - y0) * xd;
                    (0..z1 - z0).map(|k| (first + k * plane, k * run..(k + 1) * run)).collect()
                };
                Ok(Some(ranges))
            },
            consume,
        )
    }

    /// `(z, y)`: the extent of each piece's box (one channel and all of x)
    /// along z and y for `elem`-byte values: chunk-aligned and at most
    /// `piece_bytes`, or one chunk box where that is larger (see
    /// [`ZarrArray::read_in_pieces`]).
    fn piece_extent(&self, elem: usize, piece_bytes: usize) -> (usize, usize) {
        let (zd, yd, xd) = (self.shape[1], self.shape[2], self.shape[3]);
        let (cz, cy) = (self.chunk[1].min(zd), self.chunk[2].min(yd));
        let row = (xd * elem).max(1);
        // How many blocks of `rows` rows of x fit in a piece.
        let fit = |rows: usize| piece_bytes / rows.saturating_mul(row).max(1);
        if cz.saturating_mul(yd).saturating_mul(row) <= piece_bytes {
            (cz * fit(cz * yd).max(1), yd)
        } else if cz.saturating_mul(cy).saturating_mul(row) <= piece_bytes {
            (cz, cy * fit(cz * cy).max(1))
        } else {
            // One chunk box even when it is larger than `piece_bytes`: a
            // smaller piece would decode each chunk once per piece, and
            // holds the decoded chunk anyway.
            (cz, cy)
        }
    }

    /// Decodes the box `subset` (`n` elements of `elem` bytes) into `piece`.
    fn read_box<T: bytemuck::Pod>(
        &self,
        subset: &ArraySubset,
        n: usize,
        elem: usize,
        piece: &mut Vec<T>,
    ) -> Result<(), IoError> {
        let bad = |reason: String| format_err(&self.root, "zarr", format!("array {:?}: {reason}", self.array));
        let bytes = self.handle.retrieve_array_subset::<ArrayBytes<'static>>(subset).map_err(|e| {
            match self.handle.chunks_in_array_subset(subset) {
                Ok(Some(chunks)) => read_failure(&self.root, &self.array, &self.handle, &chunks, e),
                _ => bad(e.to_string()),
            }
        })?;
        let raw = bytes.into_fixed().map_err(|e| bad(e.to_string()))?;
        if raw.len() != n * elem {
            return Err(bad(format!("{} bytes decoded for {n} values of {elem} bytes", raw.len())));
        }
        // Every element is written: the buffer's old values need no zeroing.
        piece.resize(n, T::zeroed());
        bytemuck::cast_slice_mut::<T, u8>(piece).copy_from_slice(&raw);
        Ok(())
    }
}

/// The attributes of array `array` of the zarr hierarchy at `root` (empty
/// when it cannot be opened).
pub(super) fn attributes(root: &Path, array: &str) -> serde_json::Map<String, serde_json::Value> {
    let Ok(store) = FilesystemStore::new(root) else { return serde_json::Map::new() };
    match zarrs::array::Array::open(std::sync::Arc::new(store), array) {
        Ok(handle) => handle.attributes().clone(),
        Err(_) => serde_json::Map::new(),
    }
}

/// A zarr store over a folder that a run stages its output in (written
/// whole, then renamed into place): reads, listing and erasing as zarrs's
/// [`FilesystemStore`], but each key written with a plain write, without
/// the flush to the disk that [`FilesystemStore`] makes per key. Such a
/// folder is complete once renamed, and made durable in one pass when
/// asked for (`--fsync`, [`super::sync_tree`]); a flush per chunk cost a
/// disk round trip per chunk (thousands per volume) for nothing.
pub struct StagingStore {
    inner: FilesystemStore,
    root: PathBuf,
}

impl StagingStore {
    /// The store of the folder `root`.
    pub fn new(root: &Path) -> Result<Self, IoError> {
        let inner = FilesystemStore::new(root).map_err(|e| format_err(root, "zarr", e.to_string()))?;
        Ok(Self { inner, root: root.to_path_buf() })
    }

    /// Writes `bytes` as `key` (a plain write, as [`WritableStorageTraits::set`]).
    pub fn write(&self, key: &StoreKey, bytes: &[u8]) -> std::io::Result<()> {
        let path = self.root.join(key.as_str());
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, bytes)
    }
}

impl ReadableStorageTraits for StagingStore {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        self.inner.get_partial_many(key, byte_ranges)
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.inner.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        self.inner.supports_get_partial()
    }
}

impl ListableStorageTraits for StagingStore {
    fn list(&self) -> Result<StoreKeys, StorageError> {
        self.inner.list()
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        self.inner.list_prefix(prefix)
    }

    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        self.inner.list_dir(prefix)
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        self.inner.size_prefix(prefix)
    }
}

impl WritableStorageTraits for StagingStore {
    fn set(&self, key: &StoreKey, value: Bytes) -> Result<(), StorageError> {
        Ok(self.write(key, &value)?)
    }

    /// Partial writes read the key, patch it and write it whole.
    fn set_partial_many(&self, key: &StoreKey, offset_values: OffsetBytesIterator) -> Result<(), StorageError> {
        store_set_partial_many(self, key, offset_values)
    }

    fn erase(&self, key: &StoreKey) -> Result<(), StorageError> {
        self.inner.erase(key)
    }

    fn erase_prefix(&self, prefix: &StorePrefix) -> Result<(), StorageError> {
        self.inner.erase_prefix(prefix)
    }

    fn supports_set_partial(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A fresh folder for a test's zarr hierarchy.
    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpu-waterz-zarr-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Writes `values` as the zarr v3 array `/affs` of shape `shape` in
    /// chunks `chunks` (gzip) under `root`; returns its handle.
    fn write_v3<T: zarrs::array::Element + Copy>(
        root: &Path,
        shape: &[u64],
        chunks: &[u64],
        data_type: zarrs::array::DataType,
        fill: zarrs::array::FillValue,
        values: &[T],
    ) -> Handle {
        let store = Arc::new(FilesystemStore::new(root).unwrap());
        let mut builder = zarrs::array::ArrayBuilder::new(shape.to_vec(), chunks.to_vec(), data_type, fill);
        builder.bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::GzipCodec::new(5).unwrap())]);
        let array = builder.build(store, "/affs").unwrap();
        array.store_metadata().unwrap();
        array.store_array_subset(&array.subset_all(), values).unwrap();
        array
    }

    /// The values `read_in_pieces_of` hands on, each put at its index
    /// (every element at most once, each of the first `n_values` once);
    /// which elements were handed on; and the number of ranges.
    fn pieces<T: bytemuck::Pod + Send>(
        array: &ZarrArray,
        n_values: usize,
        piece_bytes: usize,
    ) -> (Vec<T>, Vec<bool>, usize) {
        let total: usize = array.shape().iter().product();
        let mut out = vec![T::zeroed(); total];
        let mut seen = vec![false; total];
        let mut calls = 0;
        array
            .read_in_pieces_of(n_values, piece_bytes, |first, values: &[T]| -> Result<(), IoError> {
                out[first..first + values.len()].copy_from_slice(values);
                for s in &mut seen[first..first + values.len()] {
                    assert!(!*s, "an element handed on twice");
                    *s = true;
                }
                calls += 1;
                Ok(())
            })
            .unwrap();
        assert!(seen[..n_values].iter().all(|&s| s), "the first {n_values} elements");
        (out, seen, calls)
    }

    /// float32 affinities with a fourth channel, in chunks that do not
    /// divide the shape: the pieces, whatever their size (whole chunk-rows
    /// of z, chunk-rows of y, or one chunk box), are
    /// `read_zarr`'s values, every one once.
    /// An array written through a [`StagingStore`] (whole chunks, chunks
    /// cut by the array's end, and a part of a chunk rewritten, which reads
    /// the chunk back) reads back through zarrs's own store with the values
    /// written; erasing removes what was written.
    #[test]
    fn the_staging_store_writes_what_zarrs_reads() {
        let root = folder("staging");
        let store = Arc::new(StagingStore::new(&root).unwrap());
        let shape = [6u64, 5, 7];
        let mut builder = zarrs::array::ArrayBuilder::new(
            shape.to_vec(),
            vec![4, 4, 4],
            zarrs::array::data_type::uint32(),
            zarrs::array::FillValue::from(0u32),
        );
        builder.bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(3, false))]);
        let array = builder.build(store.clone(), "/labels").unwrap();
        array.store_metadata().unwrap();
        let mut values: Vec<u32> = (0..6 * 5 * 7).map(|i| i * 7 + 1).collect();
        array.store_array_subset(&array.subset_all(), values.as_slice()).unwrap();
        // Rewrite a box inside the first chunk: zarrs reads it back first.
        let part = ArraySubset::new_with_ranges(&[1..3, 0..2, 2..4]);
        array.store_array_subset(&part, &[9u32; 8][..]).unwrap();
        for z in 1..3 {
            for y in 0..2 {
                for x in 2..4 {
                    values[(z * 5 + y) * 7 + x] = 9;
                }
            }
        }
        let volume = read_zarr(&root, "/labels").unwrap();
        let read: Vec<u32> = match volume {
            Volume::U32(a) => a.iter().copied().collect(),
            _ => panic!("a uint32 volume"),
        };
        assert_eq!(read, values);
        assert!(root.join("labels/c/1/1/1").is_file());
        store.erase_prefix(&StorePrefix::new("labels/").unwrap()).unwrap();
        assert!(!root.join("labels").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn float32_pieces_are_the_whole_reads_values() {
        let root = folder("f32");
        let shape = [4usize, 9, 10, 11];
        let values: Vec<f32> = (0..shape.iter().product::<usize>()).map(|i| i as f32 / 4000.0).collect();
        let fill = zarrs::array::FillValue::from(0f32);
        write_v3(&root, &[4, 9, 10, 11], &[2, 4, 3, 5], zarrs::array::data_type::float32(), fill, &values);
        let Volume::F32(whole) = read_zarr(&root, "/affs").unwrap() else { panic!("not float32") };
        assert_eq!(whole.as_slice().unwrap(), &values[..]);
        let array = ZarrArray::open(&root, "/affs").unwrap().expect("a float32 (c, z, y, x) array");
        assert_eq!((array.dtype(), array.shape()), (ElementType::F32, &shape[..]));
        let total = values.len();
        let (row, chunk_row) = (11 * 4, 4 * 10 * 11 * 4);
        // (piece bytes, the (z, y) extent of a piece, the ranges handed on)
        let cases = [
            (PIECE_BYTES, (4 * (PIECE_BYTES / chunk_row), 10), 4),
            (chunk_row, (4, 10), 4 * 3),
            (2 * chunk_row, (8, 10), 4 * 2),
            (4 * 3 * row, (4, 3), 4 * 4 * 9),
            (4 * 7 * row, (4, 6), 4 * 2 * 9),
            // Smaller than one chunk box: one chunk box still.
            (2 * 3 * row, (4, 3), 4 * 4 * 9),
            (1, (4, 3), 4 * 4 * 9),
        ];
        for (piece_bytes, extent, ranges) in cases {
            assert_eq!(array.piece_extent(4, piece_bytes), extent, "{piece_bytes} bytes");
            let (got, _, calls) = pieces::<f32>(&array, total, piece_bytes);
            assert_eq!(got, values, "{piece_bytes} bytes");
            assert_eq!(calls, ranges, "{piece_bytes} bytes");
        }
        // The first three channels (or fewer values): at least those (the
        // pieces that hold them), not every piece of the fourth channel.
        let three = 3 * 9 * 10 * 11;
        for n_values in [three, three - 1, 1, 500] {
            for piece_bytes in [PIECE_BYTES, chunk_row, 4 * 3 * row, 1] {
                let (got, seen, _) = pieces::<f32>(&array, n_values, piece_bytes);
                let handed_on = seen.iter().filter(|&&s| s).count();
                assert!(handed_on < total, "{n_values}, {piece_bytes} bytes: {handed_on} values");
                assert!((0..total).all(|i| !seen[i] || got[i] == values[i]), "{n_values}, {piece_bytes} bytes");
            }
        }
        // A consumer's error ends the read and is returned.
        let mut calls = 0;
        let e = array
            .read_in_pieces(three, |_, _: &[f32]| -> Result<(), IoError> {
                calls += 1;
                Err(format_err(&root, "zarr", "consumer failed"))
            })
            .unwrap_err();
        assert!(e.to_string().contains("consumer failed") && calls == 1, "{e}");
        // Read as another type: an error, not a reinterpretation.
        let e = array.read_in_pieces(10, |_, _: &[u8]| -> Result<(), IoError> { Ok(()) }).unwrap_err();
        assert!(e.to_string().contains("1-byte values"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// uint8 affinities (zarr v2 and v3), and the arrays that are not read
    /// in pieces (other types and ranks) or not there.
    #[test]
    fn uint8_pieces_and_the_arrays_left_to_the_whole_read() {
        let root = folder("u8");
        let values: Vec<u8> = (0..3 * 5 * 7 * 6).map(|i| (i * 37 % 251) as u8).collect();
        let fill = zarrs::array::FillValue::from(0u8);
        write_v3(&root, &[3, 5, 7, 6], &[3, 2, 4, 4], zarrs::array::data_type::uint8(), fill, &values);
        // The same values as a zarr v2 array (C order, gzip).
        let store = Arc::new(FilesystemStore::new(&root).unwrap());
        let metadata: zarrs::array::ArrayMetadataV2 = serde_json::from_value(serde_json::json!({
            "zarr_format": 2, "shape": [3, 5, 7, 6], "chunks": [1, 3, 3, 4], "dtype": "|u1",
            "compressor": {"id": "gzip", "level": 5}, "fill_value": 0, "order": "C", "filters": null,
        }))
        .unwrap();
        let v2 =
            zarrs::array::Array::new_with_metadata(store, "/v2", zarrs::array::ArrayMetadata::V2(metadata)).unwrap();
        v2.store_metadata().unwrap();
        v2.store_array_subset(&v2.subset_all(), values.as_slice()).unwrap();
        for name in ["/affs", "/v2"] {
            let Volume::U8(whole) = read_zarr(&root, name).unwrap() else { panic!("{name}: not uint8") };
            assert_eq!(whole.as_slice().unwrap(), &values[..], "{name}");
            let array = ZarrArray::open(&root, name).unwrap().expect("a uint8 (c, z, y, x) array");
            assert_eq!((array.dtype(), array.shape()), (ElementType::U8, &[3, 5, 7, 6][..]));
            for piece_bytes in [PIECE_BYTES, 3 * 7 * 6, 2 * 6, 1] {
                let (got, _, _) = pieces::<u8>(&array, values.len(), piece_bytes);
                assert_eq!(got, values, "{name}, {piece_bytes} bytes");
            }
        }
        // A chunk that was never written is the fill value, as in the whole
        // read.
        let store = Arc::new(FilesystemStore::new(&root).unwrap());
        let handle = zarrs::array::Array::open(store, "/affs").unwrap();
        std::fs::remove_file(root.join(handle.chunk_key(&[0, 1, 0, 0]).as_str())).unwrap();
        let Volume::U8(whole) = read_zarr(&root, "/affs").unwrap() else { panic!("not uint8") };
        assert!(whole.iter().filter(|&&v| v == 0).count() > values.iter().filter(|&&v| v == 0).count());
        let array = ZarrArray::open(&root, "/affs").unwrap().expect("a uint8 (c, z, y, x) array");
        for piece_bytes in [PIECE_BYTES, 2 * 6, 1] {
            let (got, _, _) = pieces::<u8>(&array, values.len(), piece_bytes);
            assert_eq!(got, whole.as_slice().unwrap(), "a missing chunk, {piece_bytes} bytes");
        }
        // uint32, and a 3-D float32 array: the whole read's.
        let store = Arc::new(FilesystemStore::new(&root).unwrap());
        for (name, shape, data_type, fill) in [
            ("/labels", vec![4u64, 4, 4, 4], zarrs::array::data_type::uint32(), zarrs::array::FillValue::from(0u32)),
            ("/three", vec![4u64, 4, 4], zarrs::array::data_type::float32(), zarrs::array::FillValue::from(0f32)),
        ] {
            let chunks = vec![2u64; shape.len()];
            let array =
                zarrs::array::ArrayBuilder::new(shape, chunks, data_type, fill).build(store.clone(), name).unwrap();
            array.store_metadata().unwrap();
            assert!(ZarrArray::open(&root, name).unwrap().is_none(), "{name}");
        }
        let e = ZarrArray::open(&root, "/missing").unwrap_err();
        assert!(e.to_string().contains("no array"), "{e}");
        let e = ZarrArray::open(&root.join("absent.zarr"), "/affs").unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A chunk that does not decode: an error naming the array, the chunk,
    /// its file and the codecs, in pieces as in the whole read, not a
    /// panic; the pieces before it were handed on.
    #[test]
    fn a_corrupt_chunk_is_named_not_a_panic() {
        let root = folder("corrupt");
        let values: Vec<f32> = (0..3 * 6 * 8 * 8).map(|i| i as f32 / 1000.0).collect();
        let fill = zarrs::array::FillValue::from(0f32);
        let handle = write_v3(&root, &[3, 6, 8, 8], &[1, 2, 8, 8], zarrs::array::data_type::float32(), fill, &values);
        let key = handle.chunk_key(&[1, 1, 0, 0]);
        std::fs::write(root.join(key.as_str()), b"not a compressed chunk".repeat(3)).unwrap();
        let whole = read_zarr(&root, "/affs").unwrap_err().to_string();
        let array = ZarrArray::open(&root, "/affs").unwrap().expect("a float32 (c, z, y, x) array");
        for piece_bytes in [PIECE_BYTES, 2 * 8 * 8 * 4, 8 * 4] {
            let mut handed_on = 0;
            let e = array
                .read_in_pieces_of(values.len(), piece_bytes, |first, values: &[f32]| -> Result<(), IoError> {
                    assert!(first + values.len() <= 6 * 8 * 8 + 2 * 8 * 8, "a piece after the corrupt chunk");
                    handed_on += values.len();
                    Ok(())
                })
                .unwrap_err()
                .to_string();
            for message in [&e, &whole] {
                assert!(message.contains("\"/affs\"") && message.contains("chunk [1, 1, 0, 0]"), "{message}");
                assert!(
                    message.contains(key.as_str()) && message.contains("cannot be decoded by the codecs"),
                    "{message}"
                );
                assert!(message.contains("gzip"), "{message}");
            }
            assert!(handed_on >= 6 * 8 * 8, "{piece_bytes} bytes: the first channel was handed on");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
}

//! Reading and writing volumes: `.npy`, HDF5 datasets as
//! `file.h5:/dataset`, and zarr (v2 or v3) arrays as `dir.zarr/array`
//! (`dir.zarr` alone for an array at the root). Outputs are written atomically (a temporary file in
//! the same folder, then a rename), so a failure leaves no partial file.
//!
//! One module per format (`npy` read and written, `hdf5` and `zarr` read);
//! their functions are re-exported here.

mod hdf5;
mod npy;
mod zarr;
mod zstd_runs;

pub use hdf5::{read_hdf5, ChunkedDataset};
pub use npy::{npy_bytes, npy_bytes_u64, npy_header, read_npy, write_npy, NpyElement, NpyFile};
pub use zarr::{read_zarr, StagingStore, ZarrArray};
pub use zstd_runs::{encode_runs, LabelFrame, RunsError, ValueRuns};

use ndarray::ArrayD;
use std::path::{Path, PathBuf};

/// Errors of reading and writing volumes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
        /// `"npy"`, `"HDF5"` or `"zarr"`.
        format: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A valid file that uses a storage feature gpu-waterz does not read.
    #[error("{path} uses a storage feature gpu-waterz cannot read: {reason}")]
    Unsupported {
        /// The path.
        path: PathBuf,
        /// Which feature, and how to convert the file.
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
#[non_exhaustive]
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

/// The element types read in pieces (`.npy` files, chunked HDF5
/// datasets and zarr arrays).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementType {
    /// float32.
    F32,
    /// uint8.
    U8,
    /// uint32.
    U32,
    /// uint64.
    U64,
}

impl ElementType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            ElementType::U8 => 1,
            ElementType::F32 | ElementType::U32 => 4,
            ElementType::U64 => 8,
        }
    }
}

/// A piece read ahead: ranges of the piece's buffer, each with the index of
/// its first element in the volume.
pub(crate) type PieceRanges = Vec<(usize, std::ops::Range<usize>)>;

/// Reads pieces ahead of their consumer. `produce` fills a buffer with the
/// next piece and returns the ranges of it to hand on, each with the index
/// of its first element in the volume (`None` after the last piece);
/// `consume` gets each range, in order, on a thread of its own while the
/// next piece is produced, so that reading overlaps what the consumer does
/// (an upload to a GPU). Two buffers are all the memory this takes. Stops
/// at the first error of either side, and returns it.
pub(crate) fn read_ahead<T: Send, E: Send>(
    mut produce: impl FnMut(&mut Vec<T>) -> Result<Option<PieceRanges>, E>,
    consume: impl FnMut(usize, &[T]) -> Result<(), E> + Send,
) -> Result<(), E> {
    use std::sync::atomic::{AtomicU8, Ordering};
    // Which side failed first (0: neither yet), so that its error is the
    // one returned when both fail.
    const PRODUCER: u8 = 1;
    const CONSUMER: u8 = 2;
    let first_failure = AtomicU8::new(0);
    let failed = |side: u8| {
        let _ = first_failure.compare_exchange(0, side, Ordering::SeqCst, Ordering::SeqCst);
    };
    let failed = &failed;
    std::thread::scope(|scope| {
        // Made inside the scope, so that a panic on either side drops its
        // ends and the other side stops instead of waiting for ever.
        let (send_full, receive_full) = std::sync::mpsc::sync_channel::<(PieceRanges, Vec<T>)>(1);
        let (send_empty, receive_empty) = std::sync::mpsc::sync_channel::<Vec<T>>(2);
        let mut consume = consume;
        let consumer = scope.spawn(move || -> Result<(), E> {
            for (ranges, piece) in receive_full {
                for (first, range) in ranges {
                    consume(first, &piece[range]).inspect_err(|_| failed(CONSUMER))?;
                }
                // The producer may have stopped; then the buffer goes.
                let _ = send_empty.send(piece);
            }
            Ok(())
        });
        let mut spare: Vec<Vec<T>> = vec![Vec::new(), Vec::new()];
        let mut produce_all = || -> Result<(), E> {
            loop {
                let mut piece = match spare.pop() {
                    Some(p) => p,
                    None => match receive_empty.recv() {
                        Ok(p) => p,
                        // The consumer stopped: its error is reported below.
                        Err(_) => return Ok(()),
                    },
                };
                let Some(ranges) = produce(&mut piece).inspect_err(|_| failed(PRODUCER))? else { return Ok(()) };
                if send_full.send((ranges, piece)).is_err() {
                    return Ok(());
                }
            }
        };
        let produced = produce_all();
        drop(send_full);
        let consumed = consumer.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        if first_failure.load(Ordering::SeqCst) == CONSUMER {
            consumed.and(produced)
        } else {
            produced.and(consumed)
        }
    })
}

/// Where a volume lives: a `.npy` file, or a dataset in an HDF5 file.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
            VolumeSource::Npy(path) if hdf5::is_hdf5_name(path) => Err(hdf5::missing_dataset(path)),
            VolumeSource::Npy(path) => read_npy(path),
            VolumeSource::Hdf5 { file, dataset } => read_hdf5(file, dataset),
            VolumeSource::Zarr { root, array } => read_zarr(root, array),
        }
    }
}

impl VolumeSource {
    /// The attributes stored with the volume (zarr array attributes, HDF5
    /// dataset attributes; none for `.npy`), as JSON; empty when they
    /// cannot be read (the volume's own read reports such problems).
    pub fn attributes(&self) -> serde_json::Map<String, serde_json::Value> {
        match self {
            VolumeSource::Npy(_) => serde_json::Map::new(),
            VolumeSource::Hdf5 { file, dataset } => hdf5::attributes(file, dataset),
            VolumeSource::Zarr { root, array } => zarr::attributes(root, array),
        }
    }
}

/// A [`IoError::Format`] for `path`.
pub(crate) fn format_err(path: &Path, format: &'static str, reason: impl Into<String>) -> IoError {
    IoError::Format { path: path.to_path_buf(), format, reason: reason.into() }
}

/// Writes `bytes` to `path` atomically: a temporary file beside it, then a
/// rename. On failure nothing is left at `path` or beside it.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    write_parts_atomically(path, &[bytes], usize::MAX)
}

/// Writes the concatenation of `parts` to `path` as [`write_atomically`]
/// does, writing each part in pieces of `piece_bytes` on all threads.
pub fn write_parts_atomically(path: &Path, parts: &[&[u8]], piece_bytes: usize) -> Result<(), IoError> {
    use rayon::prelude::*;
    use std::os::unix::fs::FileExt;
    let write_err = |source| IoError::Write { path: path.to_path_buf(), cause: source };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let f = std::fs::File::create(&tmp)?;
        let total: usize = parts.iter().map(|p| p.len()).sum();
        f.set_len(total as u64)?;
        let mut offset = 0u64;
        for part in parts {
            let base = offset;
            part.par_chunks(piece_bytes.max(1))
                .enumerate()
                .try_for_each(|(i, piece)| f.write_all_at(piece, base + (i as u64) * piece_bytes.max(1) as u64))?;
            offset += part.len() as u64;
        }
        // No fsync here: the file is complete once renamed, whatever
        // happens to this process; `sync_tree` makes a result durable
        // against a power cut when asked for (`--fsync`).
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(write_err(e));
    }
    Ok(())
}

/// Flushes every file under `path` (a file, or a folder and its files and
/// subfolders) and the folders themselves to the disk.
pub fn sync_tree(path: &Path) -> std::io::Result<()> {
    use rayon::prelude::*;
    let mut files = Vec::new();
    let mut folders = Vec::new();
    let mut pending = vec![path.to_path_buf()];
    while let Some(p) = pending.pop() {
        if p.is_dir() {
            for entry in std::fs::read_dir(&p)? {
                pending.push(entry?.path());
            }
            folders.push(p);
        } else {
            files.push(p);
        }
    }
    files.par_iter().chain(folders.par_iter()).try_for_each(|p| std::fs::File::open(p)?.sync_all())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn read_ahead_returns_the_first_failure() {
        // The consumer fails on the first piece, the producer later on.
        let mut made = 0;
        let result = read_ahead(
            |piece: &mut Vec<u8>| -> Result<Option<PieceRanges>, String> {
                made += 1;
                if made == 3 {
                    // Only once the consumer has failed (it waits for a buffer).
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    return Err("producer".into());
                }
                piece.resize(4, made as u8);
                Ok(Some(vec![(4 * made, 0..4)]))
            },
            |_, _| Err("consumer".into()),
        );
        assert_eq!(result, Err("consumer".into()));
        // The producer fails first: its error.
        let result = read_ahead(
            |_: &mut Vec<u8>| -> Result<Option<PieceRanges>, String> { Err("producer".into()) },
            |_, _| Err("consumer".into()),
        );
        assert_eq!(result, Err("producer".into()));
        // No failure: every range, in order.
        let mut next = 0;
        let mut seen = Vec::new();
        read_ahead(
            |piece: &mut Vec<u32>| -> Result<Option<PieceRanges>, String> {
                if next == 5 {
                    return Ok(None);
                }
                piece.clear();
                piece.extend(next * 10..next * 10 + 10);
                next += 1;
                Ok(Some(vec![(0, 0..5), (5, 5..10)]))
            },
            |first, values| {
                seen.push((first, values.to_vec()));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen.len(), 10);
        assert_eq!(seen[3], (5, vec![15, 16, 17, 18, 19]));
    }
}

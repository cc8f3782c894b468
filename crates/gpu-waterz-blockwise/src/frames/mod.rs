//! zstd frames of a block's uint32 labels (one zarr chunk), made on the
//! GPU in step 5 from the labels it already holds there, one zstd block
//! per warp (`gpu_waterz_abi::frames`); [`label_frame`] makes the same
//! frame on the host, block by block with the same encoder, as the
//! reference.

#[allow(unsafe_code)]
mod launch;

use crate::{invalid, Result};
use gpu_waterz_abi::frames::{encode_block, frame_header, FrameGeometry, BLOCK_VOXELS, SLOT_BYTES};
use gpu_waterz_runtime::{DeviceBuffer, Gpu};
use gpu_waterz_watershed::WatershedError;
use rayon::prelude::*;

/// The frame's geometry for a chunk of `shape` holding `n` labels, after
/// checking that they fit (at least one voxel, fewer than 2^32).
fn geometry(shape: [u64; 3], n: usize) -> Result<FrameGeometry> {
    let voxels = shape.iter().try_fold(1u64, |a, &b| a.checked_mul(b));
    match voxels {
        Some(v) if v > 0 && v < u32::MAX as u64 && v == n as u64 => Ok(FrameGeometry::of(shape)),
        _ => Err(invalid(format!("{n} labels for a chunk of {shape:?}: 1 to 2^32 - 1 voxels, one label each"))),
    }
}

/// The zstd frame of a chunk of `shape` whose uint32 labels are `labels`
/// (C order, little-endian in the frame), encoded on the host block by
/// block (in parallel) as [`label_frame_on_gpu`] encodes them: the same
/// bytes.
pub fn label_frame(labels: &[u32], shape: [u64; 3]) -> Result<Vec<u8>> {
    let geometry = geometry(shape, labels.len())?;
    let blocks = geometry.blocks();
    let encoded: Vec<Vec<u8>> = (0..blocks)
        .into_par_iter()
        .map_init(
            || (vec![0u8; SLOT_BYTES as usize], vec![0u32; BLOCK_VOXELS as usize]),
            |(slot, room), b| {
                let size = encode_block(labels, &geometry, b, b + 1 == blocks, slot, room);
                slot[..size].to_vec()
            },
        )
        .collect();
    let (header, used) = frame_header(&geometry);
    let mut frame = Vec::with_capacity(used + encoded.iter().map(Vec::len).sum::<usize>());
    frame.extend_from_slice(&header[..used]);
    for block in &encoded {
        frame.extend_from_slice(block);
    }
    Ok(frame)
}

/// [`label_frame`] of the labels on the device (a chunk of `shape`),
/// downloaded (this synchronizes): each zstd block encoded by one warp
/// into a slot of its own, the slots' used bytes gathered into one buffer.
/// Device memory: about 8 bytes per voxel while it runs.
pub fn label_frame_on_gpu(gpu: &Gpu, labels: &DeviceBuffer<u32>, shape: [u64; 3]) -> Result<Vec<u8>> {
    let frame = DeviceFrame::new(gpu, labels, shape)?;
    let mut bytes = vec![0u8; frame.len()];
    frame.download_to_slice(gpu, &mut bytes)?;
    Ok(bytes)
}

/// A frame made on the device: its header, and its zstd blocks one after
/// the other in device memory.
pub(crate) struct DeviceFrame {
    header: [u8; 14],
    header_len: usize,
    blocks: DeviceBuffer<u8>,
}

impl DeviceFrame {
    /// The frame's bytes.
    pub fn len(&self) -> usize {
        self.header_len + self.blocks.len()
    }

    /// Copies the frame into `dst`, which holds exactly its bytes
    /// (page-locked memory is copied into directly; this synchronizes).
    pub fn download_to_slice(&self, gpu: &Gpu, dst: &mut [u8]) -> Result<()> {
        if dst.len() != self.len() {
            return Err(invalid(format!("room for {} bytes of a frame of {}", dst.len(), self.len())));
        }
        let (header, blocks) = dst.split_at_mut(self.header_len);
        header.copy_from_slice(&self.header[..self.header_len]);
        gpu.download_to_slice(&self.blocks, blocks).map_err(|e| WatershedError::from(e).into())
    }

    /// [`label_frame`] of the labels on the device (a chunk of `shape`):
    /// each zstd block encoded by one warp into a slot of its own, the
    /// slots' used bytes gathered into one buffer (this synchronizes, to
    /// learn their total). Device memory: about 8 bytes per voxel while it
    /// runs.
    pub fn new(gpu: &Gpu, labels: &DeviceBuffer<u32>, shape: [u64; 3]) -> Result<Self> {
        let geometry = geometry(shape, labels.len())?;
        let gpu_err = |e| crate::BlockwiseError::from(WatershedError::from(e));
        let encoded = launch::encode_blocks(gpu, labels, geometry).map_err(gpu_err)?;
        let blocks = launch::gather_blocks(gpu, encoded).map_err(gpu_err)?;
        let (header, header_len) = frame_header(&geometry);
        Ok(Self { header, header_len, blocks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decoded(frame: &[u8]) -> Vec<u32> {
        let bytes = zstd::stream::decode_all(frame).expect("a zstd frame");
        bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    }

    /// Labels of cell-like chunks: runs along x, rows that repeat the row
    /// above and planes the plane above, with changes here and there.
    fn cells(shape: [u64; 3], seed: u64, changes: u64) -> Vec<u32> {
        let n = (shape[0] * shape[1] * shape[2]) as usize;
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (row, plane) = (shape[2] as usize, (shape[1] * shape[2]) as usize);
        let mut labels = vec![0u32; n];
        for i in 0..n {
            let r = next();
            labels[i] = if i >= plane && r % 100 < 60 {
                labels[i - plane]
            } else if i >= row && r % 100 < 85 {
                labels[i - row]
            } else if i > 0 && r % 100 < 100 - changes {
                labels[i - 1]
            } else {
                (r >> 40) as u32 % 50
            };
        }
        labels
    }

    #[test]
    fn frames_decode_to_their_labels() {
        for (shape, changes) in [
            ([64, 128, 128], 2),
            ([3, 7, 5], 30),
            ([1, 1, 1], 0),
            ([2, 1, 9000], 1),
            ([5, 3000, 1], 5),
            ([4, 64, 64], 100),
        ] {
            let labels = cells(shape, 7, changes);
            let frame = label_frame(&labels, shape).unwrap();
            assert_eq!(decoded(&frame), labels, "{shape:?}");
        }
        // Long runs shrink: a constant chunk, and one that repeats its rows.
        let shape = [16, 256, 256];
        let constant = vec![7u32; 16 * 256 * 256];
        assert!(label_frame(&constant, shape).unwrap().len() < 16 * 256 * 256 / 20);
        let rows: Vec<u32> = (0..16 * 256 * 256).map(|i| (i % 256) as u32 / 3).collect();
        let frame = label_frame(&rows, shape).unwrap();
        assert_eq!(decoded(&frame), rows);
        assert!(frame.len() < rows.len(), "{} bytes", frame.len());
    }

    #[test]
    fn bad_chunks_are_refused() {
        assert!(label_frame(&[], [0, 1, 1]).is_err());
        assert!(label_frame(&[1, 2, 3], [1, 2, 2]).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn random_chunks_decode_to_their_labels(
            z in 1u64..6, y in 1u64..40, x in 1u64..300, seed in any::<u64>(), changes in 0u64..100,
        ) {
            let labels = cells([z, y, x], seed, changes);
            let frame = label_frame(&labels, [z, y, x]).unwrap();
            prop_assert_eq!(decoded(&frame), labels);
        }
    }
}

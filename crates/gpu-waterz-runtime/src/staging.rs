//! Large copies between host memory and the device through page-locked
//! staging buffers.
//!
//! A copy from or to ordinary (pageable) host memory makes the driver stage
//! it through its own small page-locked buffers, one piece after the other,
//! at a fraction of the bus's speed. Here a large copy goes through two
//! page-locked buffers of [`STAGING_CHUNK_BYTES`] that the device handle
//! keeps: while the device copies one piece into (or out of) one buffer,
//! the host's threads copy the other piece between the second buffer and
//! the caller's memory. Copies below [`STAGING_MIN_BYTES`] go directly, as
//! do copies that find the staging buffers in use by another copy, and
//! copies from or to page-locked memory ([`PinnedBuffer`]): those run at
//! the bus's speed with no host copy, which is what a caller wants that
//! can prepare its data before a copy (or read it after) on its own thread.

use crate::device::Gpu;
use crate::{DeviceBuffer, DeviceElement, DriverContext, Result};
use cudarc::driver::{result as driver, CudaEvent, DevicePtr, DevicePtrMut};
use rayon::prelude::*;
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};
use std::ops::{Deref, DerefMut};

/// The size of each of the two staging buffers.
pub const STAGING_CHUNK_BYTES: usize = 32 << 20;

/// Copies smaller than this go directly between pageable memory and the
/// device.
pub const STAGING_MIN_BYTES: usize = 8 << 20;

/// The bytes each host thread copies at a time between a staging buffer
/// and the caller's memory.
const HOST_PIECE_BYTES: usize = 1 << 20;

/// Page-locked host memory from `cuMemHostAlloc`, freed on drop.
struct PinnedBytes {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the allocation is plain memory owned by this value alone; the
// device reads or writes it only between a copy's launch and the event that
// `Staging` records after it, which every host access waits for.
unsafe impl Send for PinnedBytes {}

impl PinnedBytes {
    fn new(len: usize) -> std::result::Result<Self, cudarc::driver::DriverError> {
        // SAFETY: allocates `len` bytes of page-locked memory (flags 0:
        // cached, so that host reads are fast); a null pointer is an error.
        let ptr = unsafe { driver::malloc_host(len, 0) }? as *mut u8;
        assert!(!ptr.is_null(), "cuMemHostAlloc returned success and a null pointer");
        Ok(Self { ptr, len })
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` holds `len` bytes owned by `self`, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedBytes {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemHostAlloc and is freed once. Every
        // copy into it was waited for by its user before the drop (the
        // staging lock is held for a whole transfer).
        let _ = unsafe { driver::free_host(self.ptr.cast()) };
    }
}

/// Page-locked host memory holding `len` values of `T`, zeroed when made
/// (a slice of it, through `Deref`): copies between it and the device
/// ([`Gpu::upload`], [`Gpu::download_into`] and the others) go directly at
/// the bus's speed, with no host copy through the staging buffers. Making
/// one costs about as much as copying its bytes a few times (the pages are
/// locked and zeroed): made once and reused.
pub struct PinnedBuffer<T: DeviceElement> {
    bytes: PinnedBytes,
    len: usize,
    values: PhantomData<T>,
}

impl<T: DeviceElement> PinnedBuffer<T> {
    /// `len` zeros in page-locked memory of `gpu`'s context.
    pub fn zeroed(gpu: &Gpu, len: usize) -> Result<Self> {
        let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| crate::RuntimeError::InvalidLaunch {
            kernel: "pinned buffer",
            reason: format!("{len} elements of {} bytes overflow", size_of::<T>()),
        })?;
        gpu.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        // One byte at least: the driver refuses empty allocations.
        let mut pinned =
            PinnedBytes::new(bytes.max(1)).context(|| format!("allocating {bytes} bytes of page-locked memory"))?;
        pinned.bytes_mut().fill(0);
        Ok(Self { bytes: pinned, len, values: PhantomData })
    }
}

impl<T: DeviceElement> PinnedBuffer<T> {
    /// The buffer's bytes as values of `U` (as many whole ones as they
    /// hold): one page-locked room serves copies of several types.
    pub fn view<U: DeviceElement>(&self) -> &[U] {
        // SAFETY: the allocation holds `len` values of `T`, all written, so
        // `len * size_of::<T>() / size_of::<U>()` values of `U` lie in it;
        // every bit pattern is a valid `U` (DeviceElement: plain integers
        // and floats); it is page-aligned, so aligned for `U`.
        unsafe { std::slice::from_raw_parts(self.bytes.ptr.cast::<U>(), self.len * size_of::<T>() / size_of::<U>()) }
    }

    /// [`PinnedBuffer::view`], mutably.
    pub fn view_mut<U: DeviceElement>(&mut self) -> &mut [U] {
        // SAFETY: as in `view`, borrowed mutably through `self`; a write of
        // any `U` leaves bytes that are a valid `T` too.
        unsafe {
            std::slice::from_raw_parts_mut(self.bytes.ptr.cast::<U>(), self.len * size_of::<T>() / size_of::<U>())
        }
    }
}

impl<T: DeviceElement> Deref for PinnedBuffer<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: the allocation holds `len` values' bytes, all written
        // (zeroed when made, then only through `&mut [T]`), every bit
        // pattern is a valid `T` (DeviceElement), and it is page-aligned, so
        // aligned for `T`.
        unsafe { std::slice::from_raw_parts(self.bytes.ptr.cast::<T>(), self.len) }
    }
}

impl<T: DeviceElement> DerefMut for PinnedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.bytes.ptr.cast::<T>(), self.len) }
    }
}

/// A download queued on the device's copy stream behind the work queued
/// before it ([`Gpu::download_behind`]): the device copies while it runs
/// the work queued after it. [`PendingDownload::wait`] gives the
/// page-locked buffer back with the values in it. Both buffers are owned
/// until the copy has ended: dropped without `wait`, it waits first (and
/// forgotten, both buffers are leaked, never reused while the copy runs).
pub struct PendingDownload<T: DeviceElement> {
    done: CudaEvent,
    source: Option<DeviceBuffer<T>>,
    destination: Option<PinnedBuffer<T>>,
}

impl<T: DeviceElement> PendingDownload<T> {
    /// Waits for the copy; gives back the page-locked buffer (the first
    /// values the download asked for are the device buffer's) and frees the
    /// device buffer.
    pub fn wait(mut self) -> Result<PinnedBuffer<T>> {
        self.done.synchronize().context(|| "waiting for a download behind other work".into())?;
        drop(self.source.take());
        Ok(self.destination.take().expect("taken only here"))
    }
}

impl<T: DeviceElement> Drop for PendingDownload<T> {
    fn drop(&mut self) {
        if self.destination.is_some() {
            // The copy must end before either buffer goes; an error here
            // leaves nothing better to do than to go on.
            let _ = self.done.synchronize();
        }
    }
}

impl Gpu {
    /// Copies the first `len` values of `source` into the page-locked
    /// `destination` on a stream of the device's own for such copies,
    /// behind every piece of work queued so far, and returns at once: the
    /// work queued next runs on the device while it copies (the copy
    /// engine and the multiprocessors are separate). Fails (nothing
    /// queued) when either buffer holds fewer than `len` values.
    pub fn download_behind<T: DeviceElement>(
        &self,
        source: DeviceBuffer<T>,
        len: usize,
        mut destination: PinnedBuffer<T>,
    ) -> Result<PendingDownload<T>> {
        self.check_device(&source, "the buffer")?;
        if len > source.len() || len > destination.len() {
            return Err(crate::RuntimeError::InvalidLaunch {
                kernel: "download_behind",
                reason: format!(
                    "{len} values from a buffer of {} into page-locked room for {}",
                    source.len(),
                    destination.len()
                ),
            });
        }
        self.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        let copies = self.copy_stream()?;
        let queued = self.stream.record_event(None).context(|| "recording the work before a download".into())?;
        copies.wait(&queued).context(|| "ordering a download behind the work before it".into())?;
        // The address alone (event tracking is off: the guard does nothing).
        let base = source.slice().device_ptr(&self.stream).0;
        let bytes = len * size_of::<T>();
        // Both buffers move into the returned value, which holds them until
        // the event recorded next has completed (`wait`, or its drop), so
        // neither is freed or reused while the copy runs.
        // SAFETY: the device range [base, base + len values) lies in
        // `source`, the host range in `destination` (both checked above).
        unsafe {
            let host = std::slice::from_raw_parts_mut(destination.as_mut_ptr().cast::<u8>(), bytes);
            driver::memcpy_dtoh_async(host, base, copies.cu_stream())
        }
        .context(|| format!("downloading {len} values behind other work"))?;
        match copies.record_event(None) {
            Ok(done) => Ok(PendingDownload { done, source: Some(source), destination: Some(destination) }),
            Err(e) => {
                // The copy is queued: it must end before the buffers go.
                let _ = copies.synchronize();
                Err(e).context(|| "recording a download's end".into())
            }
        }
    }
}

impl Gpu {
    /// The device's stream for copies that run beside its other work, made
    /// on first use.
    fn copy_stream(&self) -> Result<std::sync::Arc<cudarc::driver::CudaStream>> {
        if let Some(stream) = self.copies.get() {
            return Ok(stream.clone());
        }
        let made = self.ctx.new_stream().context(|| "making the copy stream".into())?;
        Ok(self.copies.get_or_init(|| made).clone())
    }

    /// Copies each of `host` (page-locked slices, [`PinnedBuffer`]s) into
    /// a new device buffer on the copy stream while `work` queues other work
    /// on the device's stream (the copies and that work overlap on the
    /// device), then has the device's stream wait for the copies, so that
    /// work queued afterwards reads them. Returns once the copies have
    /// ended (the host slices are free again; `work`'s own kernels may
    /// still run), with the buffers (one element at least each) and
    /// `work`'s result. Slices that are not page-locked are uploaded
    /// plainly, before `work`. `work`'s errors are its own (in `R`).
    pub fn upload_beside<T: DeviceElement, R>(
        &self,
        host: &[&[T]],
        work: impl FnOnce(&Gpu) -> R,
    ) -> Result<(Vec<DeviceBuffer<T>>, R)> {
        let locked = host.iter().all(|h| !h.is_empty() && self.page_locked(h.as_ptr().cast()));
        if !locked {
            let buffers = host.iter().map(|h| if h.is_empty() { self.zeros(1) } else { self.upload(h) });
            let buffers = buffers.collect::<Result<Vec<_>>>()?;
            return Ok((buffers, work(self)));
        }
        self.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        let copies = self.copy_stream()?;
        let mut buffers = host.iter().map(|h| self.uninit::<T>(h.len())).collect::<Result<Vec<_>>>()?;
        // The buffers are the device stream's (allocated on it) until here.
        let allocated = self.stream.record_event(None).context(|| "recording the uploads' buffers".into())?;
        copies.wait(&allocated).context(|| "ordering uploads behind their buffers".into())?;
        // From the first copy on, every way out of this function (an error,
        // a panic in `work`) waits for the copies before `host` is given
        // back.
        let _copying = WaitOnDrop(&copies);
        for (buffer, values) in buffers.iter_mut().zip(host) {
            let base = buffer.slice_mut().device_ptr_mut(&self.stream).0;
            // SAFETY: the buffer holds `values.len()` elements; `values` is
            // page-locked host memory borrowed until the copies are waited for.
            unsafe { driver::memcpy_htod_async(base, values, copies.cu_stream()) }
                .context(|| format!("uploading {} values beside other work", values.len()))?;
        }
        let uploaded = copies.record_event(None).context(|| "recording the uploads' end".into())?;
        let out = work(self);
        self.stream.wait(&uploaded).context(|| "ordering work behind the uploads".into())?;
        uploaded.synchronize().context(|| "waiting for uploads beside other work".into())?;
        Ok((buffers, out))
    }
}

/// Waits for every copy queued on a stream when dropped.
struct WaitOnDrop<'s>(&'s cudarc::driver::CudaStream);

impl Drop for WaitOnDrop<'_> {
    fn drop(&mut self) {
        // Nothing better to do with an error here than to go on.
        let _ = self.0.synchronize();
    }
}

/// Two staging buffers and the events that say when the device is done
/// with each.
pub(crate) struct Staging {
    buffers: [PinnedBytes; 2],
    events: [CudaEvent; 2],
}

impl Staging {
    fn new(gpu: &Gpu) -> Result<Self> {
        let buffer =
            || PinnedBytes::new(STAGING_CHUNK_BYTES).context(|| "allocating page-locked staging memory".into());
        let event = || gpu.ctx.new_event(None).context(|| "creating a staging event".into());
        Ok(Self { buffers: [buffer()?, buffer()?], events: [event()?, event()?] })
    }
}

/// Elements of `T` per staging buffer.
fn chunk_elements<T>() -> usize {
    STAGING_CHUNK_BYTES / size_of::<T>()
}

/// Copies `src` into `dst` (same length) on all host threads.
fn parallel_copy<T: Copy + Send + Sync>(src: &[T], dst: &mut [MaybeUninit<T>]) {
    let piece = (HOST_PIECE_BYTES / size_of::<T>()).max(1);
    dst.par_chunks_mut(piece).zip(src.par_chunks(piece)).for_each(|(d, s)| {
        for (d, s) in d.iter_mut().zip(s) {
            d.write(*s);
        }
    });
}

impl Gpu {
    /// Whether another copy holds the staging buffers now. A copy that finds
    /// them busy goes directly instead of waiting: the holder may be this
    /// very thread, lower on its stack, when the holder's parallel copy let
    /// rayon run another task here (waiting would never end).
    fn staging_busy(&self) -> bool {
        matches!(self.staging.try_lock(), Err(std::sync::TryLockError::WouldBlock))
    }

    /// Whether `ptr` lies in page-locked host memory (a [`PinnedBuffer`]):
    /// the device copies it directly at the bus's speed. Memory the driver
    /// does not know (ordinary pageable memory) is not.
    fn page_locked(&self, ptr: *const u8) -> bool {
        let mut kind: u32 = 0;
        // SAFETY: the attribute is a 32-bit memory type written into
        // `kind`; the driver only reads its tables for the address (with
        // unified addressing a host address is a valid query), and answers
        // an error for memory it does not know.
        let known = unsafe {
            cudarc::driver::sys::cuPointerGetAttribute(
                (&mut kind as *mut u32).cast(),
                cudarc::driver::sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                ptr as u64,
            )
        };
        known == cudarc::driver::sys::CUresult::CUDA_SUCCESS
            && kind == cudarc::driver::sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
    }

    /// Runs `f` with the device's staging buffers, made on first use.
    fn with_staging<R>(&self, f: impl FnOnce(&mut Staging) -> Result<R>) -> Result<R> {
        let mut guard = self.staging.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if guard.is_none() {
            *guard = Some(Staging::new(self)?);
        }
        f(guard.as_mut().expect("made above"))
    }

    /// Copies the first `dst.len()` elements of `buffer` into `dst`
    /// (synchronizes), through the staging buffers when the copy is large.
    /// Fails when the buffer is shorter than `dst`.
    pub fn download_into<T: DeviceElement>(&self, buffer: &DeviceBuffer<T>, dst: &mut [MaybeUninit<T>]) -> Result<()> {
        self.check_device(buffer, "the buffer")?;
        let n = dst.len();
        if n > buffer.len() {
            return Err(crate::RuntimeError::InvalidLaunch {
                kernel: "download",
                reason: format!("{n} elements from a buffer of {}", buffer.len()),
            });
        }
        if n == 0 {
            return Ok(());
        }
        // The raw copies below need the context current on this thread
        // (a pipeline may run on a worker thread).
        self.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        let (base, _sync) = buffer.slice().device_ptr(&self.stream);
        let stream = self.stream.cu_stream();
        let direct = n * size_of::<T>() < STAGING_MIN_BYTES || self.staging_busy();
        if direct || self.page_locked(dst.as_ptr().cast()) {
            // SAFETY: `dst` holds `n` writable elements and the device range
            // [base, base + n elements) lies in `buffer`; the copy is waited
            // for below before `dst` is given back.
            unsafe {
                let bytes = std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<u8>(), n * size_of::<T>());
                driver::memcpy_dtoh_async(bytes, base, stream).context(|| format!("downloading {n} elements"))?;
            }
            return self.stream.synchronize().context(|| "waiting for a download".into());
        }
        let chunk = chunk_elements::<T>();
        let pieces: Vec<(usize, usize)> = (0..n).step_by(chunk).map(|s| (s, (s + chunk).min(n))).collect();
        self.with_staging(|staging| {
            let issue = |staging: &mut Staging, i: usize| -> Result<()> {
                let (start, end) = pieces[i];
                let bytes = (end - start) * size_of::<T>();
                let slot = i % 2;
                let target = &mut staging.buffers[slot].bytes_mut()[..bytes];
                // SAFETY: the device range [start, end) lies in `buffer`
                // (end <= n <= len); `target` is page-locked memory of
                // `bytes` bytes that no one reads until the event recorded
                // after this copy has completed.
                unsafe { driver::memcpy_dtoh_async(target, base + (start * size_of::<T>()) as u64, stream) }
                    .context(|| format!("downloading elements {start}..{end}"))?;
                staging.events[slot].record(&self.stream).context(|| "recording a staging event".into())
            };
            issue(staging, 0)?;
            for i in 0..pieces.len() {
                if i + 1 < pieces.len() {
                    issue(staging, i + 1)?;
                }
                let slot = i % 2;
                staging.events[slot].synchronize().context(|| "waiting for a staged download".into())?;
                let (start, end) = pieces[i];
                let bytes = &staging.buffers[slot].bytes_mut()[..(end - start) * size_of::<T>()];
                // SAFETY: the device wrote these bytes (the event completed),
                // and every bit pattern is a valid `T` (DeviceElement); the
                // buffer is page-aligned, so aligned for `T`.
                let values = unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), end - start) };
                parallel_copy(values, &mut dst[start..end]);
            }
            Ok(())
        })
    }

    /// As [`Gpu::download_into`], into initialised memory (overwritten).
    pub fn download_to_slice<T: DeviceElement>(&self, buffer: &DeviceBuffer<T>, dst: &mut [T]) -> Result<()> {
        // SAFETY: `MaybeUninit<T>` has `T`'s layout, and `download_into`
        // only writes whole values of `T` into the slice (or nothing), so
        // it stays initialised.
        let dst = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<MaybeUninit<T>>(), dst.len()) };
        self.download_into(buffer, dst)
    }

    /// Copies a device buffer to a new host vector (synchronizes), through
    /// the staging buffers when it is large.
    pub fn download<T: DeviceElement>(&self, buffer: &DeviceBuffer<T>) -> Result<Vec<T>> {
        self.download_prefix(buffer, buffer.len())
    }

    /// Copies the first `len` elements of a device buffer to a new host
    /// vector (synchronizes); fails when the buffer is shorter.
    pub fn download_prefix<T: DeviceElement>(&self, buffer: &DeviceBuffer<T>, len: usize) -> Result<Vec<T>> {
        let mut values = Vec::with_capacity(len);
        self.download_into(buffer, &mut values.spare_capacity_mut()[..len])?;
        // SAFETY: `download_into` wrote all `len` elements or failed.
        unsafe { values.set_len(len) };
        Ok(values)
    }

    /// Copies `host` into `buffer` starting at element `offset`, through
    /// the staging buffers when the copy is large (returns once the host
    /// memory may be reused).
    pub fn upload_into<T: DeviceElement>(&self, buffer: &mut DeviceBuffer<T>, offset: usize, host: &[T]) -> Result<()> {
        self.check_device(buffer, "the buffer")?;
        let n = host.len();
        offset.checked_add(n).filter(|&e| e <= buffer.len()).ok_or_else(|| crate::RuntimeError::InvalidLaunch {
            kernel: "upload_into",
            reason: format!("{n} elements at {offset} do not fit a buffer of {}", buffer.len()),
        })?;
        if n == 0 {
            return Ok(());
        }
        self.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        let stream = self.stream.clone();
        let (base, _sync) = buffer.slice_mut().device_ptr_mut(&stream);
        let base = base + (offset * size_of::<T>()) as u64;
        let direct = std::mem::size_of_val(host) < STAGING_MIN_BYTES || self.staging_busy();
        if direct || self.page_locked(host.as_ptr().cast()) {
            // SAFETY: [base, base + n elements) lies in `buffer` (checked
            // above); `host` is read before the synchronize returns.
            unsafe { driver::memcpy_htod_async(base, host, stream.cu_stream()) }
                .context(|| format!("uploading {n} elements"))?;
            return stream.synchronize().context(|| "waiting for an upload".into());
        }
        self.upload_staged(base, n, |start, values| parallel_copy(&host[start..start + values.len()], values))
    }

    /// Copies `total` elements to the device memory at `base` through the
    /// staging buffers, piece by piece: `fill(start, values)` writes every
    /// one of `values`, the elements from `start` on, into a staging buffer
    /// while the device copies the piece before. Returns once the last copy
    /// has ended. The caller has checked that `[base, base + total
    /// elements)` lies in one device buffer.
    fn upload_staged<T: DeviceElement>(
        &self,
        base: u64,
        total: usize,
        fill: impl Fn(usize, &mut [MaybeUninit<T>]),
    ) -> Result<()> {
        let stream = self.stream.clone();
        let chunk = chunk_elements::<T>();
        self.with_staging(|staging| {
            for (i, start) in (0..total).step_by(chunk).enumerate() {
                let stop = (start + chunk).min(total);
                let slot = i % 2;
                // The device must be done with this buffer's last piece.
                staging.events[slot].synchronize().context(|| "waiting for a staged upload".into())?;
                let bytes = &mut staging.buffers[slot].bytes_mut()[..(stop - start) * size_of::<T>()];
                // SAFETY: the staging buffer is page-aligned and holds
                // `stop - start` elements' bytes, which `fill` writes here
                // before the device reads them.
                let values = unsafe {
                    std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<MaybeUninit<T>>(), stop - start)
                };
                fill(start, values);
                // SAFETY: [start, stop) lies in the caller's device range; the
                // staging bytes were all written by `fill` and are not touched
                // again until this slot's event (recorded next) completes.
                unsafe {
                    let written = std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), stop - start);
                    driver::memcpy_htod_async(base + (start * size_of::<T>()) as u64, written, stream.cu_stream())
                }
                .context(|| format!("uploading elements {start}..{stop}"))?;
                staging.events[slot].record(&stream).context(|| "recording a staging event".into())?;
            }
            stream.synchronize().context(|| "waiting for a staged upload".into())
        })
    }

    /// Copies `parts`, one after the other, into a new device buffer of
    /// their total length (at least one element: an empty total gives one
    /// zero), through the staging buffers, each filled from the parts it
    /// spans on all host threads: no concatenation on the host first.
    pub fn upload_concatenated<T: DeviceElement>(&self, parts: &[&[T]]) -> Result<DeviceBuffer<T>> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total == 0 {
            return self.zeros(1);
        }
        let mut buffer = self.uninit::<T>(total)?;
        if total * size_of::<T>() < STAGING_MIN_BYTES || self.staging_busy() {
            let mut offset = 0;
            for part in parts {
                self.upload_into(&mut buffer, offset, part)?;
                offset += part.len();
            }
            return Ok(buffer);
        }
        self.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        let stream = self.stream.clone();
        let base = buffer.slice_mut().device_ptr_mut(&stream).0;
        // Where each part starts in the concatenation.
        let starts: Vec<usize> = parts
            .iter()
            .scan(0, |at, p| {
                let start = *at;
                *at += p.len();
                Some(start)
            })
            .collect();
        // Each piece from the parts it spans, each part's share copied on
        // all threads (the parts cover every piece).
        self.upload_staged(base, total, |start, values: &mut [MaybeUninit<T>]| {
            let stop = start + values.len();
            let first = starts.partition_point(|&s| s <= start) - 1;
            let mut rest = values;
            for (part, &part_start) in parts[first..].iter().zip(&starts[first..]) {
                if part_start >= stop || rest.is_empty() {
                    break;
                }
                let from = start.max(part_start) - part_start;
                let to = (stop - part_start).min(part.len());
                let (piece, tail) = rest.split_at_mut(to - from);
                parallel_copy(&part[from..to], piece);
                rest = tail;
            }
        })?;
        Ok(buffer)
    }

    /// Copies a host slice to a new device buffer, through the staging
    /// buffers when it is large.
    pub fn upload<T: DeviceElement>(&self, host: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buffer = self.uninit::<T>(host.len())?;
        self.upload_into(&mut buffer, 0, host)?;
        Ok(buffer)
    }
}

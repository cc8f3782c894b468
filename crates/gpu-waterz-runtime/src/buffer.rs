//! Typed device buffers: allocation, copies, and borrowed foreign memory.

use crate::device::Gpu;
use crate::{DriverContext, Result, RuntimeError};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};

/// Element types that device buffers hold: plain integers and floats, valid
/// for every bit pattern.
pub trait DeviceElement: DeviceRepr + ValidAsZeroBits + Copy + Default + Unpin + Send + Sync + 'static {}
impl DeviceElement for u8 {}
impl DeviceElement for u32 {}
impl DeviceElement for u64 {}
impl DeviceElement for i32 {}
impl DeviceElement for i64 {}
impl DeviceElement for f32 {}
impl DeviceElement for f64 {}

/// A typed buffer in device memory, owned and freed on drop; or, when made
/// by the `unsafe` [`Gpu::borrow_device_memory`], a view of memory that
/// something else owns, never freed here.
#[derive(Debug)]
pub struct DeviceBuffer<T> {
    inner: Option<CudaSlice<T>>,
    /// Whether `inner` is borrowed (and must be leaked, not freed, on drop).
    borrowed: bool,
}

impl<T> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        let Some(slice) = self.inner.take() else { return };
        if self.borrowed {
            // The memory belongs to another library: forget the handle.
            slice.leak();
        } else {
            // cudarc frees a buffer without binding its context to the
            // thread: a buffer dropped on a thread that never used the
            // device would fail to free and leave the context in error for
            // every later call. Binding it first frees it cleanly. (Not with
            // `bind_to_thread`, which would take, and here lose, an error
            // recorded earlier: a failed bind is recorded instead.)
            let ctx = slice.context();
            let current = cudarc::driver::result::ctx::get_current();
            if !matches!(current, Ok(Some(c)) if c == ctx.cu_ctx()) {
                // SAFETY: the context is alive: the slice holds it.
                ctx.record_err(unsafe { cudarc::driver::result::ctx::set_current(ctx.cu_ctx()) });
            }
            drop(slice);
        }
    }
}

impl<T> DeviceBuffer<T> {
    fn owned(inner: CudaSlice<T>) -> Self {
        Self { inner: Some(inner), borrowed: false }
    }

    pub(crate) fn slice(&self) -> &CudaSlice<T> {
        self.inner.as_ref().expect("a live buffer always holds its slice")
    }

    pub(crate) fn slice_mut(&mut self) -> &mut CudaSlice<T> {
        self.inner.as_mut().expect("a live buffer always holds its slice")
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.slice().len()
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ordinal of the device that holds the buffer.
    pub fn ordinal(&self) -> usize {
        self.slice().ordinal()
    }

    /// The size in bytes.
    pub fn num_bytes(&self) -> usize {
        self.slice().num_bytes()
    }

    /// The device address of the first element, for a kernel's argument
    /// struct. Reading through it is only possible in a kernel, whose launch
    /// is `unsafe` and states why the buffer is long enough.
    pub fn as_ptr(&self) -> *const T {
        let slice = self.slice();
        let (address, _sync) = slice.device_ptr(slice.stream());
        address as usize as *const T
    }

    /// The device address of the first element, for a kernel that writes
    /// the buffer (see [`DeviceBuffer::as_ptr`]).
    pub fn as_mut_ptr(&mut self) -> *mut T {
        let slice = self.slice_mut();
        let stream = slice.stream().clone();
        let (address, _sync) = slice.device_ptr_mut(&stream);
        address as usize as *mut T
    }

    /// The device address as an integer (for handing the memory to another
    /// library that reads it while the buffer lives).
    pub fn device_address(&self) -> u64 {
        self.as_ptr() as usize as u64
    }
}

/// The bytes of `len` elements of `T`, or an error when they exceed
/// `isize::MAX` (so that no allocation's size can wrap around and leave a
/// buffer whose length claims more than was allocated).
fn byte_len<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>()).filter(|&b| b <= isize::MAX as usize).ok_or_else(|| {
        RuntimeError::InvalidLaunch {
            kernel: "allocation",
            reason: format!("{len} elements of {} bytes do not fit an allocation", std::mem::size_of::<T>()),
        }
    })
}

impl Gpu {
    /// Fails unless `buffer` lives on this device: a kernel launched here
    /// must not address another device's memory, and a buffer is freed on
    /// its own device's stream.
    pub fn check_device<T>(&self, buffer: &DeviceBuffer<T>, what: &str) -> Result<()> {
        if buffer.ordinal() != self.ordinal() {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "launch",
                reason: format!("{what} is on device {}, the launch on device {}", buffer.ordinal(), self.ordinal()),
            });
        }
        Ok(())
    }

    /// Maps an allocation failure to [`RuntimeError::OutOfMemory`] (with the
    /// bytes asked for and free) or to a driver error with context.
    fn allocation<T>(
        &self,
        r: std::result::Result<T, cudarc::driver::DriverError>,
        bytes: usize,
        what: &str,
    ) -> Result<T> {
        match r {
            Ok(v) => Ok(v),
            Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                let (free, total) = self.memory_info().unwrap_or((0, 0));
                Err(RuntimeError::OutOfMemory { what: what.to_string(), needed: bytes as u64, free, total })
            }
            Err(source) => Err(RuntimeError::Driver { context: format!("{what} ({bytes} bytes)"), source }),
        }
    }

    /// Views `len` elements of type `T` at device address `ptr`, memory that
    /// something else allocated (a torch tensor, a cupy array). The driver
    /// must confirm that the whole range lies inside one allocation on this
    /// device, suitably aligned, else this fails. The returned buffer never
    /// frees the memory.
    ///
    /// # Safety
    /// The memory must stay allocated, and must not be written by anyone
    /// else, for as long as the returned buffer (or anything made from it)
    /// is used: the driver can check where the memory is, not how long its
    /// owner keeps it.
    pub unsafe fn borrow_device_memory<T: DeviceElement>(&self, ptr: u64, len: usize) -> Result<DeviceBuffer<T>> {
        use cudarc::driver::sys::{cuPointerGetAttribute, CUpointer_attribute};
        let bytes = (len as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        let invalid = |reason: String| RuntimeError::InvalidLaunch { kernel: "borrowed device memory", reason };
        if ptr == 0 || !ptr.is_multiple_of(std::mem::align_of::<T>() as u64) {
            return Err(invalid(format!("the device pointer {ptr:#x} is null or misaligned")));
        }
        self.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        let (mut start, mut size, mut ordinal) = (0u64, 0u64, -1i32);
        // SAFETY: each call writes one value of the attribute's documented
        // type (a CUdeviceptr, a size_t, an int) to a live local.
        let results = unsafe {
            [
                cuPointerGetAttribute(
                    (&mut start as *mut u64).cast(),
                    CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                    ptr,
                ),
                cuPointerGetAttribute(
                    (&mut size as *mut u64).cast(),
                    CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                    ptr,
                ),
                cuPointerGetAttribute(
                    (&mut ordinal as *mut i32).cast(),
                    CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                    ptr,
                ),
            ]
        };
        if let Some(bad) = results.iter().find(|r| **r != cudarc::driver::sys::CUresult::CUDA_SUCCESS) {
            return Err(invalid(format!("{ptr:#x} is not device memory the driver knows ({bad:?})")));
        }
        if ordinal as i64 != self.ctx.ordinal() as i64 {
            return Err(invalid(format!("the memory is on device {ordinal}, this is device {}", self.ctx.ordinal())));
        }
        if ptr < start || ptr.saturating_add(bytes) > start.saturating_add(size) {
            return Err(invalid(format!(
                "{bytes} bytes at {ptr:#x} overrun the allocation [{start:#x}, +{size}) that holds them"
            )));
        }
        // SAFETY: the driver confirmed that [ptr, ptr + bytes) lies inside
        // one live allocation of this device, aligned for `T`; `T` is a
        // plain number type valid for any bits; the caller keeps it alive.
        // The buffer is marked borrowed, so its drop leaks the handle.
        let inner = unsafe { self.stream.upgrade_device_ptr::<T>(ptr, len) };
        Ok(DeviceBuffer { inner: Some(inner), borrowed: true })
    }

    /// A new device buffer of `len` zeroed elements.
    pub fn zeros<T: DeviceElement>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = byte_len::<T>(len)?;
        let inner = self.allocation(self.stream.alloc_zeros(len), bytes, "allocating a buffer")?;
        Ok(DeviceBuffer::owned(inner))
    }

    /// Element `index` of a device buffer (synchronizes).
    pub fn download_element<T: DeviceElement>(&self, buffer: &DeviceBuffer<T>, index: usize) -> Result<T> {
        let view = buffer.slice().try_slice(index..index + 1).ok_or_else(|| RuntimeError::InvalidLaunch {
            kernel: "download",
            reason: format!("index {index} is outside a buffer of {} elements", buffer.len()),
        })?;
        Ok(self.stream.clone_dtoh(&view).context(|| format!("downloading element {index}"))?[0])
    }

    /// Copies the first `len` elements of `src` to the start of `dst`, on
    /// the device (stream-ordered).
    pub fn copy_prefix<T: DeviceElement>(
        &self,
        src: &DeviceBuffer<T>,
        dst: &mut DeviceBuffer<T>,
        len: usize,
    ) -> Result<()> {
        self.check_device(src, "the source")?;
        self.check_device(dst, "the destination")?;
        if len > src.len() || len > dst.len() {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "copy_prefix",
                reason: format!("{len} elements from a buffer of {} into one of {}", src.len(), dst.len()),
            });
        }
        if len == 0 {
            return Ok(());
        }
        let from = src.slice().slice(..len);
        let mut to = dst.slice_mut().slice_mut(..len);
        self.stream.memcpy_dtod(&from, &mut to).context(|| format!("copying {len} elements on the device"))
    }

    /// A device-side copy of a buffer.
    pub fn duplicate<T: DeviceElement>(&self, buffer: &DeviceBuffer<T>) -> Result<DeviceBuffer<T>> {
        let inner = self.stream.clone_dtod(buffer.slice()).context(|| format!("copying {} elements", buffer.len()))?;
        Ok(DeviceBuffer::owned(inner))
    }

    /// Sets every element of `buffer` to zero.
    pub fn memset_zero<T: DeviceElement>(&self, buffer: &mut DeviceBuffer<T>) -> Result<()> {
        self.check_device(buffer, "the buffer")?;
        self.stream.memset_zeros(buffer.slice_mut()).context(|| "zeroing a buffer".into())
    }

    /// Sets every byte of `buffer` to `byte` (stream-ordered; the driver's
    /// memset, at copy bandwidth). `0xFF` makes every integer element its
    /// type's maximum.
    pub fn memset_bytes<T: DeviceElement>(&self, buffer: &mut DeviceBuffer<T>, byte: u8) -> Result<()> {
        self.check_device(buffer, "the buffer")?;
        let bytes = buffer.num_bytes();
        let address = buffer.as_mut_ptr() as usize as u64;
        self.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        // SAFETY: `address` is a live allocation of `bytes` bytes, used on
        // this stream; every bit pattern is a valid DeviceElement.
        unsafe { cudarc::driver::result::memset_d8_async(address, byte, bytes, self.stream.cu_stream()) }
            .context(|| format!("setting {bytes} bytes"))
    }

    /// A new device buffer of `len` elements whose contents are unspecified:
    /// every element holds some bit pattern, all of which are valid
    /// [`DeviceElement`]s, so reading one is never undefined behaviour, only
    /// meaningless until written.
    pub fn uninit<T: DeviceElement>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = byte_len::<T>(len)?;
        // SAFETY: device memory is never read on the host before a copy
        // from the device, and every bit pattern is a valid `T`; `len`
        // elements fit `isize::MAX` bytes (checked), so cudarc's size
        // computation does not overflow.
        let r = unsafe { self.stream.alloc::<T>(len) };
        let inner = self.allocation(r, bytes, "allocating a buffer")?;
        Ok(DeviceBuffer::owned(inner))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn allocation_sizes_never_wrap() {
        assert_eq!(super::byte_len::<u32>(1000).unwrap(), 4000);
        assert!(super::byte_len::<u32>((1 << 62) + 1).is_err());
        assert!(super::byte_len::<u64>(usize::MAX / 8 + 1).is_err());
        assert!(super::byte_len::<u8>(isize::MAX as usize + 1).is_err());
    }
}

//! The thin layer over rustc's nvptx intrinsics that the kernels use:
//! thread indices, barriers, shared memory and GPU-scope atomics.

use core::arch::nvptx;

/// The thread's index within its block along x.
#[inline(always)]
pub fn thread_idx_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_thread_idx_x() as u32 }
}

/// The block's index within the grid along x.
#[inline(always)]
pub fn block_idx_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_block_idx_x() as u32 }
}

/// The number of threads per block along x.
#[inline(always)]
pub fn block_dim_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_block_dim_x() as u32 }
}

/// The number of blocks in the grid along x.
#[inline(always)]
pub fn grid_dim_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_grid_dim_x() as u32 }
}

/// Waits until every thread of the block has reached this point and their
/// shared-memory writes are visible.
///
/// # Safety
/// Every thread of the block must reach the same call (no divergence).
#[inline(always)]
pub unsafe fn sync_threads() {
    // SAFETY: the caller guarantees convergence.
    unsafe { nvptx::_syncthreads() }
}

/// Waits until every block of the grid has reached its `round`-th call
/// (from 1) to this barrier on `counter`, with every write the grid made
/// before it visible after it (thread 0 of each block adds one to the
/// counter, then waits for `round` times the grid's blocks, between
/// device-scope fences; the block waits for it).
///
/// # Safety
/// Every thread of every block calls it with the same rounds in order;
/// the blocks are all resident at once (a cooperative launch); `counter`
/// is a `u32` in global memory that was 0 when the launch began and that
/// nothing else uses during it, and `round * grid_dim_x()` fits a `u32`.
#[inline(always)]
pub unsafe fn grid_barrier(counter: *mut u32, round: u32) {
    // SAFETY: every thread of the block (the caller's).
    unsafe { sync_threads() };
    if thread_idx_x() == 0 {
        let target = round * grid_dim_x();
        // SAFETY: device-scope fences, an atomic add and acquiring loads on
        // the caller's counter.
        unsafe {
            core::arch::asm!(
                "fence.acq_rel.gpu;",
                "red.relaxed.gpu.global.add.u32 [{a}], 1;",
                a = in(reg64) counter,
                options(nostack)
            );
            loop {
                let seen: u32;
                core::arch::asm!(
                    "ld.acquire.gpu.global.u32 {v}, [{a}];",
                    v = out(reg32) seen,
                    a = in(reg64) counter,
                    options(nostack)
                );
                if seen >= target {
                    break;
                }
            }
            core::arch::asm!("fence.acq_rel.gpu;", options(nostack));
        }
    }
    // SAFETY: as above.
    unsafe { sync_threads() };
}

/// Waits for every thread of the block and returns whether `predicate`
/// held for any of them (PTX `bar.red.or.pred`). Orders shared-memory
/// accesses as [`sync_threads`] does.
///
/// # Safety
/// Every thread of the block calls it (block-uniform control flow).
#[inline(always)]
pub unsafe fn sync_threads_or(predicate: bool) -> bool {
    let any: u32;
    let p = predicate as u32;
    // SAFETY: a block-wide barrier reached by every thread (the caller's).
    unsafe {
        core::arch::asm!(
            "{{ .reg .pred p; .reg .pred q; setp.ne.u32 q, {v}, 0; bar.red.or.pred p, 0, q; selp.u32 {r}, 1, 0, p; }}",
            r = out(reg32) any,
            v = in(reg32) p,
            options(nostack)
        );
    }
    any != 0
}

/// The correctly rounded square root (PTX `sqrt.rn.f64`, as IEEE 754 and
/// the host's `f64::sqrt`).
#[inline(always)]
pub fn sqrt_f64(x: f64) -> f64 {
    let out: f64;
    // SAFETY: an arithmetic instruction without memory access.
    unsafe {
        core::arch::asm!("sqrt.rn.f64 {o}, {x};", o = out(reg64) out, x = in(reg64) x, options(pure, nomem, nostack))
    };
    out
}

/// The block's dynamic shared memory, as launched (`shared_mem_bytes`).
#[inline(always)]
pub fn dynamic_shared<T>() -> *mut T {
    core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>()
}

/// Adds `value` to `*address` atomically at GPU scope, discarding the old
/// value (PTX `red.relaxed.gpu.global.add.u64`).
///
/// # Safety
/// `address` must point to a valid, 8-byte aligned `u64` in global memory.
#[inline(always)]
pub unsafe fn atomic_add_u64(address: *mut u64, value: u64) {
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        core::arch::asm!(
            "red.relaxed.gpu.global.add.u64 [{a}], {v};",
            a = in(reg64) address,
            v = in(reg64) value,
            options(nostack)
        );
    }
}

/// Stops the kernel with an error (PTX `trap`).
#[inline(always)]
pub fn trap() -> ! {
    // SAFETY: `trap` aborts the kernel; it has no other effect.
    unsafe { nvptx::trap() }
}

/// The thread's global index along x (`block_idx * block_dim + thread_idx`).
#[inline(always)]
pub fn global_index() -> u64 {
    block_idx_x() as u64 * block_dim_x() as u64 + thread_idx_x() as u64
}

/// The total number of threads in the grid along x.
#[inline(always)]
pub fn grid_threads() -> u64 {
    grid_dim_x() as u64 * block_dim_x() as u64
}

/// Calls `f(i)` for every `i < n` this thread owns in a grid-stride loop.
#[inline(always)]
pub fn grid_stride(n: u64, mut f: impl FnMut(u64)) {
    let mut i = global_index();
    let stride = grid_threads();
    while i < n {
        f(i);
        i += stride;
    }
}

/// Adds `value` to `*address` atomically at GPU scope, discarding the old value.
///
/// # Safety
/// `address` must point to a valid, 4-byte aligned `u32` in global memory.
#[inline(always)]
pub unsafe fn atomic_add_u32(address: *mut u32, value: u32) {
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        core::arch::asm!(
            "red.relaxed.gpu.global.add.u32 [{a}], {v};",
            a = in(reg64) address,
            v = in(reg32) value,
            options(nostack)
        );
    }
}

/// Atomically sets `*address` to the minimum of it and `value` (GPU scope).
///
/// # Safety
/// `address` must point to a valid, 4-byte aligned `u32` in global memory.
#[inline(always)]
pub unsafe fn atomic_min_u32(address: *mut u32, value: u32) {
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        core::arch::asm!(
            "red.relaxed.gpu.global.min.u32 [{a}], {v};",
            a = in(reg64) address,
            v = in(reg32) value,
            options(nostack)
        );
    }
}

/// Atomically sets `*address` to the minimum of it and `value` (GPU scope).
///
/// # Safety
/// `address` must point to a valid, 8-byte aligned `u64` in global memory.
#[inline(always)]
pub unsafe fn atomic_min_u64(address: *mut u64, value: u64) {
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        core::arch::asm!(
            "red.relaxed.gpu.global.min.u64 [{a}], {v};",
            a = in(reg64) address,
            v = in(reg64) value,
            options(nostack)
        );
    }
}

/// Atomically sets `*address` to the maximum of it and `value` (GPU scope).
///
/// # Safety
/// `address` must point to a valid, 8-byte aligned `u64` in global memory.
#[inline(always)]
pub unsafe fn atomic_max_u64(address: *mut u64, value: u64) {
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        core::arch::asm!(
            "red.relaxed.gpu.global.max.u64 [{a}], {v};",
            a = in(reg64) address,
            v = in(reg64) value,
            options(nostack)
        );
    }
}

/// Compare-and-swap on a global `u64` at GPU scope; returns the old value.
///
/// # Safety
/// `address` must point to a valid, 8-byte aligned `u64` in global memory.
#[inline(always)]
pub unsafe fn atomic_cas_u64(address: *mut u64, compare: u64, value: u64) -> u64 {
    let old: u64;
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        core::arch::asm!(
            "atom.relaxed.gpu.global.cas.b64 {o}, [{a}], {c}, {v};",
            o = out(reg64) old,
            a = in(reg64) address,
            c = in(reg64) compare,
            v = in(reg64) value,
            options(nostack)
        );
    }
    old
}

/// Adds the number of lanes for which `predicate` holds to `*counter`,
/// with one atomic per warp (all lanes of the warp call it).
///
/// # Safety
/// `counter` must point to a valid, 8-byte aligned `u64` in global memory.
#[inline(always)]
pub unsafe fn warp_count(counter: *mut u64, predicate: bool) {
    let lanes = ballot(predicate);
    if (thread_idx_x() & 31) == 0 && lanes != 0 {
        // SAFETY: as the caller guarantees.
        unsafe { atomic_add_u64(counter, lanes.count_ones() as u64) };
    }
}

/// Compare-and-swap on a global `u32` at GPU scope; returns the old value.
///
/// # Safety
/// `address` must point to a valid, 4-byte aligned `u32` in global memory.
#[inline(always)]
pub unsafe fn atomic_cas_u32(address: *mut u32, compare: u32, value: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        core::arch::asm!(
            "atom.relaxed.gpu.global.cas.b32 {o}, [{a}], {c}, {v};",
            o = out(reg32) old,
            a = in(reg64) address,
            c = in(reg32) compare,
            v = in(reg32) value,
            options(nostack)
        );
    }
    old
}

/// Adds to a shared-memory `u32` atomically.
///
/// # Safety
/// `address` must point into the block's shared memory.
#[inline(always)]
pub unsafe fn shared_atomic_add_u32(address: *mut u32, value: u32) {
    // SAFETY: the caller guarantees a shared-memory address; the generic
    // address of shared memory is valid for generic atomics.
    unsafe {
        core::arch::asm!(
            "red.relaxed.cta.add.u32 [{a}], {v};",
            a = in(reg64) address,
            v = in(reg32) value,
            options(nostack)
        );
    }
}

/// The lanes of the warp whose `value` equals this lane's.
///
/// # Safety
/// All 32 lanes of the warp call it together (the full member mask).
#[inline(always)]
pub unsafe fn match_any_u32(value: u32) -> u32 {
    let mask: u32;
    // SAFETY: `match.any.sync` with a full member mask; the caller calls it
    // from all 32 lanes of a warp.
    unsafe {
        core::arch::asm!(
            "match.any.sync.b32 {m}, {v}, 0xffffffff;",
            m = out(reg32) mask,
            v = in(reg32) value,
            options(nostack)
        );
    }
    mask
}

/// The mask of the lanes below this one in its warp.
#[inline(always)]
pub fn lanemask_lt() -> u32 {
    let mask: u32;
    // SAFETY: reading a special register has no preconditions.
    unsafe {
        core::arch::asm!("mov.u32 {m}, %lanemask_lt;", m = out(reg32) mask, options(nostack, nomem));
    }
    mask
}

/// Atomically sets `*address` to the minimum of it and `value` at GPU
/// scope; returns the old value.
///
/// # Safety
/// `address` must point to a valid, 4-byte aligned `u32` (generic address).
#[inline(always)]
pub unsafe fn atomic_fetch_min_u32(address: *mut u32, value: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller guarantees a valid address.
    unsafe {
        core::arch::asm!(
            "atom.relaxed.gpu.min.u32 {o}, [{a}], {v};",
            o = out(reg32) old,
            a = in(reg64) address,
            v = in(reg32) value,
            options(nostack)
        );
    }
    old
}

/// Atomically sets a shared-memory `*address` to the minimum of it and
/// `value` at block scope, discarding the old value.
///
/// # Safety
/// `address` must point into the block's shared memory (generic address).
#[inline(always)]
pub unsafe fn shared_atomic_min_u32(address: *mut u32, value: u32) {
    // SAFETY: the caller guarantees a shared-memory address; generic
    // atomics accept it.
    unsafe {
        core::arch::asm!(
            "red.relaxed.cta.min.u32 [{a}], {v};",
            a = in(reg64) address,
            v = in(reg32) value,
            options(nostack)
        );
    }
}

/// Atomically sets a shared-memory `*address` to the minimum of it and
/// `value` at block scope; returns the old value.
///
/// # Safety
/// `address` must point into the block's shared memory (generic address).
#[inline(always)]
pub unsafe fn shared_atomic_fetch_min_u32(address: *mut u32, value: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller guarantees a shared-memory address; generic
    // atomics accept it.
    unsafe {
        core::arch::asm!(
            "atom.relaxed.cta.min.u32 {o}, [{a}], {v};",
            o = out(reg32) old,
            a = in(reg64) address,
            v = in(reg32) value,
            options(nostack)
        );
    }
    old
}

/// Adds `value` to a shared-memory `u32` at block scope; returns the old
/// value.
///
/// # Safety
/// `address` must point into the block's shared memory (generic address).
#[inline(always)]
pub unsafe fn shared_atomic_fetch_add_u32(address: *mut u32, value: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller guarantees a shared-memory address; generic
    // atomics accept it.
    unsafe {
        core::arch::asm!(
            "atom.relaxed.cta.add.u32 {o}, [{a}], {v};",
            o = out(reg32) old,
            a = in(reg64) address,
            v = in(reg32) value,
            options(nostack)
        );
    }
    old
}

/// Compare-and-swap on a shared-memory `u64` at block scope; returns the
/// old value.
///
/// # Safety
/// `address` must point into the block's shared memory (generic address),
/// 8-byte aligned.
#[inline(always)]
pub unsafe fn shared_atomic_cas_u64(address: *mut u64, compare: u64, value: u64) -> u64 {
    let old: u64;
    // SAFETY: the caller guarantees a shared-memory address; generic
    // atomics accept it.
    unsafe {
        core::arch::asm!(
            "atom.relaxed.cta.cas.b64 {o}, [{a}], {c}, {v};",
            o = out(reg64) old,
            a = in(reg64) address,
            c = in(reg64) compare,
            v = in(reg64) value,
            options(nostack)
        );
    }
    old
}

/// Reads a `u32` that other threads may change during the kernel.
///
/// # Safety
/// `address` must point to a valid `u32`.
#[inline(always)]
pub unsafe fn load_volatile_u32(address: *const u32) -> u32 {
    // SAFETY: the caller guarantees a valid address.
    unsafe { core::ptr::read_volatile(address) }
}

/// The lanes of the warp for which `predicate` holds.
///
/// # Safety
/// All 32 lanes of the warp call it together (the full member mask).
#[inline(always)]
pub unsafe fn ballot(predicate: bool) -> u32 {
    let mask: u32;
    let p = predicate as u32;
    // SAFETY: `vote.sync.ballot` with a full member mask, called by all lanes.
    unsafe {
        core::arch::asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {v}, 0; vote.sync.ballot.b32 {m}, p, 0xffffffff; }}",
            m = out(reg32) mask,
            v = in(reg32) p,
            options(nostack)
        );
    }
    mask
}

/// `value` as held by lane `src`.
///
/// # Safety
/// All 32 lanes of the warp call it together (the full member mask).
#[inline(always)]
pub unsafe fn shuffle_u32(value: u32, src: u32) -> u32 {
    let out: u32;
    // SAFETY: `shfl.sync.idx` with a full member mask, called by all lanes.
    unsafe {
        core::arch::asm!(
            "shfl.sync.idx.b32 {o}, {v}, {s}, 0x1f, 0xffffffff;",
            o = out(reg32) out,
            v = in(reg32) value,
            s = in(reg32) src,
            options(nostack)
        );
    }
    out
}

/// `value` as held by lane `lane ^ mask` (a butterfly step).
///
/// # Safety
/// All 32 lanes of the warp call it together (the full member mask).
#[inline(always)]
pub unsafe fn shuffle_xor_u32(value: u32, mask: u32) -> u32 {
    let out: u32;
    // SAFETY: `shfl.sync.bfly` with a full member mask, called by all lanes.
    unsafe {
        core::arch::asm!(
            "shfl.sync.bfly.b32 {o}, {v}, {m}, 0x1f, 0xffffffff;",
            o = out(reg32) out,
            v = in(reg32) value,
            m = in(reg32) mask,
            options(nostack)
        );
    }
    out
}

/// Waits for all lanes of the warp and orders their memory accesses.
///
/// # Safety
/// All 32 lanes of the warp call it together (the full member mask).
#[inline(always)]
pub unsafe fn sync_warp() {
    // SAFETY: `bar.warp.sync` with a full member mask, called by all lanes.
    unsafe { core::arch::asm!("bar.warp.sync 0xffffffff;", options(nostack)) }
}

/// Adds `value` to `*counter` atomically (GPU scope) and returns the old value.
///
/// # Safety
/// `counter` must point to a valid, 8-byte aligned `u64` in global memory.
#[inline(always)]
pub unsafe fn atomic_fetch_add_u64(counter: *mut u64, value: u64) -> u64 {
    let old: u64;
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        core::arch::asm!(
            "atom.relaxed.gpu.global.add.u64 {o}, [{a}], {v};",
            o = out(reg64) old,
            a = in(reg64) counter,
            v = in(reg64) value,
            options(nostack)
        );
    }
    old
}

/// Adds to a shared-memory `u64` atomically.
///
/// # Safety
/// `address` must point into the block's shared memory, 8-byte aligned.
#[inline(always)]
pub unsafe fn shared_atomic_add_u64(address: *mut u64, value: u64) {
    // SAFETY: the caller guarantees a shared-memory address.
    unsafe {
        core::arch::asm!(
            "red.relaxed.cta.add.u64 [{a}], {v};",
            a = in(reg64) address,
            v = in(reg64) value,
            options(nostack)
        );
    }
}

/// Calls `f(i, valid)` for warp-aligned groups of 32 consecutive indices,
/// with every lane of a warp taking part in every call (`valid` is
/// `i < n`), so that warp-wide instructions may be used inside.
#[inline(always)]
pub fn warp_uniform_stride(n: u64, mut f: impl FnMut(u64, bool)) {
    let lane = (thread_idx_x() & 31) as u64;
    let mut base = global_index() - lane;
    let stride = grid_threads();
    while base < n {
        let i = base + lane;
        f(i, i < n);
        base += stride;
    }
}

/// `2^x` by the special-function unit (PTX `ex2.approx.ftz.f32`: relative
/// error about 2^-22; subnormal results flush to 0; `2^-inf = 0`).
#[inline(always)]
pub fn ex2_approx_f32(x: f32) -> f32 {
    let y: f32;
    // SAFETY: a register-only arithmetic instruction.
    unsafe {
        core::arch::asm!("ex2.approx.ftz.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x, options(pure, nomem, nostack));
    }
    y
}

/// `log2 x` by the special-function unit (PTX `lg2.approx.ftz.f32`:
/// absolute error about 2^-22; `log2 0 = -inf`, subnormal inputs count as 0).
#[inline(always)]
pub fn lg2_approx_f32(x: f32) -> f32 {
    let y: f32;
    // SAFETY: a register-only arithmetic instruction.
    unsafe {
        core::arch::asm!("lg2.approx.ftz.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x, options(pure, nomem, nostack));
    }
    y
}

/// `a * b + c` rounded once (PTX `fma.rn.f32`).
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    let y: f32;
    // SAFETY: a register-only arithmetic instruction.
    unsafe {
        core::arch::asm!(
            "fma.rn.f32 {y}, {a}, {b}, {c};",
            y = out(reg32) y, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
            options(pure, nomem, nostack)
        );
    }
    y
}

/// `a * b + c` rounded once (PTX `fma.rn.f64`).
#[inline(always)]
pub fn fma_f64(a: f64, b: f64, c: f64) -> f64 {
    let y: f64;
    // SAFETY: a register-only arithmetic instruction.
    unsafe {
        core::arch::asm!(
            "fma.rn.f64 {y}, {a}, {b}, {c};",
            y = out(reg64) y, a = in(reg64) a, b = in(reg64) b, c = in(reg64) c,
            options(pure, nomem, nostack)
        );
    }
    y
}

/// ORs `value` into `*address` atomically (GPU scope), without a result.
///
/// # Safety
/// `address` must point to a valid, 4-byte aligned `u32` in global memory.
#[inline(always)]
pub unsafe fn atomic_or_u32(address: *mut u32, value: u32) {
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        core::arch::asm!(
            "red.relaxed.gpu.global.or.b32 [{a}], {v};",
            a = in(reg64) address,
            v = in(reg32) value,
            options(nostack)
        );
    }
}

/// Float types converted through float64 (the morphology's `cval`, the
/// Sinkhorn pair statistics).
pub trait ViaF64: Copy {
    /// `self` as float64 (exact).
    fn to_f64(self) -> f64;
    /// `x` rounded to `Self`.
    fn from_f64(x: f64) -> Self;
}

impl ViaF64 for f32 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        x as f32
    }
}

impl ViaF64 for u8 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    /// Saturating at 0 and 255, NaN to 0 (Rust's cast; the host passes
    /// only whole bytes).
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        x as u8
    }
}

impl ViaF64 for f64 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        x
    }
}

/// The word of 32 positions that lanes `8g..8g + 8` of a warp hold as 4
/// bytes each (lane `l`: positions `4 (l % 8)..4 (l % 8) + 4` of word `g`;
/// a non-zero byte is a set bit), in every lane of the group.
///
/// # Safety
/// Every lane of the warp calls it.
#[inline(always)]
pub unsafe fn nibble_word(bytes: u32, lane: u32) -> u32 {
    let nibble = gpu_waterz_abi::morphology::bytes_nibble(bytes) << (4 * (lane % 8));
    // SAFETY: the caller's: every lane is here.
    unsafe {
        let pairs = nibble | shuffle_xor_u32(nibble, 1);
        let quads = pairs | shuffle_xor_u32(pairs, 2);
        quads | shuffle_xor_u32(quads, 4)
    }
}

/// Starts copying 16 bytes from global memory at `src` to shared memory at
/// `dst` without passing through registers (`cp.async.cg`, compute
/// capability 8.0 on); the copy belongs to the group that the thread's next
/// [`commit_copies`] closes, and is complete for this thread after a
/// [`wait_copies`] that leaves that group out of the pending ones.
///
/// # Safety
/// `src` points to 16 readable bytes of global memory and `dst` to 16
/// bytes of shared memory, both 16-byte aligned; nothing reads or writes
/// `dst` until the copy is complete and (for other threads) a barrier has
/// followed.
#[inline(always)]
pub unsafe fn copy_async_16(dst: *mut u32, src: *const u32) {
    // SAFETY: the caller's; the conversions are address arithmetic.
    unsafe {
        core::arch::asm!(
            "{{",
            ".reg .u64 %shared_at, %global_at;",
            "cvta.to.shared.u64 %shared_at, {dst};",
            "cvta.to.global.u64 %global_at, {src};",
            "cp.async.cg.shared.global [%shared_at], [%global_at], 16;",
            "}}",
            dst = in(reg64) dst as u64,
            src = in(reg64) src as u64,
            options(nostack)
        )
    };
}

/// Starts an asynchronous copy of 4 (`BYTES` 4) or 8 (`BYTES` 8) bytes
/// from global to shared memory (`cp.async.ca`), as [`copy_async_16`]
/// does for 16.
///
/// # Safety
/// `src` points to `BYTES` readable bytes of global memory and `dst` to
/// `BYTES` bytes of shared memory, both aligned to `BYTES`; nothing reads
/// or writes `dst` until the copy is complete and (for other threads) a
/// barrier has followed.
#[inline(always)]
pub unsafe fn copy_async_small<const BYTES: u32>(dst: *mut u8, src: *const u8) {
    // SAFETY: the caller's; the conversions are address arithmetic.
    unsafe {
        core::arch::asm!(
            "{{",
            ".reg .u64 %shared_at, %global_at;",
            "cvta.to.shared.u64 %shared_at, {dst};",
            "cvta.to.global.u64 %global_at, {src};",
            "cp.async.ca.shared.global [%shared_at], [%global_at], {bytes};",
            "}}",
            dst = in(reg64) dst as u64,
            src = in(reg64) src as u64,
            bytes = const BYTES,
            options(nostack)
        )
    };
}

/// Closes this thread's group of the asynchronous copies started since the
/// last call (`cp.async.commit_group`; an empty group is a group).
///
/// # Safety
/// None beyond running on the device.
#[inline(always)]
pub unsafe fn commit_copies() {
    // SAFETY: no operands.
    unsafe { core::arch::asm!("cp.async.commit_group;", options(nostack)) };
}

/// Waits until at most `PENDING` of this thread's committed groups of
/// asynchronous copies are still in flight (`cp.async.wait_group`): the
/// older groups' copies are then complete and visible to this thread.
///
/// # Safety
/// None beyond running on the device.
#[inline(always)]
pub unsafe fn wait_copies<const PENDING: u32>() {
    // SAFETY: a wait.
    unsafe { core::arch::asm!("cp.async.wait_group {n};", n = const PENDING, options(nostack)) };
}

/// Sixteen bytes at `p` (any state space), as one vector load.
///
/// # Safety
/// `p` is 16-byte aligned and readable.
#[inline(always)]
pub unsafe fn load_16_bytes(p: *const u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller's.
    unsafe {
        core::arch::asm!(
            "ld.v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}];",
            a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
            p = in(reg64) p,
            options(nostack, readonly, preserves_flags)
        );
    }
    [a, b, c, d]
}

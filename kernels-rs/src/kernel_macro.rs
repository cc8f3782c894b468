//! [`kernel!`]: how every kernel is declared.

/// Declares a kernel whose parameters are the fields of its argument
/// struct from `gpu-waterz-abi`:
///
/// ```ignore
/// kernel! {
///     /// Docs with `# Safety`, `# Parameters` and `# Thread mapping`.
///     pub unsafe extern "ptx-kernel" fn sum_u32(input: *const u32, n: u64, output: *mut u64) as SumU32Args {
///         // body
///     }
/// }
/// ```
///
/// The kernel takes the fields as separate parameters (so that the
/// compiler knows its pointers address global memory: a pointer inside a
/// by-value struct would be generic to it), and the macro checks at
/// compile time that they are the struct's fields with the same names and
/// types (it builds the struct from them) in the same order (their offsets
/// increase in the order the parameters are listed), which is the order
/// the host passes them in (`KernelArgs::param_pointers`).
macro_rules! kernel {
    (
        $(#[$attr:meta])*
        pub unsafe extern "ptx-kernel" fn $name:ident($($field:ident: $ty:ty),* $(,)?) as $args:ident $body:block
    ) => {
        $(#[$attr])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name($($field: $ty),*) {
            gpu_waterz_abi::kernel_params!($args { $($field),* });
            $body
        }
    };
}

/// Runs `$body` for `$q` = each listed index, written out: the compiler
/// does not unroll some loops (those that hold calls, or many
/// iterations), and a loop would put the per-index arrays in local memory.
macro_rules! unrolled {
    ($q:ident in [$($k:literal)*] => $body:block) => {
        $({
            let $q: usize = $k;
            $body
        })*
    };
}

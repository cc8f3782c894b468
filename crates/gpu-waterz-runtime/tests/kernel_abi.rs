//! The kernel ABI against the committed PTX, without a GPU: the `Kernel`
//! enum names exactly the PTX's entry points, each takes one by-value
//! struct, and the primitives' structs have the size the PTX declares (the
//! stage crates check their own kernels' structs the same way).

use gpu_waterz_abi::primitives::*;
use gpu_waterz_abi::{Kernel, KernelArgs, SumU32Args};
use gpu_waterz_runtime::KERNELS_PTX;

/// The parameter declarations of entry point `name`.
fn entry_params(name: &str) -> Vec<String> {
    let start = format!(".entry {name}(");
    let at = KERNELS_PTX.find(&start).unwrap_or_else(|| panic!("no entry point {name} in the PTX"));
    let rest = &KERNELS_PTX[at + start.len()..];
    let end = rest.find(')').expect("the parameter list ends");
    rest[..end].split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect()
}

fn check<A: KernelArgs>() {
    let name = A::KERNEL.name();
    let expected = format!(".param .align 8 .b8 {name}_param_0[{}]", std::mem::size_of::<A>());
    assert_eq!(entry_params(name), [expected], "{name}: one by-value struct of the host's size");
}

#[test]
fn the_kernel_enum_names_exactly_the_entry_points_of_the_ptx() {
    let entries: Vec<&str> = KERNELS_PTX
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".visible .entry "))
        .map(|l| l.split('(').next().unwrap())
        .collect();
    for kernel in Kernel::ALL {
        assert!(entries.contains(&kernel.name()), "{} is not in the PTX", kernel.name());
        assert_eq!(entry_params(kernel.name()).len(), 1, "{} takes one argument struct", kernel.name());
    }
    for entry in &entries {
        assert!(Kernel::ALL.iter().any(|k| k.name() == *entry), "the PTX entry {entry} is not in the Kernel enum");
    }
}

#[test]
fn the_primitives_take_their_structs() {
    check::<SumU32Args>();
    check::<IotaU32Args>();
    check::<ScanTileSumsArgs>();
    check::<ScanTilesArgs>();
    check::<ScanChunksU64Args>();
    check::<AddTileOffsetsU64Args>();
    check::<CompactTilesArgs>();
    check::<RadixHistogramArgs>();
    check::<RadixScatterArgs>();
    check::<RunHeadsArgs>();
    check::<ReduceRunsArgs>();
    check::<ReduceRunsPackedArgs>();
}

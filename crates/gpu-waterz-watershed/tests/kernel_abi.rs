//! The watershed kernels' argument structs against the committed PTX: each
//! kernel's entry point takes one parameter, `.param .align 8 .b8
//! <name>_param_0[N]`, whose `N` is the size of its struct on the host.
//! Runs without a GPU.

use gpu_waterz_abi::watershed::*;
use gpu_waterz_abi::KernelArgs;
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
    let params = entry_params(name);
    let expected = format!(".param .align 8 .b8 {name}_param_0[{}]", std::mem::size_of::<A>());
    assert_eq!(params, [expected], "{name}: one by-value struct of the host's size");
}

#[test]
fn every_watershed_kernel_takes_its_struct() {
    check::<WsMaskF32Args>();
    check::<WsMaskU8Args>();
    check::<WsCornerCountArgs>();
    check::<WsCornerCompactArgs>();
    check::<WsBfsInitArgs>();
    check::<WsBfsProposeArgs>();
    check::<WsBfsClaimArgs>();
    check::<WsBfsEmitArgs>();
    check::<WsPlateauDirectionArgs>();
    check::<UfTileLocalArgs>();
    check::<UfTileFacesArgs>();
    check::<WsFragmentCountArgs>();
    check::<WsFragmentNumberArgs>();
    check::<WsLabelsArgs>();
}

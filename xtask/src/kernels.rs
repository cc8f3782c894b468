//! `cargo xtask kernels`: Rust device code to PTX.

use crate::{no_more_args, project_root, run_command, take_flag, take_value};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;

/// The architecture whose PTX is committed and embedded by the runtime.
pub const DEFAULT_ARCH: &str = "sm_90";

/// The pinned toolchain, read from `kernels-rs/rust-toolchain.toml`.
pub fn pinned_toolchain() -> Result<String> {
    let path = project_root().join("kernels-rs/rust-toolchain.toml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("channel") {
            let value = rest.trim_start().trim_start_matches('=').trim().trim_matches('"');
            return Ok(value.to_string());
        }
    }
    bail!("{} has no channel", path.display())
}

/// Where the PTX for `arch` is kept.
pub fn ptx_path(arch: &str) -> PathBuf {
    let dir = project_root().join("kernels-rs/ptx");
    if arch == DEFAULT_ARCH {
        dir.join("gpu_waterz_kernels.ptx")
    } else {
        dir.join(format!("gpu_waterz_kernels.{arch}.ptx"))
    }
}

/// Builds the kernels for `arch` and returns the PTX text.
pub fn build(arch: &str) -> Result<String> {
    if !arch.starts_with("sm_") || arch[3..].trim_end_matches('a').parse::<u32>().is_err() {
        bail!("--arch must look like sm_90 or sm_90a, not {arch:?}");
    }
    let toolchain = pinned_toolchain()?;
    let kernels_dir = project_root().join("kernels-rs");
    let target_dir = project_root().join("target/kernels");
    let mut cmd = Command::new("cargo");
    cmd.current_dir(&kernels_dir)
        .arg(format!("+{toolchain}"))
        .args(["build", "--release", "--locked", "-Zbuild-std=core", "--target", "nvptx64-nvidia-cuda"])
        .arg("--target-dir")
        .arg(&target_dir)
        .env("RUSTFLAGS", format!("-C target-cpu={arch}"));
    // The outer cargo's settings must not leak into the nightly build.
    for var in [
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
        "RUSTUP_TOOLCHAIN",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_ENCODED_RUSTFLAGS",
    ] {
        cmd.env_remove(var);
    }
    run_command(&mut cmd).with_context(|| {
        format!("building kernels-rs; is the toolchain installed? `rustup toolchain install {toolchain} --profile minimal --component rust-src,llvm-tools,llvm-bitcode-linker`")
    })?;
    let built = target_dir.join("nvptx64-nvidia-cuda/release/gpu_waterz_kernels.ptx");
    let ptx = std::fs::read_to_string(&built).with_context(|| format!("reading {}", built.display()))?;
    with_launch_bounds(&without_crate_hashes(&ptx))
}

/// `ptx` with the crate disambiguators of its Rust (v0) symbol names set to
/// zero, so that the PTX does not depend on where the checkout lies.
///
/// A function the compiler keeps out of line is named like
/// `_RINvNtCslNgWf8l82zJ_18gpu_waterz_kernels9transport14exact_term_sumfEB4_`,
/// where `CslNgWf8l82zJ_` is the crate's disambiguator: a hash cargo
/// computes from, among other things, the absolute path of each path
/// dependency outside the kernels' workspace (`gpu-waterz-abi`). The same
/// sources built in another directory would otherwise give other names and a
/// stale `--check`. `Cs_` is the mangling's disambiguator 0; the crate name
/// follows it, so distinct crates keep distinct names.
fn without_crate_hashes(ptx: &str) -> String {
    let bytes = ptx.as_bytes();
    let is_symbol_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
    let mut out = String::with_capacity(ptx.len());
    let mut copied = 0;
    let mut i = 0;
    while i + 1 < bytes.len() {
        // A v0 symbol starts with `_R` after a byte that is not part of a name.
        if !(bytes[i] == b'_' && bytes[i + 1] == b'R' && (i == 0 || !is_symbol_byte(bytes[i - 1]))) {
            i += 1;
            continue;
        }
        let end = bytes[i..].iter().position(|&b| !is_symbol_byte(b)).map_or(bytes.len(), |n| i + n);
        let mut j = i + 2;
        while j + 1 < end {
            // `Cs`, base-62 digits, `_`, then the crate name's decimal length.
            if bytes[j] == b'C' && bytes[j + 1] == b's' {
                let digits = bytes[j + 2..end].iter().take_while(|b| b.is_ascii_alphanumeric()).count();
                let underscore = j + 2 + digits;
                if digits > 0
                    && underscore + 1 < end
                    && bytes[underscore] == b'_'
                    && bytes[underscore + 1].is_ascii_digit()
                {
                    out.push_str(&ptx[copied..j + 2]);
                    copied = underscore;
                    j = underscore;
                    continue;
                }
            }
            j += 1;
        }
        i = end;
    }
    out.push_str(&ptx[copied..]);
    out
}

/// Kernels whose register use ptxas must fit to a launch shape, as CUDA's
/// `__launch_bounds__` does (rustc has no attribute for it): the kernel,
/// its threads per block, and the blocks each multiprocessor must hold.
/// Without it ptxas gives the log-domain Sinkhorn tile more registers than
/// two blocks of 256 threads per multiprocessor allow (168 when measured),
/// and the device runs one block per multiprocessor.
pub const LAUNCH_BOUNDS: &[(&str, u32, u32)] = &[
    ("ot_tile_log_f32", 256, 2),
    ("ot_wide_scaling_f32", 256, 1),
    ("ot_wgmma_scaling_f32", 128, 2),
    ("ot_resident_scaling_f32", 512, 1),
    ("ot_resident_scaling_f64", 512, 1),
    ("grey_box_f32", 256, 4),
    ("grey_box_f64", 256, 4),
    ("grey_plus_f32", 256, 4),
    ("grey_plus_f64", 256, 4),
    ("binary_bits", 256, 4),
    // Loading the columns past a warp's took the float32 warp kernels from
    // 96 registers to 108 (four blocks per multiprocessor instead of five)
    // and 0.83 ms instead of 0.73 ms for the size-3 erosion of 512³.
    ("grey_warp_min_f32", 128, 5),
    ("grey_warp_max_f32", 128, 5),
    ("grey_warp_plus_min_f32", 128, 4),
    ("grey_warp_plus_max_f32", 128, 4),
    // The fixed-window box kernels' eight rows per warp held to 128
    // registers (24 bytes spilled): four blocks per multiprocessor, 4–7 %
    // faster than six rows (at 168 registers, three blocks, eight measured
    // slower than six, `docs/BENCHMARKS.md`); the plus kernels keep six.
    ("grey_warp_fixed_min_f32", 128, 4),
    ("grey_warp_fixed_max_f32", 128, 4),
    ("grey_warp_fixed_plus_min_f32", 128, 4),
    ("grey_warp_fixed_plus_max_f32", 128, 4),
    // The byte kernels as the float32 ones (their values take 32-bit
    // registers as well).
    ("grey_box_u8", 256, 4),
    ("grey_plus_u8", 256, 4),
    ("grey_warp_min_u8", 128, 5),
    ("grey_warp_max_u8", 128, 5),
    ("grey_warp_plus_min_u8", 128, 4),
    ("grey_warp_plus_max_u8", 128, 4),
    ("grey_warp_fixed_min_u8", 128, 4),
    ("grey_warp_fixed_max_u8", 128, 4),
    ("grey_warp_fixed_plus_min_u8", 128, 4),
    ("grey_warp_fixed_plus_max_u8", 128, 4),
    // The wide box kernels (windows up to 7, eight rows per warp): a lane
    // holds 14 loaded rows, the next plane's 14 and six planes' minima.
    // float32 at 235 registers without spilling (two blocks per
    // multiprocessor); bytes at 168 (three blocks, 44 bytes spilled).
    ("grey_warp_wide_min_f32", 128, 2),
    ("grey_warp_wide_max_f32", 128, 2),
    ("grey_warp_wide_min_u8", 128, 3),
    ("grey_warp_wide_max_u8", 128, 3),
];

/// `ptx` with the `.maxntid` and `.minnctapersm` directives of
/// [`LAUNCH_BOUNDS`] before each listed kernel's body.
fn with_launch_bounds(ptx: &str) -> Result<String> {
    let mut out = ptx.to_string();
    for &(kernel, threads, blocks) in LAUNCH_BOUNDS {
        let entry = format!(".entry {kernel}(");
        let start = out.find(&entry).with_context(|| format!("no kernel {kernel} in the PTX"))?;
        let body = out[start..].find("\n{").with_context(|| format!("no body for {kernel}"))? + start;
        out.insert_str(body, &format!("\n.maxntid {threads}, 1, 1\n.minnctapersm {blocks}"));
    }
    Ok(out)
}

/// The architectures whose compiled kernels (cubin) are committed beside the
/// PTX and embedded by the runtime, each with the PTX it is assembled from
/// (a cubin's PTX must not target a newer architecture than the cubin).
pub const CUBIN_ARCHS: &[(&str, &str)] = &[
    ("sm_80", "sm_80"),
    ("sm_86", "sm_80"),
    ("sm_89", "sm_80"),
    ("sm_90a", "sm_90a"),
    ("sm_100", "sm_90"),
    ("sm_120", "sm_90"),
];

/// The PTX architectures the cubins are assembled from: the committed
/// default, the oldest supported one, and Hopper's arch-specific one
/// (sm_90a: the warpgroup products, which only compute capability 9.0
/// runs; its cubin is the one the runtime loads there).
const PTX_ARCHS: &[&str] = &[DEFAULT_ARCH, "sm_80", "sm_90a"];

/// The ptxas release the committed cubins come from; another release may
/// assemble different bytes, so `--check` insists on this one.
pub const PTXAS_VERSION: &str = "V12.8.93";

/// The Python package that ships that ptxas.
const PTXAS_PACKAGE: &str = "nvidia-cuda-nvcc-cu12==12.8.93";

/// Where the cubin for `arch` is kept.
pub fn cubin_path(arch: &str) -> PathBuf {
    project_root().join(format!("kernels-rs/cubin/gpu_waterz_kernels.{arch}.cubin"))
}

/// The ptxas to assemble with: `$GPU_WATERZ_PTXAS`, else the pinned release
/// installed (once) from PyPI into `target/ptxas-venv`.
fn ptxas() -> Result<PathBuf> {
    if let Ok(path) = std::env::var("GPU_WATERZ_PTXAS") {
        return Ok(PathBuf::from(path));
    }
    let venv = project_root().join("target/ptxas-venv");
    let python = venv.join("bin/python3");
    let find = |python: &std::path::Path| -> Option<PathBuf> {
        let out = Command::new(python)
            .args([
                "-c",
                "import nvidia.cuda_nvcc, os; print(os.path.join(list(nvidia.cuda_nvcc.__path__)[0], 'bin', 'ptxas'))",
            ])
            .output()
            .ok()?;
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        (out.status.success() && path.is_file()).then_some(path)
    };
    if let Some(path) = python.is_file().then(|| find(&python)).flatten() {
        return Ok(path);
    }
    run_command(Command::new("python3").args(["-m", "venv"]).arg(&venv)).context("making target/ptxas-venv")?;
    run_command(Command::new(&python).args(["-m", "pip", "install", "-q", PTXAS_PACKAGE]))
        .with_context(|| format!("installing {PTXAS_PACKAGE} (ptxas) into target/ptxas-venv"))?;
    find(&python).context("ptxas is missing from the installed nvidia-cuda-nvcc-cu12")
}

/// Assembles `ptx` for `arch` with `ptxas` and returns the cubin's bytes.
fn assemble(ptxas: &std::path::Path, ptx: &str, arch: &str) -> Result<Vec<u8>> {
    let dir = project_root().join("target/kernels/cubin");
    std::fs::create_dir_all(&dir)?;
    let input = dir.join(format!("input.{arch}.ptx"));
    let output = dir.join(format!("gpu_waterz_kernels.{arch}.cubin"));
    std::fs::write(&input, ptx)?;
    run_command(Command::new(ptxas).arg(format!("-arch={arch}")).arg("-O3").arg(&input).arg("-o").arg(&output))
        .with_context(|| format!("assembling the kernels for {arch}"))?;
    std::fs::read(&output).with_context(|| format!("reading {}", output.display()))
}

/// Writes `bytes` to `path`, or with `check` fails unless `path` holds them.
fn write_or_check(path: &std::path::Path, bytes: &[u8], check: bool, how: &str) -> Result<()> {
    if check {
        let committed = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        if committed != bytes {
            bail!(
                "{} is stale: it differs from what {how} builds now; run `cargo xtask kernels` and commit it",
                path.display()
            );
        }
        println!("kernels: {} is up to date ({} bytes)", path.display(), bytes.len());
    } else {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
        println!("kernels: wrote {} ({} bytes)", path.display(), bytes.len());
    }
    Ok(())
}

pub fn run(args: &[String]) -> Result<()> {
    let mut args = args.to_vec();
    let check = take_flag(&mut args, "--check");
    let arch = take_value(&mut args, "--arch")?;
    no_more_args(&args)?;
    if let Some(arch) = arch {
        // One architecture's PTX only (for GPU_WATERZ_PTX).
        let ptx = build(&arch)?;
        return write_or_check(&ptx_path(&arch), ptx.as_bytes(), check, "kernels-rs");
    }
    let ptxas = ptxas()?;
    let version = Command::new(&ptxas).arg("--version").output().context("running ptxas --version")?;
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    if !version.contains(PTXAS_VERSION) {
        let message = format!("{} is not ptxas {PTXAS_VERSION}, which the committed cubins come from", ptxas.display());
        if check {
            bail!("{message}; unset GPU_WATERZ_PTXAS to use the pinned one");
        }
        eprintln!("kernels: warning: {message}");
    }
    for &ptx_arch in PTX_ARCHS {
        let ptx = build(ptx_arch)?;
        write_or_check(&ptx_path(ptx_arch), ptx.as_bytes(), check, "kernels-rs")?;
        for &(cubin_arch, _) in CUBIN_ARCHS.iter().filter(|(_, from)| *from == ptx_arch) {
            let cubin = assemble(&ptxas, &ptx, cubin_arch)?;
            write_or_check(&cubin_path(cubin_arch), &cubin, check, "ptxas")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The directives land between each listed kernel's parameters and its
    /// body, and nowhere else; a listed kernel missing from the PTX is an
    /// error rather than a silent no-op.
    #[test]
    fn launch_bounds_go_before_the_listed_kernels_bodies() {
        let mut ptx = String::from(".visible .entry other(\n\t.param .u64 other_param_0\n)\n{\n\tret;\n}\n");
        for &(kernel, _, _) in LAUNCH_BOUNDS {
            ptx += &format!(
                ".visible .entry {kernel}(\n\t.param .u64 {kernel}_param_0\n)                // @{kernel}\n{{\n\tret;\n}}\n"
            );
        }
        let out = with_launch_bounds(&ptx).unwrap();
        for &(kernel, threads, blocks) in LAUNCH_BOUNDS {
            let expected =
                format!(")                // @{kernel}\n.maxntid {threads}, 1, 1\n.minnctapersm {blocks}\n{{");
            assert!(out.contains(&expected), "{out}");
        }
        assert_eq!(out.matches(".maxntid").count(), LAUNCH_BOUNDS.len(), "only the listed kernels");
        assert!(out.starts_with(".visible .entry other(\n\t.param .u64 other_param_0\n)\n{"));
        assert!(with_launch_bounds(".visible .entry other(\n)\n{\n}\n").is_err());
    }

    /// Crate disambiguators become `Cs_` in every v0 symbol, and nothing
    /// else changes: not names that merely contain `Cs`, not other text.
    #[test]
    fn crate_hashes_are_taken_out_of_symbol_names() {
        let ptx = ".func _RNvNtNtCsdjKq4sWTdeo_4core9panicking9panic_fmt\n\
                   call.uni _RINvNtCslNgWf8l82zJ_18gpu_waterz_kernels9transport14exact_term_sumfEB4_, (x);\n\
                   _RNCINvNtCslNgWf8l82zJ_18gpu_waterz_kernels8rows_logdNtNtCsgtOUgAVga0Q_14gpu_waterz_abi8SoftwareE0B6_(\n\
                   mov.u32 %r1, Cs12_3; // not a symbol\n\
                   .func keep_R8Cs_x;\n";
        let expected = ".func _RNvNtNtCs_4core9panicking9panic_fmt\n\
                        call.uni _RINvNtCs_18gpu_waterz_kernels9transport14exact_term_sumfEB4_, (x);\n\
                        _RNCINvNtCs_18gpu_waterz_kernels8rows_logdNtNtCs_14gpu_waterz_abi8SoftwareE0B6_(\n\
                        mov.u32 %r1, Cs12_3; // not a symbol\n\
                        .func keep_R8Cs_x;\n";
        assert_eq!(without_crate_hashes(ptx), expected);
        assert_eq!(without_crate_hashes(expected), expected);
    }
}

//! Tidy checks: the project's written rules, checked on every test run.

use std::path::{Path, PathBuf};

/// The workspace being tested: cargo sets `CARGO_MANIFEST_DIR` when it runs
/// the test, so a binary built from another checkout (a clean clone with a
/// shared target folder) still reads this one; the compile-time value is
/// the fallback.
fn root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    manifest.unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR"))).parent().unwrap().to_path_buf()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Lines of code (not comments) that use the `unsafe` keyword: blocks,
/// implementations, functions and traits.
fn unsafe_uses(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let code = l.split("//").next().unwrap_or("");
            let trimmed = code.trim_start();
            !trimmed.starts_with("#![") && !trimmed.starts_with("#[") && contains_word(code, "unsafe")
        })
        .map(|(i, _)| i)
        .collect()
}

fn contains_word(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(i, _)| {
        let before = code[..i].chars().last();
        let after = code[i + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after) && !code[..i].contains('"')
    })
}

/// Where host-side `unsafe` may appear: the generic runtime (device memory,
/// driver calls, [`Gpu::launch`]), the stage crates' `launch.rs` modules
/// (their kernels' launches), and the Python module's CUDA array interface
/// (memory that torch or cupy owns).
fn may_use_unsafe(file: &Path) -> bool {
    let rel = file.strip_prefix(root()).unwrap();
    rel.starts_with("crates/gpu-waterz-runtime")
        || rel.file_name().is_some_and(|n| n == "launch.rs")
        || rel == Path::new("crates/gpu-waterz-python/src/cuda.rs")
}

#[test]
fn host_unsafe_lives_only_in_the_runtime_and_launch_modules() {
    let files = rust_files(&root().join("crates"))
        .into_iter()
        .chain(rust_files(&root().join("benches")))
        .chain(rust_files(&root().join("examples")))
        .chain(rust_files(&root().join("xtask")));
    for file in files {
        if may_use_unsafe(&file) || file.ends_with("xtask/tests/tidy.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let uses = unsafe_uses(&text);
        assert!(
            uses.is_empty(),
            "{}:{}: host-side unsafe outside the runtime and the launch modules",
            file.display(),
            uses[0] + 1
        );
    }
}

#[test]
fn crates_forbid_unsafe_code_outside_their_launch_modules() {
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if name == "gpu-waterz-runtime" || !dir.join("Cargo.toml").exists() {
            continue;
        }
        let lib = dir.join("src/lib.rs");
        let lib = if lib.exists() { lib } else { dir.join("src/main.rs") };
        let text = std::fs::read_to_string(&lib).unwrap();
        let has_launch = rust_files(&dir.join("src")).iter().any(|f| may_use_unsafe(f));
        if has_launch {
            assert!(
                text.contains("#![deny(unsafe_code)]"),
                "{}: a crate with launch modules denies unsafe code everywhere else",
                lib.display()
            );
        } else {
            assert!(text.contains("#![forbid(unsafe_code)]"), "{}: must forbid unsafe code", lib.display());
        }
    }
    for file in rust_files(&root().join("crates")) {
        if file.file_name().is_some_and(|n| n == "lib.rs" || n == "mod.rs" || n == "main.rs") {
            let text = std::fs::read_to_string(&file).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate().filter(|(_, l)| l.contains("allow(unsafe_code)")) {
                // The attribute stands on the module's line or the one above.
                let item = if line.contains("mod ") { line } else { lines.get(i + 1).copied().unwrap_or("") };
                let module = item.split("mod ").nth(1).unwrap_or("");
                assert!(
                    module.starts_with("launch") || module.starts_with("cuda"),
                    "{}:{}: unsafe code allowed outside a launch module",
                    file.display(),
                    i + 1
                );
            }
        }
    }
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let files = rust_files(&root().join("crates"))
        .into_iter()
        .filter(|f| may_use_unsafe(f))
        .chain(rust_files(&root().join("kernels-rs/src")));
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for i in unsafe_uses(&text) {
            let code = lines[i].split("//").next().unwrap_or("");
            // `unsafe fn` and `unsafe extern` signatures state their
            // contract under `# Safety`; blocks and impls say why it holds.
            if !(code.contains("unsafe {") || code.contains("unsafe impl")) {
                continue;
            }
            // The comment stands on one of the few lines above (a closure or
            // call may open between).
            let from = i.saturating_sub(4);
            let justified = lines[from..=i].iter().any(|l| l.contains("SAFETY:"));
            assert!(justified, "{}:{}: unsafe without a `// SAFETY:` comment", file.display(), i + 1);
        }
    }
}

#[test]
fn every_kernel_documents_safety_parameters_and_thread_mapping() {
    let mut kernels = 0;
    for file in rust_files(&root().join("kernels-rs/src")) {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            // Kernels are declared inside `kernel!` (the macro's own
            // definition, which names the ABI in its pattern, is not one).
            let declares = line.trim_start().starts_with("pub unsafe extern \"ptx-kernel\" fn");
            if !declares || file.ends_with("kernel_macro.rs") {
                continue;
            }
            assert!(
                // (Indented when a macro declares a kernel per float type.)
                i > 0
                    && lines[..i].iter().rev().find(|l| !l.trim_start().starts_with("///")).map(|l| l.trim())
                        == Some("kernel! {"),
                "{}:{}: a kernel not declared with kernel! (which checks its parameters against the ABI)",
                file.display(),
                i + 1
            );
            kernels += 1;
            // The doc comment block right above.
            let mut doc = Vec::new();
            let mut j = i;
            while j > 0 {
                j -= 1;
                let l = lines[j].trim_start();
                if l.starts_with("///") {
                    doc.push(l);
                } else if !l.starts_with("#[") {
                    break;
                }
            }
            for section in ["# Safety", "# Parameters", "# Thread mapping"] {
                assert!(
                    doc.iter().any(|l| l.trim_start_matches('/').trim() == section),
                    "{}:{}: kernel without a `{section}` section",
                    file.display(),
                    i + 1
                );
            }
        }
    }
    assert!(kernels >= 20, "found only {kernels} kernels: is the scan broken?");
}

#[test]
fn core_has_no_gpu_dependency() {
    let manifest = std::fs::read_to_string(root().join("crates/gpu-waterz-core/Cargo.toml")).unwrap();
    for forbidden in ["cudarc", "gpu-waterz-runtime"] {
        assert!(!manifest.contains(forbidden), "gpu-waterz-core must not depend on {forbidden}");
    }
}

#[test]
fn the_facade_leaves_the_cli_and_file_formats_to_gpu_waterz_cli() {
    let manifest = std::fs::read_to_string(root().join("crates/gpu-waterz/Cargo.toml")).unwrap();
    let dependencies = manifest.split("[dependencies]").nth(1).unwrap().split("\n[").next().unwrap();
    for forbidden in ["clap", "zarrs", "hdf5", "anyhow"] {
        assert!(!dependencies.contains(forbidden), "gpu-waterz (the library) must not depend on {forbidden}");
    }
    for file in ["src/main.rs", "src/lib.rs"] {
        let text = std::fs::read_to_string(root().join("crates/gpu-waterz-cli").join(file)).unwrap();
        assert!(text.contains("#![forbid(unsafe_code)]"), "gpu-waterz-cli/{file} must forbid unsafe code");
    }
}

#[test]
fn the_runtime_embeds_the_committed_ptx() {
    let lib = std::fs::read_to_string(root().join("crates/gpu-waterz-runtime/src/lib.rs")).unwrap();
    assert!(lib.contains("include_str!(\"../../../kernels-rs/ptx/gpu_waterz_kernels.ptx\")"));
    let ptx = std::fs::read_to_string(root().join("kernels-rs/ptx/gpu_waterz_kernels.ptx")).unwrap();
    assert!(ptx.contains(".target sm_90"), "the committed PTX targets sm_90");
}

#[test]
fn the_runtime_embeds_every_committed_cubin() {
    let lib = std::fs::read_to_string(root().join("crates/gpu-waterz-runtime/src/lib.rs")).unwrap();
    let mut cubins = 0;
    for entry in std::fs::read_dir(root().join("kernels-rs/cubin")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            lib.contains(&format!("include_bytes!(\"../../../kernels-rs/cubin/{name}\")")),
            "{name} is not embedded"
        );
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..4], b"\x7fELF", "{name} is not a cubin (ELF)");
        cubins += 1;
    }
    assert!(cubins >= 6, "sm_80 to sm_120: {cubins} cubins");
}

//! Tidy checks: the project's written rules, checked on every test run.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
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

/// Lines that open an `unsafe` block or implementation (not `unsafe fn`
/// signatures, whose contract is documented under `# Safety`).
fn unsafe_uses(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let code = l.split("//").next().unwrap_or("");
            (code.contains("unsafe {") || code.contains("unsafe impl")) && !code.trim_start().starts_with("///")
        })
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn host_unsafe_lives_only_in_the_runtime_crate() {
    for file in rust_files(&root().join("crates")).into_iter().chain(rust_files(&root().join("benches"))) {
        if file.starts_with(root().join("crates/gpu-waterz-runtime")) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let uses = unsafe_uses(&text);
        assert!(uses.is_empty(), "{}:{}: host-side unsafe outside gpu-waterz-runtime", file.display(), uses[0] + 1);
    }
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let files = rust_files(&root().join("crates/gpu-waterz-runtime"))
        .into_iter()
        .chain(rust_files(&root().join("kernels-rs/src")));
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for i in unsafe_uses(&text) {
            // The comment stands on one of the few lines above (a closure or
            // call may open between), or at the launch! call site.
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
            if !line.contains("extern \"ptx-kernel\" fn") {
                continue;
            }
            kernels += 1;
            // The doc comment block right above (after #[no_mangle]).
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
fn the_runtime_embeds_the_committed_ptx() {
    let lib = std::fs::read_to_string(root().join("crates/gpu-waterz-runtime/src/lib.rs")).unwrap();
    assert!(lib.contains("include_str!(\"../../../kernels-rs/ptx/gpu_waterz_kernels.ptx\")"));
    let ptx = std::fs::read_to_string(root().join("kernels-rs/ptx/gpu_waterz_kernels.ptx")).unwrap();
    assert!(ptx.contains(".target sm_90"), "the committed PTX targets sm_90");
}

//! Running the built `dovetail` binary from the CLI tests, as a user runs it from the
//! repository's root.

#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `dovetail` with `args` from the repository's root.
pub fn dovetail(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("dovetail runs")
}

/// Asserts that a run was refused with `needle` in its error, without a panic.
pub fn refused(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {err}");
    assert!(err.contains(needle), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

//! Running the `tessel` binary from tests.

use std::process::Command;

/// Runs `tessel args` in the repository with `env` set on the child only (tests run in
/// parallel threads, so never on this process): (success, stdout, stderr). A panic fails
/// the test whatever the exit code.
pub fn tessel_env(env: &[(&str, &str)], args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run tessel");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!err.contains("panicked"), "tessel {args:?} panicked: {err}");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        err,
    )
}

/// [`tessel_env`] without environment.
#[allow(dead_code)] // not every test crate runs it without environment
pub fn tessel(args: &[&str]) -> (bool, String, String) {
    tessel_env(&[], args)
}

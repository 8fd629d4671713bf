//! `TESSEL_CPU_ISA`: the command line builds, fingerprints and reports CPU kernels for
//! the narrower ISA it names, and refuses one it does not know with a message naming the
//! variable. The variable is set on a `tessel` subprocess only, never in this process
//! (tests run in parallel threads).

mod cli_util;
use cli_util::tessel_env;
use tessel::target::cpu::VectorIsa;

/// Runs `tessel args` with `TESSEL_CPU_ISA=isa`: (success, stdout, stderr).
fn tessel_with_isa(isa: &str, args: &[&str]) -> (bool, String, String) {
    tessel_env(&[("TESSEL_CPU_ISA", isa)], args)
}

#[test]
fn avx2_on_an_avx512_host_names_the_fingerprint_and_the_flags() {
    let host = VectorIsa::detected();
    if host != VectorIsa::Avx512f {
        eprintln!(
            "skipped: the host's ISA is {}, not avx512f, so there is no AVX-512 to narrow",
            host.name()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("empty.db");
    // On an empty database `best` names the target key it looked under: the fingerprint,
    // with the compiler flags in its toolchain.
    let args = ["best", "matmul:8x8x8", "--target", "cpu"];
    let (ok, _, err) = tessel_with_isa(
        "avx2+fma",
        &[&args[..], &["--db", db.to_str().unwrap()]].concat(),
    );
    assert!(!ok);
    assert!(err.contains("on cpu x86_64-avx2+fma ("), "{err}");
    assert!(err.contains("-mavx2 -mfma"), "{err}");
    assert!(!err.contains("-mavx512f"), "{err}");

    // `run` builds and times it in the worker, which reads the same variable.
    let (ok, out, err) = tessel_with_isa("AVX2", &["run", "matmul:8x8x8", "--target", "cpu"]);
    assert!(ok, "{err}");
    assert!(out.contains("(x86_64-avx2+fma, "), "{out}");
}

#[test]
fn an_unknown_isa_is_an_error_naming_the_variable_on_every_cpu_command() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let db = db.to_str().unwrap();
    let spec = "matmul:8x8x8";
    let commands: [&[&str]; 4] = [
        &["run", spec, "--target", "cpu"],
        &["tune", spec, "--target", "cpu", "--trials", "2", "--db", db],
        &["best", spec, "--target", "cpu", "--db", db],
        &["sample", spec, "--target", "cpu", "-n", "1"],
    ];
    for args in commands {
        let (ok, _, err) = tessel_with_isa("bogus", args);
        assert!(!ok, "{args:?} succeeded");
        assert!(
            err.contains("TESSEL_CPU_ISA=bogus: unknown vector ISA (choose "),
            "{args:?}: {err}"
        );
    }
    // The CPU's own ISA is always a valid choice.
    let host = VectorIsa::detected().name();
    let (ok, _, err) = tessel_with_isa(host, &["sample", spec, "--target", "cpu", "-n", "1"]);
    assert!(ok, "{err}");
}

//! `transform_layout`: a GEMM operand staged in shared memory reduction axis first
//! (`[k][m]`), its row stride padded by `storage_align`. What is computed is unchanged
//! (serial and GPU-semantics interpreters), the shared buffer has the permuted, padded
//! shape, and what cannot be permuted is refused with the reason, the program untouched.

use tessel::lower::{lower, Backend};
use tessel::schedule::{replay, text, Schedule};
use tessel::workload;

const SPEC: &str = "matmul:m=32,n=24,k=16,layout=nt";

/// B (24x16, `[n, k]`) staged as `[k][n]` with a row stride of 33.
const TRACE: &str = r#"b0 = get_block("C")
b1 = cache_write(b0, write_index=0, scope="local")
i, j, k = get_loops(b0)
i0, i1, i2 = split(i, factors=[2, 4, 4])
j0, j1, j2 = split(j, factors=[2, 4, 3])
k0, k1 = split(k, factors=[2, 8])
reorder(i0, j0, i1, j1, k0, k1, i2, j2)
f0 = fuse(i0, j0)
bind(f0, thread="blockIdx.x")
f1 = fuse(i1, j1)
bind(f1, thread="threadIdx.x")
reverse_compute_at(b1, f1)
b3 = cache_read(b0, read_index=1, scope="shared")
compute_at(b3, k0)
transform_layout(b3, buffer_index=0, permutation=[1, 0])
storage_align(b3, buffer_index=0, axis=0, factor=32, offset=1)
_, _, _, c0, c1 = get_loops(b3)
c = fuse(c0, c1)
c_0, c_1 = split(c, factors=[None, 16])
bind(c_1, thread="threadIdx.x")
b4 = decompose_reduction(b0, k0)
"#;

#[test]
fn a_transposed_padded_shared_copy_computes_the_reference() {
    let w = workload::preset(SPEC).unwrap();
    let reference = w.to_program();
    let t = text::parse(TRACE).unwrap_or_else(|e| panic!("{e}"));
    let sch = replay(&t, w.to_program(), 0).unwrap_or_else(|e| panic!("{e}"));
    let p = sch.program();
    let b_shared = p.buffers.iter().find(|b| b.name == "B_shared").unwrap();
    assert_eq!(b_shared.shape, vec![16, 24], "stored [k][n]");
    let err = tessel::interp::check(&reference, p, 3).unwrap();
    assert!(err < tessel::interp::TOLERANCE, "relative error {err}");
    let lowered = lower(p, Backend::Cuda).unwrap();
    let err = tessel::interp::check_lowered(&reference, &lowered, 4).unwrap();
    assert!(err < tessel::interp::TOLERANCE, "relative error {err}");
    let src = tessel::codegen::cuda::generate(&lowered).unwrap().code;
    // One block's tile: 8 rows of k, 12 columns of n, rows 33 apart (1 modulo 32).
    assert!(src.contains("B_shared[") && src.contains("* 33)"), "{src}");
    if std::env::var("TESSEL_NO_NVRTC").as_deref() != Ok("1") {
        tessel::measure::cuda::compile(&src, "sm_90a").unwrap_or_else(|f| panic!("NVRTC: {f}"));
    }
}

#[test]
fn what_cannot_be_permuted_is_refused() {
    let w = workload::preset(SPEC).unwrap();
    let mut sch = Schedule::new(w.to_program(), 0);
    let b0 = sch.get_block("C").unwrap();
    let print = |s: &Schedule| tessel::ir::printer::print_program(s.program());
    let before = print(&sch);
    let e = sch
        .transform_layout(b0, 0, &[1, 0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("C is a parameter"), "{e}");
    assert_eq!(print(&sch), before);
    let b3 = sch.cache_read(b0, 1, "shared").unwrap();
    let before = print(&sch);
    for bad in [&[0, 0][..], &[1][..], &[2, 0][..]] {
        let e = sch.transform_layout(b3, 0, bad).unwrap_err().to_string();
        assert!(
            e.contains("is not a permutation of the 2 axes of B_shared"),
            "{e}"
        );
        assert_eq!(print(&sch), before);
    }
    sch.storage_align(b3, 0, 0, 32, 1).unwrap();
    let before = print(&sch);
    let e = sch
        .transform_layout(b3, 0, &[1, 0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("already aligned"), "{e}");
    assert_eq!(print(&sch), before);
}

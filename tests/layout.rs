//! `transform_layout`: a GEMM operand staged in shared memory reduction axis first
//! (`[k][m]`), its row stride padded by `storage_align`. What is computed is unchanged
//! (serial and GPU-semantics interpreters), the shared buffer has the permuted, padded
//! shape, and what cannot be permuted is refused with the reason, the program untouched.

use tessel::lower::{lower, Backend, Lowered};
use tessel::schedule::layout::singletons;
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

/// The schedule `trace` of `spec`, checked against the unscheduled program by the serial
/// interpreter and, lowered for CUDA, by the GPU-semantics one; with its CUDA source.
fn checked(spec: &str, trace: &str) -> (Schedule, Lowered, String) {
    let w = workload::preset(spec).unwrap();
    let reference = w.to_program();
    let t = text::parse(trace).unwrap_or_else(|e| panic!("{e}"));
    let sch = replay(&t, w.to_program(), 0).unwrap_or_else(|e| panic!("{e}"));
    let err = tessel::interp::check(&reference, sch.program(), 3).unwrap();
    assert!(err < tessel::interp::TOLERANCE, "relative error {err}");
    let lowered = lower(sch.program(), Backend::Cuda).unwrap();
    let err = tessel::interp::check_lowered(&reference, &lowered, 4).unwrap();
    assert!(err < tessel::interp::TOLERANCE, "relative error {err}");
    let src = tessel::codegen::cuda::generate(&lowered).unwrap().code;
    (sch, lowered, src)
}

#[test]
fn a_transposed_padded_shared_copy_computes_the_reference() {
    let (sch, _, src) = checked(SPEC, TRACE);
    let p = sch.program();
    let b_shared = p.buffers.iter().find(|b| b.name == "B_shared").unwrap();
    assert_eq!(b_shared.shape, vec![16, 24], "stored [k][n]");
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
        .transform_layout(b0, 0, &singletons(&[1, 0]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("C is a parameter"), "{e}");
    assert_eq!(print(&sch), before);
    let b3 = sch.cache_read(b0, 1, "shared").unwrap();
    let before = print(&sch);
    let bad: [Vec<Vec<i64>>; 6] = [
        singletons(&[0, 0]),
        singletons(&[1]),
        singletons(&[2, 0]),
        vec![vec![0, 1], vec![1]],
        vec![vec![0, 1], vec![]],
        vec![vec![]],
    ];
    for bad in bad {
        let e = sch.transform_layout(b3, 0, &bad).unwrap_err().to_string();
        assert!(
            e.contains("does not name each of the 2 axes of B_shared exactly once"),
            "{e}"
        );
        assert_eq!(print(&sch), before);
    }
    sch.storage_align(b3, 0, 0, 32, 1).unwrap();
    let before = print(&sch);
    let e = sch
        .transform_layout(b3, 0, &singletons(&[1, 0]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("already aligned"), "{e}");
    assert_eq!(print(&sch), before);
}

/// An implicit-GEMM conv whose p and q loops are fused and tiled by 4 (rows of 13 are
/// crossed), its accumulator stored with p and q as one axis after the write-back is
/// placed.
const CONV: &str = "conv2d_nchw:n=2,c=8,h=13,w=13,k=16,r=3,s=3,stride=1,pad=1";
const ROWS_TRACE: &str = r#"b0 = get_block("conv2d_nchw")
b1 = cache_write(b0, write_index=0, scope="local")
n, k, p, q, rc, ry, rx = get_loops(b0)
f = fuse(p, q)
n0, n1, n2 = split(n, factors=[None, 1, 1])
k0, k1, k2 = split(k, factors=[None, 4, 2])
f0, f1, f2 = split(f, factors=[None, 16, 4])
rc0, rc1 = split(rc, factors=[None, 4])
reorder(n0, k0, f0, n1, k1, f1, rc0, ry, rx, rc1, n2, k2, f2)
bx = fuse(n0, k0, f0)
bind(bx, thread="blockIdx.x")
tx = fuse(n1, k1, f1)
bind(tx, thread="threadIdx.x")
reverse_compute_at(b1, tx)
transform_layout(b0, buffer_index=0, permutation=[0, 1, [2, 3]])
b2 = cache_read(b0, read_index=0, scope="shared")
compute_at(b2, rc0)
_, _, _, a1, a2, a3 = get_loops(b2)
a = fuse(a1, a2, a3)
a_0, a_1 = split(a, factors=[None, 64])
bind(a_1, thread="threadIdx.x")
b3 = cache_read(b0, read_index=1, scope="shared")
compute_at(b3, rc0)
_, _, _, c0, c1, c2, c3 = get_loops(b3)
c = fuse(c0, c1, c2, c3)
c_0, c_1 = split(c, factors=[None, 64])
bind(c_1, thread="threadIdx.x")
b4 = get_block("pad_temp")
compute_inline(b4)
"#;

#[test]
fn an_accumulator_with_two_axes_fused_is_indexed_by_the_fused_loop() {
    let t = text::parse(ROWS_TRACE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        text::print(&t),
        ROWS_TRACE,
        "the nested list prints as it parses"
    );
    let json = tessel::schedule::json::to_json(&t);
    assert_eq!(tessel::schedule::json::from_json(&json).unwrap(), t);
    let (sch, lowered, src) = checked(CONV, ROWS_TRACE);
    let p = sch.program();
    let acc = p
        .buffers
        .iter()
        .find(|b| b.name == "conv2d_nchw_local")
        .unwrap();
    assert_eq!(acc.shape, vec![2, 16, 169], "p and q stored as one axis");
    // A thread's 2 x 4 outputs, though its 4 columns of the fused axis cross a row of 13
    // (without the layout: 2 x 2 rows x 13 columns).
    let k = &lowered.kernels[0];
    assert_eq!(k.local_bytes(&lowered.program), 8 * 4);
    // The block's 64 columns of the fused axis cover at most 6 rows of 13, plus the
    // window's 2: 8 of the padded image's 15 rows in shared memory (a few more as
    // allocated, the fetch's last thread row being padded), not all 15 (4 x 15 x 15).
    let shared: usize = src
        .split("float pad_temp_shared[")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no pad_temp_shared in\n{src}"));
    assert!(
        shared < 4 * 15 * 15,
        "{shared} floats of pad_temp_shared\n{src}"
    );
    if std::env::var("TESSEL_NO_NVRTC").as_deref() != Ok("1") {
        tessel::measure::cuda::compile(&src, "sm_90a").unwrap_or_else(|f| panic!("NVRTC: {f}"));
    }
}

/// Operands stored reduction first by kernels of their own, as the plain sketch samples
/// them, run as the GPU runs them: a padding kernel (`unaligned_pad_kernels`) that stores
/// its operand transposed itself (`cache_read.transpose_padding_kernels`), and a transposing copy whose run of the reduction (k =
/// 1063, padded to 1072 = 16 x 67: no divisor between 32 and 64) is tiled by 64 with its
/// last tile masked (`staging::run_tile`), as are a conv's 67 channels stored last (by
/// 40, where the largest divisor is 1).
#[test]
fn operands_transposed_by_their_padding_kernels_or_by_imperfect_tiles_run_as_the_gpu_runs_them() {
    use tessel::search::sketch::apply_sketch;
    use tessel::search::{SearchSpace, SketchKind};
    let space = SearchSpace {
        transpose_padding_kernels: true,
        ..SearchSpace::cuda_default()
    };
    let mut seen = [false; 3];
    for (spec, kind) in [
        ("matmul:m=40,n=53,k=37,layout=nn", 0),
        ("matmul:m=24,n=20,k=1063,layout=nt", 1),
        ("conv2d_nchw:n=1,c=67,h=7,w=7,k=8,r=3,s=3,stride=2,pad=1", 2),
    ] {
        let reference = workload::preset(spec).unwrap().to_program();
        for seed in 0..64 {
            let mut sch = Schedule::new(reference.clone(), seed);
            apply_sketch(&space, &mut sch, seed, SketchKind::Plain).unwrap();
            let trace = text::print(sch.trace());
            let tiled = trace.contains("cache_write(") && trace.contains("scope=\"shared\")");
            let wanted = match kind {
                // A padding block whose layout the sample changed, through shared memory.
                0 => {
                    tiled
                        && trace
                            .lines()
                            .filter(|l| l.contains("get_block(\"") && l.contains("_pad\")"))
                            .filter_map(|l| l.split(" = ").next())
                            .any(|b| trace.contains(&format!("transform_layout({b},")))
                }
                // The conv's data stored channels last through shared memory, its 67
                // channels (prime) in tiles of 40, the second masked past 67.
                2 => {
                    tiled
                        && trace.contains("permutation=[0, 2, 3, 1]")
                        && trace.contains("candidates=[40]")
                }
                // A copy of k padded to 1072 whose run is split by 64.
                _ => {
                    tiled
                        && trace.contains("scope=\"global\")")
                        && trace.contains("factors=[None, 64])")
                        && sch
                            .program()
                            .buffers
                            .iter()
                            .any(|b| b.shape.contains(&1072))
                }
            };
            if !wanted {
                continue;
            }
            let lowered = lower(sch.program(), Backend::Cuda).unwrap();
            let err = tessel::interp::check_lowered(&reference, &lowered, seed)
                .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}\n{trace}"));
            assert!(err < tessel::interp::TOLERANCE, "{spec} seed {seed}: {err}");
            seen[kind] = true;
            break;
        }
    }
    assert_eq!(seen, [true, true, true]);
}

/// A GEMM's A block packed for the CPU micro-kernel as GotoBLAS packs it: cached at the
/// reduction block, its rows split by the row tile (4) and the rows within a tile moved
/// last, `[row tile][k][row in tile]`.
const PACKED_A: &str = r#"b0 = get_block("C")
b1 = cache_write(b0, write_index=0, scope="local")
i, j, k = get_loops(b0)
i0, i1, i2 = split(i, factors=[2, 4, 4])
j0, j1 = split(j, factors=[3, 8])
k0, k1 = split(k, factors=[2, 8])
reorder(i0, j0, k0, i1, k1, i2, j1)
f = fuse(i0, j0)
parallel(f)
reverse_compute_at(b1, f)
b2 = cache_read(b0, read_index=0, scope="local")
compute_at(b2, k0)
split_layout(b2, buffer_index=0, axis=0, factor=4)
transform_layout(b2, buffer_index=0, permutation=[0, 2, 1])
vectorize(j1)
b3 = decompose_reduction(b0, k0)
"#;

#[test]
fn a_row_split_packed_operand_computes_the_reference_on_the_cpu() {
    let spec = "matmul:m=32,n=24,k=16";
    let w = workload::preset(spec).unwrap();
    let reference = w.to_program();
    let t = text::parse(PACKED_A).unwrap_or_else(|e| panic!("{e}"));
    let sch = replay(&t, w.to_program(), 0).unwrap_or_else(|e| panic!("{e}"));
    let a_local = sch
        .program()
        .buffers
        .iter()
        .find(|b| b.name == "A_local")
        .unwrap();
    assert_eq!(a_local.shape, vec![8, 16, 4], "[row tile][k][row in tile]");
    let err = tessel::interp::check(&reference, sch.program(), 3).unwrap();
    assert!(err < tessel::interp::TOLERANCE, "relative error {err}");
    let lowered = lower(sch.program(), Backend::Cpu).unwrap();
    let err = tessel::interp::check_lowered(&reference, &lowered, 4).unwrap();
    assert!(err < tessel::interp::TOLERANCE, "relative error {err}");
    // The micro-kernel reads the packed block at a run of 4 a k step, with no division
    // left in its index: the block of one parallel iteration is 4 tiles x 8 k x 4 rows.
    let src = tessel::codegen::cpu::generate(&lowered).unwrap().code;
    let kernel = src
        .lines()
        .find(|l| l.contains("A_local[") && l.contains("C_local"))
        .unwrap_or_else(|| panic!("{src}"));
    assert!(
        !kernel.contains("floordiv") && !kernel.contains(" / 4"),
        "{kernel}"
    );
    assert!(
        kernel.contains("(i_1 * 32)") && kernel.contains("(k_1 * 4)"),
        "{kernel}"
    );
}

#[test]
fn a_split_that_does_not_divide_is_refused_naming_the_axis() {
    let w = workload::preset("matmul:m=30,n=24,k=16").unwrap();
    let mut sch = Schedule::new(w.to_program(), 0);
    let b0 = sch.get_block("C").unwrap();
    let print = |s: &Schedule| tessel::ir::printer::print_program(s.program());
    let e = sch
        .split_layout(b0, 0, 0, 4.into())
        .unwrap_err()
        .to_string();
    assert!(e.contains("C is a parameter"), "{e}");
    let b2 = sch.cache_read(b0, 0, "local").unwrap();
    let before = print(&sch);
    let e = sch
        .split_layout(b2, 0, 0, 4.into())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("4 does not divide axis 0 of A_local (extent 30)"),
        "{e}"
    );
    let e = sch
        .split_layout(b2, 0, 2, 2.into())
        .unwrap_err()
        .to_string();
    assert!(e.contains("A_local has 2 axes, not an axis 2"), "{e}");
    assert_eq!(print(&sch), before);
    sch.split_layout(b2, 0, 0, 5.into()).unwrap();
    assert_ne!(print(&sch), before);
}

/// B's rows padded to 16 bytes past the banks (`storage_align` offset 4, the sketch's
/// `cache_read.aligned_rows` coin) with four columns a thread: the reference computed,
/// rows 36 floats apart, and a thread's four neighbouring columns of a row read as one
/// 16-byte vector, where the odd stride of one element leaves narrower loads.
#[test]
fn rows_padded_to_16_bytes_are_read_as_vectors() {
    let four_columns = TRACE
        .replace("split(j, factors=[2, 4, 3])", "split(j, factors=[2, 3, 4])")
        .replace("factors=[None, 16])", "factors=[None, 12])");
    let aligned = four_columns.replace("offset=1)", "offset=4)");
    let (_, _, odd_src) = checked(SPEC, &four_columns);
    let (_, _, src) = checked(SPEC, &aligned);
    assert!(odd_src.contains("* 33)"), "{odd_src}");
    assert!(src.contains("* 36)"), "{src}");
    if std::env::var("TESSEL_NO_NVRTC").as_deref() != Ok("1") {
        assert_eq!(shared_vector_loads(&ptx(&odd_src)), 0);
        assert!(shared_vector_loads(&ptx(&src)) >= 1, "{src}");
    }
}

/// The PTX NVRTC makes of `src` for sm_90a.
fn ptx(src: &str) -> String {
    tessel::measure::cuda::compile_ptx(src, "sm_90a").unwrap_or_else(|f| panic!("NVRTC: {f}"))
}

/// The 16-byte shared-memory loads of f32 in `ptx`.
fn shared_vector_loads(ptx: &str) -> usize {
    ptx.matches("ld.shared.v4.f32").count()
}

/// The fp32 ceiling's 2048^3 TT kernel that transposes B in its fetch, rows padded to 16
/// bytes (`tests/golden/tt_transposing_fetch_2048.sched`, from `benches/gemm_ceiling.py`):
/// with the loop over a staged tile's reduction steps (`r0_1`) unrolled, as
/// `unroll.tile_steps` annotates it, NVRTC's PTX reads the fragments of both operands as
/// 16-byte vectors, one for every 16 FMAs (left rolled its PTX loads them a float at a time
/// with NVRTC 13.0, which ptxas widens to the same LDS.128: benches/probe/sass_loop_mix.py).
/// The check is that the annotation reaches the code NVRTC compiles.
#[test]
fn a_staged_tiles_unrolled_steps_read_their_fragments_as_vectors() {
    if std::env::var("TESSEL_NO_NVRTC").as_deref() == Ok("1") {
        return;
    }
    let golden = std::fs::read_to_string("tests/golden/tt_transposing_fetch_2048.sched").unwrap();
    let trace = format!("{golden}annotate(r0_1, key=\"pragma_auto_unroll_max_step\", value=512)\n");
    let w = workload::preset("matmul:2048x2048x2048,layout=tt").unwrap();
    let t = text::parse(&trace).unwrap_or_else(|e| panic!("{e}"));
    // The trace names the canonical workload's blocks (t0, t1, t2), as the database does.
    let canonical = tessel::database::canonical_program(&w).unwrap();
    let sch = replay(&t, canonical, 0).unwrap_or_else(|e| panic!("{e}"));
    let lowered = lower(sch.program(), Backend::Cuda).unwrap();
    let src = tessel::codegen::cuda::generate(&lowered).unwrap().code;
    let ptx = ptx(&src);
    let (vectors, fmas) = (shared_vector_loads(&ptx), ptx.matches("fma.rn.f32").count());
    assert!(
        fmas >= 2048 && vectors * 16 >= fmas,
        "{vectors} vector loads for {fmas} FMAs"
    );
}

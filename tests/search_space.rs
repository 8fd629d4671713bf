//! The design spaces of the suite's workloads, at small shapes: hundreds of random samples
//! per target, each of which either is rejected by a postprocessor with a typed reason or
//! passes the IR verifier and computes the reference's answer in the interpreter. On the
//! CUDA space a few per workload are also run through the GPU-semantics interpreter and
//! compiled with NVRTC for sm_90a (NVRTC is required unless `TESSEL_NO_NVRTC=1`).

use std::collections::BTreeMap;
use tessel::database::canonical_program;
use tessel::search::{RandomSearch, SearchSpace, TargetLimits};
use tessel::target::cuda::CudaLimits;

/// The suite's workload families at shapes the interpreter runs in milliseconds.
const WORKLOADS: &[&str] = &[
    "matmul:64x64x32",
    "matmul:20x24x12",
    "batch_matmul:b=2,m=16,n=16,k=8",
    "conv2d_nchw:n=1,c=4,h=8,w=8,k=8,r=3,s=3,stride=1,pad=1",
    "conv2d_nchw:n=1,c=4,h=8,w=8,k=8,r=3,s=3,stride=2,pad=1",
    "conv2d_nchw:n=1,c=8,h=6,w=6,k=4,r=1,s=1,stride=1,pad=0",
    "conv2d_relu_nchw:n=1,c=4,h=6,w=6,k=8,r=3,s=3,stride=1,pad=1",
    "dense_bias_relu:m=16,n=16,k=16",
];

/// Candidates that must pass per workload and target, and the samples allowed to find them
/// (postprocessors reject many samples at these small shapes: too few threads).
const PASSING: usize = 25;
const MAX_SAMPLES: usize = 400;
const NVRTC_PER_WORKLOAD: usize = 2;
const GPU_INTERP_PER_WORKLOAD: usize = 2;

fn nvrtc_required() -> bool {
    std::env::var("TESSEL_NO_NVRTC").as_deref() != Ok("1")
}

struct Tally {
    sampled: usize,
    passed: usize,
    failures: BTreeMap<String, usize>,
}

/// The canonical program of a workload preset.
fn program(spec: &str) -> tessel::ir::Program {
    let w = tessel::workload::from_cli(spec, |_| Err(std::io::Error::other("no files")))
        .expect("workload");
    canonical_program(&w).expect("canonical program")
}

fn explore(spec: &str, space: &SearchSpace, target: &TargetLimits, seed: u64) -> Tally {
    let split_k_only = space.split_k.as_ref().is_some_and(|k| k.probability == 1.0);
    let program = program(spec);
    let mut search = RandomSearch::new(space.clone(), target.clone(), program.clone(), seed);
    let mut t = Tally {
        sampled: 0,
        passed: 0,
        failures: BTreeMap::new(),
    };
    let (mut compiled, mut gpu_checked) = (0, 0);
    while t.passed < PASSING && t.sampled < MAX_SAMPLES {
        t.sampled += 1;
        let sch = match search.sample() {
            Ok(s) => s,
            Err(e) => {
                *t.failures.entry(format!("sketch: {e}")).or_insert(0) += 1;
                continue;
            }
        };
        tessel::ir::verify::verify(sch.program()).expect("every sample verifies");
        // The trace replays to the same program (decisions included).
        let again = tessel::schedule::replay(sch.trace(), program.clone(), 99).expect("replay");
        assert_eq!(
            tessel::search::ir_hash(again.program()),
            tessel::search::ir_hash(sch.program()),
            "{spec}: replay differs"
        );
        let verified = match tessel::search::postproc::verify(sch.program(), space, target) {
            Ok(v) => v,
            Err(r) => {
                *t.failures
                    .entry(if std::env::var("SHOW").is_ok() {
                        format!("rejected {r}")
                    } else {
                        format!("rejected {:?}", r.kind())
                    })
                    .or_insert(0) += 1;
                continue;
            }
        };
        if let Err(e) = tessel::interp::check(&program, sch.program(), 7) {
            panic!(
                "{spec}: a verified candidate computes a wrong answer: {e}\n{}",
                tessel::schedule::text::print(sch.trace())
            );
        }
        if let TargetLimits::Cuda(_) = target {
            if gpu_checked < GPU_INTERP_PER_WORKLOAD {
                gpu_checked += 1;
                if let Err(e) = tessel::interp::gpu::check_lowered(&program, &verified.lowered, 3) {
                    panic!(
                        "{spec}: GPU-semantics check failed: {e}\n{}",
                        tessel::schedule::text::print(sch.trace())
                    );
                }
            }
            if compiled < NVRTC_PER_WORKLOAD && nvrtc_required() {
                compiled += 1;
                if let Err(msg) = tessel::measure::cuda::nvrtc_available() {
                    panic!(
                        "{msg} (CI installs it through .ci/test; set TESSEL_NO_NVRTC=1 to skip)"
                    );
                }
                if let Err(f) = tessel::measure::cuda::compile(&verified.source.code, "sm_90a") {
                    panic!(
                        "{spec}: NVRTC refused a verified candidate: {f}\n{}",
                        verified.source.code
                    );
                }
            }
        }
        if split_k_only {
            let p = sch.program();
            assert!(
                p.blocks_in_order()
                    .iter()
                    .any(|b| p.block(*b).name.contains("_rf")),
                "{spec}: the split-K space sampled a candidate without rfactor"
            );
        }
        t.passed += 1;
    }
    t
}

fn run_space(space: SearchSpace, target: TargetLimits, name: &str) {
    let mut total = 0;
    for (i, spec) in WORKLOADS.iter().enumerate() {
        let t = explore(spec, &space, &target, 1000 + i as u64);
        println!(
            "{name} {spec}: {}/{} passed; {:?}",
            t.passed, t.sampled, t.failures
        );
        assert!(
            t.passed == PASSING,
            "{name} {spec}: only {}/{} samples pass: {:?}",
            t.passed,
            t.sampled,
            t.failures
        );
        total += t.passed;
    }
    assert!(total >= 200, "{name}: {total} candidates");
}

#[test]
fn cuda_space_samples_verify_compute_the_reference_and_compile() {
    run_space(
        SearchSpace::cuda_default(),
        TargetLimits::Cuda(CudaLimits::sm90_default()),
        "cuda",
    );
}

/// The CUDA space with split-K on every sample and at every size: each candidate is an
/// rf kernel plus the kernel summing its partial results, and must still compute the
/// reference (serially, with GPU semantics) and compile.
#[test]
fn cuda_split_k_samples_verify_compute_the_reference_and_compile() {
    let mut space = SearchSpace::cuda_default();
    let rule = space
        .split_k
        .as_mut()
        .expect("the CUDA space has a split-K rule");
    rule.probability = 1.0;
    rule.min_reduction = 1;
    run_space(
        space,
        TargetLimits::Cuda(CudaLimits::sm90_default()),
        "cuda split-K",
    );
}

#[test]
fn cpu_space_samples_verify_and_compute_the_reference() {
    run_space(SearchSpace::cpu_default(), TargetLimits::Cpu, "cpu");
}

/// The implicit-GEMM view of batched convs (n, p, q fused before tiling): every verified
/// sample computes the reference with GPU semantics (out-of-bounds accesses of the
/// compacted buffers caught), and the accumulator a thread keeps in registers is
/// compacted to that thread's tile, not left the size of the block's: the index of a
/// per-thread output row under floordiv/floormod of the thread index used to keep the
/// whole block's region (a 92,416-float local array in a sample of a batch-16 7x7 conv).
#[test]
fn implicit_gemm_samples_compute_the_reference_with_thread_sized_accumulators() {
    implicit_gemm_samples(
        0.0,
        &[
            "conv2d_nchw:n=3,c=3,h=9,w=9,k=8,r=3,s=3,stride=1,pad=1",
            "conv2d_nhwc:n=4,c=4,h=7,w=7,k=6,r=3,s=3,stride=2,pad=1",
        ],
    );
}

/// The same for samples that fuse only the window axes p, q (`tiling.implicit_gemm_rows`),
/// on shapes whose P*Q (289, 81) is tiled imperfectly or by tiles crossing rows: every
/// sample stores its accumulator with p and q as one axis, and keeps it per thread (without
/// virtual threads, whose copies of a thread's tile lie a thread row apart in any sample,
/// fused or not, and are compacted as one box).
#[test]
fn implicit_gemm_samples_of_the_window_axes_compute_the_reference_with_thread_sized_accumulators() {
    implicit_gemm_samples(
        1.0,
        &[
            "conv2d_nchw:n=2,c=3,h=17,w=17,k=8,r=3,s=3,stride=1,pad=1",
            "conv2d_nhwc:n=3,c=4,h=17,w=17,k=6,r=3,s=3,stride=2,pad=1",
        ],
    );
}

fn implicit_gemm_samples(rows: f64, specs: &[&str]) {
    let mut space = SearchSpace::cuda_default();
    // The conv's own loops: no sample takes the GEMM view.
    space.gemm_view_windowed = 0.0;
    space.implicit_gemm = 1.0;
    space.implicit_gemm_rows = rows;
    if rows > 0.0 {
        space.max_vthreads = 1;
    }
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    for (i, spec) in specs.iter().enumerate() {
        let program = program(spec);
        let mut search = RandomSearch::new(
            space.clone(),
            target.clone(),
            program.clone(),
            40 + i as u64,
        );
        let (mut passed, mut sampled) = (0, 0);
        while passed < 12 && sampled < 300 {
            sampled += 1;
            let Ok(sch) = search.sample() else { continue };
            let Ok(v) = tessel::search::postproc::verify(sch.program(), &space, &target) else {
                continue;
            };
            let trace = tessel::schedule::text::print(sch.trace());
            let merged = trace
                .lines()
                .any(|l| l.starts_with("transform_layout(") && l.matches('[').count() > 1);
            assert_eq!(
                merged,
                rows == 1.0,
                "{spec}: the accumulator's layout\n{trace}"
            );
            if let Err(e) = tessel::interp::gpu::check_lowered(&program, &v.lowered, 5) {
                panic!("{spec}: GPU-semantics check failed: {e}\n{trace}");
            }
            let k = &v.lowered.kernels[0];
            let outputs: i64 = tessel::measure::worker::param_specs(&program)
                .iter()
                .filter(|p| p.is_output)
                .map(|p| p.numel() as i64)
                .sum();
            let threads = k.grid.iter().product::<i64>() * k.threads();
            let per_thread = (outputs + threads - 1) / threads;
            let local = k.local_bytes(&v.lowered.program) / 4;
            assert!(
                local <= 8 * per_thread.max(1),
                "{spec}: {local} accumulator elements per thread for {per_thread} outputs\n{trace}"
            );
            passed += 1;
        }
        assert_eq!(passed, 12, "{spec}: {passed} of {sampled} samples passed");
    }
}

/// `tiling.warp_tile_share` at 1: every sample of a GEMM whose axes 64 divides draws the
/// warp-tile structure (blocks of 64-256 threads, at least 8 along the columns, each
/// thread 4 x 4 pieces, one per virtual thread, at least two), and computes the reference.
#[test]
fn warp_tile_samples_compute_the_reference_in_pieces_of_four_by_four() {
    let mut space = SearchSpace::cuda_default();
    space.warp_tile_share = 1.0;
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    for (i, spec) in ["matmul:128x128x32", "matmul:m=128,n=192,k=40,layout=nt"]
        .iter()
        .enumerate()
    {
        let program = program(spec);
        let mut search =
            RandomSearch::new(space.clone(), target.clone(), program.clone(), 7 + i as u64);
        let (mut passed, mut sampled) = (0, 0);
        while passed < 8 && sampled < 200 {
            sampled += 1;
            let Ok(sch) = search.sample() else { continue };
            let Ok(v) = tessel::search::postproc::verify(sch.program(), &space, &target) else {
                continue;
            };
            let trace = tessel::schedule::text::print(sch.trace());
            // The spatial axes' tiles: [block, vthread, threadIdx, serial, innermost].
            let tiles: Vec<Vec<i64>> = trace
                .lines()
                .filter(|l| l.contains("sample_perfect_tile(") && l.contains("n=5"))
                .map(|l| {
                    let d = &l[l.find("decision=[").unwrap() + 10..l.rfind(']').unwrap()];
                    d.split(", ").map(|x| x.parse().unwrap()).collect()
                })
                .collect();
            assert_eq!(tiles.len(), 2, "{spec}\n{trace}");
            let threads = tiles[0][2] * tiles[1][2];
            let vthreads = tiles[0][1] * tiles[1][1];
            assert!(
                tiles
                    .iter()
                    .all(|t| t[3] == 1 && t[4] == 4 && [1, 2, 4].contains(&t[1]))
                    && [64, 128, 256].contains(&threads)
                    && tiles[1][2] >= 8
                    && vthreads >= 2,
                "{spec}: not a warp tile: {tiles:?}\n{trace}"
            );
            if let Err(e) = tessel::interp::gpu::check_lowered(&program, &v.lowered, 5) {
                panic!("{spec}: GPU-semantics check failed: {e}\n{trace}");
            }
            passed += 1;
        }
        assert_eq!(passed, 8, "{spec}: {passed} of {sampled} samples passed");
    }
}

/// `postprocess.max_unrolled_statements`: the seed `gemm_3_vthread` (2 x 2 virtual threads
/// unrolled around every statement) is rejected before compiling when its kernel unrolls
/// to more statements than the limit, with the kernel and the count named, and passes at
/// exactly its count.
#[test]
fn a_kernel_unrolling_to_more_statements_than_the_limit_is_rejected_before_compiling() {
    use tessel::search::postproc::{verify, RejectKind, Rejection};
    let w = tessel::workload::preset("matmul:128x128x16").unwrap();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/schedules/gemm_3_vthread.sched"
    );
    let trace = tessel::schedule::text::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let sch = tessel::schedule::replay(&trace, w.to_program(), 0).unwrap();
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let mut space = SearchSpace::cuda_default();
    space.max_unrolled_statements = None;
    let statements = verify(sch.program(), &space, &target)
        .unwrap()
        .lowered
        .kernels[0]
        .unrolled_statements();
    assert!(statements > 4, "{statements}");
    space.max_unrolled_statements = Some(statements);
    assert!(verify(sch.program(), &space, &target).is_ok());
    space.max_unrolled_statements = Some(statements - 1);
    let e = verify(sch.program(), &space, &target).unwrap_err();
    assert_eq!(e.kind(), RejectKind::Unrolled);
    assert!(
        matches!(&e, Rejection::Unrolled { statements: s, .. } if *s == statements),
        "{e}"
    );
    assert!(e.to_string().contains("matmul_kernel unrolls to"), "{e}");
}

/// `postprocess.max_workspace_bytes`: a convolution's GEMM view whose gathered data are
/// copied by a kernel of their own allocates them in global memory; the program is
/// rejected before compiling when its global buffers exceed the limit, naming the bytes,
/// the largest buffer and the key, and passes at exactly its bytes. The shipped CUDA space
/// sets a limit.
#[test]
fn a_program_allocating_more_global_bytes_than_the_limit_is_rejected_before_compiling() {
    use tessel::search::postproc::{verify, RejectKind, Rejection};
    assert!(SearchSpace::cuda_default().max_workspace_bytes.is_some());
    let spec = "conv2d_nchw:n=2,c=13,h=21,w=21,k=37,r=5,s=5,stride=1,pad=2";
    let program = program(spec);
    let mut space = SearchSpace::cuda_default();
    space.gemm_view_windowed = 1.0;
    space.max_workspace_bytes = None;
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let mut search = RandomSearch::new(space.clone(), target.clone(), program, 7);
    let mut found = None;
    for _ in 0..200 {
        let Ok(sch) = search.sample() else { continue };
        let Ok(v) = verify(sch.program(), &space, &target) else {
            continue;
        };
        let p = &v.lowered.program;
        let sizes: Vec<(String, i64)> = v
            .lowered
            .workspaces
            .iter()
            .map(|b| {
                let buf = p.buffer(*b);
                (buf.name.clone(), buf.numel() * buf.dtype.bytes() as i64)
            })
            .collect();
        if sizes.iter().any(|(name, _)| name.contains("im2col")) {
            found = Some((sch, sizes));
            break;
        }
    }
    let (sch, sizes) = found.expect("a sample that copies the gathered data");
    let bytes: i64 = sizes.iter().map(|(_, b)| b).sum();
    let largest = &sizes.iter().max_by_key(|(_, b)| *b).unwrap().0;
    space.max_workspace_bytes = Some(bytes);
    assert!(verify(sch.program(), &space, &target).is_ok());
    space.max_workspace_bytes = Some(bytes - 1);
    let e = verify(sch.program(), &space, &target).unwrap_err();
    assert_eq!(e.kind(), RejectKind::Workspace);
    assert!(
        matches!(&e, Rejection::Workspace { bytes: b, largest: l, .. } if *b == bytes && l == largest),
        "{e}"
    );
    assert!(
        e.to_string().contains("postprocess.max_workspace_bytes"),
        "{e}"
    );
}

/// `postprocess.max_local_bytes`: a CPU kernel whose local arrays (here the accumulator of
/// the whole parallel block, the write-back placed at the parallel loop) exceed the limit
/// is rejected before compiling, naming the kernel, the bytes and the key; at exactly its
/// bytes it passes.
#[test]
fn a_cpu_kernel_with_more_local_array_bytes_than_the_limit_is_rejected_before_compiling() {
    use tessel::search::postproc::{verify, RejectKind, Rejection};
    let text = "b0 = get_block(\"C\")\n\
                b1 = cache_write(b0, write_index=0, scope=\"local\")\n\
                i, j, k = get_loops(b0)\n\
                i_0, i_1 = split(i, factors=[None, 32])\n\
                reorder(i_0, i_1, j, k)\n\
                parallel(i_0)\n\
                reverse_compute_at(b1, i_0)\n";
    let trace = tessel::schedule::text::parse(text).unwrap();
    let w = tessel::workload::preset("matmul:64x64x64").unwrap();
    let sch = tessel::schedule::replay(&trace, w.to_program(), 0).unwrap();
    let target = TargetLimits::Cpu;
    let mut space = SearchSpace::cpu_default();
    // The accumulator of one i_0 iteration: 32 x 64 floats.
    let bytes = 32 * 64 * 4;
    space.max_local_bytes = Some(bytes);
    assert!(verify(sch.program(), &space, &target).is_ok());
    space.max_local_bytes = Some(bytes - 1);
    let e = verify(sch.program(), &space, &target).unwrap_err();
    assert_eq!(e.kind(), RejectKind::StackFrame);
    assert!(
        matches!(&e, Rejection::LocalArrays { bytes: b, .. } if *b == bytes),
        "{e}"
    );
    assert!(
        e.to_string().contains("8192 bytes of local arrays")
            && e.to_string().contains("postprocess.max_local_bytes"),
        "{e}"
    );
}

/// An operand is copied into global memory by at most one kernel of its own: where a
/// zero-filling padding kernel writes it, no transposing kernel copies it again (the
/// padding inlined into a transposing copy does both in one pass). Checked on samples of
/// an fp32 NT GEMM and a TF32 TT GEMM of odd extents and on a strided conv's GEMM view,
/// among which some take padding kernels and some transposing ones.
#[test]
fn no_operand_is_copied_by_two_kernels_of_their_own() {
    use tessel::ir::{BufferId, BufferKind, Expr, Program, Scope};
    fn moves_only(e: &Expr) -> bool {
        match e {
            Expr::Int(_) | Expr::Float(_) | Expr::Var(_) | Expr::Load(..) => true,
            Expr::Bin(..) | Expr::Un(..) => false,
            Expr::Select(_, t, f) => moves_only(t) && moves_only(f),
            Expr::Cast(_, x) => moves_only(x),
        }
    }
    // The names of the blocks that copy an operand into a global buffer of the
    // program's own, and how many of them read another such copy.
    fn copies(p: &Program) -> (Vec<String>, usize) {
        let copy_into = |buf: BufferId| {
            let b = p.buffer(buf);
            if b.scope != Scope::Global || b.kind != BufferKind::Intermediate {
                return Vec::new();
            }
            p.writers(buf)
                .into_iter()
                .filter(|w| moves_only(&p.block(*w).body.value))
                .collect()
        };
        let writers: Vec<_> = (0..p.buffers.len() as u32)
            .flat_map(|i| copy_into(BufferId(i)))
            .collect();
        let twice = writers
            .iter()
            .filter(|w| {
                p.block_reads(**w)
                    .iter()
                    .any(|(r, _)| !copy_into(*r).is_empty())
            })
            .count();
        let names = writers.iter().map(|w| p.block(*w).name.clone()).collect();
        (names, twice)
    }
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let (mut padded, mut transposed) = (0, 0);
    for (spec, view) in [
        ("matmul:77x103x205,layout=nt", 0.0),
        ("matmul:77x103x205,layout=tt,math=tf32", 0.0),
        (
            "conv2d_nchw:n=2,c=11,h=15,w=15,k=9,r=5,s=5,stride=2,pad=2",
            1.0,
        ),
    ] {
        let mut space = SearchSpace::cuda_default();
        space.gemm_view_windowed = view;
        let mut search = RandomSearch::new(space, target.clone(), program(spec), 5);
        for _ in 0..120 {
            let Ok(sch) = search.sample() else { continue };
            let (names, twice) = copies(sch.program());
            assert_eq!(twice, 0, "{spec}: a copy of a copy:\n{}", sch.trace());
            padded += names.iter().filter(|n| n.ends_with("_pad")).count();
            transposed += names.iter().filter(|n| !n.ends_with("_pad")).count();
        }
    }
    assert!(
        padded > 0 && transposed > 0,
        "{padded} padding, {transposed} transposing copies"
    );
}

/// `threads.standalone_min_blocks`: a split-K sum's elements a thread are drawn only among
/// the counts that leave it at least that many blocks of 128 threads (one a thread always,
/// as a literal where it is the only count): 8,192 outputs offer one a thread alone,
/// 262,144 every count; without the key (1) every count is offered to both.
#[test]
fn a_split_k_sum_is_offered_only_counts_that_leave_it_enough_blocks() {
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let shipped = SearchSpace::cuda_default();
    assert_eq!(shipped.standalone_min_blocks, 256);
    let mut open = shipped.clone();
    open.standalone_min_blocks = 1;
    for (space, spec, want) in [
        (&shipped, "matmul:m=64,n=128,k=4096", vec![1]),
        (&shipped, "matmul:m=512,n=512,k=2048", vec![1, 2, 4, 8]),
        (&open, "matmul:m=64,n=128,k=4096", vec![1, 2, 4, 8]),
    ] {
        let mut search = RandomSearch::new(space.clone(), target.clone(), program(spec), 3);
        let mut sums = 0;
        for _ in 0..200 {
            let Ok(sch) = search.sample() else { continue };
            let trace = tessel::schedule::text::print(sch.trace());
            if !trace.contains("rfactor(") {
                continue;
            }
            // The sum's split: factors=[None, vN, 128], vN its elements a thread drawn
            // among the candidates, or factors=[None, 1, 128] where one is offered.
            let counts: Vec<Vec<i64>> = trace
                .lines()
                .filter_map(|l| {
                    let at = l.find("factors=[None, ")? + 15;
                    let each = l[at..].strip_suffix(", 128])")?;
                    if let Ok(literal) = each.parse::<i64>() {
                        return Some(vec![literal]);
                    }
                    let def = trace
                        .lines()
                        .find(|d| d.starts_with(&format!("{each} = sample_categorical(")))?;
                    let c = &def[def.find("candidates=[")? + 12..def.find("], probs")?];
                    Some(c.split(", ").map(|x| x.parse().unwrap()).collect())
                })
                .collect();
            assert_eq!(counts.len(), 1, "{spec}: one split-K sum\n{trace}");
            assert_eq!(counts[0], want, "{spec}\n{trace}");
            sums += 1;
        }
        assert!(sums >= 10, "{spec}: {sums} split-K samples of 200");
    }
}

/// With `split_k.serial_sum` at 1, every split-K sample sums its partials in the main
/// kernel, by the thread block arriving last at each tile: the plain sketch's (f32,
/// imperfect tiles among them) and the wgmma sketch's (f16 GEMMs and convs). Each such
/// sample computes the reference serially and under GPU semantics (blocks in order, the
/// counter counted) and one per workload compiles; where a thread sums several elements
/// of its tile, it loads a chunk of them together.
#[test]
fn serial_split_k_sums_compute_the_reference_under_gpu_semantics() {
    let mut space = SearchSpace::cuda_default();
    let rule = space.split_k.as_mut().expect("a split-K rule");
    rule.probability = 1.0;
    rule.min_reduction = 1;
    rule.serial_sum = 1.0;
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let mut total_chunked = 0;
    for spec in [
        "matmul:16x48x256",
        "matmul:13x40x96",
        "dense_bias_relu:m=8,n=24,k=128",
        "matmul:m=64,n=32,k=128,dtype=f16,acc=f32",
        "conv2d_nchw:n=1,c=64,h=4,w=4,k=64,r=3,s=3,stride=1,pad=1,dtype=f16",
    ] {
        let program = program(spec);
        let mut search = RandomSearch::new(space.clone(), target.clone(), program.clone(), 5);
        let (mut serial, mut compiled, mut chunked) = (0, false, 0);
        for _ in 0..300 {
            if serial == 4 {
                break;
            }
            let Ok(sch) = search.sample() else { continue };
            let trace = tessel::schedule::text::print(sch.trace());
            if !trace.contains("serial_sum_at(") {
                continue;
            }
            let Ok(verified) = tessel::search::postproc::verify(sch.program(), &space, &target)
            else {
                continue;
            };
            serial += 1;
            // A thread's elements summed in chunks loaded together: the chunk's loop split
            // off and moved innermost, below the thread loops.
            let tail: Vec<&str> = trace[trace.find("serial_sum_at(").unwrap()..]
                .lines()
                .collect();
            chunked += usize::from(tail.windows(2).any(|w| {
                let chunk = w[0].rsplit_once("factors=[None, ").map(|(_, f)| f);
                chunk.is_some_and(|f| f.starts_with(|c: char| c.is_ascii_digit()))
                    && w[1].starts_with("reorder(")
            }));
            let arrives = verified
                .lowered
                .kernels
                .iter()
                .any(|k| format!("{:?}", k.body).contains("Arrive"));
            assert!(arrives, "{spec}: no arrival in the kernels\n{trace}");
            tessel::interp::check(&program, sch.program(), 7)
                .unwrap_or_else(|e| panic!("{spec}: {e}\n{trace}"));
            tessel::interp::gpu::check_lowered(&program, &verified.lowered, 3)
                .unwrap_or_else(|e| panic!("{spec}: GPU semantics: {e}\n{trace}"));
            if !compiled && nvrtc_required() {
                compiled = true;
                tessel::measure::cuda::compile(&verified.source.code, "sm_90a").unwrap_or_else(
                    |f| panic!("{spec}: NVRTC refused it: {f}\n{}", verified.source.code),
                );
            }
        }
        assert_eq!(serial, 4, "{spec}: serial split-K samples found");
        total_chunked += chunked;
    }
    // Tiles of several elements a thread are summed in chunks.
    assert!(total_chunked > 0, "no serial sum in chunks");
}

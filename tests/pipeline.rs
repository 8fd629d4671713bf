//! Software pipelining of the shared fetch (`software_pipeline_stage`, lowered with
//! `cp.async`), without a GPU:
//!
//! * the seed GEMM with 2 and 3 stages, on shapes whose reduction steps are a multiple of
//!   the stages, are not, and are guarded (imperfect tiles), and sampled pipelined
//!   candidates of the CUDA space (a padded conv: zero-fill copies), run through the
//!   GPU-semantics interpreter, whose `cp.async` copies land only at a `wait_group`, and
//!   compute the reference;
//! * a pipeline that waits on the wrong group, or not at all, is caught;
//! * NVRTC compiles a pipelined kernel, and its PTX has `cp.async` and
//!   `cp.async.wait_group` (NVRTC is required unless `TESSEL_NO_NVRTC=1`);
//! * the annotation round-trips through the text and JSON traces, and one that cannot be
//!   applied is refused naming the loop.

use tessel::interp::gpu::{check_lowered, GpuCheckError, GpuInterpError};
use tessel::ir::Program;
use tessel::lower::{lower, Backend, KStmt, Lowered};
use tessel::schedule::{json, replay, text, Schedule};
use tessel::search::{RandomSearch, SearchSpace, TargetLimits};
use tessel::target::cuda::CudaLimits;
use tessel::workload;

mod kernel_util;
use kernel_util::statements;

/// The seed GEMM ("Efficient GEMM in TensorIR", stage 5) with the shared fetches of its
/// reduction loop `ko` pipelined over `stages` stages.
fn pipelined_seed(stages: i64) -> String {
    let path = format!(
        "{}/examples/schedules/seed_efficient_gemm.sched",
        env!("CARGO_MANIFEST_DIR")
    );
    let seed = std::fs::read_to_string(&path).unwrap();
    format!(
        "{seed}annotate(ko, key=\"software_pipeline_stage\", value=[0, 0, {}])\n",
        stages - 1
    )
}

fn schedule(sched: &str, spec: &str) -> Result<Schedule, String> {
    let w = workload::preset(spec).unwrap();
    let trace = text::parse(sched).map_err(|e| e.to_string())?;
    replay(&trace, w.to_program(), 0).map_err(|e| e.to_string())
}

fn reference(spec: &str) -> Program {
    workload::preset(spec).unwrap().to_program()
}

fn lowered(stages: i64, spec: &str) -> Lowered {
    let sch = schedule(&pipelined_seed(stages), spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    lower(sch.program(), Backend::Cuda).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

/// Rewrites every `wait_group` of the kernels (`None`: removes them).
fn rewrite_waits(l: &mut Lowered, f: &dyn Fn(i64) -> Option<i64>) {
    fn go(body: &mut Vec<KStmt>, f: &dyn Fn(i64) -> Option<i64>) {
        body.retain_mut(|s| match s {
            KStmt::WaitGroup(n) => match f(*n) {
                Some(m) => {
                    *n = m;
                    true
                }
                None => false,
            },
            KStmt::For { body, .. } | KStmt::If { then: body, .. } => {
                go(body, f);
                true
            }
            _ => true,
        });
    }
    for k in &mut l.kernels {
        go(&mut k.body, f);
    }
}

#[test]
fn pipelined_seed_gemm_computes_the_reference_with_gpu_semantics() {
    // matmul:128x128x64: 4 reduction steps of 16; x80: 5 steps (not a multiple of 2 or
    // 3); 130x120x36: 3 steps, the last one partial, and partial tiles in m and n (guarded
    // fetches).
    for spec in [
        "matmul:128x128x64",
        "matmul:128x128x80",
        "matmul:130x120x36",
    ] {
        for stages in [2, 3] {
            let l = lowered(stages, spec);
            let all = statements(&l);
            // The partial tiles' fetches are guarded, but each guard is uniform over a
            // vector of 4 along k (every extent here is a multiple of 4), so they copy 4
            // lanes at a time too.
            let lanes = 4;
            assert!(
                all.iter()
                    .any(|s| matches!(s, KStmt::CpAsync { lanes: l, .. } if *l == lanes)),
                "{spec}, {stages} stages: no cp.async of {lanes} lanes"
            );
            assert!(
                all.contains(&KStmt::WaitGroup(stages - 2)),
                "{spec}, {stages} stages: no wait_group {}",
                stages - 2
            );
            let err = check_lowered(&reference(spec), &l, 5)
                .unwrap_or_else(|e| panic!("{spec}, {stages} stages: {e}"));
            assert!(err < tessel::interp::TOLERANCE, "{spec}: error {err}");
        }
    }
}

#[test]
fn shared_memory_counts_every_stage() {
    let spec = "matmul:128x128x64";
    let one = {
        // All stages 0: the plain single-buffered loop.
        let sch = schedule(&pipelined_seed(1), spec).unwrap();
        lower(sch.program(), Backend::Cuda).unwrap()
    };
    let bytes = |l: &Lowered| l.kernels[0].shared_bytes(&l.program);
    // Two shared tiles of 16 x 128 floats, single-buffered.
    assert_eq!(bytes(&one), 2 * 16 * 128 * 4);
    for stages in [2, 3, 4] {
        assert_eq!(bytes(&lowered(stages, spec)), stages * bytes(&one));
    }
}

#[test]
fn the_cost_model_sees_the_pipeline_depth() {
    let spec = "matmul:128x128x64";
    let dev = tessel::cost_model::DeviceSpec::cuda("sm_90a");
    let at = tessel::cost_model::FEATURE_NAMES
        .iter()
        .position(|n| *n == "pipeline_stages")
        .expect("a pipeline_stages feature");
    for stages in [1, 2, 3] {
        let f = tessel::cost_model::featurize(&lowered(stages, spec), &dev);
        assert_eq!(f[at], stages as f32, "{stages} stages");
    }
}

#[test]
fn a_pipeline_that_waits_on_the_wrong_group_is_caught() {
    let spec = "matmul:128x128x64";
    for stages in [2, 3] {
        // Waiting for one group fewer lets iteration k compute before its copies landed.
        let mut early = lowered(stages, spec);
        rewrite_waits(&mut early, &|n| Some(n + 1));
        let e = check_lowered(&reference(spec), &early, 5)
            .expect_err("a wait on the wrong group must be caught");
        println!("{stages} stages, waiting on the wrong group: {e}");
        assert!(
            matches!(
                e,
                GpuCheckError::Kernel(GpuInterpError::SharedRace { .. }) | GpuCheckError::Check(_)
            ),
            "{stages} stages: {e}"
        );
        // Without any wait the copies never land before they are read.
        let mut none = lowered(stages, spec);
        rewrite_waits(&mut none, &|_| None);
        assert!(check_lowered(&reference(spec), &none, 5).is_err());
        // Without the loop's barrier, the fetch of iteration k + S - 1 may land in the
        // copy other threads still read for iteration k - 1.
        let mut unsynced = lowered(stages, spec);
        for k in &mut unsynced.kernels {
            remove_loop_barriers(&mut k.body);
        }
        let e = check_lowered(&reference(spec), &unsynced, 5)
            .expect_err("a pipeline without its barrier must be caught");
        assert!(
            matches!(e, GpuCheckError::Kernel(GpuInterpError::SharedRace { .. })),
            "{stages} stages: {e}"
        );
    }
}

/// Removes the barriers of every loop that waits for a `cp.async` group.
fn remove_loop_barriers(body: &mut [KStmt]) {
    for_each_pipelined_loop(body, &mut |body| body.retain(|c| !matches!(c, KStmt::Sync)));
}

/// Applies `f` to the body of every loop that waits for a `cp.async` group (a pipelined
/// loop), then looks inside it.
fn for_each_pipelined_loop(body: &mut [KStmt], f: &mut dyn FnMut(&mut Vec<KStmt>)) {
    for s in body {
        if let KStmt::For { body, .. } = s {
            if body.iter().any(|c| matches!(c, KStmt::WaitGroup(_))) {
                f(body);
            }
            for_each_pipelined_loop(body, f);
        }
    }
}

#[test]
fn sampled_pipelines_compute_the_reference_with_gpu_semantics() {
    // A padded conv (its fetch is zero-filled through cp.async's src-size) and a GEMM.
    let space = SearchSpace::cuda_default();
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    for (seed, spec) in [
        (11, "conv2d_nchw:n=1,c=4,h=8,w=8,k=8,r=3,s=3,stride=1,pad=1"),
        (12, "matmul:64x64x48"),
    ] {
        let w = workload::preset(spec).unwrap();
        let program = tessel::database::canonical_program(&w).unwrap();
        let mut search = RandomSearch::new(space.clone(), target.clone(), program.clone(), seed);
        let (mut checked, mut zero_filled) = (0, 0);
        for _ in 0..300 {
            if checked == 3 {
                break;
            }
            let Ok(sch) = search.sample() else { continue };
            let Ok(v) = tessel::search::postproc::verify(sch.program(), &space, &target) else {
                continue;
            };
            let all = statements(&v.lowered);
            if !all.iter().any(|s| matches!(s, KStmt::CpAsync { .. })) {
                continue;
            }
            zero_filled += all
                .iter()
                .filter(|s| matches!(s, KStmt::CpAsync { valid: Some(_), .. }))
                .count();
            checked += 1;
            let err = check_lowered(&program, &v.lowered, 3).unwrap_or_else(|e| {
                panic!("{spec}: {e}\n{}", text::print(sch.trace()));
            });
            assert!(err < tessel::interp::TOLERANCE, "{spec}: error {err}");
        }
        assert_eq!(checked, 3, "{spec}: too few pipelined samples");
        if spec.starts_with("conv") {
            assert!(zero_filled > 0, "{spec}: no zero-filling cp.async");
        }
    }
}

#[test]
fn nvrtc_compiles_a_pipelined_kernel_with_cp_async() {
    if std::env::var("TESSEL_NO_NVRTC").as_deref() == Ok("1") {
        println!("NVRTC skipped (TESSEL_NO_NVRTC=1)");
        return;
    }
    if let Err(msg) = tessel::measure::cuda::nvrtc_available() {
        panic!("{msg} (CI installs it through .ci/test; set TESSEL_NO_NVRTC=1 to skip)");
    }
    let l = lowered(3, "matmul:1024x1024x1024");
    let code = tessel::codegen::cuda::generate(&l).unwrap().code;
    let cubin = tessel::measure::cuda::compile(&code, "sm_90a").unwrap();
    assert_eq!(cubin.info.spill_stores, Some(0));
    let ptx = tessel::measure::cuda::compile_ptx(&code, "sm_90a").unwrap();
    for needle in [
        "cp.async.cg.shared.global",
        "cp.async.commit_group",
        "cp.async.wait_group 1",
    ] {
        assert!(ptx.contains(needle), "the PTX has no {needle}");
    }
}

#[test]
fn the_annotation_round_trips_through_text_and_json() {
    let spec = "matmul:128x128x64";
    let sch = schedule(&pipelined_seed(3), spec).unwrap();
    let printed = tessel::ir::printer::print_program(sch.program());
    assert!(printed.contains("\"software_pipeline_stage\": [0, 0, 2]"));
    let as_text = text::print(sch.trace());
    assert!(as_text.contains("annotate(ko, key=\"software_pipeline_stage\", value=[0, 0, 2])"));
    let back = text::parse(&as_text).unwrap();
    assert_eq!(&back, sch.trace());
    let from_json = json::from_json(&json::to_json(sch.trace())).unwrap();
    assert_eq!(&from_json, sch.trace());
    let again = replay(&from_json, reference(spec), 0).unwrap();
    assert_eq!(tessel::ir::printer::print_program(again.program()), printed);
}

#[test]
fn an_annotation_that_cannot_be_applied_is_refused_naming_the_loop() {
    let spec = "matmul:128x128x64";
    let base = pipelined_seed(3);
    // The loops print as k_0 (`ko` of the trace) and k_1 (`ki`).
    let cases = [
        // Compute before a fetch.
        ("value=[0, 2, 2]", "loop k_0"),
        // Four statements named, three in the body.
        ("value=[0, 0, 0, 2]", "loop k_0"),
        // 5 stages over 4 reduction steps.
        ("value=[0, 0, 4]", "loop k_0"),
    ];
    for (value, named) in cases {
        let sched = base.replace("value=[0, 0, 2]", value);
        let e = schedule(&sched, spec).expect_err(value);
        assert!(e.contains(named), "{value}: {e}");
    }
    // A loop whose body is not fetches: the inner reduction loop.
    let sched = base.replace("annotate(ko,", "annotate(ki,");
    let e = schedule(&sched, spec).expect_err("ki");
    assert!(e.contains("loop k_1"), "{e}");
}

#[test]
fn the_stage_count_is_a_mutable_decision_of_the_cuda_space() {
    let space = SearchSpace::cuda_default();
    assert_eq!(
        space.pipeline.as_ref().map(|p| p.stages.clone()),
        Some(vec![1, 2, 3, 4])
    );
    let w = workload::preset("matmul:256x256x256").unwrap();
    let program = tessel::database::canonical_program(&w).unwrap();
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let mut search = RandomSearch::new(space, target, program, 5);
    let sch = (0..50)
        .find_map(|_| search.sample().ok())
        .expect("a sample");
    let sites = tessel::search::mutator::sites(sch.trace());
    assert!(
        sites
            .iter()
            .any(|s| s.kind == tessel::search::mutator::MutatorKind::PipelineStages),
        "{}",
        text::print(sch.trace())
    );
}

/// A GEMM of 64 x 64 blocks (64 threads, 4 x 4 outputs a thread in two by two virtual
/// threads) whose A (and with `b_rows`, B: an NT GEMM) is stored by rows of the
/// reduction and transposed by its fetch into a reduction-major shared tile, one vector of
/// 4 along the reduction a thread at a time, pipelined over 3 stages; `staged` stages
/// those fetches in registers.
fn transposing_gemm(b_rows: bool, staged: bool) -> String {
    let fetch = |blk: &str, index: usize, transpose: bool| {
        let mut lines = vec![
            format!("{blk} = cache_read(b0, read_index={index}, scope=\"shared\")"),
            format!("compute_at({blk}, k0)"),
        ];
        if transpose {
            lines.push(format!(
                "transform_layout({blk}, buffer_index=0, permutation=[1, 0])"
            ));
            lines.push(format!(
                "storage_align({blk}, buffer_index=0, axis=0, factor=32, offset=4)"
            ));
        }
        lines.extend([
            format!("_, _, _, _, {blk}_0, {blk}_1 = get_loops({blk})"),
            format!("{blk}_f = fuse({blk}_0, {blk}_1)"),
            format!("_, {blk}_t, {blk}_v = split({blk}_f, factors=[None, 64, 4])"),
            format!("bind({blk}_t, thread=\"threadIdx.x\")"),
            format!("vectorize({blk}_v)"),
        ]);
        lines.join("\n")
    };
    format!(
        "b0 = get_block(\"C\")
b1 = cache_write(b0, write_index=0, scope=\"local\")
i, j, k = get_loops(b0)
i0, i1, i2, i3 = split(i, factors=[None, 2, 8, 4])
j0, j1, j2, j3 = split(j, factors=[None, 2, 8, 4])
k0, k1 = split(k, factors=[None, 8])
reorder(i0, j0, i1, j1, i2, j2, k0, k1, i3, j3)
bx = fuse(i0, j0)
bind(bx, thread=\"blockIdx.x\")
vx = fuse(i1, j1)
bind(vx, thread=\"vthread.x\")
tx = fuse(i2, j2)
bind(tx, thread=\"threadIdx.x\")
reverse_compute_at(b1, tx)
{}
{}
annotate(k0, key=\"software_pipeline_stage\", value=[0, 0, 2])
{}b2 = decompose_reduction(b0, k0)
",
        fetch("ba", 0, true),
        fetch("bb", 1, b_rows),
        if staged {
            "annotate(k0, key=\"software_pipeline_register_fetch\", value=1)\n"
        } else {
            ""
        }
    )
}

#[test]
fn transposing_fetches_staged_in_registers_compute_the_reference_with_gpu_semantics() {
    // Whole tiles; partial tiles in m and n with a partial last reduction step (guarded
    // fetches, each guard uniform over a vector of 4 along k); an NT GEMM, both operands
    // transposed.
    for (spec, b_rows) in [
        ("matmul:128x64x64", false),
        ("matmul:100x72x36", false),
        ("matmul:m=72,n=100,k=44,layout=nt", true),
    ] {
        let sch = schedule(&transposing_gemm(b_rows, true), spec)
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        let l = lower(sch.program(), Backend::Cuda).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let all = statements(&l);
        // No transposing copy is left to cp.async element by element; the other operand
        // of an NN GEMM is still copied by 16-byte cp.async.
        assert!(
            !all.iter()
                .any(|s| matches!(s, KStmt::CpAsync { lanes: 1, .. })),
            "{spec}: a 4-byte cp.async is left"
        );
        assert_eq!(
            all.iter()
                .any(|s| matches!(s, KStmt::CpAsync { lanes: 4, .. })),
            !b_rows,
            "{spec}: 16-byte cp.async"
        );
        let staged = l.kernels[0]
            .allocs
            .iter()
            .find(|a| l.program.buffer(a.buffer).name.ends_with("_staged"))
            .unwrap_or_else(|| panic!("{spec}: no staging array"));
        // A's 64 x 8 tile over 64 threads is 8 elements a thread, and so is B's.
        assert_eq!(staged.size, if b_rows { 16 } else { 8 }, "{spec}");
        let err = check_lowered(&reference(spec), &l, 5).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert!(err < tessel::interp::TOLERANCE, "{spec}: error {err}");
        // Without the annotation the same schedule copies those elements by cp.async.
        let plain = schedule(&transposing_gemm(b_rows, false), spec).unwrap();
        let plain = lower(plain.program(), Backend::Cuda).unwrap();
        assert!(statements(&plain)
            .iter()
            .any(|s| matches!(s, KStmt::CpAsync { lanes: 1, .. })));
    }
}

#[test]
fn a_staged_fetch_without_its_barrier_or_in_the_wrong_place_is_caught() {
    let spec = "matmul:128x64x64";
    for stages in [2, 3] {
        let sched = transposing_gemm(false, true)
            .replace("value=[0, 0, 2]", &format!("value=[0, 0, {}]", stages - 1));
        let l = lower(schedule(&sched, spec).unwrap().program(), Backend::Cuda).unwrap();
        check_lowered(&reference(spec), &l, 5).expect("the pipeline computes the reference");
        // Without the loop's barrier, a thread's staged stores of iteration k land in the
        // copy other threads may still read for iteration k - 1.
        let mut unsynced = l.clone();
        for k in &mut unsynced.kernels {
            remove_loop_barriers(&mut k.body);
        }
        let e = check_lowered(&reference(spec), &unsynced, 5)
            .expect_err("staged stores without the barrier must be caught");
        assert!(
            matches!(e, GpuCheckError::Kernel(GpuInterpError::SharedRace { .. })),
            "{stages} stages: {e}"
        );
        // Stored before the loads of their iteration, the registers hold the vectors of
        // the iteration before: wrong values.
        let mut early = l.clone();
        for k in &mut early.kernels {
            land_before_fetch(&mut k.body);
        }
        assert!(
            check_lowered(&reference(spec), &early, 5).is_err(),
            "{stages} stages: staged stores before their loads must be caught"
        );
    }
}

/// Moves the last statement of every pipelined loop (its staged stores) to just after
/// the loop's barrier, before the fetch.
fn land_before_fetch(body: &mut [KStmt]) {
    for_each_pipelined_loop(body, &mut |body| {
        let last = body.pop().unwrap();
        let at = body.iter().position(|c| matches!(c, KStmt::Sync)).unwrap() + 1;
        body.insert(at, last);
    });
}

#[test]
fn sampled_pipelines_that_stage_in_registers_compute_the_reference_with_gpu_semantics() {
    // With `pipeline.register_fetch`, the coin of a GEMM whose A the fetch transposes by
    // vectors (k = 48: whole vectors of 4) stages those vectors in registers where it
    // comes up 1; without the key no sample has the coin.
    let spec = "matmul:64x64x48";
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let w = workload::preset(spec).unwrap();
    let program = tessel::database::canonical_program(&w).unwrap();
    let mut space = SearchSpace::cuda_default();
    let coin =
        |sch: &Schedule| text::print(sch.trace()).contains("software_pipeline_register_fetch");
    let mut plain = RandomSearch::new(space.clone(), target.clone(), program.clone(), 21);
    assert!(
        (0..100)
            .filter_map(|_| plain.sample().ok())
            .all(|s| !coin(&s)),
        "a coin without pipeline.register_fetch"
    );
    space.pipeline.as_mut().unwrap().register_fetch = true;
    let mut search = RandomSearch::new(space.clone(), target.clone(), program.clone(), 21);
    let (mut tossed, mut staged) = (0, 0);
    for _ in 0..600 {
        if staged == 3 {
            break;
        }
        let Ok(sch) = search.sample() else { continue };
        tossed += usize::from(coin(&sch));
        let Ok(v) = tessel::search::postproc::verify(sch.program(), &space, &target) else {
            continue;
        };
        let has_staging = v.lowered.kernels.iter().any(|k| {
            k.allocs
                .iter()
                .any(|a| v.lowered.program.buffer(a.buffer).name.ends_with("_staged"))
        });
        if !has_staging {
            continue;
        }
        staged += 1;
        let err = check_lowered(&program, &v.lowered, 3)
            .unwrap_or_else(|e| panic!("{spec}: {e}\n{}", text::print(sch.trace())));
        assert!(err < tessel::interp::TOLERANCE, "{spec}: error {err}");
    }
    assert!(
        tossed > staged,
        "{spec}: the coin came up 1 every time ({tossed} tosses)"
    );
    assert_eq!(staged, 3, "{spec}: too few samples staged in registers");
}

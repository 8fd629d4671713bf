//! Property tests: random sequences of primitives on small workloads. Whatever the
//! sequence, a rejected primitive leaves the program unchanged, an accepted one leaves
//! IR that verifies, the result computes what the unscheduled program computes, and the
//! trace round-trips through text and JSON and replays to the same IR.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tessel::interp;
use tessel::ir::printer::print_program;
use tessel::ir::verify::verify;
use tessel::schedule::{json, replay, text, AnnArg, IntArg, LoopRv, Schedule, Target, Trace};
use tessel::workload;

const THREADS: [&str; 6] = [
    "blockIdx.x",
    "blockIdx.y",
    "threadIdx.x",
    "threadIdx.y",
    "vthread.x",
    "threadIdx.z",
];
const SCOPES: [&str; 3] = ["shared", "local", "global"];

/// One random primitive (sometimes illegal on purpose). Returns whether it applied.
fn random_step(sch: &mut Schedule, rng: &mut ChaCha8Rng) -> bool {
    let names: Vec<String> = {
        let p = sch.program();
        p.blocks_in_order()
            .iter()
            .map(|b| p.block(*b).name.clone())
            .collect()
    };
    let name = &names[rng.gen_range(0..names.len())];
    let Ok(b) = sch.get_block(name) else {
        return false;
    };
    let Ok(loops) = sch.get_loops(b) else {
        return false;
    };
    let pick = |rng: &mut ChaCha8Rng, ls: &[LoopRv]| {
        if ls.is_empty() {
            None
        } else {
            Some(ls[rng.gen_range(0..ls.len())])
        }
    };
    let extent = |sch: &Schedule, l: LoopRv| {
        sch.loop_id(l)
            .map(|id| sch.program().lp(id).extent)
            .unwrap_or(1)
    };
    let before = sch.program().clone();
    let r: Result<(), _> = match rng.gen_range(0..16) {
        0 => match pick(rng, &loops) {
            Some(l) => {
                let e = extent(sch, l);
                let f = rng.gen_range(1..=e.max(1));
                let factors = if rng.gen_bool(0.5) {
                    vec![None, Some(IntArg::Lit(f))]
                } else {
                    vec![
                        Some(IntArg::Lit(f)),
                        None,
                        Some(IntArg::Lit(rng.gen_range(1..=2))),
                    ]
                };
                sch.split(l, &factors).map(|_| ())
            }
            None => return false,
        },
        1 if loops.len() >= 2 => {
            let i = rng.gen_range(0..loops.len() - 1);
            sch.fuse(&loops[i..i + 2]).map(|_| ())
        }
        2 if loops.len() >= 2 => {
            let i = rng.gen_range(0..loops.len());
            let j = rng.gen_range(0..loops.len());
            sch.reorder(&[loops[j], loops[i]])
        }
        3 => match pick(rng, &loops) {
            Some(l) => sch.bind(l, THREADS[rng.gen_range(0..THREADS.len())]),
            None => return false,
        },
        4 => match loops.last() {
            Some(l) => sch.vectorize(*l),
            None => return false,
        },
        5 => match pick(rng, &loops) {
            Some(l) => sch.unroll(l),
            None => return false,
        },
        6 => match pick(rng, &loops) {
            Some(l) => sch.parallel(l),
            None => return false,
        },
        7 => {
            let idx = rng.gen_range(0..3);
            match sch.cache_read(b, idx, SCOPES[rng.gen_range(0..3)]) {
                Ok(c) => match pick(rng, &loops) {
                    Some(l) if rng.gen_bool(0.7) => {
                        let _ = sch.compute_at(c, l);
                        Ok(())
                    }
                    _ => Ok(()),
                },
                Err(e) => Err(e),
            }
        }
        8 => match sch.cache_write(b, 0, SCOPES[rng.gen_range(0..3)]) {
            Ok(c) => match pick(rng, &loops) {
                Some(l) if rng.gen_bool(0.7) => {
                    let _ = sch.reverse_compute_at(c, l);
                    Ok(())
                }
                _ => Ok(()),
            },
            Err(e) => Err(e),
        },
        9 => {
            if rng.gen_bool(0.5) {
                sch.compute_inline(b)
            } else {
                sch.reverse_compute_inline(b)
            }
        }
        10 => match pick(rng, &loops) {
            Some(l) => sch.decompose_reduction(b, l).map(|_| ()),
            None => return false,
        },
        11 => match pick(rng, &loops) {
            Some(l) => {
                let n = rng.gen_range(2..=3);
                match sch.sample_perfect_tile(l, n, rng.gen_range(1..=8), None) {
                    Ok(vs) => sch
                        .split(
                            l,
                            &vs.iter().map(|v| Some(IntArg::Rv(*v))).collect::<Vec<_>>(),
                        )
                        .map(|_| ()),
                    Err(e) => Err(e),
                }
            }
            None => return false,
        },
        12 => sch.storage_align(b, 0, rng.gen_range(0..2), 32, rng.gen_range(0..32)),
        13 => match pick(rng, &loops) {
            Some(l) => {
                let v = sch.sample_categorical(&[0, 16, 64], &[0.3, 0.3, 0.4], None);
                match v {
                    Ok(v) => sch.annotate(
                        Target::Loop(l),
                        "pragma_auto_unroll_max_step",
                        AnnArg::Rv(v),
                    ),
                    Err(e) => Err(e),
                }
            }
            None => return false,
        },
        14 => match pick(rng, &loops) {
            Some(l) => sch.rfactor(l, rng.gen_range(0..=2)).map(|_| ()),
            None => return false,
        },
        _ => {
            // compute_at / reverse_compute_at to a loop of another block.
            let other = &names[rng.gen_range(0..names.len())];
            let Ok(ob) = sch.get_block(other) else {
                return false;
            };
            let Ok(ol) = sch.get_loops(ob) else {
                return false;
            };
            match pick(rng, &ol) {
                Some(l) if rng.gen_bool(0.5) => sch.compute_at(b, l),
                Some(l) => sch.reverse_compute_at(b, l),
                None => return false,
            }
        }
    };
    match r {
        Ok(()) => {
            if let Err(e) = verify(sch.program()) {
                panic!(
                    "an accepted primitive left invalid IR: {e}\n{}",
                    text::print(sch.trace())
                );
            }
            true
        }
        Err(e) => {
            assert_eq!(
                sch.program(),
                &before,
                "rejected primitive ({e}) changed the IR"
            );
            false
        }
    }
}

fn check_random_schedule(spec: &str, seed: u64, steps: usize) -> usize {
    check_random_schedule_of(&workload::preset(spec).unwrap(), seed, steps)
}

/// A softmax over rows: two reductions (the row maximum, then the row sum) with
/// elementwise stages between and after them.
const SOFTMAX: &str = "workload softmax
input X: f32[6, 10]
M[i] = max_reduce(X[i, k], k: 10)
E[i, j] = exp(X[i, j] - M[i])
S[i] = sum(E[i, k], k: 10)
Y[i, j] = E[i, j] / S[i]
";

fn check_random_schedule_of(w: &workload::Workload, seed: u64, steps: usize) -> usize {
    let reference = w.to_program();
    let mut sch = Schedule::new(w.to_program(), seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let applied = (0..steps)
        .filter(|_| random_step(&mut sch, &mut rng))
        .count();
    let trace = sch.trace().clone();
    let ir = print_program(sch.program());
    match interp::check(&reference, sch.program(), seed) {
        Ok(err) => assert!(
            err < interp::TOLERANCE,
            "relative error {err}\n{}\n{ir}",
            text::print(&trace)
        ),
        Err(e) => panic!("{e}\ntrace:\n{}\nIR:\n{ir}", text::print(&trace)),
    }
    let parsed = text::parse(&text::print(&trace)).unwrap();
    assert_eq!(parsed, trace);
    assert_eq!(json::from_json(&json::to_json(&trace)).unwrap(), trace);
    let again = replay(&parsed, w.to_program(), seed ^ 1)
        .unwrap_or_else(|e| panic!("{e}\n{}", text::print(&trace)));
    assert_eq!(
        print_program(again.program()),
        ir,
        "replay printed different IR"
    );
    // Replay runs its primitives without the copy that restores a rejected one's program
    // (it drops the schedule on the first error); the schedule it hands out restores again.
    let mut again = again;
    for _ in 0..4 {
        random_step(&mut again, &mut rng);
    }
    applied
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_schedules_of_matmul(seed in any::<u64>()) {
        check_random_schedule("matmul:12x10x8", seed, 14);
    }

    #[test]
    fn random_schedules_of_conv2d(seed in any::<u64>()) {
        check_random_schedule("conv2d_nchw:n=1,c=3,h=5,w=5,k=4,r=3,s=3,stride=1,pad=1", seed, 14);
    }

    #[test]
    fn random_schedules_of_dense_bias_relu(seed in any::<u64>()) {
        check_random_schedule("dense_bias_relu:m=6,n=10,k=8", seed, 14);
    }

    #[test]
    fn random_schedules_of_softmax(seed in any::<u64>()) {
        check_random_schedule_of(&workload::parse(SOFTMAX).unwrap(), seed, 14);
    }

    #[test]
    fn random_schedules_of_conv2d_relu(seed in any::<u64>()) {
        check_random_schedule("conv2d_relu_nchw:n=1,c=2,h=6,w=6,k=3,r=3,s=3,stride=2,pad=1", seed, 14);
    }
}

#[test]
fn random_sequences_mostly_apply() {
    // Guard against a generator that only produces rejected primitives (which would make
    // the properties above vacuous).
    let applied: usize = (0..40)
        .map(|s| check_random_schedule("matmul:12x10x8", s, 14))
        .sum();
    assert!(
        applied > 40 * 14 / 4,
        "only {applied} of {} primitives applied",
        40 * 14
    );
}

/// Asserts that the scheduled program computes what `w` computes (the interpreter).
fn computes_the_reference(w: &workload::Workload, sch: &Schedule) {
    let err = interp::check(&w.to_program(), sch.program(), 3).unwrap();
    assert!(
        err <= interp::TOLERANCE,
        "{err}\n{}",
        print_program(sch.program())
    );
}

/// The 12 x 10 x 8 matmul of the tests below with the schedule `sched` replayed on it.
fn matmul_scheduled(sched: &str) -> (workload::Workload, Schedule) {
    let w = workload::preset("matmul:12x10x8").unwrap();
    let trace = tessel::schedule::text::parse(sched).unwrap();
    let sch = replay(&trace, w.to_program(), 0).unwrap();
    (w, sch)
}

#[test]
fn a_write_back_under_a_strided_tile_updates_each_point_once() {
    // Found by `random_schedules_of_matmul`: under `j, i_1_0, i_1_1` the initialization
    // writes rows `x` and `x + 6` (`i_0` relaxed, stride 6), whose box has 7 rows; the
    // update moved there must accumulate into those two rows only, not into the five
    // between them that other iterations own.
    let sched = r#"b0 = get_block("C")
i, j, k = get_loops(b0)
i_0, i_1 = split(i, factors=[None, 6])
reorder(j, i_0)
i_1_0, i_1_1, i_1_2 = split(i_1, factors=[2, 3, 1])
b4 = decompose_reduction(b0, j)
b5 = get_block("C_init")
j_init, a0, a1, a2, a3 = get_loops(b5)
b6 = get_block("C_update")
reverse_compute_at(b6, a1)
"#;
    let (w, sch) = matmul_scheduled(sched);
    computes_the_reference(&w, &sch);
}

#[test]
fn decompose_reduction_refuses_a_loop_that_repeats_the_block() {
    // Found by `random_schedules_of_matmul`: `compute_at` puts the rfactor'ed update
    // under the write-back's `j`, a virtual-thread loop the shared region is relaxed over,
    // so the update runs once per `j` for every element. With the init in the block each
    // run starts afresh; an init decomposed above `j` ran once for ten updates.
    let sched = r#"b0 = get_block("C")
i, j, k = get_loops(b0)
b1 = rfactor(k, factor_axis=2)
b3 = get_block("C_rf")
i_1, j_1, k_1 = get_loops(b3)
b4 = cache_write(b3, write_index=0, scope="shared")
reverse_compute_at(b4, k_1)
b6 = get_block("C_rf")
i_2, j_2, k_2 = get_loops(b6)
bind(j_2, thread="vthread.x")
b11 = get_block("C_rf_shared")
i_4, j_4, k_4 = get_loops(b11)
b10 = get_block("C_rf")
compute_at(b10, k_4)
"#;
    let (w, mut sch) = matmul_scheduled(sched);
    computes_the_reference(&w, &sch);
    let before = sch.program().clone();
    let b = sch.get_block("C_rf").unwrap();
    let loops = sch.get_loops(b).unwrap();
    let e = sch
        .decompose_reduction(b, loops[0])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("over loop j") && e.contains("more than once"),
        "{e}"
    );
    assert_eq!(sch.program(), &before);
    // Below `j` the init runs once per repetition, as the block's own init did.
    sch.decompose_reduction(b, loops[2]).unwrap();
    computes_the_reference(&w, &sch);
}

#[test]
fn an_update_moved_under_a_masked_init_skips_the_masked_iterations() {
    // Found by `random_schedules_of_matmul`: rows split 2 x 7 and the 7 into 4 x 2 leave
    // `i_1_0 * 2 + i_1_1 == 7` masked, a row the next `i_0` owns. The update moved under
    // the init's loops must skip that iteration as the init does, or (with `i_1_1`
    // outermost, so that the masked iteration comes after row 7's own) row 7 is
    // accumulated twice.
    let sched = r#"b0 = get_block("C")
i, j, k = get_loops(b0)
b1 = decompose_reduction(b0, j)
i_0, i_1 = split(i, factors=[None, 7])
i_1_0, i_1_1 = split(i_1, factors=[None, 2])
b2 = get_block("C_init")
i_0_1, i_1_0_1, i_1_1_1, j_init = get_loops(b2)
b3 = get_block("C_update")
reverse_compute_at(b3, j_init)
reorder(i_1_1_1, i_0_1)
"#;
    let (w, sch) = matmul_scheduled(sched);
    computes_the_reference(&w, &sch);
}

#[test]
fn compute_at_refuses_to_move_a_block_before_the_writer_of_its_input() {
    // Found by `random_schedules_of_matmul`: the copy out of the accumulator sat beside
    // the update under `i, j`; moved out to `i` it would go before the `j` loop that holds
    // both the update it copies and the write-back that reads it, and copy zeros.
    let sched = r#"b0 = get_block("C")
b1 = cache_write(b0, write_index=0, scope="local")
i, j, k = get_loops(b0)
reverse_compute_at(b1, j)
b2 = cache_write(b0, write_index=0, scope="local")
"#;
    let (w, mut sch) = matmul_scheduled(sched);
    let copy = sch.get_block("C_local_local").unwrap();
    let write_back = sch.get_block("C_local").unwrap();
    let i = sch.get_loops(write_back).unwrap()[0];
    let before = sch.program().clone();
    let e = sch.compute_at(copy, i).unwrap_err().to_string();
    assert!(e.contains("which C writes under loop"), "{e}");
    assert_eq!(sch.program(), &before);
    computes_the_reference(&w, &sch);
}

#[test]
fn an_update_in_place_is_not_moved_under_a_thread_loop_it_would_repeat_over() {
    // Found by `random_schedules_of_matmul`: a shared accumulator's region is relaxed
    // over `threadIdx.y`, so the update moved under the init's thread loop would run for
    // every row in every thread, adding the products twelve times.
    let sched = r#"b0 = get_block("C")
b1 = cache_write(b0, write_index=0, scope="shared")
i, j, k = get_loops(b0)
bind(i, thread="threadIdx.y")
b2 = decompose_reduction(b0, i)
"#;
    let (w, mut sch) = matmul_scheduled(sched);
    let init = sch.get_block("C_init").unwrap();
    let i_init = sch.get_loops(init).unwrap()[0];
    let update = sch.get_block("C_update").unwrap();
    let before = sch.program().clone();
    let e = sch
        .reverse_compute_at(update, i_init)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("in place") && e.contains("more than once"),
        "{e}"
    );
    assert_eq!(sch.program(), &before);
    computes_the_reference(&w, &sch);
}

#[test]
fn found_seeds_of_the_random_schedules_compute_the_reference() {
    // Seeds of `random_schedules_of_*` that computed wrong results before the fixes of
    // `decompose_reduction` (a region wider than its tile: columns computed twice under
    // one init) and `reverse_compute_at` (above); the sequences they draw depend on this
    // file's generator, so they stay regression checks only while it is unchanged.
    check_random_schedule("dense_bias_relu:m=6,n=10,k=8", 6024052531556711907, 14);
    check_random_schedule("matmul:12x10x8", 15692534281891214474, 14);
    check_random_schedule("matmul:12x10x8", 17044595102590217342, 14);
    check_random_schedule("matmul:12x10x8", 12653794647731834261, 14);
    check_random_schedule("matmul:12x10x8", 2446185111155528355, 14);
    // Rows computed twice under one init, where the rows are `f * 3 // 5 + ax0`, not
    // affine in the loops (found 2026-11-27 after the fixes above).
    check_random_schedule("dense_bias_relu:m=6,n=10,k=8", 2363897033976867237, 14);
    // A conv's rf block computed at a fused loop whose tiles of 2 points need rows
    // `f * 2 // 5 + ax2` that overlap from one f to the next, then one init above f: the
    // visit of its iterations gave up past 4,096 (its three reduction loops counted), so
    // the repetition went unjudged (found 2026-11-28).
    check_random_schedule(
        "conv2d_nchw:n=1,c=3,h=5,w=5,k=4,r=3,s=3,stride=1,pad=1",
        16079333364878333726,
        14,
    );
}

#[test]
fn decompose_reduction_judges_repeated_rows_past_the_reduction_loops() {
    // A conv's rf block (the reduction over r factored out) computed at a fused loop f
    // of its consumer whose tiles of 2 points need the rows `f * 2 // 5 + ax2`: they
    // overlap from one f to the next. Its three reduction loops (rc, the factored r, s)
    // made 16,200 iterations to visit below the init's loop, past the bound, and the
    // init went above f unjudged; each walks a dimension of its own and is not visited.
    let w = workload::preset("conv2d_nchw:n=1,c=3,h=5,w=5,k=4,r=3,s=3,stride=1,pad=1").unwrap();
    let trace = text::parse(
        "b0 = get_block(\"conv2d_nchw\")
nn, ff, yy, xx, rc, ry, rx = get_loops(b0)
b1 = rfactor(ry, factor_axis=0)
b2 = get_block(\"conv2d_nchw\")
ax0, ax1, ax2, ax3, ax4 = get_loops(b2)
ax2_ax3_fused = fuse(ax2, ax3)
ax2_ax3_fused_0, ax2_ax3_fused_1, ax2_ax3_fused_2 = split(ax2_ax3_fused, factors=[15, None, 2])
compute_at(b1, ax2_ax3_fused_0)
",
    )
    .unwrap();
    decompose_reduction_is_refused(&w, &trace, "conv2d_nchw_rf", 1);
}

#[test]
fn decompose_reduction_refuses_a_target_whose_rows_repeat_through_a_floor_division() {
    // T_dense computed at the loop of its consumer's tiles of 6 over the fused 6 x 10
    // output: the rows a tile needs, `f * 3 // 5 + ax0` for ax0 in 0..2, overlap from one
    // f to the next. With the init inside the block each f starts its rows afresh; one
    // init above f would add the updates of the shared rows twice.
    let w = workload::preset("dense_bias_relu:m=6,n=10,k=8").unwrap();
    let trace = text::parse(
        "b0 = get_block(\"T_dense\")
i, j, k = get_loops(b0)
i_j_fused = fuse(i, j)
b1 = get_block(\"T_add\")
b2 = get_block(\"T_dense\")
i_j_fused_1, k_1 = get_loops(b2)
reverse_compute_at(b1, i_j_fused_1)
b3 = get_block(\"T_add\")
i_j_fused_2 = get_loops(b3)
i_j_fused_0, i_j_fused_1_1 = split(i_j_fused_2, factors=[10, 6])
b4 = get_block(\"T_dense\")
b5 = get_block(\"T_add\")
i_j_fused_0_1, i_j_fused_1_2 = get_loops(b5)
compute_at(b4, i_j_fused_0_1)
b6 = get_block(\"T_dense\")
i_j_fused_0_2, ax0, ax1, ax2 = get_loops(b6)
",
    )
    .unwrap();
    decompose_reduction_is_refused(&w, &trace, "T_dense", 0);
}

/// `trace` replayed on `w` computes the reference, and `decompose_reduction` of `block`
/// at its loop number `at` is refused (a block that would visit a point more than once
/// under one init), leaving the program as it was.
fn decompose_reduction_is_refused(w: &workload::Workload, trace: &Trace, block: &str, at: usize) {
    let mut sch = replay(trace, w.to_program(), 0).unwrap();
    computes_the_reference(w, &sch);
    let b = sch.get_block(block).unwrap();
    let target = sch.get_loops(b).unwrap()[at];
    let before = sch.program().clone();
    let err = sch.decompose_reduction(b, target).unwrap_err().to_string();
    assert!(err.contains("more than once"), "{err}");
    assert_eq!(sch.program(), &before);
}

//! Sketch choices as mutation sites: a mutant whose changed choice changes the
//! instructions after it (an NCHW conv's stage stored directly or through shared memory)
//! is grown again from its sketch with the parent's decisions as hints.

use tessel::interp::{check_lowered, TOLERANCE_F16};
use tessel::ir::Program;
use tessel::lower::{lower, Backend};
use tessel::schedule::{replay, Decision, InstKind, Schedule, Trace};
use tessel::search::mutator::{replay_mutant, sites};
use tessel::search::sketch::{apply_sketch, regrow};
use tessel::search::{ir_hash, MutatorKind, SearchSpace, SketchKind};
use tessel::workload;

const CONV: &str = "conv2d_nchw:n=1,c=16,h=6,w=6,k=16,r=3,s=3,stride=1,pad=1,dtype=f16,acc=f32";

fn program(spec: &str) -> Program {
    workload::preset(spec).expect("preset").to_program()
}

/// The decisions of `trace`'s first `n` sampling instructions.
fn first_decisions(trace: &Trace, n: usize) -> Vec<(InstKind, Decision)> {
    trace
        .insts
        .iter()
        .filter(|i| i.kind.is_sampling())
        .take(n)
        .map(|i| (i.kind, i.decision.clone().expect("a decision")))
        .collect()
}

/// The sketch-choice sites of `trace` that choose between two ways (candidates [0, 1]).
fn way_sites(trace: &Trace) -> Vec<usize> {
    sites(trace)
        .into_iter()
        .filter(|s| s.kind == MutatorKind::SketchChoice)
        .map(|s| s.inst)
        .filter(|&i| {
            matches!(trace.insts[i].attr("candidates"),
                Some(tessel::schedule::Operand::List(c)) if c.len() == 2)
        })
        .collect()
}

#[test]
fn a_changed_staging_way_is_grown_again_with_the_decisions_before_it() {
    let space = SearchSpace::cuda_default();
    let reference = program(CONV);
    let mut regrown_any = 0;
    // The GPU-semantics interpreter is slow: each way is run once.
    let mut run = std::collections::BTreeSet::new();
    for seed in 0..8 {
        let mut sch = Schedule::new(reference.clone(), seed);
        apply_sketch(&space, &mut sch, seed, SketchKind::Wgmma).unwrap_or_else(|e| panic!("{e}"));
        let parent = sch.trace().clone();
        let ways = way_sites(&parent);
        assert_eq!(
            ways.len(),
            2,
            "the data's and the weights' way:\n{parent:?}"
        );
        for inst in ways {
            let Some(Decision::Categorical(d)) = parent.insts[inst].decision else {
                panic!("a categorical decision");
            };
            let mutant = parent.with_decision(inst, Decision::Categorical(1 - d));
            // The instructions after the choice are the old way's: a replay of the
            // mutant repeats them (or fails), it does not take the other way.
            if let Ok(replayed) = replay_mutant(&mutant, &reference, 0) {
                assert_eq!(ir_hash(replayed.program()), ir_hash(sch.program()));
            }
            let grown = regrow(
                &space,
                &reference,
                &[SketchKind::Plain, SketchKind::Wgmma],
                &mutant,
                inst,
                seed,
            )
            .unwrap_or_else(|| panic!("seed {seed}: no sketch grows the mutant at {inst}"));
            let through = mutant.insts[..=inst]
                .iter()
                .filter(|i| i.kind.is_sampling())
                .count();
            assert_eq!(
                first_decisions(grown.trace(), through),
                first_decisions(&mutant, through),
                "seed {seed}: the decisions up to the changed one are the mutant's"
            );
            // A trace like any other: it replays, and its kernels compute the reference
            // as the GPU runs them.
            replay(grown.trace(), reference.clone(), 0).expect("the grown trace replays");
            assert_ne!(
                ir_hash(grown.program()),
                ir_hash(sch.program()),
                "another program"
            );
            let lowered = lower(grown.program(), Backend::Cuda).expect("lowers");
            if run.insert(inst) {
                let err = check_lowered(&reference, &lowered, seed)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                assert!(err < TOLERANCE_F16, "seed {seed}: {err}");
            }
            regrown_any += 1;
        }
    }
    assert_eq!(regrown_any, 16);
}

#[test]
fn a_choice_no_sketch_can_make_is_not_grown() {
    let space = SearchSpace::cuda_default();
    let reference = program(CONV);
    let mut sch = Schedule::new(reference.clone(), 3);
    apply_sketch(&space, &mut sch, 3, SketchKind::Wgmma).unwrap();
    let parent = sch.trace().clone();
    let inst = way_sites(&parent)[0];
    let mutant = parent.with_decision(inst, Decision::Categorical(1));
    // The plain sketch alone never makes the wgmma sketch's choices.
    assert!(regrow(&space, &reference, &[SketchKind::Plain], &mutant, inst, 3).is_none());
}

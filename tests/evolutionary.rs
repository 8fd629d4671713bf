//! The evolutionary search at small shapes and small populations: mutators keep traces
//! valid (replay, postprocessors, the interpreter's reference check), the population seeds
//! from measured and transferred traces, proposals are deterministic, split-K is a trace
//! decision, a space of a few dozen candidates is reported exhausted without duplicates,
//! and a cost model steers the batch.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;
use std::sync::Arc;
use tessel::cost_model::Scorer;
use tessel::database::canonical_program;
use tessel::ir::Program;
use tessel::lower::Lowered;
use tessel::schedule::{replay, Decision, Schedule, Trace};
use tessel::search::mutator::{mutate_kind, replay_mutant, sites};
use tessel::search::postproc::{check, verify};
use tessel::search::sketch::{apply_sketch, sketches};
use tessel::search::{
    BlockShape, EvolutionarySearch, MeasuredResult, MutatorKind, RandomSearch, SearchSpace,
    SearchStrategy, SketchKind, TargetLimits, TileClass,
};
use tessel::target::cuda::CudaLimits;

fn program(spec: &str) -> Program {
    let w = tessel::workload::from_cli(spec, |_| Err(std::io::Error::other("no files")))
        .expect("workload");
    canonical_program(&w).expect("canonical program")
}

fn cuda() -> (SearchSpace, TargetLimits) {
    (
        SearchSpace::cuda_default(),
        TargetLimits::Cuda(CudaLimits::sm90_default()),
    )
}

fn cpu() -> (SearchSpace, TargetLimits) {
    (SearchSpace::cpu_default(), TargetLimits::Cpu)
}

/// A space whose split-K sketch applies to small shapes, with a small population.
fn small(mut space: SearchSpace, population: usize, generations: usize) -> SearchSpace {
    if let Some(rule) = space.split_k.as_mut() {
        rule.min_reduction = 1;
    }
    space.search.population = population;
    space.search.generations = generations;
    space
}

/// Valid samples of each sketch of the space (they replay and pass the postprocessors).
fn samples(
    space: &SearchSpace,
    target: &TargetLimits,
    p: &Program,
    per_sketch: usize,
) -> Vec<Trace> {
    let mut out = Vec::new();
    for kind in sketches(space, p).expect("sketches") {
        let mut found = 0;
        for seed in 0..200u64 {
            if found == per_sketch {
                break;
            }
            let mut sch = Schedule::new(p.clone(), seed);
            if apply_sketch(space, &mut sch, seed * 31 + 7, kind).is_err() {
                continue;
            }
            if verify(sch.program(), space, target).is_ok() {
                out.push(sch.trace().clone());
                found += 1;
            }
        }
        assert_eq!(found, per_sketch, "{kind:?}: too few valid samples");
    }
    out
}

/// Per mutator kind: mutants tried and accepted; each accepted mutant differs from its
/// parent in exactly one decision; the first accepted mutant of each parent computes the
/// reference's answer.
fn check_mutators(spec: &str, space: &SearchSpace, target: &TargetLimits, expect: &[MutatorKind]) {
    let p = program(spec);
    let parents = samples(space, target, &p, 2);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for kind in expect {
        let (mut tried, mut accepted) = (0, 0);
        for parent in &parents {
            // The first accepted mutant of each parent (so of each sketch) is run.
            let mut interp_checked = 0;
            for _ in 0..4 {
                let Some(mutant) = mutate_kind(parent, *kind, &mut rng) else {
                    break;
                };
                tried += 1;
                let changed: Vec<usize> = parent
                    .decisions()
                    .iter()
                    .zip(mutant.decisions())
                    .filter(|(a, b)| a.1 != b.1)
                    .map(|(a, _)| a.0)
                    .collect();
                // One decision changes (a split-K count may also invalidate the tile
                // sizes of the loop it shortens, which replay samples afresh).
                assert_eq!(changed.len(), 1, "{spec} {kind:?}: one decision changes");
                let Ok(sch) = replay_mutant(&mutant, &p, 0) else {
                    continue;
                };
                tessel::ir::verify::verify(sch.program()).expect("a replayed mutant verifies");
                if verify(sch.program(), space, target).is_err() {
                    continue;
                }
                accepted += 1;
                if interp_checked < 1 {
                    interp_checked += 1;
                    if let Err(e) = tessel::interp::check(&p, sch.program(), 3) {
                        panic!(
                            "{spec} {kind:?}: a mutant computes a wrong answer: {e}\n{}",
                            tessel::schedule::text::print(&mutant)
                        );
                    }
                }
            }
        }
        assert!(tried > 0, "{spec}: no {kind:?} site in the samples");
        assert!(
            accepted > 0,
            "{spec}: no {kind:?} mutant accepted of {tried}"
        );
    }
}

#[test]
fn mutators_keep_cuda_traces_valid() {
    let (space, target) = cuda();
    let space = small(space, 8, 1);
    use MutatorKind::*;
    check_mutators(
        "matmul:32x32x64",
        &space,
        &target,
        &[TileSize, Unroll, VectorLength, SplitK],
    );
    check_mutators(
        "conv2d_nchw:n=1,c=4,h=8,w=8,k=8,r=3,s=3,stride=1,pad=1",
        &space,
        &target,
        &[TileSize, Unroll, VectorLength],
    );
    // Odd extents: the tiles are `sample_tile`s (imperfect), mutated the same way.
    check_mutators(
        "matmul:37x29x19",
        &space,
        &target,
        &[TileSize, Unroll, VectorLength],
    );
    // Extents with few divisors are padded to a multiple drawn among several (97 to 112
    // or 128): the padding mutator draws another, and the loop's tiles are fitted to the
    // new extent.
    check_mutators("matmul:97x61x53", &space, &target, &[TileSize, Padding]);
    // 16-bit operands: the tensor-core sketch beside the plain one; its warp and mma
    // tiles, reduction steps and pipeline depth are decisions the mutators change.
    check_mutators(
        "matmul:m=64,n=96,k=96,dtype=f16,acc=f32",
        &space,
        &target,
        &[TileSize, PipelineStages],
    );
}

#[test]
fn mutators_keep_cpu_traces_valid() {
    let (space, target) = cpu();
    let space = small(space, 8, 1);
    use MutatorKind::*;
    // The compute location: the plain sketch's write-back (parallel loop or outer tile),
    // the register-tile sketch's packed panel (per column tile or per reduction block).
    check_mutators(
        "matmul:32x32x64",
        &space,
        &target,
        &[TileSize, Unroll, ComputeLocation],
    );
    check_mutators(
        "conv2d_nchw:n=1,c=4,h=8,w=8,k=8,r=3,s=3,stride=1,pad=1",
        &space,
        &target,
        &[TileSize, Unroll, ComputeLocation],
    );
}

/// Measured results of `traces` on `p`, the first the fastest.
fn measured(p: &Program, traces: &[Trace]) -> Vec<MeasuredResult> {
    traces
        .iter()
        .enumerate()
        .map(|(i, t)| MeasuredResult {
            trace: t.clone(),
            ir_hash: tessel::search::ir_hash(replay(t, p.clone(), 0).expect("replay").program()),
            median_seconds: Some(1e-3 * (i + 1) as f64),
        })
        .collect()
}

#[test]
fn the_population_seeds_from_measured_and_transferred_traces() {
    let (space, target) = cuda();
    let space = small(space, 40, 1);
    let p = program("matmul:64x64x64");
    let known = samples(&space, &target, &p, 6);
    let mut search = EvolutionarySearch::new(space.clone(), target.clone(), p.clone(), 1);
    let results = measured(&p, &known);
    search.feedback(&results);
    // Transfers: traces of another shape (most of whose tile decisions do not fit here)
    // and of this one.
    let other = program("matmul:32x64x128");
    let mut transfers = samples(&space, &target, &other, 3);
    let here = samples(
        &small(space.clone(), 40, 1),
        &target,
        &program("matmul:64x64x64"),
        1,
    );
    let fits = |t: &Trace| {
        replay(t, p.clone(), 0)
            .ok()
            .is_some_and(|s| check(s.program(), &space, &target).is_ok())
    };
    // A trace of this workload not measured yet, found by changing an unroll decision.
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let fresh_here = (0..20)
        .filter_map(|_| mutate_kind(&here[0], MutatorKind::Unroll, &mut rng))
        .find(|t| fits(t) && !known.contains(t))
        .expect("an unroll mutant");
    transfers.push(fresh_here);
    let expect_transferred = transfers.iter().filter(|t| fits(t)).count();
    search.seed_traces(&transfers);
    let proposal = search.propose(8, &mut |_| false);
    let summary = search.last_round().clone();
    // 20% of 40 = 8 measured slots, 12 measured traces (6 per sketch).
    assert_eq!(known.len(), 12);
    assert_eq!(summary.measured, 8, "{summary:?}");
    assert_eq!(summary.transferred, expect_transferred, "{summary:?}");
    assert!(summary.transferred >= 1);
    assert_eq!(
        summary.fresh + summary.measured + summary.transferred,
        40,
        "{summary:?}"
    );
    assert_eq!(proposal.candidates.len(), 8);
    // Nothing measured is proposed again.
    let measured_hashes: HashSet<&str> = results.iter().map(|r| r.ir_hash.as_str()).collect();
    assert!(proposal
        .candidates
        .iter()
        .all(|c| !measured_hashes.contains(c.ir_hash.as_str())));
}

#[test]
fn a_rounds_population_is_in_proportion_to_what_it_proposes() {
    let (space, target) = cuda();
    let mut space = small(space, 64, 1);
    space.search.population_per_candidate = 8;
    space.search.min_population = 16;
    let p = program("matmul:64x64x64");
    let mut search = EvolutionarySearch::new(space, target, p, 5);
    // Per proposed candidate 8 a generation: 4 -> 32, 1 -> the floor of 16, 12 -> 96
    // capped at the population of 64.
    for (n, population) in [(4, 32), (1, 16), (12, 64)] {
        let proposal = search.propose(n, &mut |_| false);
        let summary = search.last_round().clone();
        assert_eq!(proposal.candidates.len(), n, "{summary:?}");
        assert_eq!(
            summary.fresh + summary.measured + summary.transferred,
            population,
            "n = {n}: {summary:?}"
        );
        assert!(
            summary.generations.iter().all(|g| *g <= population),
            "n = {n}: {summary:?}"
        );
        assert!(
            summary.generations.iter().any(|g| *g > population / 2),
            "n = {n}: {summary:?}"
        );
    }
}

fn proposal_texts(seed: u64) -> Vec<String> {
    let (space, target) = cuda();
    let space = small(space, 24, 2);
    let p = program("matmul:64x64x64");
    let known = samples(&space, &target, &p, 2);
    let mut search = EvolutionarySearch::new(space, target, p.clone(), seed);
    search.feedback(&measured(&p, &known));
    let mut out = Vec::new();
    for _ in 0..2 {
        for c in search.propose(6, &mut |_| false).candidates {
            out.push(tessel::schedule::text::print(&c.trace));
        }
    }
    out
}

#[test]
fn the_same_seed_gives_the_same_proposals() {
    let a = proposal_texts(11);
    assert_eq!(a.len(), 12);
    assert_eq!(a, proposal_texts(11));
    assert_ne!(a, proposal_texts(12));
}

#[test]
fn split_k_is_a_decision_in_the_printed_trace() {
    let (space, target) = cuda();
    let space = small(space, 24, 1);
    let p = program("matmul:16x16x256");
    assert_eq!(
        sketches(&space, &p).expect("sketches"),
        vec![SketchKind::Plain, SketchKind::SplitK]
    );
    let mut search = EvolutionarySearch::new(space, target, p, 2);
    let proposal = search.propose(12, &mut |_| false);
    let split = proposal
        .candidates
        .iter()
        .find(|c| {
            c.trace
                .insts
                .iter()
                .any(|i| i.kind == tessel::schedule::InstKind::Rfactor)
        })
        .expect("a split-K candidate in the batch");
    let site = sites(&split.trace)
        .into_iter()
        .find(|s| s.kind == MutatorKind::SplitK)
        .expect("a split-K site");
    let text = tessel::schedule::text::print(&split.trace);
    let line = text.lines().nth(site.inst).expect("the split-K line");
    let Some(Decision::Categorical(i)) = &split.trace.insts[site.inst].decision else {
        panic!("the split-K count is a categorical decision");
    };
    assert!(
        line.contains("sample_categorical") && line.contains(&format!("decision={i}")),
        "{line}\n{text}"
    );
    let rfactor_line = text
        .lines()
        .position(|l| l.contains("rfactor("))
        .expect("rfactor");
    assert!(rfactor_line > site.inst, "{text}");
}

/// A padding mutant of an odd GEMM pads a loop to another multiple, so to another extent:
/// its tile decisions are fitted to it, the inner levels (a thread's outputs, the block's
/// threads) kept wherever they divide the new extent, not sampled afresh.
#[test]
fn a_padding_mutant_keeps_the_inner_tiles_that_divide_its_new_extent() {
    let (space, target) = cuda();
    let space = small(space, 8, 1);
    let p = program("matmul:m=1556,n=3953,k=2198");
    let parents = samples(&space, &target, &p, 3);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (mut refitted, mut replayed) = (0, 0);
    for parent in &parents {
        for _ in 0..8 {
            let Some(mutant) = mutate_kind(parent, MutatorKind::Padding, &mut rng) else {
                break;
            };
            let Ok(sch) = replay_mutant(&mutant, &p, 0) else {
                continue;
            };
            replayed += 1;
            let fitted = sch.trace();
            assert_eq!(fitted.insts.len(), parent.insts.len());
            for (i, inst) in parent.insts.iter().enumerate() {
                if inst.kind != tessel::schedule::InstKind::SamplePerfectTile {
                    continue;
                }
                let (Some(Decision::Tile(t)), Some(Decision::Tile(u))) =
                    (&inst.decision, &fitted.insts[i].decision)
                else {
                    panic!("instruction {i}: tile decisions on both sides");
                };
                let extent: i64 = u.iter().product();
                let inner: i64 = t[1..].iter().product();
                if extent != t.iter().product::<i64>() && extent % inner == 0 {
                    assert_eq!(u[1..], t[1..], "instruction {i}: {t:?} fitted to {u:?}");
                    refitted += 1;
                }
            }
        }
    }
    assert!(
        replayed > 0 && refitted > 0,
        "{replayed} mutants, {refitted} refitted"
    );
}

/// With imperfect tiles a prime GEMM has a large space: every call proposes new candidates,
/// never one twice.
#[test]
fn a_prime_gemm_gets_new_candidates_without_duplicates() {
    let (space, target) = cuda();
    let space = small(space, 64, 1);
    let p = program("matmul:1009x523x311");
    let mut search = EvolutionarySearch::new(space, target, p, 3);
    let mut hashes = HashSet::new();
    for _ in 0..3 {
        let proposal = search.propose(16, &mut |_| false);
        assert!(!proposal.exhausted && proposal.candidates.len() == 16);
        for c in &proposal.candidates {
            assert!(hashes.insert(c.ir_hash.clone()), "a duplicate was proposed");
        }
    }
}

/// With exact-divisor tiles only (`max_waste = 0`), a prime GEMM has a few dozen
/// candidates: the search says it is exhausted instead of spinning, proposing none twice.
#[test]
fn a_prime_gemm_is_exhausted_without_duplicates() {
    let (space, target) = cuda();
    let mut space = small(space, 64, 2);
    space.max_waste = 0.0;
    // A's transposing kernel would multiply the few tilings by its own decisions.
    space.transpose_kernels = false;
    let p = program("matmul:1009x523x311");
    let mut search = EvolutionarySearch::new(space, target, p, 3);
    let mut hashes = HashSet::new();
    let mut exhausted_after = None;
    for call in 0..12 {
        let proposal = search.propose(16, &mut |_| false);
        for c in &proposal.candidates {
            assert!(hashes.insert(c.ir_hash.clone()), "a duplicate was proposed");
        }
        if proposal.exhausted {
            exhausted_after = Some(call);
            break;
        }
    }
    let calls = exhausted_after.expect("the space is reported exhausted");
    assert!(
        !hashes.is_empty() && hashes.len() < 16 * (calls + 1),
        "{} distinct",
        hashes.len()
    );
}

/// A toy cost model: more threads per block scores higher.
struct PreferThreads;

impl Scorer for PreferThreads {
    fn name(&self) -> &str {
        "prefer-threads"
    }
    fn score(&self, candidates: &[&Lowered]) -> Vec<f64> {
        candidates.iter().map(|l| threads(l)).collect()
    }
}

fn threads(l: &Lowered) -> f64 {
    l.kernels.iter().map(|k| k.threads()).max().unwrap_or(0) as f64
}

#[test]
fn a_scorer_steers_the_batch() {
    let (space, target) = cuda();
    let space = small(space, 48, 2);
    let p = program("matmul:64x64x64");
    let mut evo = EvolutionarySearch::new(space.clone(), target.clone(), p.clone(), 4);
    evo.set_scorer(Some(Arc::new(PreferThreads)));
    assert!(evo.uses_model());
    let mut random = RandomSearch::new(space, target, p, 4);
    let mean = |s: &mut dyn SearchStrategy| {
        let c = s.propose(16, &mut |_| false).candidates;
        assert_eq!(c.len(), 16);
        c.iter().map(|c| threads(&c.verified.lowered)).sum::<f64>() / c.len() as f64
    };
    let (e, r) = (mean(&mut evo), mean(&mut random));
    assert!(e > r, "evolutionary {e} vs random {r} threads per block");
    let stats = evo.mutator_stats();
    assert!(
        stats
            .iter()
            .any(|(_, tried, accepted)| *tried > 0 && *accepted > 0),
        "{stats:?}"
    );
}

/// The structure of a trace (printed without its decisions) and its tile decisions: what
/// makes candidates one tiling for the batch cap.
fn tiling(t: &Trace) -> (String, Vec<Vec<i64>>) {
    let mut bare = t.clone();
    for inst in &mut bare.insts {
        inst.decision = None;
    }
    let tiles = t
        .insts
        .iter()
        .filter_map(|i| match &i.decision {
            Some(Decision::Tile(d)) => Some(d.clone()),
            _ => None,
        })
        .collect();
    (tessel::schedule::text::print(&bare), tiles)
}

/// A scorer that ranks by block size scores every unroll and stage variant of a tiling
/// alike; the batch's cap keeps one tiling from filling it. (The floor for each class of
/// outputs per thread is off here: it spreads the batch over tilings too.)
#[test]
fn one_tiling_takes_at_most_its_share_of_a_batch() {
    let largest_share = |share: f64| {
        largest_group(
            "matmul:128x128x128",
            Arc::new(PreferThreads),
            |space| {
                space.search.tiling_share = share;
                space.search.thread_tile_share = 0.0;
            },
            |c| tiling(&c.trace),
        )
    };
    assert_capped(largest_share(1.0), largest_share(0.125), 2, "tiling");
}

/// A batch of 16 that `scorer` ranks on `spec`, in the CUDA space as `edit` changes it,
/// with no fresh samples, from the search of `seed`; the caps and floors must not leave the
/// batch short.
fn batch(
    spec: &str,
    scorer: Arc<dyn Scorer>,
    edit: impl Fn(&mut SearchSpace),
    seed: u64,
) -> Vec<tessel::search::Candidate> {
    let (mut space, target) = cuda();
    space.search.eps_greedy = 0.0;
    edit(&mut space);
    let space = small(space, 64, 2);
    let mut evo = EvolutionarySearch::new(space, target, program(spec), seed);
    evo.set_scorer(Some(scorer));
    let c = evo.propose(16, &mut |_| false).candidates;
    assert_eq!(c.len(), 16, "the cap must not leave the batch short");
    c
}

/// The most candidates one group (by `key`) has in the [`batch`] of each of three seeds
/// (how large a group grows without a cap depends on one search's course).
fn largest_group<K: std::hash::Hash + Eq>(
    spec: &str,
    scorer: Arc<dyn Scorer>,
    edit: impl Fn(&mut SearchSpace),
    key: impl Fn(&tessel::search::Candidate) -> K,
) -> Vec<usize> {
    (5..8)
        .map(|seed| {
            let mut count = std::collections::HashMap::new();
            for x in &batch(spec, scorer.clone(), &edit, seed) {
                *count.entry(key(x)).or_insert(0usize) += 1;
            }
            count.into_values().max().unwrap_or(0)
        })
        .collect()
}

/// Per seed, the largest group of a batch of 16 without the cap and with it: the cap never
/// made a group larger, and in some search it held a group that had more than `most`
/// without it to `most`. (Not in every search: a round with too few groups to fill the
/// batch under the cap fills it by score without it.)
fn assert_capped(uncapped: Vec<usize>, capped: Vec<usize>, most: usize, group: &str) {
    let pairs: Vec<(usize, usize)> = uncapped.into_iter().zip(capped).collect();
    assert!(
        pairs.iter().all(|(u, c)| c <= u),
        "(without, with the cap) per seed, the largest {group}: {pairs:?}"
    );
    assert!(
        pairs.iter().any(|(u, c)| *u > most && *c <= most),
        "(without, with the cap) per seed, the largest {group}: {pairs:?}"
    );
}

/// A toy cost model: fewer kernels score higher (the branches that copy no operand by a
/// kernel of its own), then more threads per block.
struct PreferOneKernel;

impl Scorer for PreferOneKernel {
    fn name(&self) -> &str {
        "prefer-one-kernel"
    }
    fn score(&self, candidates: &[&Lowered]) -> Vec<f64> {
        candidates
            .iter()
            .map(|l| threads(l) / 1e4 - l.kernels.len() as f64)
            .collect()
    }
}

/// A scorer that prefers one branch (no copies by kernels of their own) fills half a
/// batch with it; the branch cap leaves the rest of the batch to the best of the other
/// branches (the floor for each class of outputs per thread off, as above).
#[test]
fn one_branch_takes_at_most_its_share_of_a_batch() {
    let largest_share = |share: f64| {
        largest_group(
            "conv2d_nchw:n=2,c=11,h=15,w=15,k=9,r=5,s=5,stride=2,pad=2",
            Arc::new(PreferOneKernel),
            |space| {
                space.search.branch_share = share;
                space.search.thread_tile_share = 0.0;
                space.gemm_view_windowed = 0.5;
            },
            |c| tessel::search::Branch::of(&c.trace, &c.verified.lowered),
        )
    };
    assert_capped(largest_share(1.0), largest_share(0.25), 4, "branch");
}

/// A toy cost model that ranks the fewest outputs per thread first (as the model trained
/// on the shipped records ranks the large register tiles last).
struct PreferSmallTiles;

impl Scorer for PreferSmallTiles {
    fn name(&self) -> &str {
        "prefer-small-tiles"
    }
    fn score(&self, candidates: &[&Lowered]) -> Vec<f64> {
        candidates
            .iter()
            .map(|l| {
                let shape = BlockShape::of(l);
                -(shape.outputs as f64) / shape.threads.max(1) as f64
            })
            .collect()
    }
}

/// A scorer that ranks large register tiles last leaves them out of a batch; the floor
/// gives each class of outputs per thread its `thread_tile_share` of the batch, with the
/// shipped class bounds and with finer ones.
#[test]
fn each_class_of_outputs_per_thread_gets_its_share_of_a_batch() {
    let shipped = cuda().0.search.thread_tile_classes;
    assert_eq!(shipped, [16, 64]);
    let labels: Vec<String> = TileClass::all(&shipped)
        .map(|c| c.range(&shipped))
        .collect();
    assert_eq!(labels, ["..=16", "17..=64", "65.."]);
    let of_class = |share: f64, bounds: &[usize], class: TileClass| {
        batch(
            "matmul:512x512x512",
            Arc::new(PreferSmallTiles),
            |space| {
                space.search.thread_tile_share = share;
                space.search.thread_tile_classes = bounds.to_vec();
            },
            5,
        )
        .iter()
        .filter(|c| TileClass::of(&c.verified.lowered, bounds) == class)
        .count()
    };
    assert!(of_class(0.0, &shipped, TileClass(2)) < 2);
    for bounds in [&shipped[..], &[16, 32, 64]] {
        for class in TileClass::all(bounds) {
            // ceil(16 x 0.125) = 2 of each class.
            let n = of_class(0.125, bounds, class);
            let range = class.range(bounds);
            assert!(
                n >= 2,
                "{n} candidates of {range} a thread in a batch of 16"
            );
        }
    }
}

/// A trace of `p` as recorded before a decision existed: the first sample of the plain
/// sketch in which `at` finds the decision's line (among the printed trace's lines) with
/// the value 0, less that line, that still replays and passes the checks.
fn trace_before_a_decision(
    space: &SearchSpace,
    target: &TargetLimits,
    p: &Program,
    at: impl Fn(&[&str]) -> Option<usize>,
) -> Option<Trace> {
    (0..64u64).find_map(|seed| {
        let mut sch = Schedule::new(p.clone(), seed);
        apply_sketch(space, &mut sch, seed, SketchKind::Plain).ok()?;
        let text = tessel::schedule::text::print(sch.trace());
        let mut lines: Vec<&str> = text.lines().collect();
        let at = at(&lines)?;
        if !lines.get(at)?.ends_with("decision=0)") {
            return None;
        }
        lines.remove(at);
        let trace = tessel::schedule::text::parse(&lines.join("\n")).ok()?;
        let replayed = replay(&trace, p.clone(), 0).ok()?;
        check(replayed.program(), space, target).ok()?;
        Some(trace)
    })
}

/// Of 8 searches of `p` seeded with `old`, how many grew it again into a second member
/// (each takes the trace itself, and its regrowth where that differs).
fn seeds_grown(space: &SearchSpace, target: &TargetLimits, p: &Program, old: &Trace) -> usize {
    (0..8)
        .filter(|seed| {
            let mut search =
                EvolutionarySearch::new(space.clone(), target.clone(), p.clone(), *seed);
            search.seed_traces(std::slice::from_ref(old));
            search.propose(4, &mut |_| false);
            let transferred = search.last_round().transferred;
            assert!((1..=2).contains(&transferred), "seed {seed}: {transferred}");
            transferred == 2
        })
        .count()
}

#[test]
fn a_transferred_trace_from_before_a_new_decision_is_also_grown_again_with_it() {
    // k = 37 and n = 53 leave the operands' rows no whole 16-byte vectors: the CUDA
    // sketches decide whether their padding runs as kernels of their own. A trace
    // recorded before that decision existed is the one the sketch makes with the padding
    // in the fetch, less the decision's instruction. (Hints are matched by candidate
    // lists: the transpose-kernel coin, also of [0, 1], would lend the new decision its
    // value; its own regrowth is the next test's.)
    let (space, target) = cuda();
    let mut space = small(space, 24, 1);
    space.transpose_kernels = false;
    let p = program("matmul:m=64,n=53,k=37");
    let old = trace_before_a_decision(&space, &target, &p, |lines| {
        let at = lines.iter().position(|l| l.starts_with("pad_einsum("))? + 1;
        lines.get(at)?.contains("candidates=[0, 1]").then_some(at)
    })
    .expect("a sample with the padding in the fetch that passes the checks");
    let has_decision = |t: &Trace| {
        let text = tessel::schedule::text::print(t);
        let lines: Vec<&str> = text.lines().collect();
        lines
            .iter()
            .position(|l| l.starts_with("pad_einsum("))
            .and_then(|at| lines.get(at + 1))
            .is_some_and(|l| l.contains("candidates=[0, 1]"))
    };
    assert!(!has_decision(&old));
    // Grown again, the trace keeps its decisions and draws the new one: where it draws
    // the padding as kernels of its own, a second member joins the population. So too on
    // another workload (n = 60: its padding multiples are drawn from [1, 16, 32, 64],
    // the trace's from [16, 32, 64]), where the trace keeps the multiple it chose.
    for spec in ["matmul:m=64,n=53,k=37", "matmul:m=64,n=60,k=37"] {
        let grown = seeds_grown(&space, &target, &program(spec), &old);
        assert!(
            grown > 0,
            "{spec}: no seed grew the trace into the new decision"
        );
    }
}

#[test]
fn a_transferred_trace_from_before_the_transpose_kernels_is_grown_into_them() {
    // An NT GEMM's fetch transposes both operands; a trace recorded before the
    // transpose-kernel decision existed is the sketch's sample with the coin at 0, less
    // the coin's instruction (every record shipped before it is such a trace).
    let (space, target) = cuda();
    let space = small(space, 24, 1);
    let p = program("matmul:m=64,n=64,k=64,layout=nt");
    let coin = |line: &str| line.contains("candidates=[0, 1]");
    let old = trace_before_a_decision(&space, &target, &p, |lines| {
        let at = lines.iter().position(|l| coin(l))?;
        (lines.iter().filter(|l| coin(l)).count() == 1).then_some(at)
    })
    .expect("a sample with the transposes in the fetch that passes the checks");
    let grown = seeds_grown(&space, &target, &p, &old);
    assert!(
        grown > 0,
        "no seed grew the trace into the transpose kernels"
    );
}

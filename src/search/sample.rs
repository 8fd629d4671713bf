//! What a design space offers for one workload, without compiling or measuring:
//! candidates drawn by [`RandomSearch`] (after the postprocessors), each summarised by its
//! trace, threads per block, output elements per block, shared memory and pipeline stages
//! (`tessel sample`).

use super::postproc::{verify, TargetLimits};
use super::random::{ir_hash, Candidate, RandomSearch, SearchStrategy};
use super::sketch;
use super::space::SearchSpace;
use crate::ir::{Expr, IterKind, LoopKind, Node, Program, ThreadTag};
use crate::schedule::hints::Hints;
use crate::schedule::Trace;
use serde::Serialize;

/// One candidate of the space, as `tessel sample` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampleSummary {
    /// The trace in its text form (decisions included).
    pub trace: String,
    /// The thread block of the kernel that computes the main (largest) reduction, or
    /// where none can be told, the largest of the candidate's kernels (1 on the CPU).
    pub threads_per_block: i64,
    /// Output elements of the main (largest) reduction that one thread block computes
    /// (on the CPU: one parallel task), padding of imperfect tiles included.
    pub outputs_per_block: i64,
    /// The largest shared-memory allocation of the candidate's kernels, in bytes.
    pub shared_bytes: i64,
    /// The software-pipeline stages of the shared fetch (1: single-buffered).
    pub pipeline_stages: i64,
}

/// Why a space offered no candidate at all: what became of the samples drawn.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "the space offers no candidate: {failed} samples failed to apply their sketch, \
     {rejected} were refused{}",
    first_rejection.as_ref().map(|r| format!(" (the first: {r})")).unwrap_or_default()
)]
pub struct NoCandidate {
    pub failed: usize,
    pub rejected: usize,
    pub first_rejection: Option<String>,
}

/// Up to `n` distinct candidates of `program`'s space for `target`, drawn with `seed`.
/// Fewer come back when the space looks exhausted; none is an error that says why.
pub fn sample(
    space: &SearchSpace,
    target: &TargetLimits,
    program: &Program,
    n: usize,
    seed: u64,
) -> Result<Vec<SampleSummary>, NoCandidate> {
    let mut search = RandomSearch::new(space.clone(), target.clone(), program.clone(), seed);
    let proposal = search.propose(n, &mut |_| false);
    if proposal.candidates.is_empty() {
        return Err(NoCandidate {
            failed: proposal.instantiation_failures,
            rejected: proposal.rejected.len(),
            first_rejection: proposal.rejected.first().map(|(_, r)| r.to_string()),
        });
    }
    Ok(proposal.candidates.iter().map(summarise).collect())
}

/// Why `trace`'s decisions grew no candidate ([`sample_like`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NotLike {
    #[error("no sketch of the space applies with the trace's decisions")]
    NoSketch,
    #[error("the candidate grown from the trace's decisions was refused: {0}")]
    Refused(String),
}

/// The candidate grown from `trace`'s decisions (see [`crate::schedule::hints`]): each of
/// the program's sketches is sampled afresh taking the trace's decisions first where it
/// meets the same sampling instruction, the others drawn from `seed`, and the sketch that
/// takes the most of them gives the candidate. A decision edited in the trace, one a
/// sketch branches on, so gives the trace's neighbour on the other branch (`tessel sample
/// --like`), the decisions after the branch kept where the sketch meets them again.
pub fn sample_like(
    space: &SearchSpace,
    target: &TargetLimits,
    program: &Program,
    trace: &Trace,
    seed: u64,
) -> Result<SampleSummary, NotLike> {
    let hints = Hints::from_trace(trace);
    let kinds = sketch::sketches(space, program).map_err(|_| NotLike::NoSketch)?;
    let grown = kinds
        .into_iter()
        .filter_map(|kind| {
            let mut sch = sketch::sample_afresh(space, program, kind, seed, Some(hints.clone()))?;
            let taken = sch.take_hints().map_or(0, |h| h.taken());
            Some((taken, sch))
        })
        .reduce(|best, next| if next.0 > best.0 { next } else { best });
    let (_, sch) = grown.ok_or(NotLike::NoSketch)?;
    let sch = super::padding::tighten_if_asked(space, sch, program);
    let verified =
        verify(sch.program(), space, target).map_err(|r| NotLike::Refused(r.to_string()))?;
    Ok(summarise(&Candidate {
        trace: sch.trace().clone(),
        ir_hash: ir_hash(sch.program()),
        verified,
    }))
}

fn summarise(c: &Candidate) -> SampleSummary {
    let lowered = &c.verified.lowered;
    let shape = BlockShape::of(lowered);
    let shared_bytes = lowered
        .kernels
        .iter()
        .map(|k| k.shared_bytes(&lowered.program))
        .max();
    SampleSummary {
        trace: crate::schedule::text::print(&c.trace),
        threads_per_block: shape.threads,
        outputs_per_block: shape.outputs,
        shared_bytes: shared_bytes.unwrap_or(0),
        pipeline_stages: pipeline_stages(&lowered.program),
    }
}

/// The thread block of a candidate's main computation: its threads and the output
/// elements it computes (the figures of [`SampleSummary`]; `cargo bench --bench
/// search_round` counts a batch's shapes with it).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct BlockShape {
    /// Threads of the kernel that computes the main reduction (where none can be told,
    /// of the candidate's largest kernel; 1 on the CPU).
    pub threads: i64,
    /// Output elements of the main reduction one block computes ([`outputs_per_block`]).
    pub outputs: i64,
}

impl BlockShape {
    pub fn of(lowered: &crate::lower::Lowered) -> BlockShape {
        let threads = main_kernel(lowered)
            .map(|k| k.threads())
            .or_else(|| lowered.kernels.iter().map(|k| k.threads()).max());
        BlockShape {
            threads: threads.unwrap_or(1),
            outputs: outputs_per_block(&lowered.program),
        }
    }
}

/// The most stages of any software-pipelined loop of `p` (1 when none is).
fn pipeline_stages(p: &Program) -> i64 {
    p.walk()
        .into_iter()
        .filter_map(|(n, _)| match n {
            Node::Loop(l) => crate::ir::pipeline::plan(p, l).ok().flatten(),
            Node::Block(_) => None,
        })
        .map(|plan| plan.stages)
        .max()
        .unwrap_or(1)
}

/// The kernel that stores into the main block's buffer (see [`outputs_per_block`]): the
/// GEMM's, not a padding or summing kernel beside it.
fn main_kernel(lowered: &crate::lower::Lowered) -> Option<&crate::lower::Kernel> {
    let p = &lowered.program;
    let written = p.block(main_block(p)?).body.buffer;
    lowered.kernels.iter().find(|k| {
        let mut acc = crate::lower::kernel::Accesses::default();
        k.body.iter().for_each(|s| s.accesses(&mut acc));
        acc.writes.contains(&written)
    })
}

/// Output elements one thread block (CPU: one parallel task) computes for the main
/// block, the reduction block with the largest iteration domain: the product of the
/// extents of the loops around it that carry none of its reduction variables (nor the
/// axes of partial results a later block sums, [`partial_vars`]) and lie
/// inside its outermost `blockIdx`- or `parallel`-bound loop. A program with no such
/// binding counts its whole output.
pub fn outputs_per_block(p: &Program) -> i64 {
    let Some(main) = main_block(p) else {
        return 0;
    };
    let blk = p.block(main);
    let partial = partial_vars(p, main);
    let reduce_vars: Vec<Expr> = blk
        .iter_vars
        .iter()
        .zip(&blk.bindings)
        .filter(|(iv, _)| iv.kind == IterKind::Reduce || partial.contains(&iv.var))
        .map(|(_, e)| e.clone())
        .collect();
    let loops = p.ancestors(Node::Block(main));
    let outer = loops
        .iter()
        .rposition(|l| {
            matches!(
                p.lp(*l).kind,
                LoopKind::Parallel | LoopKind::Thread(ThreadTag::BlockIdx(_))
            )
        })
        .map_or(0, |i| i + 1);
    loops[outer..]
        .iter()
        .filter(|l| {
            let v = p.lp(**l).var;
            !reduce_vars.iter().any(|e| e.uses_var(v))
        })
        .map(|l| p.lp(*l).extent)
        .fold(1i64, |a, e| a.saturating_mul(e))
}

/// The spatial iteration variables of `main` that index partial results: those at the
/// axes of its output that a consumer reduces over (an rf block's factored axis, whose
/// elements the sum adds into one output element; a cross-thread reduction's lanes),
/// followed through copies of the output of the same shape (a local accumulator's
/// write-back into shared memory).
fn partial_vars(p: &Program, main: crate::ir::BlockId) -> Vec<crate::ir::VarId> {
    let blk = p.block(main);
    let shape = &p.buffer(blk.body.buffer).shape;
    let mut copies = vec![blk.body.buffer];
    for b in p.blocks_in_order() {
        let copy = p.block(b);
        let reads_copy = p.block_reads(b).iter().any(|(buf, _)| copies.contains(buf));
        if !copy.is_reduction() && reads_copy && p.buffer(copy.body.buffer).shape == *shape {
            copies.push(copy.body.buffer);
        }
    }
    let mut axes = Vec::new();
    for b in p.blocks_in_order() {
        let consumer = p.block(b);
        let reduced: Vec<crate::ir::VarId> = consumer
            .iter_vars
            .iter()
            .filter(|iv| iv.kind == IterKind::Reduce)
            .map(|iv| iv.var)
            .collect();
        for (buf, idx) in p.block_reads(b) {
            if !copies.contains(&buf) || b == main || !consumer.is_reduction() {
                continue;
            }
            for (a, e) in idx.iter().enumerate() {
                if reduced.iter().any(|v| e.uses_var(*v)) {
                    axes.push(a);
                }
            }
        }
    }
    blk.iter_vars
        .iter()
        .filter(|iv| {
            axes.iter()
                .any(|a| blk.body.indices.get(*a).is_some_and(|e| e.uses_var(iv.var)))
        })
        .map(|iv| iv.var)
        .collect()
}

/// The reduction block with the largest iteration domain.
fn main_block(p: &Program) -> Option<crate::ir::BlockId> {
    let domain = |b: crate::ir::BlockId| {
        p.block(b)
            .iter_vars
            .iter()
            .map(|iv| iv.extent)
            .fold(1i64, |a, e| a.saturating_mul(e))
    };
    p.blocks_in_order()
        .into_iter()
        .filter(|b| p.block(*b).is_reduction())
        .max_by_key(|b| domain(*b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::cuda::CudaLimits;

    fn program(spec: &str) -> Program {
        crate::workload::preset(spec).unwrap().to_program()
    }

    #[test]
    fn the_naive_program_computes_its_whole_output_in_one_block() {
        assert_eq!(outputs_per_block(&program("matmul:6x5x7")), 30);
    }

    #[test]
    fn samples_are_distinct_and_fit_the_target() {
        let space = SearchSpace::cuda_default();
        let target = TargetLimits::Cuda(CudaLimits::sm90_default());
        let p = program("matmul:37x29x19");
        let out = sample(&space, &target, &p, 8, 5).unwrap();
        assert_eq!(out.len(), 8);
        for s in &out {
            assert!((32..=1024).contains(&s.threads_per_block), "{s:?}");
            assert!(s.outputs_per_block >= s.threads_per_block, "{s:?}");
            assert!(s.shared_bytes > 0, "{s:?}");
            assert!(s.trace.contains("sample_tile"), "{}", s.trace);
        }
        let again = sample(&space, &target, &p, 8, 5).unwrap();
        assert_eq!(out, again);
    }

    /// The block shape the search reads from a candidate's lowered program is the one of
    /// its scheduled program (lowering keeps the loops the count walks).
    #[test]
    fn the_block_shape_of_the_lowered_program_is_the_scheduled_ones() {
        let space = SearchSpace::cuda_default();
        let target = TargetLimits::Cuda(CudaLimits::sm90_default());
        for spec in [
            "matmul:1009x523x311",
            "conv2d_nchw:n=2,c=11,h=15,w=15,k=9,r=3,s=3,stride=2,pad=1",
        ] {
            let p = program(spec);
            let mut search = RandomSearch::new(space.clone(), target.clone(), p.clone(), 7);
            let proposal = search.propose(12, &mut |_| false);
            assert!(!proposal.candidates.is_empty(), "{spec}");
            for c in &proposal.candidates {
                let sch = crate::schedule::replay(&c.trace, p.clone(), 0).unwrap();
                let shape = BlockShape::of(&c.verified.lowered);
                assert_eq!(shape.outputs, outputs_per_block(sch.program()), "{spec}");
                assert!(
                    shape.outputs > 1 && shape.threads >= 32,
                    "{spec}: {shape:?}"
                );
            }
        }
    }

    #[test]
    fn a_threads_outputs_keep_within_a_bound_each_sample_draws() {
        // `threads.max_outputs_per_thread`: one bound (the default, 128) or several, one
        // drawn per sample; the spatial tiles are drawn within it.
        let target = TargetLimits::Cuda(CudaLimits::sm90_default());
        let p = program("matmul:2048x2048x2048");
        let per_thread = |bounds: &str| -> Vec<i64> {
            let text = crate::search::space::CUDA_DEFAULT.replace(
                "max_outputs_per_thread = [128]",
                &format!("max_outputs_per_thread = {bounds}"),
            );
            let space = SearchSpace::parse(&text, "t.toml").unwrap();
            sample(&space, &target, &p, 24, 3)
                .unwrap()
                .iter()
                .map(|s| s.outputs_per_block / s.threads_per_block)
                .collect()
        };
        let one = per_thread("[128]");
        assert!(one.iter().all(|n| *n <= 128), "{one:?}");
        let small = per_thread("[16]");
        assert!(small.iter().all(|n| *n <= 16), "{small:?}");
        let drawn = per_thread("[16, 128]");
        assert!(drawn.iter().all(|n| *n <= 128), "{drawn:?}");
        assert!(drawn.iter().any(|n| *n <= 16), "{drawn:?}");
        assert!(drawn.iter().any(|n| *n > 16), "{drawn:?}");
        for bad in ["[]", "[0, 64]"] {
            let text = crate::search::space::CUDA_DEFAULT.replace(
                "max_outputs_per_thread = [128]",
                &format!("max_outputs_per_thread = {bad}"),
            );
            let e = SearchSpace::parse(&text, "t.toml").unwrap_err().to_string();
            assert!(e.contains("key `threads.max_outputs_per_thread`"), "{e}");
        }
    }

    /// A cross-thread sample's block computes its rows of the output, not rows x lanes:
    /// the lanes index partial results that the block sums into one element each.
    #[test]
    fn a_cross_thread_block_counts_its_rows_not_its_lanes() {
        use crate::search::sketch::{apply_sketch, SketchKind};
        let p = program("matmul:m=1,n=64,k=512,layout=nt");
        let space = SearchSpace::cuda_default();
        for seed in 0..6 {
            let mut sch = crate::schedule::Schedule::new(p.clone(), seed);
            apply_sketch(&space, &mut sch, seed, SketchKind::CrossThread).unwrap();
            // The block's rows: the loop bound to threadIdx.y around the sum (none: one).
            let p = sch.program();
            let main = main_block(p).unwrap();
            let rows = p
                .ancestors(Node::Block(main))
                .iter()
                .find(|l| {
                    p.lp(**l).kind == LoopKind::Thread(ThreadTag::ThreadIdx(crate::ir::Dim3::Y))
                })
                .map_or(1, |l| p.lp(*l).extent);
            assert!(space.cross_thread.as_ref().unwrap().rows.contains(&rows));
            assert_eq!(outputs_per_block(sch.program()), rows, "seed {seed}");
        }
    }

    #[test]
    fn a_space_without_candidates_says_what_became_of_its_samples() {
        // A device whose blocks hold no shared memory: every staged sample is refused.
        let space = SearchSpace::cuda_default();
        let target = TargetLimits::Cuda(CudaLimits {
            max_shared_bytes_static: 0,
            max_shared_bytes_optin: 0,
            ..CudaLimits::sm90_default()
        });
        let e = sample(&space, &target, &program("matmul:64x64x64"), 4, 1).unwrap_err();
        assert!(e.rejected > 0, "{e}");
        assert!(
            e.to_string().starts_with("the space offers no candidate: "),
            "{e}"
        );
        assert!(e.to_string().contains("(the first: "), "{e}");
    }

    /// A trace grows back into itself, and with the decision a sketch branches on flipped
    /// (the split-K sum summed apart or by the last block to arrive) into the other branch,
    /// the decisions before it the same; flipped back, into the trace again.
    #[test]
    fn a_trace_grows_into_its_neighbour_on_the_other_branch_and_back() {
        let mut space = SearchSpace::cuda_default();
        let rule = space.split_k.as_mut().expect("a split-K rule");
        rule.probability = 1.0;
        rule.min_reduction = 1;
        rule.serial_sum = 0.5;
        let target = TargetLimits::Cuda(CudaLimits::sm90_default());
        let p = program("matmul:16x48x256");
        let serial = sample(&space, &target, &p, 32, 3)
            .unwrap()
            .into_iter()
            .map(|s| s.trace)
            .find(|t| t.contains("\nserial_sum_at("))
            .expect("a serial split-K sample");
        let like = |text: &str| {
            let trace = crate::schedule::text::parse(text).unwrap();
            sample_like(&space, &target, &p, &trace, 11).unwrap().trace
        };
        assert_eq!(like(&serial), serial);
        // The decision is the line before the move.
        let lines: Vec<&str> = serial.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("serial_sum_at("))
            .unwrap()
            - 1;
        assert!(lines[at].ends_with("decision=1)"), "{}", lines[at]);
        let flip = |lines: &[&str], to: &str| {
            let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            edited[at] = lines[at].replace(
                &format!("decision={}", 1 - to.parse::<i32>().unwrap()),
                &format!("decision={to}"),
            );
            edited.join("\n") + "\n"
        };
        let apart = like(&flip(&lines, "0"));
        assert!(!apart.contains("serial_sum_at("), "{apart}");
        let apart_lines: Vec<&str> = apart.lines().collect();
        assert_eq!(apart_lines[..at], lines[..at]);
        assert!(
            apart_lines[at].ends_with("decision=0)"),
            "{}",
            apart_lines[at]
        );
        assert_eq!(like(&flip(&apart_lines, "1")), serial);
    }
}

//! Decisions handed to a schedule that a sketch builds afresh, so that a changed choice
//! can change the instructions after it while the other decisions stay.
//!
//! A mutator changes one decision and replays the trace; that works where the decision
//! only feeds later instructions (a tile size, an unroll depth), not where the sketch
//! branches on it (an NCHW conv's stage stored directly or through shared memory: the
//! instructions after it differ). Such a mutant is grown again: the sketch runs from the
//! start with the trace's decisions as hints (`Schedule::set_hints`), and each sampling
//! instruction takes the next hint that is the same instruction with the same arguments
//! and a decision valid for it, else samples. Hints are matched in order, looking ahead
//! past those the new branch no longer has, so the decisions after a branch are kept
//! where the sketch meets the same instruction again. A `sample_categorical` whose
//! candidates no hint has takes the next hint's chosen value where it is among them, so a
//! trace of another workload (or of an older space) can be grown again as a whole: the
//! evolutionary search does so with the traces it transfers.

use super::inst::{Decision, InstKind, Operand, Trace};

/// One sampling instruction of a trace: what it was and what it decided.
#[derive(Clone, Debug)]
struct Hint {
    kind: InstKind,
    attrs: Vec<(String, Operand)>,
    decision: Decision,
    taken: bool,
}

/// The decisions of a trace's sampling instructions, in order.
#[derive(Clone, Debug, Default)]
pub struct Hints {
    list: Vec<Hint>,
    /// The first hint not yet passed.
    next: usize,
}

impl Hints {
    /// The decisions of every sampling instruction of `trace`, in trace order.
    pub fn from_trace(trace: &Trace) -> Hints {
        let list = trace
            .insts
            .iter()
            .filter(|i| i.kind.is_sampling())
            .filter_map(|i| {
                Some(Hint {
                    kind: i.kind,
                    attrs: i.attrs.clone(),
                    decision: i.decision.clone()?,
                    taken: false,
                })
            })
            .collect();
        Hints { list, next: 0 }
    }

    /// The decision of the next hint (at or after the current one) that is a `kind`
    /// instruction with `attrs` and whose decision `valid` accepts; the hints before it
    /// are passed over. `None` (nothing passed) when there is no such hint.
    pub(crate) fn take(
        &mut self,
        kind: InstKind,
        attrs: &[(&str, Operand)],
        valid: impl Fn(&Decision) -> bool,
    ) -> Option<Decision> {
        let same = |h: &Hint| {
            h.kind == kind
                && h.attrs.len() == attrs.len()
                && h.attrs
                    .iter()
                    .zip(attrs)
                    .all(|((n, v), (m, w))| n == m && v == w)
        };
        let Some(at) = (self.next..self.list.len()).find(|&i| same(&self.list[i])) else {
            return self.take_value(kind, attrs, valid);
        };
        let hint = &mut self.list[at];
        if !valid(&hint.decision) {
            return None;
        }
        hint.taken = true;
        self.next = at + 1;
        Some(hint.decision.clone())
    }

    /// A `sample_categorical` whose candidates differ from every hint's takes the next
    /// hint (that one alone, no looking ahead) where that is a `sample_categorical` whose
    /// chosen value is among its candidates: a trace of another workload, whose padding
    /// multiples were drawn from another list (`[1, 32, 64]` there, `[32, 64]` here),
    /// keeps the multiple it chose.
    fn take_value(
        &mut self,
        kind: InstKind,
        attrs: &[(&str, Operand)],
        valid: impl Fn(&Decision) -> bool,
    ) -> Option<Decision> {
        fn candidates(attrs: &[(&str, &Operand)]) -> Option<Vec<i64>> {
            let Some((_, Operand::List(list))) = attrs.iter().find(|(n, _)| *n == "candidates")
            else {
                return None;
            };
            list.iter()
                .map(|o| match o {
                    Operand::Int(v) => Some(*v),
                    _ => None,
                })
                .collect()
        }
        let hint = self.list.get_mut(self.next)?;
        if kind != InstKind::SampleCategorical || hint.kind != kind {
            return None;
        }
        let Decision::Categorical(index) = hint.decision else {
            return None;
        };
        let old: Vec<(&str, &Operand)> = hint.attrs.iter().map(|(n, v)| (n.as_str(), v)).collect();
        let new: Vec<(&str, &Operand)> = attrs.iter().map(|(n, v)| (*n, v)).collect();
        let value = *candidates(&old)?.get(index)?;
        let decision = Decision::Categorical(candidates(&new)?.iter().position(|v| *v == value)?);
        if !valid(&decision) {
            return None;
        }
        hint.taken = true;
        self.next += 1;
        Some(decision)
    }

    /// Whether the first `n` hints were all taken: the schedule made the same first `n`
    /// decisions as the trace.
    pub fn took_first(&self, n: usize) -> bool {
        self.list.len() >= n && self.list[..n].iter().all(|h| h.taken)
    }

    /// How many hints were taken.
    pub fn taken(&self) -> usize {
        self.list.iter().filter(|h| h.taken).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{replay, Schedule};

    fn categorical(sch: &mut Schedule, candidates: &[i64]) -> i64 {
        let probs = vec![1.0; candidates.len()];
        let v = sch.sample_categorical(candidates, &probs, None).unwrap();
        sch.value(v).unwrap()
    }

    fn program() -> crate::ir::Program {
        crate::workload::preset("matmul:8x8x8")
            .expect("preset")
            .to_program()
    }

    #[test]
    fn a_schedule_takes_matching_hints_in_order_and_samples_the_rest() {
        // A trace of three choices: [2, 3] -> 3, [4, 5, 6] -> 6, [7, 8] -> 7.
        let mut a = Schedule::new(program(), 1);
        for (c, d) in [(&[2, 3][..], 1), (&[4, 5, 6][..], 2), (&[7, 8][..], 0)] {
            let probs = vec![1.0; c.len()];
            a.sample_categorical(c, &probs, Some(d)).unwrap();
        }
        let hints = Hints::from_trace(a.trace());
        // Built again with a new instruction in the middle: the first and last hints are
        // taken, the new one samples, the one no longer met is passed over.
        let mut b = Schedule::new(program(), 2);
        b.set_hints(hints);
        assert_eq!(categorical(&mut b, &[2, 3]), 3);
        let fresh = categorical(&mut b, &[10, 11]);
        assert!([10, 11].contains(&fresh));
        assert_eq!(categorical(&mut b, &[7, 8]), 7);
        let hints = b.take_hints().expect("hints set");
        assert!(hints.took_first(1));
        assert!(
            !hints.took_first(2),
            "the [4, 5, 6] choice was not met again"
        );
        // A choice among other candidates takes the next hint's value where it is one of
        // them: the trace chose 6 of [4, 5, 6], this schedule chooses 6 of [6, 8].
        let hints = Hints::from_trace(a.trace());
        let mut c = Schedule::new(program(), 3);
        c.set_hints(hints);
        assert_eq!(categorical(&mut c, &[2, 3]), 3);
        assert_eq!(categorical(&mut c, &[6, 8]), 6);
        assert_eq!(categorical(&mut c, &[7, 8]), 7);
        assert!(c.take_hints().expect("hints set").took_first(3));
        // A schedule without hints keeps its trace replayable as always.
        assert!(replay(b.trace(), program(), 0).is_ok());
    }

    #[test]
    fn a_hint_whose_decision_does_not_fit_is_not_taken() {
        let p = program();
        let name = p.block(p.blocks_in_order()[0]).name.clone();
        let mut a = Schedule::new(p, 1);
        let b0 = a.get_block(&name).unwrap();
        let loops = a.get_loops(b0).unwrap();
        a.sample_perfect_tile(loops[0], 2, 8, Some(vec![2, 4]))
            .unwrap();
        let mut hints = Hints::from_trace(a.trace());
        let attrs = [
            ("n", Operand::Int(2)),
            ("max_innermost_factor", Operand::Int(8)),
        ];
        assert_eq!(
            hints.take(InstKind::SamplePerfectTile, &attrs, |d| *d
                == Decision::Tile(vec![4, 2])),
            None
        );
        assert_eq!(
            hints.take(InstKind::SamplePerfectTile, &attrs, |_| true),
            Some(Decision::Tile(vec![2, 4]))
        );
    }
}

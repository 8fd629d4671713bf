//! Training data from measured records: each record's trace is replayed on its canonical
//! workload program, lowered for the record's backend and featurized; its label is the
//! normalized throughput of its group (best `ok` latency of the workload on that target /
//! this latency; every failure, rejected candidates included, is 0).
//!
//! A *group* is one workload measured on one target: labels are comparable within a
//! group only, and the ranking losses and metrics work group by group. No IO: the caller
//! reads the records and the workloads' canonical texts.

use super::features::{featurize, DeviceSpec};
use crate::database::{canonical_program, Record, Status, TargetKey, TargetKind};
use crate::ir::Program;
use crate::lower::{lower, Backend, Lowered};
use crate::schedule::{replay, Trace};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};

/// One workload measured on one target.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Group {
    /// The workload key.
    pub workload_key: String,
    /// Where its records were measured.
    pub target: TargetKey,
}

/// Featurized records with their labels, grouped by (workload, target).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrainingSet {
    /// One feature vector per sample.
    pub features: Vec<Vec<f32>>,
    /// Normalized throughput in `0..=1`; 0 for failures.
    pub labels: Vec<f64>,
    /// The median latency in seconds; `None` for a failure.
    pub latency: Vec<Option<f64>>,
    /// The index of each sample's group in [`TrainingSet::groups`].
    pub group: Vec<u32>,
    /// The record id each sample came from.
    pub record_ids: Vec<i64>,
    /// The groups, in order of first appearance.
    pub groups: Vec<Group>,
}

/// The device spec features use for records measured on `target`: the CUDA arch's figures,
/// or the CPU's core count as its fingerprint names it (`... (8 cores, 16 threads)`; 1 if
/// it names none).
pub fn device_spec(target: &TargetKey) -> DeviceSpec {
    match target.kind {
        TargetKind::Cuda => DeviceSpec::cuda(&target.arch),
        TargetKind::Cpu => DeviceSpec::cpu(cpu_cores(&target.device).unwrap_or(1)),
    }
}

/// The backend records of `kind` were lowered for.
pub fn backend(kind: TargetKind) -> Backend {
    match kind {
        TargetKind::Cuda => Backend::Cuda,
        TargetKind::Cpu => Backend::Cpu,
    }
}

/// `N` in a CPU device name `model (N cores, M threads)`.
fn cpu_cores(device: &str) -> Option<i64> {
    let (head, _) = device.rsplit_once(" cores")?;
    let (_, n) = head.rsplit_once('(')?;
    n.trim().parse().ok().filter(|n| *n > 0)
}

/// Replays `trace` on `program` and lowers it for `backend`; `None` if either step fails.
pub fn lower_trace(trace: &Trace, program: &Program, backend: Backend) -> Option<Lowered> {
    let sch = replay(trace, program.clone(), 0).ok()?;
    lower(sch.program(), backend).ok()
}

impl TrainingSet {
    /// Featurizes `records` (in parallel) with `dev` and lowers them for `backend`.
    /// `workload_texts` maps workload keys to canonical texts. Records whose workload text
    /// is missing or does not parse, or whose trace does not replay or lower, are skipped;
    /// their count is returned beside the set. Labels use every `ok` record given, skipped
    /// or not.
    pub fn from_records(
        records: &[Record],
        workload_texts: &HashMap<String, String>,
        dev: &DeviceSpec,
        backend: Backend,
    ) -> (TrainingSet, usize) {
        let features = featurize_records(records, workload_texts, dev, backend);
        TrainingSet::from_features(records, features)
    }

    /// The set of `records` whose features are known: `features[i]` belongs to
    /// `records[i]`, `None` for a record that did not replay or lower (skipped and
    /// counted). Labels use every `ok` record given.
    pub fn from_features(
        records: &[Record],
        featurized: Vec<Option<Vec<f32>>>,
    ) -> (TrainingSet, usize) {
        let best = best_latencies(records);
        let mut set = TrainingSet::default();
        let mut index: HashMap<Group, u32> = HashMap::new();
        let mut skipped = 0;
        for (r, f) in records.iter().zip(featurized) {
            let Some(f) = f else {
                skipped += 1;
                continue;
            };
            let group = Group {
                workload_key: r.workload_key.clone(),
                target: r.target.clone(),
            };
            let latency = ok_latency(r);
            let label = match (latency, best.get(&group)) {
                (Some(l), Some(b)) => (b / l).clamp(0.0, 1.0),
                _ => 0.0,
            };
            let g = *index.entry(group.clone()).or_insert_with(|| {
                set.groups.push(group);
                (set.groups.len() - 1) as u32
            });
            set.features.push(f);
            set.labels.push(label);
            set.latency.push(latency);
            set.group.push(g);
            set.record_ids.push(r.id);
        }
        (set, skipped)
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The workload key of sample `i`.
    pub fn workload_of(&self, i: usize) -> &str {
        &self.groups[self.group[i] as usize].workload_key
    }

    /// The distinct workload keys, sorted.
    pub fn workloads(&self) -> Vec<String> {
        let mut w: Vec<String> = self.groups.iter().map(|g| g.workload_key.clone()).collect();
        w.sort();
        w.dedup();
        w
    }

    /// Appends `other`'s samples; its groups are merged with this set's (labels stay as
    /// they are, so sets of one group must be built from all of that group's records).
    pub fn extend(&mut self, other: TrainingSet) {
        let mut index: HashMap<Group, u32> = self
            .groups
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, g)| (g, i as u32))
            .collect();
        let remap: Vec<u32> = other
            .groups
            .into_iter()
            .map(|g| {
                *index.entry(g.clone()).or_insert_with(|| {
                    self.groups.push(g);
                    (self.groups.len() - 1) as u32
                })
            })
            .collect();
        self.features.extend(other.features);
        self.labels.extend(other.labels);
        self.latency.extend(other.latency);
        self.group
            .extend(other.group.into_iter().map(|g| remap[g as usize]));
        self.record_ids.extend(other.record_ids);
    }

    /// The samples at `indices`, in that order, with the groups they use.
    pub fn subset(&self, indices: &[usize]) -> TrainingSet {
        let mut out = TrainingSet::default();
        let mut remap: BTreeMap<u32, u32> = BTreeMap::new();
        for &i in indices {
            let g = *remap.entry(self.group[i]).or_insert_with(|| {
                out.groups.push(self.groups[self.group[i] as usize].clone());
                (out.groups.len() - 1) as u32
            });
            out.features.push(self.features[i].clone());
            out.labels.push(self.labels[i]);
            out.latency.push(self.latency[i]);
            out.group.push(g);
            out.record_ids.push(self.record_ids[i]);
        }
        out
    }
}

/// The features of each record (in parallel), `None` where its workload text is missing
/// or does not parse, or its trace does not replay or lower.
pub fn featurize_records(
    records: &[Record],
    workload_texts: &HashMap<String, String>,
    dev: &DeviceSpec,
    backend: Backend,
) -> Vec<Option<Vec<f32>>> {
    let programs = canonical_programs(records, workload_texts);
    records
        .par_iter()
        .map(|r| {
            let program = programs.get(&r.workload_key)?;
            let lowered = lower_trace(&r.trace, program, backend)?;
            Some(featurize(&lowered, dev))
        })
        .collect()
}

/// The canonical program of every workload the records name, where its text parses.
fn canonical_programs(
    records: &[Record],
    workload_texts: &HashMap<String, String>,
) -> HashMap<String, Program> {
    let mut out = HashMap::new();
    for r in records {
        if out.contains_key(&r.workload_key) {
            continue;
        }
        let Some(text) = workload_texts.get(&r.workload_key) else {
            continue;
        };
        if let Ok(p) = crate::workload::parse(text).and_then(|w| canonical_program(&w)) {
            out.insert(r.workload_key.clone(), p);
        }
    }
    out
}

/// The latency of an `ok` record with a positive median; `None` otherwise.
fn ok_latency(r: &Record) -> Option<f64> {
    match (r.status, r.median_secs) {
        (Status::Ok, Some(m)) if m > 0.0 && m.is_finite() => Some(m),
        _ => None,
    }
}

/// The best `ok` latency of each group.
fn best_latencies(records: &[Record]) -> HashMap<Group, f64> {
    let mut best: HashMap<Group, f64> = HashMap::new();
    for r in records {
        if let Some(l) = ok_latency(r) {
            let g = Group {
                workload_key: r.workload_key.clone(),
                target: r.target.clone(),
            };
            let e = best.entry(g).or_insert(l);
            *e = e.min(l);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_cores_are_read_from_the_device_name() {
        assert_eq!(cpu_cores("AMD EPYC 7B13 (8 cores, 16 threads)"), Some(8));
        assert_eq!(cpu_cores("a (weird) name (2 cores, 2 threads)"), Some(2));
        assert_eq!(cpu_cores("no count"), None);
    }
}

//! Stage 6, learn: measured results go back to the strategy (`feedback`), and the cost
//! model the strategy ranks with is loaded, trained in the background and swapped in as
//! tuning goes. Training never blocks measurement: it runs on its own thread, and the
//! tuner only looks whether it is done between rounds.
//!
//! The model itself is behind [`ModelSource`], the seam between the tuner and
//! `crate::cost_model` (training, scoring) and the database's model store: the tuner
//! decides *when* to load, train, swap and store; the source says *how*. Without a
//! source the tuner proposes without a model and says so once.

use super::report::ModelUse;
use super::TuneError;
use crate::cost_model::{Scorer, FEATURE_NAMES, FEATURE_SET_VERSION};
use crate::database::{Database, Record, TargetKey};
use crate::lower::Lowered;
use crate::search::{MeasuredResult, SearchStrategy};
use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A trained cost model as the tuner handles it.
#[derive(Clone)]
pub struct LearnedModel {
    /// Ranks candidates for the strategy.
    pub scorer: Arc<dyn Scorer>,
    /// What kind of model (e.g. `gbdt`).
    pub kind: String,
    /// How many records it was trained on.
    pub records: usize,
    /// The model in the form its [`ModelSource`] stores (the source downcasts it).
    pub stored: Arc<dyn Any + Send + Sync>,
}

/// What a model for one target kind and arch is trained on: every `ok` record measured
/// there, with the canonical text of each record's workload, and the features known so
/// far (read from the database's cache, or computed by an earlier training of this run).
#[derive(Clone)]
pub struct TrainingData {
    pub records: Vec<Record>,
    /// Canonical workload text by workload key.
    pub workload_texts: BTreeMap<String, String>,
    pub target: TargetKey,
    /// Features by record id (`None`: the record does not featurize). A training adds
    /// the records it featurizes, so that the next one computes only the new records'.
    pub features: HashMap<i64, Option<Vec<f32>>>,
    /// The ids whose features a training computed and the database does not cache yet.
    pub computed: Vec<i64>,
    /// The workloads being tuned, for a retraining during the run: their records are all
    /// trained on, the other workloads' sampled ([`TrainingData::training_indices`]).
    /// Empty: every record.
    pub focus: HashSet<String>,
    /// How many of the other workloads' records a focused training samples.
    pub focus_other_records: usize,
}

/// Records of other workloads a focused retraining samples (evenly, by record order).
/// Held out on six validation workloads with their first 64 records known
/// (`cargo bench --bench model_warm`, 2026-11-25): trained on an eighth of the other
/// 31,000 records and those 64, the ranker's top-1 on the rest was 0.918 (0.915 with
/// every record, 0.784 without the 64) and it trained in 2.7 s instead of 13 s.
pub const FOCUS_OTHER_RECORDS: usize = 4096;

impl TrainingData {
    pub(super) fn empty(target: &TargetKey) -> TrainingData {
        TrainingData {
            records: Vec::new(),
            workload_texts: BTreeMap::new(),
            target: target.clone(),
            features: HashMap::new(),
            computed: Vec::new(),
            focus: HashSet::new(),
            focus_other_records: FOCUS_OTHER_RECORDS,
        }
    }

    /// The records a training uses: all of them without a focus; with one, every record
    /// of the focused workloads and an even sample of `focus_other_records` of the
    /// others, so that the workloads being tuned weigh in the pairs and the training
    /// takes seconds.
    pub fn training_indices(&self) -> Vec<usize> {
        if self.focus.is_empty() {
            return (0..self.records.len()).collect();
        }
        let others = self
            .records
            .iter()
            .filter(|r| !self.focus.contains(&r.workload_key))
            .count();
        let step = others.div_ceil(self.focus_other_records.max(1)).max(1);
        let mut nth_other = 0;
        (0..self.records.len())
            .filter(|i| {
                if self.focus.contains(&self.records[*i].workload_key) {
                    return true;
                }
                nth_other += 1;
                (nth_other - 1) % step == 0
            })
            .collect()
    }

    /// Reads the `ok` records of the target stored after the last one held, their
    /// workloads' texts and their cached features.
    pub(super) fn read_new(&mut self, db: &Database) -> Result<(), TuneError> {
        let after = self.records.last().map_or(0, |r| r.id);
        let new = db.ok_records_after(self.target.kind, &self.target.arch, after)?;
        for r in &new {
            if !self.workload_texts.contains_key(&r.workload_key) {
                if let Some(text) = db.workload_text(&r.workload_key)? {
                    self.workload_texts.insert(r.workload_key.clone(), text);
                }
            }
        }
        let ids: Vec<i64> = new.iter().map(|r| r.id).collect();
        self.features
            .extend(db.cached_features(&ids, FEATURE_SET_VERSION, FEATURE_NAMES.len())?);
        self.records.extend(new);
        Ok(())
    }
}

/// How the tuner gets cost models: load the stored one, train one (on a background
/// thread), store one. Errors are messages: a model that cannot be had is a note, never
/// the end of a run.
pub trait ModelSource: Send + Sync {
    /// The stored model for `target`'s kind and arch, if any.
    fn load(&self, db: &Database, target: &TargetKey) -> Result<Option<LearnedModel>, String>;
    /// Trains a model (called off the tuner's thread; may take a minute). Features of
    /// records missing from `data.features` are computed, added there and their ids
    /// pushed on `data.computed`. `stop` says when the tuner no longer wants the model:
    /// a source asks it between its steps and gives up (any error) when it says so.
    fn train(
        &self,
        data: &mut TrainingData,
        stop: &dyn Fn() -> bool,
    ) -> Result<LearnedModel, String>;
    /// Stores `model` for `target`'s kind and arch, replacing the one there.
    fn save(
        &self,
        db: &mut Database,
        target: &TargetKey,
        model: &LearnedModel,
    ) -> Result<(), String>;
}

/// When to train.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ModelPolicy {
    /// Train a first model only when the database holds at least this many `ok`
    /// records of the target's kind and arch.
    pub min_records: usize,
    /// Retrain once this many new `ok` records were measured since the last training
    /// started.
    pub retrain_every: usize,
    /// A retraining while a model is current takes every record of the workloads being
    /// tuned and an even sample of this many of the others' ([`FOCUS_OTHER_RECORDS`]).
    pub focus_other_records: usize,
    /// With no model loaded and fewer than `min_records` records in the database, a
    /// first model is trained on the records there are once this run measured this many
    /// `ok` ones, and retrained after as many more: a model of the run's own
    /// measurements, as MetaSchedule's starts from its first batch. Its training is
    /// waited for (a few dozen records train in well under a second), it ranks the next
    /// round, and it is not stored: a later run of another workload is better served by
    /// no model than by one that knows a few dozen records of one shape.
    pub run_records: usize,
    /// Threads a training runs on, in a pool of its own; 0: a quarter of the cores
    /// ([`training_threads`]). Training runs beside proposing and compiling, which the
    /// run waits on. On the global pool a retraining's parallel work queued with every
    /// slot's proposals: in four network runs of 768 trials on one and two H100s of a
    /// 32-core host (2026-11-27) no retraining finished before the run ended.
    pub training_threads: usize,
}

impl ModelPolicy {
    /// Retraining on every record, every 64 new ones, each model stored: what tessel did
    /// before focused retraining (`tessel tune --retrain all`).
    pub fn every_record() -> Self {
        ModelPolicy {
            retrain_every: 64,
            focus_other_records: usize::MAX,
            ..ModelPolicy::default()
        }
    }
}

impl Default for ModelPolicy {
    /// 256 records before a first model stored for later runs; retrain every 32 new ones
    /// (after each round of 64 candidates that measured half of them: a focused
    /// retraining takes seconds), one training at a time; below 256 records, a model of
    /// the run's own records every 16 new ones.
    fn default() -> Self {
        ModelPolicy {
            min_records: 256,
            retrain_every: 32,
            focus_other_records: FOCUS_OTHER_RECORDS,
            run_records: 16,
            training_threads: 0,
        }
    }
}

/// The threads of a training pool when the policy leaves it open: a quarter of the
/// cores, at least one.
pub fn training_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 4).max(1))
}

/// A scorer that counts the candidates it scored (the report's `scored`).
struct Counted {
    inner: Arc<dyn Scorer>,
    count: Arc<AtomicUsize>,
}

impl Scorer for Counted {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn score(&self, candidates: &[&Lowered]) -> Vec<f64> {
        self.count.fetch_add(candidates.len(), Ordering::Relaxed);
        self.inner.score(candidates)
    }
}

/// The learn stage's state over one run.
pub(crate) struct Learner {
    source: Option<Arc<dyn ModelSource>>,
    policy: ModelPolicy,
    target: TargetKey,
    /// The training in flight; it hands the training data back with its model.
    training: Option<Training>,
    new_ok: usize,
    model: Option<ModelUse>,
    /// The newest model trained on every record in this run, stored at the end (the
    /// model of a focused retraining that sampled the others serves this run only).
    trained: Option<LearnedModel>,
    /// The workloads this run tunes: retrainings while a model is current focus on them.
    focus: HashSet<String>,
    /// The model strategies rank with now, and how many models were current before it
    /// (so a strategy that has an older one, or none, knows to take it).
    current: Option<LearnedModel>,
    generation: usize,
    scored: Arc<AtomicUsize>,
    /// Every `ok` record of the target read so far, their workloads' texts and
    /// features: a retraining reads only the records stored since, and featurizes only
    /// those the database has no features of. Empty while a training holds it.
    seen: TrainingData,
    /// Features finished trainings computed, taken out of `seen` when the next training
    /// starts (so that a training stopped at the end does not take them with it), cached
    /// at the end of the run.
    uncached: Vec<(i64, Option<Vec<f32>>)>,
    /// The pool trainings run on, made by the first ([`ModelPolicy::training_threads`]).
    pool: Option<Arc<rayon::ThreadPool>>,
}

/// What a training thread hands back: its model (or why not) and the training data,
/// grown by what it read and featurized.
type Trained = (Result<LearnedModel, String>, TrainingData);

/// A training in flight, and the flag that tells it to give up.
struct Training {
    thread: JoinHandle<Trained>,
    stop: Arc<AtomicBool>,
}

impl Learner {
    /// Loads the stored model for `target` (or starts training one when the database
    /// holds enough records); strategies take it with [`Learner::install_current`].
    /// `focus` names the workloads the run tunes (their keys).
    pub fn start(
        source: Option<Arc<dyn ModelSource>>,
        policy: ModelPolicy,
        db: &Database,
        target: &TargetKey,
        focus: &[String],
        notes: &mut Vec<String>,
    ) -> Result<Learner, TuneError> {
        let mut l = Learner {
            source,
            policy,
            target: target.clone(),
            training: None,
            new_ok: 0,
            model: None,
            trained: None,
            focus: focus.iter().cloned().collect(),
            current: None,
            generation: 0,
            scored: Arc::new(AtomicUsize::new(0)),
            seen: TrainingData::empty(target),
            uncached: Vec::new(),
            pool: None,
        };
        let what = format!("{}/{}", target.kind.name(), target.arch);
        let Some(source) = l.source.clone() else {
            notes.push(format!("no cost model for {what}: proposing without one"));
            return Ok(l);
        };
        match source.load(db, target) {
            Ok(Some(m)) => {
                l.model = Some(ModelUse {
                    kind: m.kind.clone(),
                    records_trained_on: m.records,
                    trained_this_run: 0,
                    loaded: true,
                });
                l.make_current(m);
            }
            Ok(None) => l.train_first(db, &format!("no cost model for {what}"), notes)?,
            // A model of an older feature set (every database after a feature-set bump),
            // another target or corrupt bytes: trained anew, as if none were stored; the
            // first model of the run replaces it.
            Err(e) => l.train_first(
                db,
                &format!("the stored cost model for {what} is not used ({e})"),
                notes,
            )?,
        }
        Ok(l)
    }

    /// Starts training the run's first model on the database's records when it holds
    /// enough of them, saying why (`reason`) and what the run proposes meanwhile.
    fn train_first(
        &mut self,
        db: &Database,
        reason: &str,
        notes: &mut Vec<String>,
    ) -> Result<(), TuneError> {
        let have = db.count_ok_records(self.target.kind, &self.target.arch)?;
        if have >= self.policy.min_records {
            notes.push(format!(
                "{reason}: training one on {have} records in the background, proposing \
                 without one until it is ready"
            ));
            self.train(db)
        } else {
            notes.push(format!(
                "{reason} ({have} records, {} needed for one to keep): proposing without \
                 one (a search that ranks gets a model of this run's own records once it \
                 has measured {})",
                self.policy.min_records, self.policy.run_records
            ));
            Ok(())
        }
    }

    /// How many models became current so far (0: none yet).
    pub fn generation(&self) -> usize {
        self.generation
    }

    /// Hands the current model, if any, to `strategy`.
    pub fn install_current(&self, strategy: &mut (dyn SearchStrategy + Send)) {
        if let Some(m) = &self.current {
            strategy.set_scorer(Some(Arc::new(Counted {
                inner: m.scorer.clone(),
                count: self.scored.clone(),
            })));
        }
    }

    /// Candidates the model scored so far.
    pub fn scored(&self) -> usize {
        self.scored.load(Ordering::Relaxed)
    }

    /// After a round: feeds the results to the strategy, swaps in a model whose training
    /// finished (other strategies take it with [`Learner::install_current`]), and starts the next training when enough new records came in.
    pub fn after_round(
        &mut self,
        db: &Database,
        strategy: &mut (dyn SearchStrategy + Send),
        results: &[MeasuredResult],
        notes: &mut Vec<String>,
    ) -> Result<(), TuneError> {
        strategy.feedback(results);
        self.new_ok += results
            .iter()
            .filter(|r| r.median_seconds.is_some())
            .count();
        if self
            .training
            .as_ref()
            .is_some_and(|t| t.thread.is_finished())
        {
            if let Some(m) = self.collect(notes) {
                self.make_current(m);
                self.install_current(strategy);
            }
        }
        if self.source.is_none() || self.training.is_some() {
            return Ok(());
        }
        let of_the_run = self.of_the_run(db)?;
        if of_the_run && !strategy.ranks_with_a_model() {
            return Ok(());
        }
        let every = if of_the_run {
            self.policy.run_records
        } else {
            self.policy.retrain_every
        };
        if self.new_ok < every {
            return Ok(());
        }
        self.train(db)?;
        if of_the_run {
            // A few dozen records: waited for, so that it ranks the next round.
            if let Some(m) = self.collect(notes) {
                self.make_current(m);
                self.install_current(strategy);
            }
        }
        Ok(())
    }

    /// Whether the next model is one of the run's own records ([`ModelPolicy::run_records`]):
    /// none was loaded and the database holds fewer than `min_records`.
    fn of_the_run(&self, db: &Database) -> Result<bool, TuneError> {
        if self.model.as_ref().is_some_and(|m| m.loaded) {
            return Ok(false);
        }
        Ok(db.count_ok_records(self.target.kind, &self.target.arch)? < self.policy.min_records)
    }

    /// At the end of the run (measurement is over): takes the model of a training that
    /// finished, caches the features trainings computed and stores the newest model
    /// trained in this run. Returns the model the run used.
    ///
    /// A training still in flight is waited for only when the run has no model at all
    /// (it would be the target's first). Otherwise it is told to stop and left to end on
    /// its own: its model would only serve later runs, and waiting for it took a third
    /// of a 45 s run on the H100 host (7-13 s); the model stored stays the one loaded or
    /// last trained, and the features it computed are computed again by the next
    /// training.
    pub fn finish(mut self, db: &mut Database, notes: &mut Vec<String>) -> Option<ModelUse> {
        match self.training.take() {
            Some(t) if !t.thread.is_finished() && self.current.is_some() => {
                t.stop.store(true, Ordering::Relaxed);
                notes.push(
                    "a retraining of the cost model was still running at the end: stopped, \
                     not waited for (the stored model stays the one this run used)"
                        .to_string(),
                );
            }
            Some(t) => {
                self.training = Some(t);
                self.collect(notes);
            }
            None => {}
        }
        self.take_computed();
        let rows = std::mem::take(&mut self.uncached);
        if !rows.is_empty() {
            if let Err(e) = db.cache_features(&rows, FEATURE_SET_VERSION) {
                notes.push(format!(
                    "the features of {} records were not cached: {e}",
                    rows.len()
                ));
            }
        }
        if let (Some(source), Some(m)) = (&self.source, &self.trained) {
            if let Err(e) = source.save(db, &self.target, m) {
                notes.push(format!("the trained cost model was not stored: {e}"));
            }
        }
        self.model
    }

    /// Moves the features the trainings so far computed to `uncached`.
    fn take_computed(&mut self) {
        let seen = &mut self.seen;
        self.uncached.extend(
            seen.computed
                .drain(..)
                .filter_map(|id| Some((id, seen.features.get(&id)?.clone()))),
        );
    }

    fn make_current(&mut self, m: LearnedModel) {
        self.current = Some(m);
        self.generation += 1;
    }

    /// Starts training on the `ok` records of the target's kind and arch: every one for
    /// a first model, the run's workloads' and a sample of the others' while a model is
    /// current ([`TrainingData::training_indices`]). Reading the new records happens on
    /// the training thread, through a connection of its own, where the database is a file
    /// (reading and parsing the 26,000 shipped records took 7-9 s on the H100 host); an
    /// in-memory database is read here.
    fn train(&mut self, db: &Database) -> Result<(), TuneError> {
        let Some(source) = self.source.clone() else {
            return Ok(());
        };
        self.take_computed();
        let mut data = std::mem::replace(&mut self.seen, TrainingData::empty(&self.target));
        data.focus = match self.current {
            Some(_) => self.focus.clone(),
            None => HashSet::new(),
        };
        data.focus_other_records = self.policy.focus_other_records;
        let file = file_path(db);
        if file.is_none() {
            data.read_new(db)?;
        }
        self.new_ok = 0;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let pool = self.pool();
        let thread = std::thread::spawn(move || {
            if let Some(path) = file {
                let read = Database::open(&path)
                    .map_err(TuneError::from)
                    .and_then(|reader| data.read_new(&reader));
                if let Err(e) = read {
                    return (Err(format!("reading the training records: {e}")), data);
                }
            }
            let mut train = || source.train(&mut data, &|| stopped.load(Ordering::Relaxed));
            let model = match pool {
                Some(pool) => pool.install(train),
                None => train(),
            };
            (model, data)
        });
        self.training = Some(Training { thread, stop });
        Ok(())
    }

    /// The training pool, made on first use; `None` if its threads cannot be started
    /// (the training then runs on the global pool).
    fn pool(&mut self) -> Option<Arc<rayon::ThreadPool>> {
        if self.pool.is_none() {
            let threads = match self.policy.training_threads {
                0 => training_threads(),
                n => n,
            };
            self.pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("tessel-learn-{i}"))
                .build()
                .ok()
                .map(Arc::new);
        }
        self.pool.clone()
    }

    /// Waits for the training in flight; notes a failure.
    /// A model trained on a sample (a focused retraining that left records out), or on
    /// fewer than `min_records` records (a model of the run's own), serves this run and
    /// is not kept to be stored.
    fn collect(&mut self, notes: &mut Vec<String>) -> Option<LearnedModel> {
        let done = self.training.take()?.thread.join();
        let mut kept = false;
        let done = done.map(|(model, data)| {
            let sampled = data.training_indices().len() < data.records.len();
            kept = !sampled && data.records.len() >= self.policy.min_records;
            self.seen = data;
            model
        });
        match done {
            Ok(Ok(m)) => {
                let trained = self.model.as_ref().map_or(0, |u| u.trained_this_run) + 1;
                self.model = Some(ModelUse {
                    kind: m.kind.clone(),
                    records_trained_on: m.records,
                    trained_this_run: trained,
                    loaded: self.model.as_ref().is_some_and(|u| u.loaded),
                });
                if kept {
                    self.trained = Some(m.clone());
                }
                Some(m)
            }
            Ok(Err(e)) => {
                notes.push(format!("training the cost model failed: {e}"));
                None
            }
            Err(_) => {
                notes.push("training the cost model panicked".to_string());
                None
            }
        }
    }
}

/// The file behind `db`, or `None` for an in-memory database.
fn file_path(db: &Database) -> Option<PathBuf> {
    let path = db.path();
    (path != std::path::Path::new(":memory:")).then(|| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost_model::tests::{fixture_db, target};
    use crate::tune::StoredModels;
    use std::sync::mpsc;
    use std::time::Duration;

    /// The shipped source with its trainings replaced by `train` (given the shipped
    /// source to train with, if it does).
    struct ReplacedTraining<F> {
        stored: StoredModels,
        train: F,
    }

    impl<F> ModelSource for ReplacedTraining<F>
    where
        F: Fn(&StoredModels, &mut TrainingData, &dyn Fn() -> bool) -> Result<LearnedModel, String>
            + Send
            + Sync,
    {
        fn load(&self, db: &Database, t: &TargetKey) -> Result<Option<LearnedModel>, String> {
            self.stored.load(db, t)
        }
        fn train(
            &self,
            data: &mut TrainingData,
            stop: &dyn Fn() -> bool,
        ) -> Result<LearnedModel, String> {
            (self.train)(&self.stored, data, stop)
        }
        fn save(&self, db: &mut Database, t: &TargetKey, m: &LearnedModel) -> Result<(), String> {
            self.stored.save(db, t, m)
        }
    }

    /// The fixture database with a model trained on it stored.
    fn db_with_a_model() -> Database {
        let mut db = fixture_db();
        let mut data = TrainingData::empty(&target());
        data.read_new(&db).unwrap();
        let source = StoredModels::default();
        let m = source.train(&mut data, &|| false).unwrap();
        source.save(&mut db, &target(), &m).unwrap();
        db
    }

    #[test]
    fn the_end_of_a_run_with_a_model_stops_a_retraining_instead_of_waiting_for_it() {
        let mut db = db_with_a_model();
        let (tx, rx) = mpsc::channel();
        let stopped = std::sync::Mutex::new(tx);
        // Its trainings run until they are told to stop, then say so (or give up after
        // a minute).
        let source = Arc::new(ReplacedTraining {
            stored: StoredModels::default(),
            train: move |_: &StoredModels, _: &mut TrainingData, stop: &dyn Fn() -> bool| {
                for _ in 0..6000 {
                    if stop() {
                        stopped.lock().unwrap().send(()).unwrap();
                        return Err("stopped".into());
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err("never told to stop".into())
            },
        });
        let mut notes = Vec::new();
        let mut l = Learner::start(
            Some(source),
            ModelPolicy::default(),
            &db,
            &target(),
            &[],
            &mut notes,
        )
        .unwrap();
        assert_eq!(l.generation(), 1, "the stored model is loaded");
        l.train(&db).unwrap();
        let used = l.finish(&mut db, &mut notes).expect("the loaded model");
        assert!(used.loaded && used.trained_this_run == 0, "{used:?}");
        assert!(
            notes.iter().any(|n| n.contains("stopped, not waited for")),
            "{notes:?}"
        );
        // The training saw the stop (the old end waited for it, and it never ends
        // unless told to).
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the training was told to stop");
    }

    #[test]
    fn a_training_runs_on_a_pool_of_its_own_with_the_policys_threads() {
        let mut db = fixture_db();
        let (tx, rx) = mpsc::channel();
        let seen = std::sync::Mutex::new(tx);
        // Its trainings say on which thread and in a pool of how many threads they ran.
        let source = Arc::new(ReplacedTraining {
            stored: StoredModels::default(),
            train: move |stored: &StoredModels,
                         data: &mut TrainingData,
                         stop: &dyn Fn() -> bool| {
                let here = std::thread::current().name().map(str::to_string);
                let sent = seen
                    .lock()
                    .unwrap()
                    .send((here, rayon::current_num_threads()));
                sent.map_err(|e| e.to_string())?;
                stored.train(data, stop)
            },
        });
        let policy = ModelPolicy {
            min_records: 1,
            training_threads: 3,
            ..ModelPolicy::default()
        };
        let mut notes = Vec::new();
        let l = Learner::start(Some(source), policy, &db, &target(), &[], &mut notes).unwrap();
        let used = l.finish(&mut db, &mut notes).expect("the first model");
        assert_eq!(used.trained_this_run, 1, "{notes:?}");
        let (thread, threads) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert!(
            thread
                .as_deref()
                .is_some_and(|n| n.starts_with("tessel-learn-")),
            "{thread:?}"
        );
        assert_eq!(threads, 3);
    }

    #[test]
    fn the_end_of_a_run_without_a_model_waits_for_the_first_one() {
        let mut db = fixture_db();
        let policy = ModelPolicy {
            min_records: 1,
            retrain_every: 64,
            ..ModelPolicy::default()
        };
        let mut notes = Vec::new();
        let source: Arc<dyn ModelSource> = Arc::new(StoredModels::default());
        let l = Learner::start(Some(source), policy, &db, &target(), &[], &mut notes).unwrap();
        assert_eq!(
            l.generation(),
            0,
            "nothing stored: training the first model"
        );
        let used = l
            .finish(&mut db, &mut notes)
            .expect("the first model, waited for");
        assert_eq!(used.trained_this_run, 1);
        assert!(db
            .load_model(target().kind, &target().arch)
            .unwrap()
            .is_some());
    }

    #[test]
    fn a_stored_model_of_an_older_feature_set_is_trained_anew_and_replaced() {
        // The database holds only a model stored under the previous feature set.
        let t = target();
        let mut old = db_with_a_model()
            .load_model(t.kind, &t.arch)
            .unwrap()
            .unwrap();
        old.feature_set_version = FEATURE_SET_VERSION - 1;
        let mut db = fixture_db();
        db.save_model(t.kind, &t.arch, &old).unwrap();
        let policy = ModelPolicy {
            min_records: 1,
            ..ModelPolicy::default()
        };
        let mut notes = Vec::new();
        let source: Arc<dyn ModelSource> = Arc::new(StoredModels::default());
        let l = Learner::start(Some(source), policy, &db, &t, &[], &mut notes).unwrap();
        assert_eq!(l.generation(), 0, "the old model is not used");
        assert!(
            notes[0].contains("is not used") && notes[0].contains("training one on"),
            "{notes:?}"
        );
        let used = l
            .finish(&mut db, &mut notes)
            .expect("a model of this feature set");
        assert!(!used.loaded && used.trained_this_run == 1, "{used:?}");
        let stored = db.load_model(t.kind, &t.arch).unwrap().unwrap();
        assert_eq!(stored.feature_set_version, FEATURE_SET_VERSION);
    }

    #[test]
    fn a_focused_training_takes_its_workloads_whole_and_samples_the_others() {
        let db = fixture_db();
        let mut data = TrainingData::empty(&target());
        data.read_new(&db).unwrap();
        data.focus_other_records = 10;
        let all = data.training_indices();
        assert_eq!(all.len(), data.records.len(), "no focus: every record");
        let focus = data.records[0].workload_key.clone();
        let mine = data
            .records
            .iter()
            .filter(|r| r.workload_key == focus)
            .count();
        let others = data.records.len() - mine;
        assert!(mine > 10 && others > 20, "{mine} {others}");
        data.focus = [focus.clone()].into_iter().collect();
        let picked = data.training_indices();
        let picked_mine = picked
            .iter()
            .filter(|i| data.records[**i].workload_key == focus)
            .count();
        assert_eq!(picked_mine, mine, "every record of the focused workload");
        let picked_others = picked.len() - picked_mine;
        assert!(
            (5..=10).contains(&picked_others),
            "{picked_others} of {others} others"
        );
        // Both other workloads are sampled, not only the first in record order.
        let sampled: HashSet<&str> = picked
            .iter()
            .map(|i| data.records[*i].workload_key.as_str())
            .filter(|k| *k != focus)
            .collect();
        assert_eq!(sampled.len(), 2);
    }

    #[test]
    fn a_retraining_while_a_model_is_current_samples_the_others_and_is_not_stored() {
        let mut db = db_with_a_model();
        let stored = |db: &Database| {
            db.load_model(target().kind, &target().arch)
                .unwrap()
                .unwrap()
                .bytes
        };
        let before = stored(&db);
        let mut data = TrainingData::empty(&target());
        data.read_new(&db).unwrap();
        let focus = data.records[0].workload_key.clone();
        let mut notes = Vec::new();
        let source: Arc<dyn ModelSource> = Arc::new(StoredModels::default());
        let policy = ModelPolicy {
            focus_other_records: 10,
            ..ModelPolicy::default()
        };
        let mut l =
            Learner::start(Some(source), policy, &db, &target(), &[focus], &mut notes).unwrap();
        l.train(&db).unwrap();
        while !l.training.as_ref().unwrap().thread.is_finished() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let m = l.collect(&mut notes).expect("the focused model");
        assert!(m.records < data.records.len(), "{} records", m.records);
        l.make_current(m);
        assert!(
            l.trained.is_none(),
            "a sampled model is not kept to be stored"
        );
        let used = l.finish(&mut db, &mut notes).expect("a model");
        assert_eq!(used.trained_this_run, 1, "{notes:?}");
        assert_eq!(stored(&db), before, "the stored model is the loaded one");
    }

    /// The canonical program of the fixture's first workload and the H100 limits.
    fn first_workload() -> (crate::ir::Program, crate::search::TargetLimits) {
        let w = crate::workload::from_cli("matmul:64x64x64", |_| {
            Err(std::io::Error::other("no files"))
        })
        .unwrap();
        let limits =
            crate::search::TargetLimits::Cuda(crate::target::cuda::CudaLimits::sm90_default());
        (crate::database::canonical_program(&w).unwrap(), limits)
    }

    /// Measured results of `n` random candidates of the fixture's first workload, ok, the
    /// first the fastest.
    fn results_of(n: usize) -> Vec<MeasuredResult> {
        use crate::search::{RandomSearch, SearchSpace};
        let (program, limits) = first_workload();
        let mut search = RandomSearch::new(SearchSpace::cuda_default(), limits, program, 9);
        let proposal = search.propose(n, &mut |_| false);
        assert_eq!(proposal.candidates.len(), n);
        proposal
            .candidates
            .into_iter()
            .enumerate()
            .map(|(i, c)| MeasuredResult {
                ir_hash: c.ir_hash.clone(),
                trace: c.trace,
                median_seconds: Some(1e-3 * (i + 1) as f64),
            })
            .collect()
    }

    /// A strategy over the fixture's first workload.
    fn strategy(kind: crate::search::StrategyKind) -> Box<dyn SearchStrategy + Send> {
        let (program, limits) = first_workload();
        kind.build(
            crate::search::SearchSpace::cuda_default(),
            limits,
            program,
            1,
        )
    }

    #[test]
    fn with_few_records_a_model_of_the_runs_own_ranks_the_next_round_and_is_not_stored() {
        use crate::search::StrategyKind;
        let mut db = fixture_db();
        let have = db.count_ok_records(target().kind, &target().arch).unwrap();
        let policy = ModelPolicy::default();
        assert!(have < policy.min_records, "{have} records");
        let source: Arc<dyn ModelSource> = Arc::new(StoredModels::default());
        let mut notes = Vec::new();
        let mut l = Learner::start(Some(source), policy, &db, &target(), &[], &mut notes).unwrap();
        assert_eq!(l.generation(), 0, "{notes:?}");
        assert!(notes[0].contains("once it has measured 16"), "{notes:?}");
        let mut evo = strategy(StrategyKind::Evolutionary);
        let mut random = strategy(StrategyKind::Random);
        let results = results_of(policy.run_records);
        // One short of `run_records`: no training yet.
        l.after_round(&db, &mut *evo, &results[1..], &mut notes)
            .unwrap();
        assert!(l.training.is_none() && l.generation() == 0);
        // A strategy that ranks nothing gets no model of the run.
        l.after_round(&db, &mut *random, &results, &mut notes)
            .unwrap();
        assert!(l.training.is_none() && l.generation() == 0);
        // `run_records` new ok results: trained, waited for, handed to the strategy.
        l.after_round(&db, &mut *evo, &results[..1], &mut notes)
            .unwrap();
        assert_eq!(l.generation(), 1, "{notes:?}");
        assert!(evo.uses_model(), "the next round is ranked by it");
        assert!(l.training.is_none(), "waited for");
        let used = l.finish(&mut db, &mut notes).expect("the run's model");
        assert_eq!(used.trained_this_run, 1);
        assert!(!used.loaded);
        assert!(
            db.load_model(target().kind, &target().arch)
                .unwrap()
                .is_none(),
            "a model of {have} records is not stored"
        );
    }
}

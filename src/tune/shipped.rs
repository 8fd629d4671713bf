//! The start of a new database: the record sets that ship in `database/`
//! (`*.all.jsonl.gz`: the suite's and a training set of odd shapes, tuned on an H100 and
//! an H200). A database that knows nothing of a target yet (no record of its kind and
//! arch, no model for it) gets the sets measured on that kind and arch imported and a
//! cost model trained on them, once, before its first tune: the new workload's first
//! population is then ranked by a model that has seen other workloads, and the best
//! traces of those workloads seed it (`warm_start`). Without them a first tune on a new
//! shape starts blind (benches/RESULTS.md: 0.55x cublasLt from an empty database against
//! 0.75x-0.80x from the shipped records on the same GEMM).
//!
//! `--no-shipped` or `TESSEL_SHIPPED=off` starts from nothing; `TESSEL_SHIPPED=DIR` names
//! another folder of sets (`on`: the default folder).

use crate::cost_model::ModelKind;
use crate::database::{Database, FileFormat, ImportMode, TargetKey};
use crate::model_cmd::{self, TrainReport};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// The environment variable naming the folder of shipped sets, or `off`.
pub const ENV: &str = "TESSEL_SHIPPED";

/// Where the shipped record sets are looked for.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// Starting from nothing was asked for.
    Off,
    /// This folder.
    Dir(PathBuf),
    /// No folder of sets was found (a binary installed away from its repository).
    NotFound,
}

impl Source {
    /// `TESSEL_SHIPPED` if set (`off`, or a folder; `on` is the default), else the `database/` folder of the
    /// repository the binary was built in or sits in (`target/release/tessel` and a
    /// bundle's `.gpu/tessel` both find it), else none. `off` wins over everything.
    pub fn locate(off: bool) -> Source {
        if off {
            return Source::Off;
        }
        match std::env::var(ENV) {
            Ok(v) if v.eq_ignore_ascii_case("off") => return Source::Off,
            Ok(v) if !v.is_empty() && !v.eq_ignore_ascii_case("on") => {
                return Source::Dir(PathBuf::from(v))
            }
            _ => {}
        }
        let mut candidates = Vec::new();
        if let Some(dir) = std::env::current_exe().ok().and_then(|e| {
            e.canonicalize()
                .ok()
                .and_then(|e| e.parent().map(Path::to_path_buf))
        }) {
            candidates.extend(dir.ancestors().take(3).map(|d| d.join("database")));
        }
        candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("database"));
        candidates
            .into_iter()
            .find(|d| !sets_in(d).is_empty())
            .map_or(Source::NotFound, Source::Dir)
    }
}

/// The record sets (`*.all.jsonl.gz`) in `dir`, by name.
pub fn sets_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".all.jsonl.gz"))
        })
        .collect();
    files.sort();
    files
}

/// The kind and arch of a set's first record (each shipped set is one device's run), or
/// why it could not be read.
fn set_target(path: &Path) -> Result<(String, String), String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(flate2::read::GzDecoder::new(file))
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let v: serde_json::Value =
        serde_json::from_str(&line).map_err(|e| format!("its first line: {e}"))?;
    let field = |k: &str| v["target"][k].as_str().map(str::to_string);
    field("kind")
        .zip(field("arch"))
        .ok_or_else(|| "its first record names no target kind and arch".to_string())
}

/// What [`bootstrap`] did.
#[derive(Debug, Default)]
pub struct Bootstrap {
    /// Each imported set and the records it added.
    pub imported: Vec<(PathBuf, usize)>,
    /// Sets of another kind or arch, or unreadable ones, with the reason.
    pub skipped: Vec<(PathBuf, String)>,
    /// The model trained on the imported records (none if nothing was imported).
    pub model: Option<TrainReport>,
    pub seconds: f64,
}

/// Whether `db` knows nothing of `target` yet: no record of its kind and arch, and no
/// model for them.
pub fn knows_nothing_of(db: &Database, target: &TargetKey) -> Result<bool, String> {
    let archs = db.record_archs(target.kind).map_err(|e| e.to_string())?;
    let model = db
        .load_model(target.kind, &target.arch)
        .map_err(|e| e.to_string())?;
    Ok(!archs.contains(&target.arch) && model.is_none())
}

/// Imports into `db` every set in `dir` measured on `target`'s kind and arch and trains
/// the default cost model on those records, if `db` knows nothing of the target yet;
/// `Ok(None)` when it does or no set fits. `note` hears what is about to happen (the
/// import and the training take a minute or two, once). Records a set holds that no
/// longer replay are left out and counted as skipped, not fatal: the rest still help.
pub fn bootstrap(
    db: &mut Database,
    target: &TargetKey,
    dir: &Path,
    note: &mut dyn FnMut(String),
) -> Result<Option<Bootstrap>, String> {
    if !knows_nothing_of(db, target)? {
        return Ok(None);
    }
    let start = std::time::Instant::now();
    let mut out = Bootstrap::default();
    let mut fitting = Vec::new();
    for path in sets_in(dir) {
        match set_target(&path) {
            Ok((kind, arch)) if kind == target.kind.name() && arch == target.arch => {
                fitting.push(path)
            }
            Ok((kind, arch)) => out
                .skipped
                .push((path, format!("measured on {kind} {arch}"))),
            Err(e) => out.skipped.push((path, e)),
        }
    }
    if fitting.is_empty() {
        return Ok(None);
    }
    note(format!(
        "{} has no record of {} {}: importing the {} record set(s) that ship in {} and \
         training the cost model on them, once (--no-shipped or {ENV}=off starts from \
         nothing)",
        db.path().display(),
        target.kind.name(),
        target.arch,
        fitting.len(),
        dir.display()
    ));
    for path in fitting {
        let report = db
            .import_file(&path, Some(FileFormat::JsonlGz), ImportMode::SkipRejected)
            .map_err(|e| format!("importing {}: {e}", path.display()))?;
        if !report.rejected.is_empty() {
            out.skipped.push((
                path.clone(),
                format!(
                    "{} of its records refused (first: {})",
                    report.rejected.len(),
                    report.rejected[0].reason
                ),
            ));
        }
        out.imported.push((path, report.accepted.len()));
    }
    if out.imported.iter().any(|(_, n)| *n > 0) {
        let report = model_cmd::train(db, target.kind, Some(&target.arch), ModelKind::DEFAULT)
            .map_err(|e| format!("training the cost model on the shipped records: {e}"))?;
        out.model = Some(report);
    }
    out.seconds = start.elapsed().as_secs_f64();
    Ok(Some(out))
}

/// [`Source::locate`] then [`bootstrap`], with a line for `note` saying what came of it;
/// the start `tessel tune` makes on every database.
pub fn prepare(
    db: &mut Database,
    target: &TargetKey,
    off: bool,
    note: &mut dyn FnMut(String),
) -> Result<Option<Bootstrap>, String> {
    let Source::Dir(dir) = Source::locate(off) else {
        return Ok(None);
    };
    let Some(b) = bootstrap(db, target, &dir, note)? else {
        return Ok(None);
    };
    let records: usize = b.imported.iter().map(|(_, n)| n).sum();
    let model = match &b.model {
        Some(m) => format!(
            "a {} model trained on {} of them",
            m.model_kind.name(),
            m.records
        ),
        None => "no model (nothing new to train on)".to_string(),
    };
    note(format!(
        "imported {records} shipped records from {} set(s) and {model} in {:.0} s",
        b.imported.len(),
        b.seconds
    ));
    for (path, why) in &b.skipped {
        note(format!("  {}: {why}", path.display()));
    }
    Ok(Some(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::TargetKind;
    use std::io::Write;

    /// The first `n` records of a shipped set, written as a set of their own into `dir`
    /// under `name`, their arch replaced by `arch`.
    fn excerpt(dir: &Path, name: &str, n: usize, arch: &str) -> PathBuf {
        let shipped = sets_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("database"));
        let source = shipped
            .iter()
            .find(|p| p.to_string_lossy().contains("h100-2026-11-26"))
            .expect("the shipped tensor-core set");
        let lines: Vec<String> = BufReader::new(flate2::read::GzDecoder::new(
            std::fs::File::open(source).unwrap(),
        ))
        .lines()
        .take(n)
        .map(|l| {
            l.unwrap()
                .replace("\"arch\":\"sm_90a\"", &format!("\"arch\":\"{arch}\""))
        })
        .collect();
        let path = dir.join(name);
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        for l in lines {
            writeln!(gz, "{l}").unwrap();
        }
        gz.finish().unwrap();
        path
    }

    fn target(arch: &str) -> TargetKey {
        TargetKey {
            kind: TargetKind::Cuda,
            arch: arch.to_string(),
            device: "NVIDIA H100 80GB HBM3".to_string(),
            toolchain: "nvrtc 13.0, driver 13.0".to_string(),
        }
    }

    #[test]
    fn a_new_database_starts_from_the_sets_of_its_arch_once() {
        let tmp = tempfile::tempdir().unwrap();
        let sets = tmp.path().join("sets");
        std::fs::create_dir(&sets).unwrap();
        excerpt(&sets, "a.all.jsonl.gz", 120, "sm_90a");
        let other = excerpt(&sets, "b.all.jsonl.gz", 10, "sm_80");
        std::fs::write(sets.join("notes.txt"), "not a set").unwrap();
        let mut db = Database::open(tmp.path().join("db.sqlite")).unwrap();
        let t = target("sm_90a");
        assert!(knows_nothing_of(&db, &t).unwrap());

        let mut notes = Vec::new();
        let b = bootstrap(&mut db, &t, &sets, &mut |n| notes.push(n))
            .unwrap()
            .expect("a database that knows nothing of sm_90a is started");
        assert_eq!(b.imported.len(), 1, "{:?}", b.imported);
        assert!(b.imported[0].0.ends_with("a.all.jsonl.gz"));
        assert_eq!(b.imported[0].1, 120, "every record of the excerpt replays");
        assert_eq!(
            b.skipped,
            vec![(other, "measured on cuda sm_80".to_string())]
        );
        let model = b.model.expect("a model is trained on the imported records");
        assert!(model.records > 0 && model.records <= 120);
        assert!(db.load_model(TargetKind::Cuda, "sm_90a").unwrap().is_some());
        assert!(
            notes[0].contains("importing the 1 record set(s)"),
            "{notes:?}"
        );

        // Once: the database now knows the arch.
        assert!(!knows_nothing_of(&db, &t).unwrap());
        assert!(bootstrap(&mut db, &t, &sets, &mut |_| {})
            .unwrap()
            .is_none());
        // Another arch with no set of its own is left alone.
        assert!(bootstrap(&mut db, &target("sm_89"), &sets, &mut |_| {})
            .unwrap()
            .is_none());
    }

    #[test]
    fn starting_from_nothing_wins_and_the_repository_sets_are_found() {
        assert_eq!(Source::locate(true), Source::Off);
        let Source::Dir(dir) = Source::locate(false) else {
            // TESSEL_SHIPPED=off in the environment running the tests.
            return;
        };
        assert!(!sets_in(&dir).is_empty(), "{}", dir.display());
    }
}

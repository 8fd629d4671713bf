use super::*;
use crate::database::{canonical_program, NewRecord, TargetKind};
use crate::schedule::{AnnArg, IntArg, Schedule, Target, Trace};
use crate::workload::preset;

fn cpu() -> TargetKey {
    TargetKey {
        kind: TargetKind::Cpu,
        arch: "x86_64-avx2".into(),
        device: "test cpu".into(),
        toolchain: "cc".into(),
    }
}

/// A valid trace of a canonical matmul, tagged with `n` so that traces differ.
fn trace(w: &Workload, n: i64) -> Trace {
    let mut s = Schedule::new(canonical_program(w).unwrap(), 0);
    let b = s.get_block("t2").unwrap();
    let loops = s.get_loops(b).unwrap();
    let t = s
        .sample_perfect_tile(loops[0], 2, 16, Some(vec![4, 4]))
        .unwrap();
    s.split(loops[0], &[Some(IntArg::Rv(t[0])), Some(IntArg::Rv(t[1]))])
        .unwrap();
    s.annotate(Target::Block(b), "tag", AnnArg::Int(n)).unwrap();
    s.trace().clone()
}

fn ok(db: &mut Database, w: &Workload, n: i64, secs: f64) {
    db.commit(&NewRecord::ok(w, cpu(), trace(w, n), vec![secs; 3]))
        .unwrap();
}

fn failed(db: &mut Database, w: &Workload, n: i64, status: Status) {
    db.commit(&NewRecord::failed(w, cpu(), trace(w, n), status, "no"))
        .unwrap();
}

/// Two matmuls: a (weight 3) measured 4e-5, 2e-5, wrong, 3e-5 (and one rejection, not a
/// trial); b (weight 1) measured 1e-4 then 5e-5.
fn fixture() -> (Database, Workload, Workload) {
    let mut db = Database::open_in_memory().unwrap();
    let a = preset("matmul:16x16x16").unwrap();
    let b = preset("matmul:16x32x16").unwrap();
    ok(&mut db, &a, 1, 4e-5);
    ok(&mut db, &b, 1, 1e-4);
    ok(&mut db, &a, 2, 2e-5);
    failed(&mut db, &a, 3, Status::WrongAnswer);
    failed(&mut db, &a, 4, Status::Rejected);
    ok(&mut db, &b, 2, 5e-5);
    ok(&mut db, &a, 5, 3e-5);
    (db, a, b)
}

fn summary(db: &Database, a: &Workload, b: &Workload) -> Summary {
    let tasks = [
        TaskSpec {
            label: "a".into(),
            workload: a,
            weight: 3,
        },
        TaskSpec {
            label: "b".into(),
            workload: b,
            weight: 1,
        },
    ];
    let peers = HashMap::from([(a.key(), 4e-5), (b.key(), 2.5e-5)]);
    collect(db, "net", true, &tasks, &cpu(), &peers).unwrap()
}

#[test]
fn rows_hold_trials_best_rate_peer_ratio_and_weighted_latency() {
    let (db, a, b) = fixture();
    let s = summary(&db, &a, &b);
    let ra = &s.rows[0];
    assert_eq!(ra.trials, 4);
    assert_eq!(ra.best_seconds, Some(2e-5));
    assert_eq!(
        ra.curve,
        vec![Some(4e-5), Some(2e-5), Some(2e-5), Some(2e-5)]
    );
    assert_eq!(ra.gflops(), Some(2.0 * 16.0 * 16.0 * 16.0 / 2e-5 / 1e9));
    assert_eq!(ra.peer_ratio(), Some(2.0));
    assert_eq!(ra.weighted_seconds(), Some(3.0 * 2e-5));
    assert_eq!(s.rows[1].trials, 2);
    assert_eq!(s.rows[1].peer_ratio(), Some(0.5));
    assert!((s.estimated_seconds().unwrap() - 1.1e-4).abs() < 1e-12);
    assert!((s.peer_seconds().unwrap() - 1.45e-4).abs() < 1e-12);
    assert_eq!(s.trials(), 6);
}

#[test]
fn the_network_curve_starts_once_every_task_has_a_best() {
    let (db, a, b) = fixture();
    let c = summary(&db, &a, &b).network_curve();
    let expect = [
        (2, 3.0 * 4e-5 + 1e-4),
        (3, 3.0 * 2e-5 + 1e-4),
        (4, 3.0 * 2e-5 + 1e-4),
        (5, 3.0 * 2e-5 + 5e-5),
        (6, 3.0 * 2e-5 + 5e-5),
    ];
    assert_eq!(c.len(), expect.len());
    for ((n, e), (m, f)) in c.iter().zip(expect) {
        assert_eq!(*n, m);
        assert!((e - f).abs() < 1e-12, "{e} vs {f}");
    }
}

#[test]
fn the_table_shows_each_task_and_the_estimated_total() {
    let (db, a, b) = fixture();
    let t = table::render(&summary(&db, &a, &b));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], "net on cpu x86_64-avx2");
    let cols = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        cols(lines[2]),
        ["a", "3", "4", "20.0", "us", "0.4", "2.00x", "60.0", "us", "54.5%"]
    );
    assert_eq!(
        cols(lines[3]),
        ["b", "1", "2", "50.0", "us", "0.3", "0.50x", "50.0", "us", "45.5%"]
    );
    assert_eq!(
        lines[4],
        "estimated network latency 110.0 us over 6 trials (sum of weight x best); vendor \
         libraries 145.0 us (1.32x)"
    );
}

#[test]
fn the_page_and_the_curves_are_drawn() {
    let (db, a, b) = fixture();
    let s = summary(&db, &a, &b);
    let svg = plot::task_curve("a", &s.rows[0].curve).unwrap().unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("<polyline"),
        "{svg}"
    );
    assert!(plot::network_curve("net", &s.network_curve())
        .unwrap()
        .is_some());
    assert_eq!(plot::task_curve("none", &[None, None]).unwrap(), None);
    let page = html::render(&s, &[true, false], true);
    assert!(page.contains("task01.svg") && !page.contains("task02.svg"));
    assert!(page.contains("network.svg") && page.contains("110.0 us"));
}

//! The CPU measurement path end to end: the `tessel __worker` process builds C kernels
//! with the system compiler, checks them against the naive reference and times them; a
//! kernel that crashes, hangs, computes garbage or does not compile becomes a typed
//! failure and the next candidate is still measured.

use std::time::Duration;
use tessel::codegen::{self, Launch, Source};
use tessel::lower::{lower, Backend};
use tessel::measure::cpu::naive_source;
use tessel::measure::worker::{param_specs, MeasureError, Measurer};
use tessel::measure::{Device, FailureKind, GemmPeer, Job, Outcome, Peer, TimingConfig};
use tessel::schedule::{replay, text};

const N: i64 = 64;

/// Tiled for cache, parallel outer loop, vectorized inner loop.
const CPU_SCHEDULE: &str = r#"
b0 = get_block("C")
i, j, k = get_loops(b0)
i0, i1 = split(i, factors=[None, 8])
j0, j1 = split(j, factors=[None, 16])
reorder(i0, j0, i1, k, j1)
parallel(i0)
vectorize(j1)
"#;

fn program() -> tessel::ir::Program {
    tessel::workload::preset(&format!("matmul:{N}x{N}x{N}"))
        .expect("preset")
        .to_program()
}

fn scheduled() -> Source {
    let trace = text::parse(CPU_SCHEDULE).expect("trace parses");
    let sch = replay(&trace, program(), 0).expect("schedule applies");
    codegen::cpu::generate(&lower(sch.program(), Backend::Cpu).expect("lowers")).expect("generates")
}

/// A hand-written kernel over the matmul's buffers.
fn hand(body: &str) -> Source {
    Source {
        code: format!(
            "void tessel_entry_0(void **args) {{\n  float *C = (float *)args[2];\n  {body}\n}}\n"
        ),
        kernels: vec![Launch {
            name: "tessel_entry_0".into(),
            grid: [1; 3],
            block: [1; 3],
            dynamic_shared_bytes: 0,
            static_shared_bytes: 0,
            params: vec!["A".into(), "B".into(), "C".into()],
            waits_for_previous: false,
        }],
        workspaces: vec![],
    }
}

fn job(candidates: Vec<Source>) -> Job {
    let p = program();
    Job {
        device: Device::Cpu,
        params: param_specs(&p),
        reference: naive_source(&p).expect("reference"),
        candidates,
        seed: 1,
        timing: TimingConfig {
            warmup_seconds: 0.002,
            min_runs: 3,
            max_runs: 10,
            max_seconds: 0.02,
            flush_cache: true,
            give_up_above_seconds: None,
            give_up_factor: None,
            settled_spread: None,
            enough_seconds: None,
        },
        peer: None,
        tolerance: 1e-4,
        timeout_seconds: 30.0,
        build_limits: None,
        compile_timeout_seconds: None,
        gated: false,
    }
}

fn measurer() -> Measurer {
    Measurer::new(env!("CARGO_BIN_EXE_tessel")).with_timeout(Duration::from_secs(3))
}

fn kind(o: &Outcome) -> Option<FailureKind> {
    o.as_ref().err().map(|f| f.kind)
}

fn assert_ok(o: &Outcome) {
    let m = o
        .as_ref()
        .unwrap_or_else(|f| panic!("expected a measurement, got {f}"));
    assert!(m.rel_error < 1e-4, "rel error {}", m.rel_error);
    assert!(!m.runs.is_empty() && m.runs.iter().all(|t| t.is_finite() && *t > 0.0));
    assert!(m.min_seconds <= m.median_seconds && m.median_seconds <= m.max_seconds);
    assert!(m.build.compile_seconds > 0.0);
}

#[test]
fn every_failure_is_typed_and_the_next_candidate_still_runs() {
    let candidates = vec![
        scheduled(),
        // A wild pointer store, far outside any mapping.
        hand("volatile float *wild = C + ((long)1 << 40); *wild = 1.0f;"),
        scheduled(),
        hand("volatile long spin = 0; for (;;) spin++;"),
        scheduled(),
        hand("for (int i = 0; i < 64 * 64; i++) C[i] = 1.0f;"),
        hand("for (int i = 0; i < 64 * 64; i++) if (i != 5) C[i] = 1.0f;"),
        hand("this is not C;"),
        scheduled(),
    ];
    let mut m = measurer();
    let (outcomes, peer) = m.measure(&job(candidates)).expect("measures");
    assert!(peer.is_none());
    assert_eq!(outcomes.len(), 9);
    for i in [0, 2, 4, 8] {
        assert_ok(&outcomes[i]);
    }
    let err = |i: usize| outcomes[i].as_ref().unwrap_err();
    assert_eq!(
        kind(&outcomes[1]),
        Some(FailureKind::Crash),
        "{:?}",
        outcomes[1]
    );
    assert!(err(1).message.contains("SIGSEGV"), "{}", err(1).message);
    assert_eq!(
        kind(&outcomes[3]),
        Some(FailureKind::Timeout),
        "{:?}",
        outcomes[3]
    );
    assert_eq!(
        kind(&outcomes[5]),
        Some(FailureKind::WrongAnswer),
        "{:?}",
        outcomes[5]
    );
    assert!(
        err(5).message.contains("exceeds the tolerance"),
        "{}",
        err(5).message
    );
    // Output poisoning: the element the kernel never wrote is named.
    assert_eq!(kind(&outcomes[6]), Some(FailureKind::WrongAnswer));
    assert!(
        err(6).message.starts_with("C[0, 5] is NaN"),
        "{}",
        err(6).message
    );
    assert_eq!(kind(&outcomes[7]), Some(FailureKind::Compile));
    assert!(err(7).message.contains("error"), "{}", err(7).message);
    // One worker, then a fresh one after the crash and after the timeout.
    assert_eq!(m.workers_started(), 3);
}

#[test]
fn a_shared_device_is_taken_only_once_compiled_and_held_through_a_crash() {
    let device = std::sync::Mutex::new(());
    let held = device.lock().unwrap();
    let candidates = vec![
        scheduled(),
        hand("volatile float *wild = C + ((long)1 << 40); *wild = 1.0f;"),
        scheduled(),
    ];
    std::thread::scope(|s| {
        let measuring = s.spawn(|| {
            let mut m = measurer();
            let measured = m.measure_sharing(&job(candidates), &device);
            (measured, m.workers_started())
        });
        // The worker compiles, answers, and waits for the device the test holds.
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!measuring.is_finished(), "measured without the device");
        drop(held);
        let (measured, workers) = measuring.join().unwrap();
        let (outcomes, _) = measured.expect("measures");
        assert_ok(&outcomes[0]);
        assert_eq!(kind(&outcomes[1]), Some(FailureKind::Crash));
        assert_ok(&outcomes[2]);
        // The worker started after the crash went on with the device held, ungated.
        assert_eq!(workers, 2);
    });
    assert!(device.try_lock().is_ok(), "the device is given back");
}

#[test]
fn a_job_started_ahead_is_measured_with_the_give_up_latency_of_when_it_goes() {
    let mut ahead = job(vec![scheduled(), scheduled()]);
    ahead.timing.min_runs = 10;
    let mut m = measurer();
    let compiling = m.start_compiling(&ahead).expect("starts");
    let mut now = ahead.clone();
    now.timing.give_up_above_seconds = Some(1e-12);
    let (outcomes, _) = m.measure_compiled(compiling, &now).expect("measures");
    for o in &outcomes {
        assert_ok(o);
        let runs = o.as_ref().unwrap().runs.len();
        assert_eq!(
            runs,
            tessel::measure::PROBE_RUNS,
            "given up after its probes"
        );
    }
    assert_eq!(m.workers_started(), 1);
}

#[test]
fn the_ndarray_peer_is_checked_and_timed() {
    let mut j = job(vec![scheduled()]);
    j.peer = Some(Peer::Gemm(GemmPeer::nn(1, N, N, N)));
    let mut m = measurer();
    let (outcomes, peer) = m.measure(&j).expect("measures");
    assert_ok(&outcomes[0]);
    let peer = peer.unwrap_or_else(|| panic!("no peer: {:?}", m.peer_failure()));
    assert!(peer.name.contains("ndarray"));
    assert!(peer.rel_error < 1e-4 && peer.median_seconds > 0.0 && peer.median_seconds.is_finite());
}

#[test]
fn a_broken_reference_is_reported_as_such() {
    let mut j = job(vec![scheduled()]);
    j.reference = hand("not C either");
    match measurer().measure(&j) {
        Err(MeasureError::Reference(f)) => {
            assert_eq!(f.kind, FailureKind::Compile);
            assert!(f.message.contains("error"), "{}", f.message);
        }
        other => panic!("expected a reference failure, got {other:?}"),
    }
}

#[test]
fn a_missing_worker_binary_is_an_error_not_a_panic() {
    let e = Measurer::new("/nonexistent/tessel")
        .measure(&job(vec![]))
        .map(|_| ());
    assert!(e.is_ok(), "no candidates and no peer need no worker");
    let e = Measurer::new("/nonexistent/tessel")
        .measure(&job(vec![hand("")]))
        .unwrap_err();
    assert!(matches!(e, MeasureError::Spawn { .. }), "{e}");
}

/// Every matmul layout and the dense layer get a peer whose output the worker checks
/// against the reference (a wrong transpose or epilogue would be a wrong answer).
#[test]
fn the_peer_covers_layouts_and_the_dense_epilogue() {
    for spec in [
        "matmul:m=24,n=40,k=16,layout=nn",
        "matmul:m=24,n=40,k=16,layout=nt",
        "matmul:m=24,n=40,k=16,layout=tn",
        "matmul:m=24,n=40,k=16,layout=tt",
        "batch_matmul:b=2,m=8,n=12,k=4",
        "dense_bias_relu:m=10,n=30,k=20",
    ] {
        let w = tessel::workload::preset(spec).unwrap();
        let j = tessel::measure::session::job(&w, vec![], Device::Cpu, true, 5).unwrap();
        let Some(Peer::Gemm(g)) = &j.peer else {
            panic!("{spec}: no peer");
        };
        let trans_b = spec.contains("nt") || spec.contains("tt") || spec.contains("dense");
        assert_eq!(g.trans_b, trans_b, "{spec}");
        assert_eq!(
            g.trans_a,
            spec.contains("tn") || spec.contains("tt"),
            "{spec}"
        );
        let mut m = measurer();
        let (_, peer) = m.measure(&j).expect("measures");
        let peer = peer.unwrap_or_else(|| panic!("{spec}: no peer: {:?}", m.peer_failure()));
        assert!(peer.rel_error < 1e-4, "{spec}: {}", peer.rel_error);
    }
    // A conv has no GEMM peer.
    let w = tessel::workload::preset("conv2d_nchw:n=1,c=4,h=6,w=6,k=4,r=3,s=3").unwrap();
    let j = tessel::measure::session::job(&w, vec![], Device::Cpu, true, 5).unwrap();
    assert!(j.peer.is_none());
}

#[test]
fn a_candidate_far_slower_than_one_timed_before_it_in_the_job_is_given_up_after_its_probes() {
    // A factor no real kernel can meet: whatever the first candidate's median, the
    // second (the same kernel) is above it after its probe runs. The first is timed fully:
    // before it, the job knows no latency.
    let mut j = job(vec![scheduled(), scheduled()]);
    j.timing.min_runs = 8;
    j.timing.max_runs = 8;
    j.timing.max_seconds = 10.0;
    j.timing.give_up_factor = Some(1e-9);
    let (outcomes, _) = measurer().measure(&j).expect("measures");
    let runs = |o: &Outcome| o.as_ref().expect("measured").runs.len();
    assert_eq!(runs(&outcomes[0]), 8);
    assert_eq!(runs(&outcomes[1]), tessel::measure::PROBE_RUNS);
}

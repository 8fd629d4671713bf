//! Measures how long the cost model's featurization takes per candidate, on one core:
//! `cargo run --release --example featurize_throughput [workload] [cuda|cpu]`.
//! Samples 64 candidates of the workload's design space (tiled GEMMs for the default
//! `matmul:1024x1024x1024`), then featurizes 2,048 of them (each 32 times) and reports
//! the mean time per candidate.

use std::time::Instant;
use tessel::cost_model::{featurize, DeviceSpec};
use tessel::search::{RandomSearch, SearchSpace, SearchStrategy, TargetLimits};
use tessel::target::cuda::CudaLimits;

fn main() {
    let spec = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "matmul:1024x1024x1024".into());
    let cpu = std::env::args().nth(2).as_deref() == Some("cpu");
    let w = tessel::workload::from_cli(&spec, |_| Err(std::io::Error::other("no files")))
        .expect("a preset workload");
    let program = tessel::database::canonical_program(&w).expect("canonical program");
    let (space, target, dev) = if cpu {
        (
            SearchSpace::cpu_default(),
            TargetLimits::Cpu,
            DeviceSpec::cpu(2),
        )
    } else {
        (
            SearchSpace::cuda_default(),
            TargetLimits::Cuda(CudaLimits::sm90_default()),
            DeviceSpec::cuda("sm_90a"),
        )
    };
    let mut search = RandomSearch::new(space, target, program, 1);
    let proposal = search.propose(64, &mut |_| false);
    let lowered: Vec<_> = proposal
        .candidates
        .iter()
        .map(|c| &c.verified.lowered)
        .collect();
    assert!(
        !lowered.is_empty(),
        "no candidate passed the postprocessors"
    );
    let total = 2048;
    let (start, cpu_start) = (Instant::now(), thread_cpu_seconds());
    let mut checksum = 0.0f64;
    for i in 0..total {
        let f = featurize(lowered[i % lowered.len()], &dev);
        checksum += f64::from(f[i % f.len()]);
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu_secs = thread_cpu_seconds() - cpu_start;
    println!(
        "{spec} ({}): {total} featurizations of {} distinct candidates in {:.1} ms wall, {:.1} ms CPU: {:.1} us per candidate (CPU time; checksum {checksum:.1})",
        if cpu { "cpu" } else { "cuda" },
        lowered.len(),
        secs * 1e3,
        cpu_secs * 1e3,
        cpu_secs / total as f64 * 1e6
    );
}

/// CPU time of this thread: the figure that holds on a loaded machine.
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

//! Library use: ask tessel's database for the best matmul kernel on this machine and run
//! it on your own buffers.
//!
//! ```text
//! cargo run --release --example lookup -- --db records.db --target cuda 1024 1024 1024
//! cargo run --release --example lookup -- --db records.db --target cpu 512 512 512
//! ```
//!
//! The kernel comes back ready to launch: its source, the launch configuration of each
//! kernel, the CUBIN (CUDA, when NVRTC is present) and the trace it was built from. Here
//! it is launched through tessel's runners (cudarc on CUDA, the C compiler on the CPU).

use anyhow::{bail, Context, Result};
use tessel::database::{target_key, Database, Match};
use tessel::measure::cpu::CpuRunner;
use tessel::measure::cuda::{compile, CudaRunner};
use tessel::measure::worker::param_specs;

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut take = |flag: &str| -> Option<String> {
        let i = args.iter().position(|a| a == flag)?;
        args.remove(i);
        (i < args.len()).then(|| args.remove(i))
    };
    let db_path = take("--db")
        .or_else(|| tessel::database::default_path().map(|p| p.display().to_string()))
        .context("--db FILE")?;
    let target = take("--target").unwrap_or_else(|| "cpu".into());
    let dims: Vec<i64> = args
        .iter()
        .map(|a| a.parse())
        .collect::<Result<_, _>>()
        .context("M N K")?;
    let [m, n, k] = dims.as_slice() else {
        bail!("usage: lookup [--db FILE] [--target cpu|cuda] M N K")
    };
    let (m, n, k) = (*m, *n, *k);

    // 1. Look the kernel up for this machine.
    let w = tessel::workload::preset(&format!("matmul:{m}x{n}x{k}"))?;
    let fp = match target.as_str() {
        "cuda" => tessel::target::cuda_fingerprint(),
        _ => tessel::target::cpu_fingerprint(),
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let db = Database::open(&db_path)?;
    let Some(kernel) = db.kernel(&w, &target_key(&fp)?)? else {
        bail!(
            "no record for matmul:{m}x{n}x{k} on {} in {db_path}: tune it first",
            fp.device
        );
    };
    if let Match::Fallback { measured_on } = &kernel.lookup.matched {
        println!("note: measured on {measured_on}, not on this device");
    }
    for l in &kernel.source.kernels {
        println!(
            "kernel {}: grid {:?}, block {:?}, {} B dynamic shared memory",
            l.name, l.grid, l.block, l.dynamic_shared_bytes
        );
    }

    // 2. Your buffers.
    let a: Vec<f32> = (0..m * k).map(|i| ((i % 7) as f32 - 3.0) * 0.25).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i % 5) as f32 - 2.0) * 0.5).collect();
    let params = param_specs(&kernel.program);

    // 3. Launch.
    let c = if target == "cuda" {
        let mut r = CudaRunner::new()?;
        r.prepare(&params, &[a.clone(), b.clone()], &kernel.source.workspaces)?;
        let cubin = compile(&kernel.source.code, &r.device().arch())?;
        let h = r.load(&[cubin], &kernel.source)?;
        r.run_once(h)?.remove(0)
    } else {
        let mut r = CpuRunner::new()?;
        r.prepare(&params, &[a.clone(), b.clone()], &kernel.source.workspaces)?;
        let (h, _) = r.build(&kernel.source)?;
        r.run_once(h)?.remove(0)
    };

    // 4. Check a few elements against a plain loop.
    let (m, n, k) = (m as usize, n as usize, k as usize);
    let mut worst = 0f32;
    for (i, j) in [(0, 0), (m / 2, n / 3), (m - 1, n - 1)] {
        let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        worst = worst.max((c[i * n + j] - want).abs());
    }
    println!(
        "C[0, 0] = {}, C[{}, {}] = {}; max abs error on the sampled elements {worst:e}",
        c[0],
        m - 1,
        n - 1,
        c[(m - 1) * n + n - 1]
    );
    Ok(())
}

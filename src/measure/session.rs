//! Putting a measurement together: the candidate's source, the naive reference, the peer
//! routine for GEMM-shaped workloads, and the [`Job`] that carries them to the worker.

use super::worker::param_specs;
use super::{Device, Failure, FailureKind, GemmPeer, Job, Peer, TimingConfig};
use crate::codegen::{self, Source};
use crate::ir::{DType, IterKind, LoopKind, Node, Program};
use crate::lower::{lower, Backend};
use crate::schedule::{IntArg, Schedule};
use crate::workload::{self, Workload};

/// Lowers and prints a program for a device. Failures are `Instantiation` (the program
/// cannot be lowered for that device) or `Rejected`.
pub fn source_for(program: &Program, device: &Device) -> Result<Source, Failure> {
    let backend = match device {
        Device::Cpu => Backend::Cpu,
        Device::Cuda { .. } => Backend::Cuda,
    };
    let lowered = lower(program, backend)
        .map_err(|e| Failure::new(FailureKind::Instantiation, e.to_string()))?;
    let src = match backend {
        Backend::Cpu => codegen::cpu::generate(&lowered),
        Backend::Cuda => codegen::cuda::generate(&lowered),
    };
    src.map_err(|e| Failure::new(FailureKind::Instantiation, e.to_string()))
}

/// The unscheduled program made runnable on a CUDA device in the simplest way: in each
/// root loop nest, the data-parallel loops of its block are fused and spread over
/// 256-thread blocks; reductions stay serial in each thread.
pub fn naive_cuda_program(program: &Program) -> Result<Program, Failure> {
    let err = |e: crate::schedule::ScheduleError| {
        Failure::new(
            FailureKind::Instantiation,
            format!("naive CUDA reference: {e}"),
        )
    };
    let mut sch = Schedule::new(program.clone(), 0);
    let names: Vec<String> = program
        .blocks_in_order()
        .iter()
        .map(|b| program.block(*b).name.clone())
        .collect();
    for name in names {
        let b = sch.get_block(&name).map_err(err)?;
        let loops = sch.get_loops(b).map_err(err)?;
        // The leading loops that only feed spatial iteration variables.
        let p = sch.program();
        let bid = sch.block_id(b).map_err(err)?;
        let blk = p.block(bid);
        let mut spatial = Vec::new();
        for l in &loops {
            let id = sch.loop_id(*l).map_err(err)?;
            let v = p.lp(id).var;
            let reduce = blk
                .iter_vars
                .iter()
                .zip(&blk.bindings)
                .any(|(iv, e)| iv.kind == IterKind::Reduce && e.uses_var(v));
            if reduce
                || p.lp(id).kind != LoopKind::Serial
                || p.lp(id).body.len() != 1 && !matches!(p.lp(id).body.as_slice(), [Node::Block(_)])
            {
                break;
            }
            spatial.push(*l);
        }
        if spatial.is_empty() {
            return Err(Failure::new(FailureKind::Instantiation, format!("naive CUDA reference: block {name} has no data-parallel loop to spread over threads")));
        }
        let fused = sch.fuse(&spatial).map_err(err)?;
        let parts = sch
            .split(fused, &[None, Some(IntArg::Lit(256))])
            .map_err(err)?;
        sch.bind(parts[0], "blockIdx.x").map_err(err)?;
        sch.bind(parts[1], "threadIdx.x").map_err(err)?;
    }
    Ok(sch.into_program())
}

/// The reference for a workload on a device: the unscheduled program, lowered naively.
pub fn reference_source(program: &Program, device: &Device) -> Result<Source, Failure> {
    match device {
        Device::Cpu => source_for(program, device),
        Device::Cuda { .. } => source_for(&naive_cuda_program(program)?, device),
    }
}

/// The library GEMM a user would otherwise call, when the workload is a (batched)
/// row-major matmul in any layout or a dense layer with bias and relu, in f32 (strict, or
/// TF32 with `math=tf32`) or in f16 / bf16 accumulated in f32 (`acc=f32`; cuBLAS has no
/// bf16 accumulation, and its f16 one is not offered): recognised by comparing workload keys with the preset of the same shape,
/// so a workload written by hand is recognised too.
pub fn gemm_peer(w: &Workload) -> Option<Peer> {
    let p = w.to_program();
    let shapes: Vec<Vec<i64>> = p
        .params
        .iter()
        .map(|b| p.buffer(*b).shape.clone())
        .collect();
    let dtype = p.buffer(*p.params.first()?).dtype;
    // A 3xTF32 GEMM keeps f32's accuracy: its peer is the vendor's f32 GEMM.
    let split = w.splits_tf32();
    let tf32 = w.uses_tf32() && !split;
    let suffix = match dtype {
        DType::F32 => w.math_suffix().to_string(),
        DType::F16 | DType::BF16 => format!(",dtype={},acc=f32", dtype.short()),
        DType::I32 | DType::Bool => return None,
    };
    let same = |spec: String| {
        workload::preset(&format!("{spec}{suffix}")).is_ok_and(|x| x.key() == w.key())
    };
    let peer = match shapes.as_slice() {
        [a, b, c] if a.len() == 2 && b.len() == 2 && c.len() == 2 => {
            let (m, n) = (c[0], c[1]);
            [(false, false), (false, true), (true, false), (true, true)]
                .into_iter()
                .find_map(|(trans_a, trans_b)| {
                    let k = if trans_a { a[0] } else { a[1] };
                    let layout = match (trans_a, trans_b) {
                        (false, false) => "nn",
                        (false, true) => "nt",
                        (true, false) => "tn",
                        (true, true) => "tt",
                    };
                    same(format!("matmul:m={m},n={n},k={k},layout={layout}")).then_some(GemmPeer {
                        trans_a,
                        trans_b,
                        ..GemmPeer::nn(1, m, n, k)
                    })
                })?
        }
        [a, b, c] if a.len() == 3 && b.len() == 3 && c.len() == 3 => {
            let (bt, m, k, n) = (a[0], a[1], a[2], b[2]);
            same(format!("batch_matmul:b={bt},m={m},n={n},k={k}"))
                .then_some(GemmPeer::nn(bt, m, n, k))?
        }
        [x, wt, bias, out]
            if x.len() == 2 && wt.len() == 2 && bias.len() == 1 && out.len() == 2 =>
        {
            let (m, k, n) = (x[0], x[1], wt[0]);
            same(format!("dense_bias_relu:m={m},n={n},k={k}")).then_some(GemmPeer {
                c: 3,
                trans_b: true,
                bias_relu: Some(2),
                ..GemmPeer::nn(1, m, n, k)
            })?
        }
        _ => return None,
    };
    Some(Peer::Gemm(GemmPeer {
        dtype,
        tf32,
        ..peer
    }))
}

/// The peer of `w` on `device`: [`gemm_peer`], on the CPU for float32 GEMMs alone (ndarray's
/// `dot` has no 16-bit GEMM).
fn peer_on(w: &Workload, device: &Device) -> Option<Peer> {
    let peer = gemm_peer(w)?;
    let p = w.to_program();
    let f32_only = p.params.iter().all(|b| p.buffer(*b).dtype == DType::F32);
    (*device != Device::Cpu || f32_only).then_some(peer)
}

/// A job measuring `candidates` of workload `w` on `device`.
pub fn job(
    w: &Workload,
    candidates: Vec<Source>,
    device: Device,
    with_peer: bool,
    seed: u64,
) -> Result<Job, Failure> {
    let program = w.to_program();
    let reference = reference_source(&program, &device)?;
    // The outputs' precision sets the tolerance (a 16-bit output is rounded coarsely, and
    // a schedule reorders its roundings), or the factors' where they are TF32; the
    // loosest where outputs differ.
    let least = match w.uses_tf32() && !w.splits_tf32() {
        true => crate::interp::TOLERANCE_TF32,
        false => crate::interp::TOLERANCE,
    };
    let tolerance = program
        .params
        .iter()
        .map(|b| program.buffer(*b))
        .filter(|b| b.kind == crate::ir::BufferKind::Output)
        .map(|b| crate::interp::tolerance(b.dtype))
        .fold(least, f64::max);
    Ok(Job {
        params: param_specs(&program),
        reference,
        candidates,
        seed,
        timing: TimingConfig::default(),
        peer: if with_peer { peer_on(w, &device) } else { None },
        tolerance,
        timeout_seconds: 60.0,
        build_limits: None,
        compile_timeout_seconds: Some(60.0),
        gated: false,
        device,
    })
}

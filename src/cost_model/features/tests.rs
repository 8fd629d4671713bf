//! Per-store measurements of hand-written schedules against figures computed by hand.

use super::stores::Store;
use super::{kernel_shape, measure, Measured};
use crate::cost_model::DeviceSpec;
use crate::ir::Scope;
use crate::lower::{lower, Backend, Lowered};
use crate::schedule::{replay, text};
use crate::workload::preset;

/// Lowers `examples/schedules/NAME.sched` applied to a preset workload.
fn lowered(workload: &str, schedule: &str, backend: Backend) -> Lowered {
    let path = format!(
        "{}/examples/schedules/{schedule}.sched",
        env!("CARGO_MANIFEST_DIR")
    );
    let src = std::fs::read_to_string(&path).expect("the example schedule");
    let trace = text::parse(&src).expect("a valid trace");
    let w = preset(workload).expect("a preset");
    let sch = replay(&trace, w.to_program(), 0).expect("the trace replays");
    lower(sch.program(), backend).expect("lowers")
}

/// The store writing the buffer named `name`.
fn store<'m>(l: &Lowered, m: &'m Measured, name: &str) -> &'m Store {
    let found: Vec<&Store> = m
        .stores
        .iter()
        .filter(|s| l.program.buffer(s.buffer).name == name)
        .collect();
    assert_eq!(found.len(), 1, "one store writes {name}");
    found[0]
}

#[test]
fn tiled_cuda_matmul_loads_its_tiles_into_shared_memory() {
    // MLC's blocking_with_shared on a 256^3 matmul: 64x64 tiles of C per block (4 x 4
    // blocks), 64 threads of 8x8 each, k in steps of 8; A and B tiles fetched into shared
    // memory with float4 loads by the 64 threads.
    let l = lowered("matmul:256x256x256", "mlc_blocking_shared", Backend::Cuda);
    let dev = DeviceSpec::cuda("sm_90a");
    let m = measure(&l, &dev);
    let f32_bytes = 4.0;

    // A's fetch: per step a 64 x 8 tile (rows 256 floats apart: one 32-byte piece of a
    // 128-byte line per row); over the 32 steps the block's 64 full rows of A.
    let a = store(&l, &m, "A_shared");
    let read = &a.reads[0];
    assert_eq!(read.step.elements * f32_bytes, 64.0 * 8.0 * 4.0);
    assert_eq!(read.step.lines, 64.0);
    assert_eq!(read.block.elements * f32_bytes, 64.0 * 256.0 * 4.0);
    assert_eq!(read.block.lines, 64.0 * (256.0 * 4.0 / 128.0));
    // One thread: 2 float4 per step.
    assert_eq!(read.thread.elements, 2.0 * 4.0 * 32.0);
    // A warp reads 16 rows x 8 floats: 16 lines, a quarter of each used.
    assert_eq!(read.warp.lines, 16.0);
    assert_eq!(read.thread_stride, Some(4));
    assert_eq!(a.loops.vector_len, 4.0);
    // Warp-wide float4 loads: 2 per step per warp, 32 steps, 2 warps, 16 blocks; 16
    // lines each.
    assert_eq!(read.warps, 2.0 * 32.0 * 2.0 * 16.0);
    assert_eq!(read.warps * read.warp.lines, 2048.0 * 16.0);
    // The shared tile it writes: 512 floats, one step's worth.
    assert_eq!(a.write.block.elements, 512.0);

    // B's fetch: per step an 8 x 64 tile (256 contiguous bytes per row: 2 lines).
    let b = store(&l, &m, "B_shared");
    let read = &b.reads[0];
    assert_eq!(read.step.elements * f32_bytes, 8.0 * 64.0 * 4.0);
    assert_eq!(read.step.lines, 8.0 * 2.0);
    assert_eq!(read.block.elements * f32_bytes, 256.0 * 64.0 * 4.0);
    assert_eq!(read.block.lines, 256.0 * 2.0);
    // A warp reads 2 rows of 64 floats: 4 lines, fully used.
    assert_eq!(read.warp.lines, 4.0);

    // The main store is the accumulation: 256^3 multiply-adds over the launch.
    let main = m.main().expect("stores");
    assert_eq!(l.program.buffer(main.buffer).name, "C_local");
    assert_eq!(main.ops.fma, 256.0 * 256.0 * 256.0);
    assert_eq!(main.ops.add + main.ops.mul, 0.0);
    assert_eq!(main.threads, 64.0);
    // Its shared reads: A_shared[tx / 8 * 64 + ..] puts warp 0's 4 distinct words in one
    // bank (4-way); B_shared[tx % 8 * 8 + ..] 8 words 8 apart, two per bank (2-way).
    // (The value loads C_local, A_shared, B_shared, in that order.)
    let (a_read, b_read) = (&main.reads[1], &main.reads[2]);
    assert_eq!((a_read.scope, b_read.scope), (Scope::Shared, Scope::Shared));
    assert_eq!(a_read.bank_ways, 4.0);
    assert_eq!(b_read.bank_ways, 2.0);
    // Nothing is unrolled: the unrolled body is one copy of the store, loading one word
    // of each tile.
    assert_eq!(main.loops.unrolled_body, 1.0);
    assert_eq!(
        (a_read.unrolled.elements, b_read.unrolled.elements),
        (1.0, 1.0)
    );
    assert_eq!(super::live_load_words(main), 2.0);

    // The kernel: 16 blocks of 64 threads, 4 KiB of shared memory, two barriers per step.
    let shape = kernel_shape(&l, &l.kernels[0], &m.kernels[0], &dev);
    assert_eq!(shape.blocks, 16.0);
    assert_eq!(shape.threads, 64.0);
    assert_eq!(shape.shared_bytes, (512.0 + 512.0) * 4.0);
    assert_eq!(shape.local_elements, 64.0);
    // Registers: 64 locals + 16; 65536 / (80 * 64) = 12 blocks per SM, the tightest
    // limit (threads allow 32, shared memory 57).
    assert_eq!(shape.registers, 80.0);
    assert_eq!(shape.resident, 12.0);
    assert_eq!(shape.occupancy, 12.0 * 64.0 / 2048.0);
    assert_eq!(shape.waves, 16.0 / (12.0 * 132.0));
    assert_eq!(m.kernels[0].barriers, 2.0 * 32.0);

    // Asked to hold 16 blocks at once, a thread gets 65536 / (16 * 64) = 64 registers
    // (NVRTC's cap), and 16 blocks are resident; asked for 64, as many as threads allow
    // (32 of 64 threads: 32 registers).
    let mut capped = l.clone();
    for (min_blocks, registers, resident) in [(16, 64.0, 16.0), (64, 32.0, 32.0)] {
        capped.kernels[0].min_blocks = min_blocks;
        let shape = kernel_shape(&capped, &capped.kernels[0], &m.kernels[0], &dev);
        assert_eq!(
            (shape.registers, shape.resident),
            (registers, resident),
            "{min_blocks}"
        );
    }
}

#[test]
fn cpu_matmul_runs_its_tiles_on_parallel_cores() {
    // cpu_matmul on 128^3: the fused (i_0, j_0) loop is parallel over 4 x 2 tiles, each
    // accumulating a 4 x 16 register tile with j_2 vectorized by 16 and i_2 unrolled.
    let l = lowered("matmul:128x128x128", "cpu_matmul", Backend::Cpu);
    let dev = DeviceSpec::cpu(3);
    let m = measure(&l, &dev);
    let main = m.main().expect("stores");
    assert_eq!(l.program.buffer(main.buffer).name, "C_local");
    assert_eq!(main.loops.parallel, 8.0);
    assert_eq!(main.loops.vector_len, 16.0);
    assert_eq!(main.loops.unrolled, 4.0);
    assert_eq!(main.ops.fma, 128.0 * 128.0 * 128.0);
    assert_eq!(m.kernels[0].parallel, 8.0);
    // 8 tiles on 3 cores: 2.67 waves, the last one two thirds full.
    let shape = kernel_shape(&l, &l.kernels[0], &m.kernels[0], &dev);
    assert_eq!(shape.blocks, 1.0);
    assert_eq!(shape.waves, 8.0 / 3.0);
    assert!((shape.wave_efficiency - 8.0 / 9.0).abs() < 1e-12);
    // One parallel iteration (a thread) reads a 32 x 128 panel of A, over 64-byte lines.
    let a = main
        .reads
        .iter()
        .find(|r| r.block.elements == 128.0 * 128.0 && r.thread.elements == 32.0 * 128.0)
        .expect("A's read: the whole of A per program, a 32-row panel per tile");
    assert_eq!(a.thread.lines, 32.0 * 128.0 * 4.0 / 64.0);
    // Inside the serial k loop, i_2 (unrolled, 4) and j_2 (vectorized, 16) make one
    // unrolled body of 64 multiply-adds loading 4 words of A and 16 of B.
    assert_eq!(main.loops.unrolled_body, 64.0);
    assert_eq!(super::live_load_words(main), 4.0 + 16.0);
}

#[test]
fn stores_of_stages_fused_into_one_launch_count_over_their_blocks_only() {
    // An NT GEMM whose operands kernels of their own transpose, both copies in one
    // launch, each on a range of its blocks (`blockIdx.x < c` / `>= c`): each copy writes
    // its [k, n] buffer once over its own blocks, and the launch's blocks are the sum of
    // the two ranges. (Counted over the whole grid, a copy on a few of the launch's
    // blocks counted many times over.)
    use crate::search::{RandomSearch, SearchSpace, SearchStrategy, TargetLimits};
    use crate::target::cuda::CudaLimits;
    let w = preset("matmul:256x256x128,layout=nt").expect("a preset");
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let mut search = RandomSearch::new(SearchSpace::cuda_default(), target, w.to_program(), 3);
    let dev = DeviceSpec::cuda("sm_90a");
    let mut fused = 0;
    for c in search.propose(96, &mut |_| false).candidates {
        let l = &c.verified.lowered;
        let m = measure(l, &dev);
        let main = m.main().expect("stores").kernel;
        let copies: Vec<&Store> = m
            .stores
            .iter()
            .filter(|s| s.kernel != main && s.write.scope == Scope::Global)
            .collect();
        if copies.len() != 2 || copies[0].kernel != copies[1].kernel {
            continue;
        }
        let grid: f64 = l.kernels[copies[0].kernel]
            .grid
            .iter()
            .map(|g| *g as f64)
            .product();
        for s in &copies {
            assert_eq!(
                s.write.block.elements * s.blocks,
                256.0 * 128.0,
                "{}",
                c.trace
            );
        }
        assert_eq!(copies[0].blocks + copies[1].blocks, grid, "{}", c.trace);
        fused += 1;
    }
    assert!(fused > 0, "no sample copies both operands in one launch");
}

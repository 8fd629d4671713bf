//! The blocks a multiprocessor should hold (`launch_min_blocks_per_sm` on a blockIdx loop,
//! `threads.min_blocks_per_sm` in a space): lowered into `__launch_bounds__`'s second
//! argument, which NVRTC honours by capping a thread's registers; refused where it cannot
//! apply; sampled by the plain sketch. Runs without a GPU (NVRTC on the host).

mod kernel_util;

use tessel::lower::{lower, Backend, LAUNCH_MIN_BLOCKS_KEY};
use tessel::measure::{session, Device};
use tessel::schedule::{replay, text};
use tessel::search::{sketch, space::SearchSpace};
use tessel::workload;

/// The seed `gemm_4_vectorize` (16 x 16 threads, 8 x 8 blocks at 1024^3) with `extra`
/// appended to its trace.
fn seed_with(extra: &str) -> Result<tessel::ir::Program, String> {
    let w = workload::preset("matmul:1024x1024x1024").unwrap();
    let path = format!(
        "{}/examples/schedules/gemm_4_vectorize.sched",
        env!("CARGO_MANIFEST_DIR")
    );
    let trace = std::fs::read_to_string(path).unwrap() + extra;
    let trace = text::parse(&trace).map_err(|e| e.to_string())?;
    replay(&trace, w.to_program(), 0)
        .map(|s| s.into_program())
        .map_err(|e| e.to_string())
}

fn cuda_source(p: &tessel::ir::Program) -> String {
    let device = Device::Cuda {
        arch: "sm_90a".into(),
    };
    session::source_for(p, &device).unwrap().code
}

#[test]
fn the_blocks_a_processor_holds_cap_the_registers_nvrtc_gives_a_thread() {
    let plain = seed_with("").unwrap();
    assert_eq!(
        lower(&plain, Backend::Cuda).unwrap().kernels[0].min_blocks,
        1
    );
    assert!(cuda_source(&plain).contains("__launch_bounds__(256) "));
    let ann = format!("annotate(bx, key=\"{LAUNCH_MIN_BLOCKS_KEY}\", value=4)\n");
    let capped = seed_with(&ann).unwrap();
    assert_eq!(
        lower(&capped, Backend::Cuda).unwrap().kernels[0].min_blocks,
        4
    );
    let src = cuda_source(&capped);
    assert!(src.contains("__launch_bounds__(256, 4) "), "{src}");
    if !kernel_util::nvrtc() {
        return;
    }
    let regs = |code: &str| {
        let cubin = tessel::measure::cuda::compile(code, "sm_90a").unwrap();
        cubin.info.registers.unwrap()
    };
    let (free, four) = (regs(&cuda_source(&plain)), regs(&src));
    // Four blocks of 256 threads share 65536 registers: 64 a thread at most.
    assert!(
        four <= 64,
        "{four} registers with 4 blocks of 256 threads a processor"
    );
    assert!(four <= free, "{four} registers capped, {free} free");
}

#[test]
fn more_blocks_than_a_processor_holds_ask_for_no_cap() {
    // 2048 threads a processor: 9 blocks of 256 threads cannot be resident at once.
    let ann = format!("annotate(bx, key=\"{LAUNCH_MIN_BLOCKS_KEY}\", value=9)\n");
    let src = cuda_source(&seed_with(&ann).unwrap());
    assert!(src.contains("__launch_bounds__(256, 8) "), "{src}");
}

#[test]
fn the_annotation_anywhere_but_a_blockidx_loop_or_not_a_count_is_refused_naming_the_loop() {
    for (ann, why) in [
        (
            "annotate(tx, key=\"KEY\", value=2)",
            "loop j_1_1: launch_min_blocks_per_sm = 2: the loop is not bound to blockIdx",
        ),
        (
            "annotate(bx, key=\"KEY\", value=0)",
            "loop j_0: launch_min_blocks_per_sm = 0: not an integer of at least 1",
        ),
    ] {
        let p = seed_with(&(ann.replace("KEY", LAUNCH_MIN_BLOCKS_KEY) + "\n")).unwrap();
        let e = lower(&p, Backend::Cuda).unwrap_err().to_string();
        assert!(e.contains(why), "{ann}: {e}");
    }
}

#[test]
fn a_space_with_counts_samples_one_on_the_main_kernel_and_refuses_a_count_of_zero() {
    let text = std::fs::read_to_string(format!(
        "{}/search_spaces/cuda.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let with = |counts: &str| {
        let t = text.replacen(
            "max_vthreads = 8\n",
            &format!("max_vthreads = 8\nmin_blocks_per_sm = {counts}\n"),
            1,
        );
        SearchSpace::parse(&t, "cuda.toml")
    };
    let e = with("[1, 0]").unwrap_err().to_string();
    assert!(
        e.contains("threads.min_blocks_per_sm") && e.contains("0 is not a count"),
        "{e}"
    );
    let space = with("[2, 3]").unwrap();
    let p = workload::preset("matmul:m=67,n=45,k=33,layout=nt")
        .unwrap()
        .to_program();
    let kinds = sketch::sketches(&space, &p).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..8 {
        let mut sch = tessel::schedule::Schedule::new(p.clone(), seed);
        sketch::apply_sketch(&space, &mut sch, seed, kinds[0]).unwrap();
        tessel::interp::check(&p, sch.program(), seed).unwrap();
        let low = lower(sch.program(), Backend::Cuda).unwrap();
        // The main kernel asks for the count; copies and padding kernels for none.
        let main = low.kernels.iter().map(|k| k.min_blocks).max().unwrap();
        assert!([2, 3].contains(&main), "seed {seed}: {main}");
        seen.insert(main);
    }
    assert_eq!(seen.len(), 2, "both counts sampled: {seen:?}");
    // An empty list: no decision and no cap (as without the key).
    let none = with("[]").unwrap();
    let mut sch = tessel::schedule::Schedule::new(p.clone(), 0);
    sketch::apply_sketch(&none, &mut sch, 0, kinds[0]).unwrap();
    let low = lower(sch.program(), Backend::Cuda).unwrap();
    assert!(low.kernels.iter().all(|k| k.min_blocks == 1));
}

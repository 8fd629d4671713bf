//! The seed articles' hand schedules: each replays on its workload, prints the pinned IR
//! (golden files), round-trips through both trace forms, and computes the same result as
//! the unscheduled program on small and awkward (imperfect-tile) shapes.

mod golden_util;

use golden_util::check_golden;
use tessel::interp;
use tessel::ir::printer::print_program;
use tessel::schedule::{json, replay, text, Schedule};
use tessel::workload;

/// (schedule file, small shape, awkward shape with imperfect tiles)
const SEEDS: &[(&str, &str, &str)] = &[
    (
        "mlc_blocking_shared",
        "matmul:128x128x16",
        "matmul:100x72x20",
    ),
    ("gemm_1_blocked", "matmul:64x48x8", "matmul:50x40x7"),
    (
        "gemm_2_thread_tiling",
        "matmul:256x128x32",
        "matmul:200x136x40",
    ),
    ("gemm_3_vthread", "matmul:128x128x16", "matmul:130x120x20"),
    ("gemm_4_vectorize", "matmul:128x128x16", "matmul:130x120x20"),
    (
        "seed_efficient_gemm",
        "matmul:256x128x32",
        "matmul:200x136x40",
    ),
];

fn schedule_text(name: &str) -> String {
    let path = format!(
        "{}/examples/schedules/{name}.sched",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn apply(name: &str, spec: &str) -> Schedule {
    let w = workload::preset(spec).unwrap();
    let trace = text::parse(&schedule_text(name)).unwrap_or_else(|e| panic!("{name}.sched:{e}"));
    replay(&trace, w.to_program(), 0).unwrap_or_else(|e| panic!("{name}.sched on {spec}: {e}"))
}

#[test]
fn seed_schedules_print_the_pinned_ir() {
    for (name, _, _) in SEEDS {
        let spec = "matmul:1024x1024x1024";
        let sch = apply(name, spec);
        let out = format!(
            "# workload: {spec}\n# schedule: examples/schedules/{name}.sched\n{}",
            print_program(sch.program())
        );
        check_golden(&format!("{name}.ir.txt"), &out);
    }
}

#[test]
fn seed_traces_round_trip_through_text_and_json() {
    for (name, _, _) in SEEDS {
        let sch = apply(name, "matmul:1024x1024x1024");
        let ir = print_program(sch.program());
        let printed = text::print(sch.trace());
        let reparsed = text::parse(&printed).unwrap();
        assert_eq!(&reparsed, sch.trace(), "{name}: text round trip");
        let from_json = json::from_json(&json::to_json(sch.trace())).unwrap();
        assert_eq!(&from_json, sch.trace(), "{name}: JSON round trip");
        let w = workload::preset("matmul:1024x1024x1024").unwrap();
        let again = replay(&reparsed, w.to_program(), 0).unwrap();
        assert_eq!(
            print_program(again.program()),
            ir,
            "{name}: replay prints the same IR"
        );
    }
}

fn check_computes_reference(name: &str) {
    let (_, small, awkward) = SEEDS.iter().find(|(n, _, _)| *n == name).expect("a seed");
    for spec in [small, awkward] {
        let w = workload::preset(spec).unwrap();
        let sch = apply(name, spec);
        let err = interp::check(&w.to_program(), sch.program(), 1)
            .unwrap_or_else(|e| panic!("{name} on {spec}: {e}"));
        assert!(
            err < interp::TOLERANCE,
            "{name} on {spec}: relative error {err}"
        );
    }
}

macro_rules! computes_reference {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check_computes_reference($name);
            }
        )*
    };
}

computes_reference! {
    mlc_blocking_shared_computes_the_reference => "mlc_blocking_shared",
    gemm_1_blocked_computes_the_reference => "gemm_1_blocked",
    gemm_2_thread_tiling_computes_the_reference => "gemm_2_thread_tiling",
    gemm_3_vthread_computes_the_reference => "gemm_3_vthread",
    gemm_4_vectorize_computes_the_reference => "gemm_4_vectorize",
    seed_efficient_gemm_computes_the_reference => "seed_efficient_gemm",
}

#[test]
fn the_mlc_schedule_has_the_seed_structure() {
    let ir = print_program(apply("mlc_blocking_shared", "matmul:1024x1024x1024").program());
    for needle in [
        "for i_0 in T.thread_binding(16, thread=\"blockIdx.y\"):",
        "for j_0 in T.thread_binding(16, thread=\"blockIdx.x\"):",
        "for i_1_j_1_fused in T.thread_binding(64, thread=\"threadIdx.x\"):",
        "with T.block(\"A_shared\"):",
        "with T.block(\"B_shared\"):",
        "for ax0_ax1_fused_2 in T.vectorized(4):",
        "with T.block(\"C_init\"):",
        "with T.block(\"C_update\"):",
        "vi = T.axis.spatial(1024, i_0 * 64 + i_1_j_1_fused // 8 * 8 + i_2)",
    ] {
        assert!(ir.contains(needle), "missing {needle:?} in\n{ir}");
    }
    // The shared fetches sit under k_0, before the update.
    let k0 = ir.find("for k_0 in range(128):").unwrap();
    assert!(k0 < ir.find("with T.block(\"A_shared\")").unwrap());
    assert!(
        ir.find("with T.block(\"B_shared\")").unwrap()
            < ir.find("with T.block(\"C_update\")").unwrap()
    );
}

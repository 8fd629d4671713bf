//! Measures the reference interpreter's throughput on a plain matmul (block executions
//! per second): `cargo run --release --example interp_throughput [size]`.

use std::collections::BTreeMap;
use std::time::Instant;
use tessel::interp::{random_inputs, Interpreter};
use tessel::ir::{
    Block, Buffer, BufferKind, DType, Expr, IterKind, IterVar, Node, Program, Scope, Store,
};

fn main() {
    let n: i64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(128);
    let mut p = Program::new("matmul");
    let buffer = |p: &mut Program, name: &str, kind| {
        let id = p.new_buffer(Buffer {
            name: name.into(),
            shape: vec![n, n],
            dtype: DType::F32,
            scope: Scope::Global,
            kind,
            align: Vec::new(),
            swizzle: false,
        });
        p.params.push(id);
        id
    };
    let a = buffer(&mut p, "A", BufferKind::Input);
    let b = buffer(&mut p, "B", BufferKind::Input);
    let c = buffer(&mut p, "C", BufferKind::Output);
    let (vi, vj, vk) = (p.new_var("vi"), p.new_var("vj"), p.new_var("vk"));
    let out = vec![Expr::Var(vi), Expr::Var(vj)];
    let prod = Expr::mul(
        Expr::Load(a, vec![Expr::Var(vi), Expr::Var(vk)]),
        Expr::Load(b, vec![Expr::Var(vk), Expr::Var(vj)]),
    );
    let iv = |var, kind| IterVar {
        var,
        extent: n,
        kind,
    };
    let blk = p.new_block(Block {
        name: "C".into(),
        iter_vars: vec![
            iv(vi, IterKind::Spatial),
            iv(vj, IterKind::Spatial),
            iv(vk, IterKind::Reduce),
        ],
        bindings: Vec::new(),
        predicate: None,
        init: Some(Store {
            buffer: c,
            indices: out.clone(),
            value: Expr::Float(0.0),
        }),
        body: Store {
            buffer: c,
            indices: out.clone(),
            value: Expr::add(Expr::Load(c, out), prod),
        },
        annotations: BTreeMap::new(),
    });
    let k = p.new_loop("k", n, vec![Node::Block(blk)]);
    let j = p.new_loop("j", n, vec![Node::Loop(k)]);
    let i = p.new_loop("i", n, vec![Node::Loop(j)]);
    let vars: Vec<_> = [i, j, k].iter().map(|l| Expr::Var(p.lp(*l).var)).collect();
    p.block_mut(blk).bindings = vars;
    p.root.push(Node::Loop(i));

    let interp = Interpreter::new(&p).expect("compiles");
    let inputs = random_inputs(&p, 0).expect("inputs");
    let execs = (n * n * n) as f64;
    let mut wall = Vec::new();
    let mut cpu = Vec::new();
    for _ in 0..7 {
        let mut params = inputs.clone();
        let (t, c) = (Instant::now(), cpu_ns());
        interp.run(&mut params).expect("runs");
        wall.push(execs / t.elapsed().as_secs_f64());
        if let (Some(c0), Some(c1)) = (c, cpu_ns()) {
            cpu.push(execs / ((c1 - c0) as f64 * 1e-9));
        }
    }
    println!("matmul {n}^3: {execs:.0} block executions per run, 7 runs");
    report("wall-clock", wall);
    report("on-CPU time", cpu);
}

/// Median and best of a set of rates, in millions per second.
fn report(what: &str, mut rates: Vec<f64>) {
    if rates.is_empty() {
        return;
    }
    rates.sort_by(f64::total_cmp);
    let (median, best) = (rates[rates.len() / 2], rates[rates.len() - 1]);
    println!(
        "  by {what}: median {:.1} M/s, best {:.1} M/s",
        median / 1e6,
        best / 1e6
    );
}

/// This thread's time on a CPU so far (Linux `schedstat`), so that a loaded machine
/// does not count other processes' time against the interpreter.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

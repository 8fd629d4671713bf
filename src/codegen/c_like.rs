//! The statement and expression printer shared by the CUDA and C back ends.

use super::c_bases::{bases_at, relative, summands, Base};
use crate::ir::interval::Interval;
use crate::ir::simplify::range_of;
use crate::ir::{BinOp, BufferId, DType, Expr, Program, ThreadTag, UnOp, VarId};
use crate::lower::{ForKind, KStmt, Kernel};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Which dialect to print.
#[derive(Copy, Clone, PartialEq, Eq)]
pub(super) enum Dialect {
    Cuda,
    C,
}

const KEYWORDS: &[&str] = &[
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "int", "long", "register", "return", "short",
    "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
    "volatile", "while", "half", "float4", "float2", "dim3", "main",
];

/// A C identifier for a program name.
pub(super) fn ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) || KEYWORDS.contains(&s.as_str())
    {
        s = format!("v_{s}");
    }
    s
}

/// The C type of a buffer element of `d` (in both dialects).
pub(super) fn ctype(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::I32 => "int",
        DType::Bool => "bool",
        // Half-precision storage: the raw 16 bits (NVRTC has no `cuda_fp16.h` here, and
        // C has no portable half type), converted to and from f32 at each load and store
        // (`HALF` in cuda.rs, `HALF` in cpu.rs).
        DType::F16 | DType::BF16 => "unsigned short",
    }
}

pub(super) struct Printer<'a> {
    pub p: &'a Program,
    pub k: &'a Kernel,
    pub dialect: Dialect,
    pub out: String,
    /// Loop variable extents in scope, for deciding when `/` and `%` are floor division.
    ranges: BTreeMap<VarId, i64>,
    /// How the lanes hold the kernel's fragment buffers (tensor-core kernels).
    pub fragments: BTreeMap<crate::ir::BufferId, crate::lower::tensorize::FragmentLayout>,
    /// The kernel's swizzled shared buffers (`lower::swizzle`).
    pub swizzles: BTreeMap<BufferId, crate::lower::swizzle::Swizzle>,
    /// Accumulators' base pointers in scope, innermost last (C only; `c_bases.rs`).
    bases: Vec<Base>,
    /// Base pointers declared so far, for their names.
    declared_bases: usize,
}

impl<'a> Printer<'a> {
    pub fn new(p: &'a Program, k: &'a Kernel, dialect: Dialect) -> Self {
        let mut ranges = BTreeMap::new();
        for (v, tag) in &k.thread_vars {
            let ext = match tag {
                crate::ir::ThreadTag::BlockIdx(d) => k.grid[*d as usize],
                crate::ir::ThreadTag::ThreadIdx(d) => k.block[*d as usize],
                crate::ir::ThreadTag::VThread(_) => 1,
            };
            ranges.insert(*v, ext);
        }
        Printer {
            p,
            k,
            dialect,
            out: String::new(),
            ranges,
            fragments: crate::lower::tensorize::fragment_layouts(k),
            swizzles: crate::lower::swizzle::of_kernel(p, k).into_iter().collect(),
            bases: Vec::new(),
            declared_bases: 0,
        }
    }

    /// Where an access of buffer `b` at flat index `idx` is stored: the index itself, or
    /// for a swizzled buffer its place in the swizzled layout. There, the terms of the index
    /// that step by whole atoms of rows (a pipeline stage, a copy loop's rows) move the
    /// place by whole rows of a panel and are added outside the swizzle, so that what is
    /// left (the thread's offset, usually) is swizzled once, not at every iteration.
    pub fn index(&self, b: BufferId, idx: &Expr) -> String {
        let Some(s) = self.swizzles.get(&b) else {
            return self.expr(idx);
        };
        let atom = crate::lower::swizzle::ATOM_ROWS * s.row;
        let (mut rest, mut rows) = (Vec::new(), Vec::new());
        for t in summands(idx) {
            match multiplier(&t) {
                Some((x, c)) if c % atom == 0 => rows.push((x, c / s.row * s.panel)),
                _ => rest.push(t),
            }
        }
        let rest = rest.into_iter().reduce(Expr::add).unwrap_or(Expr::Int(0));
        // The swizzle divides with C's truncation: only a remainder that cannot be negative
        // is swizzled alone.
        if !self.nonneg(&rest) {
            return self.index_str(b, self.expr(idx));
        }
        let mut out = self.index_str(b, self.expr(&rest));
        for (x, step) in rows {
            out = match x {
                None => format!("{out} + {step}"),
                Some(x) => format!("{out} + {} * {step}", paren(&self.expr(&x))),
            };
        }
        out
    }

    /// The element of buffer `b` at flat index `idx`, as an lvalue: `name[index]`, or
    /// through the innermost base pointer in scope for `b` that the index is relative to.
    pub fn element(&self, b: BufferId, idx: &Expr) -> String {
        for base in self.bases.iter().rev().filter(|x| x.buffer == b) {
            if let Some(rest) = relative(idx, base) {
                return format!("{}[{}]", base.name, self.expr(&rest));
            }
        }
        format!("{}[{}]", ident(&self.p.buffer(b).name), self.index(b, idx))
    }

    /// [`Printer::index`] of an index already printed.
    pub fn index_str(&self, b: BufferId, idx: String) -> String {
        match self.swizzles.get(&b) {
            Some(s) => format!(
                "tessel_swizzle128({idx}, {}, {}, {})",
                s.row, s.rows, s.panel
            ),
            None => idx,
        }
    }

    pub fn var(&self, v: VarId) -> String {
        if let Some(tag) = self.k.thread_of(v) {
            // A thread index of a launch dimension of 1 is 0, which the compiler then
            // knows (a register copy indexed by it stays in registers).
            let extent = match tag {
                ThreadTag::ThreadIdx(d) => self.k.block[d as usize],
                ThreadTag::BlockIdx(d) => self.k.grid[d as usize],
                ThreadTag::VThread(_) => 0,
            };
            return match extent {
                1 => "0".to_string(),
                _ => format!("((int){tag})"),
            };
        }
        ident(self.p.var_name(v))
    }

    /// Loop variable extents in scope.
    pub fn ranges(&self) -> &BTreeMap<VarId, i64> {
        &self.ranges
    }

    pub fn is_float(&self, e: &Expr) -> bool {
        match e {
            Expr::Float(_) => true,
            Expr::Load(b, _) => self.p.buffer(*b).dtype.is_float(),
            Expr::Cast(t, _) => t.is_float(),
            Expr::Bin(op, a, b) if !op.is_predicate() => self.is_float(a) || self.is_float(b),
            Expr::Un(UnOp::Not, _) => false,
            Expr::Un(_, a) => self.is_float(a) || !matches!(**a, Expr::Int(_) | Expr::Var(_)),
            Expr::Select(_, a, b) => self.is_float(a) || self.is_float(b),
            _ => false,
        }
    }

    /// `e` simplified with the ranges of the loop variables in scope.
    pub fn simp(&self, e: &Expr) -> Expr {
        crate::ir::simplify::simplify(e, &|v| {
            self.ranges.get(&v).map(|&x| Interval::new(0, x - 1))
        })
    }

    fn nonneg(&self, e: &Expr) -> bool {
        let r = range_of(e, &|v| {
            self.ranges.get(&v).map(|&x| Interval::new(0, x - 1))
        });
        r.is_bounded() && r.min >= 0
    }

    pub fn expr(&self, e: &Expr) -> String {
        match e {
            Expr::Int(v) => v.to_string(),
            Expr::Float(v) => float_lit(*v, self.dialect),
            Expr::Var(v) => self.var(*v),
            Expr::Load(b, idx) => {
                let load = self.element(*b, &idx[0]);
                match self.p.buffer(*b).dtype {
                    DType::F16 => format!("tessel_h2f({load})"),
                    DType::BF16 => format!("tessel_bf2f({load})"),
                    _ => load,
                }
            }
            Expr::Bin(op, a, b) => {
                let (x, y) = (self.expr(a), self.expr(b));
                let fl = self.is_float(a) || self.is_float(b);
                match op {
                    BinOp::Add => format!("({x} + {y})"),
                    BinOp::Sub => format!("({x} - {y})"),
                    BinOp::Mul => format!("({x} * {y})"),
                    BinOp::Div => format!("({x} / {y})"),
                    BinOp::FloorDiv | BinOp::FloorMod => {
                        let div = *op == BinOp::FloorDiv;
                        if self.nonneg(a) && matches!(b.as_int(), Some(c) if c > 0) {
                            format!("({x} {} {y})", if div { "/" } else { "%" })
                        } else if div {
                            format!("tessel_floordiv({x}, {y})")
                        } else {
                            format!("tessel_floormod({x}, {y})")
                        }
                    }
                    BinOp::Min => format!("{}({x}, {y})", if fl { "fminf" } else { "min" }),
                    BinOp::Max => format!("{}({x}, {y})", if fl { "fmaxf" } else { "max" }),
                    BinOp::Lt => format!("({x} < {y})"),
                    BinOp::Le => format!("({x} <= {y})"),
                    BinOp::Gt => format!("({x} > {y})"),
                    BinOp::Ge => format!("({x} >= {y})"),
                    BinOp::Eq => format!("({x} == {y})"),
                    BinOp::Ne => format!("({x} != {y})"),
                    BinOp::And => format!("({x} && {y})"),
                    BinOp::Or => format!("({x} || {y})"),
                }
            }
            Expr::Un(op, a) => {
                let x = self.expr(a);
                match op {
                    UnOp::Neg => format!("(-{x})"),
                    UnOp::Not => format!("(!{x})"),
                    UnOp::Exp => format!("expf({x})"),
                    UnOp::Sqrt => format!("sqrtf({x})"),
                    UnOp::Tanh => format!("tanhf({x})"),
                    UnOp::Abs => format!("fabsf({x})"),
                    UnOp::Tf32 => format!("tessel_tf32({x})"),
                }
            }
            Expr::Select(c, a, b) => {
                format!("({} ? {} : {})", self.expr(c), self.expr(a), self.expr(b))
            }
            // A value rounded to half precision, computed on as f32.
            Expr::Cast(DType::F16, a) => {
                format!("tessel_h2f(tessel_f2h({}))", self.expr(a))
            }
            Expr::Cast(DType::BF16, a) => {
                format!("tessel_bf2f(tessel_f2bf({}))", self.expr(a))
            }
            Expr::Cast(t, a) => format!("(({}){})", ctype(*t), self.expr(a)),
        }
    }

    /// The right-hand side of a store of `value` into `buffer`. A 16-bit buffer stores its
    /// raw bits: converted from f32 (rounded), except where the value is an element of a
    /// buffer of the same dtype, possibly zero-filled (a cache stage's copy), which is
    /// copied as it is, without the round trip through f32.
    pub(super) fn stored(&self, buffer: BufferId, value: &Expr) -> String {
        let dtype = self.p.buffer(buffer).dtype;
        if !dtype.is_half() {
            return self.expr(value);
        }
        let raw = |e: &Expr| match e {
            Expr::Load(b, idx) if self.p.buffer(*b).dtype == dtype => Some(format!(
                "{}[{}]",
                ident(&self.p.buffer(*b).name),
                self.index(*b, &idx[0])
            )),
            _ => None,
        };
        match crate::lower::zero_filled(value) {
            (load, None) => raw(load),
            (load, Some(c)) => {
                raw(load).map(|l| format!("({} ? {l} : (unsigned short)0)", self.expr(&c)))
            }
        }
        .unwrap_or_else(|| {
            // A value rounded to the stored type already (`f16(x)`) is rounded once.
            let value = match value {
                Expr::Cast(t, inner) if *t == dtype => &**inner,
                _ => value,
            };
            match dtype {
                DType::F16 => format!("tessel_f2h({})", self.expr(value)),
                _ => format!("tessel_f2bf({})", self.expr(value)),
            }
        })
    }

    /// [`KStmt::Arrive`]: the block's partial results published (`__threadfence`), thread
    /// 0 counts the arrival with `atomicAdd` and, last, resets the counter and fences
    /// again (acquire: the other splits' partials are then visible to what follows); the
    /// outcome reaches every thread through shared memory.
    fn arrive(
        &mut self,
        counter: BufferId,
        index: &Expr,
        arrivals: i64,
        last: VarId,
        depth: usize,
    ) {
        let flag = format!("{}_shared", self.var(last));
        let cell = format!(
            "{} + {}",
            ident(&self.p.buffer(counter).name),
            self.expr(index)
        );
        let lines = [
            format!("__shared__ int {flag};"),
            "__threadfence();".to_string(),
            "__syncthreads();".to_string(),
            "if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {".to_string(),
            format!("  {flag} = atomicAdd({cell}, 1) == {};", arrivals - 1),
            format!("  if ({flag}) {{ *({cell}) = 0; __threadfence(); }}"),
            "}".to_string(),
            "__syncthreads();".to_string(),
            format!("const int {} = {flag};", self.var(last)),
        ];
        for l in &lines {
            self.line(depth, l);
        }
    }

    pub(super) fn line(&mut self, depth: usize, s: &str) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    /// One step of `step` lanes of vectorized loop `var` (C): the vector statement, under
    /// its guard; where the guard depends on the lane, the statement runs as a vector when
    /// every lane of the step passes (the step's first and last lanes decide it, the loop
    /// variable redeclared for each in a scope of its own) and `body` lane by lane
    /// otherwise.
    fn vector_step(
        &mut self,
        var: VarId,
        body: &[KStmt],
        step: &str,
        vector: super::c_vector::VectorStep,
        depth: usize,
        allocs_at: &dyn Fn(&mut Self, Option<VarId>, usize),
    ) {
        let guarded = |pr: &mut Self, depth: usize| match &vector.guard {
            Some(g) => {
                pr.line(depth, &format!("if {} {{", paren(g)));
                pr.line(depth + 1, &vector.stmt);
                pr.line(depth, "}");
            }
            None => pr.line(depth, &vector.stmt),
        };
        let Some(lanes) = &vector.lanes else {
            guarded(self, depth);
            return;
        };
        let v = self.var(var);
        self.line(depth, &format!("const int tessel_lane0 = {v};"));
        self.line(depth, "int tessel_all = 1;");
        for (at, conds) in [
            (format!("tessel_lane0 + {step} - 1"), &lanes.last),
            ("tessel_lane0".to_string(), &lanes.first),
        ] {
            if !conds.is_empty() {
                self.line(
                    depth,
                    &format!(
                        "{{ const int {v} = {at}; tessel_all = tessel_all && {}; }}",
                        conds.join(" && ")
                    ),
                );
            }
        }
        self.line(depth, "if (tessel_all) {");
        guarded(self, depth + 1);
        self.line(depth, "} else {");
        self.line(
            depth + 1,
            &format!("for (int {v} = tessel_lane0; {v} < tessel_lane0 + {step}; ++{v}) {{"),
        );
        self.stmts(body, depth + 2, allocs_at);
        self.line(depth + 1, "}");
        self.line(depth, "}");
    }

    /// A [`KStmt::WarpReduce`]: the lane's value combined with its group's by
    /// `__shfl_xor_sync` on the group's lanes, then into the accumulator (CUDA only: the
    /// CPU lowering makes none).
    #[allow(clippy::too_many_arguments)]
    fn warp_reduce(
        &mut self,
        buffer: BufferId,
        index: &Expr,
        op: BinOp,
        value: &Expr,
        lanes: i64,
        first_lane: &Expr,
        depth: usize,
    ) {
        if self.dialect != Dialect::Cuda {
            self.line(depth, "#error \"a warp reduction outside CUDA\"");
            return;
        }
        let combine = |a: &str, b: &str| match op {
            BinOp::Max => format!("fmaxf({a}, {b})"),
            BinOp::Min => format!("fminf({a}, {b})"),
            _ => format!("{a} + {b}"),
        };
        let ones = (1u64 << lanes) - 1;
        let mask = match lanes {
            32 => "0xffffffffu".to_string(),
            _ => format!("(0x{ones:x}u << {})", paren(&self.expr(first_lane))),
        };
        self.line(depth, "{");
        let w = "tessel_warp";
        self.line(depth + 1, &format!("float {w} = {};", self.expr(value)));
        let mut d = lanes / 2;
        while d >= 1 {
            let other = format!("__shfl_xor_sync({mask}, {w}, {d})");
            self.line(depth + 1, &format!("{w} = {};", combine(w, &other)));
            d /= 2;
        }
        let acc = self.element(buffer, index);
        self.line(depth + 1, &format!("{acc} = {};", combine(&acc, w)));
        self.line(depth, "}");
    }

    /// Prints statements; `allocs_at` prints the allocations placed at a loop's body.
    pub fn stmts(
        &mut self,
        body: &[KStmt],
        depth: usize,
        allocs_at: &dyn Fn(&mut Self, Option<VarId>, usize),
    ) {
        for s in body {
            match s {
                KStmt::Comment(c) => self.line(depth, &format!("// block {c}")),
                // The CPU lowering refuses tensorized loops, so only CUDA kernels have these.
                KStmt::Mma(m) => self.mma(m, depth),
                KStmt::Sync => {
                    self.proxy_fence(depth);
                    self.line(depth, "__syncthreads();")
                }
                KStmt::CpAsync {
                    dst,
                    dst_index,
                    src,
                    src_index,
                    lanes,
                    valid,
                } => {
                    let d = format!(
                        "{} + {}",
                        ident(&self.p.buffer(*dst).name),
                        self.index(*dst, dst_index)
                    );
                    let s = format!(
                        "{} + {}",
                        ident(&self.p.buffer(*src).name),
                        self.expr(src_index)
                    );
                    let line = match self.dialect {
                        Dialect::Cuda => {
                            let dtype = self.p.buffer(*dst).dtype;
                            let bytes = lanes * dtype.bytes() as i64;
                            let size = match valid {
                                Some(c) => format!("{} ? {bytes} : 0", paren(&self.expr(c))),
                                None => bytes.to_string(),
                            };
                            // 16-bit elements travel as raw bytes.
                            let (d, s) = if dtype == DType::F32 {
                                (d, s)
                            } else {
                                (format!("(float*)({d})"), format!("(const float*)({s})"))
                            };
                            format!("tessel_cp_async{bytes}({d}, {s}, {size});")
                        }
                        // No asynchronous copies on the CPU: the copy itself.
                        Dialect::C => {
                            let v = |i: i64| format!("({s})[{i}]");
                            let lane = |i: i64| match valid {
                                Some(c) => format!("{} ? {} : 0.0f", paren(&self.expr(c)), v(i)),
                                None => v(i),
                            };
                            (0..*lanes)
                                .map(|i| format!("({d})[{i}] = {};", lane(i)))
                                .collect::<Vec<_>>()
                                .join(" ")
                        }
                    };
                    self.line(depth, &line);
                }
                KStmt::CommitGroup => {
                    if self.dialect == Dialect::Cuda {
                        self.line(
                            depth,
                            "asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");",
                        );
                    }
                }
                KStmt::WaitGroup(n) => {
                    if self.dialect == Dialect::Cuda {
                        self.line(
                            depth,
                            &format!(
                                "asm volatile(\"cp.async.wait_group {n};\\n\" ::: \"memory\");"
                            ),
                        );
                    }
                }
                // The CPU lowering refuses serial sums, so only CUDA kernels have these.
                KStmt::Arrive {
                    counter,
                    index,
                    arrivals,
                    last,
                } => self.arrive(*counter, index, *arrivals, *last, depth),
                KStmt::If { cond, then } => {
                    let c = self.expr(cond);
                    self.line(depth, &format!("if {} {{", paren(&c)));
                    self.stmts(then, depth + 1, allocs_at);
                    self.line(depth, "}");
                }
                KStmt::Store {
                    buffer,
                    indices,
                    value,
                } => {
                    let lhs = self.element(*buffer, &indices[0]);
                    let rhs = self.stored(*buffer, value);
                    self.line(depth, &format!("{lhs} = {rhs};"));
                }
                KStmt::WarpReduce {
                    buffer,
                    indices,
                    op,
                    value,
                    lanes,
                    first_lane,
                } => self.warp_reduce(*buffer, &indices[0], *op, value, *lanes, first_lane, depth),
                KStmt::For {
                    var,
                    extent,
                    kind,
                    body,
                } => {
                    self.ranges.insert(*var, *extent);
                    let v = self.var(*var);
                    if *kind == ForKind::Vectorized && self.dialect == Dialect::Cuda {
                        if let Some((guard, lines)) = self.vector_copy(*var, *extent, body) {
                            let inner = match guard {
                                Some(g) => {
                                    self.line(depth, &format!("if {} {{", paren(&g)));
                                    depth + 1
                                }
                                None => depth,
                            };
                            for l in &lines {
                                self.line(inner, l);
                            }
                            if inner > depth {
                                self.line(depth, "}");
                            }
                            continue;
                        }
                    }
                    if *kind == ForKind::Vectorized && self.dialect == Dialect::C {
                        use super::c_vector::{vector_statement, Width};
                        if let (Some(whole), Some(half)) = (
                            vector_statement(self, *var, body, Width::Whole),
                            vector_statement(self, *var, body, Width::Half),
                        ) {
                            // Whole vectors, a half vector where half of one is left,
                            // then the lanes that do not fill one.
                            let end_v = format!("{extent} / TESSEL_VLANES * TESSEL_VLANES");
                            let end_h = format!("{extent} / TESSEL_HLANES * TESSEL_HLANES");
                            self.line(depth, "#pragma GCC unroll 64");
                            let steps = [
                                (String::from("0"), &end_v, "TESSEL_VLANES", whole),
                                (end_v.clone(), &end_h, "TESSEL_HLANES", half),
                            ];
                            for (from, to, step, vector) in steps {
                                self.line(
                                    depth,
                                    &format!(
                                        "for (int {v} = {from}; {v} < {to}; {v} += {step}) {{"
                                    ),
                                );
                                self.vector_step(*var, body, step, vector, depth + 1, allocs_at);
                                self.line(depth, "}");
                            }
                            self.line(depth, "#pragma omp simd");
                            self.line(
                                depth,
                                &format!("for (int {v} = {end_h}; {v} < {extent}; ++{v}) {{"),
                            );
                            self.stmts(body, depth + 1, allocs_at);
                            self.line(depth, "}");
                            continue;
                        }
                    }
                    match (kind, self.dialect) {
                        (ForKind::Unrolled, Dialect::Cuda)
                        | (ForKind::Vectorized, Dialect::Cuda) => {
                            self.line(depth, "#pragma unroll")
                        }
                        (ForKind::Unrolled, Dialect::C) => {
                            self.line(depth, &format!("#pragma GCC unroll {}", extent.min(&64)))
                        }
                        (ForKind::Vectorized, Dialect::C) => self.line(depth, "#pragma omp simd"),
                        (ForKind::Parallel, _) => self.line(
                            depth,
                            &format!(
                                "#pragma omp parallel for schedule(dynamic, TESSEL_CHUNK({extent}))"
                            ),
                        ),
                        (ForKind::Serial, _) => {}
                    }
                    let bases = self.declare_bases(*var, *kind, body, depth);
                    self.line(
                        depth,
                        &format!("for (int {v} = 0; {v} < {extent}; ++{v}) {{"),
                    );
                    allocs_at(self, Some(*var), depth + 1);
                    self.stmts(body, depth + 1, allocs_at);
                    self.line(depth, "}");
                    self.bases.truncate(self.bases.len() - bases);
                }
            }
        }
    }

    /// Declares the base pointers of the accumulators that serial loop `var` runs a
    /// reduction chain of (C only, `c_bases.rs`) and puts them in scope; how many.
    fn declare_bases(&mut self, var: VarId, kind: ForKind, body: &[KStmt], depth: usize) -> usize {
        if kind != ForKind::Serial || self.dialect != Dialect::C {
            return 0;
        }
        let found = bases_at(var, body, &self.bases);
        for (buffer, summands) in &found {
            let name = format!("tessel_acc{}", self.declared_bases);
            self.declared_bases += 1;
            let base = summands
                .iter()
                .cloned()
                .reduce(Expr::add)
                .unwrap_or(Expr::Int(0));
            let ty = ctype(self.p.buffer(*buffer).dtype);
            let line = format!("{ty} *{name} = &{};", self.element(*buffer, &base));
            self.line(depth, &line);
            self.bases.push(Base {
                buffer: *buffer,
                summands: summands.clone(),
                name,
            });
        }
        found.len()
    }

    /// A vectorized loop that copies one vector ([`crate::lower`]'s vector copy) as its
    /// statement guard and lines: one float4/float2 load, zero-filled under a guard uniform
    /// over the vector (`c ? *(float4*)p : make_float4(0, ...)`), stored as one vector or,
    /// where the store is scattered (a transposed fetch), lane by lane from a register.
    /// `None` prints the loop as an unrolled scalar loop instead.
    fn vector_copy(
        &self,
        var: VarId,
        lanes: i64,
        body: &[KStmt],
    ) -> Option<(Option<String>, Vec<String>)> {
        let copy = crate::lower::kernel_vector_copy(self.p, body, var, lanes, &self.ranges).ok()?;
        // 16-bit vectors are copied asynchronously where pipelined, else element by element.
        if self.p.buffer(copy.dst).dtype != DType::F32 {
            return None;
        }
        let ty = if lanes == 4 { "float4" } else { "float2" };
        let at = |e: &Expr, lane: i64| crate::lower::kernel_at_lane(e, var, lane, &self.ranges);
        let mut load = format!(
            "*({ty}*)({} + {})",
            ident(&self.p.buffer(copy.src).name),
            self.expr(&at(copy.src_index, 0))
        );
        if let Some(c) = &copy.valid {
            let zeros = vec!["0.0f"; lanes as usize].join(", ");
            load = format!(
                "{} ? {load} : make_{ty}({zeros})",
                paren(&self.expr(&at(c, 0)))
            );
        }
        let dst = ident(&self.p.buffer(copy.dst).name);
        let lines = if copy.scatter {
            let mut lines = vec![format!("{{ {ty} tessel_v = {load};")];
            for (lane, field) in (0..lanes).zip(["x", "y", "z", "w"]) {
                let d = self.index(copy.dst, &at(copy.dst_index, lane));
                lines.push(format!("  {dst}[{d}] = tessel_v.{field};"));
            }
            lines.push("}".into());
            lines
        } else {
            let d = self.index(copy.dst, &at(copy.dst_index, 0));
            vec![format!("*({ty}*)({dst} + {d}) = {load};")]
        };
        Some((copy.guard.map(|g| self.expr(&at(g, 0))), lines))
    }
}

/// A term as `x * c` (`None` for a constant term `c`), where it is one.
fn multiplier(t: &Expr) -> Option<(Option<Expr>, i64)> {
    match t {
        Expr::Int(c) => Some((None, *c)),
        Expr::Bin(BinOp::Mul, x, y) => match (x.as_int(), y.as_int()) {
            (_, Some(c)) => Some((Some((**x).clone()), c)),
            (Some(c), _) => Some((Some((**y).clone()), c)),
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn paren(s: &str) -> String {
    if s.starts_with('(') && s.ends_with(')') {
        s.to_string()
    } else {
        format!("({s})")
    }
}

fn float_lit(v: f64, dialect: Dialect) -> String {
    if v.is_infinite() {
        let s = if v < 0.0 { "-" } else { "" };
        return match dialect {
            Dialect::Cuda => format!("{s}__int_as_float(0x7f800000)"),
            Dialect::C => format!("{s}INFINITY"),
        };
    }
    let mut s = format!("{v:?}");
    if !s.contains('.') && !s.contains('e') {
        s.push_str(".0");
    }
    let _ = write!(s, "f");
    s
}

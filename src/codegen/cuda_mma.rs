//! CUDA C for the tensor-core instructions (`KStmt::Mma`): `ldmatrix`, `mma.sync` and the
//! accumulator's fill and store, in the fragment layouts of the PTX ISA (m16n8k16).
//!
//! A fragment buffer is a per-lane array of 32-bit registers (`float` for accumulators,
//! `unsigned` holding two 16-bit elements for operands), tile after tile in the order of
//! the tiles' positions in the warp's buffer (`lower::tensorize::FragmentLayout`); every
//! index is a constant once the loops around are unrolled, so the arrays stay in
//! registers. With `g = lane / 4` and `t = lane % 4`, a lane holds:
//!
//! * accumulator (16 x 8, f32): `c0, c1` = row `g`, columns `2t, 2t+1`; `c2, c3` = row `g+8`;
//! * A (16 x 16): `a0` = row `g`, columns `2t, 2t+1`; `a1` = row `g+8`; `a2`, `a3` the same
//!   at columns `+8` (ldmatrix x4: lanes 0-15 give rows 0-15 at column 0, lanes 16-31 at
//!   column 8);
//! * B (16 x 8, rows k): `b0` = rows `2t, 2t+1` of column `g`; `b1` rows `+8` (ldmatrix x2
//!   with `.trans` from rows of k, lanes 0-15 giving rows 0-15; without `.trans` from rows
//!   of n, lanes 0-7 at column 0 and 8-15 at column 8).
//!
//! On TF32 (`mma.sync.m16n8k8`, f32 fragments, one element to a register) the same
//! `ldmatrix` calls move 32-bit elements as pairs of 16-bit ones, so a lane's address
//! steps by 16 bytes (4 elements) where a 16-bit tile's steps by 8 elements, and a lane
//! gets one element of each 8 x 4 matrix: `a0` = row `g`, column `t`; `a1` row `g+8`;
//! `a2`, `a3` the same at column `t+4`; `b0` = row (k) `t` of column `g`, `b1` row `t+4`.
//! `.trans` would swap 16-bit halves, so a TF32 tile is read with k along the source's
//! rows only (A as `[m, k]`, B as `[n, k]`; the lowering checks it).

use super::c_like::{ident, paren, Printer};
use crate::ir::{DType, Expr};
use crate::lower::tensorize::FragmentLayout;
use crate::lower::{Mma, MmaOp, MmaOperand, Tile};

/// Printed for kernels with tensor-core instructions: the shared-memory address `ldmatrix`
/// takes, two f32 rounded to a packed pair of f16 or bf16 (the store of an accumulator's
/// neighbouring elements), and a `wgmma` shared-memory descriptor (PTX ISA "matrix descriptor": bits 0-13
/// the start address >> 4, 16-29 the leading dimension byte offset >> 4, 32-45 the stride
/// dimension byte offset >> 4, base offset 0, bits 62-63 the swizzle mode, 1 = 128 bytes).
pub(super) const MMA: &str = "\
__device__ __forceinline__ unsigned tessel_smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ unsigned tessel_pack_f16x2(float lo, float hi) { unsigned r; asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r; }
__device__ __forceinline__ unsigned tessel_pack_bf16x2(float lo, float hi) { unsigned r; asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r; }
__device__ __forceinline__ unsigned long long tessel_wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo) { return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) | ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62); }
";

impl Printer<'_> {
    /// The lane's first `n` registers of fragment tile `t`, as C lvalues.
    fn registers(&self, t: &Tile, n: i64) -> Vec<String> {
        let name = ident(&self.p.buffer(t.buffer).name);
        (0..n)
            .map(|i| format!("{name}[{}]", self.expr(&self.register_expr(t, i))))
            .collect()
    }

    /// Register `i` of the lane's part of fragment tile `t`, as an index expression.
    fn register_expr(&self, t: &Tile, i: i64) -> Expr {
        use crate::ir::BinOp::{FloorDiv, FloorMod};
        let l: FragmentLayout = self.fragments[&t.buffer];
        let s = Expr::Int(l.row_length);
        let row = Expr::bin(
            FloorDiv,
            Expr::bin(FloorDiv, t.base.clone(), s.clone()),
            Expr::Int(l.tile_rows),
        );
        let col = Expr::bin(
            FloorDiv,
            Expr::bin(FloorMod, t.base.clone(), s),
            Expr::Int(l.tile_cols),
        );
        let tile = Expr::add(Expr::mul(row, Expr::Int(l.row_length / l.tile_cols)), col);
        Expr::add(Expr::mul(tile, Expr::Int(l.registers)), Expr::Int(i))
    }

    /// The kernel's `threadIdx.x` variable: the lane (the lowering made sure the kernel
    /// launches one warp in x).
    fn lane_var(&self) -> crate::ir::VarId {
        self.k
            .lane()
            .expect("a tensorized kernel binds threadIdx.x (checked by the lowering)")
    }

    /// The accumulators of the kernel's `wgmma`s, when it has any.
    pub(super) fn wgmma_accumulators(&self) -> Vec<crate::ir::BufferId> {
        let mut out = Vec::new();
        crate::lower::tensorize::visit_mma(&self.k.body, &mut |m| {
            if let MmaOp::Wgmma { acc, .. } = &m.op {
                if !out.contains(&acc.buffer) {
                    out.push(acc.buffer);
                }
            }
        });
        out
    }

    /// Before a barrier of a kernel with `wgmma`s: make the shared writes of the threads so
    /// far visible to the tensor cores' (async) proxy.
    pub(super) fn proxy_fence(&mut self, depth: usize) {
        if !self.wgmma_accumulators().is_empty() {
            self.line(
                depth,
                "asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");",
            );
        }
    }

    /// `MmaOp::WgmmaWait(n)`: wait until at most `n` `wgmma` groups are in flight, and tie
    /// the accumulator registers to this point so that the compiler moves no access of them
    /// across it.
    fn wgmma_wait(&mut self, n: i64, depth: usize) {
        let accs = self.wgmma_accumulators();
        self.line(
            depth,
            &format!("asm volatile(\"wgmma.wait_group.sync.aligned {n};\\n\" ::: \"memory\");"),
        );
        for b in accs {
            let name = ident(&self.p.buffer(b).name);
            let count = self.fragments[&b].lane_registers(
                self.k
                    .allocs
                    .iter()
                    .find(|a| a.buffer == b)
                    .map_or(0, |a| a.size),
            );
            self.line(depth, "#pragma unroll");
            self.line(
                depth,
                &format!("for (int tessel_r = 0; tessel_r < {count}; ++tessel_r) asm volatile(\"\" : \"+f\"({name}[tessel_r]) :: \"memory\");"),
            );
        }
    }

    /// A `wgmma` operand's descriptor: the start address of its tile at `base` in the
    /// swizzled buffer (the hardware permutes the chunks itself), the leading dimension
    /// byte offset (the next panel, for MN-major operands; unused for K-major ones) and
    /// the stride dimension byte offset (the next eight rows: one 1024-byte atom).
    fn descriptor(&self, t: &Tile, base: &Expr, k_major: bool) -> String {
        use crate::ir::BinOp::{FloorDiv, FloorMod};
        let s = self.swizzles[&t.buffer];
        let dtype = self.p.buffer(t.buffer).dtype;
        let (row, col) = (
            Expr::bin(FloorDiv, base.clone(), Expr::Int(s.row)),
            Expr::bin(FloorMod, base.clone(), Expr::Int(s.row)),
        );
        let unpermuted = Expr::add(
            Expr::add(
                Expr::mul(
                    Expr::bin(FloorDiv, col.clone(), Expr::Int(s.panel)),
                    Expr::Int(s.rows * s.panel),
                ),
                Expr::mul(row, Expr::Int(s.panel)),
            ),
            Expr::bin(FloorMod, col, Expr::Int(s.panel)),
        );
        let unpermuted = self.simp(&unpermuted);
        let lbo = if k_major { 16 } else { s.panel_bytes(dtype) };
        let sbo = crate::lower::swizzle::ATOM_ROWS * crate::lower::swizzle::ROW_BYTES;
        format!(
            "tessel_wgmma_desc(tessel_smem_addr({} + {}), {lbo}, {sbo})",
            ident(&self.p.buffer(t.buffer).name),
            paren(&self.expr(&unpermuted))
        )
    }

    pub(super) fn mma(&mut self, m: &Mma, depth: usize) {
        let lane = "((int)threadIdx.x)";
        if let MmaOp::WgmmaWait(n) = m.op {
            return self.wgmma_wait(n, depth);
        }
        let lines: Vec<String> = match &m.op {
            MmaOp::Fill { acc } => self
                .registers(acc, 4)
                .into_iter()
                .map(|x| format!("{x} = 0.0f;"))
                .collect(),
            MmaOp::Load {
                operand,
                frag,
                src,
                transposed,
                tf32,
            } => {
                // The source row and column each lane gives ldmatrix (see the module doc):
                // 16 bytes further for the second matrix of a row.
                let half = if *tf32 { 4 } else { 8 };
                let (count, trans, row, col) = match (operand, transposed) {
                    (MmaOperand::A, false) => (
                        4,
                        false,
                        format!("{lane} % 16"),
                        format!("{lane} / 16 * {half}"),
                    ),
                    (MmaOperand::A, true) => (
                        4,
                        true,
                        format!("{lane} % 8 + {lane} / 16 * 8"),
                        format!("{lane} / 8 % 2 * 8"),
                    ),
                    (MmaOperand::B, false) => (2, true, format!("{lane} % 16"), "0".into()),
                    (MmaOperand::B, true) => (
                        2,
                        false,
                        format!("{lane} % 8"),
                        format!("{lane} / 8 % 2 * {half}"),
                    ),
                };
                // TF32 fragments are `float` registers.
                let reg = if *tf32 { "f" } else { "r" };
                let row_start = format!(
                    "{} + ({row}) * {} + {col}",
                    paren(&self.expr(&src.base)),
                    src.row_stride
                );
                let addr = format!(
                    "{} + {}",
                    ident(&self.p.buffer(src.buffer).name),
                    self.index_str(src.buffer, row_start)
                );
                let outs: Vec<String> = self
                    .registers(frag, count)
                    .iter()
                    .map(|x| format!("\"={reg}\"({x})"))
                    .collect();
                let places: Vec<String> = (0..count).map(|i| format!("%{i}")).collect();
                vec![format!(
                    "asm volatile(\"ldmatrix.sync.aligned.m8n8.x{count}{}.shared.b16 {{{}}}, [%{count}];\\n\" : {} : \"r\"(tessel_smem_addr({addr})));",
                    if trans { ".trans" } else { "" },
                    places.join(", "),
                    outs.join(", ")
                )]
            }
            MmaOp::Sync { acc, a, b, tf32 } => {
                // TF32 operands are `float` registers, which mma takes as their bits.
                let (ty, k, bits) = match self.p.buffer(a.buffer).dtype {
                    _ if *tf32 => ("tf32", 8, "__float_as_uint"),
                    DType::BF16 => ("bf16", 16, ""),
                    _ => ("f16", 16, ""),
                };
                let operands: Vec<String> = self
                    .registers(acc, 4)
                    .iter()
                    .map(|r| format!("\"+f\"({r})"))
                    .collect();
                let ins: Vec<String> = self
                    .registers(a, 4)
                    .into_iter()
                    .chain(self.registers(b, 2))
                    .map(|r| format!("\"r\"({bits}({r}))"))
                    .collect();
                vec![format!(
                    "asm volatile(\"mma.sync.aligned.m16n8k{k}.row.col.f32.{ty}.{ty}.f32 {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\\n\" : {} : {});",
                    operands.join(", "),
                    ins.join(", ")
                )]
            }
            MmaOp::Store {
                dst,
                acc,
                value,
                valid,
            } => {
                let name = ident(&self.p.buffer(dst.buffer).name);
                let lane_var = self.lane_var();
                let dtype = self.p.buffer(dst.buffer).dtype;
                // Two 16-bit neighbours packed into one 32-bit store where nothing guards
                // them and the pair is 4-byte aligned (also what keeps ptxas from
                // serializing wgmmas whose last group is still in flight: it did with the
                // elements converted and stored one by one).
                let even = |e: &Expr| {
                    self.simp(&Expr::bin(
                        crate::ir::BinOp::FloorMod,
                        e.clone(),
                        Expr::Int(2),
                    )) == Expr::Int(0)
                };
                let packed = dtype.is_half()
                    && valid.is_none()
                    && dst.row_stride % 2 == 0
                    && even(&dst.base)
                    && !self.swizzles.contains_key(&dst.buffer);
                let mut elements = Vec::new();
                let mut out = Vec::new();
                for (i, (dr, dc)) in [(0, 0), (0, 1), (8, 0), (8, 1)].into_iter().enumerate() {
                    // Row g + dr, column 2t + dc of the tile, as expressions of the lane.
                    let lane_e = Expr::Var(lane_var);
                    let row = Expr::add(
                        Expr::bin(crate::ir::BinOp::FloorDiv, lane_e.clone(), Expr::Int(4)),
                        Expr::Int(dr),
                    );
                    let col = Expr::add(
                        Expr::mul(
                            Expr::bin(crate::ir::BinOp::FloorMod, lane_e, Expr::Int(4)),
                            Expr::Int(2),
                        ),
                        Expr::Int(dc),
                    );
                    let index = self.index(dst.buffer, &dst.at(row.clone(), col.clone()));
                    // The stored value at this element, its accumulator read from the
                    // lane's register `i` of the tile.
                    let at = |e: &Expr| {
                        e.substitute(&|v| {
                            if v == m.vars[0] {
                                Some(row.clone())
                            } else if v == m.vars[1] {
                                Some(col.clone())
                            } else {
                                None
                            }
                        })
                    };
                    let register = self.register_expr(acc, i as i64);
                    let element = at(value).rewrite(&mut |x| match x {
                        Expr::Load(b, _) if b == acc.buffer => {
                            Expr::Load(b, vec![register.clone()])
                        }
                        other => other,
                    });
                    // The store converts to the destination's dtype: a conversion to it
                    // outermost is that one.
                    let element = match element {
                        Expr::Cast(t, x) if t == dtype => *x,
                        e => e,
                    };
                    if packed {
                        elements.push((index, self.expr(&element)));
                        continue;
                    }
                    let value = self.stored(dst.buffer, &element);
                    let store = format!("{name}[{index}] = {value};");
                    out.push(match valid {
                        Some(cond) => format!("if {} {store}", paren(&self.expr(&at(cond)))),
                        None => store,
                    });
                }
                let pack = match dtype {
                    DType::BF16 => "tessel_pack_bf16x2",
                    _ => "tessel_pack_f16x2",
                };
                for pair in elements.chunks(2) {
                    let [(index, lo), (_, hi)] = pair else {
                        continue;
                    };
                    out.push(format!(
                        "*(unsigned*)({name} + {index}) = {pack}({lo}, {hi});"
                    ));
                }
                out
            }
            MmaOp::Wgmma {
                acc,
                a,
                b,
                n,
                a_trans,
                b_trans,
                group_a,
            } => {
                // f32 operands are read as TF32 (the lowering checked the nest says so):
                // k steps of 8 and no transpose immediates (both operands k-major).
                let (ty, k) = match self.p.buffer(a.buffer).dtype {
                    DType::BF16 => ("bf16", 16),
                    DType::F32 => ("tf32", 8),
                    _ => ("f16", 16),
                };
                let regs = n / 2;
                let outs: Vec<String> = self
                    .registers(acc, regs)
                    .iter()
                    .map(|r| format!("\"+f\"({r})"))
                    .collect();
                let places: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
                let da = self.descriptor(a, group_a, !a_trans);
                let db = self.descriptor(b, &b.base, *b_trans);
                // imm-trans-a 1: A M-major; imm-trans-b 1: B N-major (PTX ISA).
                let trans = match ty {
                    "tf32" => String::new(),
                    _ => format!(", {}, {}", *a_trans as i32, !b_trans as i32),
                };
                vec![format!(
                        "asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\nwgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ty}.{ty} {{{}}}, %{}, %{}, p, 1, 1{trans};\\n}}\\n\" : {} : \"l\"({da}), \"l\"({db}), \"r\"(1));",
                        regs + 2,
                        places.join(", "),
                        regs,
                        regs + 1,
                        outs.join(", ")
                    )]
            }
            MmaOp::WgmmaFence => {
                vec!["asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");".into()]
            }
            MmaOp::WgmmaCommit => {
                vec!["asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");".into()]
            }
            MmaOp::WgmmaWait(_) => unreachable!("printed above"),
        };
        for l in lines {
            self.line(depth, &l);
        }
    }
}

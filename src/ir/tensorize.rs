//! Tensor-core intrinsics and the check that a loop nest matches one.
//!
//! `tensorize(loop, intrin)` marks `loop` with the annotation `tensorize = "<intrin>"`:
//! the loop and the loops under it form one intrinsic's loop nest, whose one block computes
//! exactly what the intrinsic computes. The IR keeps the scalar nest (the interpreter runs
//! it, so a tensorized schedule is checked like any other); the CUDA lowering replaces it
//! by the warp-collective instruction (`lower/tensorize.rs`). As in TensorIR, the nest
//! must match the intrinsic's description; TensorIR's `blockize` has no counterpart here
//! because a tessel block is a single statement: the annotated loop is the unit.
//!
//! The intrinsics are those of `mma.sync.m16n8k16` with 16-bit operands (f16 or bf16)
//! accumulated in f32, and of `mma.sync.m16n8k8` with f32 operands read as TF32, on
//! `fragment` buffers (a warp's tiles in its lanes' registers):
//!
//! | intrinsic    | loops (outermost first) | block                                          |
//! | ------------ | ----------------------- | ---------------------------------------------- |
//! | `mma_fill`   | rows 16, cols 8         | `acc[r, c] = 0` (acc: f32 fragment)            |
//! | `mma_load_a` | rows 16 (m), cols 16 (k)| `a[r, c] = src[..]` (src: shared, same dtype)  |
//! | `mma_load_b` | rows 16 (k), cols 8 (n) | `b[r, c] = src[..]`                            |
//! | `mma_sync`   | i 16, j 8, k 16         | `acc[i, j] += f32(a[i, k]) * f32(b[k, j])`     |
//! | `mma_load_a` (TF32) | rows 16, cols 8  | `a[r, c] = src[..]`, a and src f32             |
//! | `mma_load_b` (TF32) | rows 8, cols 8   | `b[r, c] = src[..]`                            |
//! | `mma_sync` (TF32)   | i 16, j 8, k 8   | `acc[i, j] += tf32(a[i, k]) * tf32(b[k, j])`, a and b f32 fragments |
//! | `mma_store`  | rows 16, cols 8         | `dst[r, c] = f(acc[r, c], ..)`: an elementwise function of the element (a conversion to dst's dtype, a bias, a relu); global or shared; may be guarded |
//! | `wgmma_sync` | i 16, j 8..256 (by 8), k 16 | `acc[i, j] += f32(a[i, k]) * f32(b[k, j])`, a and b **shared** (swizzled) |
//! | `wgmma_sync` (TF32) | i 16, j 8..256 (by 8), k 8 | `acc[i, j] += tf32(a[i, k]) * tf32(b[k, j])`, a and b f32, **shared**, both stored k-major |
//!
//! `wgmma_sync` is Hopper's `wgmma.mma_async` (sm_90a): the four warps of a warpgroup
//! issue one `m64nNk16` together, each warp's nest being its 16 rows of the 64, and the
//! operands are read from shared memory through descriptors, not loaded into fragments.
//! Its accumulator is a fragment in the layout of `mma_sync`'s (the warp's 16 x N tile as
//! N / 8 tiles of 16 x 8), so `mma_fill` and `mma_store` serve it. The lowering checks the
//! warpgroup (`lower/tensorize.rs`). With f32 operands read at TensorFloat-32's precision
//! (`math=tf32`) it is `wgmma.mma_async.m64nNk8.f32.tf32.tf32`: a k step of 8 (32 bytes,
//! as 16 of a 16-bit type), and, as the PTX ISA allows no transpose for TF32, both
//! operands stored with k as their last axis (`transform_layout` of the shared copy).
//!
//! Each access must address its tile by the nest's loops one to one: a loop of the nest
//! steps exactly one index of the access by 1 and no other, and the access uses no other
//! loop of the nest. The strides are checked after compaction, by the lowering.

use super::interval::Interval;
use super::simplify::simplify;
use super::{
    AnnValue, BinOp, BlockId, DType, Expr, FactorRead, LoopId, LoopKind, Node, Program, Scope,
    VarId,
};
use thiserror::Error;

/// The annotation key a tensorized loop carries; its value is the intrinsic's name.
pub const KEY: &str = "tensorize";

/// A tensor-core intrinsic a loop nest can be replaced by.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Intrin {
    MmaFill,
    MmaLoadA,
    MmaLoadB,
    MmaSync,
    MmaStore,
    WgmmaSync,
}

/// The `wgmma` N extents: 8 to 256 in steps of 8 (`extents` gives 0 for that loop).
pub const WGMMA_N: std::ops::RangeInclusive<i64> = 8..=256;

/// Bytes of k one `mma.sync` or `wgmma` reduces: 16 elements of a 16-bit type, 8 of
/// TF32 (`extents` gives -1 for that loop, checked once the operands' type is known).
pub const MMA_K_BYTES: i64 = 32;

impl Intrin {
    pub const ALL: [Intrin; 6] = [
        Intrin::MmaFill,
        Intrin::MmaLoadA,
        Intrin::MmaLoadB,
        Intrin::MmaSync,
        Intrin::MmaStore,
        Intrin::WgmmaSync,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Intrin::MmaFill => "mma_fill",
            Intrin::MmaLoadA => "mma_load_a",
            Intrin::MmaLoadB => "mma_load_b",
            Intrin::MmaSync => "mma_sync",
            Intrin::MmaStore => "mma_store",
            Intrin::WgmmaSync => "wgmma_sync",
        }
    }

    pub fn parse(s: &str) -> Option<Intrin> {
        Intrin::ALL.into_iter().find(|i| i.name() == s)
    }

    /// The extents of the intrinsic's loop nest, outermost first; 0: any of [`WGMMA_N`]
    /// that is a multiple of 8; -1: the [`MMA_K_BYTES`] of the operands' type.
    pub fn extents(self) -> &'static [i64] {
        match self {
            Intrin::MmaFill | Intrin::MmaStore => &[16, 8],
            Intrin::MmaLoadA => &[16, -1],
            Intrin::MmaLoadB => &[-1, 8],
            Intrin::MmaSync => &[16, 8, -1],
            Intrin::WgmmaSync => &[16, 0, -1],
        }
    }
}

/// Why a loop cannot be tensorized.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum TensorizeError {
    #[error(
        "loop {loop_name}: unknown intrinsic {name:?} (known: mma_fill, mma_load_a, mma_load_b, mma_sync, mma_store, wgmma_sync)"
    )]
    Unknown { loop_name: String, name: String },
    #[error("loop {name}: cannot tensorize with {intrin}: {reason}")]
    Mismatch {
        name: String,
        intrin: &'static str,
        reason: String,
    },
}

/// The loop nest an intrinsic replaces: its loops, outermost first, and its block.
#[derive(Clone, Debug, PartialEq)]
pub struct Nest {
    pub intrin: Intrin,
    pub loops: Vec<LoopId>,
    pub block: BlockId,
}

/// The intrinsic a loop is annotated with, if any (an unknown name is an error).
pub fn annotated(p: &Program, l: LoopId) -> Result<Option<Intrin>, TensorizeError> {
    match p.lp(l).annotations.get(KEY) {
        None => Ok(None),
        Some(AnnValue::Str(s)) => {
            Intrin::parse(s)
                .map(Some)
                .ok_or_else(|| TensorizeError::Unknown {
                    loop_name: p.loop_name(l).into(),
                    name: s.clone(),
                })
        }
        Some(other) => Err(TensorizeError::Unknown {
            loop_name: p.loop_name(l).into(),
            name: other.to_string(),
        }),
    }
}

/// Checks that the nest rooted at `l` matches `intrin` (see the module doc).
pub fn check(p: &Program, l: LoopId, intrin: Intrin) -> Result<Nest, TensorizeError> {
    let fail = |at: LoopId, reason: String| TensorizeError::Mismatch {
        name: p.loop_name(at).into(),
        intrin: intrin.name(),
        reason,
    };
    // 1. A perfect nest of serial loops of the intrinsic's extents around one block.
    let extents = intrin.extents();
    let mut loops = vec![l];
    loop {
        let at = *loops.last().unwrap();
        let lp = p.lp(at);
        if !matches!(lp.kind, LoopKind::Serial | LoopKind::Unrolled) {
            return Err(fail(
                at,
                format!("it is {:?}; the nest must be serial", lp.kind).to_lowercase(),
            ));
        }
        let want = extents[loops.len() - 1];
        let fits = match want {
            0 => WGMMA_N.contains(&lp.extent) && lp.extent % 8 == 0,
            -1 => matches!(lp.extent, 8 | 16),
            w => lp.extent == w,
        };
        if !fits {
            let has = match want {
                0 => format!("{} to {} in steps of 8", WGMMA_N.start(), WGMMA_N.end()),
                -1 => "16 (16-bit operands) or 8 (TF32)".to_string(),
                w => w.to_string(),
            };
            return Err(fail(
                at,
                format!(
                    "its extent is {}, the intrinsic's loop has {has}",
                    lp.extent
                ),
            ));
        }
        if loops.len() == extents.len() {
            break;
        }
        match lp.body.as_slice() {
            [Node::Loop(c)] => loops.push(*c),
            _ => {
                return Err(fail(
                    at,
                    format!(
                        "its body is not one loop (the intrinsic's nest has {} loops)",
                        extents.len()
                    ),
                ))
            }
        }
    }
    let inner = *loops.last().unwrap();
    let block = match p.lp(inner).body.as_slice() {
        [Node::Block(b)] => *b,
        _ => return Err(fail(inner, "its body is not one block".into())),
    };
    let blk = p.block(block);
    if blk.init.is_some() {
        return Err(fail(
            l,
            format!("block {} has an init (decompose_reduction first)", blk.name),
        ));
    }
    if blk.predicate.is_some() && intrin != Intrin::MmaStore {
        return Err(fail(
            l,
            format!(
                "block {} is guarded (an imperfect tile); only mma_store may be",
                blk.name
            ),
        ));
    }
    // 2. The block's store and loads in loop variables.
    let vars: Vec<VarId> = loops.iter().map(|x| p.lp(*x).var).collect();
    let bind = |e: &Expr| -> Expr {
        let m: std::collections::BTreeMap<VarId, Expr> = blk
            .iter_vars
            .iter()
            .zip(&blk.bindings)
            .map(|(iv, b)| (iv.var, b.clone()))
            .collect();
        e.substitute(&|v| m.get(&v).cloned())
    };
    let access = |what: &str, buf, idx: &[Expr], uses: &[usize]| -> Result<(), TensorizeError> {
        let name = &p.buffer(buf).name;
        let idx: Vec<Expr> = idx.iter().map(bind).collect();
        for (n, v) in vars.iter().enumerate() {
            let steps: Vec<Option<i64>> = idx.iter().map(|e| step(e, *v)).collect();
            let used = uses.contains(&n);
            let ones = steps.iter().filter(|s| **s == Some(1)).count();
            let zeros = steps.iter().filter(|s| **s == Some(0)).count();
            let ok = if used {
                ones == 1 && zeros == idx.len() - 1
            } else {
                zeros == idx.len()
            };
            if !ok {
                return Err(fail(
                    loops[n],
                    format!(
                        "the {what} {name} is {} by this loop",
                        if used {
                            "not indexed one to one"
                        } else {
                            "indexed"
                        }
                    ),
                ));
            }
        }
        Ok(())
    };
    let scope_is = |what: &str, buf, scope: Scope, dtypes: &[DType]| {
        let b = p.buffer(buf);
        if b.scope != scope || !dtypes.contains(&b.dtype) {
            return Err(fail(
                l,
                format!(
                    "the {what} {} is {} {}, the intrinsic needs {} {}",
                    b.name,
                    b.scope.name(),
                    b.dtype.name(),
                    scope.name(),
                    dtypes
                        .iter()
                        .map(|d| d.name())
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            ));
        }
        Ok(())
    };
    const HALF: &[DType] = &[DType::F16, DType::BF16];
    let dst = blk.body.buffer;
    let didx = &blk.body.indices;
    let value = &blk.body.value;
    let shape = |reason: &str| fail(l, format!("block {}: {reason}", blk.name));
    // The nest's k loop (position `at`) covers 32 bytes of the operands' `dtype`.
    let reduces_32_bytes = |at: usize, dtype: DType| {
        let k = p.lp(loops[at]).extent;
        let bytes = dtype.bytes() as i64;
        if k * bytes == MMA_K_BYTES {
            return Ok(());
        }
        Err(fail(
            loops[at],
            format!(
                "its extent is {k}; {} reduces {} of {} per instruction",
                intrin.name(),
                MMA_K_BYTES / bytes,
                if dtype == DType::F32 {
                    "tf32"
                } else {
                    "a 16-bit type"
                }
            ),
        ))
    };
    match intrin {
        Intrin::MmaFill => {
            scope_is("accumulator", dst, Scope::Fragment, &[DType::F32])?;
            if !matches!(value, Expr::Float(z) if *z == 0.0) {
                return Err(shape("it does not store zero"));
            }
            access("accumulator", dst, didx, &[0, 1])?;
        }
        Intrin::MmaLoadA | Intrin::MmaLoadB => {
            scope_is(
                "fragment",
                dst,
                Scope::Fragment,
                &[DType::F16, DType::BF16, DType::F32],
            )?;
            let Expr::Load(src, sidx) = value else {
                return Err(shape("it does not copy one element"));
            };
            scope_is("source", *src, Scope::Shared, &[p.buffer(dst).dtype])?;
            let k = extents.iter().position(|e| *e == -1).unwrap_or(0);
            reduces_32_bytes(k, p.buffer(dst).dtype)?;
            access("fragment", dst, didx, &[0, 1])?;
            access("source", *src, sidx, &[0, 1])?;
        }
        Intrin::MmaSync | Intrin::WgmmaSync => {
            scope_is("accumulator", dst, Scope::Fragment, &[DType::F32])?;
            let product = match value {
                Expr::Bin(BinOp::Add, x, y) => match (&**x, &**y) {
                    (Expr::Load(b, i), prod) | (prod, Expr::Load(b, i))
                        if *b == dst && i == didx =>
                    {
                        prod
                    }
                    _ => return Err(shape("it does not accumulate into its own element")),
                },
                _ => return Err(shape("it is not an accumulation `acc += a * b`")),
            };
            let Expr::Bin(BinOp::Mul, x, y) = product else {
                return Err(shape("the accumulated value is not a product"));
            };
            // 16-bit elements widened to f32, or f32 elements read as TF32.
            let operand = |e: &Expr| match e.factor_load()? {
                (FactorRead::Cast(DType::F32), b, i) => Some((b, i.to_vec(), false)),
                (FactorRead::Tf32, b, i) => Some((b, i.to_vec(), true)),
                _ => None,
            };
            let (Some((xb, xi, xt)), Some((yb, yi, yt))) = (operand(x), operand(y)) else {
                return Err(shape(
                    "the product's factors are not 16-bit elements widened to f32 nor f32 elements read as tf32",
                ));
            };
            if xt != yt {
                return Err(shape("one factor is read as tf32 and the other is not"));
            }
            let (x, y, tf32) = ((xb, xi), (yb, yi), xt);
            // Which factor is A (indexed by i and k) and which B (k and j).
            let by_a = |b: &(crate::ir::BufferId, Vec<Expr>)| {
                let i = b.1.iter().map(bind).collect::<Vec<_>>();
                i.iter().any(|e| e.uses_var(vars[0]))
            };
            let (a, b) = if by_a(&x) { (x, y) } else { (y, x) };
            // mma.sync reads fragments, wgmma shared memory.
            let from = match intrin {
                Intrin::WgmmaSync => Scope::Shared,
                _ => Scope::Fragment,
            };
            scope_is(
                "operand A",
                a.0,
                from,
                if tf32 { &[DType::F32] } else { HALF },
            )?;
            scope_is("operand B", b.0, from, &[p.buffer(a.0).dtype])?;
            reduces_32_bytes(2, p.buffer(a.0).dtype)?;
            access("accumulator", dst, didx, &[0, 1])?;
            access("operand A", a.0, &a.1, &[0, 2])?;
            access("operand B", b.0, &b.1, &[2, 1])?;
        }
        Intrin::MmaStore => {
            let b = p.buffer(dst);
            if !matches!(b.scope, Scope::Global | Scope::Shared)
                || !matches!(b.dtype, DType::F32 | DType::F16 | DType::BF16)
            {
                return Err(shape(&format!(
                    "the destination {} is {} {}, not a global or shared float buffer",
                    b.name,
                    b.scope.name(),
                    b.dtype.name()
                )));
            }
            // The stored value is an elementwise function of one accumulator element (a
            // copy, a conversion, a bias and relu inlined into the write-back): every
            // fragment it reads is that element.
            let frags: Vec<(crate::ir::BufferId, Vec<Expr>)> = value
                .loads()
                .into_iter()
                .filter(|(buf, _)| p.buffer(*buf).scope == Scope::Fragment)
                .collect();
            let Some((acc, aidx)) = frags.first().cloned() else {
                return Err(shape("it does not read an accumulator element"));
            };
            if frags.iter().any(|f| *f != (acc, aidx.clone())) {
                return Err(shape("it reads more than one accumulator element"));
            }
            scope_is("accumulator", acc, Scope::Fragment, &[DType::F32])?;
            // A destination of more dimensions (a conv's output stored back from its GEMM
            // at the digits of the row index: `out[m // PQ, m // Q % P, m % Q, n]`) is
            // addressed by the flat index, which the lowering uses: the nest's columns
            // must be neighbours in memory and its rows a constant stride apart.
            if let Err(e) = access("destination", dst, didx, &[0, 1]) {
                let b = p.buffer(dst);
                if didx.len() <= 2 || !b.align.is_empty() || b.swizzle {
                    return Err(e);
                }
                // The loops' steps through the bindings of the folded flat index.
                let flat = bind(&flat_store_index(p, blk));
                if step(&flat, vars[1]) != Some(1) || step(&flat, vars[0]).is_none() {
                    return Err(e);
                }
            }
            access("accumulator", acc, &aidx, &[0, 1])?;
        }
    }
    Ok(Nest {
        intrin,
        loops,
        block,
    })
}

/// The row-major flat index of `blk`'s store, simplified over its iteration variables
/// (each in `[0, extent)`): a store at the digits of one index (a conv's output written
/// back from its GEMM, `out[m // 3136, m // 56 % 56, m % 56, n]`) folds back into it
/// (`m * 64 + n`).
pub fn flat_store_index(p: &Program, blk: &crate::ir::Block) -> Expr {
    let shape = &p.buffer(blk.body.buffer).shape;
    let flat = blk
        .body
        .indices
        .iter()
        .zip(shape)
        .fold(Expr::Int(0), |acc, (i, n)| {
            Expr::add(Expr::mul(acc, Expr::Int(*n)), i.clone())
        });
    let range = |v: VarId| {
        blk.iter_vars
            .iter()
            .find(|iv| iv.var == v)
            .map(|iv| Interval::new(0, iv.extent - 1))
    };
    simplify(&flat, &range)
}

/// How much `e` grows when `v` grows by one, where that is a constant.
pub fn step(e: &Expr, v: VarId) -> Option<i64> {
    let next = e.substitute(&|x| (x == v).then(|| Expr::add(Expr::Var(v), Expr::Int(1))));
    simplify(&Expr::sub(next, e.clone()), &|_| None).as_int()
}

//! The checked workload: tensors, stages and their scalar expressions.
//!
//! Names are resolved to indices: a tensor access names the tensor by its position in
//! [`Workload::tensors`], an axis by its position in the stage's axes (spatial axes
//! first, then reduction axes). A [`Workload`] is only built by the checker, so every
//! value of it satisfies the language's rules (extents known and positive, accesses in
//! bounds outside `if_then_else` branches, dtypes consistent).

use crate::ir::{BinOp, DType, UnOp};

/// A checked workload: its name and its tensors in declaration order.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub(crate) name: String,
    pub(crate) tensors: Vec<Tensor>,
}

/// One tensor: an input, or a stage computing it.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// The name the user gave it.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Extent of each dimension (all positive).
    pub shape: Vec<i64>,
    /// How its values come about.
    pub def: TensorDef,
}

/// How a tensor's values come about.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorDef {
    /// A parameter of the workload.
    Input,
    /// A compute stage `T[axes] = value` or `T[axes] = sum(value, raxes)`.
    Compute(Compute),
    /// `T = concat(X0, X1, ..., axis=a)`, by tensor indices.
    Concat {
        /// The concatenated tensors, in order.
        inputs: Vec<usize>,
        /// The dimension along which they are joined.
        axis: usize,
    },
}

/// A compute stage.
#[derive(Clone, Debug, PartialEq)]
pub struct Compute {
    /// Spatial axes, in left-hand-side order; their extents are the tensor's shape.
    pub axes: Vec<Axis>,
    /// The reduction wrapping the value, if any.
    pub reduce: Option<Reduce>,
    /// The value (the reduced expression when `reduce` is set).
    pub value: Scalar,
}

impl Compute {
    /// Spatial axes then reduction axes: the space [`Scalar::Axis`] indexes.
    pub fn all_axes(&self) -> impl Iterator<Item = &Axis> {
        self.axes
            .iter()
            .chain(self.reduce.iter().flat_map(|r| r.axes.iter()))
    }
}

/// A named iteration axis with its extent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axis {
    /// The name in the source text.
    pub name: String,
    /// Number of points (positive).
    pub extent: i64,
}

/// A reduction over some axes.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduce {
    /// How values combine.
    pub op: ReduceOp,
    /// The reduction axes, in the order written.
    pub axes: Vec<Axis>,
}

/// How a reduction combines values.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// `sum(...)`, starting from 0.
    Sum,
    /// `max_reduce(...)`, starting from -inf.
    Max,
}

impl ReduceOp {
    /// The spelling in the language.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max_reduce",
        }
    }
}

/// A checked scalar expression of a stage.
///
/// Integer constants only occur in index arithmetic and index comparisons; constants in
/// value positions are [`Scalar::Float`]. `relu(x)` is stored as `max(x, 0.0)`. Casts,
/// comparisons and `tf32` (a precision, not an operation) count no flops.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    /// An integer constant (index arithmetic).
    Int(i64),
    /// A floating-point constant (takes the stage's dtype).
    Float(f64),
    /// An axis of the stage, by position in [`Compute::all_axes`].
    Axis(usize),
    /// `tensor[indices]`, by position in [`Workload::tensors`].
    Access(usize, Vec<Scalar>),
    /// A binary operation.
    Bin(BinOp, Box<Scalar>, Box<Scalar>),
    /// A unary operation.
    Un(UnOp, Box<Scalar>),
    /// `if_then_else(cond, then, else)`.
    Select(Box<Scalar>, Box<Scalar>, Box<Scalar>),
    /// `cast(dtype, x)`.
    Cast(DType, Box<Scalar>),
}

impl Scalar {
    /// Value operations per point: arithmetic and math functions outside indices and
    /// `if_then_else` conditions (index arithmetic, comparisons, selects and casts are free).
    fn value_ops(&self) -> u64 {
        match self {
            Scalar::Int(_) | Scalar::Float(_) | Scalar::Axis(_) | Scalar::Access(..) => 0,
            Scalar::Bin(op, a, b) => {
                let own = u64::from(matches!(
                    op,
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max
                ));
                own + a.value_ops() + b.value_ops()
            }
            // `tf32` states the operands' precision, as a cast does.
            Scalar::Un(op, a) => u64::from(!matches!(op, UnOp::Not | UnOp::Tf32)) + a.value_ops(),
            Scalar::Select(_, t, e) => t.value_ops().max(e.value_ops()),
            Scalar::Cast(_, a) => a.value_ops(),
        }
    }
}

impl Workload {
    /// The workload's name: the preset name, the `workload NAME` line, or `main`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// All tensors in declaration order.
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Whether the tensor at `index` is read by a later stage.
    pub fn is_read_later(&self, index: usize) -> bool {
        self.tensors.iter().skip(index + 1).any(|t| match &t.def {
            TensorDef::Input => false,
            TensorDef::Concat { inputs, .. } => inputs.contains(&index),
            TensorDef::Compute(c) => reads(&c.value, index),
        })
    }

    /// Floating-point operations of one evaluation: per point of each stage, its value
    /// operations, plus one for the combine of a reduction (so matmul is `2*M*N*K`). A
    /// 3xTF32 GEMM ([`Workload::splits_tf32`]) counts the f32 GEMM it stands for, as its
    /// peer's is counted: a third of its reduction over three times the length, without
    /// the splits, so that its FLOP/s read as an f32 GEMM's.
    pub fn flops(&self) -> f64 {
        let split = self.splits_tf32();
        self.tensors
            .iter()
            .map(|t| match &t.def {
                TensorDef::Compute(c) if !split || c.reduce.is_some() => {
                    let points: f64 = c.all_axes().map(|a| a.extent as f64).product();
                    let ops = c.value.value_ops() + u64::from(c.reduce.is_some());
                    let share = if split { 3.0 } else { 1.0 };
                    points * ops as f64 / share
                }
                _ => 0.0,
            })
            .sum()
    }

    /// Whether a stage reads values at TensorFloat-32's precision (`tf32(x)`, `math=tf32`).
    pub fn uses_tf32(&self) -> bool {
        fn has(e: &Scalar) -> bool {
            match e {
                Scalar::Un(UnOp::Tf32, _) => true,
                Scalar::Int(_) | Scalar::Float(_) | Scalar::Axis(_) => false,
                Scalar::Access(_, idx) => idx.iter().any(has),
                Scalar::Bin(_, a, b) => has(a) || has(b),
                Scalar::Un(_, a) | Scalar::Cast(_, a) => has(a),
                Scalar::Select(c, t, f) => has(c) || has(t) || has(f),
            }
        }
        self.tensors
            .iter()
            .any(|t| matches!(&t.def, TensorDef::Compute(c) if has(&c.value)))
    }

    /// Whether a stage splits values at TensorFloat-32's precision, `x - tf32(x)` (the
    /// remainder `math=3xtf32` multiplies besides the TF32 part): such a workload keeps
    /// about f32's accuracy, so it is checked with f32's tolerance and compared with the
    /// vendor's f32 GEMM.
    pub fn splits_tf32(&self) -> bool {
        self.tensors.iter().any(|t| {
            matches!(&t.def, TensorDef::Compute(c) if matches!(
                &c.value,
                Scalar::Bin(BinOp::Sub, x, t) if matches!(&**t, Scalar::Un(UnOp::Tf32, y) if y == x)
            ))
        })
    }

    /// The `math=` argument of the GEMM preset an f32 workload would be built by:
    /// `,math=3xtf32` where it splits its operands, `,math=tf32` where it reads them as
    /// TF32, nothing otherwise.
    pub fn math_suffix(&self) -> &'static str {
        if self.splits_tf32() {
            ",math=3xtf32"
        } else if self.uses_tf32() {
            ",math=tf32"
        } else {
            ""
        }
    }

    /// The canonical name of each tensor (`t0`, `t1`, ... in declaration order), as
    /// `(original, canonical)` pairs in declaration order.
    pub fn canonical_names(&self) -> Vec<(String, String)> {
        self.tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), format!("t{i}")))
            .collect()
    }
}

fn reads(e: &Scalar, index: usize) -> bool {
    match e {
        Scalar::Int(_) | Scalar::Float(_) | Scalar::Axis(_) => false,
        Scalar::Access(t, idx) => *t == index || idx.iter().any(|i| reads(i, index)),
        Scalar::Bin(_, a, b) => reads(a, index) || reads(b, index),
        Scalar::Un(_, a) | Scalar::Cast(_, a) => reads(a, index),
        Scalar::Select(c, t, f) => reads(c, index) || reads(t, index) || reads(f, index),
    }
}

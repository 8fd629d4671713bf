//! Instructions and traces: the schedule as data.
//!
//! Every primitive call on a [`Schedule`](super::Schedule) appends one [`Instruction`]
//! to its [`Trace`]. Inputs refer to the outputs of earlier instructions through random
//! variables ("rvs": a block, a loop or a sampled integer), or are literals. Sampling
//! instructions carry their outcome as a [`Decision`]; replaying a trace with other
//! decisions yields another candidate of the same design space.

use serde::{Deserialize, Serialize};

/// What an instruction does. The text spelling is [`InstKind::name`].
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstKind {
    GetBlock,
    GetLoops,
    GetConsumers,
    GetProducers,
    Split,
    Fuse,
    Reorder,
    Bind,
    Vectorize,
    Unroll,
    Parallel,
    Annotate,
    CacheRead,
    ReadCache,
    CacheWrite,
    ComputeAt,
    ReverseComputeAt,
    SerialSumAt,
    ComputeInline,
    ReverseComputeInline,
    DecomposeReduction,
    Rfactor,
    PadEinsum,
    Im2col,
    TransformLayout,
    SplitLayout,
    StorageAlign,
    StorageSwizzle,
    StorageWiden,
    Tensorize,
    SamplePerfectTile,
    SampleTile,
    SampleCategorical,
    SampleComputeLocation,
}

/// The kind of value a random variable stands for.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RvKind {
    Block,
    Loop,
    Expr,
}

/// How an instruction is spelled: its name, its positional inputs and its named
/// attributes in printing order.
pub struct Signature {
    pub name: &'static str,
    /// Names of the positional inputs; `None` for a variadic list of rvs (fuse, reorder).
    pub positional: Option<&'static [&'static str]>,
    pub attrs: &'static [&'static str],
    /// The kind of every output, when the output count depends on the call.
    pub output: Option<RvKind>,
}

impl InstKind {
    pub const ALL: [InstKind; 34] = [
        InstKind::GetBlock,
        InstKind::GetLoops,
        InstKind::GetConsumers,
        InstKind::GetProducers,
        InstKind::Split,
        InstKind::Fuse,
        InstKind::Reorder,
        InstKind::Bind,
        InstKind::Vectorize,
        InstKind::Unroll,
        InstKind::Parallel,
        InstKind::Annotate,
        InstKind::CacheRead,
        InstKind::ReadCache,
        InstKind::CacheWrite,
        InstKind::ComputeAt,
        InstKind::ReverseComputeAt,
        InstKind::SerialSumAt,
        InstKind::ComputeInline,
        InstKind::ReverseComputeInline,
        InstKind::DecomposeReduction,
        InstKind::Rfactor,
        InstKind::PadEinsum,
        InstKind::Im2col,
        InstKind::TransformLayout,
        InstKind::SplitLayout,
        InstKind::StorageAlign,
        InstKind::StorageSwizzle,
        InstKind::StorageWiden,
        InstKind::Tensorize,
        InstKind::SamplePerfectTile,
        InstKind::SampleTile,
        InstKind::SampleCategorical,
        InstKind::SampleComputeLocation,
    ];

    pub fn signature(self) -> Signature {
        use InstKind::*;
        use RvKind as K;
        let (name, positional, attrs, output): (
            _,
            Option<&'static [&'static str]>,
            &'static [&'static str],
            _,
        ) = match self {
            GetBlock => ("get_block", Some(&[]), &["name"], Some(K::Block)),
            GetLoops => ("get_loops", Some(&["block"]), &[], Some(K::Loop)),
            GetConsumers => ("get_consumers", Some(&["block"]), &[], Some(K::Block)),
            GetProducers => ("get_producers", Some(&["block"]), &[], Some(K::Block)),
            Split => ("split", Some(&["loop"]), &["factors"], Some(K::Loop)),
            Fuse => ("fuse", None, &[], Some(K::Loop)),
            Reorder => ("reorder", None, &[], None),
            Bind => ("bind", Some(&["loop"]), &["thread"], None),
            Vectorize => ("vectorize", Some(&["loop"]), &[], None),
            Unroll => ("unroll", Some(&["loop"]), &[], None),
            Parallel => ("parallel", Some(&["loop"]), &[], None),
            Annotate => ("annotate", Some(&["target"]), &["key", "value"], None),
            CacheRead => (
                "cache_read",
                Some(&["block"]),
                &["read_index", "scope"],
                Some(K::Block),
            ),
            ReadCache => ("read_cache", Some(&["block", "cache"]), &[], None),
            CacheWrite => (
                "cache_write",
                Some(&["block"]),
                &["write_index", "scope"],
                Some(K::Block),
            ),
            ComputeAt => ("compute_at", Some(&["block", "loop"]), &[], None),
            ReverseComputeAt => ("reverse_compute_at", Some(&["block", "loop"]), &[], None),
            SerialSumAt => ("serial_sum_at", Some(&["block", "loop"]), &[], None),
            ComputeInline => ("compute_inline", Some(&["block"]), &[], None),
            ReverseComputeInline => ("reverse_compute_inline", Some(&["block"]), &[], None),
            DecomposeReduction => (
                "decompose_reduction",
                Some(&["block", "loop"]),
                &[],
                Some(K::Block),
            ),
            Rfactor => ("rfactor", Some(&["loop"]), &["factor_axis"], Some(K::Block)),
            PadEinsum => ("pad_einsum", Some(&["block"]), &["padding"], None),
            Im2col => ("im2col", Some(&["block"]), &[], None),
            TransformLayout => (
                "transform_layout",
                Some(&["block"]),
                &["buffer_index", "permutation"],
                None,
            ),
            SplitLayout => (
                "split_layout",
                Some(&["block"]),
                &["buffer_index", "axis", "factor"],
                None,
            ),
            StorageAlign => (
                "storage_align",
                Some(&["block"]),
                &["buffer_index", "axis", "factor", "offset"],
                None,
            ),
            StorageSwizzle => ("storage_swizzle", Some(&["block"]), &["buffer_index"], None),
            StorageWiden => ("storage_widen", Some(&["block"]), &["buffer_index"], None),
            Tensorize => ("tensorize", Some(&["loop"]), &["intrin"], None),
            SamplePerfectTile => (
                "sample_perfect_tile",
                Some(&["loop"]),
                &["n", "max_innermost_factor"],
                Some(K::Expr),
            ),
            SampleTile => (
                "sample_tile",
                Some(&["loop"]),
                &["n", "max_innermost_factor", "max_waste"],
                Some(K::Expr),
            ),
            SampleCategorical => (
                "sample_categorical",
                Some(&[]),
                &["candidates", "probs"],
                Some(K::Expr),
            ),
            SampleComputeLocation => (
                "sample_compute_location",
                Some(&["block", "locations"]),
                &[],
                Some(K::Loop),
            ),
        };
        Signature {
            name,
            positional,
            attrs,
            output,
        }
    }

    pub fn name(self) -> &'static str {
        self.signature().name
    }

    pub fn from_name(name: &str) -> Option<InstKind> {
        InstKind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Sampling instructions carry a decision.
    pub fn is_sampling(self) -> bool {
        matches!(
            self,
            InstKind::SamplePerfectTile
                | InstKind::SampleTile
                | InstKind::SampleCategorical
                | InstKind::SampleComputeLocation
        )
    }
}

impl InstKind {
    /// Sampling instructions whose decision is a list of tile sizes.
    pub fn samples_tiles(self) -> bool {
        matches!(self, InstKind::SamplePerfectTile | InstKind::SampleTile)
    }
}

/// An input or attribute of an instruction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operand {
    /// An earlier output, by its index in [`Trace::rvs`].
    Rv(u32),
    Int(i64),
    Float(f64),
    Str(String),
    None,
    List(Vec<Operand>),
    /// The product of its factors (`v1 * v2 * 4`): a loop extent derived from sampled
    /// tile sizes, so that changing a decision keeps the trace consistent.
    Product(Vec<Operand>),
}

/// The outcome of a sampling instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// `sample_perfect_tile` and `sample_tile`: the tile sizes, outermost first.
    Tile(Vec<i64>),
    /// `sample_categorical`: the index of the chosen candidate; `sample_compute_location`:
    /// the index of the chosen loop among its locations.
    Categorical(usize),
}

/// One primitive call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Instruction {
    pub kind: InstKind,
    pub inputs: Vec<Operand>,
    /// Named attributes, in the order of [`Signature::attrs`].
    pub attrs: Vec<(String, Operand)>,
    /// Indices into [`Trace::rvs`].
    pub outputs: Vec<u32>,
    pub decision: Option<Decision>,
}

impl Instruction {
    pub fn attr(&self, name: &str) -> Option<&Operand> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// What a `Decision::Categorical` of this instruction indexes and how many there are:
    /// ("candidate", the `candidates` of `sample_categorical`) or ("location", the
    /// `locations` of `sample_compute_location`; 0 where the list is malformed). `None`
    /// for other instructions.
    pub fn choices(&self) -> Option<(&'static str, usize)> {
        let (noun, list) = match self.kind {
            InstKind::SampleCategorical => ("candidate", self.attr("candidates")),
            InstKind::SampleComputeLocation => ("location", self.inputs.get(1)),
            _ => return None,
        };
        let n = match list {
            Some(Operand::List(items)) => items.len(),
            _ => 0,
        };
        Some((noun, n))
    }
}

/// A random variable of a trace: its kind and the name it prints as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RvInfo {
    pub kind: RvKind,
    pub name: String,
}

/// A schedule as data: the instructions in call order and the rvs they define.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub insts: Vec<Instruction>,
    pub rvs: Vec<RvInfo>,
}

impl Trace {
    /// The decisions of the sampling instructions, by instruction index.
    pub fn decisions(&self) -> Vec<(usize, Decision)> {
        self.insts
            .iter()
            .enumerate()
            .filter_map(|(i, inst)| inst.decision.clone().map(|d| (i, d)))
            .collect()
    }

    /// A copy with the decision of instruction `index` replaced.
    pub fn with_decision(&self, index: usize, decision: Decision) -> Trace {
        let mut t = self.clone();
        if let Some(inst) = t.insts.get_mut(index) {
            inst.decision = Some(decision);
        }
        t
    }
}

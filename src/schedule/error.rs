//! The errors of schedule primitives. Each names the loops and blocks involved, by the
//! names they print with, so a message can be read next to the printed IR.

use thiserror::Error;

/// Why a primitive was rejected. A rejected primitive leaves the program unchanged.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ScheduleError {
    #[error("no block named {name:?} (blocks: {available})")]
    BlockNotFound { name: String, available: String },
    #[error("{count} blocks are named {name:?}")]
    AmbiguousBlock { name: String, count: usize },
    #[error(
        "{rv} refers to a {kind} that no longer exists (a later primitive replaced or removed it)"
    )]
    StaleRv { rv: String, kind: &'static str },
    #[error("{rv} is not a {expected}")]
    RvKind { rv: String, expected: &'static str },
    #[error("loop {inner} is not the only child of loop {outer}")]
    NotOnlyChild { outer: String, inner: String },
    #[error("loop {inner} is not directly nested in loop {outer}")]
    NotNested { outer: String, inner: String },
    #[error("loops {loops} are not in one chain of nested loops")]
    NotOneChain { loops: String },
    #[error("loop {name} is given twice")]
    DuplicateLoop { name: String },
    #[error("loop {name} is {kind}; {primitive} needs a serial loop")]
    NotSerial {
        name: String,
        kind: String,
        primitive: &'static str,
    },
    #[error("cannot split loop {name} of extent {extent}: {reason}")]
    BadSplit {
        name: String,
        extent: i64,
        reason: String,
    },
    #[error("{primitive} needs at least {min} loops")]
    TooFewLoops { primitive: &'static str, min: usize },
    #[error("unknown thread {tag:?} (expected blockIdx.x/y/z, threadIdx.x/y/z or vthread.x/y/z)")]
    UnknownThread { tag: String },
    #[error("cannot bind loop {name} to {tag}: it carries the reduction of block {block}")]
    BindReduction {
        name: String,
        tag: String,
        block: String,
    },
    #[error("cannot bind loop {name} (extent {extent}) to {tag}: loop {other} is bound to it with extent {other_extent}")]
    ThreadExtentMismatch {
        name: String,
        extent: i64,
        tag: String,
        other: String,
        other_extent: i64,
    },
    #[error(
        "cannot {primitive} loop {name}: it is not innermost (its body must be a single block)"
    )]
    NotInnermost {
        name: String,
        primitive: &'static str,
    },
    #[error("cannot {primitive} loop {name}: it carries the reduction of block {block}")]
    LoopCarriesReduction {
        name: String,
        block: String,
        primitive: &'static str,
    },
    #[error("unknown storage scope {scope:?} (expected global, shared or local)")]
    UnknownScope { scope: String },
    #[error("block {block} has {count} {what}; index {index} is out of range")]
    IndexOutOfRange {
        block: String,
        what: &'static str,
        index: i64,
        count: usize,
    },
    #[error("buffer {buffer} is written by {writers}; {primitive} needs a single writer")]
    NotSingleWriter {
        buffer: String,
        writers: String,
        primitive: &'static str,
    },
    #[error("block {block} writes the output buffer {buffer}; compute_at cannot move an output block (use reverse_compute_at on its consumer)")]
    OutputBlock { block: String, buffer: String },
    #[error("block {block} has no {what}")]
    NoConsumers { block: String, what: &'static str },
    #[error("compute_at of {block} under loop {target}: consumer {consumers} is not under loop {target}")]
    ConsumerNotUnderLoop {
        block: String,
        target: String,
        consumers: String,
    },
    #[error("reverse_compute_at of {block} under loop {target}: producer {producers} is not under loop {target}")]
    ProducerNotUnderLoop {
        block: String,
        target: String,
        producers: String,
    },
    #[error("block {block} is already under loop {target}")]
    AlreadyUnderLoop { block: String, target: String },
    #[error("block {block} is not under loop {target}")]
    NotUnderLoop { block: String, target: String },
    #[error("reverse_compute_at of {block} under loop {target}: loop {target} is inside the reduction of producer {producer}, whose result is incomplete there")]
    IncompleteProducer {
        block: String,
        target: String,
        producer: String,
    },
    #[error("{primitive}: an earlier primitive failed on this schedule, which keeps no copy to restore the program from")]
    Abandoned { primitive: &'static str },
    #[error("{primitive} of block {block}: {reason}")]
    Unsupported {
        primitive: &'static str,
        block: String,
        reason: String,
    },
    #[error("{primitive} of loop {name}: {reason}")]
    UnsupportedLoop {
        primitive: &'static str,
        name: String,
        reason: String,
    },
    #[error("decompose_reduction of {block}: block has no init")]
    NoInit { block: String },
    #[error("decompose_reduction of {block} at {target}: loop {name} is used by both spatial and reduction iteration variables")]
    MixedLoop {
        block: String,
        target: String,
        name: String,
    },
    #[error("invalid {what}: {reason}")]
    InvalidArgument { what: &'static str, reason: String },
    #[error("{0}")]
    Pipeline(#[from] crate::ir::pipeline::PipelineError),
    #[error("{0}")]
    Tensorize(#[from] crate::ir::tensorize::TensorizeError),
    #[error("decision {decision} of {instruction} is invalid: {reason}")]
    InvalidDecision {
        instruction: String,
        decision: String,
        reason: String,
    },
    #[error("the trace names {given} outputs for {instruction}, which returns {actual}")]
    OutputCount {
        instruction: String,
        given: usize,
        actual: usize,
    },
    #[error("{primitive} left invalid IR (rolled back): {reason}")]
    Verify {
        primitive: &'static str,
        reason: String,
    },
}

/// The result of a schedule primitive.
pub type Result<T> = std::result::Result<T, ScheduleError>;

//! Structural validation of a [`Trace`], shared by the text parser and the JSON reader.
//!
//! A trace that passes [`validate`] prints as text that parses back to the same trace,
//! and serializes as JSON that reads back to the same trace. What is checked, per
//! instruction in order:
//!
//! 1. **Inputs**: as many positional inputs as [`Signature::positional`] names (fuse and
//!    reorder: at least one); an input named `block` is a block rv, `loop` a loop rv,
//!    `target` a block or loop rv, `locations` a non-empty list of loop rvs, every input
//!    of fuse and reorder a loop rv.
//! 2. **Attributes**: exactly the names of [`Signature::attrs`], in that order; their
//!    values have the expected shape (strings for `name`, `thread`, `key`, `scope`; a
//!    non-empty list of `None`, integers, rvs and products for `factors`, of integers, rvs
//!    and products for `padding`, of integers and non-empty lists of integers
//!    (axes fused into one) for `permutation`; `n` at least 1;
//!    non-empty integer `candidates` with as many numeric `probs`; `max_waste` a float in
//!    [0, 1); integers otherwise;
//!    `value` anything). Every rv inside an attribute is an expr rv; a product has at
//!    least two factors, each an integer or an rv; floats are finite.
//! 3. **Decision**: only on sampling instructions; `sample_perfect_tile` and `sample_tile` take `n`
//!    positive tile sizes, `sample_categorical` an index into its candidates,
//!    `sample_compute_location` an index into its locations.
//! 4. **Outputs**: the count the instruction defines (none for instructions without an
//!    output kind; one for get_block, fuse, cache_read, cache_write, decompose_reduction,
//!    rfactor, sample_categorical, sample_compute_location; one per factor for split; `n`
//!    for sample_perfect_tile and sample_tile; any for get_loops, get_consumers,
//!    get_producers); the outputs are the next rvs in order of
//!    definition, of the instruction's output kind, named by an identifier that is new
//!    (or `_`, which may repeat).
//!
//! Every rv referenced is in range, defined by an earlier instruction and not a `_`
//! output. After the last instruction, every rv of [`Trace::rvs`] has been defined.

use std::collections::HashSet;

use thiserror::Error;

use super::inst::{Decision, InstKind, Instruction, Operand, RvInfo, RvKind, Signature, Trace};

/// Where in an instruction a problem lies, so that a reader can point at it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Site {
    /// The instruction as a whole.
    Inst,
    /// A positional input, then the path of indices down nested lists and products.
    Input {
        /// Index into [`Instruction::inputs`].
        index: usize,
        /// Indices down nested lists and products.
        path: Vec<usize>,
    },
    /// An attribute value, then the path of indices down nested lists and products.
    Attr {
        /// Index into [`Instruction::attrs`].
        index: usize,
        /// Indices down nested lists and products.
        path: Vec<usize>,
    },
    /// The decision.
    Decision,
    /// The outputs as a whole (their count).
    Outputs,
    /// One output, by its position among the instruction's outputs.
    Output(usize),
}

/// Why a trace is not well formed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ValidateError {
    /// An instruction is malformed.
    #[error("instruction {inst} ({name}): {msg}")]
    Inst {
        /// Index into [`Trace::insts`].
        inst: usize,
        /// The instruction's name.
        name: &'static str,
        /// The part of the instruction at fault.
        site: Site,
        /// What is wrong, naming the rvs involved.
        msg: String,
    },
    /// The rv table holds entries that no instruction defines.
    #[error("the trace declares {declared} rvs but its instructions define {defined}")]
    UndefinedRvs {
        /// `Trace::rvs.len()`.
        declared: usize,
        /// How many outputs the instructions define.
        defined: usize,
    },
}

/// Result of validation.
pub type Result<T, E = ValidateError> = std::result::Result<T, E>;

/// Checks every structural invariant listed in the module doc.
pub fn validate(trace: &Trace) -> Result<()> {
    let mut checker = Checker::new("output");
    for (index, inst) in trace.insts.iter().enumerate() {
        checker.check(&trace.rvs, index, inst)?;
    }
    if checker.next != trace.rvs.len() {
        return Err(ValidateError::UndefinedRvs {
            declared: trace.rvs.len(),
            defined: checker.next,
        });
    }
    Ok(())
}

type Problem = (Site, String);

/// Incremental validation, one instruction at a time, as the text parser needs it.
pub(crate) struct Checker {
    /// The number of rvs defined by the instructions checked so far.
    next: usize,
    names: HashSet<String>,
    /// What an output is called in messages ("output", or "name" in text).
    noun: &'static str,
}

impl Checker {
    /// A checker at the start of a trace; `noun` names an output in count messages.
    pub(crate) fn new(noun: &'static str) -> Checker {
        Checker {
            next: 0,
            names: HashSet::new(),
            noun,
        }
    }

    /// Checks instruction `index` against the rvs defined before it, then defines its
    /// outputs.
    pub(crate) fn check(&mut self, rvs: &[RvInfo], index: usize, inst: &Instruction) -> Result<()> {
        let sig = inst.kind.signature();
        self.check_inst(rvs, inst, &sig)
            .map_err(|(site, msg)| ValidateError::Inst {
                inst: index,
                name: sig.name,
                site,
                msg,
            })
    }

    fn check_inst(
        &mut self,
        rvs: &[RvInfo],
        inst: &Instruction,
        sig: &Signature,
    ) -> std::result::Result<(), Problem> {
        self.check_inputs(rvs, inst, sig)?;
        check_attr_names(inst, sig)?;
        for (index, (attr, value)) in inst.attrs.iter().enumerate() {
            let at = |(path, msg)| (Site::Attr { index, path }, msg);
            let mut path = Vec::new();
            self.check_value(rvs, sig.name, attr, value, &mut path)
                .map_err(at)?;
            check_attr_shape(rvs, sig.name, attr, value).map_err(at)?;
        }
        check_cross_attrs(inst).map_err(|msg| (Site::Inst, msg))?;
        check_decision(inst).map_err(|msg| (Site::Decision, msg))?;
        self.check_outputs(rvs, inst, sig)
    }

    fn rv<'r>(&self, rvs: &'r [RvInfo], r: u32) -> std::result::Result<&'r RvInfo, String> {
        let i = r as usize;
        let info = rvs
            .get(i)
            .ok_or_else(|| format!("rv {r} does not exist (the trace has {} rvs)", rvs.len()))?;
        if i >= self.next {
            return Err(format!(
                "rv {r} ('{}') is used before it is defined",
                info.name
            ));
        }
        if info.name == "_" {
            return Err(format!(
                "rv {r} is a discarded output ('_') and cannot be used"
            ));
        }
        Ok(info)
    }

    fn check_inputs(
        &self,
        rvs: &[RvInfo],
        inst: &Instruction,
        sig: &Signature,
    ) -> std::result::Result<(), Problem> {
        let name = sig.name;
        let roles: Vec<&str> = match sig.positional {
            Some(roles) => {
                if inst.inputs.len() != roles.len() {
                    let msg = format!(
                        "{name} takes {}, found {}",
                        plural(roles.len(), "input"),
                        inst.inputs.len()
                    );
                    return Err((Site::Inst, msg));
                }
                roles.to_vec()
            }
            None => {
                if inst.inputs.is_empty() {
                    return Err((Site::Inst, format!("{name} needs at least one loop")));
                }
                vec!["loop"; inst.inputs.len()]
            }
        };
        for (index, (op, role)) in inst.inputs.iter().zip(roles).enumerate() {
            if role == "locations" {
                self.check_locations(rvs, name, index, op)?;
                continue;
            }
            let (allowed, want): (&[RvKind], &str) = match role {
                "block" | "cache" => (&[RvKind::Block], "a block"),
                "loop" => (&[RvKind::Loop], "a loop"),
                "target" => (&[RvKind::Block, RvKind::Loop], "a block or a loop"),
                _ => (&[RvKind::Expr], "an expr"),
            };
            let site = || Site::Input {
                index,
                path: Vec::new(),
            };
            match op {
                Operand::Rv(r) => {
                    self.rv_of_kind(rvs, *r, allowed, want, name)
                        .map_err(|m| (site(), m))?;
                }
                other => {
                    let msg = format!("{name} expects {want}, found {}", describe(rvs, other));
                    return Err((site(), msg));
                }
            }
        }
        Ok(())
    }

    /// The `locations` input of `sample_compute_location`: a non-empty list of loop rvs.
    fn check_locations(
        &self,
        rvs: &[RvInfo],
        name: &str,
        index: usize,
        op: &Operand,
    ) -> std::result::Result<(), Problem> {
        let site = |path: Vec<usize>| Site::Input { index, path };
        let Operand::List(items) = op else {
            let msg = format!(
                "{name} expects a list of loops, found {}",
                describe(rvs, op)
            );
            return Err((site(Vec::new()), msg));
        };
        if items.is_empty() {
            return Err((site(Vec::new()), format!("{name} needs at least one loop")));
        }
        for (i, item) in items.iter().enumerate() {
            let Operand::Rv(r) = item else {
                let msg = format!("{name} expects a loop, found {}", describe(rvs, item));
                return Err((site(vec![i]), msg));
            };
            self.rv_of_kind(rvs, *r, &[RvKind::Loop], "a loop", name)
                .map_err(|m| (site(vec![i]), m))?;
        }
        Ok(())
    }

    /// Rv `r`, defined and usable, of one of the kinds `allowed` (`want` in words) as
    /// instruction `name` expects.
    fn rv_of_kind(
        &self,
        rvs: &[RvInfo],
        r: u32,
        allowed: &[RvKind],
        want: &str,
        name: &str,
    ) -> std::result::Result<(), String> {
        let info = self.rv(rvs, r)?;
        if allowed.contains(&info.kind) {
            return Ok(());
        }
        Err(format!(
            "'{}' is {}, {name} expects {want}",
            info.name,
            kind_article(info.kind)
        ))
    }

    /// Checks rv references, products and floats anywhere inside an attribute value.
    fn check_value(
        &self,
        rvs: &[RvInfo],
        name: &str,
        attr: &str,
        value: &Operand,
        path: &mut Vec<usize>,
    ) -> std::result::Result<(), (Vec<usize>, String)> {
        match value {
            Operand::Rv(r) => {
                let info = self.rv(rvs, *r).map_err(|m| (path.clone(), m))?;
                if info.kind != RvKind::Expr {
                    let msg = format!(
                        "'{}' is {}, {name} expects an expr in '{attr}'",
                        info.name,
                        kind_article(info.kind)
                    );
                    return Err((path.clone(), msg));
                }
            }
            Operand::Float(f) if !f.is_finite() => {
                return Err((
                    path.clone(),
                    format!("'{attr}' holds the non-finite float {f:?}"),
                ));
            }
            Operand::List(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(i);
                    self.check_value(rvs, name, attr, item, path)?;
                    path.pop();
                }
            }
            Operand::Product(factors) => {
                // One factor is read as written: traces recorded before products of one
                // factor were recorded as the factor itself hold such products.
                if factors.is_empty() {
                    return Err((
                        path.clone(),
                        "a product needs at least one factor".to_string(),
                    ));
                }
                for (i, f) in factors.iter().enumerate() {
                    path.push(i);
                    if !matches!(f, Operand::Int(_) | Operand::Rv(_)) {
                        let msg = format!(
                            "a product may only multiply integers and rvs, found {}",
                            describe(rvs, f)
                        );
                        return Err((path.clone(), msg));
                    }
                    self.check_value(rvs, name, attr, f, path)?;
                    path.pop();
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn check_outputs(
        &mut self,
        rvs: &[RvInfo],
        inst: &Instruction,
        sig: &Signature,
    ) -> std::result::Result<(), Problem> {
        let name = sig.name;
        let found = plural(inst.outputs.len(), self.noun);
        let expected = match (sig.output, inst.kind) {
            (None, _) => Some((0, format!("{name} defines nothing"))),
            (Some(kind), InstKind::Split) => {
                let n = match inst.attr("factors") {
                    Some(Operand::List(f)) => f.len(),
                    _ => 0,
                };
                Some((
                    n,
                    format!(
                        "split with {} defines {}",
                        plural(n, "factor"),
                        plural(n, kind_name(kind))
                    ),
                ))
            }
            (Some(kind), InstKind::SamplePerfectTile | InstKind::SampleTile) => {
                let n = match inst.attr("n") {
                    Some(Operand::Int(n)) => usize::try_from(*n).unwrap_or(0),
                    _ => 0,
                };
                Some((
                    n,
                    format!("{name} with n={n} defines {}", plural(n, kind_name(kind))),
                ))
            }
            (Some(_), InstKind::GetLoops | InstKind::GetConsumers | InstKind::GetProducers) => None,
            (Some(kind), _) => Some((1, format!("{name} defines one {}", kind_name(kind)))),
        };
        if let Some((n, what)) = expected {
            if inst.outputs.len() != n {
                return Err((Site::Outputs, format!("{what}, found {found}")));
            }
        }
        let kind = sig.output.unwrap_or(RvKind::Expr);
        for (k, &o) in inst.outputs.iter().enumerate() {
            let site = Site::Output(k);
            let want = self.next + k;
            let info = rvs.get(o as usize).ok_or_else(|| {
                (
                    site.clone(),
                    format!("rv {o} does not exist (the trace has {} rvs)", rvs.len()),
                )
            })?;
            if o as usize != want {
                let msg = format!("output {k} is rv {o}, expected rv {want} (rvs are numbered in order of definition)");
                return Err((site, msg));
            }
            if info.kind != kind {
                let msg = format!(
                    "rv {o} ('{}') is {}, but {name} defines {}",
                    info.name,
                    kind_article(info.kind),
                    kind_article(kind)
                );
                return Err((site, msg));
            }
            if info.name != "_" {
                if !is_identifier(&info.name) || info.name == "None" {
                    return Err((site, format!("'{}' is not a valid rv name", info.name)));
                }
                if self.names.contains(&info.name) {
                    return Err((site, format!("'{}' is already defined", info.name)));
                }
            }
        }
        for &o in &inst.outputs {
            if let Some(info) = rvs.get(o as usize).filter(|i| i.name != "_") {
                self.names.insert(info.name.clone());
            }
        }
        self.next += inst.outputs.len();
        Ok(())
    }
}

fn check_attr_names(inst: &Instruction, sig: &Signature) -> std::result::Result<(), Problem> {
    let name = sig.name;
    for (index, (attr, _)) in inst.attrs.iter().enumerate() {
        let site = Site::Attr {
            index,
            path: Vec::new(),
        };
        if !sig.attrs.contains(&attr.as_str()) {
            return Err((
                site,
                format!(
                    "unknown attribute '{attr}' for {name} ({})",
                    expected_attrs(inst.kind)
                ),
            ));
        }
        if inst.attrs[..index].iter().any(|(a, _)| a == attr) {
            return Err((site, format!("attribute '{attr}' is given twice")));
        }
        if sig.attrs.get(index) != Some(&attr.as_str()) {
            let order = sig.attrs.join(", ");
            return Err((
                site,
                format!("attribute '{attr}' is out of order (expected: {order})"),
            ));
        }
    }
    if let Some(missing) = sig.attrs.get(inst.attrs.len()) {
        return Err((
            Site::Inst,
            format!("{name} is missing attribute '{missing}'"),
        ));
    }
    Ok(())
}

/// The attributes an instruction accepts, for messages: `expected: a, b` or `it takes none`.
pub(crate) fn expected_attrs(kind: InstKind) -> String {
    let mut names: Vec<&str> = kind.signature().attrs.to_vec();
    if kind.is_sampling() {
        names.push("decision");
    }
    if names.is_empty() {
        "it takes none".to_string()
    } else {
        format!("expected: {}", names.join(", "))
    }
}

fn check_attr_shape(
    rvs: &[RvInfo],
    name: &str,
    attr: &str,
    value: &Operand,
) -> std::result::Result<(), (Vec<usize>, String)> {
    let bad = |want: &str| {
        Err((
            Vec::new(),
            format!(
                "'{attr}' of {name} must be {want}, found {}",
                describe(rvs, value)
            ),
        ))
    };
    match (attr, value) {
        ("value", _) => Ok(()),
        ("name" | "thread" | "key" | "scope" | "intrin", Operand::Str(_)) => Ok(()),
        ("name" | "thread" | "key" | "scope" | "intrin", _) => bad("a string"),
        ("n", Operand::Int(n)) if *n >= 1 => Ok(()),
        ("n", _) => bad("a positive integer"),
        ("factors", Operand::List(items)) if !items.is_empty() => check_items(
            rvs,
            attr,
            items,
            "None, an integer, an rv or a product",
            |o| {
                matches!(
                    o,
                    Operand::None | Operand::Int(_) | Operand::Rv(_) | Operand::Product(_)
                )
            },
        ),
        ("factors", _) => bad("a non-empty list"),
        ("padding", Operand::List(items)) if !items.is_empty() => {
            check_items(rvs, attr, items, "an integer, an rv or a product", |o| {
                matches!(o, Operand::Int(_) | Operand::Rv(_) | Operand::Product(_))
            })
        }
        ("padding", _) => bad("a non-empty list"),
        ("permutation", Operand::List(items)) if !items.is_empty() => check_items(
            rvs,
            attr,
            items,
            "an integer or a list of integers",
            |o| match o {
                Operand::Int(_) => true,
                Operand::List(g) => !g.is_empty() && g.iter().all(|x| matches!(x, Operand::Int(_))),
                _ => false,
            },
        ),
        ("permutation", _) => bad("a non-empty list of integers and lists of integers"),
        ("candidates", Operand::List(items)) if !items.is_empty() => {
            check_items(rvs, attr, items, "an integer", |o| {
                matches!(o, Operand::Int(_))
            })
        }
        ("candidates", _) => bad("a non-empty list of integers"),
        ("probs", Operand::List(items)) => check_items(rvs, attr, items, "a number", |o| {
            matches!(o, Operand::Int(_) | Operand::Float(_))
        }),
        ("probs", _) => bad("a list of numbers"),
        ("factor", Operand::Int(_) | Operand::Rv(_) | Operand::Product(_)) => Ok(()),
        ("factor", _) => bad("an integer, an rv or a product"),
        ("max_waste", Operand::Float(w)) if (0.0..1.0).contains(w) => Ok(()),
        ("max_waste", _) => bad("a number in [0, 1)"),
        (_, Operand::Int(_)) => Ok(()),
        _ => bad("an integer"),
    }
}

fn check_items(
    rvs: &[RvInfo],
    attr: &str,
    items: &[Operand],
    want: &str,
    ok: impl Fn(&Operand) -> bool,
) -> std::result::Result<(), (Vec<usize>, String)> {
    match items.iter().position(|o| !ok(o)) {
        Some(i) => Err((
            vec![i],
            format!(
                "expected {want} in '{attr}', found {}",
                describe(rvs, &items[i])
            ),
        )),
        None => Ok(()),
    }
}

/// Checks that relate two attributes of one instruction.
fn check_cross_attrs(inst: &Instruction) -> std::result::Result<(), String> {
    if let (Some(Operand::List(c)), Some(Operand::List(p))) =
        (inst.attr("candidates"), inst.attr("probs"))
    {
        if c.len() != p.len() {
            return Err(format!("{} candidates but {} probs", c.len(), p.len()));
        }
    }
    Ok(())
}

fn check_decision(inst: &Instruction) -> std::result::Result<(), String> {
    let name = inst.kind.name();
    match (inst.kind, &inst.decision) {
        (_, None) => Ok(()),
        (InstKind::SamplePerfectTile | InstKind::SampleTile, Some(Decision::Tile(sizes))) => {
            let n = match inst.attr("n") {
                Some(Operand::Int(n)) => usize::try_from(*n).unwrap_or(0),
                _ => 0,
            };
            if sizes.len() != n {
                return Err(format!(
                    "the decision has {}, but n={n}",
                    plural(sizes.len(), "tile size")
                ));
            }
            if let Some(s) = sizes.iter().find(|s| **s < 1) {
                return Err(format!("tile sizes must be positive, found {s}"));
            }
            Ok(())
        }
        (InstKind::SamplePerfectTile | InstKind::SampleTile, Some(_)) => {
            Err(format!("the decision of {name} is a list of tile sizes"))
        }
        (InstKind::SampleCategorical | InstKind::SampleComputeLocation, Some(decision)) => {
            let (noun, n) = inst.choices().unwrap_or(("choice", 0));
            match decision {
                Decision::Categorical(i) if *i >= n => Err(format!(
                    "decision {i} is out of range for {}",
                    plural(n, noun)
                )),
                Decision::Categorical(_) => Ok(()),
                _ => Err(format!("the decision of {name} is a {noun} index")),
            }
        }
        (_, Some(_)) => Err(format!(
            "{name} is not a sampling instruction and takes no decision"
        )),
    }
}

/// `n thing` or `n things`.
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn kind_name(kind: RvKind) -> &'static str {
    match kind {
        RvKind::Block => "block",
        RvKind::Loop => "loop",
        RvKind::Expr => "expr",
    }
}

fn kind_article(kind: RvKind) -> &'static str {
    match kind {
        RvKind::Block => "a block",
        RvKind::Loop => "a loop",
        RvKind::Expr => "an expr",
    }
}

/// An operand in words, for messages.
fn describe(rvs: &[RvInfo], op: &Operand) -> String {
    match op {
        Operand::Rv(r) => match rvs.get(*r as usize) {
            Some(info) => format!("'{}' ({})", info.name, kind_article(info.kind)),
            None => format!("rv {r}"),
        },
        Operand::Int(_) => "an integer".to_string(),
        Operand::Float(_) => "a float".to_string(),
        Operand::Str(_) => "a string".to_string(),
        Operand::None => "None".to_string(),
        Operand::List(_) => "a list".to_string(),
        Operand::Product(_) => "a product".to_string(),
    }
}

/// Whether `s` is `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

//! The text form of a trace: what a person reads and edits (`.sched` files) and what
//! `tessel best` prints. [`parse`] and [`print`] round-trip: `parse(&print(t)) == t`
//! for every trace that passes [`validate`](super::validate::validate).
//!
//! Grammar (one instruction per line; blanks and tabs separate tokens; `#` starts a
//! comment outside strings; blank and comment-only lines are ignored):
//!
//! ```text
//! line     := [ outputs '=' ] NAME '(' [ arg { ',' arg } [ ',' ] ] ')' [ comment ]
//! outputs  := IDENT { ',' IDENT }          -- `_` discards and may repeat
//! arg      := IDENT '=' value              -- keyword: an attribute or `decision`
//!           | value                        -- positional: inputs, then attributes
//! value    := term { '*' term }            -- two or more terms: a product of ints and rvs
//! term     := 'None' | INT | FLOAT | STRING | IDENT | '[' [ value { ',' value } [ ',' ] ] ']'
//! INT      := [ '+' | '-' ] DIGIT+
//! FLOAT    := [ '+' | '-' ] DIGIT+ ( '.' DIGIT* [ EXP ] | EXP ),  EXP := ( 'e' | 'E' ) [ '+' | '-' ] DIGIT+
//! STRING   := '"' { CHAR | '\"' | '\\' | '\n' | '\t' | '\r' } '"'
//! IDENT    := [A-Za-z_] [A-Za-z0-9_]*
//! ```
//!
//! Positional arguments bind to [`Signature::positional`](super::inst::Signature) in
//! order (all of them for fuse and reorder), then to the attributes in signature order
//! (`split(i, [None, 8])`). Keyword attributes may come in any order and are stored in
//! signature order. `decision=` is accepted on sampling instructions only: a list of
//! integers for `sample_perfect_tile`, an integer for `sample_categorical`. An `IDENT`
//! value refers to an rv defined on an earlier line. Lists nest at most
//! [`MAX_NESTING`] deep. After parsing a line, the instruction goes through the same
//! checks as [`validate`](super::validate::validate), with the error pointing at the
//! offending token.
//!
//! Printing writes `OUT, OUT = name(input, input, key=value, ..., decision=...)` (the
//! lone attribute of an instruction without inputs positionally: `get_block("C")`), floats
//! with `{:?}` (shortest text that reads back to the same bits, always with a `.` or an
//! exponent), strings with the escapes above, one line per instruction.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::str::FromStr;

use thiserror::Error;

use super::inst::{Decision, InstKind, Instruction, Operand, RvInfo, RvKind, Trace};
use super::validate::{expected_attrs, Checker, Site, ValidateError};

/// How deep lists may nest in the text form.
pub const MAX_NESTING: usize = 32;

/// A syntax or structure error in trace text, at a 1-based line and column (in chars).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{line}:{col}: {msg}")]
pub struct TraceParseError {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub col: usize,
    /// What was found and what was expected.
    pub msg: String,
}

/// Result of parsing trace text.
pub type Result<T, E = TraceParseError> = std::result::Result<T, E>;

/// Prints a trace in its text form, one instruction per line.
pub fn print(trace: &Trace) -> String {
    let mut out = String::new();
    for inst in &trace.insts {
        print_inst(&mut out, trace, inst);
        out.push('\n');
    }
    out
}

/// Parses the text form of a trace.
pub fn parse(text: &str) -> Result<Trace> {
    let mut parser = Parser {
        trace: Trace::default(),
        names: HashMap::new(),
        checker: Checker::new("name"),
    };
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        parser.line(line, i + 1)?;
    }
    Ok(parser.trace)
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print(self))
    }
}

impl FromStr for Trace {
    type Err = TraceParseError;

    fn from_str(s: &str) -> Result<Trace> {
        parse(s)
    }
}

fn print_inst(out: &mut String, trace: &Trace, inst: &Instruction) {
    if !inst.outputs.is_empty() {
        for (i, &o) in inst.outputs.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            print_rv(out, trace, o);
        }
        out.push_str(" = ");
    }
    out.push_str(inst.kind.name());
    out.push('(');
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !first {
            out.push_str(", ");
        }
        first = false;
    };
    for input in &inst.inputs {
        sep(out);
        print_operand(out, trace, input);
    }
    // A lone attribute of an instruction without inputs reads best positionally:
    // `get_block("C")`.
    let bare = inst.inputs.is_empty() && inst.attrs.len() == 1;
    for (key, value) in &inst.attrs {
        sep(out);
        if !bare {
            out.push_str(key);
            out.push('=');
        }
        print_operand(out, trace, value);
    }
    if let Some(decision) = &inst.decision {
        sep(out);
        out.push_str("decision=");
        match decision {
            Decision::Tile(sizes) => {
                out.push('[');
                for (i, s) in sizes.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    let _ = write!(out, "{s}");
                }
                out.push(']');
            }
            Decision::Categorical(i) => {
                let _ = write!(out, "{i}");
            }
        }
    }
    out.push(')');
}

fn print_rv(out: &mut String, trace: &Trace, r: u32) {
    match trace.rvs.get(r as usize) {
        Some(info) => out.push_str(&info.name),
        None => {
            let _ = write!(out, "<undefined rv {r}>");
        }
    }
}

fn print_operand(out: &mut String, trace: &Trace, op: &Operand) {
    let join = |out: &mut String, items: &[Operand], sep: &str| {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(sep);
            }
            print_operand(out, trace, item);
        }
    };
    match op {
        Operand::Rv(r) => print_rv(out, trace, *r),
        Operand::Int(v) => {
            let _ = write!(out, "{v}");
        }
        Operand::Float(v) => {
            let _ = write!(out, "{v:?}");
        }
        Operand::Str(s) => print_str(out, s),
        Operand::None => out.push_str("None"),
        Operand::List(items) => {
            out.push('[');
            join(out, items, ", ");
            out.push(']');
        }
        Operand::Product(factors) => join(out, factors, " * "),
    }
}

fn print_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A parsed value with the column it starts at, before names are resolved.
struct Node {
    /// 0-based char index in the line.
    col: usize,
    val: Val,
}

enum Val {
    Name(String),
    None,
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Node>),
    Product(Vec<Node>),
}

impl Node {
    /// The column of the node at `path` (down lists and products), or the closest parent.
    fn col_at(&self, path: &[usize]) -> usize {
        match (&self.val, path.split_first()) {
            (Val::List(items) | Val::Product(items), Some((&i, rest))) => {
                items.get(i).map_or(self.col, |n| n.col_at(rest))
            }
            _ => self.col,
        }
    }
}

/// A cursor over the characters of one line.
struct Cursor {
    chars: Vec<char>,
    pos: usize,
    line: usize,
}

impl Cursor {
    fn err(&self, col: usize, msg: impl Into<String>) -> TraceParseError {
        TraceParseError {
            line: self.line,
            col: col + 1,
            msg: msg.into(),
        }
    }

    fn err_here(&self, msg: impl Into<String>) -> TraceParseError {
        self.err(self.pos, msg)
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.pos += 1;
        }
    }

    /// Whether only a comment or nothing is left.
    fn at_end(&self) -> bool {
        matches!(self.peek(), None | Some('#'))
    }

    /// The current character for messages: `'x'` or `end of line`.
    fn found(&self) -> String {
        match self.peek() {
            None | Some('#') => "end of line".to_string(),
            Some(c) => format!("'{c}'"),
        }
    }

    fn ident(&mut self) -> Option<(usize, String)> {
        let start = self.pos;
        if !matches!(self.peek(), Some(c) if c.is_ascii_alphabetic() || c == '_') {
            return None;
        }
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == '_') {
            self.pos += 1;
        }
        Some((start, self.chars[start..self.pos].iter().collect()))
    }

    /// `IDENT '='` (not `==`), consumed; otherwise nothing is consumed.
    fn keyword(&mut self) -> Option<(usize, String)> {
        let save = self.pos;
        if let Some(key) = self.ident() {
            self.skip_ws();
            if self.peek() == Some('=') && self.chars.get(self.pos + 1) != Some(&'=') {
                self.pos += 1;
                return Some(key);
            }
        }
        self.pos = save;
        None
    }

    fn value(&mut self, depth: usize) -> Result<Node> {
        let first = self.term(depth)?;
        self.skip_ws();
        if self.peek() != Some('*') {
            return Ok(first);
        }
        let col = first.col;
        let mut factors = vec![first];
        while self.peek() == Some('*') {
            self.pos += 1;
            factors.push(self.term(depth)?);
            self.skip_ws();
        }
        if let Some(bad) = factors
            .iter()
            .find(|f| !matches!(f.val, Val::Int(_) | Val::Name(_)))
        {
            return Err(self.err(bad.col, "a product may only multiply integers and rvs"));
        }
        Ok(Node {
            col,
            val: Val::Product(factors),
        })
    }

    fn term(&mut self, depth: usize) -> Result<Node> {
        self.skip_ws();
        let col = self.pos;
        let val = match self.peek() {
            Some('[') => self.list(depth)?,
            Some('"') => self.string()?,
            Some(c) if c.is_ascii_digit() || c == '-' || c == '+' => self.number()?,
            Some(c) if c.is_ascii_alphabetic() || c == '_' => match self.ident() {
                Some((_, name)) if name == "None" => Val::None,
                Some((_, name)) => Val::Name(name),
                None => return Err(self.err_here("expected a name")),
            },
            _ => {
                let msg = format!(
                    "expected a value (a name, None, a number, a string or a list), found {}",
                    self.found()
                );
                return Err(self.err_here(msg));
            }
        };
        Ok(Node { col, val })
    }

    fn list(&mut self, depth: usize) -> Result<Val> {
        if depth >= MAX_NESTING {
            return Err(self.err_here(format!("lists nest more than {MAX_NESTING} deep")));
        }
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(']') {
                self.pos += 1;
                return Ok(Val::List(items));
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(']') => {
                    self.pos += 1;
                    return Ok(Val::List(items));
                }
                _ => {
                    return Err(self.err_here(format!(
                        "expected ',' or ']' in a list, found {}",
                        self.found()
                    )))
                }
            }
        }
    }

    fn string(&mut self) -> Result<Val> {
        let start = self.pos;
        self.pos += 1;
        let mut s = String::new();
        loop {
            match self.peek() {
                None => return Err(self.err(start, "unterminated string")),
                Some('"') => {
                    self.pos += 1;
                    return Ok(Val::Str(s));
                }
                Some('\\') => {
                    let c = match self.chars.get(self.pos + 1) {
                        Some('"') => '"',
                        Some('\\') => '\\',
                        Some('n') => '\n',
                        Some('t') => '\t',
                        Some('r') => '\r',
                        Some(c) => {
                            let msg = format!(
                                "unknown escape '\\{c}' (expected \\\", \\\\, \\n, \\t or \\r)"
                            );
                            return Err(self.err_here(msg));
                        }
                        None => return Err(self.err(start, "unterminated string")),
                    };
                    s.push(c);
                    self.pos += 2;
                }
                Some(c) => {
                    s.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Val> {
        let start = self.pos;
        if matches!(self.peek(), Some('+' | '-')) {
            self.pos += 1;
        }
        if self.digits() == 0 {
            return Err(self.err_here(format!("expected a digit, found {}", self.found())));
        }
        let mut float = false;
        if self.peek() == Some('.') {
            float = true;
            self.pos += 1;
            self.digits();
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            float = true;
            self.pos += 1;
            if matches!(self.peek(), Some('+' | '-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.err_here(format!(
                    "expected a digit in the exponent, found {}",
                    self.found()
                )));
            }
        }
        if matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            return Err(self.err(start, "malformed number"));
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        if float {
            match text.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(Val::Float(f)),
                _ => Err(self.err(start, format!("float {text} is out of range"))),
            }
        } else {
            text.parse::<i64>()
                .map(Val::Int)
                .map_err(|_| self.err(start, format!("integer {text} is out of range")))
        }
    }
}

/// The state of a parse: the trace so far and the names in scope.
struct Parser {
    trace: Trace,
    /// Name -> (rv index, line it was defined on).
    names: HashMap<String, (u32, usize)>,
    checker: Checker,
}

/// One call as written: where its pieces are, before binding to the signature.
struct Call {
    outputs: Vec<(usize, String)>,
    name_col: usize,
    kind: InstKind,
    positional: Vec<Node>,
    keywords: Vec<(usize, String, Node)>,
    close_col: usize,
}

impl Parser {
    fn line(&mut self, text: &str, line: usize) -> Result<()> {
        let mut c = Cursor {
            chars: text.chars().collect(),
            pos: 0,
            line,
        };
        c.skip_ws();
        if c.at_end() {
            return Ok(());
        }
        let call = self.call(&mut c)?;
        self.bind(&c, call)
    }

    /// Reads `[outputs =] name(args)` and checks the output names against the scope.
    fn call(&self, c: &mut Cursor) -> Result<Call> {
        let first = c.ident().ok_or_else(|| {
            c.err_here(format!(
                "expected an instruction or output names, found {}",
                c.found()
            ))
        })?;
        c.skip_ws();
        let mut outputs = Vec::new();
        let (name_col, name) = if c.peek() == Some('(') {
            first
        } else {
            outputs.push(first);
            loop {
                c.skip_ws();
                match c.peek() {
                    Some(',') => {
                        c.pos += 1;
                        c.skip_ws();
                        let next = c.ident().ok_or_else(|| {
                            c.err_here(format!("expected an output name, found {}", c.found()))
                        })?;
                        outputs.push(next);
                    }
                    Some('=') => {
                        c.pos += 1;
                        break;
                    }
                    _ if outputs.len() == 1 => {
                        return Err(
                            c.err_here(format!("expected '(', ',' or '=', found {}", c.found()))
                        );
                    }
                    _ => {
                        return Err(c.err_here(format!("expected ',' or '=', found {}", c.found())))
                    }
                }
            }
            c.skip_ws();
            c.ident().ok_or_else(|| {
                c.err_here(format!("expected an instruction name, found {}", c.found()))
            })?
        };
        for (i, (col, out)) in outputs.iter().enumerate() {
            if out == "_" {
                continue;
            }
            if out == "None" {
                return Err(c.err(*col, "'None' cannot be used as a name"));
            }
            if let Some((_, defined)) = self.names.get(out) {
                return Err(c.err(
                    *col,
                    format!("'{out}' is already defined on line {defined}"),
                ));
            }
            if outputs[..i].iter().any(|(_, o)| o == out) {
                return Err(c.err(*col, format!("'{out}' appears twice before '='")));
            }
        }
        let kind = InstKind::from_name(&name)
            .ok_or_else(|| c.err(name_col, format!("unknown instruction '{name}'")))?;
        c.skip_ws();
        if c.peek() != Some('(') {
            return Err(c.err_here(format!("expected '(' after '{name}', found {}", c.found())));
        }
        c.pos += 1;
        let mut positional = Vec::new();
        let mut keywords = Vec::new();
        loop {
            c.skip_ws();
            if c.peek() == Some(')') {
                break;
            }
            if let Some((col, key)) = c.keyword() {
                keywords.push((col, key, c.value(0)?));
            } else {
                let v = c.value(0)?;
                if !keywords.is_empty() {
                    return Err(c.err(v.col, "positional argument after keyword arguments"));
                }
                positional.push(v);
            }
            c.skip_ws();
            match c.peek() {
                Some(',') => c.pos += 1,
                Some(')') => break,
                _ => {
                    return Err(c.err_here(format!(
                        "expected ')' or ',' after an argument, found {}",
                        c.found()
                    )))
                }
            }
        }
        let close_col = c.pos;
        c.pos += 1;
        c.skip_ws();
        if !c.at_end() {
            return Err(c.err_here(format!(
                "expected end of line after ')', found {}",
                c.found()
            )));
        }
        Ok(Call {
            outputs,
            name_col,
            kind,
            positional,
            keywords,
            close_col,
        })
    }

    /// Binds the arguments to the signature, resolves names, checks and appends.
    fn bind(&mut self, c: &Cursor, call: Call) -> Result<()> {
        let kind = call.kind;
        let sig = kind.signature();
        let name = sig.name;
        let mut positional = call.positional.into_iter();
        let input_nodes: Vec<Node> = match sig.positional {
            None => positional.by_ref().collect(),
            Some(roles) => {
                let nodes: Vec<Node> = positional.by_ref().take(roles.len()).collect();
                if let Some(missing) = roles.get(nodes.len()) {
                    return Err(c.err(
                        call.close_col,
                        format!("{name} is missing argument '{missing}'"),
                    ));
                }
                nodes
            }
        };
        let mut attr_nodes: Vec<Option<(usize, Node)>> = sig.attrs.iter().map(|_| None).collect();
        for (slot, node) in attr_nodes.iter_mut().zip(positional.by_ref()) {
            *slot = Some((node.col, node));
        }
        if let Some(extra) = positional.next() {
            let mut all: Vec<&str> = sig.positional.unwrap_or(&[]).to_vec();
            all.extend(sig.attrs);
            let msg = format!(
                "{name} takes at most {} positional arguments ({})",
                all.len(),
                all.join(", ")
            );
            return Err(c.err(extra.col, msg));
        }
        let mut decision_node = None;
        for (col, key, node) in call.keywords {
            let slot = match sig.attrs.iter().position(|a| *a == key) {
                Some(k) => &mut attr_nodes[k],
                None if key == "decision" && kind.is_sampling() => &mut decision_node,
                None => {
                    return Err(c.err(
                        col,
                        format!(
                            "unknown attribute '{key}' for {name} ({})",
                            expected_attrs(kind)
                        ),
                    ));
                }
            };
            if slot.is_some() {
                return Err(c.err(col, format!("attribute '{key}' is given twice")));
            }
            *slot = Some((col, node));
        }
        let mut attrs = Vec::with_capacity(sig.attrs.len());
        let mut attr_cols = Vec::with_capacity(sig.attrs.len());
        for (attr, slot) in sig.attrs.iter().zip(attr_nodes) {
            let (_, node) = slot.ok_or_else(|| {
                c.err(
                    call.close_col,
                    format!("{name} is missing attribute '{attr}'"),
                )
            })?;
            attrs.push((attr.to_string(), self.resolve(c, &node)?));
            attr_cols.push(node);
        }
        let inputs = input_nodes
            .iter()
            .map(|n| self.resolve(c, n))
            .collect::<Result<Vec<_>>>()?;
        let decision = match &decision_node {
            Some((_, node)) => Some(decision(c, kind, node, self.resolve(c, node)?)?),
            None => None,
        };
        let first_output = self.trace.rvs.len();
        let outputs = (first_output..first_output + call.outputs.len())
            .map(|i| i as u32)
            .collect();
        for (_, out) in &call.outputs {
            self.trace.rvs.push(RvInfo {
                kind: sig.output.unwrap_or(RvKind::Expr),
                name: out.clone(),
            });
        }
        let inst = Instruction {
            kind,
            inputs,
            attrs,
            outputs,
            decision,
        };
        let index = self.trace.insts.len();
        if let Err(ValidateError::Inst { site, msg, .. }) =
            self.checker.check(&self.trace.rvs, index, &inst)
        {
            let col = match site {
                Site::Inst => call.name_col,
                Site::Input { index, path } => input_nodes
                    .get(index)
                    .map_or(call.name_col, |n| n.col_at(&path)),
                Site::Attr { index, path } => attr_cols
                    .get(index)
                    .map_or(call.name_col, |n| n.col_at(&path)),
                Site::Decision => decision_node.as_ref().map_or(call.name_col, |(_, n)| n.col),
                Site::Outputs => call.outputs.first().map_or(call.name_col, |(col, _)| *col),
                Site::Output(k) => call.outputs.get(k).map_or(call.name_col, |(col, _)| *col),
            };
            return Err(c.err(col, msg));
        }
        for (i, (_, out)) in call.outputs.iter().enumerate() {
            if out != "_" {
                self.names
                    .insert(out.clone(), ((first_output + i) as u32, c.line));
            }
        }
        self.trace.insts.push(inst);
        Ok(())
    }

    fn resolve(&self, c: &Cursor, node: &Node) -> Result<Operand> {
        let all = |items: &[Node]| {
            items
                .iter()
                .map(|n| self.resolve(c, n))
                .collect::<Result<Vec<_>>>()
        };
        Ok(match &node.val {
            Val::Name(name) if name == "_" => {
                return Err(c.err(node.col, "'_' discards a value and cannot be used"));
            }
            Val::Name(name) => match self.names.get(name) {
                Some((rv, _)) => Operand::Rv(*rv),
                None => return Err(c.err(node.col, format!("'{name}' is not defined"))),
            },
            Val::None => Operand::None,
            Val::Int(v) => Operand::Int(*v),
            Val::Float(v) => Operand::Float(*v),
            Val::Str(s) => Operand::Str(s.clone()),
            Val::List(items) => Operand::List(all(items)?),
            Val::Product(items) => Operand::Product(all(items)?),
        })
    }
}

/// Reads the `decision=` value of a sampling instruction.
fn decision(c: &Cursor, kind: InstKind, node: &Node, value: Operand) -> Result<Decision> {
    let name = kind.name();
    match (kind, value) {
        (k, Operand::List(items)) if k.samples_tiles() => items
            .iter()
            .map(|o| match o {
                Operand::Int(v) => Some(*v),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(Decision::Tile)
            .ok_or_else(|| {
                c.err(
                    node.col,
                    format!("the decision of {name} is a list of integers"),
                )
            }),
        (k, _) if k.samples_tiles() => Err(c.err(
            node.col,
            format!("the decision of {name} is a list of integers"),
        )),
        (_, Operand::Int(v)) if v >= 0 => usize::try_from(v)
            .map(Decision::Categorical)
            .map_err(|_| c.err(node.col, format!("decision {v} is out of range"))),
        _ => Err(c.err(
            node.col,
            format!("the decision of {name} is a non-negative integer"),
        )),
    }
}

#[cfg(test)]
#[path = "text_tests.rs"]
pub(crate) mod tests;

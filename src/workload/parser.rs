//! The syntax of the workload language: lines to statements with positions.
//!
//! Grammar (one statement per line, `#` starts a comment):
//!
//! ```text
//! stmt    := 'workload' NAME
//!          | 'input' NAME ':' DTYPE '[' INT (',' INT)* ']'
//!          | NAME '[' axis (',' axis)* ']' (':' DTYPE)? '=' rhs
//!          | NAME (':' DTYPE)? '=' 'concat' '(' NAME (',' NAME)* ',' 'axis' '=' INT ')'
//! axis    := NAME (':' INT)?
//! rhs     := ('sum' | 'max_reduce') '(' expr (',' axis)+ ')' | expr
//! expr    := and ('||' and)*      and := cmp ('&&' cmp)*
//! cmp     := add (('<'|'<='|'>'|'>='|'=='|'!=') add)*
//! add     := mul (('+'|'-') mul)*  mul := unary (('*'|'/'|'//'|'%') unary)*
//! unary   := ('-'|'!') unary | INT | FLOAT | '(' expr ')' | NAME
//!          | NAME '[' expr (',' expr)* ']' | FUNC '(' expr (',' expr)* ')'
//! ```
//!
//! The first non-blank line may be the canonical header `tessel-workload v1`.

use super::lexer::{lex_line, Tok};
use super::{Pos, Result, WorkloadError, FORMAT_VERSION};
use crate::ir::{BinOp, DType, UnOp};

/// Deepest expression nesting accepted; keeps every recursive pass over the tree safe.
const MAX_DEPTH: usize = 200;

/// A parsed expression with the position of its head token (operator, name or literal).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PExpr {
    pub pos: Pos,
    pub kind: PKind,
}

/// Parsed expression forms; names are not resolved yet.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PKind {
    Int(i64),
    Float(f64),
    Name(String),
    Access(String, Vec<PExpr>),
    Bin(BinOp, Box<PExpr>, Box<PExpr>),
    Un(UnOp, Box<PExpr>),
    Select(Box<PExpr>, Box<PExpr>, Box<PExpr>),
    Cast(DType, Box<PExpr>),
    Relu(Box<PExpr>),
}

/// An axis on a left-hand side or in a reduction, with its declared extent.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AxisDecl {
    pub name: String,
    pub pos: Pos,
    pub extent: Option<(i64, Pos)>,
}

/// The right-hand side of a compute stage.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Rhs {
    Value(PExpr),
    Reduce {
        op: super::ReduceOp,
        pos: Pos,
        value: PExpr,
        axes: Vec<AxisDecl>,
    },
}

/// One statement of the language.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Stmt {
    Workload {
        name: String,
        pos: Pos,
    },
    Input {
        name: String,
        pos: Pos,
        dtype: DType,
        shape: Vec<(i64, Pos)>,
    },
    Compute {
        name: String,
        pos: Pos,
        axes: Vec<AxisDecl>,
        dtype: Option<(DType, Pos)>,
        rhs: Rhs,
    },
    Concat {
        name: String,
        pos: Pos,
        dtype: Option<(DType, Pos)>,
        inputs: Vec<(String, Pos)>,
        axis: (i64, Pos),
    },
}

/// Parses every line of `src` into statements.
pub(crate) fn parse_statements(src: &str) -> Result<Vec<Stmt>> {
    let mut out = Vec::new();
    let mut seen_any = false;
    for (n, line) in src.lines().enumerate() {
        let line_no = u32::try_from(n + 1).unwrap_or(u32::MAX);
        let code = line.split('#').next().unwrap_or("").trim();
        if code.is_empty() {
            continue;
        }
        if !seen_any && code.starts_with("tessel-workload") {
            seen_any = true;
            if code != format!("tessel-workload v{FORMAT_VERSION}") {
                let col =
                    u32::try_from(line.len() - line.trim_start().len() + 1).unwrap_or(u32::MAX);
                return Err(WorkloadError::at(
                    Pos { line: line_no, col },
                    format!("unsupported format header '{code}', expected 'tessel-workload v{FORMAT_VERSION}'"),
                ));
            }
            continue;
        }
        seen_any = true;
        let toks = lex_line(line, line_no)?;
        let mut p = Parser {
            toks,
            i: 0,
            depth: 0,
        };
        out.push(p.statement()?);
    }
    Ok(out)
}

/// Parses a dtype name.
pub(crate) fn dtype_of(name: &str) -> Option<DType> {
    match name {
        "f32" => Some(DType::F32),
        "f16" => Some(DType::F16),
        "bf16" => Some(DType::BF16),
        "i32" => Some(DType::I32),
        _ => None,
    }
}

struct Parser {
    toks: Vec<(Tok, Pos)>,
    i: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.toks.get(self.i).map_or(&Tok::End, |t| &t.0)
    }
    fn peek_at(&self, k: usize) -> &Tok {
        self.toks.get(self.i + k).map_or(&Tok::End, |t| &t.0)
    }
    fn pos(&self) -> Pos {
        self.toks
            .get(self.i)
            .or(self.toks.last())
            .map_or(Pos { line: 1, col: 1 }, |t| t.1)
    }
    fn is(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }
    fn eat(&mut self, p: &str) -> bool {
        let hit = self.is(p);
        if hit {
            self.i += 1;
        }
        hit
    }
    fn err<T>(&self, expected: &str) -> Result<T> {
        Err(WorkloadError::at(
            self.pos(),
            format!("expected {expected}, found {}", self.peek()),
        ))
    }
    fn expect(&mut self, p: &str, expected: &str) -> Result<Pos> {
        let pos = self.pos();
        if self.eat(p) {
            Ok(pos)
        } else {
            self.err(expected)
        }
    }
    fn ident(&mut self, expected: &str) -> Result<(String, Pos)> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                let pos = self.pos();
                self.i += 1;
                Ok((s, pos))
            }
            _ => self.err(expected),
        }
    }
    fn int(&mut self, expected: &str) -> Result<(i64, Pos)> {
        match self.peek().clone() {
            Tok::Int(v) => {
                let pos = self.pos();
                self.i += 1;
                Ok((v, pos))
            }
            _ => self.err(expected),
        }
    }
    fn dtype(&mut self) -> Result<(DType, Pos)> {
        let pos = self.pos();
        match self.peek() {
            Tok::Ident(s) => match dtype_of(s) {
                Some(d) => {
                    self.i += 1;
                    Ok((d, pos))
                }
                None => self.err("a dtype (f32, f16, bf16 or i32)"),
            },
            _ => self.err("a dtype (f32, f16, bf16 or i32)"),
        }
    }
    fn end(&mut self, what: &str) -> Result<()> {
        match self.peek() {
            Tok::End => Ok(()),
            _ => self.err(&format!("end of line after {what}")),
        }
    }
    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(WorkloadError::at(
                self.pos(),
                format!("expression nested too deeply (more than {MAX_DEPTH} levels)"),
            ));
        }
        Ok(())
    }

    fn statement(&mut self) -> Result<Stmt> {
        let (name, pos) = self.ident("'input', 'workload' or a stage name")?;
        if matches!(self.peek(), Tok::Ident(_)) && (name == "input" || name == "workload") {
            let (tname, tpos) = self.ident("a name")?;
            if name == "workload" {
                self.end("the workload name")?;
                return Ok(Stmt::Workload {
                    name: tname,
                    pos: tpos,
                });
            }
            self.expect(":", &format!("':' after input name '{tname}'"))?;
            let (dtype, _) = self.dtype()?;
            self.expect("[", "'[' after the input dtype")?;
            let mut shape = vec![self.int("an integer extent")?];
            while self.eat(",") {
                shape.push(self.int("an integer extent")?);
            }
            self.expect("]", "']' or ',' after extent")?;
            self.end("the input declaration")?;
            return Ok(Stmt::Input {
                name: tname,
                pos: tpos,
                dtype,
                shape,
            });
        }
        let axes = if self.eat("[") {
            let mut axes = vec![self.axis_decl("an axis name")?];
            while self.eat(",") {
                axes.push(self.axis_decl("an axis name")?);
            }
            self.expect("]", "']' or ',' after axis")?;
            Some(axes)
        } else {
            None
        };
        let dtype = if self.eat(":") {
            Some(self.dtype()?)
        } else {
            None
        };
        self.expect(
            "=",
            if axes.is_some() {
                "'=' after the stage's axes"
            } else {
                "'[' or '=' after the stage name"
            },
        )?;
        let is_call = |p: &Parser, f: &str| {
            matches!(p.peek(), Tok::Ident(s) if s == f) && p.peek_at(1) == &Tok::Punct("(")
        };
        if is_call(self, "concat") {
            if axes.is_some() {
                return Err(WorkloadError::at(
                    pos,
                    format!("concat takes no axes: write '{name} = concat(...)'"),
                ));
            }
            return self.concat(name, pos, dtype);
        }
        let Some(axes) = axes else {
            return Err(WorkloadError::at(
                pos,
                format!("stage '{name}' needs its axes, e.g. '{name}[i, j] = ...' (only concat omits them)"),
            ));
        };
        let reduce = [
            ("sum", super::ReduceOp::Sum),
            ("max_reduce", super::ReduceOp::Max),
        ]
        .into_iter()
        .find(|(f, _)| is_call(self, f));
        let rhs = match reduce {
            Some((_, op)) => {
                let rpos = self.pos();
                self.i += 2;
                let value = self.expr()?;
                self.expect(",", "',' and a reduction axis after the reduced expression")?;
                let mut raxes = vec![self.axis_decl("a reduction axis name")?];
                while self.eat(",") {
                    raxes.push(self.axis_decl("a reduction axis name")?);
                }
                self.expect(")", "')' or ',' after reduction axis")?;
                if !matches!(self.peek(), Tok::End) {
                    return Err(WorkloadError::at(
                        self.pos(),
                        format!(
                            "a reduction must be the whole right-hand side of a stage, found {} after it",
                            self.peek()
                        ),
                    ));
                }
                Rhs::Reduce {
                    op,
                    pos: rpos,
                    value,
                    axes: raxes,
                }
            }
            None => Rhs::Value(self.expr()?),
        };
        self.end("the stage's expression")?;
        Ok(Stmt::Compute {
            name,
            pos,
            axes,
            dtype,
            rhs,
        })
    }

    fn axis_decl(&mut self, expected: &str) -> Result<AxisDecl> {
        let (name, pos) = self.ident(expected)?;
        let extent = if self.eat(":") {
            Some(self.int("an integer extent after ':'")?)
        } else {
            None
        };
        Ok(AxisDecl { name, pos, extent })
    }

    fn concat(&mut self, name: String, pos: Pos, dtype: Option<(DType, Pos)>) -> Result<Stmt> {
        self.i += 2;
        let mut inputs = vec![self.ident("a tensor name in concat")?];
        loop {
            self.expect(",", "',' and 'axis=N' in concat")?;
            if matches!(self.peek(), Tok::Ident(s) if s == "axis")
                && self.peek_at(1) == &Tok::Punct("=")
            {
                self.i += 2;
                let axis = self.int("an integer axis after 'axis='")?;
                self.expect(")", "')' after the concat axis")?;
                self.end("concat")?;
                return Ok(Stmt::Concat {
                    name,
                    pos,
                    dtype,
                    inputs,
                    axis,
                });
            }
            inputs.push(self.ident("a tensor name or 'axis=N' in concat")?);
        }
    }

    fn expr(&mut self) -> Result<PExpr> {
        self.enter()?;
        let e = self.binary(0)?;
        self.depth -= 1;
        Ok(e)
    }

    /// Binary operators by precedence level, loosest first.
    fn binary(&mut self, level: usize) -> Result<PExpr> {
        const LEVELS: [&[(&str, BinOp)]; 5] = [
            &[("||", BinOp::Or)],
            &[("&&", BinOp::And)],
            &[
                ("<=", BinOp::Le),
                (">=", BinOp::Ge),
                ("==", BinOp::Eq),
                ("!=", BinOp::Ne),
                ("<", BinOp::Lt),
                (">", BinOp::Gt),
            ],
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            &[
                ("*", BinOp::Mul),
                ("//", BinOp::FloorDiv),
                ("/", BinOp::Div),
                ("%", BinOp::FloorMod),
            ],
        ];
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut lhs = self.binary(level + 1)?;
        let mut nested = 0;
        while let Some(&(_, op)) = ops.iter().find(|(p, _)| self.is(p)) {
            let pos = self.pos();
            self.i += 1;
            self.enter()?;
            nested += 1;
            let rhs = self.binary(level + 1)?;
            lhs = PExpr {
                pos,
                kind: PKind::Bin(op, Box::new(lhs), Box::new(rhs)),
            };
        }
        self.depth -= nested;
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<PExpr> {
        let pos = self.pos();
        let op = if self.eat("-") {
            UnOp::Neg
        } else if self.eat("!") {
            UnOp::Not
        } else {
            return self.primary();
        };
        self.enter()?;
        let a = self.unary()?;
        self.depth -= 1;
        Ok(PExpr {
            pos,
            kind: PKind::Un(op, Box::new(a)),
        })
    }

    fn primary(&mut self) -> Result<PExpr> {
        let pos = self.pos();
        match self.peek().clone() {
            Tok::Int(v) => {
                self.i += 1;
                Ok(PExpr {
                    pos,
                    kind: PKind::Int(v),
                })
            }
            Tok::Float(v) => {
                self.i += 1;
                Ok(PExpr {
                    pos,
                    kind: PKind::Float(v),
                })
            }
            Tok::Punct("(") => {
                self.i += 1;
                let e = self.expr()?;
                self.expect(")", "')' to close '('")?;
                Ok(e)
            }
            Tok::Ident(name) => {
                self.i += 1;
                if self.eat("[") {
                    let mut idx = vec![self.expr()?];
                    while self.eat(",") {
                        idx.push(self.expr()?);
                    }
                    self.expect("]", "']' or ',' after index")?;
                    Ok(PExpr {
                        pos,
                        kind: PKind::Access(name, idx),
                    })
                } else if self.is("(") {
                    self.call(name, pos)
                } else {
                    Ok(PExpr {
                        pos,
                        kind: PKind::Name(name),
                    })
                }
            }
            _ => self.err("an expression"),
        }
    }

    fn call(&mut self, name: String, pos: Pos) -> Result<PExpr> {
        const FUNCS: &str = "max, min, relu, exp, sqrt, tanh, abs, tf32, if_then_else, cast";
        let arity = match name.as_str() {
            "max" | "min" | "cast" => 2,
            "relu" | "exp" | "sqrt" | "tanh" | "abs" | "tf32" => 1,
            "if_then_else" => 3,
            "sum" | "max_reduce" | "concat" => {
                return Err(WorkloadError::at(
                    pos,
                    format!("'{name}' may only be the whole right-hand side of a stage"),
                ));
            }
            _ => {
                return Err(WorkloadError::at(
                    pos,
                    format!("unknown function '{name}' (known: {FUNCS})"),
                ))
            }
        };
        self.i += 1;
        let mut cast_to = None;
        if name == "cast" {
            cast_to = Some(self.dtype()?.0);
            self.expect(",", "',' after the dtype of cast")?;
        }
        let mut args = vec![self.expr()?];
        while self.eat(",") {
            args.push(self.expr()?);
        }
        self.expect(")", &format!("')' or ',' after argument of '{name}'"))?;
        let given = args.len() + usize::from(cast_to.is_some());
        if given != arity {
            return Err(WorkloadError::at(
                pos,
                format!(
                    "'{name}' takes {arity} argument{}, found {given}",
                    if arity == 1 { "" } else { "s" }
                ),
            ));
        }
        let mut it = args.into_iter().map(Box::new);
        let mut next = || {
            it.next()
                .ok_or_else(|| WorkloadError::at(pos, "missing argument"))
        };
        let kind = match name.as_str() {
            "max" => PKind::Bin(BinOp::Max, next()?, next()?),
            "min" => PKind::Bin(BinOp::Min, next()?, next()?),
            "relu" => PKind::Relu(next()?),
            "exp" => PKind::Un(UnOp::Exp, next()?),
            "sqrt" => PKind::Un(UnOp::Sqrt, next()?),
            "tanh" => PKind::Un(UnOp::Tanh, next()?),
            "abs" => PKind::Un(UnOp::Abs, next()?),
            "tf32" => PKind::Un(UnOp::Tf32, next()?),
            "if_then_else" => PKind::Select(next()?, next()?, next()?),
            _ => match cast_to {
                Some(d) => PKind::Cast(d, next()?),
                None => return Err(WorkloadError::at(pos, format!("unknown function '{name}'"))),
            },
        };
        Ok(PExpr { pos, kind })
    }
}

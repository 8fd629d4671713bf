//! Splits one line of workload text into tokens with their positions.

use super::{Pos, Result, WorkloadError};
use std::fmt;

/// A token of the workload language.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Int(i64),
    Float(f64),
    /// Punctuation and operators, spelled as in the source.
    Punct(&'static str),
    /// The end of the line (or of the statement).
    End,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "'{s}'"),
            Tok::Int(v) => write!(f, "'{v}'"),
            Tok::Float(v) => write!(f, "'{v:?}'"),
            Tok::Punct(p) => write!(f, "'{p}'"),
            Tok::End => f.write_str("end of line"),
        }
    }
}

/// Operators, longest first so that `//` wins over `/`.
const PUNCT: [&str; 22] = [
    "//", "<=", ">=", "==", "!=", "&&", "||", "[", "]", "(", ")", ",", ":", "=", "+", "-", "*",
    "/", "%", "<", ">", "!",
];

/// The tokens of one line (comments stripped), ending with [`Tok::End`].
pub(crate) fn lex_line(line: &str, line_no: u32) -> Result<Vec<(Tok, Pos)>> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let pos = |i: usize| Pos {
        line: line_no,
        col: u32::try_from(i + 1).unwrap_or(u32::MAX),
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '#' {
            break;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(chars[start..i].iter().collect()), pos(start)));
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            out.push((number(&chars, &mut i, pos(start))?, pos(start)));
            continue;
        }
        let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
        match PUNCT.iter().find(|p| rest.starts_with(**p)) {
            Some(p) => {
                out.push((Tok::Punct(p), pos(start)));
                i += p.len();
            }
            None => {
                return Err(WorkloadError::at(
                    pos(start),
                    format!("unexpected character '{c}'"),
                ))
            }
        }
    }
    out.push((Tok::End, pos(chars.len())));
    Ok(out)
}

/// Lexes an integer (`42`) or a float (`1.5`, `.5`, `1e-3`, `2.0E+4`).
fn number(chars: &[char], i: &mut usize, at: Pos) -> Result<Tok> {
    let start = *i;
    let digits = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_ascii_digit() {
            *i += 1;
        }
    };
    digits(i);
    let mut is_float = false;
    if *i < chars.len() && chars[*i] == '.' {
        is_float = true;
        *i += 1;
        digits(i);
    }
    if *i < chars.len() && (chars[*i] == 'e' || chars[*i] == 'E') {
        let mut j = *i + 1;
        if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
            j += 1;
        }
        if j < chars.len() && chars[j].is_ascii_digit() {
            is_float = true;
            *i = j;
            digits(i);
        }
    }
    if *i < chars.len() && (chars[*i].is_ascii_alphabetic() || chars[*i] == '_') {
        let text: String = chars[start..=*i].iter().collect();
        return Err(WorkloadError::at(at, format!("malformed number '{text}'")));
    }
    let text: String = chars[start..*i].iter().collect();
    if is_float {
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Tok::Float(v)),
            _ => Err(WorkloadError::at(
                at,
                format!("float literal '{text}' is out of range"),
            )),
        }
    } else {
        text.parse::<i64>()
            .map(Tok::Int)
            .map_err(|_| WorkloadError::at(at, format!("integer literal '{text}' is too large")))
    }
}

//! The JSON form of a trace, as the database stores it. [`to_json`] and [`from_json`]
//! round-trip: `from_json(&to_json(t)) == Ok(t)` for every trace that passes
//! [`validate`].
//!
//! The mapping is written by hand, not derived, so that the stored format does not
//! change when the Rust types do. Format version 1:
//!
//! ```json
//! {"format": "tessel-trace", "version": 1,
//!  "rvs":   [{"kind": "block", "name": "b0"}, {"kind": "loop", "name": "i"}, ...],
//!  "insts": [{"kind": "get_block", "inputs": [], "attrs": {"name": "C"}, "outputs": [0]},
//!            {"kind": "sample_perfect_tile", "inputs": [{"rv": 1}],
//!             "attrs": {"n": 2, "max_innermost_factor": 16}, "outputs": [2, 3],
//!             "decision": [4, 8]}, ...]}
//! ```
//!
//! * `rvs[i].kind` is `"block"`, `"loop"` or `"expr"`; `name` is the printed name.
//! * `insts[i].kind` is the instruction's text name ([`InstKind::name`]); `inputs` the
//!   positional inputs; `attrs` an object keyed by attribute name (stored in signature
//!   order whatever the key order); `outputs` rv indices; `decision`, present only on
//!   sampling instructions that have one, is an array of integers (`Decision::Tile`) or
//!   a non-negative integer (`Decision::Categorical`).
//! * An operand is `null` (None), an integer (`8`), a float written with a fraction or
//!   an exponent (`0.25`, `1.0`, `1e-7`), a string, an array (a list), `{"rv": i}` or
//!   `{"product": [...]}`.
//!
//! Reading rejects another `format` or `version`, unknown keys, values of the wrong
//! JSON type (naming the path, e.g. `insts[3].attrs.factors[1]`), then runs
//! [`validate`], whose messages name the instruction index.

use serde_json::{json, Map, Value};
use thiserror::Error;

use super::inst::{Decision, InstKind, Instruction, Operand, RvInfo, RvKind, Trace};
use super::validate::{expected_attrs, validate, ValidateError};

/// The value of the envelope's `format` key.
pub const FORMAT: &str = "tessel-trace";
/// The format version this build writes and reads.
pub const VERSION: u64 = 1;

/// Why a JSON document is not a readable trace.
#[derive(Debug, Error)]
pub enum TraceJsonError {
    /// Not JSON at all.
    #[error("invalid JSON: {0}")]
    Syntax(#[from] serde_json::Error),
    /// The envelope's `format` is not [`FORMAT`].
    #[error("not a tessel trace: format is {found}, expected \"{FORMAT}\"")]
    Format {
        /// The `format` value found, as JSON.
        found: String,
    },
    /// The envelope's `version` is not [`VERSION`].
    #[error("unsupported trace version {found} (this build reads version {VERSION})")]
    Version {
        /// The `version` value found, as JSON.
        found: String,
    },
    /// A value has the wrong JSON type, or a key is missing or unknown.
    #[error("{path}: {msg}")]
    Shape {
        /// Where in the document, e.g. `insts[3].attrs.factors`.
        path: String,
        /// What was expected.
        msg: String,
    },
    /// The document decodes but the trace is malformed.
    #[error("invalid trace: {0}")]
    Invalid(#[from] ValidateError),
}

/// Result of reading a JSON trace.
pub type Result<T, E = TraceJsonError> = std::result::Result<T, E>;

/// Serializes a trace in the format of the module doc (compact, one line).
pub fn to_json(trace: &Trace) -> String {
    let rvs: Vec<Value> = trace
        .rvs
        .iter()
        .map(|rv| json!({"kind": kind_name(rv.kind), "name": rv.name}))
        .collect();
    let insts: Vec<Value> = trace.insts.iter().map(inst_to_value).collect();
    json!({"format": FORMAT, "version": VERSION, "rvs": rvs, "insts": insts}).to_string()
}

/// Reads a trace written by [`to_json`], checking the envelope, the shape and the
/// structure ([`validate`]).
pub fn from_json(text: &str) -> Result<Trace> {
    let doc: Value = serde_json::from_str(text)?;
    let top = object(&doc, "trace")?;
    match top.get("format") {
        Some(Value::String(f)) if f == FORMAT => {}
        other => {
            return Err(TraceJsonError::Format {
                found: other.map_or("missing".to_string(), Value::to_string),
            })
        }
    }
    match top.get("version") {
        Some(v) if v.as_u64() == Some(VERSION) => {}
        other => {
            return Err(TraceJsonError::Version {
                found: other.map_or("missing".to_string(), Value::to_string),
            })
        }
    }
    only_keys(top, &["format", "version", "rvs", "insts"], "trace")?;
    let rvs = array(field(top, "rvs", "trace")?, "rvs")?
        .iter()
        .enumerate()
        .map(|(i, v)| rv_from_value(v, &format!("rvs[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let insts = array(field(top, "insts", "trace")?, "insts")?
        .iter()
        .enumerate()
        .map(|(i, v)| inst_from_value(v, &format!("insts[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let trace = Trace { insts, rvs };
    validate(&trace)?;
    Ok(trace)
}

fn kind_name(kind: RvKind) -> &'static str {
    match kind {
        RvKind::Block => "block",
        RvKind::Loop => "loop",
        RvKind::Expr => "expr",
    }
}

fn inst_to_value(inst: &Instruction) -> Value {
    let attrs: Map<String, Value> = inst
        .attrs
        .iter()
        .map(|(k, v)| (k.clone(), operand_to_value(v)))
        .collect();
    let mut obj = Map::new();
    obj.insert("kind".into(), inst.kind.name().into());
    obj.insert(
        "inputs".into(),
        inst.inputs.iter().map(operand_to_value).collect(),
    );
    obj.insert("attrs".into(), Value::Object(attrs));
    obj.insert("outputs".into(), inst.outputs.clone().into());
    match &inst.decision {
        Some(Decision::Tile(sizes)) => {
            obj.insert("decision".into(), sizes.clone().into());
        }
        Some(Decision::Categorical(i)) => {
            obj.insert("decision".into(), (*i as u64).into());
        }
        None => {}
    }
    Value::Object(obj)
}

fn operand_to_value(op: &Operand) -> Value {
    match op {
        Operand::Rv(r) => json!({ "rv": r }),
        Operand::Int(v) => (*v).into(),
        Operand::Float(v) => (*v).into(),
        Operand::Str(s) => s.clone().into(),
        Operand::None => Value::Null,
        Operand::List(items) => items.iter().map(operand_to_value).collect(),
        Operand::Product(factors) => {
            json!({ "product": factors.iter().map(operand_to_value).collect::<Vec<_>>() })
        }
    }
}

fn shape(path: &str, msg: impl Into<String>) -> TraceJsonError {
    TraceJsonError::Shape {
        path: path.to_string(),
        msg: msg.into(),
    }
}

/// A JSON value in words, for messages.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| shape(path, format!("expected an object, found {}", json_type(v))))
}

fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>> {
    v.as_array()
        .ok_or_else(|| shape(path, format!("expected an array, found {}", json_type(v))))
}

fn string<'a>(v: &'a Value, path: &str) -> Result<&'a str> {
    v.as_str()
        .ok_or_else(|| shape(path, format!("expected a string, found {}", json_type(v))))
}

fn index(v: &Value, path: &str) -> Result<u32> {
    v.as_u64()
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| shape(path, format!("expected an rv index, found {v}")))
}

fn field<'a>(obj: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a Value> {
    obj.get(key)
        .ok_or_else(|| shape(path, format!("missing key '{key}'")))
}

fn only_keys(obj: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<()> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(shape(
            path,
            format!("unknown key '{k}' (expected: {})", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

fn rv_from_value(v: &Value, path: &str) -> Result<RvInfo> {
    let obj = object(v, path)?;
    only_keys(obj, &["kind", "name"], path)?;
    let kind_path = format!("{path}.kind");
    let kind = match string(field(obj, "kind", path)?, &kind_path)? {
        "block" => RvKind::Block,
        "loop" => RvKind::Loop,
        "expr" => RvKind::Expr,
        other => {
            return Err(shape(
                &kind_path,
                format!("unknown rv kind '{other}' (expected: block, loop, expr)"),
            ))
        }
    };
    let name = string(field(obj, "name", path)?, &format!("{path}.name"))?.to_string();
    Ok(RvInfo { kind, name })
}

fn inst_from_value(v: &Value, path: &str) -> Result<Instruction> {
    let obj = object(v, path)?;
    only_keys(
        obj,
        &["kind", "inputs", "attrs", "outputs", "decision"],
        path,
    )?;
    let kind_path = format!("{path}.kind");
    let name = string(field(obj, "kind", path)?, &kind_path)?;
    let kind = InstKind::from_name(name)
        .ok_or_else(|| shape(&kind_path, format!("unknown instruction '{name}'")))?;
    let inputs_path = format!("{path}.inputs");
    let inputs = array(field(obj, "inputs", path)?, &inputs_path)?
        .iter()
        .enumerate()
        .map(|(i, v)| operand_from_value(v, &format!("{inputs_path}[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let attrs_path = format!("{path}.attrs");
    let attr_obj = object(field(obj, "attrs", path)?, &attrs_path)?;
    let sig = kind.signature();
    if let Some(k) = attr_obj.keys().find(|k| !sig.attrs.contains(&k.as_str())) {
        let msg = format!(
            "unknown attribute '{k}' for {} ({})",
            sig.name,
            expected_attrs(kind)
        );
        return Err(shape(&attrs_path, msg));
    }
    let mut attrs = Vec::with_capacity(sig.attrs.len());
    for attr in sig.attrs {
        if let Some(v) = attr_obj.get(*attr) {
            attrs.push((
                attr.to_string(),
                operand_from_value(v, &format!("{attrs_path}.{attr}"))?,
            ));
        }
    }
    let outputs_path = format!("{path}.outputs");
    let outputs = array(field(obj, "outputs", path)?, &outputs_path)?
        .iter()
        .enumerate()
        .map(|(i, v)| index(v, &format!("{outputs_path}[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let decision = match obj.get("decision") {
        None => None,
        Some(v) => Some(decision_from_value(v, &format!("{path}.decision"))?),
    };
    Ok(Instruction {
        kind,
        inputs,
        attrs,
        outputs,
        decision,
    })
}

fn decision_from_value(v: &Value, path: &str) -> Result<Decision> {
    let bad = || {
        shape(
            path,
            format!("expected an array of integers or a candidate index, found {v}"),
        )
    };
    match v {
        Value::Array(items) => items
            .iter()
            .map(Value::as_i64)
            .collect::<Option<Vec<_>>>()
            .map(Decision::Tile)
            .ok_or_else(bad),
        Value::Number(n) => n
            .as_u64()
            .and_then(|i| usize::try_from(i).ok())
            .map(Decision::Categorical)
            .ok_or_else(bad),
        _ => Err(bad()),
    }
}

fn operand_from_value(v: &Value, path: &str) -> Result<Operand> {
    let all = |items: &[Value]| {
        items
            .iter()
            .enumerate()
            .map(|(i, v)| operand_from_value(v, &format!("{path}[{i}]")))
            .collect::<Result<Vec<_>>>()
    };
    match v {
        Value::Null => Ok(Operand::None),
        Value::Bool(_) => Err(shape(path, "expected an operand, found a boolean")),
        Value::Number(n) if n.is_f64() => n
            .as_f64()
            .map(Operand::Float)
            .ok_or_else(|| shape(path, "bad float")),
        Value::Number(n) => n
            .as_i64()
            .map(Operand::Int)
            .ok_or_else(|| shape(path, format!("integer {n} is out of range"))),
        Value::String(s) => Ok(Operand::Str(s.clone())),
        Value::Array(items) => all(items).map(Operand::List),
        Value::Object(obj) => match (obj.len(), obj.get("rv"), obj.get("product")) {
            (1, Some(r), _) => index(r, &format!("{path}.rv")).map(Operand::Rv),
            (1, _, Some(p)) => all(array(p, &format!("{path}.product"))?).map(Operand::Product),
            _ => Err(shape(
                path,
                "expected an operand object {\"rv\": i} or {\"product\": [...]}",
            )),
        },
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;

//! Schedule primitives and traces.

pub mod inst;
pub mod json;
pub mod text;
pub mod validate;

//! Schedule primitives and traces.

pub mod inst;

//! tessel: an auto-scheduler for tensor programs.

pub mod interp;
pub mod ir;
pub mod schedule;

//! tessel: an auto-scheduler for tensor programs.

pub mod ir;
pub mod schedule;
pub mod workload;

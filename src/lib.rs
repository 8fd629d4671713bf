//! tessel: an auto-scheduler for tensor programs.

pub mod database;
pub mod ir;
pub mod schedule;

//! tessel: an auto-scheduler for tensor programs.

pub mod codegen;
pub mod cost_model;
pub mod database;
pub mod interp;
pub mod ir;
pub mod lower;
pub mod measure;
pub mod model_cmd;
pub mod network;
pub mod report;
pub mod schedule;
pub mod search;
pub mod target;
pub mod tune;
pub mod verify;
pub mod workload;

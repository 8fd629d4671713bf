//! The CPU side of measurement (C compiler build, load, run, timing, ndarray peer).

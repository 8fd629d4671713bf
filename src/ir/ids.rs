//! Typed ids into the arenas of a [`Program`](super::Program).
//!
//! Nodes live in vectors indexed by these newtypes. An id is stable for the life of a
//! program: primitives that replace a loop allocate a new one and leave the old entry
//! unreachable, so ids held by a trace never change meaning.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! define_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
        pub struct $name(pub u32);

        impl $name {
            /// The position of this id in its arena.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

define_id!(
    /// A loop (`for` statement).
    LoopId,
    "loop"
);
define_id!(
    /// A block (one computation statement with its iteration domain).
    BlockId,
    "block"
);
define_id!(
    /// A buffer (parameter or allocation).
    BufferId,
    "buffer"
);
define_id!(
    /// A variable: a loop variable or a block iteration variable.
    VarId,
    "var"
);

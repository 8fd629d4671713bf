//! Serial split-K sums: a block run only by the thread block that arrives last at its tile.
//!
//! A split-K GEMM writes each split's partial results into a global buffer and sums them
//! in a kernel of its own. Placed by `serial_sum_at` (`schedule/serial_sum.rs`), the sum
//! block sits instead under the blockIdx loop of the kernel that writes the partials,
//! annotated [`SERIAL_SUM_KEY`] with the number of splits `S`. Its meaning, the same in
//! both interpreters and in the generated code:
//!
//! * its **arrival node** is the child of its innermost blockIdx-bound ancestor loop that
//!   holds it: one thread block's share of the sum (the tile's elements, spread over the
//!   block's threads by the loops below);
//! * each time execution reaches the arrival node, the thread block *arrives* at the
//!   tile named by the **key**: the row-major position, over the block's spatial
//!   iteration variables, of its bindings with every loop inside the arrival node at 0
//!   (the tile's first element; a function of the blockIdx loops alone);
//! * the node runs only on the `S`-th arrival at its key, when every split has written
//!   its partials of the tile; the count then starts again from zero (the next launch).
//!
//! On the GPU the count is an atomic counter per key in a zeroed workspace, after a
//! fence that publishes the block's partials (`KStmt::LastArrival`).

use super::expr::Expr;
use super::ids::BlockId;
use super::interval::Interval;
use super::program::{AnnValue, IterKind, LoopKind, Node, Program};
use super::simplify::simplify;
use std::collections::BTreeMap;

/// The block annotation of a serial split-K sum: the number of splits that arrive.
pub const SERIAL_SUM_KEY: &str = "serial_sum";

/// Where and how a serial sum block waits for its tile's splits.
#[derive(Clone, Debug, PartialEq)]
pub struct Arrival {
    pub block: BlockId,
    /// The child of the innermost blockIdx loop above the block that holds it.
    pub node: Node,
    /// The tile's key, over the variables of the loops above `node`.
    pub key: Expr,
    /// The number of keys (the key lies in `[0, keys)`).
    pub keys: i64,
    /// The arrivals after which the node runs (the splits of the sum).
    pub arrivals: i64,
}

/// The arrival of every reachable block annotated [`SERIAL_SUM_KEY`], in program order;
/// an error naming the block where the annotation is not a count of at least 1 or the
/// block has no blockIdx loop above it.
pub fn arrivals(p: &Program) -> Result<Vec<Arrival>, String> {
    let mut out = Vec::new();
    for b in p.blocks_in_order() {
        let Some(value) = p.block(b).annotations.get(SERIAL_SUM_KEY) else {
            continue;
        };
        let name = &p.block(b).name;
        let arrivals = match value {
            AnnValue::Int(s) if *s >= 1 => *s,
            other => {
                return Err(format!(
                    "block {name}: {SERIAL_SUM_KEY} = {other} is not a count of at least 1"
                ))
            }
        };
        let chain = p.ancestors(Node::Block(b));
        let Some(at) = chain
            .iter()
            .rposition(|l| matches!(p.lp(*l).kind, LoopKind::Thread(t) if t.is_block_idx()))
        else {
            return Err(format!(
                "block {name} is a serial split-K sum ({SERIAL_SUM_KEY}) with no blockIdx loop above it"
            ));
        };
        let node = chain.get(at + 1).map_or(Node::Block(b), |l| Node::Loop(*l));
        let inner: Vec<_> = chain[at + 1..].iter().map(|l| p.lp(*l).var).collect();
        let blk = p.block(b);
        let digits = blk
            .iter_vars
            .iter()
            .zip(&blk.bindings)
            .filter(|(iv, _)| iv.kind == IterKind::Spatial)
            .map(|(iv, e)| {
                let origin = e.substitute(&|v| inner.contains(&v).then_some(Expr::Int(0)));
                (origin, iv.extent)
            });
        let keys = blk
            .iter_vars
            .iter()
            .filter(|iv| iv.kind == IterKind::Spatial)
            .map(|iv| iv.extent)
            .product();
        let ranges: BTreeMap<_, _> = chain[..=at]
            .iter()
            .map(|l| (p.lp(*l).var, p.lp(*l).extent))
            .collect();
        let key = simplify(&Expr::row_major(digits), &|v| {
            ranges.get(&v).map(|&x| Interval::new(0, x - 1))
        });
        out.push(Arrival {
            block: b,
            node,
            key,
            keys,
            arrivals,
        });
    }
    Ok(out)
}

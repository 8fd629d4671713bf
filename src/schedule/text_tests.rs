//! Tests of the text form; the sample traces are shared with the JSON tests.

use super::*;

/// A GEMM schedule that uses every instruction kind: a fixture of the text and JSON forms,
/// never replayed (its primitives need not apply).
pub(crate) const ALL_KINDS: &str = r#"# every instruction kind
b0 = get_block("C")
v10 = sample_categorical(candidates=[1, 16], probs=[0.5, 0.5], decision=1)
pad_einsum(b0, padding=[v10, 1, v10 * 2])
im2col(b0)
b1 = cache_write(b0, write_index=0, scope="local")
b2 = cache_read(b0, read_index=0, scope="shared")
b3 = cache_read(b0, read_index=1, scope="shared")
read_cache(b1, b2)
i, j, k = get_loops(b0)
v0, v1, v2 = sample_perfect_tile(i, n=3, max_innermost_factor=16, decision=[16, 8, 8])
i_0, i_1, i_2 = split(i, factors=[v0, v1, v2])
j_0, j_1, j_2 = split(j, factors=[None, 8, 8])
v8, v9 = sample_tile(k, n=2, max_innermost_factor=16, max_waste=0.25, decision=[3, 8])
k_0, k_1 = split(k, factors=[v8, v9])
reorder(i_0, j_0, i_1, j_1, k_0, k_1, i_2, j_2)
f = fuse(i_0, j_0)
bind(f, thread="blockIdx.x")
t = fuse(i_1, j_1)
bind(t, thread="threadIdx.x")
at = sample_compute_location(b1, [f, t], decision=1)
reverse_compute_at(b1, at)
serial_sum_at(b1, f)
compute_at(b2, k_0)
compute_at(b3, k_0)
ax0, ax1 = get_loops(b2)
a = fuse(ax0, ax1)
_, tx, vec = split(a, factors=[None, v1 * v2, 4])
bind(tx, thread="threadIdx.x")
vectorize(vec)
split_layout(b3, buffer_index=0, axis=0, factor=v1)
transform_layout(b2, buffer_index=0, permutation=[1, 0])
storage_align(b2, buffer_index=0, axis=0, factor=32, offset=-1)
storage_swizzle(b3, buffer_index=0)
storage_widen(b2, buffer_index=0)
tensorize(i_2, intrin="mma_sync")
b4 = decompose_reduction(b0, k_0)
b7 = rfactor(k_0, factor_axis=0)
unroll(k_1)
parallel(i_2)
cs = get_consumers(b0)
p0, p1 = get_producers(b0)
get_producers(b4)
v3 = sample_categorical(candidates=[0, 16, 64, 512], probs=[0.25, 0.25, 0.25, 0.25], decision=2)
annotate(b0, key="pragma_auto_unroll_max_step", value=v3)
annotate(j_2, key="note \"quoted\"\n\t\\", value=0.001)
annotate(j_2, key="ratio", value=1.0)
annotate(b3, key="nested", value=[[], [1, [2.5, "x"]], None])
b5 = get_block("pad")
compute_inline(b5)
b6 = get_block("relu")
reverse_compute_inline(b6)
"#;

/// The MLC `blocking_with_shared` schedule, products and discards included.
pub(crate) const MLC: &str = r#"# MLC blocking_with_shared(8, 8, 8, 8, 8)
b0 = get_block("C")
b1 = cache_write(b0, write_index=0, scope="local")
i, j, k = get_loops(b0)
i_0, i_1, i_2 = split(i, factors=[None, 8, 8])
v0, v1, v2 = sample_perfect_tile(j, n=3, max_innermost_factor=16, decision=[16, 8, 8])
j_0, j_1, j_2 = split(j, factors=[v0, v1, v2])
k_0, k_1 = split(k, factors=[None, 8])
reorder(i_0, j_0, i_1, j_1, k_0, k_1, i_2, j_2)
bind(i_0, thread="blockIdx.y")
bind(j_0, thread="blockIdx.x")
b2 = cache_read(b0, read_index=0, scope="shared")
compute_at(b2, k_0)
l0, l1, l2, l3, l4, l5, f_0, f_1 = get_loops(b2)
f = fuse(f_0, f_1)
_, tx, vec = split(f, factors=[None, v1 * v2 * 1, 4])
_, ty = split(tx, factors=[None, -2 * v2])
vectorize(vec)
v3 = sample_categorical(candidates=[0, 16, 64, 512], probs=[0.25, 0.25, 0.25, 0.25], decision=2)
annotate(b0, key="pragma_auto_unroll_max_step", value=v3)
"#;

/// A sampling instruction without a decision, an empty get_loops and positional attrs.
pub(crate) const SMALL: &str = "b = get_block(\"C\")\nget_loops(b)\ni = get_loops(b)\nv = sample_categorical([1, 2], [0.5, 0.5])\ni_0, i_1 = split(i, [None, v])\n";

/// Every sample trace, parsed.
pub(crate) fn samples() -> Vec<Trace> {
    [ALL_KINDS, MLC, SMALL]
        .iter()
        .map(|t| parse(t).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

fn strip_comments(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn all_kinds_sample_covers_every_instruction() {
    let trace = parse(ALL_KINDS).unwrap();
    for kind in InstKind::ALL {
        assert!(
            trace.insts.iter().any(|i| i.kind == kind),
            "{} missing",
            kind.name()
        );
    }
}

#[test]
fn print_reproduces_canonical_text() {
    assert_eq!(print(&parse(ALL_KINDS).unwrap()), strip_comments(ALL_KINDS));
    assert_eq!(print(&parse(MLC).unwrap()), strip_comments(MLC));
}

#[test]
fn round_trip_text() {
    for trace in samples() {
        let text = print(&trace);
        assert_eq!(parse(&text).unwrap(), trace, "{text}");
        assert_eq!(trace.to_string(), text);
        assert_eq!(text.parse::<Trace>().unwrap(), trace);
    }
}

#[test]
fn parse_builds_the_expected_trace() {
    let trace = parse("b = get_block(\"C\")\nl, _ , _ = get_loops(b)\n_, v = sample_perfect_tile(l, max_innermost_factor=4, n=2, decision=[2, 4])\na, c = split(l, factors=[v * 2 * v, None])\n").unwrap();
    let rv = |kind, name: &str| RvInfo {
        kind,
        name: name.to_string(),
    };
    let expected = Trace {
        rvs: vec![
            rv(RvKind::Block, "b"),
            rv(RvKind::Loop, "l"),
            rv(RvKind::Loop, "_"),
            rv(RvKind::Loop, "_"),
            rv(RvKind::Expr, "_"),
            rv(RvKind::Expr, "v"),
            rv(RvKind::Loop, "a"),
            rv(RvKind::Loop, "c"),
        ],
        insts: vec![
            Instruction {
                kind: InstKind::GetBlock,
                inputs: vec![],
                attrs: vec![("name".into(), Operand::Str("C".into()))],
                outputs: vec![0],
                decision: None,
            },
            Instruction {
                kind: InstKind::GetLoops,
                inputs: vec![Operand::Rv(0)],
                attrs: vec![],
                outputs: vec![1, 2, 3],
                decision: None,
            },
            Instruction {
                kind: InstKind::SamplePerfectTile,
                inputs: vec![Operand::Rv(1)],
                attrs: vec![
                    ("n".into(), Operand::Int(2)),
                    ("max_innermost_factor".into(), Operand::Int(4)),
                ],
                outputs: vec![4, 5],
                decision: Some(Decision::Tile(vec![2, 4])),
            },
            Instruction {
                kind: InstKind::Split,
                inputs: vec![Operand::Rv(1)],
                attrs: vec![(
                    "factors".into(),
                    Operand::List(vec![
                        Operand::Product(vec![Operand::Rv(5), Operand::Int(2), Operand::Rv(5)]),
                        Operand::None,
                    ]),
                )],
                outputs: vec![6, 7],
                decision: None,
            },
        ],
    };
    assert_eq!(trace, expected);
}

#[test]
fn values_round_trip_exactly() {
    let text = "b = get_block(\"a\\\"b\\\\c\\nd\")\nannotate(b, key=\"\", value=[0.1, -0.0, 1e300, 2.5e-8, +3, -9223372036854775808, 1.5E2, 7.])\n";
    let trace = parse(text).unwrap();
    assert_eq!(
        trace.insts[0].attr("name"),
        Some(&Operand::Str("a\"b\\c\nd".into()))
    );
    let Some(Operand::List(values)) = trace.insts[1].attr("value") else {
        panic!("not a list")
    };
    assert_eq!(values[4], Operand::Int(3));
    assert_eq!(values[5], Operand::Int(i64::MIN));
    assert_eq!(values[6], Operand::Float(150.0));
    assert_eq!(values[7], Operand::Float(7.0));
    let printed = print(&trace);
    assert!(
        printed.contains("[0.1, -0.0, 1e300, 2.5e-8, 3, -9223372036854775808, 150.0, 7.0]"),
        "{printed}"
    );
    assert_eq!(parse(&printed).unwrap(), trace);
}

#[test]
fn comments_blank_lines_and_spacing_are_ignored() {
    let a = parse("b=get_block( \"C\" )  # the block\n\n   # nothing\r\n i ,j=get_loops(b,)\t\n")
        .unwrap();
    let b = parse("b = get_block(\"C\")\ni, j = get_loops(b)").unwrap();
    assert_eq!(a, b);
}

/// Asserts that `text` fails with exactly `expected` (`line:col: msg`).
fn check_err(text: &str, expected: &str) {
    match parse(text) {
        Ok(t) => panic!("parsed {text:?} into {t:?}, expected error {expected}"),
        Err(e) => assert_eq!(e.to_string(), expected, "for {text:?}"),
    }
}

#[test]
fn syntax_errors() {
    check_err(
        "b = get_block(\"C\" x)",
        "1:19: expected ')' or ',' after an argument, found 'x'",
    );
    check_err(
        "b = get_block(\"C\"",
        "1:18: expected ')' or ',' after an argument, found end of line",
    );
    check_err("b = splitt(x)", "1:5: unknown instruction 'splitt'");
    check_err(
        "b get_block(\"C\")",
        "1:3: expected '(', ',' or '=', found 'g'",
    );
    check_err(
        "a, = get_block(\"C\")",
        "1:4: expected an output name, found '='",
    );
    check_err("a = 3", "1:5: expected an instruction name, found '3'");
    check_err(
        "b = get_block \"C\"",
        "1:15: expected '(' after 'get_block', found '\"'",
    );
    check_err(
        "b = get_block(\"C\") x",
        "1:20: expected end of line after ')', found 'x'",
    );
    check_err("b = get_block(\"C)", "1:15: unterminated string");
    check_err(
        "b = get_block(\"\\q\")",
        "1:16: unknown escape '\\q' (expected \\\", \\\\, \\n, \\t or \\r)",
    );
    check_err(
        "v = sample_categorical(candidates=[1, 99999999999999999999], probs=[1])",
        "1:39: integer 99999999999999999999 is out of range",
    );
    check_err(
        "v = sample_categorical(candidates=[1 2], probs=[1])",
        "1:38: expected ',' or ']' in a list, found '2'",
    );
    check_err(
        "v = sample_categorical(candidates=[8x], probs=[1])",
        "1:36: malformed number",
    );
    check_err(
        "v = sample_categorical(candidates=[1e], probs=[1])",
        "1:38: expected a digit in the exponent, found ']'",
    );
    check_err(
        "v = sample_categorical(candidates=[-], probs=[1])",
        "1:37: expected a digit, found ']'",
    );
    check_err(
        "v = sample_categorical(candidates=, probs=[1])",
        "1:35: expected a value (a name, None, a number, a string or a list), found ','",
    );
    check_err(
        "b = get_block(name=\"C\", \"D\")",
        "1:25: positional argument after keyword arguments",
    );
    let deep = format!(
        "v = sample_categorical(candidates={}, probs=[])",
        "[".repeat(40)
    );
    check_err(&deep, "1:67: lists nest more than 32 deep");
}

#[test]
fn binding_errors() {
    check_err(
        "b = get_block(\"C\")\ni, j = split(b, factor=[None, 8])",
        "2:17: unknown attribute 'factor' for split (expected: factors)",
    );
    check_err(
        "b = get_block(\"C\")\nget_loops(b, x=1)",
        "2:14: unknown attribute 'x' for get_loops (it takes none)",
    );
    check_err(
        "b = get_block(\"C\")\nbind(b, thread=\"x\", decision=1)",
        "2:21: unknown attribute 'decision' for bind (expected: thread)",
    );
    check_err(
        "b = get_block(name=\"C\", name=\"D\")",
        "1:25: attribute 'name' is given twice",
    );
    check_err(
        "b = get_block(\"C\", name=\"D\")",
        "1:20: attribute 'name' is given twice",
    );
    check_err(
        "b = get_block()",
        "1:15: get_block is missing attribute 'name'",
    );
    check_err(
        "i = get_loops()",
        "1:15: get_loops is missing argument 'block'",
    );
    check_err(
        "b = get_block(\"C\", \"D\")",
        "1:20: get_block takes at most 1 positional arguments (name)",
    );
    check_err("i, j = get_loops(x)", "1:18: 'x' is not defined");
    check_err(
        "b = get_block(\"C\")\n_ = get_loops(b)\nfuse(_)",
        "3:6: '_' discards a value and cannot be used",
    );
    check_err(
        "b = get_block(\"C\")\nb = get_block(\"D\")",
        "2:1: 'b' is already defined on line 1",
    );
    check_err("b, b = get_loops(x)", "1:4: 'b' appears twice before '='");
    check_err(
        "None = get_block(\"C\")",
        "1:1: 'None' cannot be used as a name",
    );
    check_err(
        "b = get_block(\"C\")\nv = sample_categorical(candidates=[1], probs=[1], decision=[0])",
        "2:60: the decision of sample_categorical is a non-negative integer",
    );
    check_err("b = get_block(\"C\")\ni = get_loops(b)\nv = sample_perfect_tile(i, n=1, max_innermost_factor=4, decision=2)", "3:66: the decision of sample_perfect_tile is a list of integers");
    check_err(
        "b = get_block(\"C\")\ni = get_loops(b)\nx = split(i, factors=[\"a\" * 2])",
        "3:23: a product may only multiply integers and rvs",
    );
}

#[test]
fn structure_errors() {
    let pre = "b0 = get_block(\"C\")\ni, j = get_loops(b0)\n";
    let check = |line: &str, expected: &str| check_err(&format!("{pre}{line}"), expected);
    check(
        "a, b = split(b0, factors=[None, 8])",
        "3:14: 'b0' is a block, split expects a loop",
    );
    check(
        "a, b = split(3, factors=[None, 8])",
        "3:14: split expects a loop, found an integer",
    );
    check("fuse(i, b0)", "3:9: 'b0' is a block, fuse expects a loop");
    check(
        "compute_at(i, j)",
        "3:12: 'i' is a loop, compute_at expects a block",
    );
    check(
        "annotate(3, key=\"k\", value=1)",
        "3:10: annotate expects a block or a loop, found an integer",
    );
    check(
        "annotate(i, key=\"k\", value=[1, j])",
        "3:32: 'j' is a loop, annotate expects an expr in 'value'",
    );
    check(
        "a, b = split(i, factors=[None, 8, 8])",
        "3:1: split with 3 factors defines 3 loops, found 2 names",
    );
    check(
        "a = split(i, factors=[])",
        "3:22: 'factors' of split must be a non-empty list, found a list",
    );
    check(
        "a, b = split(i, factors=[None, 0.5])",
        "3:32: expected None, an integer, an rv or a product in 'factors', found a float",
    );
    check(
        "a = split(i, factors=8)",
        "3:22: 'factors' of split must be a non-empty list, found an integer",
    );
    check(
        "x = reorder(i, j)",
        "3:1: reorder defines nothing, found 1 name",
    );
    check(
        "x, y = get_block(\"D\")",
        "3:1: get_block defines one block, found 2 names",
    );
    check("reorder()", "3:1: reorder needs at least one loop");
    check(
        "a, b = sample_perfect_tile(i, n=3, max_innermost_factor=4)",
        "3:1: sample_perfect_tile with n=3 defines 3 exprs, found 2 names",
    );
    check(
        "a = sample_perfect_tile(i, n=0, max_innermost_factor=4)",
        "3:30: 'n' of sample_perfect_tile must be a positive integer, found an integer",
    );
    check(
        "a, b = sample_perfect_tile(i, n=2, max_innermost_factor=4, decision=[1, 2, 3])",
        "3:69: the decision has 3 tile sizes, but n=2",
    );
    check(
        "a, b = sample_perfect_tile(i, n=2, max_innermost_factor=4, decision=[0, 2])",
        "3:69: tile sizes must be positive, found 0",
    );
    check(
        "v = sample_categorical(candidates=[1, 2], probs=[0.5, 0.5], decision=2)",
        "3:70: decision 2 is out of range for 2 candidates",
    );
    check(
        "v = sample_categorical(candidates=[1, 2], probs=[0.5])",
        "3:5: 2 candidates but 1 probs",
    );
    check(
        "v = sample_categorical(candidates=[1, 2.0], probs=[0.5, 0.5])",
        "3:39: expected an integer in 'candidates', found a float",
    );
    check(
        "l = sample_compute_location(b0, [i, b0])",
        "3:37: 'b0' is a block, sample_compute_location expects a loop",
    );
    check(
        "l = sample_compute_location(b0, [])",
        "3:33: sample_compute_location needs at least one loop",
    );
    check(
        "l = sample_compute_location(b0, i)",
        "3:33: sample_compute_location expects a list of loops, found 'i' (a loop)",
    );
    check(
        "l = sample_compute_location(b0, [i, j], decision=2)",
        "3:50: decision 2 is out of range for 2 locations",
    );
    check(
        "bind(i, thread=1)",
        "3:16: 'thread' of bind must be a string, found an integer",
    );
    check(
        "storage_align(b0, buffer_index=0, axis=\"x\", factor=1, offset=0)",
        "3:40: 'axis' of storage_align must be an integer, found a string",
    );
}

/// Each position of `text`, mangled by truncation, deletion, swaps and substitutions.
pub(crate) fn mangled(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let subst = [
        '(', ')', ',', '=', '"', '[', ']', '*', '#', '\\', '_', 'x', '0', '-', '.', 'e', ' ', '\n',
        '{', '}', ':',
    ];
    let mut out = Vec::new();
    for i in 0..chars.len() {
        out.push(chars[..i].iter().collect());
        let mut deleted = chars.clone();
        deleted.remove(i);
        out.push(deleted.into_iter().collect());
        if i + 1 < chars.len() {
            let mut swapped = chars.clone();
            swapped.swap(i, i + 1);
            out.push(swapped.into_iter().collect());
        }
        for s in subst {
            let mut replaced = chars.clone();
            replaced[i] = s;
            out.push(replaced.into_iter().collect());
        }
    }
    out
}

#[test]
fn mangled_text_never_panics() {
    let mut ok = 0;
    for sample in [MLC, SMALL] {
        for text in mangled(sample) {
            if let Ok(trace) = parse(&text) {
                ok += 1;
                assert_eq!(parse(&print(&trace)).as_ref(), Ok(&trace), "{text}");
            }
        }
    }
    assert!(ok > 0);
}

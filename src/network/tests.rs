use super::scheduler::BATCHES;
use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const TWO: &str = r#"name = "two"
[[task]]
workload = "matmul:m=16,n=16,k=16"
weight = 3

[[task]]
workload = "conv2d_nchw:n=1,c=4,h=8,w=8,k=4,r=3,s=3,pad=1"
weight = 1
"#;

fn err(text: &str) -> String {
    Network::parse(text, "net.toml").unwrap_err().to_string()
}

#[test]
fn a_network_file_parses_with_weights_and_lines() {
    let n = Network::parse(TWO, "net.toml").unwrap();
    assert_eq!(n.name, "two");
    assert_eq!(n.tasks.len(), 2);
    assert_eq!((n.tasks[0].weight, n.tasks[0].line), (3, 3));
    assert_eq!((n.tasks[1].weight, n.tasks[1].line), (1, 7));
    assert_eq!(n.tasks[1].workload.name, "conv2d_nchw");
}

#[test]
fn workload_text_in_a_multi_line_string_is_a_task() {
    let text = "name = \"t\"\n[[task]]\nworkload = \"\"\"\ninput A: f32[4, 4]\n\
                B[i, j] = relu(A[i, j])\n\"\"\"\nweight = 2\n";
    let n = Network::parse(text, "t.toml").unwrap();
    assert_eq!(n.tasks[0].weight, 2);
    assert!(n.tasks[0].label().contains('#'), "{}", n.tasks[0].label());
}

#[test]
fn bad_files_are_refused_naming_line_task_and_key() {
    let unknown = TWO.replace("weight = 1", "weight = 1\nrepeat = 2");
    let e = err(&unknown);
    assert!(
        e.contains("net.toml") && e.contains("repeat") && e.contains("line 9"),
        "{e}"
    );

    let bad = TWO.replace("k=4,r=3", "k=4,q=3");
    assert_eq!(
        err(&bad),
        "net.toml:7: task 2: key `workload`: 1:33: unknown key 'q' for preset 'conv2d_nchw' \
         (known: n, c, h, w, k, r, s, stride, pad, dilation, dtype, acc)"
    );

    let zero = TWO.replace("weight = 3", "weight = 0");
    assert_eq!(
        err(&zero),
        "net.toml:4: task 1: key `weight`: 0 is not a positive count"
    );
    let negative = TWO.replace("weight = 1", "weight = -2");
    assert_eq!(
        err(&negative),
        "net.toml:8: task 2: key `weight`: -2 is not a positive count"
    );

    let dup = format!("{TWO}\n[[task]]\nworkload = \"matmul:16x16x16\"\nweight = 1\n");
    assert_eq!(
        err(&dup),
        "net.toml:11: task 3: key `workload`: the same workload as task 1 (line 3); give it \
         once with the summed weight"
    );

    assert_eq!(
        err("name = \"x\"\n"),
        "net.toml: the network has no [[task]]"
    );
    assert_eq!(
        err("name = \" \"\n[[task]]\nworkload = \"matmul:4x4x4\"\nweight = 1\n"),
        "net.toml:1: key `name`: the network needs a name"
    );
    let e = err("[[task]]\nworkload = \"matmul:4x4x4\"\nweight = 1\n");
    assert!(e.contains("name"), "{e}");
}

#[test]
fn the_estimated_latency_is_the_weighted_sum_once_every_task_has_one() {
    assert_eq!(
        estimated_latency([(3, Some(2.0)), (1, Some(0.5))]),
        Some(6.5)
    );
    assert_eq!(estimated_latency([(3, Some(2.0)), (1, None)]), None);
}

fn tasks(n: usize) -> Vec<Task> {
    (0..n)
        .map(|i| {
            let spec = format!("matmul:m={},n=16,k=16", 8 * (i + 1));
            Task {
                workload: crate::workload::preset(&spec).unwrap(),
                spec,
                weight: (i % 3 + 1) as u32,
                line: i + 1,
            }
        })
        .collect()
}

#[test]
fn shards_are_disjoint_cover_the_network_and_balance_the_work() {
    let ts = tasks(11);
    for count in 1..=5 {
        let mut seen = vec![0; ts.len()];
        let mut loads = Vec::new();
        for index in 0..count {
            let part = shard(&ts, Shard { index, count });
            loads.push(
                part.iter()
                    .map(|&i| f64::from(ts[i].weight) * ts[i].workload.flops())
                    .sum::<f64>(),
            );
            for i in part {
                seen[i] += 1;
            }
        }
        assert!(seen.iter().all(|&s| s == 1), "count {count}: {seen:?}");
        // Greedy largest-first: no shard exceeds another by more than the largest task.
        let largest = ts
            .iter()
            .map(|t| f64::from(t.weight) * t.workload.flops())
            .fold(0.0, f64::max);
        let (lo, hi) = loads
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
        assert!(hi - lo <= largest, "count {count}: {loads:?}");
    }
}

#[test]
fn shards_do_not_depend_on_the_order_of_the_file() {
    let ts = tasks(9);
    let mut reversed = ts.clone();
    reversed.reverse();
    for index in 0..3 {
        let s = Shard { index, count: 3 };
        let mut a: Vec<String> = shard(&ts, s).iter().map(|&i| ts[i].spec.clone()).collect();
        let mut b: Vec<String> = shard(&reversed, s)
            .iter()
            .map(|&i| reversed[i].spec.clone())
            .collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }
}

#[test]
fn shard_specs_parse_or_say_why_not() {
    assert_eq!("1/4".parse::<Shard>(), Ok(Shard { index: 1, count: 4 }));
    assert_eq!(
        "4/4".parse::<Shard>(),
        Err(ShardError::Range { index: 4, count: 4 })
    );
    assert_eq!(
        "0/0".parse::<Shard>(),
        Err(ShardError::Range { index: 0, count: 0 })
    );
    assert_eq!("x".parse::<Shard>(), Err(ShardError::Syntax("x".into())));
}

fn history(weight: f64, group: &str, curve: &[f64]) -> TaskHistory {
    TaskHistory {
        weight,
        flops: 1e9,
        group: group.into(),
        curve: curve.iter().map(|c| Some(*c)).collect(),
        before: None,
        prior_rounds: 0,
        open: true,
    }
}

/// No exploration, so the gradient alone decides.
fn greedy() -> SchedulerParams {
    SchedulerParams {
        epsilon: 0.0,
        ..SchedulerParams::default()
    }
}

fn pick(ts: &[TaskHistory]) -> Choice {
    choose(ts, &greedy(), &mut ChaCha8Rng::seed_from_u64(0)).unwrap()
}

#[test]
fn every_task_gets_a_warm_up_round_first() {
    let ts = [history(1.0, "a", &[1.0]), history(1.0, "b", &[])];
    assert_eq!(pick(&ts), Choice::WarmUp(1));
}

#[test]
fn a_task_whose_latency_still_falls_gets_the_round_a_flat_one_does_not() {
    let falling = history(1.0, "a", &[20.0, 14.0, 8.0, 2.0]);
    let flat = history(1.0, "b", &[2.0, 2.0, 2.0, 2.0]);
    assert_eq!(pick(&[flat.clone(), falling.clone()]), Choice::Gradient(1));
    assert_eq!(pick(&[falling, flat]), Choice::Gradient(0));
}

#[test]
fn weights_matter() {
    let light = history(1.0, "a", &[2.0, 2.0, 2.0, 2.0]);
    let heavy = history(6.0, "b", &[2.0, 2.0, 2.0, 2.0]);
    assert_eq!(pick(&[light, heavy]), Choice::Gradient(1));
}

#[test]
fn a_task_slower_than_its_similar_tasks_promises_more() {
    // Same FLOPs and curve shape; task 1 is 10x slower than its similar task 2, so the
    // estimate from similar tasks says it can gain more than task 0 (alone in its group).
    let alone = history(1.0, "x", &[1.0, 1.0, 1.0, 1.0]);
    let slow = history(1.0, "y", &[1.0, 1.0, 1.0, 1.0]);
    let fast = history(1.0, "y", &[0.1, 0.1, 0.1, 0.1]);
    let g = |ts: &[TaskHistory], i| gradient(ts, i, &greedy());
    let ts = [alone, slow, fast];
    assert!(g(&ts, 1) < g(&ts, 0), "{} vs {}", g(&ts, 1), g(&ts, 0));
    assert!(g(&ts, 2) <= 0.0);
}

#[test]
fn equal_gradients_are_broken_at_random_and_closed_tasks_never_chosen() {
    let mut ts = vec![history(1.0, "a", &[1.0]), history(1.0, "b", &[1.0])];
    assert!(matches!(pick(&ts), Choice::Tie(_)));
    ts[0].open = false;
    assert_eq!(pick(&ts).task(), 1);
    ts[1].open = false;
    assert_eq!(
        choose(&ts, &greedy(), &mut ChaCha8Rng::seed_from_u64(0)),
        None
    );
}

#[test]
fn exploration_follows_epsilon_and_the_seed() {
    let ts = [
        history(1.0, "a", &[1.0, 1.0]),
        history(9.0, "b", &[1.0, 1.0]),
    ];
    let always = SchedulerParams {
        epsilon: 1.0,
        ..SchedulerParams::default()
    };
    let run = |seed| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..32)
            .map(|_| choose(&ts, &always, &mut rng).unwrap())
            .collect::<Vec<_>>()
    };
    let a = run(7);
    assert_eq!(a, run(7));
    assert!(a.iter().all(|c| matches!(c, Choice::Explore(_))));
    assert!(a.iter().any(|c| c.task() == 0) && a.iter().any(|c| c.task() == 1));
}

#[test]
fn round_robin_gives_equal_shares_whatever_the_curves() {
    let ts = [
        history(1.0, "a", &[20.0, 14.0, 8.0, 2.0]),
        history(9.0, "b", &[2.0, 2.0, 2.0]),
        history(1.0, "c", &[2.0, 2.0, 2.0]),
    ];
    let rr = SchedulerParams {
        policy: Policy::RoundRobin,
        ..SchedulerParams::default()
    };
    let c = choose(&ts, &rr, &mut ChaCha8Rng::seed_from_u64(0));
    assert_eq!(c, Some(Choice::RoundRobin(1)));
}

#[test]
fn the_default_round_leaves_three_quarters_of_the_budget_after_the_warm_up() {
    // ResNet-50's 24 tasks: 24 x 16 x 4 = 1,536 <= 3,000 < 24 x 32 x 4.
    assert_eq!(default_batch(3000, 24), 16);
    assert_eq!(default_batch(6144, 24), 64);
    assert_eq!(default_batch(6143, 24), 32);
    // A few tasks keep the tuner's full rounds; a budget too small for any gets the least.
    assert_eq!(default_batch(3000, 6), 64);
    assert_eq!(default_batch(100, 24), 8);
    assert_eq!(default_batch(0, 0), 64);
    for (trials, tasks) in [(3000, 24), (768, 24), (20000, 30), (500, 3)] {
        let b = default_batch(trials, tasks);
        assert!(BATCHES.contains(&b));
        assert!(b == 8 || 4 * b * tasks <= trials, "{trials} {tasks}: {b}");
    }
}

#[test]
fn a_task_known_before_the_run_needs_no_warm_up_and_brings_its_rounds() {
    // Task 0 was tuned before (a resumed run): a best and 40 rounds of records; task 1 is
    // new. Only the new one is warmed up.
    let mut known = history(1.0, "a", &[]);
    known.before = Some(2.0);
    known.prior_rounds = 40;
    let new = history(1.0, "b", &[]);
    let mut ts = vec![known, new];
    assert_eq!(pick(&ts), Choice::WarmUp(1));
    assert_eq!(ts[0].best(), 2.0);
    // Once both have a best of 2.0, the one with a short history promises more.
    ts[1].curve.push(Some(2.0));
    assert_eq!(pick(&ts), Choice::Gradient(1));
    let g = |ts: &[TaskHistory], i| gradient(ts, i, &greedy());
    assert!(g(&ts, 1) < g(&ts, 0), "{} vs {}", g(&ts, 1), g(&ts, 0));
    // Without the earlier rounds the two would be alike.
    ts[0].prior_rounds = 0;
    assert_eq!(g(&ts, 0), g(&ts, 1));
    // A round in this run improves on the best from before; the curve carries it.
    ts[0].curve.push(Some(1.5));
    assert_eq!(ts[0].known_best(), Some(1.5));
}

#[test]
fn earlier_rounds_leave_the_slope_of_this_runs_curve_alone() {
    // With rounds before the run, the backward slope still reads this run's curve: a
    // falling curve promises more than a flat one, and no gradient is positive.
    let mut falling = history(1.0, "a", &[20.0, 14.0, 8.0, 2.0, 1.5]);
    let mut flat = history(1.0, "b", &[1.5, 1.5, 1.5, 1.5, 1.5]);
    for t in [&mut falling, &mut flat] {
        t.before = Some(25.0);
        t.prior_rounds = 3;
    }
    let ts = [flat, falling];
    let g = |i| gradient(&ts, i, &greedy());
    assert!(g(0) <= 0.0 && g(1) <= 0.0, "{} {}", g(0), g(1));
    assert!(g(1) < g(0), "{} vs {}", g(1), g(0));
    assert_eq!(pick(&ts), Choice::Gradient(1));
    // Only the forward estimate sees them: 3 + 5 rounds, as much again as so far.
    let flat_alone = [ts[0].clone()];
    let expect = 0.8 * (1.5 / 8.0);
    assert!((gradient(&flat_alone, 0, &greedy()) + expect).abs() < 1e-12);
}

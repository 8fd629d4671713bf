//! The shipped network files (benches/networks/) parse, every workload included, with the
//! layer counts their comments give.

use tessel::network::Network;

fn load(name: &str) -> Network {
    let path = format!("{}/benches/networks/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    Network::parse(&text, &path).unwrap_or_else(|e| panic!("{e}"))
}

fn layers(n: &Network) -> u32 {
    n.tasks.iter().map(|t| t.weight).sum()
}

#[test]
fn resnet50_files_hold_53_convs_and_the_classifier_in_24_tasks() {
    for (file, batch) in [("resnet50-b1.toml", 1), ("resnet50-b16.toml", 16)] {
        let n = load(file);
        assert_eq!(n.name, file.trim_end_matches(".toml"));
        assert_eq!((n.tasks.len(), layers(&n)), (24, 54), "{file}");
        let convs: u32 = n
            .tasks
            .iter()
            .filter(|t| t.spec.starts_with("conv2d"))
            .map(|t| t.weight)
            .sum();
        assert_eq!(convs, 53, "{file}");
        assert!(n
            .tasks
            .iter()
            .all(|t| t.spec.contains(&format!("n={batch},"))
                || t.spec.contains(&format!("f32[{batch}, 2048]"))));
    }
}

#[test]
fn bert_files_hold_134_layers_in_9_tasks() {
    for (file, tokens) in [("bert-base-b1.toml", 128), ("bert-base-b16.toml", 2048)] {
        let n = load(file);
        assert_eq!((n.tasks.len(), layers(&n)), (9, 134), "{file}");
        let rows: u32 = n
            .tasks
            .iter()
            .filter(|t| t.spec.contains("softmax") || t.spec.contains("layer_norm"))
            .map(|t| t.weight)
            .sum();
        assert_eq!(rows, 12 + 24 + 1, "{file}");
        assert!(
            n.tasks[0].spec.contains(&format!("f32[{tokens}, 768]")),
            "{file}"
        );
        // 12 layers of 2 x tokens x (4 x 768 x 768 + 2 x 768 x 3072) dense FLOPs, at least.
        let flops: f64 = n
            .tasks
            .iter()
            .map(|t| f64::from(t.weight) * t.workload.flops())
            .sum();
        let dense = 12.0 * 2.0 * tokens as f64 * (4.0 * 768.0 * 768.0 + 2.0 * 768.0 * 3072.0);
        assert!(
            flops > dense && flops < 1.2 * dense,
            "{file}: {flops} vs {dense}"
        );
    }
}

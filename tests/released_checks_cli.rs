//! The paper's Table 5, token claim and Table 7 recomputed from the authors'
//! released runs through `otb table ... --released DIR` (skips without ../shared).

mod common;

use common::{otb, shared_bfcl, stdout_ok};

fn table(which: &str) -> Option<String> {
    let root = shared_bfcl()?.join("released_runs");
    Some(stdout_ok(
        &otb()
            .args(["table", which, "--released"])
            .arg(&root)
            .output()
            .expect("run otb"),
    ))
}

#[test]
fn table5_definitions_from_the_released_runs() {
    let Some(t) = table("table5") else { return };
    // Pooled "first round listed as converged": 2.92 / 2.72 / 2.19 (printed 3.44 / 2.66 / 2.22).
    assert!(t.contains("| pooled | 2.92 | 2.72 | 2.19 |"), "{t}");
    assert!(t.contains("| printed | - | 3.44 | 2.66 | 2.22 |"), "{t}");
}

#[test]
fn the_token_ratios_from_the_released_runs() {
    let Some(t) = table("tokens") else { return };
    // names, exec_multiple: 1.7M / agent tokens = 7.43x; / agent + editor = 3.40x.
    assert!(
        t.contains("| GPT-5 | names | exec_multiple | 228921 |"),
        "{t}"
    );
    assert!(t.contains("7.43x") && t.contains("3.40x"), "{t}");
}

#[test]
fn table7_per_setting_and_pooled_from_the_released_runs() {
    let Some(t) = table("table7") else { return };
    assert!(t.contains("| names | all | 0.80 | 120/150 |"), "{t}");
    assert!(t.contains("| all | all | 0.83 | 374/450 |"), "{t}");
}

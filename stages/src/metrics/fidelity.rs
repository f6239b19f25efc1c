//! Fidelity of each method's final tool descriptions to the gold ones (the paper's
//! Table 6): which docs are a method's final ones, and the mean similarities over the
//! tools compared. The similarities themselves (embedding cosine, ROUGE-1) are
//! computed by the caller (`textsim`).

use super::sum;
use crate::env::{Output, RunOutput};
use std::collections::BTreeMap;

/// (setting, method, agent, editor) of a method's docs.
pub type DocsKey = (String, String, String, String);

/// The stages that write a method's final docs: ToolObserver's `batch-reflect`, each
/// built-in baseline's, and the one `external` stage of every external method
/// (`ext:<name>`, told apart by its cell's method).
pub fn docs_stages() -> Vec<&'static str> {
    let mut stages = vec![crate::batch_reflect::STAGE];
    stages.extend_from_slice(crate::experiment::BASELINES);
    stages.push(crate::baselines::external::STAGE);
    stages
}

/// Whether the docs written by `stage` are per agent (ToolObserver's and
/// Play2Prompt's learn from the agent's play, an external method's may): the other
/// baselines make one set of docs for every agent, which Table 6 shows without one.
pub fn per_agent(stage: &str) -> bool {
    stage == crate::batch_reflect::STAGE
        || stage == crate::baselines::play2prompt::STAGE
        || stage == crate::baselines::external::STAGE
}

/// The final docs of every method: among the outputs of `stages` (the stages that
/// write a method's docs), per setting, method, agent and editor the one of the
/// highest round (the first in drive order among equal rounds), in key order.
pub fn final_docs<'a>(run: &'a RunOutput, stages: &[&str]) -> BTreeMap<DocsKey, &'a Output> {
    let mut finals: BTreeMap<DocsKey, &Output> = BTreeMap::new();
    for o in run.outputs.iter().filter(|o| stages.contains(&o.stage)) {
        let k = (
            o.cell.setting.clone(),
            o.cell.method_name().to_string(),
            o.cell.agent.clone(),
            o.cell.editor.clone(),
        );
        match finals.get(&k) {
            Some(prev) if prev.cell.round >= o.cell.round => {}
            _ => {
                finals.insert(k, o);
            }
        }
    }
    finals
}

/// How one final description compares with its gold one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PairScore {
    /// Embedding cosine (0 for an empty final description or a text with no
    /// embedding).
    pub semantic: f64,
    /// ROUGE-1 F1 (0 for an empty final description).
    pub lexical: f64,
}

/// The mean semantic and lexical similarity over the tools compared, each summed in
/// order; `(0, 0)` for none.
pub fn mean_similarity(pairs: &[PairScore]) -> (f64, f64) {
    if pairs.is_empty() {
        return (0.0, 0.0);
    }
    let n = pairs.len() as f64;
    (
        sum(pairs.iter().map(|p| p.semantic)) / n,
        sum(pairs.iter().map(|p| p.lexical)) / n,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Method;
    use crate::metrics::tokens::tests::{cell, entry};

    #[test]
    fn the_final_docs_are_each_methods_last_round() {
        let tmp = tempfile::tempdir().unwrap();
        let to = Method::ToolObserver;
        let mut n = 0;
        let mut out = |stage: &'static str, c: crate::env::Cell| {
            n += 1;
            Output {
                node: format!("{stage}[{n}]"),
                stage,
                cell: c,
                entry: entry(&tmp.path().join(n.to_string()), |_| Vec::new()),
            }
        };
        let run = RunOutput {
            outputs: vec![
                out("batch-reflect", cell(to, "e", 2)),
                out("batch-reflect", cell(to, "e", 1)),
                out("batch-reflect", cell(to, "e", 2)),
                out("batch-reflect", cell(to, "f", 1)),
                out("easytool", cell(Method::EasyTool, "e", 0)),
                out("explore", cell(to, "e", 3)),
            ],
            ..RunOutput::default()
        };
        let finals = final_docs(&run, &["batch-reflect", "easytool"]);
        let got: Vec<(&str, &str, &str)> = finals
            .iter()
            .map(|(k, o)| (k.1.as_str(), k.3.as_str(), o.node.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("easytool", "e", "easytool[5]"),
                // Round 2 (the first of the two), not the explore of round 3.
                ("toolobserver", "e", "batch-reflect[1]"),
                ("toolobserver", "f", "batch-reflect[4]"),
            ]
        );
    }

    /// An external method's docs (the `external` stage) are final docs of their
    /// own, under the method's name as the experiment file writes it, per agent.
    #[test]
    fn external_methods_have_final_docs_of_their_own() {
        let tmp = tempfile::tempdir().unwrap();
        let ext = Method::external("mine").unwrap();
        let other = Method::external("theirs").unwrap();
        let out = |n: &str, stage: &'static str, c: crate::env::Cell| Output {
            node: n.into(),
            stage,
            cell: c,
            entry: entry(&tmp.path().join(n), |_| Vec::new()),
        };
        let run = RunOutput {
            outputs: vec![
                out(
                    "ext-mine",
                    crate::baselines::external::STAGE,
                    cell(ext, "e", 0),
                ),
                out(
                    "ext-theirs",
                    crate::baselines::external::STAGE,
                    cell(other, "e", 0),
                ),
                out("easytool", "easytool", cell(Method::EasyTool, "e", 0)),
            ],
            ..RunOutput::default()
        };
        let finals = final_docs(&run, &docs_stages());
        let got: Vec<(&str, &str, &str)> = finals
            .iter()
            .map(|(k, o)| (k.1.as_str(), k.2.as_str(), o.node.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("easytool", "a", "easytool"),
                ("ext:mine", "a", "ext-mine"),
                ("ext:theirs", "a", "ext-theirs"),
            ]
        );
        assert!(per_agent(crate::baselines::external::STAGE));
        assert!(per_agent(crate::batch_reflect::STAGE));
        assert!(!per_agent("easytool"));
    }

    #[test]
    fn similarities_are_averaged_over_every_pair() {
        let p = |semantic, lexical| PairScore { semantic, lexical };
        assert_eq!(mean_similarity(&[]), (0.0, 0.0));
        // An empty description's 0 / 0 counts in the mean.
        assert_eq!(
            mean_similarity(&[p(1.0, 0.5), p(0.0, 0.0), p(0.5, 0.25)]),
            (0.5, 0.25)
        );
    }
}

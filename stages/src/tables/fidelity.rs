//! `otb table table6`: fidelity of each method's final tool descriptions to the gold
//! (original) ones -- semantic = sentence-embedding cosine (all-MiniLM-L6-v2),
//! lexical = ROUGE-1 F1 -- per setting x method x agent x editor, as means over the
//! tools that have a gold description.
//!
//! Final descriptions: ToolObserver's last `batch-reflect` docs, a baseline's docs,
//! an external method's (`ext:<name>`) docs.
//! A tool whose final description is empty scores 0 on both (the paper's 0 / 0 for
//! EasyTool when nothing could be written).

use crate::baselines::{cosine, Embed};
use crate::driver::Located;
use crate::experiment::Experiment;
use crate::metrics::fidelity::{self, PairScore};
use crate::models::embed::make_embedder;
use crate::rows::{DocRow, InstanceRow};
use pipeline::{Row, StageError, Store};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;

/// One method's fidelity for one documentation setting and model pair.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "table6",
    doc = "fidelity of final descriptions to gold (embedding cosine, ROUGE-1 F1)"
)]
pub struct FidelityRow {
    /// Documentation setting.
    pub setting: String,
    /// `toolobserver`, `easytool`, `play2prompt`, `draft`, `tracefree` or an
    /// external method (`ext:<name>`, as the experiment file names it).
    pub method: String,
    /// Agent model (Play2Prompt's task model; ToolObserver's explorer).
    pub agent: String,
    /// Editor model.
    pub editor: String,
    /// Tools compared (those with a gold description).
    pub tools: i64,
    /// Mean cosine of sentence embeddings, final vs gold.
    pub semantic: f64,
    /// Mean ROUGE-1 F1, final vs gold.
    pub lexical: f64,
}

/// (final description, gold description) pairs of one docs table.
pub fn pairs(docs: &[DocRow], instances: &[InstanceRow]) -> Vec<(String, String)> {
    let gold: HashMap<&str, HashMap<&str, &str>> = instances
        .iter()
        .map(|i| {
            let m = i
                .functions
                .as_array()
                .map(|fs| {
                    fs.iter()
                        .filter_map(|f| {
                            Some((f.get("name")?.as_str()?, f.get("description")?.as_str()?))
                        })
                        .collect()
                })
                .unwrap_or_default();
            (i.instance_id.as_str(), m)
        })
        .collect();
    let mut out = Vec::new();
    for d in docs {
        let Some(g) = gold.get(d.instance_id.as_str()) else {
            continue;
        };
        let mapping = crate::rows::name_mapping(&d.name_mapping);
        for t in d.tools.as_array().map(Vec::as_slice).unwrap_or(&[]) {
            let shown = t.get("name").and_then(Value::as_str).unwrap_or("");
            let real = mapping
                .iter()
                .find(|(_, s)| s == shown)
                .map(|(r, _)| r.as_str())
                .unwrap_or(shown);
            let Some(gold_desc) = g.get(real).filter(|s| !s.trim().is_empty()) else {
                continue;
            };
            let desc = t.get("description").and_then(Value::as_str).unwrap_or("");
            out.push((desc.to_string(), gold_desc.to_string()));
        }
    }
    out
}

/// Mean (semantic, lexical) over pairs ([`fidelity::mean_similarity`]; an empty
/// final description scores 0 on both).
pub fn score_pairs(pairs: &[(String, String)], embed: &dyn Embed) -> Result<(f64, f64), String> {
    if pairs.is_empty() {
        return Ok((0.0, 0.0));
    }
    let mut texts: Vec<&str> = Vec::with_capacity(pairs.len() * 2);
    for (a, b) in pairs {
        texts.push(a);
        texts.push(b);
    }
    let nonempty: Vec<&str> = texts
        .iter()
        .copied()
        .filter(|t| !t.trim().is_empty())
        .collect();
    let vecs = embed.embed(&nonempty)?;
    let by_text: HashMap<&str, &Vec<f32>> = nonempty.iter().copied().zip(vecs.iter()).collect();
    let scores: Vec<PairScore> = pairs
        .iter()
        .map(|(a, b)| {
            if a.trim().is_empty() {
                return PairScore::default();
            }
            let semantic = match (by_text.get(a.as_str()), by_text.get(b.as_str())) {
                (Some(x), Some(y)) => cosine(x, y),
                _ => 0.0,
            };
            PairScore {
                semantic,
                lexical: textsim::rouge1_f1(a, b),
            }
        })
        .collect();
    Ok(fidelity::mean_similarity(&scores))
}

/// Table 6 (fidelity): one row per setting, method, agent and editor, and the notes
/// printed under it.
pub struct Table6 {
    /// The table's rows.
    pub rows: Vec<FidelityRow>,
    /// Notes about the run (no results or no learned documentation yet).
    pub notes: Vec<String>,
}

/// Builds Table 6 from the experiment's outputs in `store`: each method's final docs
/// scored against the gold descriptions (the embedder is the one of DRAFT's budget).
pub fn build(store: &Store, exp: &Experiment, located: &Located) -> Result<Table6, StageError> {
    let (out, _) = (&located.run, &located.reports);
    let mut notes = Vec::new();
    let Some(data) = out
        .outputs
        .iter()
        .find(|o| o.stage == crate::bfcl::data::STAGE)
    else {
        notes.push(format!(
            "{}: no results in the store yet (run `otb run {}`)",
            exp.name,
            exp.path.display()
        ));
        return Ok(Table6 {
            rows: Vec::new(),
            notes,
        });
    };
    let instances: Vec<InstanceRow> = data.entry.read()?;
    let finals = fidelity::final_docs(out, &fidelity::docs_stages());
    if finals.is_empty() {
        notes.push(format!(
            "{}: no learned documentation in the store yet (methods toolobserver, easytool, play2prompt, draft, tracefree, ext:<name>)",
            exp.name
        ));
        return Ok(Table6 {
            rows: Vec::new(),
            notes,
        });
    }
    let embed_dir = store.root().join("cache").join("embed");
    let embed = make_embedder(&exp.baselines.draft.embedder, &embed_dir)
        .map_err(|e| StageError::from(e).in_stage("table6"))?;
    let mut rows = Vec::new();
    for ((setting, method, agent, editor), o) in finals {
        let docs: Vec<DocRow> = o.entry.read()?;
        let p = pairs(&docs, &instances);
        let (semantic, lexical) =
            score_pairs(&p, embed.as_ref()).map_err(|e| StageError::infra("table6", e))?;
        rows.push(FidelityRow {
            setting,
            method,
            agent: if fidelity::per_agent(o.stage) {
                agent
            } else {
                String::new()
            },
            editor,
            tools: p.len() as i64,
            semantic,
            lexical,
        });
    }
    rows.dedup();
    Ok(Table6 { rows, notes })
}

use crate::tables::report::{csv_row, md_row};

impl crate::tables::report::TableReport for Table6 {
    type Row = FidelityRow;
    const NAME: &'static str = "table6";

    fn rows(&self) -> &[FidelityRow] {
        &self.rows
    }

    fn render(&self, csv: bool) -> String {
        let mut out = String::new();
        if csv {
            out.push_str("setting,method,agent,editor,tools,semantic,lexical\n");
            for r in &self.rows {
                out.push_str(&csv_row(&[
                    &r.setting,
                    &r.method,
                    &r.agent,
                    &r.editor,
                    &r.tools,
                    &format!("{:.4}", r.semantic),
                    &format!("{:.4}", r.lexical),
                ]));
            }
            return out;
        }
        out.push_str("Table 6 -- fidelity of learned descriptions to gold: semantic (MiniLM cosine) / lexical (ROUGE-1 F1)\n");
        out.push_str("(paper, names+desc: TO GPT-5 .78/.43, P2P .70/.31, ET .71/.43)\n\n");
        out.push_str("| Setting | Method | Agent | Editor | Tools | Semantic | Lexical |\n|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            out.push_str(&md_row(&[
                &r.setting,
                &r.method,
                &r.agent,
                &r.editor,
                &r.tools,
                &format!("{:.2}", r.semantic),
                &format!("{:.2}", r.lexical),
            ]));
        }
        crate::tables::report::end_with_notes(out, &self.notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baselines::BagOfWords;
    use serde_json::json;

    #[test]
    fn pairs_follow_the_name_mapping_and_skip_tools_without_gold() {
        let inst = InstanceRow {
            instance_id: "i".into(),
            category: "exec_multiple".into(),
            idx: 0,
            question: String::new(),
            functions: json!([
                {"name": "math_gcd", "description": "Greatest common divisor."},
                {"name": "nodesc", "description": ""}
            ]),
            ground_truth: json!([]),
            execution_result_type: json!([]),
        };
        let doc = DocRow {
            instance_id: "i".into(),
            setting: "names".into(),
            round: 1,
            tools: json!([{"name": "function_1", "description": "gcd"}, {"name": "function_2", "description": "x"}]),
            name_mapping: json!([["math_gcd", "function_1"], ["nodesc", "function_2"]]),
            changed: true,
            frozen: false,
            demos: Value::Null,
        };
        let p = pairs(&[doc], &[inst]);
        assert_eq!(
            p,
            vec![("gcd".to_string(), "Greatest common divisor.".to_string())]
        );
        let (sem, lex) = score_pairs(&[("".into(), "gold text".into())], &BagOfWords).unwrap();
        assert_eq!((sem, lex), (0.0, 0.0));
        let (sem, lex) =
            score_pairs(&[("gold text".into(), "gold text".into())], &BagOfWords).unwrap();
        assert!((sem - 1.0).abs() < 1e-6 && (lex - 1.0).abs() < 1e-9);
    }
}

//! Cost: tokens per stage, method, role and model, from each computed node's
//! accounting (a documentation method's own rows split its calls by role), and
//! dollars from an optional price file.

use super::model::CostRow;
use super::source::Source;
use crate::rows::DocCallRow;
use pipeline::{Row, StoreError};
use std::collections::BTreeMap;
use std::path::Path;

/// A model's price, dollars per million tokens.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million prompt (input) tokens.
    pub input: f64,
    /// Per million completion (output) tokens.
    pub output: f64,
}

/// `--prices FILE`: `[prices."<model spec>"]` tables with `input` and `output`.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// Model spec (as the experiment writes it) -> price.
    pub prices: BTreeMap<String, Price>,
}

impl Prices {
    /// Read a price file; a file that is not one is the user's error.
    pub fn load(path: &Path) -> Result<Prices, crate::InputError> {
        let text = datasets::files::read_text(path, datasets::files::SMALL_TEXT)
            .map_err(|e| crate::InputError(format!("{}: {e}", path.display())))?;
        let p: Prices = toml::from_str(&text).map_err(|e| {
            crate::InputError(format!(
                "{}: not a price file ([prices.\"<model>\"] input = .., output = .., dollars per million tokens): {}",
                path.display(),
                e.message()
            ))
        })?;
        if let Some((m, _)) = p.prices.iter().find(|(_, v)| {
            !(v.input >= 0.0 && v.output >= 0.0 && v.input.is_finite() && v.output.is_finite())
        }) {
            return Err(crate::InputError(format!(
                "{}: the price of {m} must be a non-negative number",
                path.display()
            )));
        }
        Ok(p)
    }

    /// Dollars of `prompt` and `completion` tokens of `model`, if the file prices it.
    pub fn dollars(&self, model: &str, prompt: u64, completion: u64) -> Option<f64> {
        self.prices
            .get(model)
            .map(|p| (prompt as f64 * p.input + completion as f64 * p.output) / 1e6)
    }
}

/// Whose model a stage calls: the editor's shared stages, else what an environment
/// of `src` says of its own ([`crate::experiment::Reader::role_of`]).
fn role(src: &Source, stage: &str) -> &'static str {
    match stage {
        crate::batch_reflect::STAGE | crate::offline::MERGE_STAGE => "editor",
        _ => src
            .environments
            .environments()
            .find_map(|e| e.reader().role_of(stage))
            .unwrap_or("-"),
    }
}

/// The cost rows of `src` (one per stage, method, role and model with calls): each
/// computed node's spend, summed by [`crate::metrics::cost::by_key`].
pub fn collect(src: &Source, prices: Option<&Prices>) -> Result<Vec<CostRow>, StoreError> {
    let mut spend = Vec::new();
    for n in &src.nodes {
        let Some(o) = src.out(&n.node) else { continue };
        let u = &o.entry.manifest.usage;
        if u.calls == 0 && u.prompt_tokens == 0 {
            continue;
        }
        let l = &o.cell;
        let row = |role: String, model: String| CostRow {
            stage: n.stage.clone(),
            method: l.method_name().to_string(),
            role,
            model,
            ..CostRow::default()
        };
        if o.entry.manifest.outputs.contains_key(DocCallRow::TABLE) {
            // A documentation method's own rows: one per call, by role.
            let rows: Vec<DocCallRow> = o.entry.read()?;
            for r in rows {
                spend.push(CostRow {
                    calls: 1,
                    prompt: r.prompt_tokens.max(0) as u64,
                    completion: r.completion_tokens.max(0) as u64,
                    reasoning: r.reasoning_tokens.max(0) as u64,
                    ..row(r.role, r.model)
                });
            }
            continue;
        }
        let role = role(src, &n.stage);
        let model = match role {
            "agent" => l.agent.clone(),
            "editor" => l.editor.clone(),
            _ => "-".into(),
        };
        spend.push(CostRow {
            calls: u.calls,
            prompt: u.prompt_tokens,
            completion: u.completion_tokens,
            reasoning: u.reasoning_tokens,
            ..row(role.into(), model)
        });
    }
    Ok(crate::metrics::cost::by_key(spend, |model, p, c| {
        prices.and_then(|ps| ps.dollars(model, p, c))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_are_per_million_tokens_and_checked() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("p.toml");
        std::fs::write(
            &f,
            "[prices.\"openai:gpt-5\"]\ninput = 1.25\noutput = 10.0\n",
        )
        .unwrap();
        let p = Prices::load(&f).unwrap();
        assert_eq!(p.dollars("openai:gpt-5", 1_000_000, 100_000), Some(2.25));
        assert_eq!(p.dollars("other", 1, 1), None);
        std::fs::write(&f, "[prices.x]\ninput = -1.0\noutput = 1.0\n").unwrap();
        assert!(Prices::load(&f).unwrap_err().0.contains("non-negative"));
        std::fs::write(&f, "[prices.x]\nin = 1.0\n").unwrap();
        assert!(Prices::load(&f).unwrap_err().0.contains("not a price file"));
    }
}

//! Cost: model calls and tokens per stage, method, role and model, dollars from
//! prices, and the totals (the report's "Cost" section).

use super::sum;
use std::collections::BTreeMap;

/// Tokens and dollars per stage, method, role and model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostRow {
    /// The stage.
    pub stage: String,
    /// The method.
    pub method: String,
    /// `agent`, `editor`, `judge` or `-`.
    pub role: String,
    /// The model spec.
    pub model: String,
    /// Model calls (cached ones included).
    pub calls: u64,
    /// Prompt tokens.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
    /// Reasoning tokens (within completion where the API counts them so).
    pub reasoning: u64,
    /// Dollars, when the price file names the model.
    pub dollars: Option<f64>,
}

/// `spend` (one row per node, or per call where a node records its calls) summed per
/// stage, method, role and model, in that key's order; each sum priced by `price`
/// (the model, prompt and completion tokens: dollars, `None` when unpriced).
pub fn by_key(
    spend: impl IntoIterator<Item = CostRow>,
    price: impl Fn(&str, u64, u64) -> Option<f64>,
) -> Vec<CostRow> {
    type Key = (String, String, String, String);
    let mut acc: BTreeMap<Key, CostRow> = BTreeMap::new();
    for s in spend {
        let k = (
            s.stage.clone(),
            s.method.clone(),
            s.role.clone(),
            s.model.clone(),
        );
        let row = acc.entry(k).or_insert_with(|| CostRow {
            calls: 0,
            prompt: 0,
            completion: 0,
            reasoning: 0,
            dollars: None,
            ..s.clone()
        });
        row.calls += s.calls;
        row.prompt += s.prompt;
        row.completion += s.completion;
        row.reasoning += s.reasoning;
    }
    let mut rows: Vec<CostRow> = acc.into_values().collect();
    for r in &mut rows {
        r.dollars = price(&r.model, r.prompt, r.completion);
    }
    rows
}

/// The totals of cost rows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CostTotal {
    /// Model calls.
    pub calls: u64,
    /// Prompt tokens.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
    /// Dollars of the priced rows, summed in order (0 with none).
    pub dollars: f64,
}

/// The totals of `rows`.
pub fn total(rows: &[CostRow]) -> CostTotal {
    CostTotal {
        calls: rows.iter().map(|r| r.calls).sum(),
        prompt: rows.iter().map(|r| r.prompt).sum(),
        completion: rows.iter().map(|r| r.completion).sum(),
        dollars: sum(rows.iter().filter_map(|r| r.dollars)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        stage: &str,
        model: &str,
        calls: u64,
        prompt: u64,
        completion: u64,
        reasoning: u64,
        dollars: Option<f64>,
    ) -> CostRow {
        CostRow {
            stage: stage.into(),
            method: "m".into(),
            role: "agent".into(),
            model: model.into(),
            calls,
            prompt,
            completion,
            reasoning,
            dollars,
        }
    }

    fn spend(stage: &str, model: &str, calls: u64, prompt: u64) -> CostRow {
        row(stage, model, calls, prompt, 1, 2, Some(99.0))
    }

    #[test]
    fn spend_is_summed_per_key_in_key_order_and_priced_per_sum() {
        let rows = by_key(
            [
                spend("b", "x", 1, 10),
                spend("a", "y", 2, 20),
                spend("b", "x", 3, 30),
                spend("b", "z", 1, 1),
            ],
            |model, p, c| (model != "z").then(|| (p + c) as f64 / 2.0),
        );
        assert_eq!(
            rows,
            [
                row("a", "y", 2, 20, 1, 2, Some(10.5)),
                row("b", "x", 4, 40, 2, 4, Some(21.0)),
                row("b", "z", 1, 1, 1, 2, None),
            ]
        );
        let t = total(&rows);
        assert_eq!(
            t,
            CostTotal {
                calls: 7,
                prompt: 61,
                completion: 4,
                dollars: 31.5
            }
        );
        assert_eq!(total(&[]).dollars, 0.0);
    }
}

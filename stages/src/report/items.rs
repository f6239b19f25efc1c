//! The items of every cell: BFCL instances (the `evaluate` node's verdicts with the
//! trajectory, the documentation and the question upstream of it), chess games (an
//! exploration node's games with the evaluation's per-call checks) and search
//! episodes (with the questions' truths and the judge's verdicts). Every text a model
//! wrote is capped here ([`Cap`]) before it reaches the page.

use super::model::{Block, Cell, Item};
use super::source::{Out, Source};
use crate::chess::rows::{CallCheckRow, GameRow};
use crate::rows::{DocRow, InstanceRow, ScoreRow, TrajectoryRow};
use crate::search::rows::{EpisodeRow, JudgeRow, QuestionRow};
use pipeline::{Row, StoreError};
use serde_json::Value;
use std::collections::HashMap;

/// Caps every text embedded in a report and counts what it cut.
pub struct Cap {
    /// Bytes kept of one text.
    pub limit: usize,
    /// Texts cut.
    pub texts: usize,
    /// Bytes cut in all.
    pub bytes: usize,
}

impl Cap {
    /// A cap of `limit` bytes per text.
    pub fn new(limit: usize) -> Cap {
        Cap {
            limit,
            texts: 0,
            bytes: 0,
        }
    }

    /// `s`, or its first `limit` bytes (at a character boundary) and a note of how
    /// much was cut.
    pub fn text(&mut self, s: &str) -> String {
        if s.len() <= self.limit {
            return s.to_string();
        }
        let mut end = self.limit;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.texts += 1;
        self.bytes += s.len() - end;
        format!(
            "{}\n[... cut by the report: {} more bytes; the store has the whole text]",
            &s[..end],
            s.len() - end
        )
    }

    /// A JSON value as indented text, capped.
    pub fn json(&mut self, v: &Value) -> String {
        let s = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
        self.text(&s)
    }
}

/// The stages whose nodes hold items.
pub fn holds_items(stage: &str) -> bool {
    matches!(
        stage,
        crate::bfcl::evaluate::STAGE | crate::chess::EXPLORE_STAGE | crate::search::EXPLORE_STAGE
    )
}

fn env_of(stage: &str) -> &'static str {
    match stage {
        crate::chess::EXPLORE_STAGE => "chess",
        crate::search::EXPLORE_STAGE => "search",
        _ => "bfcl",
    }
}

fn read<R: Row>(o: Option<&Out>) -> Result<Vec<R>, StoreError> {
    match o {
        Some(o) => o.entry.read(),
        None => Ok(Vec::new()),
    }
}

fn split_of(node: &str) -> String {
    for s in ["test", "train"] {
        if node.contains(&format!(" {s}")) {
            return s.into();
        }
    }
    String::new()
}

/// The grid nodes that hold items, in plan order, each once, with their stage and
/// cell: computed ones with their output's label, the others with the drive's; then
/// any computed output no plan node lists.
pub fn grid(src: &Source) -> Vec<(String, String, crate::at::Label)> {
    let mut listed = std::collections::HashSet::new();
    let mut grid = Vec::new();
    let labels: HashMap<&str, &crate::at::Label> =
        src.cells.iter().map(|(n, l)| (n.as_str(), l)).collect();
    for n in &src.nodes {
        if !holds_items(&n.stage) {
            continue;
        }
        let label = match src.out(&n.node) {
            Some(o) => o.label.clone(),
            None => match labels.get(n.node.as_str()) {
                Some(l) => (*l).clone(),
                None => continue,
            },
        };
        if listed.insert(n.node.clone()) {
            grid.push((n.node.clone(), n.stage.clone(), label));
        }
    }
    for o in &src.outs {
        if holds_items(&o.stage) && listed.insert(o.node.clone()) {
            grid.push((o.node.clone(), o.stage.clone(), o.label.clone()));
        }
    }
    grid
}

/// Every cell of `grid` (computed or not, in its order) and the items of the
/// computed ones. `progress` is told after each cell.
pub fn collect(
    src: &Source,
    grid: Vec<(String, String, crate::at::Label)>,
    cap: &mut Cap,
    mut progress: impl FnMut(),
) -> Result<(Vec<Cell>, Vec<Item>), StoreError> {
    let mut cells = Vec::new();
    let mut items = Vec::new();
    for (node, stage, label) in grid {
        let id = cells.len();
        let mut cell = Cell {
            id,
            env: env_of(&stage),
            node: node.clone(),
            setting: label.setting.clone(),
            method: label.method.clone(),
            agent: label.agent.clone(),
            editor: label.editor.clone(),
            round: label.round,
            split: split_of(&node),
            state: src.state(&node),
            n: 0,
            mean: None,
            errors: 0,
            p_a: None,
            docs: None,
            page: None,
        };
        if let Some(o) = src.out(&node) {
            cell.state = "done".into();
            let mut its = match cell.env {
                "chess" => chess(src, o, &mut cell, cap)?,
                "search" => search(src, o, &mut cell, cap)?,
                _ => bfcl(src, o, &mut cell, cap)?,
            };
            for it in &mut its {
                it.cell = id;
            }
            cell.n = its.len();
            cell.errors = its.iter().filter(|i| i.error.is_some()).count();
            if !its.is_empty() {
                cell.mean = Some(its.iter().map(|i| i.score).sum::<f64>() / its.len() as f64);
            }
            items.extend(its);
        }
        cells.push(cell);
        progress();
    }
    Ok((cells, items))
}

fn verdict(score: f64, error: &Option<String>) -> &'static str {
    if error.is_some() && score < 1.0 {
        "error"
    } else if score >= 1.0 {
        "right"
    } else if score > 0.0 {
        "draw"
    } else {
        "wrong"
    }
}

fn tokens(p: i64, c: i64, r: i64) -> String {
    if r > 0 {
        format!("{p} prompt, {c} completion ({r} reasoning)")
    } else {
        format!("{p} prompt, {c} completion")
    }
}

/// The tools of a documentation row as the agent read them: each tool's name and
/// description, then its parameters as JSON.
pub fn docs_text(tools: &Value) -> String {
    let mut out = String::new();
    for t in tools.as_array().into_iter().flatten() {
        let name = t.get("name").and_then(Value::as_str).unwrap_or("?");
        let desc = t.get("description").and_then(Value::as_str).unwrap_or("");
        out.push_str(&format!("{name}\n  {}\n", desc.replace('\n', "\n  ")));
        if let Some(p) = t.get("parameters") {
            let params = serde_json::to_string(p).unwrap_or_default();
            out.push_str(&format!("  parameters: {params}\n"));
        }
        out.push('\n');
    }
    out
}

fn bfcl(src: &Source, o: &Out, cell: &mut Cell, cap: &mut Cap) -> Result<Vec<Item>, StoreError> {
    let scores: Vec<ScoreRow> = o.entry.read()?;
    if !scores.is_empty() {
        let n = scores.len() as f64;
        cell.p_a = Some((
            scores.iter().map(|s| s.p).sum::<f64>() / n,
            scores.iter().map(|s| s.a).sum::<f64>() / n,
        ));
    }
    let traj: Vec<TrajectoryRow> = read(src.upstream(&o.node, TrajectoryRow::TABLE, None))?;
    let docs: Vec<DocRow> = read(src.upstream(&o.node, DocRow::TABLE, Some("docs")))?;
    let inst: Vec<InstanceRow> = read(src.upstream(&o.node, InstanceRow::TABLE, None))?;
    let traj: HashMap<&str, &TrajectoryRow> =
        traj.iter().map(|t| (t.instance_id.as_str(), t)).collect();
    let docs: HashMap<&str, &DocRow> = docs.iter().map(|d| (d.instance_id.as_str(), d)).collect();
    let inst: HashMap<&str, &InstanceRow> =
        inst.iter().map(|i| (i.instance_id.as_str(), i)).collect();
    let mut items = Vec::with_capacity(scores.len());
    for s in &scores {
        let id = s.instance_id.as_str();
        let mut detail = Vec::new();
        if let Some(i) = inst.get(id) {
            detail.push(Block::Text {
                t: "Question".into(),
                v: cap.text(&i.question),
            });
        }
        if let Some(d) = docs.get(id) {
            detail.push(Block::Code {
                t: format!("Documentation the agent saw (round {})", d.round),
                v: cap.text(&docs_text(&d.tools)),
            });
            if !d.demos.is_null() {
                detail.push(Block::Code {
                    t: "Demonstrations in the prompt".into(),
                    v: cap.json(&d.demos),
                });
            }
        }
        let mut summary = String::new();
        let error = s.error_kind.clone();
        if let Some(t) = traj.get(id) {
            let rows: Vec<Vec<String>> = t
                .calls
                .iter()
                .map(|c| {
                    vec![
                        cap.text(&c.function),
                        cap.text(&serde_json::to_string(&c.args).unwrap_or_default()),
                    ]
                })
                .collect();
            summary = t
                .calls
                .iter()
                .map(|c| c.function.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            detail.push(Block::Table {
                t: format!("Tool calls ({})", t.calls.len()),
                head: vec!["function".into(), "arguments".into()],
                rows,
            });
            if let Some(c) = t.content.as_deref().filter(|c| !c.is_empty()) {
                detail.push(Block::Text {
                    t: "Reply text".into(),
                    v: cap.text(c),
                });
            }
            let mut kv = vec![
                ("model".into(), t.model.clone()),
                (
                    "tokens".into(),
                    tokens(t.prompt_tokens, t.completion_tokens, t.reasoning_tokens),
                ),
                ("latency".into(), format!("{} ms", t.latency_ms)),
            ];
            if let Some(k) = &t.error_kind {
                kv.push(("error".into(), k.clone()));
                kv.push((
                    "error text".into(),
                    cap.text(t.error.as_deref().unwrap_or("")),
                ));
            }
            if t.reused {
                kv.push((
                    "reused".into(),
                    "copied from the previous round (documentation unchanged)".into(),
                ));
            }
            detail.push(Block::Kv {
                t: "Model call".into(),
                v: kv,
            });
        }
        let outputs: Vec<Vec<String>> = s
            .outputs
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                let ok = v.get("repr").and_then(Value::as_str);
                let err = v.get("error").and_then(Value::as_str);
                match (ok, err) {
                    (Some(r), _) => vec!["ok".into(), cap.text(r)],
                    (None, Some(e)) => vec!["error".into(), cap.text(e)],
                    _ => vec!["".into(), cap.text(&v.to_string())],
                }
            })
            .collect();
        if !outputs.is_empty() {
            detail.push(Block::Table {
                t: "Execution".into(),
                head: vec!["".into(), "result".into()],
                rows: outputs,
            });
        }
        detail.push(Block::Kv {
            t: "Verdict".into(),
            v: vec![
                ("E".into(), if s.e { "right" } else { "wrong" }.into()),
                ("reason".into(), cap.text(&s.e_reason)),
                ("P".into(), format!("{:.2}", s.p)),
                ("A".into(), format!("{:.2}", s.a)),
                ("A (corrected)".into(), format!("{:.2}", s.a_corrected)),
            ],
        });
        if let Some(i) = inst.get(id) {
            detail.push(Block::Code {
                t: "Ground truth".into(),
                v: cap.json(&i.ground_truth),
            });
        }
        let score = if s.e { 1.0 } else { 0.0 };
        if summary.is_empty() {
            summary = error.clone().unwrap_or_else(|| "no call".into());
        }
        items.push(Item {
            cell: 0,
            id: id.to_string(),
            verdict: verdict(score, &error),
            score,
            error,
            summary: cap.text(&format!("{summary} — {}", s.e_reason)),
            detail,
        });
    }
    Ok(items)
}

fn cell_docs(src: &Source, o: &Out, cell: &mut Cell, cap: &mut Cap) -> Result<(), StoreError> {
    let docs: Vec<DocRow> = read(src.upstream(&o.node, DocRow::TABLE, Some("docs")))?;
    if let Some(d) = docs.first() {
        let mut text = docs_text(&d.tools);
        if !d.demos.is_null() {
            text.push_str(&format!(
                "demonstrations: {}\n",
                serde_json::to_string_pretty(&d.demos).unwrap_or_default()
            ));
        }
        cell.docs = Some(cap.text(&text));
    }
    Ok(())
}

fn chess(src: &Source, o: &Out, cell: &mut Cell, cap: &mut Cap) -> Result<Vec<Item>, StoreError> {
    cell_docs(src, o, cell, cap)?;
    let games: Vec<GameRow> = o.entry.read()?;
    let checks: Vec<CallCheckRow> = read(src.downstream(&o.node, CallCheckRow::TABLE))?;
    let mut by_ply: HashMap<(&str, i64), &CallCheckRow> = HashMap::new();
    for c in &checks {
        by_ply.insert((c.game_id.as_str(), c.ply), c);
    }
    let mut items = Vec::with_capacity(games.len());
    for g in &games {
        let mut rows = Vec::new();
        let mut fens = Vec::new();
        let mut labels = Vec::new();
        let mut tools_used = Vec::new();
        let (mut optimal, mut checked) = (0, 0);
        let plies = g.plies.as_array().cloned().unwrap_or_default();
        for (i, p) in plies.iter().enumerate() {
            let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let n = p.get("ply").and_then(Value::as_i64).unwrap_or(i as i64 + 1);
            let tool = s("tool");
            let check = by_ply.get(&(g.game_id.as_str(), n));
            let best = check.map(|c| c.optimal.clone()).unwrap_or_default();
            if let Some(c) = check {
                checked += 1;
                optimal += usize::from(c.is_optimal);
            }
            if !tool.is_empty() {
                tools_used.push(tool.clone());
            }
            let eval = p
                .get("eval_after")
                .and_then(Value::as_i64)
                .map(|e| e.to_string())
                .unwrap_or_default();
            let mark = match check {
                Some(c) if c.is_optimal => "yes",
                Some(_) => "no",
                None => "",
            };
            rows.push(vec![
                n.to_string(),
                s("side"),
                cap.text(&s("san")),
                cap.text(&tool),
                best,
                mark.into(),
                eval.clone(),
            ]);
            fens.push(s("fen_before"));
            labels.push(format!(
                "before ply {n}: {} plays {}{}",
                s("side"),
                s("san"),
                if tool.is_empty() {
                    String::new()
                } else {
                    format!(" (tool {tool})")
                }
            ));
            if i + 1 == plies.len() {
                fens.push(s("fen_after"));
                labels.push(format!("final position after ply {n}: {}", g.result));
            }
        }
        let score = g.score.unwrap_or(0.0);
        let mut kv = vec![
            ("position".into(), g.position_id.clone()),
            ("agent plays".into(), g.agent_side.clone()),
            ("opponent Elo".into(), g.opponent_elo.to_string()),
            ("result".into(), format!("{} ({})", g.result, g.end_reason)),
            (
                "evaluation".into(),
                format!(
                    "{} at the start, {} at the end (centipawns, White's view)",
                    g.start_eval.map(|e| e.to_string()).unwrap_or("-".into()),
                    g.final_eval.map(|e| e.to_string()).unwrap_or("-".into())
                ),
            ),
            (
                "tokens".into(),
                tokens(g.prompt_tokens, g.completion_tokens, g.reasoning_tokens),
            ),
        ];
        if checked > 0 {
            kv.push((
                "best tool".into(),
                format!("{optimal} of {checked} calls picked the optimal tool"),
            ));
        }
        if g.failed_calls > 0 {
            kv.push((
                "failed calls".into(),
                format!(
                    "{} ({})",
                    g.failed_calls,
                    g.error_kind.clone().unwrap_or_default()
                ),
            ));
        }
        let mut detail = vec![Block::Kv {
            t: "Game".into(),
            v: kv,
        }];
        detail.push(Block::Table {
            t: format!("Moves ({})", plies.len()),
            head: [
                "ply",
                "side",
                "move",
                "tool chosen",
                "optimal tool",
                "optimal?",
                "eval after",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        });
        if !fens.is_empty() {
            detail.push(Block::Board {
                t: "Board".into(),
                fens,
                labels,
            });
        }
        let error = g.error_kind.clone();
        let summary = format!(
            "{} vs {} ({}), {} agent moves{}",
            g.result,
            g.opponent_elo,
            g.agent_side,
            tools_used.len(),
            if checked > 0 {
                format!(", {optimal}/{checked} optimal tool")
            } else {
                String::new()
            }
        );
        items.push(Item {
            cell: 0,
            id: g.game_id.clone(),
            verdict: verdict(score, &error),
            score,
            error,
            summary,
            detail,
        });
    }
    Ok(items)
}

fn search(src: &Source, o: &Out, cell: &mut Cell, cap: &mut Cap) -> Result<Vec<Item>, StoreError> {
    cell_docs(src, o, cell, cap)?;
    let eps: Vec<EpisodeRow> = o.entry.read()?;
    let qs: Vec<QuestionRow> = read(src.upstream(&o.node, QuestionRow::TABLE, None))?;
    let judged: Vec<JudgeRow> = read(src.downstream(&o.node, JudgeRow::TABLE))?;
    let qs: HashMap<&str, &QuestionRow> = qs.iter().map(|q| (q.question_id.as_str(), q)).collect();
    let judged: HashMap<(&str, &str), &JudgeRow> = judged
        .iter()
        .map(|j| ((j.question_id.as_str(), j.split.as_str()), j))
        .collect();
    let mut items = Vec::with_capacity(eps.len());
    for e in &eps {
        let mut detail = Vec::new();
        if let Some(q) = qs.get(e.question_id.as_str()) {
            detail.push(Block::Text {
                t: "Question".into(),
                v: cap.text(&q.question),
            });
            let mut kv = vec![("answer".into(), cap.text(&q.answer))];
            if !q.aliases.is_empty() {
                kv.push(("also accepted".into(), cap.text(&q.aliases.join("; "))));
            }
            kv.push(("domain".into(), q.domain.clone()));
            detail.push(Block::Kv {
                t: "Truth".into(),
                v: kv,
            });
        }
        for (i, step) in e.steps.as_array().into_iter().flatten().enumerate() {
            let calls: Vec<Vec<String>> = step
                .get("calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| {
                    let f = c
                        .get("function")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string();
                    let args = c.get("args").map(|a| a.to_string()).unwrap_or_default();
                    vec![cap.text(&f), cap.text(&args)]
                })
                .collect();
            if let Some(c) = step
                .get("content")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
            {
                detail.push(Block::Text {
                    t: format!("Turn {}: reply text", i + 1),
                    v: cap.text(c),
                });
            }
            if !calls.is_empty() {
                detail.push(Block::Table {
                    t: format!("Turn {}: queries", i + 1),
                    head: vec!["tool".into(), "arguments".into()],
                    rows: calls,
                });
            }
            if let Some(r) = step.get("results").filter(|r| !r.is_null()) {
                let text = match r {
                    Value::String(s) => s.clone(),
                    Value::Array(a) => a
                        .iter()
                        .map(|x| x.as_str().map(str::to_string).unwrap_or(x.to_string()))
                        .collect::<Vec<_>>()
                        .join("\n\n"),
                    other => serde_json::to_string_pretty(other).unwrap_or_default(),
                };
                detail.push(Block::Code {
                    t: format!("Turn {}: returned documents", i + 1),
                    v: cap.text(&text),
                });
            }
        }
        let judge = judged.get(&(e.question_id.as_str(), e.split.as_str()));
        let correct = match judge.and_then(|j| j.verdict) {
            Some(v) => v,
            None => e.correct,
        };
        let mut kv = vec![
            (
                "final answer".into(),
                cap.text(e.answer.as_deref().unwrap_or("(none)")),
            ),
            (
                "exact match".into(),
                if e.correct { "yes" } else { "no" }.into(),
            ),
            ("token F1".into(), format!("{:.2}", e.f1)),
            ("tool calls".into(), e.tool_calls.to_string()),
            (
                "tokens".into(),
                tokens(e.prompt_tokens, e.completion_tokens, e.reasoning_tokens),
            ),
        ];
        if e.forced {
            kv.push((
                "forced".into(),
                "the turn budget ran out; the answer was asked for".into(),
            ));
        }
        if let Some(k) = &e.error_kind {
            kv.push(("error".into(), k.clone()));
        }
        detail.push(Block::Kv {
            t: "Answer".into(),
            v: kv,
        });
        if let Some(j) = judge {
            detail.push(Block::Kv {
                t: format!("Judge ({})", j.model),
                v: vec![
                    (
                        "verdict".into(),
                        match j.verdict {
                            Some(true) => "correct",
                            Some(false) => "incorrect",
                            None => "no verdict",
                        }
                        .into(),
                    ),
                    (
                        "reasoning".into(),
                        cap.text(j.reply.as_deref().unwrap_or("")),
                    ),
                ],
            });
        }
        let score = if correct { 1.0 } else { 0.0 };
        let error = e.error_kind.clone();
        items.push(Item {
            cell: 0,
            id: e.question_id.clone(),
            verdict: verdict(score, &error),
            score,
            error,
            summary: cap.text(&format!(
                "{} calls; answered {:?}",
                e.tool_calls,
                e.answer.as_deref().unwrap_or("")
            )),
            detail,
        });
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_cuts_at_a_character_boundary_and_counts() {
        let mut c = Cap::new(5);
        assert_eq!(c.text("abc"), "abc");
        let s = c.text("abcdé fgh");
        assert!(
            s.starts_with("abcd\n[... cut by the report: 6 more bytes"),
            "{s}"
        );
        assert_eq!((c.texts, c.bytes), (1, 6));
    }

    #[test]
    fn docs_text_lists_each_tool() {
        let t = serde_json::json!([{"name": "f1", "description": "Adds.", "parameters": {"type": "object"}}]);
        assert_eq!(
            docs_text(&t),
            "f1\n  Adds.\n  parameters: {\"type\":\"object\"}\n\n"
        );
    }
}

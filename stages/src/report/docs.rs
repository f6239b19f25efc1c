//! Documentation edits: each tool's description along every ToolObserver curve
//! (online: per BFCL instance; offline: per tool set), beside gold and the
//! baselines' final descriptions; and the items whose verdict changed from one
//! documentation round to the next.

use super::model::{Cell, DocEdits, DocSubject, Flip, Item, ToolHistory};
use super::source::{Out, Source};
use crate::metrics::docs as metrics;
use crate::rows::{DocRow, EditRow};
use pipeline::{Row, StoreError};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

fn desc_of(tools: &Value, name: &str) -> Option<String> {
    tools.as_array()?.iter().find_map(|t| {
        (t.get("name")?.as_str()? == name).then(|| {
            t.get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
    })
}

fn names(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name")?.as_str().map(str::to_string))
        .collect()
}

/// The real name of a shown tool, from a documentation row's `[[real, shown], ...]`.
fn real_name(mapping: &Value, shown: &str) -> Option<String> {
    mapping.as_array()?.iter().find_map(|p| {
        let p = p.as_array()?;
        (p.get(1)?.as_str()? == shown).then(|| p.first()?.as_str().map(str::to_string))?
    })
}

struct Docs<'a> {
    out: &'a Out,
    rows: Vec<DocRow>,
}

impl Docs<'_> {
    fn row(&self, instance: &str) -> Option<&DocRow> {
        self.rows
            .iter()
            .find(|r| r.instance_id == instance)
            .or_else(|| (self.rows.len() == 1).then(|| &self.rows[0]))
    }
}

/// The documentation-edit section of `src`, whose cells and items [`super::items`]
/// listed.
/// Every description shown is capped by `cap` (the report's `--item-bytes`), so a
/// description a model made huge costs the page and the word diff no more than any
/// other text; whether a round changed it is decided on the whole texts.
pub fn collect(
    src: &Source,
    cells: &[Cell],
    items: &[Item],
    cap: &mut super::items::Cap,
) -> Result<DocEdits, StoreError> {
    let mut all: Vec<Docs<'_>> = Vec::new();
    for o in &src.outs {
        if o.entry.manifest.outputs.contains_key(DocRow::TABLE) {
            all.push(Docs {
                out: o,
                rows: o.entry.read()?,
            });
        }
    }
    let labels: Vec<&crate::at::Cell> = all.iter().map(|d| &d.out.cell).collect();
    let mut out = DocEdits::default();
    for ((setting, agent, editor), rounds) in metrics::curves(&labels) {
        let rounds: Vec<&Docs<'_>> = rounds.into_iter().map(|i| &all[i]).collect();
        let online = metrics::frozen_by_round(rounds.iter().map(|d| {
            let online = d.out.stage == crate::batch_reflect::STAGE;
            (d.out.cell.round, online, &d.rows[..])
        }));
        if !online.is_empty() {
            out.frozen
                .insert((setting.clone(), agent.clone(), editor.clone()), online);
        }
        // The curve's environment says which documentation is its gold.
        let env = rounds.first().map_or("", |d| d.out.cell.env);
        let reader = src.environments.get(env);
        let base = all.iter().find(|d| {
            let l = &d.out.cell;
            l.setting == setting && l.is(crate::at::Method::Base) && l.round == 0
        });
        let Some(base) = base else { continue };
        let gold = all.iter().find(|d| {
            reader.is_some_and(|e| e.reader().is_gold_docs(&setting, &d.out.stage, &d.out.cell))
        });
        let baselines: Vec<&Docs<'_>> = metrics::baseline_finals(&labels, &setting, &editor)
            .into_iter()
            .map(|i| &all[i])
            .collect();
        for b in &base.rows {
            // Per instance (online), or one subject for a tool set's shared docs.
            let instance = if b.instance_id == crate::env::SHARED {
                String::new()
            } else {
                b.instance_id.clone()
            };
            let mut subject = DocSubject {
                env,
                setting: setting.clone(),
                agent: agent.clone(),
                editor: editor.clone(),
                instance: instance.clone(),
                tools: Vec::new(),
            };
            let mut changed = false;
            for name in names(&b.tools) {
                let first = desc_of(&b.tools, &name).unwrap_or_default();
                let mut h = ToolHistory {
                    tool: name.clone(),
                    rounds: vec![(0, cap.text(&first))],
                    others: Vec::new(),
                };
                let mut last = first;
                for r in &rounds {
                    let Some(row) = r.row(&b.instance_id) else {
                        continue;
                    };
                    let Some(d) = desc_of(&row.tools, &name) else {
                        continue;
                    };
                    if last != d {
                        h.rounds.push((r.out.cell.round, cap.text(&d)));
                        last = d;
                        changed = true;
                    }
                }
                let real = real_name(&b.name_mapping, &name).unwrap_or_else(|| name.clone());
                if let Some(g) = gold.and_then(|g| g.row(&b.instance_id)) {
                    if let Some(d) = desc_of(&g.tools, &real) {
                        h.others.push((format!("gold ({real})"), cap.text(&d)));
                    }
                }
                for bl in &baselines {
                    if let Some(d) = bl
                        .row(&b.instance_id)
                        .and_then(|r| desc_of(&r.tools, &name))
                    {
                        h.others
                            .push((bl.out.cell.method_name().to_string(), cap.text(&d)));
                    }
                }
                subject.tools.push(h);
            }
            if changed {
                out.subjects.push(subject);
            } else {
                out.unchanged += 1;
            }
        }
    }
    out.flips = flips(src, cells, items)?;
    Ok(out)
}

/// Items whose verdict changed between consecutive cells of a curve: Base (round
/// 0), then each ToolObserver round with items (online every round; offline the
/// test play after the last round).
fn flips(src: &Source, cells: &[Cell], items: &[Item]) -> Result<Vec<Flip>, StoreError> {
    let mut flips = Vec::new();
    for ((setting, agent, editor), seq) in crate::metrics::items::edit_curves(cells) {
        // The tools each round's edit changed, read once per round with a flip.
        let mut edited: BTreeMap<i64, HashMap<String, Vec<String>>> = BTreeMap::new();
        for f in crate::metrics::items::flips(&seq, items) {
            let tools = match edited.entry(f.round) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(edited_tools(src, &setting, &agent, &editor, f.round)?)
                }
            };
            flips.push(Flip {
                setting: setting.clone(),
                agent: agent.clone(),
                editor: editor.clone(),
                tools: tools.get(&f.item).cloned().unwrap_or_default(),
                item: f.item,
                round: f.round,
                cell: f.cell,
                direction: f.direction,
            });
        }
    }
    Ok(flips)
}

/// The tools each BFCL instance's edit of `round` changed (from the online
/// batch-reflect's `edits`).
fn edited_tools(
    src: &Source,
    setting: &str,
    agent: &str,
    editor: &str,
    round: i64,
) -> Result<HashMap<String, Vec<String>>, StoreError> {
    let Some(o) = src.outs.iter().find(|o| {
        o.cell.setting == setting
            && o.cell.agent == agent
            && o.cell.editor == editor
            && o.cell.round == round
            && o.entry.manifest.outputs.contains_key(EditRow::TABLE)
    }) else {
        return Ok(HashMap::new());
    };
    let rows: Vec<EditRow> = o.entry.read()?;
    Ok(rows
        .into_iter()
        .map(|r| (r.instance_id, r.updated))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_names_come_from_the_mapping() {
        let m = serde_json::json!([["add", "function_1"], ["sub", "function_2"]]);
        assert_eq!(real_name(&m, "function_2").as_deref(), Some("sub"));
        assert_eq!(real_name(&m, "function_3"), None);
    }
}

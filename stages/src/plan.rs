//! The experiment's plan as a value: every node the experiment has -- its stage, its
//! inputs (the DAG's edges), its key where it can be known yet, and whether its
//! output is in the store -- in the order a run computes them. `otb plan` prints it
//! (text, JSON, Graphviz `dot`), which is how a user sees what an experiment will do
//! before paying for it.
//!
//! The plan is what the driver walks in status mode ([`crate::driver::locate`]):
//! nothing is computed and no model is loaded; a node whose input is not computed
//! yet is listed waiting for it, without a key (a key holds its inputs' digests).
//! The rounds of an online ToolObserver curve after one whose docs are not computed
//! are `planned`: they run only if some instance is not frozen by then.

use crate::env::DriveError;
use crate::experiment::Experiment;
use pipeline::{NodeReport, NodeState, Store};
use serde::Serialize;

/// Every node of an experiment, in run order, each once.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The experiment's name.
    pub experiment: String,
    /// The nodes, in the order a run computes them.
    pub nodes: Vec<PlanNode>,
}

/// One node of a [`Plan`].
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PlanNode {
    /// The node's name, e.g. `explore[names toolobserver r2]`.
    pub node: String,
    /// The stage it runs.
    pub stage: String,
    /// Its key (hex), when every input is computed.
    pub key: Option<String>,
    /// `fresh` (in the store), `would-run`, `waits` (for an input not computed yet)
    /// or `planned` (a later round that runs only if its curve goes on).
    pub state: &'static str,
    /// Why it would run, what it waits for, or what decides whether it runs.
    pub why: Vec<String>,
    /// Its inputs: the name each is read by and the node that produces it.
    pub inputs: Vec<PlanInput>,
    /// The grid cell it belongs to (setting or tool set, method, agent, editor,
    /// round); none for a node outside the grid (`bfcl-data`, `chess-positions`).
    pub cell: Option<crate::env::Cell>,
}

/// An edge of a [`Plan`]: node `node`'s output, read as `name`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PlanInput {
    /// The name the stage reads the input by.
    pub name: String,
    /// The node that produces it.
    pub node: String,
}

/// The plan of `exp` over `store` (which is only read).
pub fn plan(exp: &Experiment, store: &Store) -> Result<Plan, DriveError> {
    Ok(Plan::of(exp, &crate::driver::locate(exp, store)?))
}

impl Plan {
    /// The plan of `exp` as `located`.
    pub fn of(exp: &Experiment, located: &crate::driver::Located) -> Plan {
        let mut plan = Plan::from_reports(&exp.name, &located.reports);
        for n in plan.nodes.iter_mut() {
            n.cell = located.cell(&n.node).cloned();
        }
        plan
    }
}

impl Plan {
    /// Each grid node's owner among `shards` cooperating workers (1..=shards): the
    /// plan's chains -- a setting or tool set with a method, agent and editor -- in
    /// plan order, dealt out in turn, so independent chains spread evenly and a
    /// chain's nodes stay with one worker. Nodes outside the grid (`bfcl-data`,
    /// `opacify`, an environment's positions or questions) are in no chain: the first
    /// worker to lease one computes it.
    pub fn owners(&self, shards: u32) -> std::collections::HashMap<String, u32> {
        let mut chains: Vec<(String, String, String, String)> = Vec::new();
        let mut out = std::collections::HashMap::new();
        for n in &self.nodes {
            let Some(c) = &n.cell else { continue };
            if c.agent.is_empty() {
                continue;
            }
            let chain = (
                c.setting.clone(),
                c.method_name().to_string(),
                c.agent.clone(),
                c.editor.clone(),
            );
            let i = match chains.iter().position(|x| *x == chain) {
                Some(i) => i,
                None => {
                    chains.push(chain);
                    chains.len() - 1
                }
            };
            out.insert(n.node.clone(), (i as u32) % shards.max(1) + 1);
        }
        out
    }

    /// The plan of a status-mode session's reports: each node once (a node that
    /// several chains share, such as an agent-free opacify, is listed where it first
    /// appears).
    pub fn from_reports(experiment: &str, reports: &[NodeReport]) -> Plan {
        let mut seen = std::collections::HashSet::new();
        let nodes = reports
            .iter()
            .filter(|r| seen.insert(r.node.as_str()))
            .map(|r| {
                let (state, why) = match &r.state {
                    NodeState::Fresh | NodeState::Ran => ("fresh", Vec::new()),
                    NodeState::WouldRun { reasons } => ("would-run", reasons.clone()),
                    NodeState::Blocked { on } => ("waits", vec![on.clone()]),
                    NodeState::Planned { after } => ("planned", vec![format!("after {after}")]),
                };
                PlanNode {
                    node: r.node.clone(),
                    stage: r.stage.clone(),
                    key: r.key.as_ref().map(|k| k.0.clone()),
                    state,
                    why,
                    inputs: r
                        .inputs
                        .iter()
                        .map(|(name, node)| PlanInput {
                            name: name.clone(),
                            node: node.clone(),
                        })
                        .collect(),
                    cell: None,
                }
            })
            .collect();
        Plan {
            experiment: experiment.to_string(),
            nodes,
        }
    }

    /// How many nodes are in each state, in a fixed order.
    fn counts(&self) -> String {
        let n = |s: &str| self.nodes.iter().filter(|x| x.state == s).count();
        format!(
            "{} fresh, {} would run, {} wait for an input, {} planned",
            n("fresh"),
            n("would-run"),
            n("waits"),
            n("planned")
        )
    }

    /// One line per node (state, short key, name, and the nodes it reads), then the
    /// counts.
    pub fn text(&self) -> String {
        let width = self.nodes.iter().map(|n| n.node.len()).max().unwrap_or(0);
        let mut out = format!("plan of {}: {} nodes\n", self.experiment, self.nodes.len());
        for n in &self.nodes {
            let key = n
                .key
                .as_deref()
                .map(|k| k.chars().take(12).collect::<String>())
                .unwrap_or_else(|| "-".repeat(12));
            let mut line = format!("{:<9}  {key}  {:<width$}", n.state, n.node);
            if !n.inputs.is_empty() {
                let ins: Vec<String> = n
                    .inputs
                    .iter()
                    .map(|i| format!("{} ({})", i.node, i.name))
                    .collect();
                line.push_str(&format!("  <- {}", ins.join(", ")));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out.push_str(&format!("{}\n", self.counts()));
        out
    }

    /// The plan as pretty-printed JSON.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// The plan as a Graphviz digraph: a box per node (filled by state), an edge per
    /// input labelled with the name it is read by.
    pub fn dot(&self) -> String {
        let id: std::collections::HashMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.node.as_str(), i))
            .collect();
        let mut out = format!(
            "digraph \"{}\" {{\n  rankdir=LR;\n  node [shape=box, style=filled, fontname=\"Helvetica\"];\n",
            dot_escape(&self.experiment)
        );
        for (i, n) in self.nodes.iter().enumerate() {
            let colour = match n.state {
                "fresh" => "palegreen",
                "would-run" => "gold",
                "planned" => "gray90",
                _ => "lightgoldenrod1",
            };
            let key = n
                .key
                .as_deref()
                .map(|k| k.chars().take(12).collect::<String>())
                .unwrap_or_else(|| "(key after its inputs)".to_string());
            out.push_str(&format!(
                "  n{i} [label=\"{}\\n{} {key}\", fillcolor={colour}];\n",
                dot_escape(&n.node),
                n.state
            ));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            for input in &n.inputs {
                // An input from outside the plan (none today) still gets its box.
                let from = match id.get(input.node.as_str()) {
                    Some(j) => format!("n{j}"),
                    None => format!("\"{}\"", dot_escape(&input.node)),
                };
                out.push_str(&format!(
                    "  {from} -> n{i} [label=\"{}\"];\n",
                    dot_escape(&input.name)
                ));
            }
        }
        out.push_str("}\n");
        out
    }
}

/// `s` inside a double-quoted Graphviz string.
fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(node: &str, state: NodeState, inputs: &[(&str, &str)]) -> NodeReport {
        NodeReport {
            node: node.into(),
            stage: node.split('[').next().unwrap_or(node).into(),
            key: None,
            state,
            rows: 0,
            wall_ms: 0,
            finished_unix: 0,
            usage: Default::default(),
            inputs: inputs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
        }
    }

    fn sample() -> Plan {
        let would = NodeState::WouldRun {
            reasons: vec!["never run".into()],
        };
        let waits = NodeState::Blocked {
            on: "input `docs` is not computed yet".into(),
        };
        Plan::from_reports(
            "toy",
            &[
                report("opacify[names]", would.clone(), &[]),
                report(
                    "explore[names \"q\" r0]",
                    waits.clone(),
                    &[("docs", "opacify[names]")],
                ),
                // Shared by a second chain: listed once.
                report("opacify[names]", would, &[]),
            ],
        )
    }

    #[test]
    fn a_shared_node_is_listed_once_with_its_edges() {
        let p = sample();
        assert_eq!(p.nodes.len(), 2);
        assert_eq!(p.nodes[1].state, "waits");
        assert_eq!(
            p.nodes[1].inputs,
            [PlanInput {
                name: "docs".into(),
                node: "opacify[names]".into()
            }]
        );
        let text = p.text();
        assert!(
            text.contains(
                "waits      ------------  explore[names \"q\" r0]  <- opacify[names] (docs)"
            ),
            "{text}"
        );
        assert!(text.ends_with("0 fresh, 1 would run, 1 wait for an input, 0 planned\n"));
    }

    #[test]
    fn dot_quotes_names_and_draws_every_edge() {
        let dot = sample().dot();
        assert!(
            dot.contains("n1 [label=\"explore[names \\\"q\\\" r0]\\nwaits"),
            "{dot}"
        );
        assert!(dot.contains("n0 -> n1 [label=\"docs\"];"), "{dot}");
        let v: serde_json::Value = serde_json::from_str(&sample().json()).unwrap();
        assert_eq!(v["nodes"][1]["inputs"][0]["node"], "opacify[names]");
    }
}

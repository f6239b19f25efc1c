//! What a report reads: every computed output of a run by node, and every node of
//! the run's plan with its inputs. Built from a status-mode drive of an experiment
//! ([`Source::of_run`]) or from the released runs' import session.

use crate::at::Cell;
use pipeline::{Entry, NodeReport, NodeState};
use std::collections::HashMap;

/// One computed output.
#[derive(Clone, Debug)]
pub struct Out {
    /// Node name.
    pub node: String,
    /// Stage.
    pub stage: String,
    /// Grid coordinates.
    pub cell: Cell,
    /// The stored output.
    pub entry: Entry,
}

/// Outputs and plan of one run.
#[derive(Default)]
pub struct Source {
    /// Computed outputs, in drive order.
    pub outs: Vec<Out>,
    /// Every node of the plan, in run order (each once).
    pub nodes: Vec<NodeReport>,
    /// Grid cell of every grid node, computed or not.
    pub cells: Vec<(String, Cell)>,
    /// The environments that read the outputs' rows (by [`Cell::env`]): the
    /// experiment's registry, the built-in one by default.
    pub environments: std::sync::Arc<crate::experiment::Registry>,
    by_node: HashMap<String, usize>,
    inputs: HashMap<String, Vec<(String, String)>>,
    consumers: HashMap<String, Vec<String>>,
    in_progress: std::collections::HashSet<String>,
}

impl Source {
    /// A source from outputs, plan reports and cells.
    pub fn new(outs: Vec<Out>, reports: &[NodeReport], cells: Vec<(String, Cell)>) -> Source {
        let mut seen = std::collections::HashSet::new();
        let nodes: Vec<NodeReport> = reports
            .iter()
            .filter(|r| seen.insert(r.node.clone()))
            .cloned()
            .collect();
        let by_node = outs
            .iter()
            .enumerate()
            .map(|(i, o)| (o.node.clone(), i))
            .collect();
        let mut inputs: HashMap<String, Vec<(String, String)>> = HashMap::new();
        let mut consumers: HashMap<String, Vec<String>> = HashMap::new();
        for n in &nodes {
            for (_, from) in &n.inputs {
                consumers
                    .entry(from.clone())
                    .or_default()
                    .push(n.node.clone());
            }
            inputs.insert(n.node.clone(), n.inputs.clone());
        }
        Source {
            outs,
            nodes,
            cells,
            environments: crate::driver::environments(),
            by_node,
            inputs,
            consumers,
            in_progress: Default::default(),
        }
    }

    /// Note which nodes not in the store are being computed (a journal or a staging
    /// folder of theirs in `store`): their cells say `in progress`.
    pub fn mark_in_progress(&mut self, store: &pipeline::Store) {
        self.in_progress = self
            .nodes
            .iter()
            .filter(|r| matches!(r.state, NodeState::WouldRun { .. }))
            .filter(|r| {
                r.key
                    .as_ref()
                    .is_some_and(|k| store.in_progress(&r.stage, k))
            })
            .map(|r| r.node.clone())
            .collect();
    }

    /// The source of an experiment's drive in status mode (its outputs read by the
    /// built-in environments: see [`Source::environments`]).
    pub fn of_run(located: &crate::driver::Located) -> Source {
        let outs = located
            .run
            .outputs
            .iter()
            .map(|o| Out {
                cell: o.cell.clone(),
                node: o.node.clone(),
                stage: o.stage.to_string(),
                entry: o.entry.clone(),
            })
            .collect();
        Source::new(outs, &located.reports, located.run.cells.clone())
    }

    /// The output of `node`, when computed.
    pub fn out(&self, node: &str) -> Option<&Out> {
        self.by_node.get(node).map(|&i| &self.outs[i])
    }

    /// The nearest computed output among `node`'s inputs (breadth first: its own
    /// inputs in order, then theirs) that holds `table`, preferring an input read
    /// under the name `prefer`.
    pub fn upstream(&self, node: &str, table: &str, prefer: Option<&str>) -> Option<&Out> {
        let mut frontier = vec![node.to_string()];
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3 {
            let mut next = Vec::new();
            let mut found: Option<&Out> = None;
            for n in &frontier {
                for (name, from) in self.inputs.get(n).into_iter().flatten() {
                    if !seen.insert(from.clone()) {
                        continue;
                    }
                    next.push(from.clone());
                    let Some(o) = self.out(from) else { continue };
                    if !o.entry.manifest.outputs.contains_key(table) {
                        continue;
                    }
                    if prefer == Some(name.as_str()) {
                        return Some(o);
                    }
                    found = found.or(Some(o));
                }
            }
            if found.is_some() {
                return found;
            }
            frontier = next;
        }
        None
    }

    /// A computed node that reads `node` and holds `table` (the evaluation of a
    /// chess exploration, the judge of a search episode set).
    pub fn downstream(&self, node: &str, table: &str) -> Option<&Out> {
        self.consumers
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|c| self.out(c))
            .find(|o| o.entry.manifest.outputs.contains_key(table))
    }

    /// The plan state of `node` as the plan prints it.
    pub fn state(&self, node: &str) -> String {
        match self.nodes.iter().find(|n| n.node == node).map(|n| &n.state) {
            Some(NodeState::Fresh | NodeState::Ran) => "done".into(),
            Some(NodeState::WouldRun { .. }) if self.in_progress.contains(node) => {
                "in progress".into()
            }
            Some(NodeState::WouldRun { .. }) => "not started".into(),
            Some(NodeState::Blocked { .. }) => "not started (waits for an input)".into(),
            Some(NodeState::Planned { .. }) => "planned (runs if the curve goes on)".into(),
            None => "not listed".into(),
        }
    }
}

/// What an environment's reader finds along the plan's edges.
impl crate::reading::Along for Source {
    fn upstream(&self, node: &str, table: &str, prefer: Option<&str>) -> Option<&Entry> {
        Source::upstream(self, node, table, prefer).map(|o| &o.entry)
    }

    fn downstream(&self, node: &str, table: &str) -> Option<&Entry> {
        Source::downstream(self, node, table).map(|o| &o.entry)
    }
}

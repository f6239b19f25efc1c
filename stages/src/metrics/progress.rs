//! Run progress: which of a drive's nodes, and which of its grid cells, are not
//! computed yet, from the node reports of a status walk.

use crate::env::Cell;
use pipeline::{NodeReport, NodeState, Store};
use std::collections::HashMap;

/// How many of the drive's nodes are not computed yet: those whose key is not
/// known (blocked, planned) or whose output is not fresh in the store.
pub fn pending_nodes(reports: &[NodeReport]) -> usize {
    super::count(reports, |r| {
        r.key.is_none() || !matches!(r.state, NodeState::Fresh)
    })
}

/// Where one grid cell stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The cell's nodes (a node is the cell's when `belongs` holds for its cell).
    pub nodes: usize,
    /// A node of it is not fresh in the store.
    pub unfinished: bool,
    /// A node of it is fresh, or is being computed (or was stopped part-way: its
    /// journal is in the store).
    pub started: bool,
}

/// The grid cells of a drive's node reports, to ask where a cell stands.
pub struct Cells<'a> {
    store: &'a Store,
    reports: &'a [NodeReport],
    cell_of: HashMap<&'a str, &'a Cell>,
}

impl<'a> Cells<'a> {
    /// The nodes of `reports` with their cells (`cells`: node name -> cell, as
    /// `RunOutput::cells`), their journals looked up in `store`.
    pub fn new(store: &'a Store, reports: &'a [NodeReport], cells: &'a [(String, Cell)]) -> Self {
        let cell_of = cells.iter().map(|(n, c)| (n.as_str(), c)).collect();
        Cells {
            store,
            reports,
            cell_of,
        }
    }

    /// The progress of the grid cell whose nodes are those whose cell satisfies
    /// `belongs`.
    pub fn progress(&self, belongs: impl Fn(&Cell) -> bool) -> Progress {
        let fresh = |r: &NodeReport| matches!(r.state, NodeState::Fresh);
        let mut p = Progress::default();
        for r in self.reports {
            if !self
                .cell_of
                .get(r.node.as_str())
                .is_some_and(|c| belongs(c))
            {
                continue;
            }
            p.nodes += 1;
            p.unfinished |= !fresh(r);
            p.started = p.started
                || fresh(r)
                || r.key
                    .as_ref()
                    .is_some_and(|k| self.store.in_progress(&r.stage, k));
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Method;
    use pipeline::{Access, Digest};

    fn report(node: &str, state: NodeState, key: Option<&str>) -> NodeReport {
        NodeReport {
            node: node.into(),
            stage: "explore".into(),
            key: key.map(|k| Digest::of_bytes(k.as_bytes())),
            state,
            rows: 0,
            wall_ms: 0,
            finished_unix: 0,
            usage: Default::default(),
            inputs: Vec::new(),
        }
    }

    fn would() -> NodeState {
        NodeState::WouldRun {
            reasons: vec!["never computed".into()],
        }
    }

    #[test]
    fn pending_nodes_are_those_without_a_key_or_not_fresh() {
        let reports = [
            report("a", NodeState::Fresh, Some("a")),
            report("b", NodeState::Fresh, None),
            report("c", would(), Some("c")),
            report("d", NodeState::Ran, Some("d")),
        ];
        assert_eq!(pending_nodes(&reports), 3);
        assert_eq!(pending_nodes(&reports[..1]), 0);
    }

    #[test]
    fn a_cells_progress_is_that_of_its_own_nodes() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path(), Access::ReadWrite).unwrap();
        let cell = |setting: &str, method: Method, agent: &str| Cell {
            env: "bfcl",
            setting: setting.into(),
            method: Some(method),
            agent: agent.into(),
            ..Cell::default()
        };
        let cells = vec![
            ("done".to_string(), cell("names", Method::Base, "a")),
            ("todo".to_string(), cell("names", Method::ToolObserver, "a")),
            (
                "going".to_string(),
                cell("names+desc", Method::ToolObserver, "a"),
            ),
            (
                "later".to_string(),
                cell("names+desc", Method::ToolObserver, "a"),
            ),
            (
                "other".to_string(),
                cell("names", Method::ToolObserver, "b"),
            ),
        ];
        // `going` was stopped part-way: its journal is in the store.
        let going = Digest::of_bytes(b"going");
        std::fs::create_dir_all(tmp.path().join("cache/journal").join(&going.0)).unwrap();
        let reports = [
            report("done", NodeState::Fresh, Some("done")),
            report("todo", would(), Some("todo")),
            report("going", would(), Some("going")),
            report("later", would(), None),
            report("other", NodeState::Fresh, Some("other")),
        ];
        let grid = Cells::new(&store, &reports, &cells);
        let of = |setting: &str, method: Method| {
            grid.progress(|c| c.agent == "a" && c.setting == setting && c.is(method))
        };
        let p = |nodes, unfinished, started| Progress {
            nodes,
            unfinished,
            started,
        };
        assert_eq!(of("names", Method::Base), p(1, false, true));
        assert_eq!(of("names", Method::ToolObserver), p(1, true, false));
        assert_eq!(of("names+desc", Method::ToolObserver), p(2, true, true));
        assert_eq!(of("names+params", Method::ToolObserver), p(0, false, false));
    }
}

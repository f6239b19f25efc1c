//! The items of every cell: each environment reads its own item nodes (BFCL's
//! instances, chess games, search episodes, ...) through
//! [`crate::experiment::Reader::items`]; here they are gathered by cell. Every
//! text a model wrote is capped ([`Cap`]) before it reaches the page.

use super::model::{Cell, Item};
use super::source::Source;
use pipeline::StoreError;
use std::collections::HashMap;

pub use crate::reading::Cap;

/// Whether `stage`'s nodes hold items (for one of `src`'s environments).
pub fn holds_items(src: &Source, stage: &str) -> bool {
    src.environments
        .environments()
        .any(|e| e.reader().holds_items(stage))
}

/// The grid nodes that hold items, in plan order, each once, with their stage and
/// cell: computed ones with their output's label, the others with the drive's; then
/// any computed output no plan node lists.
pub fn grid(src: &Source) -> Vec<(String, String, crate::at::Cell)> {
    let mut listed = std::collections::HashSet::new();
    let mut grid = Vec::new();
    let labels: HashMap<&str, &crate::at::Cell> =
        src.cells.iter().map(|(n, l)| (n.as_str(), l)).collect();
    for n in &src.nodes {
        if !holds_items(src, &n.stage) {
            continue;
        }
        let label = match src.out(&n.node) {
            Some(o) => o.cell.clone(),
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
        if holds_items(src, &o.stage) && listed.insert(o.node.clone()) {
            grid.push((o.node.clone(), o.stage.clone(), o.cell.clone()));
        }
    }
    grid
}

/// Every cell of `grid` (computed or not, in its order) and the items of the
/// computed ones. `progress` is told after each cell.
pub fn collect(
    src: &Source,
    grid: Vec<(String, String, crate::at::Cell)>,
    cap: &mut Cap,
    mut progress: impl FnMut(),
) -> Result<(Vec<Cell>, Vec<Item>), StoreError> {
    let mut cells = Vec::new();
    let mut items = Vec::new();
    for (node, _stage, label) in grid {
        let id = cells.len();
        let mut cell = Cell {
            id,
            env: label.env,
            node: node.clone(),
            setting: label.setting.clone(),
            method: label.method_name().to_string(),
            agent: label.agent.clone(),
            editor: label.editor.clone(),
            round: label.round,
            split: label.split_name().to_string(),
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
            let read = match src.environments.get(cell.env) {
                Some(env) => env.reader().items(
                    &crate::reading::Computed {
                        node: &o.node,
                        stage: &o.stage,
                        cell: &o.cell,
                        entry: &o.entry,
                    },
                    src,
                    cap,
                )?,
                None => crate::reading::Reading::default(),
            };
            cell.p_a = read.p_a;
            cell.docs = read.docs;
            let mut its = read.items;
            for it in &mut its {
                it.cell = id;
            }
            let s = crate::metrics::items::summary(&its);
            (cell.n, cell.errors, cell.mean) = (s.n, s.errors, s.mean);
            items.extend(its);
        }
        cells.push(cell);
        progress();
    }
    Ok((cells, items))
}

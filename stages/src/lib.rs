//! The stages of the benchmark pipeline and the experiment driver that wires them
//! into a DAG. Each stage is one module: typed rows in (read from upstream store
//! entries), typed rows out (written through [`pipeline::StageCtx`]).
//!
//! Dataflow for BFCL-Opaque (one chain per documentation setting):
//!
//! ```text
//! bfcl-data -> opacify[setting] -> explore[r0] -> evaluate[r0]            (Base, Gold)
//!                                     |               |
//!                                     +-> batch-reflect[r1] -> explore[r1] -> evaluate[r1] -> ... (+TO)
//!                -> easytool | play2prompt | draft [setting] -> explore -> evaluate   (baselines)
//! all evaluate outputs -> summarize (polars aggregates + bootstrap intervals)
//! ```

pub mod at;
pub mod baselines;
pub mod batch_reflect;
pub mod bfcl;
pub mod chess;
pub mod driver;
pub mod env;
pub mod error;
pub mod experiment;
pub mod gc;
pub mod models;
pub mod offline;
pub mod once;
pub mod online;
pub mod rows;
pub mod search;
pub mod tables;

pub use error::{Failure, InputError};

#[cfg(test)]
mod layers {
    //! The top-level modules of this crate form a DAG: no module uses one that
    //! (directly or not) uses it. Read from the `use crate::X` / `crate::X::` paths
    //! of every source file.

    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    fn top(rel: &Path) -> String {
        let first = rel
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_default();
        first.trim_end_matches(".rs").to_string()
    }

    fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// Module -> the other top-level modules its files name, outside test code.
    fn graph() -> BTreeMap<String, BTreeSet<String>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut all = Vec::new();
        files(&src, &mut all);
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for f in all {
            let rel = f.strip_prefix(&src).unwrap_or(&f).to_path_buf();
            let me = top(&rel);
            if me == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let code: String = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or("")
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for (i, _) in code.match_indices("crate::") {
                let name: String = code[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != me && name != "InputError" {
                    g.entry(me.clone()).or_default().insert(name);
                }
            }
            g.entry(me).or_default();
        }
        g
    }

    fn cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
        fn visit(
            n: &str,
            g: &BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
        ) -> Option<Vec<String>> {
            if let Some(i) = path.iter().position(|p| p == n) {
                return Some(path[i..].to_vec());
            }
            if done.contains(n) {
                return None;
            }
            path.push(n.to_string());
            for m in g.get(n).into_iter().flatten() {
                if let Some(c) = visit(m, g, path, done) {
                    return Some(c);
                }
            }
            path.pop();
            done.insert(n.to_string());
            None
        }
        let mut done = BTreeSet::new();
        for n in g.keys() {
            if let Some(c) = visit(n, g, &mut Vec::new(), &mut done) {
                return Some(c);
            }
        }
        None
    }

    #[test]
    fn top_level_modules_form_a_dag() {
        let g = graph();
        assert!(g.contains_key("env") && g.contains_key("models"), "{g:?}");
        assert_eq!(cycle(&g), None, "module graph: {g:?}");
    }

    #[test]
    fn the_cycle_check_finds_a_planted_cycle() {
        let mut g = BTreeMap::new();
        g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
        g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
        assert!(cycle(&g).is_some());
    }
}

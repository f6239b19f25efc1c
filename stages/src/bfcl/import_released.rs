//! `otb import released-runs DIR`: the authors' released BFCL runs turned into this
//! project's own store tables, so that they are graded by the **same `evaluate` stage**
//! (and can be rendered, exported and compared) exactly like runs made here.
//!
//! Why: `otb released score` re-grades the release in memory with the reference
//! grader's conventions (stored `exec_multiple` expected values). Importing instead
//! puts the release through our pipeline: expected values come from executing the
//! ground truth, and every verdict is a [`ScoreRow`] in the content-addressed store.
//!
//! For every run version under `DIR` (see [`datasets::bfcl::released`] for the layout)
//! two nodes are staged:
//!
//! ```text
//! import-released[<method>/<config>/<gen_hypers> v<N>]   instances + docs + trajectories
//!   -> evaluate[released <method>/<config>/<gen_hypers> v<N>]   scores
//! ```
//!
//! * `instances`: question and ground truth from the results file, original function
//!   docs and result types from `<category>_base_config.json` in the reference
//!   `tool_configs/` directory (`--configs`), matched by test id (the results line's
//!   position, as the reference grader does).
//! * `docs`: the tools the agent saw, from the version's own `config.json` when present,
//!   else `<config>_config.json` in `--configs`; `name_mapping` from the results rows.
//! * `trajectories`: one per results line, model = the generation-hypers name; a call
//!   whose arguments did not parse keeps `args: null` and the raw text, a `result` that
//!   is not a list of calls becomes no calls with the raw text as `content`.
//!
//! The import stage's params name the run and carry the sha256 of the results file and
//! of every config file read, so a changed file re-imports (and re-grades) only that
//! run; an unchanged tree imports in zero stage runs. Everything is read and validated
//! before the store is opened: bad input (a missing directory, a truncated results file)
//! is one [`InputError`] and the store is untouched.
//!
//! Known lossy corners: argument values go through JSON, so non-finite floats become
//! strings and ints beyond 64 bits become floats (none occur in the release).

use crate::bfcl::evaluate;
use crate::bfcl::released::{csv_line, CSV_HEADER};
use crate::env::DriveError;
use crate::rows::{CallRecord, DocRow, InstanceRow, ScoreRow, TrajectoryRow};
use crate::InputError;
use datasets::bfcl::data::Category;
use datasets::bfcl::executor::Executor;
use datasets::bfcl::grader::ModelCall;
use datasets::bfcl::released::{
    discover_runs, read_results, read_tool_config, ReleasedRow, RunRef, ToolConfig,
};
use pipeline::{Digest, Entry, NodeState, Session};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The import stage's name.
pub const STAGE: &str = "import-released";
/// The import stage's version.
pub const VERSION: u32 = 1;

/// One run version, read and converted, ready to be staged.
pub struct PreparedRun {
    /// Where the run version lies in the release.
    pub run: RunRef,
    /// `<method>/<config>/<gen_hypers> v<N>`, the inside of the node ids.
    pub label: String,
    /// Key params of the import node.
    pub params: Value,
    /// The instances, from the results file and the base configs.
    pub instances: Vec<InstanceRow>,
    /// The tools the agent saw, per instance.
    pub docs: Vec<DocRow>,
    /// One trajectory per results line.
    pub trajectories: Vec<TrajectoryRow>,
}

/// A validated import: every run version converted, plus the grading backend.
pub struct Plan {
    /// The release directory imported.
    pub root: PathBuf,
    /// Every run version, in discovery order.
    pub runs: Vec<PreparedRun>,
    /// The backend that grades the imported calls.
    pub executor: Executor,
    /// Key params of the evaluate nodes (the backend's identity).
    pub eval_params: Value,
}

/// What one run version produced in the store.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The run's method (`tool_observer`, `easytool` or `play2prompt`).
    pub method: String,
    /// The run's tool configuration.
    pub config: String,
    /// The run's generation hypers (the agent model and its settings).
    pub gen_hypers: String,
    /// 0 for the base run, N for improvement iteration N.
    pub version: u32,
    /// The import node's store entry.
    pub import: Entry,
    /// The evaluate node's store entry.
    pub scores: Entry,
    /// Means over instances of the evaluate stage's rows.
    pub e: f64,
    /// Mean parameter accuracy.
    pub p: f64,
    /// Mean AST accuracy.
    pub a: f64,
    /// Instances graded.
    pub n: usize,
}

fn input(msg: impl Into<String>) -> InputError {
    InputError(msg.into())
}

/// A config file read once, with its digest.
struct Loaded {
    config: ToolConfig,
    sha256: String,
}

#[derive(Default)]
struct ConfigCache(BTreeMap<PathBuf, Loaded>);

impl ConfigCache {
    fn load(&mut self, path: &Path) -> Result<&Loaded, InputError> {
        if !self.0.contains_key(path) {
            if !path.is_file() {
                return Err(input(format!(
                    "tool config {} does not exist",
                    path.display()
                )));
            }
            let config = read_tool_config(path)
                .map_err(|e| input(format!("cannot read tool config: {e}")))?;
            let sha256 = Digest::of_file(path)
                .map_err(|e| input(format!("{}: {e}", path.display())))?
                .0;
            self.0.insert(path.to_path_buf(), Loaded { config, sha256 });
        }
        self.0
            .get(path)
            .ok_or_else(|| input(format!("tool config {} vanished", path.display())))
    }
}

/// Read and validate the whole tree; nothing touches the store. `configs` defaults to
/// `tool_configs/` beside `dir`; `recorded` selects the recorded-then-simulated backend
/// (default: simulated).
pub fn prepare(
    dir: &Path,
    configs: Option<&Path>,
    recorded: Option<&Path>,
) -> Result<Plan, InputError> {
    if !dir.is_dir() {
        return Err(input(format!(
            "released runs directory {} does not exist",
            dir.display()
        )));
    }
    let configs = match configs {
        Some(c) => c.to_path_buf(),
        None => dir
            .parent()
            .map(|p| p.join("tool_configs"))
            .filter(|p| p.is_dir())
            .ok_or_else(|| {
                input(format!(
                    "no tool_configs/ beside {}; pass --configs CONFIG_DIR",
                    dir.display()
                ))
            })?,
    };
    if !configs.is_dir() {
        return Err(input(format!(
            "tool configs directory {} does not exist",
            configs.display()
        )));
    }
    let (executor, eval_params) = match recorded {
        Some(path) => {
            if !path.is_file() {
                return Err(input(format!(
                    "recorded responses file {} does not exist",
                    path.display()
                )));
            }
            let digest =
                Digest::of_file(path).map_err(|e| input(format!("{}: {e}", path.display())))?;
            let exec = crate::bfcl::make_executor(Some(path))
                .map_err(|e| input(format!("{}: {e}", path.display())))?;
            (exec, json!({"backend": "recorded", "recorded": digest.0}))
        }
        None => (
            crate::bfcl::make_executor(None)
                .map_err(|e| input(format!("simulated backend: {e}")))?,
            json!({"backend": "simulated", "recorded": null}),
        ),
    };
    let refs = discover_runs(dir).map_err(|e| input(format!("cannot list released runs: {e}")))?;
    if refs.is_empty() {
        return Err(input(format!(
            "no released runs (v0_results.json or improvements/*/v<N>/results.json) under {}",
            dir.display()
        )));
    }
    let mut cache = ConfigCache::default();
    let mut runs = Vec::with_capacity(refs.len());
    for run in refs {
        runs.push(prepare_run(run, &configs, &mut cache)?);
    }
    Ok(Plan {
        root: dir.to_path_buf(),
        runs,
        executor,
        eval_params,
    })
}

fn prepare_run(
    run: RunRef,
    configs: &Path,
    cache: &mut ConfigCache,
) -> Result<PreparedRun, InputError> {
    let label = format!(
        "{}/{}/{} v{}",
        run.method, run.config, run.gen_hypers, run.version
    );
    let category = run.category().ok_or_else(|| {
        input(format!(
            "{}: config {:?} names no known category",
            run.results_path.display(),
            run.config
        ))
    })?;
    let setting = run
        .setting()
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|| run.config.clone());
    let results = read_results(&run.results_path)
        .map_err(|e| input(format!("cannot import released run {label}: {e}")))?;
    let results_sha = Digest::of_file(&run.results_path)
        .map_err(|e| input(format!("{}: {e}", run.results_path.display())))?
        .0;
    let base_path = configs.join(format!("{}_base_config.json", category.reference_name()));
    let seen_path = run
        .config_path
        .clone()
        .unwrap_or_else(|| configs.join(format!("{}_config.json", run.config)));
    let base_sha = cache.load(&base_path)?.sha256.clone();
    let seen_sha = cache.load(&seen_path)?.sha256.clone();
    let base = &cache.load(&base_path)?.config;
    let mut instances = Vec::with_capacity(results.len());
    for (index, row) in results.iter().enumerate() {
        instances.push(instance_row(category, index, row, base, &base_path)?);
    }
    let seen = &cache.load(&seen_path)?.config;
    let mut docs = Vec::with_capacity(results.len());
    let mut trajectories = Vec::with_capacity(results.len());
    for (index, row) in results.iter().enumerate() {
        let id = instance_id(category, index);
        let tools = seen.tools.get(&index).ok_or_else(|| {
            input(format!(
                "{}: no test_id {index} (needed by {} line {})",
                seen_path.display(),
                run.results_path.display(),
                row.line
            ))
        })?;
        docs.push(DocRow {
            instance_id: id.clone(),
            setting: setting.clone(),
            round: i64::from(run.version),
            tools: Value::Array(tools.clone()),
            name_mapping: Value::Array(
                row.name_mapping
                    .iter()
                    .map(|(real, shown)| json!([real, shown]))
                    .collect(),
            ),
            changed: true,
            frozen: false,
            demos: Value::Null,
        });
        trajectories.push(trajectory_row(id, &run, row));
    }
    let params = json!({
        "method": run.method,
        "config": run.config,
        "gen_hypers": run.gen_hypers,
        "edit_hypers": run.edit_hypers,
        "version": run.version,
        "results_sha256": results_sha,
        "seen_config_sha256": seen_sha,
        "base_config_sha256": base_sha,
    });
    Ok(PreparedRun {
        run,
        label,
        params,
        instances,
        docs,
        trajectories,
    })
}

fn instance_id(category: Category, index: usize) -> String {
    format!("{}_{index}", category.as_str())
}

fn instance_row(
    category: Category,
    index: usize,
    row: &ReleasedRow,
    base: &ToolConfig,
    base_path: &Path,
) -> Result<InstanceRow, InputError> {
    let functions = base.tools.get(&index).ok_or_else(|| {
        input(format!(
            "{}: no test_id {index} for results line {}",
            base_path.display(),
            row.line
        ))
    })?;
    Ok(InstanceRow {
        instance_id: instance_id(category, index),
        category: category.as_str().to_string(),
        idx: index as i64,
        question: row.question.clone(),
        functions: Value::Array(functions.clone()),
        ground_truth: json!(row.ground_truth),
        execution_result_type: json!(base.result_types.get(&index).cloned().unwrap_or_default()),
    })
}

/// A released call as a trajectory call: arguments as a JSON object in emitted order,
/// or `null` with the raw text.
fn call_record(c: &ModelCall) -> CallRecord {
    match &c.args {
        Ok(args) => CallRecord {
            function: c.function.clone(),
            args: Value::Object(
                args.iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect::<Map<String, Value>>(),
            ),
            raw: None,
        },
        Err(raw) => CallRecord {
            function: c.function.clone(),
            args: Value::Null,
            raw: Some(raw.clone()),
        },
    }
}

fn trajectory_row(instance_id: String, run: &RunRef, row: &ReleasedRow) -> TrajectoryRow {
    let (calls, content) = match &row.calls {
        Ok(calls) => (calls.iter().map(call_record).collect(), None),
        Err(raw) => (Vec::new(), Some(raw.clone())),
    };
    TrajectoryRow {
        instance_id,
        round: i64::from(run.version),
        model: run.gen_hypers.clone(),
        calls,
        content,
        error_kind: None,
        error: None,
        prompt_tokens: 0,
        completion_tokens: 0,
        reasoning_tokens: 0,
        latency_ms: 0,
        reused: false,
    }
}

/// Node id of a run version's import stage.
pub fn import_node(label: &str) -> String {
    format!("{STAGE}[{label}]")
}

/// Node id of a run version's evaluate stage.
pub fn evaluate_node(label: &str) -> String {
    format!("{}[released {label}]", evaluate::STAGE)
}

/// Stage every run version (import, then evaluate on the import's tables). In status
/// mode an import that would run is listed with its evaluation waiting for it.
pub fn import(plan: &Plan, s: &mut Session<'_>) -> Result<Vec<Imported>, DriveError> {
    let mut out = Vec::with_capacity(plan.runs.len());
    for p in &plan.runs {
        let imported = s.stage(
            &import_node(&p.label),
            STAGE,
            VERSION,
            p.params.clone(),
            &[],
            |ctx| {
                ctx.write(&p.instances)?;
                ctx.write(&p.docs)?;
                ctx.write(&p.trajectories)?;
                Ok(())
            },
        )?;
        let round = i64::from(p.run.version);
        let scores = s.stage(
            &evaluate_node(&p.label),
            evaluate::STAGE,
            evaluate::VERSION,
            plan.eval_params.clone(),
            &[("released", &imported)],
            |ctx| {
                // Read back from the store: stages exchange data only as stored tables.
                let instances: Vec<InstanceRow> = imported.read()?;
                let docs: Vec<DocRow> = imported.read()?;
                let trajectories: Vec<TrajectoryRow> = imported.read()?;
                evaluate::run(ctx, &plan.executor, round, &instances, &docs, &trajectories)
            },
        )?;
        let Some(scores) = scores.entry() else {
            continue;
        };
        let rows: Vec<ScoreRow> = scores.read()?;
        let n = rows.len();
        let mean = |f: &dyn Fn(&ScoreRow) -> f64| {
            if n == 0 {
                0.0
            } else {
                rows.iter().map(f).sum::<f64>() / n as f64
            }
        };
        out.push(Imported {
            method: p.run.method.clone(),
            config: p.run.config.clone(),
            gen_hypers: p.run.gen_hypers.clone(),
            version: p.run.version,
            e: mean(&|r| if r.e { 1.0 } else { 0.0 }),
            p: mean(&|r| r.p),
            a: mean(&|r| r.a),
            n,
            import: imported.get()?.clone(),
            scores: scores.clone(),
        });
    }
    Ok(out)
}

/// The report: a CSV block (`method,config,gen_hypers,version,E,P,A,n`, the columns of
/// `otb released score --format csv`) and a last summary line.
pub fn render(imported: &[Imported], s: &Session<'_>) -> String {
    let mut out = String::from(CSV_HEADER);
    for r in imported {
        out.push_str(&csv_line(
            &r.method,
            &r.config,
            &r.gen_hypers,
            r.version,
            [r.e, r.p, r.a],
            r.n,
        ));
    }
    let ran = s.executed();
    let fresh = s
        .reports()
        .iter()
        .filter(|r| r.state == NodeState::Fresh)
        .count();
    out.push_str(&format!(
        "imported {} run versions ({ran} stages ran, {fresh} fresh); mean E per run written to the store\n",
        imported.len()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use datasets::bfcl::released::parse_model_result;

    #[test]
    fn unparsable_arguments_are_kept_raw() {
        let calls = parse_model_result(
            r#"[{"function": "function_1", "args": {"b": 1.5, "a": 2}}, {"function": "function_2", "args": "{oops"}]"#,
        )
        .expect("a list of calls");
        let recs: Vec<CallRecord> = calls.iter().map(call_record).collect();
        assert_eq!(recs[0].args.to_string(), r#"{"b":1.5,"a":2}"#);
        assert_eq!(recs[0].raw, None);
        assert_eq!(recs[1].args, Value::Null);
        assert_eq!(recs[1].raw.as_deref(), Some("{oops"));
        // And the grader sees the same call again.
        let reprs = |c: &ModelCall| match &c.args {
            Ok(a) => Ok(a
                .iter()
                .map(|(k, v)| format!("{k}={}", v.repr()))
                .collect::<Vec<_>>()),
            Err(raw) => Err(raw.clone()),
        };
        let back = evaluate::model_call(&recs[0].function, &recs[0].args, None);
        assert_eq!(reprs(&back), reprs(&calls[0]));
        assert_eq!(
            reprs(&back),
            Ok(vec!["b=1.5".to_string(), "a=2".to_string()])
        );
        let back = evaluate::model_call(&recs[1].function, &recs[1].args, recs[1].raw.as_deref());
        assert_eq!(reprs(&back), Err("{oops".to_string()));
    }

    #[test]
    fn missing_directory_is_input_error() {
        let err = prepare(Path::new("/nonexistent/otb/released"), None, None)
            .err()
            .map(|e| e.0)
            .unwrap_or_default();
        assert!(err.contains("does not exist"), "{err}");
    }
}

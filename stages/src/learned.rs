//! `otb docs`: one cell's documentation, as the store holds it, written as MCP's
//! `tools/list` result (`{"tools": [{"name", "description", "inputSchema"}]}`) with
//! its provenance under `_otb` (experiment, cell, round, scores before and after
//! where the store has them), for `otb mcp proxy --docs` or any MCP client
//! configuration.
//!
//! Tools carry their real names (a documentation row's `name_mapping` maps the
//! names an agent was shown back to them) and their input schema unchanged (the
//! row's own, else the gold documentation's); only the description is the
//! method's. An offline environment's tool set has one list; BFCL's documentation
//! is per instance (each instance has its own tools), so a BFCL cell needs
//! `--instance ID`.

use crate::at::{Cell, Method};
use crate::driver::Located;
use crate::env::{DriveError, Output};
use crate::experiment::Experiment;
use crate::rows::{DocRow, ScoreRow};
use crate::InputError;
use pipeline::Row;
use serde_json::{json, Map, Value};

/// Which cell's documentation to write: the method, and whatever else is needed
/// to name one cell of the grid (each `None` matches anything; a choice left open
/// with more than one answer is refused, listing the answers).
#[derive(Clone, Debug, Default)]
pub struct Query {
    /// The method (`toolobserver-guard` is ToolObserver with `guard`).
    pub method: Option<Method>,
    /// The guarded ToolObserver.
    pub guard: bool,
    /// The environment's table (`bfcl`, `chess`, `search`, ...).
    pub env: Option<String>,
    /// The documentation setting (BFCL) or tool set (offline environments).
    pub setting: Option<String>,
    /// The agent model spec.
    pub agent: Option<String>,
    /// The editor model spec.
    pub editor: Option<String>,
    /// The round (default: the last one computed).
    pub round: Option<i64>,
    /// The instance, for per-instance documentation (BFCL).
    pub instance: Option<String>,
}

impl Query {
    /// A query for `method` as experiment files and tables name it (`gold`, `base`,
    /// `toolobserver`, `toolobserver-guard`, `easytool`, `play2prompt`, `draft`,
    /// `tracefree`).
    pub fn for_method(name: &str) -> Result<Query, InputError> {
        let (method, guard) = Method::parse_label(name);
        match method {
            Some(m) => Ok(Query {
                method: Some(m),
                guard,
                ..Query::default()
            }),
            None => Err(InputError(format!(
                "--method {name}: not a method with documentation; one of {}",
                Method::ALL
                    .iter()
                    .map(|m| m.as_str())
                    .chain(["toolobserver-guard"])
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Whether the documentation output `o` is one `self` asks for. Gold is what the
    /// environment says is gold (BFCL's is the `gold` setting's, for every setting).
    fn matches(&self, exp: &Experiment, o: &Output) -> bool {
        let c = &o.cell;
        let rest = self.env.as_deref().is_none_or(|e| c.env == e)
            && self.agent.as_deref().is_none_or(|a| c.agent == a)
            && self.editor.as_deref().is_none_or(|e| c.editor == e)
            && self.round.is_none_or(|r| c.round == r);
        if self.method == Some(Method::Gold) {
            let setting = self.setting.as_deref().unwrap_or(&c.setting);
            return rest
                && exp
                    .registry
                    .get(c.env)
                    .is_some_and(|e| e.reader().is_gold_docs(setting, o.stage, c));
        }
        rest && self
            .method
            .is_none_or(|m| c.method == Some(m) && c.guard == self.guard)
            && self.setting.as_deref().is_none_or(|s| c.setting == s)
    }
}

/// The documentation of the one cell `q` names in `located` (the experiment `exp`),
/// as a tool list with provenance. Bad input (no such cell, several, an instance
/// to name) is an [`InputError`] listing the choices.
pub fn tool_list(exp: &Experiment, located: &Located, q: &Query) -> Result<Value, DriveError> {
    let docs: Vec<&Output> = located
        .run
        .outputs
        .iter()
        .filter(|o| o.entry.manifest.outputs.contains_key(DocRow::TABLE))
        .collect();
    let method = q.method.map_or("", |m| m.as_str());
    let found: Vec<&Output> = docs.iter().copied().filter(|o| q.matches(exp, o)).collect();
    if found.is_empty() {
        let have: Vec<String> = docs
            .iter()
            .filter(|o| o.cell.method.is_some())
            .map(|o| describe(&o.cell))
            .collect();
        return Err(InputError(format!(
            "{}: no computed documentation of method {method}{} in this store; computed: {}",
            exp.name,
            constraints(q),
            if have.is_empty() {
                "none (run the experiment first)".to_string()
            } else {
                dedup(have).join("; ")
            }
        ))
        .into());
    }
    // One cell (all but the round): several curves are a choice to make.
    let curves = dedup(found.iter().map(|o| describe_curve(&o.cell)).collect());
    if curves.len() > 1 {
        return Err(InputError(format!(
            "{}: {} cells have documentation of method {method}{}; name one with --env, --setting, --agent or --editor: {}",
            exp.name,
            curves.len(),
            constraints(q),
            curves.join("; ")
        ))
        .into());
    }
    // The last round (the last output of it in drive order).
    let last = found.iter().map(|o| o.cell.round).max().unwrap_or(0);
    let Some(out) = found.iter().rev().find(|o| o.cell.round == last) else {
        return Err(InputError(format!("{}: no documentation found", exp.name)).into());
    };
    let rows: Vec<DocRow> = out.entry.read()?;
    let row = pick_row(&rows, q, &out.cell)?;
    let gold = gold_row(exp, &docs, &out.cell, &row.instance_id)?;
    let mut tools = Vec::new();
    for t in row.tools.as_array().into_iter().flatten() {
        let Some(shown) = t.get("name").and_then(Value::as_str) else {
            continue;
        };
        let real = real_name(&row.name_mapping, shown).unwrap_or_else(|| shown.to_string());
        let description = t.get("description").and_then(Value::as_str).unwrap_or("");
        let schema = schema_of(t)
            .or_else(|| {
                gold.as_ref()
                    .and_then(|g| find_tool(&g.tools, &real))
                    .and_then(schema_of)
            })
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        tools.push(json!({"name": real, "description": description, "inputSchema": schema}));
    }
    let c = &out.cell;
    let mut cell = Map::new();
    cell.insert("env".into(), json!(c.env));
    cell.insert("setting".into(), json!(c.setting));
    cell.insert("method".into(), json!(c.method_name()));
    cell.insert("agent".into(), json!(c.agent));
    cell.insert("editor".into(), json!(c.editor));
    cell.insert("round".into(), json!(c.round));
    cell.insert("seed".into(), json!(c.seed));
    if row.instance_id != crate::env::SHARED {
        cell.insert("instance".into(), json!(row.instance_id));
    }
    let provenance = json!({
        "experiment": exp.name,
        "experiment_file": exp.path.display().to_string(),
        "cell": cell,
        "node": out.node,
        "key": out.entry.manifest.key.to_string(),
        "scores": scores(exp, located, c, &row.instance_id)?,
    });
    Ok(json!({"tools": tools, "_otb": provenance}))
}

/// The row of `rows` to write: the shared row of an offline tool set, or the
/// instance `q` names (required when there are several).
fn pick_row(rows: &[DocRow], q: &Query, cell: &Cell) -> Result<DocRow, DriveError> {
    if let Some(id) = &q.instance {
        return rows
            .iter()
            .find(|r| &r.instance_id == id)
            .cloned()
            .ok_or_else(|| {
                InputError(format!(
                    "--instance {id}: not an instance of {} (e.g. {})",
                    describe(cell),
                    rows.iter()
                        .take(3)
                        .map(|r| r.instance_id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .into()
            });
    }
    match rows {
        [one] => Ok(one.clone()),
        [] => Err(InputError(format!("{} has no documentation rows", describe(cell))).into()),
        many => Err(InputError(format!(
            "{}: documentation is per instance ({} instances, each with its own tools); name one with --instance ID (e.g. {})",
            describe(cell),
            many.len(),
            many.iter()
                .take(3)
                .map(|r| r.instance_id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into()),
    }
}

/// The gold documentation row of `instance` beside `cell` (its environment says
/// which documentation is gold), for schemas a setting removed.
fn gold_row(
    exp: &Experiment,
    docs: &[&Output],
    cell: &Cell,
    instance: &str,
) -> Result<Option<DocRow>, DriveError> {
    let reader = exp.registry.get(cell.env);
    let Some(g) = docs.iter().find(|o| {
        o.cell.env == cell.env
            && reader.is_some_and(|e| e.reader().is_gold_docs(&cell.setting, o.stage, &o.cell))
    }) else {
        return Ok(None);
    };
    let rows: Vec<DocRow> = g.entry.read()?;
    Ok(rows.into_iter().find(|r| r.instance_id == instance))
}

/// What the store has of the scores of `cell` ("after") and of Base on its setting
/// and agent ("before"), in the environment's own measure: BFCL's execution
/// accuracy E, or the first interval its reader reports (chess Elo, search and MCP
/// accuracy). `null` where a score is not computed.
fn scores(
    exp: &Experiment,
    located: &Located,
    cell: &Cell,
    instance: &str,
) -> Result<Value, DriveError> {
    let same = |c: &Cell, m: Method, guard: bool| {
        c.env == cell.env
            && c.setting == cell.setting
            && c.method == Some(m)
            && c.guard == guard
            && (cell.agent.is_empty() || c.agent == cell.agent)
            && c.split() != Some(crate::at::Split::Train)
    };
    let find = |m: Method,
                guard: bool,
                editor: Option<&str>,
                round: Option<i64>|
     -> Result<Option<Scored<'_>>, DriveError> {
        let keep = |c: &Cell| {
            same(c, m, guard)
                && editor.is_none_or(|e| c.editor == e)
                && round.is_none_or(|r| c.round <= r)
        };
        // BFCL records its score outputs (the curve its summary reads); the other
        // environments' are the outputs their reader gives an interval for.
        let recorded = located
            .run
            .curve
            .iter()
            .filter(|(_, c, _)| keep(c))
            .filter_map(|(_, c, h)| h.entry().map(|e| (c, h.node(), e)))
            .max_by_key(|(c, ..)| c.round);
        if recorded.is_some() {
            return Ok(recorded);
        }
        // The latest round first (of equal rounds, the last in the run's order, as
        // `max_by_key` picks): the first output with an interval is the score, so the
        // earlier rounds' rows are not read.
        let mut outputs: Vec<_> = located
            .run
            .outputs
            .iter()
            .rev()
            .filter(|o| keep(&o.cell))
            .collect();
        outputs.sort_by_key(|o| std::cmp::Reverse(o.cell.round));
        for o in outputs {
            let scored = (&o.cell, o.node.as_str(), &o.entry);
            if !intervals(exp, scored, o.stage)?.is_empty() {
                return Ok(Some(scored));
            }
        }
        Ok(None)
    };
    let mut out = Map::new();
    let after = match cell.method {
        Some(m) => find(m, cell.guard, Some(&cell.editor), Some(cell.round))?,
        None => None,
    };
    out.insert("after".into(), score(exp, after, instance)?);
    out.insert(
        "before".into(),
        score(exp, find(Method::Base, false, None, Some(0))?, instance)?,
    );
    Ok(Value::Object(out))
}

/// A score output: its cell, node and stored entry.
type Scored<'a> = (&'a Cell, &'a str, &'a pipeline::Entry);

/// The intervals the reader of `cell`'s environment reports for a stored output
/// (none for an environment this experiment does not have).
fn intervals(
    exp: &Experiment,
    (cell, node, entry): Scored<'_>,
    stage: &str,
) -> Result<Vec<crate::reading::Interval>, DriveError> {
    let Some(env) = exp.registry.get(cell.env) else {
        return Ok(Vec::new());
    };
    let computed = crate::reading::Computed {
        node,
        stage,
        cell,
        entry,
    };
    Ok(env.reader().intervals(&computed)?)
}

/// One score output's measure over all its items (and, for per-instance
/// documentation, the instance's own verdict).
fn score(exp: &Experiment, at: Option<Scored<'_>>, instance: &str) -> Result<Value, DriveError> {
    let Some((cell, node, entry)) = at else {
        return Ok(Value::Null);
    };
    if entry.manifest.outputs.contains_key(ScoreRow::TABLE) {
        let rows: Vec<ScoreRow> = entry.read()?;
        if rows.is_empty() {
            return Ok(Value::Null);
        }
        let e = rows.iter().filter(|r| r.e).count() as f64 / rows.len() as f64;
        let own = rows.iter().find(|r| r.instance_id == instance).map(|r| r.e);
        return Ok(
            json!({"measure": "E (execution accuracy)", "value": e, "n": rows.len(), "instance_e": own, "round": cell.round, "node": node}),
        );
    }
    Ok(match intervals(exp, (cell, node, entry), "")?.first() {
        Some(i) => {
            json!({"measure": i.title, "value": i.value, "lo": i.lo, "hi": i.hi, "round": cell.round, "node": node})
        }
        None => Value::Null,
    })
}

fn find_tool<'a>(tools: &'a Value, name: &str) -> Option<&'a Value> {
    tools
        .as_array()?
        .iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
}

/// A tool's argument schema, under whichever key its row keeps it.
fn schema_of(t: &Value) -> Option<Value> {
    ["inputSchema", "input_schema", "parameters"]
        .iter()
        .find_map(|k| t.get(*k).filter(|v| v.is_object()).cloned())
}

/// The real name of a shown tool, from a documentation row's `[[real, shown], ...]`.
fn real_name(mapping: &Value, shown: &str) -> Option<String> {
    mapping.as_array()?.iter().find_map(|p| {
        let p = p.as_array()?;
        (p.get(1)?.as_str()? == shown).then(|| p.first()?.as_str().map(str::to_string))?
    })
}

fn describe_curve(c: &Cell) -> String {
    let mut s = format!("{} {} {}", c.env, c.setting, c.method_name());
    if !c.agent.is_empty() {
        s += &format!(" agent={}", c.agent);
    }
    if !c.editor.is_empty() {
        s += &format!(" editor={}", c.editor);
    }
    s
}

fn describe(c: &Cell) -> String {
    format!("{} round {}", describe_curve(c), c.round)
}

fn constraints(q: &Query) -> String {
    let mut s = String::new();
    for (k, v) in [
        ("env", &q.env),
        ("setting", &q.setting),
        ("agent", &q.agent),
        ("editor", &q.editor),
    ] {
        if let Some(v) = v {
            s += &format!(" {k}={v}");
        }
    }
    if let Some(r) = q.round {
        s += &format!(" round={r}");
    }
    s
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|s| seen.insert(s.clone()));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_parse_and_unknown_ones_list_the_choices() {
        let q = Query::for_method("toolobserver-guard").expect("parse");
        assert_eq!((q.method, q.guard), (Some(Method::ToolObserver), true));
        for m in Method::ALL {
            assert_eq!(
                Query::for_method(m.as_str()).expect("parse").method,
                Some(m)
            );
        }
        let e = Query::for_method("magic").expect_err("unknown").to_string();
        assert!(e.contains("tracefree") && e.contains("magic"), "{e}");
    }

    #[test]
    fn names_map_back_and_schemas_are_found_under_any_key() {
        let m = json!([["add", "function_1"]]);
        assert_eq!(real_name(&m, "function_1").as_deref(), Some("add"));
        assert_eq!(real_name(&m, "function_2"), None);
        let t = json!({"name": "a", "inputSchema": {"type": "object"}});
        assert_eq!(schema_of(&t), Some(json!({"type": "object"})));
        assert_eq!(schema_of(&json!({"name": "a"})), None);
    }
}

//! ToolObserver, offline mode (`toolobserver.md`): the tools are shared by every
//! instance, so the editor learns from a training split and the final
//! documentation is evaluated on the test split. For k = 1..K:
//!
//! ```text
//! explore[train r(k-1)] (-> the environment's grading node, e.g. search's judge)
//!                       -> batch-reflect[r k] (mini-batches of 10, one editor request each)
//!                       -> consensus-merge[r k] (one request over every batch's analysis)
//!                       -> docs r k
//! docs r K -> explore[test] -> evaluate
//! ```
//!
//! Written once against [`OfflineEnv`] (chess, search, the tests' toy environment).
//! Every round rewrites all tools (no convergence rule). Documentation is one
//! [`DocRow`] whose instance is [`SHARED`].

use crate::baselines;
use crate::baselines::budget::Baselines;
use crate::batch_reflect::render_tool;
use crate::env::{
    At, Cx, DriveError, Method, Naming, OfflineEnv, Play, Shown, Split, Step, SHARED,
};
use crate::models::{Editor, ModelSpec};
use crate::rows::{DocRow, EditRow, InstanceRow};
use pipeline::{Handle, Row, StageCtx, StageError, Usage};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

pub mod blocks;
pub mod multi_turn;
pub mod sft;

/// The offline reflect stage (one request per mini-batch).
pub const REFLECT_STAGE: &str = "batch-reflect";
/// Offline batch-reflect shares the stage name with the online form (its key's
/// `mode` tells them apart); its own version.
/// 2: a description ends where the editor's reasoning or summary starts
/// ([`blocks`]).
/// 3: a closing section's header directly under a description (`Decision
/// framework:`) ends it, and a description's second paragraph is kept.
pub const REFLECT_VERSION: u32 = 3;
/// The stage that merges a round's batch analyses into the next docs.
pub const MERGE_STAGE: &str = "consensus-merge";
/// 2, 3: as [`REFLECT_VERSION`].
pub const MERGE_VERSION: u32 = 3;

/// How many tokens an offline editor reply may take (a standard model's default is
/// 512): a batch analysis or a merge rewrites every tool of the set (10 tools of a
/// few sentences each, with the editor's reasoning around them), and a reply cut at
/// 512 tokens described only 5 of 10 tools (`make reproduce-table4`, 2026-11-25). A
/// reasoning model keeps its own, larger budget. Part of both stages' keys.
pub const EDITOR_REPLY_TOKENS: u32 = 4096;

/// The error kind of an editor row whose reply stopped at its token limit: the
/// description it was writing last is incomplete and is not used.
pub const CUT_REPLY: &str = "length";

/// The batch analysis prompt shipped with the project (`prompts/editor_batch.txt`).
pub const DEFAULT_BATCH: &str = include_str!("../../../prompts/editor_batch.txt");
/// The consensus-merge prompt shipped with the project (`prompts/editor_merge.txt`).
pub const DEFAULT_MERGE: &str = include_str!("../../../prompts/editor_merge.txt");

/// One mini-batch's analysis: which trajectories it saw and what it proposed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "analyses",
    doc = "one offline batch-reflect request: a mini-batch of trajectories"
)]
pub struct AnalysisRow {
    /// The reflection round (1..K).
    pub round: i64,
    /// The mini-batch's number within the round.
    pub batch: i64,
    /// Indices (in exploration order) of the trajectories in this batch.
    pub trajectories: Vec<i64>,
    /// The editor model spec.
    pub model: String,
    /// The editor's reply (none when the call failed).
    pub reply: Option<String>,
    /// `{tool name: proposed description}` parsed from the reply.
    pub proposals: Value,
    /// The class of a failed call, or `length` for a reply cut at its limit.
    pub error_kind: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Completion tokens.
    pub completion_tokens: i64,
    /// Reasoning tokens.
    pub reasoning_tokens: i64,
}

/// Where a tool's merged description came from.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "merge",
    doc = "one tool's description after consensus-merge, and its source"
)]
pub struct MergeRow {
    /// The reflection round (1..K).
    pub round: i64,
    /// The tool's name.
    pub tool: String,
    /// `merge` (the merge reply), `majority` (the merge omitted the tool: most
    /// frequent batch proposal) or `unchanged` (no proposal at all).
    pub source: String,
    /// The description the next round uses.
    pub description: String,
}

/// The most frequent proposal (whitespace-normalised; ties go to the earliest).
pub fn majority<'a>(proposals: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for p in proposals {
        let p = p.split_whitespace().collect::<Vec<_>>().join(" ");
        if p.is_empty() {
            continue;
        }
        match counts.iter_mut().find(|(t, _)| *t == p) {
            Some((_, n)) => *n += 1,
            None => counts.push((p, 1)),
        }
    }
    let best = counts.iter().map(|(_, n)| *n).max()?;
    counts.into_iter().find(|(_, n)| *n == best).map(|(t, _)| t)
}

fn tools_text(tools: &[Value]) -> String {
    tools
        .iter()
        .map(render_tool)
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn tool_names(tools: &[Value]) -> Vec<&str> {
    tools
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .collect()
}

fn shared_tools(docs: &[DocRow]) -> Result<(DocRow, Vec<Value>), StageError> {
    let d = docs
        .iter()
        .find(|d| d.instance_id == SHARED)
        .cloned()
        .ok_or_else(|| StageError::bug(REFLECT_STAGE, "no shared documentation row"))?;
    let tools = d.tools.as_array().cloned().unwrap_or_default();
    Ok((d, tools))
}

fn edit_row(id: String, round: i64, model: &str) -> EditRow {
    EditRow {
        instance_id: id,
        round,
        model: model.to_string(),
        sent: true,
        reply: None,
        updated: Vec::new(),
        lenient_parses: 0,
        error_kind: None,
        prompt_tokens: 0,
        completion_tokens: 0,
        reasoning_tokens: 0,
    }
}

/// What offline `batch-reflect` is asked with: one struct, serialised as the stage
/// key's params and read by the run.
#[derive(Serialize)]
pub struct ReflectParams<'a> {
    /// Always `offline` (the online form shares the stage name).
    pub mode: &'static str,
    /// [`EDITOR_REPLY_TOKENS`].
    pub max_tokens: u32,
    /// The editor model.
    pub editor: ModelSpec,
    /// The prompt template.
    pub template: &'a str,
    /// What the editor must know of the environment (its notes).
    pub notes: &'a str,
    /// Trajectories per mini-batch (one request each).
    pub batch_size: usize,
    /// The reflection round (1..K).
    pub round: i64,
    /// The chain's seed, sent with every request.
    pub seed: u64,
}

/// What `consensus-merge` is asked with (its key's params, read by the run).
#[derive(Serialize)]
pub struct MergeParams<'a> {
    /// The editor model.
    pub editor: ModelSpec,
    /// [`EDITOR_REPLY_TOKENS`].
    pub max_tokens: u32,
    /// The prompt template.
    pub template: &'a str,
    /// What the editor must know of the environment (its notes).
    pub notes: &'a str,
    /// The reflection round (1..K).
    pub round: i64,
    /// The chain's seed, sent with every request.
    pub seed: u64,
}

/// Stage `batch-reflect` (offline): trajectories split in order into mini-batches of
/// `batch_size`; one editor request per batch, sent concurrently. Every trajectory
/// is in exactly one batch.
/// The `field` descriptions of `reply` for the tools `names` ([`blocks::parse`]),
/// without the last one when the reply was cut at its token limit: what it was
/// writing then is incomplete.
fn parse_reply(reply: &crate::models::EditorReply, field: &str, names: &[&str]) -> blocks::Blocks {
    let mut parsed = reply
        .text
        .as_deref()
        .map(|t| blocks::parse(t, field, names))
        .unwrap_or_default();
    if reply.cut {
        parsed.descriptions.pop();
    }
    parsed
}

/// The error kind an editor row records: the failed call's class, or [`CUT_REPLY`]
/// for a reply that stopped at its token limit.
fn error_kind(r: &crate::models::EditorReply) -> Option<String> {
    match (&r.error, r.cut) {
        (Some(f), _) => Some(f.kind.clone()),
        (None, true) => Some(CUT_REPLY.to_string()),
        (None, false) => None,
    }
}

/// Offline `batch-reflect`: one editor request per mini-batch of `trajectories`, each proposing descriptions for the shared tools; writes the analyses and the edit rows.
pub fn batch_reflect(
    ctx: &mut StageCtx<'_>,
    editor: &dyn Editor,
    p: &ReflectParams<'_>,
    docs: &[DocRow],
    trajectories: &[String],
) -> Result<(), StageError> {
    let (_, tools) = shared_tools(docs)?;
    let size = p.batch_size.max(1);
    let batches: Vec<Vec<usize>> = (0..trajectories.len())
        .collect::<Vec<_>>()
        .chunks(size)
        .map(<[usize]>::to_vec)
        .collect();
    let prompts: Vec<String> = batches
        .iter()
        .map(|b| {
            let text = b
                .iter()
                .map(|&i| format!("Trajectory {}:\n{}", i + 1, trajectories[i]))
                .collect::<Vec<_>>()
                .join("\n\n");
            p.template
                .replace("{{notes}}", p.notes)
                .replace("{{tools}}", &tools_text(&tools))
                .replace("{{trajectories}}", &text)
        })
        .collect();
    let pb = ctx.progress(prompts.len() as u64);
    let replies = editor.complete_all(&prompts, p.seed, &|| pb.inc(1));
    pb.finish_and_clear();
    crate::models::check_replies(REFLECT_STAGE, &replies, prompts.len())?;
    let mut usage = Usage::default();
    let mut rows = Vec::with_capacity(batches.len());
    let mut edits = Vec::with_capacity(batches.len());
    for (i, (b, r)) in batches.iter().zip(&replies).enumerate() {
        r.usage.record(&mut usage, r.error.is_some());
        let mut proposals = Map::new();
        let names = tool_names(&tools);
        let parsed = parse_reply(r, "Updated description", &names);
        for (name, desc) in parsed.descriptions {
            if names.contains(&name.as_str()) {
                proposals.insert(name, Value::String(desc));
            }
        }
        let mut e = edit_row(format!("batch-{i}"), p.round, &p.editor.to_string());
        e.reply = r.text.clone();
        e.updated = proposals.keys().cloned().collect();
        e.lenient_parses = (parsed.cut + parsed.repeated) as i64;
        e.error_kind = error_kind(r);
        e.prompt_tokens = r.usage.prompt_tokens as i64;
        e.completion_tokens = r.usage.completion_tokens as i64;
        e.reasoning_tokens = r.usage.reasoning_tokens as i64;
        rows.push(AnalysisRow {
            round: p.round,
            batch: i as i64,
            trajectories: b.iter().map(|&i| i as i64).collect(),
            model: p.editor.to_string(),
            reply: r.text.clone(),
            proposals: Value::Object(proposals),
            error_kind: e.error_kind.clone(),
            prompt_tokens: e.prompt_tokens,
            completion_tokens: e.completion_tokens,
            reasoning_tokens: e.reasoning_tokens,
        });
        edits.push(e);
    }
    ctx.add_usage(&usage);
    ctx.write(&rows)?;
    ctx.write(&edits)?;
    Ok(())
}

/// Stage `consensus-merge`: one editor request over every batch's analysis; a tool
/// the merge omits falls back to the majority of the batch proposals for it, and a
/// tool nobody proposed anything for keeps its description.
pub fn consensus_merge(
    ctx: &mut StageCtx<'_>,
    editor: &dyn Editor,
    p: &MergeParams<'_>,
    docs: &[DocRow],
    analyses: &[AnalysisRow],
) -> Result<(), StageError> {
    let (mut doc, mut tools) = shared_tools(docs)?;
    let text = analyses
        .iter()
        .map(|a| {
            format!(
                "Batch {}:\n{}",
                a.batch + 1,
                a.reply
                    .as_deref()
                    .unwrap_or("(no analysis: the request failed)")
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    let prompt = p
        .template
        .replace("{{notes}}", p.notes)
        .replace("{{tools}}", &tools_text(&tools))
        .replace("{{analyses}}", &text);
    let reply = editor
        .complete_all(std::slice::from_ref(&prompt), p.seed, &|| {})
        .pop()
        .ok_or_else(|| StageError::bug(MERGE_STAGE, "editor returned no reply"))?;
    if let Some(e) = crate::models::infrastructure_error(MERGE_STAGE, reply.error.as_ref()) {
        return Err(e);
    }
    let mut usage = Usage::default();
    reply.usage.record(&mut usage, reply.error.is_some());
    let names: Vec<String> = tool_names(&tools).into_iter().map(str::to_string).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    // A tool whose description was cut takes the batches' majority instead.
    let parsed = parse_reply(&reply, "Final description", &names);
    let merged = &parsed.descriptions;
    let mut merge_rows = Vec::with_capacity(tools.len());
    let mut edit = edit_row("merge".into(), p.round, &p.editor.to_string());
    for tool in tools.iter_mut() {
        let name = tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let (source, desc) = match merged.iter().find(|(n, _)| *n == name) {
            Some((_, d)) => ("merge", Some(d.clone())),
            None => {
                let props = analyses
                    .iter()
                    .filter_map(|a| a.proposals.get(&name).and_then(Value::as_str));
                match majority(props) {
                    Some(d) => ("majority", Some(d)),
                    None => ("unchanged", None),
                }
            }
        };
        if let Some(d) = &desc {
            if tool.get("description").and_then(Value::as_str) != Some(d.as_str()) {
                tool["description"] = Value::String(d.clone());
                edit.updated.push(name.clone());
            }
        }
        merge_rows.push(MergeRow {
            round: p.round,
            tool: name,
            source: source.into(),
            description: tool
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        });
    }
    edit.reply = reply.text.clone();
    edit.lenient_parses = (parsed.cut + parsed.repeated) as i64;
    edit.error_kind = error_kind(&reply);
    edit.prompt_tokens = reply.usage.prompt_tokens as i64;
    edit.completion_tokens = reply.usage.completion_tokens as i64;
    edit.reasoning_tokens = reply.usage.reasoning_tokens as i64;
    doc.changed = !edit.updated.is_empty();
    doc.round = p.round;
    doc.tools = Value::Array(tools);
    ctx.add_usage(&usage);
    ctx.write(&[doc])?;
    ctx.write(&merge_rows)?;
    ctx.write(&[edit])?;
    Ok(())
}

/// One offline ToolObserver curve's protocol (its cell -- tool set, agent, editor --
/// is an [`At`]).
pub struct OfflineCurve<'a> {
    /// The batch-analysis template.
    pub batch_template: &'a str,
    /// The consensus-merge template.
    pub merge_template: &'a str,
    /// K: every round rewrites all tools.
    pub rounds: u32,
    /// Trajectories per batch-reflect request (10 in the paper).
    pub batch_size: usize,
    /// How the agent samples on each split.
    pub sampling: &'a crate::models::SplitSampling,
}

impl OfflineCurve<'_> {
    fn sampling(&self, split: Split) -> &crate::models::TurnSampling {
        match split {
            Split::Train => &self.sampling.explore,
            Split::Test => &self.sampling.test,
        }
    }
}

/// Rounds 1..K of the curve at `at` (its method and editor set) from `docs0`, then
/// the final docs on the test split: returns the test trajectories and scores, or
/// `None` when a node is blocked (status mode).
pub fn toolobserver<'p>(
    env: &'p dyn OfflineEnv,
    cx: &mut Cx<'p, '_>,
    at: &At,
    curve: &OfflineCurve<'p>,
    docs0: &Handle,
) -> Result<(Handle, Handle), DriveError> {
    let c = curve;
    let editor = at.editor_for(REFLECT_STAGE)?;
    let models = cx.models;
    let mut docs = docs0.clone();
    for round in 1..=c.rounds as i64 {
        let train = at.play(Some(Split::Train), round - 1);
        let play = Play {
            at: &train,
            sampling: c.sampling(Split::Train),
            docs: &docs,
        };
        let traj = env.explore(cx, &play)?;
        // An environment may grade the training play in a node of its own (search's
        // judge): batch-reflect then reads that node's output (under the same input
        // name, so keys are those of before the grading node had a seam of its own).
        let graded = env.grade(cx, &play, &traj)?;
        let is_graded = graded.is_some();
        let read = graded.as_ref().unwrap_or(&traj);
        let params = ReflectParams {
            mode: "offline",
            max_tokens: EDITOR_REPLY_TOKENS,
            editor: editor.clone(),
            template: c.batch_template,
            notes: env.editor_notes(),
            batch_size: c.batch_size,
            round,
            seed: at.seed,
        };
        let edit = at.at(Step::Edit, round);
        let analyses = cx.stage(
            &edit,
            REFLECT_STAGE,
            REFLECT_VERSION,
            params,
            &[("docs", &docs), ("trajectories", read)],
            move |ctx, params| {
                let ed = models.editor_with_room(&params.editor, params.max_tokens)?;
                let read = ctx.input("trajectories")?;
                let serialized = if is_graded {
                    env.serialize_graded(read)?
                } else {
                    env.serialize(read)?
                };
                let docs_rows: Vec<DocRow> = ctx.read("docs")?;
                batch_reflect(ctx, ed.as_ref(), params, &docs_rows, &serialized)
            },
        )?;
        let merge = MergeParams {
            editor: editor.clone(),
            max_tokens: EDITOR_REPLY_TOKENS,
            template: c.merge_template,
            notes: env.editor_notes(),
            round,
            seed: at.seed,
        };
        let merged = cx.stage(
            &edit,
            MERGE_STAGE,
            MERGE_VERSION,
            merge,
            &[("docs", &docs), ("analyses", &analyses)],
            move |ctx, merge| {
                let ed = models.editor_with_room(&merge.editor, merge.max_tokens)?;
                let docs_rows: Vec<DocRow> = ctx.read("docs")?;
                let analysis_rows: Vec<AnalysisRow> = ctx.read("analyses")?;
                consensus_merge(ctx, ed.as_ref(), merge, &docs_rows, &analysis_rows)
            },
        )?;
        docs = merged;
    }
    let test = at.play(Some(Split::Test), c.rounds as i64);
    let play = Play {
        at: &test,
        sampling: c.sampling(Split::Test),
        docs: &docs,
    };
    let traj = env.explore(cx, &play)?;
    let scores = env.evaluate(cx, &play, &traj)?;
    Ok((traj, scores))
}

/// Stage `<stage>[<setting> gold|opaque]`: an offline environment's shared
/// documentation row, recorded as the Gold / Base method's docs (`at`: the tool set
/// and the method, `gold` or `base`).
pub fn docs_stage(
    cx: &mut Cx<'_, '_>,
    stage: &'static str,
    at: &At,
    tools: Vec<Value>,
) -> Result<Handle, DriveError> {
    let docs = if at.method == "gold" {
        "gold"
    } else {
        "opaque"
    };
    let row = DocRow {
        instance_id: SHARED.into(),
        setting: at.setting.clone(),
        round: 0,
        tools: Value::Array(tools),
        name_mapping: Value::Null,
        changed: true,
        frozen: false,
        demos: Value::Null,
    };
    cx.stage(
        at,
        stage,
        1,
        json!({"tool_set": at.setting, "docs": docs, "tools": row.tools}),
        &[],
        move |ctx, _| {
            ctx.write(std::slice::from_ref(&row))?;
            Ok(())
        },
    )
}

/// The offline editor's prompt templates (batch analysis, consensus merge): the
/// experiment's `[prompts]` set or files.
#[derive(Clone, Copy, Debug)]
pub struct Templates<'a> {
    /// The batch-analysis template.
    pub batch: &'a str,
    /// The consensus-merge template.
    pub merge: &'a str,
}

impl Default for Templates<'_> {
    fn default() -> Self {
        Templates {
            batch: DEFAULT_BATCH,
            merge: DEFAULT_MERGE,
        }
    }
}

/// What an experiment fixes for every offline environment: the editor's templates
/// and how agents sample.
#[derive(Clone, Debug, Default)]
pub struct Protocol<'a> {
    /// The editor's templates.
    pub templates: Templates<'a>,
    /// How agents sample when exploring (the training split) and in test play.
    pub sampling: crate::models::SplitSampling,
}

/// What every tool set of an offline experiment shares.
pub struct GridSpec<'a> {
    /// Templates and sampling.
    pub protocol: Protocol<'a>,
    /// The agents, one chain each.
    pub agents: &'a [ModelSpec],
    /// The editors of ToolObserver and the baselines.
    pub editors: &'a [ModelSpec],
    /// The methods to run.
    pub methods: &'a [crate::env::Method],
    /// The experiment's seed (each chain's requests carry it).
    pub seed: u64,
    /// ToolObserver rounds (K).
    pub rounds: u32,
    /// Trajectories per mini-batch (one request each).
    pub batch_size: usize,
    /// The baselines' budgets (EasyTool, Play2Prompt, DRAFT).
    pub baselines: &'a Baselines,
}

/// What an offline grid runs for one tool set: the shared spec and this set's docs.
struct Grid<'a> {
    /// The tool set's cell (naming, setting, which coordinates are shown).
    cell: At,
    gold: Handle,
    opaque: Handle,
    spec: &'a GridSpec<'a>,
}

/// One tool set of an offline experiment: its gold and opaque docs stages
/// (`<stage>[<setting> gold|opaque]`), then the grid over them: Gold, Base, +TO and
/// the baselines for every agent and editor.
pub fn drive_tool_set<'p>(
    env: &'p dyn OfflineEnv,
    cx: &mut Cx<'p, '_>,
    spec: &'p GridSpec<'p>,
    stage: &'static str,
    setting: &str,
    gold: Vec<Value>,
    opaque: Vec<Value>,
) -> Result<(), DriveError> {
    let cell = At {
        seed: spec.seed,
        shown: Shown {
            seed: false,
            agent: spec.agents.len() > 1,
            editor: spec.editors.len() > 1,
        },
        ..At::new(Naming::Offline, setting, "base")
    };
    let grid = Grid {
        gold: docs_stage(cx, stage, &cell.with_method("gold"), gold)?,
        opaque: docs_stage(cx, stage, &cell, opaque)?,
        cell,
        spec,
    };
    drive_grid(env, cx, &grid)
}

/// Gold and Base (the test split with the gold / opaque docs), +TO (offline
/// ToolObserver from the opaque docs) and the baselines (docs from the opaque docs
/// through the baseline stages) of one tool set, for every agent and editor. In a run
/// their nodes run concurrently as their inputs are computed (EasyTool and DRAFT
/// docs, which do not depend on the agent, are computed once).
fn drive_grid<'p>(
    env: &'p dyn OfflineEnv,
    cx: &mut Cx<'p, '_>,
    g: &Grid<'p>,
) -> Result<(), DriveError> {
    let GridSpec {
        agents, editors, ..
    } = *g.spec;
    let has = |m: &str| g.spec.methods.iter().any(|x| x.as_str() == m);
    let test_sampling = &g.spec.protocol.sampling.test;
    for agent in agents {
        let chain = At {
            agent: Some(agent.clone()),
            ..g.cell.clone()
        };
        for (method, docs) in [("gold", &g.gold), ("base", &g.opaque)] {
            if !has(method) {
                continue;
            }
            let at = chain.with_method(method).play(Some(Split::Test), 0);
            let play = Play {
                at: &at,
                sampling: test_sampling,
                docs,
            };
            let t = env.explore(cx, &play)?;
            env.evaluate(cx, &play, &t)?;
        }
        if has("toolobserver") {
            for editor in editors {
                let at = chain.with_method("toolobserver").with_editor(editor);
                let curve = OfflineCurve {
                    batch_template: g.spec.protocol.templates.batch,
                    merge_template: g.spec.protocol.templates.merge,
                    rounds: g.spec.rounds,
                    batch_size: g.spec.batch_size,
                    sampling: &g.spec.protocol.sampling,
                };
                toolobserver(env, cx, &at, &curve, &g.opaque)?;
            }
        }
        for &method in g.spec.methods.iter().filter(|m| m.is_baseline()) {
            for editor in editors {
                let at = chain.with_method(method.as_str()).with_editor(editor);
                baseline(env, cx, g, method, &at)?;
            }
        }
    }
    Ok(())
}

/// One baseline's docs for a tool set (the shared documentation row is the method's
/// one "instance") at the cell `at` (its agent and editor set), then the test split
/// with them. EasyTool and DRAFT do not depend on the agent: their docs are computed
/// once per editor.
fn baseline<'p>(
    env: &'p dyn OfflineEnv,
    cx: &mut Cx<'p, '_>,
    g: &Grid<'p>,
    method: Method,
    at: &At,
) -> Result<(), DriveError> {
    let shared = InstanceRow {
        instance_id: SHARED.into(),
        category: at.setting.clone(),
        idx: 0,
        question: String::new(),
        functions: Value::Array(Vec::new()),
        ground_truth: Value::Array(Vec::new()),
        execution_result_type: Value::Array(Vec::new()),
    };
    let (runner_params, runner_inputs) = env.runner_key();
    // An external method's stage reads the training split alone (`play_key`'s
    // inputs, in place of the tool runner's, which hold the test split too).
    let external = method.external_name().is_some();
    let (play_params, item_inputs) = if external {
        env.play_key()
    } else {
        (Value::Null, runner_inputs)
    };
    let mut inputs: Vec<(&str, &Handle)> = vec![("docs", &g.opaque)];
    inputs.extend(item_inputs.iter().map(|(k, h)| (*k, h)));
    let run = baselines::BaselineStage {
        method,
        params: baselines::BaselineParams::new(
            method,
            g.spec.baselines,
            at,
            env.agent_system(),
            &runner_params,
        )?
        .with_play(play_params),
        budgets: g.spec.baselines,
        instances: Box::new(move || Ok(std::borrow::Cow::Owned(vec![shared]))),
        docs: Box::new(|ctx| ctx.read("docs")),
        // Tool play on training material (Play2Prompt, DRAFT, and Trace-Free+'s
        // single calls when it is trace-based: chess, a tool on a training position;
        // search, a domain search with the query its editor proposes).
        // An external method's `call_tool`: on the training items only.
        runner: Box::new(move || {
            if external {
                env.training_runner()
            } else {
                env.tool_runner()
            }
        }),
        // An external method's `play`: the agent on training items only.
        player: Box::new(move || env.player()),
    };
    let docs = baselines::stage(cx, at, run, &inputs)?;
    let test = at.play(Some(Split::Test), 0);
    let play = Play {
        at: &test,
        sampling: &g.spec.protocol.sampling.test,
        docs: &docs,
    };
    let t = env.explore(cx, &play)?;
    env.evaluate(cx, &play, &t)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_counts_normalised_text_and_breaks_ties_by_order() {
        assert_eq!(majority(["a  b", "c", "a b"]).as_deref(), Some("a b"));
        assert_eq!(majority(["x", "y"]).as_deref(), Some("x"));
        assert_eq!(majority(["", " "]), None);
    }
}

//! Any MCP server as an environment (`[mcp]`, issue #57 section 1): the tools of one
//! server are one shared tool set, in each documentation setting (`as-is`, `names`,
//! `names+desc`, `names+params`); a multi-turn agent does the tasks of a JSON-lines
//! file with real calls to the server; ToolObserver runs offline ([`crate::offline`])
//! or, with `toolobserver = "online"`, online per test task ([`online`]); the
//! baselines call the server's tools in their tool play.
//!
//! ```text
//! mcp-server[<server>] (start it once: identity, tools/list)   mcp-tasks[<server>] (split)
//!    -> mcp-docs[<server>:<setting> gold|opaque] -> mcp-explore[... test] -> mcp-evaluate
//!                        \-> offline ToolObserver (mcp-explore[train] -> batch-reflect -> consensus-merge) x K
//!                        \-> easytool | play2prompt | draft | tracefree -> mcp-explore[test] -> mcp-evaluate
//! ```
//!
//! A server is started only inside a stage that must be computed ([`host`]): a rerun
//! whose stages are stored starts none and calls none. Its identity (command, URL,
//! `serverInfo`, the working folder's digest) is stored by `mcp-server` and is part
//! of every episode's key; `mcp-server`'s own key is what can be known without
//! starting it (the spec and the working folder's digest).
//!
//! One file per part: `config.rs` (the `[mcp]` table), `tasks.rs` (the tasks file,
//! `mcp-tasks`), `tools.rs` (the documentation settings, opaque names),
//! `host.rs` (the server layer), `explore.rs` (`mcp-explore`), `evaluate.rs`
//! (`mcp-evaluate`), `env.rs` (the [`OfflineEnv`](crate::env::OfflineEnv)),
//! `online.rs` (ToolObserver's online mode),
//! `scripted.rs` (`scripted:mcp-reader`, `scripted:mcp-observer`), `reading.rs`
//! (the report's items), `rows.rs`.

pub mod config;
mod env;
pub mod evaluate;
pub mod explore;
pub mod host;
pub mod judge;
pub mod online;
pub mod reading;
pub mod rows;
pub mod scripted;
pub mod tasks;
pub mod tools;

pub use config::{McpExperiment, RawMcp, ServerConfig};
pub use evaluate::{score, EVALUATE_STAGE, EVALUATE_VERSION};
pub use explore::{EXPLORE_STAGE, EXPLORE_VERSION};
pub use judge::{JUDGE_STAGE, JUDGE_VERSION};
pub use rows::{exported, EpisodeRow, McpJudgeRow, McpScoreRow, ServerRow, TaskRow};
pub use tasks::{TASKS_STAGE, TASKS_VERSION};
pub use tools::{DocSetting, ServerTool, ServerTools};

use crate::env::{Cx, DriveError, Splits};
use crate::models::{ModelKind, ModelSpec};
use crate::offline;
use crate::InputError;
use host::Host;
use pipeline::{Handle, StageCtx, StageError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A tool set's gold or opaque documentation (`offline::docs_stage`).
pub const DOCS_STAGE: &str = "mcp-docs";
/// Stage `mcp-server[<server>]`: the server started once, its identity and tools.
pub const SERVER_STAGE: &str = "mcp-server";
/// The server stage's version.
pub const SERVER_VERSION: u32 = 1;

/// One server of a drive: its table, and the server itself once a stage needs it.
pub(crate) struct ServerState<'a> {
    cfg: &'a ServerConfig,
    host: crate::once::BuildOnce<Host>,
    scratch: PathBuf,
}

impl ServerState<'_> {
    /// The started server (started now if no stage of this drive did yet).
    pub(crate) fn host(&self, stage: &str) -> Result<&Host, StageError> {
        self.host
            .get_or_try_build(|| Host::open(stage, self.cfg, &self.scratch))
    }
}

/// One tool set: a server in one documentation setting.
pub(crate) struct Mcp<'a> {
    m: &'a McpExperiment,
    server: &'a ServerState<'a>,
    setting: DocSetting,
    /// The cell's setting (`git:names`).
    set: String,
    /// The agent's system prompt.
    system: String,
    tasks: &'a Splits<TaskRow>,
    /// `mcp-server[<server>]`'s output.
    server_out: &'a Handle,
    tools: &'a ServerTools,
    /// The server's identity (from `mcp-server`).
    identity: &'a Value,
    /// Which of its splits have rubric tasks (judged) or unscored tasks.
    grading: judge::Grading,
}

/// The key of `mcp-server[<server>]`: what can be known of the server without
/// starting it (its spec, each `env` value by its sha256, the working folder's
/// digest).
pub fn server_key(s: &ServerConfig) -> Result<Value, InputError> {
    use sha2::Digest;
    let env: serde_json::Map<String, Value> = s
        .env
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                json!(hex::encode(sha2::Sha256::digest(v.as_bytes()))),
            )
        })
        .collect();
    let workdir = match &s.workdir {
        Some(w) => Some(workdir_digest(w).map_err(|e| {
            InputError(format!(
                "mcp.servers.{}.workdir {}: {e}",
                s.name,
                w.display()
            ))
        })?),
        None => None,
    };
    Ok(json!({
        "server": s.name,
        "command": s.written_command,
        "url": s.url,
        "env": env,
        "cwd": s.cwd.is_some(),
        "alias": s.alias,
        "fresh": s.fresh,
        "workdir": workdir,
    }))
}

/// sha256 (hex) over a folder's sorted relative paths and contents (a link by its
/// target), at most [`::mcp::servers::MAX_WORKDIR_FILES`] entries and
/// [`::mcp::servers::MAX_WORKDIR_BYTES`] bytes.
pub fn workdir_digest(root: &Path) -> Result<String, String> {
    use sha2::Digest;
    if !root.is_dir() {
        // The shipped benchmark's folders are generated, not committed.
        let generated = root
            .ancestors()
            .any(|a| a.file_name().is_some_and(|n| n == "mcp-fixtures"));
        return Err(if generated {
            "no such folder (the benchmark's fixtures are generated: \
             `otb mcp fixtures --out <the mcp-fixtures folder>`, or `make reproduce-mcp`)"
                .to_string()
        } else {
            "no such folder".to_string()
        });
    }
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let rd = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for e in rd {
            let e = e.map_err(|e| e.to_string())?;
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .map_err(|e| e.to_string())?
                .to_string_lossy()
                .replace('\\', "/");
            let ft = e.file_type().map_err(|e| e.to_string())?;
            if ft.is_dir() {
                stack.push(p.clone());
            }
            entries.push((rel, p));
            if entries.len() > ::mcp::servers::MAX_WORKDIR_FILES {
                return Err(format!(
                    "holds more than {} entries",
                    ::mcp::servers::MAX_WORKDIR_FILES
                ));
            }
        }
    }
    entries.sort();
    let mut h = sha2::Sha256::new();
    let mut bytes = 0u64;
    for (rel, p) in &entries {
        let meta = std::fs::symlink_metadata(p).map_err(|e| e.to_string())?;
        h.update(rel.as_bytes());
        h.update([0]);
        if meta.file_type().is_symlink() {
            let t = std::fs::read_link(p).map_err(|e| e.to_string())?;
            h.update(b"link:");
            h.update(t.to_string_lossy().as_bytes());
        } else if meta.is_file() {
            bytes += meta.len();
            if bytes > ::mcp::servers::MAX_WORKDIR_BYTES {
                return Err(format!(
                    "holds more than {} bytes",
                    ::mcp::servers::MAX_WORKDIR_BYTES
                ));
            }
            let b = std::fs::read(p).map_err(|e| format!("{rel}: {e}"))?;
            h.update(b"file:");
            h.update((b.len() as u64).to_le_bytes());
            h.update(&b);
        } else {
            h.update(b"dir");
        }
        h.update([0]);
    }
    Ok(hex::encode(h.finalize()))
}

/// Stage `mcp-server[<server>]`: the server started (once for the drive), its
/// identity and tools stored.
fn server_stage(ctx: &mut StageCtx<'_>, st: &ServerState<'_>) -> Result<(), StageError> {
    let host = st.host(SERVER_STAGE)?;
    let tools = host.tools(SERVER_STAGE)?;
    if tools.is_empty() {
        return Err(StageError::user(
            SERVER_STAGE,
            format!("MCP server `{}` lists no tools", st.cfg.name),
        ));
    }
    // The identity names the command as the experiment file writes it, as the key
    // does: keys do not change when the checkout moves.
    let mut identity = host.identity();
    if let Some(o) = identity.as_object_mut() {
        o.insert("command".into(), json!(st.cfg.written_command));
    }
    let row = ServerRow {
        server: st.cfg.name.clone(),
        identity,
        tools: serde_json::to_value(&tools).map_err(|e| StageError::bug(SERVER_STAGE, e))?,
    };
    ctx.write(&[row])?;
    Ok(())
}

/// The scripted models of this environment, registered for its drive: the agents
/// know the tasks file's tasks and the opaque names of the servers in `listed`.
fn register_scripted(cx: &Cx<'_, '_>, m: &McpExperiment, listed: &[(usize, ServerTools, Value)]) {
    let spec = |name: &str| ModelSpec {
        kind: ModelKind::Scripted,
        name: name.into(),
    };
    // (The drive checked the file; an unreadable one leaves the agents unknowing.)
    let text = m
        .tasks
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let opaque = listed
        .iter()
        .map(|(_, t, _)| (t.server.clone(), t.opaque_names(m.seed)))
        .collect();
    let known = std::sync::Arc::new(scripted::Known::new(&text, opaque));
    cx.models.register_agent(
        spec(scripted::READER),
        std::sync::Arc::new(scripted::Reader::new(known.clone())),
    );
    cx.models.register_agent(
        spec(scripted::ORACLE),
        std::sync::Arc::new(scripted::Oracle::new(known)),
    );
    cx.models.register_editor(
        spec(scripted::OBSERVER),
        std::sync::Arc::new(scripted::Observer),
    );
    cx.models
        .register_editor(spec(scripted::JUDGE), std::sync::Arc::new(scripted::Judge));
}

/// Every server of `m` as a drive's state (no server started yet).
fn server_states<'m>(m: &'m McpExperiment, cx: &Cx<'_, '_>) -> Vec<ServerState<'m>> {
    let scratch = cx.session.store().root().join("cache").join("mcp");
    m.servers
        .iter()
        .map(|cfg| ServerState {
            cfg,
            host: Default::default(),
            scratch: scratch.clone(),
        })
        .collect()
}

/// Each server's `mcp-server` node (started once: its identity and tools) and
/// `mcp-tasks` node (its tasks split), in server order; called in a scope of the
/// drive (`cx.scope`), which outlives the servers' states.
fn server_nodes<'q>(
    m: &'q McpExperiment,
    states: &'q [ServerState<'q>],
    cx: &mut Cx<'q, '_>,
) -> Result<Vec<(Handle, Handle)>, DriveError> {
    let keys = m
        .servers
        .iter()
        .map(server_key)
        .collect::<Result<Vec<_>, _>>()?;
    let tasks_digest = m.tasks.as_deref().map(tasks::file_digest);
    {
        let mut outs = Vec::new();
        for (st, key) in states.iter().zip(&keys) {
            let name = &st.cfg.name;
            let node = format!("{SERVER_STAGE}[{name}]");
            let srv = cx.stage_named(
                &node,
                SERVER_STAGE,
                SERVER_VERSION,
                key.clone(),
                &[],
                move |ctx, _| server_stage(ctx, st),
            )?;
            cx.push(&node, SERVER_STAGE, &srv);
            let node = format!("{TASKS_STAGE}[{name}]");
            let t = cx.stage_named(
                &node,
                TASKS_STAGE,
                TASKS_VERSION,
                json!({
                    "tasks": tasks_digest,
                    "server": name,
                    "seed": m.seed,
                    "train_fraction": m.train_fraction,
                }),
                &[],
                move |ctx, _| tasks::build(ctx, m, name),
            )?;
            cx.push(&node, TASKS_STAGE, &t);
            outs.push((srv, t));
        }
        Ok(outs)
    }
}

/// What `otb run` computes before its bill: each server started once for its tool
/// list (and its tasks split), without which the grid cannot be planned or billed.
pub fn prelude<'p>(m: &'p McpExperiment, cx: &mut Cx<'p, '_>) -> Result<(), DriveError> {
    let states = server_states(m, cx);
    cx.scope(|cx| server_nodes(m, &states, cx)).map(|_| ())
}

/// Expand the `[mcp]` table into stage calls.
pub fn drive<'p>(
    exp: &'p crate::experiment::Experiment,
    m: &'p McpExperiment,
    cx: &mut Cx<'p, '_>,
) -> Result<(), DriveError> {
    let states = server_states(m, cx);
    let outs = cx.scope(|cx| server_nodes(m, &states, cx))?;
    let splits: Vec<Splits<TaskRow>> = outs
        .iter()
        .map(|(_, t)| Splits::new(t.clone(), |r: &TaskRow| r.split == "train"))
        .collect();
    // The tools of each server that is listed (in status mode a server not started
    // yet has no tools to plan with: its grid waits).
    let mut listed: Vec<(usize, ServerTools, Value)> = Vec::new();
    for (i, (srv, _)) in outs.iter().enumerate() {
        if srv.entry().is_none() {
            continue;
        }
        let row = srv
            .read::<ServerRow>()?
            .into_iter()
            .next()
            .ok_or_else(|| StageError::bug(SERVER_STAGE, "no server row"))?;
        let tools: Vec<ServerTool> =
            serde_json::from_value(row.tools).map_err(|e| StageError::bug(SERVER_STAGE, e))?;
        listed.push((
            i,
            ServerTools {
                server: row.server,
                tools,
            },
            row.identity,
        ));
    }
    register_scripted(cx, m, &listed);
    let gradings = judge::gradings(m)?;
    let envs: Vec<Mcp<'_>> = listed
        .iter()
        .flat_map(|(i, tools, identity)| {
            let (states, outs, splits, gradings) = (&states, &outs, &splits, &gradings);
            m.settings.iter().map(move |setting| Mcp {
                m,
                server: &states[*i],
                setting: *setting,
                set: McpExperiment::tool_set(&states[*i].cfg.name, *setting),
                system: config::agent_system(&states[*i].cfg.alias),
                tasks: &splits[*i],
                server_out: &outs[*i].0,
                tools,
                identity,
                grading: gradings
                    .get(&states[*i].cfg.name)
                    .copied()
                    .unwrap_or_default(),
            })
        })
        .collect();
    // Online mode: the per-task curves (`online`) replace the offline chain of the
    // `toolobserver` method; the rest of the grid is the same.
    let online_mode = m.toolobserver == config::ToolObserverMode::Online;
    let grid_methods: Vec<crate::env::Method> = m
        .methods
        .iter()
        .copied()
        .filter(|x| !(online_mode && *x == crate::env::Method::ToolObserver))
        .collect();
    let spec = offline::GridSpec {
        protocol: exp.offline_protocol(),
        agents: &exp.agents,
        editors: &exp.editors,
        methods: &grid_methods,
        seed: m.seed,
        rounds: m.rounds,
        batch_size: m.batch_size,
        baselines: &exp.baselines,
    };
    let onlines: Vec<online::McpOnline<'_>> = envs
        .iter()
        .filter(|_| online_mode && m.methods.contains(&crate::env::Method::ToolObserver))
        .map(|env| online::McpOnline::new(env, &spec))
        .collect();
    cx.scope(|cx| {
        for (i, env) in envs.iter().enumerate() {
            offline::drive_tool_set(
                env,
                cx,
                &spec,
                DOCS_STAGE,
                &env.set,
                env.tools.docs(DocSetting::AsIs, m.seed),
                env.tools.docs(env.setting, m.seed),
            )?;
            if let Some(o) = onlines.get(i) {
                online::drive(o, cx, &spec, &exp.editor_prompt)?;
            }
        }
        Ok(())
    })
}

/// Check the tasks file before a run touches the store: it parses, and every server
/// that ToolObserver runs on has training tasks.
pub fn check_tasks(m: &McpExperiment) -> Result<(), InputError> {
    check_files(m)?;
    let Some(p) = &m.tasks else {
        return Ok(());
    };
    let names: Vec<&str> = m.servers.iter().map(|s| s.name.as_str()).collect();
    let all = tasks::load(p, &names)?;
    judge::check(m, &all)?;
    if m.methods.contains(&crate::env::Method::ToolObserver) {
        // Offline, ToolObserver learns from the training tasks; online, from each test
        // task itself.
        let (split, which) = match m.toolobserver {
            config::ToolObserverMode::Offline => ("train", "training"),
            config::ToolObserverMode::Online => ("test", "test"),
        };
        for s in &m.servers {
            let rows = tasks::split(&all, &s.name, m.seed, m.train_fraction);
            if !rows.iter().any(|r| r.split == split) {
                return Err(InputError(format!(
                    "mcp: toolobserver needs tasks: server `{}` has no {which} task in {} (add tasks, or drop toolobserver from mcp.methods)",
                    s.name,
                    p.display()
                )));
            }
        }
    }
    Ok(())
}

/// What must exist before a run: the tasks file, every server's working folder, and
/// its program (a path, or a name found on `PATH`), each missing one named in one line.
pub fn check_files(m: &McpExperiment) -> Result<(), InputError> {
    const FIXTURES: &str = "`otb mcp fixtures --out DIR` generates the shipped benchmark's";
    if let Some(t) = m.tasks.as_ref().filter(|t| !t.is_file()) {
        return Err(InputError(format!(
            "mcp.tasks: {} is not a file ({FIXTURES})",
            t.display()
        )));
    }
    for s in &m.servers {
        if let Some(w) = s.workdir.as_ref().filter(|w| !w.is_dir()) {
            return Err(InputError(format!(
                "mcp.servers.{}.workdir: {} is not a folder ({FIXTURES})",
                s.name,
                w.display()
            )));
        }
        if let Some(program) = s.command.first() {
            if !program_exists(program) {
                return Err(InputError(format!(
                    "mcp.servers.{}: program `{program}` not found (a path, or a name on PATH; \
                     scripts/setup-mcp.sh installs the shipped servers into tools/mcp/bin)",
                    s.name
                )));
            }
        }
    }
    Ok(())
}

/// Whether `program` names a file (a path with a `/`) or a file in a folder of `PATH`.
fn program_exists(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// Any MCP server as an environment, in the registry of environments.
pub struct McpEnvironment;

impl crate::experiment::Environment for McpEnvironment {
    fn table(&self) -> &'static str {
        "mcp"
    }

    fn parse(
        &self,
        table: toml::Value,
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<Box<dyn crate::experiment::EnvTable>, String> {
        let raw: RawMcp = table
            .try_into()
            .map_err(|e| crate::experiment::table_error("mcp", &e))?;
        Ok(Box::new(McpExperiment::from_raw(raw, resolve)?))
    }

    fn exported(&self) -> Vec<crate::rows::Exported> {
        exported()
    }

    fn scripted_agents(&self) -> &'static [&'static str] {
        &[scripted::READER, scripted::ORACLE]
    }

    fn scripted_editors(&self) -> &'static [&'static str] {
        &[scripted::OBSERVER, scripted::JUDGE]
    }

    fn reader(&self) -> &dyn crate::experiment::Reader {
        &reading::McpReader
    }
}

impl crate::experiment::EnvTable for McpExperiment {
    fn table(&self) -> &'static str {
        "mcp"
    }

    fn methods(&self) -> Vec<crate::env::Method> {
        self.methods.clone()
    }

    fn tool_sets(&self) -> Vec<String> {
        McpExperiment::tool_sets(self)
    }

    fn models(&self) -> Vec<&ModelSpec> {
        self.judge.iter().collect()
    }

    fn preflight(&self, _exp: &crate::experiment::Experiment) -> Result<(), InputError> {
        check_tasks(self)
    }

    fn drive<'p>(
        &'p self,
        exp: &'p crate::experiment::Experiment,
        cx: &mut Cx<'p, '_>,
    ) -> Result<(), DriveError> {
        drive(exp, self, cx)
    }

    fn prelude<'p>(
        &'p self,
        _exp: &'p crate::experiment::Experiment,
        cx: &mut Cx<'p, '_>,
    ) -> Result<(), DriveError> {
        prelude(self, cx)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl crate::experiment::Experiment {
    /// The `[mcp]` table, if the experiment has one.
    pub fn mcp(&self) -> Option<&McpExperiment> {
        self.table::<McpExperiment>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_working_folder_digest_follows_names_and_contents() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub").join("a.txt"), "one").unwrap();
        std::fs::write(d.path().join("b.txt"), "two").unwrap();
        let first = workdir_digest(d.path()).unwrap();
        assert_eq!(first, workdir_digest(d.path()).unwrap());
        std::fs::write(d.path().join("b.txt"), "three").unwrap();
        let second = workdir_digest(d.path()).unwrap();
        assert_ne!(first, second);
        std::fs::rename(d.path().join("b.txt"), d.path().join("c.txt")).unwrap();
        assert_ne!(second, workdir_digest(d.path()).unwrap());
        assert!(workdir_digest(&d.path().join("none")).is_err());
        // The key names the spec and the digest, never an `env` value.
        let cfg = ServerConfig {
            name: "git".into(),
            command: vec!["srv".into(), "{workdir}".into()],
            written_command: vec!["srv".into(), "{workdir}".into()],
            url: None,
            env: [("TOKEN".to_string(), "secret".to_string())]
                .into_iter()
                .collect(),
            cwd: None,
            workdir: Some(d.path().to_path_buf()),
            alias: "/workspace".into(),
            fresh: config::Fresh::Episode,
            limits: ::mcp::bounds::Limits::default(),
        };
        let key = server_key(&cfg).unwrap();
        // Its timeouts are not in it: they decide whether a run fails, not what it
        // computes.
        let patient = ServerConfig {
            limits: ::mcp::bounds::Limits {
                connect: std::time::Duration::from_secs(300),
                call: std::time::Duration::from_millis(1500),
                ..::mcp::bounds::Limits::default()
            },
            ..cfg.clone()
        };
        assert_eq!(server_key(&patient).unwrap(), key);
        assert!(!key.to_string().contains("secret"), "{key}");
        assert_eq!(key["workdir"], json!(workdir_digest(d.path()).unwrap()));
        assert_eq!(key["fresh"], "episode");
    }
}

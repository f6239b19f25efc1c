//! The `[mcp]` table of an experiment file, parsed and checked ([`McpExperiment`]):
//! one error line per mistake, paths relative to the experiment file, and each
//! server as the [`::mcp::servers::ServerSpec`] the server layer starts.
//!
//! ```toml
//! [mcp]
//! tasks = "tasks.jsonl"            # optional: without it only the methods that need no tasks run
//! settings = ["names"]             # as-is | names | names+desc | names+params
//! methods = ["gold", "base", "toolobserver"]
//! train_fraction = 0.3             # tasks without a `split` field
//! seed = 0
//! max_turns = 6
//! rounds = 2
//! batch_size = 10
//! concurrency = 4
//! toolobserver = "offline"       # or "online": per test task, learned on the task itself
//! first_call = "auto"              # or "required": the agent's first turn must call a tool
//! judge = "openai:gpt-4o-mini"     # optional: the LLM judge of tasks with a `judge` rubric
//! [mcp.servers.git]
//! command = ["mcp-server-git", "--repository", "{workdir}"]
//! workdir = "git-repo"
//! fresh = "episode"                # or "run"
//! ```

use super::tools::DocSetting;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The agent's system prompt; `{alias}` is the working folder's path as the agent
/// sees it.
pub const AGENT_SYSTEM: &str = "You answer the user's request by calling the tools you are given; they are the tools of one server, which works on the folder {alias}. Where a tool asks for a path (a repository, a folder, a file), give it under {alias}. Call a tool, read what it returns, and call another if you need more. When you know the answer, reply without a tool call and end with one line of the form `Exact Answer: <your short answer>`.";

/// What the editor is told about these tools (batch-reflect and consensus-merge).
pub const EDITOR_NOTES: &str = "The tools are those of one MCP server. Each trajectory shows a user's request, every call the agent made (the tool, its arguments and what the server returned, an error included), the agent's final answer and whether it was correct. Describe for each tool what it does, which arguments it needs and what they mean, what it returns, and which requests it serves; say what went wrong when a call failed.";

/// The methods an `[mcp]` table may run, in table order.
pub const METHODS: &[&str] = &[
    "gold",
    "base",
    "toolobserver",
    "easytool",
    "play2prompt",
    "draft",
    "tracefree",
];

/// The methods run when `methods` is not given.
pub const DEFAULT_METHODS: &[&str] = &["gold", "base", "toolobserver"];

/// The largest tasks file read (bytes).
pub const MAX_TASKS_BYTES: u64 = 16 << 20;

/// The `[mcp]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMcp {
    tasks: Option<String>,
    settings: Option<Vec<String>>,
    methods: Option<Vec<String>>,
    train_fraction: Option<f64>,
    seed: Option<u64>,
    max_turns: Option<usize>,
    rounds: Option<u32>,
    batch_size: Option<usize>,
    concurrency: Option<usize>,
    judge: Option<String>,
    toolobserver: Option<String>,
    first_call: Option<String>,
    servers: Option<BTreeMap<String, RawServer>>,
}

/// One `[mcp.servers.<name>]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    command: Option<Vec<String>>,
    url: Option<String>,
    env: Option<BTreeMap<String, String>>,
    cwd: Option<String>,
    workdir: Option<String>,
    alias: Option<String>,
    fresh: Option<String>,
    connect_timeout_s: Option<f64>,
    call_timeout_s: Option<f64>,
}

/// A checked `[mcp]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct McpExperiment {
    /// The tasks file (JSON lines), if any.
    pub tasks: Option<PathBuf>,
    /// The documentation settings, one tool set per server and setting.
    pub settings: Vec<DocSetting>,
    /// The methods to run.
    pub methods: Vec<crate::env::Method>,
    /// The share of tasks without a `split` field that go to training.
    pub train_fraction: f64,
    /// The run's seed (the split, the opaque names' order, the agents' requests).
    pub seed: u64,
    /// Tool turns of an episode before the forced final answer.
    pub max_turns: usize,
    /// ToolObserver rounds (offline mode).
    pub rounds: u32,
    /// Episodes per batch-reflect request.
    pub batch_size: usize,
    /// Episodes run at the same time.
    pub concurrency: usize,
    /// How ToolObserver runs (`toolobserver`): offline (the default) or online.
    pub toolobserver: ToolObserverMode,
    /// `first_call = "required"`: an episode's first turn must call a tool (the
    /// default `"auto"` leaves it to the model, as the paper's agents).
    pub first_call_required: bool,
    /// The LLM judge (any model spec) of tasks with a `judge` rubric (`mcp-judge`);
    /// required when a task has one.
    pub judge: Option<crate::models::ModelSpec>,
    /// The servers, by name (sorted).
    pub servers: Vec<ServerConfig>,
}

/// One server of the table, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Its name in the experiment (`git`): tasks name it, cells carry it.
    pub name: String,
    /// A stdio command (empty with `url`); words starting with `./` or `../` are
    /// paths relative to the experiment file, resolved.
    pub command: Vec<String>,
    /// The command as the experiment file writes it (what keys hold: they do not
    /// change when the checkout moves).
    pub written_command: Vec<String>,
    /// A Streamable HTTP URL.
    pub url: Option<String>,
    /// Extra environment variables of the process.
    pub env: BTreeMap<String, String>,
    /// Where the process starts.
    pub cwd: Option<PathBuf>,
    /// Its working folder (copied for every episode, or once per run).
    pub workdir: Option<PathBuf>,
    /// The path the agent sees for the working folder.
    pub alias: String,
    /// `episode` (a fresh process and copy per episode) or `run` (one shared).
    pub fresh: Fresh,
    /// The bounds it is held to: the defaults, with its own `connect_timeout_s` and
    /// `call_timeout_s` where given (in no key: they decide whether a run fails,
    /// never what it computes).
    pub limits: ::mcp::bounds::Limits,
}

/// How the `toolobserver` method runs on an `[mcp]` table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ToolObserverMode {
    /// Explore the training tasks, batch-reflect, consensus-merge, K rounds, then the
    /// test tasks (one shared tool set).
    #[default]
    Offline,
    /// Per test task, its own docs rewritten from its own episodes, round after round
    /// ([`crate::online`]: test-time learning on the task itself).
    Online,
}

impl ToolObserverMode {
    /// The mode as experiment files write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolObserverMode::Offline => "offline",
            ToolObserverMode::Online => "online",
        }
    }
}

/// How long a server's state lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fresh {
    /// A fresh process and working copy for every episode.
    Episode,
    /// One process and copy for the whole run.
    Run,
}

/// The default path the agent sees for a server's working folder.
pub const DEFAULT_ALIAS: &str = "/workspace";

/// A timeout in seconds as written (`at.key`), or `default` when not written.
fn seconds(at: &str, key: &str, v: Option<f64>, default: Duration) -> Result<Duration, String> {
    let Some(s) = v else { return Ok(default) };
    ::mcp::bounds::timeout(s).ok_or_else(|| {
        format!(
            "{at}.{key} = {s}: give seconds above 0 and at most {}",
            ::mcp::bounds::MAX_TIMEOUT_S
        )
    })
}

/// A server name: it is part of node names and tasks refer to it.
fn check_server_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "mcp.servers: `{name}` is not a server name (letters, digits, `-` and `_`, at most 40)"
        ))
    }
}

impl ServerConfig {
    fn from_raw(
        name: &str,
        raw: RawServer,
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<ServerConfig, String> {
        check_server_name(name)?;
        let at = format!("mcp.servers.{name}");
        let command = raw.command.unwrap_or_default();
        match (command.is_empty(), &raw.url) {
            (true, None) => {
                return Err(format!(
                    "{at}: give `command` (a stdio server) or `url` (Streamable HTTP)"
                ))
            }
            (false, Some(_)) => {
                return Err(format!("{at}: give `command` or `url`, not both"));
            }
            _ => {}
        }
        if command.first().is_some_and(|c| c.trim().is_empty()) {
            return Err(format!("{at}.command: the program is empty"));
        }
        if let Some(u) = &raw.url {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(format!("{at}.url: `{u}` is not an http:// or https:// URL"));
            }
            if raw.workdir.is_some() || raw.env.is_some() || raw.cwd.is_some() {
                return Err(format!(
                    "{at}: a server reached by `url` has no `workdir`, `env` or `cwd`"
                ));
            }
        }
        let fresh = match raw.fresh.as_deref().unwrap_or("episode") {
            "episode" => Fresh::Episode,
            "run" => Fresh::Run,
            other => return Err(format!("{at}.fresh = `{other}` (valid: episode, run)")),
        };
        // Whether it exists is checked before a run (`check_files`): the shipped
        // experiments name fixtures that `otb mcp fixtures` generates.
        let workdir = raw.workdir.as_deref().map(resolve);
        let uses_workdir = command.iter().any(|w| w.contains("{workdir}"))
            || raw.cwd.as_deref().is_some_and(|c| c.contains("{workdir}"))
            || raw
                .env
                .iter()
                .flatten()
                .any(|(_, v)| v.contains("{workdir}"));
        if uses_workdir && workdir.is_none() {
            return Err(format!(
                "{at}: `{{workdir}}` is used but no `workdir` is given"
            ));
        }
        let defaults = ::mcp::bounds::Limits::default();
        let limits = ::mcp::bounds::Limits {
            connect: seconds(
                &at,
                "connect_timeout_s",
                raw.connect_timeout_s,
                defaults.connect,
            )?,
            call: seconds(&at, "call_timeout_s", raw.call_timeout_s, defaults.call)?,
            ..defaults
        };
        let alias = raw.alias.unwrap_or_else(|| DEFAULT_ALIAS.to_string());
        if !alias.starts_with('/') || alias.len() < 2 || alias.ends_with('/') {
            return Err(format!(
                "{at}.alias = `{alias}`: an absolute path such as /workspace"
            ));
        }
        // A word written as a relative path (`./fixture`, `../tools/bin/server`) is
        // relative to the experiment file; any other word is as written (a program
        // on PATH, a flag, a package name).
        let resolved = command
            .iter()
            .map(|w| {
                if w.starts_with("./") || w.starts_with("../") {
                    resolve(w).to_string_lossy().into_owned()
                } else {
                    w.clone()
                }
            })
            .collect();
        Ok(ServerConfig {
            name: name.to_string(),
            command: resolved,
            written_command: command,
            url: raw.url,
            env: raw.env.unwrap_or_default(),
            // `{workdir}` in `cwd` is the working copy's path: not resolved here.
            cwd: raw.cwd.as_deref().map(|c| {
                if c.contains("{workdir}") {
                    PathBuf::from(c)
                } else {
                    resolve(c)
                }
            }),
            workdir,
            alias,
            fresh,
            limits,
        })
    }

    /// The server layer's spec of this server.
    pub fn spec(&self) -> ::mcp::servers::ServerSpec {
        ::mcp::servers::ServerSpec {
            name: self.name.clone(),
            command: self.command.clone(),
            url: self.url.clone(),
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            workdir: self.workdir.clone(),
            alias: self.alias.clone(),
            fresh: match self.fresh {
                Fresh::Episode => ::mcp::servers::Fresh::Episode,
                Fresh::Run => ::mcp::servers::Fresh::Run,
            },
        }
    }
}

impl McpExperiment {
    /// Check the raw table; paths are resolved against the experiment's folder.
    pub fn from_raw(raw: RawMcp, resolve: &dyn Fn(&str) -> PathBuf) -> Result<Self, String> {
        let tasks = raw.tasks.as_deref().map(resolve);
        let names = raw
            .settings
            .unwrap_or_else(|| vec![DocSetting::Names.as_str().to_string()]);
        if names.is_empty() {
            return Err(format!(
                "mcp.settings: no setting listed (valid: {})",
                DocSetting::names().join(", ")
            ));
        }
        let mut settings = Vec::new();
        for n in &names {
            let s = DocSetting::parse(n).ok_or_else(|| {
                format!(
                    "mcp.settings: unknown setting `{n}` (valid: {})",
                    DocSetting::names().join(", ")
                )
            })?;
            if settings.contains(&s) {
                return Err(format!("mcp.settings lists `{n}` twice"));
            }
            settings.push(s);
        }
        let method_names = raw
            .methods
            .unwrap_or_else(|| DEFAULT_METHODS.iter().map(|m| m.to_string()).collect());
        let valid: Vec<crate::env::Method> = METHODS
            .iter()
            .filter_map(|m| crate::env::Method::parse(m))
            .collect();
        let methods = crate::env::parse_methods(&method_names, &valid)
            .map_err(|e| format!("mcp.methods: {e}"))?;
        if methods.is_empty() {
            return Err("mcp.methods: no method listed".into());
        }
        if tasks.is_none() && methods.contains(&crate::env::Method::ToolObserver) {
            return Err(
                "mcp: toolobserver needs tasks: name a tasks file (mcp.tasks) or drop toolobserver from mcp.methods".into(),
            );
        }
        let train_fraction = raw.train_fraction.unwrap_or(0.3);
        if !(train_fraction > 0.0 && train_fraction < 1.0) {
            return Err(format!(
                "mcp.train_fraction = {train_fraction}: it lies strictly between 0 and 1"
            ));
        }
        let servers = raw.servers.unwrap_or_default();
        if servers.is_empty() {
            return Err(
                "mcp: no server: add one as [mcp.servers.<name>] with `command` or `url`".into(),
            );
        }
        let servers = servers
            .into_iter()
            .map(|(name, s)| ServerConfig::from_raw(&name, s, resolve))
            .collect::<Result<Vec<_>, _>>()?;
        let judge = raw
            .judge
            .as_deref()
            .map(|j| {
                crate::models::parse_for_with(
                    j,
                    crate::models::Role::Editor,
                    &[super::scripted::OBSERVER, super::scripted::JUDGE],
                )
            })
            .transpose()
            .map_err(|e| format!("mcp.judge: {}", e.0))?;
        let toolobserver = match raw.toolobserver.as_deref().unwrap_or("offline") {
            "offline" => ToolObserverMode::Offline,
            "online" => ToolObserverMode::Online,
            other => {
                return Err(format!(
                    "mcp.toolobserver = `{other}` (valid: offline, online)"
                ))
            }
        };
        if toolobserver == ToolObserverMode::Online
            && !methods.contains(&crate::env::Method::ToolObserver)
        {
            return Err(
                "mcp.toolobserver = \"online\" but mcp.methods has no toolobserver (add it, or drop the key)".into(),
            );
        }
        let first_call_required =
            crate::models::EpisodeRules::first_call(raw.first_call.as_deref(), "mcp")?;
        let m = McpExperiment {
            tasks,
            settings,
            methods,
            train_fraction,
            seed: raw.seed.unwrap_or(0),
            max_turns: raw.max_turns.unwrap_or(6),
            rounds: raw.rounds.unwrap_or(2),
            batch_size: raw.batch_size.unwrap_or(10),
            concurrency: raw.concurrency.unwrap_or(4),
            judge,
            toolobserver,
            first_call_required,
            servers,
        };
        if m.max_turns == 0 || m.rounds == 0 || m.batch_size == 0 || m.concurrency == 0 {
            return Err("mcp: max_turns, rounds, batch_size and concurrency are at least 1".into());
        }
        Ok(m)
    }

    /// The cell setting of server `server` and documentation setting `setting`
    /// (`git:names`): one shared tool set each.
    pub fn tool_set(server: &str, setting: DocSetting) -> String {
        format!("{server}:{}", setting.as_str())
    }

    /// Every tool set of the table, as cells name them.
    pub fn tool_sets(&self) -> Vec<String> {
        self.servers
            .iter()
            .flat_map(|s| {
                self.settings
                    .iter()
                    .map(|set| Self::tool_set(&s.name, *set))
            })
            .collect()
    }
}

/// The agent's system prompt for a server whose working folder the agent sees as
/// `alias`.
pub fn agent_system(alias: &str) -> String {
    AGENT_SYSTEM.replace("{alias}", alias)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml: &str, dir: &std::path::Path) -> Result<McpExperiment, String> {
        let raw: RawMcp = toml::from_str(toml).map_err(|e| e.to_string())?;
        McpExperiment::from_raw(raw, &|p| dir.join(p))
    }

    #[test]
    fn a_table_parses_with_its_defaults_and_each_mistake_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.jsonl"), "").unwrap();
        std::fs::create_dir(dir.path().join("repo")).unwrap();
        let server = "[servers.git]\ncommand = [\"srv\", \"--repository\", \"{workdir}\"]\nworkdir = \"repo\"\n";
        let m = parse(&format!("tasks = \"t.jsonl\"\n{server}"), dir.path()).unwrap();
        assert_eq!(m.settings, vec![DocSetting::Names]);
        assert_eq!(m.methods.len(), 3);
        assert_eq!((m.train_fraction, m.max_turns, m.rounds), (0.3, 6, 2));
        assert_eq!(m.servers[0].alias, "/workspace");
        assert_eq!(m.servers[0].fresh, Fresh::Episode);
        // The bounds' defaults, or the server's own timeouts.
        assert_eq!(m.servers[0].limits, ::mcp::bounds::Limits::default());
        let slow = parse(
            &format!("tasks = \"t.jsonl\"\n{server}connect_timeout_s = 90\ncall_timeout_s = 0.5\n"),
            dir.path(),
        )
        .unwrap();
        let l = slow.servers[0].limits;
        assert_eq!(
            (l.connect, l.call),
            (Duration::from_secs(90), Duration::from_millis(500))
        );
        assert_eq!(
            l.message_bytes,
            ::mcp::bounds::Limits::default().message_bytes
        );
        assert_eq!(
            m.servers[0].workdir.as_deref(),
            Some(&*dir.path().join("repo"))
        );
        assert_eq!(m.tool_sets(), vec!["git:names".to_string()]);
        assert!(!m.first_call_required);
        let required = parse(
            &format!("tasks = \"t.jsonl\"\nfirst_call = \"required\"\n{server}"),
            dir.path(),
        )
        .unwrap();
        assert!(required.first_call_required);
        let rel = parse(
            "methods = [\"gold\"]\n[servers.fs]\ncommand = [\"../bin/srv\", \"./tree\", \"-y\"]\n",
            dir.path(),
        )
        .unwrap();
        assert_eq!(
            rel.servers[0].command,
            vec![
                dir.path().join("../bin/srv").to_string_lossy().into_owned(),
                dir.path().join("./tree").to_string_lossy().into_owned(),
                "-y".into()
            ]
        );
        assert_eq!(rel.servers[0].written_command[0], "../bin/srv");
        let t = "tasks = \"t.jsonl\"\n";
        for (bad, says) in [
            (
                format!("{t}[servers.git]\nworkdir = \"repo\"\n"),
                "give `command`",
            ),
            (
                format!("{t}[servers.git]\ncommand = [\"a\"]\nurl = \"http://x\"\n"),
                "not both",
            ),
            (
                format!("{t}settings = [\"opaque\"]\n{server}"),
                "unknown setting `opaque`",
            ),
            (
                format!("{t}methods = [\"magic\"]\n{server}"),
                "unknown method `magic`",
            ),
            (
                format!("{t}train_fraction = 1.0\n{server}"),
                "strictly between 0 and 1",
            ),
            (
                format!("{t}train_fraction = 0.0\n{server}"),
                "strictly between 0 and 1",
            ),
            (format!("{t}colour = 3\n{server}"), "colour"),
            (
                format!("{t}first_call = \"always\"\n{server}"),
                "mcp.first_call = `always` (valid: auto, required)",
            ),
            (
                format!("{t}[servers.git]\ncommand = [\"a\"]\nfresh = \"never\"\n"),
                "valid: episode, run",
            ),
            (
                format!("{t}[servers.git]\ncommand = [\"a\"]\nconnect_timeout_s = 0\n"),
                "mcp.servers.git.connect_timeout_s = 0: give seconds above 0",
            ),
            (
                format!("{t}[servers.git]\ncommand = [\"a\"]\ncall_timeout_s = -1.5\n"),
                "mcp.servers.git.call_timeout_s = -1.5: give seconds above 0",
            ),
            (
                format!("{t}[servers.git]\ncommand = [\"a\", \"{{workdir}}\"]\n"),
                "no `workdir`",
            ),
            (
                format!("{t}[servers.\"a b\"]\ncommand = [\"a\"]\n"),
                "not a server name",
            ),
            (
                format!("{t}[servers.web]\nurl = \"http://x\"\nworkdir = \"repo\"\n"),
                "no `workdir`, `env` or `cwd`",
            ),
            (t.to_string(), "no server"),
        ] {
            let e = parse(&bad, dir.path()).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // A missing tasks file, working folder or program is found before a run
        // (`check_files`), not when the file is read: the shipped experiments name
        // fixtures that `otb mcp fixtures` generates.
        let missing = parse(&format!("tasks = \"nope.jsonl\"\n{server}"), dir.path()).unwrap();
        let e = crate::mcp::check_files(&missing).unwrap_err().to_string();
        assert!(e.contains("nope.jsonl is not a file"), "{e}");
        let no_program = parse(
            &format!("{t}[servers.git]\ncommand = [\"otb-no-such-program-57\"]\n"),
            dir.path(),
        )
        .unwrap();
        let e = crate::mcp::check_files(&no_program)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("program `otb-no-such-program-57` not found"),
            "{e}"
        );
        // No tasks: ToolObserver says in one line that it needs them.
        let e = parse(server, dir.path()).unwrap_err();
        assert!(e.contains("toolobserver needs tasks"), "{e}");
        let m = parse(&format!("methods = [\"easytool\"]\n{server}"), dir.path()).unwrap();
        assert!(m.tasks.is_none());
    }
}

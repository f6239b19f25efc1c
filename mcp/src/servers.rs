//! MCP servers as an environment's tools: a blocking API (the stages crate runs on
//! plain threads) over [`Upstream`], with a tokio runtime of its own.
//!
//! [`Servers::open`] starts every server once (on a copy of its working folder):
//! `initialize`, `tools/list` (every page), and its [`Identity`]. An [`Episode`]
//! then calls tools:
//!
//! - with [`Fresh::Episode`] every episode has its own process and its own copy of
//!   the working folder, started at the episode's first call of that server (an
//!   episode that calls one server starts no other) and stopped, its copy deleted,
//!   when the episode is dropped;
//! - with [`Fresh::Run`] the process [`Servers::open`] started (and its copy) is
//!   shared by every episode, one call at a time.
//!
//! The agent never sees a copy's real path: in a call's arguments a string equal to
//! the server's `alias` (default `/workspace`) or starting with `alias/` is
//! rewritten to the copy's path, and in results the copy's path back to the alias.
//! So prompts, keys and cached calls are the same in every run and every episode.
//!
//! A tool's own failure (`isError`, an MCP error answer, an unknown tool) is a
//! [`CallResult`] with `is_error` (the model's mistake). A server that hangs past
//! [`Limits::call`], crashes, floods or speaks garbage is restarted once (on a
//! fresh copy for [`Fresh::Episode`]) and the call retried once; then the call is an
//! [`Error::Server`] naming the server.
//!
//! Everything is written under one folder of `scratch` made by [`Servers::open`]
//! and deleted when the [`Servers`] is dropped; nothing outside it is written or
//! deleted. The working folder must not change while a run uses it (its digest is
//! taken once, by [`Servers::open`]).
//!
//! The API blocks: call it from plain threads, never from async code (a call from
//! inside a tokio runtime is refused with an error).

use crate::bounds::{self, Limits};
use crate::error::{Error, Failure};
use crate::tools::ToolDoc;
use crate::upstream::{Spec, Upstream};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, PaginatedRequestParams,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The path the agent sees for a server's working folder when the spec names none.
pub const DEFAULT_ALIAS: &str = "/workspace";

/// The most text one tool call returns; longer text is clipped with a marker.
pub const MAX_TEXT_BYTES: usize = 16 << 10;

/// The most files, folders and links a working folder may hold.
pub const MAX_WORKDIR_FILES: usize = 10_000;

/// The most bytes the files of a working folder may hold together.
pub const MAX_WORKDIR_BYTES: u64 = 200 << 20;

/// The most `tools/list` pages read from one server.
const MAX_PAGES: usize = 100;

/// The placeholder for the working folder's real path in command words, `env`
/// values and `cwd`.
const WORKDIR: &str = "{workdir}";

/// When a server gets a new process and a new copy of its working folder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fresh {
    /// A new process and copy for every episode (`"episode"`).
    #[default]
    Episode,
    /// One process and copy for the whole run, shared by every episode (`"run"`).
    Run,
}

/// One MCP server of an experiment. Read from an experiment file's table, every
/// field may be left out (`name` is the table's key: set it after reading); unknown
/// fields are refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// The experiment's name for it (`git`): names it in tool sets and errors.
    #[serde(default)]
    pub name: String,
    /// Its command (stdio), program first; empty when `url` is given.
    #[serde(default)]
    pub command: Vec<String>,
    /// Its Streamable HTTP URL (instead of `command`).
    #[serde(default)]
    pub url: Option<String>,
    /// Variables added to its environment (it inherits otb's).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory (otb's when `None`).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Its declared working folder (a fixture), copied for it; `{workdir}` in
    /// `command` words, `env` values and `cwd` stands for the copy's real path.
    #[serde(default)]
    pub workdir: Option<PathBuf>,
    /// The path the agent sees for the copy ([`DEFAULT_ALIAS`] by default).
    #[serde(default = "default_alias")]
    pub alias: String,
    /// When it gets a new process and copy.
    #[serde(default)]
    pub fresh: Fresh,
}

fn default_alias() -> String {
    DEFAULT_ALIAS.to_string()
}

impl ServerSpec {
    /// A stdio server `name` started with `command`, without a working folder,
    /// fresh for every episode.
    pub fn new(name: impl Into<String>, command: Vec<String>) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            command,
            url: None,
            env: BTreeMap::new(),
            cwd: None,
            workdir: None,
            alias: default_alias(),
            fresh: Fresh::Episode,
        }
    }

    /// Why the spec cannot be used, if so.
    fn check(&self) -> Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("a server has an empty name".into());
        }
        let uses_workdir = self.command.iter().any(|w| w.contains(WORKDIR))
            || self.env.values().any(|v| v.contains(WORKDIR))
            || self
                .cwd
                .as_ref()
                .is_some_and(|c| c.to_string_lossy().contains(WORKDIR));
        match (&self.url, self.command.first()) {
            (Some(_), Some(_)) => return Err("give `command` or `url`, not both".into()),
            (None, None) => return Err("give its `command` (or `url`)".into()),
            (None, Some(p)) if p.is_empty() => return Err("its command is empty".into()),
            (Some(u), None) => {
                if !(u.starts_with("http://") || u.starts_with("https://")) {
                    return Err(format!(
                        "url `{}`: give an http:// or https:// URL",
                        bounds::clip(u, 120)
                    ));
                }
                if self.workdir.is_some() || !self.env.is_empty() || self.cwd.is_some() {
                    return Err("a server reached by `url` has no `workdir`, `env` or `cwd`".into());
                }
            }
            (None, Some(_)) => {}
        }
        if uses_workdir && self.workdir.is_none() {
            return Err(format!("it uses `{WORKDIR}` but has no `workdir`"));
        }
        if self.workdir.is_some() {
            let a = &self.alias;
            if !a.starts_with('/') || a.len() < 2 || a.ends_with('/') {
                return Err(format!(
                    "alias `{}`: give an absolute path that is not `/` and does not end with `/`",
                    bounds::clip(a, 120)
                ));
            }
        }
        Ok(())
    }
}

/// What a server is, for the keys of what is computed with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The experiment's name for it.
    pub name: String,
    /// Its command as the experiment gives it (with `{workdir}`, not a real path).
    pub command: Vec<String>,
    /// Its URL, if reached by one.
    pub url: Option<String>,
    /// `serverInfo` from `initialize`: its name and version, e.g. `mcp-git 1.2.0`.
    pub server_info: Option<String>,
    /// sha256 (hex) over the working folder's sorted relative paths and contents.
    pub workdir_digest: Option<String>,
}

/// What one tool call answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallResult {
    /// The text parts joined with newlines (other parts as placeholders such as
    /// `[image]`), the copy's path shown as the alias, at most
    /// [`MAX_TEXT_BYTES`] (clipped with a marker).
    pub text: String,
    /// Whether the tool failed (`isError`, an error answer, an unknown tool).
    pub is_error: bool,
}

impl CallResult {
    fn error(text: String) -> CallResult {
        CallResult {
            text,
            is_error: true,
        }
    }
}

/// A copy of a working folder.
#[derive(Clone, Debug)]
struct WorkCopy {
    /// As made (under the root).
    path: PathBuf,
    /// Canonical, as the server is given it (UTF-8).
    real: String,
}

/// A running server.
struct Live {
    upstream: Upstream,
    copy: Option<WorkCopy>,
}

/// What a working folder holds, one entry.
#[derive(Clone, Debug)]
enum Kind {
    Dir,
    File { len: u64 },
    Link(PathBuf),
}

#[derive(Clone, Debug)]
struct Entry {
    /// Relative to the folder.
    rel: PathBuf,
    /// `rel` as text (`/`-separated), the sort key.
    key: String,
    kind: Kind,
}

/// One opened server.
struct Server {
    spec: ServerSpec,
    /// Its working folder's contents (empty without one).
    entries: Vec<Entry>,
    tools: Vec<ToolDoc>,
    identity: Identity,
    /// [`Fresh::Run`]: the shared process.
    shared: Mutex<Option<Live>>,
    /// [`Fresh::Run`]: the shared copy.
    run_copy: Option<WorkCopy>,
}

/// The opened servers of an experiment (`Sync`: episodes on several threads at
/// once).
pub struct Servers {
    servers: Vec<Server>,
    /// The folder under `scratch` that holds every copy.
    root: PathBuf,
    /// `scratch/logs`: each server's stderr (`<name>.stderr`, appended, bounded),
    /// kept after the run; never otb's own output.
    logs: PathBuf,
    limits: Limits,
    next: AtomicU64,
    /// `None` only while it is dropped.
    rt: Option<tokio::runtime::Runtime>,
}

/// One episode's view of the servers: its own processes and copies (for
/// [`Fresh::Episode`]), stopped and deleted when it is dropped.
pub struct Episode<'a> {
    servers: &'a Servers,
    live: Vec<Mutex<Option<Live>>>,
}

#[allow(dead_code)]
fn assert_threads() {
    fn sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    sync::<Servers>();
    send::<Episode<'static>>();
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Servers {
    /// Starts each server once (on a copy of its workdir): initialize, tools/list,
    /// identity. `scratch` is a folder otb owns (under the store); nothing is
    /// written outside it. A spec or working folder that cannot be used is an
    /// [`Error::Input`]; a server that does not start or list its tools an
    /// [`Error::Server`] naming it.
    pub fn open(specs: Vec<ServerSpec>, scratch: &Path, limits: Limits) -> Result<Servers, Error> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(async_refused());
        }
        let mut names = HashSet::new();
        let mut scanned = Vec::with_capacity(specs.len());
        for spec in &specs {
            let bad = |why: String| Error::Input(format!("MCP server `{}`: {why}", spec.name));
            spec.check().map_err(bad)?;
            if !names.insert(spec.name.clone()) {
                return Err(bad("is named twice".into()));
            }
            let (entries, digest) = match &spec.workdir {
                Some(w) => {
                    let at = |why: String| bad(format!("workdir {}: {why}", w.display()));
                    let entries = scan(w).map_err(at)?;
                    let digest = digest(w, &entries).map_err(at)?;
                    (entries, Some(digest))
                }
                None => (Vec::new(), None),
            };
            scanned.push((entries, digest));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("otb-mcp")
            .enable_all()
            .build()
            .map_err(|e| Error::Io(format!("cannot start the MCP runtime: {e}")))?;
        let root = make_root(scratch)?;
        let mut servers = Servers {
            servers: Vec::with_capacity(specs.len()),
            root,
            logs: scratch.join("logs"),
            limits,
            next: AtomicU64::new(0),
            rt: Some(rt),
        };
        for (spec, (entries, digest)) in specs.into_iter().zip(scanned) {
            let identity = Identity {
                name: spec.name.clone(),
                command: spec.command.clone(),
                url: spec.url.clone(),
                server_info: None,
                workdir_digest: digest,
            };
            // In the list before it starts, so that a failure below is cleaned up
            // by `Drop`.
            servers.servers.push(Server {
                spec,
                entries,
                tools: Vec::new(),
                identity,
                shared: Mutex::new(None),
                run_copy: None,
            });
            let i = servers.servers.len() - 1;
            servers.start_first(i)?;
        }
        Ok(servers)
    }

    /// Start server `i` the first time: its tools and identity, and for
    /// [`Fresh::Run`] the shared process.
    fn start_first(&mut self, i: usize) -> Result<(), Error> {
        let s = &self.servers[i];
        let live = self.launch(s, None)?;
        let tools = self.list(s, &live);
        let info = live.upstream.peer().peer_info().and_then(|p| {
            p.server_info
                .as_ref()
                .map(|i| format!("{} {}", i.name, i.version))
        });
        let tools = match tools {
            Ok(t) => t,
            Err(e) => {
                self.retire(live, true);
                return Err(e);
            }
        };
        let keep = s.spec.fresh == Fresh::Run;
        let live = if keep {
            Some(live)
        } else {
            self.retire(live, true);
            None
        };
        let s = &mut self.servers[i];
        s.tools = tools;
        s.identity.server_info = info;
        if let Some(live) = live {
            s.run_copy = live.copy.clone();
            *lock(&s.shared) = Some(live);
        }
        Ok(())
    }

    /// Every server's identity, in the order of the specs.
    pub fn identities(&self) -> Vec<Identity> {
        self.servers.iter().map(|s| s.identity.clone()).collect()
    }

    /// Server `server`'s tools as it lists them (descriptions with the copy's path
    /// shown as the alias).
    pub fn tools(&self, server: &str) -> Result<Vec<ToolDoc>, Error> {
        self.find(server)
            .map(|i| self.servers[i].tools.clone())
            .ok_or_else(|| Error::Input(format!("there is no MCP server named `{server}`")))
    }

    /// A new episode. Its processes start at its first call of each server.
    pub fn episode(&self) -> Result<Episode<'_>, Error> {
        Ok(Episode {
            servers: self,
            live: self.servers.iter().map(|_| Mutex::new(None)).collect(),
        })
    }

    fn find(&self, server: &str) -> Option<usize> {
        self.servers.iter().position(|s| s.spec.name == server)
    }

    /// Run `fut` on the runtime; refused from async code.
    fn block<F: Future>(&self, fut: F) -> Result<F::Output, Error> {
        match &self.rt {
            Some(rt) if tokio::runtime::Handle::try_current().is_err() => Ok(rt.block_on(fut)),
            _ => Err(async_refused()),
        }
    }

    /// Start server `s`: on `copy` when given (the shared copy of [`Fresh::Run`]),
    /// else on a new copy of its working folder.
    fn launch(&self, s: &Server, copy: Option<WorkCopy>) -> Result<Live, Error> {
        let copy = match copy {
            Some(c) => Some(c),
            None => self.make_copy(s)?,
        };
        let spec = match &s.spec.url {
            Some(u) => Spec::Url(u.clone()),
            None => {
                let sub = |w: &str| match &copy {
                    Some(c) => w.replace(WORKDIR, &c.real),
                    None => w.to_string(),
                };
                Spec::Process {
                    words: s.spec.command.iter().map(|w| sub(w)).collect(),
                    env: s
                        .spec
                        .env
                        .iter()
                        .map(|(k, v)| (k.clone(), sub(v)))
                        .collect(),
                    cwd: s.spec.cwd.as_ref().map(|c| match c.to_str() {
                        Some(t) if t.contains(WORKDIR) => PathBuf::from(sub(t)),
                        _ => c.clone(),
                    }),
                    stderr: Some(self.logs.join(format!("{}.stderr", s.spec.name))),
                }
            }
        };
        let connected = self
            .block(Upstream::connect(&spec, self.limits))
            .and_then(|r| r);
        match connected {
            Ok(upstream) => Ok(Live { upstream, copy }),
            Err(e) => {
                let e = named(s, copy.as_ref(), e);
                if s.spec.fresh == Fresh::Episode {
                    self.remove_copy(copy.as_ref());
                }
                Err(e)
            }
        }
    }

    /// Stop `live`'s process; delete its copy when `delete` (never the shared copy
    /// of [`Fresh::Run`] during the run).
    fn retire(&self, live: Live, delete: bool) {
        let Live { upstream, copy } = live;
        match &self.rt {
            Some(rt) if tokio::runtime::Handle::try_current().is_err() => {
                rt.block_on(upstream.close());
            }
            Some(rt) => {
                // From async code: the process is killed when the connection drops.
                let _guard = rt.enter();
                drop(upstream);
            }
            None => drop(upstream),
        }
        if delete {
            self.remove_copy(copy.as_ref());
        }
    }

    /// A new copy of `s`'s working folder under the root (`None` without one).
    fn make_copy(&self, s: &Server) -> Result<Option<WorkCopy>, Error> {
        let Some(workdir) = &s.spec.workdir else {
            return Ok(None);
        };
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.root.join(format!("{}-{n}", safe_name(&s.spec.name)));
        let fail = |e: std::io::Error| {
            Error::Io(format!(
                "MCP server `{}`: cannot copy its workdir {} to {}: {e}",
                s.spec.name,
                workdir.display(),
                path.display()
            ))
        };
        if let Err(e) = copy_tree(workdir, &s.entries, &path) {
            self.remove_copy(Some(&WorkCopy {
                path: path.clone(),
                real: String::new(),
            }));
            return Err(fail(e));
        }
        let real = path.canonicalize().map_err(fail)?;
        let real = real
            .to_str()
            .ok_or_else(|| {
                Error::Input(format!(
                    "the scratch folder {} is not a UTF-8 path",
                    self.root.display()
                ))
            })?
            .to_string();
        Ok(Some(WorkCopy { path, real }))
    }

    /// Delete a copy (only ever inside the root).
    fn remove_copy(&self, copy: Option<&WorkCopy>) {
        let Some(c) = copy else { return };
        if c.path.starts_with(&self.root) && c.path != self.root {
            remove_tree(&c.path);
        }
    }

    /// Every page of `live`'s tools.
    fn list(&self, s: &Server, live: &Live) -> Result<Vec<ToolDoc>, Error> {
        let bad = |what: String| Error::Server {
            server: s.spec.name.clone(),
            what,
            failure: Failure::Call,
        };
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = HashSet::new();
        for _ in 0..MAX_PAGES {
            let params = cursor
                .clone()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = self
                .block(live.upstream.list_tools(params))?
                .map_err(|e| named(s, live.copy.as_ref(), e))?;
            out.extend(page.tools.into_iter().map(|t| ToolDoc {
                name: t.name.to_string(),
                description: unalias(
                    live.copy.as_ref(),
                    &s.spec.alias,
                    t.description.as_deref().unwrap_or(""),
                ),
                input_schema: Value::Object((*t.input_schema).clone()),
            }));
            if out.len() > self.limits.tools {
                return Err(bad(format!(
                    "listed more than {} tools (the limit)",
                    self.limits.tools
                )));
            }
            match page.next_cursor {
                None => return Ok(out),
                Some(c) => {
                    if !seen.insert(c.clone()) {
                        return Err(bad("repeated a `tools/list` cursor".into()));
                    }
                    cursor = Some(c);
                }
            }
        }
        Err(bad(format!("listed more than {MAX_PAGES} pages of tools")))
    }

    /// One call on a running server: a tool's failure is `Ok` with `is_error`; a
    /// failure of the server is `Err`.
    fn call_live(
        &self,
        s: &Server,
        live: &Live,
        tool: &str,
        arguments: Option<serde_json::Map<String, Value>>,
    ) -> Result<CallResult, Error> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Some(a) = arguments {
            params = params.with_arguments(a);
        }
        let copy = live.copy.as_ref();
        let alias = &s.spec.alias;
        let max = MAX_TEXT_BYTES.min(self.limits.message_bytes);
        match self.block(live.upstream.call_tool(params))? {
            Ok(CallToolResponse::Complete(r)) => Ok(CallResult {
                text: clip_text(&unalias(copy, alias, &result_text(&r)), max),
                is_error: r.is_error == Some(true),
            }),
            Ok(CallToolResponse::InputRequired(_)) => Ok(CallResult::error(
                "the tool asked for input, which this environment cannot give".into(),
            )),
            Ok(_) => Ok(CallResult::error(
                "the tool answered with a task, which this environment does not follow".into(),
            )),
            Err(Error::Rpc { error, .. }) => Ok(CallResult::error(clip_text(
                &unalias(
                    copy,
                    alias,
                    &format!("MCP error {}: {}", error.code.0, error.message),
                ),
                max,
            ))),
            Err(e) => Err(named(s, copy, e)),
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for s in &self.servers {
            let live = lock(&s.shared).take();
            if let Some(live) = live {
                self.retire(live, false);
            }
        }
        if let Some(rt) = self.rt.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                rt.shutdown_background();
            } else {
                drop(rt);
            }
        }
        remove_tree(&self.root);
    }
}

impl Episode<'_> {
    /// One tools/call; a tool's own failure (isError) is Ok with is_error = true;
    /// a server that hangs/crashes/floods is restarted once, then Err naming the
    /// server. An unknown server or tool, or arguments that are not a JSON object
    /// (`null` is none), is Ok with is_error = true.
    pub fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: &serde_json::Value,
    ) -> Result<CallResult, Error> {
        let all = self.servers;
        let Some(i) = all.find(server) else {
            let names: Vec<&str> = all.servers.iter().map(|s| s.spec.name.as_str()).collect();
            return Ok(CallResult::error(format!(
                "unknown tool: there is no MCP server `{}` (servers: {})",
                bounds::clip(server, 80),
                names.join(", ")
            )));
        };
        let s = &all.servers[i];
        if !s.tools.iter().any(|t| t.name == tool) {
            return Ok(CallResult::error(format!(
                "unknown tool `{}` on MCP server `{server}`",
                bounds::clip(tool, 80)
            )));
        }
        let arguments = match arguments {
            Value::Null => None,
            Value::Object(o) => Some(o.clone()),
            _ => {
                return Ok(CallResult::error(
                    "the arguments of a tool call must be a JSON object".into(),
                ))
            }
        };
        if let Some(a) = &arguments {
            let depth = a.values().map(|v| bounds::depth(v, all.limits.depth)).max();
            if depth.unwrap_or(0) + 1 > all.limits.depth {
                return Ok(CallResult::error(format!(
                    "the arguments nest deeper than {} levels",
                    all.limits.depth
                )));
            }
        }
        let slot = match s.spec.fresh {
            Fresh::Episode => &self.live[i],
            Fresh::Run => &s.shared,
        };
        let mut guard = lock(slot);
        let mut failure = None;
        // At most two tries: the second on a restarted process (and, for
        // `Fresh::Episode`, a fresh copy).
        for _ in 0..2 {
            if guard.is_none() {
                match all.launch(s, s.run_copy.clone()) {
                    Ok(l) => *guard = Some(l),
                    Err(e @ (Error::Input(_) | Error::Io(_))) => return Err(e),
                    Err(e) => {
                        failure = Some(e);
                        continue;
                    }
                }
            }
            let Some(live) = guard.as_ref() else { continue };
            let args = arguments.as_ref().map(|a| {
                let mut a = a.clone();
                if let Some(c) = &live.copy {
                    a.values_mut()
                        .for_each(|v| to_real(v, &s.spec.alias, &c.real));
                }
                a
            });
            match all.call_live(s, live, tool, args) {
                Ok(r) => return Ok(r),
                Err(e @ Error::Input(_)) => return Err(e),
                Err(e) => {
                    failure = Some(e);
                    if let Some(old) = guard.take() {
                        all.retire(old, s.spec.fresh == Fresh::Episode);
                    }
                }
            }
        }
        Err(failure.unwrap_or_else(|| Error::Server {
            server: s.spec.name.clone(),
            what: "could not be started".into(),
            failure: Failure::Dead,
        }))
    }

    /// The real path of this episode's copy of `server`'s working folder, once its
    /// process is started (for [`Fresh::Run`], the shared copy). For tests and
    /// diagnostics: never show it to the agent.
    pub fn workdir(&self, server: &str) -> Option<PathBuf> {
        let i = self.servers.find(server)?;
        let s = &self.servers.servers[i];
        match s.spec.fresh {
            Fresh::Run => s.run_copy.as_ref().map(|c| c.path.clone()),
            Fresh::Episode => lock(&self.live[i])
                .as_ref()
                .and_then(|l| l.copy.as_ref().map(|c| c.path.clone())),
        }
    }
}

impl Drop for Episode<'_> {
    fn drop(&mut self) {
        for slot in &self.live {
            let live = lock(slot).take();
            if let Some(live) = live {
                self.servers.retire(live, true);
            }
        }
    }
}

fn async_refused() -> Error {
    Error::Input("the blocking MCP servers API was called from async code".into())
}

/// `s` renamed after the experiment's name for the server, with the copy's path
/// shown as the alias.
fn named(s: &Server, copy: Option<&WorkCopy>, e: Error) -> Error {
    match e {
        Error::Server { what, failure, .. } => Error::Server {
            server: s.spec.name.clone(),
            what: unalias(copy, &s.spec.alias, &what),
            failure,
        },
        Error::Rpc { error, .. } => Error::Rpc {
            server: s.spec.name.clone(),
            error,
        },
        e => e,
    }
}

/// `v` with every string equal to `alias` or starting with `alias/` pointing at
/// `real` instead.
fn to_real(v: &mut Value, alias: &str, real: &str) {
    match v {
        Value::String(s) => {
            if s == alias {
                *s = real.to_string();
            } else if let Some(rest) = s.strip_prefix(alias).filter(|r| r.starts_with('/')) {
                *s = format!("{real}{rest}");
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| to_real(x, alias, real)),
        Value::Object(o) => o.values_mut().for_each(|x| to_real(x, alias, real)),
        _ => {}
    }
}

/// `text` with the copy's path (real and as made) shown as `alias`.
fn unalias(copy: Option<&WorkCopy>, alias: &str, text: &str) -> String {
    let Some(c) = copy else {
        return text.to_string();
    };
    let mut out = if c.real.is_empty() {
        text.to_string()
    } else {
        text.replace(&c.real, alias)
    };
    if let Some(p) = c.path.to_str() {
        if !p.is_empty() && p != c.real {
            out = out.replace(p, alias);
        }
    }
    out
}

/// A result's parts as text: text parts as they are, others as placeholders,
/// joined with newlines; the structured content when there are no parts.
fn result_text(r: &CallToolResult) -> String {
    if r.content.is_empty() {
        return match &r.structured_content {
            Some(v) => v.to_string(),
            None => String::new(),
        };
    }
    let parts: Vec<String> = r
        .content
        .iter()
        .map(|part| {
            let v = serde_json::to_value(part).unwrap_or(Value::Null);
            let uri = |u: &Value| u.as_str().unwrap_or("?").to_string();
            match v["type"].as_str() {
                Some("text") => v["text"].as_str().unwrap_or("").to_string(),
                Some("image") => "[image]".into(),
                Some("audio") => "[audio]".into(),
                Some("resource") => format!("[resource {}]", uri(&v["resource"]["uri"])),
                Some("resource_link") => format!("[resource {}]", uri(&v["uri"])),
                Some(other) => format!("[{}]", bounds::clip(other, 40)),
                None => "[content]".into(),
            }
        })
        .collect();
    parts.join("\n")
}

/// At most `max` bytes of `text` (cut at a character), with a marker when cut.
fn clip_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[... clipped: {} more bytes]",
        &text[..end],
        text.len() - end
    )
}

/// A file-name-safe form of a server name.
fn safe_name(name: &str) -> String {
    name.chars()
        .take(40)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A new folder of this process's own under `scratch`.
fn make_root(scratch: &Path) -> Result<PathBuf, Error> {
    let io = |e: std::io::Error| {
        Error::Io(format!(
            "cannot make a folder in the scratch folder {}: {e}",
            scratch.display()
        ))
    };
    std::fs::create_dir_all(scratch).map_err(io)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for k in 0..1000 {
        let root = scratch.join(format!("mcp-{}-{nanos}-{k}", std::process::id()));
        match std::fs::create_dir(&root) {
            Ok(()) => {
                if root.to_str().is_none() {
                    remove_tree(&root);
                    return Err(Error::Input(format!(
                        "the scratch folder {} is not a UTF-8 path",
                        scratch.display()
                    )));
                }
                return Ok(root);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(e)),
        }
    }
    Err(io(std::io::Error::other("every name tried is taken")))
}

/// Delete `path` (a folder of ours), trying again briefly: a killed server's own
/// children may still be writing in it.
fn remove_tree(path: &Path) {
    for _ in 0..5 {
        match std::fs::remove_dir_all(path) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
        }
    }
}

/// What the folder `root` holds, sorted by relative path, within the bounds
/// ([`MAX_WORKDIR_FILES`], [`MAX_WORKDIR_BYTES`]): files, folders, and symbolic
/// links that are relative and stay inside it.
fn scan(root: &Path) -> Result<Vec<Entry>, String> {
    let meta = std::fs::metadata(root).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("is not a folder".into());
    }
    let canon = root.canonicalize().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut bytes = 0u64;
    let mut stack = vec![PathBuf::new()];
    while let Some(dir) = stack.pop() {
        let at = |e: std::io::Error| format!("{}: {e}", root.join(&dir).display());
        for entry in std::fs::read_dir(root.join(&dir)).map_err(at)? {
            let entry = entry.map_err(at)?;
            let rel = dir.join(entry.file_name());
            let key = rel
                .to_str()
                .ok_or_else(|| format!("{}: the name is not UTF-8", rel.display()))?
                .to_string();
            let at = |e: std::io::Error| format!("{key}: {e}");
            let ft = entry.file_type().map_err(at)?;
            let kind = if ft.is_symlink() {
                let target = std::fs::read_link(root.join(&rel)).map_err(at)?;
                if target.is_absolute() {
                    return Err(format!(
                        "{key}: a symbolic link to an absolute path ({}) leaves the copy",
                        target.display()
                    ));
                }
                let to = root
                    .join(&rel)
                    .canonicalize()
                    .map_err(|e| format!("{key}: a symbolic link that cannot be followed ({e})"))?;
                if !to.starts_with(&canon) {
                    return Err(format!("{key}: a symbolic link that leaves the folder"));
                }
                Kind::Link(target)
            } else if ft.is_dir() {
                stack.push(rel.clone());
                Kind::Dir
            } else if ft.is_file() {
                let len = entry.metadata().map_err(at)?.len();
                bytes = bytes.saturating_add(len);
                if bytes > MAX_WORKDIR_BYTES {
                    return Err(format!(
                        "holds more than {} MiB (the limit)",
                        MAX_WORKDIR_BYTES >> 20
                    ));
                }
                Kind::File { len }
            } else {
                return Err(format!(
                    "{key}: is neither a file, a folder nor a symbolic link"
                ));
            };
            out.push(Entry { rel, key, kind });
            if out.len() > MAX_WORKDIR_FILES {
                return Err(format!(
                    "holds more than {MAX_WORKDIR_FILES} files and folders (the limit)"
                ));
            }
        }
    }
    // A folder sorts before what it holds (its path is a prefix of theirs).
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// sha256 (hex) over `entries` of the folder `root`: for each, in order, its kind,
/// relative path, and its length and bytes (a file) or target (a link).
fn digest(root: &Path, entries: &[Entry]) -> Result<String, String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    for e in entries {
        let tag: &[u8] = match e.kind {
            Kind::Dir => b"d\0",
            Kind::File { .. } => b"f\0",
            Kind::Link(_) => b"l\0",
        };
        h.update(tag);
        h.update(e.key.as_bytes());
        h.update(b"\0");
        match &e.kind {
            Kind::Dir => {}
            Kind::Link(t) => {
                h.update(t.to_string_lossy().as_bytes());
                h.update(b"\0");
            }
            Kind::File { len } => {
                h.update(len.to_le_bytes());
                let at = |x: std::io::Error| format!("{}: {x}", e.key);
                let mut f = std::fs::File::open(root.join(&e.rel))
                    .map_err(at)?
                    .take(*len);
                let mut n = 0u64;
                loop {
                    let k = f.read(&mut buf).map_err(at)?;
                    if k == 0 {
                        break;
                    }
                    n += k as u64;
                    h.update(&buf[..k]);
                }
                if n != *len {
                    return Err(format!("{}: changed while it was read", e.key));
                }
            }
        }
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Copy `entries` of the folder `from` into the new folder `to` (files keep their
/// permissions; links are recreated as they are).
fn copy_tree(from: &Path, entries: &[Entry], to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for e in entries {
        let dst = to.join(&e.rel);
        match &e.kind {
            Kind::Dir => std::fs::create_dir(&dst)?,
            Kind::File { len } => {
                let src = from.join(&e.rel);
                let mut r = std::fs::File::open(&src)?.take(*len);
                let mut w = std::fs::File::create(&dst)?;
                std::io::copy(&mut r, &mut w)?;
                drop(w);
                std::fs::set_permissions(&dst, std::fs::metadata(&src)?.permissions())?;
            }
            Kind::Link(target) => link(target, &dst)?,
        }
    }
    Ok(())
}

#[cfg(unix)]
fn link(target: &Path, at: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, at)
}

#[cfg(not(unix))]
fn link(_target: &Path, at: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other(format!(
        "{}: symbolic links are copied on Unix only",
        at.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn copy_at(path: &str, real: &str) -> WorkCopy {
        WorkCopy {
            path: PathBuf::from(path),
            real: real.to_string(),
        }
    }

    #[test]
    fn the_alias_is_rewritten_both_ways() {
        let mut v = json!({
            "repo_path": "/workspace",
            "files": ["/workspace/a.txt", "/workspaces", "x /workspace", "/workspace2/b"],
            "deep": {"list": [[{"p": "/workspace/d/e"}]]},
            "n": 3
        });
        for x in v.as_object_mut().expect("object").values_mut() {
            to_real(x, "/workspace", "/s/git-1");
        }
        assert_eq!(
            v,
            json!({
                "repo_path": "/s/git-1",
                "files": ["/s/git-1/a.txt", "/workspaces", "x /workspace", "/workspace2/b"],
                "deep": {"list": [[{"p": "/s/git-1/d/e"}]]},
                "n": 3
            })
        );
        let c = copy_at("/tmp/s/git-1", "/private/tmp/s/git-1");
        assert_eq!(
            unalias(
                Some(&c),
                "/workspace",
                "at /private/tmp/s/git-1/a and /tmp/s/git-1"
            ),
            "at /workspace/a and /workspace"
        );
        assert_eq!(unalias(None, "/workspace", "/tmp/x"), "/tmp/x");
    }

    #[test]
    fn long_text_is_clipped_at_a_character_with_a_marker() {
        assert_eq!(clip_text("short", 10), "short");
        let t = clip_text("ééééé", 3);
        assert_eq!(t, "é\n[... clipped: 8 more bytes]");
        let big = "x".repeat(MAX_TEXT_BYTES * 2);
        let t = clip_text(&big, MAX_TEXT_BYTES);
        assert!(t.starts_with(&big[..MAX_TEXT_BYTES]));
        assert!(t.ends_with(&format!("[... clipped: {MAX_TEXT_BYTES} more bytes]")));
    }

    #[test]
    fn parts_become_text_or_placeholders() {
        let r: CallToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "one"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "x"}},
                {"type": "text", "text": "two"}
            ],
            "isError": true
        }))
        .expect("a result");
        assert_eq!(result_text(&r), "one\n[image]\n[resource file:///a]\ntwo");
        let r: CallToolResult =
            serde_json::from_value(json!({"content": [], "structuredContent": {"a": 1}}))
                .expect("a result");
        assert_eq!(result_text(&r), r#"{"a":1}"#);
    }

    #[test]
    fn specs_are_checked() {
        let ok = ServerSpec::new("git", vec!["srv".into()]);
        assert!(ok.check().is_ok());
        let mut s = ok.clone();
        s.command = vec!["srv".into(), "{workdir}".into()];
        assert!(s.check().expect_err("no workdir").contains("{workdir}"));
        s.workdir = Some(PathBuf::from("/w"));
        assert!(s.check().is_ok());
        s.alias = "workspace".into();
        assert!(s.check().expect_err("relative alias").contains("alias"));
        let mut s = ok.clone();
        s.url = Some("http://127.0.0.1:1/mcp".into());
        assert!(s.check().expect_err("both").contains("not both"));
        s.command.clear();
        assert!(s.check().is_ok());
        s.url = Some("ftp://x".into());
        assert!(s.check().is_err());
        let mut s = ok;
        s.command.clear();
        assert!(s.check().is_err());
        s.name = " ".into();
        assert!(s.check().is_err());
        let f: Fresh = serde_json::from_value(json!("run")).expect("fresh");
        assert_eq!(f, Fresh::Run);
        assert_eq!(
            serde_json::to_value(Fresh::Episode).expect("json"),
            json!("episode")
        );
    }

    #[test]
    fn a_folder_is_copied_and_digested_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = dir.path().join("w");
        std::fs::create_dir_all(w.join("sub/deeper")).expect("mkdir");
        std::fs::write(w.join("a.txt"), "a\n").expect("write");
        std::fs::write(w.join("a-b"), "ab").expect("write");
        std::fs::write(w.join("sub/deeper/c"), "c").expect("write");
        #[cfg(unix)]
        std::os::unix::fs::symlink("sub/deeper/c", w.join("link")).expect("symlink");
        let entries = scan(&w).expect("scan");
        let keys: Vec<&str> = entries.iter().map(|e| e.key.as_str()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        let d1 = digest(&w, &entries).expect("digest");
        assert_eq!(d1.len(), 64);
        let to = dir.path().join("copy");
        copy_tree(&w, &entries, &to).expect("copy");
        assert_eq!(std::fs::read(to.join("sub/deeper/c")).expect("read"), b"c");
        let copied = scan(&to).expect("scan the copy");
        assert_eq!(
            digest(&to, &copied).expect("digest"),
            d1,
            "the copy is the same"
        );
        #[cfg(unix)]
        assert_eq!(
            std::fs::read(to.join("link")).expect("read through link"),
            b"c"
        );
        // A change of content, or of a name, changes the digest.
        std::fs::write(w.join("a.txt"), "A\n").expect("write");
        let d2 = digest(&w, &scan(&w).expect("scan")).expect("digest");
        assert_ne!(d1, d2);
        std::fs::rename(w.join("a-b"), w.join("a-c")).expect("rename");
        let d3 = digest(&w, &scan(&w).expect("scan")).expect("digest");
        assert_ne!(d2, d3);
    }

    #[cfg(unix)]
    #[test]
    fn links_that_leave_the_folder_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = dir.path().join("w");
        std::fs::create_dir(&w).expect("mkdir");
        std::fs::write(dir.path().join("secret"), "s").expect("write");
        std::os::unix::fs::symlink("../secret", w.join("up")).expect("symlink");
        let e = scan(&w).expect_err("escapes");
        assert!(e.contains("leaves the folder"), "{e}");
        std::fs::remove_file(w.join("up")).expect("rm");
        std::os::unix::fs::symlink(dir.path().join("w"), w.join("abs")).expect("symlink");
        let e = scan(&w).expect_err("absolute");
        assert!(e.contains("absolute"), "{e}");
        std::fs::remove_file(w.join("abs")).expect("rm");
        // A link to `.` followed by `..` leaves it too, though it reads as inside.
        std::os::unix::fs::symlink(".", w.join("self")).expect("symlink");
        std::os::unix::fs::symlink("self/../secret", w.join("sneaky")).expect("symlink");
        assert!(scan(&w).is_err());
        assert!(scan(&dir.path().join("missing")).is_err());
        assert!(scan(&dir.path().join("secret"))
            .expect_err("a file")
            .contains("not a folder"));
    }

    #[test]
    fn bounds_on_the_folder_are_one_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        for i in 0..=MAX_WORKDIR_FILES {
            std::fs::write(dir.path().join(format!("f{i}")), "").expect("write");
        }
        let e = scan(dir.path()).expect_err("too many");
        assert!(e.contains("more than 10000 files"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn roots_are_new_folders_and_names_are_safe() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = make_root(&dir.path().join("scratch")).expect("root");
        let b = make_root(&dir.path().join("scratch")).expect("root");
        assert_ne!(a, b);
        assert!(a.starts_with(dir.path().join("scratch")) && a.is_dir());
        assert_eq!(safe_name("a/../b c"), "a____b_c");
    }
}

//! A connection to one upstream MCP server (a stdio child process or a Streamable
//! HTTP URL) through rmcp's client, every answer held to [`Limits`].

use crate::bounds::{self, Fault, Guarded, Limits};
use crate::error::{Error, Failure};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerConfig,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::ServiceExt;
use std::future::Future;
use std::process::{ExitStatus, Stdio};
use tokio::sync::{oneshot, watch};

/// Where an upstream server is: a command to start (stdio) or a URL (Streamable HTTP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spec {
    /// A program and its arguments, started as a child process that speaks MCP on
    /// its stdin and stdout.
    Command(Vec<String>),
    /// An `http://` or `https://` URL of a Streamable HTTP endpoint.
    Url(String),
    /// Like [`Spec::Command`], with variables added to the child's environment
    /// (it inherits otb's) and its own working folder.
    Process {
        /// The program and its arguments.
        words: Vec<String>,
        /// Variables set for the child, on top of otb's environment.
        env: std::collections::BTreeMap<String, String>,
        /// The child's working folder (otb's when `None`).
        cwd: Option<std::path::PathBuf>,
        /// A file its stderr is appended to (at most [`STDERR_LOG_BYTES`] a run of
        /// otb, the rest dropped); `None`: otb's own stderr.
        stderr: Option<std::path::PathBuf>,
    },
}

impl Spec {
    /// A command line's words as a spec: one word that is an `http(s)://` URL is a
    /// URL, anything else a command.
    pub fn parse(words: &[String]) -> Result<Spec, Error> {
        match words {
            [] => Err(Error::Input("--upstream: name a command or a URL".into())),
            [one] if one.starts_with("http://") || one.starts_with("https://") => {
                Ok(Spec::Url(one.clone()))
            }
            [first, ..] if first.is_empty() => {
                Err(Error::Input("--upstream: the command is empty".into()))
            }
            words => Ok(Spec::Command(words.to_vec())),
        }
    }

    /// The server's name in error lines: its command line or URL, clipped.
    pub fn name(&self) -> String {
        match self {
            Spec::Command(w) | Spec::Process { words: w, .. } => bounds::clip(&w.join(" "), 120),
            Spec::Url(u) => bounds::clip(u, 120),
        }
    }
}

/// How much of one server process's stderr its log file keeps.
pub const STDERR_LOG_BYTES: u64 = 256 * 1024;

/// A server's stderr log, opened to append (its folder made); `None` where it cannot
/// be (the stderr is then dropped, not mixed into otb's output).
fn open_log(path: &std::path::Path) -> Option<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).ok()?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .ok()
}

/// A connected upstream server.
pub struct Upstream {
    name: String,
    limits: Limits,
    service: RunningService<RoleClient, ClientConfig>,
    info: ServerConfig,
    fault: Fault,
    exit: Option<watch::Receiver<Option<ExitStatus>>>,
    _kill: Option<oneshot::Sender<()>>,
}

impl Upstream {
    /// Start (or reach) the server `spec` names and complete the `initialize`
    /// handshake within `limits.connect`.
    pub async fn connect(spec: &Spec, limits: Limits) -> Result<Upstream, Error> {
        let name = spec.name();
        let fault = Fault::default();
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("otb", env!("CARGO_PKG_VERSION")),
        );
        let (service, exit, kill) = match spec {
            Spec::Command(_) | Spec::Process { .. } => {
                let (words, env, cwd, log): (&[String], _, _, _) = match spec {
                    Spec::Process {
                        words,
                        env,
                        cwd,
                        stderr,
                    } => (words, Some(env), cwd.as_ref(), stderr.clone()),
                    Spec::Command(words) => (words, None, None, None),
                    Spec::Url(_) => (&[], None, None, None),
                };
                let Some((program, args)) = words.split_first() else {
                    return Err(Error::Server {
                        server: name,
                        what: "has an empty command".into(),
                        failure: Failure::Dead,
                    });
                };
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args);
                if let Some(env) = env {
                    cmd.envs(env);
                }
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
                cmd.stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true);
                let mut child = cmd.spawn().map_err(|e| Error::Server {
                    server: name.clone(),
                    what: format!("cannot start it: {e}"),
                    failure: Failure::Dead,
                })?;
                let (Some(stdout), Some(stdin), Some(mut stderr)) =
                    (child.stdout.take(), child.stdin.take(), child.stderr.take())
                else {
                    return Err(Error::Server {
                        server: name,
                        what: "its pipes could not be opened".into(),
                        failure: Failure::Dead,
                    });
                };
                // The server's own diagnostics go to ours, streamed (never held), or
                // to its log file.
                tokio::spawn(async move {
                    match log.and_then(|p| open_log(&p)) {
                        Some(file) => {
                            let mut file = tokio::fs::File::from_std(file);
                            use tokio::io::AsyncReadExt;
                            let mut kept = (&mut stderr).take(STDERR_LOG_BYTES);
                            let _ = tokio::io::copy(&mut kept, &mut file).await;
                            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
                        }
                        None => {
                            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::stderr()).await;
                        }
                    }
                });
                let (exit_tx, exit_rx) = watch::channel(None);
                let (kill_tx, kill_rx) = oneshot::channel::<()>();
                tokio::spawn(async move {
                    tokio::select! {
                        status = child.wait() => {
                            let _ = exit_tx.send(status.ok());
                        }
                        _ = kill_rx => {
                            let _ = child.kill().await;
                            let _ = exit_tx.send(child.wait().await.ok());
                        }
                    }
                });
                let read = Guarded::new(stdout, limits.message_bytes, fault.clone());
                let transport =
                    rmcp::transport::async_rw::AsyncRwTransport::new_client(read, stdin)
                        .with_max_line_length(limits.message_bytes);
                let started = within(limits.connect, client.serve(transport)).await;
                (started, Some(exit_rx), Some(kill_tx))
            }
            Spec::Url(url) => {
                use rmcp::transport::streamable_http_client::{
                    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
                };
                // reqwest's rustls without a provider of its own: ring, which the
                // workspace already builds. Installed once per process.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                config.max_sse_event_size = limits.message_bytes;
                let transport = StreamableHttpClientTransport::from_config(config);
                (
                    within(limits.connect, client.serve(transport)).await,
                    None,
                    None,
                )
            }
        };
        let service = match service {
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                let what = match fault.get() {
                    Some(f) => f,
                    None => match exited(&exit).await {
                        Some(s) => format!("exited ({s}) before it finished `initialize`"),
                        None => {
                            format!("`initialize` failed: {}", bounds::clip(&e.to_string(), 300))
                        }
                    },
                };
                return Err(Error::Server {
                    server: name,
                    what,
                    failure: Failure::Dead,
                });
            }
            None => {
                return Err(Error::Server {
                    server: name,
                    what: format!(
                        "did not answer `initialize` within {} s",
                        limits.connect.as_secs_f64()
                    ),
                    failure: Failure::Dead,
                })
            }
        };
        let peer = service.peer_info().ok_or_else(|| Error::Server {
            server: name.clone(),
            what: "sent no server information in `initialize`".into(),
            failure: Failure::Dead,
        })?;
        check_value(&name, &limits, &*peer, "its `initialize` answer")?;
        let mut info = ServerConfig::new(peer.capabilities.clone())
            .with_protocol_version(peer.protocol_version.clone());
        if let Some(i) = &peer.server_info {
            info = info.with_server_info(i.clone());
        }
        if let Some(i) = &peer.instructions {
            info = info.with_instructions(i.clone());
        }
        Ok(Upstream {
            name,
            limits,
            service,
            info,
            fault,
            exit,
            _kill: kill,
        })
    }

    /// The server's name in error lines.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the server said about itself in `initialize`.
    pub fn info(&self) -> &ServerConfig {
        &self.info
    }

    /// The limits this connection is held to.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Why the server can no longer answer (it broke the protocol, exited, or its
    /// connection closed), if so.
    pub fn gone(&self) -> Option<String> {
        if let Some(f) = self.fault.get() {
            return Some(f);
        }
        if let Some(Some(s)) = self.exit.as_ref().map(|e| *e.borrow()) {
            return Some(format!("exited ({s})"));
        }
        self.service
            .is_closed()
            .then(|| "closed the connection".to_string())
    }

    /// One page of the server's tools, checked: at most `limits.tools` tools, each
    /// description at most `limits.description_bytes`.
    pub async fn list_tools(
        &self,
        params: Option<PaginatedRequestParams>,
    ) -> Result<ListToolsResult, Error> {
        let r = self
            .request("tools/list", self.service.peer().list_tools(params))
            .await?;
        if r.tools.len() > self.limits.tools {
            return Err(self.bounded(format!(
                "listed {} tools (the limit is {})",
                r.tools.len(),
                self.limits.tools
            )));
        }
        for t in &r.tools {
            let n = t.description.as_ref().map_or(0, |d| d.len());
            if n > self.limits.description_bytes {
                return Err(self.bounded(format!(
                    "the description of tool `{}` is {} bytes (the limit is {})",
                    bounds::clip(&t.name, 80),
                    n,
                    self.limits.description_bytes
                )));
            }
        }
        Ok(r)
    }

    /// Call a tool. A final result, or what the server answered instead (a
    /// request for input, a task), passed on unchanged.
    pub async fn call_tool(
        &self,
        params: CallToolRequestParams,
    ) -> Result<rmcp::model::CallToolResponse, Error> {
        self.request("tools/call", self.service.peer().call_tool_once(params))
            .await
    }

    /// The rmcp client's peer, for requests this type has no method for; send them
    /// through [`Upstream::request`] so they are bounded.
    pub fn peer(&self) -> &rmcp::service::Peer<RoleClient> {
        self.service.peer()
    }

    /// Wait for `fut` (a request named `method`) within `limits.call`, then check
    /// its answer's size and depth. An error the server answered is passed on as
    /// [`Error::Rpc`].
    pub async fn request<T: Answer>(
        &self,
        method: &str,
        fut: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, Error> {
        match within(self.limits.call, fut).await {
            None => Err(Error::Server {
                server: self.name.clone(),
                what: format!(
                    "did not answer `{method}` within {} s",
                    self.limits.call.as_secs_f64()
                ),
                failure: Failure::Call,
            }),
            Some(Ok(r)) => {
                check_value(
                    &self.name,
                    &self.limits,
                    &r,
                    &format!("its `{method}` answer"),
                )?;
                Ok(r)
            }
            Some(Err(ServiceError::McpError(e))) => Err(Error::Rpc {
                server: self.name.clone(),
                error: Box::new(e),
            }),
            Some(Err(e)) => Err(self.failed(method, e).await),
        }
    }

    /// The error for request `method` that failed with `e`, naming the cause the
    /// connection knows (a broken message, the process's exit).
    async fn failed(&self, method: &str, e: ServiceError) -> Error {
        let closed = matches!(
            e,
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
        );
        let what = match self.fault.get() {
            Some(f) => f,
            None if closed => match exited(&self.exit).await {
                Some(s) => format!("exited ({s}) during `{method}`"),
                None => format!("closed the connection during `{method}`"),
            },
            None => format!("`{method}` failed: {}", bounds::clip(&e.to_string(), 300)),
        };
        Error::Server {
            server: self.name.clone(),
            what,
            failure: if closed || self.gone().is_some() {
                Failure::Dead
            } else {
                Failure::Call
            },
        }
    }

    fn bounded(&self, what: String) -> Error {
        Error::Server {
            server: self.name.clone(),
            what,
            failure: Failure::Call,
        }
    }

    /// Close the connection and end the server's process: its stdin is closed, and
    /// a process still running two seconds later is killed; returns once it has
    /// exited (or after five more seconds).
    pub async fn close(self) {
        let Upstream {
            service,
            exit,
            _kill: kill,
            ..
        } = self;
        let grace = std::time::Duration::from_secs(2);
        let _ = within(grace, service.cancel()).await;
        if let Some(mut rx) = exit {
            if within(grace, rx.wait_for(Option::is_some)).await.is_none() {
                drop(kill);
                let five = std::time::Duration::from_secs(5);
                let _ = within(five, rx.wait_for(Option::is_some)).await;
            }
        }
    }
}

/// `fut`'s output, or `None` after `limit`.
async fn within<T>(limit: std::time::Duration, fut: impl Future<Output = T>) -> Option<T> {
    tokio::time::timeout(limit, fut).await.ok()
}

/// The exit status of a child process that is ending (waiting up to a second for
/// it: its pipes close just before it is reaped).
async fn exited(exit: &Option<watch::Receiver<Option<ExitStatus>>>) -> Option<ExitStatus> {
    let mut rx = exit.clone()?;
    let r = within(
        std::time::Duration::from_secs(1),
        rx.wait_for(Option::is_some),
    )
    .await;
    match r {
        Some(Ok(s)) => *s,
        _ => None,
    }
}

/// An answer of a server, as the JSON it stands for (to measure it).
pub trait Answer {
    /// The answer's JSON.
    fn json(&self) -> serde_json::Result<serde_json::Value>;
}

macro_rules! answers {
    ($($t:ty),*) => {$(
        impl Answer for $t {
            fn json(&self) -> serde_json::Result<serde_json::Value> {
                serde_json::to_value(self)
            }
        }
    )*};
}

answers!(
    (),
    rmcp::model::ServerPeerInfo,
    ListToolsResult,
    rmcp::model::ListResourcesResult,
    rmcp::model::ListResourceTemplatesResult,
    rmcp::model::ListPromptsResult,
    rmcp::model::CompleteResult
);

impl Answer for rmcp::model::CallToolResponse {
    fn json(&self) -> serde_json::Result<serde_json::Value> {
        use rmcp::model::CallToolResponse as R;
        match self {
            R::Complete(r) => serde_json::to_value(r),
            R::InputRequired(r) => serde_json::to_value(r),
            R::Task(r) => serde_json::to_value(r),
            _ => Ok(serde_json::Value::Null),
        }
    }
}

impl Answer for rmcp::model::ReadResourceResponse {
    fn json(&self) -> serde_json::Result<serde_json::Value> {
        use rmcp::model::ReadResourceResponse as R;
        match self {
            R::Complete(r) => serde_json::to_value(r),
            R::InputRequired(r) => serde_json::to_value(r),
            _ => Ok(serde_json::Value::Null),
        }
    }
}

impl Answer for rmcp::model::GetPromptResponse {
    fn json(&self) -> serde_json::Result<serde_json::Value> {
        use rmcp::model::GetPromptResponse as R;
        match self {
            R::Complete(r) => serde_json::to_value(r),
            R::InputRequired(r) => serde_json::to_value(r),
            _ => Ok(serde_json::Value::Null),
        }
    }
}

/// `v` (an answer of server `server`) is within the size and depth limits.
fn check_value<T: Answer + ?Sized>(
    server: &str,
    limits: &Limits,
    v: &T,
    what: &str,
) -> Result<(), Error> {
    let bad = |why: String| Error::Server {
        server: server.to_string(),
        what: format!("{what} {why}"),
        failure: Failure::Call,
    };
    let v = v.json().map_err(|e| bad(format!("cannot be read: {e}")))?;
    let d = bounds::depth(&v, limits.depth);
    if d > limits.depth {
        return Err(bad(format!("nests deeper than {} levels", limits.depth)));
    }
    let n = serde_json::to_vec(&v).map_or(usize::MAX, |b| b.len());
    if n > limits.message_bytes {
        return Err(bad(format!(
            "is {n} bytes (the limit is {})",
            limits.message_bytes
        )));
    }
    Ok(())
}

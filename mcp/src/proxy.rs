//! `otb mcp proxy`: an MCP server that forwards every request to an upstream server
//! and answers `tools/list` with learned descriptions (tools the descriptions do not
//! name keep the upstream's). Errors the upstream answers pass through as they are;
//! a failure of the upstream itself is an MCP error naming it, and when the
//! upstream is gone the proxy ends with one line naming it.

use crate::error::Error;
use crate::upstream::Upstream;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use std::borrow::Cow;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The proxy's request handler: one upstream connection and the learned
/// descriptions, shared by every client session.
#[derive(Clone)]
pub struct Proxy {
    upstream: Arc<Upstream>,
    docs: Arc<HashMap<String, String>>,
    gone: Arc<watch::Sender<Option<String>>>,
}

impl Proxy {
    /// A proxy of `upstream` that shows `docs` (tool name -> description).
    pub fn new(upstream: Upstream, docs: HashMap<String, String>) -> Proxy {
        Proxy {
            upstream: Arc::new(upstream),
            docs: Arc::new(docs),
            gone: Arc::new(watch::channel(None).0),
        }
    }

    /// The MCP error a client gets for `e`; a fatal one also ends the proxy.
    fn to_client(&self, e: Error) -> ErrorData {
        match e {
            Error::Rpc { error, .. } => *error,
            e => {
                if e.is_fatal() {
                    self.gone.send_replace(Some(e.to_string()));
                }
                ErrorData::internal_error(e.to_string(), None)
            }
        }
    }

    /// `r` with the learned descriptions in place of the upstream's.
    fn relabel(&self, mut r: ListToolsResult) -> ListToolsResult {
        for t in &mut r.tools {
            if let Some(d) = self.docs.get(t.name.as_ref()) {
                t.description = Some(Cow::Owned(d.clone()));
            }
        }
        r
    }

    /// Why the upstream is gone, once it is.
    async fn ended(&self) -> String {
        let mut rx = self.gone.subscribe();
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            if let Some(why) = rx.borrow_and_update().clone() {
                return why;
            }
            if let Some(why) = self.upstream.gone() {
                // A request that was waiting fails in a moment with the fuller story
                // (what it was doing when the server went): prefer that line.
                let _ = tokio::time::timeout(Duration::from_secs(1), rx.changed()).await;
                if let Some(line) = rx.borrow().clone() {
                    return line;
                }
                return format!("MCP server `{}` {why}", self.upstream.name());
            }
            tokio::select! {
                _ = rx.changed() => {}
                _ = tick.tick() => {}
            }
        }
    }
}

impl ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        self.upstream.info().clone()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        // No newer protocol than the upstream speaks: the proxy passes its answers on.
        Cow::Borrowed(ProtocolVersion::known_up_to(
            &self.upstream.info().protocol_version,
        ))
    }

    async fn ping(&self, _cx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        match self.upstream.list_tools(request).await {
            Ok(r) => Ok(self.relabel(r)),
            Err(e) => Err(self.to_client(e)),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.upstream
            .call_tool(request)
            .await
            .map_err(|e| self.to_client(e))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let u = &self.upstream;
        u.request("resources/list", u.peer().list_resources(request))
            .await
            .map_err(|e| self.to_client(e))
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let u = &self.upstream;
        u.request(
            "resources/templates/list",
            u.peer().list_resource_templates(request),
        )
        .await
        .map_err(|e| self.to_client(e))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let u = &self.upstream;
        u.request("resources/read", u.peer().read_resource_once(request))
            .await
            .map_err(|e| self.to_client(e))
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let u = &self.upstream;
        u.request("prompts/list", u.peer().list_prompts(request))
            .await
            .map_err(|e| self.to_client(e))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let u = &self.upstream;
        u.request("prompts/get", u.peer().get_prompt_once(request))
            .await
            .map_err(|e| self.to_client(e))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let u = &self.upstream;
        u.request("completion/complete", u.peer().complete(request))
            .await
            .map_err(|e| self.to_client(e))
    }
}

/// How a proxy run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// The client closed the connection (stdio) or the server was stopped.
    Client,
    /// The upstream is gone: the line that says why, naming it.
    Upstream(String),
}

/// Serve `proxy` on this process's stdin and stdout until the client leaves or the
/// upstream is gone.
pub async fn serve_stdio(proxy: Proxy) -> Result<Ended, Error> {
    let watch = proxy.clone();
    let server = proxy
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|e| Error::Serve(format!("the MCP client on stdin did not initialize: {e}")))?;
    let token = server.cancellation_token();
    tokio::select! {
        _ = server.waiting() => Ok(Ended::Client),
        why = watch.ended() => {
            // Let the failed request's answer reach the client before ending.
            tokio::time::sleep(Duration::from_millis(200)).await;
            token.cancel();
            Ok(Ended::Upstream(why))
        }
    }
}

/// Serve `proxy` over Streamable HTTP on `addr` (every path) until the upstream is
/// gone; `bound` is told the address listened on (port 0 picks one).
pub async fn serve_http(
    proxy: Proxy,
    addr: SocketAddr,
    bound: impl FnOnce(SocketAddr),
) -> Result<Ended, Error> {
    use rmcp::transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Input(format!("--addr {addr}: cannot listen: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::Serve(format!("--addr {addr}: {e}")))?;
    let mut config = StreamableHttpServerConfig::default();
    let host = local.ip().to_string();
    if !config.allowed_hosts.contains(&host) {
        config.allowed_hosts.push(host);
    }
    let factory = proxy.clone();
    let service: StreamableHttpService<Proxy, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(factory.clone()), Default::default(), config);
    bound(local);
    let ended = proxy.ended();
    tokio::pin!(ended);
    loop {
        tokio::select! {
            why = &mut ended => return Ok(Ended::Upstream(why)),
            conn = listener.accept() => {
                let Ok((stream, _)) = conn else { continue };
                let svc = hyper_util::service::TowerToHyperService::new(service.clone());
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, svc)
                        .await;
                });
            }
        }
    }
}

/// `otb mcp proxy`: connect to `upstream` within `limits`, then serve `docs` (tool
/// name -> description) over stdio, or over Streamable HTTP on `addr` (the address
/// listened on is said on stderr). Returns how it ended; an upstream that cannot
/// be reached is an error naming it.
pub fn run_blocking(
    upstream: &crate::upstream::Spec,
    docs: HashMap<String, String>,
    limits: crate::bounds::Limits,
    addr: Option<SocketAddr>,
) -> Result<Ended, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Serve(format!("cannot start the proxy's runtime: {e}")))?;
    let ended = rt.block_on(async move {
        let up = Upstream::connect(upstream, limits).await?;
        let name = up.name().to_string();
        let proxy = Proxy::new(up, docs);
        match addr {
            None => serve_stdio(proxy).await,
            Some(addr) => {
                serve_http(proxy, addr, |a| {
                    eprintln!("otb mcp proxy: serving http://{a}/mcp (upstream: {name})");
                })
                .await
            }
        }
    });
    // The upstream's process and any request still waiting end with the runtime.
    rt.shutdown_timeout(Duration::from_secs(1));
    ended
}

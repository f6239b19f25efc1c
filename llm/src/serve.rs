//! `serve`: exposes any [`Backend`] as a local OpenAI-compatible
//! `POST /v1/chat/completions` endpoint (plus `GET /v1/models`).
//!
//! A deliberately small HTTP/1.1 server on raw tokio sockets: bodies with
//! `Content-Length` only, one request per connection (`Connection: close`).
//! That is all OpenAI clients need, and it keeps hyper's server stack out of
//! the build. Bind it to 127.0.0.1.
//!
//! Bounds ([`ServeConfig`]): at most `max_connections` connections are
//! served at once; further ones **wait** (they are not accepted until a
//! slot frees, so they queue in the kernel's backlog and the client's own
//! timeout applies) rather than being refused with 503, because a model
//! call can take minutes and a refusal would burn the client's retries. A
//! client must send its whole request within `io_timeout` (else it gets 408
//! and is closed), and the reply must be taken within `io_timeout`; the
//! model call itself is not under that timeout.
//!
//! With `cache_dir`, answers go through a [`CachedClient`] over a call cache
//! opened with [`CallCache::open_per_write`]: the writer lock is taken for
//! each appended record, never for the server's lifetime, so a run can use
//! the same cache directory while the server is up.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::backend::Backend;
use crate::cache::{CachedClient, CallCache};
use crate::error::{ErrorKind, LlmError};
use crate::wire;

/// Largest request body accepted (bytes).
pub const MAX_BODY: usize = 32 << 20;
const MAX_HEAD: usize = 64 << 10;

/// Limits and options of the server.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Connections served at once; more wait to be accepted. At least 1.
    pub max_connections: usize,
    /// Time a client has to send its whole request, and to take the reply.
    pub io_timeout: Duration,
    /// Cache answers in this directory (lock taken per write; see the
    /// module docs). `None`: no caching here (the client caches).
    pub cache_dir: Option<PathBuf>,
    /// The model `GET /v1/models` lists; `None`: the backend's name.
    pub model: Option<String>,
}

impl Default for ServeConfig {
    /// 64 connections, 30 s I/O timeout, no cache.
    fn default() -> Self {
        ServeConfig {
            max_connections: 64,
            io_timeout: Duration::from_secs(30),
            cache_dir: None,
            model: None,
        }
    }
}

/// Binds `addr` and serves `backend` until the task is dropped or an accept
/// error occurs, with the default [`ServeConfig`]. Use [`bind`] +
/// [`serve_listener`] to learn the port first.
pub async fn serve(backend: Arc<dyn Backend>, addr: SocketAddr) -> Result<(), LlmError> {
    serve_with(backend, addr, ServeConfig::default()).await
}

/// [`serve`] with explicit limits and options.
pub async fn serve_with(
    backend: Arc<dyn Backend>,
    addr: SocketAddr,
    cfg: ServeConfig,
) -> Result<(), LlmError> {
    let listener = bind(addr).await?;
    serve_listener_with(backend, listener, cfg).await
}

/// Binds a listener (port 0 picks a free port; read it with `local_addr`).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, LlmError> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| LlmError::new(ErrorKind::Fatal, format!("cannot listen on {addr}: {e}")))
}

/// Serves `backend` on an already bound listener (default [`ServeConfig`]).
pub async fn serve_listener(
    backend: Arc<dyn Backend>,
    listener: TcpListener,
) -> Result<(), LlmError> {
    serve_listener_with(backend, listener, ServeConfig::default()).await
}

/// Serves `backend` on an already bound listener with `cfg`.
pub async fn serve_listener_with(
    backend: Arc<dyn Backend>,
    listener: TcpListener,
    cfg: ServeConfig,
) -> Result<(), LlmError> {
    let backend: Arc<dyn Backend> = match &cfg.cache_dir {
        Some(dir) => {
            let dir = dir.clone();
            let cache = tokio::task::spawn_blocking(move || CallCache::open_per_write(dir))
                .await
                .map_err(|e| {
                    LlmError::new(ErrorKind::LocalIo, format!("cache task failed: {e}"))
                })??;
            Arc::new(CachedClient::new(backend, Arc::new(cache)).for_stage("serve"))
        }
        None => backend,
    };
    let slots = Arc::new(Semaphore::new(cfg.max_connections.max(1)));
    let counter = Arc::new(AtomicU64::new(0));
    loop {
        // Wait for a free slot before accepting: excess connections queue.
        let permit = slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| LlmError::new(ErrorKind::Fatal, "connection limiter closed"))?;
        let (stream, _) = listener
            .accept()
            .await
            .map_err(|e| LlmError::new(ErrorKind::Fatal, format!("accept failed: {e}")))?;
        let backend = backend.clone();
        let counter = counter.clone();
        let timeout = cfg.io_timeout;
        let model = cfg.model.clone();
        tokio::spawn(async move {
            // A broken client connection only affects that client.
            let _ = handle(stream, backend, model, counter, timeout).await;
            drop(permit);
        });
    }
}

/// What a request is answered with.
enum Reply {
    /// A JSON body with its status.
    Json(u16, Value),
    /// Server-sent events (a streamed chat completion).
    Events(String),
}

async fn handle(
    mut stream: TcpStream,
    backend: Arc<dyn Backend>,
    model: Option<String>,
    counter: Arc<AtomicU64>,
    timeout: Duration,
) -> std::io::Result<()> {
    let read = match tokio::time::timeout(timeout, read_request(&mut stream)).await {
        Ok(r) => r?,
        Err(_) => Err((
            408,
            format!(
                "the request was not received within {} s",
                timeout.as_secs_f64()
            ),
        )),
    };
    let reply = match read {
        Ok(req) => route(req, backend, model.as_deref(), counter).await,
        Err((status, msg)) => Reply::Json(status, error_json(msg, "invalid_request_error")),
    };
    let write = async {
        match &reply {
            Reply::Json(status, body) => write_json(&mut stream, *status, body).await,
            Reply::Events(text) => write_events(&mut stream, text).await,
        }
    };
    match tokio::time::timeout(timeout, write).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "client did not take the reply",
        )),
    }
}

/// Answers one parsed request: (status, JSON body).
async fn route(
    req: HttpRequest,
    backend: Arc<dyn Backend>,
    model: Option<&str>,
    counter: Arc<AtomicU64>,
) -> Reply {
    let path = req.path.split('?').next().unwrap_or("");
    match (req.method.as_str(), path) {
        ("POST", "/v1/chat/completions") | ("POST", "/chat/completions") => {}
        ("GET", "/v1/models") | ("GET", "/models") => {
            let id = model.unwrap_or(backend.name());
            let body = json!({"object": "list", "data": [{"id": id, "object": "model", "owned_by": "otb"}]});
            return Reply::Json(200, body);
        }
        _ => {
            let msg = format!("no route for {} {}", req.method, req.path);
            return Reply::Json(404, error_json(msg, "not_found_error"));
        }
    }
    let body = match serde_json::from_slice::<Value>(&req.body) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("body is not JSON: {e}");
            return Reply::Json(400, error_json(msg, "invalid_request_error"));
        }
    };
    let chat = match wire::parse_request_body(&body) {
        Ok(c) => c,
        Err(msg) => return Reply::Json(400, error_json(msg, "invalid_request_error")),
    };
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match backend.chat(&chat).await {
        Ok(resp) => {
            let id = format!("chatcmpl-otb-{}", counter.fetch_add(1, Ordering::Relaxed));
            if stream {
                // The whole reply is computed first, then sent as events.
                Reply::Events(wire::response_events(&resp, &chat.model, &id, usage))
            } else {
                Reply::Json(200, wire::response_body(&resp, &chat.model, &id))
            }
        }
        Err(e) => {
            let (status, body) = wire::error_response(&e);
            Reply::Json(status, body)
        }
    }
}

fn error_json(message: String, ty: &str) -> Value {
    json!({"error": {"message": message, "type": ty, "code": ty}})
}

struct HttpRequest {
    method: String,
    path: String,
    body: Vec<u8>,
}

/// Reads one request; the inner `Err` is a client error to answer.
async fn read_request(
    stream: &mut TcpStream,
) -> std::io::Result<Result<HttpRequest, (u16, String)>> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        if buf.len() > MAX_HEAD {
            return Ok(Err((431, "request head too large".into())));
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Err((
                400,
                "connection closed before the request head ended".into(),
            )));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let method = first.next().unwrap_or("").to_owned();
    let path = first.next().unwrap_or("").to_owned();
    let mut content_length = 0usize;
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                match v.trim().parse() {
                    Ok(n) => content_length = n,
                    Err(_) => return Ok(Err((400, "bad Content-Length".into()))),
                }
            } else if k.trim().eq_ignore_ascii_case("transfer-encoding") {
                return Ok(Err((
                    411,
                    "chunked bodies are not supported; send Content-Length".into(),
                )));
            }
        }
    }
    if content_length > MAX_BODY {
        return Ok(Err((413, format!("body larger than {MAX_BODY} bytes"))));
    }
    let mut body = buf.split_off(head_end + 4);
    while body.len() < content_length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Err((400, "connection closed before the body ended".into())));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(content_length);
    Ok(Ok(HttpRequest { method, path, body }))
}

/// A `200` with a `text/event-stream` body that ends when the connection closes.
async fn write_events(stream: &mut TcpStream, events: &str) -> std::io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(events.as_bytes()).await?;
    stream.shutdown().await
}

async fn write_json(stream: &mut TcpStream, status: u16, body: &Value) -> std::io::Result<()> {
    let body = body.to_string();
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

//! `serve`: exposes any [`Backend`] as a local OpenAI-compatible
//! `POST /v1/chat/completions` endpoint (plus `GET /v1/models`).
//!
//! HTTP/1.1 on hyper's server stack (already in the build through reqwest):
//! keep-alive (several requests per connection), `Content-Length` and chunked
//! request bodies, and a streamed request (`stream: true`) answered with
//! server-sent events. Bind it to 127.0.0.1.
//!
//! Bounds ([`ServeConfig`]): at most `max_connections` connections are
//! served at once; further ones **wait** (one is accepted and waits for a
//! slot, the rest are not accepted yet, so they queue in the kernel's
//! backlog and the client's own timeout applies) rather than being refused
//! with 503, because a model call can take minutes and a refusal would burn
//! the client's retries. While a connection waits, every reply closes its
//! kept-alive connection (`Connection: close`): clients that keep their
//! connections busy, request after request, cannot shut the others out; a
//! client whose connection was closed reconnects behind those waiting. A
//! connection that sends no complete request head within `io_timeout`
//! (a client that connects and says nothing, or one idle between requests)
//! is closed; a request whose body does not arrive within `io_timeout` gets
//! 408; a body over [`MAX_BODY`] gets 413; a reply the client does not take
//! within `io_timeout` ends the connection. The model call itself is not
//! under that timeout. Every refusal is an OpenAI-style error body.
//!
//! With `cache_dir`, answers go through a [`CachedClient`] over a call cache
//! opened with [`CallCache::open_per_write`]: the writer lock is taken for
//! each appended record, never for the server's lifetime, so a run can use
//! the same cache directory while the server is up.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
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
    let state = Arc::new(State {
        backend,
        model: cfg.model.clone(),
        counter: AtomicU64::new(0),
        timeout: cfg.io_timeout,
        waiting: AtomicBool::new(false),
    });
    loop {
        let (stream, _) = listener
            .accept()
            .await
            .map_err(|e| LlmError::new(ErrorKind::Fatal, format!("accept failed: {e}")))?;
        // A slot for it, else it waits (and the connections after it stay in the
        // backlog); meanwhile replies close their connections to make way.
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                state.waiting.store(true, Ordering::Relaxed);
                let permit = slots.clone().acquire_owned().await;
                state.waiting.store(false, Ordering::Relaxed);
                permit.map_err(|_| LlmError::new(ErrorKind::Fatal, "connection limiter closed"))?
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let timeout = state.timeout;
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(answer(req, &state).await) }
            });
            // A broken or slow client connection only affects that client.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(timeout)
                .max_buf_size(MAX_HEAD)
                .serve_connection(TokioIo::new(WriteTimeout::new(stream, timeout)), service)
                .await;
            drop(permit);
        });
    }
}

/// What every connection shares.
struct State {
    backend: Arc<dyn Backend>,
    model: Option<String>,
    counter: AtomicU64,
    timeout: Duration,
    /// An accepted connection waits for a slot: replies close their connections.
    waiting: AtomicBool,
}

/// What a request is answered with.
enum Reply {
    /// A JSON body with its status.
    Json(u16, Value),
    /// Server-sent events (a streamed chat completion).
    Events(String),
}

/// Reads the request's body within the timeout and the size bound, then answers it.
async fn answer(req: Request<Incoming>, state: &State) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let reply = if declared.is_some_and(|n| n > MAX_BODY as u64) {
        too_large()
    } else {
        match tokio::time::timeout(state.timeout, Limited::new(body, MAX_BODY).collect()).await {
            Err(_) => Reply::Json(
                408,
                error_json(
                    format!(
                        "the request body was not received within {} s",
                        state.timeout.as_secs_f64()
                    ),
                    "invalid_request_error",
                ),
            ),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => too_large(),
            Ok(Err(e)) => Reply::Json(
                400,
                error_json(
                    format!("the request body could not be read: {e}"),
                    "invalid_request_error",
                ),
            ),
            Ok(Ok(body)) => {
                route(
                    parts.method.as_str(),
                    parts.uri.path(),
                    &body.to_bytes(),
                    state,
                )
                .await
            }
        }
    };
    let (status, kind, text) = match reply {
        Reply::Json(status, body) => (status, "application/json", body.to_string()),
        Reply::Events(text) => (200, "text/event-stream", text),
    };
    let mut resp = Response::new(Full::new(Bytes::from(text)));
    *resp.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(kind),
    );
    if kind == "text/event-stream" {
        h.insert(
            hyper::header::CACHE_CONTROL,
            hyper::header::HeaderValue::from_static("no-cache"),
        );
    }
    if state.waiting.load(Ordering::Relaxed) {
        // hyper ends the connection after this reply: its slot goes to the waiter.
        h.insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    resp
}

fn too_large() -> Reply {
    Reply::Json(
        413,
        error_json(
            format!("body larger than {MAX_BODY} bytes"),
            "invalid_request_error",
        ),
    )
}

/// Answers one request whose body was read: (status, JSON body) or events.
async fn route(method: &str, path: &str, body: &[u8], state: &State) -> Reply {
    let backend = &state.backend;
    match (method, path) {
        ("POST", "/v1/chat/completions") | ("POST", "/chat/completions") => {}
        ("GET", "/v1/models") | ("GET", "/models") => {
            let id = state.model.as_deref().unwrap_or(backend.name());
            let body = json!({"object": "list", "data": [{"id": id, "object": "model", "owned_by": "otb"}]});
            return Reply::Json(200, body);
        }
        _ => {
            let msg = format!("no route for {method} {path}");
            return Reply::Json(404, error_json(msg, "not_found_error"));
        }
    }
    let body = match serde_json::from_slice::<Value>(body) {
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
            let id = format!(
                "chatcmpl-otb-{}",
                state.counter.fetch_add(1, Ordering::Relaxed)
            );
            if stream {
                // The whole reply is computed first (so a failure still gets its
                // status), then sent as events.
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

/// A stream whose writes fail with `TimedOut` when the peer takes nothing for
/// `timeout` (a client that stops reading its reply frees its slot).
struct WriteTimeout {
    inner: TcpStream,
    timeout: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl WriteTimeout {
    fn new(inner: TcpStream, timeout: Duration) -> WriteTimeout {
        WriteTimeout {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// After an I/O poll of a write: progress disarms the timer; `Pending` arms it
    /// (once) and fails when it has run out.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client did not take the reply",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for WriteTimeout {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteTimeout {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, r)
    }
}

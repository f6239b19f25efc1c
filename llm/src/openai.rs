//! The `openai` backend: any OpenAI-compatible chat-completions server
//! (OpenAI, vLLM, llama.cpp server, Ollama, [`mod@crate::serve`]...).
//!
//! Transport concerns live here and nowhere else: the URL, the API key, the
//! per-request timeout, retries with backoff, and a per-endpoint bound on
//! concurrent requests. None of them is part of a cache key.
//!
//! A fleet: `OTB_LLM_BASE_URL` (or an experiment's `[models] endpoints`, see
//! [`OpenAiConfig::from_env_with`]) may name several servers of one model (commas or
//! spaces between them, e.g. vLLM replicas). Each attempt goes to the server with
//! the fewest requests in flight; a server whose attempt fails for a reason of its
//! own (connection refused or reset, a timeout, a 5xx) is taken out for a backoff
//! period (doubling from [`FLEET_BACKOFF`] while it keeps failing) and the request
//! is sent to another at once. The call cache sits above this backend, so a retried
//! request is cached once, whichever server answered it.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::backend::{Backend, BoxFuture};
use crate::error::{ErrorKind, LlmError};
use crate::retry::{parse_retry_after, RetryPolicy};
use crate::types::{ChatRequest, ChatResponse};
use crate::wire;

/// Largest response body read (bytes). A reply is kept only up to
/// [`crate::types::MAX_REPLY_BYTES`] of text; JSON escaping can make the body
/// several times larger, hence the margin. A larger body is `malformed`.
pub const MAX_RESPONSE_BODY: usize = 16 << 20;

/// Whether `url` can be a server's base URL (`http://` or `https://`).
pub fn is_base_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

/// Default endpoint when `OTB_LLM_BASE_URL` is unset.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// How long a failing server of a fleet is first left out (doubled while it keeps
/// failing, up to 16x).
pub const FLEET_BACKOFF: Duration = Duration::from_secs(10);

/// Transport settings of one endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL up to and including `/v1`; `/chat/completions` is appended. Several
    /// (a fleet), separated by commas or spaces.
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>`; `None` sends no such header
    /// (local servers).
    pub api_key: Option<String>,
    /// Limit for one attempt (connect + response body).
    pub timeout: Duration,
    /// How often and how long to retry retryable failures.
    pub retry: RetryPolicy,
    /// Requests in flight at once against each endpoint.
    pub max_concurrency: usize,
    /// How long a failing server of a fleet is first left out.
    pub backoff: Duration,
}

impl OpenAiConfig {
    /// Settings for `base_url` with defaults: no key, 600 s timeout, default
    /// retries, 8 concurrent requests.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            timeout: Duration::from_secs(600),
            retry: RetryPolicy::default(),
            max_concurrency: 8,
            backoff: FLEET_BACKOFF,
        }
    }

    /// The endpoints `base_url` names (one, or a fleet).
    pub fn endpoints(&self) -> Vec<String> {
        self.base_url
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(|s| s.trim_end_matches('/').to_string())
            .collect()
    }

    /// Reads `OTB_LLM_BASE_URL` (default [`DEFAULT_BASE_URL`]), the key from
    /// `OTB_LLM_API_KEY` or else `OPENAI_API_KEY`, and optionally
    /// `OTB_LLM_MAX_CONCURRENCY` and `OTB_LLM_TIMEOUT_S`.
    pub fn from_env() -> Result<Self, LlmError> {
        Self::from_env_with(&[])
    }

    /// [`OpenAiConfig::from_env`], with `endpoints` (an experiment's `[models]
    /// endpoints`) as the servers when `OTB_LLM_BASE_URL` is unset: the variable,
    /// set for one machine or job, wins over the file.
    pub fn from_env_with(endpoints: &[String]) -> Result<Self, LlmError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let base = var("OTB_LLM_BASE_URL")
            .or_else(|| (!endpoints.is_empty()).then(|| endpoints.join(",")))
            .unwrap_or_else(|| DEFAULT_BASE_URL.into());
        let mut cfg = OpenAiConfig::new(base);
        cfg.api_key = var("OTB_LLM_API_KEY").or_else(|| var("OPENAI_API_KEY"));
        if let Some(v) = var("OTB_LLM_MAX_CONCURRENCY") {
            cfg.max_concurrency = v.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                LlmError::new(
                    ErrorKind::Fatal,
                    format!("OTB_LLM_MAX_CONCURRENCY={v:?} is not a positive integer"),
                )
            })?;
        }
        if let Some(v) = var("OTB_LLM_TIMEOUT_S") {
            let secs: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|s: &f64| *s > 0.0 && s.is_finite())
                .ok_or_else(|| {
                    LlmError::new(
                        ErrorKind::Fatal,
                        format!("OTB_LLM_TIMEOUT_S={v:?} is not a positive number of seconds"),
                    )
                })?;
            cfg.timeout = Duration::from_secs_f64(secs);
        }
        Ok(cfg)
    }
}

/// Client for an OpenAI-compatible endpoint, or a fleet of them. Cheap to share
/// behind an `Arc`; all users of one instance share its concurrency bounds.
pub struct OpenAiBackend {
    http: reqwest::Client,
    cfg: OpenAiConfig,
    endpoints: Vec<Endpoint>,
}

/// One server of the backend, with what the fleet's choice reads.
struct Endpoint {
    /// Its chat-completions URL.
    url: String,
    permits: Semaphore,
    in_flight: AtomicUsize,
    /// Attempts answered (any status) and failed for the server's own reason.
    answered: AtomicU64,
    failed: AtomicU64,
    /// Failures in a row (the backoff doubles with them), and until when it is out.
    streak: AtomicU32,
    out_until: Mutex<Option<Instant>>,
}

impl Endpoint {
    fn is_out(&self, now: Instant) -> bool {
        self.out_until
            .lock()
            .map(|u| u.is_some_and(|t| t > now))
            .unwrap_or(false)
    }
}

/// One failed attempt: the error and the server's `Retry-After`, if any.
struct AttemptError {
    err: LlmError,
    retry_after: Option<Duration>,
    /// The HTTP status, when the server answered.
    status: Option<u16>,
}

impl From<LlmError> for AttemptError {
    fn from(err: LlmError) -> Self {
        AttemptError {
            err,
            retry_after: None,
            status: None,
        }
    }
}

impl OpenAiBackend {
    /// A backend for `cfg`; `fatal` unless the base URL starts with
    /// `http://` or `https://`. Makes no request.
    pub fn new(cfg: OpenAiConfig) -> Result<Self, LlmError> {
        let bases = cfg.endpoints();
        if bases.is_empty() {
            return Err(LlmError::new(
                ErrorKind::Fatal,
                "no LLM base URL given (set OTB_LLM_BASE_URL)",
            ));
        }
        if let Some(bad) = bases.iter().find(|b| !is_base_url(b)) {
            return Err(LlmError::new(
                ErrorKind::Fatal,
                format!(
                    "LLM base URL {bad:?} must start with http:// or https:// (set OTB_LLM_BASE_URL)"
                ),
            ));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(cfg.timeout.min(Duration::from_secs(30)))
            .build()
            .map_err(|e| LlmError::new(ErrorKind::Fatal, format!("building HTTP client: {e}")))?;
        let endpoints = bases
            .iter()
            .map(|b| Endpoint {
                url: format!("{b}/chat/completions"),
                permits: Semaphore::new(cfg.max_concurrency.max(1)),
                in_flight: AtomicUsize::new(0),
                answered: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                streak: AtomicU32::new(0),
                out_until: Mutex::new(None),
            })
            .collect();
        Ok(OpenAiBackend {
            http,
            cfg,
            endpoints,
        })
    }

    /// Reads the configuration from the environment ([`OpenAiConfig::from_env`]).
    pub fn from_env() -> Result<Self, LlmError> {
        Self::new(OpenAiConfig::from_env()?)
    }

    /// Reads the configuration from the environment, with `endpoints` when
    /// `OTB_LLM_BASE_URL` is unset ([`OpenAiConfig::from_env_with`]).
    pub fn from_env_with(endpoints: &[String]) -> Result<Self, LlmError> {
        Self::new(OpenAiConfig::from_env_with(endpoints)?)
    }

    /// The full chat-completions URL (the first server's, for a fleet).
    pub fn url(&self) -> &str {
        &self.endpoints[0].url
    }

    /// The server for the next attempt: of those not taken out, the one with the
    /// fewest requests in flight (the first of equals); when all are out, the one
    /// back soonest.
    fn pick(&self) -> usize {
        let now = Instant::now();
        let up = (0..self.endpoints.len()).filter(|&i| !self.endpoints[i].is_out(now));
        let best = up.min_by_key(|&i| self.endpoints[i].in_flight.load(Ordering::Relaxed));
        best.unwrap_or_else(|| {
            (0..self.endpoints.len())
                .min_by_key(|&i| {
                    self.endpoints[i]
                        .out_until
                        .lock()
                        .ok()
                        .and_then(|u| *u)
                        .unwrap_or(now)
                })
                .unwrap_or(0)
        })
    }

    /// Whether a failure of kind `kind` is the server's own (it is then taken out
    /// of a fleet for a while): it could not be reached, did not answer in time,
    /// or failed inside.
    fn server_fault(kind: ErrorKind, status: Option<u16>) -> bool {
        matches!(kind, ErrorKind::Transient | ErrorKind::Timeout) && status.is_none_or(|s| s >= 500)
    }

    fn mark(&self, i: usize, ok: bool) {
        let e = &self.endpoints[i];
        if ok {
            e.streak.store(0, Ordering::Relaxed);
            if let Ok(mut u) = e.out_until.lock() {
                *u = None;
            }
            return;
        }
        e.failed.fetch_add(1, Ordering::Relaxed);
        if self.endpoints.len() < 2 {
            return;
        }
        let streak = e.streak.fetch_add(1, Ordering::Relaxed).min(4);
        let wait = self.cfg.backoff.saturating_mul(1 << streak);
        if let Ok(mut u) = e.out_until.lock() {
            *u = Some(Instant::now() + wait);
        }
    }

    async fn attempt(
        &self,
        i: usize,
        body: &serde_json::Value,
    ) -> Result<ChatResponse, AttemptError> {
        let ep = &self.endpoints[i];
        let _permit = ep
            .permits
            .acquire()
            .await
            .map_err(|_| LlmError::new(ErrorKind::Fatal, "concurrency limiter closed"))?;
        ep.in_flight.fetch_add(1, Ordering::Relaxed);
        let r = self.attempt_at(&ep.url, body).await;
        ep.in_flight.fetch_sub(1, Ordering::Relaxed);
        r
    }

    async fn attempt_at(
        &self,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<ChatResponse, AttemptError> {
        let start = Instant::now();
        let mut rb = self.http.post(url).timeout(self.cfg.timeout).json(body);
        if let Some(key) = &self.cfg.api_key {
            rb = rb.bearer_auth(key);
        }
        let resp = rb.send().await.map_err(|e| transport_error(&e, url))?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let mut resp = resp;
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| transport_error(&e, url))? {
            if bytes.len() + chunk.len() > MAX_RESPONSE_BODY {
                return Err(LlmError::new(
                    ErrorKind::Malformed,
                    format!(
                        "response from {url} is larger than {MAX_RESPONSE_BODY} bytes; not read further"
                    ),
                )
                .into());
            }
            bytes.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&bytes);
        if !(200..300).contains(&status) {
            let kind = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("error").cloned())
                .map(|e| wire::classify_error_object(&e, Some(status)))
                .unwrap_or_else(|| ErrorKind::from_status(status));
            let err = LlmError::new(
                kind,
                format!("HTTP {status} from {url}: {}", wire::truncate(&text, 500)),
            );
            return Err(AttemptError {
                err,
                retry_after,
                status: Some(status),
            });
        }
        let mut out = wire::parse_response_body(&text)?;
        out.latency_ms = start.elapsed().as_millis() as u64;
        Ok(out)
    }
}

/// Classifies a reqwest error by its type.
fn transport_error(e: &reqwest::Error, url: &str) -> AttemptError {
    let kind = if e.is_timeout() {
        ErrorKind::Timeout
    } else if e.is_builder() {
        ErrorKind::Fatal
    } else if e.is_decode() {
        ErrorKind::Malformed
    } else {
        // connect refused/reset, body cut off, protocol errors.
        ErrorKind::Transient
    };
    LlmError::new(kind, format!("request to {url} failed: {e}")).into()
}

impl Backend for OpenAiBackend {
    fn chat<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let body = wire::request_body(req);
            let mut attempt = 0;
            // A fleet: a server's own failure moves the request to another at once,
            // and such moves (one per other server) do not use up the retries.
            let mut moves = self.endpoints.len() - 1;
            loop {
                attempt += 1;
                let i = self.pick();
                match self.attempt(i, &body).await {
                    Ok(resp) => {
                        self.endpoints[i].answered.fetch_add(1, Ordering::Relaxed);
                        self.mark(i, true);
                        return Ok(resp);
                    }
                    Err(AttemptError {
                        err,
                        retry_after,
                        status,
                    }) => {
                        let own = Self::server_fault(err.kind, status);
                        if status.is_some() {
                            self.endpoints[i].answered.fetch_add(1, Ordering::Relaxed);
                        }
                        self.mark(i, !own);
                        if own && moves > 0 {
                            moves -= 1;
                            attempt -= 1;
                            continue;
                        }
                        if !self.cfg.retry.should_retry(err.kind, attempt) {
                            return Err(err.with_attempts(attempt));
                        }
                        let ra = if err.kind == ErrorKind::RateLimit {
                            retry_after
                        } else {
                            None
                        };
                        tokio::time::sleep(self.cfg.retry.delay(attempt, ra)).await;
                    }
                }
            }
        })
    }

    fn name(&self) -> &str {
        "openai"
    }

    /// For a fleet: the requests each server answered and the failures that took
    /// it out.
    fn metrics_summary(&self) -> Option<String> {
        if self.endpoints.len() < 2 {
            return None;
        }
        let parts: Vec<String> = self
            .endpoints
            .iter()
            .map(|e| {
                let base = e.url.trim_end_matches("/chat/completions");
                format!(
                    "{base} {} answered, {} failed",
                    e.answered.load(Ordering::Relaxed),
                    e.failed.load(Ordering::Relaxed)
                )
            })
            .collect();
        Some(format!(
            "fleet of {}: {}",
            self.endpoints.len(),
            parts.join("; ")
        ))
    }
}

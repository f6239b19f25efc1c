//! The `openai` backend: any OpenAI-compatible chat-completions server
//! (OpenAI, vLLM, llama.cpp server, Ollama, [`mod@crate::serve`]...).
//!
//! Transport concerns live here and nowhere else: the URL, the API key, the
//! per-request timeout, retries with backoff, and a per-endpoint bound on
//! concurrent requests. None of them is part of a cache key.

use std::sync::Arc;
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

/// Default endpoint when `OTB_LLM_BASE_URL` is unset.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Transport settings of one endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL up to and including `/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>`; `None` sends no such header
    /// (local servers).
    pub api_key: Option<String>,
    /// Limit for one attempt (connect + response body).
    pub timeout: Duration,
    /// How often and how long to retry retryable failures.
    pub retry: RetryPolicy,
    /// Requests in flight at once against this endpoint.
    pub max_concurrency: usize,
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
        }
    }

    /// Reads `OTB_LLM_BASE_URL` (default [`DEFAULT_BASE_URL`]), the key from
    /// `OTB_LLM_API_KEY` or else `OPENAI_API_KEY`, and optionally
    /// `OTB_LLM_MAX_CONCURRENCY` and `OTB_LLM_TIMEOUT_S`.
    pub fn from_env() -> Result<Self, LlmError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let mut cfg =
            OpenAiConfig::new(var("OTB_LLM_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.into()));
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

/// Client for one OpenAI-compatible endpoint. Cheap to share behind an `Arc`;
/// all users of one instance share its concurrency bound.
pub struct OpenAiBackend {
    http: reqwest::Client,
    url: String,
    cfg: OpenAiConfig,
    permits: Arc<Semaphore>,
}

/// One failed attempt: the error and the server's `Retry-After`, if any.
struct AttemptError {
    err: LlmError,
    retry_after: Option<Duration>,
}

impl From<LlmError> for AttemptError {
    fn from(err: LlmError) -> Self {
        AttemptError {
            err,
            retry_after: None,
        }
    }
}

impl OpenAiBackend {
    /// A backend for `cfg`; `fatal` unless the base URL starts with
    /// `http://` or `https://`. Makes no request.
    pub fn new(cfg: OpenAiConfig) -> Result<Self, LlmError> {
        let base = cfg.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(LlmError::new(
                ErrorKind::Fatal,
                format!(
                    "LLM base URL {:?} must start with http:// or https:// (set OTB_LLM_BASE_URL)",
                    cfg.base_url
                ),
            ));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(cfg.timeout.min(Duration::from_secs(30)))
            .build()
            .map_err(|e| LlmError::new(ErrorKind::Fatal, format!("building HTTP client: {e}")))?;
        Ok(OpenAiBackend {
            http,
            url: format!("{base}/chat/completions"),
            permits: Arc::new(Semaphore::new(cfg.max_concurrency.max(1))),
            cfg,
        })
    }

    /// Reads the configuration from the environment ([`OpenAiConfig::from_env`]).
    pub fn from_env() -> Result<Self, LlmError> {
        Self::new(OpenAiConfig::from_env()?)
    }

    /// The full chat-completions URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    async fn attempt(&self, body: &serde_json::Value) -> Result<ChatResponse, AttemptError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| LlmError::new(ErrorKind::Fatal, "concurrency limiter closed"))?;
        let start = Instant::now();
        let mut rb = self
            .http
            .post(&self.url)
            .timeout(self.cfg.timeout)
            .json(body);
        if let Some(key) = &self.cfg.api_key {
            rb = rb.bearer_auth(key);
        }
        let resp = rb
            .send()
            .await
            .map_err(|e| transport_error(&e, &self.url))?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let mut resp = resp;
        let mut bytes = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| transport_error(&e, &self.url))?
        {
            if bytes.len() + chunk.len() > MAX_RESPONSE_BODY {
                return Err(LlmError::new(
                    ErrorKind::Malformed,
                    format!(
                        "response from {} is larger than {MAX_RESPONSE_BODY} bytes; not read further",
                        self.url
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
                format!(
                    "HTTP {status} from {}: {}",
                    self.url,
                    wire::truncate(&text, 500)
                ),
            );
            return Err(AttemptError { err, retry_after });
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
            loop {
                attempt += 1;
                match self.attempt(&body).await {
                    Ok(resp) => return Ok(resp),
                    Err(AttemptError { err, retry_after }) => {
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
}

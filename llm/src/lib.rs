//! Every model call of opaquetools goes through this crate.
//!
//! One interface, [`Backend`], with these implementations:
//!
//! - [`OpenAiBackend`]: any OpenAI-compatible chat-completions server
//!   (configured by `OTB_LLM_BASE_URL`, `OTB_LLM_API_KEY` / `OPENAI_API_KEY`),
//!   with failure classification, retries and bounded concurrency;
//! - `EmbeddedBackend` (feature `embedded`): a small GGUF model run
//!   in-process with llama.cpp, tool calls constrained by a grammar;
//! - [`Replay`]: answers only from the call cache;
//! - [`Scripted`]: a function from request to response, for tests.
//!
//! [`CachedClient`] puts the crash-safe [`CallCache`] in front of any backend,
//! and [`serve()`] exposes a backend as a local OpenAI-compatible endpoint.
//! [`ModelSpec`] is the one grammar models are named by (`kind:name`), and
//! [`open_backend`] opens the backend a spec names.
//!
//! Architecture invariant: only this crate knows the OpenAI wire format
//! ([`wire`]) and talks to a model.

pub mod backend;
pub mod cache;
#[cfg(feature = "embedded")]
pub mod embedded;
pub mod error;
pub mod grammar;
pub mod group;
pub mod models;
pub mod openai;
pub mod prompt;
pub mod retry;
pub mod serve;
pub mod spec;
pub mod types;
pub mod wire;

pub use backend::{chat_all, Backend, BoxFuture, Scripted, EMBEDDED_REVISION};
pub use cache::{
    read_entries, request_key, CacheError, CacheRow, CachedClient, CallCache, DroppedLine,
    LockMode, MergeReport, OpenReport, Replay, StatsSnapshot,
};
#[cfg(feature = "embedded")]
pub use embedded::{EmbeddedBackend, EmbeddedConfig, EmbeddedMetrics};
pub use error::{ErrorKind, LlmError};
pub use models::{fetch_model, ModelError};
pub use openai::{OpenAiBackend, OpenAiConfig};
pub use retry::RetryPolicy;
pub use serve::{serve, serve_with, ServeConfig};
pub use spec::{
    check_embedded_env, open_backend, open_backend_with, Fault, ModelKind, ModelSpec, OpenError,
    SpecError,
};
pub use types::{
    ChatRequest, ChatResponse, Message, Role, Sampling, ToolCall, ToolChoice, ToolDef, Usage,
    MAX_JSON_DEPTH, MAX_REPLY_BYTES,
};

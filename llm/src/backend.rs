//! The backend interface and the deterministic `Scripted` backend.
//!
//! A backend turns a [`ChatRequest`] into a [`ChatResponse`]. Backends are
//! used behind `Arc<dyn Backend>`, so the trait returns a boxed future
//! instead of using `async fn` (which is not dyn-compatible).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::LlmError;
use crate::types::{ChatRequest, ChatResponse};

/// A boxed, sendable future, as returned by [`Backend::chat`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the embedded backend does with a request beyond the model file: how it
/// renders the conversation and the tools into the prompt ([`crate::prompt`]), the
/// grammar that constrains a tool call ([`crate::grammar`]), how it decodes and
/// parses the output. An embedded model's answers depend on all of it, so the
/// revision is part of every key that such an answer feeds: the call cache's
/// request keys (the embedded backend reports it, [`Backend::revision`]) and the
/// stage keys (an `embedded:` spec serialises with it, [`crate::ModelSpec`]). Bump
/// it by hand when a change to those parts can change what a request answers;
/// embedded stages and calls are then computed again instead of being served from
/// before the change.
///
/// Revision 2: tool calls render back into the prompt in the grammar's layout
/// (changed on 2026-11-26 without a key change; revision 1 is every key before).
pub const EMBEDDED_REVISION: u32 = 2;

/// Something that answers chat requests.
pub trait Backend: Send + Sync {
    /// Answers one request. Implementations classify failures into
    /// [`crate::ErrorKind`]s and do their own retries.
    fn chat<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse, LlmError>>;

    /// A short label for logs and errors (`"openai"`, `"embedded"`...).
    fn name(&self) -> &str;

    /// Where this backend's time went so far, in one line (the embedded model:
    /// tokens, throughput, batch occupancy); `None` when it keeps no counters.
    fn metrics_summary(&self) -> Option<String> {
        None
    }

    /// The revision of what this backend does to a request besides asking its
    /// model (the embedded backend: [`crate::EMBEDDED_REVISION`]); the call cache
    /// keys a request with it, so answers from another revision are not reused.
    /// `None` (an endpoint, a script): the request alone is the key.
    fn revision(&self) -> Option<u32> {
        None
    }
}

impl<B: Backend + ?Sized> Backend for Arc<B> {
    fn chat<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        (**self).chat(req)
    }
    fn name(&self) -> &str {
        (**self).name()
    }
    fn metrics_summary(&self) -> Option<String> {
        (**self).metrics_summary()
    }
    fn revision(&self) -> Option<u32> {
        (**self).revision()
    }
}

/// Sends every request to `backend` at once (each on its own tokio task, so
/// the backend's own limit decides how many run together) and returns the
/// results in request order, all of them in one [request group](crate::group)
/// (the caller's, or a new one). A task that panicked becomes a `Fatal` error.
pub async fn chat_all<B: Backend + ?Sized + 'static>(
    backend: &Arc<B>,
    reqs: &[ChatRequest],
) -> Vec<Result<ChatResponse, LlmError>> {
    let group = crate::group::current_or_new();
    let handles: Vec<_> = reqs
        .iter()
        .map(|r| {
            let (b, r) = (backend.clone(), r.clone());
            tokio::spawn(crate::group::in_group(
                group,
                async move { b.chat(&r).await },
            ))
        })
        .collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.unwrap_or_else(|e| {
            Err(LlmError::new(
                crate::ErrorKind::Fatal,
                format!("model call task failed: {e}"),
            ))
        }));
    }
    out
}

type ScriptFn = dyn Fn(&ChatRequest) -> Result<ChatResponse, LlmError> + Send + Sync;

/// A backend whose answers are a pure function of the request, for tests of
/// other crates (no network, no model).
pub struct Scripted {
    f: Box<ScriptFn>,
}

impl Scripted {
    /// Wraps `f`; it is called once per request that reaches the backend.
    pub fn new(
        f: impl Fn(&ChatRequest) -> Result<ChatResponse, LlmError> + Send + Sync + 'static,
    ) -> Self {
        Scripted { f: Box::new(f) }
    }
}

impl Scripted {
    /// What `otb serve --model scripted:echo` serves: a reply that is a pure
    /// function of the request, with no model, so a server's machinery (HTTP,
    /// streaming, connection bounds) can be measured and tested alone. It answers
    /// `echo: ` and the first [`ECHO_CHARS`] characters of the last user message's
    /// text (finish reason `stop`), and counts tokens as whitespace-separated
    /// words: the prompt's over every message's text, the completion's over the
    /// reply.
    pub fn echo() -> Self {
        Scripted::new(|req| {
            let words = |t: &str| t.split_whitespace().count() as u64;
            let last = req
                .messages
                .iter()
                .rev()
                .find(|m| m.role == crate::types::Role::User)
                .and_then(|m| m.content.as_deref())
                .unwrap_or("");
            let text: String = format!(
                "echo: {}",
                last.chars().take(ECHO_CHARS).collect::<String>()
            );
            let mut resp = ChatResponse::text(text);
            resp.usage.prompt = req
                .messages
                .iter()
                .filter_map(|m| m.content.as_deref())
                .map(words)
                .fold(0, u64::saturating_add);
            resp.usage.completion = resp.content.as_deref().map_or(0, words);
            Ok(resp)
        })
    }
}

/// How many characters of the last user message [`Scripted::echo`] repeats.
pub const ECHO_CHARS: usize = 200;

impl Backend for Scripted {
    fn chat<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        let out = (self.f)(req);
        Box::pin(async move { out })
    }
    fn name(&self) -> &str {
        "scripted"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Message;

    #[tokio::test]
    async fn scripted_echoes() {
        let b: Arc<dyn Backend> = Arc::new(Scripted::new(|r| {
            Ok(ChatResponse::text(format!("{} messages", r.messages.len())))
        }));
        let req = ChatRequest::new("m", vec![Message::user("hi")]);
        let resp = b.chat(&req).await.unwrap();
        assert_eq!(resp.content.as_deref(), Some("1 messages"));
    }

    #[tokio::test]
    async fn echo_repeats_the_last_user_message_bounded_and_counts_words() {
        let b = Scripted::echo();
        let req = ChatRequest::new(
            "m",
            vec![
                Message::system("be brief"),
                Message::user("first question"),
                Message::user("what is two plus two"),
            ],
        );
        let resp = b.chat(&req).await.unwrap();
        assert_eq!(resp.content.as_deref(), Some("echo: what is two plus two"));
        assert_eq!(resp.finish_reason.as_deref(), Some("stop"));
        assert_eq!((resp.usage.prompt, resp.usage.completion), (9, 6));
        // The same request, the same reply; a huge message is cut.
        assert_eq!(b.chat(&req).await.unwrap().content, resp.content);
        let huge = ChatRequest::new("m", vec![Message::user("é".repeat(1 << 20))]);
        let text = b.chat(&huge).await.unwrap().content.unwrap();
        assert_eq!(text.chars().count(), "echo: ".len() + ECHO_CHARS);
    }

    #[tokio::test]
    async fn chat_all_answers_in_request_order() {
        let b = Arc::new(Scripted::new(|r| {
            let n = r.messages.len();
            if n == 3 {
                return Err(LlmError::new(crate::ErrorKind::Refusal, "no"));
            }
            Ok(ChatResponse::text(format!("{n}")))
        }));
        let reqs: Vec<ChatRequest> = (1..=4)
            .map(|n| ChatRequest::new("m", vec![Message::user("hi"); n]))
            .collect();
        let out = chat_all(&b, &reqs).await;
        let got: Vec<String> = out
            .iter()
            .map(|r| match r {
                Ok(resp) => resp.content.clone().unwrap_or_default(),
                Err(e) => format!("{:?}", e.kind),
            })
            .collect();
        assert_eq!(got, ["1", "2", "Refusal", "4"]);
    }
}

//! Plain request/response types shared by every backend.
//!
//! These are the crate's domain types. The OpenAI wire format lives in
//! [`crate::wire`]; the canonical encoding used for cache keys lives in
//! [`crate::cache`]. Field order here does not matter for keys (keys are
//! computed over key-sorted JSON).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ErrorKind, LlmError};

/// Deepest nesting of arrays and objects accepted in a tool call's
/// arguments. A reply with deeper arguments fails as `malformed` (the
/// answer's class). The call cache stores a reply's arguments four levels
/// below the top of its record and reads records up to
/// [`MAX_RECORD_DEPTH`], so everything within this limit round-trips.
pub const MAX_JSON_DEPTH: usize = 64;

/// Deepest nesting serde_json reads (its recursion limit of 128 rejects a
/// 128th level); the call cache refuses to write a record deeper than this,
/// so that it can read back everything it wrote.
pub const MAX_RECORD_DEPTH: usize = 127;

/// Largest reply kept, in bytes of text (content plus every tool call's
/// name and argument text). A larger reply fails as `malformed`; it is
/// rejected, not truncated, so a kept answer is always what the model said.
pub const MAX_REPLY_BYTES: usize = 1 << 20;

/// Most tokens one reply may report in any usage count (prompt, completion,
/// reasoning): 2^32, hundreds of times any model's context. An endpoint that reports
/// more (near 2^64, say) sent malformed usage: the reply fails as `malformed`
/// (a classified row, counted with the model's failures) instead of its count
/// wrapping negative in the stores' signed token columns.
pub const MAX_USAGE_TOKENS: u64 = 1 << 32;

/// Nesting depth of JSON text: the most arrays and objects open at once,
/// not counting brackets inside strings. A scalar is 0, `[]` is 1. Works on
/// any bytes (text that is not JSON, or too deep for serde, included), so a
/// limit can be checked before parsing.
pub fn json_depth(text: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The user's (here: the harness's) turn.
    User,
    /// The model's turn: text and/or tool calls.
    Assistant,
    /// The result of one tool call, sent back to the model.
    Tool,
}

impl Role {
    /// The wire name (`"system"`, `"user"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One chat message. Assistant messages may carry tool calls; tool messages
/// carry the id of the call they answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text; `None` for an assistant turn that only made tool calls
    /// (sent as JSON `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The calls an assistant turn made (empty for every other role).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// On a tool message: the [`ToolCall::id`] it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Optional participant name, sent as the wire's `name` field when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    fn text(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }
    /// A system message with text `content`.
    pub fn system(content: impl Into<String>) -> Self {
        Self::text(Role::System, content)
    }
    /// A user message with text `content`.
    pub fn user(content: impl Into<String>) -> Self {
        Self::text(Role::User, content)
    }
    /// An assistant message with text `content` and no tool calls.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::text(Role::Assistant, content)
    }
    /// An assistant turn that made tool calls (content may be absent).
    pub fn assistant_tool_calls(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message {
            role: Role::Assistant,
            content,
            tool_calls,
            tool_call_id: None,
            name: None,
        }
    }
    /// The result of tool call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            role: Role::Tool,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
            name: None,
        }
    }
}

/// A tool offered to the model. `parameters` is a JSON-schema object; `None`
/// means "no parameter information" (the opaque settings without a schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The name the model calls it by.
    pub name: String,
    /// The tool's documentation as the model sees it; `None` sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON schema of the arguments; `None` sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides whether to call a tool (the default).
    #[default]
    Auto,
    /// The model must call at least one tool.
    Required,
    /// The model must not call a tool.
    None,
    /// Force a call of this tool.
    Named(String),
}

/// Sampling parameters. Reasoning models reject temperature/top_p and take
/// `reasoning_effort` + `max_completion_tokens` instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Sampling {
    /// Classic sampling parameters; `None` leaves each to the provider.
    Standard {
        /// Sampling temperature; the embedded backend samples greedily at
        /// `<= 0` or `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        temperature: Option<f64>,
        /// Nucleus sampling mass, in (0, 1].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        top_p: Option<f64>,
        /// Most output tokens per reply.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_tokens: Option<u32>,
    },
    /// Parameters of a reasoning model; `None` leaves each to the provider.
    Reasoning {
        /// e.g. `"low"`, `"medium"`, `"high"` (kept as text: providers add values).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_effort: Option<String>,
        /// Most output tokens per reply, reasoning tokens included.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_completion_tokens: Option<u32>,
    },
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling::Standard {
            temperature: None,
            top_p: None,
            max_tokens: None,
        }
    }
}

impl Sampling {
    /// Temperature, where this kind of sampling has one.
    pub fn temperature(&self) -> Option<f64> {
        match self {
            Sampling::Standard { temperature, .. } => *temperature,
            Sampling::Reasoning { .. } => None,
        }
    }
    /// The output token limit, whichever field carries it.
    pub fn max_output_tokens(&self) -> Option<u32> {
        match self {
            Sampling::Standard { max_tokens, .. } => *max_tokens,
            Sampling::Reasoning {
                max_completion_tokens,
                ..
            } => *max_completion_tokens,
        }
    }
}

/// Everything that determines a model call. All of it goes into the cache
/// key; transport settings (URL, key, timeout, retries) live in the backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The model's name as the backend knows it.
    pub model: String,
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// Tools offered; empty offers none (and sends no `tool_choice`).
    #[serde(default)]
    pub tools: Vec<ToolDef>,
    /// Whether and which tool must be called (sent only with tools).
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// Temperature, token limit and the like.
    #[serde(default)]
    pub sampling: Sampling,
    /// Sampling seed for providers that honour one; `None` sends none.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Distinguishes repeated samples of the same request (0, 1, 2...).
    #[serde(default)]
    pub sample_index: u32,
    /// `Some(false)`: ask the endpoint for at most one tool call per reply (OpenAI's
    /// `parallel_tool_calls`). `None` sends nothing and is left out of the cache key,
    /// so requests that do not set it keep their keys. The embedded backend ignores it
    /// (its callers execute only the first call when they want one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// A repetition penalty (1.0 = none; above 1 discourages repeating tokens already
    /// generated), for a standard model. The embedded backend applies it (llama.cpp's
    /// repeat penalty over the last 64 tokens); an endpoint receives it as the extra
    /// body field `repetition_penalty` that vLLM-style servers accept (OpenAI's own
    /// API does not: leave it `None` there). Never sent with reasoning sampling.
    /// `None` sends nothing and is left out of the cache key, so requests that do not
    /// set it keep their keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition_penalty: Option<f64>,
    /// The revision of the backend that answers it, when that backend has one
    /// ([`crate::Backend::revision`]: the embedded model). Set by the call cache, not
    /// by callers, so it keys the request; `None` is left out of the key, so an
    /// endpoint's requests keep their keys. Never sent to an endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_revision: Option<u32>,
}

impl ChatRequest {
    /// A request with default sampling, no tools and sample index 0.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        ChatRequest {
            model: model.into(),
            messages,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            sampling: Sampling::default(),
            seed: None,
            sample_index: 0,
            parallel_tool_calls: None,
            repetition_penalty: None,
            backend_revision: None,
        }
    }
}

/// A tool call made by the model. `arguments` is `None` when
/// `arguments_raw` is not valid JSON: the response is kept and the call is
/// flagged, so a stage can score it as a malformed call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, echoed by the tool message that answers it.
    pub id: String,
    /// The called tool's name, as the model wrote it.
    pub name: String,
    /// The arguments exactly as the model wrote them (meant to be JSON).
    pub arguments_raw: String,
    /// `arguments_raw` parsed (empty text is `{}`); `None` when it is not
    /// JSON.
    #[serde(default)]
    pub arguments: Option<Value>,
}

impl ToolCall {
    /// Builds a call, parsing `arguments_raw` (empty text counts as `{}`).
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments_raw: impl Into<String>,
    ) -> Self {
        let arguments_raw = arguments_raw.into();
        let arguments = parse_arguments(&arguments_raw);
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments_raw,
            arguments,
        }
    }
    /// True when the arguments did not parse as JSON.
    pub fn arguments_malformed(&self) -> bool {
        self.arguments.is_none()
    }
}

/// Parses tool-call argument text; `None` when it is not JSON.
pub fn parse_arguments(raw: &str) -> Option<Value> {
    if raw.trim().is_empty() {
        return Some(Value::Object(Default::default()));
    }
    serde_json::from_str(raw).ok()
}

/// Token usage of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input (prompt) tokens.
    pub prompt: u64,
    /// Output tokens.
    pub completion: u64,
    /// Reasoning tokens (a part of `completion` for providers that report it).
    pub reasoning: u64,
}

/// Sums saturate at `u64::MAX` (a provider's absurd count cannot wrap a
/// stage's total or panic a debug build).
impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.prompt = self.prompt.saturating_add(o.prompt);
        self.completion = self.completion.saturating_add(o.completion);
        self.reasoning = self.reasoning.saturating_add(o.reasoning);
    }
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The reply's text; `None` when the model only made tool calls.
    pub content: Option<String>,
    /// The tool calls the model made, in its order.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Tokens the call used (zeros when the backend reports none).
    #[serde(default)]
    pub usage: Usage,
    /// Wall time of the call that produced this response (not of a cache hit).
    #[serde(default)]
    pub latency_ms: u64,
    /// Why generation stopped, as the backend reports it (`"stop"`,
    /// `"length"`, `"tool_calls"`, ...).
    #[serde(default)]
    pub finish_reason: Option<String>,
}

impl ChatResponse {
    /// The reply if it meets the limits on what is kept, else a `malformed`
    /// error saying which: tool-call arguments nested deeper than
    /// [`MAX_JSON_DEPTH`], more than [`MAX_REPLY_BYTES`] of text, or a usage
    /// count above [`MAX_USAGE_TOKENS`]. Every backend's reply passes through
    /// this before it is returned or cached.
    pub fn checked(self) -> Result<ChatResponse, LlmError> {
        let u = &self.usage;
        if let Some((what, n)) = [
            ("prompt", u.prompt),
            ("completion", u.completion),
            ("reasoning", u.reasoning),
        ]
        .into_iter()
        .find(|(_, n)| *n > MAX_USAGE_TOKENS)
        {
            return Err(LlmError::new(
                ErrorKind::Malformed,
                format!("malformed usage: the reply reports {n} {what} tokens, more than the limit of {MAX_USAGE_TOKENS}"),
            ));
        }
        let mut size = self.content.as_ref().map_or(0, String::len);
        for (i, c) in self.tool_calls.iter().enumerate() {
            size = size
                .saturating_add(c.name.len())
                .saturating_add(c.arguments_raw.len());
            let depth = json_depth(c.arguments_raw.as_bytes());
            if depth > MAX_JSON_DEPTH {
                return Err(LlmError::new(
                    ErrorKind::Malformed,
                    format!(
                        "tool call {i} ({}): arguments nest {depth} levels deep, more than the limit of {MAX_JSON_DEPTH}",
                        c.name
                    ),
                ));
            }
        }
        if size > MAX_REPLY_BYTES {
            return Err(LlmError::new(
                ErrorKind::Malformed,
                format!("reply of {size} bytes of text is larger than the limit of {MAX_REPLY_BYTES} bytes"),
            ));
        }
        Ok(self)
    }

    /// A plain text answer (finish reason `stop`).
    pub fn text(content: impl Into<String>) -> Self {
        ChatResponse {
            content: Some(content.into()),
            tool_calls: Vec::new(),
            usage: Usage::default(),
            latency_ms: 0,
            finish_reason: Some("stop".into()),
        }
    }
    /// An answer made of tool calls (finish reason `tool_calls`).
    pub fn calls(tool_calls: Vec<ToolCall>) -> Self {
        ChatResponse {
            content: None,
            tool_calls,
            usage: Usage::default(),
            latency_ms: 0,
            finish_reason: Some("tool_calls".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_arguments_are_flagged_not_rejected() {
        let ok = ToolCall::new("c1", "f", r#"{"a": 1}"#);
        assert_eq!(ok.arguments, Some(serde_json::json!({"a": 1})));
        let bad = ToolCall::new("c2", "f", r#"{"a": 1"#);
        assert!(bad.arguments_malformed());
        assert_eq!(
            ToolCall::new("c3", "f", "").arguments,
            Some(serde_json::json!({}))
        );
    }

    /// An endpoint's absurd usage (near 2^64) is a malformed reply, not a count that
    /// wraps negative in a signed token column.
    #[test]
    fn absurd_usage_is_a_malformed_reply() {
        let mut r = ChatResponse::text("ok");
        r.usage.completion = u64::MAX - 3;
        let e = r.checked().expect_err("absurd usage accepted");
        assert_eq!(e.kind, ErrorKind::Malformed);
        assert!(e.message.contains("malformed usage"), "{}", e.message);
        let mut r = ChatResponse::text("ok");
        r.usage.prompt = MAX_USAGE_TOKENS;
        assert!(r.checked().is_ok());
    }

    #[test]
    fn usage_sums_saturate() {
        let mut u = Usage {
            prompt: u64::MAX - 1,
            completion: 5,
            reasoning: u64::MAX,
        };
        u += Usage {
            prompt: 10,
            completion: 7,
            reasoning: 1,
        };
        assert_eq!(
            (u.prompt, u.completion, u.reasoning),
            (u64::MAX, 12, u64::MAX)
        );
    }

    fn nested(depth: usize) -> String {
        "[".repeat(depth) + &"]".repeat(depth)
    }

    #[test]
    fn json_depth_counts_containers_outside_strings() {
        assert_eq!(json_depth(b"1"), 0);
        assert_eq!(json_depth(b"[]"), 1);
        assert_eq!(json_depth(br#"{"a":[1,{"b":2}],"c":[]}"#), 3);
        // Brackets in strings, escaped quotes included, do not count.
        assert_eq!(json_depth(br#"{"a":"[[[\"{{"}"#), 1);
        assert_eq!(json_depth(br#"["\\",[]]"#), 2);
        // Text serde refuses is still measured.
        assert_eq!(json_depth(nested(500).as_bytes()), 500);
        assert_eq!(json_depth(b"{{{ not json"), 3);
    }

    #[test]
    fn replies_over_the_limits_are_malformed() {
        let ok = |d: usize| ChatResponse::calls(vec![ToolCall::new("c", "f", nested(d))]).checked();
        assert!(ok(MAX_JSON_DEPTH).is_ok());
        let e = ok(MAX_JSON_DEPTH + 1).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Malformed);
        assert!(e.message.contains("65 levels deep"), "{e}");
        assert!(ChatResponse::text("x".repeat(MAX_REPLY_BYTES))
            .checked()
            .is_ok());
        let e = ChatResponse::text("x".repeat(MAX_REPLY_BYTES + 1))
            .checked()
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Malformed);
        assert!(e.message.contains("1048577 bytes"), "{e}");
    }
}

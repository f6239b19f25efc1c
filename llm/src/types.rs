//! Plain request/response types shared by every backend.
//!
//! These are the crate's domain types. The OpenAI wire format lives in
//! [`crate::wire`]; the canonical encoding used for cache keys lives in
//! [`crate::cache`]. Field order here does not matter for keys (keys are
//! computed over key-sorted JSON).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
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
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
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
    pub fn system(content: impl Into<String>) -> Self {
        Self::text(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::text(Role::User, content)
    }
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
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    #[default]
    Auto,
    Required,
    None,
    /// Force a call of this tool.
    Named(String),
}

/// Sampling parameters. Reasoning models reject temperature/top_p and take
/// `reasoning_effort` + `max_completion_tokens` instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Sampling {
    Standard {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        temperature: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        top_p: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_tokens: Option<u32>,
    },
    Reasoning {
        /// e.g. `"low"`, `"medium"`, `"high"` (kept as text: providers add values).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_effort: Option<String>,
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
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub tools: Vec<ToolDef>,
    #[serde(default)]
    pub tool_choice: ToolChoice,
    #[serde(default)]
    pub sampling: Sampling,
    #[serde(default)]
    pub seed: Option<u64>,
    /// Distinguishes repeated samples of the same request (0, 1, 2...).
    #[serde(default)]
    pub sample_index: u32,
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
        }
    }
}

/// A tool call made by the model. `arguments` is `None` when
/// `arguments_raw` is not valid JSON: the response is kept and the call is
/// flagged, so a stage can score it as a malformed call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments_raw: String,
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
    pub prompt: u64,
    pub completion: u64,
    /// Reasoning tokens (a part of `completion` for providers that report it).
    pub reasoning: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.prompt += o.prompt;
        self.completion += o.completion;
        self.reasoning += o.reasoning;
    }
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub usage: Usage,
    /// Wall time of the call that produced this response (not of a cache hit).
    #[serde(default)]
    pub latency_ms: u64,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

impl ChatResponse {
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
}

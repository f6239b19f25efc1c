//! The OpenAI chat-completions wire format, in both directions.
//!
//! Only this module knows the JSON field names of the OpenAI API. The client
//! ([`crate::openai`]) renders requests and parses responses; the server
//! ([`mod@crate::serve`]) parses requests and renders responses.

use serde_json::{json, Map, Value};

use crate::error::{ErrorKind, LlmError};
use crate::types::{
    ChatRequest, ChatResponse, Message, Role, Sampling, ToolCall, ToolChoice, ToolDef, Usage,
};

/// Renders a request as a chat-completions JSON body.
pub fn request_body(req: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(req.model.clone()));
    body.insert(
        "messages".into(),
        Value::Array(req.messages.iter().map(message_json).collect()),
    );
    if !req.tools.is_empty() {
        let tools = req.tools.iter().map(tool_json).collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &req.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Named(n) => json!({"type": "function", "function": {"name": n}}),
        };
        body.insert("tool_choice".into(), choice);
        if let Some(p) = req.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), json!(p));
        }
    }
    // The sampling fields the request sets, in the body's order.
    let sampling: Vec<(&str, Option<Value>)> = match &req.sampling {
        Sampling::Standard {
            temperature,
            top_p,
            max_tokens,
        } => vec![
            ("temperature", temperature.map(|t| json!(t))),
            ("top_p", top_p.map(|p| json!(p))),
            ("max_tokens", max_tokens.map(|m| json!(m))),
            (
                "repetition_penalty",
                req.repetition_penalty.map(|r| json!(r)),
            ),
        ],
        Sampling::Reasoning {
            reasoning_effort,
            max_completion_tokens,
        } => vec![
            (
                "reasoning_effort",
                reasoning_effort.as_ref().map(|e| json!(e)),
            ),
            (
                "max_completion_tokens",
                max_completion_tokens.map(|m| json!(m)),
            ),
        ],
    };
    let seed = ("seed", req.seed.map(|s| json!(s)));
    for (key, value) in sampling.into_iter().chain([seed]) {
        if let Some(v) = value {
            body.insert(key.into(), v);
        }
    }
    Value::Object(body)
}

/// A message's fields `role`, `content` and (when it has any) `tool_calls`, as the
/// chat-completions wire writes them.
fn message_head(role: &str, content: Option<&str>, calls: &[ToolCall]) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("role".into(), json!(role));
    o.insert("content".into(), content.map_or(Value::Null, Value::from));
    if !calls.is_empty() {
        let calls = calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments_raw}})
            })
            .collect();
        o.insert("tool_calls".into(), Value::Array(calls));
    }
    o
}

fn message_json(m: &Message) -> Value {
    let mut o = message_head(m.role.as_str(), m.content.as_deref(), &m.tool_calls);
    if let Some(id) = &m.tool_call_id {
        o.insert("tool_call_id".into(), json!(id));
    }
    if let Some(n) = &m.name {
        o.insert("name".into(), json!(n));
    }
    Value::Object(o)
}

fn tool_json(t: &ToolDef) -> Value {
    let mut f = Map::new();
    f.insert("name".into(), json!(t.name));
    if let Some(d) = &t.description {
        f.insert("description".into(), json!(d));
    }
    if let Some(p) = &t.parameters {
        f.insert("parameters".into(), p.clone());
    }
    json!({"type": "function", "function": Value::Object(f)})
}

/// Parses a chat-completions response body (HTTP status 200).
///
/// Not JSON, or JSON without a usable choice -> `Malformed`; an `error`
/// object -> classified by its code/type; a refusal -> `Refusal`.
pub fn parse_response_body(text: &str) -> Result<ChatResponse, LlmError> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        LlmError::new(
            ErrorKind::Malformed,
            format!("response is not valid JSON ({e}); {} bytes", text.len()),
        )
    })?;
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(LlmError::new(
            classify_error_object(err, None),
            format!(
                "error object in a 200 response: {}",
                truncate(&err.to_string(), 500)
            ),
        ));
    }
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| LlmError::new(ErrorKind::Malformed, "response has no choices"))?;
    let msg = choice
        .get("message")
        .ok_or_else(|| LlmError::new(ErrorKind::Malformed, "choice has no message"))?;
    let finish_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let content = content_text(msg.get("content"));
    let mut tool_calls = Vec::new();
    if let Some(calls) = msg.get("tool_calls").and_then(Value::as_array) {
        for (i, c) in calls.iter().enumerate() {
            let f = c.get("function").unwrap_or(&Value::Null);
            let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
                LlmError::new(
                    ErrorKind::Malformed,
                    format!("tool call {i} has no function name"),
                )
            })?;
            let raw = match f.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                None | Some(Value::Null) => String::new(),
                // Some servers send the arguments as an object.
                Some(other) => other.to_string(),
            };
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("call_{i}"));
            tool_calls.push(ToolCall::new(id, name, raw));
        }
    }
    let refusal = msg
        .get("refusal")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty());
    let filtered = finish_reason.as_deref() == Some("content_filter");
    if content.is_none() && tool_calls.is_empty() {
        if let Some(r) = refusal {
            return Err(LlmError::new(
                ErrorKind::Refusal,
                format!("model refused: {}", truncate(r, 300)),
            ));
        }
        if filtered {
            return Err(LlmError::new(
                ErrorKind::ContentFilter,
                "the provider's content filter stopped the reply (finish_reason content_filter)",
            ));
        }
    }
    let u = v.get("usage").unwrap_or(&Value::Null);
    let num = |x: Option<&Value>| x.and_then(Value::as_u64).unwrap_or(0);
    let usage = Usage {
        prompt: num(u.get("prompt_tokens")),
        completion: num(u.get("completion_tokens")),
        reasoning: num(u.pointer("/completion_tokens_details/reasoning_tokens")),
    };
    ChatResponse {
        content,
        tool_calls,
        usage,
        latency_ms: 0,
        finish_reason,
    }
    .checked()
}

/// Message content: a string, or an array of text parts.
fn content_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let text: String = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            Some(text)
        }
        _ => None,
    }
}

/// Kind named by a machine-readable error `code` or `type` string, for the
/// names that say more than the HTTP status does. `None` for names that do
/// not (e.g. the generic `invalid_request_error`).
fn kind_of_error_name(name: &str) -> Option<ErrorKind> {
    Some(match name {
        "rate_limit_exceeded" | "rate_limit_error" | "too_many_requests" => ErrorKind::RateLimit,
        "server_error"
        | "api_error"
        | "overloaded_error"
        | "service_unavailable"
        | "internal_error"
        | "upstream_error" => ErrorKind::Transient,
        "timeout" | "request_timeout" | "timeout_error" => ErrorKind::Timeout,
        "content_filter" | "content_policy_violation" => ErrorKind::ContentFilter,
        "refusal" => ErrorKind::Refusal,
        "invalid_api_key" | "authentication_error" | "permission_error" => ErrorKind::Auth,
        // OpenAI's code; llama.cpp server's type.
        "context_length_exceeded" | "exceed_context_size_error" => ErrorKind::ContextOverflow,
        "not_found_error" | "model_not_found" | "insufficient_quota" => ErrorKind::Fatal,
        // Written by this crate's `serve` (see `error_response`) so that
        // every kind survives the trip through an OpenAI-compatible endpoint.
        "malformed_model_output" => ErrorKind::Malformed,
        "cache_miss" => ErrorKind::CacheMiss,
        "local_io_error" => ErrorKind::LocalIo,
        _ => return None,
    })
}

/// Classifies an error body (from any status). Uses the machine-readable
/// `code`, `type` and `status` fields and the HTTP status only, never the
/// message text. A specific `code` wins over a specific `type`; both win over
/// the status; a generic type (`invalid_request_error`) loses to 401/403.
pub fn classify_error_object(err: &Value, http_status: Option<u16>) -> ErrorKind {
    let numeric = |k: &str| -> Option<u16> {
        match err.get(k)? {
            Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }
    };
    let named = |k: &str| err.get(k).and_then(Value::as_str);
    if let Some(kind) = ["code", "type"]
        .into_iter()
        .find_map(|f| named(f).and_then(kind_of_error_name))
    {
        return kind;
    }
    let status = http_status
        .filter(|s| !(200..300).contains(s))
        .or_else(|| numeric("code").or_else(|| numeric("status")))
        .filter(|s| (400..600).contains(s));
    match status {
        Some(s @ (401 | 403)) => ErrorKind::from_status(s),
        _ if named("type") == Some("invalid_request_error") => ErrorKind::Fatal,
        Some(s) => ErrorKind::from_status(s),
        // An unexplained error object in a 200: the server failed, try again.
        None => ErrorKind::Transient,
    }
}

/// Parses a chat-completions request body (for [`mod@crate::serve`]).
/// Fields this crate does not model are ignored; `sample_index` is 0 unless
/// the non-standard field `otb_sample_index` is present.
pub fn parse_request_body(v: &Value) -> Result<ChatRequest, String> {
    let model = v
        .get("model")
        .and_then(Value::as_str)
        .ok_or("missing string field `model`")?
        .to_owned();
    let msgs = v
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("missing array field `messages`")?;
    let mut messages = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.iter().enumerate() {
        let role = match m.get("role").and_then(Value::as_str) {
            Some("system") | Some("developer") => Role::System,
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("tool") => Role::Tool,
            other => return Err(format!("message {i}: unknown role {other:?}")),
        };
        let mut tool_calls = Vec::new();
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            for (j, c) in calls.iter().enumerate() {
                let name = c
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .ok_or(format!("message {i} tool call {j}: no function name"))?;
                let raw = match c.pointer("/function/arguments") {
                    Some(Value::String(s)) => s.clone(),
                    None | Some(Value::Null) => String::new(),
                    Some(o) => o.to_string(),
                };
                let id = c.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
                tool_calls.push(ToolCall::new(id, name, raw));
            }
        }
        messages.push(Message {
            role,
            content: content_text(m.get("content")),
            tool_calls,
            tool_call_id: m
                .get("tool_call_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            name: m.get("name").and_then(Value::as_str).map(str::to_owned),
        });
    }
    let mut tools = Vec::new();
    if let Some(ts) = v.get("tools").and_then(Value::as_array) {
        for (i, t) in ts.iter().enumerate() {
            let f = t
                .get("function")
                .ok_or(format!("tool {i}: no `function`"))?;
            tools.push(ToolDef {
                name: f
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or(format!("tool {i}: no name"))?
                    .to_owned(),
                description: f
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                parameters: f.get("parameters").cloned(),
            });
        }
    }
    let tool_choice = match v.get("tool_choice") {
        None | Some(Value::Null) => ToolChoice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            other => return Err(format!("unknown tool_choice {other:?}")),
        },
        Some(o) => ToolChoice::Named(
            o.pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or("tool_choice object without function.name")?
                .to_owned(),
        ),
    };
    let u32_field = |k: &str| {
        v.get(k)
            .and_then(Value::as_u64)
            .and_then(|x| u32::try_from(x).ok())
    };
    let sampling =
        if v.get("reasoning_effort").is_some() || v.get("max_completion_tokens").is_some() {
            Sampling::Reasoning {
                reasoning_effort: v
                    .get("reasoning_effort")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                max_completion_tokens: u32_field("max_completion_tokens"),
            }
        } else {
            Sampling::Standard {
                temperature: v.get("temperature").and_then(Value::as_f64),
                top_p: v.get("top_p").and_then(Value::as_f64),
                max_tokens: u32_field("max_tokens"),
            }
        };
    Ok(ChatRequest {
        model,
        messages,
        tools,
        tool_choice,
        sampling,
        seed: v.get("seed").and_then(Value::as_u64),
        sample_index: u32_field("otb_sample_index").unwrap_or(0),
        parallel_tool_calls: v.get("parallel_tool_calls").and_then(Value::as_bool),
        repetition_penalty: v.get("repetition_penalty").and_then(Value::as_f64),
        backend_revision: None,
    })
}

/// Renders a response as a chat-completions JSON body (for [`mod@crate::serve`]).
pub fn response_body(resp: &ChatResponse, model: &str, id: &str) -> Value {
    let msg = message_head("assistant", resp.content.as_deref(), &resp.tool_calls);
    json!({
        "id": id,
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": Value::Object(msg), "finish_reason": resp.finish_reason}],
        "usage": {
            "prompt_tokens": resp.usage.prompt,
            "completion_tokens": resp.usage.completion,
            "total_tokens": resp.usage.prompt.saturating_add(resp.usage.completion),
            "completion_tokens_details": {"reasoning_tokens": resp.usage.reasoning},
        },
    })
}

/// The same reply as server-sent events (`stream: true`): `chat.completion.chunk`
/// objects -- the role and the whole text, each tool call (its id, name and
/// arguments in one delta), the finish reason, then the usage when the request asked
/// for it (`stream_options.include_usage`) -- each a `data:` line, then `data: [DONE]`.
pub fn response_events(resp: &ChatResponse, model: &str, id: &str, usage: bool) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": resp.content.clone().unwrap_or_default()}),
        Value::Null,
    )];
    for (i, c) in resp.tool_calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": i, "id": c.id, "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments_raw}}]}),
            Value::Null,
        ));
    }
    events.push(chunk(json!({}), json!(resp.finish_reason)));
    if usage {
        events.push(json!({
            "id": id,
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [],
            "usage": {
                "prompt_tokens": resp.usage.prompt,
                "completion_tokens": resp.usage.completion,
                "total_tokens": resp.usage.prompt.saturating_add(resp.usage.completion),
            },
        }));
    }
    let mut out = String::new();
    for e in events {
        out.push_str(&format!("data: {e}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

/// HTTP status and body that report `err` to an OpenAI-compatible client.
/// The `code` names the kind so that [`classify_error_object`] gives the
/// same kind back on the client side.
pub fn error_response(err: &LlmError) -> (u16, Value) {
    let (status, ty, code) = match err.kind {
        ErrorKind::RateLimit => (429, "rate_limit_error", "rate_limit_exceeded"),
        ErrorKind::Transient => (503, "server_error", "server_error"),
        ErrorKind::Malformed => (502, "server_error", "malformed_model_output"),
        ErrorKind::Refusal => (400, "invalid_request_error", "refusal"),
        ErrorKind::Fatal => (400, "invalid_request_error", "invalid_request_error"),
        ErrorKind::Timeout => (504, "timeout", "timeout"),
        ErrorKind::CacheMiss => (404, "not_found_error", "cache_miss"),
        ErrorKind::Auth => (401, "authentication_error", "authentication_error"),
        ErrorKind::ContextOverflow => (400, "invalid_request_error", "context_length_exceeded"),
        ErrorKind::ContentFilter => (400, "invalid_request_error", "content_filter"),
        ErrorKind::LocalIo => (500, "server_error", "local_io_error"),
    };
    (
        status,
        json!({"error": {"message": err.message, "type": ty, "code": code}}),
    )
}

/// Cuts `s` to at most `max` bytes on a char boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_request() -> ChatRequest {
        let mut req = ChatRequest::new(
            "m",
            vec![
                Message::system("sys"),
                Message::user("hi"),
                Message::assistant_tool_calls(None, vec![ToolCall::new("c1", "f", r#"{"x":1}"#)]),
                Message::tool_result("c1", "42"),
            ],
        );
        req.tools = vec![ToolDef {
            name: "f".into(),
            description: Some("does f".into()),
            parameters: Some(json!({"type": "object", "properties": {"x": {"type": "integer"}}})),
        }];
        req.tool_choice = ToolChoice::Named("f".into());
        req.sampling = Sampling::Standard {
            temperature: Some(0.5),
            top_p: None,
            max_tokens: Some(64),
        };
        req.seed = Some(7);
        req
    }

    #[test]
    fn request_round_trips_through_the_wire_format() {
        let req = sample_request();
        let back = parse_request_body(&request_body(&req)).unwrap();
        assert_eq!(back, req);
    }

    /// `repetition_penalty` is an extra body field of standard sampling only: sent when
    /// set (and read back), never with reasoning sampling, and out of the cache key
    /// when unset.
    #[test]
    fn repetition_penalty_is_sent_only_when_set_and_never_to_a_reasoning_model() {
        let mut req = sample_request();
        assert!(request_body(&req).get("repetition_penalty").is_none());
        req.repetition_penalty = Some(1.1);
        let b = request_body(&req);
        assert_eq!(b["repetition_penalty"], json!(1.1));
        assert_eq!(parse_request_body(&b).unwrap(), req);
        req.sampling = Sampling::Reasoning {
            reasoning_effort: Some("low".into()),
            max_completion_tokens: Some(64),
        };
        let b = request_body(&req);
        assert!(b.get("repetition_penalty").is_none(), "{b}");
        assert!(
            b.get("temperature").is_none() && b.get("top_p").is_none(),
            "{b}"
        );
        let plain = serde_json::to_value(sample_request()).unwrap();
        assert!(plain.get("repetition_penalty").is_none());
    }

    #[test]
    fn parallel_tool_calls_is_sent_only_when_set() {
        let mut req = sample_request();
        assert!(request_body(&req).get("parallel_tool_calls").is_none());
        req.parallel_tool_calls = Some(false);
        let b = request_body(&req);
        assert_eq!(b["parallel_tool_calls"], json!(false));
        assert_eq!(parse_request_body(&b).unwrap(), req);
        // Not set: the cache key is the one a request without the field always had.
        let plain = sample_request();
        let v = serde_json::to_value(&plain).unwrap();
        assert!(v.get("parallel_tool_calls").is_none());
    }

    #[test]
    fn reasoning_sampling_sends_no_temperature() {
        let mut req = sample_request();
        req.sampling = Sampling::Reasoning {
            reasoning_effort: Some("low".into()),
            max_completion_tokens: Some(100),
        };
        let b = request_body(&req);
        assert!(b.get("temperature").is_none());
        assert_eq!(b["reasoning_effort"], "low");
        assert_eq!(b["max_completion_tokens"], 100);
    }

    #[test]
    fn response_round_trips() {
        let mut resp = ChatResponse::calls(vec![ToolCall::new("c9", "f", "{\"x\": 2}")]);
        resp.usage = Usage {
            prompt: 10,
            completion: 5,
            reasoning: 2,
        };
        let text = response_body(&resp, "m", "id").to_string();
        assert_eq!(parse_response_body(&text).unwrap(), resp);
        // Absurd counts saturate instead of overflowing the total.
        resp.usage.prompt = u64::MAX;
        let body = response_body(&resp, "m", "id");
        assert_eq!(body["usage"]["total_tokens"], u64::MAX);
    }

    #[test]
    fn error_objects_and_refusals_are_classified() {
        let e = parse_response_body(r#"{"error":{"type":"rate_limit_error","message":"x"}}"#);
        assert_eq!(e.unwrap_err().kind, ErrorKind::RateLimit);
        let e = parse_response_body(r#"{"error":{"code":503,"message":"x"}}"#);
        assert_eq!(e.unwrap_err().kind, ErrorKind::Transient);
        let e = parse_response_body(r#"{"error":{"code":"invalid_api_key"}}"#);
        assert_eq!(e.unwrap_err().kind, ErrorKind::Auth);
        let e = parse_response_body(r#"{"error":{"type":"invalid_request_error"}}"#);
        assert_eq!(e.unwrap_err().kind, ErrorKind::Fatal);
        let e = parse_response_body(
            r#"{"choices":[{"message":{"content":null,"refusal":"no"},"finish_reason":"stop"}]}"#,
        );
        assert_eq!(e.unwrap_err().kind, ErrorKind::Refusal);
        let e = parse_response_body(r#"{"choices":[{"mess"#);
        assert_eq!(e.unwrap_err().kind, ErrorKind::Malformed);
        let e = parse_response_body(r#"{"choices":[]}"#);
        assert_eq!(e.unwrap_err().kind, ErrorKind::Malformed);
    }

    #[test]
    fn error_classification_uses_fields_and_status_not_text() {
        let c = |v: Value, st: u16| classify_error_object(&v, Some(st));
        // The message says "context length" but no field does: not an overflow.
        assert_eq!(
            c(json!({"message": "maximum context length exceeded"}), 400),
            ErrorKind::Fatal
        );
        assert_eq!(
            c(
                json!({"type": "invalid_request_error", "code": "context_length_exceeded"}),
                400
            ),
            ErrorKind::ContextOverflow
        );
        assert_eq!(
            c(json!({"type": "invalid_request_error"}), 401),
            ErrorKind::Auth
        );
        assert_eq!(
            c(json!({"type": "insufficient_quota"}), 429),
            ErrorKind::Fatal
        );
        assert_eq!(
            c(json!({"code": "content_policy_violation"}), 400),
            ErrorKind::ContentFilter
        );
        assert_eq!(c(json!({}), 503), ErrorKind::Transient);
        // Every kind this crate's server writes comes back as itself.
        for kind in ErrorKind::ALL {
            let (status, body) = error_response(&LlmError::new(kind, "m"));
            assert_eq!(c(body["error"].clone(), status), kind);
        }
    }
}

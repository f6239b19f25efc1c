//! Tokens/s of the embedded backend (run by `make bench`).
//!
//! `cargo run --release -p llm --features embedded --example bench_embedded -- [MODEL] [PART]`
//!
//! MODEL is a name known to `llm::models` (default `qwen2.5-coder-1.5b`,
//! `smollm2-135m` for a quick run; fetched into the model cache when missing)
//! or a path to a GGUF file; `OTB_BENCH_MODEL` sets it too. PART is `all`
//! (default: every part), `single` (part 1 only), `batch` (part 2 only) or
//! `parallel` (part 3 only).
//!
//! 1. Prompt-processing and generation tokens/s of one request at a time,
//!    with and without the tool grammar, with and without prefix reuse: a
//!    first request (cold), then a second one that shares the system prompt
//!    and the tools (warm: with reuse, only its last turn is evaluated).
//! 2. Aggregate generation tokens/s of 4 requests sent one after another vs
//!    all 4 at once, each on a freshly loaded backend (default settings), and
//!    whether the answers are the same both ways.
//!
//! 3. `parallel`: 8 requests sent all at once to backends loaded with
//!    `parallel` = 1, 4 and 8 (`OTB_LLAMA_PARALLEL`), which is how the
//!    pipeline's stages send work (explore sends every instance at once):
//!    wall time, aggregate tokens/s, and whether the answers agree.
//! 4. `llama` (not in `all`): the rates llama.cpp's `llama-bench` reports
//!    (`pp512`, `tg128`), measured in the backend's own context
//!    ([`llm::embedded::bench_raw`]), and the same through requests: a
//!    512-token prompt evaluated cold, then 128 generated tokens.
//!    `scripts/bench-llama.sh` runs it beside `llama-bench` itself.
//! 5. `spec` (not in `all`): speculative decoding, the draft model
//!    (`OTB_BENCH_DRAFT`, default `qwen2.5-coder-0.5b`) proposing up to
//!    2, 4 and 8 tokens, against none: the 8 tool-call requests one at a time
//!    and all at once, and a 128-token code answer; generation tokens/s, the
//!    share of proposals kept, and whether every answer is the same.
//!
//! 6. `admission` (not in `all`): the shape of a pipeline run's end -- one
//!    stage sending rounds of 12 requests at once while two chains of
//!    dependent calls (one request each, the next when it is answered) run
//!    beside it -- under first-come admission and under fair share
//!    ([`llm::embedded::Admission`]): when the chains and the batch finish,
//!    the batch occupancy, and whether the answers agree.
//! 7. `depth` (not in `all`): what attention over the cells of idle
//!    sequences costs in the backend's unified KV cache (every row attends
//!    over the cells in use): prompt and generation rates with 0, 4,096 and
//!    7,168 cells held by sequences not in the work
//!    ([`llm::embedded::bench_depth`]); `OTB_BENCH_UNIFIED=0` gives each
//!    sequence a stream of its own instead, for comparison.
//!
//! Prompt tokens/s counts evaluated tokens only (reused ones are free);
//! generation time covers sampling, grammar and the decode of each new token
//! (`EmbeddedMetrics`). Every part also prints the process's CPU time, which
//! on a machine shared with other work measures the work where wall time
//! also counts the waiting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llm::{
    Backend, ChatRequest, ChatResponse, EmbeddedBackend, EmbeddedConfig, EmbeddedMetrics, Message,
    Sampling, ToolChoice, ToolDef,
};
use serde_json::json;

const QUESTIONS: [&str; 8] = [
    "What is the weather in Paris for the next 3 days, in celsius?",
    "How good is the air in Berlin today?",
    "When does the sun rise in Tokyo tomorrow?",
    "Is it going to rain in London this weekend? Use fahrenheit.",
    "Give me a 7-day forecast for Madrid.",
    "What is the main pollutant in Delhi right now?",
    "At what time does the sun set in Oslo on 2026-06-21?",
    "Should I take a jacket in Chicago tomorrow?",
];

fn request(question: &str) -> ChatRequest {
    let mut req = ChatRequest::new(
        "bench",
        vec![
            Message::system(
                "You are an agent that solves the user's task by calling the tools below. \
                 Call exactly one tool with arguments that follow its schema. Prefer the most \
                 specific tool; when several could work, pick the one whose description matches \
                 the user's words best, and fill optional arguments only when the user gave them.",
            ),
            Message::user(question),
        ],
    );
    let city = json!({"type": "string", "description": "City name, e.g. Paris"});
    req.tools = vec![
        ToolDef {
            name: "get_weather".into(),
            description: Some("Current weather and a daily forecast for a city.".into()),
            parameters: Some(json!({"type": "object",
                "properties": {"city": city, "days": {"type": "integer", "description": "Forecast days, 1-7"},
                               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city"]})),
        },
        ToolDef {
            name: "get_air_quality".into(),
            description: Some("Air quality index (AQI) and main pollutant for a city.".into()),
            parameters: Some(
                json!({"type": "object", "properties": {"city": city}, "required": ["city"]}),
            ),
        },
        ToolDef {
            name: "get_sun_times".into(),
            description: Some("Sunrise and sunset times for a city on a date.".into()),
            parameters: Some(json!({"type": "object",
                "properties": {"city": city, "date": {"type": "string", "description": "YYYY-MM-DD or 'today', 'tomorrow'"}},
                "required": ["city"]})),
        },
        ToolDef {
            name: "lookup".into(),
            description: Some("Opaque tool without documentation.".into()),
            parameters: None,
        },
    ];
    req.tool_choice = ToolChoice::Required;
    req.sampling = Sampling::Standard {
        temperature: None,
        top_p: None,
        max_tokens: Some(64),
    };
    req
}

/// CPU time of this process so far (user + system, from /proc/self/stat;
/// 0 where that does not exist). On a machine shared with other work it
/// shows the work done, where wall time also shows the waiting.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the line, in clock ticks (100 per second).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn model_path() -> std::path::PathBuf {
    let arg = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("OTB_BENCH_MODEL").ok())
        .unwrap_or_else(|| llm::models::DEFAULT_MODEL.to_owned());
    let p = std::path::PathBuf::from(&arg);
    if p.is_file() {
        return p;
    }
    match llm::fetch_model(&arg, &llm::models::default_cache_dir()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}

fn answer(r: &ChatResponse) -> String {
    let calls: Vec<String> = r
        .tool_calls
        .iter()
        .map(|c| format!("{}({})", c.name, c.arguments_raw))
        .collect();
    format!("{} {:?}", calls.join(" "), r.content)
}

fn load(cfg: EmbeddedConfig) -> (Arc<EmbeddedBackend>, Duration) {
    let t = Instant::now();
    let b = EmbeddedBackend::load(cfg).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    (Arc::new(b), t.elapsed())
}

/// What one timed run of requests gave.
struct Run {
    answers: Vec<String>,
    wall: f64,
    cpu: f64,
    m: EmbeddedMetrics,
}

/// Sends a request per question in groups of `group`: the requests of a group
/// at once, the next group when it is answered. Returns the answers in order,
/// wall and CPU seconds and the backend's counters for the run; exits on the
/// first failure (a bench has no use for partial numbers).
async fn timed(b: &Arc<EmbeddedBackend>, questions: &[&str], group: usize) -> Run {
    let reqs: Vec<ChatRequest> = questions.iter().map(|q| request(q)).collect();
    let before = b.metrics();
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let mut answers = Vec::new();
    for chunk in reqs.chunks(group.max(1)) {
        answers.extend(answers_of(b, chunk).await);
    }
    Run {
        answers,
        wall: t.elapsed().as_secs_f64(),
        cpu: cpu_seconds() - cpu0,
        m: b.metrics().since(&before),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let path = model_path();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let part = std::env::args().nth(2).unwrap_or_else(|| "all".into());
    if ![
        "all",
        "single",
        "batch",
        "parallel",
        "llama",
        "spec",
        "admission",
        "depth",
    ]
    .contains(&part.as_str())
    {
        eprintln!(
            "error: PART must be all, single, batch, parallel, llama, spec, admission or depth, not {part:?}"
        );
        std::process::exit(2);
    }
    let threads = EmbeddedConfig::new(&path).n_threads;
    println!("embedded: {name}, {threads} llama.cpp thread(s), ≤64 output tokens per request");

    if part == "all" || part == "single" {
        single(&path).await;
    }
    if part == "all" || part == "batch" {
        batch(&path).await;
    }
    if part == "all" || part == "parallel" {
        parallel(&path).await;
    }
    if part == "llama" {
        llama(&path).await;
    }
    if part == "spec" {
        spec(&path).await;
    }
    if part == "admission" {
        admission(&path).await;
    }
    if part == "depth" {
        depth(&path);
    }
}

/// Part 7 (see the module docs).
fn depth(path: &std::path::Path) {
    let unified = std::env::var("OTB_BENCH_UNIFIED").map_or(true, |v| v != "0");
    let mut cfg = EmbeddedConfig::new(path);
    let n_seq = 16;
    if !unified {
        // A stream per sequence as large as a request may be in the backend.
        cfg.n_ctx *= n_seq;
    }
    println!(
        "\n7. attention over idle sequences' cells: pp256 of a fresh sequence and 4 sequences generating 32 tokens together, while other sequences hold the cells shown ({} KV cache, {n_seq} sequences, n_ctx {}, {} threads)",
        if unified { "unified" } else { "per-sequence" },
        cfg.n_ctx,
        cfg.n_threads
    );
    let work = llm::embedded::DepthBench {
        n_seq,
        unified,
        depths: &[0, 4096, 7168],
        n_prompt: 256,
        n_gen: 32,
        rows: 4,
    };
    let rates = llm::embedded::bench_depth(&cfg, &work).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    println!("| cells held by others | pp256 tokens/s (3 runs) | mean | tg, 4 rows, tokens/s |");
    println!("|---:|---|---:|---:|");
    for r in rates {
        let runs: Vec<String> = r.prompt.iter().map(|x| format!("{x:.1}")).collect();
        println!(
            "| {} | {} | {:.1} | {:.1} |",
            r.cells,
            runs.join(" "),
            llm::embedded::mean_sd(&r.prompt).0,
            r.generation
        );
    }
}

/// Sends `reqs` at once (one request group) and returns the answers; exits on
/// the first failure.
async fn answers_of(b: &Arc<EmbeddedBackend>, reqs: &[ChatRequest]) -> Vec<String> {
    llm::chat_all(b, reqs)
        .await
        .into_iter()
        .map(|r| match r {
            Ok(r) => answer(&r),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1)
            }
        })
        .collect()
}

/// Part 6 (see the module docs).
async fn admission(path: &std::path::Path) {
    use llm::embedded::Admission;
    const ROUNDS: usize = 2;
    const WIDE: usize = 12;
    const CHAINS: usize = 2;
    const CALLS: usize = 6;
    let ask = |k: usize| {
        let q = QUESTIONS[k % QUESTIONS.len()];
        request(&format!("{q} (request {k})"))
    };
    println!(
        "\n6. {ROUNDS} rounds of {WIDE} requests at once beside {CHAINS} chains of {CALLS} dependent calls (parallel {})",
        EmbeddedConfig::new(path).parallel
    );
    println!("| admission | wall s | batch done s | chains done s | slowest chain, s per call | requests in flight per step | generated tok/s (wall) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut all_answers = Vec::new();
    for adm in [Admission::Fifo, Admission::FairShare] {
        let mut cfg = EmbeddedConfig::new(path);
        cfg.admission = adm;
        let (b, _) = load(cfg);
        let t = Instant::now();
        let wide = {
            let b = b.clone();
            tokio::spawn(async move {
                let mut out = Vec::new();
                for round in 0..ROUNDS {
                    let reqs: Vec<_> = (0..WIDE).map(|i| ask(100 + round * WIDE + i)).collect();
                    out.extend(answers_of(&b, &reqs).await);
                }
                (out, t.elapsed().as_secs_f64())
            })
        };
        let chains: Vec<_> = (0..CHAINS)
            .map(|c| {
                let b = b.clone();
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for i in 0..CALLS {
                        out.extend(answers_of(&b, &[ask(c * CALLS + i)]).await);
                    }
                    (out, t.elapsed().as_secs_f64())
                })
            })
            .collect();
        let mut answers = Vec::new();
        let mut chains_done: f64 = 0.0;
        for c in chains {
            let (a, done) = c.await.unwrap_or_else(|e| {
                eprintln!("error: {e}");
                std::process::exit(1)
            });
            answers.extend(a);
            chains_done = chains_done.max(done);
        }
        let (a, wide_done) = wide.await.unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(1)
        });
        answers.extend(a);
        let wall = t.elapsed().as_secs_f64();
        let m = b.metrics();
        println!(
            "| {adm:?} | {wall:.1} | {wide_done:.1} | {chains_done:.1} | {:.1} | {:.2} | {:.2} |",
            chains_done / CALLS as f64,
            m.occupancy(),
            m.generated_tokens as f64 / wall
        );
        all_answers.push(answers);
    }
    let differ = all_answers[0]
        .iter()
        .zip(&all_answers[1])
        .filter(|(x, y)| x != y)
        .count();
    println!(
        "answers that differ between the two: {differ} of {}",
        all_answers[0].len()
    );
}

/// A plain-text request (greedy, no tools) whose prompt is about `words`
/// words long.
fn plain(words: usize, ask: &str, max_tokens: u32) -> ChatRequest {
    let filler = "The quick brown fox jumps over the lazy dog while the committee reviews the annual budget report. "
        .repeat(words / 18 + 1);
    let mut req = ChatRequest::new("bench", vec![Message::user(format!("{filler}\n\n{ask}"))]);
    req.sampling = Sampling::Standard {
        temperature: Some(0.0),
        top_p: None,
        max_tokens: Some(max_tokens),
    };
    req
}

async fn llama(path: &std::path::Path) {
    let cfg = EmbeddedConfig::new(path);
    println!(
        "\n4. llama-bench's tests in the backend's context (n_ctx {}, n_batch = n_ubatch {}, {} sequences, unified KV cache, {} threads), 3 repetitions after a warm-up",
        cfg.n_ctx, cfg.n_batch, cfg.parallel, cfg.n_threads
    );
    let rates = llm::embedded::bench_raw(&cfg, 512, 128, 3).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let (pp, pp_sd) = llm::embedded::mean_sd(&rates.prompt);
    let (tg, tg_sd) = llm::embedded::mean_sd(&rates.generation);
    println!("| test | tokens/s | sd |");
    println!("|---|---:|---:|");
    println!("| pp512 | {pp:.2} | {pp_sd:.2} |");
    println!("| tg128 | {tg:.2} | {tg_sd:.2} |");
    println!("RAW pp512={pp:.2} tg128={tg:.2}");
    // Through requests: prefix reuse off, so every prompt is evaluated cold.
    let mut cfg = EmbeddedConfig::new(path);
    cfg.reuse_prefix = false;
    let (b, _) = load(cfg);
    let ask = "Write a long Python module with many small functions about dates.";
    let _ = b.chat(&plain(40, ask, 8)).await; // warm-up
    let (mut pps, mut tgs) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let before = b.metrics();
        if let Err(e) = b.chat(&plain(440, ask, 128)).await {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        let m = b.metrics().since(&before);
        pps.push(m.prompt_tokens_per_s());
        tgs.push(m.generated_tokens_per_s());
        println!(
            "request: prompt {} tokens at {:.2} tokens/s, generated {} at {:.2} tokens/s",
            m.prompt_tokens,
            m.prompt_tokens_per_s(),
            m.generated_tokens,
            m.generated_tokens_per_s()
        );
    }
    let (pp, _) = llm::embedded::mean_sd(&pps);
    let (tg, _) = llm::embedded::mean_sd(&tgs);
    println!("REQUESTS pp={pp:.2} tg={tg:.2}");
}

async fn spec(path: &std::path::Path) {
    let draft_name =
        std::env::var("OTB_BENCH_DRAFT").unwrap_or_else(|_| "qwen2.5-coder-0.5b".into());
    let draft = if std::path::Path::new(&draft_name).is_file() {
        std::path::PathBuf::from(&draft_name)
    } else {
        llm::fetch_model(&draft_name, &llm::models::default_cache_dir()).unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(2)
        })
    };
    println!("\n5. speculative decoding, draft model {draft_name} (greedy requests)");
    println!("| draft tokens | workload | wall s | CPU s | generated | gen tok/s (generation time) | proposed | kept | same answers as without |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---|");
    let code = "Write a Python function that parses an ISO 8601 date string and returns the weekday name, with a docstring and three doctest examples.";
    let mut base: Vec<Vec<String>> = Vec::new();
    for k in [0u32, 2, 4, 8] {
        let mut cfg = EmbeddedConfig::new(path);
        if k > 0 {
            cfg.draft_model = Some(draft.clone());
            cfg.draft_tokens = k;
        }
        let (b, _) = load(cfg);
        let mut runs: Vec<(&str, Run)> = Vec::new();
        runs.push((
            "8 tool calls, one at a time",
            timed(&b, &QUESTIONS, 1).await,
        ));
        runs.push((
            "8 tool calls at once",
            timed(&b, &QUESTIONS, QUESTIONS.len()).await,
        ));
        let before = b.metrics();
        let cpu0 = cpu_seconds();
        let t = Instant::now();
        let r = b.chat(&plain(0, code, 128)).await.unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(1)
        });
        runs.push((
            "a 128-token code answer",
            Run {
                answers: vec![answer(&r)],
                wall: t.elapsed().as_secs_f64(),
                cpu: cpu_seconds() - cpu0,
                m: b.metrics().since(&before),
            },
        ));
        for (j, (label, run)) in runs.iter().enumerate() {
            let same = if k == 0 {
                "-".to_owned()
            } else {
                let differ = run
                    .answers
                    .iter()
                    .zip(&base[j])
                    .filter(|(x, y)| x != y)
                    .count();
                if differ == 0 {
                    "yes".to_owned()
                } else {
                    format!("{differ} of {} differ", run.answers.len())
                }
            };
            println!(
                "| {k} | {label} | {:.2} | {:.2} | {} | {:.2} | {} | {} | {same} |",
                run.wall,
                run.cpu,
                run.m.generated_tokens,
                run.m.generated_tokens_per_s(),
                run.m.drafted,
                run.m.accepted
            );
        }
        if k == 0 {
            base = runs.into_iter().map(|(_, r)| r.answers).collect();
        }
    }
}

async fn single(path: &std::path::Path) {
    println!("\n1. one request at a time");
    println!("| grammar | prefix reuse | request | prompt tok | reused | prompt tok/s | generated | gen tok/s | grammar ms/tok | latency s | CPU s | answer |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for (grammar, reuse) in [(true, true), (true, false), (false, true), (false, false)] {
        let mut cfg = EmbeddedConfig::new(path);
        cfg.use_grammar = grammar;
        cfg.reuse_prefix = reuse;
        let (b, _) = load(cfg);
        for (label, q) in [
            ("1st (cold)", QUESTIONS[0]),
            ("2nd (shared prefix)", QUESTIONS[1]),
        ] {
            let before = b.metrics();
            let cpu0 = cpu_seconds();
            let t = Instant::now();
            let r = match b.chat(&request(q)).await {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(1);
                }
            };
            let lat = t.elapsed();
            let cpu = cpu_seconds() - cpu0;
            let m = b.metrics().since(&before);
            println!(
                "| {} | {} | {label} | {} | {} | {:.1} | {} | {:.1} | {:.2} | {:.2} | {cpu:.2} | {} |",
                if grammar { "on" } else { "off" },
                if reuse { "on" } else { "off" },
                m.prompt_tokens,
                m.reused_tokens,
                m.prompt_tokens_per_s(),
                m.generated_tokens,
                m.generated_tokens_per_s(),
                m.grammar.as_secs_f64() * 1000.0 / m.generated_tokens.max(1) as f64,
                lat.as_secs_f64(),
                answer(&r)
                    .replace('|', "\\|")
                    .chars()
                    .take(70)
                    .collect::<String>()
            );
        }
    }
}

async fn batch(path: &std::path::Path) {
    println!("\n2. four requests (grammar on, prefix reuse on): one after another vs all at once");
    println!("| concurrent | wall s | CPU s | prompt tok (reused) | generated | aggregate gen tok/s (wall) | gen tok/s (generation time) | prompt tok/s |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut answers: Vec<Vec<String>> = Vec::new();
    for conc in [1usize, 4] {
        let (b, _) = load(EmbeddedConfig::new(path));
        let Run {
            answers: out,
            wall,
            cpu,
            m,
        } = timed(&b, &QUESTIONS[..4], conc).await;
        println!(
            "| {conc} | {wall:.2} | {cpu:.2} | {} ({}) | {} | {:.2} | {:.2} | {:.1} |",
            m.prompt_tokens,
            m.reused_tokens,
            m.generated_tokens,
            m.generated_tokens as f64 / wall,
            m.generated_tokens_per_s(),
            m.prompt_tokens_per_s()
        );
        answers.push(out);
    }
    let same = answers.windows(2).all(|w| w[0] == w[1]);
    println!("same answers one at a time and all at once: {same}");
    if !same {
        for (a, b) in answers[0].iter().zip(&answers[1]) {
            println!("  {a}\n  {b}");
        }
    }
}

async fn parallel(path: &std::path::Path) {
    let n = QUESTIONS.len();
    println!("\n3. {n} requests sent at once (grammar on, prefix reuse on), by requests decoded together");
    println!("| parallel | wall s | CPU s | prompt tok (reused) | generated | aggregate gen tok/s (wall) | requests/min | largest batch |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    const PARALLEL: [u32; 3] = [1, 4, 8];
    let mut answers: Vec<Vec<String>> = Vec::new();
    for par in PARALLEL {
        let mut cfg = EmbeddedConfig::new(path);
        cfg.parallel = par;
        let (b, _) = load(cfg);
        let Run {
            answers: out,
            wall,
            cpu,
            m,
        } = timed(&b, &QUESTIONS, n).await;
        println!(
            "| {par} | {wall:.2} | {cpu:.2} | {} ({}) | {} | {:.2} | {:.2} | {} |",
            m.prompt_tokens,
            m.reused_tokens,
            m.generated_tokens,
            m.generated_tokens as f64 / wall,
            n as f64 * 60.0 / wall,
            m.max_batch
        );
        answers.push(out);
    }
    for (par, a) in PARALLEL.iter().zip(&answers).skip(1) {
        let differ = a.iter().zip(&answers[0]).filter(|(x, y)| x != y).count();
        println!(
            "answers at parallel = {par} that differ from parallel = {}: {differ} of {n}",
            PARALLEL[0]
        );
    }
}

//! The `embedded` backend: a small GGUF model run in-process on the CPU with
//! llama.cpp (crate `llama-cpp-2`, feature `embedded`).
//!
//! One worker thread owns the model and a context and answers requests in
//! order. Prompts are rendered by [`crate::prompt`] (ChatML, tools in the
//! system turn); tool calls are constrained by a grammar from
//! [`crate::grammar`].
//!
//! Speed measures:
//! - **KV-cache prefix reuse**: the worker remembers the tokens in its KV
//!   cache and only evaluates the part of a new prompt after the longest
//!   common prefix (system prompt + tool docs are usually shared).
//! - **Grammar check on the chosen token first**: the unconstrained sampler
//!   picks a token, the grammar checks only that token, and the grammar runs
//!   over the whole vocabulary only when the token is rejected.
//!
//! Sampling: temperature `None` or `<= 0` is greedy (deterministic); otherwise
//! top-k 40, top-p, temperature, seeded from `seed` and `sample_index`.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::oneshot;

use crate::backend::{Backend, BoxFuture};
use crate::error::{ErrorKind, LlmError};
use crate::types::{ChatRequest, ChatResponse, ToolChoice, Usage};
use crate::{grammar, prompt};

/// Settings of the embedded backend.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    pub model_path: PathBuf,
    /// Context window in tokens (capped at the model's training context).
    pub n_ctx: u32,
    /// Prompt evaluation batch size.
    pub n_batch: u32,
    /// CPU threads (default: all available).
    pub n_threads: i32,
    /// Output limit when the request sets none.
    pub default_max_tokens: u32,
    /// Apply the tool-call grammar (switch off only to measure its cost).
    pub use_grammar: bool,
    /// Reuse the KV cache of a shared prompt prefix (switch off only to
    /// measure its effect).
    pub reuse_prefix: bool,
    /// Check the grammar on the sampled token first and run it over the
    /// whole vocabulary only on rejection (switch off only to measure).
    pub grammar_check_first: bool,
}

impl EmbeddedConfig {
    /// Defaults; `OTB_LLAMA_THREADS` sets the thread count.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        let threads = std::env::var("OTB_LLAMA_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or_else(default_threads);
        EmbeddedConfig {
            model_path: model_path.into(),
            n_ctx: 8192,
            n_batch: 512,
            n_threads: i32::try_from(threads).unwrap_or(2),
            default_max_tokens: 512,
            use_grammar: true,
            reuse_prefix: true,
            grammar_check_first: true,
        }
    }
}

/// All cores but one on machines with more than two (the pipeline runs tool
/// code and I/O beside the model; ggml's spinning threads degrade badly when
/// they compete for cores), else one.
fn default_threads() -> usize {
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if n > 2 {
        n - 1
    } else {
        1
    }
}

struct Job {
    req: ChatRequest,
    reply: oneshot::Sender<Result<ChatResponse, LlmError>>,
}

/// In-process llama.cpp backend (see the module docs).
pub struct EmbeddedBackend {
    jobs: Mutex<mpsc::Sender<Job>>,
}

fn fatal(msg: impl Into<String>) -> LlmError {
    LlmError::new(ErrorKind::Fatal, msg)
}

/// llama.cpp's backend may be initialised once per process.
fn llama_backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut b = LlamaBackend::init().map_err(|e| e.to_string())?;
            if std::env::var_os("OTB_LLAMA_LOG").is_none() {
                b.void_logs();
            }
            Ok(b)
        })
        .as_ref()
        .map_err(|e| fatal(format!("initialising llama.cpp: {e}")))
}

impl EmbeddedBackend {
    /// Loads the model (blocking, seconds for a 1 GB file) and starts the
    /// worker thread.
    pub fn load(cfg: EmbeddedConfig) -> Result<Self, LlmError> {
        if !cfg.model_path.is_file() {
            return Err(fatal(format!(
                "embedded model file {} does not exist (run the model setup, or set OTB_EMBEDDED_MODEL)",
                cfg.model_path.display()
            )));
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("otb-embedded-llm".into())
            .spawn(move || worker(cfg, ready_tx, rx))
            .map_err(|e| fatal(format!("spawning the model thread: {e}")))?;
        ready_rx
            .recv()
            .map_err(|_| fatal("the model thread died while loading"))??;
        Ok(EmbeddedBackend {
            jobs: Mutex::new(tx),
        })
    }
}

impl Backend for EmbeddedBackend {
    fn chat<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let (reply, rx) = oneshot::channel();
            let job = Job {
                req: req.clone(),
                reply,
            };
            self.jobs
                .lock()
                .map_err(|_| fatal("embedded backend lock poisoned"))?
                .send(job)
                .map_err(|_| fatal("the model thread has stopped"))?;
            rx.await
                .map_err(|_| fatal("the model thread stopped during the request"))?
                .map_err(|e| e.with_attempts(1))
        })
    }

    fn name(&self) -> &str {
        "embedded"
    }
}

fn worker(
    cfg: EmbeddedConfig,
    ready: mpsc::Sender<Result<(), LlmError>>,
    jobs: mpsc::Receiver<Job>,
) {
    let setup = || -> Result<(LlamaModel, &'static LlamaBackend), LlmError> {
        let backend = llama_backend()?;
        let model =
            LlamaModel::load_from_file(backend, &cfg.model_path, &LlamaModelParams::default())
                .map_err(|e| fatal(format!("loading {}: {e}", cfg.model_path.display())))?;
        Ok((model, backend))
    };
    let (model, backend) = match setup() {
        Ok(x) => x,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let n_ctx = cfg.n_ctx.min(model.n_ctx_train()).max(256);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(cfg.n_batch)
        .with_n_ubatch(cfg.n_batch)
        .with_n_threads(cfg.n_threads)
        .with_n_threads_batch(cfg.n_threads);
    let mut ctx = match model.new_context(backend, params) {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(fatal(format!("creating a llama.cpp context: {e}"))));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let mut session = Session {
        cached: Vec::new(),
        n_ctx,
    };
    for job in jobs {
        let out = session.generate(&model, &mut ctx, &job.req, &cfg);
        if out.is_err() {
            // Unknown KV state after a failure: start clean next time.
            ctx.clear_kv_cache();
            session.cached.clear();
        }
        let _ = job.reply.send(out);
    }
}

/// What the KV cache holds, for prefix reuse.
struct Session {
    cached: Vec<LlamaToken>,
    n_ctx: u32,
}

/// Per-request statistics kept for measurements (stderr with OTB_LLAMA_STATS).
#[derive(Debug, Default)]
struct GenStats {
    reused_prefix: usize,
    grammar_full_passes: u32,
    grammar_time: std::time::Duration,
    decode_time: std::time::Duration,
}

impl Session {
    fn generate(
        &mut self,
        model: &LlamaModel,
        ctx: &mut LlamaContext<'_>,
        req: &ChatRequest,
        cfg: &EmbeddedConfig,
    ) -> Result<ChatResponse, LlmError> {
        let start = Instant::now();
        let vocab = model.vocab();
        let text = prompt::render_chatml(req);
        let tokens = vocab.tokenize(text.as_bytes(), true, true);
        if tokens.is_empty() {
            return Err(fatal("empty prompt"));
        }
        let max_new = req
            .sampling
            .max_output_tokens()
            .unwrap_or(cfg.default_max_tokens);
        if tokens.len() + max_new as usize > self.n_ctx as usize {
            return Err(fatal(format!(
                "prompt of {} tokens plus {max_new} output tokens exceeds the context of {} tokens",
                tokens.len(),
                self.n_ctx
            )));
        }
        let grammar_text = if cfg.use_grammar {
            grammar::tool_call_grammar(&req.tools, &req.tool_choice).map_err(fatal)?
        } else {
            None
        };
        let mut grammar = match &grammar_text {
            Some(g) => Some(
                LlamaSampler::grammar(model, g, "root")
                    .map_err(|e| fatal(format!("tool-call grammar rejected by llama.cpp: {e}")))?,
            ),
            None => None,
        };
        let temperature = req.sampling.temperature().unwrap_or(0.0);
        let mut chain = if temperature <= 0.0 {
            LlamaSampler::greedy()
        } else {
            let top_p = match &req.sampling {
                crate::types::Sampling::Standard { top_p: Some(p), .. } => *p as f32,
                _ => 1.0,
            };
            let seed = req.seed.unwrap_or(0)
                ^ (u64::from(req.sample_index).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            LlamaSampler::chain_simple([
                LlamaSampler::top_k(40),
                LlamaSampler::top_p(top_p, 1),
                LlamaSampler::temp(temperature as f32),
                LlamaSampler::dist((seed ^ (seed >> 32)) as u32),
            ])
        };

        // Reuse the longest common prefix already in the KV cache (keep at
        // least one token to evaluate, so there are fresh logits).
        let mut common = self
            .cached
            .iter()
            .zip(&tokens)
            .take_while(|(a, b)| a == b)
            .count()
            .min(tokens.len() - 1);
        if !cfg.reuse_prefix {
            common = 0;
        }
        let removed = ctx
            .clear_kv_cache_seq(Some(0), Some(common as u32), None)
            .unwrap_or(false);
        if !removed {
            ctx.clear_kv_cache();
            common = 0;
        }
        self.cached.truncate(common);
        let mut stats = GenStats {
            reused_prefix: common,
            ..GenStats::default()
        };

        let n_batch = cfg.n_batch.max(1) as usize;
        let mut batch = LlamaBatch::new(n_batch, 1);
        let mut last_idx = 0i32;
        let rest = &tokens[common..];
        for (ci, chunk) in rest.chunks(n_batch).enumerate() {
            batch.clear();
            let last_chunk = (ci + 1) * n_batch >= rest.len();
            for (i, t) in chunk.iter().enumerate() {
                let pos = (common + ci * n_batch + i) as i32;
                let logits = last_chunk && i + 1 == chunk.len();
                batch
                    .add(*t, pos, &[0], logits)
                    .map_err(|e| fatal(format!("batch: {e}")))?;
            }
            ctx.decode(&mut batch).map_err(|e| {
                LlmError::new(
                    ErrorKind::Transient,
                    format!("llama.cpp decode failed: {e}"),
                )
            })?;
            self.cached.extend_from_slice(chunk);
            last_idx = chunk.len() as i32 - 1;
        }

        let mut out = Vec::<u8>::new();
        let mut n_gen = 0u32;
        let mut finish = "stop";
        loop {
            if n_gen >= max_new {
                finish = "length";
                break;
            }
            let mut cand = ctx.token_data_array_ith(last_idx);
            let token = match grammar.as_mut() {
                None => {
                    chain.apply(&mut cand);
                    cand.selected_token()
                        .ok_or_else(|| fatal("sampler selected no token"))?
                }
                Some(g) => {
                    let g_start = Instant::now();
                    let fast = if cfg.grammar_check_first {
                        let mut trial = cand.clone();
                        chain.apply(&mut trial);
                        trial.selected_token().filter(|t| grammar_allows(g, *t))
                    } else {
                        None
                    };
                    let t = match fast {
                        Some(t) => t,
                        None => {
                            stats.grammar_full_passes += 1;
                            g.apply(&mut cand);
                            chain.apply(&mut cand);
                            cand.selected_token()
                                .ok_or_else(|| fatal("grammar left no token to sample"))?
                        }
                    };
                    stats.grammar_time += g_start.elapsed();
                    t
                }
            };
            if vocab.is_eog(token) {
                break;
            }
            if let Some(g) = grammar.as_mut() {
                g.accept(token);
            }
            chain.accept(token);
            out.extend_from_slice(&vocab.token_to_piece(token, true, None));
            n_gen += 1;
            if out.ends_with(b"<|im_end|>") {
                out.truncate(out.len() - b"<|im_end|>".len());
                break;
            }
            if grammar.is_some()
                && out.ends_with(grammar::CALL_CLOSE.as_bytes())
                && repeats_last_call(&mut out)
            {
                // Small models loop on the same call; one is enough.
                break;
            }
            batch.clear();
            let pos = self.cached.len() as i32;
            batch
                .add(token, pos, &[0], true)
                .map_err(|e| fatal(format!("batch: {e}")))?;
            let d_start = Instant::now();
            ctx.decode(&mut batch).map_err(|e| {
                LlmError::new(
                    ErrorKind::Transient,
                    format!("llama.cpp decode failed: {e}"),
                )
            })?;
            stats.decode_time += d_start.elapsed();
            self.cached.push(token);
            last_idx = 0;
        }
        let text = String::from_utf8_lossy(&out).into_owned();
        let (content, tool_calls) = if req.tools.is_empty() || req.tool_choice == ToolChoice::None {
            let t = text.trim();
            ((!t.is_empty()).then(|| t.to_owned()), Vec::new())
        } else {
            prompt::parse_output(&text)
        };
        if std::env::var_os("OTB_LLAMA_STATS").is_some() {
            eprintln!(
                "embedded: prompt {} tokens (reused {}), generated {n_gen} in {} ms (token decode {} ms, grammar {} ms), full grammar passes {}",
                tokens.len(),
                stats.reused_prefix,
                start.elapsed().as_millis(),
                stats.decode_time.as_millis(),
                stats.grammar_time.as_millis(),
                stats.grammar_full_passes
            );
        }
        let finish_reason = if finish == "stop" && !tool_calls.is_empty() {
            "tool_calls"
        } else {
            finish
        };
        Ok(ChatResponse {
            content,
            tool_calls,
            usage: Usage {
                prompt: tokens.len() as u64,
                completion: u64::from(n_gen),
                reasoning: 0,
            },
            latency_ms: start.elapsed().as_millis() as u64,
            finish_reason: Some(finish_reason.into()),
        })
    }
}

/// If the call that `out` just closed repeats an earlier call of this
/// answer, cuts it off `out` and returns true.
fn repeats_last_call(out: &mut Vec<u8>) -> bool {
    let text = String::from_utf8_lossy(out).into_owned();
    let (_, calls) = prompt::parse_output(&text);
    let Some((last, earlier)) = calls.split_last() else {
        return false;
    };
    if !earlier
        .iter()
        .any(|c| c.name == last.name && c.arguments == last.arguments)
    {
        return false;
    }
    let open = grammar::CALL_OPEN.trim_end().as_bytes();
    if let Some(p) = out.windows(open.len()).rposition(|w| w == open) {
        let mut end = p;
        while end > 0 && out[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        out.truncate(end);
    }
    true
}

/// Whether the grammar in its current state admits `token` (checks just
/// that one candidate, which is cheap).
fn grammar_allows(g: &mut LlamaSampler, token: LlamaToken) -> bool {
    let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 1.0, 0.0)], false);
    g.apply(&mut one);
    one.data.first().is_some_and(|d| d.logit().is_finite())
}

//! The `embedded` backend: a small GGUF model run in-process on the CPU with
//! llama.cpp (crate `llama-cpp-2`, feature `embedded`).
//!
//! One worker thread owns the model and a context, and decodes up to
//! `parallel` requests together. A free slot goes to a waiting request of the
//! [group](crate::group) with the fewest requests in slots (the longest
//! waiting of those; [`Admission`]): a chain of dependent calls then waits
//! for a slot, not behind every request of the wide batches sent before it,
//! which under first-come order set the end of a run
//! (docs/log/2026-11-26-fair-share-admission.md).
//! Each request in flight is a llama.cpp
//! sequence (its own sequence id and KV cells, its own sampler chain and
//! grammar). Every step the worker evaluates at most one prompt chunk of one
//! request (prompts in admission order, each in its own `llama_decode`, chunked
//! exactly as if the request were alone), then one new token of every request
//! that is generating, all of them in one `llama_batch`. Prompts are rendered
//! by [`crate::prompt`] (ChatML, tools in the system turn); tool calls are
//! constrained by a grammar from [`crate::grammar`].
//!
//! Speed measures:
//! - **Batching**: on a CPU, one decode of N sequences' tokens costs far less
//!   than N decodes (the weights are read and dequantised once per step).
//! - **KV-cache prefix reuse**: every sequence slot remembers the tokens in its
//!   KV cells. There are more slots than requests decoded together
//!   (`cache_slots`, default four times `parallel`): the idle ones only keep
//!   their cells (least recently used evicted first when the `n_ctx` cells run
//!   short). A new request takes the free slot whose tokens all continue into
//!   its prompt (an agent's earlier turn), else an empty one, else the least
//!   recently used (`Worker::pick_slot`), and gets the longest prefix any slot
//!   holds, busy or not, with `llama_memory_seq_cp`: the KV cache is unified, so
//!   the cells are shared, not copied. Only the rest of the prompt is evaluated
//!   (system prompt + tool docs are usually shared, and an agent's next turn
//!   usually finds its whole conversation although other requests ran in
//!   between; on the default Table 4 grid 54% -> 58% of prompt tokens reused,
//!   docs/log/2026-11-26-table4-release-build-kv-reuse.md).
//! - **Grammar check on the chosen token first**: the unconstrained sampler
//!   picks a token, the grammar checks only that token, and the grammar runs
//!   over the whole vocabulary only when the token is rejected.
//! - **Speculative decoding** (optional, [`EmbeddedConfig::draft_model`]): a
//!   smaller model of the same family proposes tokens of greedy requests
//!   (`draft.rs`), and the model keeps those it would have chosen itself; off
//!   by default, as it lost on 2 cores
//!   (docs/log/2026-11-26-speculative-decoding.md).
//!
//! Sampling: temperature `None` or `<= 0` is greedy (deterministic); otherwise
//! top-k 40, top-p, temperature, seeded from `seed` and `sample_index`, with a
//! sampler per request, so batching never shares random state.
//!
//! Determinism: a request's sampler (and random state) is its own, and its
//! prompt is evaluated in `llama_decode` calls of its own, in the same chunks
//! as without batching. What batching can change is float rounding:
//! - in the mixed generation steps, llama.cpp's CPU kernels compute every
//!   row of a batch on its own, but not always with the same code as a lone
//!   row: `mul_mat` hands two or more rows of Q8_0/F16/F32 weights to
//!   llamafile's tinyBLAS and a single row to `vec_dot` (SmolLM2's tied
//!   output matrix is Q8_0), and repacked Q4_K weights (AVX2) go through
//!   GEMM in groups of four rows and GEMV otherwise;
//! - flash attention over a prompt chunk of 64 tokens or more works in
//!   tiles of 64 KV cells, so its rounding depends on where the sequence's
//!   cells lie in the shared cache, i.e. on what the other sequences hold
//!   (attention of fewer query rows skips other sequences' masked cells and
//!   accumulates the sequence's own cells in order, which does not depend
//!   on them);
//! - with more than one thread, a lone token attending over 512 cells or
//!   more has its attention split over the threads.
//!
//! So greedy answers agree unless two candidates are within rounding of each
//! other, while seeded sampling (which turns any logit difference into a
//! different cumulative probability) now and then picks another token. What
//! holds exactly: the same requests batched the same way give the same
//! answers. `tests/embedded.rs` checks both on SmolLM2.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

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

/// Most requests decoded together (llama.cpp allows 256 sequences).
pub const MAX_PARALLEL: u32 = 64;

/// Tokens the draft model proposes per request and step unless
/// `OTB_LLAMA_DRAFT_TOKENS` says otherwise (at most 16).
pub const DEFAULT_DRAFT_TOKENS: usize = 4;

mod admission;
mod bench;
mod draft;
mod kv;

use admission::next_in_line;
pub use admission::Admission;
pub use bench::{bench_depth, bench_raw, mean_sd, DepthBench, DepthRates, RawRates};
use draft::{Draft, Want};
use kv::{common_prefix, KvSeqs};

/// Settings of the embedded backend.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    /// The GGUF model file.
    pub model_path: PathBuf,
    /// Context window in tokens (capped at the model's training context),
    /// shared by all requests in flight and the cached prefixes.
    pub n_ctx: u32,
    /// Prompt evaluation batch size.
    pub n_batch: u32,
    /// CPU threads (default: all available).
    pub n_threads: i32,
    /// Requests decoded together in one batch (1 = one request at a time).
    pub parallel: u32,
    /// Sequences whose KV cells are kept for prefix reuse (at least
    /// `parallel`; the cells of all of them share the `n_ctx` cells): a
    /// conversation's next turn finds its earlier turns although other
    /// requests ran in between. `None`: four times `parallel`.
    pub cache_slots: Option<u32>,
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
    /// Speculative decoding: a smaller model of the same family (the same
    /// vocabulary, e.g. Qwen2.5-Coder-0.5B for the 1.5B) that proposes
    /// tokens of greedy requests for this model to check in one decode.
    /// Answers are this model's own either way. `None`: off.
    pub draft_model: Option<PathBuf>,
    /// Most tokens the draft model proposes per request and step.
    pub draft_tokens: u32,
    /// Which waiting request gets the next free slot.
    pub admission: Admission,
}

impl EmbeddedConfig {
    /// Defaults; `OTB_LLAMA_THREADS` sets the thread count,
    /// `OTB_LLAMA_PARALLEL` the number of requests decoded together
    /// (default 4), `OTB_LLAMA_CACHE_SLOTS` the sequences kept for prefix
    /// reuse (default four times `parallel`) and `OTB_LLAMA_ADMISSION`
    /// (`fair`, the default, or `fifo`) the order waiting requests get slots.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        let env_usize = |k: &str| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|n| *n > 0)
        };
        let threads = env_usize("OTB_LLAMA_THREADS").unwrap_or_else(default_threads);
        let parallel = env_usize("OTB_LLAMA_PARALLEL").unwrap_or(4);
        let draft_tokens = env_usize("OTB_LLAMA_DRAFT_TOKENS").unwrap_or(DEFAULT_DRAFT_TOKENS);
        EmbeddedConfig {
            model_path: model_path.into(),
            n_ctx: 8192,
            n_batch: 512,
            n_threads: i32::try_from(threads).unwrap_or(2),
            parallel: u32::try_from(parallel)
                .unwrap_or(MAX_PARALLEL)
                .min(MAX_PARALLEL),
            cache_slots: env_usize("OTB_LLAMA_CACHE_SLOTS")
                .map(|n| u32::try_from(n).unwrap_or(MAX_PARALLEL).min(MAX_PARALLEL)),
            default_max_tokens: 512,
            use_grammar: true,
            reuse_prefix: true,
            grammar_check_first: true,
            draft_model: None,
            draft_tokens: u32::try_from(draft_tokens).unwrap_or(16).min(16),
            admission: admission_from_env(),
        }
    }
}

/// `OTB_LLAMA_ADMISSION`, the default when unset; an unknown value is
/// reported and the default used.
fn admission_from_env() -> Admission {
    match std::env::var("OTB_LLAMA_ADMISSION") {
        Ok(v) => Admission::parse(&v).unwrap_or_else(|| {
            eprintln!("otb: warning: OTB_LLAMA_ADMISSION={v:?} is neither `fair` nor `fifo`; using `fair`");
            Admission::default()
        }),
        Err(_) => Admission::default(),
    }
}

/// Every core on machines with one or two (there the run does little beside
/// the model, and a second thread nearly halves a request's time: on a 2-core
/// Xeon, 11 s instead of 21 s for a 420-token tool-call request), else all but
/// one (the pipeline runs tool code and I/O beside the model, and ggml's
/// spinning threads degrade badly when they compete for cores).
fn default_threads() -> usize {
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if n > 2 {
        n - 1
    } else {
        n
    }
}

struct Job {
    req: ChatRequest,
    /// The sender's [group](crate::group).
    group: u64,
    reply: oneshot::Sender<Result<ChatResponse, LlmError>>,
}

/// Cumulative counters of an [`EmbeddedBackend`], for measurements
/// ([`EmbeddedBackend::metrics`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EmbeddedMetrics {
    /// Requests answered (successfully).
    pub requests: u64,
    /// Prompt tokens of those requests.
    pub prompt_tokens: u64,
    /// Of `prompt_tokens`, those already in the KV cache (prefix reuse) and
    /// so not evaluated.
    pub reused_tokens: u64,
    /// Time in `llama_decode` evaluating the other prompt tokens.
    pub prompt_eval: Duration,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Time spent generating them: sampling, grammar and the decode of each
    /// new token.
    pub generation: Duration,
    /// Part of `generation` spent in the grammar.
    pub grammar: Duration,
    /// Most requests decoded together in one generation step so far.
    pub max_batch: u32,
    /// Worker steps (one prompt chunk and/or one generation round each).
    pub steps: u64,
    /// Requests in slots summed over the steps: `step_seqs / steps` is the
    /// batch occupancy (mean requests in flight per decode step).
    pub step_seqs: u64,
    /// Generation rounds.
    pub gen_rounds: u64,
    /// Requests decoded summed over the generation rounds.
    pub gen_seqs: u64,
    /// Time the worker waited with no request at all.
    pub idle: Duration,
    /// Tokens the draft model proposed (speculative decoding).
    pub drafted: u64,
    /// Of those, the ones the model chose too (kept).
    pub accepted: u64,
}

impl EmbeddedMetrics {
    /// Prompt tokens evaluated per second (reused tokens excluded).
    pub fn prompt_tokens_per_s(&self) -> f64 {
        (self.prompt_tokens - self.reused_tokens) as f64 / self.prompt_eval.as_secs_f64().max(1e-9)
    }
    /// Generated tokens per second of generation time.
    pub fn generated_tokens_per_s(&self) -> f64 {
        self.generated_tokens as f64 / self.generation.as_secs_f64().max(1e-9)
    }
    /// The counters accumulated since `earlier`.
    pub fn since(&self, earlier: &EmbeddedMetrics) -> EmbeddedMetrics {
        EmbeddedMetrics {
            requests: self.requests - earlier.requests,
            prompt_tokens: self.prompt_tokens - earlier.prompt_tokens,
            reused_tokens: self.reused_tokens - earlier.reused_tokens,
            prompt_eval: self.prompt_eval.saturating_sub(earlier.prompt_eval),
            generated_tokens: self.generated_tokens - earlier.generated_tokens,
            generation: self.generation.saturating_sub(earlier.generation),
            grammar: self.grammar.saturating_sub(earlier.grammar),
            max_batch: self.max_batch,
            steps: self.steps - earlier.steps,
            step_seqs: self.step_seqs - earlier.step_seqs,
            gen_rounds: self.gen_rounds - earlier.gen_rounds,
            gen_seqs: self.gen_seqs - earlier.gen_seqs,
            idle: self.idle.saturating_sub(earlier.idle),
            drafted: self.drafted - earlier.drafted,
            accepted: self.accepted - earlier.accepted,
        }
    }

    /// Mean requests in flight per worker step (the batch occupancy; at most
    /// `parallel`).
    pub fn occupancy(&self) -> f64 {
        self.step_seqs as f64 / (self.steps as f64).max(1.0)
    }

    /// Mean requests decoded together per generation round.
    pub fn generation_batch(&self) -> f64 {
        self.gen_seqs as f64 / (self.gen_rounds as f64).max(1.0)
    }

    /// One line for the end of a run: where the model's time went.
    pub fn summary(&self) -> String {
        let evaluated = self.prompt_tokens - self.reused_tokens;
        format!(
            "{} requests; prompt {} tokens ({} reused from the KV cache, {} evaluated in {:.0} s, {:.1} tokens/s); generated {} tokens in {:.0} s ({:.1} tokens/s, grammar {:.0} s); {:.2} requests in flight per step, {:.2} per generation round; idle {:.0} s",
            self.requests,
            self.prompt_tokens,
            self.reused_tokens,
            evaluated,
            self.prompt_eval.as_secs_f64(),
            self.prompt_tokens_per_s(),
            self.generated_tokens,
            self.generation.as_secs_f64(),
            self.generated_tokens_per_s(),
            self.grammar.as_secs_f64(),
            self.occupancy(),
            self.generation_batch(),
            self.idle.as_secs_f64(),
        ) + &if self.drafted > 0 {
            format!(
                "; draft model: {} tokens proposed, {} kept ({:.0}%)",
                self.drafted,
                self.accepted,
                100.0 * self.accepted as f64 / self.drafted as f64
            )
        } else {
            String::new()
        }
    }
}

/// In-process llama.cpp backend (see the module docs).
pub struct EmbeddedBackend {
    jobs: Mutex<mpsc::Sender<Job>>,
    metrics: Arc<Mutex<EmbeddedMetrics>>,
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
        let metrics = Arc::new(Mutex::new(EmbeddedMetrics::default()));
        let m = metrics.clone();
        std::thread::Builder::new()
            .name("otb-embedded-llm".into())
            .spawn(move || worker(cfg, ready_tx, rx, m))
            .map_err(|e| fatal(format!("spawning the model thread: {e}")))?;
        ready_rx
            .recv()
            .map_err(|_| fatal("the model thread died while loading"))??;
        Ok(EmbeddedBackend {
            jobs: Mutex::new(tx),
            metrics,
        })
    }

    /// The counters so far (see [`EmbeddedMetrics`]).
    pub fn metrics(&self) -> EmbeddedMetrics {
        self.metrics.lock().map(|m| *m).unwrap_or_default()
    }
}

impl Backend for EmbeddedBackend {
    fn chat<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let (reply, rx) = oneshot::channel();
            let job = Job {
                req: req.clone(),
                group: crate::group::current_or_new(),
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

    fn metrics_summary(&self) -> Option<String> {
        Some(self.metrics().summary())
    }

    fn revision(&self) -> Option<u32> {
        Some(crate::EMBEDDED_REVISION)
    }
}

/// The context the worker decodes in: `n_seq` sequences over one unified KV
/// cache of `n_ctx` cells (so a request may use the whole context and
/// sequences can share prefix cells), prompts in batches of `n_batch`.
/// [`bench_raw`] measures this very configuration.
fn context_params(cfg: &EmbeddedConfig, n_ctx: u32, n_seq: u32) -> LlamaContextParams {
    let n_batch = cfg.n_batch.max(1);
    LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(n_batch)
        .with_n_ubatch(n_batch)
        .with_n_seq_max(n_seq)
        .with_kv_unified(true)
        .with_n_threads(cfg.n_threads)
        .with_n_threads_batch(cfg.n_threads)
}

/// Loads a GGUF file.
fn load_model(backend: &LlamaBackend, path: &std::path::Path) -> Result<LlamaModel, LlmError> {
    LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
        .map_err(|e| fatal(format!("loading {}: {e}", path.display())))
}

/// Whether `draft` can propose tokens for `model`: the same vocabulary (size
/// and the tokens of a chat turn).
fn check_draft(
    model: &LlamaModel,
    draft: &LlamaModel,
    path: &std::path::Path,
) -> Result<(), LlmError> {
    let probe = "<|im_start|>user\nCall get_weather(city=\"Paris\") {\"a\": [1, 2]}<|im_end|>";
    let ids = |m: &LlamaModel| m.vocab().tokenize(probe.as_bytes(), false, true);
    if model.n_vocab() != draft.n_vocab() || ids(model) != ids(draft) {
        return Err(fatal(format!(
            "draft model {} does not share the model's vocabulary ({} tokens vs {}); speculative decoding needs a model of the same family",
            path.display(),
            draft.n_vocab(),
            model.n_vocab()
        )));
    }
    Ok(())
}

fn worker(
    cfg: EmbeddedConfig,
    ready: mpsc::Sender<Result<(), LlmError>>,
    jobs: mpsc::Receiver<Job>,
    metrics: Arc<Mutex<EmbeddedMetrics>>,
) {
    let setup = || -> Result<(LlamaModel, Option<LlamaModel>, &'static LlamaBackend), LlmError> {
        let backend = llama_backend()?;
        let model = load_model(backend, &cfg.model_path)?;
        let draft = match &cfg.draft_model {
            Some(p) => {
                let d = load_model(backend, p)?;
                check_draft(&model, &d, p)?;
                Some(d)
            }
            None => None,
        };
        Ok((model, draft, backend))
    };
    let (model, draft_model, backend) = match setup() {
        Ok(x) => x,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let n_ctx = cfg.n_ctx.min(model.n_ctx_train()).max(256);
    let n_batch = cfg.n_batch.max(1);
    let parallel = cfg.parallel.clamp(1, MAX_PARALLEL).min(n_batch);
    let n_seq = cfg
        .cache_slots
        .unwrap_or(4 * parallel)
        .clamp(parallel, MAX_PARALLEL);
    let ctx = match model.new_context(backend, context_params(&cfg, n_ctx, n_seq)) {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(fatal(format!("creating a llama.cpp context: {e}"))));
            return;
        }
    };
    let max_draft = (cfg.draft_tokens as usize).min(16);
    let draft = match &draft_model {
        Some(d) if max_draft > 0 => {
            // Room for every sequence's proposals beside what the target holds.
            let cells = n_ctx + n_seq * (max_draft as u32 + 1);
            match d.new_context(backend, context_params(&cfg, cells, n_seq)) {
                Ok(c) => Some(Draft::new(
                    d,
                    c,
                    n_seq as usize,
                    n_batch as usize,
                    max_draft,
                )),
                Err(e) => {
                    let _ = ready.send(Err(fatal(format!(
                        "creating the draft model's llama.cpp context: {e}"
                    ))));
                    return;
                }
            }
        }
        _ => None,
    };
    let _ = ready.send(Ok(()));
    let mut w = Worker {
        model: &model,
        ctx,
        cfg: &cfg,
        n_ctx: n_ctx as usize,
        n_batch: n_batch as usize,
        parallel: parallel as usize,
        slots: (0..n_seq).map(|_| Slot::default()).collect(),
        kv: KvSeqs::new(n_seq as usize),
        draft,
        seqs: Vec::new(),
        waiting: VecDeque::new(),
        batch: LlamaBatch::new(n_batch as usize, 1),
        clock: 0,
        generation: Duration::ZERO,
        metrics: &metrics,
        stats: std::env::var_os("OTB_LLAMA_STATS").is_some(),
    };
    w.run(&jobs);
}

/// One llama.cpp sequence (its id is the slot's index) and what its KV
/// cells hold.
#[derive(Default)]
struct Slot {
    /// Whether a request is using the slot.
    busy: bool,
    /// KV cells the request in the slot may come to hold (for admission).
    reserved: usize,
    /// When the slot was last assigned or released (for eviction).
    last_used: u64,
}

/// A request: waiting for a slot, evaluating its prompt, or generating.
struct Seq {
    reply: oneshot::Sender<Result<ChatResponse, LlmError>>,
    /// The sender's [group](crate::group) (for admission).
    group: u64,
    slot: usize,
    tokens: Vec<LlamaToken>,
    /// Answer plain text (no tools offered, or tool_choice none).
    plain_text: bool,
    /// Greedy sampling (the draft model proposes tokens only then).
    greedy: bool,
    max_new: u32,
    grammar: Option<LlamaSampler>,
    chain: LlamaSampler,
    /// Prompt tokens in the KV cache; `None` until the prefix was matched.
    evaluated: Option<usize>,
    reused: usize,
    out: Vec<u8>,
    n_gen: u32,
    /// The last sampled token, to be decoded in the next generation step.
    next: Option<LlamaToken>,
    /// Finish reason, or the error that ended the request.
    done: Option<Result<&'static str, LlmError>>,
    start: Instant,
    prompt_eval: Duration,
    grammar_time: Duration,
    grammar_full_passes: u32,
}

impl Seq {
    fn prefilling(&self) -> bool {
        self.done.is_none() && self.evaluated.is_none_or(|e| e < self.tokens.len())
    }
}

struct Worker<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    cfg: &'m EmbeddedConfig,
    n_ctx: usize,
    n_batch: usize,
    /// Most requests in slots at once (the other slots only keep cells).
    parallel: usize,
    slots: Vec<Slot>,
    /// What each slot's sequence holds in the KV cache.
    kv: KvSeqs,
    /// The draft model, when speculative decoding is on.
    draft: Option<Draft<'m>>,
    /// Requests in slots, in admission order.
    seqs: Vec<Seq>,
    /// Prepared requests waiting for a slot or for room in the KV cache.
    waiting: VecDeque<Seq>,
    batch: LlamaBatch<'static>,
    clock: u64,
    /// Generation time not yet added to the metrics.
    generation: Duration,
    metrics: &'m Mutex<EmbeddedMetrics>,
    stats: bool,
}

fn decode_error(e: impl std::fmt::Display) -> LlmError {
    LlmError::new(
        ErrorKind::Transient,
        format!("llama.cpp decode failed: {e}"),
    )
}

impl Worker<'_> {
    fn run(&mut self, jobs: &mpsc::Receiver<Job>) {
        let mut open = true;
        loop {
            if self.seqs.is_empty() && self.waiting.is_empty() {
                if !open {
                    return;
                }
                let t = Instant::now();
                let job = jobs.recv();
                if let Ok(mut m) = self.metrics.lock() {
                    m.idle += t.elapsed();
                }
                match job {
                    Ok(job) => self.intake(job),
                    Err(_) => return,
                }
            }
            while open {
                match jobs.try_recv() {
                    Ok(job) => self.intake(job),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => open = false,
                }
            }
            self.admit();
            self.step();
            self.finish();
        }
    }

    /// Tokenizes the prompt and builds the samplers; a request that cannot
    /// run is answered at once.
    fn intake(&mut self, job: Job) {
        match self.prepare(&job.req) {
            Ok(parts) => self.waiting.push_back(Seq {
                reply: job.reply,
                group: job.group,
                slot: 0,
                tokens: parts.tokens,
                plain_text: job.req.tools.is_empty() || job.req.tool_choice == ToolChoice::None,
                greedy: job.req.sampling.temperature().unwrap_or(0.0) <= 0.0,
                max_new: parts.max_new,
                grammar: parts.grammar,
                chain: parts.chain,
                evaluated: None,
                reused: 0,
                out: Vec::new(),
                n_gen: 0,
                next: None,
                done: None,
                start: parts.start,
                prompt_eval: Duration::ZERO,
                grammar_time: Duration::ZERO,
                grammar_full_passes: 0,
            }),
            Err(e) => {
                let _ = job.reply.send(Err(e));
            }
        }
    }

    fn prepare(&self, req: &ChatRequest) -> Result<Prepared, LlmError> {
        let start = Instant::now();
        let text = prompt::render_chatml(req);
        let tokens = self.model.vocab().tokenize(text.as_bytes(), true, true);
        if tokens.is_empty() {
            return Err(fatal("empty prompt"));
        }
        let max_new = req
            .sampling
            .max_output_tokens()
            .unwrap_or(self.cfg.default_max_tokens);
        if tokens.len() + max_new as usize > self.n_ctx {
            return Err(LlmError::new(
                ErrorKind::ContextOverflow,
                format!(
                    "prompt of {} tokens plus {max_new} output tokens exceeds the context of {} tokens",
                    tokens.len(),
                    self.n_ctx
                ),
            ));
        }
        let grammar_text = if self.cfg.use_grammar {
            grammar::tool_call_grammar(&req.tools, &req.tool_choice).map_err(fatal)?
        } else {
            None
        };
        let grammar = match &grammar_text {
            Some(g) => Some(
                LlamaSampler::grammar(self.model, g, "root")
                    .map_err(|e| fatal(format!("tool-call grammar rejected by llama.cpp: {e}")))?,
            ),
            None => None,
        };
        let temperature = req.sampling.temperature().unwrap_or(0.0);
        // A repetition penalty (standard sampling only; 1.0 is none) comes first in
        // the chain, over the last 64 tokens the sequence generated.
        let penalty = match (&req.sampling, req.repetition_penalty) {
            (crate::types::Sampling::Standard { .. }, Some(p)) if p > 0.0 && p != 1.0 => Some(
                LlamaSampler::penalties(self.model.n_vocab(), 64, p as f32, 0.0, 0.0),
            ),
            _ => None,
        };
        let chain = if temperature <= 0.0 {
            match penalty {
                Some(p) => LlamaSampler::chain_simple([p, LlamaSampler::greedy()]),
                None => LlamaSampler::greedy(),
            }
        } else {
            let top_p = match &req.sampling {
                crate::types::Sampling::Standard { top_p: Some(p), .. } => *p as f32,
                _ => 1.0,
            };
            let seed = req.seed.unwrap_or(0)
                ^ (u64::from(req.sample_index).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut parts: Vec<LlamaSampler> = penalty.into_iter().collect();
            parts.extend([
                LlamaSampler::top_k(40),
                LlamaSampler::top_p(top_p, 1),
                LlamaSampler::temp(temperature as f32),
                LlamaSampler::dist((seed ^ (seed >> 32)) as u32),
            ]);
            LlamaSampler::chain_simple(parts)
        };
        Ok(Prepared {
            tokens,
            max_new,
            grammar,
            chain,
            start,
        })
    }

    /// Moves waiting requests into free slots while the KV cache has room,
    /// in the order [`EmbeddedConfig::admission`] says. A request that does
    /// not fit yet is not passed over (it would wait for ever behind smaller
    /// ones).
    fn admit(&mut self) {
        while self.seqs.len() < self.parallel {
            let next = match self.cfg.admission {
                Admission::Fifo => 0,
                Admission::FairShare => next_in_line(
                    self.waiting.iter().map(|s| s.group),
                    self.seqs.iter().map(|s| s.group),
                )
                .unwrap_or(0),
            };
            let Some(front) = self.waiting.get(next) else {
                return;
            };
            let Some(slot) = self.pick_slot(&front.tokens) else {
                return;
            };
            // Rejected draft tokens hold cells until the verification ends.
            let need = front.tokens.len() + front.max_new as usize + self.draft_room();
            if !self.make_room(slot, need) {
                return;
            }
            let Some(mut seq) = self.waiting.remove(next) else {
                return;
            };
            self.clock += 1;
            let s = &mut self.slots[slot];
            s.busy = true;
            s.reserved = need.max(self.kv.cached[slot].len());
            s.last_used = self.clock;
            seq.slot = slot;
            self.seqs.push(seq);
        }
    }

    /// The free slot for a request with prompt `tokens`: the one whose cached
    /// tokens all continue into the prompt (a conversation's earlier turn; the
    /// longest), else an empty one, else the least recently used. Taking a
    /// slot drops what it holds beyond the common prefix, while a prefix
    /// another slot holds is shared at no cost ([`KvSeqs::reuse`]), so a slot
    /// is never taken for the few template tokens it shares.
    fn pick_slot(&self, tokens: &[LlamaToken]) -> Option<usize> {
        let free = || self.slots.iter().enumerate().filter(|(_, s)| !s.busy);
        let lru = free().min_by_key(|(_, s)| s.last_used).map(|(i, _)| i);
        if !self.cfg.reuse_prefix {
            return lru;
        }
        let cached = |i: usize| &self.kv.cached[i];
        free()
            .filter(|(i, _)| {
                !cached(*i).is_empty() && common_prefix(cached(*i), tokens) == cached(*i).len()
            })
            .max_by_key(|(i, _)| cached(*i).len())
            .or_else(|| free().find(|(i, _)| cached(*i).is_empty()))
            .map(|(i, _)| i)
            .or(lru)
    }

    /// Frees cached prefixes of idle slots (least recently used first) until
    /// a request needing `need` cells fits in `slot`. False when it must
    /// wait for requests in flight to finish. (Cells shared by several
    /// sequences are counted once per sequence, so this errs on the safe side.)
    fn make_room(&mut self, slot: usize, need: usize) -> bool {
        loop {
            let others: usize = self
                .slots
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != slot)
                .map(|(i, s)| {
                    if s.busy {
                        s.reserved
                    } else {
                        self.kv.cached[i].len()
                    }
                })
                .sum();
            let own = need.max(self.kv.cached[slot].len());
            if others + own <= self.n_ctx {
                return true;
            }
            let victim = self
                .slots
                .iter()
                .enumerate()
                .filter(|(i, s)| *i != slot && !s.busy && !self.kv.cached[*i].is_empty())
                .min_by_key(|(_, s)| s.last_used)
                .map(|(i, _)| i);
            match victim {
                Some(v) => self.forget(v),
                None if own > need => self.forget(slot),
                None => return false,
            }
        }
    }

    /// Drops the KV cells of `slot`'s sequence (the draft model's too).
    fn forget(&mut self, slot: usize) {
        self.kv.forget(&mut self.ctx, slot);
        if let Some(d) = self.draft.as_mut() {
            d.forget(slot);
        }
    }

    /// One step: a prompt chunk of the oldest request still evaluating its
    /// prompt, then one token for every generating request.
    fn step(&mut self) {
        if !self.seqs.is_empty() {
            if let Ok(mut m) = self.metrics.lock() {
                m.steps += 1;
                m.step_seqs += self.seqs.len() as u64;
            }
        }
        if let Some(i) = self.seqs.iter().position(Seq::prefilling) {
            self.prefill_chunk(i);
        }
        self.generate_round();
    }

    /// Puts the longest cached prefix of request `i`'s prompt into its
    /// sequence (its own slot's, or a copy of another slot's) and returns
    /// its length.
    fn match_prefix(&mut self, i: usize) -> usize {
        let slot = self.seqs[i].slot;
        if !self.cfg.reuse_prefix {
            self.forget(slot);
            return 0;
        }
        // Keep at least one token to evaluate, so there are fresh logits.
        let tokens = &self.seqs[i].tokens;
        self.kv.reuse(&mut self.ctx, slot, tokens, tokens.len() - 1)
    }

    /// Evaluates the next chunk of request `i`'s prompt (the same chunks as
    /// without batching: `n_batch` tokens from the reused prefix on) and,
    /// after the last one, samples its first token.
    fn prefill_chunk(&mut self, i: usize) {
        let start = match self.seqs[i].evaluated {
            Some(e) => e,
            None => {
                let common = self.match_prefix(i);
                let seq = &mut self.seqs[i];
                seq.evaluated = Some(common);
                seq.reused = common;
                common
            }
        };
        let seq = &mut self.seqs[i];
        let end = (start + self.n_batch).min(seq.tokens.len());
        self.batch.clear();
        for (p, t) in seq.tokens.iter().enumerate().take(end).skip(start) {
            let last = p + 1 == seq.tokens.len();
            if let Err(e) = self.batch.add(*t, p as i32, &[seq.slot as i32], last) {
                seq.done = Some(Err(fatal(format!("batch: {e}"))));
                return;
            }
        }
        let t = Instant::now();
        if let Err(e) = self.ctx.decode(&mut self.batch) {
            seq.done = Some(Err(decode_error(e)));
            return;
        }
        seq.prompt_eval += t.elapsed();
        self.kv.cached[seq.slot].extend_from_slice(&seq.tokens[start..end]);
        seq.evaluated = Some(end);
        if end == seq.tokens.len() {
            let t = Instant::now();
            sample_next(
                seq,
                &self.ctx,
                self.model,
                self.cfg,
                (end - start - 1) as i32,
            );
            self.generation += t.elapsed();
        }
    }

    /// Cells a request's rejected draft tokens may hold for a moment.
    fn draft_room(&self) -> usize {
        self.draft.as_ref().map_or(0, |d| d.max)
    }

    /// The draft model's proposals for the generating requests `active`
    /// (nothing for requests that sample, or without a draft model).
    fn proposals(&mut self, active: &[usize]) -> Vec<Vec<LlamaToken>> {
        let Some(draft) = self.draft.as_mut() else {
            return vec![Vec::new(); active.len()];
        };
        // Every request's token and proposals fit one batch.
        let per = (self.n_batch / active.len().max(1))
            .saturating_sub(1)
            .min(draft.max);
        let wants: Vec<Want> = active
            .iter()
            .map(|&i| {
                let seq = &self.seqs[i];
                let mut tokens = Vec::new();
                let mut n = 0;
                if let (true, Some(next)) = (seq.greedy, seq.next) {
                    n = per.min(seq.max_new.saturating_sub(seq.n_gen) as usize);
                    if n > 0 {
                        tokens.reserve(self.kv.cached[seq.slot].len() + 1);
                        tokens.extend_from_slice(&self.kv.cached[seq.slot]);
                        tokens.push(next);
                    }
                }
                Want {
                    slot: seq.slot,
                    tokens,
                    n,
                }
            })
            .collect();
        draft.propose(&wants)
    }

    /// Decodes the last sampled token of every generating request in one
    /// batch and samples the next ones. With a draft model, a greedy
    /// request's token goes in with the draft's proposals after it; the
    /// model samples from each of their rows in turn, as it would have after
    /// decoding them one by one, for as long as its choice equals the next
    /// proposal, and the cells of the proposals it did not choose are
    /// dropped.
    fn generate_round(&mut self) {
        let active: Vec<usize> = (0..self.seqs.len())
            .filter(|&i| self.seqs[i].done.is_none() && self.seqs[i].next.is_some())
            .collect();
        if active.is_empty() {
            return;
        }
        let t = Instant::now();
        let drafts = self.proposals(&active);
        self.batch.clear();
        let mut first_rows = Vec::with_capacity(active.len());
        for (a, &i) in active.iter().enumerate() {
            let seq = &mut self.seqs[i];
            let (Some(token), slot) = (seq.next, seq.slot) else {
                first_rows.push(None);
                continue;
            };
            let pos = self.kv.cached[slot].len();
            let first = self.batch.n_tokens();
            let tokens = std::iter::once(token).chain(drafts[a].iter().copied());
            for (j, t) in tokens.enumerate() {
                if let Err(e) = self.batch.add(t, (pos + j) as i32, &[slot as i32], true) {
                    seq.done = Some(Err(fatal(format!("batch: {e}"))));
                    break;
                }
            }
            first_rows.push(Some(first));
        }
        if let Err(e) = self.ctx.decode(&mut self.batch) {
            let msg = decode_error(e).message;
            for &i in &active {
                let seq = &mut self.seqs[i];
                if seq.done.is_none() {
                    seq.done = Some(Err(LlmError::new(ErrorKind::Transient, msg.clone())));
                }
            }
            return;
        }
        let (mut drafted, mut accepted) = (0u64, 0u64);
        for (a, &i) in active.iter().enumerate() {
            let seq = &mut self.seqs[i];
            let Some(first) = first_rows[a] else { continue };
            if seq.done.is_some() {
                continue;
            }
            let slot = seq.slot;
            let proposed = &drafts[a];
            drafted += proposed.len() as u64;
            let mut row = first;
            while let Some(token) = seq.next.take() {
                self.kv.cached[slot].push(token);
                sample_next(seq, &self.ctx, self.model, self.cfg, row);
                let j = (row - first) as usize;
                match (seq.done.is_none(), seq.next, proposed.get(j)) {
                    (true, Some(n), Some(p)) if n == *p => {
                        accepted += 1;
                        row += 1;
                    }
                    _ => break,
                }
            }
            if !proposed.is_empty() {
                // The cells of the proposals not chosen (and of those after a
                // finish) go; the sequence holds exactly its tokens again.
                let keep = self.kv.cached[slot].len() as u32;
                let cut = self
                    .ctx
                    .clear_kv_cache_seq(Some(slot as u32), Some(keep), None)
                    .unwrap_or(false);
                if !cut && seq.done.is_none() {
                    seq.done = Some(Err(fatal(
                        "could not drop rejected draft tokens from the KV cache",
                    )));
                }
            }
        }
        if let Ok(mut m) = self.metrics.lock() {
            m.max_batch = m.max_batch.max(active.len() as u32);
            m.gen_rounds += 1;
            m.gen_seqs += active.len() as u64;
            m.drafted += drafted;
            m.accepted += accepted;
        }
        self.generation += t.elapsed();
    }

    /// Answers the requests that are done and frees their slots.
    fn finish(&mut self) {
        let mut i = 0;
        while i < self.seqs.len() {
            if self.seqs[i].done.is_none() {
                i += 1;
                continue;
            }
            let seq = self.seqs.remove(i);
            self.clock += 1;
            let slot = seq.slot;
            self.slots[slot].busy = false;
            self.slots[slot].reserved = 0;
            self.slots[slot].last_used = self.clock;
            let out = match seq.done {
                Some(Ok(reason)) => {
                    if !self.cfg.reuse_prefix {
                        // Nothing will reuse the cells: free them, so the next
                        // prompt lies where it would without batching.
                        self.forget(slot);
                    }
                    self.respond(&seq, reason).checked()
                }
                Some(Err(e)) => {
                    // Unknown KV state after a failure: drop the sequence.
                    self.forget(slot);
                    Err(e)
                }
                None => Err(fatal("request ended without a result")),
            };
            let _ = seq.reply.send(out);
        }
    }

    fn respond(&mut self, seq: &Seq, finish: &'static str) -> ChatResponse {
        let text = String::from_utf8_lossy(&seq.out).into_owned();
        let (content, tool_calls) = if seq.plain_text {
            let t = text.trim();
            ((!t.is_empty()).then(|| t.to_owned()), Vec::new())
        } else {
            prompt::parse_output(&text)
        };
        if let Ok(mut m) = self.metrics.lock() {
            m.requests += 1;
            m.prompt_tokens = m.prompt_tokens.saturating_add(seq.tokens.len() as u64);
            m.reused_tokens = m.reused_tokens.saturating_add(seq.reused as u64);
            m.prompt_eval += seq.prompt_eval;
            m.generated_tokens = m.generated_tokens.saturating_add(u64::from(seq.n_gen));
            m.generation += std::mem::take(&mut self.generation);
            m.grammar += seq.grammar_time;
        }
        if self.stats {
            eprintln!(
                "embedded: prompt {} tokens (reused {}, evaluated in {} ms), generated {} in {} ms (grammar {} ms, full grammar passes {}), {} in flight",
                seq.tokens.len(),
                seq.reused,
                seq.prompt_eval.as_millis(),
                seq.n_gen,
                seq.start.elapsed().as_millis(),
                seq.grammar_time.as_millis(),
                seq.grammar_full_passes,
                self.seqs.len() + 1
            );
        }
        let finish_reason = if finish == "stop" && !tool_calls.is_empty() {
            "tool_calls"
        } else {
            finish
        };
        ChatResponse {
            content,
            tool_calls,
            usage: Usage {
                prompt: seq.tokens.len() as u64,
                completion: u64::from(seq.n_gen),
                reasoning: 0,
            },
            latency_ms: seq.start.elapsed().as_millis() as u64,
            finish_reason: Some(finish_reason.into()),
        }
    }
}

/// What [`Worker::prepare`] builds for a request.
struct Prepared {
    tokens: Vec<LlamaToken>,
    max_new: u32,
    grammar: Option<LlamaSampler>,
    chain: LlamaSampler,
    start: Instant,
}

/// Samples request `seq`'s next token from the logits of batch row `row`:
/// either stores it in `seq.next` or marks the request done.
fn sample_next(
    seq: &mut Seq,
    ctx: &LlamaContext<'_>,
    model: &LlamaModel,
    cfg: &EmbeddedConfig,
    row: i32,
) {
    if let Err(e) = try_sample_next(seq, ctx, model, cfg, row) {
        seq.done = Some(Err(e));
    }
}

fn try_sample_next(
    seq: &mut Seq,
    ctx: &LlamaContext<'_>,
    model: &LlamaModel,
    cfg: &EmbeddedConfig,
    row: i32,
) -> Result<(), LlmError> {
    if seq.n_gen >= seq.max_new {
        seq.done = Some(Ok("length"));
        return Ok(());
    }
    let vocab = model.vocab();
    let mut cand = ctx.token_data_array_ith(row);
    let token = match seq.grammar.as_mut() {
        None => {
            seq.chain.apply(&mut cand);
            cand.selected_token()
                .ok_or_else(|| fatal("sampler selected no token"))?
        }
        Some(g) => {
            let g_start = Instant::now();
            let fast = if cfg.grammar_check_first {
                let mut trial = cand.clone();
                seq.chain.apply(&mut trial);
                trial.selected_token().filter(|t| grammar_allows(g, *t))
            } else {
                None
            };
            let t = match fast {
                Some(t) => t,
                None => {
                    seq.grammar_full_passes += 1;
                    g.apply(&mut cand);
                    seq.chain.apply(&mut cand);
                    // A token the grammar rejects must never reach `accept`
                    // (llama.cpp throws there, and an exception cannot cross
                    // into Rust): a dead end of the grammar is the answer's
                    // failure, not the process's.
                    cand.selected
                        .and_then(|i| cand.data.get(i))
                        .filter(|d| d.logit().is_finite())
                        .map(|d| d.id())
                        .ok_or_else(|| {
                            LlmError::new(
                                ErrorKind::Malformed,
                                "the tool-call grammar admits no token here",
                            )
                        })?
                }
            };
            seq.grammar_time += g_start.elapsed();
            t
        }
    };
    if vocab.is_eog(token) {
        seq.done = Some(Ok("stop"));
        return Ok(());
    }
    if let Some(g) = seq.grammar.as_mut() {
        g.accept(token);
    }
    seq.chain.accept(token);
    seq.out
        .extend_from_slice(&vocab.token_to_piece(token, true, None));
    seq.n_gen += 1;
    if seq.out.ends_with(b"<|im_end|>") {
        let n = seq.out.len() - b"<|im_end|>".len();
        seq.out.truncate(n);
        seq.done = Some(Ok("stop"));
        return Ok(());
    }
    if seq.grammar.is_some()
        && seq.out.ends_with(grammar::CALL_CLOSE.as_bytes())
        && repeats_last_call(&mut seq.out)
    {
        // Small models loop on the same call; one is enough.
        seq.done = Some(Ok("stop"));
        return Ok(());
    }
    seq.next = Some(token);
    Ok(())
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

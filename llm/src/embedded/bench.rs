//! Prompt-processing and generation rates of the backend's own llama.cpp
//! configuration, measured the way llama.cpp's `llama-bench` measures them,
//! so that the two can be compared on one GGUF file and thread count
//! (`scripts/bench-llama.sh`).
//!
//! As `llama-bench` does: one warm-up run of each test first; `pp N` decodes
//! N pseudo-random tokens (the first one the BOS token) in batches of
//! `n_batch` from an empty KV cache; `tg N` decodes N tokens one at a time
//! from an empty cache; the cache is cleared before each repetition and each
//! rate is N over the repetition's time. What differs is only what the
//! backend itself sets: its context (the unified cache of `n_ctx` cells for
//! `parallel` sequences, `n_batch` = `n_ubatch`) and its threads.

use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;

use super::{context_params, llama_backend, load_model, EmbeddedConfig, MAX_PARALLEL};
use crate::error::LlmError;

/// Rates of each repetition, in tokens per second.
#[derive(Debug, Clone, Default)]
pub struct RawRates {
    /// Prompt processing (`pp`), one rate per repetition.
    pub prompt: Vec<f64>,
    /// Generation (`tg`), one rate per repetition.
    pub generation: Vec<f64>,
}

/// Mean and sample standard deviation.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len().max(1) as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = if xs.len() > 1 {
        xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

/// Pseudo-random tokens below `n_vocab` (llama-bench draws them with `rand()`;
/// any fixed sequence will do).
fn random_tokens(n_vocab: u64) -> impl FnMut() -> LlamaToken {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        LlamaToken::new((state % n_vocab) as i32)
    }
}

/// Measures `pp n_prompt` and `tg n_gen` (`reps` repetitions each, after a
/// warm-up) on the model of `cfg`, in the context the backend would create.
pub fn bench_raw(
    cfg: &EmbeddedConfig,
    n_prompt: usize,
    n_gen: usize,
    reps: usize,
) -> Result<RawRates, LlmError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| super::fatal(format!("{what}: {e}"));
    let backend = llama_backend()?;
    let model = load_model(backend, &cfg.model_path)?;
    let n_ctx = cfg.n_ctx.min(model.n_ctx_train()).max(256);
    let n_batch = cfg.n_batch.max(1) as usize;
    let n_seq = cfg.parallel.clamp(1, MAX_PARALLEL).min(n_batch as u32);
    let mut ctx = model
        .new_context(backend, context_params(cfg, n_ctx, n_seq))
        .map_err(|e| fail("creating a llama.cpp context", &e))?;
    let n_vocab = model.n_vocab().max(1) as u64;
    let bos = model.vocab().bos();
    let bos = if bos.0 < 0 { LlamaToken::new(1) } else { bos };
    let mut random = random_tokens(n_vocab);
    let mut batch = LlamaBatch::new(n_batch, 1);
    let mut prompt = |ctx: &mut LlamaContext<'_>, n: usize| {
        let mut pos = 0;
        while pos < n {
            batch.clear();
            let end = (pos + n_batch).min(n);
            for p in pos..end {
                let t = if p == 0 { bos } else { random() };
                batch
                    .add(t, p as i32, &[0], p + 1 == end)
                    .map_err(|e| fail("batch", &e))?;
            }
            ctx.decode(&mut batch).map_err(|e| fail("decode", &e))?;
            pos = end;
        }
        ctx.synchronize();
        Ok::<(), LlmError>(())
    };
    let mut one = LlamaBatch::new(1, 1);
    let mut generate = |ctx: &mut LlamaContext<'_>, n: usize| {
        let mut t = bos;
        for p in 0..n {
            one.clear();
            one.add(t, p as i32, &[0], true)
                .map_err(|e| fail("batch", &e))?;
            ctx.decode(&mut one).map_err(|e| fail("decode", &e))?;
            ctx.synchronize();
            t = LlamaToken::new((p as i32 * 7919 + 13) % n_vocab as i32);
        }
        Ok::<(), LlmError>(())
    };
    // A warm-up run, then `reps` timed runs of `n` tokens from an empty cache.
    let repeat = |ctx: &mut LlamaContext<'_>,
                  n: usize,
                  warm_up: usize,
                  run: &mut dyn FnMut(&mut LlamaContext<'_>, usize) -> Result<(), LlmError>|
     -> Result<Vec<f64>, LlmError> {
        ctx.clear_kv_cache();
        run(ctx, warm_up)?;
        let mut rates = Vec::with_capacity(reps);
        for _ in 0..reps {
            ctx.clear_kv_cache();
            let t = Instant::now();
            run(ctx, n)?;
            rates.push(n as f64 / t.elapsed().as_secs_f64());
        }
        Ok(rates)
    };
    let mut rates = RawRates::default();
    if n_prompt > 0 {
        rates.prompt = repeat(&mut ctx, n_prompt, n_prompt.min(n_batch), &mut prompt)?;
    }
    if n_gen > 0 {
        rates.generation = repeat(&mut ctx, n_gen, 1, &mut generate)?;
    }
    Ok(rates)
}

/// Rates with other sequences holding cells of the cache ([`bench_depth`]).
#[derive(Debug, Clone)]
pub struct DepthRates {
    /// Cells the other sequences held.
    pub cells: usize,
    /// Prompt processing of a fresh sequence, one rate per repetition.
    pub prompt: Vec<f64>,
    /// Generation, all rows together (tokens of every row over the time).
    pub generation: f64,
}

/// The work of [`bench_depth`].
#[derive(Clone, Copy, Debug)]
pub struct DepthBench<'a> {
    /// Sequences of the context.
    pub n_seq: u32,
    /// The backend's one cache for all `n_seq` sequences, where every row attends
    /// over the cells in use; otherwise a stream of `n_ctx / n_seq` cells for each
    /// sequence.
    pub unified: bool,
    /// Cells held by sequences that are not part of the work (ascending; the cache
    /// is filled further between depths, 1,024 cells a sequence, as idle
    /// conversations fill it in a run).
    pub depths: &'a [usize],
    /// Prompt tokens of a fresh sequence (`pp n_prompt`, 3 repetitions).
    pub n_prompt: usize,
    /// Generation steps.
    pub n_gen: usize,
    /// Sequences generating one token each per step.
    pub rows: usize,
}

/// What attention over other sequences' cells costs: `pp n_prompt` of a fresh
/// sequence and `rows` sequences generating together, for each depth of
/// [`DepthBench`].
pub fn bench_depth(cfg: &EmbeddedConfig, b: &DepthBench<'_>) -> Result<Vec<DepthRates>, LlmError> {
    let DepthBench {
        n_seq,
        unified,
        depths,
        n_prompt,
        n_gen,
        rows,
    } = *b;
    let fail = |what: &str, e: &dyn std::fmt::Display| super::fatal(format!("{what}: {e}"));
    let backend = llama_backend()?;
    let model = load_model(backend, &cfg.model_path)?;
    let n_ctx = cfg.n_ctx.max(256);
    let n_batch = cfg.n_batch.max(1) as usize;
    let mut ctx = model
        .new_context(
            backend,
            context_params(cfg, n_ctx, n_seq).with_kv_unified(unified),
        )
        .map_err(|e| fail("creating a llama.cpp context", &e))?;
    let n_vocab = model.n_vocab().max(1) as u64;
    let mut random = random_tokens(n_vocab);
    let mut batch = LlamaBatch::new(n_batch, n_seq as i32);
    let mut eval =
        |ctx: &mut LlamaContext<'_>, seq: i32, n: usize, random: &mut dyn FnMut() -> LlamaToken| {
            let mut pos = 0;
            while pos < n {
                batch.clear();
                let end = (pos + n_batch).min(n);
                for p in pos..end {
                    batch
                        .add(random(), p as i32, &[seq], p + 1 == end)
                        .map_err(|e| fail("batch", &e))?;
                }
                ctx.decode(&mut batch).map_err(|e| fail("decode", &e))?;
                pos = end;
            }
            ctx.synchronize();
            Ok::<(), LlmError>(())
        };
    let per_seq = if unified {
        1024
    } else {
        (n_ctx / n_seq) as usize
    };
    // Sequence 0 evaluates the prompt, 1..=rows generate, the rest hold cells.
    let mut out = Vec::new();
    let (mut filled, mut next_seq) = (0usize, rows as i32 + 1);
    let mut one = LlamaBatch::new(rows, n_seq as i32);
    for &depth in depths {
        while filled < depth && (next_seq as u32) < n_seq {
            let n = (depth - filled).min(per_seq);
            eval(&mut ctx, next_seq, n, &mut random)?;
            filled += n;
            next_seq += 1;
        }
        let mut prompt = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            eval(&mut ctx, 0, n_prompt, &mut random)?;
            prompt.push(n_prompt as f64 / t.elapsed().as_secs_f64());
            let _ = ctx.clear_kv_cache_seq(Some(0), None, None);
        }
        // Each generating row starts from a 64-token prompt of its own.
        for s in 1..=rows as i32 {
            eval(&mut ctx, s, 64, &mut random)?;
        }
        let t = Instant::now();
        for step in 0..n_gen {
            one.clear();
            for s in 1..=rows as i32 {
                one.add(random(), (64 + step) as i32, &[s], true)
                    .map_err(|e| fail("batch", &e))?;
            }
            ctx.decode(&mut one).map_err(|e| fail("decode", &e))?;
            ctx.synchronize();
        }
        let generation = (n_gen * rows) as f64 / t.elapsed().as_secs_f64();
        for s in 1..=rows as u32 {
            let _ = ctx.clear_kv_cache_seq(Some(s), None, None);
        }
        out.push(DepthRates {
            cells: filled,
            prompt,
            generation,
        });
    }
    Ok(out)
}

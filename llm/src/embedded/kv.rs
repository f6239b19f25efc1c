//! What each llama.cpp sequence of a context holds in the KV cache, and the
//! prefix reuse built on it (shared by the target model's context and the
//! draft model's).

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::token::LlamaToken;

/// Length of the common prefix of `a` and `b`.
pub(super) fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Per sequence id (the index), the tokens whose KV cells the sequence holds,
/// at positions `0..len`.
#[derive(Default)]
pub(super) struct KvSeqs {
    pub(super) cached: Vec<Vec<LlamaToken>>,
}

impl KvSeqs {
    pub(super) fn new(n_seq: usize) -> Self {
        KvSeqs {
            cached: vec![Vec::new(); n_seq],
        }
    }

    /// Drops every KV cell of sequence `s`.
    pub(super) fn forget(&mut self, ctx: &mut LlamaContext<'_>, s: usize) {
        // Removing a whole sequence always succeeds.
        let _ = ctx.clear_kv_cache_seq(Some(s as u32), None, None);
        self.cached[s].clear();
    }

    /// Drops the cells of sequence `s` from position `len` on.
    pub(super) fn truncate(&mut self, ctx: &mut LlamaContext<'_>, s: usize, len: usize) {
        if len >= self.cached[s].len() {
            return;
        }
        let removed = ctx
            .clear_kv_cache_seq(Some(s as u32), Some(len as u32), None)
            .unwrap_or(false);
        if removed {
            self.cached[s].truncate(len);
        } else {
            self.forget(ctx, s);
        }
    }

    /// Puts the longest prefix of `tokens` (at most `cap` tokens) that any
    /// sequence holds into sequence `s` -- its own, cut after the common
    /// part, or another's, shared with `llama_memory_seq_cp` (the cache is
    /// unified, so the cells are shared, not copied) -- and returns its
    /// length.
    pub(super) fn reuse(
        &mut self,
        ctx: &mut LlamaContext<'_>,
        s: usize,
        tokens: &[LlamaToken],
        cap: usize,
    ) -> usize {
        let own = common_prefix(&self.cached[s], tokens).min(cap);
        let donor = self
            .cached
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != s)
            .map(|(j, c)| (common_prefix(c, tokens).min(cap), j))
            .max();
        if let Some((n, d)) = donor.filter(|(n, _)| *n > own) {
            self.forget(ctx, s);
            if ctx
                .copy_kv_cache_seq(d as i32, s as i32, Some(0), Some(n as u32))
                .is_ok()
            {
                self.cached[s] = tokens[..n].to_vec();
                return n;
            }
            return 0;
        }
        self.truncate(ctx, s, own);
        self.cached[s].len()
    }
}

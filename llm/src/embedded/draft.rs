//! Speculative decoding: a smaller model of the same family (the same
//! vocabulary) proposes the next few tokens of each greedy request, and the
//! target model checks them all in one decode (see `Worker::generate_round`).
//!
//! The draft model keeps a KV sequence per slot, like the target, and catches
//! up lazily: before proposing, each sequence is cut back to its longest
//! prefix of the request's committed tokens (target's cells plus the token
//! about to be decoded) -- or takes a longer one from another slot -- and
//! evaluates the rest. After the first round that is one or two tokens (the
//! last accepted ones), evaluated in the same decode as the first proposal.
//!
//! What is proposed never changes an answer: the target model samples every
//! token itself, exactly as without a draft, and only the tokens that equal
//! its own choices are kept. A failed draft decode proposes nothing.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

use super::kv::KvSeqs;

/// Catch-ups of at most this many tokens share the first proposal's decode;
/// longer ones (a new prompt) are evaluated first, in chunks of their own.
const SHORT: usize = 8;

/// The draft model's context and what its sequences hold.
pub(super) struct Draft<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    kv: KvSeqs,
    batch: LlamaBatch<'static>,
    n_batch: usize,
    /// Most tokens proposed per request and round.
    pub(super) max: usize,
}

/// One request's turn: sequence `slot` has committed `tokens` (the last one
/// not yet decoded by the target model), and `n` tokens are wanted.
pub(super) struct Want {
    pub(super) slot: usize,
    pub(super) tokens: Vec<LlamaToken>,
    pub(super) n: usize,
}

impl<'m> Draft<'m> {
    pub(super) fn new(
        model: &'m LlamaModel,
        ctx: LlamaContext<'m>,
        n_seq: usize,
        n_batch: usize,
        max: usize,
    ) -> Self {
        Draft {
            model,
            ctx,
            kv: KvSeqs::new(n_seq),
            batch: LlamaBatch::new(n_batch, 1),
            n_batch,
            max,
        }
    }

    /// Drops sequence `slot`'s cells.
    pub(super) fn forget(&mut self, slot: usize) {
        self.kv.forget(&mut self.ctx, slot);
    }

    /// Up to `w.n` tokens the draft model would choose (greedily) after each
    /// `w.tokens`; nothing when a draft decode failed. A failure (e.g. no room
    /// left: idle sequences keep what they held) clears the draft's whole cache,
    /// which the next proposals fill again.
    pub(super) fn propose(&mut self, wants: &[Want]) -> Vec<Vec<LlamaToken>> {
        match self.try_propose(wants) {
            Ok(d) => d,
            Err(()) => {
                for s in 0..self.kv.cached.len() {
                    self.forget(s);
                }
                vec![Vec::new(); wants.len()]
            }
        }
    }

    fn decode(&mut self) -> Result<(), ()> {
        self.ctx.decode(&mut self.batch).map_err(|_| ())
    }

    fn add(&mut self, t: LlamaToken, slot: usize, logits: bool) -> Result<i32, ()> {
        let pos = self.kv.cached[slot].len() as i32;
        self.batch
            .add(t, pos, &[slot as i32], logits)
            .map_err(|_| ())?;
        self.kv.cached[slot].push(t);
        Ok(self.batch.n_tokens() - 1)
    }

    fn try_propose(&mut self, wants: &[Want]) -> Result<Vec<Vec<LlamaToken>>, ()> {
        let mut out = vec![Vec::new(); wants.len()];
        // Each sequence's longest reusable prefix; long catch-ups first.
        let mut have = vec![0; wants.len()];
        for (i, w) in wants.iter().enumerate() {
            if w.n == 0 || w.tokens.is_empty() {
                continue;
            }
            let last = w.tokens.len() - 1;
            let mut h = self.kv.reuse(&mut self.ctx, w.slot, &w.tokens, last);
            while last - h > SHORT {
                let end = (h + self.n_batch).min(last);
                self.batch.clear();
                for &t in &w.tokens[h..end] {
                    self.add(t, w.slot, false)?;
                }
                self.decode()?;
                h = end;
            }
            have[i] = h;
        }
        // The first proposal: the rest of each catch-up and the last token.
        let mut rows: Vec<Option<i32>> = vec![None; wants.len()];
        self.batch.clear();
        for (i, w) in wants.iter().enumerate() {
            if w.n == 0 || w.tokens.is_empty() {
                continue;
            }
            let last = w.tokens.len() - 1;
            for (p, &t) in w.tokens.iter().enumerate().skip(have[i]) {
                let row = self.add(t, w.slot, p == last)?;
                if p == last {
                    rows[i] = Some(row);
                }
            }
        }
        if rows.iter().all(Option::is_none) {
            return Ok(out);
        }
        self.decode()?;
        let vocab = self.model.vocab();
        loop {
            let mut next = Vec::new();
            for (i, w) in wants.iter().enumerate() {
                let Some(row) = rows[i] else { continue };
                let t = argmax(self.ctx.get_logits_ith(row));
                out[i].push(t);
                if out[i].len() < w.n && !vocab.is_eog(t) {
                    next.push((i, t));
                }
            }
            rows.iter_mut().for_each(|r| *r = None);
            if next.is_empty() {
                return Ok(out);
            }
            self.batch.clear();
            for (i, t) in next {
                rows[i] = Some(self.add(t, wants[i].slot, true)?);
            }
            self.decode()?;
        }
    }
}

/// The token with the highest logit (the lowest id among equals).
fn argmax(logits: &[f32]) -> LlamaToken {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    LlamaToken::new(best as i32)
}

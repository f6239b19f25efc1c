//! The baselines' budgets, as the experiment file's `[baselines]` table gives them
//! (defaults: the paper's reduced budgets).

use serde::Deserialize;

/// Play2Prompt's search budget (`baselines.md`); defaults are the paper's reduced budget.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Play2PromptBudget {
    /// Tool-play tries per example until an executable call is found.
    pub init_loops: u32,
    /// Candidates kept per level of both beam searches.
    pub beam_width: u32,
    /// New candidates proposed per kept candidate and level.
    pub expansions: u32,
    /// Levels of the documentation search.
    pub iterations: u32,
    /// Query refinement rounds per example.
    pub refine_steps: u32,
    /// Candidate descriptions kept per level.
    pub top_k: u32,
    /// Examples (demonstrations) per tool.
    pub examples: u32,
    /// `paper`: on `names` and `names+desc` only the 50 `exec_multiple` instances, as
    /// the paper's +P2P cells (n = 50); `all`: every instance in every setting.
    pub instances: String,
}

impl Default for Play2PromptBudget {
    fn default() -> Self {
        Play2PromptBudget {
            init_loops: 3,
            beam_width: 1,
            expansions: 1,
            iterations: 1,
            refine_steps: 1,
            top_k: 1,
            examples: 1,
            instances: "paper".into(),
        }
    }
}

/// DRAFT's exploration rules (`baselines.md`).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DraftBudget {
    /// Explore / analyse / rewrite episodes per tool.
    pub episodes: u32,
    /// A new query is rejected when its cosine to a previous one is >= this.
    pub diversity: f64,
    /// Re-asks after a rejected query (then the last one is accepted).
    pub retries: u32,
    /// Stop when (BLEU + cosine) / 2 of successive descriptions exceeds this.
    pub converge: f64,
    /// Sentence embeddings: `minilm` (all-MiniLM-L6-v2, in process) or
    /// `bag-of-words` (hashed word counts; for scripted tests). In keys with
    /// `OTB_MINILM_DIR`'s files where they are not the pinned ones.
    #[serde(serialize_with = "crate::models::embed::serialize_embedder")]
    pub embedder: String,
}

impl Default for DraftBudget {
    fn default() -> Self {
        DraftBudget {
            episodes: 5,
            diversity: 0.9,
            retries: 3,
            converge: 0.75,
            embedder: "minilm".into(),
        }
    }
}

/// Trace-Free+ (`baselines.md`): the generator's request per tool.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TraceFreeBudget {
    /// 0: trace-free (the interface alone); k > 0: trace-based, with a summary of k
    /// single calls of the tool made in tool play (the editor proposes each call's
    /// arguments from the tool's documentation alone, the environment executes it).
    pub traces: u32,
    /// The generator model (a model spec); `None`: the experiment's editor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generator: Option<String>,
    /// The user's word that `generator` is a fine-tuned Trace-Free+ generator (e.g.
    /// the authors' Qwen3-4B-Instruct fine-tune served behind `openai:`): only then is
    /// the column labelled `+TF` (Trace-Free+); otherwise it is `+TF-prompt`, a
    /// prompting baseline in Trace-Free+'s request shape. Needs `generator`. Not in
    /// the stage key (it changes the label, not the documentation).
    #[serde(skip_serializing)]
    pub generator_tuned: bool,
    /// The generator's repetition penalty (1.1 in the paper; 1.0: none). The embedded
    /// backend always applies it; an `openai:` generator is sent it as the extra body
    /// field `repetition_penalty` as `send_repetition_penalty` says; a reasoning model
    /// is never sent it.
    pub repetition_penalty: f64,
    /// Whether an `openai:` (or `replay:`) generator's requests carry
    /// `repetition_penalty` (vLLM-style servers accept it; OpenAI's API refuses
    /// unknown fields). Unset: sent when `generator` names a model (a server the user
    /// set up for it), not when the generator is the editor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_repetition_penalty: Option<bool>,
    /// The request layout: `false` this project's, `true` the paper's (`[prompts] set
    /// = "paper"`); set from the experiment's prompt set, not from this table (the
    /// templates, in the stage key, tell the two apart).
    #[serde(skip)]
    pub paper: bool,
    /// The generator's sampling temperature (0.3 in the paper).
    pub temperature: f64,
    /// The generator's nucleus (top-p) sampling (0.9 in the paper).
    pub top_p: f64,
    /// Requests again after a reply with no usable JSON (then the tool keeps its
    /// description, and the reply is counted as malformed).
    pub retries: u32,
    /// Tokens the generator may write per reply (a standard model's default is 512,
    /// which a small model's long description runs past, leaving its JSON unclosed);
    /// a reasoning model keeps its own budget.
    pub max_tokens: u32,
    /// The tool sets the generator was trained on (`holdout.json`'s `trained_on` of
    /// the `otb export --sft` it was fine-tuned from): a Trace-Free+ cell on one of
    /// them is refused when the experiment is read. Provenance only, never in a
    /// stage key (it changes no output).
    #[serde(skip_serializing)]
    pub trained_on: Vec<String>,
}

impl Default for TraceFreeBudget {
    fn default() -> Self {
        TraceFreeBudget {
            traces: 0,
            generator: None,
            generator_tuned: false,
            repetition_penalty: 1.1,
            send_repetition_penalty: None,
            paper: false,
            temperature: 0.3,
            top_p: 0.9,
            retries: 1,
            max_tokens: 1024,
            trained_on: Vec::new(),
        }
    }
}

impl TraceFreeBudget {
    /// The generator: `generator`, or the cell's editor when none is set.
    pub fn generator_spec(
        &self,
        editor: &crate::models::ModelSpec,
    ) -> Result<crate::models::ModelSpec, crate::InputError> {
        match &self.generator {
            Some(g) => crate::models::parse_for(g, crate::models::Role::Editor),
            None => Ok(editor.clone()),
        }
    }

    /// The repetition penalty a request of `generator` (the spec
    /// [`TraceFreeBudget::generator_spec`] gave) carries: none at 1.0; the embedded
    /// backend always; `openai:` and `replay:` as `send_repetition_penalty` says
    /// (unset: when `generator` names a model); scripted models take none.
    pub fn repetition_penalty_for(&self, generator: &crate::models::ModelSpec) -> Option<f64> {
        use crate::models::ModelKind;
        if self.repetition_penalty == 1.0 {
            return None;
        }
        let send = match generator.kind {
            ModelKind::Embedded => true,
            ModelKind::OpenAi | ModelKind::Replay => self
                .send_repetition_penalty
                .unwrap_or(self.generator.is_some()),
            ModelKind::Scripted => false,
        };
        send.then_some(self.repetition_penalty)
    }

    /// Whether the column is the paper's Trace-Free+ (a generator the user marked as
    /// fine-tuned) rather than a prompting baseline in its request shape.
    pub fn is_tuned(&self) -> bool {
        self.generator.is_some() && self.generator_tuned
    }

    /// The column's label in the tables: `+TF` (a fine-tuned generator) or
    /// `+TF-prompt` (the un-tuned editor or another model not marked as tuned), with
    /// ` traces` when trace-based.
    pub fn label(&self) -> String {
        let base = if self.is_tuned() { "+TF" } else { "+TF-prompt" };
        if self.traces > 0 {
            format!("{base} traces")
        } else {
            base.to_string()
        }
    }

    /// How the generator samples.
    pub fn sampling(&self) -> crate::models::TurnSampling {
        crate::models::TurnSampling {
            temperature: Some(self.temperature),
            top_p: Some(self.top_p),
            ..Default::default()
        }
    }
}

/// Settings shared by the baseline methods.
#[derive(Debug, Clone, PartialEq)]
pub struct Baselines {
    /// Instances worked on at the same time.
    pub concurrency: usize,
    /// Play2Prompt's search budget.
    pub play2prompt: Play2PromptBudget,
    /// DRAFT's exploration rules.
    pub draft: DraftBudget,
    /// Trace-Free+'s generator request.
    pub tracefree: TraceFreeBudget,
    /// The external methods (`[methods.<name>]`), by name.
    pub external: std::collections::BTreeMap<String, super::external::ExternalMethod>,
}

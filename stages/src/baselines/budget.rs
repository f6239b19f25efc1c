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
    /// 0: trace-free (the interface alone); k > 0: trace-based, with up to k recorded
    /// calls of the tool from the Base round-0 trajectories.
    pub traces: u32,
    /// The generator model (a model spec); `None`: the experiment's editor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generator: Option<String>,
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
}

impl Default for TraceFreeBudget {
    fn default() -> Self {
        TraceFreeBudget {
            traces: 0,
            generator: None,
            temperature: 0.3,
            top_p: 0.9,
            retries: 1,
            max_tokens: 1024,
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
}

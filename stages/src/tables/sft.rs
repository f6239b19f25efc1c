//! `otb export EXP.toml --sft DIR`: a finished run's ToolObserver descriptions as
//! Trace-Free+ training data (`baselines.md`). One pair per tool whose description
//! ToolObserver changed where the change made the agent better:
//!
//! - BFCL (online, per instance): the instance's final-round score `E` is right where
//!   its Base round-0 score was wrong; the pair's traces are that instance's round-0
//!   turn as the editor saw it (question, calls, and the outcome `[bfcl] outcome`
//!   shows). BFCL has no split: its pairs are selected on the instances they are
//!   scored on, so hold BFCL out (`--holdout bfcl`) to score a generator on it.
//! - chess and search (offline, one tool set): selected on the **training** split
//!   only. Round `r` of a curve plays the training split with the docs of round `r`
//!   (`r` = 0..K-1; the last docs, round K, are played on the test split only), so
//!   the pair's target is the description of the round `r` >= 1 whose training play
//!   scored best, when that beats round 0 (the original docs) on the same split:
//!   chess best-tool % of the agent's training calls, search accuracy by the verdict
//!   the editor read (the judge's when `[search] judge` is set, else exact match).
//!   No test-split row is read. Traces are the round-0 training play as the editor
//!   read it.
//!
//! Input = the tool as it was documented before ToolObserver (name, parameters,
//! opaque description), plus for trace-based examples up to [`TRACES`] of its
//! recorded calls; target = the selected description. Tool sets are named by
//! [`tool_set_id`]; `--holdout` keeps some out of the training examples, and
//! `holdout.json` lists the tool sets trained on (what `[baselines.tracefree]
//! trained_on` takes, so that an evaluation on them is refused). The curriculum
//! ([`Curriculum`]): stages with a fixed number of samples each and an exact
//! trace-free share (default 2 stages, 10% then 90%: the paper's best schedule).

use crate::baselines::tracefree;
use crate::driver::RunOutput;
use crate::experiment::Experiment;
use crate::metrics::sft;
use pipeline::{Row, StageError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub use crate::reading::{SELECTED_ON_INSTANCE, SELECTED_ON_TRAIN, TRACES};
/// The default curriculum's trace-free share per stage: the paper's best schedule
/// (its Table 7: 2 stages, 10% then 90%).
pub const DEFAULT_SHARES: [f64; 2] = [0.1, 0.9];

fn fail(e: impl std::fmt::Display) -> StageError {
    StageError::infra("export", e.to_string())
}

fn user(e: impl std::fmt::Display) -> StageError {
    StageError::user("export", e.to_string())
}

/// A bad `--holdout`, `--stages` or `--shares` value, or a curriculum that cannot be
/// written as asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SftError {
    /// `--holdout` names nothing usable.
    #[error("--holdout `{0}`: give an environment (bfcl, chess, search), tool sets (e.g. chess:phase_specialists), comma-separated, or one fraction in (0, 1)")]
    Holdout(String),
    /// `--holdout` names a tool set the run does not have.
    #[error(
        "--holdout `{given}`: not an environment or tool set of this run (its tool sets: {known})"
    )]
    UnknownToolSet {
        /// The item as given.
        given: String,
        /// The run's tool sets.
        known: String,
    },
    /// `--shares` is not a list of shares in [0, 1].
    #[error("--shares `{0}`: give trace-free shares in [0, 1], comma-separated, one per stage (e.g. 0.1,0.9)")]
    Shares(String),
    /// `--stages` and `--shares` disagree, or no shares can be implied.
    #[error("--stages {stages}: {why}")]
    Stages {
        /// The stages asked for.
        stages: usize,
        /// What is wrong.
        why: String,
    },
    /// A stage needs trace-based examples but no pair has traces.
    #[error("curriculum stage {stage} needs {based} trace-based examples but no training pair has recorded calls; give --shares with 1 for every stage (trace-free only)")]
    NoTraces {
        /// The 1-based stage.
        stage: usize,
        /// The trace-based examples it needs.
        based: usize,
    },
}

pub use crate::experiment::tool_set_id;

/// `--holdout`: the tool sets kept out of the training examples.
#[derive(Clone, Debug, PartialEq)]
pub enum Holdout {
    /// Environments (`bfcl`, `chess`, `search`: all their tool sets) and tool sets
    /// ([`tool_set_id`], or a chess/search tool set's bare name).
    Sets(Vec<String>),
    /// This share of the run's tool sets, drawn by the seed (at least one).
    Fraction(f64),
}

impl std::str::FromStr for Holdout {
    type Err = SftError;

    fn from_str(s: &str) -> Result<Holdout, SftError> {
        let t = s.trim();
        if let Ok(f) = t.parse::<f64>() {
            return if f > 0.0 && f < 1.0 {
                Ok(Holdout::Fraction(f))
            } else {
                Err(SftError::Holdout(s.into()))
            };
        }
        let items: Vec<String> = t.split(',').map(|i| i.trim().to_string()).collect();
        if items.iter().any(String::is_empty) {
            return Err(SftError::Holdout(s.into()));
        }
        Ok(Holdout::Sets(items))
    }
}

impl Holdout {
    /// The held-out tool sets among `sets` (the run's, sorted); `seed` draws a
    /// fraction's.
    pub fn resolve(&self, sets: &[String], seed: u64) -> Result<BTreeSet<String>, SftError> {
        match self {
            Holdout::Fraction(f) => Ok(sft::drawn_share(sets, *f, seed)),
            Holdout::Sets(items) => {
                let mut out = BTreeSet::new();
                for item in items {
                    let hits = sft::named(sets, item);
                    if hits.is_empty() {
                        return Err(SftError::UnknownToolSet {
                            given: item.clone(),
                            known: if sets.is_empty() {
                                "none".into()
                            } else {
                                sets.join(", ")
                            },
                        });
                    }
                    out.extend(hits.into_iter().cloned());
                }
                Ok(out)
            }
        }
    }
}

/// The trace-free shares of `--shares` (comma-separated, each in [0, 1]).
pub fn parse_shares(s: &str) -> Result<Vec<f64>, SftError> {
    let shares: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| SftError::Shares(s.into()))?;
    if shares.is_empty() || shares.iter().any(|f| !(0.0..=1.0).contains(f)) {
        return Err(SftError::Shares(s.into()));
    }
    Ok(shares)
}

/// The curriculum: per stage a fixed number of samples and a trace-free share.
#[derive(Clone, Debug, PartialEq)]
pub struct Curriculum {
    /// The trace-free share of each stage, in order.
    pub shares: Vec<f64>,
    /// Samples per stage (`None`: as many as there are training pairs).
    pub samples: Option<usize>,
    /// Draws the examples of each stage.
    pub seed: u64,
}

impl Default for Curriculum {
    fn default() -> Self {
        Curriculum {
            shares: DEFAULT_SHARES.to_vec(),
            samples: None,
            seed: 0,
        }
    }
}

impl Curriculum {
    /// From `--stages` and `--shares`: both default to the paper's 2 stages of 10%
    /// and 90% trace-free; `--stages N` alone spreads the shares evenly from 10% to
    /// 90%; given both, they must agree.
    pub fn new(
        stages: Option<usize>,
        shares: Option<Vec<f64>>,
        samples: Option<usize>,
        seed: u64,
    ) -> Result<Curriculum, SftError> {
        let shares = match (stages, shares) {
            (None, None) => DEFAULT_SHARES.to_vec(),
            (None, Some(s)) => s,
            (Some(n), Some(s)) if s.len() == n => s,
            (Some(n), Some(s)) => {
                return Err(SftError::Stages {
                    stages: n,
                    why: format!("--shares gives {} shares", s.len()),
                })
            }
            (Some(n), None) if n >= 2 => (0..n)
                .map(|i| {
                    let (lo, hi) = (DEFAULT_SHARES[0], DEFAULT_SHARES[1]);
                    ((lo + (hi - lo) * i as f64 / (n - 1) as f64) * 1e6).round() / 1e6
                })
                .collect(),
            (Some(n), None) => {
                return Err(SftError::Stages {
                    stages: n,
                    why: "give --shares for fewer than 2 stages".into(),
                })
            }
        };
        Ok(Curriculum {
            shares,
            samples,
            seed,
        })
    }
}

pub use crate::reading::SftPair;

/// One training example of the curriculum.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Row)]
#[row(
    table = "sft_examples",
    doc = "one Trace-Free+ training example (`otb export --sft`), in curriculum order"
)]
pub struct SftExample {
    /// The curriculum stage, 1-based (its trace-free share: `curriculum.json`).
    pub stage: i64,
    /// `trace-based` or `trace-free`.
    pub form: String,
    /// The pair's environment: `bfcl`, `chess` or `search`.
    pub environment: String,
    /// The pair's setting or tool set.
    pub setting: String,
    /// The pair's tool set identifier.
    pub tool_set: String,
    /// The pair's instance, or `*`.
    pub instance_id: String,
    /// The pair's tool.
    pub tool: String,
    /// The generator's system message.
    pub system: String,
    /// The generator's request (the user message).
    pub prompt: String,
    /// The answer to learn, `{"description": ...}` (the assistant message).
    pub completion: String,
}

/// The generator request of a pair, `(system, user)`, built by the Trace-Free+
/// stage's own request builder in the experiment's prompt set (trace-free when
/// `traces` is empty).
fn request(interface: &str, traces: &str, set: &str) -> (String, String) {
    let tool: Value = serde_json::from_str(interface).unwrap_or(Value::Null);
    tracefree::request(&tool, traces, set)
}

/// The tool sets of `run` ([`tool_set_id`]), sorted: each environment of `exp`
/// names its own ([`crate::experiment::Reader::sft_tool_sets`]).
pub fn tool_sets(run: &RunOutput, exp: &Experiment) -> Vec<String> {
    exp.registry
        .environments()
        .flat_map(|e| e.reader().sft_tool_sets(run))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The pairs of `run`: every improved tool of every ToolObserver curve (none held
/// out yet), each environment of `exp` reading its own
/// ([`crate::experiment::Reader::sft_pairs`]), in the registry's order.
pub fn pairs(run: &RunOutput, exp: &Experiment) -> Result<Vec<SftPair>, StageError> {
    let mut out = Vec::new();
    for env in exp.registry.environments() {
        out.extend(env.reader().sft_pairs(run, exp)?);
    }
    Ok(out)
}

/// What one stage of a written curriculum holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageCount {
    /// 1-based stage.
    pub stage: usize,
    /// The trace-free share asked for.
    pub share: f64,
    /// Examples written.
    pub samples: usize,
    /// Trace-free examples written.
    pub trace_free: usize,
    /// Trace-based examples written.
    pub trace_based: usize,
}

/// The curriculum over `pairs` (the training pairs): stage `s` holds `samples`
/// examples (default: one per pair), of which `round(samples * share_s)` are
/// trace-free and the rest trace-based. The trace-based ones are drawn by the seed
/// from the pairs that have traces (a pair without traces is only ever written
/// trace-free); the trace-free ones from all pairs, those not drawn trace-based in
/// the stage first; the stage's examples are then shuffled by the seed
/// ([`crate::metrics::sft::stage_draw`]). The examples are in stage order.
pub fn curriculum(
    pairs: &[SftPair],
    c: &Curriculum,
    prompt_set: &str,
) -> Result<(Vec<SftExample>, Vec<StageCount>), SftError> {
    let n = c.samples.unwrap_or(pairs.len());
    let traced: Vec<bool> = pairs.iter().map(|p| !p.traces.is_empty()).collect();
    let mut out = Vec::new();
    let mut counts = Vec::new();
    for (s, share) in c.shares.iter().enumerate() {
        let stage = s + 1;
        let d =
            sft::stage_draw(&traced, n, *share, c.seed, stage).map_err(|e| SftError::NoTraces {
                stage,
                based: e.based,
            })?;
        for &(i, traced) in &d.examples {
            let p = &pairs[i];
            let (system, prompt) = request(
                &p.interface,
                if traced { &p.traces } else { "" },
                prompt_set,
            );
            out.push(SftExample {
                stage: stage as i64,
                form: if traced { "trace-based" } else { "trace-free" }.into(),
                environment: p.environment.clone(),
                setting: p.setting.clone(),
                tool_set: p.tool_set.clone(),
                instance_id: p.instance_id.clone(),
                tool: p.tool.clone(),
                system,
                prompt,
                completion: json!({ "description": p.target }).to_string(),
            });
        }
        counts.push(StageCount {
            stage,
            share: *share,
            samples: d.trace_free + d.trace_based,
            trace_free: d.trace_free,
            trace_based: d.trace_based,
        });
    }
    Ok((out, counts))
}

/// `otb export --sft`'s options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SftOptions {
    /// The tool sets kept out of the training examples.
    pub holdout: Option<Holdout>,
    /// The stages, their shares and samples, and the seed (which also draws a
    /// fractional holdout).
    pub curriculum: Curriculum,
}

fn write_text(p: &Path, text: &str) -> Result<(), StageError> {
    std::fs::write(p, text).map_err(|e| fail(format!("{}: {e}", p.display())))
}

/// What `--sft` writes into `dest`: `pairs.parquet` (every pair, held-out ones
/// marked), `examples.parquet` and `stage<k>.jsonl` (the training pairs' curriculum;
/// chat format: `{"messages": [system, user, assistant], ...metadata}`), `holdout.json` (the
/// tool sets trained on and held out), `curriculum.json` (each stage's written
/// counts) and `SCHEMA.md`; the files written. A bad `--holdout` or an impossible
/// curriculum is refused before anything is written.
pub fn write(
    run: &RunOutput,
    exp: &Experiment,
    dest: &Path,
    opts: &SftOptions,
) -> Result<Vec<PathBuf>, StageError> {
    let sets = tool_sets(run, exp);
    let seed = opts.curriculum.seed;
    let held: BTreeSet<String> = match &opts.holdout {
        Some(h) => h.resolve(&sets, seed).map_err(user)?,
        None => BTreeSet::new(),
    };
    let mut pairs = pairs(run, exp)?;
    let split = sft::split(pairs.iter().map(|p| p.tool_set.as_str()), &held);
    for (p, held_out) in pairs.iter_mut().zip(split.held_out) {
        p.held_out = held_out;
    }
    let train: Vec<SftPair> = split.training.iter().map(|&i| pairs[i].clone()).collect();
    let (examples, counts) = curriculum(&train, &opts.curriculum, exp.prompt_set).map_err(user)?;
    std::fs::create_dir_all(dest).map_err(|e| fail(format!("{}: {e}", dest.display())))?;
    let mut written = Vec::new();
    let p = dest.join("pairs.parquet");
    pipeline::table::write_rows(&pairs, &p).map_err(fail)?;
    written.push(p);
    let p = dest.join("examples.parquet");
    pipeline::table::write_rows(&examples, &p).map_err(fail)?;
    written.push(p);
    // The examples are in stage order, `samples` of each stage.
    let mut rest = &examples[..];
    for c in &counts {
        let (these, later) = rest.split_at(c.samples.min(rest.len()));
        rest = later;
        let mut text = String::new();
        for e in these {
            let line = json!({
                "messages": [
                    {"role": "system", "content": e.system},
                    {"role": "user", "content": e.prompt},
                    {"role": "assistant", "content": e.completion},
                ],
                "stage": e.stage,
                "form": e.form,
                "environment": e.environment,
                "setting": e.setting,
                "tool_set": e.tool_set,
                "instance_id": e.instance_id,
                "tool": e.tool,
            });
            text.push_str(&line.to_string());
            text.push('\n');
        }
        let p = dest.join(format!("stage{}.jsonl", c.stage));
        write_text(&p, &text)?;
        written.push(p);
    }
    let trained_on: BTreeSet<&str> = examples.iter().map(|e| e.tool_set.as_str()).collect();
    let holdout = json!({
        "holdout": opts.holdout.as_ref().map(|h| match h {
            Holdout::Sets(s) => Value::from(s.join(",")),
            Holdout::Fraction(f) => Value::from(*f),
        }),
        "seed": seed,
        "tool_sets": sets,
        "held_out": held,
        "trained_on": trained_on,
    });
    let p = dest.join("holdout.json");
    write_text(&p, &format!("{:#}\n", holdout))?;
    written.push(p);
    let p = dest.join("curriculum.json");
    write_text(
        &p,
        &format!(
            "{:#}\n",
            json!({"seed": seed, "pairs": train.len(), "stages": counts})
        ),
    )?;
    written.push(p);
    let mut schema = String::from(SCHEMA_INTRO);
    crate::rows::Exported::of::<SftPair>(false).schema(&mut schema);
    crate::rows::Exported::of::<SftExample>(false).schema(&mut schema);
    let p = dest.join("SCHEMA.md");
    write_text(&p, &schema)?;
    written.push(p);
    Ok(written)
}

/// The head of the export's `SCHEMA.md`.
const SCHEMA_INTRO: &str = "# Trace-Free+ training data\n\n\
Written by `otb export EXP.toml --sft DIR` from a finished run: one pair per tool whose ToolObserver description made the agent better, and the training pairs' examples in a curriculum.\n\n\
**Selection.** Chess and search pairs are selected on the training split only; no test-split row is read. Round r of a curve plays the training split with the docs of round r (r = 0..K-1; the last docs, round K, are played on the test split only), so the target is the description of the round r >= 1 whose training play scored best, kept when it beats round 0 (the original docs) on the same games or questions: chess best-tool % of the agent's training calls, search accuracy by the verdict the editor read (the judge's when `[search] judge` is set, else exact match). `score_before` / `score_after` are those training scores; `round` is the target's round. A run with K = 1 has no training play of edited docs and gives no chess or search pair. BFCL has no split: a pair is an instance that went from wrong (Base, round 0) to right (ToolObserver's last round) on that same instance (`selected_on` = instance), so hold BFCL out (`--holdout bfcl`) before scoring a generator on it.\n\n\
**Traces.** Round-0 play with the original docs as the editor read it: BFCL the instance's turn, with the outcome `[bfcl] outcome` shows; chess and search the training split only, search with the judge's verdict when a judge was configured.\n\n\
**Held-out tool sets.** Tool sets are `bfcl` (its settings show the same functions), `chess:<set>` and `search:<set>`. `--holdout ENV|TOOLSET[,...]|FRACTION` keeps tool sets out of every stage file (`pairs.held_out` = true; a fraction draws that share of the run's tool sets by `--seed`). `holdout.json` lists `tool_sets` (the run's), `held_out` and `trained_on` (those with an example in a stage file): copy `trained_on` into `[baselines.tracefree] trained_on` of an experiment that serves the fine-tuned generator, and `otb` refuses to score Trace-Free+ on any of them.\n\n\
**Curriculum.** Each stage holds `--samples` examples (default: one per training pair), of which round(samples x share) are trace-free (the interface alone) and the rest trace-based (the interface and the tool's recorded calls); `--shares` (default 0.1,0.9: the paper's best schedule, 2 stages) gives each stage's trace-free share. Trace-based examples are drawn by `--seed` from the pairs that have traces (a pair without traces is only written trace-free); trace-free examples from all training pairs, those not drawn trace-based in the stage first; each stage is shuffled by the seed. `curriculum.json` gives each stage's written counts. Train the stages in order (the paper: 2 epochs).\n\n\
`stage<k>.jsonl`: one chat example per line, `messages` = [system, user = the Trace-Free+ stage's own generator request (the run's prompt set), assistant = `{\"description\": ...}`], with the example's metadata beside it.\n\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baselines::tools_of;
    use crate::chess::rows::GameRow;
    use crate::driver::Output;
    use crate::experiment::TraceFreeBudget;
    use crate::rows::DocRow;
    use crate::search::{EpisodeRow, JudgeRow};
    use datasets::chess::tools::{Docs, ToolFamily, ToolSet};

    fn pair(i: usize, traces: bool) -> SftPair {
        SftPair {
            environment: "search".into(),
            setting: "domains".into(),
            tool_set: "search:domains".into(),
            held_out: false,
            agent: "a".into(),
            editor: "e".into(),
            method: "toolobserver".into(),
            instance_id: "*".into(),
            tool: format!("function_{i}"),
            round: 1,
            selected_on: SELECTED_ON_TRAIN.into(),
            interface:
                json!({"name": format!("function_{i}"), "description": "opaque", "parameters": {}})
                    .to_string(),
            traces: if traces {
                format!("TRACE-OF-{i}")
            } else {
                String::new()
            },
            target: format!("does {i}"),
            score_before: 0.0,
            score_after: 1.0,
        }
    }

    fn count(ex: &[SftExample], stage: i64, form: &str) -> usize {
        ex.iter()
            .filter(|e| e.stage == stage && e.form == form)
            .count()
    }

    /// The default curriculum is the paper's: 2 stages, 10% then 90% trace-free, a
    /// fixed number of samples per stage; the written shares are exact, a pair
    /// without traces is only written trace-free, and the seed draws the subset.
    #[test]
    fn curriculum_writes_exact_shares_and_draws_by_seed() {
        let pairs: Vec<SftPair> = (0..10).map(|i| pair(i, i >= 3)).collect();
        let c = Curriculum {
            samples: Some(20),
            ..Curriculum::default()
        };
        assert_eq!(c.shares, vec![0.1, 0.9]);
        let (ex, counts) = curriculum(&pairs, &c, "project").unwrap();
        assert_eq!(ex.len(), 40);
        assert_eq!(
            (count(&ex, 1, "trace-free"), count(&ex, 1, "trace-based")),
            (2, 18)
        );
        assert_eq!(
            (count(&ex, 2, "trace-free"), count(&ex, 2, "trace-based")),
            (18, 2)
        );
        assert_eq!(counts[0].trace_based, 18);
        assert_eq!(counts[1].trace_free, 18);
        for e in &ex {
            let i: usize = e.tool["function_".len()..].parse().unwrap();
            let shows = e.prompt.contains(&format!("TRACE-OF-{i}"));
            assert_eq!(shows, e.form == "trace-based", "{e:?}");
            if i < 3 {
                assert_eq!(e.form, "trace-free", "a pair without traces: {e:?}");
            }
            assert!(e.completion.contains(&format!("does {i}")));
        }
        // Not the first pairs in order: the seed draws them, and another seed others.
        let order = |seed| {
            let c = Curriculum {
                seed,
                ..Curriculum::default()
            };
            let (ex, _) = curriculum(&pairs, &c, "project").unwrap();
            ex.iter()
                .map(|e| (e.tool.clone(), e.form.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(order(0), order(0));
        assert_ne!(order(0), order(1));
        // Default samples: one per pair in each stage, 1 of 10 trace-free in stage 1,
        // and then every pair once.
        let (ex, counts) = curriculum(&pairs, &Curriculum::default(), "project").unwrap();
        assert_eq!(
            counts.iter().map(|c| c.samples).collect::<Vec<_>>(),
            [10, 10]
        );
        assert_eq!(count(&ex, 1, "trace-free"), 1);
        assert_eq!(count(&ex, 2, "trace-free"), 9);
        let stage1: BTreeSet<&str> = ex
            .iter()
            .filter(|e| e.stage == 1)
            .map(|e| e.tool.as_str())
            .collect();
        // 9 trace-based over the 7 traced pairs, the trace-free one a pair not drawn.
        assert_eq!(stage1.len(), 8, "{stage1:?}");
    }

    #[test]
    fn a_curriculum_without_traces_is_refused_unless_all_trace_free() {
        let pairs: Vec<SftPair> = (0..4).map(|i| pair(i, false)).collect();
        let err = curriculum(&pairs, &Curriculum::default(), "project").unwrap_err();
        assert_eq!(err, SftError::NoTraces { stage: 1, based: 4 });
        let all_free = Curriculum::new(None, Some(vec![1.0]), None, 0).unwrap();
        let (ex, _) = curriculum(&pairs, &all_free, "project").unwrap();
        assert!(ex.len() == 4 && ex.iter().all(|e| e.form == "trace-free"));
        assert!(curriculum(&[], &Curriculum::default(), "project")
            .unwrap()
            .0
            .is_empty());
    }

    #[test]
    fn stages_and_shares_agree() {
        assert_eq!(
            Curriculum::new(None, None, None, 0).unwrap().shares,
            [0.1, 0.9]
        );
        assert_eq!(
            Curriculum::new(Some(3), None, None, 0).unwrap().shares,
            [0.1, 0.5, 0.9]
        );
        assert!(Curriculum::new(Some(3), Some(vec![0.1, 0.9]), None, 0).is_err());
        assert!(Curriculum::new(Some(1), None, None, 0).is_err());
        assert_eq!(parse_shares("0.1, 0.9").unwrap(), [0.1, 0.9]);
        assert!(parse_shares("0.1,1.5").is_err() && parse_shares("a").is_err());
    }

    #[test]
    fn holdout_names_environments_tool_sets_or_a_fraction() {
        let sets: Vec<String> = [
            "bfcl",
            "chess:phase_specialists",
            "chess:strength_gradient",
            "search:domains",
        ]
        .map(String::from)
        .to_vec();
        let r = |s: &str| {
            s.parse::<Holdout>()
                .unwrap()
                .resolve(&sets, 7)
                .map(|b| b.into_iter().collect::<Vec<_>>())
        };
        assert_eq!(
            r("chess").unwrap(),
            ["chess:phase_specialists", "chess:strength_gradient"]
        );
        assert_eq!(
            r("bfcl,search:domains").unwrap(),
            ["bfcl", "search:domains"]
        );
        assert_eq!(r("strength_gradient").unwrap(), ["chess:strength_gradient"]);
        assert_eq!(r("0.5").unwrap().len(), 2);
        assert_eq!(r("0.5").unwrap(), r("0.5").unwrap());
        assert_eq!(r("0.01").unwrap().len(), 1);
        assert!(matches!(
            r("search:other"),
            Err(SftError::UnknownToolSet { .. })
        ));
        assert!("1.5".parse::<Holdout>().is_err());
        assert!("chess,".parse::<Holdout>().is_err());
    }

    /// `trained_on` changes no output, so it is in no stage key; a Trace-Free+ cell
    /// on a listed tool set is refused when the experiment is read.
    #[test]
    fn trained_on_is_provenance_and_refuses_an_overlap() {
        let b = TraceFreeBudget {
            trained_on: vec!["chess:phase_specialists".into()],
            ..TraceFreeBudget::default()
        };
        assert_eq!(
            serde_json::to_value(&b).unwrap(),
            serde_json::to_value(TraceFreeBudget::default()).unwrap()
        );
        let parse = |trained_on: &str| {
            Experiment::parse(
                &crate::driver::environments(),
                Path::new("exp.toml"),
                &format!("[chess]\ntool_sets = [\"phase_specialists\", \"strength_gradient\"]\nmethods = [\"base\", \"tracefree\"]\n[search]\ntool_sets = [\"domains\"]\nmethods = [\"base\"]\n[baselines.tracefree]\ntrained_on = [{trained_on}]\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:silent\"\n"),
            )
        };
        let err = parse("\"search:domains\", \"chess:strength_gradient\"").unwrap_err();
        assert!(err.message.contains("`chess:strength_gradient`"), "{err}");
        // Search runs no Trace-Free+ here: training on it is fine.
        assert!(parse("\"search:domains\", \"bfcl\"").is_ok());
        let err = parse("\"chess/strength_gradient\"").unwrap_err();
        assert!(err.message.contains("is no tool set"), "{err}");
    }

    /// Stored outputs of one table each, written under `dir`.
    struct Out<'a> {
        dir: &'a Path,
        n: std::cell::Cell<usize>,
    }

    impl Out<'_> {
        /// An entry holding `rows` as its one table.
        fn rows<R: Row>(&self, rows: Vec<R>) -> pipeline::Entry {
            self.n.set(self.n.get() + 1);
            let dir = self.dir.join(format!("e{}", self.n.get()));
            std::fs::create_dir_all(&dir).unwrap();
            let meta =
                pipeline::table::write_rows(&rows, &dir.join(format!("{}.parquet", R::TABLE)))
                    .unwrap();
            let d = pipeline::Digest::of_bytes(b"x");
            pipeline::Entry {
                dir,
                manifest: pipeline::Manifest {
                    manifest_version: 1,
                    key: d.clone(),
                    components: pipeline::KeyComponents {
                        stage: "s".into(),
                        code_version: 1,
                        params: Value::Null,
                        inputs: Default::default(),
                    },
                    outputs: [(R::TABLE.to_string(), meta)].into(),
                    output_digest: d,
                    node: String::new(),
                    wall_ms: 0,
                    usage: Default::default(),
                    created_unix: 0,
                },
            }
        }
    }

    fn output(
        stage: &'static str,
        set: &str,
        method: &str,
        node: &str,
        round: i64,
        entry: pipeline::Entry,
    ) -> Output {
        // `node` is the test's own shorthand: `... train rK` and `... test` are plays,
        // `rK` an edit, anything else a source of docs.
        use crate::at::{Split, Step};
        let step = match node.rsplit(' ').next().unwrap_or(node) {
            "test" => Step::Play {
                split: Some(Split::Test),
            },
            _ if node.contains("train") => Step::Play {
                split: Some(Split::Train),
            },
            r if r.starts_with('r') => Step::Edit,
            _ => Step::Source,
        };
        let (method, guard) = crate::at::Method::parse_label(method);
        Output {
            node: format!("{stage}[{set} {node}]"),
            stage,
            cell: crate::env::Cell {
                // The environment whose drive recorded it (the stage's prefix).
                env: if stage.starts_with("search") || stage == crate::search::JUDGE_STAGE {
                    "search"
                } else {
                    "chess"
                },
                setting: set.into(),
                method,
                guard,
                agent: "scripted:a".into(),
                editor: if method == Some(crate::at::Method::Base) {
                    String::new()
                } else {
                    "scripted:e".into()
                },
                round,
                step,
                ..Default::default()
            },
            entry,
        }
    }

    fn docs(set: &str, round: i64, desc: &str) -> DocRow {
        DocRow {
            instance_id: crate::env::SHARED.into(),
            setting: set.into(),
            round,
            tools: json!([{"name": "function_1", "description": desc, "parameters": {}}]),
            name_mapping: Value::Null,
            changed: true,
            frozen: false,
            demos: Value::Null,
        }
    }

    fn episode(i: usize, correct: bool) -> EpisodeRow {
        EpisodeRow {
            question_id: format!("q{i}"),
            split: "train".into(),
            round: 0,
            model: "scripted:a".into(),
            steps: json!([]),
            answer: None,
            forced: false,
            correct,
            f1: 0.0,
            tool_calls: 1,
            editor_text: format!("called function_1 exact={correct}"),
            error_kind: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
        }
    }

    fn judged(i: usize, verdict: bool) -> JudgeRow {
        JudgeRow {
            question_id: format!("q{i}"),
            split: "train".into(),
            model: "scripted:j".into(),
            verdict: Some(verdict),
            reply: None,
            error_kind: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            editor_text: Some(format!("called function_1 judge={verdict}")),
        }
    }

    /// A chess training game of one agent ply from the start position, with the
    /// optimal tool or not.
    fn game(optimal: bool) -> GameRow {
        let tools = ToolSet::new(ToolFamily::PhaseSpecialists);
        let start = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";
        let pos = datasets::chess::rules::parse_fen(start).unwrap();
        let best = tools.optimal_tool(&pos);
        let i = if optimal { best } else { (best + 1) % 4 };
        let ply = datasets::chess::game::PlyRecord {
            ply: 1,
            side: datasets::chess::rules::Side::White,
            san: "e4".into(),
            uci: "e2e4".into(),
            fen_before: start.into(),
            fen_after: "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1".into(),
            tool: tools.name(i, Docs::Opaque),
            eval_after: None,
        };
        GameRow {
            game_id: "g".into(),
            split: "train".into(),
            round: 0,
            model: "scripted:a".into(),
            position_id: "p".into(),
            agent_side: "white".into(),
            opponent_elo: 1350,
            score: None,
            result: "*".into(),
            end_reason: "cut".into(),
            plies: serde_json::to_value(vec![ply]).unwrap(),
            start_eval: None,
            final_eval: None,
            editor_text: format!("{} was played", tools.name(i, Docs::Opaque).unwrap()),
            failed_calls: 0,
            error_kind: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
        }
    }

    /// Chess and search pairs are chosen by the training split's play alone: a tool
    /// set whose test score rose but whose training score fell gives no pair; one
    /// whose training score rose gives the round that scored best on training; with
    /// a judge, its verdicts (what the editor read) decide and are the traces.
    #[test]
    fn offline_pairs_are_selected_on_the_training_split_only() {
        let tmp = tempfile::tempdir().unwrap();
        let o = Out {
            dir: tmp.path(),
            n: Default::default(),
        };
        let mut outputs = Vec::new();
        // (tool set, right answers of the training play r0..r2, judge verdicts)
        type Case = (&'static str, [u8; 3], Option<[u8; 3]>);
        let cases: [Case; 3] = [
            // Training fell: not exported (whatever the test split says).
            ("fell", [3, 1, 2], None),
            // Training rose at round 2, best there.
            ("rose", [1, 2, 3], None),
            // Exact match fell, the judge (what the editor read) rose at round 1.
            ("judged", [3, 0, 0], Some([0, 2, 1])),
        ];
        for (set, plays, verdicts) in cases {
            outputs.push(output(
                "search-docs",
                set,
                "base",
                "opaque",
                0,
                o.rows(vec![docs(set, 0, "opaque")]),
            ));
            for r in 1..=3 {
                let m = o.rows(vec![docs(set, r, &format!("{set} round {r}"))]);
                outputs.push(output(
                    "consensus-merge",
                    set,
                    "toolobserver",
                    &format!("r{r}"),
                    r,
                    m,
                ));
            }
            for (r, right) in plays.iter().enumerate() {
                let eps = (0..3).map(|i| episode(i, i < *right as usize)).collect();
                let r = r as i64;
                outputs.push(output(
                    "search-explore",
                    set,
                    "toolobserver",
                    &format!("toolobserver train r{r}"),
                    r,
                    o.rows::<EpisodeRow>(eps),
                ));
                if let Some(v) = verdicts {
                    let rows = (0..3)
                        .map(|i| judged(i, i < v[r as usize] as usize))
                        .collect();
                    outputs.push(output(
                        crate::search::JUDGE_STAGE,
                        set,
                        "toolobserver",
                        &format!("toolobserver train r{r}"),
                        r,
                        o.rows::<JudgeRow>(rows),
                    ));
                }
            }
            // The test split's scores are planted unreadable (a table the manifest
            // lists but no file): the export fails if it reads one.
            for m in ["base", "toolobserver"] {
                let mut e = o.rows::<EpisodeRow>(Vec::new());
                e.dir = tmp.path().join("missing");
                e.manifest.outputs = [(
                    "search_scores".to_string(),
                    e.manifest.outputs.values().next().unwrap().clone(),
                )]
                .into();
                outputs.push(output(
                    "search-evaluate",
                    set,
                    m,
                    &format!("{m} test"),
                    3,
                    e,
                ));
            }
        }
        // chess: the test best-tool % rose (0% -> 100%), the training one fell
        // (100% -> 0%): not exported.
        let set = "phase_specialists";
        outputs.push(output(
            "chess-docs",
            set,
            "base",
            "opaque",
            0,
            o.rows(vec![docs(set, 0, "opaque")]),
        ));
        outputs.push(output(
            "consensus-merge",
            set,
            "toolobserver",
            "r1",
            1,
            o.rows(vec![docs(set, 1, "better")]),
        ));
        outputs.push(output(
            "consensus-merge",
            set,
            "toolobserver",
            "r2",
            2,
            o.rows(vec![docs(set, 2, "best")]),
        ));
        for (r, optimal) in [(0, true), (1, false)] {
            outputs.push(output(
                "chess-explore",
                set,
                "toolobserver",
                &format!("toolobserver train r{r}"),
                r,
                o.rows(vec![game(optimal)]),
            ));
        }
        for (m, pct) in [("base", 0.0), ("toolobserver", 100.0)] {
            let best = crate::chess::rows::BestToolRow {
                best_tool_pct: pct,
                tool_calls: 1,
                per_phase: json!({}),
            };
            outputs.push(output(
                "chess-evaluate",
                set,
                m,
                &format!("{m} test"),
                2,
                o.rows(vec![best]),
            ));
        }
        let run = RunOutput {
            outputs,
            ..Default::default()
        };
        let exp = Experiment::parse(
            &crate::driver::environments(),
            Path::new("exp.toml"),
            "[chess]\ntool_sets = [\"phase_specialists\"]\nmethods = [\"base\", \"toolobserver\"]\n[search]\nmethods = [\"base\", \"toolobserver\"]\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:silent\"\n",
        )
        .unwrap();
        let got = pairs(&run, &exp).unwrap();
        let summary: Vec<(&str, &str, i64, f64, f64)> = got
            .iter()
            .map(|p| {
                (
                    p.tool_set.as_str(),
                    p.target.as_str(),
                    p.round,
                    p.score_before,
                    p.score_after,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("search:rose", "rose round 2", 2, 1.0 / 3.0, 1.0),
                ("search:judged", "judged round 1", 1, 0.0, 2.0 / 3.0),
            ],
            "{got:#?}"
        );
        assert!(got.iter().all(|p| p.selected_on == "train"));
        // The traces are the round-0 training play as the editor read it.
        assert!(got[0].traces.contains("exact="), "{}", got[0].traces);
        assert!(got[1].traces.contains("judge=false"), "{}", got[1].traces);
        assert!(!got[1].traces.contains("exact="), "{}", got[1].traces);
        // The chess training score is computed (a rise is exported).
        let games = [game(true)];
        let names = tools_of(&docs(set, 0, "x"));
        assert_eq!(
            crate::chess::reading::chess_score(&exp, set, &games, &names).unwrap(),
            Some(100.0)
        );
        assert_eq!(
            crate::chess::reading::chess_score(&exp, set, &[game(false)], &names).unwrap(),
            Some(0.0)
        );
    }
}

//! The environment seam: what the generic ToolObserver loops need from an
//! environment, and how every environment labels what it puts in the store.
//!
//! Two kinds of environment, by where their tools live:
//!
//! - [`OnlineEnv`]: every instance has its own tool set (BFCL-Opaque). Documentation is
//!   a [`DocRow`] per instance; ToolObserver runs online ([`crate::online`]): one
//!   editor request per instance per round, instances freeze when their docs stop
//!   changing.
//! - [`OfflineEnv`]: one tool set shared by every instance (chess, search).
//!   Documentation is a single [`DocRow`] (instance [`SHARED`]); ToolObserver runs
//!   offline ([`crate::offline`]): explore the training split, `batch-reflect` in
//!   mini-batches, `consensus-merge`, K rounds, then the test split.
//!
//! An environment provides the stages that are its own (how a trajectory is produced,
//! how it is graded, what the editor is shown); the loops, the editor stages, the
//! store and the token accounting are written once. Adding an environment means a
//! folder under `datasets/src/` (data, tools, grader: no store, no models) and one
//! under `stages/src/` implementing one of these traits; see ARCHITECTURE.md.

pub use crate::at::{At, Label, Naming, Shown, Split, Step};
use crate::models::Models;
use crate::rows::DocRow;
use pipeline::{Entry, Handle, Session, StageError};

/// The instance id of an offline environment's one shared documentation row.
pub const SHARED: &str = "*";

/// Errors of a drive: a stage failed, or the experiment names something unusable.
#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    /// A stage failed (its error says whose failure it is).
    #[error(transparent)]
    Stage(#[from] StageError),
    /// The experiment names something unusable: the user's to fix.
    #[error(transparent)]
    Input(#[from] crate::InputError),
    /// A failure classed where it happened (e.g. opening a model).
    #[error(transparent)]
    Failure(#[from] crate::Failure),
}

impl From<pipeline::StoreError> for DriveError {
    fn from(e: pipeline::StoreError) -> Self {
        DriveError::Stage(e.into())
    }
}

/// Inside a stage's code (an environment's helper that returns a `DriveError`):
/// the same error, its class kept; the engine names the stage.
impl From<DriveError> for StageError {
    fn from(e: DriveError) -> StageError {
        match e {
            DriveError::Stage(e) => e,
            DriveError::Input(e) => e.into(),
            DriveError::Failure(e) => e.into(),
        }
    }
}

impl pipeline::Classify for DriveError {
    fn class(&self) -> pipeline::ErrorClass {
        match self {
            DriveError::Input(e) => e.class(),
            DriveError::Failure(e) => e.class(),
            DriveError::Stage(e) => e.class(),
        }
    }
}

/// One stage output of the experiment, labelled for export and tables.
#[derive(Clone, Debug)]
pub struct Output {
    /// The node's name.
    pub node: String,
    /// The stage it ran.
    pub stage: &'static str,
    /// The setting or tool set.
    pub setting: String,
    /// The method (`gold`, `base`, `toolobserver`, ...).
    pub method: String,
    /// Agent model spec (empty for agent-free stages such as `bfcl-data`).
    pub agent: String,
    /// Editor model spec (empty where no editor is involved).
    pub editor: String,
    /// The ToolObserver round (0 for every other method).
    pub round: i64,
    /// Its stored output.
    pub entry: Entry,
}

/// What a drive produced: the outputs in the store, and (computed or not) the score
/// outputs a summary aggregates and every grid node's cell.
#[derive(Default, Debug)]
pub struct RunOutput {
    /// Every computed stage output of the drive, in drive order.
    pub outputs: Vec<Output>,
    /// Every score output an environment's summary aggregates, in drive order, with
    /// a label unique within the drive (pending ones too, in status mode: the
    /// summary waits for them): renderers summarise the computed ones themselves
    /// when the summary stage has not run yet (a run still going, or stopped).
    pub curve: Vec<(String, Label, Handle)>,
    /// The grid cell of every node of the grid the drive passed (computed or not), in
    /// drive order: what `otb plan` says each node belongs to.
    pub cells: Vec<(String, Label)>,
}

impl RunOutput {
    /// The outputs of stage `stage`, in drive order.
    pub fn by_stage<'a>(&'a self, stage: &'a str) -> impl Iterator<Item = &'a Output> + 'a {
        self.outputs.iter().filter(move |o| o.stage == stage)
    }

    /// Record an output if it is computed; a node shared by several chains
    /// (opacify, agent-free baselines) is recorded once.
    pub fn push(&mut self, node: &str, stage: &'static str, label: &Label, h: &Handle) {
        let Some(e) = h.entry() else { return };
        if self.outputs.iter().any(|o| {
            o.node == node && o.stage == stage && o.agent == label.agent && o.editor == label.editor
        }) {
            return;
        }
        self.outputs.push(Output {
            node: node.to_string(),
            stage,
            setting: label.setting.clone(),
            method: label.method.clone(),
            agent: label.agent.clone(),
            editor: label.editor.clone(),
            round: label.round,
            entry: e.clone(),
        });
    }
}

impl RunOutput {
    /// A node of the grid at `label`: its cell, and its output if computed.
    pub fn record(&mut self, node: &str, stage: &'static str, label: Label, h: &Handle) {
        self.push(node, stage, &label, h);
        self.cells.push((node.to_string(), label));
    }

    /// Append what a job of [`run_jobs`] recorded, as if it had run here.
    pub fn absorb(&mut self, other: RunOutput) {
        for o in other.outputs {
            let label = Label {
                setting: o.setting,
                method: o.method,
                agent: o.agent,
                editor: o.editor,
                round: o.round,
            };
            let h = Handle::ready(&o.node, o.entry);
            self.push(&o.node, o.stage, &label, &h);
        }
        self.curve.extend(other.curve);
        self.cells.extend(other.cells);
    }
}

/// One independent part of a drive (a setting, a method's chain): run by
/// [`run_jobs`], possibly on a thread of its own.
pub type Job<'a> = Box<dyn FnOnce(&mut Cx<'_, '_>) -> Result<(), DriveError> + Send + 'a>;

/// Whether [`run_jobs`] runs jobs concurrently: yes, unless `OTB_CONCURRENT_CHAINS=0`.
fn concurrent_chains() -> bool {
    std::env::var("OTB_CONCURRENT_CHAINS").map_or(true, |v| v.trim() != "0")
}

/// Run independent jobs. With `otb run` they run concurrently, one thread each, so
/// their model calls meet in the backend's batch (the embedded model decodes
/// `OTB_LLAMA_PARALLEL` requests together; an endpoint gets more requests in
/// flight) instead of one chain's tail leaving it idle. Each job records into its
/// own session and output, taken back in job order, so reports, outputs and the
/// summary's inputs are the same as when the jobs run one after another (which
/// is what `otb status`, and `OTB_CONCURRENT_CHAINS=0`, do). Every job is run to
/// its end; the first error in job order is returned.
pub fn run_jobs(cx: &mut Cx<'_, '_>, jobs: Vec<Job<'_>>) -> Result<(), DriveError> {
    if jobs.len() <= 1 || cx.session.mode() == pipeline::Mode::Status || !concurrent_chains() {
        for job in jobs {
            job(cx)?;
        }
        return Ok(());
    }
    let models = cx.models;
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                let mut session = cx.session.fork();
                scope.spawn(move || {
                    let mut out = RunOutput::default();
                    let r = job(&mut Cx {
                        session: &mut session,
                        models,
                        out: &mut out,
                    });
                    (session, out, r)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let mut first = None;
    for r in results {
        match r {
            Ok((session, out, r)) => {
                cx.session.join(session);
                cx.out.absorb(out);
                if let Err(e) = r {
                    first.get_or_insert(e);
                }
            }
            Err(_) => {
                first.get_or_insert(DriveError::from(pipeline::StageError::bug(
                    "drive",
                    "a job of the drive panicked",
                )));
            }
        }
    }
    first.map_or(Ok(()), Err)
}

/// What every stage call of a drive needs: the session (run or plan), the models,
/// and where outputs are recorded.
pub struct Cx<'a, 's> {
    /// The session: run, or status mode.
    pub session: &'a mut Session<'s>,
    /// The models of the drive, opened on first use.
    pub models: &'a Models,
    /// Where computed outputs are recorded with their labels.
    pub out: &'a mut RunOutput,
}

impl Cx<'_, '_> {
    /// The node of stage `stage` (code version `version`) at cell `at`, in one call:
    /// named `at.node(stage)`, keyed by `params` and the inputs' digests, reused or
    /// computed with `run` (see [`Session::stage`]), and its output recorded with the
    /// cell's label. Pending only in status mode, for a node that would run or waits
    /// for an input.
    pub fn stage<P, F>(
        &mut self,
        at: &At,
        stage: &'static str,
        version: u32,
        params: &P,
        inputs: &[pipeline::Input<'_>],
        run: F,
    ) -> Result<Handle, DriveError>
    where
        P: serde::Serialize + ?Sized,
        F: FnOnce(&mut pipeline::StageCtx<'_>) -> Result<(), StageError>,
    {
        let node = at.node(stage);
        let h = self.stage_named(&node, stage, version, params, inputs, run)?;
        self.out.record(&node, stage, at.label(), &h);
        Ok(h)
    }

    /// Status mode: the node of `stage` at `at` waits for an input whose content its
    /// key needs (listed without a key); see [`Session::unkeyed`].
    pub fn waiting(
        &mut self,
        at: &At,
        stage: &'static str,
        inputs: &[pipeline::Input<'_>],
    ) -> Result<Handle, DriveError> {
        let node = at.node(stage);
        let h = self.session.unkeyed(&node, stage, inputs)?;
        self.out.record(&node, stage, at.label(), &h);
        Ok(h)
    }

    /// [`Cx::stage`] for a node outside the grid (`bfcl-data`, `chess-positions`): its
    /// name as given, its output not recorded here.
    pub fn stage_named<P, F>(
        &mut self,
        node: &str,
        stage: &'static str,
        version: u32,
        params: &P,
        inputs: &[pipeline::Input<'_>],
        run: F,
    ) -> Result<Handle, DriveError>
    where
        P: serde::Serialize + ?Sized,
        F: FnOnce(&mut pipeline::StageCtx<'_>) -> Result<(), StageError>,
    {
        let key = serde_json::to_value(params).map_err(|e| StageError::bug(stage, e))?;
        Ok(self.session.stage(node, stage, version, key, inputs, run)?)
    }
}

/// An offline environment's instances (chess positions, search questions): its
/// source stage's output, read once -- by the first stage that must be computed --
/// and split into training and test.
pub struct Splits<R> {
    /// The source stage's output.
    pub handle: Handle,
    rows: crate::once::BuildOnce<[Vec<R>; 2]>,
    is_train: fn(&R) -> bool,
}

impl<R: pipeline::Row> Splits<R> {
    /// The rows of `handle`; `is_train` tells a training row.
    pub fn new(handle: Handle, is_train: fn(&R) -> bool) -> Splits<R> {
        Splits {
            handle,
            rows: Default::default(),
            is_train,
        }
    }

    /// The rows of `split`, in stored order.
    pub fn get(&self, split: Split) -> Result<&[R], StageError> {
        let [train, test] = self.rows.get_or_try_build(|| {
            let (train, test) = self
                .handle
                .read::<R>()?
                .into_iter()
                .partition(|r| (self.is_train)(r));
            Ok::<_, StageError>([train, test])
        })?;
        Ok(match split {
            Split::Train => train,
            Split::Test => test,
        })
    }
}

/// Per documentation row of a reflect round: what the editor is shown, or why the
/// row is not sent.
#[derive(Clone, Debug, PartialEq)]
pub enum Example {
    /// The observed example, rendered for the editor prompt's `{{example}}`.
    Show(String),
    /// Not sent, and converged: no call was made, or the row is frozen already, or
    /// the success guard skipped it.
    Converged,
    /// Not sent, but not converged: the agent's model call failed (an infrastructure
    /// or answer error row), so there is nothing to learn from yet; ask again next
    /// round.
    Retry,
}

/// An environment whose tools differ per instance: ToolObserver runs online.
pub trait OnlineEnv {
    /// Agent turns on `docs` (one per instance), then grading, at the play step `at`:
    /// `(trajectories, scores)` (pending in status mode when not computed).
    /// `prev`: the previous round's trajectories, reused for instances whose docs did
    /// not change.
    fn explore_eval(
        &self,
        cx: &mut Cx<'_, '_>,
        at: &At,
        docs: &Handle,
        prev: Option<&Handle>,
    ) -> Result<(Handle, Handle), DriveError>;

    /// Round 0 of a ToolObserver curve (the play step `at`) is the Base chain's
    /// result: let the environment register it (e.g. in `out.curve`, for its summary
    /// table).
    fn curve_start(&self, out: &mut RunOutput, at: &At, scores: &Handle);

    /// What the editor sees for each row of `docs` (same order), given that round's
    /// trajectories and scores. `guard`: the success guard is on.
    fn examples(
        &self,
        docs: &[DocRow],
        trajectories: &Handle,
        scores: &Handle,
        guard: bool,
    ) -> Result<Vec<Example>, DriveError>;

    /// Key parameters of [`OnlineEnv::examples`] beyond the inputs' digests (e.g. which
    /// outcome signal is shown); part of the reflect stage's key.
    fn example_params(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// What an offline environment's agent plays: the play step `at` (its agent, seed,
/// round and split), how the agent samples on that split, and the shared docs.
#[derive(Clone, Copy)]
pub struct Play<'a> {
    /// The play step: agent, seed, round and split.
    pub at: &'a At,
    /// How the agent samples on this split.
    pub sampling: &'a crate::models::TurnSampling,
    /// The shared documentation the agent plays with.
    pub docs: &'a Handle,
}

/// An environment whose tools are shared by every instance: ToolObserver runs
/// offline over a training split and is evaluated on a test split.
pub trait OfflineEnv {
    /// The agent's trajectories in `play` (pending in status mode when not computed).
    fn explore(&self, cx: &mut Cx<'_, '_>, play: &Play<'_>) -> Result<Handle, DriveError>;

    /// The trajectories as the editor reads them, in order (each bounded).
    fn serialize(&self, trajectories: &Handle) -> Result<Vec<String>, DriveError>;

    /// What the editor must know to compare tools in this environment (e.g. for
    /// chess: which sign of the evaluation is good for whom). Goes into the prompts.
    fn editor_notes(&self) -> &str;

    /// The agent's system prompt (Play2Prompt validates candidate descriptions by
    /// asking the agent with it).
    /// (Default: none.)
    fn agent_system(&self) -> &str {
        ""
    }

    /// Runs this environment's tools for the baselines that play with them
    /// (Play2Prompt, DRAFT) on training material; built only when such a stage runs.
    /// Default: no tool play (every call answers that this environment has none, so
    /// those baselines keep the docs they were given).
    fn tool_runner(&self) -> Result<Box<dyn ToolRunner + '_>, StageError> {
        Ok(Box::new(NoToolPlay("this environment has no tool play")))
    }

    /// What [`OfflineEnv::tool_runner`] executes against, for a baseline stage's key:
    /// its parameters and the stage outputs it reads.
    fn runner_key(&self) -> (serde_json::Value, Vec<(&'static str, Handle)>) {
        (serde_json::Value::Null, Vec::new())
    }

    /// Grade the test-split trajectories of `play` (pending in status mode when not
    /// computed).
    fn evaluate(
        &self,
        cx: &mut Cx<'_, '_>,
        play: &Play<'_>,
        trajectories: &Handle,
    ) -> Result<Handle, DriveError>;
}

/// What executing one tool call gave: the Python `repr` of the result, or the error.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// The call succeeded.
    pub ok: bool,
    /// The result's `repr`, or the error text.
    pub text: String,
}

/// Executes an environment's tool calls for the methods that play with tools
/// (Play2Prompt, DRAFT): the BFCL executor, a chess tool on a training position, a
/// domain search; counting fakes in tests.
pub trait ToolRunner: Sync {
    /// Execute the tool `real_name` (shown to the model as `shown_name`) with `args`.
    fn run(
        &self,
        real_name: &str,
        shown_name: &str,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> ToolOutput;
}

impl<T: ToolRunner + ?Sized> ToolRunner for &T {
    fn run(
        &self,
        real_name: &str,
        shown_name: &str,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> ToolOutput {
        (**self).run(real_name, shown_name, args)
    }
}

/// A runner that executes nothing and says why (an environment without tool play;
/// a method that never executes tools).
pub struct NoToolPlay(pub &'static str);

impl ToolRunner for NoToolPlay {
    fn run(
        &self,
        _real: &str,
        shown: &str,
        _args: &serde_json::Map<String, serde_json::Value>,
    ) -> ToolOutput {
        ToolOutput {
            ok: false,
            text: format!("Error: {shown}: {}", self.0),
        }
    }
}

/// Run `f` on every item with up to `workers` threads (items are taken in order;
/// results come back in item order); `done` is called after each (progress). A
/// worker that panicked leaves `None` in its item's place.
pub fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    done: &(dyn Fn() + Sync),
    f: &(dyn Fn(&T) -> R + Sync),
) -> Vec<Option<R>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: std::sync::Mutex<Vec<Option<R>>> =
        std::sync::Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                if let Ok(mut o) = out.lock() {
                    o[i] = Some(r);
                }
                done();
            });
        }
    });
    out.into_inner().unwrap_or_default()
}

/// A method of the benchmark, parsed once from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// The original documentation.
    Gold,
    /// The opaque documentation, unchanged.
    Base,
    /// Documentation rewritten by ToolObserver's editor from observed trajectories.
    ToolObserver,
    /// The EasyTool baseline (a concise rewrite from the docs alone).
    EasyTool,
    /// The Play2Prompt baseline (tool play, then a searched description).
    Play2Prompt,
    /// The DRAFT baseline (explore, analyse, rewrite until the description converges).
    Draft,
}

impl Method {
    /// Every method, in table order.
    pub const ALL: [Method; 6] = [
        Method::Gold,
        Method::Base,
        Method::ToolObserver,
        Method::EasyTool,
        Method::Play2Prompt,
        Method::Draft,
    ];

    /// The name used in experiment files, node names and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Gold => "gold",
            Method::Base => "base",
            Method::ToolObserver => "toolobserver",
            Method::EasyTool => "easytool",
            Method::Play2Prompt => "play2prompt",
            Method::Draft => "draft",
        }
    }

    /// The method named `s`, if there is one.
    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// Methods whose documentation comes from a baseline stage.
    pub fn is_baseline(self) -> bool {
        matches!(self, Method::EasyTool | Method::Play2Prompt | Method::Draft)
    }
}

/// Parse method names, each one of `valid`.
pub fn parse_methods(names: &[String], valid: &[Method]) -> Result<Vec<Method>, String> {
    names
        .iter()
        .map(|n| {
            Method::parse(n)
                .filter(|m| valid.contains(m))
                .ok_or_else(|| {
                    format!(
                        "unknown method `{n}` (valid: {})",
                        valid
                            .iter()
                            .map(|m| m.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
        })
        .collect()
}

/// Words that would tell an agent or an editor how the tools differ (the hidden
/// structure ToolObserver must discover: the chess specialists' phases, the search
/// tools' domains). No prompt outside `prompts/hints/` may use them.
pub const HIDDEN_STRUCTURE_WORDS: &[&str] = &[
    "phase",
    "opening",
    "middlegame",
    "endgame",
    "topic",
    "domain",
    "collection",
    "part",
];

/// The [`HIDDEN_STRUCTURE_WORDS`] in `text`: whole words, plurals too, any case
/// (`late_endgame` counts as `endgame`; `partial` does not count as `part`).
pub fn hidden_structure_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| {
            HIDDEN_STRUCTURE_WORDS
                .iter()
                .any(|f| w == f || w.strip_suffix('s') == Some(f))
        })
        .collect()
}

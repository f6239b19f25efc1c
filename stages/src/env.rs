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

pub use crate::at::{At, Cell, Label, Method, Naming, Shown, Split, Step};
use crate::models::Models;
use crate::rows::DocRow;
use pipeline::{Entry, Handle, Node, Params, Schedule, Seq, Session, StageCtx, StageError};
use std::sync::{Arc, Mutex};

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

/// One stage output of the experiment with its grid cell, for export and tables.
#[derive(Clone, Debug)]
pub struct Output {
    /// The node's name (for people and the store's slots: readers use `cell`).
    pub node: String,
    /// The stage it ran.
    pub stage: &'static str,
    /// Where it sits in the grid (no method for a node outside the grid).
    pub cell: Cell,
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
    pub curve: Vec<(String, Cell, Handle)>,
    /// The grid cell of every node of the grid the drive passed (computed or not), in
    /// drive order: what `otb plan` says each node belongs to.
    pub cells: Vec<(String, Cell)>,
}

impl RunOutput {
    /// The outputs of stage `stage`, in drive order.
    pub fn by_stage<'a>(&'a self, stage: &'a str) -> impl Iterator<Item = &'a Output> + 'a {
        self.outputs.iter().filter(move |o| o.stage == stage)
    }

    /// Record an output if it is computed; a node shared by several chains
    /// (opacify, agent-free baselines) is recorded once.
    fn push(&mut self, node: &str, stage: &'static str, cell: &Cell, h: &Handle) {
        let Some(e) = h.entry() else { return };
        if self.outputs.iter().any(|o| {
            o.node == node
                && o.stage == stage
                && o.cell.agent == cell.agent
                && o.cell.editor == cell.editor
        }) {
            return;
        }
        self.outputs.push(Output {
            node: node.to_string(),
            stage,
            cell: cell.clone(),
            entry: e.clone(),
        });
    }
}

/// Where a drive records its outputs, from every thread of a run: each record at
/// its node's place ([`Seq`]), so [`Recorder::finish`] lists them in the drive's order
/// whatever order the nodes finished in.
#[derive(Default)]
pub struct Recorder {
    records: Mutex<Vec<(Seq, Record)>>,
}

enum Record {
    /// A stage output (a node of the grid when `cell`).
    Output {
        node: String,
        stage: &'static str,
        cell: Cell,
        handle: Handle,
        in_grid: bool,
    },
    /// A score output an environment's summary aggregates.
    Curve(String, Cell, Handle),
}

impl Recorder {
    fn add(&self, seq: Seq, r: Record) {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((seq, r));
    }

    /// The curve records from place `from` on, in the drive's order.
    pub fn curve_since(&self, from: &Seq) -> Vec<(String, Cell, Handle)> {
        let mut v: Vec<(Seq, (String, Cell, Handle))> = self
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(seq, _)| seq >= from)
            .filter_map(|(seq, r)| match r {
                Record::Curve(n, l, h) => Some((seq.clone(), (n.clone(), l.clone(), h.clone()))),
                Record::Output { .. } => None,
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.into_iter().map(|(_, c)| c).collect()
    }

    /// What the drive recorded, in its order (after every node has run).
    pub fn finish(self) -> RunOutput {
        let mut records = self.records.into_inner().unwrap_or_else(|e| e.into_inner());
        records.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = RunOutput::default();
        for (_, r) in records {
            match r {
                Record::Output {
                    node,
                    stage,
                    cell,
                    handle,
                    in_grid,
                } => {
                    out.push(&node, stage, &cell, &handle);
                    if in_grid {
                        out.cells.push((node, cell));
                    }
                }
                Record::Curve(n, l, h) => out.curve.push((n, l, h)),
            }
        }
        out
    }
}

/// Whether a run executes its nodes concurrently: yes, unless
/// `OTB_CONCURRENT_CHAINS=0` (then one node after another, in the drive's order).
fn concurrent() -> bool {
    std::env::var("OTB_CONCURRENT_CHAINS").map_or(true, |v| v.trim() != "0")
}

/// What every stage call of a drive needs: the session (run or status mode), the models,
/// where outputs are recorded, and -- inside [`Cx::scope`] in a run -- the schedule its
/// nodes are issued to. `'p`: what the nodes' code may borrow.
pub struct Cx<'p, 's> {
    /// The session: run, or status mode.
    pub session: &'p Session<'s>,
    /// The models of the drive, opened on first use.
    pub models: &'p Models,
    /// Where outputs are recorded with their cells.
    pub out: &'p Recorder,
    /// The environment (its experiment table's name) whose drive this is: the
    /// [`Cell::env`] of what it records.
    env: &'static str,
    /// Inside [`Cx::scope`] in a concurrent run: where nodes are issued (they run
    /// when [`Cx::scope`] ends); otherwise every node is looked up or computed when
    /// it is called.
    schedule: Option<Arc<Schedule<'p, DriveError>>>,
    /// This drive's (or continuation's) place; its nodes are numbered under it.
    seq: Seq,
    next: u32,
    /// Status mode: what decides whether the nodes declared here run at all (a loop
    /// that may stop before them), when that is not known yet ([`Cx::planned_after`]).
    after: Option<String>,
}

impl<'p, 's> Cx<'p, 's> {
    /// The context of a whole drive: nodes computed as they are called until a
    /// [`Cx::scope`].
    pub fn new(session: &'p Session<'s>, models: &'p Models, out: &'p Recorder) -> Cx<'p, 's> {
        Cx {
            session,
            models,
            out,
            env: "",
            schedule: None,
            seq: Seq::default(),
            next: 0,
            after: None,
        }
    }

    /// The same drive, recording for environment `env` (its experiment table's name)
    /// from now on.
    pub fn set_env(&mut self, env: &'static str) {
        self.env = env;
    }

    /// The environment (its experiment table's name) whose drive this is; empty
    /// before [`Cx::set_env`].
    pub fn env(&self) -> &'static str {
        self.env
    }

    /// Status mode: the nodes declared from now on in this context (and in the
    /// scopes and continuations it issues) run only if `after` does not stop the
    /// loop before them -- while one waits for an input it is listed as planned
    /// ([`pipeline::Call::after`]) instead of blocked.
    pub fn planned_after(&mut self, after: String) {
        self.after = Some(after);
    }

    /// Whether the nodes declared here are planned ([`Cx::planned_after`]).
    pub fn planned(&self) -> bool {
        self.after.is_some()
    }

    /// A context of this drive at `seq` (a scope's or a continuation's) issuing into
    /// `schedule`; its nodes are planned as this one's are.
    fn child<'q>(&self, seq: Seq, schedule: Option<Arc<Schedule<'q, DriveError>>>) -> Cx<'q, 's>
    where
        'p: 'q,
    {
        Cx {
            session: self.session,
            models: self.models,
            out: self.out,
            env: self.env,
            schedule,
            seq,
            next: 0,
            after: self.after.clone(),
        }
    }

    /// The place of the next node or continuation.
    fn next_seq(&mut self) -> Seq {
        let s = self.seq.child(self.next);
        self.next += 1;
        s
    }

    /// The place the next record will take: what [`Recorder::curve_since`] counts
    /// from.
    pub fn mark(&self) -> Seq {
        self.seq.child(self.next)
    }

    /// Issue the nodes `f` calls as one schedule and, in a run, execute it: every node
    /// as soon as its inputs are computed, independent ones concurrently (unless
    /// `OTB_CONCURRENT_CHAINS=0`); returns when all have run, with the first error in
    /// the drive's order. In status mode (and one node at a time) `f`'s nodes are
    /// looked up or computed as they are called. `f` may borrow what lives as long
    /// as this call (an environment built by the drive).
    pub fn scope<'q, R, F>(&mut self, f: F) -> Result<R, DriveError>
    where
        'p: 'q,
        F: FnOnce(&mut Cx<'q, 's>) -> Result<R, DriveError>,
    {
        let deferred = self.session.mode() == pipeline::Mode::Run && concurrent();
        let schedule: Option<Arc<Schedule<'q, DriveError>>> = deferred.then(Default::default);
        let seq = self.next_seq();
        let mut inner = self.child(seq, schedule.clone());
        let issued = f(&mut inner);
        drop(inner);
        // What was issued runs even after an error issuing more (every node runs to
        // its end); the issuing error comes first.
        let errors = schedule.map(|p| p.run()).unwrap_or_default();
        let r = issued?;
        errors.into_iter().next().map_or(Ok(r), Err)
    }

    /// Run `f` once every handle of `waits` is computed: at once when nodes are
    /// computed as they are called (in status mode some of them may be pending),
    /// else when the schedule's executor has computed them (skipped if one failed). `f`
    /// issues its nodes at this call's place in the drive's order: what a
    /// continuation records sorts as if it had run here.
    pub fn then<F>(&mut self, waits: &[&Handle], f: F) -> Result<(), DriveError>
    where
        F: FnOnce(&mut Cx<'p, 's>) -> Result<(), DriveError> + Send + 'p,
    {
        let seq = self.next_seq();
        let mut child = self.child(seq, self.schedule.clone());
        match self.schedule.clone() {
            None => f(&mut child),
            Some(schedule) => {
                let waits = waits.iter().map(|h| (*h).clone()).collect();
                let seq = child.seq.clone();
                schedule.push(seq, waits, move || f(&mut child));
                Ok(())
            }
        }
    }

    /// The node of stage `stage` (code version `version`) at cell `at`, in one call:
    /// named `at.node(stage)`, keyed by `params` and the inputs' digests, reused or
    /// computed with `run` (given the params; it reads its inputs through
    /// [`StageCtx::input`]), and recorded with the cell's label. In a scope of a run
    /// the node runs later (its handle is a promise); in status mode its handle is
    /// pending when it would run or waits for an input.
    pub fn stage<P, F>(
        &mut self,
        at: &At,
        stage: &'static str,
        version: u32,
        params: P,
        inputs: &[pipeline::Input<'_>],
        run: F,
    ) -> Result<Handle, DriveError>
    where
        P: serde::Serialize + Send + 'p,
        F: FnOnce(&mut StageCtx<'_>, &P) -> Result<(), StageError> + Send + 'p,
    {
        let node = at.node(stage);
        let seq = self.next_seq();
        let h = self.issue_known(&seq, (&node, stage, version), params, inputs, run)?;
        self.record(seq, &node, stage, at.cell(self.env), &h);
        Ok(h)
    }

    /// [`Cx::stage`] for a node whose params are computed from its inputs' content
    /// (`params` is called once every input is computed: e.g. a key that names the
    /// documentation's text). In status mode, while an input is not computed, the
    /// node is listed waiting for it, without a key.
    pub fn stage_later<F>(
        &mut self,
        at: &At,
        stage: &'static str,
        version: u32,
        params: impl FnOnce() -> Result<serde_json::Value, StageError> + Send + 'p,
        inputs: &[pipeline::Input<'_>],
        run: F,
    ) -> Result<Handle, DriveError>
    where
        F: FnOnce(&mut StageCtx<'_>) -> Result<(), StageError> + Send + 'p,
    {
        let node = at.node(stage);
        let seq = self.next_seq();
        let h = if self.schedule.is_none() && inputs.iter().any(|(_, h)| h.entry().is_none()) {
            let after = self.after.as_deref();
            self.session.unkeyed(&seq, (&node, stage), after, inputs)?
        } else {
            let params = Params::Later(Box::new(params));
            self.issue(node_of(&seq, (&node, stage, version), params, inputs), run)?
        };
        self.record(seq, &node, stage, at.cell(self.env), &h);
        Ok(h)
    }

    fn record(&self, seq: Seq, node: &str, stage: &'static str, cell: Cell, h: &Handle) {
        self.out.add(
            seq,
            Record::Output {
                node: node.to_string(),
                stage,
                cell,
                handle: h.clone(),
                in_grid: true,
            },
        );
    }

    /// Record an output outside the grid (`bfcl-data`, `summarize`): listed among the
    /// outputs, with no cell.
    pub fn push(&mut self, node: &str, stage: &'static str, h: &Handle) {
        let seq = self.next_seq();
        self.out.add(
            seq,
            Record::Output {
                node: node.to_string(),
                stage,
                cell: Cell {
                    env: self.env,
                    ..Cell::default()
                },
                handle: h.clone(),
                in_grid: false,
            },
        );
    }

    /// Record a score output (cell `at`) an environment's summary aggregates.
    pub fn curve(&mut self, name: String, at: &At, h: &Handle) {
        let seq = self.next_seq();
        let cell = at.cell(self.env);
        self.out.add(seq, Record::Curve(name, cell, h.clone()));
    }

    /// [`Cx::stage`] for a node outside the grid (`bfcl-data`, `chess-positions`): its
    /// name as given, its output not recorded here.
    pub fn stage_named<P, F>(
        &mut self,
        node: &str,
        stage: &'static str,
        version: u32,
        params: P,
        inputs: &[pipeline::Input<'_>],
        run: F,
    ) -> Result<Handle, DriveError>
    where
        P: serde::Serialize + Send + 'p,
        F: FnOnce(&mut StageCtx<'_>, &P) -> Result<(), StageError> + Send + 'p,
    {
        let seq = self.next_seq();
        self.issue_known(&seq, (node, stage, version), params, inputs, run)
    }

    /// [`Cx::issue`] for a node whose params are known: keyed by them, and `run` is
    /// given them.
    fn issue_known<P, F>(
        &self,
        seq: &Seq,
        (node, stage, version): (&str, &'static str, u32),
        params: P,
        inputs: &[pipeline::Input<'_>],
        run: F,
    ) -> Result<Handle, DriveError>
    where
        P: serde::Serialize + Send + 'p,
        F: FnOnce(&mut StageCtx<'_>, &P) -> Result<(), StageError> + Send + 'p,
    {
        let key = serde_json::to_value(&params).map_err(|e| StageError::bug(stage, e))?;
        let run = move |ctx: &mut StageCtx<'_>| run(ctx, &params);
        let n = node_of(seq, (node, stage, version), Params::Known(key), inputs);
        self.issue(n, run)
    }

    /// Look the node up, or compute it (now, or -- in a scope of a run -- when the
    /// schedule runs).
    fn issue<F>(&self, mut n: Node<'p>, run: F) -> Result<Handle, DriveError>
    where
        F: FnOnce(&mut StageCtx<'_>) -> Result<(), StageError> + Send + 'p,
    {
        // Whether it is planned is this context's word for its nodes.
        n.after = self.after.clone();
        if let Some(schedule) = &self.schedule {
            return Ok(schedule.node(self.session, n, run));
        }
        let params = match n.params {
            Params::Known(v) => v,
            Params::Later(f) => f()?,
        };
        let call = pipeline::Call {
            node: &n.node,
            stage: n.stage,
            code_version: n.code_version,
            params,
            after: n.after.as_deref(),
        };
        let inputs: Vec<(&str, &Handle)> = n.inputs.iter().map(|(k, h)| (k.as_str(), h)).collect();
        Ok(self.session.stage_at(&n.seq, call, &inputs, run)?)
    }
}

/// The node `node` of `stage` at `seq`, with its inputs owned.
fn node_of<'p>(
    seq: &Seq,
    (node, stage, code_version): (&str, &'static str, u32),
    params: Params<'p>,
    inputs: &[pipeline::Input<'_>],
) -> Node<'p> {
    Node {
        seq: seq.clone(),
        node: node.to_string(),
        stage,
        code_version,
        params,
        inputs: inputs
            .iter()
            .map(|(n, h)| (n.to_string(), (*h).clone()))
            .collect(),
        after: None,
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
pub trait OnlineEnv: Sync {
    /// Agent turns on `docs` (one per instance), then grading, at the play step `at`:
    /// `(trajectories, scores)` (pending in status mode when not computed).
    /// `prev`: the previous round's trajectories, reused for instances whose docs did
    /// not change.
    fn explore_eval<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        at: &At,
        docs: &Handle,
        prev: Option<&Handle>,
    ) -> Result<(Handle, Handle), DriveError>;

    /// Round 0 of a ToolObserver curve (the play step `at`) is the Base chain's
    /// result: let the environment register it (e.g. in `out.curve`, for its summary
    /// table).
    fn curve_start(&self, cx: &mut Cx<'_, '_>, at: &At, scores: &Handle);

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
pub trait OfflineEnv: Sync {
    /// The agent's trajectories in `play` (pending in status mode when not computed).
    fn explore<'p>(&'p self, cx: &mut Cx<'p, '_>, play: &Play<'_>) -> Result<Handle, DriveError>;

    /// The trajectories as the editor reads them, in order (each bounded).
    fn serialize(&self, trajectories: &Handle) -> Result<Vec<String>, DriveError>;

    /// A grading node of its own over a training play's `trajectories` (search: the
    /// LLM judge, when one is set), whose output batch-reflect then reads in their
    /// place, through [`OfflineEnv::serialize_graded`]; `None`: batch-reflect reads the
    /// trajectories through [`OfflineEnv::serialize`]. Pending in status mode when not
    /// computed. (Default: none.)
    fn grade<'p>(
        &'p self,
        _cx: &mut Cx<'p, '_>,
        _play: &Play<'_>,
        _trajectories: &Handle,
    ) -> Result<Option<Handle>, DriveError> {
        Ok(None)
    }

    /// The output of the grading node ([`OfflineEnv::grade`]) as the editor reads it,
    /// one text per trajectory, in order. (Default: a bug -- this environment has no
    /// grading node.)
    fn serialize_graded(&self, _graded: &Handle) -> Result<Vec<String>, DriveError> {
        Err(StageError::bug(
            "serialize_graded",
            "this environment grades no trajectories",
        )
        .into())
    }

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

    /// The agent on training items for an external method's `play` request
    /// (`docs/methods.md`); built only when an external method's stage runs. It holds
    /// training items only, read from [`OfflineEnv::play_key`]'s inputs. Default:
    /// none (`play` is answered `unsupported`).
    fn player(&self) -> Result<Option<Box<dyn TrainingPlay + '_>>, StageError> {
        Ok(None)
    }

    /// [`OfflineEnv::tool_runner`] for an external method's stage (its `call_tool`):
    /// the same tool play, on the training items of [`OfflineEnv::play_key`]'s inputs
    /// only. Default: [`OfflineEnv::tool_runner`] (tool play that reads no items).
    fn training_runner(&self) -> Result<Box<dyn ToolRunner + '_>, StageError> {
        self.tool_runner()
    }

    /// What an external method's stage executes and plays on
    /// ([`OfflineEnv::training_runner`], [`OfflineEnv::player`]), for its key: the
    /// training play's parameters, and the stage outputs the stage reads *in place
    /// of* [`OfflineEnv::runner_key`]'s -- a node holding the training split alone
    /// (chess: `chess-train-positions`), so that no test item is among the stage's
    /// inputs. Default: null, and [`OfflineEnv::runner_key`]'s outputs.
    fn play_key(&self) -> (serde_json::Value, Vec<(&'static str, Handle)>) {
        (serde_json::Value::Null, self.runner_key().1)
    }

    /// Grade the test-split trajectories of `play` (pending in status mode when not
    /// computed).
    fn evaluate<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
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

/// Parse method names, each one of `valid`.
pub fn parse_methods(names: &[String], valid: &[Method]) -> Result<Vec<Method>, String> {
    names
        .iter()
        .map(|n| {
            // An external method (`ext:<name>`) runs wherever the baselines run.
            Method::parse(n)
                .filter(|m| valid.contains(m) || m.external_name().is_some())
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

/// Nouns that name the hidden partition itself (the chess specialists' phases, the
/// search tools' domains, topics, collection parts, source categories): no text that a
/// run sends to any model may use them; only the labelled `hints` switch does.
pub const PARTITION_NOUNS: &[&str] = &[
    "phase",
    "middlegame",
    "domain",
    "topic",
    "collection",
    "part",
    "category",
    "specialist",
];

/// The paper's own cue to the chess agent: it is asked what type of position it
/// faces (tactical, positional, endgame, opening). The agent's prompts may use these
/// words; editor notes and tool texts may not use the partition's names among them,
/// and no text may tie a tool to one of them.
pub const POSITION_TYPES: &[&str] = &["tactical", "positional", "endgame", "opening"];

/// Who reads a text that a run sends to a model; it decides which of the hidden
/// partition's names the text may use ([`partition_leaks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// Any model, the search judge included: the partition's nouns
    /// ([`PARTITION_NOUNS`], and "late endgame") and sentences that tie a tool to a
    /// part of the partition are leaks.
    Any,
    /// The agent (system prompt, turns, final-answer prompt): as [`Reader::Any`], and
    /// every partition name ([`partition_names`]) except the paper's position types
    /// ([`POSITION_TYPES`]).
    Agent,
    /// The editor or a baseline's generator (notes, batch, merge and baseline
    /// prompts): as [`Reader::Any`], and every partition name.
    Editor,
    /// A tool's name, description and parameter texts, and the environment's own
    /// wording of tool results: as [`Reader::Editor`].
    Tool,
}

/// Lowercase alphanumeric words of `text` (`late_endgame` is `late`, `endgame`).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether `word` is `term` or its plural.
fn is_term(word: &str, term: &str) -> bool {
    word == term
        || word.strip_suffix('s') == Some(term)
        || term
            .strip_suffix('y')
            .is_some_and(|stem| word.strip_suffix("ies") == Some(stem))
}

/// The names of the hidden partition, taken from the gold documentation of every
/// tool set -- chess: `opening_specialist` ... `late_endgame_specialist`,
/// `elo_1200` ...; search: both domain sets' ids and gold tool names -- as lowercase
/// words, without numbers and the generic `search`, `sources`, `other`, `all` and
/// `late`.
pub fn partition_names() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        use datasets::chess::tools::{Docs, ToolFamily, ToolSet};
        use datasets::search::corpus::DomainSet;
        const GENERIC: &[&str] = &["search", "sources", "source", "other", "all", "late"];
        let mut raw: Vec<String> = ToolFamily::ALL
            .iter()
            .flat_map(|f| ToolSet::new(*f).names(Docs::Gold))
            .collect();
        for set in [DomainSet::browsecomp(), DomainSet::substitute()] {
            for d in set.filtered().chain(std::iter::once(&set.all)) {
                raw.push(d.id.clone());
                raw.push(d.gold_name.clone());
            }
        }
        let mut out: Vec<String> = raw
            .iter()
            .flat_map(|n| words(n))
            .filter(|w| !GENERIC.contains(&w.as_str()) && !w.chars().all(|c| c.is_ascii_digit()))
            .collect();
        out.sort();
        out.dedup();
        out
    })
}

/// Whether a sentence's words point at particular tools: `function_<n>`, "each /
/// every / whichever tool", "tools differ", "tool covers", "tool specialises".
fn names_a_tool(ws: &[String]) -> bool {
    ws.windows(2).any(|p| {
        let (a, b) = (p[0].as_str(), p[1].as_str());
        (a == "function" && b.chars().all(|c| c.is_ascii_digit()))
            || (matches!(a, "each" | "every" | "whichever")
                && (is_term(b, "tool") || is_term(b, "function")))
            || ((is_term(a, "tool") || is_term(a, "function"))
                && ["differ", "cover", "covering", "speciali"]
                    .iter()
                    .any(|v| b.starts_with(v)))
    })
}

/// What in `text` names the hidden partition that ToolObserver must discover (the
/// chess specialists' phases and the tools' strengths, the search tools' domains), for
/// `reader`: the partition's nouns, its names (see [`Reader`]), and every sentence
/// that ties a tool to a partition name or a position type (reported as `tool ~
/// <word>`). The paper's own cues -- the position types in the agent's prompt, "the
/// tools return different types of results", "what type of question is this",
/// query-type suitability -- are not leaks. Hits are lowercase, in text order.
pub fn partition_leaks(text: &str, reader: Reader) -> Vec<String> {
    let names = partition_names();
    let named = |w: &str| names.iter().any(|n| is_term(w, n));
    let typed = |w: &str| POSITION_TYPES.iter().any(|t| is_term(w, t));
    let mut out = Vec::new();
    let sentences = text.split("\n\n").flat_map(|p| p.split(['.', '!', '?']));
    for sentence in sentences {
        let ws = words(sentence);
        for (i, w) in ws.iter().enumerate() {
            if w == "late" && ws.get(i + 1).is_some_and(|n| is_term(n, "endgame")) {
                out.push("late endgame".to_string());
                continue;
            }
            if i > 0 && ws[i - 1] == "late" && is_term(w, "endgame") {
                continue;
            }
            let leak = PARTITION_NOUNS.iter().any(|n| is_term(w, n))
                || match reader {
                    Reader::Any => false,
                    Reader::Agent => named(w) && !typed(w),
                    Reader::Editor | Reader::Tool => named(w),
                };
            if leak {
                out.push(w.clone());
            }
        }
        if names_a_tool(&ws) {
            if let Some(w) = ws.iter().find(|w| named(w) || typed(w)) {
                out.push(format!("tool ~ {w}"));
            }
        }
    }
    out
}

/// What in `text` names the hidden partition whoever reads it:
/// [`partition_leaks`] for [`Reader::Any`].
pub fn hidden_structure_words(text: &str) -> Vec<String> {
    partition_leaks(text, Reader::Any)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names_come_from_the_gold_docs() {
        let names = partition_names();
        for n in [
            "opening",
            "middlegame",
            "endgame",
            "elo",
            "wikipedia",
            "news",
            "history",
            "people",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
        }
        for n in ["search", "sources", "other", "all", "late", "1200"] {
            assert!(!names.iter().any(|x| x == n), "{n} in {names:?}");
        }
    }

    #[test]
    fn leaks_are_whole_words_and_depend_on_the_reader() {
        let text = "A partial game; the Opening, late_endgame and phases.";
        assert_eq!(hidden_structure_words(text), ["late endgame", "phases"]);
        assert_eq!(
            partition_leaks(text, Reader::Editor),
            ["opening", "late endgame", "phases"]
        );
        assert!(hidden_structure_words("counterpart apart partially").is_empty());
        assert_eq!(hidden_structure_words("Two categories."), ["categories"]);
        // The paper's cues pass for the agent; an editor note may not name a phase.
        let cue = "Ask what type of position this is: tactical, positional, an endgame or \
                   an opening. When one tool is clearly superior for that type of position, \
                   use it.";
        assert!(partition_leaks(cue, Reader::Agent).is_empty());
        assert_eq!(partition_leaks(cue, Reader::Editor), ["endgame", "opening"]);
        let search = "The tools return different types of results: what type of question \
                      is this? Note which types of query each one suits.";
        for r in [Reader::Agent, Reader::Editor] {
            assert!(partition_leaks(search, r).is_empty(), "{r:?}");
        }
        // A sentence that ties a tool to a phase or a domain leaks for every reader.
        assert_eq!(
            hidden_structure_words("Use function_2 in an endgame."),
            ["tool ~ endgame"]
        );
        assert_eq!(
            hidden_structure_words("Each tool is best for one kind of position (opening, ...)"),
            ["tool ~ opening"]
        );
        assert_eq!(
            partition_leaks("Whichever tool finds sports results wins.", Reader::Agent),
            ["sports", "tool ~ sports"]
        );
        // Domain names are not leaks for the judge (its "reference answer").
        assert!(hidden_structure_words("Compare with the reference answer.").is_empty());
        assert_eq!(
            partition_leaks("the reference answer", Reader::Agent),
            ["reference"]
        );
    }
}

/// One training item the agent played for a `play` request.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Played {
    /// The training item's id (a chess training position's id).
    pub item: String,
    /// What the agent was asked to do there (a chess game: the side it played).
    pub task: String,
    /// Its score, where the environment gives one (a finished chess game's result
    /// for the agent: 1, 0.5 or 0); `None` for a game cut short.
    pub score: Option<f64>,
    /// The outcome in words (a chess game's result and how it ended).
    pub outcome: String,
    /// The trajectory as ToolObserver's editor reads it (bounded by [`MAX_TRAJECTORY_BYTES`]).
    pub trajectory: String,
}

/// The longest trajectory text a `play` reply carries (the rest is cut, marked).
pub const MAX_TRAJECTORY_BYTES: usize = 8 << 10;
/// How many training items one `play` request may name (or ask for).
pub const MAX_PLAY_ITEMS: usize = 8;

/// An environment's training play for an external method's `play` requests
/// (`baselines::external`, `docs/methods.md`): the experiment's agent on
/// *training* items only (a type implementing it never holds test items), every
/// agent request made through the `agent` it is given (which records it).
pub trait TrainingPlay: Sync {
    /// The training items' ids, in order (what `play` may name).
    fn items(&self) -> Result<Vec<String>, String>;

    /// Play one training item as `job` says.
    fn play(&self, job: &PlayJob<'_>) -> Result<Vec<Played>, String>;
}

/// One `play` of a training item: the item, and the agent with its system prompt,
/// the proposed docs as tools and the cell's seed its requests are seeded from.
pub struct PlayJob<'a> {
    /// The training item's id.
    pub item: &'a str,
    /// The agent (recording every turn it takes).
    pub agent: &'a dyn crate::models::MultiTurn,
    /// Its system prompt.
    pub system: &'a str,
    /// The tools with the proposed descriptions.
    pub tools: &'a [serde_json::Value],
    /// The cell's seed.
    pub seed: u64,
}

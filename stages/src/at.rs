//! Where a node sits in an experiment's grid: [`At`], one value per cell, with the
//! node's name ([`At::node`]) and its output's [`Label`] ([`At::label`]).
//!
//! A grid cell is (environment, setting or tool set, method, agent, editor, round,
//! split, seed, and which step of the method). Every stage call of a drive is made
//! at one, so a node name is written in exactly one place: the naming rules below,
//! which are the store's (slots are recorded by node name, and `summarize`'s key
//! holds its inputs' labels): changing them would make users' stores stale.
//!
//! Node names are `<stage>[<tag>]`; the tag is built from the cell:
//!
//! | step | online (BFCL) | offline (chess, search) |
//! |---|---|---|
//! | [`Step::Source`], gold / base | `names` (`opacify`) | `names gold`, `names opaque` |
//! | [`Step::Source`], a baseline | `names{s}{a}{e}` (`{a}` for Play2Prompt only) | `names{a}{e}` (idem) |
//! | [`Step::Source`], an external method | `names ext:<name>{s}{e}` | `names ext:<name>{e}` |
//! | [`Step::Play`], gold / base | `names r0{s}{a}` | `names base test{a}` |
//! | [`Step::Play`], ToolObserver | `names r2{s}{a}{e}{ guard}` | `names toolobserver train r1{a}{e}`, `... test{a}{e}` |
//! | [`Step::Play`], a baseline | `names easytool r0{s}{a}{e}` | `names easytool test{a}{e}` |
//! | [`Step::Edit`] | `names r2{s}{a}{e}{ guard}` | `names r2{a}{e}` |
//!
//! `{s}` = ` s<seed>` when the grid has several seeds, `{a}` = ` a=<agent>` when it
//! has several agents, `{e}` = ` e=<editor>` when it has several editors (each only
//! where the cell has one).

use crate::models::ModelSpec;

/// A tool set as `otb export --sft` names it: `bfcl` (every BFCL setting shows the
/// same functions), `<env>:<set>` for the environments with shared tool sets (a
/// cell's environment and setting name its tool set).
pub fn tool_set_id(env: &str, setting: &str) -> String {
    match env {
        "bfcl" => "bfcl".into(),
        _ => format!("{env}:{setting}"),
    }
}

/// The two splits of an offline environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// The training split: the agent explores and the editor learns from it.
    Train,
    /// The test split: the final documentation is evaluated on it.
    Test,
}

impl Split {
    /// The split's name as stored in rows and node names: `train` or `test`.
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Test => "test",
        }
    }
}

/// The part of a [`Cell`] that `summarize`'s key holds (setting x method x agent x
/// editor x round): derived from the cell, never built by hand. Its serialised form is
/// the store's (changing it would make users' `summarize` entries stale).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Label {
    /// The documentation setting (BFCL) or tool set (chess, search).
    pub setting: String,
    /// The method (`gold`, `base`, `toolobserver`, `easytool`, ...).
    pub method: String,
    /// Agent model spec (empty for agent-free nodes).
    pub agent: String,
    /// Editor model spec (empty where no editor is involved).
    pub editor: String,
    /// The documentation round.
    pub round: i64,
}

/// How an environment's ToolObserver runs, which decides its node names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Naming {
    /// Tools per instance, rounds until frozen (BFCL).
    #[default]
    Online,
    /// Tools shared, a training and a test split (chess, search).
    Offline,
}

/// Which step of a method a node is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Step {
    /// The method's starting documentation: opacified / gold docs, or a baseline's.
    #[default]
    Source,
    /// The agent plays with the docs of `round` (explore, evaluate, judge, Elo);
    /// offline environments say on which split.
    Play {
        /// The split played on (offline environments), or `None` (online).
        split: Option<Split>,
    },
    /// The editor's step that makes the docs of `round` (batch-reflect, merge).
    Edit,
}

/// Which coordinates tell a grid's chains apart in node names (only those the grid
/// has several of are shown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shown {
    /// Several seeds: node names show ` s<seed>`.
    pub seed: bool,
    /// Several agents: node names show ` a=<agent>`.
    pub agent: bool,
    /// Several editors: node names show ` e=<editor>`.
    pub editor: bool,
}

/// One cell of an experiment's grid.
#[derive(Clone, Debug, Default)]
pub struct At {
    /// Online or offline naming rules (the environment's kind).
    pub naming: Naming,
    /// The documentation setting (BFCL) or tool set (chess, search).
    pub setting: String,
    /// The method as tables name it (`gold`, `base`, `toolobserver`,
    /// `toolobserver-guard`, `easytool`, `play2prompt`, `draft`).
    pub method: String,
    /// The chain's agent (none for agent-free nodes such as `opacify`).
    pub agent: Option<ModelSpec>,
    /// The editor (ToolObserver and the baselines).
    pub editor: Option<ModelSpec>,
    /// The documentation round: the one a node plays with, or the one it makes.
    pub round: i64,
    /// Which step of the method the node is.
    pub step: Step,
    /// The chain's seed (shown in node names as ` s<seed>`).
    pub seed: u64,
    /// Which coordinates the node name shows.
    pub shown: Shown,
}

impl At {
    /// A cell of `setting` in a grid named by `naming`.
    pub fn new(naming: Naming, setting: &str, method: &str) -> At {
        At {
            naming,
            setting: setting.to_string(),
            method: method.to_string(),
            ..At::default()
        }
    }

    /// The same cell with method `method`.
    pub fn with_method(&self, method: &str) -> At {
        At {
            method: method.to_string(),
            ..self.clone()
        }
    }

    /// The same cell with editor `editor`.
    pub fn with_editor(&self, editor: &ModelSpec) -> At {
        At {
            editor: Some(editor.clone()),
            ..self.clone()
        }
    }

    /// The cell's `step` at documentation round `round`.
    pub fn at(&self, step: Step, round: i64) -> At {
        At {
            step,
            round,
            ..self.clone()
        }
    }

    /// The play step of round `round` on `split`.
    pub fn play(&self, split: Option<Split>, round: i64) -> At {
        self.at(Step::Play { split }, round)
    }

    /// The offline environments' split of a play step.
    pub fn split(&self) -> Option<Split> {
        match self.step {
            Step::Play { split } => split,
            _ => None,
        }
    }

    /// The cell's agent, for a node of `stage` that needs one (a bug otherwise).
    pub fn agent_for(&self, stage: &str) -> Result<&ModelSpec, pipeline::StageError> {
        self.agent
            .as_ref()
            .ok_or_else(|| pipeline::StageError::bug(stage, format!("{} has no agent", self.tag())))
    }

    /// The cell's editor, for a node of `stage` that needs one (a bug otherwise).
    pub fn editor_for(&self, stage: &str) -> Result<&ModelSpec, pipeline::StageError> {
        self.editor.as_ref().ok_or_else(|| {
            pipeline::StageError::bug(stage, format!("{} has no editor", self.tag()))
        })
    }

    /// The split of an offline play step, for a node of `stage` (a bug otherwise).
    pub fn split_for(&self, stage: &str) -> Result<Split, pipeline::StageError> {
        self.split().ok_or_else(|| {
            pipeline::StageError::bug(stage, format!("{} is on no split", self.tag()))
        })
    }

    fn is_baseline(&self) -> bool {
        Method::parse(&self.method).is_some_and(Method::is_baseline)
    }

    fn is_toolobserver(&self) -> bool {
        self.method.starts_with("toolobserver")
    }

    /// ` s<seed>` where seeds are shown (online grids only).
    fn s(&self) -> String {
        if self.shown.seed {
            format!(" s{}", self.seed)
        } else {
            String::new()
        }
    }

    fn a(&self) -> String {
        match &self.agent {
            Some(a) if self.shown.agent => format!(" a={}", a.tag()),
            _ => String::new(),
        }
    }

    fn e(&self) -> String {
        match &self.editor {
            Some(e) if self.shown.editor => format!(" e={}", e.tag()),
            _ => String::new(),
        }
    }

    fn guard(&self) -> &'static str {
        if self.method == "toolobserver-guard" {
            " guard"
        } else {
            ""
        }
    }

    /// The cell's part of a node name (see the module docs).
    pub fn tag(&self) -> String {
        let (set, s, a, e) = (&self.setting, self.s(), self.a(), self.e());
        let m = &self.method;
        // Baselines other than Play2Prompt and the external methods (whose `play`
        // runs the agent) make docs for every agent at once.
        let source_a = if m == "play2prompt" || m.starts_with(EXTERNAL_PREFIX) {
            a.clone()
        } else {
            String::new()
        };
        // An external method's docs come from the one `external` stage: its name tells
        // two of them apart.
        let ext = if m.starts_with(EXTERNAL_PREFIX) {
            format!(" {m}")
        } else {
            String::new()
        };
        match (self.naming, self.step) {
            (Naming::Online, Step::Source) if self.is_baseline() => {
                format!("{set}{ext}{s}{source_a}{e}")
            }
            (Naming::Online, Step::Source) => set.clone(),
            (Naming::Online, Step::Play { .. }) if self.is_baseline() => {
                format!("{set} {m} r{}{s}{a}{e}", self.round)
            }
            (Naming::Online, Step::Play { .. } | Step::Edit) if self.is_toolobserver() => {
                format!("{set} r{}{s}{a}{e}{}", self.round, self.guard())
            }
            (Naming::Online, Step::Play { .. } | Step::Edit) => {
                format!("{set} r{}{s}{a}", self.round)
            }
            (Naming::Offline, Step::Source) if self.is_baseline() => {
                format!("{set}{ext}{source_a}{e}")
            }
            (Naming::Offline, Step::Source) => {
                let docs = if m == "gold" { "gold" } else { "opaque" };
                format!("{set} {docs}")
            }
            (Naming::Offline, Step::Play { split }) => match split {
                Some(Split::Train) => format!("{set} {m} train r{}{a}{e}", self.round),
                _ => format!("{set} {m} test{a}{e}"),
            },
            (Naming::Offline, Step::Edit) => format!("{set} r{}{a}{e}", self.round),
        }
    }

    /// The name of this cell's node of stage `stage`: `<stage>[<tag>]`.
    pub fn node(&self, stage: &str) -> String {
        format!("{stage}[{}]", self.tag())
    }

    /// The typed cell of this node's outputs in environment `env` (the experiment
    /// table that drove it): what every reader groups and filters by.
    pub fn cell(&self, env: &'static str) -> Cell {
        let (method, guard) = Method::parse_label(&self.method);
        let spec = |m: &Option<ModelSpec>| m.as_ref().map(ToString::to_string).unwrap_or_default();
        Cell {
            env,
            setting: self.setting.clone(),
            method,
            guard,
            agent: spec(&self.agent),
            editor: spec(&self.editor),
            round: self.round,
            step: self.step,
            seed: self.seed,
        }
    }

    /// The label of this cell's outputs (`summarize`'s key holds it).
    pub fn label(&self) -> Label {
        self.cell("").label()
    }
}

/// A cell serialises (`otb plan --format json`, exports) with its method and step by
/// name and its split as a field of its own.
impl serde::Serialize for Cell {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Cell", 9)?;
        st.serialize_field("env", self.env)?;
        st.serialize_field("setting", &self.setting)?;
        st.serialize_field("method", self.method_name())?;
        st.serialize_field("agent", &self.agent)?;
        st.serialize_field("editor", &self.editor)?;
        st.serialize_field("round", &self.round)?;
        st.serialize_field("step", self.step_name())?;
        st.serialize_field("split", &self.split())?;
        st.serialize_field("seed", &self.seed)?;
        st.end()
    }
}

/// Where a stored output sits in the experiment's grid, every coordinate typed: what
/// tables, the report, exports and the SFT export read instead of node names (which
/// are written from the same [`At`] but never parsed back).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Cell {
    /// The environment's experiment table (`bfcl`, `chess`, `search`, ...); empty
    /// for an output recorded outside any environment.
    pub env: &'static str,
    /// The documentation setting (BFCL) or tool set (chess, search).
    pub setting: String,
    /// The method, or `None` for a node outside the grid (`bfcl-data`,
    /// `summarize`, the splits of an offline environment).
    pub method: Option<Method>,
    /// ToolObserver with the guard (`toolobserver-guard`).
    pub guard: bool,
    /// Agent model spec (empty for agent-free nodes).
    pub agent: String,
    /// Editor model spec (empty where no editor is involved).
    pub editor: String,
    /// The documentation round: the one a node plays with, or the one it makes.
    pub round: i64,
    /// Which step of the method the node is (with the split of a play step).
    pub step: Step,
    /// The chain's seed.
    pub seed: u64,
}

impl Cell {
    /// The method as tables name it: `toolobserver-guard` for the guarded
    /// ToolObserver, empty outside the grid.
    pub fn method_name(&self) -> &'static str {
        match (self.method, self.guard) {
            (Some(Method::ToolObserver), true) => "toolobserver-guard",
            (Some(m), _) => m.as_str(),
            (None, _) => "",
        }
    }

    /// Whether this is method `m` exactly (the guarded ToolObserver is not
    /// `ToolObserver`: see [`Cell::is_toolobserver`]).
    pub fn is(&self, m: Method) -> bool {
        self.method == Some(m) && !self.guard
    }

    /// Either ToolObserver, guarded or not.
    pub fn is_toolobserver(&self) -> bool {
        self.method == Some(Method::ToolObserver)
    }

    /// The split of an offline play step.
    pub fn split(&self) -> Option<Split> {
        match self.step {
            Step::Play { split } => split,
            _ => None,
        }
    }

    /// The step's name as exports write it: `source`, `play` or `edit`.
    pub fn step_name(&self) -> &'static str {
        match self.step {
            Step::Source => "source",
            Step::Play { .. } => "play",
            Step::Edit => "edit",
        }
    }

    /// The cell without its round: one curve of rounds (a ToolObserver chain).
    pub fn curve(&self) -> Cell {
        Cell {
            round: 0,
            ..self.clone()
        }
    }

    /// The split's name (`train`, `test`), empty where the step has none.
    pub fn split_name(&self) -> &'static str {
        self.split().map_or("", Split::as_str)
    }

    /// The label `summarize`'s key holds.
    pub fn label(&self) -> Label {
        Label {
            setting: self.setting.clone(),
            method: self.method_name().to_string(),
            agent: self.agent.clone(),
            editor: self.editor.clone(),
            round: self.round,
        }
    }
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
    /// Trace-Free+ (a generator rewrites each tool's description from its interface,
    /// and optionally a few recorded calls).
    TraceFree,
    /// A method written as an external program (`ext:<name>`, configured by the
    /// experiment's `[methods.<name>]`; `docs/methods.md`). Holds the whole name,
    /// `ext:` included, interned ([`Method::external`]) so that `Method` stays `Copy`.
    External(&'static str),
}

/// The prefix of an external method's name in experiment files (`ext:<name>`).
pub const EXTERNAL_PREFIX: &str = "ext:";

/// The interned names of external methods (each leaked once: a process names few).
static EXTERNAL_NAMES: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

impl Method {
    /// Every method, in table order.
    pub const ALL: [Method; 7] = [
        Method::Gold,
        Method::Base,
        Method::ToolObserver,
        Method::EasyTool,
        Method::Play2Prompt,
        Method::Draft,
        Method::TraceFree,
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
            Method::TraceFree => "tracefree",
            Method::External(name) => name,
        }
    }

    /// The method named `s`, if there is one: a built-in method, or an external one
    /// (`ext:<name>`, see [`Method::external`]).
    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .or_else(|| Method::external(s.strip_prefix(EXTERNAL_PREFIX)?))
    }

    /// The external method `name` (written `ext:<name>` in a method list and
    /// `[methods.<name>]` in the experiment file), if `name` is a valid one: 1 to 40
    /// lowercase ASCII letters, digits or `_`, starting with a letter.
    pub fn external(name: &str) -> Option<Method> {
        if !valid_external_name(name) {
            return None;
        }
        let full = format!("{EXTERNAL_PREFIX}{name}");
        // A poisoned lock only means another thread panicked while inserting: the set
        // itself is still a set of leaked names.
        let mut names = EXTERNAL_NAMES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let interned = match names.get(full.as_str()) {
            Some(n) => *n,
            None => {
                let leaked: &'static str = Box::leak(full.into_boxed_str());
                names.insert(leaked);
                leaked
            }
        };
        Some(Method::External(interned))
    }

    /// An external method's own name (`mymethod` of `ext:mymethod`); `None` for a
    /// built-in method.
    pub fn external_name(self) -> Option<&'static str> {
        match self {
            Method::External(n) => n.strip_prefix(EXTERNAL_PREFIX),
            _ => None,
        }
    }

    /// A method as a grid cell names it (`toolobserver-guard` included): the method
    /// and whether it is guarded; `(None, false)` for no method (outside the grid).
    pub fn parse_label(s: &str) -> (Option<Method>, bool) {
        match s {
            "toolobserver-guard" => (Some(Method::ToolObserver), true),
            _ => (Method::parse(s), false),
        }
    }

    /// Whether any of `methods` asks the editor (ToolObserver and every baseline do;
    /// Trace-Free+'s generator is the editor unless another is named).
    pub fn any_uses_editor(methods: &[Method]) -> bool {
        methods
            .iter()
            .any(|m| *m == Method::ToolObserver || m.is_baseline())
    }

    /// Methods whose documentation comes from a baseline stage.
    pub fn is_baseline(self) -> bool {
        matches!(
            self,
            Method::EasyTool
                | Method::Play2Prompt
                | Method::Draft
                | Method::TraceFree
                | Method::External(_)
        )
    }
}

/// Whether `name` may name an external method: 1 to 40 lowercase ASCII letters,
/// digits or `_`, starting with a letter (it appears in node names and file names).
pub fn valid_external_name(name: &str) -> bool {
    name.len() <= 40
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> ModelSpec {
        ModelSpec::parse(s).unwrap()
    }

    /// Names from stores written before this type existed (`otb status` of the
    /// scripted grids with two seeds, two agents and two editors): users' stores
    /// stay fresh only while these hold.
    #[test]
    fn online_names_are_the_stores() {
        let shown = Shown {
            seed: true,
            agent: true,
            editor: true,
        };
        let chain = At {
            agent: Some(spec("scripted:empty")),
            seed: 1,
            shown,
            ..At::new(Naming::Online, "names", "base")
        };
        let mut opacify = chain.clone();
        opacify.agent = None;
        assert_eq!(opacify.node("opacify"), "opacify[names]");
        assert_eq!(
            chain.play(None, 0).node("explore"),
            "explore[names r0 s1 a=empty]"
        );
        let to = chain
            .with_method("toolobserver-guard")
            .with_editor(&spec("scripted:silent"));
        assert_eq!(
            to.at(Step::Edit, 1).node("batch-reflect"),
            "batch-reflect[names r1 s1 a=empty e=silent guard]"
        );
        assert_eq!(
            to.with_method("toolobserver")
                .play(None, 2)
                .node("evaluate"),
            "evaluate[names r2 s1 a=empty e=silent]"
        );
        let et = chain
            .with_method("easytool")
            .with_editor(&spec("scripted:errors"));
        assert_eq!(et.node("easytool"), "easytool[names s1 e=errors]");
        assert_eq!(
            et.play(None, 0).node("evaluate"),
            "evaluate[names easytool r0 s1 a=empty e=errors]"
        );
        let p2p = et.with_method("play2prompt");
        assert_eq!(
            p2p.node("play2prompt"),
            "play2prompt[names s1 a=empty e=errors]"
        );
        // One seed, agent and editor: nothing shown.
        let plain = At {
            shown: Shown::default(),
            ..to.clone()
        };
        assert_eq!(
            plain.at(Step::Edit, 3).node("batch-reflect"),
            "batch-reflect[names r3 guard]"
        );
        assert_eq!(
            plain.with_method("gold").play(None, 0).node("explore"),
            "explore[names r0]"
        );
    }

    #[test]
    fn offline_names_are_the_stores() {
        let shown = Shown {
            seed: false,
            agent: true,
            editor: true,
        };
        let chain = At {
            agent: Some(spec("scripted:random")),
            shown,
            ..At::new(Naming::Offline, "strength_gradient", "base")
        };
        let docs = At {
            agent: None,
            ..chain.clone()
        };
        assert_eq!(
            docs.node("chess-docs"),
            "chess-docs[strength_gradient opaque]"
        );
        assert_eq!(
            docs.with_method("gold").node("chess-docs"),
            "chess-docs[strength_gradient gold]"
        );
        assert_eq!(
            chain.play(Some(Split::Test), 0).node("chess-explore"),
            "chess-explore[strength_gradient base test a=random]"
        );
        let to = chain
            .with_method("toolobserver")
            .with_editor(&spec("scripted:silent"));
        assert_eq!(
            to.play(Some(Split::Train), 1).node("chess-explore"),
            "chess-explore[strength_gradient toolobserver train r1 a=random e=silent]"
        );
        assert_eq!(
            to.at(Step::Edit, 2).node("consensus-merge"),
            "consensus-merge[strength_gradient r2 a=random e=silent]"
        );
        assert_eq!(
            to.play(Some(Split::Test), 2).node("bootstrap-elo"),
            "bootstrap-elo[strength_gradient toolobserver test a=random e=silent]"
        );
        let et = chain
            .with_method("easytool")
            .with_editor(&spec("scripted:errors"));
        assert_eq!(et.node("easytool"), "easytool[strength_gradient e=errors]");
        assert_eq!(
            et.with_method("play2prompt").node("play2prompt"),
            "play2prompt[strength_gradient a=random e=errors]"
        );
        assert_eq!(
            et.play(Some(Split::Test), 0).node("chess-evaluate"),
            "chess-evaluate[strength_gradient easytool test a=random e=errors]"
        );
    }

    /// An external method (`ext:<name>`) is a baseline whose docs come from the one
    /// `external` stage: its name is in every node name of its chain, so two of them
    /// never share a node; a name that is not lowercase letters, digits and `_` is
    /// refused; the same name is the same (interned) method.
    #[test]
    fn external_methods_are_named_apart() {
        let m = Method::parse("ext:my_method2").unwrap();
        assert_eq!(m, Method::external("my_method2").unwrap());
        assert_eq!(m.as_str(), "ext:my_method2");
        assert_eq!(m.external_name(), Some("my_method2"));
        assert!(m.is_baseline());
        assert_eq!(Method::EasyTool.external_name(), None);
        for bad in [
            "ext:", "ext:Bad", "ext:9x", "ext:a-b", "ext:a b", "ext:../x",
        ] {
            assert_eq!(Method::parse(bad), None, "{bad}");
        }
        assert_eq!(Method::parse(&format!("ext:{}", "a".repeat(41))), None);
        let chain = At {
            agent: Some(spec("scripted:schema")),
            editor: Some(spec("scripted:errors")),
            shown: Shown {
                seed: false,
                agent: false,
                editor: true,
            },
            ..At::new(Naming::Online, "names", "ext:my_method2")
        };
        assert_eq!(
            chain.node("external"),
            "external[names ext:my_method2 e=errors]"
        );
        assert_eq!(
            chain.play(None, 0).node("evaluate"),
            "evaluate[names ext:my_method2 r0 e=errors]"
        );
        let offline = At {
            naming: Naming::Offline,
            ..chain.clone()
        };
        assert_eq!(
            offline.node("external"),
            "external[names ext:my_method2 e=errors]"
        );
        assert_eq!(chain.cell("bfcl").method, Some(m));
        assert_eq!(chain.cell("bfcl").method_name(), "ext:my_method2");
    }

    #[test]
    fn labels_carry_the_cell() {
        let at = At {
            agent: Some(spec("scripted:schema")),
            editor: Some(spec("scripted:errors")),
            round: 2,
            ..At::new(Naming::Online, "names", "toolobserver")
        };
        assert_eq!(
            at.label(),
            Label {
                setting: "names".into(),
                method: "toolobserver".into(),
                agent: "scripted:schema".into(),
                editor: "scripted:errors".into(),
                round: 2,
            }
        );
    }
}

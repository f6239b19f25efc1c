//! Command definitions (clap) and dispatch.

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use pipeline::{Access, Mode, NodeState, Session, Store};
use stages::experiment::{ConfigError, Experiment};
use stages::tables::report::TableReport;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// stdout is a pipe whose reader is gone (`otb status ... | head -1`): otb ends
/// quietly, exit 0, as other Unix tools do (`main` says nothing for it). SIGPIPE stays
/// ignored (Rust's default), so that a write to a dead chess engine's pipe is an error
/// the engine code handles instead of the end of otb.
#[derive(Debug, thiserror::Error)]
#[error("stdout is closed")]
pub struct StdoutClosed;

/// What `print!` does, with a closed stdout as [`StdoutClosed`] and any other failure
/// as an error (never a panic).
fn write_stdout(args: std::fmt::Arguments<'_>) -> Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(e) => Err(anyhow::Error::new(e).context("writing to stdout")),
    }
}

/// `print!` through [`write_stdout`], returning its error with `?`.
macro_rules! out {
    ($($arg:tt)*) => {
        write_stdout(format_args!($($arg)*))?
    };
}

/// `println!` through [`write_stdout`], returning its error with `?`.
macro_rules! outln {
    ($($arg:tt)*) => {
        write_stdout(format_args!("{}\n", format_args!($($arg)*)))?
    };
}

/// OpaqueToolsBench and ToolObserver as a cached Parquet pipeline
///
/// Every command works on one store (--store). `otb CMD --help` says what CMD does.
///
/// Exit codes: bad input (malformed TOML, an unknown setting or model, a missing file, a
/// missing chess engine, a directory that is not a store, an unwritable store) prints one
/// error line and exits with 2 without touching the store; a model configured wrongly
/// (e.g. OTB_LLM_MAX_CONCURRENCY) is found when the first stage opens it: also exit 2,
/// with nothing of that stage published. An infrastructure failure (an endpoint, the
/// disk, a download, a chess engine that still hangs or prints garbage after it was
/// restarted) exits with 1 and publishes nothing, so the same command retries it; a bug
/// of otb itself exits with 70 and says so.
#[derive(Parser)]
#[command(name = "otb", version, verbatim_doc_comment)]
struct Cli {
    /// Store directory (default: $OTB_STORE, else outputs/store)
    ///
    /// Or a store on object storage, s3://BUCKET/PREFIX, gs://BUCKET/PREFIX,
    /// az://CONTAINER/PREFIX or file:///PATH (credentials and endpoints from each
    /// cloud's usual variables: AWS_*, GOOGLE_*, AZURE_*), used through a local mirror
    /// under $OTB_STORE_CACHE (default ~/.cache/opaquetools/stores); see
    /// docs/scale-out.md.
    #[arg(
        long,
        global = true,
        env = "OTB_STORE",
        value_name = "DIR|URL",
        verbatim_doc_comment
    )]
    store: Option<PathBuf>,
    /// Let relative paths in experiment files leave the experiment's folder
    #[arg(long, global = true)]
    allow_outside_paths: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every stage of an experiment that is not already in the store
    ///
    /// Shows progress bars with an ETA; without a terminal, a heartbeat line every
    /// OTB_HEARTBEAT_S seconds. Ends with `N stages, X ran, Y fresh`.
    ///
    /// With --shard, runs as worker I of N cooperating on the store (a job array): each
    /// grid chain is computed by one worker under a lease, and a dead worker's nodes are
    /// taken over after OTB_LEASE_S. See docs/scale-out.md.
    #[command(verbatim_doc_comment)]
    Run {
        /// The experiment file (TOML)
        experiment: PathBuf,
        /// No progress bars or per-stage lines; only the summary
        #[arg(long)]
        quiet: bool,
        /// Be worker I of N cooperating on the store (`2/4`, or `auto`)
        ///
        /// `auto`: the scheduler's array index and count, SLURM_ARRAY_TASK_ID /
        /// SLURM_ARRAY_TASK_COUNT or JOB_COMPLETION_INDEX with OTB_SHARDS. This worker
        /// computes its share of the grid's chains and waits for the others' (taking
        /// over a dead worker's after OTB_LEASE_S, default 60 s).
        #[arg(long, value_name = "I/N|auto", verbatim_doc_comment)]
        shard: Option<String>,
    },
    /// Show each stage as fresh / would run / missing, and why a stale one is stale
    ///
    /// Each stage is fresh, would run, or missing (waiting for an input). For a stale one
    /// it says what changed (`because params.agent: "a" -> "b"`), or that it is
    /// `in progress` (being computed, or stopped part-way with its finished calls kept).
    ///
    /// A fresh stage shows how long it took to compute, and a last line sums that per
    /// stage (explore, batch-reflect, draft, ...) and estimates the time still to run:
    ///
    /// - stage time at each kind's mean so far (plus, counted apart as an upper estimate,
    ///   the stages of online ToolObserver rounds that run only if the curve goes on,
    ///   which are not listed one by one);
    /// - when stages ran side by side (concurrent chains), the wall time at the overlap
    ///   measured so far (summed stage time over the time any stage was computing, from
    ///   each stage's time and commit time).
    #[command(verbatim_doc_comment)]
    Status {
        /// The experiment file (TOML)
        experiment: PathBuf,
    },
    /// Print the experiment's plan node by node (nothing runs, nothing is written)
    ///
    /// The plan before (or while) paying for it: every node in run order, its stage, the
    /// nodes it reads (the DAG's edges), its grid cell (setting, method, agent, editor,
    /// round; in --format json), its key where it can be known yet, and whether it is
    /// fresh, would run, waits for an input, or is planned (an online ToolObserver round
    /// that runs only if its curve goes on).
    ///
    /// Then the bill (text; `bill` in JSON), by stage and model, of the nodes not in the
    /// store:
    ///
    /// - model calls: exact where the protocol fixes them, expected (`~`, with the
    ///   most there can be beside the total) where a baseline's tries end at the first
    ///   that works, else an upper bound (`<=`); the planned rounds summed apart ("up
    ///   to N more");
    /// - prompt and completion tokens: measured (this store's finished nodes of the same
    ///   stage and model) or modelled (the prompt's template, tools and example);
    /// - model time, one call after another: measured in this store, or calibrated (an
    ///   embedded model's rates from a short benchmark the first time, cached beside the
    ///   model files; OTB_CALIBRATE=0 skips it), 0 for scripted models;
    /// - dollars with --prices.
    ///
    /// `otb run` prints the bill's totals first (not with --quiet) and records the bill;
    /// `otb report` shows it beside what the nodes cost.
    #[command(verbatim_doc_comment)]
    Plan {
        /// The experiment file (TOML)
        experiment: PathBuf,
        /// How to print the plan
        #[arg(long, value_enum, default_value_t = PlanFormat::Text)]
        format: PlanFormat,
        /// Dollars per million input / output tokens per model, for the bill
        ///
        /// The price file of `otb report --prices`: `[prices."<model spec>"]` tables
        /// with `input = ..` and `output = ..`.
        #[arg(long, value_name = "FILE", verbatim_doc_comment)]
        prices: Option<PathBuf>,
    },
    /// Export the run as Parquet tables (--to) and/or Trace-Free+ training data (--sft)
    ///
    /// --to DIR: flat Parquet tables (instances, docs, trajectories, scores, edits,
    /// doc_calls, tool_runs, summary) and SCHEMA.md.
    ///
    /// --sft DIR: ToolObserver's runs as Trace-Free+ training data: one pair per tool
    /// whose description made the agent better, as pairs.parquet.
    ///
    /// - Chess and search pairs are selected on the training split only (no test-split
    ///   row is read): the target is the description of the round whose training-split
    ///   play scored best (chess best-tool %, search accuracy by the verdict the editor
    ///   read), kept when it beats the original docs on that split. The last round's
    ///   docs are played on the test split only, so a run with `rounds = 1` gives no
    ///   chess or search pair.
    /// - BFCL has no split (a pair is an instance that went from wrong to right on
    ///   itself), so hold it out (--holdout bfcl) before scoring a generator on BFCL.
    ///
    /// Holdout: --holdout keeps environments, tool sets (bfcl, chess:<set>, search:<set>)
    /// or a seeded fraction of them out of the examples, and holdout.json lists the tool
    /// sets trained on (`trained_on`) and held out. Copy `trained_on` into
    /// `[baselines.tracefree] trained_on` of the experiment that serves the fine-tuned
    /// generator, and otb refuses (exit 2) to score Trace-Free+ on those tool sets.
    ///
    /// Curriculum: by default the paper's best schedule, 2 stages, 10% then 90%
    /// trace-free, with --samples examples per stage (default one per training pair; the
    /// trace-based ones drawn by --seed from pairs with traces), as examples.parquet and
    /// chat-format stage1..N.jsonl (`messages` = the Trace-Free+ stage's own system
    /// message and request, `{"description": ...}`); curriculum.json gives each stage's
    /// written counts. Traces are round-0 play with the original docs (chess, search:
    /// training split; search with the judge's verdict when a judge is set). SCHEMA.md
    /// says it all.
    ///
    /// Fine-tune a generator on them with any chat SFT trainer, one stage after another
    /// (the paper: 2 epochs), e.g. with TRL:
    ///
    ///   mkdir s1 && cp DIR/stage1.jsonl s1/ && trl sft \
    ///     --model_name_or_path Qwen/Qwen3-4B-Instruct-2507 \
    ///     --dataset_name s1 --output_dir gen1
    ///
    /// then stage 2 from gen1; serve the result and name it as
    /// `[baselines.tracefree] generator`.
    #[command(verbatim_doc_comment)]
    Export {
        /// The experiment file (TOML)
        experiment: PathBuf,
        /// Write the flat Parquet tables and SCHEMA.md into DIR
        #[arg(long, required_unless_present = "sft", value_name = "DIR")]
        to: Option<PathBuf>,
        /// Write ToolObserver's descriptions as Trace-Free+ training data into DIR
        #[arg(long, value_name = "DIR")]
        sft: Option<PathBuf>,
        /// With --sft: keep tool sets out of the training examples
        ///
        /// An environment (bfcl, chess, search), tool sets (chess:<set>, search:<set>,
        /// bfcl), comma-separated, or a fraction of the run's tool sets drawn by --seed;
        /// holdout.json lists the tool sets trained on and held out.
        #[arg(
            long,
            requires = "sft",
            value_name = "ENV|TOOLSET|FRACTION",
            verbatim_doc_comment
        )]
        holdout: Option<stages::tables::sft::Holdout>,
        /// With --sft: curriculum stages
        ///
        /// Default 2; without --shares, trace-free shares evenly from 10% to 90%.
        #[arg(long, requires = "sft", value_name = "N", verbatim_doc_comment)]
        stages: Option<usize>,
        /// With --sft: each stage's trace-free share, comma-separated
        ///
        /// Default 0.1,0.9: the paper's best schedule.
        #[arg(long, requires = "sft", value_name = "SHARES", value_parser = parse_shares, verbatim_doc_comment)]
        shares: Option<Shares>,
        /// With --sft: examples per stage (default: one per training pair)
        #[arg(long, requires = "sft", value_name = "N")]
        samples: Option<usize>,
        /// With --sft: the seed that draws each stage's examples and a fractional holdout
        #[arg(long, requires = "sft", default_value_t = 0)]
        seed: u64,
    },
    /// Write one cell's tool descriptions as an MCP tool list (tools/list shape)
    ///
    /// {"tools": [{"name", "description", "inputSchema"}, ...], "_otb": {...}}: each
    /// tool's real name and input schema unchanged, its description the method's (the
    /// last round computed, unless --round), and under `_otb` the provenance
    /// (experiment, cell, round, scores before and after where the store has them).
    /// `otb mcp proxy --docs` serves it. A choice the store leaves open (several
    /// settings, agents, editors) is refused with the choices listed; BFCL's
    /// documentation is per instance, so a BFCL cell needs --instance. See docs/mcp.md.
    #[command(verbatim_doc_comment)]
    Docs {
        /// The experiment file (TOML)
        experiment: PathBuf,
        /// gold, base, toolobserver, toolobserver-guard, easytool, play2prompt, draft
        /// or tracefree
        #[arg(long)]
        method: String,
        /// Write the tool list into FILE (default: stdout; refused inside the store)
        #[arg(long, value_name = "FILE")]
        to: Option<PathBuf>,
        /// The environment (bfcl, chess, search, ...)
        #[arg(long)]
        env: Option<String>,
        /// The documentation setting (BFCL) or tool set (chess, search)
        #[arg(long)]
        setting: Option<String>,
        /// The agent model spec
        #[arg(long)]
        agent: Option<String>,
        /// The editor model spec
        #[arg(long)]
        editor: Option<String>,
        /// The round (default: the last one computed)
        #[arg(long)]
        round: Option<i64>,
        /// The instance, for per-instance documentation (BFCL)
        #[arg(long, value_name = "ID")]
        instance: Option<String>,
    },
    /// MCP servers: serve learned documentation in front of one; the MCP benchmark's fixtures
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    ///
    /// One page (default outputs/reports/<name>/report.html) that opens from file:// and
    /// reads only the store, so it works on a half-finished one. It shows:
    ///
    /// - first, the run's paper table as `otb table` renders it (paper / released / run
    ///   side by side, with E's intervals), then per-round curves and intervals as SVG;
    ///   the long listings (cells, items, the released runs' versions) after, folded;
    /// - every cell's items (BFCL instances, chess games with a board per ply, search
    ///   episodes) with filters, sorting, search and links (#cell=N, #item=N:ID);
    /// - documentation edits as word diffs per round beside gold and the baselines'
    ///   finals, with the items that flipped;
    /// - a paired comparison (--compare, --against) with its paired bootstrap interval;
    /// - tokens per stage/method/role/model, and dollars from --prices;
    /// - provenance: the experiment file, otb version and commit, every node's key and
    ///   time.
    ///
    /// Everything a model wrote is shown as text, capped at --item-bytes per text (said
    /// where cut); above --split-above-mb of items each cell gets a page of its own under
    /// cells/.
    ///
    /// --released DIR [--recorded FILE]: the authors' released runs instead (imported
    /// and graded into the store first).
    #[command(verbatim_doc_comment)]
    Report {
        /// The experiment file (TOML; not with --released)
        #[arg(required_unless_present = "released")]
        experiment: Option<PathBuf>,
        /// Folder of the report (default: outputs/reports/<experiment>/)
        #[arg(long, value_name = "DIR")]
        to: Option<PathBuf>,
        /// The authors' released BFCL runs under DIR instead of an experiment
        ///
        /// Imported into the store and graded first, as `otb import released-runs` does.
        #[arg(
            long,
            conflicts_with = "experiment",
            value_name = "DIR",
            verbatim_doc_comment
        )]
        released: Option<PathBuf>,
        /// Reference tool_configs/ of the released runs (default: beside DIR)
        #[arg(long, requires = "released", value_name = "DIR")]
        configs: Option<PathBuf>,
        /// Frozen API responses for grading the released runs
        #[arg(long, requires = "released", value_name = "FILE")]
        recorded: Option<PathBuf>,
        /// Compare two methods item by item (default: toolobserver base)
        #[arg(long, num_args = 2, value_names = ["METHOD_A", "METHOD_B"])]
        compare: Option<Vec<String>>,
        /// Compare with the same method of a second experiment in the store, by item
        #[arg(long, conflicts_with = "released", value_name = "EXP2.toml")]
        against: Option<PathBuf>,
        /// Dollars per million input / output tokens per model
        ///
        /// A TOML file of `[prices."<model spec>"]` tables with `input = ..` and
        /// `output = ..`.
        #[arg(long, value_name = "FILE", verbatim_doc_comment)]
        prices: Option<PathBuf>,
        /// The authors' released run tree for Table 2's released rows
        #[arg(
            long,
            env = "OTB_RELEASED_RUNS",
            conflicts_with = "released",
            value_name = "DIR"
        )]
        released_runs: Option<PathBuf>,
        /// Bytes of one text of an item the page embeds (longer ones are cut, said)
        #[arg(long, default_value_t = 16384)]
        item_bytes: usize,
        /// Above this many MB of items, each cell's items go to a page of their own
        #[arg(long, default_value_t = 40)]
        split_above_mb: usize,
        /// Also print the documentation edits as text: each description ToolObserver
        /// changed, before and after each round, and the items that flipped
        #[arg(long, conflicts_with = "released")]
        edits: bool,
    },
    /// Remove store entries that no listed experiment references, and list them
    ///
    /// Refuses (exit 1, nothing removed) while a kept experiment is not complete in the
    /// store. --dry-run changes nothing.
    #[command(verbatim_doc_comment)]
    Gc {
        /// The experiment files whose entries are kept
        #[arg(long, required = true, num_args = 1.., value_name = "EXP.toml")]
        keep: Vec<PathBuf>,
        /// Only list what would be removed
        #[arg(long)]
        dry_run: bool,
    },
    /// Execute one Python-syntax BFCL call and print the result's repr or the error
    Exec {
        /// The call, in Python syntax with the real function name
        call: String,
        /// Where the call is executed
        #[arg(long, value_enum, default_value_t = Backend::Simulated)]
        backend: Backend,
        /// Frozen responses file for --backend recorded
        #[arg(long, value_name = "FILE")]
        recorded: Option<PathBuf>,
    },
    /// The authors' released runs
    Released {
        #[command(subcommand)]
        command: ReleasedCommand,
    },
    /// Import external runs into the store and grade them with the `evaluate` stage
    Import {
        #[command(subcommand)]
        command: ImportCommand,
    },
    /// Expose a model as a local OpenAI-compatible endpoint
    ///
    /// Any model spec, served at /v1/chat/completions (with tools and `stream: true`) and
    /// /v1/models; HTTP/1.1 with keep-alive and chunked request bodies; tested with the
    /// official `openai` Python client. `scripted:echo` needs no model: it answers
    /// `echo: ` and the first 200 characters of the last user message, to test or
    /// load the server alone (scripts/bench-serve.sh).
    #[command(verbatim_doc_comment)]
    Serve {
        /// Model spec: embedded:<name>, openai:<model> (proxied), replay:<model>,
        /// scripted:echo
        #[arg(
            long,
            default_value = "embedded:qwen2.5-coder-1.5b",
            value_name = "SPEC"
        )]
        model: String,
        /// Address to listen on
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
    },
    /// The LLM call cache in the store: what it holds, its export and import
    ///
    /// A run whose calls are in the cache replays without a model. To share a run:
    /// `otb cache export --to calls.parquet`, send the file and the experiment file; the
    /// receiver runs `otb cache import calls.parquet` then `otb run EXP.toml`.
    #[command(verbatim_doc_comment)]
    Cache {
        #[command(subcommand)]
        command: CacheCommand,
    },
    /// Render a paper table, from an experiment's store or the authors' released runs
    ///
    /// table2: Table 2 with paper / released / this-run values per cell
    ///   (setting,model,method,source,n,E,P,A). On a store whose run is still going or
    ///   was stopped it prints every finished cell and marks the others `in progress` or
    ///   `not started` (a ToolObserver cell before its last round shows its latest round
    ///   and `(in progress)`).
    /// table3: chess best-tool % and bootstrap Elo (mean, median, 95% interval) per tool
    ///   set x method, paper beside this run.
    /// table4: search (BrowseComp-Domains) judged accuracy and tool calls, paper beside
    ///   this run.
    /// table5: mean ToolObserver rounds to convergence; with --out, the per-round curve
    ///   as CSV and PNG.
    /// table6: fidelity of each method's final descriptions to gold: MiniLM cosine and
    ///   ROUGE-1 F1.
    /// table7: editor ablation: ToolObserver's final E per agent (rows) x editor
    ///   (columns).
    /// mcp: the MCP environment's servers x methods: exact-match accuracy with its
    ///   bootstrap interval, F1, tool calls and failed calls per task (this run only).
    /// tokens: tokens per setting x method x agent x editor (exploration, editing,
    ///   evaluation) and each method's ratio to ToolObserver, summed from the per-call
    ///   rows in the store.
    ///
    /// Every table but table2 needs --experiment, except table5, table7 and tokens with
    /// --released DIR alone: the paper's Table 5, Table 7 and token claim recomputed from
    /// the authors' released runs, every definition tried and labelled (see
    /// docs/paper-differences.md).
    #[command(verbatim_doc_comment)]
    Table {
        /// Which table: table2, table3, table4, table5, table6, table7, mcp or tokens
        #[arg(value_enum, hide_possible_values = true)]
        table: TableName,
        /// Experiment whose results fill the "this run" columns
        #[arg(long, value_name = "EXP.toml")]
        experiment: Option<PathBuf>,
        /// The authors' released run tree (Table 2's "released" columns)
        ///
        /// With table5, table7 or tokens and no --experiment: the paper's claims
        /// recomputed from it.
        #[arg(
            long,
            env = "OTB_RELEASED_RUNS",
            value_name = "DIR",
            verbatim_doc_comment
        )]
        released: Option<PathBuf>,
        /// Frozen API responses used when rescoring released runs
        #[arg(long, env = "OTB_RECORDED", value_name = "FILE")]
        recorded: Option<PathBuf>,
        /// Reference configs whose stored execution results are the expected values
        #[arg(long, env = "OTB_EXPECTED", value_name = "DIR")]
        expected: Option<PathBuf>,
        /// Markdown or CSV
        #[arg(long, value_enum, default_value_t = Format::Markdown)]
        format: Format,
        /// Also write CSV and Parquet here
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ReleasedCommand {
    /// Rescore every run directory under DIR with this project's grader
    ///
    /// Prints one row per run version: method,config,gen_hypers,version,E,P,A,n.
    #[command(verbatim_doc_comment)]
    Score {
        /// The authors' released run tree
        dir: PathBuf,
        /// Where the calls are executed
        #[arg(long, value_enum, default_value_t = Backend::Recorded)]
        backend: Backend,
        /// Frozen responses file for --backend recorded
        #[arg(long, value_name = "FILE")]
        recorded: Option<PathBuf>,
        /// Reference tool_configs/ directory that gives the expected values
        ///
        /// Its stored execution results are the expected values (what the reference
        /// grader did); without it, expected values are computed by executing the ground
        /// truth.
        #[arg(long, value_name = "CONFIG_DIR", verbatim_doc_comment)]
        expected: Option<PathBuf>,
        /// Markdown or CSV
        #[arg(long, value_enum, default_value_t = Format::Csv)]
        format: Format,
    },
}

#[derive(Subcommand)]
enum ImportCommand {
    /// The authors' released BFCL runs under DIR as store tables
    ///
    /// One import + evaluate node per run version, graded by the same `evaluate` stage.
    #[command(verbatim_doc_comment)]
    ReleasedRuns {
        /// The authors' released run tree
        dir: PathBuf,
        /// Reference tool_configs/ directory (default: tool_configs/ beside DIR)
        #[arg(long, value_name = "DIR")]
        configs: Option<PathBuf>,
        /// Frozen API responses (recorded, then simulated backend); default: simulated
        #[arg(long, value_name = "FILE")]
        recorded: Option<PathBuf>,
        /// No progress bars or per-stage lines
        #[arg(long)]
        quiet: bool,
    },
}

#[derive(Subcommand)]
enum McpCommand {
    /// An MCP server that forwards everything to an upstream MCP server and lists its
    /// tools with the descriptions of a tool list (`otb docs`)
    ///
    /// Serves MCP on stdin/stdout (or Streamable HTTP at http://ADDR/mcp with --addr):
    /// a drop-in for the upstream in any MCP client configuration. Tools the list does
    /// not name keep the upstream's descriptions; errors the upstream answers pass
    /// through. The upstream is held to bounds (time per request, message size, JSON
    /// depth, number of tools, description length): a request past one is an MCP error
    /// naming it; an upstream that exits or breaks the protocol ends the proxy with one
    /// line naming it (exit 1).
    ///
    ///   otb mcp proxy --docs tools.json --upstream python3 -m mcp_server_git --repository .
    ///   otb mcp proxy --docs tools.json --upstream http://127.0.0.1:8000/mcp
    #[command(verbatim_doc_comment)]
    Proxy {
        /// The tool list to serve (`otb docs --to`)
        #[arg(long, value_name = "FILE")]
        docs: PathBuf,
        /// Serve Streamable HTTP on HOST:PORT instead of stdio (port 0: any free port)
        #[arg(long, value_name = "HOST:PORT")]
        addr: Option<std::net::SocketAddr>,
        /// Seconds the upstream may take to answer `initialize`
        #[arg(long, default_value_t = 20.0, value_name = "S")]
        connect_timeout_s: f64,
        /// Seconds the upstream may take to answer one request
        #[arg(long, default_value_t = 60.0, value_name = "S")]
        call_timeout_s: f64,
        /// The upstream: a URL (http:// or https://), or a command and its arguments
        /// (give it last: every word after it is the command's)
        #[arg(long, required = true, num_args = 1.., allow_hyphen_values = true, value_name = "COMMAND ...|URL")]
        upstream: Vec<String>,
    },
    /// Write the fourth benchmark's fixtures and tasks (experiments/mcp.toml)
    ///
    /// Into DIR: git-repo/ (mcp-server-git), sqlite/db.sqlite (mcp-server-sqlite),
    /// fs/ (server-filesystem), memory/memory.jsonl (server-memory), tasks.jsonl (every
    /// task, answers computed from the fixtures) and tasks-sample.jsonl (a few per
    /// server). The same seed gives the same bytes. DIR must be new, empty, or a
    /// previous generation (replaced). Needs git and python3 on PATH.
    ///
    ///   otb mcp fixtures --out outputs/mcp/fixtures
    #[command(verbatim_doc_comment)]
    Fixtures {
        /// The folder to write
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The seed of every generated row, file, commit and task
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

#[derive(Subcommand)]
enum CacheCommand {
    /// What the cache holds: calls, and tokens per stage and model
    Stats,
    /// Write every cached call as one Parquet table
    Export {
        /// The Parquet file to write (refused inside the store)
        #[arg(long, value_name = "FILE.parquet")]
        to: PathBuf,
    },
    /// Seed the call cache from a file written by `otb cache export`
    ///
    /// Each request is re-hashed against its key (one that does not match is refused); a
    /// published run then replays without a model.
    #[command(verbatim_doc_comment)]
    Import {
        /// The Parquet file written by `otb cache export`
        from: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Backend {
    /// The deterministic offline world.
    Simulated,
    /// Frozen responses (--recorded FILE), then the simulated world
    /// for misses
    #[value(verbatim_doc_comment)]
    Recorded,
    /// The real web APIs: needs GEOCODE_API_KEY, RAPID_API_KEY,
    /// OMDB_API_KEY and EXCHANGERATE_API_KEY; OTB_LIVE_BASE_URL sends
    /// every request to another origin
    #[value(verbatim_doc_comment)]
    Live,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Markdown,
    Csv,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum TableName {
    /// BFCL-Opaque E/P/A (paper / released / this run).
    Table2,
    /// Chess: best-tool % and bootstrap Elo (paper / this run).
    Table3,
    /// Search (BrowseComp-Domains): judged accuracy and tool calls (paper / this run).
    Table4,
    /// Mean ToolObserver rounds to convergence, and the per-round curve (CSV + PNG with --out).
    Table5,
    /// Fidelity of learned descriptions to gold: MiniLM cosine and ROUGE-1 F1.
    Table6,
    /// Editor ablation: ToolObserver's final E per agent x editor.
    Table7,
    /// The MCP environment: accuracy per server x method (this run).
    Mcp,
    /// Tokens per method (exploration, editing, evaluation) and ratios to ToolObserver.
    Tokens,
}

use stages::error::ErrorClass;

/// An error caused by the user's input (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// The exit code of a failed command, from the class of the first cause that has
/// one ([`stages::driver::class_of`]): 2 when the user's input is at fault (the
/// experiment, an argument, the store path), 1 for an infrastructure failure, 70
/// (`EX_SOFTWARE`) for a bug of this program; 1 for an error no type classifies.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    match class_of(err) {
        Some(ErrorClass::User) => 2,
        Some(ErrorClass::Bug) => 70,
        Some(ErrorClass::Infrastructure) | None => 1,
    }
}

/// The class of the first cause of `err` that has one.
pub fn class_of(err: &anyhow::Error) -> Option<ErrorClass> {
    err.chain().find_map(|cause| {
        if cause.is::<BadInput>() {
            Some(ErrorClass::User)
        } else {
            stages::driver::class_of(cause)
        }
    })
}

/// What every command is given by the global options: where the store is (its
/// directory, or for an object store URL its local mirror and the URL) and whether an
/// experiment's relative paths may leave its folder (`--allow-outside-paths`).
struct Ctx {
    /// The store directory (an object store's local mirror).
    root: PathBuf,
    /// `--store` as an object store URL (`s3://bucket/prefix`, `file:///path`).
    remote: Option<String>,
    /// `--allow-outside-paths`.
    allow_outside: bool,
}

impl Ctx {
    /// The store: `--store`, else `outputs/store`; for an object store URL, its local
    /// mirror (nothing is contacted or written yet).
    fn new(cli_store: &Option<PathBuf>, allow_outside: bool) -> Result<Ctx> {
        let root = cli_store
            .clone()
            .unwrap_or_else(|| PathBuf::from("outputs").join("store"));
        let (root, remote) = match root.to_str() {
            Some(url) if pipeline::remote::is_url(url) => {
                (pipeline::remote::mirror_dir(url)?, Some(url.to_string()))
            }
            _ => (root, None),
        };
        Ok(Ctx {
            root,
            remote,
            allow_outside,
        })
    }

    /// Read an experiment file (relative paths inside its folder unless allowed).
    fn load(&self, path: &Path) -> Result<Experiment, ConfigError> {
        if self.allow_outside {
            Experiment::load_allowing_outside_paths(&stages::driver::environments(), path)
        } else {
            stages::driver::load(path)
        }
    }

    /// Open the store, or the object store `--store` named through its mirror
    /// (connecting first: an unusable one is an error before anything is written).
    fn open_store(&self, access: Access) -> Result<Store, pipeline::StoreError> {
        match &self.remote {
            None => Store::open(&self.root, access),
            Some(url) => {
                let remote = pipeline::remote::Remote::open(url)?;
                Store::open_remote(&self.root, remote, access)
            }
        }
    }
}

pub fn main() -> Result<ExitCode> {
    let cli = Cli::parse();
    let cx = Ctx::new(&cli.store, cli.allow_outside_paths)?;
    let root = cx.root.clone();
    match cli.command {
        Command::Run {
            experiment,
            quiet,
            shard,
        } => run(&cx, &experiment, quiet, shard.as_deref()),
        Command::Status { experiment } => status(&cx, &experiment),
        Command::Plan {
            experiment,
            format,
            prices,
        } => plan(&cx, &experiment, format, prices.as_deref()),
        Command::Export {
            experiment,
            to,
            sft,
            holdout,
            stages,
            shares,
            samples,
            seed,
        } => {
            let opts = stages::tables::sft::SftOptions {
                holdout,
                curriculum: stages::tables::sft::Curriculum::new(
                    stages,
                    shares.map(|s| s.0),
                    samples,
                    seed,
                )
                .map_err(|e| BadInput(e.to_string()))?,
            };
            export(&cx, &experiment, to.as_deref(), sft.as_deref(), &opts)
        }
        Command::Gc { keep, dry_run } => gc(&cx, &keep, dry_run),
        Command::Docs {
            experiment,
            method,
            to,
            env,
            setting,
            agent,
            editor,
            round,
            instance,
        } => {
            let q = stages::learned::Query {
                env,
                setting,
                agent,
                editor,
                round,
                instance,
                ..stages::learned::Query::for_method(&method)?
            };
            docs(&cx, &experiment, &q, to.as_deref())
        }
        Command::Mcp { command } => match command {
            McpCommand::Proxy {
                docs,
                addr,
                connect_timeout_s,
                call_timeout_s,
                upstream,
            } => mcp_proxy(&docs, addr, connect_timeout_s, call_timeout_s, &upstream),
            McpCommand::Fixtures { out, seed } => mcp_fixtures(&out, seed),
        },
        Command::Report {
            experiment,
            to,
            released,
            configs,
            recorded,
            compare,
            against,
            prices,
            released_runs,
            item_bytes,
            split_above_mb,
            edits,
        } => {
            let opts = stages::report::Options {
                compare: compare.map(|v| (v[0].clone(), v[1].clone())),
                prices: prices
                    .as_deref()
                    .map(stages::report::cost::Prices::load)
                    .transpose()?,
                released_runs,
                item_bytes: item_bytes.max(256),
                split_above: split_above_mb.saturating_mul(1 << 20),
                version: version(),
                progress: true,
            };
            match released {
                Some(dir) => report_released(
                    &cx,
                    &dir,
                    configs.as_deref(),
                    recorded.as_deref(),
                    to.as_deref(),
                    &opts,
                ),
                None => report(
                    &cx,
                    experiment.as_deref().unwrap_or(Path::new("")),
                    against.as_deref(),
                    to.as_deref(),
                    &opts,
                    edits,
                ),
            }
        }
        Command::Serve { model, addr } => {
            let spec = stages::models::parse_for(&model, stages::models::Role::Serve)?;
            // The cache lives in a store: a folder that is not one is refused (exit 2),
            // as `run` and `plan` refuse it, before anything is written into it.
            let store = cx.open_store(Access::ReadWrite)?;
            stages::models::llm::serve_blocking(
                &spec,
                addr,
                &stages::models::cache_views::cache_dir(store.root()),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cache {
            command: CacheCommand::Stats,
        } => {
            out!("{}", stages::models::cache_views::stats_text(&root)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Cache {
            command: CacheCommand::Export { to },
        } => {
            let n = stages::models::cache_views::export(&root, &to)?;
            outln!("wrote {n} calls to {}", to.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Cache {
            command: CacheCommand::Import { from },
        } => {
            // A store (created if new), so the seeded cache lives in a real store.
            let store = cx.open_store(Access::ReadWrite)?;
            let r = stages::models::cache_views::import(store.root(), &from)?;
            outln!(
                "imported {} calls into {} ({} already there, {} refused: request does not match its key)",
                r.added,
                stages::models::cache_views::cache_dir(&root).display(),
                r.present,
                r.refused
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Exec {
            call,
            backend,
            recorded,
        } => {
            let exec = executor(backend, recorded.as_deref())?;
            outln!(
                "{}",
                stages::bfcl::exec_call_line(&exec, &call).map_err(BadInput)?
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Released {
            command:
                ReleasedCommand::Score {
                    dir,
                    backend,
                    recorded,
                    expected,
                    format,
                },
        } => released_score(
            &dir,
            backend,
            recorded.as_deref(),
            expected.as_deref(),
            format,
        ),
        Command::Import {
            command:
                ImportCommand::ReleasedRuns {
                    dir,
                    configs,
                    recorded,
                    quiet,
                },
        } => {
            use stages::bfcl::import_released as imp;
            let plan = imp::prepare(&dir, configs.as_deref(), recorded.as_deref())?;
            let store = cx.open_store(Access::ReadWrite)?;
            let mut session = Session::new(&store, Mode::Run, quiet);
            let imported = imp::import(&plan, &mut session)?;
            out!("{}", imp::render(&imported, &session));
            Ok(ExitCode::SUCCESS)
        }
        Command::Table {
            table: TableName::Table2,
            experiment,
            released,
            recorded,
            expected,
            format,
            out,
        } => table2(
            &cx,
            experiment.as_deref(),
            released.as_deref(),
            recorded.as_deref(),
            expected.as_deref(),
            format,
            out.as_deref(),
        ),
        Command::Table {
            table: table @ (TableName::Table5 | TableName::Table7 | TableName::Tokens),
            released: Some(dir),
            experiment: None,
            ..
        } => released_check(table, &dir),
        Command::Table {
            table,
            experiment,
            format,
            out,
            ..
        } => render_table(&cx, table, experiment.as_deref(), format, out.as_deref()),
    }
}

/// A duration in seconds from environment variable `name`: `default` when unset,
/// else a number from `min` to 86400 (bad input otherwise, the line saying `what` it
/// sets).
fn env_seconds(name: &str, default: u64, min: f64, what: &str) -> Result<std::time::Duration> {
    match std::env::var(name) {
        Err(_) => Ok(std::time::Duration::from_secs(default)),
        Ok(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= min && *s <= 86_400.0)
            .map(std::time::Duration::from_secs_f64)
            .ok_or_else(|| BadInput(format!("{name}={v:?}: expected {what}")).into()),
    }
}

/// `OTB_HEARTBEAT_S`: seconds between heartbeat lines when stderr is not a terminal
/// (default 60; 0: none).
fn heartbeat_interval() -> Result<std::time::Duration> {
    env_seconds(
        "OTB_HEARTBEAT_S",
        60,
        0.0,
        "seconds between heartbeat lines (0 to 86400; 0: none)",
    )
}

/// `OTB_CACHE_PUSH_S`: on a store on object storage, seconds between sends of the
/// calls made so far to the shared call cache (default 30; 0: only when the run ends).
fn cache_push_interval() -> Result<std::time::Duration> {
    env_seconds(
        "OTB_CACHE_PUSH_S",
        30,
        0.0,
        "seconds between sends of new calls to the shared call cache (0 to 86400; 0: at the end only)",
    )
}

/// Drive `exp` in `session`; without a terminal on stderr (a batch job's log,
/// `nohup`, CI), a heartbeat line every `every` says what is being computed, how far
/// each stage is, what is done and how many model calls were made.
fn drive_with_heartbeat(
    exp: &Experiment,
    session: &Session<'_>,
    every: std::time::Duration,
    who: &str,
    opts: stages::driver::DriveOptions,
) -> Result<(), stages::env::DriveError> {
    use std::io::IsTerminal;
    let every = if std::io::stderr().is_terminal() {
        std::time::Duration::ZERO
    } else {
        every
    };
    let beat = || {
        eprintln!(
            "otb: {} {}{who}: {}",
            pipeline::clock::utc_time(pipeline::clock::now_unix()),
            exp.name,
            session.heartbeat(&stages::models::calls_line())
        );
    };
    pipeline::clock::ticking(every, beat, || {
        stages::driver::drive_with(exp, session, opts).map(|_| ())
    })
}

/// `OTB_LEASE_S`: after how long without a heartbeat a worker's lease or record
/// counts as dead (default 60 s).
fn lease_timeout() -> Result<std::time::Duration> {
    env_seconds(
        "OTB_LEASE_S",
        60,
        0.2,
        "the seconds after which a silent worker counts as dead (0.2 to 86400)",
    )
}

/// `otb run`: every stage of the experiment that is not in the store yet (with
/// `--shard`, as one of several cooperating workers).
fn run(cx: &Ctx, experiment: &Path, quiet: bool, shard: Option<&str>) -> Result<ExitCode> {
    let exp = cx.load(experiment)?;
    let every = if quiet {
        std::time::Duration::ZERO
    } else {
        heartbeat_interval()?
    };
    let shard = shard
        .map(|t| pipeline::lease::parse_shard(t, &|k| std::env::var(k).ok()))
        .transpose()
        .map_err(BadInput)?;
    let lease = lease_timeout()?;
    let opts = stages::driver::DriveOptions {
        push_every: cache_push_interval()?,
    };
    stages::driver::preflight(&exp)?;
    let access = if shard.is_some() {
        Access::Shared
    } else {
        Access::ReadWrite
    };
    let store = cx.open_store(access)?;
    let mut session = Session::new(&store, Mode::Run, quiet);
    let mut coop = None;
    // What the plan cannot be known without (an MCP server's tool list) first, so
    // that the bill counts the whole grid (a shard's workers share it in the run).
    if shard.is_none() {
        stages::driver::prelude(&exp, &session)?;
    }
    // The bill before the run (`otb plan` has it in full), recorded for `otb report`;
    // an estimate that cannot be made does not stop the run.
    let planned = stages::plan::plan(&exp, &store);
    if let Ok(p) = &planned {
        // An embedded model is downloaded (the run needs it) and calibrated once
        // (about 30 s, cached per machine), so the first bill has hours too.
        let opts = stages::estimate::Options {
            prices: None,
            calibrate: true,
            fetch: true,
        };
        if let Ok(b) = stages::estimate::bill(&exp, &store, p, opts) {
            if !quiet {
                out!("{}", b.short());
            }
            if let Err(e) = stages::estimate::save(store.root(), &b) {
                eprintln!("otb: warning: the bill was not recorded: {e}");
            }
        }
    }
    if let Some(sh) = shard {
        let owners = planned?.owners(sh.count);
        let c = pipeline::lease::Coop::join(pipeline::lease::Board::of(&store), sh, lease, owners)?;
        session = session.with_coop(c.clone());
        coop = Some(c);
    }
    let who = shard.map(|s| format!(" [shard {s}]")).unwrap_or_default();
    let driven = drive_with_heartbeat(&exp, &session, every, &who, opts);
    if let Some(c) = &coop {
        c.leave();
    }
    driven?;
    // A node of the prelude is reported again (fresh) by the run: counted once.
    let mut reports = session.reports();
    let mut seen = std::collections::HashSet::new();
    reports.retain(|r| seen.insert(r.node.clone()));
    let ran = session.executed();
    let errors: u64 = reports
        .iter()
        .filter(|r| r.state == NodeState::Ran)
        .map(|r| r.usage.errors)
        .sum();
    let others = session.computed_by_others() as usize;
    outln!(
        "{}{who}: {} stages, {ran} ran, {} fresh{}{}",
        exp.name,
        reports.len(),
        reports.len() - ran - others,
        if others > 0 {
            format!(", {others} computed by other workers")
        } else {
            String::new()
        },
        if errors > 0 {
            format!(", {errors} model-call errors recorded")
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `otb status`: each stage as fresh / would run / blocked, and why.
fn status(cx: &Ctx, experiment: &Path) -> Result<ExitCode> {
    let exp = cx.load(experiment)?;
    let store = cx.open_store(Access::ReadOnly)?;
    let located = stages::driver::locate(&exp, &store)?;
    out!("{}", stages::tables::report::status_text(&located));
    // The protocol the stages are keyed with, as a run ends with it (chess: whether
    // its games reproduce).
    let switches = exp.env_switches();
    if !switches.is_empty() {
        outln!("protocol: {}", switches.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}

/// How `otb plan` prints the plan.
#[derive(Clone, Copy, ValueEnum)]
enum PlanFormat {
    /// A line per node.
    Text,
    /// JSON (`experiment`, `nodes` with `node`, `stage`, `key`, `state`, `why`,
    /// `inputs`, `cell`; `bill` with `lines`, `totals`, `notes`)
    #[value(verbatim_doc_comment)]
    Json,
    /// A Graphviz digraph (`otb plan EXP --format dot | dot -Tsvg > plan.svg`).
    Dot,
}

/// `otb plan`: the experiment's plan and its bill, read from the store (never
/// written).
fn plan(
    cx: &Ctx,
    experiment: &Path,
    format: PlanFormat,
    prices: Option<&Path>,
) -> Result<ExitCode> {
    let prices = prices.map(stages::report::cost::Prices::load).transpose()?;
    let exp = cx.load(experiment)?;
    let store = cx.open_store(Access::ReadOnly)?;
    let plan = stages::plan::plan(&exp, &store)?;
    let price_of = |m: &str, p: u64, c: u64| prices.as_ref().and_then(|x| x.dollars(m, p, c));
    let bill = || {
        stages::estimate::bill(
            &exp,
            &store,
            &plan,
            stages::estimate::Options {
                prices: Some(&price_of),
                calibrate: true,
                fetch: false,
            },
        )
    };
    out!(
        "{}",
        match format {
            PlanFormat::Text => format!("{}{}", plan.text(), bill()?.text()),
            PlanFormat::Json => stages::estimate::plan_json(&plan, &bill()?),
            PlanFormat::Dot => plan.dot(),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `--shares`: one value, the stages' trace-free shares.
#[derive(Clone, Debug)]
pub struct Shares(Vec<f64>);

/// `--shares`: a value parser (clap's error names the flag).
fn parse_shares(s: &str) -> Result<Shares, String> {
    stages::tables::sft::parse_shares(s)
        .map(Shares)
        .map_err(|e| e.to_string())
}

/// `otb export`: the experiment's tables as flat Parquet files.
fn export(
    cx: &Ctx,
    experiment: &Path,
    to: Option<&Path>,
    sft: Option<&Path>,
    opts: &stages::tables::sft::SftOptions,
) -> Result<ExitCode> {
    let exp = cx.load(experiment)?;
    if let Some(to) = to {
        check_destination(to, "--to")?;
    }
    if let Some(sft) = sft {
        check_destination(sft, "--sft")?;
    }
    let store = cx.open_store(Access::ReadOnly)?;
    let dests: Vec<&Path> = to.into_iter().chain(sft).collect();
    let located = stages::tables::export::finished_run(&store, &exp, &dests)?;
    let run = &located.run;
    let mut written = Vec::new();
    if let Some(to) = to {
        written.extend(stages::tables::export::export(run, &exp.registry, to)?);
    }
    if let Some(sft) = sft {
        written.extend(stages::tables::sft::write(run, &exp, sft, opts)?);
    }
    for w in written {
        outln!("{}", w.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `otb docs`: one cell's documentation as an MCP tool list, on stdout or into
/// `to` (written whole, after everything was checked).
fn docs(
    cx: &Ctx,
    experiment: &Path,
    q: &stages::learned::Query,
    to: Option<&Path>,
) -> Result<ExitCode> {
    let exp = cx.load(experiment)?;
    if let Some(to) = to {
        // The store is otb's: a file in an entry would make it fail verification.
        if pipeline::store::is_inside(to, &cx.root) {
            return Err(BadInput(format!(
                "--to {}: is inside the store {}; write the tool list to a file outside it",
                to.display(),
                cx.root.display()
            ))
            .into());
        }
        if to.is_dir() {
            return Err(BadInput(format!(
                "--to {}: is a folder; name the file to write",
                to.display()
            ))
            .into());
        }
        let parent = match to.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if !parent.is_dir() {
            return Err(BadInput(format!(
                "--to {}: {} is not a folder",
                to.display(),
                parent.display()
            ))
            .into());
        }
        writable(parent).map_err(|e| {
            BadInput(format!(
                "--to {}: cannot write into {} ({e})",
                to.display(),
                parent.display()
            ))
        })?;
    }
    let store = cx.open_store(Access::ReadOnly)?;
    let located = stages::driver::locate(&exp, &store)?;
    let list = stages::learned::tool_list(&exp, &located, q)?;
    let text = serde_json::to_string_pretty(&list)? + "\n";
    match to {
        None => out!("{text}"),
        Some(to) => {
            let tmp = to.with_extension("json.tmp");
            std::fs::write(&tmp, &text)
                .and_then(|()| std::fs::rename(&tmp, to))
                .map_err(|e| anyhow::Error::new(e).context(format!("writing {}", to.display())))?;
            let n = list["tools"].as_array().map_or(0, Vec::len);
            let tools = if n == 1 { "tool" } else { "tools" };
            outln!("wrote {n} {tools} to {}", to.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `otb mcp proxy`: the bad input (the tool list, the command line) is refused
/// before the upstream is started; an upstream that is gone is one error line.
fn mcp_proxy(
    docs: &Path,
    addr: Option<std::net::SocketAddr>,
    connect_timeout_s: f64,
    call_timeout_s: f64,
    upstream: &[String],
) -> Result<ExitCode> {
    let input = |e: mcp::Error| -> anyhow::Error {
        match e {
            mcp::Error::Input(s) => BadInput(s).into(),
            e => e.into(),
        }
    };
    let seconds = |s: f64, option: &str| {
        mcp::bounds::timeout(s).ok_or_else(|| {
            BadInput(format!(
                "{option} {s}: give seconds above 0 and at most {}",
                mcp::bounds::MAX_TIMEOUT_S
            ))
        })
    };
    let limits = mcp::bounds::Limits {
        connect: seconds(connect_timeout_s, "--connect-timeout-s")?,
        call: seconds(call_timeout_s, "--call-timeout-s")?,
        ..mcp::bounds::Limits::default()
    };
    let list = mcp::tools::ToolList::read(docs).map_err(input)?;
    let spec = mcp::upstream::Spec::parse(upstream).map_err(input)?;
    match mcp::proxy::run_blocking(&spec, list.descriptions(), limits, addr).map_err(input)? {
        mcp::proxy::Ended::Client => Ok(ExitCode::SUCCESS),
        mcp::proxy::Ended::Upstream(why) => Err(anyhow::anyhow!(why)),
    }
}

/// `otb mcp fixtures`: a folder that cannot take a generation is one line, exit 2.
fn mcp_fixtures(out: &Path, seed: u64) -> Result<ExitCode> {
    let s = match datasets::mcp::generate(out, seed) {
        Ok(s) => s,
        Err(datasets::mcp::Error::Input(why)) => return Err(BadInput(why).into()),
        Err(e) => return Err(e.into()),
    };
    let per: Vec<String> = s.tasks.iter().map(|(k, n)| format!("{k} {n}")).collect();
    outln!(
        "wrote {} tasks ({}; {} train) and {} sample tasks to {} (seed {seed}; git HEAD {})",
        s.total(),
        per.join(", "),
        s.train,
        s.sample,
        s.out.display(),
        s.git_head
    );
    Ok(ExitCode::SUCCESS)
}

/// Check a folder the user names for a command to write into (`--to`, `--sft`)
/// before the store is read: it is a folder or can be made one (its nearest existing
/// ancestor is a folder this process may write into). One line and exit 2 otherwise,
/// instead of an I/O error after the work.
fn check_destination(dir: &Path, option: &str) -> Result<(), BadInput> {
    let bad = |why: String| BadInput(format!("{option} {}: {why}", dir.display()));
    if dir.exists() {
        if !dir.is_dir() {
            return Err(bad("is not a folder; name the folder to write into".into()));
        }
        return writable(dir).map_err(|e| bad(format!("cannot write into it ({e})")));
    }
    let mut up = dir.parent();
    while let Some(p) = up {
        let p = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        if p.exists() {
            if !p.is_dir() {
                return Err(bad(format!("{} is not a folder", p.display())));
            }
            return writable(p).map_err(|e| {
                bad(format!(
                    "cannot create it: {} is not writable ({e})",
                    p.display()
                ))
            });
        }
        up = p.parent();
    }
    Ok(())
}

/// Whether this process may create entries in the folder `dir` (`access(2)` with
/// `W_OK | X_OK`, which also says no for an immutable folder or a read-only file
/// system, for root too).
fn writable(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a NUL byte in the path"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `otb <version> (<commit>)`.
fn version() -> String {
    match env!("OTB_COMMIT") {
        "" => format!("otb {}", env!("CARGO_PKG_VERSION")),
        c => format!("otb {} ({c})", env!("CARGO_PKG_VERSION")),
    }
}

/// Where a report goes: `--to`, else `outputs/reports/<name>/`; never inside the
/// store (a file in an entry would make it fail verification).
fn report_dir(store: &Store, to: Option<&Path>, name: &str) -> Result<PathBuf> {
    let dir = to
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("outputs").join("reports").join(name));
    // `--to` was checked before the store was opened; the default folder here.
    if to.is_none() {
        check_destination(&dir, "the report folder")?;
    }
    if pipeline::store::is_inside(&dir, store.root()) {
        return Err(BadInput(format!(
            "{}: is inside the store {}; write the report to a folder outside it",
            dir.display(),
            store.root().display()
        ))
        .into());
    }
    Ok(dir)
}

fn print_written(written: &[PathBuf]) -> Result<()> {
    for w in written {
        outln!("{}", w.display());
    }
    Ok(())
}

/// `otb report EXP`.
fn report(
    cx: &Ctx,
    experiment: &Path,
    against: Option<&Path>,
    to: Option<&Path>,
    opts: &stages::report::Options,
    edits: bool,
) -> Result<ExitCode> {
    let exp = cx.load(experiment)?;
    let other = against.map(|p| cx.load(p)).transpose()?;
    if let Some(to) = to {
        check_destination(to, "--to")?;
    }
    // A store on object storage is read through a mirror that may not exist yet.
    if !cx.root.is_dir() && cx.remote.is_none() {
        return Err(BadInput(format!(
            "no store at {} (run `otb run {}` first, or give --store)",
            cx.root.display(),
            experiment.display()
        ))
        .into());
    }
    let store = cx.open_store(Access::ReadOnly)?;
    let dir = report_dir(&store, to, &exp.name)?;
    let mut r = stages::report::of_experiment(&store, &exp, other.as_ref(), opts)?;
    if edits {
        out!("{}", stages::report::text::edits(&r));
    }
    let written = stages::report::write(&mut r, &dir, opts)?;
    print_written(&written)?;
    out!("{}", stages::estimate::versus_report(&r.estimate));
    Ok(ExitCode::SUCCESS)
}

/// `otb report --released DIR`: import and grade the released runs (cached in the
/// store), then report them.
fn report_released(
    cx: &Ctx,
    dir: &Path,
    configs: Option<&Path>,
    recorded: Option<&Path>,
    to: Option<&Path>,
    opts: &stages::report::Options,
) -> Result<ExitCode> {
    use stages::bfcl::import_released as imp;
    let plan = imp::prepare(dir, configs, recorded)?;
    if let Some(to) = to {
        check_destination(to, "--to")?;
    }
    let store = cx.open_store(Access::ReadWrite)?;
    let out = report_dir(&store, to, "released")?;
    let mut session = Session::new(&store, Mode::Run, true);
    let imported = imp::import(&plan, &mut session)?;
    let reports = session.reports();
    // Table 2's released rows rescore the tree against the reference configs that
    // graded the import (`--configs`, else `tool_configs/` beside DIR when present).
    let expected = configs.map(Path::to_path_buf).or_else(|| {
        dir.parent()
            .map(|p| p.join("tool_configs"))
            .filter(|p| p.is_dir())
    });
    let mut r = stages::report::of_released(
        &imported,
        &reports,
        dir,
        &store,
        &plan.executor,
        expected.as_deref(),
        opts,
    )?;
    let written = stages::report::write(&mut r, &out, opts)?;
    print_written(&written)?;
    Ok(ExitCode::SUCCESS)
}

/// `otb gc`: remove what no listed experiment references.
fn gc(cx: &Ctx, keep: &[PathBuf], dry_run: bool) -> Result<ExitCode> {
    // Every experiment file is read and checked before the store is opened.
    let exps = keep
        .iter()
        .map(|p| cx.load(p))
        .collect::<Result<Vec<_>, _>>()?;
    let access = if dry_run {
        Access::ReadOnly
    } else {
        Access::ReadWrite
    };
    let store = cx.open_store(access)?;
    let report = stages::gc::collect(&store, &exps, dry_run)?;
    out!("{}", stages::gc::render(&report));
    Ok(ExitCode::SUCCESS)
}

/// `otb released score`.
fn released_score(
    dir: &Path,
    backend: Backend,
    recorded: Option<&Path>,
    expected: Option<&Path>,
    format: Format,
) -> Result<ExitCode> {
    released_dir(dir)?;
    let exec = executor(backend, recorded)?;
    let rows = stages::bfcl::released::score(dir, &exec, expected).map_err(|e| {
        let what = format!("scoring released runs under {}", dir.display());
        match e {
            // A file not in the released format is the input's fault.
            e @ datasets::bfcl::released::ReleasedError::Malformed { .. } => {
                anyhow::Error::new(BadInput(format!("{what}: {e}")))
            }
            e => anyhow::Error::new(e).context(what),
        }
    })?;
    out!(
        "{}",
        stages::bfcl::released::render(&rows, format == Format::Csv)
    );
    eprintln!(
        "otb: {} run versions scored; {} instance verdicts disagree with the released scored files",
        rows.len(),
        stages::bfcl::released::disagreements(&rows)
    );
    Ok(ExitCode::SUCCESS)
}

/// The released runs' folder must be a directory (exit 2 otherwise).
fn released_dir(dir: &Path) -> Result<(), BadInput> {
    if dir.is_dir() {
        Ok(())
    } else {
        Err(BadInput(format!(
            "{}: not a directory (the folder of the released runs)",
            dir.display()
        )))
    }
}

/// `otb table table2`.
fn table2(
    cx: &Ctx,
    experiment: Option<&Path>,
    released: Option<&Path>,
    recorded: Option<&Path>,
    expected: Option<&Path>,
    format: Format,
    out: Option<&Path>,
) -> Result<ExitCode> {
    let exp = experiment.map(|p| cx.load(p)).transpose()?;
    if let Some(dir) = released {
        released_dir(dir)?;
    }
    let store = cx.open_store(Access::ReadOnly)?;
    let exec = match recorded {
        Some(r) => executor(Backend::Recorded, Some(r))?,
        None => executor(Backend::Simulated, None)?,
    };
    let located = match &exp {
        Some(e) => Some(stages::driver::locate(e, &store)?),
        None => None,
    };
    let run = exp.as_ref().zip(located.as_ref());
    let table = stages::tables::table2::build(&store, run, released, &exec, expected)?;
    show(&table, format == Format::Csv, out)?;
    Ok(ExitCode::SUCCESS)
}

/// `otb table table5|table7|tokens --released DIR`: the paper's claims checked
/// against the authors' released runs (each definition tried, labelled).
fn released_check(table: TableName, dir: &Path) -> Result<ExitCode> {
    use datasets::bfcl::released_checks as rc;
    released_dir(dir)?;
    let text = match table {
        TableName::Table5 => rc::render_table5(&rc::table5(dir)?),
        TableName::Table7 => rc::render_table7(&rc::table7(dir)?),
        _ => rc::render_tokens(&rc::tokens(dir)?),
    };
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// `otb table table5|table6|table7|tokens`.
fn render_table(
    cx: &Ctx,
    table: TableName,
    experiment: Option<&Path>,
    format: Format,
    out: Option<&Path>,
) -> Result<ExitCode> {
    let name = match table {
        TableName::Table2 => "table2",
        TableName::Table3 => "table3",
        TableName::Table4 => "table4",
        TableName::Table5 => "table5",
        TableName::Table6 => "table6",
        TableName::Table7 => "table7",
        TableName::Mcp => "mcp",
        TableName::Tokens => "tokens",
    };
    let path = experiment.ok_or_else(|| BadInput(format!("{name} needs --experiment EXP.toml")))?;
    let exp = cx.load(path)?;
    let store = cx.open_store(Access::ReadOnly)?;
    let csv = format == Format::Csv;
    let at = stages::driver::locate(&exp, &store)?;
    use stages::tables::{fidelity, mcp, table3, table4, table5, table7, tokens};
    match table {
        TableName::Table3 => show(&table3::build(&exp, &at)?, csv, out)?,
        TableName::Table4 => show(&table4::build(&exp, &at)?, csv, out)?,
        TableName::Table5 => show(&table5::build(&exp, &at)?, csv, out)?,
        TableName::Table6 => show(&fidelity::build(&store, &exp, &at)?, csv, out)?,
        TableName::Table7 => show(&table7::build(&exp, &at)?, csv, out)?,
        TableName::Mcp => show(&mcp::build(&exp, &at)?, csv, out)?,
        TableName::Tokens | TableName::Table2 => show(&tokens::build(&exp, &at)?, csv, out)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Print a table (Markdown or CSV) and, with `--out DIR`, write its files there.
fn show<T: TableReport>(table: &T, csv: bool, out: Option<&Path>) -> Result<()> {
    out!("{}", table.render(csv));
    if let Some(dir) = out {
        for p in table.write(dir)? {
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(())
}

fn executor(
    backend: Backend,
    recorded: Option<&Path>,
) -> Result<datasets::bfcl::executor::Executor> {
    match backend {
        Backend::Simulated => Ok(stages::bfcl::make_executor(None)?),
        Backend::Recorded => {
            let path = recorded
                .ok_or_else(|| BadInput("--backend recorded needs --recorded FILE".into()))?;
            if !path.is_file() {
                return Err(BadInput(format!(
                    "recorded responses file {} does not exist",
                    path.display()
                ))
                .into());
            }
            Ok(stages::bfcl::make_executor(Some(path))?)
        }
        Backend::Live => {
            stages::bfcl::make_live_executor().map_err(|e| BadInput(e.to_string()).into())
        }
    }
}

//! BFCL-Opaque in the pipeline: its stages (`bfcl-data`, `opacify`, single-turn
//! `explore`, `evaluate`, `summarize`), the importer of the authors' released runs,
//! and the glue used by several commands (building the executor, `otb exec`).
//! [`env::Bfcl`] is how the generic loops see it.

pub mod config;
pub mod data;
pub mod env;
pub mod evaluate;
pub mod explore;
pub mod import_released;
pub mod opacify;
pub mod reading;
pub mod released;
pub mod summarize;

use crate::env::{Cx, DriveError};
use crate::experiment::{EnvTable, Environment, Experiment};
use crate::InputError;
pub use config::{BfclExperiment, DataSource, Outcome};
use datasets::bfcl::exec::PyException;
use datasets::bfcl::executor::Executor;
use datasets::bfcl::pyparse::parse_call;
use datasets::bfcl::rest::{BackendChain, LiveBackend, LiveError, RestError};
use std::path::{Path, PathBuf};

/// Seed of the simulated REST world (fixed: part of the benchmark's definition).
pub const SIMULATED_SEED: u64 = 0;

/// `recorded` then `simulated` when a frozen-responses file is given, else `simulated`.
pub fn make_executor(recorded: Option<&Path>) -> Result<Executor, RestError> {
    match recorded {
        // Also indexes the frozen responses by raw ground-truth text (paper parity).
        Some(p) => Executor::paper(p, SIMULATED_SEED),
        None => Ok(Executor::new(BackendChain::simulated(SIMULATED_SEED))),
    }
}

/// The real web APIs alone (`--backend live`, an explicit opt-in): the four API keys
/// from the environment (`GEOCODE_API_KEY`, `RAPID_API_KEY`, `OMDB_API_KEY`,
/// `EXCHANGERATE_API_KEY`) and `OTB_LIVE_BASE_URL` when set. A missing key or a bad
/// base URL is an error naming it, before any request is sent.
pub fn make_live_executor() -> Result<Executor, LiveError> {
    Ok(Executor::new(BackendChain::live(LiveBackend::from_env()?)))
}

/// `otb exec`: parse one Python call string (real function name) and execute it.
/// Returns the result's `repr`, or the Python error text, as one line; a call string
/// that does not parse is an `Err` (bad input).
pub fn exec_call_line(exec: &Executor, call: &str) -> Result<String, String> {
    let c = parse_call(call).map_err(|e| format!("cannot parse call `{call}`: {e}"))?;
    // Positional arguments are bound as CPython binds them (with its error texts).
    let out: Result<_, PyException> = exec.execute_call(&c);
    Ok(datasets::bfcl::executor::bounded_output(&match out {
        Ok(v) => v.repr(),
        Err(e) => format!("{}: {}", e.kind, e.text()),
    }))
}

/// BFCL-Opaque in the registry of environments.
pub struct BfclEnvironment;

impl Environment for BfclEnvironment {
    fn table(&self) -> &'static str {
        "bfcl"
    }

    fn parse(
        &self,
        table: toml::Value,
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<Box<dyn EnvTable>, String> {
        let raw: config::RawBfcl = table
            .try_into()
            .map_err(|e| crate::experiment::table_error("bfcl", &e))?;
        Ok(Box::new(BfclExperiment::from_raw(raw, resolve)?))
    }

    fn reader(&self) -> &dyn crate::experiment::Reader {
        &reading::BfclReader
    }
}

impl EnvTable for BfclExperiment {
    fn table(&self) -> &'static str {
        "bfcl"
    }

    fn methods(&self) -> Vec<crate::env::Method> {
        self.methods.clone()
    }

    fn tool_sets(&self) -> Vec<String> {
        vec![String::new()]
    }

    fn plays_offline(&self) -> bool {
        false
    }

    /// A user's data or frozen-responses file must parse before the store is opened
    /// (the stages would find out only after).
    fn preflight(&self, _exp: &Experiment) -> Result<(), InputError> {
        if let config::DataSource::File(p) = &self.data {
            datasets::bfcl::data::load_jsonl(p, None)
                .map_err(|e| InputError(format!("bfcl.data {}: {e}", p.display())))?;
        }
        if let (Some(p), "recorded") = (&self.recorded, self.backend.as_str()) {
            crate::bfcl::make_executor(Some(p))
                .map_err(|e| InputError(format!("bfcl.recorded {}: {e}", p.display())))?;
        }
        Ok(())
    }

    fn drive<'p>(&'p self, exp: &'p Experiment, cx: &mut Cx<'p, '_>) -> Result<(), DriveError> {
        crate::bfcl::env::drive(exp, self, cx)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

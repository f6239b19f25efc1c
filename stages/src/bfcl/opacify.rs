//! Stage `opacify`: the documentation each setting shows (round 0 docs).

use crate::bfcl::data::instance_of;
use crate::rows::{DocRow, InstanceRow};
use datasets::bfcl::opacify::{opacify, Setting};
use pipeline::{StageCtx, StageError};
use serde_json::{json, Value};

/// The stage name.
pub const STAGE: &str = "opacify";
/// The stage version.
pub const VERSION: u32 = 1;

/// Runs `opacify` for one setting: each instance's round-0 docs row (tools as the
/// setting shows them, with the mapping from real to shown names).
pub fn run(
    ctx: &mut StageCtx<'_>,
    setting: &str,
    instances: &[InstanceRow],
) -> Result<(), StageError> {
    let s = Setting::parse(setting).map_err(|e| StageError::bug(STAGE, e.to_string()))?;
    let rows: Vec<DocRow> = instances
        .iter()
        .map(|row| {
            let o = opacify(&instance_of(row), s);
            DocRow {
                instance_id: row.instance_id.clone(),
                setting: setting.to_string(),
                round: 0,
                tools: Value::Array(o.tools),
                name_mapping: json!(o.name_mapping),
                changed: true,
                frozen: false,
                demos: Value::Null,
            }
        })
        .collect();
    ctx.write(&rows)?;
    Ok(())
}

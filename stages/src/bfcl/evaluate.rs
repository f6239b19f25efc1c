//! Stage `evaluate`: execute every recorded tool call, execute the ground truth through
//! the same backend chain, and grade E/P/A per instance. One bad trajectory never fails
//! the stage: it becomes a row with its reason.

use crate::bfcl::data::instance_of;
use crate::rows::{DocRow, InstanceRow, ScoreRow, TrajectoryRow};
use datasets::bfcl::exec::PyException;
use datasets::bfcl::executor::bounded_output;
use datasets::bfcl::executor::Executor;
use datasets::bfcl::grader::{self, GradeInput, GroundTruthCall, ModelCall};
use datasets::bfcl::pyparse::parse_call;
use datasets::bfcl::pyvalue::PyValue;
use pipeline::{StageCtx, StageError};
use serde_json::{json, Value};
use std::collections::HashMap;

/// The stage name.
pub const STAGE: &str = "evaluate";
/// The stage version.
pub const VERSION: u32 = 1;

/// A recorded call as the grader's input type.
pub fn model_call(function: &str, args: &Value, raw: Option<&str>) -> ModelCall {
    ModelCall {
        function: function.to_string(),
        args: match args.as_object() {
            Some(m) => Ok(m
                .iter()
                .map(|(k, v)| (k.clone(), PyValue::from_json(v)))
                .collect()),
            None => Err(raw.unwrap_or("null").to_string()),
        },
    }
}

/// `[[real, shown], ...]` back into pairs.
pub use crate::rows::name_mapping;

fn output_json(o: &Result<PyValue, PyException>) -> Value {
    match o {
        Ok(v) => json!({"ok": v.to_json(), "repr": v.repr()}),
        Err(e) => json!({"error": e.text(), "kind": e.kind}),
    }
}

/// The outcome line shown to the editor (`toolobserver.md`, online mode step 2),
/// bounded in size like every tool output a model sees.
pub fn outcome_text(
    calls: usize,
    outputs: &[Result<PyValue, PyException>],
    correct: bool,
) -> String {
    if calls == 0 || outputs.is_empty() {
        return "ERROR: No execution results available".to_string();
    }
    let errors: Vec<String> = outputs
        .iter()
        .filter_map(|o| o.as_ref().err().map(|e| e.text()))
        .collect();
    if !errors.is_empty() {
        return bounded_output(&format!("ERROR: {}", errors.join("; ")));
    }
    let values: Vec<String> = outputs
        .iter()
        .filter_map(|o| o.as_ref().ok().map(|v| v.repr()))
        .collect();
    if correct {
        bounded_output(&format!("SUCCESS: {}", values.join("; ")))
    } else {
        bounded_output(&format!("Model output: {}", values.join("; ")))
    }
}

/// Grade one instance.
pub fn grade_one(
    exec: &Executor,
    round: i64,
    inst: &InstanceRow,
    doc: &DocRow,
    traj: Option<&TrajectoryRow>,
) -> ScoreRow {
    let instance = instance_of(inst);
    let mut row = ScoreRow {
        instance_id: inst.instance_id.clone(),
        category: inst.category.clone(),
        round,
        e: false,
        e_reason: String::new(),
        p: 0.0,
        a: 0.0,
        a_corrected: 0.0,
        outputs: json!([]),
        outcome: "ERROR: No execution results available".to_string(),
        error_kind: None,
    };
    let Some(traj) = traj else {
        row.e_reason = "no_trajectory".into();
        return row;
    };
    if let Some(kind) = &traj.error_kind {
        row.e_reason = format!("model_error: {kind}");
        row.error_kind = Some(kind.clone());
        return row;
    }
    let mut gt = Vec::new();
    for s in &instance.ground_truth {
        match parse_call(s) {
            // Positional arguments that could not be named by the signature.
            Ok(c) if !c.args.is_empty() => {
                row.e_reason = format!(
                    "ground_truth_unparsable: {s}: positional arguments that bind to no parameter"
                );
                return row;
            }
            Ok(c) => gt.push(GroundTruthCall {
                source: s.clone(),
                name: c.name,
                args: c.kwargs,
            }),
            Err(e) => {
                row.e_reason = format!("ground_truth_unparsable: {e}");
                return row;
            }
        }
    }
    let calls: Vec<ModelCall> = traj
        .calls
        .iter()
        .map(|c| model_call(&c.function, &c.args, c.raw.as_deref()))
        .collect();
    let mapping = name_mapping(&doc.name_mapping);
    let outputs = grader::execute_model_calls(exec, &calls, &mapping);
    let expected = grader::execute_ground_truth(exec, &gt);
    let tools: Vec<Value> = doc.tools.as_array().cloned().unwrap_or_default();
    let score = grader::grade(&GradeInput {
        category: instance.category,
        model_calls: &calls,
        outputs: &outputs,
        ground_truth: &gt,
        expected: &expected,
        result_types: &instance.execution_result_type,
        name_mapping: &mapping,
        tools_seen: &tools,
        original_functions: &instance.functions,
    });
    row.e = score.e;
    row.e_reason = score.e_reason.clone();
    row.p = score.p;
    row.a = score.a;
    row.a_corrected = score.a_corrected;
    row.outcome = outcome_text(calls.len(), &outputs, score.e);
    row.outputs = Value::Array(outputs.iter().map(output_json).collect());
    row
}

/// Runs `evaluate` for round `round`: one score row per docs row, its trajectory's
/// calls executed with `exec` and graded against the ground truth.
pub fn run(
    ctx: &mut StageCtx<'_>,
    exec: &Executor,
    round: i64,
    instances: &[InstanceRow],
    docs: &[DocRow],
    trajectories: &[TrajectoryRow],
) -> Result<(), StageError> {
    let inst: HashMap<&str, &InstanceRow> = instances
        .iter()
        .map(|i| (i.instance_id.as_str(), i))
        .collect();
    let traj: HashMap<&str, &TrajectoryRow> = trajectories
        .iter()
        .map(|t| (t.instance_id.as_str(), t))
        .collect();
    let pb = ctx.progress(docs.len() as u64);
    let mut rows = Vec::with_capacity(docs.len());
    for d in docs {
        let Some(i) = inst.get(d.instance_id.as_str()) else {
            return Err(StageError::bug(
                STAGE,
                format!("docs for unknown instance {}", d.instance_id),
            ));
        };
        rows.push(grade_one(
            exec,
            round,
            i,
            d,
            traj.get(d.instance_id.as_str()).copied(),
        ));
        pb.inc(1);
    }
    pb.finish_and_clear();
    ctx.write(&rows)?;
    Ok(())
}

//! `otb export`: flat Parquet tables of a finished experiment, one file per kind of
//! row, every stored table of that kind concatenated, with `node`,
//! `method`, `agent` and `editor` columns added, plus a `SCHEMA.md` documenting every column.

use crate::bfcl::summarize::SummaryRow;
use crate::driver::RunOutput;
use crate::experiment::Experiment;
use crate::offline::{AnalysisRow, MergeRow};
use crate::rows::{DocCallRow, DocRow, EditRow, InstanceRow, ScoreRow, ToolRunRow, TrajectoryRow};
use pipeline::{Row, StageError};
use polars::prelude::*;
use std::path::{Path, PathBuf};

fn fail(e: impl std::fmt::Display) -> StageError {
    StageError::failed("export", e.to_string())
}

fn doc_of<R: Row>(out: &mut String, labelled: bool) {
    out.push_str(&format!(
        "## {}.parquet\n\nOne row = {}.\n\n| column | type | meaning |\n|---|---|---|\n",
        R::TABLE,
        R::DOC
    ));
    if labelled {
        for (n, t, d) in [
            (
                "node",
                "string",
                "the experiment node that produced the row",
            ),
            (
                "method",
                "string",
                "gold, base, toolobserver, easytool, play2prompt or draft",
            ),
            ("agent", "string", "agent model spec of the chain"),
            (
                "editor",
                "string",
                "editor model spec of the chain (empty: none)",
            ),
        ] {
            out.push_str(&format!("| {n} | {t} | {d} |\n"));
        }
    }
    for c in R::columns() {
        out.push_str(&format!("| {} | {} | {} |\n", c.name, c.ty.name(), c.doc));
    }
    out.push('\n');
}

fn concat_table(run: &RunOutput, table: &str, dest: &Path) -> Result<Option<PathBuf>, StageError> {
    let mut acc: Option<DataFrame> = None;
    for o in &run.outputs {
        if !o.entry.manifest.outputs.contains_key(table) {
            continue;
        }
        let path = o.entry.table_path(table);
        let file =
            std::fs::File::open(&path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
        let mut df = ParquetReader::new(file).finish().map_err(fail)?;
        let h = df.height();
        if table != "instances" && table != "summary" {
            df.with_column(Column::new("node".into(), vec![o.node.clone(); h]))
                .map_err(fail)?;
            df.with_column(Column::new("method".into(), vec![o.method.clone(); h]))
                .map_err(fail)?;
            df.with_column(Column::new("agent".into(), vec![o.agent.clone(); h]))
                .map_err(fail)?;
            df.with_column(Column::new("editor".into(), vec![o.editor.clone(); h]))
                .map_err(fail)?;
        }
        match acc.as_mut() {
            None => acc = Some(df),
            Some(a) => {
                a.vstack_mut(&df).map_err(fail)?;
            }
        }
    }
    let Some(mut df) = acc else { return Ok(None) };
    let path = dest.join(format!("{table}.parquet"));
    let file =
        std::fs::File::create(&path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    ParquetWriter::new(file).finish(&mut df).map_err(fail)?;
    Ok(Some(path))
}

/// Write the flat tables and `SCHEMA.md` into `dest`; returns the files written.
pub fn export(run: &RunOutput, dest: &Path) -> Result<Vec<PathBuf>, StageError> {
    std::fs::create_dir_all(dest).map_err(|e| fail(format!("{}: {e}", dest.display())))?;
    let mut written = Vec::new();
    let mut schema = String::from(
        "# Exported tables\n\nWritten by `otb export`. JSON columns hold JSON text (object key order as produced).\n\n",
    );
    doc_of::<InstanceRow>(&mut schema, false);
    doc_of::<DocRow>(&mut schema, true);
    doc_of::<TrajectoryRow>(&mut schema, true);
    doc_of::<ScoreRow>(&mut schema, true);
    doc_of::<EditRow>(&mut schema, true);
    doc_of::<DocCallRow>(&mut schema, true);
    doc_of::<ToolRunRow>(&mut schema, true);
    doc_of::<AnalysisRow>(&mut schema, true);
    doc_of::<MergeRow>(&mut schema, true);
    doc_of::<SummaryRow>(&mut schema, false);
    for table in [
        InstanceRow::TABLE,
        DocRow::TABLE,
        TrajectoryRow::TABLE,
        ScoreRow::TABLE,
        EditRow::TABLE,
        DocCallRow::TABLE,
        ToolRunRow::TABLE,
        AnalysisRow::TABLE,
        MergeRow::TABLE,
        SummaryRow::TABLE,
    ] {
        if let Some(p) = concat_table(run, table, dest)? {
            written.push(p);
        }
    }
    let sp = dest.join("SCHEMA.md");
    std::fs::write(&sp, schema).map_err(|e| fail(format!("{}: {e}", sp.display())))?;
    written.push(sp);
    Ok(written)
}

/// `otb export`: the experiment must be complete in `store` (bad input otherwise:
/// run it first); then [`export`].
pub fn export_experiment(
    store: &pipeline::Store,
    exp: &Experiment,
    dest: &Path,
) -> Result<Vec<PathBuf>, crate::env::DriveError> {
    let mut session = pipeline::Session::new(store, pipeline::Mode::Status, true);
    let run = crate::driver::drive(exp, &mut session)?;
    if session
        .reports()
        .iter()
        .any(|r| r.state != pipeline::NodeState::Fresh)
    {
        return Err(crate::InputError(format!(
            "{} is not complete in {}; run `otb run {}` first",
            exp.name,
            store.root().display(),
            exp.path.display()
        ))
        .into());
    }
    Ok(export(&run, dest)?)
}

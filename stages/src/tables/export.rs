//! `otb export`: flat Parquet tables of a finished experiment, one file per kind of
//! row, every stored table of that kind concatenated, plus a `SCHEMA.md` documenting
//! every column.
//!
//! A labelled table (every kind a grid node writes) keeps its own columns and rows as
//! stored, and gets the grid cell of the node that wrote each row as columns after
//! them ([`CELL_COLUMNS`]: `node`, `method`, `agent`, `editor`, `env`, `setting`,
//! `round`, `step`, `split`, `seed`; strings empty where the cell has none, `round`
//! and `seed` Int64), so a user groups by `setting, method, agent` without parsing
//! node names. **The naming rule:** a cell column takes its plain name, unless the
//! table has a column of that name of its own (e.g. `docs.setting`, `scores.round`,
//! `doc_calls.method` and `.step`, `chess_games.split`): that one keeps the name and
//! the cell's is `cell_<name>` (`cell_round`, ...), so no table has two columns of
//! one name. SCHEMA.md's header says the same.

use crate::bfcl::summarize::SummaryRow;
use crate::driver::RunOutput;
use crate::experiment::Experiment;
use crate::offline::{AnalysisRow, MergeRow};
use crate::rows::{
    cell_column_name, DocCallRow, DocRow, EditRow, Exported, InstanceRow, ScoreRow, ToolRunRow,
    TrajectoryRow, CELL_COLUMNS,
};
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use pipeline::StageError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn fail(e: impl std::fmt::Display) -> StageError {
    StageError::infra("export", e.to_string())
}

/// Every table an experiment's stages write: the shared ones, then each environment's
/// of `registry` (the order of SCHEMA.md).
pub fn tables(registry: &crate::experiment::Registry) -> Vec<Exported> {
    let mut t = vec![
        Exported::of::<InstanceRow>(false),
        Exported::of::<DocRow>(true),
        Exported::of::<TrajectoryRow>(true),
        Exported::of::<ScoreRow>(true),
        Exported::of::<EditRow>(true),
        Exported::of::<DocCallRow>(true),
        Exported::of::<ToolRunRow>(true),
        Exported::of::<AnalysisRow>(true),
        Exported::of::<MergeRow>(true),
        Exported::of::<SummaryRow>(false),
    ];
    t.extend(registry.environments().flat_map(|e| e.exported()));
    t
}

/// SCHEMA.md's header: what the files are, and the cell columns' naming rule.
const SCHEMA_HEADER: &str = "# Exported tables\n\n\
Written by `otb export`. JSON columns hold JSON text (object key order as produced).\n\n\
A table whose rows a grid node writes keeps its own columns and rows as stored, and \
gets the grid cell of that node as columns after them: `node`, `method`, `agent`, \
`editor`, `env`, `setting`, `round`, `step`, `split`, `seed` (strings are empty \
where the cell has none; `round` and `seed` are int64). A cell column takes its plain \
name unless the table has a column of that name of its own, which keeps it: the \
cell's is then `cell_<name>` (e.g. `scores.cell_round` beside `scores.round`). No \
table has two columns of one name.\n\n";

/// One cell column's value for every row of a batch of `n` rows of output `o`.
fn cell_array(o: &crate::env::Output, column: &str, n: usize) -> Result<ArrayRef, StageError> {
    let c = &o.cell;
    let text = |v: &str| -> ArrayRef { Arc::new(StringArray::from(vec![v; n])) };
    let int = |v: i64| -> ArrayRef { Arc::new(Int64Array::from(vec![v; n])) };
    Ok(match column {
        "node" => text(&o.node),
        "env" => text(c.env),
        "setting" => text(&c.setting),
        "method" => text(c.method_name()),
        "agent" => text(&c.agent),
        "editor" => text(&c.editor),
        "round" => int(c.round),
        "step" => text(c.step_name()),
        "split" => text(c.split_name()),
        // A seed comes from a TOML integer, which is an i64.
        "seed" => int(i64::try_from(c.seed).map_err(|_| {
            StageError::bug(
                "export",
                format!("{}: seed {} does not fit an int64 column", o.node, c.seed),
            )
        })?),
        other => {
            return Err(StageError::bug(
                "export",
                format!("no value for cell column `{other}`"),
            ))
        }
    })
}

/// Stacks table `table` of every output that has it into `dest/<table>.parquet`
/// (the first such table's schema, plus the cell's columns when `labelled`, named by
/// [`cell_column_name`]); `None` when no output has it.
fn concat_table(
    run: &RunOutput,
    table: &str,
    labelled: bool,
    dest: &Path,
) -> Result<Option<PathBuf>, StageError> {
    let path = dest.join(format!("{table}.parquet"));
    let mut out: Option<(ArrowWriter<std::fs::File>, Arc<Schema>)> = None;
    for o in &run.outputs {
        if !o.entry.manifest.outputs.contains_key(table) {
            continue;
        }
        let src = o.entry.table_path(table);
        let at = |e: &dyn std::fmt::Display| fail(format!("{}: {e}", src.display()));
        let file = std::fs::File::open(&src).map_err(|e| at(&e))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| at(&e))?;
        if out.is_none() {
            let mut fields: Vec<Field> = reader
                .schema()
                .fields()
                .iter()
                .map(|f| f.as_ref().clone())
                .collect();
            if labelled {
                let own: Vec<String> = fields.iter().map(|f| f.name().clone()).collect();
                for c in &CELL_COLUMNS {
                    let name = cell_column_name(c.name, |n| own.iter().any(|o| o == n));
                    let ty = match c.ty {
                        pipeline::table::ColType::I64 => DataType::Int64,
                        _ => DataType::Utf8,
                    };
                    fields.push(Field::new(name, ty, false));
                }
            }
            let schema = Arc::new(Schema::new(fields));
            let file = std::fs::File::create(&path)
                .map_err(|e| fail(format!("{}: {e}", path.display())))?;
            let props = WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .build();
            let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
                .map_err(|e| fail(format!("{}: {e}", path.display())))?;
            out = Some((writer, schema));
        }
        let Some((writer, schema)) = out.as_mut() else {
            continue;
        };
        for batch in reader.build().map_err(|e| at(&e))? {
            let batch = batch.map_err(|e| at(&e))?;
            let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
            if labelled {
                for c in &CELL_COLUMNS {
                    columns.push(cell_array(o, c.name, batch.num_rows())?);
                }
            }
            let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| at(&e))?;
            writer.write(&batch).map_err(|e| at(&e))?;
        }
    }
    let Some((writer, _)) = out else {
        return Ok(None);
    };
    writer
        .close()
        .map_err(|e| fail(format!("{}: {e}", path.display())))?;
    Ok(Some(path))
}

/// Write every table the run's outputs hold (one Parquet file per table, rows of all
/// outputs stacked) and SCHEMA.md describing them. A table no registry names is a
/// defect: it is exported unlabelled and noted in SCHEMA.md rather than dropped.
pub fn export(
    run: &RunOutput,
    registry: &crate::experiment::Registry,
    dest: &Path,
) -> Result<Vec<PathBuf>, StageError> {
    std::fs::create_dir_all(dest).map_err(|e| fail(format!("{}: {e}", dest.display())))?;
    let mut written = Vec::new();
    let mut schema = String::from(SCHEMA_HEADER);
    let known = tables(registry);
    for t in &known {
        t.schema(&mut schema);
        if let Some(p) = concat_table(run, t.table, t.labelled, dest)? {
            written.push(p);
        }
    }
    let mut other: Vec<&str> = run
        .outputs
        .iter()
        .flat_map(|o| o.entry.manifest.outputs.keys().map(String::as_str))
        .filter(|k| !known.iter().any(|t| t.table == *k))
        .collect();
    other.sort_unstable();
    other.dedup();
    for table in other {
        schema.push_str(&format!("## {table}.parquet\n\n(no schema registered)\n\n"));
        if let Some(p) = concat_table(run, table, false, dest)? {
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
    let located = finished_run(store, exp, &[dest])?;
    Ok(export(&located.run, &exp.registry, dest)?)
}

/// The outputs of `exp` in `store`, which must be complete (bad input otherwise: run
/// it first); `dests` (where they will be written) must lie outside the store.
pub fn finished_run(
    store: &pipeline::Store,
    exp: &Experiment,
    dests: &[&Path],
) -> Result<crate::driver::Located, crate::env::DriveError> {
    // Nothing but the store writes inside it: a file in an entry would make the entry
    // fail its verification (and be recomputed).
    if let Some(dest) = dests
        .iter()
        .find(|d| pipeline::store::is_inside(d, store.root()))
    {
        return Err(crate::InputError(format!(
            "{}: is inside the store {}; export to a folder outside it",
            dest.display(),
            store.root().display()
        ))
        .into());
    }
    let located = crate::driver::locate(exp, store)?;
    if located
        .reports
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
    Ok(located)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::{fidelity, mcp, table2, table3, table4, table5, table7, tokens};

    /// The schema text (SCHEMA.md's format) of every row type the crate stores: the
    /// exported tables in SCHEMA.md's order, then the rendered tables' rows and
    /// `otb cache export`'s calls.
    fn every_schema() -> String {
        let mut all = tables(&crate::driver::environments());
        all.extend([
            Exported::of::<table2::CellRow>(false),
            Exported::of::<table3::Table3Row>(false),
            Exported::of::<table4::Table4Row>(false),
            Exported::of::<mcp::McpTableRow>(false),
            Exported::of::<table5::RoundsRow>(false),
            Exported::of::<fidelity::FidelityRow>(false),
            Exported::of::<table7::EditorCell>(false),
            Exported::of::<tokens::TokenRow>(false),
            Exported::of::<crate::models::cache_views::CallRow>(false),
        ]);
        let mut out = String::new();
        for t in &all {
            t.schema(&mut out);
        }
        out
    }

    /// No exported table, of any environment, has two columns of one name: a cell
    /// column whose name the table has is `cell_<name>`.
    #[test]
    fn no_exported_table_has_two_columns_of_one_name() {
        let all = tables(&crate::driver::environments());
        for t in &all {
            let names = t.column_names();
            let mut unique = names.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), names.len(), "{}: {names:?}", t.table);
        }
        let scores = all.iter().find(|t| t.table == "scores").unwrap();
        assert_eq!(
            scores.column_names()[scores.column_names().len() - 10..],
            [
                "node",
                "method",
                "agent",
                "editor",
                "env",
                "setting",
                "cell_round",
                "step",
                "split",
                "seed"
            ]
        );
        let calls = all.iter().find(|t| t.table == "doc_calls").unwrap();
        assert!(calls.column_names().contains(&"cell_method".to_string()));
        assert!(calls.column_names().contains(&"cell_step".to_string()));
    }

    /// Every table's name, row doc and columns (name, type, doc, order) are pinned:
    /// they are the Parquet schemas of users' stores and the text of SCHEMA.md, so a
    /// change here is a change of the stored format. After an intended change, write
    /// the new text with `OTB_BLESS=1` and review the diff.
    #[test]
    fn row_schemas_are_pinned() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/tables/row_schemas.md");
        let now = every_schema();
        if std::env::var_os("OTB_BLESS").is_some() {
            std::fs::write(path, &now).unwrap();
        }
        let pinned = std::fs::read_to_string(path).unwrap();
        let first = now.lines().zip(pinned.lines()).position(|(a, b)| a != b);
        assert!(
            now == pinned,
            "row schemas differ from {path} (first at line {:?}; OTB_BLESS=1 rewrites it)",
            first.map(|i| i + 1)
        );
    }
}

//! The learned tool list: MCP's `tools/list` result shape (`{"tools": [{"name",
//! "description", "inputSchema"}, ...]}`) with the provenance of the descriptions
//! in a separate top-level key, `_otb`, which MCP clients ignore.

use crate::error::Error;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The largest tool-list file `otb mcp proxy --docs` reads.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// One tool: its name and input schema as the server declares them, and the
/// description to show instead of the server's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDoc {
    /// The tool's name on the server.
    pub name: String,
    /// The (learned) description.
    #[serde(default)]
    pub description: String,
    /// The tool's JSON Schema for its arguments.
    #[serde(default = "empty_schema")]
    pub input_schema: Value,
}

fn empty_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// A tool list file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolList {
    /// The tools, in the order they are listed.
    pub tools: Vec<ToolDoc>,
    /// Where the descriptions come from (experiment, cell, round, scores); not read
    /// by the proxy.
    #[serde(rename = "_otb", default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Value>,
}

impl ToolList {
    /// Read and check a tool-list file: a regular file of at most
    /// [`MAX_FILE_BYTES`], MCP's shape, every tool named once. Any fault is one
    /// [`Error::Input`] line naming the file.
    pub fn read(path: &Path) -> Result<ToolList, Error> {
        let bad = |why: String| Error::Input(format!("--docs {}: {why}", path.display()));
        let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
        if !meta.is_file() {
            return Err(bad("is not a file".into()));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(bad(format!(
                "is {} bytes (the limit is {MAX_FILE_BYTES})",
                meta.len()
            )));
        }
        let text = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        let list: ToolList = serde_json::from_slice(&text).map_err(|e| {
            bad(format!(
                "is not a tool list ({{\"tools\": [{{\"name\", \"description\", \"inputSchema\"}}]}}): {e}"
            ))
        })?;
        list.check().map_err(bad)?;
        Ok(list)
    }

    /// Every tool has a name, and no name is given twice.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = HashSet::new();
        for t in &self.tools {
            if t.name.is_empty() {
                return Err("a tool has an empty name".into());
            }
            if !seen.insert(t.name.as_str()) {
                return Err(format!("tool `{}` is listed twice", t.name));
            }
        }
        Ok(())
    }

    /// Each tool's description by name.
    pub fn descriptions(&self) -> HashMap<String, String> {
        self.tools
            .iter()
            .map(|t| (t.name.clone(), t.description.clone()))
            .collect()
    }

    /// The file's text: pretty JSON with a final newline.
    pub fn to_text(&self) -> Result<String, serde_json::Error> {
        Ok(serde_json::to_string_pretty(self)? + "\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mcp_shape_and_refuses_duplicates_and_garbage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("tools.json");
        std::fs::write(
            &p,
            r#"{"tools":[{"name":"a","description":"A.","inputSchema":{"type":"object"}}],"_otb":{"x":1}}"#,
        )
        .expect("write");
        let l = ToolList::read(&p).expect("read");
        assert_eq!(l.descriptions()["a"], "A.");
        assert_eq!(l.provenance, Some(serde_json::json!({"x": 1})));
        // Written and read back unchanged.
        std::fs::write(&p, l.to_text().expect("text")).expect("write");
        assert_eq!(ToolList::read(&p).expect("read"), l);

        std::fs::write(&p, r#"{"tools":[{"name":"a"},{"name":"a"}]}"#).expect("write");
        let e = ToolList::read(&p).expect_err("duplicate").to_string();
        assert!(
            e.contains("listed twice") && e.contains("tools.json"),
            "{e}"
        );
        std::fs::write(&p, "not json").expect("write");
        assert!(ToolList::read(&p).is_err());
        assert!(ToolList::read(dir.path()).is_err());
    }
}

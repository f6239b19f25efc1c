//! A server's tools as the agent sees them in each documentation setting, and the
//! way back from a name the agent called to the server's tool.
//!
//! | setting | name | description | parameters |
//! |---|---|---|---|
//! | `as-is` | the server's | the server's | the server's input schema |
//! | `names` | `tool_k` | empty | the parameters' names only (each `{}`) |
//! | `names+desc` | `tool_k` | the server's | removed (an empty object schema) |
//! | `names+params` | `tool_k` | empty | names, types, `required`, `items`, defaults; every description `""` |
//!
//! `names+desc` and `names+params` mean what they mean in BFCL-Opaque
//! (`bfcl-opaque.md`: real description without parameters; parameter names and types
//! with every text blanked). `names` keeps the parameters' names (an MCP tool's
//! arguments cannot be guessed from errors as BFCL's Python calls can), and nothing
//! else. The opaque names `tool_1..n` are given in a seeded order (the server's order
//! is not the agent's), and the docs list the tools in the order of their opaque
//! names. Learned documentation keeps the opaque names, as in search.

use serde_json::{json, Map, Value};

/// A documentation setting of an `[mcp]` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DocSetting {
    /// The server's own names, descriptions and schemas (the real-world case).
    AsIs,
    /// Opaque names, no descriptions, the parameters' names only.
    Names,
    /// Opaque names, the server's descriptions, no parameters.
    NamesDesc,
    /// Opaque names, no descriptions, the parameters' schemas without their texts.
    NamesParams,
}

impl DocSetting {
    /// Every setting, in table order.
    pub const ALL: [DocSetting; 4] = [
        DocSetting::AsIs,
        DocSetting::Names,
        DocSetting::NamesDesc,
        DocSetting::NamesParams,
    ];

    /// The setting as experiment files write it.
    pub fn as_str(self) -> &'static str {
        match self {
            DocSetting::AsIs => "as-is",
            DocSetting::Names => "names",
            DocSetting::NamesDesc => "names+desc",
            DocSetting::NamesParams => "names+params",
        }
    }

    /// The setting written `s`, if it is one.
    pub fn parse(s: &str) -> Option<DocSetting> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// Every setting's name.
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|d| d.as_str()).collect()
    }
}

/// One tool as its server lists it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerTool {
    /// The tool's name on the server.
    pub name: String,
    /// The server's description.
    #[serde(default)]
    pub description: String,
    /// The tool's JSON Schema for its arguments.
    #[serde(default, rename = "inputSchema")]
    pub input_schema: Value,
}

impl From<::mcp::tools::ToolDoc> for ServerTool {
    fn from(t: ::mcp::tools::ToolDoc) -> Self {
        ServerTool {
            name: t.name,
            description: t.description,
            input_schema: t.input_schema,
        }
    }
}

/// Mixed into the seed of the opaque names' order.
const NAMES_SALT: u64 = 0x6d63_705f_6e61_6d65;

/// A 64-bit FNV-1a hash of `s` (a stable label for a seeded stream).
fn label(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The tools of one server, as listed (the order of `tools/list`).
#[derive(Clone, Debug, PartialEq)]
pub struct ServerTools {
    /// The server's name in the experiment.
    pub server: String,
    /// Its tools.
    pub tools: Vec<ServerTool>,
}

impl ServerTools {
    /// `(opaque name, server's name)` of every tool, in the order of the opaque names
    /// (`tool_1`, `tool_2`, ...): the server's tools in an order seeded by `seed` and
    /// the server's name.
    pub fn opaque_names(&self, seed: u64) -> Vec<(String, String)> {
        let mut order: Vec<usize> = (0..self.tools.len()).collect();
        datasets::rng::SplitMix64::derived(seed ^ NAMES_SALT, label(&self.server))
            .shuffle(&mut order);
        order
            .into_iter()
            .enumerate()
            .map(|(k, i)| (format!("tool_{}", k + 1), self.tools[i].name.clone()))
            .collect()
    }

    /// The tools as the docs store them (`{name, description, parameters}`) in
    /// `setting`.
    pub fn docs(&self, setting: DocSetting, seed: u64) -> Vec<Value> {
        if setting == DocSetting::AsIs {
            return self
                .tools
                .iter()
                .map(|t| doc(&t.name, &t.description, schema(&t.input_schema)))
                .collect();
        }
        self.opaque_names(seed)
            .into_iter()
            .filter_map(|(shown, real)| {
                let t = self.tools.iter().find(|t| t.name == real)?;
                let (desc, params) = match setting {
                    DocSetting::Names => ("", names_only(&t.input_schema)),
                    DocSetting::NamesDesc => (t.description.as_str(), empty_schema()),
                    DocSetting::NamesParams | DocSetting::AsIs => {
                        ("", blank_texts(&schema(&t.input_schema)))
                    }
                };
                Some(doc(&shown, desc, params))
            })
            .collect()
    }

    /// The server's tool the agent means by `shown`: with docs that name the server's
    /// tools (`gold_names`) the name itself, else the opaque name's tool.
    pub fn real_name(&self, shown: &str, gold_names: bool, seed: u64) -> Option<String> {
        if gold_names {
            return self
                .tools
                .iter()
                .any(|t| t.name == shown)
                .then(|| shown.to_string());
        }
        self.opaque_names(seed)
            .into_iter()
            .find(|(s, _)| s == shown)
            .map(|(_, r)| r)
    }

    /// Whether `docs` (what an episode plays) name the server's own tools, as the
    /// `as-is` docs do (learned docs keep the names they started from).
    pub fn names_gold(&self, docs: &[Value]) -> bool {
        let mut names: Vec<&str> = docs
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
            .collect();
        let mut gold: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        gold.sort_unstable();
        !names.is_empty() && names == gold
    }
}

fn doc(name: &str, description: &str, parameters: Value) -> Value {
    json!({"name": name, "description": description, "parameters": parameters})
}

fn empty_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

/// A server's input schema, or an empty object schema when it sent none.
fn schema(s: &Value) -> Value {
    if s.is_object() {
        s.clone()
    } else {
        empty_schema()
    }
}

/// The schema's parameter names, each with an empty schema.
fn names_only(s: &Value) -> Value {
    let props: Map<String, Value> = s
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(|k| (k.clone(), json!({}))).collect())
        .unwrap_or_default();
    json!({"type": "object", "properties": props})
}

/// `s` with every text that explains (`description`, `title`, `examples`) removed
/// or blanked, at every depth: names, types, `required`, `items`, defaults stay.
fn blank_texts(s: &Value) -> Value {
    match s {
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, v) in o {
                match k.as_str() {
                    "description" => {
                        out.insert(k.clone(), Value::String(String::new()));
                    }
                    "title" | "examples" | "$comment" => {}
                    // A property named like a keyword is a name, not a text.
                    "properties" => {
                        let props = v
                            .as_object()
                            .map(|p| {
                                p.iter()
                                    .map(|(n, ps)| (n.clone(), blank_texts(ps)))
                                    .collect::<Map<_, _>>()
                            })
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    _ => {
                        out.insert(k.clone(), blank_texts(v));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(blank_texts).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git() -> ServerTools {
        let t = |name: &str, desc: &str| ServerTool {
            name: name.into(),
            description: desc.into(),
            input_schema: json!({
                "type": "object",
                "title": "Args",
                "properties": {"repo_path": {"type": "string", "title": "Repo Path", "description": "where"},
                               "description": {"type": "string", "description": "a parameter named description"}},
                "required": ["repo_path"]
            }),
        };
        ServerTools {
            server: "git".into(),
            tools: vec![
                t("git_status", "Shows the working tree status"),
                t("git_log", "Shows the commit logs"),
                t("git_show", "Shows the contents of a commit"),
            ],
        }
    }

    #[test]
    fn each_setting_shows_what_it_says_and_names_map_back() {
        let g = git();
        let as_is = g.docs(DocSetting::AsIs, 0);
        assert_eq!(as_is[1]["name"], "git_log");
        assert_eq!(as_is[1]["description"], "Shows the commit logs");
        assert!(g.names_gold(&as_is));
        let names = g.docs(DocSetting::Names, 0);
        assert!(!g.names_gold(&names));
        for (k, d) in names.iter().enumerate() {
            assert_eq!(d["name"], format!("tool_{}", k + 1));
            assert_eq!(d["description"], "");
            assert_eq!(
                d["parameters"],
                json!({"type": "object", "properties": {"repo_path": {}, "description": {}}})
            );
        }
        let nd = g.docs(DocSetting::NamesDesc, 0);
        assert_eq!(
            nd[0]["parameters"],
            json!({"type": "object", "properties": {}})
        );
        assert_ne!(nd[0]["description"], "");
        let np = g.docs(DocSetting::NamesParams, 0);
        let p = &np[0]["parameters"];
        assert_eq!(p["required"], json!(["repo_path"]));
        assert_eq!(
            p["properties"]["repo_path"],
            json!({"type": "string", "description": ""})
        );
        assert_eq!(
            p["properties"]["description"],
            json!({"type": "string", "description": ""})
        );
        assert!(p.get("title").is_none());
        // Every opaque name maps back to the tool it shows, whose description it
        // would have in names+desc.
        for d in &nd {
            let real = g.real_name(d["name"].as_str().unwrap(), false, 0).unwrap();
            let t = g.tools.iter().find(|t| t.name == real).unwrap();
            assert_eq!(d["description"], t.description.as_str());
        }
        assert_eq!(g.real_name("git_log", true, 0).as_deref(), Some("git_log"));
        assert_eq!(g.real_name("git_log", false, 0), None);
        assert_eq!(g.real_name("tool_9", false, 0), None);
        // The order is seeded: the same seed, the same names; some seed reorders.
        assert_eq!(g.opaque_names(0), g.opaque_names(0));
        let server_order: Vec<String> = g.tools.iter().map(|t| t.name.clone()).collect();
        assert!((0..20).any(|s| {
            g.opaque_names(s)
                .into_iter()
                .map(|(_, r)| r)
                .collect::<Vec<_>>()
                != server_order
        }));
    }
}

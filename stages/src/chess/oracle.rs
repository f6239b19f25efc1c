//! The scripted chess agent (`scripted:chess-oracle`).

use crate::models::{AgentJob, MultiTurn};
use datasets::chess::tools::{ToolFamily, ToolSet};
use serde_json::{json, Value};

/// `scripted:chess-oracle`: always the optimal tool for the position (the specialist
/// of its phase, or the strongest engine); tells the tool set by its size (4 tools:
/// phase specialists, 3: strength gradient). For tests and as the ceiling.
pub struct Oracle;

impl crate::models::Agent for Oracle {
    fn act(&self, job: &AgentJob<'_>) -> crate::models::AgentTurn {
        let family = if job.tools.len() == 4 {
            ToolFamily::PhaseSpecialists
        } else {
            ToolFamily::StrengthGradient
        };
        let fen = job
            .question
            .lines()
            .find_map(|l| l.split_once("(FEN): ").map(|(_, f)| f.trim()))
            .unwrap_or("");
        let Ok(pos) = datasets::chess::rules::parse_fen(fen) else {
            return crate::models::AgentTurn::default();
        };
        let i = ToolSet::new(family).optimal_tool(&pos);
        let name = job
            .tools
            .get(i)
            .and_then(|t| t.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        crate::models::AgentTurn {
            calls: vec![crate::rows::CallRecord {
                function: name.to_string(),
                args: json!({}),
                raw: None,
            }],
            ..Default::default()
        }
    }
}

impl MultiTurn for Oracle {}

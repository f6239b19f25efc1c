//! An MCP tool set behind the environment seam: `Mcp` as an [`OfflineEnv`]
//! (exploration, the judge on training episodes with rubrics, the editor's view,
//! evaluation) and the baselines' tool play, each
//! call on a fresh episode of the server.

use super::rows::EpisodeRow;
use super::tools::DocSetting;
use super::{config, Mcp, EXPLORE_STAGE};
use crate::env::{Cx, DriveError, OfflineEnv, Play, ToolOutput, ToolRunner};
use pipeline::{Handle, StageError};
use serde_json::{json, Value};

impl OfflineEnv for Mcp<'_> {
    fn explore<'p>(&'p self, cx: &mut Cx<'p, '_>, play: &Play<'_>) -> Result<Handle, DriveError> {
        self.explore_node(cx, play)
    }

    fn serialize(&self, trajectories: &Handle) -> Result<Vec<String>, DriveError> {
        let eps: Vec<EpisodeRow> = trajectories.read()?;
        Ok(eps.into_iter().map(|e| e.editor_text).collect())
    }

    fn editor_notes(&self) -> &str {
        config::EDITOR_NOTES
    }

    fn agent_system(&self) -> &str {
        &self.system
    }

    fn tool_runner(&self) -> Result<Box<dyn ToolRunner + '_>, StageError> {
        // The server is started by the first call, not here: a baseline that plays
        // no tool starts none.
        Ok(Box::new(McpRunner { env: self }))
    }

    fn runner_key(&self) -> (Value, Vec<(&'static str, Handle)>) {
        (
            json!({
                "mcp": self.identity,
                "tool_set": self.set,
                "seed": self.m.seed,
            }),
            vec![("server", self.server_out.clone())],
        )
    }

    fn evaluate<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        play: &Play<'_>,
        trajectories: &Handle,
    ) -> Result<Handle, DriveError> {
        self.evaluate_node(cx, play, trajectories)
    }

    /// Where training tasks carry rubrics, the editor is told the judge's verdicts:
    /// the training episodes are judged in a node of their own (`mcp-judge[... train
    /// r<k>]`), whose rows carry each episode as the editor reads it.
    fn grade<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        play: &Play<'_>,
        trajectories: &Handle,
    ) -> Result<Option<Handle>, DriveError> {
        self.grade_train(cx, play.at, trajectories)
    }

    fn serialize_graded(&self, graded: &Handle) -> Result<Vec<String>, DriveError> {
        super::judge::serialize_judged(graded)
    }
}

/// Tool play for the baselines: each call a real call to the server, on a fresh
/// episode (a fresh process and working copy with `fresh = "episode"`).
struct McpRunner<'a> {
    env: &'a Mcp<'a>,
}

impl ToolRunner for McpRunner<'_> {
    fn run(&self, real: &str, shown: &str, args: &serde_json::Map<String, Value>) -> ToolOutput {
        let env = self.env;
        let gold = env.setting == DocSetting::AsIs;
        let Some(tool) = env
            .tools
            .real_name(shown, gold, env.m.seed)
            .or_else(|| env.tools.real_name(real, gold, env.m.seed))
        else {
            return ToolOutput {
                ok: false,
                text: format!(
                    "Error: there is no tool `{}`",
                    super::explore::clip(shown, 100)
                ),
            };
        };
        let called = env
            .server
            .host(EXPLORE_STAGE)
            .map_err(|e| e.to_string())
            .and_then(|h| h.episode(EXPLORE_STAGE).map_err(|e| e.to_string()))
            .and_then(|ep| ep.call(&tool, &Value::Object(args.clone())));
        match called {
            Ok(c) => ToolOutput {
                ok: !c.is_error,
                text: datasets::bfcl::executor::bounded_output(&c.text),
            },
            Err(e) => ToolOutput {
                ok: false,
                text: format!("Error: {}", super::explore::clip(&e, 500)),
            },
        }
    }
}

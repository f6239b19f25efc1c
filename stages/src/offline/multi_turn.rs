//! The explore stage of an offline environment whose agent plays multi-turn
//! episodes with shared tools (search, MCP): its key names the docs' text, so it is
//! computed once the docs are ([`Cx::stage_later`]); the environment says what the
//! key's params are, what the agent is shown and how an episode is played.

use crate::env::{At, Cx, DriveError, Play};
use crate::models::{ModelSpec, MultiTurn, TurnSampling};
use crate::rows::DocRow;
use pipeline::{Handle, StageCtx, StageError};
use serde_json::Value;

/// What an environment's multi-turn explore stage needs of it.
pub trait MultiTurnExplore: Sync {
    /// The stage's params (its key), which may borrow the environment.
    type Params<'a>: serde::Serialize
    where
        Self: 'a;

    /// The params of the play step `at` with `docs`, the tools shown and the system
    /// prompt.
    fn params(
        &self,
        at: &At,
        sampling: &TurnSampling,
        docs: &[DocRow],
    ) -> Result<(Self::Params<'_>, Vec<Value>, String), StageError>;

    /// The agent the params name, and how it samples.
    fn agent<'a>(p: &'a Self::Params<'_>) -> (&'a ModelSpec, &'a TurnSampling);

    /// Play the episodes and write the stage's rows.
    fn play(
        &self,
        ctx: &mut StageCtx<'_>,
        agent: &dyn MultiTurn,
        p: &Self::Params<'_>,
        shown: (&str, &[Value]),
    ) -> Result<(), StageError>;
}

/// The explore node of `play` (stage `stage` at `version`, reading `inputs`, one of
/// them `docs`).
pub fn explore_node<'p, E: MultiTurnExplore>(
    env: &'p E,
    cx: &mut Cx<'p, '_>,
    play: &Play<'_>,
    (stage, version): (&'static str, u32),
    inputs: &[pipeline::Input<'_>],
) -> Result<Handle, DriveError> {
    let Play { at, sampling, docs } = *play;
    // A play step on no split is a bug: said now, not when the key is computed.
    at.split_for(stage)?;
    let models = cx.models;
    let key = {
        let (at, sampling, docs) = (at.clone(), sampling.clone(), docs.clone());
        move || -> Result<Value, StageError> {
            let rows: Vec<DocRow> = docs.read()?;
            let (params, ..) = env.params(&at, &sampling, &rows)?;
            serde_json::to_value(&params).map_err(|e| StageError::bug(stage, e))
        }
    };
    let (play_at, play_sampling) = (at.clone(), sampling.clone());
    cx.stage_later(at, stage, version, key, inputs, move |ctx| {
        let rows: Vec<DocRow> = ctx.read("docs")?;
        let (p, tools, system) = env.params(&play_at, &play_sampling, &rows)?;
        let (spec, sampling) = E::agent(&p);
        let agent = models.agent_sampled(spec, sampling)?;
        env.play(ctx, agent.as_ref(), &p, (&system, &tools))
    })
}

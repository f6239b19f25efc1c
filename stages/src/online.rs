//! ToolObserver, online mode (`toolobserver.md`): per instance, the editor rewrites
//! that instance's docs from its one observed example, round after round, until
//! every instance is frozen or K rounds are done. Written once against
//! [`OnlineEnv`]; BFCL-Opaque is one implementation, the tests' toy environment
//! another.

use crate::batch_reflect;
use crate::env::{Chain, Cx, DriveError, Label, OnlineEnv};
use crate::models::ModelSpec;
use crate::rows::DocRow;
use pipeline::Entry;

/// One ToolObserver curve: which editor, prompt and budget, and how nodes are named.
pub struct Curve<'a> {
    /// The setting (node names and labels).
    pub setting: &'a str,
    pub method: &'a str,
    pub editor: &'a ModelSpec,
    /// The editor prompt template (`{{tools}}`, `{{example}}`).
    pub template: &'a str,
    /// At most this many reflection rounds (K).
    pub rounds: u32,
    /// The success guard: examples the grader judged correct are not sent.
    pub guard: bool,
    /// Node-name suffix after the chain's (` e=<editor>`, ` guard`).
    pub etag: &'a str,
}

/// Rounds 1..K after round 0 (`r0` = the Base chain's trajectories and scores on
/// `docs0`). Stops when every instance is frozen, when K is reached, or when a node
/// is blocked (status mode).
pub fn toolobserver(
    env: &dyn OnlineEnv,
    cx: &mut Cx<'_, '_>,
    chain: &Chain,
    curve: &Curve<'_>,
    docs0: &Entry,
    r0: (Entry, Entry),
) -> Result<(), DriveError> {
    let Curve {
        setting,
        method,
        editor,
        template,
        rounds,
        guard,
        etag,
    } = *curve;
    let label = |round: i64| Label {
        setting: setting.to_string(),
        method: method.into(),
        agent: chain.agent.to_string(),
        editor: editor.to_string(),
        round,
    };
    let (mut traj, mut scores) = r0;
    env.curve_start(
        cx.out,
        &format!("{setting} r0{}{etag}/{method}", chain.sfx),
        &label(0),
        &scores,
    );
    let mut docs = docs0.clone();
    let mut round = 0i64;
    while round < rounds as i64 {
        round += 1;
        let docs_rows: Vec<DocRow> = docs.read()?;
        let examples = env.examples(&docs_rows, &traj, &scores, guard)?;
        let node = format!("batch-reflect[{setting} r{round}{}{etag}]", chain.sfx);
        let params = batch_reflect::ReflectParams {
            editor,
            template,
            round,
            seed: chain.seed,
            skip_success: guard,
            examples: env.example_params(),
        };
        let models = cx.models;
        let reflect = cx.session.stage(
            &node,
            batch_reflect::STAGE,
            batch_reflect::VERSION,
            serde_json::to_value(&params)
                .map_err(|e| pipeline::StageError::bug(batch_reflect::STAGE, e))?,
            &[
                ("docs", Some(&docs)),
                ("trajectories", Some(&traj)),
                ("scores", Some(&scores)),
            ],
            |ctx| {
                let inputs = batch_reflect::RoundInputs {
                    docs: &docs_rows,
                    examples: &examples,
                };
                let ed = models
                    .editor(editor)
                    .map_err(|e| pipeline::StageError::failed(batch_reflect::STAGE, e.0))?;
                batch_reflect::run(ctx, ed.as_ref(), &params, &inputs)
            },
        )?;
        let Some(reflect) = reflect else {
            plan_rounds(env, cx, chain, curve, round);
            break;
        };
        cx.out
            .push(&node, batch_reflect::STAGE, &label(round), &reflect);
        let new_docs: Vec<DocRow> = reflect.read()?;
        if new_docs.iter().all(|d| d.frozen) {
            break; // every instance converged: round k would repeat round k-1
        }
        let tag = format!("{setting} r{round}{}{etag}", chain.sfx);
        let Some((t, sc)) =
            env.explore_eval(cx, chain, &tag, &label(round), &reflect, Some(&traj))?
        else {
            plan_rounds(env, cx, chain, curve, round);
            break;
        };
        docs = reflect;
        traj = t;
        scores = sc;
    }
    Ok(())
}

/// Status mode: list the nodes of rounds `from..=K` of a curve that are not listed
/// (they wait for an earlier round), as planned, so that `otb status` can say what
/// the rest of the curve may take. The curve may end before K (every instance frozen).
pub fn plan_rounds(
    env: &dyn OnlineEnv,
    cx: &mut Cx<'_, '_>,
    chain: &Chain,
    curve: &Curve<'_>,
    from: i64,
) {
    let (setting, etag) = (curve.setting, curve.etag);
    for round in from.max(1)..=i64::from(curve.rounds) {
        let after = format!(
            "round {} (the curve ends early if every instance is frozen)",
            round - 1
        );
        let tag = format!("{setting} r{round}{}{etag}", chain.sfx);
        cx.session.plan(
            &format!("batch-reflect[{tag}]"),
            batch_reflect::STAGE,
            &after,
        );
        for kind in env.round_stages() {
            cx.session.plan(&format!("{kind}[{tag}]"), kind, &after);
        }
    }
}

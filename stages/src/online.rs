//! ToolObserver, online mode (`toolobserver.md`): per instance, the editor rewrites
//! that instance's docs from its one observed example, round after round, until
//! every instance is frozen or K rounds are done. Written once against
//! [`OnlineEnv`]; BFCL-Opaque is one implementation, the tests' toy environment
//! another.

use crate::at::{At, Step};
use crate::batch_reflect;
use crate::env::{Cx, DriveError, OnlineEnv};
use crate::rows::DocRow;
use pipeline::Handle;

/// One ToolObserver curve's protocol (its cell -- setting, method, agent, editor --
/// is an [`At`]).
#[derive(Clone, Copy)]
pub struct Curve<'a> {
    /// The editor prompt template (`{{tools}}`, `{{example}}`).
    pub template: &'a str,
    /// At most this many reflection rounds (K).
    pub rounds: u32,
    /// The success guard: examples the grader judged correct are not sent.
    pub guard: bool,
}

/// Rounds 1..K of the curve at `at` (its method and editor set) after round 0 (`r0` =
/// the Base chain's trajectories and scores on `docs0`). Stops when every instance
/// is frozen or when K is reached: each round after the first is issued by a
/// continuation of the round before, once its docs are computed. In status mode a
/// round whose docs are not computed yet cannot say whether the curve goes on: the
/// rounds after it are listed as planned (they run only if some instance is not
/// frozen by then).
pub fn toolobserver<'p>(
    env: &'p dyn OnlineEnv,
    cx: &mut Cx<'p, '_>,
    at: &At,
    curve: Curve<'p>,
    docs0: &Handle,
    r0: (Handle, Handle),
) -> Result<(), DriveError> {
    at.editor_for(batch_reflect::STAGE)?;
    env.curve_start(cx, &at.play(None, 0), &r0.1);
    let (traj, scores) = r0;
    round(
        env,
        cx,
        Round {
            at: at.clone(),
            curve,
            round: 1,
            docs: docs0.clone(),
            traj,
            scores,
        },
    )
}

/// Where a curve stands before round `round`: the docs, trajectories and scores of
/// the round before.
struct Round<'p> {
    at: At,
    curve: Curve<'p>,
    round: i64,
    docs: Handle,
    traj: Handle,
    scores: Handle,
}

/// Round `r.round` of a curve, and (by a continuation, once its docs are computed)
/// the rounds after it.
fn round<'p>(env: &'p dyn OnlineEnv, cx: &mut Cx<'p, '_>, r: Round<'p>) -> Result<(), DriveError> {
    let Round {
        at,
        curve,
        round,
        docs,
        traj,
        scores,
    } = r;
    if round > i64::from(curve.rounds) {
        return Ok(());
    }
    let editor = at.editor_for(batch_reflect::STAGE)?.clone();
    let edit = at.at(Step::Edit, round);
    let params = batch_reflect::ReflectParams {
        editor,
        template: curve.template,
        round,
        seed: at.seed,
        skip_success: curve.guard,
        examples: env.example_params(),
    };
    let models = cx.models;
    let guard = curve.guard;
    let reflect = cx.stage(
        &edit,
        batch_reflect::STAGE,
        batch_reflect::VERSION,
        params,
        &[
            ("docs", &docs),
            ("trajectories", &traj),
            ("scores", &scores),
        ],
        move |ctx, params| {
            // Read only when the round must be computed.
            let docs_rows: Vec<DocRow> = ctx.read("docs")?;
            let examples = env.examples(
                &docs_rows,
                ctx.input("trajectories")?,
                ctx.input("scores")?,
                guard,
            )?;
            let inputs = batch_reflect::RoundInputs {
                docs: &docs_rows,
                examples: &examples,
            };
            let ed = models.editor(&params.editor)?;
            batch_reflect::run(ctx, ed.as_ref(), params, &inputs)
        },
    )?;
    let next = reflect.clone();
    cx.then(&[&reflect], move |cx| {
        match next.entry() {
            Some(e) => {
                let new_docs: Vec<DocRow> = e.read()?;
                if new_docs.iter().all(|d| d.frozen) {
                    return Ok(()); // every instance converged: round k would repeat round k-1
                }
            }
            // Status mode (a run computes every node): whether round k runs is
            // decided by round k's docs. This continuation's nodes, and those of
            // the rounds it issues, are planned after the first such round.
            None if !cx.planned() => {
                cx.planned_after(format!(
                    "round {} (the curve ends early if every instance is frozen)",
                    round - 1
                ));
            }
            None => {}
        }
        let (t, sc) = env.explore_eval(cx, &at.play(None, round), &next, Some(&traj))?;
        self::round(
            env,
            cx,
            Round {
                at,
                curve,
                round: round + 1,
                docs: next,
                traj: t,
                scores: sc,
            },
        )
    })
}

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
/// is frozen or when K is reached. In status mode a round whose docs are not
/// computed yet cannot say whether the curve goes on: the rounds after it are listed
/// as planned (they run only if some instance is not frozen by then).
pub fn toolobserver(
    env: &dyn OnlineEnv,
    cx: &mut Cx<'_, '_>,
    at: &At,
    curve: &Curve<'_>,
    docs0: &Handle,
    r0: (Handle, Handle),
) -> Result<(), DriveError> {
    let Curve {
        template,
        rounds,
        guard,
    } = *curve;
    let editor = at.editor_for(batch_reflect::STAGE)?;
    let (mut traj, mut scores) = r0;
    env.curve_start(cx.out, &at.play(None, 0), &scores);
    let mut docs = docs0.clone();
    let mut round = 0i64;
    let mut planned = false;
    while round < rounds as i64 {
        round += 1;
        let edit = at.at(Step::Edit, round);
        let params = batch_reflect::ReflectParams {
            editor,
            template,
            round,
            seed: at.seed,
            skip_success: guard,
            examples: env.example_params(),
        };
        let models = cx.models;
        let reflect = cx.stage(
            &edit,
            batch_reflect::STAGE,
            batch_reflect::VERSION,
            &params,
            &[
                ("docs", &docs),
                ("trajectories", &traj),
                ("scores", &scores),
            ],
            |ctx| {
                // Read only when the round must be computed.
                let docs_rows: Vec<DocRow> = docs.read()?;
                let examples = env.examples(&docs_rows, &traj, &scores, guard)?;
                let inputs = batch_reflect::RoundInputs {
                    docs: &docs_rows,
                    examples: &examples,
                };
                let ed = models.editor(editor)?;
                batch_reflect::run(ctx, ed.as_ref(), &params, &inputs)
            },
        )?;
        match reflect.entry() {
            Some(e) => {
                let new_docs: Vec<DocRow> = e.read()?;
                if new_docs.iter().all(|d| d.frozen) {
                    break; // every instance converged: round k would repeat round k-1
                }
            }
            // Status mode (a run computes every node): whether round k runs is
            // decided by round k's docs.
            None if !planned => {
                planned = true;
                cx.session.set_after(Some(format!(
                    "round {} (the curve ends early if every instance is frozen)",
                    round - 1
                )));
            }
            None => {}
        }
        let (t, sc) = env.explore_eval(cx, &at.play(None, round), &reflect, Some(&traj))?;
        docs = reflect;
        traj = t;
        scores = sc;
    }
    if planned {
        cx.session.set_after(None);
    }
    Ok(())
}

//! The executor of a run: a [`Schedule`] holds the nodes a drive issued, each with the
//! handles it waits for, and runs every node as soon as its inputs are computed, on a
//! thread of its own, so independent nodes (the settings of a grid, Gold beside Base,
//! the rounds of one curve beside another's) run at the same time and their model
//! calls meet in the backend's batch.
//!
//! At most [`Schedule::threads`] tasks run at once (default [`DEFAULT_THREADS`], or
//! `OTB_NODE_THREADS`): a grid of thousands of ready nodes starts that many threads,
//! and the rest start, in the drive's order, as those finish.
//!
//! A drive issues nodes without waiting for them ([`Schedule::node`]): it gets a promise
//! [`Handle`] back at once and passes it on as an input. What a drive can only decide
//! from a computed output (whether an online ToolObserver curve goes on, a key that
//! needs an input's content) is a continuation ([`Schedule::push`]) that runs once the
//! handles it waits for are settled, and may issue more nodes. [`Schedule::run`] returns
//! when nothing is left to run.
//!
//! What the order of completion must not change, it does not: every node and
//! continuation has a [`Seq`] (its place in the drive's order), and reports, records
//! and the error returned are ordered by it. A node that fails settles its handle as
//! failed; the nodes waiting for it are skipped (they are not computed and not
//! reported), every other node runs to its end, and the errors come back in the
//! nodes' order.

use crate::engine::{Call, Handle, Seq, Session};
use crate::error::StageError;
use crate::StageCtx;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex};

/// A node's params: known when it is issued, or computed from its inputs' content
/// just before its key is (e.g. a key that names the documentation text).
pub enum Params<'p> {
    /// Known now.
    Known(serde_json::Value),
    /// Computed when every input is: called once, on the node's thread.
    Later(Box<dyn FnOnce() -> Result<serde_json::Value, StageError> + Send + 'p>),
}

/// A node as [`Schedule::node`] issues it.
pub struct Node<'p> {
    /// Its place in the drive's order.
    pub seq: Seq,
    /// The experiment node's name.
    pub node: String,
    /// The stage it runs.
    pub stage: &'static str,
    /// The stage's code version.
    pub code_version: u32,
    /// Its params.
    pub params: Params<'p>,
    /// Its inputs: the name each is known by, and the upstream handle.
    pub inputs: Vec<(String, Handle)>,
    /// What decides whether it runs at all, when that is not known yet ([`Call::after`]).
    pub after: Option<String>,
}

/// What a task runs once the handles it waits for are settled.
type Job<'p, E> = Box<dyn FnOnce() -> Result<(), E> + Send + 'p>;

struct Task<'p, E> {
    seq: Seq,
    waits: Vec<Handle>,
    /// Settled as failed if the task fails or is skipped (a node's own handle).
    out: Option<Handle>,
    job: Job<'p, E>,
}

struct State<'p, E> {
    queue: Vec<Task<'p, E>>,
    running: usize,
    errors: Vec<(Seq, E)>,
}

/// The nodes and continuations of a run, executed by [`Schedule::run`]. `'p`: what the
/// tasks borrow (the drive's environment, models, session) outlives the schedule.
pub struct Schedule<'p, E> {
    state: Mutex<State<'p, E>>,
    changed: Condvar,
    threads: usize,
}

/// Most tasks running at once by default: far more than the model backends serve at
/// once (their own limits decide what is computed together), few enough that a grid
/// of thousands of ready nodes does not start thousands of threads.
pub const DEFAULT_THREADS: usize = 64;

/// `OTB_NODE_THREADS` when it is a whole number from 1, else [`DEFAULT_THREADS`].
fn threads_from_env() -> usize {
    std::env::var("OTB_NODE_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(DEFAULT_THREADS)
}

impl<'p, E> Default for Schedule<'p, E> {
    fn default() -> Self {
        Schedule::with_threads(threads_from_env())
    }
}

impl<'p, E> Schedule<'p, E> {
    /// A schedule that runs at most `threads` tasks at once (at least 1).
    pub fn with_threads(threads: usize) -> Self {
        Schedule {
            state: Mutex::new(State {
                queue: Vec::new(),
                running: 0,
                errors: Vec::new(),
            }),
            changed: Condvar::new(),
            threads: threads.max(1),
        }
    }

    /// Most tasks it runs at once.
    pub fn threads(&self) -> usize {
        self.threads
    }
}

impl<'p, E: From<StageError> + Send + 'p> Schedule<'p, E> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State<'p, E>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A continuation at `seq`: `job` runs once every handle of `waits` is settled,
    /// unless one of them failed (then it is skipped).
    pub fn push(
        &self,
        seq: Seq,
        waits: Vec<Handle>,
        job: impl FnOnce() -> Result<(), E> + Send + 'p,
    ) {
        self.enqueue(Task {
            seq,
            waits,
            out: None,
            job: Box::new(job),
        });
    }

    fn enqueue(&self, task: Task<'p, E>) {
        self.lock().queue.push(task);
        self.changed.notify_all();
    }

    /// Issue a node: it is keyed, looked up and (when missing) computed with `run` by
    /// `session` once its inputs are computed. Returns its handle at once.
    pub fn node<'s: 'p, F>(&self, session: &'p Session<'s>, n: Node<'p>, run: F) -> Handle
    where
        F: FnOnce(&mut StageCtx<'_>) -> Result<(), StageError> + Send + 'p,
    {
        let out = Handle::promise(&n.node);
        let settle = out.clone();
        let seq = n.seq.clone();
        let waits = n.inputs.iter().map(|(_, h)| h.clone()).collect();
        let job = move || -> Result<(), E> {
            let params = match n.params {
                Params::Known(v) => v,
                Params::Later(f) => f()?,
            };
            let inputs: Vec<(&str, &Handle)> =
                n.inputs.iter().map(|(k, h)| (k.as_str(), h)).collect();
            let call = Call {
                node: &n.node,
                stage: n.stage,
                code_version: n.code_version,
                params,
                after: n.after.as_deref(),
            };
            let h = session.stage_at(&n.seq, call, &inputs, run)?;
            settle.settle_as(&h);
            Ok(())
        };
        self.enqueue(Task {
            seq,
            waits,
            out: Some(out.clone()),
            job: Box::new(job),
        });
        out
    }

    /// Run every task, each once its handles are settled, until none is left; the
    /// errors, in the tasks' order.
    pub fn run(&self) -> Vec<E> {
        std::thread::scope(|scope| {
            let mut st = self.lock();
            loop {
                let free = self.threads.saturating_sub(st.running);
                if free > 0 {
                    let (mut ready, mut waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut st.queue)
                        .into_iter()
                        .partition(|t| t.waits.iter().all(Handle::is_settled));
                    // The first in the drive's order start; the rest wait for a thread.
                    ready.sort_by(|a, b| a.seq.cmp(&b.seq));
                    if ready.len() > free {
                        waiting.extend(ready.drain(free..));
                    }
                    st.queue = waiting;
                    for task in ready {
                        st.running += 1;
                        scope.spawn(move || self.execute(task));
                    }
                }
                if st.running == 0 {
                    if st.queue.is_empty() {
                        break;
                    }
                    // Nothing runs and nothing can start: these wait for handles no
                    // task settles (a drive's bug). Fail them, so what waits on them
                    // is skipped, rather than wait forever.
                    for t in std::mem::take(&mut st.queue) {
                        if let Some(out) = &t.out {
                            out.fail();
                        }
                        let waits: Vec<&str> = t.waits.iter().map(Handle::node).collect();
                        let e = StageError::bug(
                            "drive",
                            format!("a node waits for outputs nothing computes: {waits:?}"),
                        );
                        st.errors.push((t.seq, e.into()));
                    }
                    continue;
                }
                st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            let mut errors = std::mem::take(&mut st.errors);
            errors.sort_by(|a, b| a.0.cmp(&b.0));
            errors.into_iter().map(|(_, e)| e).collect()
        })
    }

    fn execute(&self, task: Task<'p, E>) {
        let Task {
            seq,
            waits,
            out,
            job,
        } = task;
        let error = if waits.iter().any(Handle::is_failed) {
            None // skipped: the failed input reported its own error
        } else {
            match catch_unwind(AssertUnwindSafe(job)) {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some(E::from(StageError::bug("drive", "a node panicked"))),
            }
        };
        if let Some(out) = &out {
            out.fail(); // ignored when the node settled it
        }
        let mut st = self.lock();
        st.running -= 1;
        if let Some(e) = error {
            st.errors.push((seq, e));
        }
        drop(st);
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::{Mode, Row};
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, Row)]
    #[row(table = "nums", doc = "numbers")]
    struct Num {
        /// A number.
        x: i64,
    }

    fn node<'p>(seq: u32, name: &str, inputs: &[(&str, &Handle)]) -> Node<'p> {
        Node {
            seq: Seq::default().child(seq),
            node: name.into(),
            stage: "num",
            code_version: 1,
            params: Params::Known(serde_json::json!({"name": name})),
            inputs: inputs
                .iter()
                .map(|(n, h)| (n.to_string(), (*h).clone()))
                .collect(),
            after: None,
        }
    }

    #[test]
    fn nodes_run_after_their_inputs_and_report_in_plan_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), crate::Access::ReadWrite).unwrap();
        let session = Session::new(&store, Mode::Run, true);
        let ran = AtomicUsize::new(0);
        let plan: Schedule<'_, StageError> = Schedule::default();
        let write = |x: i64| {
            let ran = &ran;
            move |ctx: &mut StageCtx<'_>| {
                ran.fetch_add(1, Ordering::SeqCst);
                ctx.write(&[Num { x }])?;
                Ok(())
            }
        };
        let a = plan.node(&session, node(0, "a", &[]), write(1));
        let b = plan.node(&session, node(1, "b", &[("a", &a)]), {
            let ran = &ran;
            move |ctx: &mut StageCtx<'_>| {
                ran.fetch_add(1, Ordering::SeqCst);
                let up: Vec<Num> = ctx.read("a")?;
                ctx.write(&[Num { x: up[0].x + 1 }])?;
                Ok(())
            }
        });
        let c = plan.node(&session, node(2, "c", &[]), write(3));
        assert!(a.entry().is_none(), "issued, not run");
        assert!(plan.run().is_empty());
        assert_eq!(ran.load(Ordering::SeqCst), 3);
        assert_eq!(b.read::<Num>().unwrap(), [Num { x: 2 }]);
        assert!(c.entry().is_some());
        let names: Vec<String> = session.reports().into_iter().map(|r| r.node).collect();
        assert_eq!(names, ["a", "b", "c"]);
    }

    /// A grid of many ready nodes runs on at most `threads` threads at once, all of
    /// them to the end, and reports in the drive's order.
    #[test]
    fn many_ready_nodes_run_on_a_bounded_number_of_threads() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), crate::Access::ReadWrite).unwrap();
        let session = Session::new(&store, Mode::Run, true);
        let (now, most, ran) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        let plan: Schedule<'_, StageError> = Schedule::with_threads(4);
        for i in 0..200u32 {
            let (now, most, ran) = (&now, &most, &ran);
            plan.node(
                &session,
                node(i, &format!("n{i}"), &[]),
                move |ctx: &mut StageCtx<'_>| {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    ran.fetch_add(1, Ordering::SeqCst);
                    now.fetch_sub(1, Ordering::SeqCst);
                    ctx.write(&[Num { x: i64::from(i) }])?;
                    Ok(())
                },
            );
        }
        assert!(plan.run().is_empty());
        assert_eq!(ran.load(Ordering::SeqCst), 200);
        let most = most.load(Ordering::SeqCst);
        assert!((1..=4).contains(&most), "{most} at once");
        let names: Vec<String> = session.reports().into_iter().map(|r| r.node).collect();
        let want: Vec<String> = (0..200).map(|i| format!("n{i}")).collect();
        assert_eq!(names, want);
    }

    #[test]
    fn a_failed_node_skips_what_waits_for_it_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), crate::Access::ReadWrite).unwrap();
        let session = Session::new(&store, Mode::Run, true);
        let continued = AtomicUsize::new(0);
        let plan: Schedule<'_, StageError> = Schedule::default();
        let a = plan.node(&session, node(0, "a", &[]), |_ctx: &mut StageCtx<'_>| {
            Err(StageError::user("num", "bad input"))
        });
        let b = plan.node(
            &session,
            node(1, "b", &[("a", &a)]),
            |_ctx: &mut StageCtx<'_>| panic!("never runs"),
        );
        plan.push(Seq::default().child(2), vec![b.clone()], || {
            continued.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        let c = plan.node(&session, node(3, "c", &[]), |ctx: &mut StageCtx<'_>| {
            ctx.write(&[Num { x: 0 }])?;
            Ok(())
        });
        let errors = plan.run();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].to_string().contains("bad input"), "{}", errors[0]);
        assert_eq!(continued.load(Ordering::SeqCst), 0);
        assert!(b.entry().is_none());
        assert!(c.entry().is_some(), "an independent node runs to its end");
        let names: Vec<String> = session.reports().into_iter().map(|r| r.node).collect();
        assert_eq!(names, ["c"]);
    }

    #[test]
    fn a_continuation_issues_nodes_and_a_panic_is_a_bug() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), crate::Access::ReadWrite).unwrap();
        let session = Session::new(&store, Mode::Run, true);
        let later = std::sync::Mutex::new(None);
        let plan: std::sync::Arc<Schedule<'_, StageError>> = Default::default();
        let a = plan.node(&session, node(0, "a", &[]), |ctx: &mut StageCtx<'_>| {
            ctx.write(&[Num { x: 5 }])?;
            Ok(())
        });
        {
            let (plan2, session, a, later) = (plan.clone(), &session, a.clone(), &later);
            plan.push(Seq::default().child(1), vec![a.clone()], move || {
                let x = a.read::<Num>()?[0].x;
                let h = plan2.node(
                    session,
                    node(0, "later", &[("a", &a)]),
                    move |ctx: &mut StageCtx<'_>| {
                        ctx.write(&[Num { x: x * 2 }])?;
                        Ok(())
                    },
                );
                *later.lock().unwrap() = Some(h);
                Ok(())
            });
        }
        plan.node(&session, node(2, "boom", &[]), |_ctx: &mut StageCtx<'_>| {
            panic!("a bug")
        });
        let errors = plan.run();
        assert_eq!(errors.len(), 1);
        assert_eq!(
            crate::Classify::class(&errors[0]),
            crate::ErrorClass::Bug,
            "{}",
            errors[0]
        );
        let h = later.lock().unwrap().clone().expect("issued");
        assert_eq!(h.read::<Num>().unwrap(), [Num { x: 10 }]);
    }
}

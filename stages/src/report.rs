//! Human-readable reports of a session: the `otb status` listing.

use pipeline::{NodeReport, NodeState};

/// One line per node: state, node, and for stale nodes the reasons, indented.
pub fn status_text(reports: &[NodeReport]) -> String {
    let mut out = String::new();
    let (mut fresh, mut would, mut blocked) = (0, 0, 0);
    for r in reports {
        let key = r
            .key
            .as_ref()
            .map(|k| k.short().to_string())
            .unwrap_or_else(|| "-".repeat(12));
        match &r.state {
            NodeState::Fresh | NodeState::Ran => {
                fresh += 1;
                out.push_str(&format!("fresh      {key}  {}\n", r.node));
            }
            NodeState::WouldRun { reasons } => {
                would += 1;
                out.push_str(&format!("would run  {key}  {}\n", r.node));
                for reason in reasons {
                    out.push_str(&format!("             because {reason}\n"));
                }
            }
            NodeState::Blocked { on } => {
                blocked += 1;
                out.push_str(&format!("missing    {key}  {} (waits: {on})\n", r.node));
            }
        }
    }
    out.push_str(&format!(
        "{} stages shown: {fresh} fresh, {would} would run, {blocked} missing behind them (later rounds appear once earlier ones exist)\n",
        reports.len()
    ));
    out
}

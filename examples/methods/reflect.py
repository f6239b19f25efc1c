"""A minimal "reflect on what happened" method, written with otb_method.py.

Each round it observes the tools at work and asks the editor to rewrite their
descriptions from what it saw:

- where otb supports `play` (chess and search: the experiment's agent on training
  positions or questions with the current descriptions), it reflects on those
  trajectories and their outcomes;
- elsewhere (`play` is not in the task's `supports`, or otb answers it with an
  `unsupported` error: BFCL) it plays
  the tools itself: each tool is called once with the arguments its description
  suggests (none at first), and the outputs and error texts are what it reflects
  on.

The editor answers in ToolObserver's online format (`FUNCTION: <name>` then
`DESCRIPTION: <text>` per tool) or with a JSON object {name: description}.

params (all optional): `rounds` (default 1), `play_items` (training items played
per round, default 1), `observe = "calls"` (play the tools with `call_tool` even
where `play` is supported).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from otb_method import (  # noqa: E402
    Unsupported,
    extract_json,
    render_tool,
    run,
    tool_description,
    tool_name,
)

# This method's own request to the editor.
TEMPLATE = """You maintain the documentation of the tools below. Their descriptions may be
missing or wrong. Here is what happened when they were used:

{observed}

Tools:
{tools}

Rewrite the description of every tool whose behaviour the observations reveal:
what it does, and the parameters it takes, by name. For each such tool write

FUNCTION: <tool name>
DESCRIPTION: <the new description, on one line>
"""


def parse_reply(text, names):
    """{name: description} from FUNCTION:/DESCRIPTION: blocks, or a JSON object."""
    out = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("FUNCTION:"):
            current = line[len("FUNCTION:"):].strip()
        elif line.startswith("DESCRIPTION:") and current in names:
            desc = line[len("DESCRIPTION:"):].strip()
            if desc:
                out[current] = desc
            current = None
    if not out:
        obj = extract_json(text) or {}
        out = {k: v.strip() for k, v in obj.items() if k in names and isinstance(v, str) and v.strip()}
    return out


def observe_by_play(m, descs, round_):
    """The agent's trajectories on training items with the current descriptions
    (raises Unsupported): `play_items` of them (default 1) per round, a different
    slice each round."""
    items = m.training_items
    n = max(1, int(m.params.get("play_items", 1)))
    chosen = [items[(round_ * n + i) % len(items)] for i in range(min(n, len(items)))]
    report = m.play(descs, step="play-r%d" % round_, items=chosen)
    lines = []
    for t in report.get("trajectories", []):
        score = t.get("score")
        lines.append(
            "Item %s (%s): %s%s\n%s"
            % (
                t.get("item"),
                t.get("task"),
                t.get("outcome"),
                "" if score is None else "; score %s" % score,
                t.get("trajectory", ""),
            )
        )
    return "\n\n".join(lines)


def observe_by_calls(m, tools, round_):
    """Each tool called once, with no arguments: what it answers."""
    lines = []
    for t in tools:
        name = tool_name(t)
        ok, output = m.call_tool(name, {}, step="probe-r%d" % round_)
        lines.append("%s() -> %s: %s" % (name, "ok" if ok else "error", output))
    return "\n".join(lines)


def reflect(m):
    tools = [dict(t) for t in m.tools]
    names = [tool_name(t) for t in tools if tool_name(t)]
    descs = {tool_name(t): tool_description(t) for t in tools if tool_name(t)}
    can_play = "play" in m.task.get("supports", []) and m.params.get("observe") != "calls"
    for r in range(int(m.params.get("rounds", 1))):
        observed = None
        if can_play:
            try:
                observed = observe_by_play(m, descs, r)
            except Unsupported as e:
                sys.stderr.write("play is not available here (%s): playing the tools\n" % e)
        if observed is None:
            observed = observe_by_calls(m, tools, r)
        prompt = TEMPLATE.format(
            observed=observed,
            tools="\n\n".join(render_tool(t) for t in tools),
        )
        text = m.ask(prompt, step="reflect", phase="editing", attempt=r)
        for name, desc in parse_reply(text or "", names).items():
            descs[name] = desc
            for t in tools:
                if tool_name(t) == name:
                    t["description"] = desc
    return descs


if __name__ == "__main__":
    run(reflect)

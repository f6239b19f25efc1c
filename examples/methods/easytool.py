"""EasyTool (baselines.md) as an external method: the same two editor passes per
item as otb's built-in `easytool`, written with otb_method.py.

1. condense: each tool's documentation into a short statement of purpose;
2. guidelines: per tool a usage scenario and an example parameter payload.

The final description is the condensed text followed by
`Example scenario: <scenario> Call with <json>`. A tool the model's JSON does not
mention keeps its description. It sends exactly the requests the built-in method
sends (same templates, same rendering, same seed), so with the same model its
replies come from otb's call cache and its docs are the built-in's
(tests/methods_e2e.rs checks it).

params (all optional): `prompts` = the folder holding easytool_condense.txt and
easytool_guidelines.txt (default: the repository's prompts/ folder).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from otb_method import (  # noqa: E402
    compact_json,
    extract_json,
    fill,
    render_tool,
    run,
    tool_description,
    tool_name,
)

HERE = os.path.dirname(os.path.abspath(__file__))


def template(m, name):
    folder = m.params.get("prompts") or os.path.join(HERE, "..", "..", "prompts")
    with open(os.path.join(folder, name), encoding="utf-8", newline="") as f:
        return f.read()


def one_pass(m, step, tmpl, tools):
    """One editor pass over the whole tool set: its reply's JSON object, or {}."""
    rendered = "\n\n".join(render_tool(t) for t in tools)
    text = m.ask(fill(tmpl, tools=rendered), step=step, tool="", phase="editing", attempt=0)
    if text is None:
        return {}
    return extract_json(text) or {}


def easytool(m):
    tools = [dict(t) for t in m.tools]
    condensed = one_pass(m, "condense", template(m, "easytool_condense.txt"), tools)
    for t in tools:
        d = condensed.get(tool_name(t))
        if isinstance(d, str) and d.strip():
            t["description"] = d.strip()
    guide = one_pass(m, "guidelines", template(m, "easytool_guidelines.txt"), tools)
    for t in tools:
        g = guide.get(tool_name(t))
        if not isinstance(g, dict):
            continue
        scenario = g.get("Scenario")
        scenario = scenario.strip() if isinstance(scenario, str) else ""
        params = g.get("Parameters")
        params = params if isinstance(params, dict) else {}
        if not scenario:
            continue
        desc = "%s Example scenario: %s Call with %s" % (
            tool_description(t).strip(),
            scenario,
            compact_json(params),
        )
        t["description"] = desc.strip()
    return {tool_name(t): tool_description(t) for t in tools if tool_name(t)}


if __name__ == "__main__":
    run(easytool)

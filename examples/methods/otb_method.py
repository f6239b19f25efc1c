"""The otb method protocol, version 1, for methods written in Python.

A documentation method is a program that otb starts once per item (a BFCL
instance). otb writes a `task` message on the program's stdin; the program answers
with requests on its stdout, one JSON object per line, each answered by one reply
line, and ends with one `docs` message. See docs/methods.md for the protocol and
its JSON Schemas. This file needs nothing beyond Python's standard library: copy
it beside your method.

    from otb_method import Method

    m = Method()                       # reads the task
    for tool in m.tools:
        text = m.ask("Describe: " + render_tool(tool), step="describe")
        ...
    m.finish({"function_1": "Adds two numbers."})

Write logs to stderr (otb keeps them); stdout carries protocol messages only.
"""

import json
import sys

PROTOCOL = 1

# The deepest JSON a model reply may nest (otb's own limit for model output).
MAX_JSON_DEPTH = 64


class ProtocolError(Exception):
    """otb answered something this helper does not understand."""


class Unsupported(Exception):
    """otb cannot do this request here (e.g. `play` in an environment without it)."""


class Method:
    """One item's conversation with otb: read the task, send requests, finish."""

    def __init__(self, stdin=None, stdout=None):
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self._next_id = 0
        self.task = self._read()
        if self.task.get("type") != "task":
            raise ProtocolError("the first message is not a task: %r" % self.task)
        if self.task.get("protocol") != PROTOCOL:
            raise ProtocolError(
                "otb speaks protocol %r; this helper speaks %d"
                % (self.task.get("protocol"), PROTOCOL)
            )

    # What the task says.
    @property
    def tools(self):
        """The item's tools: JSON objects with `name`, `description` (maybe absent)
        and, where the setting shows it, `parameters`."""
        return self.task["tools"]

    @property
    def params(self):
        """The experiment's `[methods.<name>] params`, passed through."""
        return self.task.get("params") or {}

    @property
    def seed(self):
        return self.task.get("seed", 0)

    @property
    def budget(self):
        return self.task.get("budget") or {}

    # Requests.
    def ask(self, prompt, step="", tool="", phase="editing", system=None, attempt=0):
        """A model request in the editor's role (cached, recorded, counted).
        Returns the reply's text, or None when the model call failed."""
        msg = {
            "type": "ask",
            "prompt": prompt,
            "step": step,
            "tool": tool,
            "phase": phase,
            "attempt": attempt,
        }
        if system is not None:
            msg["system"] = system
        reply = self._request(msg)
        if reply["type"] == "error":
            if reply.get("class") == "model":
                return None
            raise Unsupported(reply.get("message", ""))
        return reply["text"]

    def call_tool(self, tool, arguments, step=""):
        """Execute one of the item's tools as the environment does. Returns
        (ok, output text)."""
        reply = self._request(
            {"type": "call_tool", "tool": tool, "arguments": arguments, "step": step}
        )
        if reply["type"] == "error":
            raise Unsupported(reply.get("message", ""))
        return reply["ok"], reply["output"]

    @property
    def training_items(self):
        """The training items' ids `play` may name (empty where otb has no play)."""
        return self.task.get("training_items") or []

    def play(self, tools, step="", items=None, count=None):
        """Let the experiment's agent play training items with these descriptions
        ({name: description}): the ids `items` (from `training_items`), or the first
        `count` (default 1). Returns the result: `items`, `trajectories` (each with
        `item`, `task`, `score`, `outcome`, `trajectory`) and the mean `score`.
        Raises Unsupported where otb cannot play."""
        msg = {"type": "play", "tools": tools, "step": step}
        if items is not None:
            msg["items"] = list(items)
        if count is not None:
            msg["count"] = count
        reply = self._request(msg)
        if reply["type"] == "error":
            raise Unsupported(reply.get("message", ""))
        return reply

    def finish(self, descriptions, demos=None):
        """Send the final documentation: {tool name: description} (tools left out
        keep theirs) and optional demonstrations [{query, function, arguments}]."""
        msg = {"type": "docs", "tools": descriptions}
        if demos is not None:
            msg["demos"] = demos
        self._write(msg)
        done = self._read()
        if done.get("type") != "done":
            raise ProtocolError("expected done, got %r" % done)

    # The wire.
    def _request(self, msg):
        self._next_id += 1
        msg["id"] = self._next_id
        self._write(msg)
        reply = self._read()
        if reply.get("id") != msg["id"]:
            raise ProtocolError("reply to request %d has id %r" % (msg["id"], reply.get("id")))
        return reply

    def _write(self, msg):
        self._out.write(json.dumps(msg) + "\n")
        self._out.flush()

    def _read(self):
        line = self._in.readline()
        if not line:
            raise ProtocolError("otb closed the conversation")
        return json.loads(line)


def run(produce):
    """Read the task, call produce(method) -> {name: description} (or a pair of
    descriptions and demonstrations), send it, exit."""
    m = Method()
    out = produce(m)
    if isinstance(out, tuple):
        m.finish(out[0], out[1])
    else:
        m.finish(out)


# What otb's built-in methods use, written the same way.
def tool_name(tool):
    name = tool.get("name")
    return name if isinstance(name, str) else ""


def tool_description(tool):
    desc = tool.get("description")
    return desc if isinstance(desc, str) else ""


def render_tool(tool):
    """One tool as otb's editors see it (name, description, parameters)."""
    name = tool.get("name")
    if not isinstance(name, str):
        name = "?"
    desc = tool.get("description")
    if not isinstance(desc, str) or not desc.strip():
        desc = "No description provided"
    schema = tool.get("parameters")
    schema = schema if isinstance(schema, dict) else {}
    props = schema.get("properties")
    if isinstance(props, dict) and props:
        required = schema.get("required")
        required = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        lines = []
        for k, v in props.items():
            ty = v.get("type") if isinstance(v, dict) else None
            lines.append(
                "  - %s: %s (%s)"
                % (k, ty if isinstance(ty, str) else "any", "required" if k in required else "optional")
            )
        params = "\n".join(lines)
    else:
        params = "  No parameter information"
    return "Name: %s\nDescription: %s\nParameters:\n%s" % (name, desc, params)


def fill(template, **values):
    """Replace {{name}} placeholders."""
    for k, v in values.items():
        template = template.replace("{{%s}}" % k, v)
    return template


def _depth(v):
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    return 0


def extract_json(text):
    """The first JSON object in a model reply (prose and code fences around it are
    ignored), or None. Never evaluates anything."""
    dec = json.JSONDecoder(parse_constant=_no_constant)
    i = text.find("{")
    while i != -1:
        try:
            v, _ = dec.raw_decode(text, i)
        except Exception:
            v = None
        if isinstance(v, dict):
            return v if _depth(v) <= MAX_JSON_DEPTH else None
        i = text.find("{", i + 1)
    return None


def _no_constant(name):
    # NaN and Infinity are not JSON.
    raise ValueError(name)


def compact_json(value):
    """JSON without spaces, as otb writes a value into a description."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

#!/usr/bin/env python3
"""A minimal MCP client, to look at a server (or `otb mcp proxy`) the way an agent does.

Built on the official MCP Python SDK (PyPI `mcp`; scripts/setup-mcp.sh installs it in
tools/mcp/git, so run this with tools/mcp/git/bin/python). It starts the server given
after `--` on stdio (or connects to a Streamable HTTP URL), lists its tools with their
descriptions, and with `--call TOOL --args JSON` calls one tool and prints its text.

    tools/mcp/git/bin/python scripts/mcp-client.py -- otb mcp proxy --docs tools.json \\
        --upstream mcp-server-git --repository "$PWD/repo"
    tools/mcp/git/bin/python scripts/mcp-client.py --call git_log \\
        --args '{"repo_path": "/abs/repo", "max_count": 1}' -- mcp-server-git --repository /abs/repo
    tools/mcp/git/bin/python scripts/mcp-client.py --url http://127.0.0.1:8765/mcp

Exit status: 0 when the server answered (a tool's own error result included, printed
with `error:`), 1 when it could not be reached, 2 on bad arguments.
"""

import argparse
import asyncio
import json
import sys


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a Streamable HTTP server (instead of a command after --)")
    p.add_argument("--call", metavar="TOOL", help="call this tool after listing")
    p.add_argument("--args", default="{}", help="the call's arguments as a JSON object")
    p.add_argument("--width", type=int, default=100, help="cut descriptions at this many characters (0: whole)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]: a stdio server")
    a = p.parse_args()
    if a.command and a.command[0] == "--":
        a.command = a.command[1:]
    if bool(a.url) == bool(a.command):
        p.error("give either --url URL or -- COMMAND [ARGS...]")
    try:
        a.args = json.loads(a.args)
    except json.JSONDecodeError as e:
        p.error(f"--args is not JSON: {e}")
    if not isinstance(a.args, dict):
        p.error("--args must be a JSON object")
    return a


def cut(text, width):
    text = " ".join((text or "").split())
    return text if width <= 0 or len(text) <= width else text[: width - 3] + "..."


def field(obj, name, old):
    """A field of an SDK object: `mcp` 2.x names it in snake case, 1.x in camel case."""
    return getattr(obj, name) if hasattr(obj, name) else getattr(obj, old)


async def session(s, a):
    init = await s.initialize()
    info = field(init, "server_info", "serverInfo")
    print(f"server: {info.name} {info.version}")
    tools = (await s.list_tools()).tools
    print(f"{len(tools)} tools:")
    for t in tools:
        print(f"  {t.name}: {cut(t.description, a.width)}")
    if a.call:
        r = await s.call_tool(a.call, a.args)
        text = "\n".join(c.text for c in r.content if getattr(c, "type", "") == "text")
        print(f"{a.call} ->{' error:' if field(r, 'is_error', 'isError') else ''}")
        print(text)


async def main(a):
    from mcp import ClientSession

    if a.url:
        from mcp.client.streamable_http import streamable_http_client

        async with streamable_http_client(a.url) as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await session(s, a)
    else:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=a.command[0], args=a.command[1:])
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await session(s, a)


if __name__ == "__main__":
    args = parse()
    try:
        import mcp  # noqa: F401
    except ImportError:
        print("mcp-client: the MCP Python SDK is missing; run it with tools/mcp/git/bin/python "
              "(bash scripts/setup-mcp.sh installs it)", file=sys.stderr)
        sys.exit(2)
    try:
        asyncio.run(main(args))
    except Exception as e:  # the server could not be reached or ended: one line
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        print(f"mcp-client: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)

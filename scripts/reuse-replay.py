#!/usr/bin/env python3
"""How much prompt text the embedded backend's KV cache could reuse, replayed
offline from a store's call log (cache/llm/calls.jsonl).

The requests are taken in the order they started (created time minus latency),
rendered as the backend renders them (ChatML, tools in the system turn; the tool
list is abbreviated to its JSON lines, which every request of one tool set shares),
and run through a model of the backend's slot policy: SLOTS sequences, at most 4
requests in flight, a request's reuse is the longest common prefix with what any
sequence holds (its prompt and its answer), cells counted as characters / 3.6 against
N_CTX, least recently used idle sequences evicted when they run short. Policies:

  old  the free slot sharing the longest prefix (before issue #36's change)
  new  a free slot whose content all continues into the prompt, else an empty one,
       else the least recently used (llm::embedded::Worker::pick_slot)

Characters stand in for tokens, and requests in flight are modelled by their logged
times, so the shares are estimates; on the default Table 4 store the old policy's
estimate (0.55) matched the 0.54 the backend measured in that run.

    python3 scripts/reuse-replay.py STORE/cache/llm/calls.jsonl
"""

import collections
import json
import sys

CHARS_PER_TOKEN = 3.6
IN_FLIGHT = 4


def call_text(name, args_raw, args):
    if args is None:
        return '{"name": %s, "arguments": %s}' % (json.dumps(name), json.dumps(args_raw))
    return '{"name": %s, "arguments": %s}' % (json.dumps(name), json.dumps(args, ensure_ascii=False))


def render(req, spaced_calls):
    msgs = req["messages"]
    out, system, i = "", "", 0
    if msgs and msgs[0]["role"] == "system":
        system, i = msgs[0].get("content") or "", 1
    tools = req.get("tools") or []
    section = ""
    if tools and req.get("tool_choice") != "none":
        section = "\n\n# Tools\n<tools>\n" + "".join(json.dumps(t) + "\n" for t in tools) + "</tools>"
    if system or section:
        out += "<|im_start|>system\n" + (system or "You are a helpful assistant.") + section + "<|im_end|>\n"
    for m in msgs[i:]:
        if m["role"] == "tool":
            out += "<|im_start|>user\n<tool_response>\n" + (m.get("content") or "") + "\n</tool_response><|im_end|>\n"
        elif m["role"] == "assistant":
            parts = [m["content"]] if m.get("content") else []
            for c in m.get("tool_calls") or []:
                body = call_text(c["name"], c.get("arguments_raw"), c.get("arguments"))
                if not spaced_calls:
                    body = body.replace('", "arguments": ', '","arguments":').replace('{"name": ', '{"name":')
                parts.append("<tool_call>\n" + body + "\n</tool_call>")
            out += "<|im_start|>assistant\n" + "\n".join(parts) + "<|im_end|>\n"
        else:
            out += "<|im_start|>" + m["role"] + "\n" + (m.get("content") or "") + "<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def answer(resp):
    parts = [resp["content"]] if resp.get("content") else []
    for c in resp.get("tool_calls") or []:
        parts.append("<tool_call>\n" + call_text(c["name"], c.get("arguments_raw"), c.get("arguments")) + "\n</tool_call>")
    return "\n".join(parts)


def lcp(a, b):
    n, i = min(len(a), len(b)), 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def replay(recs, policy, slots_n, n_ctx):
    slots = [dict(busy=False, text="", used=0, until=0) for _ in range(slots_n)]
    clock = reused = total = 0
    per = collections.defaultdict(lambda: [0, 0])
    for r in recs:
        t = r["start"]
        for s in slots:
            if s["busy"] and s["until"] <= t:
                s["busy"] = False
        busy = [j for j, s in enumerate(slots) if s["busy"]]
        if len(busy) >= IN_FLIGHT:
            slots[min(busy, key=lambda j: slots[j]["until"])]["busy"] = False
        p = render(r["request"], policy == "new")
        free = [j for j, s in enumerate(slots) if not s["busy"]]
        if not free:
            j = min(range(slots_n), key=lambda j: slots[j]["until"])
            slots[j]["busy"] = False
            free = [j]
        if policy == "old":
            i = max(free, key=lambda j: (lcp(slots[j]["text"], p), -slots[j]["used"]))
        else:
            whole = [j for j in free if slots[j]["text"] and lcp(slots[j]["text"], p) == len(slots[j]["text"])]
            empty = [j for j in free if not slots[j]["text"]]
            if whole:
                i = max(whole, key=lambda j: len(slots[j]["text"]))
            elif empty:
                i = empty[0]
            else:
                i = min(free, key=lambda j: slots[j]["used"])
        got = min(max(lcp(s["text"], p) for s in slots), len(p) - 1)
        reused += got
        total += len(p)
        per[r.get("stage", "?")][0] += got
        per[r.get("stage", "?")][1] += len(p)
        clock += 1
        s = slots[i]
        s.update(busy=True, until=r["end"], used=clock, text=p + answer(r["response"]))
        while sum(len(x["text"]) for x in slots) > n_ctx * CHARS_PER_TOKEN:
            idle = [x for x in slots if not x["busy"] and x["text"]]
            if not idle:
                break
            min(idle, key=lambda x: x["used"])["text"] = ""
    return reused / max(total, 1), {k: v[0] / max(v[1], 1) for k, v in per.items()}


def main():
    recs = [json.loads(line) for line in open(sys.argv[1])]
    recs = [r for r in recs if r.get("backend") == "embedded"]
    if not recs:
        sys.exit("no embedded calls in " + sys.argv[1])
    for r in recs:
        r["end"] = r["created_unix_ms"]
        r["start"] = r["end"] - r["response"].get("latency_ms", 0)
    recs.sort(key=lambda r: r["start"])
    print(f"{len(recs)} embedded requests")
    for policy, slots_n in [("old", 4), ("new", 4), ("new", 8), ("new", 16)]:
        share, per = replay(recs, policy, slots_n, 8192)
        stages = ", ".join(f"{k} {v:.2f}" for k, v in sorted(per.items()))
        print(f"  {policy} policy, {slots_n:2d} sequences, 8192 cells: {share:.2f} of prompt characters reused ({stages})")


if __name__ == "__main__":
    main()

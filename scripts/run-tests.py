#!/usr/bin/env python3
"""Runs the workspace's tests with the cores kept busy: `make test`'s second half.

`cargo test` runs its test binaries one after another, and many of them leave a core
idle for long stretches (a model decoding on one thread, an S3 test server starting,
a run killed and restarted). This script builds them all with `cargo test --no-run`,
then runs the binaries (and the doc tests, as one more job) JOBS at a time, longest
first by the durations of the last run here (kept in the target folder; on a first
run, those of scripts/test-durations.json, a run on a 2-core machine), each with
what `cargo test` would give it (its package folder as the working directory,
CARGO_MANIFEST_DIR, CARGO_PKG_NAME). Each binary's output is printed whole when it
ends, under cargo's own `Running` line with its wall and CPU time, so a log reads as
cargo's would; the last lines sum up, name the binaries that failed, and the exit
status is 1 if any did.

    python3 scripts/run-tests.py [--jobs N] [-- ARGS FOR EVERY TEST BINARY]

JOBS defaults to OTB_TEST_JOBS, else the number of cores.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time


def build():
    """`cargo test --workspace --no-run`; the test executables it built."""
    cmd = [os.environ.get("CARGO", "cargo"), "test", "--workspace", "--no-run",
           "--message-format=json-render-diagnostics"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    found = []
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        kind = target["kind"][0]
        pkg_dir = os.path.dirname(msg["manifest_path"])
        src = os.path.relpath(target["src_path"], pkg_dir)
        # package_id: "path+file:///dir#name@version", or "path+file:///dir#version"
        # when the name is the folder's.
        path, _, tail = msg["package_id"].partition("#")
        package = tail.split("@")[0] if "@" in tail else os.path.basename(path)
        found.append({
            "name": f"{package}:{src}",
            "label": "unittests " + src if kind in ("lib", "bin", "proc-macro") else src,
            "exe": msg["executable"],
            "dir": pkg_dir,
            "package": package,
        })
    if proc.wait() != 0:
        sys.exit(proc.returncode)
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int,
                    default=int(os.environ.get("OTB_TEST_JOBS") or os.cpu_count() or 2))
    ap.add_argument("args", nargs="*", help="passed to every test binary")
    opts = ap.parse_args()

    started = time.monotonic()
    bins = build()
    built = time.monotonic() - started
    root = os.getcwd()
    jobs = [dict(b, cmd=[b["exe"], *opts.args]) for b in bins]
    # What cargo puts on the library path of a test it runs: the toolchain's libraries
    # (a proc-macro crate's test binary links its standard library dynamically) and
    # the target folder's.
    rustc = lambda *a: subprocess.run(["rustc", *a], capture_output=True, text=True,
                                      check=True).stdout
    sysroot = rustc("--print", "sysroot").strip()
    host = re.search(r"^host: (\S+)", rustc("-vV"), re.M).group(1)
    deps = os.path.dirname(bins[0]["exe"]) if bins else ""
    libs = os.pathsep.join(p for p in (os.path.join(sysroot, "lib", "rustlib", host, "lib"),
                                       os.path.join(sysroot, "lib"), deps,
                                       os.path.dirname(deps),
                                       os.environ.get("LD_LIBRARY_PATH", "")) if p)
    jobs.append({"name": "doc-tests", "label": "doc tests (cargo test --workspace --doc)",
                 "cmd": [os.environ.get("CARGO", "cargo"), "test", "--workspace", "--doc",
                         "--", *opts.args],
                 "dir": root, "package": ""})

    # Kept in the target folder the executables were built in (<target>/debug/deps).
    durations_file = os.path.join(os.path.dirname(os.path.dirname(deps)),
                                  "test-durations.json") if deps else None
    last = {}
    # This machine's last run, else the durations of a run kept beside this script.
    for f in (durations_file, os.path.join(os.path.dirname(__file__), "test-durations.json")):
        if f is None:
            continue
        try:
            with open(f) as fh:
                last = json.load(fh)
            break
        except (OSError, ValueError):
            continue
    # Longest first; a binary not seen before counts as long (it may be).
    jobs.sort(key=lambda j: -last.get(j["name"], 60.0))

    lock = threading.Lock()
    results = []
    queue = list(jobs)

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                job = queue.pop(0)
            env = dict(os.environ)
            if job["package"]:
                env.update(CARGO_MANIFEST_DIR=job["dir"], CARGO_PKG_NAME=job["package"],
                           LD_LIBRARY_PATH=libs)
            t0 = time.monotonic()
            with tempfile.TemporaryFile(mode="w+") as out:
                proc = subprocess.Popen(job["cmd"], cwd=job["dir"], env=env,
                                        stdout=out, stderr=subprocess.STDOUT)
                # wait4: the exit status and the CPU time of the binary and of what
                # it started and waited for (test servers, `otb` runs).
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = code = os.waitstatus_to_exitcode(status)
                took = time.monotonic() - t0
                cpu = usage.ru_utime + usage.ru_stime
                out.seek(0)
                text = out.read()
            with lock:
                shown = job.get("exe", "")
                print(f"     Running {job['label']} ({os.path.relpath(shown, root) if shown else job['cmd'][0]}) "
                      f"-- {took:.0f} s, {cpu:.0f} s CPU, exit {code}", flush=True)
                sys.stdout.write(text)
                sys.stdout.flush()
                results.append((job, code, took, cpu, text))

    threads = [threading.Thread(target=worker) for _ in range(max(1, opts.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    counts = {"passed": 0, "failed": 0, "ignored": 0}
    for _, _, _, _, text in results:
        for m in re.finditer(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", text):
            counts["passed"] += int(m.group(1))
            counts["failed"] += int(m.group(2))
            counts["ignored"] += int(m.group(3))
    failed = [job["label"] for job, code, _, _, _ in results if code != 0]
    try:
        if durations_file:
            with open(durations_file, "w") as f:
                json.dump({job["name"]: round(took, 1) for job, _, took, _, _ in results}, f,
                          indent=0)
    except OSError:
        pass
    total = time.monotonic() - started
    cpu = sum(c for _, _, _, c, _ in results)
    print(f"\ntests: {len(results)} binaries ({opts.jobs} at a time): {counts['passed']} passed, "
          f"{counts['failed']} failed, {counts['ignored']} ignored; built in {built:.0f} s, "
          f"ran in {total - built:.0f} s ({cpu:.0f} s CPU: {cpu / max(total - built, 1e-9):.2f} "
          f"cores busy)")
    if failed:
        print("failed: " + ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()

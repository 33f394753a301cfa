"""schemathesis against openapi.yaml: every check on, a bounded number of examples, a fixed seed.

After the HTTP tests (its example `largestId` is then an idempotent retry)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import HOST, ROOT, TOKEN


@pytest.mark.phase(1)
def test_schemathesis_finds_no_failure(stack, workdir, pytestconfig, capsys):
    st = Path(sys.executable).parent / "st"
    st = str(st) if st.exists() else shutil.which("st")
    assert st, "schemathesis (`st`) not found next to this Python or on PATH: run `make tools`"
    examples, seed = pytestconfig.getoption("examples"), pytestconfig.getoption("seed")
    options = {
        "--url": f"http://{HOST}:{stack.port}",
        "--header": f"Authorization: Bearer {TOKEN}",
        "--checks": "all",
        "--max-examples": str(examples),
        "--seed": str(seed),
        "--generation-database": "none",  # every run starts from the seed alone
        "--request-timeout": "30",
        "--workers": "1",  # watch runs one function instance anyway
    }
    argv = [st, "run", str(ROOT / "openapi.yaml"), "--continue-on-failure", "--no-color"]
    argv += [part for option in options.items() for part in option]
    hooks = str(ROOT / "scripts" / "schemathesis_hooks.py")
    env = dict(os.environ, SCHEMATHESIS_HOOKS=hooks, NO_COLOR="1")
    summary = []
    with capsys.disabled():  # minutes of work: show it as it goes
        shown = ["st"] + [("'Authorization: Bearer ***'" if a.startswith("Authorization:") else a) for a in argv[1:]]
        print("\nrunning " + " ".join(shown), flush=True)
        # From `workdir`, outside the crate: st writes files there, and watch must not see them.
        with subprocess.Popen(
            argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        ) as process:
            try:
                for raw in process.stdout:
                    line = raw.decode(errors="replace").rstrip("\n")
                    print(f"  st | {line}", flush=True)
                    if re.search(r"\d+ generated|No issues found|failures? in|errors? in", line):
                        summary.append(line.strip(" ="))
            except BaseException:  # interrupted: st must not outlive the run
                process.terminate()
                raise
    assert process.returncode == 0, f"schemathesis exit code {process.returncode}: {'; '.join(summary)}"

"""schemathesis against openapi.yaml: every check on, a bounded number of examples, a fixed seed.

After the HTTP tests (its example `largestId` is then an idempotent retry)."""

import os
import shutil
import subprocess
import sys

import pytest
from helpers import HOST, ROOT, TOKEN


@pytest.mark.phase(1)
def test_schemathesis_finds_no_failure(stack, workdir, capsys):
    st = shutil.which("st", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    assert st, "schemathesis (`st`) not found next to this Python or on PATH: run `make tools`"
    options = {
        "--url": f"http://{HOST}:{stack.port}",
        "--header": f"Authorization: Bearer {TOKEN}",
        "--checks": "all",
        "--max-examples": os.environ.get("CONTRACT_EXAMPLES") or "500",  # per phase
        "--seed": "42",
        "--generation-database": "none",  # every run starts from the seed alone
        "--request-timeout": "30",
        "--workers": "1",  # watch runs one function instance anyway
    }
    argv = [st, "run", str(ROOT / "openapi.yaml"), "--continue-on-failure", "--no-color"]
    argv += [part for option in options.items() for part in option]
    env = dict(os.environ, SCHEMATHESIS_HOOKS=str(ROOT / "scripts" / "schemathesis_hooks.py"), NO_COLOR="1")
    with capsys.disabled():  # minutes of work: show it as it goes, on the terminal
        shown = ["st"] + [("'Authorization: Bearer ***'" if a.startswith("Authorization:") else a) for a in argv[1:]]
        print("\nrunning " + " ".join(shown), flush=True)
        # From `workdir`, outside the crate: st writes files there, and watch must not see them.
        # subprocess.run kills st if the run is interrupted.
        process = subprocess.run(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, check=False)
    assert process.returncode == 0, f"schemathesis exit code {process.returncode} (its report is above)"

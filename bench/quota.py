"""The CPU quota of Lambda's memory sizes: a cgroup with the share of a vCPU that a size buys (`CpuQuota`)."""

import contextlib
import os
import time

LAMBDA_FULL_VCPU_MB = 1769  # the memory size that buys one full vCPU
CGROUP_PERIOD_US = 100_000
CGROUP_V1_CPU = "/sys/fs/cgroup/cpu"
CGROUP_V2 = "/sys/fs/cgroup"


def _write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


class CpuQuota:
    """A cgroup whose CPU quota is the share of one vCPU that Lambda gives
    at `memory_mb` (memory / 1,769 MB of each 100 ms period): cgroup v2's
    `cpu.max` or v1's `cpu.cfs_quota_us`, whichever the machine has. Each
    function process is spawned inside it (`spawning`), so its pid, CPU
    clock and /proc figures stay its own."""

    def __init__(self, memory_mb):
        self.memory_mb = memory_mb
        self.quota_us = round(CGROUP_PERIOD_US * memory_mb / LAMBDA_FULL_VCPU_MB)
        self.label = f" at {memory_mb} MB"
        self.path = self.version = None

    def create(self):
        """Makes the cgroup; returns None, or why it could not."""
        errors = []
        for version, root, marker, files in (
            (2, CGROUP_V2, "cgroup.controllers", {"cpu.max": f"{self.quota_us} {CGROUP_PERIOD_US}"}),
            (
                1,
                CGROUP_V1_CPU,
                "cpu.cfs_quota_us",
                {"cpu.cfs_period_us": CGROUP_PERIOD_US, "cpu.cfs_quota_us": self.quota_us},
            ),
        ):
            if not os.path.isfile(os.path.join(root, marker)):
                continue
            try:
                if version == 2:
                    with open(os.path.join(root, marker)) as f:
                        if "cpu" not in f.read().split():
                            raise OSError("the cgroup v2 hierarchy has no cpu controller")
                    _write(os.path.join(root, "cgroup.subtree_control"), "+cpu")
                self.path = os.path.join(root, f"plant-store-bench-{os.getpid()}-{self.memory_mb}")
                self.version = version
                os.makedirs(self.path, exist_ok=True)
                for name, value in files.items():
                    _write(os.path.join(self.path, name), value)
                return None
            except OSError as err:
                errors.append(f"cgroup v{version}: {err.strerror or err}")
                self.remove()
        return "; ".join(errors) or "no cgroup v2 cpu controller and no cgroup v1 cpu hierarchy"

    @contextlib.contextmanager
    def spawning(self):
        """The harness joins the cgroup while it spawns a function process,
        which so starts inside it (and keeps its own pid and CPU clock),
        then goes back to the cgroup it came from."""
        home = self.home()
        _write(os.path.join(self.path, "cgroup.procs"), os.getpid())
        try:
            yield
        finally:
            _write(os.path.join(home, "cgroup.procs"), os.getpid())

    def home(self):
        """This process's own cgroup in the hierarchy the quota lives in."""
        root = CGROUP_V2 if self.version == 2 else CGROUP_V1_CPU
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if (self.version == 2 and controllers == "") or "cpu" in controllers.split(","):
                    return root + path
        return root

    def stat(self):
        """The cgroup's cpu.stat counters (nr_periods, nr_throttled, ...)."""
        try:
            with open(os.path.join(self.path, "cpu.stat")) as f:
                return {key: int(value) for key, value in (line.split() for line in f if line.strip())}
        except (OSError, ValueError):
            return {}

    def remove(self):
        for _ in range(50 if self.path else 0):
            try:
                os.rmdir(self.path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)  # a stopped process may not have left yet
        self.path = self.version = None

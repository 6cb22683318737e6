"""A runner given some of a machine's GPUs (CLUSTER_MANAGER_DEVICES) shows its submissions only
those GPUs' device nodes: a submission that ignores or resets CUDA_VISIBLE_DEVICES still
cannot open a neighbour's GPU. Proven on a machine of plain files standing in for the nodes
(this one has no GPU), through the real sandbox, as root and as an ordinary user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.core.payload import encode_payload
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.task import load_task
from cluster_manager.sandbox import gpu_nodes as nodes_module
from cluster_manager.sandbox.gpu_nodes import gpu_nodes
from cluster_manager.sandbox.plan import full_sandbox_problem
from tests.conftest import make_request, write_task
from tests.security import fake_gpus
from tests.security.runners import ensure_plain_user, plain_user_command

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def fake_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="cm-fake-gpus-"))
    os.chmod(root, 0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def names(paths) -> set[str]:
    return {str(p).split("/dev/", 1)[1] for p in paths}


DISPLAY = {"dri/renderD130", "dri/card0"}
NVIDIA_SHARED = {*fake_gpus.NVIDIA_SHARED, "nvidia-caps"}
NVIDIA_GPUS = {"nvidia0", "nvidia1", "nvidia2"}
AMD_GPUS = {"dri/renderD128", "dri/card1", "dri/renderD129", "dri/card2"}


def test_without_an_assignment_every_node_is_shown(fake_root):
    chosen = gpu_nodes(None, fake_gpus.build(fake_root))
    assert names(chosen.nodes) == NVIDIA_SHARED | NVIDIA_GPUS | {"kfd"} | AMD_GPUS | DISPLAY
    assert chosen.hidden == () and chosen.describe() == "all"


def test_an_nvidia_index_counts_in_pci_order_not_by_device_minor(fake_root):
    machine = fake_gpus.build(fake_root, amd=False)
    # Index 1 is the second GPU by PCI address (0000:3b), whose node is nvidia0.
    chosen = gpu_nodes(("1",), machine)
    assert names(chosen.nodes) == NVIDIA_SHARED | {"nvidia0"} | DISPLAY
    assert names(chosen.hidden) == {"nvidia1", "nvidia2"}
    assert chosen.describe() == "own only"
    assert dict(chosen.binds())["/dev/nvidia0"] == str(machine.dev / "nvidia0")


def test_an_nvidia_uuid_or_its_prefix_names_a_gpu(fake_root):
    chosen = gpu_nodes(("GPU-cccc3333", "0"), fake_gpus.build(fake_root, amd=False))
    assert names(chosen.hidden) == {"nvidia0"}


def test_an_amd_index_counts_kfds_gpu_nodes_and_takes_the_card_along(fake_root):
    machine = fake_gpus.build(fake_root, nvidia=False)
    chosen = gpu_nodes(("1",), machine)  # KFD node 2: renderD129, the same device as card2
    assert names(chosen.nodes) == {"kfd", "dri/renderD129", "dri/card2"} | DISPLAY
    assert names(chosen.hidden) == {"dri/renderD128", "dri/card1"}
    by_uuid = gpu_nodes((f"GPU-{9001:016x}",), machine)  # node 1's unique id, as ROCm names it
    assert names(by_uuid.hidden) == {"dri/renderD129", "dri/card2"}


def test_on_a_machine_with_both_the_ids_name_nvidia_gpus(fake_root):
    chosen = gpu_nodes(("2",), fake_gpus.build(fake_root))
    assert names(chosen.hidden) == {"nvidia0", "nvidia2"}  # PCI 0000:88 is nvidia1
    assert names(chosen.nodes) >= AMD_GPUS


@pytest.mark.parametrize("devices", [("7",), ("GPU-ffff",), ("GPU-",)])
def test_a_gpu_the_drivers_do_not_know_leaves_every_node_and_says_why(fake_root, devices):
    machine = fake_gpus.build(fake_root, amd=False)
    chosen = gpu_nodes(devices, machine)
    assert chosen.nodes == tuple(nodes_module.all_nodes(machine)) and chosen.hidden == ()
    assert chosen.describe().startswith("all (NVIDIA GPU ") and str(machine.nvidia) in chosen.note


def test_an_empty_assignment_shows_no_gpu(fake_root):
    chosen = gpu_nodes((), fake_gpus.build(fake_root, amd=False))
    assert names(chosen.nodes) == NVIDIA_SHARED | DISPLAY


# What the submission does: it resets the pinning, then lists and opens every GPU node there is.
PROBE = """
import json, os
def custom_kernel(data):
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    seen = sorted(os.listdir("/dev"))
    if os.path.isdir("/dev/dri"):
        seen += ["dri/" + name for name in sorted(os.listdir("/dev/dri"))]
    opened = []
    for name in seen:
        if not name.startswith(("nvidia", "kfd", "dri/")):
            continue  # /dev/zero and friends
        try:
            with open("/dev/" + name) as node:
                opened.append(node.read(64).strip())
        except OSError:
            pass
    print("PROBE " + json.dumps({"seen": seen, "opened": opened}), flush=True)
    return data.clone()
"""


def _probe_of(result: RunResult) -> dict[str, list[str]]:
    for phase in result.phases:
        for line in phase.stdout.splitlines():
            if line.startswith("PROBE "):
                return json.loads(line[len("PROBE ") :])
    raise AssertionError(f"the probe printed nothing: {result.message} {result.phases}")


def _run_entrypoint(request, machine, *, plain_user: bool, workdir: Path) -> RunResult:
    payload, output = workdir / "payload.txt", workdir / "result.json"
    payload.write_text(encode_payload(request), encoding="utf-8")
    argv = [sys.executable, "-c", fake_gpus.WRAPPER, "--payload", str(payload)]
    argv += ["--output", str(output)]
    env = {
        **os.environ,
        "CM_TEST_FAKE_GPUS": str(machine.dev.parent),
        "CLUSTER_MANAGER_DEVICES": "1",
        "CUDA_VISIBLE_DEVICES": "0,1,2",  # what the machine's service may have left: overridden
    }
    if plain_user:
        user = ensure_plain_user()
        for path in (workdir, payload):
            os.chown(path, user.pw_uid, user.pw_gid)
        argv = plain_user_command(argv, user.pw_dir)
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=240, cwd=tempfile.gettempdir()
    )
    assert done.returncode == 0 and output.is_file(), done.stderr[-3000:]
    return RunResult.from_json(json.loads(output.read_text("utf-8")))


@pytest.mark.adversarial
@pytest.mark.reliability(
    "Sandbox",
    "on a runner given one GPU of several (CLUSTER_MANAGER_DEVICES=1; NVIDIA and AMD), a "
    "submission resets CUDA_VISIBLE_DEVICES and opens every GPU device node it can find; as "
    "root and as an ordinary user",
    "it sees and opens only GPU 1's nodes and the shared ones; the run says `gpu_nodes: own only`",
)
@pytest.mark.parametrize("plain_user", [False, True], ids=["root", "plain-user"])
@pytest.mark.parametrize(
    ("vendor", "own", "others"),
    [
        ("nvidia", {"nvidia0"}, {"nvidia1", "nvidia2"}),
        ("amd", {"dri/renderD129", "dri/card2"}, {"dri/renderD128", "dri/card1"}),
    ],
    ids=["nvidia", "amd"],
)
def test_a_submission_cannot_open_the_other_gpus_nodes(
    fake_root, tmp_path, plain_user, vendor, own, others, record_property
):
    if os.geteuid() != 0:
        pytest.skip("needs root to act as both kinds of runner")
    if problem := full_sandbox_problem():
        pytest.fail(f"the full sandbox is needed here: {problem}")
    machine = fake_gpus.build(fake_root, nvidia=vendor == "nvidia", amd=vendor == "amd")
    task = load_task(write_task(tmp_path / "task"))
    code = textwrap.dedent(PROBE)
    workdir = Path(tempfile.mkdtemp(prefix="cm-gpu-nodes-run-"))
    try:
        request = make_request(task, code, Mode.TEST)
        result = _run_entrypoint(request, machine, plain_user=plain_user, workdir=workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    probe = _probe_of(result)
    record_property("observed", f"{result.system.get('gpu_nodes')}: opened {probe['opened']}")
    assert result.passed, result.message
    gpu_seen = {n for n in probe["seen"] if n.startswith(("nvidia", "dri/", "kfd"))}
    shared = NVIDIA_SHARED if vendor == "nvidia" else {"kfd"}
    assert gpu_seen == shared | own | DISPLAY
    opened = {line.removeprefix("device ") for line in probe["opened"]}
    assert {name.removeprefix("dri/") for name in own} <= opened  # its own GPU works
    assert not opened & {name.removeprefix("dri/") for name in others}
    assert result.system["gpu_nodes"] == "own only"

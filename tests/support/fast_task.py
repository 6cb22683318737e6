"""The fast fixture task (tests/fixtures/fast_task): a copy task with one small test and one
small benchmark, for tests that must really run a task but are not about a shipped example.
Each run still starts the harness and its workers; it only times and checks as little as a run
can. `cluster-manager leaderboard check` passes it, like every shipped example."""

from __future__ import annotations

from pathlib import Path

FAST_TASK = Path(__file__).resolve().parents[1] / "fixtures" / "fast_task"
# A correct kernel, the task's starter (also correct) and one that drops the last element.
FAST_SUBMISSION = FAST_TASK / "submission.py"
FAST_TEMPLATE = FAST_TASK / "template.py"
FAST_WRONG_ANSWER = FAST_TASK / "wrong_answer.py"

"""Which competition files of a problem-set checkout (gpu-mode/reference-kernels' `problems/`,
carried as `.gpu-carry/reference-kernels/problems`) this GPU can stand in for, read with the
project's own loader of competition files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cluster_manager.core.competition import is_competition_file, load_competition
from cluster_manager.core.errors import InvalidTaskError

CARRIED = Path("reference-kernels") / "problems"  # under the carried folder
# Compute capability of the NVIDIA GPU types problem sets name. A type not here (AMD's, the
# bare "NVIDIA", a cloud's own name such as B200_Nebius) is never stood in for.
CAPABILITY: dict[str, tuple[int, int]] = {
    "V100": (7, 0),
    "T4": (7, 5),
    "A100": (8, 0),
    "A10G": (8, 6),
    "L4": (8, 9),
    "L40S": (8, 9),
    "H100": (9, 0),
    "H200": (9, 0),
    "H20": (9, 0),
    "B200": (10, 0),
    "GB200": (10, 0),
    "B300": (10, 3),
}


def stands_in(device: tuple[int, int], gpu: str) -> bool:
    """Whether a GPU of capability `device` can run what was written for `gpu`. Code for an
    older generation runs on a newer one (its PTX is compiled for it); from Hopper on, tasks
    may use arch-specific instructions (sm_90a, sm_100a), which run on that capability only."""
    wanted = CAPABILITY.get(gpu)
    if wanted is None:
        return False
    return wanted == device if wanted[0] >= 9 else wanted <= device


@dataclass(frozen=True)
class Selection:
    """One competition file: the problems this GPU stands in for, and why the others not."""

    competition: Path
    fitting: tuple[tuple[str, Path], ...]  # (name, task folder)
    left_out: tuple[tuple[str, str], ...]  # (name, why)

    def targets(self) -> list[Path]:
        """What `leaderboard check` is given: the whole file when every problem fits, else
        each fitting problem's folder."""
        if not self.fitting:
            return []
        if not self.left_out:
            return [self.competition]
        return [folder for _, folder in self.fitting]


def carried_problems(carry: Path) -> Path | None:
    folder = carry / CARRIED
    return folder if folder.is_dir() else None


def select(problems: Path, device: tuple[int, int]) -> list[Selection]:
    """Every competition file in `problems`, sorted by name, split by what this GPU runs."""
    selections = []
    for file in sorted(problems.glob("*.y*ml")):
        if not is_competition_file(file):
            continue
        try:
            competition = load_competition(file)
        except InvalidTaskError as exc:
            selections.append(Selection(file, (), ((file.name, f"does not load: {exc}"),)))
            continue
        fitting, left_out = [], []
        for problem in competition.problems:
            if any(stands_in(device, gpu) for gpu in problem.gpus):
                fitting.append((problem.name, problem.directory))
            else:
                listed = ", ".join(problem.gpus) or "no GPU"
                left_out.append((problem.name, f"for {listed}"))
        selections.append(Selection(file, tuple(fitting), tuple(left_out)))
    return selections

"""The GPU check (docs/GPU.md): what this project does on a real NVIDIA GPU, row by row.

machine.py        the machine's facts (device, driver, CUDA, torch) and the refusal without a GPU
outcome.py        a row, its outcome, the exit code and the table
rows_runner.py    runs the rows: each in a thread with a time limit, its processes killed at it
setting.py        what every row reads: this run's folder, GPU registry and environment
commands.py       the project's commands as a user types them, and what they printed
judges.py         each row's verdict on that output (RunResult JSON, check rows, JUnit)
rows.py           the rows, in the table's order; rows_examples.py, rows_measure.py and
                  rows_suites.py hold them
problem_sets.py   which competition files of a problem-set checkout this GPU can stand in for
independent.py    a second measurement of the timing row's kernel (triton's do_bench)
matmul_task/      the timing row's task: a bf16 matrix product of known size

    bash scripts/gpu/check [--only ROW]... [--skip ROW]... [--list]
"""

"""Pure domain logic: no Discord, database, GitHub or Modal imports.

models.py          the engine's contracts: tasks and run requests
run_results.py     what a run sends back: phases, tests, benchmarks, verdict, score
records.py         what the service stores and shows: leaderboards, submissions, jobs, runs
json_forms.py      the plain-JSON form of those records, as they travel and are stored
errors.py          the project's exception tree; adapters translate foreign errors into it
task.py            loads a task (task.yml and its files) from a folder or a zip
task_sources.py    where a task's files come from, read with bounded reads
task_folder.py     a task written back as a folder that `load_task` reads
yaml_files.py      organisers' YAML read without trusting it: size cap, safe tags, no aliases
competition.py     a competition file: a problem set's problems and their leaderboards
sync_plan.py       what syncing a problem set would change, and which changes need --force
submission.py      a submitted file checked before anything runs it; its #!POPCORN lines
names.py           characters a file name must not hold
protocol.py        the popcorn runner protocol, spoken exactly
phases.py          a run's phases and how long each may take
verdicts.py        one phase's process and reports turned into a verdict and a message
scoring.py         per-benchmark timings to one score
ranked_pairs.py    what a ranked pair (public run and secret re-run) scores
guarantees.py      what a task's ranked timings can be trusted for
formulas.py        arithmetic over a case's values (speed_of_light), never eval'd
speed_of_light.py  how close a benchmark case came to what the hardware can do
gpus.py            the GPU registry: the types a deployment serves and their launchers
arch.py            a GPU type's compiler target and what it means for a build
sandboxing.py      how far a run was sandboxed, and what that means for its score
telemetry.py       what the GPU did while a run was timed, and what that means for a score
teams.py           teams: a name on one leaderboard and its members
payload.py         a run request as compact text: JSON, zlib, base64 or sealed
sealed.py          AES-256-GCM sealing for what crosses a channel others can read
profiling.py       profile mode's contracts: what is asked of Nsight Compute, what came back
progress.py        the runner's progress events, one JSON object a line
wording.py         counts, moments and spans of time as a person writes them
waits.py           a wait with a time limit that never loses a cancel
"""

"""What ships to runner machines beside the harness: the GitHub runners' cached environment and
the Modal function. Imports only `core`, `harness` and the standard library (plus Modal's own
module on Modal), never the bot's dependencies.

    venv.py       a runner's Python environment, built once per content and reused
    modal_app.py  the Modal app: one function per GPU type, each running the harness
"""

"""The web pages are served by the API's app: its fixtures serve them too."""

from tests.api.conftest import (  # noqa: F401
    api,
    api_registry,
    app,
    client,
    live_url,
    local_launcher,
    replay_launcher,
    scheduler,
    settings,
)

"""The web pages are served by the API's app: its fixtures serve them too."""

from tests.api.conftest import api, api_registry, app, client, settings  # noqa: F401

"""A fake GitHub REST server whose workflow runs really execute the runner entrypoint."""

from tests.support.fake_github.server import FakeGitHub, FakeRun

__all__ = ["FakeGitHub", "FakeRun"]

"""A task's description, written in Markdown, as the pages show it: formatted, with nothing
from the task able to become markup or script, and links to http(s) only; and `/docs`, the
API's reference, as a page of this site that needs nothing from the internet."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime

import httpx

from cluster_manager.app import App
from cluster_manager.core.task import load_task
from tests.api.conftest import BOARD, IDENTITY
from tests.web.helpers import HTML

HOSTILE = """\
Fast `softmax` over **rows**: see [the paper](https://example.org/paper?a=1&b=2).

# Inputs

- <script>alert(1)</script>
- <img src=x onerror=alert(2)>
- [click me](javascript:alert(3)) and [data](data:text/html,hi) and [relative](/logout)
- ![a picture](https://example.org/tracker.png)

```python
x = "<b>not bold</b>"
```
"""


async def test_the_description_is_markdown_made_safe(app: App, client: httpx.AsyncClient):
    task = dataclasses.replace(load_task(IDENTITY), description=HOSTILE)
    await app.service.leaderboards.create(
        "hostile", task, datetime(2099, 1, 1, tzinfo=UTC), ["CPU"]
    )
    page = (await client.get("/leaderboards/hostile", headers=HTML)).text
    task_html = page.split('<div class="description">')[1].split("</div>")[0]
    assert "<code>softmax</code>" in task_html and "<strong>rows</strong>" in task_html
    assert "`" not in task_html  # no raw backticks left
    assert '<a href="https://example.org/paper?a=1&amp;b=2" rel="nofollow' in task_html
    assert "<h3>Inputs</h3>" in task_html  # under the page's own "Task" (an h2)
    assert "<ul>" in task_html and '<pre><code class="language-python">' in task_html
    # Nothing from the task becomes markup: raw HTML is text, other links stay text.
    for tag in ("<script", "<img", "<b>"):
        assert tag not in task_html, tag
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in task_html
    hrefs = re.findall(r'href="([^"]*)"', task_html)
    assert hrefs and all(h.startswith("https://example.org/") for h in hrefs), hrefs
    assert "javascript:" not in hrefs and "/logout" not in hrefs
    tile = (await client.get("/")).text  # the tile shows the first line, formatted too
    assert "Fast <code>softmax</code> over <strong>rows</strong>" in tile


async def test_the_example_tasks_backticks_are_code(client: httpx.AsyncClient):
    page = (await client.get(f"/leaderboards/{BOARD}", headers=HTML)).text
    assert "a tensor of <code>size</code> float32 values" in page and "`size`" not in page


async def test_docs_is_a_page_of_this_site(client: httpx.AsyncClient):
    docs = await client.get("/docs")
    assert docs.status_code == 200 and docs.headers["content-type"].startswith("text/html")
    csp = docs.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    # Everything it shows is here: no script, stylesheet or font from elsewhere (Swagger UI's
    # page loaded its bundle from a CDN and was blank without internet).
    assert "<script" not in docs.text
    assert not re.search(r'(?:src|href)="(?:https?:)?//', docs.text)
    for endpoint in ("/leaderboards/{name}", "/submission/{leaderboard}/{gpu}/{mode}", "/queue"):
        assert f"<code>{endpoint}</code>" in docs.text, endpoint
    assert "Authorization: Bearer" in docs.text and 'href="/openapi.json"' in docs.text
    assert "Organisers&#39; endpoints" in docs.text and "/admin/bans/{user}" in docs.text
    # Each answer names its model, or its media type where it is no JSON.
    assert "202 Successful Response: SubmitAccepted" in docs.text
    assert "string (text/event-stream)" in docs.text
    schema = await client.get("/openapi.json")
    assert schema.status_code == 200 and "/queue" in schema.json()["paths"]
    assert "/docs" not in schema.json()["paths"]
    assert (await client.get("/redoc")).status_code == 404

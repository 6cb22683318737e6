// Live progress on a submission's page: its jobs' events as they happen (server-sent events
// from /submissions/{id}/events), then the finished page. Without this script the page shows
// the state at load and refreshes itself.
"use strict";
(function () {
  const status = document.getElementById("status");
  const url = status && status.dataset.events;
  if (!url) return;
  const progress = document.getElementById("progress");
  const overall = document.getElementById("overall");

  function describe(event) {
    const who = "[" + event.gpu + (event.secret ? " secret" : "") + "] ";
    switch (event.state) {
      case "queued": return who + "queued" + (event.position ? " (position " + event.position + ")" : "");
      case "dispatched": return who + "dispatched to " + (event.detail || "a launcher");
      case "running": return who + "running " + (event.detail || "");
      case "finished": return who + (event.verdict === "passed" ? "✅ " : "❌ ") + (event.verdict || "finished");
      case "failed": return who + "❌ failed: " + (event.detail || "");
      default: return who + event.state;
    }
  }

  const source = new EventSource(url);
  source.addEventListener("job", function (message) {
    const event = JSON.parse(message.data);
    const line = document.createElement("li");
    line.textContent = describe(event);
    progress.appendChild(line);
    const state = status.querySelector('[data-job="' + event.job_id + '"] .state');
    if (state) {
      state.textContent = event.state;
      state.className = "state state-" + event.state;
    }
  });
  source.addEventListener("done", function (message) {
    source.close();
    overall.textContent = JSON.parse(message.data).status;
    window.location.reload();  // the finished page: runs, report, benchmarks
  });
})();

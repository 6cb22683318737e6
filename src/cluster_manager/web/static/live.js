// Live progress on a submission's page: its jobs' events as they happen (server-sent events
// from /submissions/{id}/events), then the finished page. Without this script the page shows
// the state at load and refreshes itself. Verdicts are words; the tick and cross beside them
// are the page's own SVG marks (<template id="marks">), never emoji.
"use strict";
(function () {
  const status = document.getElementById("status");
  const url = status && status.dataset.events;
  if (!url) return;
  const progress = document.getElementById("progress");
  const overall = document.getElementById("overall");
  const marks = document.getElementById("marks");
  const WAITING = ["queued", "claimed", "starting", "dispatched", "running"];

  function words(verdict) { return verdict.replace(/_/g, " "); }

  function markFor(outcome) {
    if (!marks || WAITING.includes(outcome)) return null;
    const kind = outcome === "passed" ? "ok" : "bad";
    const found = marks.content.querySelector('[data-mark="' + kind + '"] svg');
    return found ? found.cloneNode(true) : null;
  }

  // The job's state as one word (its run's verdict once finished) and that word for people.
  function outcomeOf(event) {
    switch (event.state) {
      case "queued": return ["queued", "queued"];
      case "claimed": return ["starting", "starting"];
      case "finished": return [event.verdict || "finished", words(event.verdict || "finished")];
      default: return [event.state, event.state];
    }
  }

  function describe(event) {
    switch (event.state) {
      case "queued": return "queued" + (event.position ? " (#" + event.position + " in line)" : "");
      case "dispatched": return event.detail ? "dispatched to the " + event.detail + " launcher" : "dispatched to a launcher";
      case "running": return "running " + (event.detail || "");
      case "finished": return words(event.verdict || "finished");
      case "failed": return "failed: " + (event.detail || "");
      default: return event.state;
    }
  }

  function show(badge, outcome, text) {
    badge.className = "outcome is-" + outcome;
    badge.replaceChildren();
    const mark = markFor(outcome);
    if (mark) badge.appendChild(mark);
    const word = document.createElement("span");
    word.className = "word";
    word.textContent = text;
    badge.appendChild(word);
  }

  const source = new EventSource(url);
  source.addEventListener("job", function (message) {
    const event = JSON.parse(message.data);
    const line = document.createElement("li");
    const [outcome, text] = outcomeOf(event);
    line.appendChild(document.createTextNode("[" + event.gpu + (event.secret ? " secret" : "") + "] "));
    const mark = markFor(outcome);
    if (mark) line.appendChild(mark);
    line.appendChild(document.createTextNode(describe(event)));
    progress.appendChild(line);
    const job = status.querySelector('[data-job="' + event.job_id + '"]');
    if (job) {
      show(job.querySelector(".outcome"), outcome, text);
      const detail = job.querySelector(".detail");
      if (detail && event.state === "queued" && event.position) {
        detail.textContent = "#" + event.position + " in line";
      } else if (detail && event.state !== "failed") {
        detail.textContent = "";
      } else if (detail) {
        detail.textContent = event.detail || "";
      }
    }
    if (["claimed", "dispatched", "running"].includes(event.state)) show(overall, "running", "running");
  });
  source.addEventListener("done", function () {
    source.close();
    show(overall, "finished", "finished");
    window.location.reload();  // the finished page: runs, report, benchmarks, the verdict
  });
})();

// jq console: confirmation dialogs for actions, live refresh of a page's live part (polling with
// backoff, paused while the tab is hidden or a dialog is open), throughput sparklines, and "/" to
// search. Everything the server sends is HTML it escaped; this script adds no markup of its own
// from data (text goes in with textContent).
(() => {
  "use strict";
  const dialog = document.getElementById("confirm");
  let pending = null;

  document.addEventListener("submit", (e) => {
    const form = e.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
    const field = form.elements.namedItem("confirmed");
    if (field && field.value === "yes") return;
    e.preventDefault();
    pending = form;
    const text = document.getElementById("confirm-text");
    text.textContent = form.dataset.confirm;
    dialog.returnValue = "";
    if (!form.dataset.count) { dialog.showModal(); return; }
    // A bulk action says how many jobs it affects before it asks (the server counts the filter).
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (k !== "csrf" && k !== "confirmed") q.append(k, String(v));
    fetch("/bulk-count?" + q.toString(), { credentials: "same-origin", cache: "no-store" })
      .then((r) => r.text().then((t) => (r.ok ? t : "The count failed: " + t)))
      .catch((err) => "The count failed: " + err.message)
      .then((t) => { if (pending === form) { text.textContent = form.dataset.confirm + " " + t.trim(); dialog.showModal(); } });
  });
  if (dialog) {
    dialog.addEventListener("close", () => {
      const form = pending;
      pending = null;
      if (!form || dialog.returnValue !== "ok") return;
      form.elements.namedItem("confirmed").value = "yes";
      form.submit();
    });
  }

  document.addEventListener("keydown", (e) => {
    if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement) return;
    const search = document.querySelector(".search input");
    if (search) { e.preventDefault(); search.focus(); }
  });

  // Sparklines: each refresh of the overview brings every queue's throughput and failure share over
  // the last minute (computed by the server from its newest events); each refresh is a point.
  const history = new Map(); // queue → [{rate, fail}]
  const maxPoints = 60;
  function sample() {
    for (const row of document.querySelectorAll("tr[data-queue]")) {
      const q = row.dataset.queue;
      const h = history.get(q) || [];
      h.push({ rate: Number(row.dataset.rate) || 0, fail: Math.min(1, Number(row.dataset.fail) || 0) });
      if (h.length > maxPoints) h.shift();
      history.set(q, h);
      const rates = h.map((p) => p.rate), fails = h.map((p) => p.fail);
      const r = rates[rates.length - 1];
      draw(row, "rate", rates, r.toFixed(r >= 10 ? 0 : r >= 1 ? 1 : 2) + "/s");
      draw(row, "fail", fails, (fails[fails.length - 1] * 100).toFixed(0) + "%", 1);
    }
  }
  function draw(row, kind, values, label, fixedMax) {
    const svg = row.querySelector(`svg[data-spark="${kind}"]`);
    const text = row.querySelector(`[data-spark-label="${kind}"]`);
    if (text) text.textContent = label;
    if (!svg || values.length === 0) return;
    const top = fixedMax || Math.max(...values, 1e-9);
    const step = values.length > 1 ? 100 / (values.length - 1) : 100;
    const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(21 - (v / top) * 18).toFixed(1)}`);
    if (pts.length === 1) pts.unshift(`0,${pts[0].split(",")[1]}`);
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    line.setAttribute("points", pts.join(" "));
    svg.replaceChildren(line);
  }

  // Live refresh.
  const main = document.querySelector("main[data-live]");
  const live = document.getElementById("live");
  const state = document.getElementById("live-state");
  // A refresh waits at least 2 s, and ten times as long as the last one took, so a page whose
  // queries are slow (a big history) costs the server at most a tenth of one request stream.
  const base = 2000, ceiling = 60000, costFactor = 10;
  let delay = base, timer = 0;
  function schedule() { clearTimeout(timer); timer = setTimeout(refresh, delay); }
  async function refresh() {
    if (document.hidden || (dialog && dialog.open) || (live && live.contains(document.activeElement) && document.activeElement !== document.body)) {
      schedule();
      return;
    }
    const began = performance.now();
    try {
      const resp = await fetch(location.href, { headers: { "X-JQ-Live": "1" }, credentials: "same-origin", cache: "no-store" });
      if (resp.status === 401) { location.assign("/login"); return; }
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      live.innerHTML = await resp.text();
      delay = Math.min(ceiling, Math.max(base, (performance.now() - began) * costFactor));
      if (state) state.textContent = "live, updated " + new Date().toISOString().slice(11, 19) + "Z, next in " + Math.round(delay / 1000) + "s";
      sample();
    } catch (err) {
      delay = Math.min(delay * 2, ceiling);
      if (state) state.textContent = "refresh failed (" + err.message + "); next try in " + Math.round(delay / 1000) + "s";
    }
    schedule();
  }
  sample();
  if (main && live) {
    document.addEventListener("visibilitychange", () => { if (!document.hidden) { delay = base; schedule(); } });
    schedule();
  }
})();

// Live queue: poll /api/version every second and reload the queue when the set of open
// reviews changed, unless the reviewer has selected rows (then say so instead).
(function () {
  var form = document.getElementById("bulk");
  if (!form || !window.fetch) { return; }
  var shown = form.getAttribute("data-version");
  var note = document.getElementById("live");
  function tick() {
    fetch("/api/version", {credentials: "same-origin", cache: "no-store"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) {
        if (!body || body.version === shown) { return; }
        if (form.querySelector("input[name=selected]:checked")) {
          note.textContent = "The queue changed: reload to see it.";
          return;
        }
        window.location.reload();
      })
      .catch(function () {});
  }
  setInterval(tick, 1000);
})();

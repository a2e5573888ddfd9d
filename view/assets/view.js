// proctor view: the viewer's only script, served from its own origin (the
// Content-Security-Policy allows no other). Two jobs, both optional: a
// page without script still shows everything.
//
// 1. A live run page listens to its log's stream (Server-Sent Events) and,
//    when records are appended, updates the done count at once and
//    reloads the page's main content at most once a second.
// 2. A transcript opened on the sample page is fetched when opened.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (main && main.dataset.events && window.EventSource) {
    var shown = main.dataset.version, want = shown, busy = false, timer = null;
    var reload = function () {
      timer = null;
      if (busy || want === shown) return;
      busy = true;
      var target = want;
      var url = location.pathname + location.search + (location.search ? "&" : "?") + "partial=1";
      fetch(url, { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) throw new Error(r.status);
        return r.text();
      }).then(function (html) {
        main.innerHTML = html; // rendered and escaped by the server's templates
        shown = target;
        main.dataset.version = target;
      }).catch(function () {}).then(function () {
        busy = false;
        if (want !== shown && !timer) timer = setTimeout(reload, 1000);
      });
    };
    var es = new EventSource(main.dataset.events);
    es.addEventListener("update", function (e) {
      var c = JSON.parse(e.data);
      want = String(c.version);
      var done = document.getElementById("done");
      if (done) done.textContent = c.episodes;
      if (!timer) timer = setTimeout(reload, busy ? 1000 : 200);
    });
    es.addEventListener("failed", function () { es.close(); });
  }
  document.addEventListener("toggle", function (e) {
    var d = e.target;
    if (!d || d.tagName !== "DETAILS" || !d.open || !d.dataset.src || d.dataset.loaded) return;
    d.dataset.loaded = "1";
    var body = d.querySelector(".body");
    fetch(d.dataset.src, { credentials: "same-origin" }).then(function (r) { return r.text(); })
      .then(function (html) { body.innerHTML = html; }) // escaped by the server
      .catch(function (err) { body.textContent = "could not load the transcript: " + err; });
  }, true);
})();

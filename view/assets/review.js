// proctor view, review mode: keyboard shortcuts on the review page. p
// passes, f fails, n goes to the note, t opens the transcript; keys typed
// into a field are the field's. The page works without script.
(function () {
  "use strict";
  var form = document.getElementById("grade");
  if (!form) return;
  // On keyup: a key that moves the focus then leaves its character behind.
  document.addEventListener("keyup", function (ev) {
    var t = ev.target;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (t && (t.tagName === "TEXTAREA" || t.tagName === "INPUT")) {
      if (ev.key === "Escape") t.blur();
      return;
    }
    var click = function (id) {
      var b = document.getElementById(id);
      if (b) { ev.preventDefault(); b.click(); }
    };
    switch (ev.key) {
      case "p": click("pass"); break;
      case "f": click("fail"); break;
      case "t": click("transcript"); break;
      case "n": ev.preventDefault(); document.getElementById("note").focus(); break;
    }
  });
  form.dataset.keys = "on"; // the shortcuts are live
})();

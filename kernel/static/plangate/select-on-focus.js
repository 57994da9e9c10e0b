// Selects the whole value of a field marked data-select-on-focus when it gets focus, so a
// secret shown once (a new API key) is copied whole. A file, not an inline handler: the
// Content-Security-Policy allows no inline script.
"use strict";
document.addEventListener("focusin", (event) => {
  const field = event.target;
  if (field instanceof HTMLInputElement && field.hasAttribute("data-select-on-focus")) {
    field.select();
  }
});

// A "Copy" button beside a secret shown once (an API key, an audit token, an invite link):
// <button type="button" data-copy-from="ID"> copies the value of the field with that id and
// says so on the button. A file, not an inline handler: the Content-Security-Policy allows
// no inline script. Without the clipboard API (a page not served over HTTPS nor from
// localhost), the field's text is selected and copied the older way.
"use strict";
document.addEventListener("click", (event) => {
  const button = event.target instanceof Element ? event.target.closest("[data-copy-from]") : null;
  if (!button) {
    return;
  }
  const field = document.getElementById(button.getAttribute("data-copy-from"));
  if (!field) {
    return;
  }
  const label = button.getAttribute("data-copy-label") || button.textContent;
  button.setAttribute("data-copy-label", label);
  const say = (text) => {
    button.textContent = text;
    window.setTimeout(() => {
      button.textContent = label;
    }, 4000);
  };
  const copyBySelection = () => {
    field.focus();
    field.select();
    say(document.execCommand("copy") ? "Copied" : "Press Ctrl+C to copy");
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(field.value).then(() => say("Copied"), copyBySelection);
  } else {
    copyBySelection();
  }
});

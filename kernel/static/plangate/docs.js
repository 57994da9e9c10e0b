// Starts Redoc on /v1/docs. A file, not an inline script: the Content-Security-Policy allows
// no inline script. Redoc's styles get the nonce the page's policy names for them.
"use strict";
const container = document.getElementById("redoc");
Redoc.init(container.dataset.specUrl, { nonce: container.dataset.styleNonce }, container);

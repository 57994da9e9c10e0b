// Builds the policy editor's bundle from the packages package-lock.json pins:
// ../../kernel/static/plangate/vendor/codemirror-json.js (window.PlangateCodeMirror) and, beside
// it, the licences of every package bundled in it. See README.md.
import { build } from "esbuild";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

const out = "../../kernel/static/plangate/vendor/codemirror-json.js";
const result = await build({
  entryPoints: ["entry.mjs"],
  bundle: true,
  minify: true,
  format: "iife",
  globalName: "PlangateCodeMirror",
  target: "es2020",
  legalComments: "none",
  metafile: true,
  outfile: out,
});

const packages = new Map();
for (const input of Object.keys(result.metafile.inputs)) {
  const match = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
  if (match) {
    const root = input.slice(0, match.index) + `node_modules/${match[1]}`;
    packages.set(match[1], root);
  }
}
const notices = [...packages.entries()]
  .sort(([a], [b]) => a.localeCompare(b))
  .map(([name, root]) => {
    const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    const file = ["LICENSE", "LICENSE.md", "LICENSE.txt"].map((f) => join(root, f)).find(existsSync);
    const text = file ? readFileSync(file, "utf8").trim() : `License: ${manifest.license}`;
    return `${name} ${manifest.version} (${manifest.license})\n\n${text}\n`;
  });
writeFileSync(
  join(dirname(out), "codemirror-json.LICENSES.txt"),
  "The packages bundled in codemirror-json.js (built by scripts/policy-editor), and their licences.\n\n" +
    notices.join("\n" + "-".repeat(78) + "\n\n"),
);
console.log(`${out}: ${[...packages.keys()].sort().join(", ")}`);

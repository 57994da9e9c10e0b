// What kernel/static/plangate/json-editor.js uses, bundled into one file the page loads as
// window.PlangateCodeMirror (no module loader, no eval: the Content-Security-Policy allows
// neither inline script nor 'unsafe-eval'). Build: see README.md in this folder.
export { EditorState } from "@codemirror/state";
export {
  EditorView,
  drawSelection,
  highlightActiveLine,
  highlightActiveLineGutter,
  keymap,
  lineNumbers,
} from "@codemirror/view";
export { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
export {
  bracketMatching,
  defaultHighlightStyle,
  ensureSyntaxTree,
  foldGutter,
  indentOnInput,
  syntaxHighlighting,
  syntaxTree,
} from "@codemirror/language";
export { json, jsonParseLinter } from "@codemirror/lang-json";
export { forceLinting, lintGutter, linter } from "@codemirror/lint";
export { Validator } from "@cfworker/json-schema";

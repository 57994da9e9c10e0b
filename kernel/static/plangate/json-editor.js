// The JSON editor of a document field (a policy): CodeMirror 6 in place of the textarea, with
// line numbers, highlighting, and the problems of the text as it is typed: invalid JSON at its
// line and column, and every place the document breaks its JSON Schema, by path (as the
// server names them: rules[1].effect) and line. The textarea stays in the form, hidden, and
// holds the editor's text, so saving posts it as before; the server's validation remains the
// authority. Without this script the textarea is the editor.
//
// Markup (kernel.admin_widgets.JSONEditorWidget): <textarea data-json-editor
// data-json-schema="ID"> where ID is a <script type="application/json"> holding the schema.
// The editor (window.PlangateCodeMirror) is plangate/vendor/codemirror-json.js, built from npm
// packages by scripts/policy-editor. A file, not an inline script: the Content-Security-Policy
// allows no inline script and no eval, and the schema validator needs neither.
"use strict";
(() => {
  const cm = window.PlangateCodeMirror;
  const PLAIN_NAME = /^[A-Za-z_][A-Za-z0-9_-]*$/;
  const MAX_SHOWN = 50;

  // --- paths ------------------------------------------------------------------------------

  function pointerSegments(pointer) {
    // "#/rules/0/effect" -> ["rules", "0", "effect"] (RFC 6901 escapes undone)
    const text = pointer.replace(/^#/, "");
    if (text === "") {
      return [];
    }
    return text
      .slice(1)
      .split("/")
      .map((part) => decodeURIComponent(part).replace(/~1/g, "/").replace(/~0/g, "~"));
  }

  function pathText(segments, value) {
    // The server's spelling (guard._document.key_path / index_path).
    let path = "";
    let current = value;
    for (const segment of segments) {
      if (Array.isArray(current)) {
        path += `[${segment}]`;
      } else if (PLAIN_NAME.test(segment)) {
        path += path ? `.${segment}` : segment;
      } else {
        path += `[${JSON.stringify(segment)}]`;
      }
      current = current !== null && typeof current === "object" ? current[segment] : undefined;
    }
    return path || "(document)";
  }

  function schemaAt(schema, pointer) {
    let node = schema;
    for (const segment of pointerSegments(pointer)) {
      if (node === null || typeof node !== "object") {
        return undefined;
      }
      node = node[segment];
    }
    return node;
  }

  // --- where a path is in the text (the syntax tree of @codemirror/lang-json) ---------------

  function valueChildren(node) {
    const children = [];
    for (let child = node.firstChild; child; child = child.nextSibling) {
      if (!["[", "]", "{", "}", ",", ":", "⚠"].includes(child.type.name)) {
        children.push(child);
      }
    }
    return children;
  }

  function nodeAtPath(state, segments) {
    // Parsed to the end (the editor parses in the background, a screenful at a time).
    const tree = cm.ensureSyntaxTree(state, state.doc.length, 500) || cm.syntaxTree(state);
    let node = valueChildren(tree.topNode)[0];
    for (const segment of segments) {
      if (!node) {
        return null;
      }
      if (node.type.name === "Object") {
        let found = null;
        for (const property of valueChildren(node)) {
          const name = property.getChild("PropertyName");
          if (name && JSON.parse(state.sliceDoc(name.from, name.to)) === segment) {
            // (Syntax nodes are made anew at each access: compared by type, not identity.)
            const values = valueChildren(property).filter((child) => child.type.name !== "PropertyName");
            found = values[0] || name;
          }
        }
        node = found;
      } else if (node.type.name === "Array") {
        node = valueChildren(node)[Number(segment)] || null;
      } else {
        return null;
      }
    }
    return node || null;
  }

  // --- the problems -----------------------------------------------------------------------

  function quoteAll(values) {
    return values.map((value) => JSON.stringify(value)).join(", ");
  }

  function schemaProblems(value, schema) {
    const result = new cm.Validator(schema, "2020-12", false).validate(value);
    if (result.valid) {
      return [];
    }
    // Keep what names the fault, not the wrappers that only say "something inside failed";
    // an alternative's own reasons are left out when the alternatives' summary is shown.
    // A schema told apart by `if`/`then` (a policy's version) reports its branch's own
    // errors after a summary that the branch did not match: the summary goes too.
    const wrappers = [
      "properties",
      "items",
      "additionalProperties",
      "allOf",
      "$ref",
      "if",
      "then",
      "else",
    ];
    const alternatives = result.errors
      .filter((error) => error.keyword === "oneOf" || error.keyword === "anyOf")
      .map((error) => `${error.keywordLocation}/`);
    const problems = [];
    const seen = new Set();
    let unknownField = null;
    for (const error of result.errors) {
      if (error.keyword === "additionalProperties") {
        // Followed by the field's own error; for an unknown field (`false`), that error
        // names the field's place in the document but not in the schema: this does.
        unknownField = error.keywordLocation;
      }
      const keywordLocation =
        error.keyword === "false" && unknownField ? unknownField : error.keywordLocation;
      if (wrappers.includes(error.keyword)) {
        continue;
      }
      if (alternatives.some((prefix) => keywordLocation.startsWith(prefix))) {
        continue;
      }
      let segments = pointerSegments(error.instanceLocation);
      let message = error.error;
      const rule = schemaAt(schema, error.keywordLocation);
      if (error.keyword === "required") {
        const missing = /required property "(.*)"/.exec(error.error);
        if (missing) {
          segments = [...segments, missing[1]];
          message = "is required";
        }
      } else if (error.keyword === "false") {
        const parent = schemaAt(schema, keywordLocation.replace(/\/additionalProperties$/, ""));
        const known = parent && parent.properties ? Object.keys(parent.properties) : [];
        message = `unknown field (expected ${known.join(", ")})`;
      } else if (error.keyword === "enum" && Array.isArray(rule)) {
        message = `must be one of ${quoteAll(rule)}`;
      } else if (error.keyword === "const") {
        message = `must be ${JSON.stringify(rule)}`;
      } else if (error.keyword === "type") {
        message = `must be of type ${Array.isArray(rule) ? rule.join(" or ") : rule}`;
      } else if (error.keyword === "oneOf") {
        const parent = schemaAt(schema, error.keywordLocation.replace(/\/oneOf$/, ""));
        const operators = (rule || []).flatMap((option) => Object.keys(option.properties || {}));
        message = operators.length
          ? `must be an object with exactly one operator: ${operators.join(", ")}`
          : (parent && parent.description) || message;
      } else if (error.keyword === "pattern") {
        message = `does not match ${rule}`;
      }
      const key = `${segments.join("\u0000")}|${message}`;
      if (!seen.has(key)) {
        seen.add(key);
        problems.push({ segments, message });
      }
    }
    return problems;
  }

  function diagnose(view, schema) {
    const state = view.state;
    const text = state.doc.toString();
    let value;
    try {
      value = JSON.parse(text);
    } catch (error) {
      const found = cm.jsonParseLinter()(view);
      const at = found.length ? found[0].from : 0;
      const line = state.doc.lineAt(Math.min(at, state.doc.length));
      const where = `line ${line.number}, column ${at - line.from + 1}`;
      const message = `Not valid JSON: ${error.message.replace(/ in JSON at position \d+.*$/, "")}`;
      return [
        {
          from: at,
          to: Math.min(at + 1, state.doc.length),
          severity: "error",
          message,
          listed: `${where}: ${message}`,
        },
      ];
    }
    return schemaProblems(value, schema).map(({ segments, message }) => {
      const path = pathText(segments, value);
      let node = nodeAtPath(state, segments);
      if (!node) {
        // A missing field: mark the object that lacks it.
        node = nodeAtPath(state, segments.slice(0, -1));
      }
      const from = node ? node.from : 0;
      const to = node ? Math.min(node.to, state.doc.lineAt(from).to) : 0;
      const line = state.doc.lineAt(from).number;
      return {
        from,
        to: Math.max(to, Math.min(from + 1, state.doc.length)),
        severity: "error",
        message: `${path}: ${message}`,
        listed: `${path} (line ${line}): ${message}`,
      };
    });
  }

  function showList(list, status, diagnostics) {
    list.replaceChildren();
    for (const diagnostic of diagnostics.slice(0, MAX_SHOWN)) {
      const item = document.createElement("li");
      item.textContent = diagnostic.listed;
      list.append(item);
    }
    if (diagnostics.length > MAX_SHOWN) {
      const item = document.createElement("li");
      item.textContent = `… and ${diagnostics.length - MAX_SHOWN} more`;
      list.append(item);
    }
    status.textContent = diagnostics.length
      ? `${diagnostics.length} problem${diagnostics.length === 1 ? "" : "s"} in the document:`
      : "No problem found: valid JSON that matches the policy schema. Saving checks it again.";
    status.className = diagnostics.length
      ? "plangate-editor-status errors"
      : "plangate-editor-status ok";
  }

  // --- the editor ---------------------------------------------------------------------------

  // The editor's own look (the page's style sheets do not reach into its shadow root).
  const THEME = cm.EditorView.theme({
    "&": { maxHeight: "70vh", minHeight: "12em", fontSize: "13px", backgroundColor: "#fff", color: "#333" },
    "&.cm-focused": { outline: "2px solid #79aec8" },
    ".cm-scroller": {
      fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
      lineHeight: "1.45",
      overflow: "auto",
    },
    ".cm-gutters": { backgroundColor: "#f8f8f8", color: "#666", borderRight: "1px solid #ddd" },
  });

  function attach(textarea) {
    const schemaElement = document.getElementById(textarea.getAttribute("data-json-schema"));
    const schema = schemaElement ? JSON.parse(schemaElement.textContent) : true;
    const holder = document.createElement("div");
    holder.className = "plangate-editor";
    // In a shadow root, CodeMirror's styles are constructed style sheets, which the
    // Content-Security-Policy does not govern; in the document they would be <style>
    // elements, which it refuses.
    const root = holder.attachShadow({ mode: "open" });
    const status = document.createElement("p");
    const list = document.createElement("ul");
    list.className = "plangate-json-errors plangate-editor-problems";
    status.setAttribute("aria-live", "polite");
    const hint = document.createElement("p");
    hint.className = "help";
    hint.textContent = "Tab indents; to move on with the keyboard, press Esc, then Tab.";
    const wrapper = document.createElement("div");
    wrapper.className = "plangate-editor-wrap";
    wrapper.append(holder, hint, status, list);
    textarea.after(wrapper);
    textarea.classList.add("plangate-editor-source");

    const lint = cm.linter(
      (view) => {
        const diagnostics = diagnose(view, schema);
        showList(list, status, diagnostics);
        return diagnostics.map(({ from, to, severity, message }) => ({
          from,
          to,
          severity,
          message,
        }));
      },
      { delay: 250 },
    );
    const view = new cm.EditorView({
      parent: root,
      root,
      state: cm.EditorState.create({
        doc: textarea.value,
        extensions: [
          cm.lineNumbers(),
          cm.highlightActiveLineGutter(),
          cm.foldGutter(),
          cm.history(),
          cm.drawSelection(),
          cm.indentOnInput(),
          cm.bracketMatching(),
          cm.syntaxHighlighting(cm.defaultHighlightStyle),
          cm.highlightActiveLine(),
          cm.keymap.of([...cm.defaultKeymap, ...cm.historyKeymap, cm.indentWithTab]),
          cm.EditorState.tabSize.of(2),
          cm.json(),
          lint,
          cm.lintGutter(),
          THEME,
          cm.EditorView.contentAttributes.of({
            "aria-label": textarea.getAttribute("aria-label") || "JSON document",
          }),
          cm.EditorView.updateListener.of((update) => {
            if (update.docChanged) {
              textarea.value = update.state.doc.toString();
            }
          }),
        ],
      }),
    });
    // The label of the field now points at the editor.
    const label = document.querySelector(`label[for="${textarea.id}"]`);
    if (label) {
      label.addEventListener("click", () => view.focus());
    }
    textarea.plangateEditor = view;
    cm.forceLinting(view);
  }

  function start() {
    if (!cm) {
      return; // the bundle did not load: the textarea stays the editor
    }
    document.querySelectorAll("textarea[data-json-editor]").forEach(attach);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();

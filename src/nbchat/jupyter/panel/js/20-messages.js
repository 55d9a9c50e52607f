// ---------------------------------------------------------------- code blocks

function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    return navigator.clipboard.writeText(text).then(() => true, () => copyByCommand(text));
  }
  return Promise.resolve(copyByCommand(text));
}

function copyByCommand(text) {
  const area = node("textarea");
  area.value = text;
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  let done = false;
  try {
    done = document.execCommand("copy");
  } catch (_) {
    done = false;
  }
  area.remove();
  return done;
}

// The notebook this kernel's widgets belong to, when the front end is
// JupyterLab (its widget manager knows the document); null elsewhere.
function notebookModel(model) {
  const manager = model.widget_manager;
  const context = manager && manager.context;
  const shared = context && context.model && context.model.sharedModel;
  return shared && typeof shared.insertCell === "function" ? shared : null;
}

function insertIndex(shared, el) {
  const cells = shared.cells ? shared.cells.length : 0;
  const notebook =
    el.closest(".jp-Notebook") ||
    document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook");
  if (!notebook) return cells;
  const shown = [...notebook.querySelectorAll(".jp-Cell")];
  const active = shown.findIndex((cell) => cell.classList.contains("jp-mod-active"));
  return shown.length === cells && active >= 0 ? active + 1 : cells;
}

function decorateCode(body, model, el) {
  for (const pre of body.querySelectorAll("pre")) {
    if (pre.parentElement && pre.parentElement.classList.contains("nbchat-codeblock")) continue;
    const block = node("div", "nbchat-codeblock");
    pre.replaceWith(block);
    block.appendChild(pre);
    const tools = node("div", "nbchat-code-tools");
    const copy = labelButton("copy", "Copy", "nbchat-copy");
    copy.addEventListener("click", () => {
      copyText(pre.textContent).then((done) => {
        copy.classList.toggle("nbchat-done", !!done);
        copy.lastChild.textContent = done ? "Copied" : "Copy failed";
        setTimeout(() => {
          copy.classList.remove("nbchat-done");
          copy.lastChild.textContent = "Copy";
        }, 1500);
      });
    });
    tools.appendChild(copy);
    if (notebookModel(model)) {
      const insert = labelButton("cell", "Insert", "nbchat-insert");
      insert.title = "Insert as a new cell";
      insert.setAttribute("aria-label", "Insert as a new cell");
      insert.addEventListener("click", () => {
        const shared = notebookModel(model);
        if (!shared) return;
        const source = pre.textContent.replace(/\n$/, "");
        shared.insertCell(insertIndex(shared, el), { cell_type: "code", source, metadata: {} });
      });
      tools.appendChild(insert);
    }
    block.appendChild(tools);
  }
}

// ---------------------------------------------------------------- messages

function parseMarkup(html) {
  const template = document.createElement("template"); // inert: nothing in it loads or runs
  template.innerHTML = html; // made by nbchat.markup in the kernel
  return template.content;
}

// Brings `drawn` (drawn from the markup `before`, then decorated) to the markup `after`,
// touching only what changed: the blocks a streaming answer has settled keep their nodes,
// so the browser keeps their style and layout, and a text that grew is appended to.
function redrawChanged(drawn, before, after, model, el) {
  const was = before.childNodes;
  const now = after.childNodes;
  let kept = 0;
  if (drawn.childNodes.length === was.length) {
    while (kept < was.length && kept < now.length && was[kept].isEqualNode(now[kept])) kept++;
    if (kept < was.length && kept < now.length &&
        grew(drawn.childNodes[kept], was[kept], now[kept], model, el)) kept++;
  }
  while (drawn.childNodes.length > kept) drawn.lastChild.remove();
  const added = document.createElement("div");
  for (let n = kept; n < now.length; n++) added.appendChild(now[n].cloneNode(true));
  decorateCode(added, model, el);
  replaceEmoji(added);
  drawn.append(...added.childNodes);
}

function grew(drawn, was, now, model, el) {
  if (was.nodeType === Node.TEXT_NODE && now.nodeType === Node.TEXT_NODE) {
    if (drawn.nodeType !== Node.TEXT_NODE || !now.data.startsWith(was.data)) return false;
    drawn.appendData(withDrawnEmoji(now.data.slice(was.data.length)));
    return true;
  }
  const same = was.nodeType === Node.ELEMENT_NODE && now.nodeType === Node.ELEMENT_NODE &&
    drawn.nodeType === Node.ELEMENT_NODE && was.tagName === now.tagName && was.tagName !== "PRE" &&
    was.attributes.length === now.attributes.length &&
    [...was.attributes].every((a) => now.getAttribute(a.name) === a.value);
  if (same) redrawChanged(drawn, was, now, model, el); // a <pre> is drawn with its tools: redrawn
  return same;
}

function usageLine(text) {
  // One span a value, so that a narrow panel wraps between values, never inside one.
  const line = node("div", "nbchat-message-usage");
  const small = node("small");
  text.split(" · ").forEach((part, n) => {
    if (n) small.appendChild(document.createTextNode(" · "));
    small.appendChild(node("span", "nbchat-value", part));
  });
  line.appendChild(small);
  return line;
}

// The footer's Undo, for a turn that changed the notebook: the kernel puts its cells back.
function undoButton(turn, model) {
  const undo = labelButton("undo", "Undo this turn", "nbchat-undo-turn");
  undo.title = "Put back the cells this turn changed (cells you changed since are kept)";
  // The redraw after the undo drops the button; a second click is told it is undone already.
  undo.addEventListener("click", () => model.send({ event: "undo", value: turn }));
  return undo;
}

function messageNodes(message, model, el) {
  const nodes = [];
  if (message.query) {
    const mine = node("div", "nbchat-message nbchat-from-person");
    mine.append(node("div", "nbchat-who", "You"), node("div", "nbchat-bubble", message.query));
    nodes.push(mine);
  }
  const theirs = node("div", "nbchat-message nbchat-from-model");
  const who = node("div", "nbchat-who");
  who.append(node("span", "nbchat-avatar"), node("span", "nbchat-value", message.model || "Assistant"));
  theirs.appendChild(who);
  const body = node("div", "nbchat-md nbchat-body");
  body.append(parseMarkup(message.html || ""));
  decorateCode(body, model, el);
  theirs.appendChild(body);
  // The model has its own line above: the footer is the time and the usage.
  const about = [message.time, message.usage].filter(Boolean);
  if (about.length) theirs.appendChild(usageLine(about.join(" · ")));
  if (Number.isInteger(message.undo)) theirs.appendChild(undoButton(message.undo, model));
  nodes.push(theirs);
  return nodes;
}

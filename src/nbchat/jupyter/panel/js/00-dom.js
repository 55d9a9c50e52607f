// The chat panel's front end: a header with the thread's title and a thread
// switcher, the conversation as messages, and an input with the model picker
// and context chips. State comes from the kernel's traits; what the person
// does goes back as custom messages ({event: "submit" | "stop" | ...}).
//
// Only the `html` of a message (made in Python by nbchat.markup) is set as
// HTML. Every other text (questions, titles, model names, usage, errors)
// goes in with textContent.

const SHORTCUT = "Alt+Shift+C";

// The shortcut goes to one panel: the side one when it shows, else the first
// one in view. One listener for the page, whatever the number of panels (each
// widget may load its own copy of this module: the registry is the page's).
const shortcut = (globalThis.__nbchatPanelShortcut ??= { inputs: new Map(), listening: false });
const inputs = shortcut.inputs; // panel element -> its input box

function onShortcut(event) {
  if (!(event.altKey && event.shiftKey && event.code === "KeyC")) return;
  const shown = [...inputs].filter(([panel]) => panel.isConnected && panel.offsetParent !== null);
  const inView = ([panel]) => {
    const box = panel.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight;
  };
  const side = shown.find(([panel]) => panel.classList.contains("nbchat-panel-side"));
  const target = side || shown.find(inView);
  if (!target) return;
  event.preventDefault();
  event.stopPropagation();
  target[1].focus();
}

function icon(name) {
  const mark = document.createElement("span");
  mark.className = `nbchat-icon nbchat-icon-${name}`; // drawn by css/10-icons.css
  mark.setAttribute("aria-hidden", "true");
  return mark;
}

function node(tag, cls, text) {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  if (text !== undefined) el.textContent = text;
  return el;
}

// A widget button, as JupyterLab's widgets make them (jupyter-button); css/00-panel.css
// keeps the class but not its looks.
function button(cls, text) {
  const made = node("button", `jupyter-button ${cls}`, text);
  made.type = "button";
  return made;
}

function iconButton(name, label, cls) {
  const made = button(`nbchat-icon-button ${cls || ""}`);
  made.title = label;
  made.setAttribute("aria-label", label);
  made.appendChild(icon(name));
  return made;
}

// A button with an icon and its word beside it.
function labelButton(name, label, cls) {
  const made = button(`nbchat-label-button ${cls || ""}`);
  made.append(icon(name), node("span", "", label));
  return made;
}

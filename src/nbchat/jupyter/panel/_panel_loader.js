// The panel's code, loaded once per page: from Jupyter Server (nbchat.jupyter.server.extension)
// where the page is one of its front ends, else from the kernel (a message).
const VERSION = "__VERSION__";
let loading = null;

function serverBase() {
  const data = document.getElementById("jupyter-config-data");
  try {
    return data ? JSON.parse(data.textContent).baseUrl || null : null;
  } catch {
    return null;
  }
}

function addStyle(id, make) {
  if (document.getElementById(id)) return;
  const style = make();
  style.id = id;
  document.head.appendChild(style);
}

async function fromServer() {
  const base = serverBase();
  if (!base) throw new Error("no Jupyter Server serves this page");
  const root = new URL(`${base}nbchat/static/`, document.baseURI);
  const module = await import(new URL(`panel-${VERSION}.js`, root).href);
  addStyle(`nbchat-panel-css-${VERSION}`, () => {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = new URL(`panel-${VERSION}.css`, root).href;
    return link;
  });
  return module;
}

function fromKernel(model) {
  return new Promise((resolve, reject) => {
    const take = (msg) => {
      if (!msg || msg.event !== "assets") return;
      model.off("msg:custom", take);
      addStyle(`nbchat-panel-css-${VERSION}`, () => {
        const style = document.createElement("style");
        style.textContent = msg.css;
        return style;
      });
      const url = URL.createObjectURL(new Blob([msg.code], { type: "text/javascript" }));
      import(url).then(resolve, reject);
    };
    model.on("msg:custom", take);
    model.send({ event: "assets" });
  });
}

export default {
  async render(context) {
    loading = loading || fromServer().catch(() => fromKernel(context.model));
    const panel = await loading;
    return panel.default.render(context);
  },
};

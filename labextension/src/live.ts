/**
 * A cell's answer while it streams, redrawn where it changed.
 *
 * JupyterLab gives a cell's output renderer the whole answer again on each update;
 * its HTML renderer then replaces everything it drew, so text the person selected in
 * the answer, or a folded block they opened, is lost a moment later. While a turn
 * streams, the kernel also sends the same markup (made safe by nbchat's renderer in the
 * kernel) under LIVE_MIME_TYPE when the page holds this extension. This renderer keeps
 * the blocks the answer has settled, nodes and all, and appends to the text that grew. The final render is plain `text/html`, so a saved
 * notebook shows the same in any front end. Only trusted outputs (made in this session)
 * use it: the factory is not `safe`, and an untrusted one falls back to `text/html`,
 * which JupyterLab sanitizes.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

export const LIVE_MIME_TYPE = 'application/vnd.nbchat.live+html';

class LiveAnswer extends Widget implements IRenderMime.IRenderer {
  private drawnFrom: DocumentFragment = document.createDocumentFragment();

  constructor(private readonly mimeType: string) {
    super();
    this.addClass('jp-RenderedHTMLCommon'); // the typography of a text/html output
    this.addClass('jp-RenderedHTML');
    this.addClass('nbchat-live');
    this.node.dataset['mimeType'] = mimeType;
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const now = parseMarkup(String(model.data[this.mimeType] ?? ''));
    redrawChanged(this.node, this.drawnFrom, now);
    this.drawnFrom = now;
    return Promise.resolve();
  }
}

function parseMarkup(html: string): DocumentFragment {
  const template = document.createElement('template'); // inert: nothing in it loads or runs
  template.innerHTML = html;
  return template.content;
}

/**
 * Brings `drawn` (drawn from the markup `before`) to the markup `after`, touching only
 * what changed: settled blocks keep their nodes (and their style and layout, and a
 * `<details>` the person opened stays open), and a text that grew is appended to.
 */
function redrawChanged(drawn: Node, before: Node, after: Node): void {
  const was = before.childNodes;
  const now = after.childNodes;
  let kept = 0;
  if (drawn.childNodes.length === was.length) {
    while (kept < was.length && kept < now.length && was[kept].isEqualNode(now[kept])) {
      kept++;
    }
    if (kept < was.length && kept < now.length && grew(drawn.childNodes[kept], was[kept], now[kept])) {
      kept++;
    }
  }
  while (drawn.childNodes.length > kept) {
    drawn.removeChild(drawn.lastChild!);
  }
  const added = document.createDocumentFragment();
  for (let n = kept; n < now.length; n++) {
    added.appendChild(now[n].cloneNode(true));
  }
  drawn.appendChild(added);
}

function grew(drawn: Node, was: Node, now: Node): boolean {
  if (isText(was) && isText(now)) {
    if (!isText(drawn) || !now.data.startsWith(was.data)) {
      return false;
    }
    drawn.appendData(now.data.slice(was.data.length));
    return true;
  }
  const same =
    isElement(was) &&
    isElement(now) &&
    isElement(drawn) &&
    was.tagName === now.tagName &&
    was.attributes.length === now.attributes.length &&
    Array.from(was.attributes).every(a => now.getAttribute(a.name) === a.value);
  if (same) {
    redrawChanged(drawn, was, now);
  }
  return same;
}

function isText(node: Node): node is Text {
  return node.nodeType === Node.TEXT_NODE;
}

function isElement(node: Node): node is Element {
  return node.nodeType === Node.ELEMENT_NODE;
}

const factory: IRenderMime.IRendererFactory = {
  safe: false,
  mimeTypes: [LIVE_MIME_TYPE],
  defaultRank: 40, // before text/html (50), which the same update also carries
  createRenderer: options => new LiveAnswer(options.mimeType)
};

const extension: IRenderMime.IExtension = {
  id: 'nbchat:live-answer',
  description: "A cell's streaming answer, redrawn only where it changed.",
  rendererFactory: factory,
  dataType: 'string'
};

export default extension;

/**
 * Fix and Explain beside a cell's error: two buttons under the traceback, drawn in
 * the page only (a widget in the cell's layout, never an output, so nothing of them
 * is saved in the .ipynb).
 *
 * A click runs one call in the notebook's kernel, silently and outside its history:
 * `help_with_error(action, path, cell_id, source, error)` (nbchat.jupyter.kernel_api),
 * every argument a JSON string, list or object of strings, which Python reads as the
 * same value. Explain answers in the side panel; Fix asks the notebook agent there
 * for a proposal on the cell, which waits for the person's yes. A kernel that cannot
 * (no nbchat, busy, another language) says why in a notification.
 */
import { Notification } from '@jupyterlab/apputils';
import { Cell, CodeCell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { PanelLayout, Widget } from '@lumino/widgets';

import { KERNEL_API } from './open';

type Action = 'fix' | 'explain';

/** The error of an output area as the kernel reads it: strings only. */
interface ErrorOutput {
  ename: string;
  evalue: string;
  traceback: string[];
}

const BARS = new WeakMap<Cell, Widget>();

/** Keep Fix and Explain under every error of `panel`'s cells, as outputs come and go. */
export function watchErrors(panel: NotebookPanel): void {
  const seen = new WeakSet<Cell>();
  const each = () => {
    for (const cell of panel.content.widgets) {
      if (cell instanceof CodeCell && !seen.has(cell)) {
        seen.add(cell);
        cell.model.outputs.changed.connect(() => draw(panel, cell));
        draw(panel, cell);
      }
    }
  };
  panel.content.model?.cells.changed.connect(() => requestAnimationFrame(each));
  void panel.revealed.then(each);
  each();
}

/** The call the kernel runs for a click; each argument a JSON literal Python reads as is. */
export function helpCall(action: Action, path: string, cellId: string, source: string, error: ErrorOutput): string {
  const args = [action, path, cellId, source, error].map(value => JSON.stringify(value)).join(', ');
  return `__import__("${KERNEL_API}", fromlist=["_"]).help_with_error(${args})`;
}

function draw(panel: NotebookPanel, cell: CodeCell): void {
  const error = errorOf(cell);
  let bar = BARS.get(cell);
  if (!error) {
    bar?.dispose();
    BARS.delete(cell);
    return;
  }
  if (!bar || bar.isDisposed) {
    bar = new Widget();
    bar.addClass('nbchat-error-help');
    bar.node.append(
      button('Fix', 'Propose a fix for this cell in the chat (it waits for your yes)', () => void ask(panel, cell, 'fix')),
      button('Explain', 'Explain this error in the chat', () => void ask(panel, cell, 'explain'))
    );
    BARS.set(cell, bar);
  }
  const layout = cell.layout as PanelLayout;
  if (layout.widgets.indexOf(bar) < 0) {
    const outputs = layout.widgets.findIndex(w => w.hasClass('jp-Cell-outputWrapper'));
    layout.insertWidget(outputs < 0 ? layout.widgets.length : outputs + 1, bar);
  }
}

function errorOf(cell: CodeCell): ErrorOutput | null {
  const outputs = cell.model.outputs;
  for (let i = outputs.length - 1; i >= 0; i--) {
    const output = outputs.get(i).toJSON() as Record<string, unknown>;
    if (output.output_type === 'error') {
      const lines = Array.isArray(output.traceback) ? output.traceback : [];
      return {
        ename: String(output.ename ?? ''),
        evalue: String(output.evalue ?? ''),
        traceback: lines.map(line => String(line))
      };
    }
  }
  return null;
}

async function ask(panel: NotebookPanel, cell: CodeCell, action: Action): Promise<void> {
  const error = errorOf(cell);
  const kernel = panel.sessionContext.session?.kernel;
  if (!error || !kernel) {
    Notification.warning('nbchat: this notebook has no kernel to ask; start one, run the cell again.', { autoClose: 6000 });
    return;
  }
  const code = helpCall(action, panel.context.path, cell.model.id, cell.model.sharedModel.getSource(), error);
  const future = kernel.requestExecute(
    // allow_stdin: a person asked, so the kernel streams the answer and stays free.
    { code, silent: true, store_history: false, allow_stdin: true, stop_on_error: false },
    true
  );
  const reply = await future.done;
  const content = reply.content;
  if (content.status === 'error') {
    const missing = content.ename === 'ModuleNotFoundError' && /'nbchat(\.|')/.test(content.evalue);
    const why = missing
      ? 'nbchat is not installed for this kernel: run %pip install nbchat in a cell.'
      : content.evalue || content.ename;
    Notification.warning(`nbchat: ${action === 'fix' ? 'Fix' : 'Explain'} did not start: ${why}`, { autoClose: 8000 });
  }
}

function button(label: string, title: string, onClick: () => void): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = `jp-Button nbchat-error-button nbchat-error-${label.toLowerCase()}`;
  b.textContent = label;
  b.title = title;
  b.addEventListener('click', onClick);
  return b;
}

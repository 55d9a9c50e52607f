/**
 * Ask in the cell (Ctrl/⌘+I in a cell's editor, the palette, the cell's context menu):
 * a one-line box on the cell; with lines selected, the question is about them.
 *
 * Enter runs one call in the notebook's kernel, silently and outside its history:
 * `ask_in_cell(path, cell_id, source, selection, question)` (nbchat.jupyter.kernel_api),
 * each argument a JSON string, which Python reads as the same string. The question is
 * a turn of the side panel's thread, answered by the notebook agent with a proposal on
 * that cell, drawn by `proposals.ts`; the box hands the proposal the keyboard: Enter or
 * Tab accepts it, Escape rejects it. Escape in the box closes it; nothing of it is saved.
 */
import { Notification } from '@jupyterlab/apputils';
import { Cell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { PanelLayout, Widget } from '@lumino/widgets';

import { KERNEL_API } from './open';
import { ProposalsView } from './proposals';

export const ASK_COMMAND = 'nbchat:ask-in-cell';
const BOXES = new WeakMap<Cell, AskBox>();
const IN_CELL_EDITOR = '.jp-Notebook.jp-mod-editMode .jp-Cell.jp-mod-active .jp-InputArea-editor';

/** A shortcut's keys as JupyterLab keeps them (`Ctrl I`, `Cmd Shift I`), and a key press. */
function pressed(keys: string, event: KeyboardEvent): boolean {
  const parts = keys.split(' ');
  const key = parts.pop() ?? '';
  const mods = new Set(parts);
  return (
    key.length === 1 &&
    event.key.toUpperCase() === key.toUpperCase() &&
    event.ctrlKey === mods.has('Ctrl') &&
    event.metaKey === mods.has('Cmd') &&
    event.altKey === mods.has('Alt') &&
    event.shiftKey === mods.has('Shift')
  );
}

/**
 * The editor's own keymap takes Mod-i first (CodeMirror's selectParentSyntax, which
 * also prevents the default, so JupyterLab never sees the key). In a cell's editor the
 * shortcut bound to the command (Accel I unless changed in the Settings Editor) is
 * caught on its way down instead, and runs the command once.
 */
export function catchAskKey(commands: {
  keyBindings: readonly { command: string; keys: readonly string[] }[];
  execute: (id: string) => Promise<unknown>;
}): void {
  document.addEventListener(
    'keydown',
    event => {
      const target = event.target as Element | null;
      if (event.defaultPrevented || event.isComposing || !target?.closest?.(IN_CELL_EDITOR)) {
        return;
      }
      const ours = commands.keyBindings.filter(b => b.command === ASK_COMMAND && b.keys.length === 1);
      if (ours.some(b => pressed(b.keys[0], event))) {
        event.preventDefault();
        event.stopPropagation();
        void commands.execute(ASK_COMMAND);
      }
    },
    true
  );
}

/** The call the kernel runs for a question; each argument a JSON literal Python reads as is. */
export function askCall(path: string, cellId: string, source: string, selection: string, question: string): string {
  const args = [path, cellId, source, selection, question].map(value => JSON.stringify(value)).join(', ');
  return `__import__("${KERNEL_API}", fromlist=["_"]).ask_in_cell(${args})`;
}

/** Open the box on `panel`'s active cell (or focus the one open there). */
export function openAskBox(panel: NotebookPanel): void {
  const cell = panel.content.activeCell;
  if (!cell) {
    return;
  }
  let box = BOXES.get(cell);
  if (!box || box.isDisposed) {
    box = new AskBox(panel, cell);
    BOXES.set(cell, box);
  }
  box.open(selectedText(cell));
}

/** The selected text of the cell's editor; empty for a mere cursor. */
function selectedText(cell: Cell): string {
  const editor = cell.editor;
  if (!editor) {
    return '';
  }
  const { start, end } = editor.getSelection();
  const from = editor.getOffsetAt(start);
  const to = editor.getOffsetAt(end);
  return from === to ? '' : editor.model.sharedModel.getSource().slice(Math.min(from, to), Math.max(from, to));
}

class AskBox extends Widget {
  private readonly input: HTMLInputElement;
  private readonly note: HTMLElement;
  private selection = '';

  constructor(
    private readonly panel: NotebookPanel,
    private readonly cell: Cell
  ) {
    super();
    this.addClass('nbchat-ask-box');
    this.input = document.createElement('input');
    this.input.type = 'text';
    this.input.className = 'nbchat-ask-input';
    this.input.setAttribute('aria-label', 'Ask about this cell');
    this.note = document.createElement('span');
    this.note.className = 'nbchat-ask-note';
    this.node.append(this.input, this.note);
    // The notebook would take these keys (and a press) for its own commands.
    this.node.addEventListener('keydown', event => this.onKey(event));
    this.node.addEventListener('mousedown', event => event.stopPropagation());
  }

  open(selection: string): void {
    this.selection = selection;
    this.input.placeholder = selection
      ? `Ask about the ${lines(selection)} selected (Enter to send, Escape to close)`
      : 'Ask about this cell (Enter to send, Escape to close)';
    this.note.textContent = '';
    this.input.disabled = false;
    const layout = this.cell.layout as PanelLayout;
    if (layout.widgets.indexOf(this) < 0) {
      const input = layout.widgets.findIndex(w => w.hasClass('jp-Cell-inputWrapper'));
      layout.insertWidget(input + 1, this);
    }
    this.input.focus();
  }

  close(): void {
    this.parent = null;
    this.cell.editor?.focus();
  }

  private onKey(event: KeyboardEvent): void {
    event.stopPropagation();
    if (event.key === 'Escape') {
      event.preventDefault();
      this.close();
    } else if (event.key === 'Enter' && !event.isComposing) {
      event.preventDefault();
      void this.send();
    }
  }

  private async send(): Promise<void> {
    const question = this.input.value.trim();
    const kernel = this.panel.sessionContext.session?.kernel;
    if (!question || !kernel) {
      this.note.textContent = question ? 'This notebook has no kernel to ask.' : 'Type a question first.';
      return;
    }
    this.input.disabled = true;
    this.note.textContent = 'Asking… the answer comes as a proposal on this cell.';
    const cellId = this.cell.model.id;
    ProposalsView.for(this.panel).focusNext(cellId);
    const code = askCall(this.panel.context.path, cellId, this.cell.model.sharedModel.getSource(), this.selection, question);
    const future = kernel.requestExecute(
      // allow_stdin: a person asked, so the kernel streams the answer and stays free.
    { code, silent: true, store_history: false, allow_stdin: true, stop_on_error: false },
      true
    );
    const content = (await future.done).content;
    if (content.status === 'error') {
      this.input.disabled = false;
      this.note.textContent = content.evalue || content.ename;
      Notification.warning(`nbchat: the question did not go: ${content.evalue || content.ename}`, { autoClose: 8000 });
      return;
    }
    this.input.value = '';
    this.parent = null; // the proposal takes its place (and the keyboard)
  }
}

function lines(text: string): string {
  const count = text.replace(/\n$/, '').split('\n').length;
  return count === 1 ? 'line' : `${count} lines`;
}

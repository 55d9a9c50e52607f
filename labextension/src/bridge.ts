/**
 * The comm target `nbchat.notebook`: the kernel asks to change its own notebook.
 *
 * The kernel opens a comm with `{path, notebook}`: its JPY_SESSION_NAME (maybe
 * empty) and the server-relative path of the notebook it means (maybe empty). The
 * page that has exactly that notebook open on that kernel answers `{op: "hello",
 * path, client}`; a page with another notebook on the kernel stays silent (never
 * its changes in the wrong notebook). Later requests `{id, op, ...}` get
 * `{id, ok, error?, ...}` on the same comm. Only the page the kernel heard from
 * first acts on a request: the kernel addresses it to that `client`.
 *
 * Text from the kernel goes into the notebook's model only (a cell's source,
 * its metadata); nothing here puts it into the page as markup.
 */
import { Cell, ICodeCellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { UUID } from '@lumino/coreutils';

import { ProposalsView } from './proposals';

export const TARGET = 'nbchat.notebook';

/**
 * The comm target `nbchat.page`: the kernel asks which version of its renderer's
 * stylesheet this page holds (style/markup.css), and leaves it out of a cell's
 * streaming updates when it is its own.
 */
const STYLE_TARGET = 'nbchat.page';

function heldStyle(): string {
  const value = getComputedStyle(document.documentElement).getPropertyValue('--nbchat-markup-style');
  return value.trim().replace(/^"|"$/g, '');
}

/** This page, as the kernel tells pages apart. */
const CLIENT = UUID.uuid4();

type Json = KernelMessage.ICommMsgMsg['content']['data'];
type Request = { [key: string]: unknown };
type Result = { [key: string]: unknown };

class RequestError extends Error {}

const OPS = ['insert', 'edit', 'delete', 'move', 'outputs', 'execute'];

/** How long the page waits after a change before it sends the kernel the cells that changed. */
const CELLS_DELAY = 250;

/** Register the target on every kernel connection of notebooks (and consoles, which may be the one handling comms). */
export class CommTargets {
  private readonly seen = new WeakSet<Kernel.IKernelConnection>();

  constructor(
    private readonly tracker: INotebookTracker,
    private readonly localPath: (path: string) => string
  ) {}

  /** Register on `kernel` now, and on every kernel the session changes to. */
  watch(session: {
    session: { kernel: Kernel.IKernelConnection | null } | null;
    kernelChanged: { connect: (fn: (sender: unknown, args: { newValue: Kernel.IKernelConnection | null }) => void) => unknown };
  }): void {
    session.kernelChanged.connect((_, args) => this.register(args.newValue));
    this.register(session.session?.kernel ?? null);
  }

  private register(kernel: Kernel.IKernelConnection | null): void {
    if (!kernel || this.seen.has(kernel)) {
      return;
    }
    this.seen.add(kernel);
    kernel.registerCommTarget(TARGET, (comm, msg) => this.open(kernel, comm, msg));
    // The kernel closes the comm once it has read the answer.
    kernel.registerCommTarget(STYLE_TARGET, comm => void comm.send({ style: heldStyle() }));
    void this.reattach(kernel);
  }

  /**
   * A page loaded on a kernel that already talks to nbchat (the page was reloaded: the
   * kernel's comm is to the page that left, and no reload says so) opens a comm of its
   * own with its hello; the kernel serves it from then on.
   */
  private async reattach(kernel: Kernel.IKernelConnection): Promise<void> {
    try {
      const reply = await kernel.requestCommInfo({ target_name: TARGET });
      const comms = reply.content.status === 'ok' ? reply.content.comms : {};
      if (!Object.keys(comms).length) {
        return; // nbchat has not spoken here yet: it opens the comm itself when it does
      }
    } catch {
      return; // the kernel went away, or answers no comm info
    }
    for (const panel of this.tracker.filter(p => p.sessionContext.session?.kernel?.id === kernel.id)) {
      const comm = kernel.createComm(TARGET);
      this.attach(panel, comm);
      comm.open({ op: 'hello', path: this.localPath(panel.context.path), client: CLIENT } as Json);
      new CellsMirror(panel, comm).start();
    }
  }

  private open(kernel: Kernel.IKernelConnection, comm: Kernel.IComm, msg: KernelMessage.ICommOpenMsg): void {
    const data = (msg.content.data ?? {}) as Request;
    const path = typeof data.path === 'string' ? data.path : '';
    const notebook = typeof data.notebook === 'string' ? data.notebook : '';
    const panel = this.find(kernel.id, path, notebook);
    if (!panel) {
      return; // another page, or no notebook here on that kernel: stay silent
    }
    this.attach(panel, comm);
    comm.send({ op: 'hello', path: this.localPath(panel.context.path), client: CLIENT });
    new CellsMirror(panel, comm).start(); // after the hello: the kernel drops cells sent before it
  }

  /** Serve `panel`'s requests, proposals and answers on `comm`. */
  private attach(panel: NotebookPanel, comm: Kernel.IComm): void {
    const bridge = new Bridge(panel, comm);
    const proposals = ProposalsView.for(panel);
    comm.onClose = proposals.connect(answer => {
      if (!comm.isDisposed) {
        comm.send({ ...answer, client: CLIENT } as Json);
      }
    });
    // Not awaited: the connection handles its messages one after the other, and an
    // execute waits for messages (the run's reply) that come after this one.
    comm.onMsg = message => {
      const data = message.content.data as Request;
      if (data?.op === 'proposals' && data.id === undefined) {
        if (data.client === undefined || data.client === CLIENT) {
          proposals.show(data.proposals); // unasked: the whole list of waiting changes
        }
        return;
      }
      if ((data?.op === 'streaming' || data?.op === 'streamed') && data.id === undefined) {
        if (data.client === undefined || data.client === CLIENT) {
          proposals.stream(data); // an edit as the model writes it, or the end of those
        }
        return;
      }
      void bridge.handle(data);
    };
  }

  /**
   * The notebook on kernel `id` that the kernel means: the one at the server-relative
   * `notebook` exactly, else the one at `path`, else the only one. None when no panel
   * matches: a notebook that shares the kernel is never sent another one's changes.
   */
  private find(id: string, path: string, notebook: string): NotebookPanel | undefined {
    const panels = this.tracker.filter(p => p.sessionContext.session?.kernel?.id === id);
    if (notebook) {
      return panels.find(p => this.localPath(p.context.path) === notebook);
    }
    if (path) {
      return panels.find(p => samePath(this.localPath(p.context.path), path));
    }
    return panels.length === 1 ? panels[0] : undefined;
  }
}

/** `kernelPath` is absolute (the server's root joined with the notebook's path) or relative. */
function samePath(notebookPath: string, kernelPath: string): boolean {
  const relative = notebookPath.replace(/^\/+/, '');
  return kernelPath === relative || kernelPath.endsWith('/' + relative);
}

/** One kernel's requests for one notebook. */
class Bridge {
  constructor(
    private readonly panel: NotebookPanel,
    private readonly comm: Kernel.IComm
  ) {}

  async handle(data: Request): Promise<void> {
    if (!data || typeof data !== 'object' || (data.client !== undefined && data.client !== CLIENT)) {
      return; // addressed to another page
    }
    const id = typeof data.id === 'string' ? data.id : null;
    let reply: Result;
    try {
      if (id === null) {
        throw new RequestError('a request needs a string id');
      }
      reply = { id, ok: true, ...(await this.run(data)) };
    } catch (error) {
      const text = error instanceof RequestError ? error.message : `${error}`;
      reply = { id, ok: false, error: text };
    }
    if (!this.comm.isDisposed) {
      this.comm.send(reply as Json);
    }
  }

  private run(data: Request): Promise<Result> | Result {
    if (this.panel.isDisposed || !this.panel.content.model) {
      throw new RequestError(`the notebook ${this.panel.context.path} is closed`);
    }
    switch (data.op) {
      case 'insert':
        return this.insert(data);
      case 'edit':
        return this.edit(data);
      case 'execute':
        return this.execute(data);
      case 'delete':
        return this.remove(data);
      case 'move':
        return this.move(data);
      case 'outputs':
        return this.outputs(data);
      default:
        throw new RequestError(`unknown op ${JSON.stringify(data.op)}; the ops are ${OPS.join(', ')}`);
    }
  }

  private insert(data: Request): Result {
    const model = this.panel.content.model!;
    const count = model.cells.length;
    const index = data.index ?? count;
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index > count) {
      throw new RequestError(`index ${JSON.stringify(index)} is not a cell position from 0 to ${count}`);
    }
    const kind = data.cell_type ?? 'code';
    if (kind !== 'code' && kind !== 'markdown') {
      throw new RequestError(`cell_type ${JSON.stringify(kind)} is not code or markdown`);
    }
    const source = text(data.source ?? '', 'source');
    const metadata = metadataOf(data.metadata);
    const wanted = data.cell_id;
    if (wanted !== undefined && wanted !== null) {
      const id = text(wanted, 'cell_id');
      if ([...model.cells].some(cell => cell.id === id)) {
        throw new RequestError(`a cell with id ${JSON.stringify(id)} is already in ${this.panel.context.path}`);
      }
      const cell = model.sharedModel.insertCell(index, { cell_type: kind, source, metadata, id });
      return { cell_id: cell.id, index };
    }
    const cell = model.sharedModel.insertCell(index, { cell_type: kind, source, metadata });
    return { cell_id: cell.id, index };
  }

  /** With `strict`, a cell that no longer holds `expected` is not touched. */
  private checked(data: Request) {
    const cell = this.cellModel(data.cell_id);
    if (data.strict === true && typeof data.expected === 'string' && cell.sharedModel.getSource() !== data.expected) {
      throw new RequestError(`cell ${JSON.stringify(cell.id)} changed since the change was accepted; nothing was changed`);
    }
    return cell;
  }

  private remove(data: Request): Result {
    const cell = this.checked(data);
    const model = this.panel.content.model!;
    const index = [...model.cells].indexOf(cell);
    model.sharedModel.deleteCell(index);
    return { cell_id: cell.id };
  }

  private move(data: Request): Result {
    const cell = this.checked(data);
    const model = this.panel.content.model!;
    const count = model.cells.length;
    const to = data.index;
    if (typeof to !== 'number' || !Number.isInteger(to) || to < 0 || to >= count) {
      throw new RequestError(`index ${JSON.stringify(to)} is not a cell position from 0 to ${count - 1}`);
    }
    model.sharedModel.moveCell([...model.cells].indexOf(cell), to);
    for (const [key, value] of Object.entries(metadataOf(data.metadata))) {
      cell.setMetadata(key, value);
    }
    return { cell_id: cell.id, index: to };
  }

  private outputs(data: Request): Result {
    const cell = this.cellModel(data.cell_id);
    if (cell.type === 'code' && Array.isArray(data.outputs)) {
      const code = cell as ICodeCellModel;
      code.outputs.clear();
      for (const output of data.outputs) {
        code.outputs.add(output as any);
      }
    }
    return { cell_id: cell.id };
  }

  private edit(data: Request): Result {
    const cell = this.checked(data);
    const metadata = metadataOf(data.metadata);
    // The person's edits to the cell not yet saved, which the approved source replaces.
    const replaced = typeof data.expected === 'string' && cell.sharedModel.getSource() !== data.expected;
    if (data.source !== undefined) {
      cell.sharedModel.setSource(text(data.source, 'source'));
    }
    for (const [key, value] of Object.entries(metadata)) {
      cell.setMetadata(key, value);
    }
    return { cell_id: cell.id, replaced_unsaved: replaced };
  }

  private async execute(data: Request): Promise<Result> {
    const model = this.cellModel(data.cell_id);
    const notebook = this.panel.content;
    const cell = notebook.widgets.find((w: Cell) => w.model.id === model.id);
    if (!cell) {
      throw new RequestError(`cell ${JSON.stringify(model.id)} is not shown in ${this.panel.context.path}`);
    }
    const ran = await NotebookActions.runCells(notebook, [cell], this.panel.sessionContext);
    if (model.type !== 'code') {
      return { cell_id: model.id, execution_count: null, outputs: [], status: 'ok' };
    }
    const code = model as ICodeCellModel;
    const outputs = code.outputs.toJSON();
    if (!ran && !outputs.some(output => output.output_type === 'error')) {
      // Not run at all: no kernel, a kernel still starting, a pending input().
      throw new RequestError(`cell ${JSON.stringify(model.id)} did not run: the kernel of ${this.panel.context.path} is not ready`);
    }
    return {
      cell_id: model.id,
      execution_count: code.executionCount,
      outputs,
      status: ran ? 'ok' : 'error'
    };
  }

  private cellModel(id: unknown) {
    if (typeof id !== 'string') {
      throw new RequestError('cell_id must be a string');
    }
    for (const cell of this.panel.content.model!.cells) {
      if (cell.id === id) {
        return cell;
      }
    }
    throw new RequestError(`no cell with id ${JSON.stringify(id)} in ${this.panel.context.path}`);
  }
}

/**
 * The kernel's copy of the live notebook: every cell once, after the hello, then the
 * cells that changed (and the order), a moment after each change. Keeps the model's
 * reads of the notebook live without the kernel asking (it cannot while a cell runs).
 */
class CellsMirror {
  private readonly dirty = new Set<string>();
  private readonly watched = new WeakSet<object>();
  private timer: number | undefined;

  constructor(
    private readonly panel: NotebookPanel,
    private readonly comm: Kernel.IComm
  ) {}

  start(): void {
    const model = this.panel.content.model;
    if (!model) {
      return;
    }
    for (const cell of model.cells) {
      this.watch(cell);
    }
    model.cells.changed.connect(() => {
      for (const cell of model.cells) {
        this.watch(cell);
      }
      this.soon();
    });
    this.send();
  }

  private watch(cell: any): void {
    this.dirty.add(cell.id);
    if (this.watched.has(cell)) {
      return;
    }
    this.watched.add(cell);
    const mark = () => {
      this.dirty.add(cell.id);
      this.soon();
    };
    cell.contentChanged?.connect(mark);
    cell.stateChanged?.connect(mark);
    cell.outputs?.changed?.connect(mark);
  }

  private soon(): void {
    if (this.timer === undefined) {
      this.timer = window.setTimeout(() => this.send(), CELLS_DELAY);
    }
  }

  private send(): void {
    this.timer = undefined;
    const model = this.panel.content.model;
    if (!model || this.comm.isDisposed || this.panel.isDisposed) {
      return;
    }
    const order: string[] = [];
    const cells: { [id: string]: unknown } = {};
    for (const cell of model.cells) {
      order.push(cell.id);
      if (this.dirty.has(cell.id)) {
        cells[cell.id] = cell.toJSON();
      }
    }
    this.dirty.clear();
    this.comm.send({ op: 'cells', order, cells, client: CLIENT } as Json);
  }
}

function text(value: unknown, name: string): string {
  if (typeof value !== 'string') {
    throw new RequestError(`${name} must be a string`);
  }
  return value;
}

/** A plain JSON object; `trusted` stays the person's to set (it decides how outputs render). */
function metadataOf(value: unknown): { [key: string]: any } {
  if (value === undefined || value === null) {
    return {};
  }
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new RequestError('metadata must be an object');
  }
  if ('trusted' in value) {
    throw new RequestError("metadata may not set 'trusted'");
  }
  return value as { [key: string]: any };
}

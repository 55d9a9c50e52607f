/**
 * Open nbchat's side panel for a notebook's kernel, without touching the notebook.
 *
 * The panel is a widget the kernel creates, so opening it means running one
 * call in that kernel: silently (no execution count, no output in any cell)
 * and without history (`In` stays as it was). A kernel that cannot run it
 * (not Python, no nbchat in its environment, busy with a long cell) gets one
 * line in a notification that says why and what to do.
 */
import { Notification } from '@jupyterlab/apputils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

/** The module every call into a kernel goes through (nbchat.base._across.KERNEL_API). */
export const KERNEL_API = 'nbchat.jupyter.kernel_api';

/** What the kernel runs; `path` is a JSON string literal, which Python reads as the same string. */
export function openCall(path: string): string {
  return `__import__("${KERNEL_API}", fromlist=["_"]).open_from_lab(${JSON.stringify(path)})`;
}

/** Why a kernel cannot open the panel, as one line for a notification; null if it opened it. */
export type Outcome = { ok: true } | { ok: false; message: string; kind: 'python' | 'other' };

/** Ask the notebook's kernel to open (or bring back) its side panel. */
export async function openChat(panel: NotebookPanel): Promise<Outcome> {
  const context = panel.sessionContext;
  const name = panel.context.localPath.split('/').pop() || panel.context.path;
  await context.ready;
  const kernel = context.session?.kernel;
  if (!kernel) {
    return {
      ok: false,
      kind: 'python',
      message: `nbchat: ${name} has no kernel; choose a Python kernel (Kernel › Change Kernel…) and open the chat again.`
    };
  }
  const language = await kernelLanguage(kernel);
  if (language !== 'python') {
    const display = context.kernelDisplayName;
    return {
      ok: false,
      kind: 'python',
      message: `nbchat needs a Python kernel; ${name} runs ${display} (${language || 'no language'}). Choose a Python kernel with nbchat (Kernel › Change Kernel…).`
    };
  }
  if (kernel.status === 'busy') {
    Notification.info(`nbchat: ${name}'s kernel is busy; the chat opens when the running cell ends.`, {
      autoClose: 5000
    });
  }
  const future = kernel.requestExecute(
    {
      code: openCall(panel.context.path),
      silent: true,
      store_history: false,
      allow_stdin: false,
      // An error here must not cancel the cells the person queued behind it.
      stop_on_error: false
    },
    true
  );
  const reply = await future.done;
  return outcome(reply, name, context.kernelDisplayName);
}

async function kernelLanguage(kernel: Kernel.IKernelConnection): Promise<string> {
  try {
    const info = await kernel.info;
    if (info.language_info?.name) {
      return info.language_info.name.toLowerCase();
    }
  } catch {
    // no kernel_info: fall back on the kernelspec
  }
  const spec = await kernel.spec;
  return (spec?.language ?? '').toLowerCase();
}

function outcome(reply: KernelMessage.IExecuteReplyMsg, name: string, display: string): Outcome {
  const content = reply.content;
  if (content.status === 'ok') {
    return { ok: true };
  }
  if (content.status === 'error') {
    if (content.ename === 'ModuleNotFoundError' && /'nbchat(\.|')/.test(content.evalue)) {
      return {
        ok: false,
        kind: 'python',
        message: `nbchat is not installed for the kernel ${display}: run %pip install nbchat in a cell of ${name}, or choose a kernel that has it.`
      };
    }
    return { ok: false, kind: 'other', message: `nbchat: ${content.evalue || content.ename}` };
  }
  return { ok: false, kind: 'other', message: `nbchat: ${name}'s kernel did not open the chat (${content.status}).` };
}

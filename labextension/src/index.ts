/**
 * nbchat in JupyterLab: open the chat panel for the active notebook's kernel
 * (a left sidebar icon, a launcher tile, a palette command, a shortcut), and the
 * comm target through which that kernel may change its notebook, code
 * suggestions as ghost text, the Connect dialog (`connect.ts`), and Fix and
 * Explain under a cell's error (`errors.ts`), and a question asked in a cell
 * (`ask.ts`, Ctrl/⌘+I in its editor).
 */
import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';
import { ICompletionProviderManager } from '@jupyterlab/completer';
import { IConsoleTracker } from '@jupyterlab/console';
import { ILauncher } from '@jupyterlab/launcher';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { ASK_COMMAND, catchAskKey, openAskBox } from './ask';
import { CommTargets } from './bridge';
import { registerSuggestions } from './completion';
import { CONNECT_EVENT, plugIcon, showConnect } from './connect';
import { watchErrors } from './errors';
import { openChat } from './open';

const COMMAND = 'nbchat:open-chat';
const CONNECT_COMMAND = 'nbchat:connect';
const LABEL = 'nbchat: Open chat for this notebook';
const SIDEBAR_ID = 'nbchat-sidebar';

const chatIcon = new LabIcon({
  name: 'nbchat:chat',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">' +
    '<path class="jp-icon3" fill="#616161" d="M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H9.5L5 ' +
    '21.5V18H4a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2zm3 6.5a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zm5 ' +
    '0a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zm5 0a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3z"/></svg>'
});

/**
 * The left sidebar's nbchat tab: a button, not a place. Showing it opens the chat
 * and gives the left area back to what it showed before (or collapses it).
 */
class SidebarButton extends Widget {
  private before: Widget | null = null;

  constructor(
    private readonly shell: ILabShell,
    private readonly open: () => void,
    private readonly isRestored: () => boolean
  ) {
    super();
    this.id = SIDEBAR_ID;
    this.title.icon = chatIcon;
    this.title.caption = 'Open nbchat for this notebook (the chat opens on the right)';
    this.addClass('nbchat-sidebar');
    this.node.textContent = 'Opening the chat…';
    shell.layoutModified.connect(() => this.remember());
  }

  private remember(): void {
    if (!this.isVisible) {
      this.before = Array.from(this.shell.widgets('left')).find(w => w !== this && w.isVisible) ?? null;
    }
  }

  protected onAfterShow(): void {
    const before = this.before;
    requestAnimationFrame(() => {
      if (before && !before.isDisposed) {
        this.shell.activateById(before.id);
      } else {
        this.shell.collapseLeft();
      }
    });
    if (this.isRestored()) {
      this.open(); // not when the saved layout shows this tab as the page loads
    }
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'nbchat:plugin',
  description: "Open nbchat's chat panel for the active notebook's kernel; let that kernel edit its notebook.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILabShell, ICommandPalette, ILauncher, IConsoleTracker],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    labShell: ILabShell | null,
    palette: ICommandPalette | null,
    launcher: ILauncher | null,
    consoles: IConsoleTracker | null
  ) => {
    const contents = app.serviceManager.contents;
    const targets = new CommTargets(notebooks, path => contents.localPath(path));
    notebooks.widgetAdded.connect((_, panel) => {
      targets.watch(panel.sessionContext);
      watchErrors(panel);
    });
    notebooks.forEach(panel => {
      targets.watch(panel.sessionContext);
      watchErrors(panel);
    });
    if (consoles) {
      consoles.widgetAdded.connect((_, panel) => targets.watch(panel.sessionContext));
      consoles.forEach(panel => targets.watch(panel.sessionContext));
    }

    app.commands.addCommand(COMMAND, {
      label: args => (args.isLauncher ? 'nbchat' : LABEL),
      caption: "Open nbchat's chat panel for the active notebook's kernel, in the right side area",
      icon: args => (args.isPalette ? undefined : chatIcon),
      execute: async args => {
        let panel: NotebookPanel | null = notebooks.currentWidget;
        if (!panel && args.isLauncher) {
          panel = await app.commands.execute('notebook:create-new', {
            cwd: typeof args.cwd === 'string' ? args.cwd : '',
            kernelName: pythonKernel(app) ?? null
          });
        }
        if (!panel) {
          Notification.warning('nbchat: open a notebook first; the chat talks to a notebook\u2019s kernel.', {
            autoClose: 8000
          });
          return;
        }
        if (args.isLauncher && labShell) {
          labShell.activateById(panel.id); // the launcher stays; the notebook the chat is for comes forward
        }
        await report(app, panel);
      }
    });

    app.commands.addCommand(ASK_COMMAND, {
      label: 'nbchat: Ask in this cell\u2026',
      caption: 'Ask about the active cell (or its selected lines); the answer is a proposal on the cell',
      isEnabled: () => !!notebooks.currentWidget?.content.activeCell,
      execute: () => {
        const panel = notebooks.currentWidget;
        if (panel) {
          openAskBox(panel);
        }
      }
    });
    app.contextMenu.addItem({ command: ASK_COMMAND, selector: '.jp-Notebook .jp-Cell', rank: 40 });
    catchAskKey(app.commands);

    app.commands.addCommand(CONNECT_COMMAND, {
      label: args => (args.isLauncher ? 'Connect a model' : 'nbchat: Connect a model\u2026'),
      caption: 'Connect a model endpoint once: its key is kept by the Jupyter server, for every new kernel',
      icon: args => (args.isPalette ? undefined : plugIcon),
      execute: () => showConnect(app.serviceManager.serverSettings)
    });
    // The chat panel's plug button asks for the dialog with a cancelable event on document.
    document.addEventListener(CONNECT_EVENT, event => {
      event.preventDefault();
      void app.commands.execute(CONNECT_COMMAND);
    });

    palette?.addItem({ command: COMMAND, category: 'nbchat' });
    palette?.addItem({ command: CONNECT_COMMAND, category: 'nbchat' });
    palette?.addItem({ command: ASK_COMMAND, category: 'nbchat' });
    launcher?.add({ command: COMMAND, category: 'Other', rank: 50, args: { isLauncher: true } });
    launcher?.add({ command: CONNECT_COMMAND, category: 'Other', rank: 51, args: { isLauncher: true } });
    if (labShell) {
      let restored = false;
      void app.restored.then(() => (restored = true));
      const button = new SidebarButton(labShell, () => void app.commands.execute(COMMAND), () => restored);
      labShell.add(button, 'left', { rank: 900, type: 'nbchat' });
    }
  }
};

/** The default kernelspec if it is Python's, else the first Python one. */
function pythonKernel(app: JupyterFrontEnd): string | undefined {
  const specs = app.serviceManager.kernelspecs.specs;
  if (!specs) {
    return undefined;
  }
  const isPython = (name: string) => specs.kernelspecs[name]?.language?.toLowerCase() === 'python';
  return isPython(specs.default) ? specs.default : Object.keys(specs.kernelspecs).sort().find(isPython);
}

async function report(app: JupyterFrontEnd, panel: NotebookPanel): Promise<void> {
  let result;
  try {
    result = await openChat(panel);
  } catch (error) {
    result = { ok: false as const, kind: 'other' as const, message: `nbchat: the chat did not open: ${error}` };
  }
  if (result.ok) {
    return;
  }
  const actions =
    result.kind === 'python'
      ? [
          {
            label: 'Change kernel…',
            callback: () => {
              app.shell.activateById(panel.id);
              void app.commands.execute('notebook:change-kernel');
            }
          }
        ]
      : [];
  Notification.warning(result.message, { autoClose: false, actions });
}

/**
 * Code suggestions as ghost text (`completion.ts`), set under Settings › Inline
 * Completer › nbchat provider. Registered before the app is restored: the inline
 * completer reads the providers' settings schemas then.
 */
const suggestions: JupyterFrontEndPlugin<void> = {
  id: 'nbchat:suggestions',
  description: "Code suggestions from the server's model endpoint, as inline completions (ghost text).",
  autoStart: true,
  requires: [ICompletionProviderManager],
  activate: (app: JupyterFrontEnd, manager: ICompletionProviderManager) => {
    registerSuggestions(manager, app.serviceManager.serverSettings);
  }
};

export default [plugin, suggestions];

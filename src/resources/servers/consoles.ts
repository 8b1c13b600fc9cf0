import type { Ctx } from '../../core/context.js';
import type { Obj } from '../../core/input.js';
import type { ActionDecl } from '../../core/resource.js';
import { ACTION_RESULT } from '../../core/contract.js';
import type { Tunnel } from '../../core/sim.js';
import { accepted, lockServer, logServer, requireState } from './power.js';

/**
 * VNC and serial-console tunnels of a running server: the hypervisor opens a new port on every open.
 * VNC opens and closes are audited (`open_vnc`, `close_vnc`); the console has no audit action defined.
 */
const AUDITED: Record<Tunnel, boolean> = { vnc: true, console: false };
const URL_KEY: Record<Tunnel, string> = { vnc: 'vnc_url', console: 'console_url' };
const VERB: Record<Tunnel, string> = { vnc: 'open VNC for', console: 'open console for' };

async function open(ctx: Ctx, uuid: string, which: Tunnel): Promise<Obj> {
  const url = await ctx.store.transaction(async (tx) => {
    const row = await lockServer(tx, ctx, uuid);
    requireState(row.body, VERB[which], ['running'], "['started', 'running_legacy']");
    const address = await ctx.sim.hypervisor.openTunnel(tx, uuid, which);
    if (AUDITED[which]) await logServer(tx, ctx, row, `open_${which}`, ctx.caller.uuid);
    return address;
  });
  return accepted(`open_${which}`, uuid, { [URL_KEY[which]]: url });
}

async function close(ctx: Ctx, uuid: string, which: Tunnel): Promise<Obj> {
  await ctx.store.transaction(async (tx) => {
    const row = await lockServer(tx, ctx, uuid);
    await ctx.sim.hypervisor.closeTunnel(tx, uuid, which);
    if (AUDITED[which]) await logServer(tx, ctx, row, `close_${which}`, ctx.caller.uuid);
  });
  return accepted(`close_${which}`, uuid);
}

/** The action answer with the tunnel's URL. */
const opened = (which: Tunnel) => ({ ...ACTION_RESULT, required: [...(ACTION_RESULT.required as string[]), URL_KEY[which]] });

export const consoleActions: Record<string, ActionDecl> = {
  open_vnc: { permission: 'OPEN_VNC', async: true, answer: { schema: opened('vnc') }, run: (ctx, uuid) => open(ctx, uuid, 'vnc') },
  close_vnc: { permission: 'OPEN_VNC', async: true, answer: { schema: ACTION_RESULT }, run: (ctx, uuid) => close(ctx, uuid, 'vnc') },
  open_console: { permission: 'OPEN_VNC', async: true, answer: { schema: opened('console') }, run: (ctx, uuid) => open(ctx, uuid, 'console') },
  close_console: { permission: 'OPEN_VNC', async: true, answer: { schema: ACTION_RESULT }, run: (ctx, uuid) => close(ctx, uuid, 'console') },
};
